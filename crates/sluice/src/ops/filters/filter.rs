//! `fn.filter` (and its deprecated alias `fn.experimental.filter`): a 2-D correlation of
//! every channel plane with a per-sample kernel (the second input), as DALI 2.4's cpu
//! operator (OpenCV's `filter2D`) defines it:
//!
//! - `out[y, x] = sum over the kernel's non-zero taps (row-major) of k[i, j] * P[y - ay + i,
//!   x - ax + j]`, with `P` the input extended by `border` (`reflect_101`, `reflect_1001`,
//!   `clamp`, `wrap`, `constant` with the optional third input as the fill, else 0) and the
//!   anchor (`ay`, `ax`) the kernel's centre unless given. `mode="valid"` keeps the points whose
//!   window lies inside the image.
//! - f32 accumulation from +0.0, one multiply and one add per tap; integer outputs round half
//!   to even (OpenCV's `cvRound`; values past 2^31 or NaN become INT_MIN first) and saturate.
//!
//! Sluice's sums are the same on every machine and on both backends. DALI's are not: its
//! OpenCV fuses multiply-adds on part of each row where the CPU has AVX2, and sums kernels of
//! 50 (130 for u8 -> u8 and f32 -> f32) taps or more through an FFT. So Sluice equals DALI
//! exactly in most cases and within 1 (integers) or a relative 1e-5 (floats) in the others
//! (`tests/test_filters.py`). DALI's quirks kept out: with a non-zero fill, DALI pads a
//! fourth channel with 0 and fails past four channels; Sluice fills every channel.

use super::gpu::FilterGpu;
use super::separable::reflect101;
use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::channel::{avx2_twin, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, TensorList};

const ARGS: &[ArgSchema] = &[
    tensor_arg("anchor", T::IntList, D::IntList(&[-1]), "The kernel point (row, column) placed over each output point; -1 on an axis means the centre (extent // 2).").per_frame(),
    arg("border", T::Str, D::Str("reflect_101"), "How the input extends past its edges: reflect_101, reflect_1001, clamp, wrap or constant (the third input, else 0)."),
    arg("mode", T::Str, D::Str("same"), "same: the output has the input's size; valid: only the points whose window lies inside the input."),
    arg("dtype", T::DType, D::Optional, "Output type: the input type (default) or FLOAT."),
];

