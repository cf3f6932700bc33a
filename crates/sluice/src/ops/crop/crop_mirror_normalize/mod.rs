//! `fn.crop_mirror_normalize`: crop (see [`crate::ops::crop::window`]), optional horizontal mirror,
//! per-channel normalization `out = (in - mean) / std * scale + shift` (evaluated as DALI
//! does, see `run`), output in CHW
//! (default) or HWC with optional channel padding to 4. One fused pass per output row reads
//! the (mirrored) window of the input and writes converted values straight into the output
//! layout: no intermediate buffers and no per-sample allocation. Inputs: HWC or FHWC
//! (channels last) of uint8, int16, uint16 or float. For uint8 with the window inside the
//! image (the common case) each channel's 256 possible outputs are tabulated per sample
//! ([`U8Lut`]) and the pass is a lookup per element; `ops::fused` reuses that table to
//! normalize resized rows.

mod gpu;

use std::any::TypeId;

use crate::ops::crop::window::{fill_per_channel, CropSpec, OobPolicy, Span, CROP_WINDOW_ARGS, CROP_OOB_ARGS};
use crate::error::{Error, Result};
use crate::ops::{arg, removed_arg, for_each_sample, tensor_arg, MAX_LIST, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

/// Schema and backends.
pub static CROP_MIRROR_NORMALIZE: OpDef = OpDef {
    schema: OpSchema {
        name: "CropMirrorNormalize",
        doc: "Performs fused cropping, normalization, format conversion (HWC to CHW) and mirroring. out = (in - mean) / std * scale + shift.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            removed_arg("image_type", T::ImageType),
            tensor_arg("mirror", T::Int, D::Int(0), "Mirror the image horizontally when non-zero."),
            tensor_arg("mean", T::FloatList, D::FloatList(&[0.0]), "Mean pixel values: one for all channels or one per channel."),
            tensor_arg("std", T::FloatList, D::FloatList(&[1.0]), "Standard deviations: one for all channels or one per channel."),
            arg("scale", T::Float, D::Float(1.0), "Multiplier applied after normalization."),
            arg("shift", T::Float, D::Float(0.0), "Value added after scaling."),
            arg("dtype", T::DType, D::Int(9), "Output type: FLOAT (default), FLOAT16, UINT8 or INT8."),
            arg("output_layout", T::Str, D::Str("CHW"), "Output layout: \"CHW\" (default) or \"HWC\" (FCHW / FHWC for sequences)."),
            arg("pad_output", T::Bool, D::Bool(false), "Pad the channels to 4 (the padding channel gets fill_values under the \"pad\" policy, else 0)."),
        ], CROP_WINDOW_ARGS, CROP_OOB_ARGS],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Cmn::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, dev| Ok(Box::new(gpu::CmnGpu::new(ctx, dev)?))),
};

pub(crate) struct Cmn {
    ctx: OpContext,
    scale: f32,
    shift: f32,
    dtype: DType,
    chw: bool,
    pad: bool,
    /// Per-sample plan (windows, mirror), reused between batches.
    plan: Vec<(Span, Span, bool)>,
}

impl Cmn {
    fn new(ctx: &OpContext) -> Result<Cmn> {
        let op = &ctx.display_name;
        let dtype = ctx.args.dtype("dtype");
        if !matches!(dtype, DType::F32 | DType::F16 | DType::U8 | DType::I8) {
            return Err(Error::arg(op, "dtype", format!("must be FLOAT, FLOAT16, UINT8 or INT8, got {dtype}")));
        }
        let chw = match ctx.args.str("output_layout") {
            "CHW" | "FCHW" => true,
            "HWC" | "FHWC" => false,
            s => return Err(Error::arg(op, "output_layout", format!("must be \"CHW\" or \"HWC\", got \"{s}\""))),
        };
        // Constant lists are checked here; per-sample ones (argument inputs) per batch.
        for a in ["mean", "std"] {
            if ctx.args.has(a) && ctx.args.floats(a).is_empty() {
                return Err(Error::arg(op, a, "must hold at least one value"));
            }
        }
        Ok(Cmn {
            ctx: ctx.clone(),
            scale: ctx.args.float("scale") as f32,
            shift: ctx.args.float("shift") as f32,
            dtype,
            chw,
            pad: ctx.args.bool("pad_output"),
            plan: Vec::new(),
        })
    }
}

