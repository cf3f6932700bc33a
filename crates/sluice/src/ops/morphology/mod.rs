//! Morphology and median filtering: `fn.experimental.dilate`, `fn.experimental.erode` (this
//! file) and `fn.experimental.median_blur` ([`median`]), each on the cpu and the gpu (`gpu.rs`,
//! `morphology.cu`). DALI 2.4 has them on the gpu only, through CV-CUDA
//! (`dali/operators/image/morphology/`, `dali/operators/image/filter/median_blur.cc`); its tests
//! (`test_morphology.py`, `test_median_blur.py`) compare them with OpenCV, and so do
//! `tests/test_morphology.py` and `tests/test_median_blur.py` (plus a NumPy reference).
//!
//! Dilation and erosion are OpenCV's `cv2.dilate` / `cv2.erode` with a rectangular
//! structuring element (`cv2.getStructuringElement(cv2.MORPH_RECT, mask_size)`):
//!
//! - `out[y, x] = max` (dilate) or `min` (erode) of `P[y - ay + i, x - ax + j]` over
//!   `0 <= i < mask_h`, `0 <= j < mask_w`, every channel on its own. `mask_size` is
//!   (width, height) and `anchor` is (x, y), as in OpenCV and CV-CUDA; a negative anchor
//!   coordinate is the mask's centre on that axis (`size // 2`, also for even sizes). A mask
//!   of (-1, ...) or (..., -1) is 3 x 3 (CV-CUDA's rule).
//! - `P` is the input extended by `border_mode`: `constant` (the border never wins: OpenCV's
//!   default border value for morphology), `replicate`, `reflect` (`fedcba|abcdef|fedcba`),
//!   `reflect_101` (`gfedcb|abcdefgh|gfedcba`) or `wrap`, applied again as often as needed
//!   for masks larger than the image (CV-CUDA's `GetIndexWithBorder`).
//! - `iterations`: the operation is applied that many times, each pass reading the previous
//!   one's output through the border (CV-CUDA's loop; for `constant` and `replicate` this is
//!   the same as one pass with a mask grown by (mask - 1) per extra iteration, as DALI's doc
//!   says).
//! - FLOAT values are ordered as IEEE's totalOrder (-0.0 below +0.0), except that a NaN in
//!   the window gives a NaN (0x7fffffff for dilate, 0xffffffff for erode), whatever its sign.
//!
//! Both use the separability of a rectangle: a pass along the rows then one along the
//! columns, each a running max/min over the window. The cpu does each pass with
//! ceil(log2(k)) + 1 vector passes over whole lines (`r[i] = max(a[i], a[i + p])` doubles
//! the window; two overlapping power-of-two windows cover any k, since max is idempotent);
//! the gpu runs one launch per pass for the batch. Values are only compared, never computed
//! on, so every backend and algorithm gives the same bits.
//!
//! Layouts (DALI's list): HW, HWC, FHWC, CHW, FCHW; an input without a layout is read as HW,
//! HWC or FHWC by its number of dimensions. Frames and planar channels are independent
//! images; interleaved channels are filtered each on its own. Types: UINT8, UINT16, FLOAT
//! (CV-CUDA's). `mask_size` and `anchor` may be argument inputs (one pair per sample, used for
//! every frame of a sequence: DALI takes no per-frame values for them either).
//!
//! Where Sluice departs from DALI 2.4:
//! - The cpu backend exists; both backends give the same bits.
//! - Any number of interleaved channels (CV-CUDA takes 1, 3 or 4).
//! - FLOAT dilation: CV-CUDA starts its running max, and fills the constant border, with
//!   `std::numeric_limits<float>::min()` (1.2e-38, the smallest positive normal) instead of
//!   the lowest float, so its dilate lifts every result below 1.2e-38 (zeros, negative values)
//!   to 1.2e-38. Sluice gives OpenCV's results.
//! - An anchor at or past the mask's size is an error (OpenCV asserts it; CV-CUDA reads a
//!   window that misses the pixel); mask sizes below 1 (other than -1) are errors (CV-CUDA
//!   returns the start value of its running max/min); `reflect_101` on a one-pixel axis
//!   repeats the pixel (CV-CUDA divides by zero).
//! - A `mask_size` or `anchor` argument input may hold 1 value (used for both axes), as a
//!   constant may; DALI wants 2.

