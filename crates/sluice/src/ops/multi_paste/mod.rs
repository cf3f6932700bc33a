//! `fn.multi_paste` (cpu and gpu): regions of input samples pasted onto zeroed canvases.
//! DALI 2.4's operator (`dali/operators/image/paste/multipaste.*`,
//! `dali/kernels/imgproc/paste/paste.h`), checked against DALI 2.4's cpu operator, bit for
//! bit, by `tests/test_multi_paste.py`:
//!
//! - Sources: with `in_ids` (one input only), output sample i gets one region from input
//!   sample `in_ids[i][j]` for each j (any number, 0 included, repeats allowed); without it,
//!   output sample i gets one region from sample i of every positional input (1 to 64, all of
//!   one type and number of dimensions).
//! - Each region is `shapes[i][j]` (or `ceil(extent * shapes_rel)`, else the rest of the
//!   source from the anchor) taken at `in_anchors[i][j]` (or `floor(extent * in_anchors_rel)`,
//!   else 0) and written at `out_anchors[i][j]` (or `floor(canvas * out_anchors_rel)`, else
//!   0). Region arguments hold one (y, x) row per region: argument inputs of shape
//!   `[regions, 2]`. Relative values are f32, multiplied by the extent converted to f32, as
//!   DALI does (0.3 of 10 is 3, not 4), and must lie in [0, 1]. The absolute and relative
//!   forms of one argument exclude each other.
//! - The canvas is `output_size` (H, W: at least 2 values, extra ones ignored, as DALI),
//!   else the common H x W of every input sample (they must agree); its channels are the
//!   regions' (they must agree), or input sample i's when nothing is pasted. Elements no
//!   region covers are 0. Overlapping regions: the later region wins (DALI pastes in order).
//! - A region must lie inside its source and the canvas: otherwise an error naming the
//!   argument, the output sample and the region ("The pasted region must be within ...", as
//!   DALI's), never clipping.
//! - Types: UINT8, INT16, INT32, FLOAT in and out; `dtype` converts with DALI's `ConvertSat`
//!   (`tensor::channel`: round half away from zero, saturate, NaN to 0), except FLOAT to INT32
//!   from NaN, which is INT32's minimum: DALI's conversion ends in x86's float-to-int
//!   instruction there. Same type in and out: the bytes are copied (NaN payloads kept).
//! - Layouts: HWC, or 3 dimensions without a layout (the output is then "HWC", as DALI's);
//!   sequences FHWC with positional inputs: frame f of output sample i is pasted from frame
//!   f of each input's sample i (every input sample of output sample i has the same number
//!   of frames), with the sample's arguments applying to every frame.
//! - Source info: the sources' infos joined with ';' (DALI's).
//!
//! Both backends share [`MultiPaste::plan_batch`] (checks, per-sample arguments, every
//! region in absolute coordinates). The cpu zeroes each sample and pastes its regions row by
//! row in order; the gpu (`gpu.rs`, `multi_paste.cu`, one launch per batch) computes each
//! output element from the last region covering it (or 0), which is the same result
//! without ordering the writes.
//!
//! Where Sluice departs from DALI 2.4:
//! - `in_ids` with sequences is refused: DALI expands sequences into frames first, so its
//!   `in_ids` index frames of the whole batch and every output frame is the same source
//!   frame (and its cpu fails when the batch holds more frames than `batch_size`).
//! - Region arguments given as constants are flat lists, two values per region
//!   (`in_anchors=[y0, x0, y1, x1]`): DALI takes no list there, only arrays, which it turns
//!   into constant nodes; `types.Constant(array)` gives both libraries the same node.
//! - Argument inputs of any numeric type are read (DALI wants INT32 for `in_ids`,
//!   `output_size` and the absolute region arguments, FLOAT for the relative ones);
//!   absolute values must be whole numbers in the INT32 range. `in_ids` may be a scalar per
//!   sample. `output_size` may hold a different number of values per sample.
//! - 4-D inputs need the layout FHWC (DALI may read 4-D without a layout as a sequence).
//! - Errors leave the pipeline usable (DALI's pipeline is invalid after any error).

mod gpu;

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace};
use crate::tensor::channel::{dispatch_pair, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

const DOC: &str = "Performs multiple pastes from image batch to each of the outputs.

If `in_ids` is specified, the operator expects exactly one input batch. In that case, for each output sample, `in_ids` describes which samples from the input batch should be pasted to the corresponding sample in the output batch.

If the `in_ids` argument is omitted, the operator accepts multiple inputs. In that case, the i-th sample from each input batch will be pasted to the i-th sample of the output batch. All the input batches must have the same type.

If the input shapes are uniform and no explicit `output_size` is provided, the operator assumes the same output shape (the output canvas size). Otherwise, the `output_size` must be specified.

Regions are pasted in order (a later region covers an earlier one); elements no region covers are 0. Every region must lie inside its source and the canvas. Region arguments (`in_anchors`, `shapes`, `out_anchors` and their relative forms) hold one (y, x) row per region: argument inputs of shape [regions, 2], or constant flat lists of 2 values per region.

Inputs: HWC images (or sequences FHWC, without `in_ids`) of type UINT8, INT16, INT32 or FLOAT. This operator can also change the type of data.";

/// `fn.multi_paste`.
pub static MULTI_PASTE: OpDef = OpDef {
    schema: OpSchema {
        name: "MultiPaste",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 64,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("in_ids", T::IntList, D::Optional, "Indices of the input samples to paste data from, one per pasted region. If specified, the operator accepts exactly one batch as an input."),
            tensor_arg("in_anchors", T::IntList, D::Optional, "Absolute coordinates (y, x) of the top-left corner of the source region, one row per pasted region. If neither `in_anchors` nor `in_anchors_rel` are provided, all anchors are zero."),
            tensor_arg("in_anchors_rel", T::FloatList, D::Optional, "Relative coordinates of the top-left corner of the source region: like `in_anchors`, but floats in [0, 1] range, relative to the input sample shape (rounded down)."),
            tensor_arg("shapes", T::IntList, D::Optional, "Shape (h, w) of the paste regions, one row per pasted region. If neither `shapes` nor `shapes_rel` are provided, the region spans from the input anchor until the end of the input image."),
            tensor_arg("shapes_rel", T::FloatList, D::Optional, "Relative shape of the paste regions: like `shapes`, but floats in [0, 1] range, relative to the input shape (rounded up)."),
            tensor_arg("out_anchors", T::IntList, D::Optional, "Absolute coordinates (y, x) of the top-left corner of the pasted region in the output canvas, one row per pasted region. If neither `out_anchors` nor `out_anchors_rel` are provided, all anchors are zero."),
            tensor_arg("out_anchors_rel", T::FloatList, D::Optional, "Relative coordinates of the top-left corner of the pasted region in the output canvas: like `out_anchors`, but floats in [0, 1] range, relative to the output canvas size (rounded down)."),
            tensor_arg("output_size", T::IntList, D::Optional, "A tuple (H, W) describing the output shape (the size of the canvas for the output pastes). Can be omitted if the operator is run with inputs of uniform shape; the same shape is then used as the canvas size."),
            arg("dtype", T::DType, D::Optional, "Output data type (UINT8, INT16, INT32 or FLOAT). If not set, the input type is used."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(MultiPaste::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::MultiPasteGpu::new(MultiPaste::new(ctx)?)))),
};

/// The element types DALI's operator takes, in and out.
const TYPES: [DType; 4] = [DType::U8, DType::I16, DType::I32, DType::F32];

/// The per-sample arguments, for the batch-size check.
const ARG_NAMES: [&str; 8] = ["in_ids", "in_anchors", "in_anchors_rel", "shapes", "shapes_rel", "out_anchors", "out_anchors_rel", "output_size"];

/// One pasted region in absolute coordinates (checked to lie inside source and canvas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    /// The positional input and its sample the region comes from.
    pub input: usize,
    pub sample: usize,
    /// The source sample's height and width.
    pub src_size: [usize; 2],
    /// (y, x) in the source, (y, x) in the canvas, (h, w).
    pub in_anchor: [usize; 2],
    pub out_anchor: [usize; 2],
    pub shape: [usize; 2],
}