/// Output element types.
pub(crate) trait Out: Copy + bytemuck::Pod + Send + Sync {
    fn conv(v: f32) -> Self;
}
impl Out for f32 {
    #[inline(always)]
    fn conv(v: f32) -> f32 { v }
}
impl Out for u16 {
    // FLOAT16 bits.
    #[inline(always)]
    fn conv(v: f32) -> u16 { crate::tensor::element::f64_to_f16(v as f64) }
}
impl Out for u8 {
    #[inline(always)]
    fn conv(v: f32) -> u8 { if v.is_nan() { 0 } else { v.round().clamp(0.0, 255.0) as u8 } }
}
impl Out for i8 {
    #[inline(always)]
    fn conv(v: f32) -> i8 { if v.is_nan() { 0 } else { v.round().clamp(-128.0, 127.0) as i8 } }
}

/// Input element types.
trait In: Copy + bytemuck::Pod + Send + Sync {
    fn f(self) -> f32;
}
impl In for u8 { #[inline(always)] fn f(self) -> f32 { self as f32 } }
impl In for u16 { #[inline(always)] fn f(self) -> f32 { self as f32 } }
impl In for i16 { #[inline(always)] fn f(self) -> f32 { self as f32 } }
impl In for f32 { #[inline(always)] fn f(self) -> f32 { self } }

/// Per-sample parameters of the fused kernel.
pub struct Plan<'a> {
    /// Input frame extents (H, W, C).
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub win_h: Span,
    pub win_w: Span,
    pub mirror: bool,
    /// Output channels (c, or 4 with pad_output).
    pub oc: usize,
    pub chw: bool,
    /// Per channel: shifted mean (`mean - shift / mul`) and multiplier (`scale / std`).
    pub mean: &'a [f32],
    pub mul: &'a [f32],
    pub fill: &'a [f32],
}

/// The fused pass over one frame: `src` is H*W*C, `dst` is the output frame.
fn frame<I: In, O: Out>(dst: &mut [O], src: &[I], p: &Plan<'_>) {
    let (oh, ow, oc, c) = (p.win_h.len, p.win_w.len, p.oc, p.c);
    let fillc: [O; 16] = std::array::from_fn(|k| O::conv(p.fill[k.min(p.fill.len() - 1)]));
    for y in 0..oh {
        let sy = p.win_h.anchor + y as i64;
        let row_ok = sy >= 0 && (sy as usize) < p.h;
        let srow = if row_ok { &src[sy as usize * p.w * c..(sy as usize + 1) * p.w * c] } else { &src[..0] };
        for x in 0..ow {
            let xx = if p.mirror { ow - 1 - x } else { x };
            let sx = p.win_w.anchor + xx as i64;
            let ok = row_ok && sx >= 0 && (sx as usize) < p.w;
            for k in 0..oc {
                let v = if ok && k < c {
                    O::conv((srow[sx as usize * c + k].f() - p.mean[k]) * p.mul[k])
                } else {
                    fillc[k.min(15)]
                };
                let o = if p.chw { (k * oh + y) * ow + x } else { (y * ow + x) * oc + k };
                dst[o] = v;
            }
        }
    }
}

fn run_typed<I: In, O: Out>(dst: &mut [u8], src: &[u8], frames: usize, p: &Plan<'_>) {
    let dst: &mut [O] = bytemuck::cast_slice_mut(dst);
    let src: &[I] = bytemuck::cast_slice(src);
    let (fo, fi) = (p.win_h.len * p.win_w.len * p.oc, p.h * p.w * p.c);
    if TypeId::of::<I>() == TypeId::of::<u8>() && p.oc == p.c && p.c <= MAX_LUT_CHANNELS && p.win_h.inside(p.h) && p.win_w.inside(p.w) {
        let src: &[u8] = bytemuck::cast_slice(src);
        let lut = U8Lut::<O>::new(p.mean, p.mul, p.c);
        let (x0, row) = (p.win_w.anchor as usize * p.c, p.w * p.c);
        for f in 0..frames {
            let (dst, src) = (&mut dst[f * fo..(f + 1) * fo], &src[f * fi..(f + 1) * fi]);
            for y in 0..p.win_h.len {
                let sy = p.win_h.anchor as usize + y;
                let px = &src[sy * row + x0..][..p.win_w.len * p.c];
                lut.write_row(dst, px, y, p.win_h.len, p.chw, p.mirror);
            }
        }
        return;
    }
    for f in 0..frames {
        frame::<I, O>(&mut dst[f * fo..(f + 1) * fo], &src[f * fi..(f + 1) * fi], p);
    }
}

/// Channels the lookup-table path handles.
pub(crate) const MAX_LUT_CHANNELS: usize = 4;

/// The normalized output of every u8 value, per channel: `table[k][v]` is
/// `conv((v - mean[k]) * mul[k])`, the very expression of the per-element path, so a lookup
/// gives the same bits. Used for u8 input with the window inside the image (no padding),
/// where it replaces the arithmetic and the per-element bounds logic with one load.
pub(crate) struct U8Lut<O> {
    table: [[O; 256]; MAX_LUT_CHANNELS],
    c: usize,
    /// The constants the table was built from (the AVX2 float path computes with them).
    mean: [f32; MAX_LUT_CHANNELS],
    mul: [f32; MAX_LUT_CHANNELS],
}

impl<O: Out> U8Lut<O> {
    pub(crate) fn new(mean: &[f32], mul: &[f32], c: usize) -> U8Lut<O> {
        let table = std::array::from_fn(|k| std::array::from_fn(|v| if k < c { O::conv((v as f32 - mean[k]) * mul[k]) } else { O::conv(0.0) }));
        let (mean, mul) = (std::array::from_fn(|k| if k < c { mean[k] } else { 0.0 }), std::array::from_fn(|k| if k < c { mul[k] } else { 0.0 }));
        U8Lut { table, c, mean, mul }
    }