pub mod median;
mod gpu;

use crate::error::{Error, Result};
use crate::ops::filters::filter::{Border, Geometry};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::{BatchMeta, DType, TensorList};

pub use median::MEDIAN_BLUR;

const MORPH_ARGS: &[ArgSchema] = &[
    tensor_arg("mask_size", T::IntList, D::IntList(&[3, 3]), "Size of the structuring element, (width, height)."),
    tensor_arg(
        "anchor",
        T::IntList,
        D::IntList(&[-1, -1]),
        "Sets the anchor point of the structuring element, (x, y). Default value (-1, -1) uses the element's center as the anchor point.",
    ),
    arg(
        "iterations",
        T::Int,
        D::Int(1),
        "Number of times to execute the operation, typically set to 1. Setting to a value higher than 1 is equivelent to increasing the mask size by (mask_width - 1, mask_height -1) for every additional iteration.",
    ),
    arg("border_mode", T::Str, D::Str("constant"), "Border mode to be used when accessing elements outside input image: constant, replicate, reflect, reflect_101 or wrap."),
];

const fn morph_schema(name: &'static str, doc: &'static str) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[MORPH_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.experimental.dilate`.
pub static DILATE: OpDef = OpDef {
    schema: morph_schema("experimental__Dilate", concat!("Performs a dilation operation on the input image.\n\nThis operator allows sequence inputs.\n\n", "Input: ", "HW, HWC, FHWC, CHW or FCHW images of UINT8, UINT16 or FLOAT.")),
    cpu: Some(|ctx| Ok(Box::new(Morphology::new(ctx, Op::Dilate)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::MorphologyGpu::new(Morphology::new(ctx, Op::Dilate)?)))),
};

/// `fn.experimental.erode`.
pub static ERODE: OpDef = OpDef {
    schema: morph_schema("experimental__Erode", concat!("Performs an erosion operation on the input image.\n\nThis operator allows sequence inputs.\n\n", "Input: ", "HW, HWC, FHWC, CHW or FCHW images of UINT8, UINT16 or FLOAT.")),
    cpu: Some(|ctx| Ok(Box::new(Morphology::new(ctx, Op::Erode)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::MorphologyGpu::new(Morphology::new(ctx, Op::Erode)?)))),
};

/// The element types the operators take (CV-CUDA's).
pub(crate) const TYPES: [DType; 3] = [DType::U8, DType::U16, DType::F32];

/// Checks the input's layout and type; returns how its dimensions divide (DALI's layouts:
/// HW, HWC, FHWC, CHW, FCHW; none: HW, HWC or FHWC by the number of dimensions).
pub(crate) fn parse_input(ctx: &OpContext, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Geometry> {
    let op = ctx.display_name.as_str();
    let layout = input.layout().as_str();
    let ndim = input.ndim();
    let effective = if layout.is_empty() {
        match ndim {
            2 => "HW",
            3 => "HWC",
            4 => "FHWC",
            _ => return Err(Error::type_mismatch(op, format!("input 0: {ndim} dimensions without a layout; expected images with layout HW, HWC, FHWC, CHW or FCHW"))),
        }
    } else {
        layout
    };
    let geometry = match effective {
        "HW" => Geometry { lead: 0, channels: false },
        "HWC" => Geometry { lead: 0, channels: true },
        "FHWC" => Geometry { lead: 1, channels: true },
        "CHW" => Geometry { lead: 1, channels: false },
        "FCHW" => Geometry { lead: 2, channels: false },
        _ => return Err(Error::type_mismatch(op, format!("input 0: unsupported layout \"{layout}\"; expected HW, HWC, FHWC, CHW or FCHW"))),
    };
    if effective.len() != ndim {
        return Err(Error::type_mismatch(op, format!("input 0: layout \"{layout}\" does not match the {ndim} dimensions of the data")));
    }
    let dtype = input.dtype();
    if !input.is_empty() && !TYPES.contains(&dtype) {
        return Err(Error::data(ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {dtype}; supported: UINT8, UINT16, FLOAT")));
    }
    for i in 0..input.len() {
        let (_, h, w, c) = geometry.split(input.shape(i));
        if h > i32::MAX as usize || w > i32::MAX as usize || w.saturating_mul(c) > i32::MAX as usize {
            return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("sample of shape {:?}: rows and columns must be below 2^31 elements", input.shape(i))));
        }
    }
    Ok(geometry)
}

/// Reads a pair argument (`mask_size`, `anchor`, `window_size`) for sample `i`: 1 value (both
/// axes) or 2, whole numbers in the int32 range. Returns (first, second) as given.
pub(crate) fn read_pair(ctx: &OpContext, ws: &Workspace<'_>, name: &'static str, i: usize, n: usize) -> Result<(i64, i64)> {
    let op = ctx.display_name.as_str();
    let list = ws.per_sample_list(ctx, name);
    if let Some(batch) = ws.arg_inputs.get(name) {
        if batch.len() != n {
            return Err(Error::arg(op, name, format!("argument input has {} samples, the batch has {n}", batch.len())));
        }
    }
    let mut buf = [0.0; MAX_LIST];
    let v = list.get(op, name, i, &[1, 2], &mut buf)?.expect("the argument has a default");
    let (a, b) = if v.len() == 1 { (v[0], v[0]) } else { (v[0], v[1]) };
    for x in [a, b] {
        if x.fract() != 0.0 || !(i32::MIN as f64..=i32::MAX as f64).contains(&x) {
            return Err(Error::arg(op, name, format!("sample {i}: values must be whole numbers in the int32 range; got {v:?}")));
        }
    }
    Ok((a as i64, b as i64))
}

/// Dilation or erosion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Dilate = 0,
    Erode = 1,
}

/// One sample's window: mask (width, height) and anchor (x, y), checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplePlan {
    pub mask: (usize, usize),
    pub anchor: (usize, usize),
}

pub struct Morphology {
    pub(super) ctx: OpContext,
    pub(super) op: Op,
    pub(super) border: Border,
    pub(super) iterations: usize,
    pub(super) plans: Vec<SamplePlan>,
}

/// DALI's border names (nvcvop::GetBorderMode).
pub(crate) fn parse_border(op: &str, name: &str) -> Result<Border> {
    Ok(match name {
        "constant" => Border::Constant,
        "replicate" => Border::Clamp,
        "reflect" => Border::Reflect1001,
        "reflect_101" => Border::Reflect101,
        "wrap" => Border::Wrap,
        b => return Err(Error::arg(op, "border_mode", format!("Unknown border mode: {b}; use constant, replicate, reflect, reflect_101 or wrap"))),
    })
}

impl Morphology {
    fn new(ctx: &OpContext, op: Op) -> Result<Morphology> {
        let name = ctx.display_name.as_str();
        let border = parse_border(name, ctx.args.str("border_mode"))?;
        let iterations = ctx.args.int("iterations");
        if iterations < 1 {
            return Err(Error::arg(name, "iterations", format!("iterations must be >= 1; got {iterations}")));
        }
        if iterations > 1 << 20 {
            return Err(Error::arg(name, "iterations", format!("at most 2^20 iterations; got {iterations}")));
        }
        Ok(Morphology { ctx: ctx.clone(), op, border, iterations: iterations as usize, plans: Vec::new() })
    }

    /// Checks the batch and fills `self.plans` (one per sample); returns the geometry.
    /// Shared by both backends.
    pub(super) fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Geometry> {
        let geometry = parse_input(&self.ctx, ws, input)?;
        let op = self.ctx.display_name.as_str();
        let n = input.len();
        self.plans.clear();
        for i in 0..n {
            let (mut mw, mut mh) = read_pair(&self.ctx, ws, "mask_size", i, n)?;
            if mw == -1 || mh == -1 {
                (mw, mh) = (3, 3);
            }
            if mw < 1 || mh < 1 {
                return Err(Error::arg(op, "mask_size", format!("sample {i}: the mask size must be positive (or -1: 3 x 3); got ({mw}, {mh})")));
            }
            let (ax, ay) = read_pair(&self.ctx, ws, "anchor", i, n)?;
            let ax = if ax < 0 { mw / 2 } else { ax };
            let ay = if ay < 0 { mh / 2 } else { ay };
            if ax >= mw || ay >= mh {
                return Err(Error::arg(op, "anchor", format!("sample {i}: the anchor ({ax}, {ay}) must lie within the mask ({mw} x {mh}): 0 <= x < width, 0 <= y < height, or -1 for the centre")));
            }
            self.plans.push(SamplePlan { mask: (mw as usize, mh as usize), anchor: (ax as usize, ay as usize) });
        }
        Ok(geometry)
    }
}

/// An element type as the filters order it: compared through a key of an integer type
/// (UINT8 and UINT16 are their own keys; FLOAT maps to an i32 in totalOrder).
pub(crate) trait Keyed: bytemuck::Pod + Send + Sync + std::fmt::Debug {
    type Key: Copy + Ord + Default + Send + Sync + std::fmt::Debug + median::MaybeByte;
    const LOWEST: Self::Key;
    const HIGHEST: Self::Key;
    /// The key of `self`; a NaN becomes `HIGHEST` with `nan_high`, else `LOWEST`.
    fn key(self, nan_high: bool) -> Self::Key;
    fn from_key(k: Self::Key) -> Self;
}

impl Keyed for u8 {
    type Key = u8;
    const LOWEST: u8 = 0;
    const HIGHEST: u8 = u8::MAX;
    #[inline(always)]
    fn key(self, _: bool) -> u8 {
        self
    }
    #[inline(always)]
    fn from_key(k: u8) -> u8 {
        k
    }
}

impl Keyed for u16 {
    type Key = u16;
    const LOWEST: u16 = 0;
    const HIGHEST: u16 = u16::MAX;
    #[inline(always)]
    fn key(self, _: bool) -> u16 {
        self
    }
    #[inline(always)]
    fn from_key(k: u16) -> u16 {
        k
    }
}

impl Keyed for f32 {
    type Key = i32;
    const LOWEST: i32 = i32::MIN;
    const HIGHEST: i32 = i32::MAX;
    /// totalOrder: the bits as a signed integer, the magnitude bits flipped for negative
    /// values (so -0.0 is -1 and +0.0 is 0). NaNs go to an end.
    #[inline(always)]
    fn key(self, nan_high: bool) -> i32 {
        if self.is_nan() {
            return if nan_high { i32::MAX } else { i32::MIN };
        }
        float_key(self.to_bits())
    }
    #[inline(always)]
    fn from_key(k: i32) -> f32 {
        f32::from_bits(if k < 0 { (k ^ 0x7fff_ffff) as u32 } else { k as u32 })
    }
}

/// The totalOrder key of FLOAT bits (NaNs not special-cased).
#[inline(always)]
pub(crate) fn float_key(bits: u32) -> i32 {
    let k = bits as i32;
    if k < 0 {
        k ^ 0x7fff_ffff
    } else {
        k
    }
}

/// `max` (dilate) or `min` (erode).
#[inline(always)]
fn pick<K: Ord, const DILATE: bool>(a: K, b: K) -> K {
    if DILATE {
        a.max(b)
    } else {
        a.min(b)
    }
}

/// Running max/min over windows of `k` units (a unit: `unit` consecutive elements, compared
/// element by element): on input `a` holds `n_out + k - 1` units; on output `a` holds in its
/// first `n_out` units `r[u] = op(a[u], ..., a[u + k - 1])`. `b` is scratch of the same size.
/// ceil(log2(k)) + 1 passes at most, each over whole slices (vectorized).
fn window_reduce<K: Ord + Copy, const DILATE: bool>(a: &mut Vec<K>, b: &mut Vec<K>, unit: usize, n_out: usize, k: usize) {
    let mut p = 1;
    let mut len = (n_out + k - 1) * unit;
    while 2 * p <= k {
        let s = p * unit;
        let m = len - s;
        b.resize(a.len().max(b.len()), a[0]);
        for ((d, &x), &y) in b[..m].iter_mut().zip(&a[..m]).zip(&a[s..s + m]) {
            *d = pick::<K, DILATE>(x, y);
        }
        std::mem::swap(a, b);
        len = m;
        p *= 2;
    }
    if k > p {
        let s = (k - p) * unit;
        let m = n_out * unit;
        b.resize(a.len().max(b.len()), a[0]);
        for ((d, &x), &y) in b[..m].iter_mut().zip(&a[..m]).zip(&a[s..s + m]) {
            *d = pick::<K, DILATE>(x, y);
        }
        std::mem::swap(a, b);
    }
}

/// Scratch one worker reuses from sample to sample.
#[derive(Default)]
struct Scratch<K> {
    /// The plane being filtered (keys), and the padded plane of the column pass.
    cur: Vec<K>,
    plane: Vec<K>,
    plane_b: Vec<K>,
    line: Vec<K>,
    line_b: Vec<K>,
    /// The source index of each padded column/row (`None`: the border value).
    cols: Vec<Option<usize>>,
    rows: Vec<Option<usize>>,
}

/// Dilates or erodes one sample (`slices` images of h x w x c) `iterations` times.
#[allow(clippy::too_many_arguments)]
fn morph_sample<E: Keyed, const DILATE: bool>(dst: &mut [E], src: &[E], dims: (usize, usize, usize, usize), plan: &SamplePlan, border: Border, iterations: usize, s: &mut Scratch<E::Key>) {
    let (slices, h, w, c) = dims;
    let row = w * c;
    let size = h * row;
    if size == 0 {
        return;
    }
    let (kw, kh) = plan.mask;
    let (ax, ay) = plan.anchor;
    let identity = if DILATE { E::LOWEST } else { E::HIGHEST };
    s.cols.clear();
    s.cols.extend((0..w + kw - 1).map(|px| border.index(px as i64 - ax as i64, w as i64)));
    s.rows.clear();
    s.rows.extend((0..h + kh - 1).map(|py| border.index(py as i64 - ay as i64, h as i64)));
    let pw = (w + kw - 1) * c;
    let ph = h + kh - 1;
    for (src, dst) in src.chunks_exact(size).zip(dst.chunks_exact_mut(size)).take(slices) {
        s.cur.clear();
        s.cur.extend(src.iter().map(|v| v.key(DILATE)));
        for _ in 0..iterations {
            // Rows: each padded row (border columns added) reduced over kw columns, written to
            // its place (y + ay) in the padded plane.
            s.plane.resize(ph * row, identity);
            for y in 0..h {
                let srow = &s.cur[y * row..(y + 1) * row];
                s.line.clear();
                s.line.resize(pw, identity);
                let x0 = ax.min(w + kw - 1);
                let inner = w.min(w + kw - 1 - x0);
                s.line[x0 * c..(x0 + inner) * c].copy_from_slice(&srow[..inner * c]);
                for px in (0..x0).chain(x0 + inner..w + kw - 1) {
                    if let Some(sx) = s.cols[px] {
                        s.line[px * c..(px + 1) * c].copy_from_slice(&srow[sx * c..(sx + 1) * c]);
                    }
                }
                window_reduce::<_, DILATE>(&mut s.line, &mut s.line_b, c, w, kw);
                let py = y + ay;
                s.plane[py * row..(py + 1) * row].copy_from_slice(&s.line[..row]);
            }
            // Border rows: copies of the reduced rows they stand for, or the border value.
            for py in (0..ay).chain(ay + h..ph) {
                match s.rows[py] {
                    Some(sy) => s.plane.copy_within((sy + ay) * row..(sy + ay + 1) * row, py * row),
                    None => s.plane[py * row..(py + 1) * row].fill(identity),
                }
            }
            window_reduce::<_, DILATE>(&mut s.plane, &mut s.plane_b, row, h, kh);
            s.cur.clear();
            s.cur.extend_from_slice(&s.plane[..size]);
        }
        for (d, &k) in dst.iter_mut().zip(&s.cur) {
            *d = E::from_key(k);
        }
    }
}

impl Operator for Morphology {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let geometry = self.plan(ws, input.meta())?;
        let mut out = TensorList::for_overwrite(input.meta().clone());
        let (plans, border, iterations, op, dtype) = (&self.plans, self.border, self.iterations, self.op, input.dtype());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let dims = geometry.split(input.shape(i));
            let src = input.bytes(i);
            macro_rules! go {
                ($t:ty) => {{
                    thread_local! {
                        static SCRATCH: std::cell::RefCell<Scratch<<$t as Keyed>::Key>> = std::cell::RefCell::new(Scratch::default());
                    }
                    SCRATCH.with(|s| {
                        let s = &mut *s.borrow_mut();
                        let (d, x): (&mut [$t], &[$t]) = (bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src));
                        match op {
                            Op::Dilate => morph_sample::<$t, true>(d, x, dims, &plans[i], border, iterations, s),
                            Op::Erode => morph_sample::<$t, false>(d, x, dims, &plans[i], border, iterations, s),
                        }
                    })
                }};
            }
            match dtype {
                DType::U8 => go!(u8),
                DType::U16 => go!(u16),
                _ => go!(f32),
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::ops::{ArgValue, Args};

    /// A direct definition: every output element the max/min of its window through the border.
    pub(in crate::ops::morphology) fn reference<E: Keyed>(src: &[E], dims: (usize, usize, usize, usize), plan: &SamplePlan, border: Border, iterations: usize, dilate: bool) -> Vec<E> {
        let (slices, h, w, c) = dims;
        let mut cur: Vec<E::Key> = src.iter().map(|v| v.key(dilate)).collect();
        let identity = if dilate { E::LOWEST } else { E::HIGHEST };
        for _ in 0..iterations {
            let mut next = cur.clone();
            for s in 0..slices {
                for y in 0..h {
                    for x in 0..w {
                        for ch in 0..c {
                            let mut acc = identity;
                            for i in 0..plan.mask.1 {
                                for j in 0..plan.mask.0 {
                                    let sy = border.index(y as i64 - plan.anchor.1 as i64 + i as i64, h as i64);
                                    let sx = border.index(x as i64 - plan.anchor.0 as i64 + j as i64, w as i64);
                                    if let (Some(sy), Some(sx)) = (sy, sx) {
                                        let v = cur[((s * h + sy) * w + sx) * c + ch];
                                        acc = if dilate { acc.max(v) } else { acc.min(v) };
                                    }
                                }
                            }
                            next[((s * h + y) * w + x) * c + ch] = acc;
                        }
                    }
                }
            }
            cur = next;
        }
        cur.into_iter().map(E::from_key).collect()
    }

    pub(in crate::ops::morphology) fn values<E: Keyed>(n: usize, seed: u64, f: impl Fn(u64) -> E) -> Vec<E> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                f(state)
            })
            .collect()
    }

    /// FLOAT values with specials: NaNs of both signs, infinities, zeros of both signs.
    pub(in crate::ops::morphology) fn float_values(n: usize, seed: u64) -> Vec<f32> {
        let specials = [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, f32::MIN_POSITIVE, -1e-40];
        values(n, seed, |r| if r % 23 == 0 { specials[(r >> 8) as usize % specials.len()] } else { ((r >> 11) % 2001) as f32 / 7.0 - 140.0 })
    }

    fn same_bits<E: Keyed>(a: &[E], b: &[E]) -> bool {
        bytemuck::cast_slice::<E, u8>(a) == bytemuck::cast_slice::<E, u8>(b)
    }

    fn check_type<E: Keyed>(gen: impl Fn(usize, u64) -> Vec<E>) {
        let borders = [Border::Constant, Border::Clamp, Border::Reflect1001, Border::Reflect101, Border::Wrap];
        let shapes = [(1, 7, 9, 3), (2, 5, 4, 1), (1, 1, 6, 2), (1, 6, 1, 1), (3, 2, 3, 4), (1, 13, 11, 1)];
        let masks = [((3, 3), (1, 1)), ((1, 1), (0, 0)), ((4, 2), (3, 0)), ((5, 7), (0, 6)), ((2, 9), (1, 4)), ((16, 3), (8, 1)), ((1, 6), (0, 2))];
        let mut s = Scratch::default();
        let mut k = 0;
        for dims in shapes {
            for &(mask, anchor) in &masks {
                for border in borders {
                    for iterations in [1, 2, 3] {
                        k += 1;
                        let n = dims.0 * dims.1 * dims.2 * dims.3;
                        let src = gen(n, k);
                        let plan = SamplePlan { mask, anchor };
                        for dilate in [true, false] {
                            let want = reference(&src, dims, &plan, border, iterations, dilate);
                            let mut got = vec![E::from_key(E::LOWEST); n];
                            if dilate {
                                morph_sample::<E, true>(&mut got, &src, dims, &plan, border, iterations, &mut s);
                            } else {
                                morph_sample::<E, false>(&mut got, &src, dims, &plan, border, iterations, &mut s);
                            }
                            assert!(same_bits(&got, &want), "{dims:?} {plan:?} {border:?} x{iterations} dilate {dilate}:\n{got:?}\n{want:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_cpu_passes_equal_the_definition() {
        check_type::<u8>(|n, seed| values(n, seed, |r| (r >> 24) as u8));
        check_type::<u16>(|n, seed| values(n, seed, |r| (r >> 20) as u16));
        check_type::<f32>(|n, seed| float_values(n, seed));
    }

    #[test]
    fn float_keys_follow_total_order_and_round_trip() {
        let ordered = [f32::NEG_INFINITY, -1e30, -1.0, -1e-40, -0.0, 0.0, 1e-40, f32::MIN_POSITIVE, 1.0, 1e30, f32::INFINITY];
        for w in ordered.windows(2) {
            assert!(w[0].key(true) < w[1].key(true), "{} < {}", w[0], w[1]);
        }
        for v in ordered {
            assert_eq!(f32::from_key(v.key(true)).to_bits(), v.to_bits());
        }
        assert_eq!(f32::NAN.key(true), i32::MAX);
        assert_eq!((-f32::NAN).key(false), i32::MIN);
        assert_eq!(f32::from_key(i32::MAX).to_bits(), 0x7fff_ffff);
        assert_eq!(f32::from_key(i32::MIN).to_bits(), 0xffff_ffff);
    }

    pub(in crate::ops::morphology) fn ctx_of(def: &OpDef, given: Vec<(&str, ArgValue)>, inputs: &[&str]) -> Result<OpContext> {
        let per_sample: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
        Ok(OpContext {
            args: Args::check(&def.schema, "op", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &per_sample)?,
            display_name: "op".into(),
            instance_name: "o".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 8,
            num_threads: 1,
            device_id: None,
            arg_input_names: per_sample,
            resume_samples: 0,
        })
    }

    fn plan_of(given: Vec<(&str, ArgValue)>, x: &TensorList, args: &[(&'static str, &TensorList)]) -> Result<Vec<SamplePlan>> {
        let inputs: Vec<&str> = args.iter().map(|(n, _)| *n).collect();
        let mut m = Morphology::new(&ctx_of(&DILATE, given, &inputs)?, Op::Dilate)?;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let arg_inputs: HashMap<&str, &TensorList> = args.iter().copied().collect();
        let ws = Workspace { inputs: vec![x], arg_inputs, iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        m.plan(&ws, x.meta())?;
        Ok(m.plans.clone())
    }

    #[test]
    fn masks_and_anchors_resolve_as_cv_cuda() {
        let x = TensorList::from_samples(&[vec![4usize, 5, 3]], &[vec![0u8; 60]]).with_layout("HWC");
        let p = |given| plan_of(given, &x, &[]);
        assert_eq!(p(vec![]).unwrap(), vec![SamplePlan { mask: (3, 3), anchor: (1, 1) }]);
        assert_eq!(p(vec![("mask_size", ArgValue::IntList(vec![4, 6]))]).unwrap(), vec![SamplePlan { mask: (4, 6), anchor: (2, 3) }]);
        assert_eq!(p(vec![("mask_size", ArgValue::Int(5)), ("anchor", ArgValue::IntList(vec![0, -3]))]).unwrap(), vec![SamplePlan { mask: (5, 5), anchor: (0, 2) }]);
        assert_eq!(p(vec![("mask_size", ArgValue::IntList(vec![-1, 7]))]).unwrap(), vec![SamplePlan { mask: (3, 3), anchor: (1, 1) }]);
        assert!(p(vec![("mask_size", ArgValue::IntList(vec![0, 3]))]).is_err());
        assert!(p(vec![("mask_size", ArgValue::IntList(vec![3, -2]))]).is_err());
        assert!(p(vec![("anchor", ArgValue::IntList(vec![3, 0]))]).is_err());
        assert!(p(vec![("mask_size", ArgValue::IntList(vec![3, 3, 3]))]).is_err());
        // Per-sample pairs.
        let masks = TensorList::from_samples(&[vec![2usize]], &[vec![2i32, 5]]);
        assert_eq!(plan_of(vec![], &x, &[("mask_size", &masks)]).unwrap(), vec![SamplePlan { mask: (2, 5), anchor: (1, 2) }]);
    }

    #[test]
    fn layouts_follow_dalis_list() {
        let meta = |shape: Vec<usize>, layout: &str| {
            let n = shape.iter().product();
            TensorList::from_samples(&[shape], &[vec![0u8; n]]).with_layout(layout)
        };
        for (shape, layout, want) in [
            (vec![4, 5], "HW", (1, 4, 5, 1)),
            (vec![4, 5, 3], "HWC", (1, 4, 5, 3)),
            (vec![2, 4, 5, 3], "FHWC", (2, 4, 5, 3)),
            (vec![3, 4, 5], "CHW", (3, 4, 5, 1)),
            (vec![2, 3, 4, 5], "FCHW", (6, 4, 5, 1)),
            (vec![4, 5, 3], "", (1, 4, 5, 3)),
        ] {
            let x = meta(shape.clone(), layout);
            let ctx = ctx_of(&DILATE, vec![], &[]).unwrap();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let ws = Workspace { inputs: vec![&x], arg_inputs: HashMap::new(), iteration: 0, batch_size: 1, frames: None, pool: &pool };
            let g = parse_input(&ctx, &ws, x.meta()).unwrap();
            assert_eq!(g.split(&shape), want, "{layout}");
        }
        for (shape, layout) in [(vec![4, 5, 3], "HWD"), (vec![2, 4, 5], "DHW"), (vec![4, 5, 3, 2], "HWCF"), (vec![5], "W"), (vec![2, 2, 2, 2, 2], "")] {
            let x = meta(shape, layout);
            let ctx = ctx_of(&DILATE, vec![], &[]).unwrap();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let ws = Workspace { inputs: vec![&x], arg_inputs: HashMap::new(), iteration: 0, batch_size: 1, frames: None, pool: &pool };
            assert!(parse_input(&ctx, &ws, x.meta()).is_err(), "{layout}");
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// `cargo test --release -p sluice morphology::speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn dilate_one_image() {
        let (h, w, c) = (480usize, 640usize, 3usize);
        let src: Vec<u8> = (0..h * w * c).map(|v| (v * 37 % 251) as u8).collect();
        let mut dst = vec![0u8; h * w * c];
        let mut s = Scratch::default();
        for k in [3usize, 7, 15] {
            let plan = SamplePlan { mask: (k, k), anchor: (k / 2, k / 2) };
            let t = std::time::Instant::now();
            for _ in 0..20 {
                morph_sample::<u8, true>(&mut dst, &src, (1, h, w, c), &plan, Border::Reflect101, 1, &mut s);
            }
            eprintln!("dilate {k}x{k} u8 480x640x3: {:.3} ms per image", t.elapsed().as_secs_f64() * 1e3 / 20.0);
        }
    }
}