/// One output sample: its geometry and its regions (a range of [`Plan::regions`], in paste
/// order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SamplePlan {
    /// 1 for HWC.
    pub frames: usize,
    pub height: usize,
    pub width: usize,
    pub channels: usize,
    pub regions: Range<usize>,
}

/// The batch's plan (kept between batches to reuse the allocations).
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub samples: Vec<SamplePlan>,
    pub regions: Vec<Region>,
}

/// An argument with an absolute and a relative form (`in_anchors` / `in_anchors_rel`).
#[derive(Clone, Copy)]
struct Pair {
    abs: &'static str,
    rel: &'static str,
}

const IN_ANCHORS: Pair = Pair { abs: "in_anchors", rel: "in_anchors_rel" };
const SHAPES: Pair = Pair { abs: "shapes", rel: "shapes_rel" };
const OUT_ANCHORS: Pair = Pair { abs: "out_anchors", rel: "out_anchors_rel" };

/// The operator, both backends' planning and the cpu backend.
pub struct MultiPaste {
    ctx: OpContext,
    /// `dtype`, when given.
    dtype: Option<DType>,
    plan: Plan,
    /// Scratch for one sample's argument values.
    ids: Vec<f64>,
    rows: [Vec<f64>; 3],
}

impl MultiPaste {
    fn new(ctx: &OpContext) -> Result<MultiPaste> {
        let op = ctx.display_name.as_str();
        // Both forms of one argument: refused at build, as soon as the call is known.
        for p in [IN_ANCHORS, SHAPES, OUT_ANCHORS] {
            if ctx.given(p.abs) && ctx.given(p.rel) {
                return Err(Error::arg(op, p.rel, format!("The `{}` and `{}` cannot be specified together", p.abs, p.rel)));
            }
        }
        let dtype = if ctx.args.has("dtype") { Some(ctx.args.dtype("dtype")) } else { None };
        if let Some(d) = dtype {
            if !TYPES.contains(&d) {
                return Err(Error::arg(op, "dtype", format!("Unsupported output type: {d}; supported: {}", type_names())));
            }
        }
        Ok(MultiPaste { ctx: ctx.clone(), dtype, plan: Plan::default(), ids: Vec::new(), rows: Default::default() })
    }

    /// Checks the batch (`inputs`: the positional inputs' metadata), fills `self.plan` and
    /// returns the output's metadata. Shared by both backends.
    fn plan_batch(&mut self, ws: &Workspace<'_>, inputs: &[&BatchMeta]) -> Result<BatchMeta> {
        let mut plan = std::mem::take(&mut self.plan);
        plan.samples.clear();
        plan.regions.clear();
        let out = self.plan_into(ws, inputs, &mut plan);
        self.plan = plan;
        out
    }

