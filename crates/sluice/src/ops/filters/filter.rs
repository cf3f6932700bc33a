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
use crate::tensor::channel::{Channel, PairKernel};
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
    pub fill: f32,
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
            plans.push(SamplePlan { anchor, kernel: (kh, kw), taps, fill });
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
/// With AVX2 (checked once) the same code is compiled for 8-lane vectors: the arithmetic is
/// identical (no fused multiply-adds either way), the speed about twice the baseline's.
fn filter_row<O: Channel>(out: &mut [O], acc: &mut [f32], padded: &[f32], at: (usize, usize, usize), taps: &[(u32, u32, f32)]) {
    #[cfg(target_arch = "x86_64")]
    {
        static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *AVX2.get_or_init(|| std::is_x86_feature_detected!("avx2")) {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { filter_row_avx2(out, acc, padded, at, taps) };
        }
    }
    filter_row_body(out, acc, padded, at, taps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn filter_row_avx2<O: Channel>(out: &mut [O], acc: &mut [f32], padded: &[f32], at: (usize, usize, usize), taps: &[(u32, u32, f32)]) {
    filter_row_body(out, acc, padded, at, taps)
}

#[inline(always)]
fn filter_row_body<O: Channel>(out: &mut [O], acc: &mut [f32], padded: &[f32], (y, pw, c): (usize, usize, usize), taps: &[(u32, u32, f32)]) {
    // Blocks of the row stay in registers across the taps.
    const BLOCK: usize = 64;
    let n = out.len();
    for start in (0..n).step_by(BLOCK) {
        let len = BLOCK.min(n - start);
        let mut sums = [0.0f32; BLOCK];
        for &(ti, tj, k) in taps {
            let row = &padded[((y + ti as usize) * pw + tj as usize) * c + start..][..len];
            for (a, &v) in sums[..len].iter_mut().zip(row) {
                *a += k * v;
            }
        }
        acc[start..start + len].copy_from_slice(&sums[..len]);
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
    debug_assert!(O::DTYPE.size() <= 2, "filter outputs are 8 or 16 bits, or FLOAT");
    for (o, &v) in out.iter_mut().zip(sums) {
        let r = (v.clamp(-4_194_304.0, 4_194_304.0) + 12_582_912.0) - 12_582_912.0;
        let r = if v.abs() < 2_147_483_648.0 { r } else { -2_147_483_648.0 };
        *o = O::from_rounded(r);
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

    /// Pads each plane into f32 rows (the border rule applied once per padded point), then
    /// adds the taps one by one over whole output rows: every output point still sums its
    /// taps in kernel order.
    fn run<I: Channel, O: Channel>(self) {
        let src: &[I] = bytemuck::cast_slice(self.src);
        let dst: &mut [O] = bytemuck::cast_slice_mut(self.dst);
        let (slices, h, w, c) = self.dims;
        let p = self.plan;
        let (kh, kw) = p.kernel;
        let (oh, ow) = if self.valid { (h + 1 - kh, w + 1 - kw) } else { (h, w) };
        let (ay, ax) = if self.valid { (0, 0) } else { p.anchor };
        let (ph, pw) = (oh + kh - 1, ow + kw - 1);
        if oh * ow * c * slices == 0 {
            return;
        }
        thread_local! {
            /// The padded plane and a row of sums: reused by every sample a worker runs.
            static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>, Vec<Option<usize>>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
        }
        SCRATCH.with(|scratch| {
        let (padded, acc, columns) = &mut *scratch.borrow_mut();
        padded.resize(ph * pw * c, 0.0);
        acc.resize(ow * c, 0.0);
        // The source column of every padded column, once per sample.
        columns.clear();
        columns.extend((0..pw).map(|px| if self.valid { Some(px) } else { self.border.index(px as i64 - ax as i64, w as i64) }));
        for s in 0..slices {
            let (src, dst) = (&src[s * h * w * c..(s + 1) * h * w * c], &mut dst[s * oh * ow * c..(s + 1) * oh * ow * c]);
            // The columns that map straight onto the source row (`x0..x0 + w` in the padded
            // row holds source columns 0..w): converted in one run; the border ones one by one.
            let x0 = if self.valid { 0 } else { ax.min(pw) };
            let inner = if self.valid { w } else { w.min(pw - x0) };
            for py in 0..ph {
                let sy = if self.valid { Some(py) } else { self.border.index(py as i64 - ay as i64, h as i64) };
                let prow = &mut padded[py * pw * c..(py + 1) * pw * c];
                let Some(y) = sy else {
                    prow.fill(p.fill);
                    continue;
                };
                let srow = &src[y * w * c..(y + 1) * w * c];
                for (d, v) in prow[x0 * c..(x0 + inner) * c].iter_mut().zip(&srow[..inner * c]) {
                    *d = v.to_f32();
                }
                for px in (0..x0).chain(x0 + inner..pw) {
                    let sx = columns[px];
                    let at = px * c;
                    match sx {
                        Some(x) => {
                            for k in 0..c {
                                prow[at + k] = srow[x * c + k].to_f32();
                            }
                        }
                        None => prow[at..at + c].fill(p.fill),
                    }
                }
            }
            for (y, out) in dst.chunks_exact_mut(ow * c).enumerate() {
                filter_row(out, acc, padded, (y, pw, c), &p.taps);
            }
        }
        });
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
        let plan = SamplePlan { anchor: (1, 1), kernel: (3, 3), taps, fill: 0.0 };
        let t = std::time::Instant::now();
        for _ in 0..50 {
            let job = Job { dst: &mut dst, src: &src, dims: (1, h, w, c), plan: &plan, border: Border::Reflect101, valid: false };
            job.run::<u8, u8>();
        }
        eprintln!("filter 3x3 u8 480x640x3: {:.3} ms per image", t.elapsed().as_secs_f64() * 1e3 / 50.0);
    }
}