    /// Writes output row `y` of a frame (`oh` rows of `px.len() / c` pixels) from the window's
    /// u8 pixels `px` (HWC, left to right), reversed when `mirror`, into CHW planes or an
    /// HWC row.
    #[inline]
    pub(crate) fn write_row(&self, dst: &mut [O], px: &[u8], y: usize, oh: usize, chw: bool, mirror: bool) {
        match self.c {
            1 => self.write_row_c::<1>(dst, px, y, oh, chw, mirror),
            2 => self.write_row_c::<2>(dst, px, y, oh, chw, mirror),
            3 => self.write_row_c::<3>(dst, px, y, oh, chw, mirror),
            _ => self.write_row_c::<4>(dst, px, y, oh, chw, mirror),
        }
    }

    #[inline(always)]
    fn write_row_c<const C: usize>(&self, dst: &mut [O], px: &[u8], y: usize, oh: usize, chw: bool, mirror: bool) {
        let ow = px.len() / C;
        // Where pixel x, channel k lands; one pass over the pixels writes every channel.
        let (plane, row, step) = if chw { (oh * ow, y * ow, 1) } else { (1, y * ow * C, C) };
        let last = (C - 1) * plane + row + (ow - 1) * step;
        assert!(px.len() == ow * C && ow > 0 && last < dst.len() && self.c == C);
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if C == 3 && chw && TypeId::of::<O>() == TypeId::of::<f32>() && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; `dst` holds the three plane rows (checked above).
            done = unsafe { Self::write_chw3_f32_avx2(&self.mean, &self.mul, bytemuck::cast_slice_mut(dst), px, plane, row, mirror) };
        }
        for (x, p) in px.chunks_exact(C).enumerate().skip(done) {
            let xo = if mirror { ow - 1 - x } else { x };
            for k in 0..C {
                // SAFETY: k < C and xo < ow, so the index is at most `last`, checked above.
                unsafe { *dst.get_unchecked_mut(k * plane + row + xo * step) = self.table[k][p[k] as usize] };
            }
        }
    }