    fn plan_into(&mut self, ws: &Workspace<'_>, inputs: &[&BatchMeta], plan: &mut Plan) -> Result<BatchMeta> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let first = inputs[0];
        let n = first.len();
        let seq = check_inputs(ctx, ws, inputs)?;
        let in_dtype = first.dtype();
        let out_dtype = self.dtype.unwrap_or(in_dtype);
        let use_ids = ctx.given("in_ids");
        if use_ids && inputs.len() != 1 {
            return Err(Error::arg(op, "in_ids", format!("If the `in_ids` is specified, the operator accepts exactly one positional input batch. Got: {} inputs.", inputs.len())));
        }
        if use_ids && seq {
            return Err(Error::arg(op, "in_ids", "is not supported with sequence (FHWC) inputs: paste sequences given as positional inputs, frame by frame"));
        }
        for name in ARG_NAMES {
            if let Some(b) = ws.arg_inputs.get(name) {
                if b.len() != n {
                    return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", b.len())));
                }
            }
        }
        // Dimension of H in a sample's shape (1 for sequences: F comes first).
        let h_dim = seq as usize;
        let extent = |m: &BatchMeta, s: usize| -> [usize; 2] {
            let sh = m.shape(s);
            [sh[h_dim], sh[h_dim + 1]]
        };
        let output_size = ws.per_sample_list(ctx, "output_size");
        if !output_size.is_set() {
            // The canvas is the inputs' common size.
            let want = if n > 0 { extent(first, 0) } else { [0, 0] };
            for (k, &m) in inputs.iter().enumerate() {
                for s in 0..n {
                    let got = extent(m, s);
                    if got != want {
                        return Err(Error::arg(op, "output_size", format!(
                            "not given, so all the input samples must have the same shape (If the `output_size` is not specified, all the input samples must have the same shape). Got samples of different shapes: {} x {} (sample 0 of input 0) and {} x {} (sample {s} of input {k}).",
                            want[0], want[1], got[0], got[1]
                        )));
                    }
                }
            }
        }
        let ids_arg = ws.per_sample_list(ctx, "in_ids");
        let pairs = [IN_ANCHORS, SHAPES, OUT_ANCHORS].map(|p| {
            let (name, rel) = if ctx.given(p.rel) { (p.rel, true) } else { (p.abs, false) };
            (name, rel, ws.per_sample_list(ctx, name))
        });
        let mut shapes: Vec<usize> = Vec::with_capacity(n * (3 + h_dim));
        let mut infos: Vec<Arc<str>> = Vec::with_capacity(n);
        let any_info = inputs.iter().any(|m| !m.source_infos().is_empty());
        for i in 0..n {
            // The sources of sample i: (input, sample) per region.
            let count = if use_ids {
                read_ids(op, ids_arg, i, n, &mut self.ids)?;
                self.ids.len()
            } else {
                inputs.len()
            };
            let source = |j: usize, ids: &[f64]| if use_ids { (0, ids[j] as usize) } else { (j, i) };
            // Canvas.
            let canvas = if output_size.is_set() { read_output_size(op, output_size, i)? } else { extent(first, i) };
            // Channels and frames: the regions', all equal; input sample i's without regions.
            let (mut channels, mut frames) = (None::<usize>, None::<usize>);
            for j in 0..count {
                let (k, s) = source(j, &self.ids);
                let sh = inputs[k].shape(s);
                let c = sh[h_dim + 2];
                match channels {
                    Some(c0) if c0 != c => {
                        return Err(Error::data(ctx.at(ws.iteration, i, ""), format!(
                            "All regions pasted into given output sample must have the same number of channels. Got different number of channels: {c0}, {c} for output sample at index {i} (region {j})."
                        )));
                    }
                    _ => channels = Some(c),
                }
                if seq {
                    match frames {
                        Some(f0) if f0 != sh[0] => {
                            return Err(Error::data(ctx.at(ws.iteration, i, ""), format!(
                                "the sequences pasted into output sample {i} have different numbers of frames: {f0} (input 0) and {} (input {k})", sh[0]
                            )));
                        }
                        _ => frames = Some(sh[0]),
                    }
                }
            }
            let own = first.shape(i);
            let channels = channels.unwrap_or(own[h_dim + 2]);
            let frames = if seq { frames.unwrap_or(own[0]) } else { 1 };
            // Region arguments for sample i.
            let mut given_rows = [false; 3];
            for (slot, (name, _, src)) in pairs.iter().enumerate() {
                given_rows[slot] = read_rows(op, name, *src, i, count, &mut self.rows[slot])?;
            }
            let start = plan.regions.len();
            for j in 0..count {
                let (k, s) = source(j, &self.ids);
                let src_size = extent(inputs[k], s);
                let region = place_region(op, i, j, src_size, canvas, &pairs, &given_rows, &self.rows)?;
                plan.regions.push(Region { input: k, sample: s, src_size, ..region });
            }
            plan.samples.push(SamplePlan { frames, height: canvas[0], width: canvas[1], channels, regions: start..plan.regions.len() });
            if seq {
                shapes.push(frames);
            }
            shapes.extend([canvas[0], canvas[1], channels]);
            if any_info {
                // DALI's: the non-empty infos of the sources, joined with ';'.
                let mut joined = String::new();
                for j in 0..count {
                    let (k, s) = source(j, &self.ids);
                    let info = inputs[k].source_info(s);
                    if !info.is_empty() {
                        if !joined.is_empty() {
                            joined.push(';');
                        }
                        joined.push_str(info);
                    }
                }
                infos.push(joined.into());
            }
        }
        let ndim = 3 + h_dim;
        let mut meta = BatchMeta::new(out_dtype, ndim, shapes.chunks_exact(ndim));
        let layout = if first.layout().is_empty() { Layout::new("HWC").expect("a valid layout") } else { first.layout().clone() };
        meta.set_layout(layout);
        if any_info {
            meta.set_source_info(infos);
        }
        Ok(meta)
    }
}

/// "UINT8, INT16, INT32, FLOAT".
fn type_names() -> String {
    TYPES.iter().map(|d| d.dali_name()).collect::<Vec<_>>().join(", ")
}

/// Checks the inputs' types and layouts; returns true for sequences (FHWC).
fn check_inputs(ctx: &OpContext, ws: &Workspace<'_>, inputs: &[&BatchMeta]) -> Result<bool> {
    let op = ctx.display_name.as_str();
    let first = inputs[0];
    let mut seq = false;
    for (k, m) in inputs.iter().enumerate() {
        let layout = m.layout().as_str();
        let ok = match (m.ndim(), layout) {
            (3, "" | "HWC") => Some(false),
            (4, "FHWC") => Some(true),
            _ => None,
        };
        let Some(is_seq) = ok else {
            let got = if layout.is_empty() { format!("{} dimensions without a layout", m.ndim()) } else { format!("layout \"{layout}\"") };
            return Err(Error::type_mismatch(op, format!(
                "input {k}: {got}; multi_paste takes images with layout HWC (or 3 dimensions without a layout) or sequences with layout FHWC"
            )));
        };
        if k == 0 {
            seq = is_seq;
        } else if is_seq != seq {
            return Err(Error::type_mismatch(op, format!("input {k}: {}; input 0 is {}: all inputs must be images, or all sequences", if is_seq { "a sequence" } else { "an image" }, if seq { "a sequence" } else { "an image" })));
        }
        if m.dtype() != first.dtype() {
            return Err(Error::type_mismatch(op, format!("All input batches must have the same data type. Got {} and {} at indices 0 and {k}.", first.dtype(), m.dtype())));
        }
        if m.len() != first.len() {
            return Err(Error::type_mismatch(op, format!("input {k} has {} samples, input 0 has {}", m.len(), first.len())));
        }
    }
    if !first.is_empty() && !TYPES.contains(&first.dtype()) {
        return Err(Error::data(ctx.at(ws.iteration, 0, first.source_info(0)), format!("Unsupported input type: {}; supported: {}", first.dtype(), type_names())));
    }
    Ok(seq)
}

