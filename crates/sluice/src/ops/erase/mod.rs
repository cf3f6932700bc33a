//! `fn.erase` (cpu and gpu): regions of each sample are overwritten with a fill value, the
//! rest is the input. DALI 2.4's operator (`dali/operators/generic/erase/`, checked against
//! DALI 2.4's cpu operator by `tests/test_erase.py`, bit for bit):
//!
//! - `anchor` and `shape` hold one value per axis for each region, regions one after the
//!   other (`k * naxes` values: k regions). The axes are `axis_names` looked up in the
//!   layout, else `axes`, else every dimension of the layout but `C` (so a sequence `FHWC`
//!   takes F, H and W, whatever the documented default "HW" says). Dimensions no axis names
//!   are whole in every region. `anchor` not given (or empty) is zeros.
//! - Region bounds are computed in f32, as DALI does: a normalized value is multiplied by
//!   the extent (itself converted to f32), a centered anchor moves back by half the shape,
//!   and `begin = (int64)anchor`, `end = (int64)(anchor + shape)` truncate toward zero (NaN
//!   and values past the int64 range give its minimum, as x86 does). The region is then
//!   clamped to the sample; an empty one is dropped ([`axis_bounds`], [`clamp`]).
//! - `fill_value`: one value, or one per channel (the layout's `C`; the fill of an element is
//!   the value of its channel index, also when the region covers only some channels), or an
//!   empty list (zero). Values are converted to the element type as C++'s `static_cast`
//!   from float runs on x86, DALI's cpu conversion ([`fill_word`]: 300 as UINT8 is 44).
//! - Regions overlap freely (they all take the same values). Types: UINT8, INT8, UINT16,
//!   INT16, UINT32, INT32, UINT64, INT64, FLOAT, FLOAT16; 1 to 5 dimensions; any layout,
//!   sequences included (`F` is a dimension like the others).
//!
//! `anchor`, `shape` and `fill_value` may be argument inputs (one list per sample, so the
//! number of regions may differ per sample); a `fill_value` input holds as many values in
//! every sample. Errors name the operator, the argument and the sample, and the pipeline
//! goes on (DALI's pipeline is unusable after any error).
//!
//! Both backends share [`Erase::plan_batch`]: every sample's regions, clamped, in a geometry
//! where each dimension that all of the sample's regions cover whole is merged into the one
//! before it ([`merge`]: HWC erased on H and W is H x (W*C), one run per row instead of one
//! per pixel), and the fill values already converted to element bits. Values are never
//! computed on, only moved, so the kernels are generic over the element size, not the type
//! (`tensor::channel` is for kernels that compute). The cpu copies the sample and fills each
//! region's runs; the gpu (`gpu.rs`, `erase.cu`, one launch per batch) picks fill or input
//! per element. Both give the same bytes.
//!
//! Where Sluice departs from DALI 2.4:
//! - An input without a layout needs `axes` (or `axis_names`, which then fails to find its
//!   letters); empty `axes` / `axis_names`, or a layout of `C` alone, are errors. DALI divides
//!   by zero there and the process dies.
//! - `axes` outside the input's dimensions are an error (DALI writes past its arrays);
//!   negative axes count from the end, as in `fn.slice`.
//! - A missing or empty `anchor` is zeros also when `shape` is an argument input (DALI fills
//!   zeros for a constant `shape` only, and otherwise fails on the length mismatch).
//! - Argument inputs of any numeric type are read as float (DALI wants FLOAT); `anchor` and
//!   `shape` inputs of any shape are read flattened, as in DALI.
//! - A region bound past the int64 range (an infinite `shape`, say) leaves the region empty;
//!   DALI overflows and crashes or writes out of bounds.
//! - The gpu backend equals the cpu: DALI's gpu operator converts `fill_value` with
//!   saturation and rounding (300 as UINT8 is 255 there), takes no FLOAT16 and wants the
//!   channel dimension first or last; Sluice's gpu takes what its cpu takes.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::f64_to_f16;
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

const DOC: &str = "Erases one or more regions from the input tensors: the elements inside a region take `fill_value`, the others keep the input's.

A region is an `anchor` (its first corner) and a `shape` (its extent) along the axes given by `axis_names` (letters of the layout) or `axes` (dimension indices); without either, every dimension of the layout but `C` (channels). Dimensions not listed are whole. Several regions are given one after the other: with axis_names=\"HW\", anchor=(y0, x0, y1, x1) and shape=(h0, w0, h1, w1) are two regions.

Coordinates are absolute, or fractions of the extent with `normalized_anchor` / `normalized_shape` (`normalized` sets both); with `centered_anchor` the anchor is the region's center. Bounds are truncated toward zero and regions are clipped to the sample.

Example: anchor=(10, 20), shape=(190, 200), axis_names=\"HW\" on a 300x300x3 HWC image fills output[y, x, c] for 10 <= y < 200 and 20 <= x < 220. With fill_value=(118, 185, 0), each channel takes its own value.

This operator allows sequence inputs and supports volumetric data.";