    /// The ResNet case, 3 channels to CHW float, 8 pixels per step: shuffle each channel's
    /// bytes together, widen to f32 and compute `(v - mean) * mul` (the table's expression,
    /// so the same bits), reversing the 8 lanes when mirrored. Returns the pixels written (a
    /// multiple of 8); the caller does the rest.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn write_chw3_f32_avx2(mean: &[f32], mul: &[f32], dst: &mut [f32], px: &[u8], plane: usize, row: usize, mirror: bool) -> usize {
        use std::arch::x86_64::*;
        let ow = px.len() / 3;
        // Byte j of channel k is at 3j + k: in the first 16 bytes, or the next 8.
        let mask = |k: usize, hi: bool| -> __m128i {
            let b: [i8; 16] = std::array::from_fn(|j| {
                let idx = 3 * j + k;
                match (j < 8, hi) {
                    (true, false) if idx < 16 => idx as i8,
                    (true, true) if idx >= 16 => (idx - 16) as i8,
                    _ => -128,
                }
            });
            _mm_loadu_si128(b.as_ptr() as *const __m128i)
        };
        let masks = [0, 1, 2].map(|k| (mask(k, false), mask(k, true)));
        let reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
        let (pp, dp) = (px.as_ptr(), dst.as_mut_ptr());
        let mut x = 0;
        while x + 8 <= ow {
            let lo = _mm_loadu_si128(pp.add(3 * x) as *const __m128i);
            let hi = _mm_loadl_epi64(pp.add(3 * x + 16) as *const __m128i);
            let xo = if mirror { ow - x - 8 } else { x };
            for (k, &(ml, mh)) in masks.iter().enumerate() {
                let bytes = _mm_or_si128(_mm_shuffle_epi8(lo, ml), _mm_shuffle_epi8(hi, mh));
                let v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                let mut o = _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(mean[k])), _mm256_set1_ps(mul[k]));
                if mirror {
                    o = _mm256_permutevar8x32_ps(o, reverse);
                }
                _mm256_storeu_ps(dp.add(k * plane + row + xo), o);
            }
            x += 8;
        }
        x
    }
}

/// Everything a batch needs before any pixel moves: output shapes and layout, per-channel
/// constants and fill values. Shared by the cpu and gpu backends.
pub(crate) struct CmnBatch {
    pub meta: BatchMeta,
    /// Input is a sequence (FHWC): frame count is the first extent.
    pub seq: bool,
    pub input_dtype: DType,
    /// Per channel, `stride` values per sample (stride 0: one set shared by the batch, when
    /// neither `mean` nor `std` is an argument input): shifted mean and multiplier.
    pub mean: Vec<f32>,
    pub mul: Vec<f32>,
    pub stride: usize,
    pub fill: Vec<f32>,
}

impl CmnBatch {
    /// The (shifted mean, multiplier) channel constants of sample `i`.
    pub fn consts(&self, i: usize) -> (&[f32], &[f32]) {
        let at = i * self.stride;
        let len = if self.stride == 0 { self.mean.len() } else { self.stride };
        (&self.mean[at..at + len], &self.mul[at..at + len])
    }
}

impl Cmn {
    pub(crate) fn from_ctx(ctx: &OpContext) -> Result<Cmn> {
        Cmn::new(ctx)
    }