const fn schema(name: &'static str, doc: &'static str) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 2,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[1, 2],
        args: &[ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.filter`.
pub static FILTER: OpDef = OpDef {
    schema: schema("Filter", "Convolves (correlates) images with a 2-D kernel per sample: inputs data, filter (FLOAT, kh x kw) and optionally fill_value (a scalar of the data type for border='constant')."),
    cpu: Some(|ctx| Ok(Box::new(Filter::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(FilterGpu::new(Filter::new(ctx)?)))),
};

/// `fn.experimental.filter`: DALI keeps it as a deprecated alias of `fn.filter`.
pub static EXPERIMENTAL_FILTER: OpDef = OpDef {
    schema: schema("experimental__Filter", "Deprecated alias of fn.filter (the operator left the experimental phase)."),
    cpu: Some(|ctx| Ok(Box::new(Filter::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(FilterGpu::new(Filter::new(ctx)?)))),
};

/// What lies past the input's edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Border {
    Reflect101 = 0,
    Reflect1001 = 1,
    Clamp = 2,
    Wrap = 3,
    Constant = 4,
}

impl Border {
    /// The input index that stands for `p` on an axis of `n` points; `None`: the fill.
    #[inline]
    pub fn index(self, p: i64, n: i64) -> Option<usize> {
        if (0..n).contains(&p) {
            return Some(p as usize);
        }
        match self {
            Border::Reflect101 => Some(reflect101(p, n)),
            Border::Reflect1001 => {
                let mut p = p;
                loop {
                    if p < 0 {
                        p = -p - 1;
                    } else if p >= n {
                        p = 2 * n - 1 - p;
                    } else {
                        return Some(p as usize);
                    }
                }
            }
            Border::Clamp => Some(p.clamp(0, n - 1) as usize),
            Border::Wrap => Some(p.rem_euclid(n) as usize),
            Border::Constant => None,
        }
    }
}

/// The input types the operator takes.
const TYPES: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16, DType::F32];

/// One sample's plan: anchor, kernel taps and fill.
#[derive(Debug, Clone)]
pub struct SamplePlan {
    pub anchor: (usize, usize),
    pub kernel: (usize, usize),
    /// Non-zero taps, row-major: (row, column, weight). Never empty.
    pub taps: Vec<(u32, u32, f32)>,
    /// The taps as 16-bit integers, when they qualify (see [`integer_taps`]): UINT8 to
    /// UINT8 samples sum with them.
    pub int_taps: Option<Vec<(u32, u32, i16)>>,
    pub fill: f32,
}

impl SamplePlan {
    pub fn new(anchor: (usize, usize), kernel: (usize, usize), taps: Vec<(u32, u32, f32)>, fill: f32) -> SamplePlan {
        SamplePlan { anchor, kernel, int_taps: integer_taps(&taps), taps, fill }
    }
}

pub struct Filter {
    pub(super) ctx: OpContext,
    pub(super) border: Border,
    pub(super) valid: bool,
    dtype: Option<DType>,
}

/// The batch's dimensions: `lead` slice dimensions, H, W, then channels when `channels`.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub lead: usize,
    pub channels: bool,
}

impl Geometry {
    /// (slices, H, W, C) of a sample.
    pub fn split(self, shape: &[usize]) -> (usize, usize, usize, usize) {
        let slices = shape[..self.lead].iter().product();
        let c = if self.channels { shape[shape.len() - 1] } else { 1 };
        (slices, shape[self.lead], shape[self.lead + 1], c)
    }
}

impl Filter {
    fn new(ctx: &OpContext) -> Result<Filter> {
        let name = &ctx.display_name;
        let border = match ctx.args.str("border").to_lowercase().as_str() {
            "reflect_101" | "reflect101" | "101" => Border::Reflect101,
            "reflect_1001" | "reflect1001" | "1001" => Border::Reflect1001,
            "clamp" => Border::Clamp,
            "wrap" => Border::Wrap,
            "constant" | "const" | "fill" => Border::Constant,
            b => return Err(Error::arg(name, "border", format!("unknown border type {b:?}: use reflect_101, reflect_1001, clamp, wrap or constant"))),
        };
        let valid = match ctx.args.str("mode").to_lowercase().as_str() {
            "same" => false,
            "valid" => true,
            m => return Err(Error::arg(name, "mode", format!("unknown mode {m:?}: the modes are same and valid"))),
        };
        let dtype = ctx.args.has("dtype").then(|| ctx.args.dtype("dtype"));
        Ok(Filter { ctx: ctx.clone(), border, valid, dtype })
    }

    /// Checks the batch, reads every sample's kernel, anchor and fill into `plans`, and
    /// describes the output. Shared by both backends.
    pub(super) fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta, kernels: &TensorList, fills: Option<&TensorList>, plans: &mut Vec<SamplePlan>) -> Result<(BatchMeta, Geometry, DType, DType)> {
        let name = &self.ctx.display_name;
        let layout = input.layout().as_str();
        let geometry = if layout.is_empty() {
            if input.ndim() != 2 {
                return Err(Error::type_mismatch(name, format!("input 0: {} dimensions without a layout; give images a layout (HW, HWC, CHW, FHWC...)", input.ndim())));
            }
            Geometry { lead: 0, channels: false }
        } else {
            let b = layout.as_bytes();
            if b.iter().position(|&c| c == b'F').is_some_and(|p| p != 0) {
                return Err(Error::type_mismatch(name, format!("input 0: frames must be the outermost dimension, got layout {layout}")));
            }
            let lead = b.iter().take_while(|&&c| c == b'F' || c == b'C').count();
            let channels = b.len() > lead && b[b.len() - 1] == b'C';
            let spatial = b.len() - lead - channels as usize;
            if lead > 2 || spatial != 2 || layout[lead..lead + spatial].contains(['F', 'C']) {
                return Err(Error::type_mismatch(name, format!("input 0: unsupported layout {layout}: expected up to two F/C dimensions, two spatial ones, then optional channels (HW, HWC, CHW, FHWC, FCHW)")));
            }
            Geometry { lead, channels }
        };
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if out_type != in_type && out_type != DType::F32 {
            return Err(Error::arg(name, "dtype", format!("the output type must be the input type ({in_type}) or FLOAT, got {out_type}")));
        }
        let n = input.len();
        if !TYPES.contains(&in_type) && n > 0 {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {in_type}; supported: UINT8, INT8, UINT16, INT16, FLOAT")));
        }
        if kernels.dtype() != DType::F32 {
            return Err(Error::type_mismatch(name, format!("input 1 (filter): must be FLOAT, got {}", kernels.dtype())));
        }
        if kernels.len() != n {
            return Err(Error::type_mismatch(name, format!("input 1 (filter): {} kernels for {n} samples", kernels.len())));
        }
        let anchor = ws.per_sample_list(&self.ctx, "anchor");
        let mut abuf = [0.0; MAX_LIST];
        plans.clear();
        let mut shapes = Vec::with_capacity(n);
        for i in 0..n {
            let ks = kernels.shape(i);
            if ks.len() != 2 {
                return Err(Error::type_mismatch(name, format!("input 1 (filter): sample {i}: the kernel must be 2-D (kh x kw), got shape {ks:?}")));
            }
            let (kh, kw) = (ks[0], ks[1]);
            if kh == 0 || kw == 0 {
                return Err(Error::type_mismatch(name, format!("input 1 (filter): sample {i}: the kernel has no taps (shape {ks:?})")));
            }
            let a = anchor.get(name, "anchor", i, &[1, 2], &mut abuf)?.unwrap_or(&[-1.0]);
            let (a0, a1) = if a.len() == 1 { (a[0], a[0]) } else { (a[0], a[1]) };
            let resolve = |v: f64, k: usize| -> Result<usize> {
                if v == -1.0 {
                    Ok(k / 2)
                } else if v >= 0.0 && (v as usize) < k {
                    Ok(v as usize)
                } else {
                    Err(Error::arg(name, "anchor", format!("must lie within the filter: got ({a0}, {a1}) for a {kh} x {kw} filter in sample {i}")))
                }
            };
            let anchor = (resolve(a0, kh)?, resolve(a1, kw)?);
            let mut taps = Vec::new();
            for r in 0..kh {
                for c in 0..kw {
                    let w = element_as_f64(kernels, i, r * kw + c) as f32;
                    if w != 0.0 {
                        taps.push((r as u32, c as u32, w));
                    }
                }
            }
            if taps.is_empty() {
                taps.push((0, 0, 0.0)); // OpenCV keeps one tap of an all-zero kernel
            }
            let fill = match fills {
                Some(f) if self.border == Border::Constant => {
                    if f.numel(i) != 1 || f.dtype() != in_type {
                        return Err(Error::type_mismatch(name, format!("input 2 (fill_value): sample {i}: must be one value of the input type ({in_type}), got {} of shape {:?}", f.dtype(), f.shape(i))));
                    }
                    element_as_f64(f, i, 0) as f32
                }
                _ => 0.0,
            };
            let mut shape = input.shape(i).to_vec();
            if self.valid {
                let (h, w) = (shape[geometry.lead], shape[geometry.lead + 1]);
                if h < kh || w < kw {
                    return Err(Error::data(self.ctx.at(ws.iteration, i, input.source_info(i)), format!("the filter ({kh} x {kw}) is bigger than the sample ({h} x {w}), which mode='valid' does not allow")));
                }
                shape[geometry.lead] = h - kh + 1;
                shape[geometry.lead + 1] = w - kw + 1;
            }
            shapes.push(shape);
            plans.push(SamplePlan::new(anchor, (kh, kw), taps, fill));
        }
        let mut meta = BatchMeta::new(out_type, input.ndim(), shapes.iter().map(|s| &s[..]));
        meta.set_layout(input.layout().clone());
        meta.inherit_source_info(input);
        Ok((meta, geometry, in_type, out_type))
    }
}

/// OpenCV's `saturate_cast<T>(float)`: `cvRound` (half to even; past the int range or NaN it
/// gives INT_MIN), then saturation. Floats pass through.
#[inline(always)]
pub fn cv_round<O: Channel>(v: f32) -> O {
    if O::DTYPE == DType::F32 {
        return O::sat_f32(v);
    }
    let i = if v.is_nan() || v.abs() >= 2_147_483_648.0 {
        i32::MIN as f32
    } else if v.abs() < 4_194_304.0 {
        // Below 2^22, adding and taking away 1.5 * 2^23 rounds to an integer, ties to even,
        // in the default rounding mode: no libm call (x86-64's baseline has no `roundps`).
        (v + 12_582_912.0) - 12_582_912.0
    } else {
        v.round_ties_even()
    };
    O::sat_f32(i)
}

/// One output row: every tap's products added to the sums in kernel order, then rounded.
/// `starts[t]` is where tap `t`'s run of inputs for this row begins in the ring of padded
/// rows.
#[inline(always)]
fn filter_row<O: Channel>(out: &mut [O], acc: &mut [f32], ring: &[f32], starts: &[usize], taps: &[(u32, u32, f32)]) {
    // Blocks of the row stay in registers across the taps.
    const BLOCK: usize = 64;
    let n = out.len();
    let full = n / BLOCK * BLOCK;
    for start in (0..full).step_by(BLOCK) {
        // A block of constant length: the sums stay in vector registers across the taps.
        let mut sums = [0.0f32; BLOCK];
        for (&(_, _, k), &at) in taps.iter().zip(starts) {
            let row: &[f32; BLOCK] = ring[at + start..][..BLOCK].try_into().unwrap();
            for (a, &v) in sums.iter_mut().zip(row) {
                *a += k * v;
            }
        }
        acc[start..start + BLOCK].copy_from_slice(&sums);
    }
    if full < n {
        let len = n - full;
        let mut sums = [0.0f32; BLOCK];
        for (&(_, _, k), &at) in taps.iter().zip(starts) {
            let row = &ring[at + full..][..len];
            for (a, &v) in sums[..len].iter_mut().zip(row) {
                *a += k * v;
            }
        }
        acc[full..n].copy_from_slice(&sums[..len]);
    }
    cv_round_row(out, acc);
}

/// [`cv_round`] over a row, as vector code: the output types are at most 16 bits, so values
/// are clamped to +-2^22 (where the rounding trick is exact) before rounding; the INT_MIN
/// quirk past 2^31 is a select.
#[inline(always)]
fn cv_round_row<O: Channel>(out: &mut [O], sums: &[f32]) {
    if O::DTYPE == DType::F32 {
        for (o, &v) in out.iter_mut().zip(sums) {
            *o = O::sat_f32(v);
        }
        return;
    }
    #[inline(always)]
    fn round<T: Copy>(out: &mut [T], sums: &[f32], (lo, hi): (f32, f32), narrow: impl Fn(i32) -> T) {
        for (o, &v) in out.iter_mut().zip(sums) {
            let r = (v.clamp(-4_194_304.0, 4_194_304.0) + 12_582_912.0) - 12_582_912.0;
            let r = if v.abs() < 2_147_483_648.0 { r } else { -2_147_483_648.0 };
            // Saturated in f32 first, so the conversion to i32 is exact and needs no range
            // checks: one vector instruction for 8 values.
            // SAFETY: `r` is finite (NaN became INT_MIN above) and clamped into the i32 range.
            *o = narrow(unsafe { r.clamp(lo, hi).to_int_unchecked::<i32>() });
        }
    }
    match O::DTYPE {
        DType::U8 => round(bytemuck::cast_slice_mut::<O, u8>(out), sums, (0.0, 255.0), |v| v as u8),
        DType::I8 => round(bytemuck::cast_slice_mut::<O, i8>(out), sums, (-128.0, 127.0), |v| v as i8),
        DType::U16 => round(bytemuck::cast_slice_mut::<O, u16>(out), sums, (0.0, 65535.0), |v| v as u16),
        DType::I16 => round(bytemuck::cast_slice_mut::<O, i16>(out), sums, (-32768.0, 32767.0), |v| v as i16),
        other => unreachable!("filter outputs are 8 or 16 bits, or FLOAT; got {other}"),
    }
}

impl Operator for Filter {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut plans = Vec::new();
        let (meta, geometry, in_type, out_type) = self.plan(ws, input.meta(), ws.inputs[1], ws.inputs.get(2).copied(), &mut plans)?;
        let mut out = TensorList::for_overwrite(meta);
        let (plans, border, valid) = (&plans, self.border, self.valid);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let dims = geometry.split(input.shape(i));
            let job = Job { dst, src: input.bytes(i), dims, plan: &plans[i], border, valid };
            crate::tensor::channel::dispatch_same_or_float(in_type, out_type, job).expect("types checked by plan");
            Ok(())
        })?;
        Ok(vec![out])
    }
}

struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    dims: (usize, usize, usize, usize),
    plan: &'a SamplePlan,
    border: Border,
    valid: bool,
}

impl PairKernel for Job<'_> {
    type Output = ();

    /// Pads each plane into f32 rows as they are needed (the border rule applied once per
    /// padded point), then adds the taps one by one over whole output rows: every output
    /// point still sums its taps in kernel order.
    fn run<I: Channel, O: Channel>(self) {
        let src: &[I] = bytemuck::cast_slice(self.src);
        let dst: &mut [O] = bytemuck::cast_slice_mut(self.dst);
        let (slices, h, w, c) = self.dims;
        let p = self.plan;
        let (kh, kw) = p.kernel;
        let (oh, ow) = if self.valid { (h + 1 - kh, w + 1 - kw) } else { (h, w) };
        let (ay, ax) = if self.valid { (0, 0) } else { p.anchor };
        let pw = ow + kw - 1;
        if oh * ow * c * slices == 0 {
            return;
        }
        thread_local! {
            /// The ring of padded rows, a row of sums, the column map and the taps' starts:
            /// reused by every sample a worker runs.
            static SCRATCH: std::cell::RefCell<(Scratch, Vec<Option<usize>>)> = std::cell::RefCell::new(Default::default());
        }
        let int_taps = if I::DTYPE == DType::U8 && O::DTYPE == DType::U8 { p.int_taps.as_deref() } else { None };
        SCRATCH.with(|scratch| {
            let (scratch, columns) = &mut *scratch.borrow_mut();
            match int_taps {
                Some(_) => scratch.ring_u8.resize(kh * pw * c, 0),
                None => scratch.ring.resize(kh * pw * c, 0.0),
            }
            scratch.acc.resize(ow * c, 0.0);
            // The source column of every padded column, once per sample.
            columns.clear();
            columns.extend((0..pw).map(|px| if self.valid { Some(px) } else { self.border.index(px as i64 - ax as i64, w as i64) }));
            let padding = Padding { columns, w, c, ay, valid: self.valid, border: self.border, fill: p.fill, x0: if self.valid { 0 } else { ax.min(pw) } };
            let geometry = SliceGeometry { h, c, oh, ow, kh, pw };
            for s in 0..slices {
                let (src, dst) = (&src[s * h * w * c..(s + 1) * h * w * c], &mut dst[s * oh * ow * c..(s + 1) * oh * ow * c]);
                let taps = match int_taps {
                    Some(taps) => Taps::Int(taps),
                    None => Taps::Float(&p.taps),
                };
                filter_slice(dst, src, scratch, &padding, geometry, taps);
            }
        });
    }
}

/// How the padded rows are made from the source rows.
struct Padding<'a> {
    /// The source column of each padded column (`None`: the fill).
    columns: &'a [Option<usize>],
    w: usize,
    c: usize,
    ay: usize,
    valid: bool,
    border: Border,
    fill: f32,
    /// The padded column of source column 0.
    x0: usize,
}

impl Padding<'_> {
    /// Padded row `py` of a slice, each value `convert`ed (the fill is `fill`).
    #[inline(always)]
    fn row<I: Channel, P: Copy>(&self, prow: &mut [P], py: usize, src: &[I], h: usize, convert: impl Fn(I) -> P, fill: P) {
        let (w, c) = (self.w, self.c);
        let sy = if self.valid { Some(py) } else { self.border.index(py as i64 - self.ay as i64, h as i64) };
        let Some(y) = sy else {
            prow.fill(fill);
            return;
        };
        let pw = self.columns.len();
        let srow = &src[y * w * c..(y + 1) * w * c];
        // The columns that map straight onto the source row (`x0..x0 + w` in the padded row
        // holds source columns 0..w): converted in one run; the border ones one by one.
        let inner = if self.valid { w } else { w.min(pw - self.x0) };
        for (d, &v) in prow[self.x0 * c..(self.x0 + inner) * c].iter_mut().zip(&srow[..inner * c]) {
            *d = convert(v);
        }
        for px in (0..self.x0).chain(self.x0 + inner..pw) {
            let at = px * c;
            match self.columns[px] {
                Some(x) => {
                    for k in 0..c {
                        prow[at + k] = convert(srow[x * c + k]);
                    }
                }
                None => prow[at..at + c].fill(fill),
            }
        }
    }
}

/// A worker's reusable buffers.
#[derive(Default)]
struct Scratch {
    /// The ring of padded rows (f32 sums).
    ring: Vec<f32>,
    /// The ring of padded rows (16-bit integer sums).
    ring_u8: Vec<u8>,
    /// A row of f32 sums.
    acc: Vec<f32>,
    /// Where each tap's run of inputs for the current row begins in the ring.
    starts: Vec<usize>,
}

/// The taps of a sample, as the sums run them.
enum Taps<'a> {
    Float(&'a [(u32, u32, f32)]),
    /// UINT8 to UINT8 with integer weights: see [`integer_taps`].
    Int(&'a [(u32, u32, i16)]),
}

/// The taps as 16-bit integers where they give the f32 sums exactly for UINT8 in and out:
/// every weight an integer and their absolute sum at most 128. Every partial sum is then an
/// integer of at most 128 * 255 < 2^15, which an f32 holds exactly, so the f32 path's sums
/// and rounding give the same bytes as 16-bit sums saturated to 0..255. Computed once per
/// sample when the batch is planned.
fn integer_taps(taps: &[(u32, u32, f32)]) -> Option<Vec<(u32, u32, i16)>> {
    let integers = taps.iter().all(|&(_, _, k)| k == k.trunc() && k.abs() <= 128.0);
    (integers && taps.iter().map(|&(_, _, k)| k.abs()).sum::<f32>() <= 128.0).then(|| taps.iter().map(|&(r, c, k)| (r, c, k as i16)).collect())
}

#[derive(Clone, Copy)]
struct SliceGeometry {
    h: usize,
    c: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    pw: usize,
}

avx2_twin!(
    /// One slice (an image, or a frame of a sequence): padded rows are made as the output rows
    /// need them, into a ring of `kh` rows that stays in cache. With AVX2 (checked once) the same
    /// code is compiled for 8-lane vectors: the arithmetic is identical (no fused multiply-adds
    /// either way).
    fn filter_slice<I: Channel, O: Channel>(dst: &mut [O], src: &[I], scratch: &mut Scratch, padding: &Padding<'_>, g: SliceGeometry, taps: Taps<'_>) => filter_slice_body
);

#[inline(always)]
fn filter_slice_body<I: Channel, O: Channel>(dst: &mut [O], src: &[I], scratch: &mut Scratch, padding: &Padding<'_>, g: SliceGeometry, taps: Taps<'_>) {
    let row_len = g.pw * g.c;
    let Scratch { ring, ring_u8, acc, starts } = scratch;
    let tap_starts = |starts: &mut Vec<usize>, y: usize, positions: &mut dyn Iterator<Item = (u32, u32)>| {
        starts.clear();
        starts.extend(positions.map(|(ti, tj)| ((y + ti as usize) % g.kh * g.pw + tj as usize) * g.c));
    };
    match taps {
        Taps::Float(taps) => {
            let pad = |ring: &mut [f32], py: usize| padding.row(&mut ring[(py % g.kh) * row_len..][..row_len], py, src, g.h, I::to_f32, padding.fill);
            (0..g.kh - 1).for_each(|py| pad(ring, py));
            for (y, out) in dst.chunks_exact_mut(g.ow * g.c).enumerate().take(g.oh) {
                pad(ring, y + g.kh - 1);
                tap_starts(starts, y, &mut taps.iter().map(|&(ti, tj, _)| (ti, tj)));
                filter_row(out, acc, ring, starts, taps);
            }
        }
        Taps::Int(taps) => {
            let (src, dst): (&[u8], &mut [u8]) = (bytemuck::cast_slice(src), bytemuck::cast_slice_mut(dst));
            let pad = |ring: &mut [u8], py: usize| padding.row(&mut ring[(py % g.kh) * row_len..][..row_len], py, src, g.h, |v| v, padding.fill as u8);
            (0..g.kh - 1).for_each(|py| pad(ring_u8, py));
            for (y, out) in dst.chunks_exact_mut(g.ow * g.c).enumerate().take(g.oh) {
                pad(ring_u8, y + g.kh - 1);
                tap_starts(starts, y, &mut taps.iter().map(|&(ti, tj, _)| (ti, tj)));
                filter_row_int(out, ring_u8, starts, taps);
            }
        }
    }
}

/// [`filter_row`] for [`Taps::Int`]: 16-bit sums (16 lanes a vector), saturated to 0..255.
#[inline(always)]
fn filter_row_int(out: &mut [u8], ring: &[u8], starts: &[usize], taps: &[(u32, u32, i16)]) {
    const BLOCK: usize = 64;
    let n = out.len();
    let full = n / BLOCK * BLOCK;
    for start in (0..full).step_by(BLOCK) {
        let mut sums = [0i16; BLOCK];
        for (&(_, _, k), &at) in taps.iter().zip(starts) {
            let row: &[u8; BLOCK] = ring[at + start..][..BLOCK].try_into().unwrap();
            for (a, &v) in sums.iter_mut().zip(row) {
                *a = a.wrapping_add((v as i16).wrapping_mul(k));
            }
        }
        for (o, &a) in out[start..start + BLOCK].iter_mut().zip(&sums) {
            *o = a.clamp(0, 255) as u8;
        }
    }
    for x in full..n {
        let sum = taps.iter().zip(starts).fold(0i16, |a, (&(_, _, k), &at)| a + ring[at + x] as i16 * k);
        out[x] = sum.clamp(0, 255) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borders_index_as_opencv() {
        let idx = |b: Border| (-4..9).map(|p| b.index(p, 5).map_or(-1, |v| v as i64)).collect::<Vec<_>>();
        assert_eq!(idx(Border::Reflect101), vec![4, 3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1, 0]);
        assert_eq!(idx(Border::Reflect1001), vec![3, 2, 1, 0, 0, 1, 2, 3, 4, 4, 3, 2, 1]);
        assert_eq!(idx(Border::Clamp), vec![0, 0, 0, 0, 0, 1, 2, 3, 4, 4, 4, 4, 4]);
        assert_eq!(idx(Border::Wrap), vec![1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3]);
        assert_eq!(idx(Border::Constant), vec![-1, -1, -1, -1, 0, 1, 2, 3, 4, -1, -1, -1, -1]);
    }

    /// UINT8 filters with integer weights take 16-bit sums; they equal the f32 sums (here
    /// the FLOAT output, rounded as the u8 output is) for every border, anchor and mode.
    #[test]
    fn integer_sums_equal_the_float_sums() {
        let (h, w, c) = (13usize, 70usize, 3usize);
        let src: Vec<u8> = (0..h * w * c).map(|v| (v * 97 % 256) as u8).collect();
        let kernels: [(usize, usize, &[f32]); 4] = [
            (3, 3, &[0.0, -1.0, 0.0, -1.0, 5.0, -1.0, 0.0, -1.0, 0.0]),
            (1, 5, &[1.0, -4.0, 6.0, -4.0, 1.0]),
            (2, 3, &[-2.0, 0.0, 2.0, 100.0, -3.0, 0.0]),
            (4, 1, &[0.0, 0.0, 0.0, 0.0]),
        ];
        for (kh, kw, k) in kernels {
            let mut taps: Vec<_> = (0..kh * kw).filter(|&t| k[t] != 0.0).map(|t| ((t / kw) as u32, (t % kw) as u32, k[t])).collect();
            if taps.is_empty() {
                taps.push((0, 0, 0.0));
            }
            assert!(integer_taps(&taps).is_some());
            for border in [Border::Reflect101, Border::Clamp, Border::Wrap, Border::Constant] {
                for (valid, anchor) in [(false, (kh / 2, kw / 2)), (false, (kh - 1, 0)), (true, (0, 0))] {
                    let plan = SamplePlan::new(anchor, (kh, kw), taps.clone(), 7.0);
                    let (oh, ow) = if valid { (h + 1 - kh, w + 1 - kw) } else { (h, w) };
                    let mut bytes = vec![0u8; oh * ow * c];
                    let mut floats = vec![0u8; oh * ow * c * 4];
                    Job { dst: &mut bytes, src: &src, dims: (1, h, w, c), plan: &plan, border, valid }.run::<u8, u8>();
                    Job { dst: &mut floats, src: &src, dims: (1, h, w, c), plan: &plan, border, valid }.run::<u8, f32>();
                    let want: Vec<u8> = bytemuck::cast_slice::<u8, f32>(&floats).iter().map(|&v| cv_round::<u8>(v)).collect();
                    assert_eq!(bytes, want, "{kh}x{kw} {border:?} valid={valid} anchor={anchor:?}");
                }
            }
        }
        // Fractional weights, or too large a sum, stay on the f32 path.
        assert!(integer_taps(&[(0, 0, 0.5)]).is_none());
        assert!(integer_taps(&[(0, 0, 100.0), (0, 1, -29.0)]).is_none());
    }

    #[test]
    fn cv_round_is_half_even_with_the_int_min_quirk() {
        assert_eq!(cv_round::<u8>(0.5), 0);
        assert_eq!(cv_round::<u8>(1.5), 2);
        assert_eq!(cv_round::<u8>(2.5), 2);
        assert_eq!(cv_round::<u8>(300.0), 255);
        assert_eq!(cv_round::<u8>(2e10), 0);
        assert_eq!(cv_round::<i16>(-3e10), -32768);
        assert_eq!(cv_round::<i16>(2e6), 32767);
        let values = [-2.5f32, -1.5, -0.5, 0.49999997, 0.5000001, 3.5, 4.5, 254.5, 255.5, 4194303.5, 65535.5, -70000.5, 3e9, -3e9, f32::NAN, 1e7];
        for v in values {
            assert!(cv_round::<f32>(v).to_bits() == v.to_bits(), "floats pass: {v}");
            let want = if v.abs() < 2_147_483_648.0 { v.round_ties_even() as i32 } else { i32::MIN };
            assert_eq!(cv_round::<i32>(v), want, "{v}");
        }
        let (mut a, mut b) = (vec![0u8; values.len()], vec![0i16; values.len()]);
        cv_round_row(&mut a, &values);
        cv_round_row(&mut b, &values);
        assert_eq!(a, values.iter().map(|&v| cv_round::<u8>(v)).collect::<Vec<_>>());
        assert_eq!(b, values.iter().map(|&v| cv_round::<i16>(v)).collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// `cargo test --release -p sluice filters::filter::speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn sharpen_one_image() {
        let (h, w, c) = (480usize, 640usize, 3usize);
        let src: Vec<u8> = (0..h * w * c).map(|v| (v * 37 % 251) as u8).collect();
        let mut dst = vec![0u8; h * w * c];
        let taps = vec![(0, 1, -1.0f32), (1, 0, -1.0), (1, 1, 5.0), (1, 2, -1.0), (2, 1, -1.0)];
        let plan = SamplePlan::new((1, 1), (3, 3), taps, 0.0);
        let t = std::time::Instant::now();
        for _ in 0..50 {
            let job = Job { dst: &mut dst, src: &src, dims: (1, h, w, c), plan: &plan, border: Border::Reflect101, valid: false };
            job.run::<u8, u8>();
        }
        eprintln!("filter 3x3 u8 480x640x3, integer weights: {:.3} ms per image", t.elapsed().as_secs_f64() * 1e3 / 50.0);
        let taps = vec![(0, 1, -0.5f32), (1, 0, -0.5), (1, 1, 3.0), (1, 2, -0.5), (2, 1, -0.5)];
        let plan = SamplePlan::new((1, 1), (3, 3), taps, 0.0);
        let t = std::time::Instant::now();
        for _ in 0..50 {
            let job = Job { dst: &mut dst, src: &src, dims: (1, h, w, c), plan: &plan, border: Border::Reflect101, valid: false };
            job.run::<u8, u8>();
        }
        eprintln!("filter 3x3 u8 480x640x3, fractional weights: {:.3} ms per image", t.elapsed().as_secs_f64() * 1e3 / 50.0);
    }
}