/// `fn.erase`.
pub static ERASE: OpDef = OpDef {
    schema: OpSchema {
        name: "Erase",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg(
                "anchor",
                T::FloatList,
                D::FloatList(&[]),
                "Coordinates of the starting point of each erase region, one per axis of `axis_names` / `axes`, regions one after the other. Not given: zeros.",
            ),
            tensor_arg(
                "shape",
                T::FloatList,
                D::FloatList(&[]),
                "Extent of each erase region, one value per axis of `axis_names` / `axes`, regions one after the other (as many values as `anchor`).",
            ),
            arg(
                "axes",
                T::IntList,
                D::Optional,
                "Order of dimensions used for `anchor` and `shape`, as dimension indices (axes=(1, 0): the values are for axes 1 and 0, in that order); negative indices count from the end. Used when `axis_names` is not given. DALI documents [1, 0] as its default; without `axes` and `axis_names`, every dimension of the layout but `C` is used.",
            ),
            arg(
                "axis_names",
                T::Str,
                D::Optional,
                "Order of dimensions used for `anchor` and `shape`, as layout letters (\"HW\": height, then width). Has priority over `axes`. DALI documents \"HW\" as its default; without `axes` and `axis_names`, every dimension of the layout but `C` is used.",
            ),
            tensor_arg(
                "fill_value",
                T::FloatList,
                D::FloatList(&[0.0]),
                "Value to fill the erased regions with: one value, or one per channel (the input layout must then have a `C` dimension with as many channels). Converted to the input type as C++'s static_cast does.",
            ),
            arg(
                "normalized_anchor",
                T::Bool,
                D::Optional,
                "The anchor is a fraction of the extent (range [0.0, 1.0]) instead of absolute coordinates. Default False. Mutually exclusive with `normalized`.",
            ),
            arg(
                "normalized_shape",
                T::Bool,
                D::Optional,
                "The shape is a fraction of the extent (range [0.0, 1.0]) instead of absolute coordinates. Default False. Mutually exclusive with `normalized`.",
            ),
            arg(
                "normalized",
                T::Bool,
                D::Optional,
                "Anchor and shape are both fractions of the extent (range [0.0, 1.0]). Default False. Mutually exclusive with `normalized_anchor` and `normalized_shape`.",
            ),
            arg("centered_anchor", T::Bool, D::Bool(false), "The anchor is the center of the region instead of its first corner."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Erase::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::EraseGpu::new(Erase::new(ctx)?)))),
};

/// The element types DALI's cpu operator takes.
const TYPES: [DType; 10] = [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64, DType::F32, DType::F16];

/// The most dimensions a sample may have (DALI's limit; sizes the gpu descriptors).
pub(crate) const MAX_DIMS: usize = 5;

/// How `anchor` and `shape` values become coordinates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Coords {
    normalized_anchor: bool,
    normalized_shape: bool,
    centered: bool,
}

/// Which dimensions `anchor` and `shape` describe, as given.
#[derive(Debug, Clone)]
enum AxesArg {
    Names(String),
    Indices(Vec<i64>),
    /// Neither given: every dimension of the layout but `C` (DALI's rule).
    AllButChannels,
}

/// One region of a sample: `[lo[d], hi[d])` per dimension, non-empty, inside the sample.
/// Entries past the sample's dimensions are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub lo: [usize; MAX_DIMS],
    pub hi: [usize; MAX_DIMS],
}

/// A sample's dimensions as the kernels walk them (see [`merge`]): `ndim` extents, outermost
/// first. Flat element indices are the sample's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub ndim: usize,
    pub ext: [usize; MAX_DIMS],
}

/// One sample's plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplePlan {
    pub geometry: Geometry,
    /// Its regions in [`BatchPlan::regions`], in the merged geometry.
    pub regions: (usize, usize),
    /// Index of its first fill word in [`BatchPlan::fills`] (`BatchPlan::nfill` words).
    pub fill: usize,
    /// More than 1: element `e` takes fill word `(e / cstride) % channels` (its channel
    /// index); 1: every element takes the first word.
    pub channels: usize,
    pub cstride: usize,
}

/// The current batch's plan (kept between batches to reuse the allocations).
#[derive(Debug, Default)]
pub(crate) struct BatchPlan {
    pub samples: Vec<SamplePlan>,
    pub regions: Vec<Region>,
    /// Fill values as element bits in the low bytes of a word (little-endian), `nfill` per
    /// sample for a `fill_value` input, `nfill` shared by all samples for a constant.
    pub fills: Vec<u64>,
    pub nfill: usize,
}

/// The operator, both backends' planning and the cpu backend.
pub struct Erase {
    ctx: OpContext,
    coords: Coords,
    axes: AxesArg,
    plan: BatchPlan,
    /// Scratch: the sample's anchor and shape values, its regions before merging.
    anchor: Vec<f32>,
    shape: Vec<f32>,
    sample_regions: Vec<Region>,
}

impl Erase {
    fn new(ctx: &OpContext) -> Result<Erase> {
        let op = &ctx.display_name;
        let given = |name: &str| ctx.args.has(name);
        let flag = |name: &str| given(name) && ctx.args.bool(name);
        let mut coords = Coords { normalized_anchor: flag("normalized_anchor"), normalized_shape: flag("normalized_shape"), centered: ctx.args.bool("centered_anchor") };
        // DALI refuses `normalized` next to either of the others, whatever the values.
        if given("normalized") {
            if given("normalized_anchor") || given("normalized_shape") {
                return Err(Error::arg(op, "normalized", "`normalized` argument is incompatible with providing a separate value for `normalized_anchor` and `normalized_shape`"));
            }
            coords.normalized_anchor = ctx.args.bool("normalized");
            coords.normalized_shape = coords.normalized_anchor;
        }
        let axes = if let Some(names) = ctx.args.opt_str("axis_names") {
            AxesArg::Names(names.to_string())
        } else if given("axes") {
            AxesArg::Indices(ctx.args.ints("axes").to_vec())
        } else {
            AxesArg::AllButChannels
        };
        Ok(Erase { ctx: ctx.clone(), coords, axes, plan: BatchPlan::default(), anchor: Vec::new(), shape: Vec::new(), sample_regions: Vec::new() })
    }