/// The values of a numeric constant list argument, as f64.
fn constant_values(op: &str, name: &str, v: &ArgValue, out: &mut Vec<f64>) -> Result<()> {
    match v {
        ArgValue::IntList(l) => out.extend(l.iter().map(|&x| x as f64)),
        ArgValue::FloatList(l) => out.extend_from_slice(l),
        ArgValue::Int(x) => out.push(*x as f64),
        ArgValue::Float(x) => out.push(*x),
        v => return Err(Error::arg(op, name, format!("must be numeric, got {v:?}"))),
    }
    Ok(())
}

/// Output sample i's `in_ids` into `out`, checked: whole numbers in `[0, n)`.
fn read_ids(op: &str, arg: PerSampleList<'_>, i: usize, n: usize, out: &mut Vec<f64>) -> Result<()> {
    out.clear();
    match arg {
        PerSampleList::Unset => {}
        PerSampleList::Constant(v) => constant_values(op, "in_ids", v, out)?,
        PerSampleList::Input { batch, .. } => {
            if batch.ndim() > 1 {
                return Err(Error::arg(op, "in_ids", format!("sample {i}: argument input of shape {:?}; expected a list of indices (1 dimension)", batch.shape(i))));
            }
            out.extend((0..batch.numel(i)).map(|k| element_as_f64(batch, i, k)));
        }
    }
    for &v in out.iter() {
        if !(v.fract() == 0.0 && v >= 0.0 && v < n as f64) {
            return Err(Error::arg(op, "in_ids", format!(
                "sample {i}: The `in_idx` must be in range [0, .., batch_size - 1]. Got in_idx: {v}. Input batch size is: {n}."
            )));
        }
    }
    Ok(())
}

/// Output sample i's canvas (H, W) from `output_size`.
fn read_output_size(op: &str, arg: PerSampleList<'_>, i: usize) -> Result<[usize; 2]> {
    let mut v = Vec::with_capacity(3);
    match arg {
        PerSampleList::Unset => unreachable!("read only when given"),
        PerSampleList::Constant(c) => constant_values(op, "output_size", c, &mut v)?,
        PerSampleList::Input { batch, .. } => v.extend((0..batch.numel(i)).map(|k| element_as_f64(batch, i, k))),
    }
    if v.len() < 2 {
        return Err(Error::arg(op, "output_size", format!("sample {i}: The `output_size` should be a tuple (H, W), got {} elements", v.len())));
    }
    let mut size = [0usize; 2];
    for (d, &x) in size.iter_mut().zip(&v) {
        if !(x.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&x)) {
            return Err(Error::arg(op, "output_size", format!("sample {i}: The `output_size` must be non-negative whole numbers (below 2^31), got {:?}", &v[..2])));
        }
        *d = x as usize;
    }
    Ok(size)
}

/// Output sample i's rows of a region argument into `out` (2 values per region, `count`
/// regions); false when the argument was not given.
fn read_rows(op: &str, name: &str, arg: PerSampleList<'_>, i: usize, count: usize, out: &mut Vec<f64>) -> Result<bool> {
    out.clear();
    match arg {
        PerSampleList::Unset => return Ok(false),
        PerSampleList::Constant(v) => {
            constant_values(op, name, v, out)?;
            if out.len() != 2 * count {
                return Err(Error::arg(op, name, format!(
                    "sample {i}: {} values given; expected {} (2 values, y and x, for each of the {count} pasted regions)", out.len(), 2 * count
                )));
            }
        }
        PerSampleList::Input { batch, .. } => {
            let shape = batch.shape(i);
            if shape != [count, 2] {
                return Err(Error::arg(op, name, format!(
                    "sample {i}: Unexpected shape for argument `{name}` for output sample at index {i}. It should be a 2D tensor of shape `number of pasted regions` x 2, i.e. [{count}, 2]. Got tensor of shape: {shape:?}."
                )));
            }
            out.extend((0..2 * count).map(|k| element_as_f64(batch, i, k)));
        }
    }
    Ok(true)
}

/// Region j of output sample i, in absolute coordinates, checked to lie inside the source
/// (`src`: H, W) and the canvas. `pairs` and `given` say which form of each argument
/// (anchors in, shapes, anchors out) was given; `rows` hold their values for the sample.
#[allow(clippy::too_many_arguments)]
fn place_region(op: &str, i: usize, j: usize, src: [usize; 2], canvas: [usize; 2], pairs: &[(&'static str, bool, PerSampleList<'_>); 3], given: &[bool; 3], rows: &[Vec<f64>; 3]) -> Result<Region> {
    // A value of row j: absolute ones whole int32 numbers, relative ones f32 in [0, 1]
    // scaled by `scale` in f32 and rounded with `round` (DALI computes in float).
    let value = |slot: usize, d: usize, scale: usize, round: fn(f32) -> f32| -> Result<i64> {
        let (name, rel, _) = pairs[slot];
        let v = rows[slot][2 * j + d];
        if rel {
            let f = v as f32;
            if !(0.0..=1.0).contains(&f) {
                return Err(Error::arg(op, name, format!(
                    "sample {i}: `{name}` values must be floats in [0, 1] range, got {f} for region at index {j} pasted into output sample at index {i}."
                )));
            }
            Ok(round(scale as f32 * f) as i64)
        } else if v.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&v) {
            Ok(v as i64)
        } else {
            Err(Error::arg(op, name, format!("sample {i}: region {j}: {v} is not a whole number in the int32 range")))
        }
    };
    let mut in_anchor = [0i64; 2];
    let mut shape = [0i64; 2];
    let mut out_anchor = [0i64; 2];
    for d in 0..2 {
        if given[0] {
            in_anchor[d] = value(0, d, src[d], f32::floor)?;
        }
        shape[d] = if given[1] { value(1, d, src[d], f32::ceil)? } else { src[d] as i64 - in_anchor[d] };
        if given[2] {
            out_anchor[d] = value(2, d, canvas[d], f32::floor)?;
        }
    }
    let pair = |v: [i64; 2]| format!("{} x {}", v[0], v[1]);
    let name_of = |slot: usize, fallback: &'static str| if given[slot] { pairs[slot].0 } else { fallback };
    for d in 0..2 {
        if in_anchor[d] < 0 || shape[d] < 0 || in_anchor[d] + shape[d] > src[d] as i64 {
            let name = if in_anchor[d] < 0 || !given[1] { name_of(0, pairs[1].0) } else { pairs[1].0 };
            return Err(Error::arg(op, name, format!(
                "sample {i}: The pasted region must be within input sample. Got input anchor: {}, pasted region shape: {}, input shape: {} x {}, for the region at index {j}, pasted into output sample at index {i}.",
                pair(in_anchor), pair(shape), src[0], src[1]
            )));
        }
    }
    for d in 0..2 {
        if out_anchor[d] < 0 || out_anchor[d] + shape[d] > canvas[d] as i64 {
            let name = if given[2] { pairs[2].0 } else if given[1] { pairs[1].0 } else { "output_size" };
            return Err(Error::arg(op, name, format!(
                "sample {i}: The pasted region must be within output bounds. Got output anchor: {}, pasted region shape: {}, output shape: {} x {}, for the region at index {j}, pasted into output sample at index {i}.",
                pair(out_anchor), pair(shape), canvas[0], canvas[1]
            )));
        }
    }
    let u = |v: [i64; 2]| v.map(|x| x as usize); // all checked non-negative above
    Ok(Region { input: 0, sample: 0, src_size: src, in_anchor: u(in_anchor), out_anchor: u(out_anchor), shape: u(shape) })
}