    pub(crate) fn display_name(&self) -> &str {
        &self.ctx.display_name
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    pub(crate) fn chw(&self) -> bool {
        self.chw
    }

    pub(crate) fn pad(&self) -> bool {
        self.pad
    }

    pub(crate) fn ctx(&self) -> &OpContext {
        &self.ctx
    }

    /// Per-sample (window h, window w, mirror) of the last planned batch.
    pub(crate) fn windows(&self) -> &[(Span, Span, bool)] {
        &self.plan
    }

    /// Checks the input and plans the batch: windows, mirror flags, output metadata.
    pub(crate) fn plan_batch(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<CmnBatch> {
        let ctx = &self.ctx;
        let op = &ctx.display_name;
        let n = input.len();
        let loc0 = || ctx.at(ws.iteration, 0, input.source_info(0));
        let layout = Layout::spatial(input.layout(), input.ndim()).map_err(|m| Error::data(loc0(), m))?;
        let seq = match layout.as_str() {
            "HWC" => false,
            "FHWC" => true,
            l => return Err(Error::data(loc0(), format!("input layout '{l}' is not supported; expected HWC or FHWC (channels last)"))),
        };
        let it = input.dtype();
        if !matches!(it, DType::U8 | DType::U16 | DType::I16 | DType::F32) {
            return Err(Error::data(loc0(), format!("input type {it} is not supported; expected UINT8, UINT16, INT16 or FLOAT")));
        }
        let spec = CropSpec::new(ctx, ws, false)?;
        let mirror = ws.per_sample(ctx, "mirror");
        let off = seq as usize;
        let mean_arg = ws.per_sample_list(ctx, "mean");
        let std_arg = ws.per_sample_list(ctx, "std");
        // Channel constants are per sample only when an argument input gives them.
        let maxc = (0..n).map(|i| input.shape(i)[off + 2]).max().unwrap_or(0).max(4);
        let stride = if mean_arg.is_input() || std_arg.is_input() { maxc } else { 0 };
        let blocks = if stride == 0 { 1 } else { n };
        let mut mean = vec![0f32; maxc * blocks];
        let mut mul = vec![0f32; maxc * blocks];
        let (mut mbuf, mut sbuf) = ([0f64; MAX_LIST], [0f64; MAX_LIST]);
        self.plan.clear();
        let mut shapes: Vec<[usize; 4]> = Vec::with_capacity(n);
        for i in 0..n {
            let sh = input.shape(i);
            let (h, w, c) = (sh[off], sh[off + 1], sh[off + 2]);
            // One value for all channels or one per channel. DALI 2.4 folds scale and shift
            // into (mean', mul) in f32 and computes (in - mean') * mul, with
            // mul = scale / std and mean' = mean - shift / mul; this reproduces its float
            // results bit for bit (checked on random data).
            let m = mean_arg.get(op, "mean", i, &[1, c], &mut mbuf)?.unwrap_or(&[0.0]);
            let sd = std_arg.get(op, "std", i, &[1, c], &mut sbuf)?.unwrap_or(&[1.0]);
            if stride > 0 || i == 0 {
                let at = i * stride;
                for k in 0..maxc {
                    mul[at + k] = self.scale / sd[k.min(sd.len() - 1)] as f32;
                    mean[at + k] = m[k.min(m.len() - 1)] as f32 - self.shift / mul[at + k];
                }
            }
            let win = spec.windows(ctx, ws.iteration, input.source_info(i), i, h, w, None)?;
            let m = mirror.get(op, i)?.unwrap_or(0.0) != 0.0;
            self.plan.push((win.h, win.w, m));
            let oc = if self.pad { c.max(4) } else { c };
            let (oh, ow) = (win.h.len, win.w.len);
            shapes.push(if self.chw { [sh[0], oc, oh, ow] } else { [sh[0], oh, ow, oc] });
        }
        let nd = input.ndim();
        let mut meta = BatchMeta::new(self.dtype, nd, shapes.iter().map(|s| &s[4 - nd..]));
        let ol = match (seq, self.chw) { (false, true) => "CHW", (false, false) => "HWC", (true, true) => "FCHW", (true, false) => "FHWC" };
        meta.set_layout(Layout::from(ol));
        meta.inherit_source_info(input);
        let fill_raw: Vec<f64> = if spec.policy == OobPolicy::Pad { ctx.args.floats("fill_values").to_vec() } else { vec![0.0] };
        let fill: Vec<f32> = fill_per_channel(op, &fill_raw, if fill_raw.len() > 1 { fill_raw.len().min(16) } else { 1 })?.iter().map(|&v| v as f32).collect();
        Ok(CmnBatch { meta, seq, input_dtype: it, mean, mul, stride, fill })
    }
}

impl Operator for Cmn {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let b = self.plan_batch(ws, input.meta())?;
        Ok(vec![self.crop_batch(ws, input, &b)?])
    }
}

impl Cmn {
    /// Runs a batch planned by [`Cmn::plan_batch`] on `input`.
    pub(crate) fn crop_batch(&self, ws: &Workspace<'_>, input: &TensorList, b: &CmnBatch) -> Result<TensorList> {
        let (seq, off, it) = (b.seq, b.seq as usize, b.input_dtype);
        let mut out = TensorList::for_overwrite(b.meta.clone()); // every element is written
        let (b, fill) = (&b, &b.fill);
        let (dtype, chw, pad, plan) = (self.dtype, self.chw, self.pad, &self.plan);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let sh = input.shape(i);
            let (h, w, c) = (sh[off], sh[off + 1], sh[off + 2]);
            let frames = if seq { sh[0] } else { 1 };
            let (win_h, win_w, mirror) = plan[i];
            let (mean, mul) = b.consts(i);
            let p = Plan { h, w, c, win_h, win_w, mirror, oc: if pad { c.max(4) } else { c }, chw, mean, mul, fill };
            let src = input.bytes(i);
            macro_rules! go {
                ($i:ty) => {
                    match dtype {
                        DType::F32 => run_typed::<$i, f32>(dst, src, frames, &p),
                        DType::F16 => run_typed::<$i, u16>(dst, src, frames, &p),
                        DType::U8 => run_typed::<$i, u8>(dst, src, frames, &p),
                        _ => run_typed::<$i, i8>(dst, src, frames, &p),
                    }
                };
            }
            match it {
                DType::U8 => go!(u8),
                DType::U16 => go!(u16),
                DType::I16 => go!(i16),
                _ => go!(f32),
            }
            Ok(())
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The u8 lookup-table path against the per-element formula (`frame`), bit for bit.
    fn compare<O: Out + PartialEq + std::fmt::Debug>() {
        let (h, w) = (13, 31);
        let mean = [12.5f32, 130.0, 255.0, 0.25];
        let mul = [1.0 / 58.4f32, 0.75, -3.0, 1.0 / 3.0];
        for c in 1..=4 {
            let src: Vec<u8> = (0..2 * h * w * c).map(|i| (i * 73 % 256) as u8).collect();
            for (mirror, chw) in [(false, false), (true, false), (false, true), (true, true)] {
                let (win_h, win_w) = (Span { anchor: 2, len: 9 }, Span { anchor: 5, len: 21 });
                let p = Plan { h, w, c, win_h, win_w, mirror, oc: c, chw, mean: &mean, mul: &mul, fill: &[0.0] };
                let n = 2 * win_h.len * win_w.len * c * std::mem::size_of::<O>();
                let mut fast = vec![0xAAu8; n];
                run_typed::<u8, O>(&mut fast, &src, 2, &p);
                let mut slow = vec![0x55u8; n];
                let fo = n / 2 / std::mem::size_of::<O>();
                let (s, f) = (bytemuck::cast_slice_mut::<u8, O>(&mut slow), h * w * c);
                for k in 0..2 {
                    frame::<u8, O>(&mut s[k * fo..(k + 1) * fo], &src[k * f..(k + 1) * f], &p);
                }
                assert_eq!(fast, slow, "{c} channels, mirror {mirror}, chw {chw}, {}", std::any::type_name::<O>());
            }
        }
    }

    #[test]
    fn u8_lookup_path_equals_the_per_element_formula() {
        compare::<f32>();
        compare::<u16>();
        compare::<u8>();
        compare::<i8>();
    }
}