    /// Checks the batch, fills `self.plan` and returns the output's metadata (the input's).
    /// Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<BatchMeta> {
        let op = self.ctx.display_name.clone();
        let op = op.as_str();
        let n = input.len();
        self.plan.samples.clear();
        self.plan.regions.clear();
        self.plan.fills.clear();
        self.plan.nfill = 1;
        if n == 0 {
            return Ok(input.clone());
        }
        let at = |i: usize| self.ctx.at(ws.iteration, i, input.source_info(i));
        let dtype = input.dtype();
        if !TYPES.contains(&dtype) {
            let supported: Vec<&str> = TYPES.iter().map(|d| d.dali_name()).collect();
            return Err(Error::data(at(0), format!("unsupported input type {dtype}; supported: {}", supported.join(", "))));
        }
        let ndim = input.ndim();
        if ndim == 0 || ndim > MAX_DIMS {
            return Err(Error::data(at(0), format!("unsupported number of dimensions {ndim}; supported: 1 to {MAX_DIMS}")));
        }
        let layout = input.layout().clone();
        let axes = self.resolve_axes(&layout, ndim)?;
        let channel_dim = layout.find('C');
        let per_sample_fill = self.read_fills(ws, n, dtype)?;
        let nfill = self.plan.nfill;
        if nfill > 1 && channel_dim.is_none() {
            let got = if layout.is_empty() { "the input has no layout".to_string() } else { format!("the input layout is \"{layout}\"") };
            return Err(Error::arg(op, "fill_value", format!("{nfill} values: a multi-channel fill value needs a 'C' dimension in the input layout; {got}")));
        }
        let naxes = axes.len();
        for i in 0..n {
            let shape = input.shape(i);
            let mut anchor = std::mem::take(&mut self.anchor);
            let mut extent = std::mem::take(&mut self.shape);
            let read = self.read_list(ws, "anchor", i, n, &mut anchor).and_then(|_| self.read_list(ws, "shape", i, n, &mut extent));
            // An empty anchor is the origin of every region (DALI's rule for constants).
            if anchor.is_empty() {
                anchor.resize(extent.len(), 0.0);
            }
            let checked = read.and_then(|_| {
                if anchor.len() != extent.len() {
                    return Err(Error::arg(op, "shape", format!(
                        "sample {i}: `anchor` has {} values and `shape` {}; they must have as many (one per axis for each region)",
                        anchor.len(),
                        extent.len()
                    )));
                }
                if extent.len() % naxes != 0 {
                    return Err(Error::arg(op, "shape", format!(
                        "sample {i}: `anchor` and `shape` have {} values, not a multiple of the {naxes} axes {axes:?} (one value per axis for each region)",
                        extent.len()
                    )));
                }
                Ok(())
            });
            if checked.is_ok() {
                self.sample_regions.clear();
                sample_regions(shape, &axes, &anchor, &extent, self.coords, &mut self.sample_regions);
            }
            self.anchor = anchor;
            self.shape = extent;
            checked?;
            // DALI checks the channel count when it fills a region, so a sample whose
            // regions all fall outside takes any fill.
            let (channels, cstride) = match channel_dim {
                Some(c) if nfill > 1 => {
                    if !self.sample_regions.is_empty() && shape[c] != nfill {
                        return Err(Error::arg(op, "fill_value", format!(
                            "sample {i}: {nfill} values, but the sample has {} channels (shape {shape:?}); a multi-channel fill value needs one value per channel",
                            shape[c]
                        )));
                    }
                    (nfill, shape[c + 1..].iter().product::<usize>().max(1))
                }
                _ => (1, 1),
            };
            let first = self.plan.regions.len();
            let geometry = merge(shape, &self.sample_regions, &mut self.plan.regions);
            let fill = if per_sample_fill { i * nfill } else { 0 };
            self.plan.samples.push(SamplePlan { geometry, regions: (first, self.plan.regions.len()), fill, channels, cstride });
        }
        Ok(input.clone())
    }

    /// The dimensions `anchor` and `shape` describe, in their order.
    fn resolve_axes(&self, layout: &Layout, ndim: usize) -> Result<Vec<usize>> {
        let op = &self.ctx.display_name;
        let (axes, name): (Vec<usize>, &str) = match &self.axes {
            AxesArg::Names(names) => (
                names
                    .chars()
                    .map(|c| {
                        layout.find(c).ok_or_else(|| {
                            let got = if layout.is_empty() { "the input has no layout".to_string() } else { format!("the input layout is \"{layout}\"") };
                            Error::arg(op, "axis_names", format!("axis '{c}' is not present in the input layout; {got}"))
                        })
                    })
                    .collect::<Result<_>>()?,
                "axis_names",
            ),
            AxesArg::Indices(list) => (
                list.iter()
                    .map(|&a| {
                        let r = if a < 0 { a + ndim as i64 } else { a };
                        if (0..ndim as i64).contains(&r) {
                            Ok(r as usize)
                        } else {
                            Err(Error::arg(op, "axes", format!("axis {a} is out of range for {ndim}-D input")))
                        }
                    })
                    .collect::<Result<_>>()?,
                "axes",
            ),
            AxesArg::AllButChannels => {
                if layout.is_empty() {
                    return Err(Error::arg(op, "axes", format!(
                        "the {ndim}-D input has no layout: give `axes` (dimension indices), or a layout and `axis_names`, to say which dimensions `anchor` and `shape` describe"
                    )));
                }
                (layout.as_str().chars().enumerate().filter(|&(_, c)| c != 'C').map(|(d, _)| d).collect(), "axes")
            }
        };
        if axes.is_empty() {
            return Err(Error::arg(op, name, format!(
                "no axis to erase along (input layout \"{layout}\"); `anchor` and `shape` need at least one axis, given by `axes` or `axis_names`"
            )));
        }
        Ok(axes)
    }

    /// Sample `i`'s values of list argument `name` as the f32 DALI reads: the constant, or the
    /// sample's argument input flattened. Empty when not given.
    fn read_list(&self, ws: &Workspace<'_>, name: &'static str, i: usize, n: usize, out: &mut Vec<f32>) -> Result<()> {
        out.clear();
        if let Some(&batch) = ws.arg_inputs.get(name) {
            check_samples(&self.ctx.display_name, name, batch, n)?;
            out.extend((0..batch.numel(i)).map(|k| element_as_f64(batch, i, k) as f32));
        } else if let Some(v) = self.ctx.args.value(name) {
            constant_values(v, out);
        }
        Ok(())
    }

    /// Reads `fill_value` into `self.plan.fills` as element bits, sets `self.plan.nfill` (at
    /// least 1: an empty list is one zero, DALI's default fill) and tells whether the values
    /// are per sample.
    fn read_fills(&mut self, ws: &Workspace<'_>, n: usize, dtype: DType) -> Result<bool> {
        let op = &self.ctx.display_name;
        let fills = &mut self.plan.fills;
        let per_sample = match ws.arg_inputs.get("fill_value") {
            Some(&batch) => {
                check_samples(op, "fill_value", batch, n)?;
                if batch.ndim() > 1 {
                    return Err(Error::arg(op, "fill_value", format!(
                        "argument input must be a scalar or a 1-D list per sample; sample 0 has shape {:?}",
                        batch.shape(0)
                    )));
                }
                let count = batch.numel(0);
                if let Some(i) = (1..n).find(|&i| batch.numel(i) != count) {
                    return Err(Error::arg(op, "fill_value", format!(
                        "argument input must hold as many values in every sample; sample 0 has {count}, sample {i} has {}",
                        batch.numel(i)
                    )));
                }
                self.plan.nfill = count.max(1);
                for i in 0..n {
                    fills.extend((0..count).map(|k| fill_word(dtype, element_as_f64(batch, i, k) as f32)));
                    if count == 0 {
                        fills.push(0);
                    }
                }
                true
            }
            None => {
                let mut values = std::mem::take(&mut self.anchor);
                values.clear();
                if let Some(v) = self.ctx.args.value("fill_value") {
                    constant_values(v, &mut values);
                }
                self.plan.nfill = values.len().max(1);
                fills.extend(values.iter().map(|&v| fill_word(dtype, v)));
                if values.is_empty() {
                    fills.push(0);
                }
                self.anchor = values;
                false
            }
        };
        Ok(per_sample)
    }
}