/// One element converted as DALI's paste kernel does: `ConvertSat` (`Channel::sat_f32`),
/// but FLOAT NaN to INT32 is INT32's minimum (x86's cvttss2si, where DALI's conversion
/// ends; the narrower integers keep that value's low bits, 0, which `sat_f32` gives).
#[inline(always)]
pub(crate) fn convert<I: Channel, O: Channel>(v: I) -> O {
    let f = v.to_f32();
    if O::DTYPE == DType::I32 && f.is_nan() {
        return O::sat_f64(f64::from(i32::MIN));
    }
    O::sat_f32(f)
}

/// Converts a run of elements (`src` of the input type into `dst` of the output type).
type RowFn = fn(&mut [u8], &[u8]);

fn convert_row<I: Channel, O: Channel>(dst: &mut [u8], src: &[u8]) {
    if I::DTYPE == O::DTYPE {
        // DALI copies the bytes when the types agree (NaN payloads and all).
        dst.copy_from_slice(src);
        return;
    }
    let src: &[I] = bytemuck::cast_slice(src);
    let dst: &mut [O] = bytemuck::cast_slice_mut(dst);
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = convert::<I, O>(s);
    }
}

/// Picks the row converter of a type pair once per batch.
struct RowConverter;

impl PairKernel for RowConverter {
    type Output = RowFn;
    fn run<I: Channel, O: Channel>(self) -> RowFn {
        convert_row::<I, O>
    }
}