/// An argument input must cover the batch.
fn check_samples(op: &str, name: &str, batch: &TensorList, n: usize) -> Result<()> {
    if batch.len() != n {
        return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", batch.len())));
    }
    Ok(())
}

/// A constant list argument's values as f32 (DALI stores them as float).
fn constant_values(v: &ArgValue, out: &mut Vec<f32>) {
    match v {
        ArgValue::FloatList(l) => out.extend(l.iter().map(|&x| x as f32)),
        ArgValue::IntList(l) => out.extend(l.iter().map(|&x| x as f32)),
        ArgValue::Float(x) => out.push(*x as f32),
        ArgValue::Int(x) => out.push(*x as f32),
        _ => {}
    }
}

/// C++'s `static_cast<T>(float)` compiled for x86-64, which is how DALI's cpu operator
/// converts `fill_value`, as the bits of one element of `dtype` in the low bytes of a word.
/// Integers go through CVTTSS2SI: truncation toward zero, and NaN or a value outside the
/// register's range gives its minimum ("integer indefinite"), whose low bits are then kept.
/// The compiler uses the 32-bit form for 8-, 16- and 32-bit signed targets and the 64-bit
/// form for UINT32 and the 64-bit types, and takes UINT64 values from 2^63 up as
/// `v - 2^63` with the top bit set. Checked against DALI 2.4 (tests/test_erase.py):
/// 300 -> UINT8 44, 2^31 + 256 -> UINT16 0, 5e9 -> UINT32 705032704, 5e9 -> INT32 -2^31,
/// NaN -> UINT64 2^63, 1e20 -> UINT64 0. `tensor::element::store_static_cast` saturates
/// 64-bit conversions and always truncates through 64 bits, so it differs on those values.
/// FLOAT16 rounds to nearest, ties away from zero (DALI's host half type, `f64_to_f16`).
pub(crate) fn fill_word(dtype: DType, v: f32) -> u64 {
    const TWO_31: f32 = 2_147_483_648.0;
    const TWO_63: f32 = 9_223_372_036_854_775_808.0;
    let cvt32 = |v: f32| if (-TWO_31..TWO_31).contains(&v) { v as i32 } else { i32::MIN };
    let cvt64 = |v: f32| if (-TWO_63..TWO_63).contains(&v) { v as i64 } else { i64::MIN };
    match dtype {
        DType::U8 | DType::I8 => cvt32(v) as u8 as u64,
        DType::U16 | DType::I16 => cvt32(v) as u16 as u64,
        DType::I32 => cvt32(v) as u32 as u64,
        DType::U32 => cvt64(v) as u32 as u64,
        DType::I64 => cvt64(v) as u64,
        // NaN fails the comparison and takes the first branch, as the compiled code does.
        DType::U64 => {
            if v >= TWO_63 {
                (cvt64(v - TWO_63) as u64) ^ (1 << 63)
            } else {
                cvt64(v) as u64
            }
        }
        DType::F32 => v.to_bits() as u64,
        DType::F16 => f64_to_f16(v as f64) as u64,
        _ => unreachable!("types checked by plan"),
    }
}

/// `static_cast<int64_t>(float)` on x86: truncation toward zero; NaN and values outside the
/// int64 range give its minimum.
fn trunc_i64(v: f32) -> i64 {
    const TWO_63: f32 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&v) {
        v as i64
    } else {
        i64::MIN
    }
}

/// Where DALI puts one region along one axis of extent `extent`, before clamping:
/// `(begin, end)`. Everything is f32 as in DALI (the extent converted to float, one rounding
/// per product and sum, no fused multiply-add: DALI's build does not contract them either),
/// and both ends are truncated separately, so the length may differ from `(int)shape`.
fn axis_bounds(anchor: f32, shape: f32, extent: usize, c: Coords) -> (i64, i64) {
    let e = extent as f32;
    let mut a = if c.normalized_anchor { anchor * e } else { anchor };
    let s = if c.normalized_shape { shape * e } else { shape };
    if c.centered {
        a -= s / 2.0;
    }
    (trunc_i64(a), trunc_i64(a + s))
}

/// DALI's clamping of `[begin, end)` to `[0, extent)` (a negative begin shortens the region,
/// an end past the extent is cut), `None` when nothing is left. DALI computes it with int64
/// sums that overflow for ends at the int64 limits; these comparisons cannot.
fn clamp(begin: i64, end: i64, extent: usize) -> Option<(usize, usize)> {
    let lo = begin.max(0);
    let hi = end.min(extent as i64);
    (lo < hi).then_some((lo as usize, hi as usize))
}

/// Appends the non-empty regions of a sample of shape `shape` to `out` (in its own
/// dimensions). `anchor` and `extent` hold `k * axes.len()` values: k regions.
fn sample_regions(shape: &[usize], axes: &[usize], anchor: &[f32], extent: &[f32], coords: Coords, out: &mut Vec<Region>) {
    let nd = shape.len();
    for (ra, rs) in anchor.chunks_exact(axes.len()).zip(extent.chunks_exact(axes.len())) {
        let mut bounds = [(0i64, 0i64); MAX_DIMS];
        for (b, &e) in bounds.iter_mut().zip(shape) {
            *b = (0, e as i64);
        }
        // A repeated axis keeps its last values, as DALI overwrites them.
        for ((&ax, &a), &s) in axes.iter().zip(ra).zip(rs) {
            bounds[ax] = axis_bounds(a, s, shape[ax], coords);
        }
        let mut r = Region { lo: [0; MAX_DIMS], hi: [0; MAX_DIMS] };
        let inside = (0..nd).all(|d| match clamp(bounds[d].0, bounds[d].1, shape[d]) {
            Some((lo, hi)) => {
                (r.lo[d], r.hi[d]) = (lo, hi);
                true
            }
            None => false,
        });
        if inside {
            out.push(r);
        }
    }
}

/// The geometry the kernels walk for a sample of shape `shape` with `regions`, which it
/// appends to `out` in that geometry. Every dimension (but the first) that all regions cover
/// whole is merged into the dimension before it: the element at (.., i, j) of extents
/// (.., m, n) is at i * n + j of the merged extent m * n, and a region [lo, hi) of i with j
/// whole is [lo * n, hi * n) there. Flat indices do not change. With no region the sample
/// is one dimension.
fn merge(shape: &[usize], regions: &[Region], out: &mut Vec<Region>) -> Geometry {
    let mut g = Geometry { ndim: 0, ext: [1; MAX_DIMS] };
    // `first[k]`: the original dimension merged dimension k starts at.
    let mut first = [0usize; MAX_DIMS];
    for (d, &e) in shape.iter().enumerate() {
        let whole = regions.iter().all(|r| r.lo[d] == 0 && r.hi[d] == e);
        if d > 0 && whole {
            g.ext[g.ndim - 1] *= e;
        } else {
            first[g.ndim] = d;
            g.ext[g.ndim] = e;
            g.ndim += 1;
        }
    }
    for r in regions {
        let mut m = Region { lo: [0; MAX_DIMS], hi: [0; MAX_DIMS] };
        for k in 0..g.ndim {
            let d = first[k];
            // The dimensions merged into k: the extent they add to each step of d.
            let scale = g.ext[k] / shape[d].max(1);
            m.lo[k] = r.lo[d] * scale;
            m.hi[k] = r.hi[d] * scale;
        }
        out.push(m);
    }
    g
}

impl Operator for Erase {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.plan_batch(ws, input.meta())?;
        let size = meta.dtype().size();
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let plan = &self.plan;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let s = &plan.samples[i];
            let regions = &plan.regions[s.regions.0..s.regions.1];
            let fill = &plan.fills[s.fill..s.fill + plan.nfill];
            let src = input.bytes(i);
            match size {
                1 => erase_sample::<u8>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s, regions, fill),
                2 => erase_sample::<u16>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s, regions, fill),
                4 => erase_sample::<u32>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s, regions, fill),
                _ => erase_sample::<u64>(bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src), s, regions, fill),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// An element moved as its bits.
trait Bits: bytemuck::Pod + Send + Sync {
    /// The element whose bits are the low bytes of `w`.
    fn from_word(w: u64) -> Self;
}

macro_rules! bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn from_word(w: u64) -> Self { w as $t }
        }
    )*};
}
bits!(u8, u16, u32, u64);

/// The most fill values kept on the stack (more channels take a heap copy).
const STACK_FILL: usize = 16;