impl Operator for MultiPaste {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let metas: Vec<&BatchMeta> = ws.inputs.iter().map(|t| t.meta()).collect();
        let meta = self.plan_batch(ws, &metas)?;
        let (in_dtype, out_dtype) = (metas[0].dtype(), meta.dtype());
        let mut out = TensorList::for_overwrite(meta); // zeroed per sample below
        if out.is_empty() {
            return Ok(vec![out]);
        }
        let convert = dispatch_pair(in_dtype, out_dtype, RowConverter).expect("types checked by the plan");
        let (isz, osz) = (in_dtype.size(), out_dtype.size());
        let plan = &self.plan;
        let inputs = &ws.inputs;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let s = &plan.samples[i];
            paste_sample(dst, s, &plan.regions[s.regions.clone()], |r| inputs[r.input].bytes(r.sample), isz, osz, convert);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Output sample `s` into `dst`: zeroes, then each region pasted row by row, in order (a
/// later region overwrites an earlier one), frame by frame. `source(r)` gives the bytes of
/// region r's source sample; `isz` / `osz` are the element sizes.
fn paste_sample<'a>(dst: &mut [u8], s: &SamplePlan, regions: &[Region], source: impl Fn(&Region) -> &'a [u8], isz: usize, osz: usize, convert: RowFn) {
    dst.fill(0);
    let c = s.channels;
    let out_row = s.width * c;
    let out_frame = s.height * out_row;
    for f in 0..s.frames {
        for r in regions {
            let src = source(r);
            let src_row = r.src_size[1] * c;
            let src_frame = r.src_size[0] * src_row;
            let run = r.shape[1] * c;
            if run == 0 {
                continue;
            }
            for y in 0..r.shape[0] {
                let a = f * src_frame + (r.in_anchor[0] + y) * src_row + r.in_anchor[1] * c;
                let b = f * out_frame + (r.out_anchor[0] + y) * out_row + r.out_anchor[1] * c;
                convert(&mut dst[b * osz..(b + run) * osz], &src[a * isz..(a + run) * isz]);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ops::Args;
    use crate::tensor::Element;

    /// The operator with constant arguments `given` and argument inputs named `inputs`.
    pub(in crate::ops::multi_paste) fn op(given: Vec<(&str, ArgValue)>, inputs: &[&str]) -> Result<MultiPaste> {
        let per_sample: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
        let ctx = OpContext {
            args: Args::check(&MULTI_PASTE.schema, "multi_paste", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &per_sample)?,
            display_name: "multi_paste".into(),
            instance_name: "m".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 8,
            num_threads: 1,
            device_id: None,
            arg_input_names: per_sample,
            resume_samples: 0,
        };
        MultiPaste::new(&ctx)
    }

    /// Runs the cpu backend on `xs` with argument inputs `args`.
    pub(in crate::ops::multi_paste) fn run(m: &mut MultiPaste, xs: &[&TensorList], args: &[(&'static str, &TensorList)]) -> Result<TensorList> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let ws = Workspace { inputs: xs.to_vec(), arg_inputs, iteration: 0, batch_size: xs[0].len(), frames: None, pool: &pool };
        Ok(m.run(&ws)?.remove(0))
    }

    /// Plans `xs` with argument inputs `args` (the planning both backends run).
    fn plan(m: &mut MultiPaste, xs: &[&BatchMeta], args: &[(&'static str, &TensorList)]) -> Result<(BatchMeta, Vec<SamplePlan>, Vec<Region>)> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let ws = Workspace { inputs: vec![], arg_inputs, iteration: 0, batch_size: xs[0].len(), frames: None, pool: &pool };
        let meta = m.plan_batch(&ws, xs)?;
        Ok((meta, m.plan.samples.clone(), m.plan.regions.clone()))
    }

    pub(in crate::ops::multi_paste) fn image<E: Element>(shapes: &[[usize; 3]], value: impl Fn(usize) -> E) -> TensorList {
        let shapes: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
        let data: Vec<Vec<E>> = shapes.iter().map(|s| (0..s.iter().product::<usize>()).map(&value).collect()).collect();
        TensorList::from_samples(&shapes, &data).with_layout("HWC")
    }

    /// Per-sample `[regions, 2]` int32 rows.
    pub(in crate::ops::multi_paste) fn rows(v: &[&[[i32; 2]]]) -> TensorList {
        let shapes: Vec<Vec<usize>> = v.iter().map(|r| vec![r.len(), 2]).collect();
        let data: Vec<Vec<i32>> = v.iter().map(|r| r.iter().flatten().copied().collect()).collect();
        TensorList::from_samples(&shapes, &data)
    }

    pub(in crate::ops::multi_paste) fn ids(v: &[&[i32]]) -> TensorList {
        let shapes: Vec<Vec<usize>> = v.iter().map(|r| vec![r.len()]).collect();
        let data: Vec<Vec<i32>> = v.iter().map(|r| r.to_vec()).collect();
        TensorList::from_samples(&shapes, &data)
    }

    fn err(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn plans_regions_from_ids_anchors_and_shapes() {
        let x = image::<u8>(&[[10, 10, 3], [8, 6, 3]], |k| k as u8);
        let mut m = op(vec![("output_size", ArgValue::IntList(vec![12, 11]))], &["in_ids", "in_anchors", "shapes", "out_anchors"]).unwrap();
        let args = [
            ("in_ids", &ids(&[&[1, 0], &[]])),
            ("in_anchors", &rows(&[&[[1, 2], [0, 0]], &[]])),
            ("shapes", &rows(&[&[[7, 4], [10, 10]], &[]])),
            ("out_anchors", &rows(&[&[[5, 7], [2, 1]], &[]])),
        ];
        let (meta, samples, regions) = plan(&mut m, &[x.meta()], &args).unwrap();
        assert_eq!((meta.shape(0), meta.shape(1), meta.layout().as_str(), meta.dtype()), (&[12, 11, 3][..], &[12, 11, 3][..], "HWC", DType::U8));
        assert_eq!(samples[0], SamplePlan { frames: 1, height: 12, width: 11, channels: 3, regions: 0..2 });
        assert_eq!(samples[1], SamplePlan { frames: 1, height: 12, width: 11, channels: 3, regions: 2..2 });
        assert_eq!(regions[0], Region { input: 0, sample: 1, src_size: [8, 6], in_anchor: [1, 2], out_anchor: [5, 7], shape: [7, 4] });
        assert_eq!(regions[1], Region { input: 0, sample: 0, src_size: [10, 10], in_anchor: [0, 0], out_anchor: [2, 1], shape: [10, 10] });
        // Without shapes: from the anchor to the end of the source. Without anchors: 0.
        let mut m = op(vec![("output_size", ArgValue::IntList(vec![12, 11, 99]))], &["in_ids", "in_anchors"]).unwrap();
        let args = [("in_ids", &ids(&[&[1], &[0]])), ("in_anchors", &rows(&[&[[3, 1]], &[[9, 9]]]))];
        let (_, _, regions) = plan(&mut m, &[x.meta()], &args).unwrap();
        assert_eq!((regions[0].shape, regions[0].out_anchor), ([5, 5], [0, 0]));
        assert_eq!(regions[1].shape, [1, 1]);
    }

    #[test]
    fn relative_arguments_compute_in_f32() {
        // Values read back from DALI 2.4: 0.3f * 10 is 3.0 in f32 (ceil 3), 0.9f * 10 is 9.0
        // (floor 9), 0.29f * 10 floors to 2, 0.6f * 10 to 6.
        let x = image::<u8>(&[[10, 10, 1], [10, 10, 1]], |k| k as u8);
        let rel = |a: [[f32; 2]; 2]| TensorList::from_samples(&[vec![1, 2], vec![1, 2]], &[a[0].to_vec(), a[1].to_vec()]);
        let mut m = op(vec![], &["in_ids", "shapes_rel", "in_anchors_rel", "out_anchors_rel"]).unwrap();
        let args = [
            ("in_ids", &ids(&[&[0], &[1]])),
            ("shapes_rel", &rel([[0.3, 0.3], [0.7, 0.1]])),
            ("in_anchors_rel", &rel([[0.7, 0.7], [0.3, 0.9]])),
            ("out_anchors_rel", &rel([[0.3, 0.6], [0.29, 0.0]])),
        ];
        let (_, _, regions) = plan(&mut m, &[x.meta()], &args).unwrap();
        assert_eq!((regions[0].in_anchor, regions[0].shape, regions[0].out_anchor), ([7, 7], [3, 3], [3, 6]));
        assert_eq!((regions[1].in_anchor, regions[1].shape, regions[1].out_anchor), ([3, 9], [7, 1], [2, 0]));
        // Out of [0, 1] (or NaN): an error naming the argument, the sample and the region.
        let bad = rel([[0.0, 0.0], [0.5, f32::NAN]]);
        let mut m = op(vec![], &["in_ids", "shapes_rel"]).unwrap();
        let e = err(plan(&mut m, &[x.meta()], &[("in_ids", &ids(&[&[0], &[1]])), ("shapes_rel", &bad)]).unwrap_err());
        assert!(e.contains("multi_paste") && e.contains("'shapes_rel'") && e.contains("sample 1") && e.contains("must be floats in [0, 1] range,"), "{e}");
    }

    #[test]
    fn positional_inputs_sequences_dtype_and_source_info() {
        let a = image::<i16>(&[[4, 5, 2], [4, 5, 2]], |k| k as i16);
        let b = image::<i16>(&[[4, 5, 2], [4, 5, 2]], |k| -(k as i16));
        let mut m = op(vec![("dtype", ArgValue::Int(DType::F32 as i64)), ("shapes", ArgValue::IntList(vec![2, 2, 1, 3]))], &[]).unwrap();
        let (meta, samples, regions) = plan(&mut m, &[a.meta(), b.meta()], &[]).unwrap();
        assert_eq!((meta.dtype(), meta.shape(1)), (DType::F32, &[4, 5, 2][..]));
        assert_eq!(samples[1].regions, 2..4);
        assert_eq!((regions[3].input, regions[3].sample, regions[3].shape), (1, 1, [1, 3]));
        // A constant of the wrong length names the sample.
        let mut m = op(vec![("shapes", ArgValue::IntList(vec![2, 2]))], &[]).unwrap();
        let e = err(plan(&mut m, &[a.meta(), b.meta()], &[]).unwrap_err());
        assert!(e.contains("'shapes'") && e.contains("sample 0") && e.contains("expected 4"), "{e}");
        // Sequences: positional only.
        let s = TensorList::from_samples(&[vec![3, 4, 5, 1]], &[vec![0u8; 60]]).with_layout("FHWC");
        let mut m = op(vec![], &[]).unwrap();
        let (meta, samples, _) = plan(&mut m, &[s.meta(), s.meta()], &[]).unwrap();
        assert_eq!((meta.shape(0), meta.layout().as_str(), samples[0].frames), (&[3, 4, 5, 1][..], "FHWC", 3));
        let mut m = op(vec![("in_ids", ArgValue::IntList(vec![0]))], &[]).unwrap();
        let e = err(plan(&mut m, &[s.meta()], &[]).unwrap_err());
        assert!(e.contains("'in_ids'") && e.contains("sequence"), "{e}");
        // Source infos joined with ';', empty ones left out.
        let mut x = image::<u8>(&[[2, 2, 1], [2, 2, 1]], |k| k as u8);
        x.set_source_info(vec!["a.jpg".into(), "".into()]);
        let mut m = op(vec![], &["in_ids"]).unwrap();
        let (meta, _, _) = plan(&mut m, &[x.meta()], &[("in_ids", &ids(&[&[0, 1, 0], &[1]]))]).unwrap();
        assert_eq!((meta.source_info(0), meta.source_info(1)), ("a.jpg;a.jpg", ""));
    }

    #[test]
    fn plans_refuse_bad_regions_ids_and_inputs_and_go_on() {
        let x = image::<u8>(&[[10, 10, 1], [10, 10, 1]], |k| k as u8);
        let run_plan = |given: Vec<(&str, ArgValue)>, args: &[(&'static str, &TensorList)], xs: &[&BatchMeta]| {
            let names: Vec<&str> = args.iter().map(|a| a.0).collect();
            let mut m = op(given, &names)?;
            plan(&mut m, xs, args).map(|_| ())
        };
        let cases: Vec<(Vec<(&str, ArgValue)>, Vec<(&'static str, TensorList)>, &str)> = vec![
            (vec![], vec![("in_ids", ids(&[&[0], &[1]])), ("in_anchors", rows(&[&[[0, 0]], &[[5, 5]]])), ("shapes", rows(&[&[[3, 3]], &[[6, 3]]]))], "'shapes'.*sample 1.*must be within input sample.*region at index 0"),
            (vec![], vec![("in_ids", ids(&[&[0], &[1]])), ("in_anchors", rows(&[&[[0, 0]], &[[-1, 0]]]))], "'in_anchors'.*sample 1.*must be within input sample"),
            (vec![], vec![("in_ids", ids(&[&[0], &[1]])), ("out_anchors", rows(&[&[[0, 0]], &[[0, 1]]]))], "'out_anchors'.*sample 1.*must be within output bounds"),
            (vec![("output_size", ArgValue::IntList(vec![5, 5]))], vec![], "'output_size'.*sample 0.*must be within output bounds"),
            (vec![], vec![("in_ids", ids(&[&[0], &[2]]))], "'in_ids'.*sample 1.*Got in_idx: 2. Input batch size is: 2"),
            (vec![], vec![("in_ids", ids(&[&[-1], &[0]]))], "'in_ids'.*sample 0.*Got in_idx: -1"),
            (vec![], vec![("in_ids", ids(&[&[0], &[1]])), ("shapes", rows(&[&[[1, 1]], &[[1, 1], [2, 2]]]))], "'shapes'.*sample 1.*\\[1, 2\\].*\\[2, 2\\]"),
            (vec![], vec![("output_size", ids(&[&[10, 10], &[-1, 3]]))], "'output_size'.*sample 1.*non-negative"),
            (vec![], vec![("output_size", ids(&[&[3], &[3, 3]]))], "'output_size'.*sample 0.*got 1 elements"),
        ];
        for (given, args, pattern) in cases {
            let args: Vec<(&'static str, &TensorList)> = args.iter().map(|(k, v)| (*k, v)).collect();
            let e = err(run_plan(given, &args, &[x.meta()]).unwrap_err());
            let re = regex_lite(pattern);
            assert!(e.contains("multi_paste") && re(&e), "{pattern}: {e}");
        }
        // Both forms of one argument: refused when built.
        assert!(err(op(vec![("in_anchors", ArgValue::IntList(vec![0, 0]))], &["in_anchors_rel"]).err().unwrap()).contains("cannot be specified together"));
        assert!(err(op(vec![("dtype", ArgValue::Int(DType::U16 as i64))], &[]).err().unwrap()).contains("Unsupported output type: UINT16"));
        // Inputs: sizes differ without output_size, types differ, in_ids with 2 inputs,
        // channels differ, layouts.
        let small = image::<u8>(&[[10, 10, 1], [5, 10, 1]], |k| k as u8);
        assert!(err(run_plan(vec![], &[], &[small.meta()]).unwrap_err()).contains("same shape"));
        let wide = image::<i16>(&[[10, 10, 1], [10, 10, 1]], |k| k as i16);
        assert!(err(run_plan(vec![], &[], &[x.meta(), wide.meta()]).unwrap_err()).contains("same data type"));
        assert!(err(run_plan(vec![("in_ids", ArgValue::IntList(vec![0]))], &[], &[x.meta(), x.meta()]).unwrap_err()).contains("exactly one positional input"));
        let mixed = image::<u8>(&[[10, 10, 1], [10, 10, 2]], |k| k as u8);
        let e = err(run_plan(vec![], &[("in_ids", &ids(&[&[0, 1], &[1]]))], &[mixed.meta()]).unwrap_err());
        assert!(e.contains("same number of channels") && e.contains("sample 0"), "{e}");
        let chw = image::<u8>(&[[3, 4, 5]], |k| k as u8).with_layout("CHW");
        assert!(err(run_plan(vec![], &[], &[chw.meta()]).unwrap_err()).contains("layout \"CHW\""));
        let u16s = TensorList::from_samples(&[vec![2, 2, 1]], &[vec![0u16; 4]]).with_layout("HWC");
        assert!(err(run_plan(vec![], &[], &[u16s.meta()]).unwrap_err()).contains("Unsupported input type: UINT16"));
        // Still plans a good batch after the errors (the plan's state is reset each time).
        let mut m = op(vec![], &["in_ids"]).unwrap();
        assert!(plan(&mut m, &[x.meta()], &[("in_ids", &ids(&[&[0], &[2]]))]).is_err());
        let (_, samples, regions) = plan(&mut m, &[x.meta()], &[("in_ids", &ids(&[&[1], &[0, 1]]))]).unwrap();
        assert_eq!((samples.len(), regions.len(), samples[1].regions.clone()), (2, 3, 1..3));
    }

    /// A tiny matcher for the patterns above: literal pieces separated by ".*", "\\[" for '['.
    fn regex_lite(pattern: &str) -> impl Fn(&str) -> bool + '_ {
        move |s: &str| {
            let mut rest = s;
            for piece in pattern.split(".*") {
                let piece = piece.replace("\\[", "[").replace("\\]", "]");
                match rest.find(&piece) {
                    Some(p) => rest = &rest[p + piece.len()..],
                    None => return false,
                }
            }
            true
        }
    }

    #[test]
    fn conversions_are_dalis() {
        // DALI 2.4's multi_paste outputs for these FLOAT inputs (dtype UINT8, INT16, INT32).
        let v = [2.5f32, 3.5, -1.5, 300.7, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.5, -0.5, 3e9, -3e9, 2147483520.0, 2147483648.0, 32767.5];
        let u8s: Vec<u8> = v.iter().map(|&x| convert::<f32, u8>(x)).collect();
        assert_eq!(u8s, [3, 4, 0, 255, 0, 255, 0, 1, 0, 255, 0, 255, 255, 255]);
        let i16s: Vec<i16> = v.iter().map(|&x| convert::<f32, i16>(x)).collect();
        assert_eq!(i16s, [3, 4, -2, 301, 0, 32767, -32768, 1, -1, 32767, -32768, 32767, 32767, 32767]);
        let i32s: Vec<i32> = v.iter().map(|&x| convert::<f32, i32>(x)).collect();
        assert_eq!(i32s, [3, 4, -2, 301, i32::MIN, i32::MAX, i32::MIN, 1, -1, i32::MAX, i32::MIN, 2147483520, i32::MAX, 32768]);
        // INT32 to FLOAT rounds to nearest even; to narrower integers saturates.
        assert_eq!(convert::<i32, f32>(16777217), 16777216.0);
        assert_eq!(convert::<i32, f32>(2147483583), 2147483520.0);
        assert_eq!(convert::<i32, i16>(-70000), -32768);
        assert_eq!(convert::<i32, u8>(256), 255);
        assert_eq!(convert::<i16, u8>(-1), 0);
    }

    #[test]
    fn the_cpu_backend_pastes_in_order_over_zeros() {
        // Two overlapping regions into sample 0: the later wins; sample 1 gets nothing.
        let x = TensorList::from_samples(&[vec![4, 5, 1], vec![4, 5, 1]], &[(1..=20u8).collect(), (101..=120u8).collect()]).with_layout("HWC");
        let mut m = op(vec![("output_size", ArgValue::IntList(vec![4, 6]))], &["in_ids", "in_anchors", "shapes", "out_anchors"]).unwrap();
        let args = [
            ("in_ids", &ids(&[&[0, 1], &[]])),
            ("in_anchors", &rows(&[&[[0, 0], [1, 1]], &[]])),
            ("shapes", &rows(&[&[[3, 3], [2, 2]], &[]])),
            ("out_anchors", &rows(&[&[[0, 0], [1, 2]], &[]])),
        ];
        let out = run(&mut m, &[&x], &args).unwrap();
        let got: Vec<u8> = out.bytes(0).to_vec();
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            1, 2, 3, 0, 0, 0,
            6, 7, 107, 108, 0, 0,
            11, 12, 112, 113, 0, 0,
            0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(got, want);
        assert!(out.bytes(1).iter().all(|&b| b == 0));
        assert_eq!(out.shape(1), &[4, 6, 1]);
        // FLOAT copied as bits; to INT32 with NaN as x86 converts.
        let bits = [0x7fc1_2345u32, 0x7f80_0001, 0x8000_0000, 0x3fc0_0000];
        let f = TensorList::from_samples(&[vec![1, 4, 1]], &[bits.map(f32::from_bits).to_vec()]).with_layout("HWC");
        let mut m = op(vec![], &[]).unwrap();
        let out = run(&mut m, &[&f], &[]).unwrap();
        let got: Vec<u32> = out.bytes(0).chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())).collect();
        assert_eq!(got, bits);
        let mut m = op(vec![("dtype", ArgValue::Int(DType::I32 as i64))], &[]).unwrap();
        let out = run(&mut m, &[&f], &[]).unwrap();
        let got: Vec<i32> = out.bytes(0).chunks_exact(4).map(|w| i32::from_le_bytes(w.try_into().unwrap())).collect();
        assert_eq!(got, [i32::MIN, i32::MIN, 0, 2]);
        // Sequences: frame by frame.
        let s = TensorList::from_samples(&[vec![2, 1, 2, 1]], &[vec![1u8, 2, 3, 4]]).with_layout("FHWC");
        let t = TensorList::from_samples(&[vec![2, 1, 2, 1]], &[vec![5u8, 6, 7, 8]]).with_layout("FHWC");
        let mut m = op(vec![("shapes", ArgValue::IntList(vec![1, 2, 1, 1])), ("out_anchors", ArgValue::IntList(vec![0, 0, 0, 1]))], &[]).unwrap();
        let out = run(&mut m, &[&s, &t], &[]).unwrap();
        assert_eq!(out.bytes(0), &[1, 5, 3, 7]);
    }
}