/// Sample `src` into `dst` with `regions` (in `s.geometry`) filled.
fn erase_sample<T: Bits>(dst: &mut [T], src: &[T], s: &SamplePlan, regions: &[Region], words: &[u64]) {
    dst.copy_from_slice(src);
    if regions.is_empty() {
        return;
    }
    let mut stack = [<T as bytemuck::Zeroable>::zeroed(); STACK_FILL];
    let heap: Vec<T>;
    let fill: &[T] = if words.len() <= STACK_FILL {
        for (f, &w) in stack.iter_mut().zip(words) {
            *f = T::from_word(w);
        }
        &stack[..words.len()]
    } else {
        heap = words.iter().map(|&w| T::from_word(w)).collect();
        &heap
    };
    let fill = if s.channels > 1 { fill } else { &fill[..1] };
    for r in regions {
        fill_region(dst, &s.geometry, r, fill, s.cstride);
    }
}

/// Fills region `r` of a sample of geometry `g`: one run along the last dimension per
/// position of the others.
fn fill_region<T: Copy>(dst: &mut [T], g: &Geometry, r: &Region, fill: &[T], cstride: usize) {
    let last = g.ndim - 1;
    let mut stride = [1usize; MAX_DIMS];
    for k in (0..last).rev() {
        stride[k] = stride[k + 1] * g.ext[k + 1];
    }
    let mut pos = r.lo;
    loop {
        let base: usize = (0..last).map(|k| pos[k] * stride[k]).sum();
        let (start, end) = (base + r.lo[last], base + r.hi[last]);
        fill_run(&mut dst[start..end], start, fill, cstride);
        // The next position of the outer dimensions, the innermost moving fastest.
        let mut k = last;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            pos[k] += 1;
            if pos[k] < r.hi[k] {
                break;
            }
            pos[k] = r.lo[k];
        }
    }
}

/// Fills `run`, whose first element is element `start` of the sample: with `fill[0]`, or
/// with `fill.len() > 1` channel values, the element at `e` taking `fill[(e / cstride) %
/// channels]` (its channel index).
fn fill_run<T: Copy>(run: &mut [T], start: usize, fill: &[T], cstride: usize) {
    let channels = fill.len();
    if channels == 1 {
        run.fill(fill[0]);
    } else if cstride == 1 {
        // Channels last: the pattern repeats every pixel; start mid-pixel, then whole ones.
        let c0 = start % channels;
        let head = ((channels - c0) % channels).min(run.len());
        let (first, rest) = run.split_at_mut(head);
        first.copy_from_slice(&fill[c0..c0 + head]);
        let mut pixels = rest.chunks_exact_mut(channels);
        for px in &mut pixels {
            px.copy_from_slice(fill);
        }
        let tail = pixels.into_remainder();
        let t = tail.len();
        tail.copy_from_slice(&fill[..t]);
    } else {
        // Channels further out: runs of `cstride` elements share a value.
        let mut e = start;
        let mut rest = run;
        while !rest.is_empty() {
            let n = (cstride - e % cstride).min(rest.len());
            let (part, tail) = rest.split_at_mut(n);
            part.fill(fill[(e / cstride) % channels]);
            rest = tail;
            e += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABS: Coords = Coords { normalized_anchor: false, normalized_shape: false, centered: false };
    const NORM: Coords = Coords { normalized_anchor: true, normalized_shape: true, centered: false };

    #[test]
    fn bounds_truncate_each_end_toward_zero_in_f32() {
        assert_eq!(axis_bounds(4.0, 40.0, 60, ABS), (4, 44));
        // Both ends truncate: 1.5 + 2.9 = 4.4 -> [1, 4), three elements for a shape of 2.9.
        assert_eq!(axis_bounds(1.5, 2.9, 60, ABS), (1, 4));
        // Toward zero, not down: -0.5 -> 0 and 0.7 -> 0 (DALI erases nothing here).
        assert_eq!(axis_bounds(-0.5, 1.2, 5, ABS), (0, 0));
        assert_eq!(axis_bounds(-1.5, 3.9, 6, ABS), (-1, 2));
        // Normalized: f32 products of the f32 extent, summed in f32. DALI 2.4 gives the end
        // 353 here, where a fused multiply-add would give 352.
        let (a, s) = (f32::from_bits(0x3e56_03ae), f32::from_bits(0x3f44_21ba)); // 0.2089984.., 0.7661396..
        assert_eq!(axis_bounds(a, s, 362, NORM).1, 353);
        assert_eq!(axis_bounds(0.25, 0.5, 60, NORM), (15, 45));
        let mixed = Coords { normalized_anchor: true, ..ABS };
        assert_eq!(axis_bounds(0.15, 20.0, 300, mixed), (45, 65));
        // Centered: the anchor moves back by half the shape before truncation.
        let centered = Coords { centered: true, ..ABS };
        assert_eq!(axis_bounds(2.0, 3.0, 5, centered), (0, 3));
        assert_eq!(axis_bounds(2.5, 2.9, 5, centered), (1, 3));
        // NaN and infinities: x86's integer indefinite, the int64 minimum.
        assert_eq!(axis_bounds(f32::NAN, 2.0, 5, ABS), (i64::MIN, i64::MIN));
        assert_eq!(axis_bounds(1.0, f32::INFINITY, 5, ABS), (1, i64::MIN));
    }

    #[test]
    fn clamping_cuts_regions_to_the_sample_and_drops_empty_ones() {
        assert_eq!(clamp(4, 44, 60), Some((4, 44)));
        assert_eq!(clamp(-3, 2, 6), Some((0, 2)));
        assert_eq!(clamp(5, 100, 6), Some((5, 6)));
        assert_eq!(clamp(-10, 100, 6), Some((0, 6)));
        assert_eq!(clamp(6, 8, 6), None);
        assert_eq!(clamp(2000, 2200, 60), None);
        assert_eq!(clamp(3, 3, 6), None);
        assert_eq!(clamp(4, 2, 6), None); // a negative shape
        assert_eq!(clamp(-4, -1, 6), None);
        assert_eq!(clamp(1, i64::MIN, 6), None);
        assert_eq!(clamp(i64::MIN, i64::MIN, 6), None);
        assert_eq!(clamp(0, 1, 0), None); // an empty dimension
    }

    #[test]
    fn regions_follow_the_axes_and_unlisted_dimensions_stay_whole() {
        let mut out = Vec::new();
        // HWC 60x80x3, axis_names "HW": two regions, the second half outside.
        sample_regions(&[60, 80, 3], &[0, 1], &[4.0, 10.0, 50.0, 70.0], &[40.0, 50.0, 20.0, 20.0], ABS, &mut out);
        assert_eq!(out, vec![
            Region { lo: [4, 10, 0, 0, 0], hi: [44, 60, 3, 0, 0] },
            Region { lo: [50, 70, 0, 0, 0], hi: [60, 80, 3, 0, 0] },
        ]);
        // "W" alone: bands over every row; a band wholly outside is dropped.
        out.clear();
        sample_regions(&[60, 80, 3], &[1], &[10.0, 250.0, 30.0], &[20.0, 30.0, 5.0], ABS, &mut out);
        assert_eq!(out, vec![
            Region { lo: [0, 10, 0, 0, 0], hi: [60, 30, 3, 0, 0] },
            Region { lo: [0, 30, 0, 0, 0], hi: [60, 35, 3, 0, 0] },
        ]);
        // A repeated axis keeps its last values ("HH").
        out.clear();
        sample_regions(&[4, 5, 3], &[0, 0], &[1.0, 2.0], &[1.0, 2.0], ABS, &mut out);
        assert_eq!(out, vec![Region { lo: [2, 0, 0, 0, 0], hi: [4, 5, 3, 0, 0] }]);
        // A channel range (axis_names "WC").
        out.clear();
        sample_regions(&[4, 5, 3], &[1, 2], &[1.0, 1.0], &[2.0, 2.0], ABS, &mut out);
        assert_eq!(out, vec![Region { lo: [0, 1, 1, 0, 0], hi: [4, 3, 3, 0, 0] }]);
        // An empty extent leaves no region.
        out.clear();
        sample_regions(&[0, 4, 3], &[0, 1], &[0.0, 0.0], &[2.0, 2.0], ABS, &mut out);
        assert!(out.is_empty());
    }

    /// True when the element at flat index `e` of a sample of `shape` is in some region.
    fn covered(shape: &[usize], regions: &[Region], mut e: usize) -> bool {
        let mut c = [0usize; MAX_DIMS];
        for d in (0..shape.len()).rev() {
            c[d] = e % shape[d];
            e /= shape[d];
        }
        regions.iter().any(|r| (0..shape.len()).all(|d| r.lo[d] <= c[d] && c[d] < r.hi[d]))
    }

    #[test]
    fn merged_geometry_covers_the_same_elements() {
        let cases: Vec<(Vec<usize>, Vec<usize>, Vec<f32>, Vec<f32>)> = vec![
            (vec![6, 7, 3], vec![0, 1], vec![1.0, 2.0, 4.0, 0.0], vec![3.0, 4.0, 9.0, 2.0]),
            (vec![3, 6, 7], vec![1, 2], vec![1.0, 2.0], vec![3.0, 4.0]),
            (vec![2, 5, 4, 3], vec![1, 2], vec![1.0, 0.0, 3.0, 1.0], vec![2.0, 4.0, 5.0, 2.0]),
            (vec![2, 5, 4, 3], vec![0, 1, 2], vec![1.0, 1.0, 1.0], vec![1.0, 2.0, 2.0]),
            (vec![4, 5, 3], vec![1, 2], vec![1.0, 1.0], vec![2.0, 2.0]),
            (vec![9], vec![0], vec![2.0, 6.0], vec![2.0, 5.0]),
            (vec![2, 1, 3, 1, 4], vec![2], vec![1.0], vec![1.0]),
            (vec![5, 6, 3], vec![0, 1], vec![], vec![]),
        ];
        for (shape, axes, anchor, extent) in cases {
            let mut regions = Vec::new();
            sample_regions(&shape, &axes, &anchor, &extent, ABS, &mut regions);
            let mut merged = Vec::new();
            let g = merge(&shape, &regions, &mut merged);
            let merged_shape = &g.ext[..g.ndim];
            assert_eq!(merged_shape.iter().product::<usize>(), shape.iter().product::<usize>());
            for e in 0..shape.iter().product() {
                assert_eq!(covered(&shape, &regions, e), covered(merged_shape, &merged, e), "{shape:?} {axes:?} element {e}");
            }
        }
        // HWC erased on H and W: rows of W * C elements.
        let mut merged = Vec::new();
        let g = merge(&[6, 7, 3], &[Region { lo: [1, 2, 0, 0, 0], hi: [4, 6, 3, 0, 0] }], &mut merged);
        assert_eq!((g.ndim, &g.ext[..2]), (2, &[6, 21][..]));
        assert_eq!(merged, vec![Region { lo: [1, 6, 0, 0, 0], hi: [4, 18, 0, 0, 0] }]);
        // No region: one dimension.
        merged.clear();
        let g = merge(&[6, 7, 3], &[], &mut merged);
        assert_eq!((g.ndim, g.ext[0]), (1, 126));
    }

    #[test]
    fn fill_values_convert_as_dalis_x86_static_cast() {
        // Each value was read back from DALI 2.4's cpu operator.
        let cases: &[(DType, f32, u64)] = &[
            (DType::U8, 300.0, 44),
            (DType::U8, -1.7, 255),
            (DType::U8, 1e10, 0),
            (DType::U8, 3e9, 0),
            (DType::U8, f32::NAN, 0),
            (DType::I8, -200.0, 56),
            (DType::U16, 2_147_483_904.0, 0),
            (DType::I16, 70000.0, 4464),
            (DType::U16, f32::NAN, 0),
            (DType::U32, 5e9, 705_032_704),
            (DType::U32, -5.0, 4_294_967_291),
            (DType::U32, f32::NAN, 0),
            (DType::U32, 1e20, 0),
            (DType::I32, 5e9, i32::MIN as u32 as u64),
            (DType::I32, f32::NAN, i32::MIN as u32 as u64),
            (DType::I64, 1e19, i64::MIN as u64),
            (DType::I64, f32::NAN, i64::MIN as u64),
            (DType::U64, -5.0, u64::MAX - 4),
            (DType::U64, 1.5e19, 15_000_000_520_515_485_696),
            (DType::U64, 1e20, 0),
            (DType::U64, f32::NAN, 1 << 63),
            (DType::U64, -1e19, 1 << 63),
            (DType::U64, f32::NEG_INFINITY, 1 << 63),
            (DType::U64, f32::INFINITY, 0),
            (DType::U64, 9_223_372_036_854_775_808.0, 1 << 63),
            (DType::F16, 0.1, 0x2e66),
            (DType::F16, 1.0 + 1.0 / 2048.0, 0x3c01),
            (DType::F16, 70000.0, 0x7c00),
            (DType::F16, f32::NAN, 0x7e00),
            (DType::F32, -0.0, 0x8000_0000),
            (DType::F32, 118.0, 118f32.to_bits() as u64),
        ];
        for &(dtype, v, want) in cases {
            assert_eq!(fill_word(dtype, v), want, "{v} as {dtype}");
        }
    }

    fn plan_of(shape: &[usize], axes: &[usize], anchor: &[f32], extent: &[f32], fill: &[u64], channel_dim: Option<usize>) -> (SamplePlan, Vec<Region>) {
        let mut regions = Vec::new();
        sample_regions(shape, axes, anchor, extent, ABS, &mut regions);
        let mut merged = Vec::new();
        let geometry = merge(shape, &regions, &mut merged);
        let (channels, cstride) = match channel_dim {
            Some(c) if fill.len() > 1 => (fill.len(), shape[c + 1..].iter().product::<usize>().max(1)),
            _ => (1, 1),
        };
        (SamplePlan { geometry, regions: (0, merged.len()), fill: 0, channels, cstride }, merged)
    }

    /// The cpu kernel against the definition, element by element, with regions in the
    /// original dimensions and the fill value of each element's channel coordinate.
    fn check_kernel(shape: &[usize], axes: &[usize], anchor: &[f32], extent: &[f32], fill: &[u64], channel_dim: Option<usize>) {
        let n: usize = shape.iter().product();
        let src: Vec<u16> = (0..n).map(|k| 1000 + k as u16).collect();
        let mut dst = vec![0u16; n];
        let (plan, merged) = plan_of(shape, axes, anchor, extent, fill, channel_dim);
        erase_sample(&mut dst, &src, &plan, &merged, fill);
        let mut regions = Vec::new();
        sample_regions(shape, axes, anchor, extent, ABS, &mut regions);
        for (e, (&got, &x)) in dst.iter().zip(&src).enumerate() {
            let want = if !covered(shape, &regions, e) {
                x
            } else if fill.len() == 1 {
                fill[0] as u16
            } else {
                let c = channel_dim.unwrap();
                let inner: usize = shape[c + 1..].iter().product();
                fill[(e / inner) % shape[c]] as u16
            };
            assert_eq!(got, want, "{shape:?} element {e}");
        }
    }

    #[test]
    fn the_cpu_kernel_fills_exactly_the_regions() {
        let rgb = [7, 8, 9];
        check_kernel(&[6, 7, 3], &[0, 1], &[1.0, 2.0, 3.0, 0.0], &[3.0, 4.0, 9.0, 2.0], &rgb, Some(2));
        check_kernel(&[6, 7, 3], &[0, 1], &[1.0, 2.0], &[3.0, 4.0], &[5], Some(2));
        check_kernel(&[3, 6, 7], &[1, 2], &[1.0, 2.0, 0.0, 5.0], &[3.0, 4.0, 6.0, 9.0], &rgb, Some(0));
        check_kernel(&[4, 5, 3], &[1, 2], &[1.0, 1.0], &[2.0, 2.0], &rgb, Some(2)); // channels 1..3
        check_kernel(&[2, 5, 4, 3], &[1, 2], &[1.0, 0.0, 3.0, 1.0], &[2.0, 4.0, 5.0, 2.0], &rgb, Some(3));
        check_kernel(&[2, 3, 5, 4], &[2, 3], &[1.0, 1.0], &[3.0, 2.0], &rgb, Some(1)); // FCHW
        check_kernel(&[9], &[0], &[2.0, 6.0], &[2.0, 5.0], &[4], None);
        check_kernel(&[5, 6, 3], &[0, 1], &[], &[], &rgb, Some(2));
    }

    #[test]
    fn channel_runs_start_mid_pixel() {
        let fill = [1u8, 2, 3];
        let mut run = [0u8; 8];
        fill_run(&mut run, 4, &fill, 1); // element 4 is channel 1
        assert_eq!(run, [2, 3, 1, 2, 3, 1, 2, 3]);
        let mut run = [0u8; 7];
        fill_run(&mut run, 3, &fill, 4); // planes of 4: 3 | 4, 5, 6, 7 | 8, 9
        assert_eq!(run, [1, 2, 2, 2, 2, 3, 3]);
    }
}
