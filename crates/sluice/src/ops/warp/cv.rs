//! OpenCV 5.0's sampling, reproduced bit for bit: what DALI 2.4's cpu
//! `fn.experimental.warp_perspective` computes (it calls `cv::warpPerspective` of the
//! OpenCV 5.0.0 it ships), and `fn.experimental.remap`'s reference (`cv2.remap`). Shared by
//! both operators on the cpu; `cv_sampler.cuh` is the same arithmetic for their kernels.
//!
//! OpenCV 5.0 has two implementations, and which one runs depends on the pixel type:
//! * The "new" kernels (UINT8, UINT16, FLOAT with 1, 3 or 4 channels; nearest and linear):
//!   coordinates in f32, nearest rounds half to even (`cvRound`), linear takes `floor` and
//!   the fraction. Rows are processed 16 pixels at a time in AVX2 vectors (the widest set
//!   `warp_kernels` is built for), the remainder of a row (`width % 16` pixels) by scalar
//!   code, and the two map coordinates differently: the vector code computes
//!   `fma(M0, x, y*M1 + M2)`, the scalar code `x*M0 + y*M1 + M2` as GCC contracts it (C++ is
//!   compiled with `-ffp-contract=fast`, and the AVX2 unit has FMA): `fma(x, M0, y*M1) + M2`.
//!   Both interpolate with fused multiply-adds (`fma(a, p01 - p00, p00)`, written so in the
//!   vector code, contracted in the scalar one). [`vector_end`] says where a row's vector
//!   part ends, [`Part`] which code computes a pixel. Results round half to even and
//!   saturate (`saturate_cast`).
//! * The "old" path (INT16, and 2-channel images): coordinates in f64 per block of the output
//!   (blocks of `1024 / min(16, height)` columns; the block's first column anchors the sums),
//!   rounded to 1/32 of a pixel (`INTER_BITS = 5`); nearest rounds the f64 coordinate;
//!   linear weights are products of multiples of 1/32, in f32 (or as 15-bit integers for
//!   UINT8), summed in f32 in tap order.
//!
//! Borders: OpenCV's `BORDER_CONSTANT` (the fill value), `REPLICATE`, `REFLECT`,
//! `REFLECT_101` and `WRAP`, tap by tap; a 1-pixel-wide source repeats its pixel in every
//! mode but constant (OpenCV's rule). Coordinates are `i32` as OpenCV's: NaN and points past
//! the `int` range become `i32::MIN` (what x86's conversions return), which lies outside.

use crate::tensor::DType;

/// Output pixels per vector step of OpenCV's AVX2 warp kernels (2 x 8 f32 lanes).
pub const VECTOR_PIXELS: usize = 16;

/// Where the vector part of a row of `width` pixels ends: pixels before it are computed
/// with fused multiply-adds, the rest by the scalar tail.
#[inline(always)]
pub fn vector_end(width: usize) -> usize {
    width / VECTOR_PIXELS * VECTOR_PIXELS
}

/// OpenCV's border modes, with OpenCV's codes (the GPU kernel receives the code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BorderMode {
    Constant = 0,
    Replicate = 1,
    Reflect = 2,
    Wrap = 3,
    Reflect101 = 4,
}

impl BorderMode {
    /// DALI's `border_mode` names.
    pub fn parse(name: &str) -> Option<BorderMode> {
        Some(match name {
            "constant" => BorderMode::Constant,
            "replicate" => BorderMode::Replicate,
            "reflect" => BorderMode::Reflect,
            "reflect_101" => BorderMode::Reflect101,
            "wrap" => BorderMode::Wrap,
            _ => return None,
        })
    }
}

/// Nearest or linear (the interpolations both OpenCV paths share here), or cubic (warp
/// perspective only: OpenCV 5.0's `genericWarp`, [`warp_cubic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interp {
    Nearest,
    Linear,
    Cubic,
}

/// Which code of OpenCV's new kernels computes a pixel: the vector loop or the scalar tail
/// of its row. They map coordinates differently, and they store the fill value (constant
/// border, linear) for a point whose four taps all lie outside under different conditions:
/// the tail always, the vector code only when all 16 points of its step do (otherwise it
/// interpolates the fill value: the same value, but NaN where the point is not finite).
/// [`fills_directly`] decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Vector,
    Tail,
}

impl Part {
    /// The part computing column `x` of a row of `width` pixels.
    #[inline(always)]
    pub fn of(x: usize, width: usize) -> Part {
        if x < vector_end(width) { Part::Vector } else { Part::Tail }
    }
}

/// Whether the four taps around (sx, sy) all lie outside a `w` x `h` image.
#[inline(always)]
pub fn outside(sx: f32, sy: f32, w: i32, h: i32) -> bool {
    let (x1, y1) = (cv_floor(sx).wrapping_add(1), cv_floor(sy).wrapping_add(1));
    (x1 as u32) >= (w + 1) as u32 || (y1 as u32) >= (h + 1) as u32
}

/// Whether linear interpolation with a constant border stores the fill value directly for
/// point (sx, sy) of column `x` (`point(x)` gives the point of any column of the row) when
/// its taps all lie outside: in the tail, or when every point of its vector step lies
/// outside. Only a non-finite point can tell the two apart, so only then are the others
/// computed.
#[inline(always)]
pub fn fills_directly(part: Part, x: usize, sx: f32, sy: f32, w: i32, h: i32, point: impl Fn(usize) -> (f32, f32)) -> bool {
    if part == Part::Tail || (sx.is_finite() && sy.is_finite()) {
        return true;
    }
    let step = x / VECTOR_PIXELS * VECTOR_PIXELS;
    (step..step + VECTOR_PIXELS).all(|x| {
        let (sx, sy) = point(x);
        outside(sx, sy, w, h)
    })
}

/// `cvRound(float)`: half to even; NaN and values past the `int` range give `i32::MIN`.
#[inline(always)]
pub fn cv_round(v: f32) -> i32 {
    if v >= -2147483648.0 && v < 2147483648.0 {
        v.round_ties_even() as i32
    } else {
        i32::MIN
    }
}

/// `cvRound(double)`, likewise.
#[inline(always)]
pub fn cv_round_f64(v: f64) -> i32 {
    if v > -2147483648.5 && v < 2147483647.5 {
        v.round_ties_even() as i32
    } else {
        i32::MIN
    }
}

/// `cvFloor(float)` (and the vector `v_floor`): the rounded value, less one where it
/// exceeds `v`, wrapping as the integer arithmetic does.
#[inline(always)]
pub fn cv_floor(v: f32) -> i32 {
    let i = cv_round(v);
    i.wrapping_sub(((i as f32) > v) as i32)
}

/// The source index OpenCV reads for coordinate `p` of an axis of `len` (>= 1) pixels, or
/// `None` where the fill value stands (constant border).
#[inline(always)]
pub fn border_index(p: i32, len: i32, mode: BorderMode) -> Option<usize> {
    if (p as u32) < len as u32 {
        return Some(p as usize);
    }
    if mode == BorderMode::Constant {
        return None;
    }
    if len == 1 {
        return Some(0);
    }
    let (p, n) = (p as i64, len as i64);
    Some(match mode {
        BorderMode::Constant => unreachable!("handled above"),
        BorderMode::Replicate => p.clamp(0, n - 1),
        // Mirror images of the axis, period 2n (edge pixels repeated) or 2n - 2 (not).
        BorderMode::Reflect => {
            let q = p.rem_euclid(2 * n);
            if q < n { q } else { 2 * n - 1 - q }
        }
        BorderMode::Reflect101 => {
            let q = p.rem_euclid(2 * n - 2);
            if q < n { q } else { 2 * n - 2 - q }
        }
        BorderMode::Wrap => p.rem_euclid(n),
    } as usize)
}

/// A pixel type OpenCV warps: UINT8, UINT16, INT16, FLOAT.
pub trait CvPixel: bytemuck::Pod + Send + Sync + 'static {
    const DTYPE: DType;
    fn to_f32(self) -> f32;
    /// `saturate_cast<T>(float)`: round half to even, saturate (FLOAT: the value).
    fn from_f32(v: f32) -> Self;
    /// `saturate_cast<T>(double)`.
    fn from_f64(v: f64) -> Self;
}

macro_rules! int_pixel {
    ($($t:ty => $d:ident),*) => {$(
        impl CvPixel for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f32(self) -> f32 { self as f32 }
            #[inline(always)]
            fn from_f32(v: f32) -> Self { cv_round(v).clamp(<$t>::MIN as i32, <$t>::MAX as i32) as $t }
            #[inline(always)]
            fn from_f64(v: f64) -> Self { cv_round_f64(v).clamp(<$t>::MIN as i32, <$t>::MAX as i32) as $t }
        }
    )*};
}
int_pixel!(u8 => U8, u16 => U16, i16 => I16);

impl CvPixel for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

/// A kernel generic over the pixel type; [`dispatch`] picks it.
pub trait CvKernel {
    type Output;
    fn run<T: CvPixel>(self) -> Self::Output;
}

/// Runs `kernel` for UINT8, UINT16, INT16 or FLOAT; `None` for other types.
pub fn dispatch<K: CvKernel>(t: DType, kernel: K) -> Option<K::Output> {
    Some(match t {
        DType::U8 => kernel.run::<u8>(),
        DType::U16 => kernel.run::<u16>(),
        DType::I16 => kernel.run::<i16>(),
        DType::F32 => kernel.run::<f32>(),
        _ => return None,
    })
}

/// Whether OpenCV 5.0 warps `t` with `channels` channels in its new kernels (else the old
/// path): UINT8, UINT16 and FLOAT with 1, 3 or 4 channels.
pub fn new_kernels(t: DType, channels: usize) -> bool {
    matches!(t, DType::U8 | DType::U16 | DType::F32) && matches!(channels, 1 | 3 | 4)
}

/// An HWC image (`channels` <= 4), not empty.
pub struct Image<'a, T> {
    pub data: &'a [T],
    pub h: i32,
    pub w: i32,
    pub c: usize,
}

impl<T: CvPixel> Image<'_, T> {
    #[inline(always)]
    fn at(&self, x: usize, y: usize) -> usize {
        (y * self.w as usize + x) * self.c
    }

    /// Pixel (x, y) through the border: its offset, or `None` for the fill value.
    #[inline(always)]
    fn tap(&self, x: i32, y: i32, border: BorderMode) -> Option<usize> {
        if (x as u32) < self.w as u32 && (y as u32) < self.h as u32 {
            return Some(self.at(x as usize, y as usize));
        }
        Some(self.at(border_index(x, self.w, border)?, border_index(y, self.h, border)?))
    }

    #[inline(always)]
    fn copy_tap(&self, out: &mut [T], tap: Option<usize>, fill: &[T; 4]) {
        match tap {
            Some(o) => out.copy_from_slice(&self.data[o..o + self.c]),
            None => out.copy_from_slice(&fill[..self.c]),
        }
    }

    /// The new kernels' nearest neighbour of source point (sx, sy).
    #[inline(always)]
    pub fn nearest(&self, out: &mut [T], sx: f32, sy: f32, border: BorderMode, fill: &[T; 4]) {
        self.copy_tap(out, self.tap(cv_round(sx), cv_round(sy), border), fill);
    }

    /// The new kernels' bilinear interpolation at source point (sx, sy); `fill_directly`:
    /// store the fill value where all four taps lie outside (see [`fills_directly`]; else
    /// they are interpolated).
    #[inline(always)]
    pub fn linear(&self, out: &mut [T], sx: f32, sy: f32, border: BorderMode, fill: &[T; 4], fill_directly: impl Fn() -> bool) {
        let (ix, iy) = (cv_floor(sx), cv_floor(sy));
        let (a, b) = (sx - ix as f32, sy - iy as f32);
        let taps = if (ix as u32) < (self.w - 1) as u32 && (iy as u32) < (self.h - 1) as u32 {
            let o = self.at(ix as usize, iy as usize);
            let down = self.w as usize * self.c;
            [Some(o), Some(o + self.c), Some(o + down), Some(o + down + self.c)]
        } else {
            let (x1, y1) = (ix.wrapping_add(1), iy.wrapping_add(1));
            if border == BorderMode::Constant && outside(sx, sy, self.w, self.h) && fill_directly() {
                out.copy_from_slice(&fill[..self.c]);
                return;
            }
            [self.tap(ix, iy, border), self.tap(x1, iy, border), self.tap(ix, y1, border), self.tap(x1, y1, border)]
        };
        for (k, o) in out.iter_mut().enumerate() {
            let p = |t: Option<usize>| t.map_or(fill[k], |t| self.data[t + k]).to_f32();
            let (p00, p01, p10, p11) = (p(taps[0]), p(taps[1]), p(taps[2]), p(taps[3]));
            let v0 = a.mul_add(p01 - p00, p00);
            let v1 = a.mul_add(p11 - p10, p10);
            *o = T::from_f32(b.mul_add(v1 - v0, v0));
        }
    }

    /// The old path's nearest neighbour of the integer point (x, y) (OpenCV's `remapNearest`).
    #[inline(always)]
    pub fn nearest_fixed(&self, out: &mut [T], x: i32, y: i32, border: BorderMode, fill: &[T; 4]) {
        self.copy_tap(out, self.tap(x, y, border), fill);
    }

    /// The old path's bilinear interpolation (`remapBilinear`) at (x + fx/32, y + fy/32),
    /// `fx`, `fy` in 0..32: weights from the 1/32 table, 15-bit integers for UINT8.
    #[inline(always)]
    pub fn linear_fixed(&self, out: &mut [T], x: i32, y: i32, fx: i32, fy: i32, border: BorderMode, fill: &[T; 4]) {
        let taps = if (x as u32) < (self.w - 1).max(0) as u32 && (y as u32) < (self.h - 1).max(0) as u32 {
            let o = self.at(x as usize, y as usize);
            let down = self.w as usize * self.c;
            [Some(o), Some(o + self.c), Some(o + down), Some(o + down + self.c)]
        } else {
            if border == BorderMode::Constant && (x >= self.w || x.wrapping_add(1) < 0 || y >= self.h || y.wrapping_add(1) < 0) {
                out.copy_from_slice(&fill[..self.c]);
                return;
            }
            let (x1, y1) = (x.wrapping_add(1), y.wrapping_add(1));
            [self.tap(x, y, border), self.tap(x1, y, border), self.tap(x, y1, border), self.tap(x1, y1, border)]
        };
        let w = fixed_weights(fx, fy);
        for (k, o) in out.iter_mut().enumerate() {
            let p = |t: Option<usize>| t.map_or(fill[k], |t| self.data[t + k]);
            let v = [p(taps[0]), p(taps[1]), p(taps[2]), p(taps[3])];
            *o = if T::DTYPE == DType::U8 {
                let iw = w.map(|w| (w * 32768.0) as i32); // exact: multiples of 1/1024
                let sum: i32 = (0..4).map(|t| v[t].to_f32() as i32 * iw[t]).sum();
                T::from_f32(((sum + (1 << 14)) >> 15) as f32)
            } else {
                T::from_f32(v[0].to_f32() * w[0] + v[1].to_f32() * w[1] + v[2].to_f32() * w[2] + v[3].to_f32() * w[3])
            };
        }
    }
}

/// OpenCV's `BilinearTab_f` entry for fractions `fx`, `fy` (in 1/32): the tap weights
/// 00, 01, 10, 11, each a product of multiples of 1/32 (exact in f32).
#[inline(always)]
pub fn fixed_weights(fx: i32, fy: i32) -> [f32; 4] {
    let (ax, ay) = (fx as f32 * (1.0 / 32.0), fy as f32 * (1.0 / 32.0));
    let (bx, by) = (1.0 - ax, 1.0 - ay);
    [by * bx, by * ax, ay * bx, ay * ax]
}

/// The perspective map of one sample, destination pixel to source point (OpenCV's pixel
/// centres at integers): row-major 3x3, in f32 for the new kernels and in f64 for the old
/// path (OpenCV converts the f64 matrix to f32 in the new kernels).
#[derive(Debug, Clone, Copy)]
pub struct Perspective {
    pub m: [f64; 9],
}

impl Perspective {
    pub fn f32(&self) -> [f32; 9] {
        self.m.map(|v| v as f32)
    }
}

/// The new kernels' source point of output pixel (x, y), as the vector code or the scalar
/// tail computes it.
#[inline(always)]
pub fn mapped_point(m: &[f32; 9], x: usize, y: usize, part: Part) -> (f32, f32) {
    let (xf, yf) = (x as f32, y as f32);
    // `M0*x + (M1*y + M2)` (vector) or `(M0*x + M1*y) + M2` (tail), contracted as GCC does.
    let dot = |a: f32, b: f32, c: f32| match part {
        Part::Vector => a.mul_add(xf, yf * b + c),
        Part::Tail => xf.mul_add(a, yf * b) + c,
    };
    let w = dot(m[6], m[7], m[8]);
    (dot(m[0], m[1], m[2]) / w, dot(m[3], m[4], m[5]) / w)
}

/// The old path's block width for an output `out_h` x `out_w` (`WarpPerspectiveInvoker`:
/// blocks of at most 32 x 32 pixels, `min(16, height)` rows high).
pub fn old_block_width(out_h: usize, out_w: usize) -> usize {
    let bh = out_h.clamp(1, 16);
    (1024 / bh).min(out_w).max(1)
}

/// The old path's source point of output pixel (x, y) in 1/32 pixels (linear) or pixels
/// (nearest), as `i32`s: sums anchored at the block's first column `x0`, in f64.
#[inline(always)]
pub fn old_mapped_point(m: &[f64; 9], x0: usize, x: usize, y: usize, scale: f64) -> (i32, i32) {
    let (xb, yf, x1) = (x0 as f64, y as f64, (x - x0) as f64);
    let px = m[0] * xb + m[1] * yf + m[2];
    let py = m[3] * xb + m[4] * yf + m[5];
    let pw = m[6] * xb + m[7] * yf + m[8];
    let w = pw + m[6] * x1;
    let w = if w != 0.0 { scale / w } else { 0.0 };
    let clamp = |v: f64| if v.is_nan() { v } else { v.clamp(i32::MIN as f64, i32::MAX as f64) };
    (cv_round_f64(clamp((px + m[0] * x1) * w)), cv_round_f64(clamp((py + m[3] * x1) * w)))
}

/// Saturating conversion to `short` (the old path stores coordinates as 16-bit integers).
#[inline(always)]
pub fn sat_i16(v: i32) -> i32 {
    v.clamp(i16::MIN as i32, i16::MAX as i32)
}

/// `cv::warpPerspective` of one HWC image (the map already destination to source):
/// `dst` is `out_h` x `out_w` x `src.c`.
pub fn warp_perspective<T: CvPixel>(dst: &mut [T], out_h: usize, out_w: usize, src: &Image<'_, T>, map: &Perspective, interp: Interp, border: BorderMode, fill: &[T; 4]) {
    let c = src.c;
    debug_assert_eq!(dst.len(), out_h * out_w * c);
    if dst.is_empty() {
        return;
    }
    if interp == Interp::Cubic {
        return warp_cubic(dst, out_w, src, &map.f32(), border, fill);
    }
    if new_kernels(T::DTYPE, c) {
        let m = map.f32();
        #[cfg(target_arch = "x86_64")]
        if x86::available() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { x86::warp_new(dst, out_w, src, &m, interp, border, fill) };
        }
        warp_new_per_pixel(dst, out_w, src, &m, interp, border, fill);
    } else {
        #[cfg(target_arch = "x86_64")]
        if x86::available() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { x86::warp_old(dst, out_h, out_w, src, map, interp, border, fill) };
        }
        warp_old(dst, out_h, out_w, src, map, interp, border, fill);
    }
}

/// The old path's warp, pixel by pixel. Inlined into [`x86::warp_old`] too, where the f64
/// roundings are instructions rather than library calls (the same operations, so the same
/// bits: Rust never contracts `a * b + c` into a fused multiply-add).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn warp_old<T: CvPixel>(dst: &mut [T], out_h: usize, out_w: usize, src: &Image<'_, T>, map: &Perspective, interp: Interp, border: BorderMode, fill: &[T; 4]) {
    let c = src.c;
    let bw = old_block_width(out_h, out_w);
    for (y, row) in dst.chunks_exact_mut(out_w * c).enumerate() {
        for (x, px) in row.chunks_exact_mut(c).enumerate() {
            let x0 = x / bw * bw;
            match interp {
                Interp::Nearest => {
                    let (sx, sy) = old_mapped_point(&map.m, x0, x, y, 1.0);
                    src.nearest_fixed(px, sat_i16(sx), sat_i16(sy), border, fill);
                }
                Interp::Linear => {
                    let (sx, sy) = old_mapped_point(&map.m, x0, x, y, 32.0);
                    src.linear_fixed(px, sat_i16(sx >> 5), sat_i16(sy >> 5), sx & 31, sy & 31, border, fill);
                }
                Interp::Cubic => unreachable!("warp_perspective runs cubic in warp_cubic"),
            }
        }
    }
}

/// The new kernels' warp pixel by pixel, every pixel through the border-aware samplers: the
/// fallback where AVX2 and FMA are missing (`f32::mul_add` is then a library call), and the
/// reference the row kernels ([`x86`]) are tested against.
pub fn warp_new_per_pixel<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], interp: Interp, border: BorderMode, fill: &[T; 4]) {
    for (y, row) in dst.chunks_exact_mut(out_w * src.c).enumerate() {
        for (x, px) in row.chunks_exact_mut(src.c).enumerate() {
            let part = Part::of(x, out_w);
            let (sx, sy) = mapped_point(m, x, y, part);
            match interp {
                Interp::Nearest => src.nearest(px, sx, sy, border, fill),
                Interp::Linear => src.linear(px, sx, sy, border, fill, || fills_directly(part, x, sx, sy, src.w, src.h, |x| mapped_point(m, x, y, Part::Vector))),
                Interp::Cubic => unreachable!("warp_perspective runs cubic in warp_cubic"),
            }
        }
    }
}

/// Output pixels per column block of OpenCV 5.0's `genericWarp` (the source points of a
/// block are computed, then its kernel runs over them).
const CUBIC_BLOCK: usize = 128;
/// Lanes of the bicubic vector kernel (`bicubicVec`, 8 f32 lanes in OpenCV's AVX2 build).
const CUBIC_LANES: usize = 8;
/// Keys' cubic parameter OpenCV uses.
const CUBIC_A: f32 = -0.75;

/// `cv::warpPerspective` with `INTER_CUBIC`, as OpenCV 5.0 computes it (`genericWarp` and
/// the bicubic kernels of `warp_kernels.simd.hpp`, their AVX2 build: the one x86 machines
/// run):
/// * per row, `M_x = y*M1 + M2` (and `M_y`, `M_z`) in f32; per column `x`, in f64,
///   `invz = 1 / (M_z + M6*x)` and the point `((M_x + M0*x) * invz, (M_y + M3*x) * invz)`,
///   rounded to f32; the matrix is the f32 one;
/// * the point is clamped to [-max(w, 16), 2 max(w, 16)] (likewise y), its floor less one is
///   the first of 4x4 taps, the fraction gives Keys' weights (A = -0.75) per axis; rows are
///   summed with fused multiply-adds in f32 and rounded half to even and saturated;
/// * a point whose taps all lie beyond the image (more than 4 pixels out) with a constant
///   border stores the fill value; its other taps read the border (constant: the fill value
///   tap by tap).
///
/// Two kernels, with different weights' and sums' rounding: the vector one for UINT8,
/// UINT16 and FLOAT with 1, 3 or 4 channels, the scalar one for INT16 and 2 channels
/// ([`cubic_vector_kernel`]). The vector kernel decides the fill per step of 8 pixels (all
/// 8 beyond, or none filled; see [`cubic_row_block`]) and clamps a NaN point to the low
/// bound; the scalar one per pixel. Checked against DALI 2.4 side by side
/// (tests/test_warp_perspective.py). Not copied: OpenCV loops forever on a border read
/// (reflect_101 of a 1-pixel axis, or any non-constant border with a NaN point in the
/// scalar kernel); Sluice reads pixel 0 there / the border of the wrapped coordinate.
pub fn warp_cubic<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], border: BorderMode, fill: &[T; 4]) {
    #[cfg(target_arch = "x86_64")]
    if x86::available() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { x86::warp_cubic(dst, out_w, src, m, border, fill) };
    }
    warp_cubic_rows(dst, out_w, src, m, border, fill, |out, p, vector| src.cubic(out, p, vector, border, fill))
}

/// Whether OpenCV 5.0 runs its vector bicubic kernel (else the scalar one).
pub fn cubic_vector_kernel(t: DType, channels: usize) -> bool {
    new_kernels(t, channels)
}

/// `interpolate(out, point, vector)` computes one pixel as [`Image::cubic`] does.
#[inline(always)]
fn warp_cubic_rows<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], border: BorderMode, fill: &[T; 4], interpolate: impl Fn(&mut [T], &CubicPoint, bool)) {
    let c = src.c;
    let vector = cubic_vector_kernel(T::DTYPE, c);
    let mut xs = [0f32; CUBIC_BLOCK];
    let mut ys = [0f32; CUBIC_BLOCK];
    for (y, row) in dst.chunks_exact_mut(out_w * c).enumerate() {
        let sums = cubic_row_sums(m, y);
        for (b, block) in row.chunks_mut(CUBIC_BLOCK * c).enumerate() {
            let n = block.len() / c;
            for i in 0..n {
                (xs[i], ys[i]) = cubic_source_point(m, sums, b * CUBIC_BLOCK + i);
            }
            cubic_row_block(block, &xs[..n], &ys[..n], src, vector, border, fill, &interpolate);
        }
    }
}

/// `M_x, M_y, M_z` of row `y` of the bicubic warp: f32 sums, widened to f64.
#[inline(always)]
fn cubic_row_sums(m: &[f32; 9], y: usize) -> (f64, f64, f64) {
    let fy = y as f32;
    ((fy * m[1] + m[2]) as f64, (fy * m[4] + m[5]) as f64, (fy * m[7] + m[8]) as f64)
}

/// The bicubic warp's source point of column `x` of a row with sums `(mx, my, mz)`: in f64,
/// rounded to f32.
#[inline(always)]
fn cubic_source_point(m: &[f32; 9], (mx, my, mz): (f64, f64, f64), x: usize) -> (f32, f32) {
    let xf = x as f64;
    let invz = 1.0 / (mz + m[6] as f64 * xf);
    (((mx + m[0] as f64 * xf) * invz) as f32, ((my + m[3] as f64 * xf) * invz) as f32)
}

/// One block of a row (`dst`: `xs.len()` pixels): OpenCV's vector kernel steps over it 8
/// pixels at a time, the last step moved back to end at the block's end (pixels computed
/// twice, the second time last), a block under 8 pixels padded with the point (0, 0) (never
/// beyond, so such a step fills nothing); the scalar kernel pixel by pixel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn cubic_row_block<T: CvPixel>(dst: &mut [T], xs: &[f32], ys: &[f32], src: &Image<'_, T>, vector: bool, border: BorderMode, fill: &[T; 4], interpolate: &impl Fn(&mut [T], &CubicPoint, bool)) {
    let (c, len) = (src.c, xs.len());
    let (bigw, bigh) = (src.w.max(16) as f32, src.h.max(16) as f32);
    if !vector {
        for (i, px) in dst.chunks_exact_mut(c).enumerate() {
            // std::clamp keeps a NaN, whose floor is INT_MIN: beyond the image.
            let clamp = |v: f32, hi: f32| if v < -hi { -hi } else if 2.0 * hi < v { 2.0 * hi } else { v };
            let p = CubicPoint::new(clamp(xs[i], bigw), clamp(ys[i], bigh), src, false);
            if p.beyond && border == BorderMode::Constant {
                px.copy_from_slice(&fill[..c]);
            } else {
                interpolate(px, &p, false);
            }
        }
        return;
    }
    let mut i = 0;
    while i < len {
        if i + CUBIC_LANES > len && i > 0 {
            i = len - CUBIC_LANES;
        }
        let lanes = CUBIC_LANES.min(len - i);
        // The step's points first (independent of each other: they overlap in the core). A
        // plain loop: a closure here (`array::from_fn`) would be compiled without the
        // caller's target features, its fused multiply-adds library calls.
        let mut points = [CubicPoint::default(); CUBIC_LANES];
        for (l, p) in points.iter_mut().enumerate() {
            let j = (i + l).min(len - 1);
            *p = CubicPoint::new(vector_clamp(xs[j], bigw), vector_clamp(ys[j], bigh), src, true);
        }
        let fill_step = lanes == CUBIC_LANES && border == BorderMode::Constant && points.iter().all(|p| p.beyond);
        for (l, p) in points[..lanes].iter().enumerate() {
            let px = &mut dst[(i + l) * c..(i + l + 1) * c];
            if fill_step {
                px.copy_from_slice(&fill[..c]);
            } else {
                interpolate(px, p, true);
            }
        }
        i += CUBIC_LANES;
    }
}

/// The vector kernel's clamp of a point's coordinate to [-hi, 2 hi]: `_mm256_max_ps` then
/// `min_ps`, so a NaN takes the low bound.
#[inline(always)]
fn vector_clamp(v: f32, hi: f32) -> f32 {
    let v = if v > -hi { v } else { -hi };
    if v < 2.0 * hi { v } else { 2.0 * hi }
}

/// A clamped source point of the bicubic kernels: its first tap, fractions, and whether all
/// its taps lie more than 4 pixels beyond the image (OpenCV's "outlier").
/// Its weights along x and y are those of the vector or the scalar kernel.
#[derive(Clone, Copy, Default)]
struct CubicPoint {
    ix: i32,
    iy: i32,
    wx: [f32; 4],
    wy: [f32; 4],
    beyond: bool,
}

impl CubicPoint {
    #[inline(always)]
    fn new<T>(vx: f32, vy: f32, src: &Image<'_, T>, vector: bool) -> CubicPoint {
        let (fx, fy) = (cv_floor(vx), cv_floor(vy));
        let (ix, iy) = (fx.wrapping_sub(1), fy.wrapping_sub(1));
        let beyond = ix.wrapping_add(4) as u32 >= (src.w + 4) as u32 || iy.wrapping_add(4) as u32 >= (src.h + 4) as u32;
        let (alpha, beta) = (vx - fx as f32, vy - fy as f32);
        CubicPoint { ix, iy, wx: cubic_weights(alpha, vector), wy: cubic_weights(beta, vector), beyond }
    }
}

/// Keys' weights of fraction `a`: `A a b^2` and `A a^2 b` (with `b = 1 - a`), the vector
/// kernel multiplying by `A` last, the scalar one first (as GCC evaluates `A*a*b2`); the
/// second weight fused as both compute it; the third the rest of 1.
#[inline(always)]
fn cubic_weights(a: f32, vector: bool) -> [f32; 4] {
    let (a2, b) = (a * a, 1.0 - a);
    let b2 = b * b;
    let (w0, w3) = if vector { (CUBIC_A * (a * b2), CUBIC_A * (a2 * b)) } else { (CUBIC_A * a * b2, CUBIC_A * a2 * b) };
    let w1 = a2.mul_add((CUBIC_A + 2.0).mul_add(a, -(CUBIC_A + 3.0)), 1.0);
    [w0, w1, ((1.0 - w0) - w1) - w3, w3]
}

impl<T: CvPixel> Image<'_, T> {
    /// The bicubic interpolation of point `p`: rows of 4 taps summed with fused
    /// multiply-adds, the vector kernel starting from `v0*w0` (`vector`), the scalar one
    /// from `v1*w1`; each row's sum added to the pixel's, weighted by the row's weight.
    #[inline(always)]
    fn cubic(&self, out: &mut [T], p: &CubicPoint, vector: bool, border: BorderMode, fill: &[T; 4]) {
        let (wx, wy) = (p.wx, p.wy);
        let inside = p.ix >= 0 && p.iy >= 0 && p.ix + 3 < self.w && p.iy + 3 < self.h;
        let mut taps = [[None; 4]; 4];
        for (r, row) in taps.iter_mut().enumerate() {
            for (k, t) in row.iter_mut().enumerate() {
                let (x, y) = (p.ix.wrapping_add(k as i32), p.iy.wrapping_add(r as i32));
                *t = if inside { Some(self.at(x as usize, y as usize)) } else { self.tap(x, y, border) };
            }
        }
        for (ch, o) in out.iter_mut().enumerate() {
            let v = |t: Option<usize>| t.map_or(fill[ch], |t| self.data[t + ch]).to_f32();
            let mut acc = 0f32;
            for (r, row) in taps.iter().enumerate() {
                let (v0, v1, v2, v3) = (v(row[0]), v(row[1]), v(row[2]), v(row[3]));
                let mut s = if vector { v1.mul_add(wx[1], v0 * wx[0]) } else { v0.mul_add(wx[0], v1 * wx[1]) };
                s = v2.mul_add(wx[2], s);
                s = v3.mul_add(wx[3], s);
                acc = s.mul_add(wy[r], acc);
            }
            *o = T::from_f32(acc);
        }
    }
}

/// The new kernels' row loop with AVX2 and FMA, as fast as OpenCV's and with the same bits
/// as [`warp_new_per_pixel`]: what cost time there was the per-pixel work around the
/// arithmetic (without the target features every `mul_add` and `round_ties_even` is a
/// library call; the interpolation and channel count are dispatched per pixel; every tap
/// goes through the border logic). Here:
/// * the channel count and interpolation are constants of each monomorphised row loop;
/// * source points are computed 16 at a time (two 8-lane vectors) exactly as OpenCV's
///   vector step does (`fma(M0, x, M1*y + M2)`, divided by the `w` sum; `cvRound` and
///   `v_floor` are `cvtps_epi32` and its correction, which give `cvRound`'s `INT_MIN` for
///   NaN and out-of-range values too); the scalar tail's points with [`mapped_point`];
/// * a point whose 2x2 taps (nearest: its pixel) lie inside the image is sampled directly;
///   with 3 or 4 channels, all channels at once in 4 f32 lanes: the same three fused
///   multiply-adds per channel, `cvtps_epi32` (round half to even under the default MXCSR)
///   and saturating packs (`saturate_cast`: `INT_MIN` from a NaN becomes 0, as in
///   `from_f32`); with 1 channel, 8 pixels at a time in 8 lanes (gathered taps) where all
///   8 lie inside;
/// * any other point goes through [`Image::nearest`] / [`Image::linear`], the per-pixel
///   code itself, so the borders and the fill rules are unchanged.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// Whether the row kernels can run (AVX2 and FMA; `std` caches the answer).
    pub fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// [`warp_new_per_pixel`]'s output, faster.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA ([`available`]).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn warp_new<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], interp: Interp, border: BorderMode, fill: &[T; 4]) {
        match (src.c, interp) {
            (1, Interp::Nearest) => rows::<T, 1, false>(dst, out_w, src, m, border, fill),
            (3, Interp::Nearest) => rows::<T, 3, false>(dst, out_w, src, m, border, fill),
            (4, Interp::Nearest) => rows::<T, 4, false>(dst, out_w, src, m, border, fill),
            (1, Interp::Linear) => rows::<T, 1, true>(dst, out_w, src, m, border, fill),
            (3, Interp::Linear) => rows::<T, 3, true>(dst, out_w, src, m, border, fill),
            (4, Interp::Linear) => rows::<T, 4, true>(dst, out_w, src, m, border, fill),
            _ => unreachable!("the new kernels take 1, 3 or 4 channels, nearest or linear"),
        }
    }

    /// [`super::warp_cubic`]'s rows compiled with AVX2 and FMA (`mul_add` is an instruction).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA ([`available`]).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn warp_cubic<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], border: BorderMode, fill: &[T; 4]) {
        // Byte offsets of the taps go in 32-bit lanes.
        let offsets_fit = std::mem::size_of_val(src.data) < i32::MAX as usize / 2;
        match src.c {
            1 if offsets_fit && cubic_vector_kernel(T::DTYPE, 1) => cubic_rows_8::<T, 1>(dst, out_w, src, m, border, fill),
            3 if offsets_fit && cubic_vector_kernel(T::DTYPE, 3) => cubic_rows_8::<T, 3>(dst, out_w, src, m, border, fill),
            4 if offsets_fit && cubic_vector_kernel(T::DTYPE, 4) => cubic_rows_8::<T, 4>(dst, out_w, src, m, border, fill),
            _ => super::warp_cubic_rows(dst, out_w, src, m, border, fill, |out, p, vector| {
                // SAFETY: this function's target features.
                unsafe { cubic_point(src, out, p, vector, border, fill) }
            }),
        }
    }

    /// One pixel of the bicubic warp, through [`cubic_lanes`] where it can.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(super) unsafe fn cubic_point<T: CvPixel>(src: &Image<'_, T>, out: &mut [T], p: &CubicPoint, vector: bool, border: BorderMode, fill: &[T; 4]) {
        if !cubic_lanes(src, out, p, vector) {
            cubic_per_channel(src, out, p, vector, border, fill)
        }
    }

    /// The vector kernel's rows (`C` channels of UINT8, UINT16 or FLOAT) as OpenCV's AVX2
    /// build computes them: 8 output pixels in the 8 f32 lanes, their taps gathered. Each
    /// lane does [`Image::cubic`]'s operations in its order, and the points and weights are
    /// [`CubicPoint::new`]'s, so the bits are those of [`super::warp_cubic_rows`] (a unit
    /// test compares the two). A step with a point whose taps are not all inside goes pixel
    /// by pixel ([`cubic_point`]); blocks under 8 pixels through [`super::cubic_row_block`].
    #[target_feature(enable = "avx2,fma")]
    unsafe fn cubic_rows_8<T: CvPixel, const C: usize>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], border: BorderMode, fill: &[T; 4]) {
        let mut xs = [0f32; CUBIC_BLOCK];
        let mut ys = [0f32; CUBIC_BLOCK];
        for (y, row) in dst.chunks_exact_mut(out_w * C).enumerate() {
            let sums = cubic_row_sums(m, y);
            for (b, block) in row.chunks_mut(CUBIC_BLOCK * C).enumerate() {
                let n = block.len() / C;
                block_points(&mut xs[..n], &mut ys[..n], b * CUBIC_BLOCK, sums, m);
                if n < CUBIC_LANES {
                    super::cubic_row_block(block, &xs[..n], &ys[..n], src, true, border, fill, &|out, p, vector| unsafe { cubic_point(src, out, p, vector, border, fill) });
                    continue;
                }
                let mut i = 0;
                while i < n {
                    // The last step moved back to end at the block's end.
                    i = i.min(n - CUBIC_LANES);
                    cubic_step::<T, C>(&mut block[i * C..(i + CUBIC_LANES) * C], &xs[i..i + CUBIC_LANES], &ys[i..i + CUBIC_LANES], src, border, fill);
                    i += CUBIC_LANES;
                }
            }
        }
    }

    /// [`super::warp_cubic_rows`]' source points of a block starting at column `x0`, 4 at a
    /// time in f64 lanes: the same operations, so the same bits.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block_points(xs: &mut [f32], ys: &mut [f32], x0: usize, sums: (f64, f64, f64), m: &[f32; 9]) {
        let (mx, my, mz) = sums;
        let n = xs.len();
        let (m0, m3, m6) = (_mm256_set1_pd(m[0] as f64), _mm256_set1_pd(m[3] as f64), _mm256_set1_pd(m[6] as f64));
        let (vmx, vmy, vmz) = (_mm256_set1_pd(mx), _mm256_set1_pd(my), _mm256_set1_pd(mz));
        let mut i = 0;
        while i + 4 <= n {
            let xf = _mm256_add_pd(_mm256_set1_pd((x0 + i) as f64), _mm256_set_pd(3.0, 2.0, 1.0, 0.0));
            let invz = _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_add_pd(vmz, _mm256_mul_pd(m6, xf)));
            _mm_storeu_ps(xs.as_mut_ptr().add(i), _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_add_pd(vmx, _mm256_mul_pd(m0, xf)), invz)));
            _mm_storeu_ps(ys.as_mut_ptr().add(i), _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_add_pd(vmy, _mm256_mul_pd(m3, xf)), invz)));
            i += 4;
        }
        for i in i..n {
            (xs[i], ys[i]) = cubic_source_point(m, sums, x0 + i);
        }
    }

    /// [`cubic_weights`] of the vector kernel in 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn cubic_weights_8(a: __m256) -> [__m256; 4] {
        let ca = _mm256_set1_ps(CUBIC_A);
        let one = _mm256_set1_ps(1.0);
        let (a2, b) = (_mm256_mul_ps(a, a), _mm256_sub_ps(one, a));
        let b2 = _mm256_mul_ps(b, b);
        let w0 = _mm256_mul_ps(ca, _mm256_mul_ps(a, b2));
        let w3 = _mm256_mul_ps(ca, _mm256_mul_ps(a2, b));
        let w1 = _mm256_fmadd_ps(a2, _mm256_fmadd_ps(_mm256_set1_ps(CUBIC_A + 2.0), a, _mm256_set1_ps(-(CUBIC_A + 3.0))), one);
        [w0, w1, _mm256_sub_ps(_mm256_sub_ps(_mm256_sub_ps(one, w0), w1), w3), w3]
    }

    /// `x <= limit` for unsigned 32-bit lanes, as a mask.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn at_most_u32(x: __m256i, limit: __m256i) -> __m256i {
        _mm256_cmpeq_epi32(_mm256_min_epu32(x, limit), x)
    }

    /// The channels of the UINT16 or FLOAT pixels at byte offsets `at` (one per lane) as f32
    /// lanes (UINT8 pixels of several channels are read by [`transposed_row_u8`]).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn gather_pixel<T: CvPixel, const C: usize>(base: *const u8, at: __m256i) -> [__m256; C] {
        let mut v = [_mm256_setzero_ps(); C];
        match T::DTYPE {
            DType::U16 => {
                for pair in 0..C.div_ceil(2) {
                    let word = _mm256_i32gather_epi32::<1>(base as *const i32, _mm256_add_epi32(at, _mm256_set1_epi32(4 * pair as i32)));
                    v[2 * pair] = _mm256_cvtepi32_ps(_mm256_and_si256(word, _mm256_set1_epi32(0xffff)));
                    if 2 * pair + 1 < C {
                        v[2 * pair + 1] = _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(word));
                    }
                }
            }
            DType::F32 => {
                for (ch, v) in v.iter_mut().enumerate() {
                    *v = _mm256_i32gather_ps::<1>(base as *const f32, _mm256_add_epi32(at, _mm256_set1_epi32(4 * ch as i32)));
                }
            }
            _ => unreachable!("UINT8 rows of several channels are transposed, not gathered"),
        }
        v
    }

    /// The 4 taps of one row of a 1-channel image, from byte offsets `at` (the first tap):
    /// one gather for UINT8, two for UINT16.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn gather_row_1<T: CvPixel>(base: *const u8, at: __m256i) -> [__m256; 4] {
        match T::DTYPE {
            DType::U8 => {
                let word = _mm256_i32gather_epi32::<1>(base as *const i32, at);
                let byte = |k: i32| _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(word, _mm_cvtsi32_si128(8 * k)), _mm256_set1_epi32(0xff)));
                [byte(0), byte(1), byte(2), byte(3)]
            }
            DType::U16 => {
                let lo = _mm256_i32gather_epi32::<1>(base as *const i32, at);
                let hi = _mm256_i32gather_epi32::<1>(base as *const i32, _mm256_add_epi32(at, _mm256_set1_epi32(4)));
                let low_half = |w: __m256i| _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)));
                [low_half(lo), _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(lo)), low_half(hi), _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(hi))]
            }
            _ => {
                let tap = |k: i32| _mm256_i32gather_ps::<1>(base as *const f32, _mm256_add_epi32(at, _mm256_set1_epi32(4 * k)));
                [tap(0), tap(1), tap(2), tap(3)]
            }
        }
    }

    /// A row of 4 taps of 8 pixels of a UINT8 image with `C` (3 or 4) channels, as f32
    /// lanes, tap-major (`[tap][channel]`, one pixel per lane): each pixel's 16 bytes from
    /// `row + first_taps[lane]` (its 4 taps, plus 4 bytes for 3 channels), transposed
    /// ([`bytes_as_lanes`]). Plain loads: gathers cost more than the shuffles.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn transposed_row_u8<const C: usize>(row: *const u8, first_taps: &[i32; CUBIC_LANES]) -> [__m256; 16] {
        let q = |l: usize| _mm_loadu_si128(row.add(first_taps[l] as usize) as *const __m128i);
        bytes_as_lanes([q(0), q(1), q(2), q(3), q(4), q(5), q(6), q(7)])
    }

    /// The 16 bytes of each of 8 pixels (`q[lane]`) as 16 vectors of 8 f32 lanes, one per
    /// byte (`[byte][lane]`): byte, word and dword unpacks, then widening. Inlined, the
    /// bytes a caller does not use cost nothing.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(crate) unsafe fn bytes_as_lanes(q: [__m128i; 8]) -> [__m256; 16] {
        // Bytes of pixel pairs, then of 4 pixels, then of all 8: `cols[i]` holds byte `2i`
        // of the 8 pixels in its low half, byte `2i + 1` in its high half.
        let (a_lo, a_hi) = (_mm_unpacklo_epi8(q[0], q[1]), _mm_unpackhi_epi8(q[0], q[1]));
        let (b_lo, b_hi) = (_mm_unpacklo_epi8(q[2], q[3]), _mm_unpackhi_epi8(q[2], q[3]));
        let (c_lo, c_hi) = (_mm_unpacklo_epi8(q[4], q[5]), _mm_unpackhi_epi8(q[4], q[5]));
        let (d_lo, d_hi) = (_mm_unpacklo_epi8(q[6], q[7]), _mm_unpackhi_epi8(q[6], q[7]));
        let four = |lo: __m128i, hi: __m128i, high: bool| if high { _mm_unpackhi_epi16(lo, hi) } else { _mm_unpacklo_epi16(lo, hi) };
        let mut cols = [_mm_setzero_si128(); 8];
        for quarter in 0..4 {
            // Bytes 4*quarter .. 4*quarter + 3, of pixels 0-3 and 4-7.
            let (ab, cd) = match quarter {
                0 => (four(a_lo, b_lo, false), four(c_lo, d_lo, false)),
                1 => (four(a_lo, b_lo, true), four(c_lo, d_lo, true)),
                2 => (four(a_hi, b_hi, false), four(c_hi, d_hi, false)),
                _ => (four(a_hi, b_hi, true), four(c_hi, d_hi, true)),
            };
            cols[2 * quarter] = _mm_unpacklo_epi32(ab, cd);
            cols[2 * quarter + 1] = _mm_unpackhi_epi32(ab, cd);
        }
        let mut v = [_mm256_setzero_ps(); 16];
        for i in 0..8 {
            v[2 * i] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(cols[i]));
            v[2 * i + 1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(cols[i], cols[i])));
        }
        v
    }

    /// One step of 8 output pixels (`dst`, points `xs`, `ys`) of [`cubic_rows_8`].
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn cubic_step<T: CvPixel, const C: usize>(dst: &mut [T], xs: &[f32], ys: &[f32], src: &Image<'_, T>, border: BorderMode, fill: &[T; 4]) {
        let (bigw, bigh) = (src.w.max(16) as f32, src.h.max(16) as f32);
        // _mm256_max_ps / min_ps, as OpenCV: a NaN point takes the low bound.
        let clamp = |v: __m256, hi: f32| _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-hi)), _mm256_set1_ps(2.0 * hi));
        let vx = clamp(_mm256_loadu_ps(xs.as_ptr()), bigw);
        let vy = clamp(_mm256_loadu_ps(ys.as_ptr()), bigh);
        let (fx, fy) = (_mm256_floor_ps(vx), _mm256_floor_ps(vy));
        let one = _mm256_set1_epi32(1);
        let ix = _mm256_sub_epi32(_mm256_cvttps_epi32(fx), one);
        let iy = _mm256_sub_epi32(_mm256_cvttps_epi32(fy), one);
        // Beyond: `ix + 4 >= w + 4` as unsigned, i.e. not `ix + 4 <= w + 3`.
        let four = _mm256_set1_epi32(4);
        let near_x = at_most_u32(_mm256_add_epi32(ix, four), _mm256_set1_epi32(src.w + 3));
        let near_y = at_most_u32(_mm256_add_epi32(iy, four), _mm256_set1_epi32(src.h + 3));
        let near = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(near_x, near_y)));
        if near == 0 && border == BorderMode::Constant {
            for px in dst.chunks_exact_mut(C) {
                px.copy_from_slice(&fill[..C]);
            }
            return;
        }
        // Inside: `0 <= ix <= w - 4` (likewise y).
        let inside = src.w >= 4 && src.h >= 4 && {
            let in_x = at_most_u32(ix, _mm256_set1_epi32(src.w - 4));
            let in_y = at_most_u32(iy, _mm256_set1_epi32(src.h - 4));
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(in_x, in_y))) == 0xff
        };
        let size = std::mem::size_of::<T>() as i32;
        let stride = src.w * C as i32 * size;
        let at = _mm256_mullo_epi32(_mm256_add_epi32(_mm256_mullo_epi32(iy, _mm256_set1_epi32(src.w)), ix), _mm256_set1_epi32(C as i32 * size));
        // UINT8 with 3 or 4 channels reads a row's 4 taps as 16 bytes ([`transposed_row_u8`]),
        // UINT16 with 3 channels a word past the last tap's pixel.
        let rows_of_16 = T::DTYPE == DType::U8 && C > 1;
        let fits = || {
            let reach = if rows_of_16 {
                16
            } else if C == 3 && T::DTYPE != DType::F32 {
                3 * C as i32 * size + (C as i32 * size + 3) / 4 * 4
            } else {
                4 * C as i32 * size
            };
            let last = _mm256_add_epi32(at, _mm256_set1_epi32(3 * stride + reach));
            let half = _mm_max_epi32(_mm256_castsi256_si128(last), _mm256_extracti128_si256::<1>(last));
            let half = _mm_max_epi32(half, _mm_shuffle_epi32::<0b01_00_11_10>(half));
            let most = _mm_max_epi32(half, _mm_shuffle_epi32::<0b10_11_00_01>(half));
            _mm_cvtsi128_si32(most) as usize <= std::mem::size_of_val(src.data)
        };
        if !inside || !fits() {
            for (l, px) in dst.chunks_exact_mut(C).enumerate() {
                let p = CubicPoint::new(vector_clamp(xs[l], bigw), vector_clamp(ys[l], bigh), src, true);
                cubic_point(src, px, &p, true, border, fill);
            }
            return;
        }
        let wx = cubic_weights_8(_mm256_sub_ps(vx, fx));
        let wy = cubic_weights_8(_mm256_sub_ps(vy, fy));
        let base = src.data.as_ptr() as *const u8;
        let mut acc = [_mm256_setzero_ps(); C];
        let mut first_taps = [0i32; CUBIC_LANES];
        _mm256_storeu_si256(first_taps.as_mut_ptr() as *mut __m256i, at);
        for (r, &wr) in wy.iter().enumerate() {
            let row = _mm256_add_epi32(at, _mm256_set1_epi32(r as i32 * stride));
            if rows_of_16 {
                let v = transposed_row_u8::<C>(base.add(r * stride as usize), &first_taps);
                let mut s = [_mm256_setzero_ps(); C];
                for (j, &v) in v[..4 * C].iter().enumerate() {
                    let (k, ch) = (j / C, j % C);
                    s[ch] = if k == 0 { _mm256_mul_ps(v, wx[0]) } else { _mm256_fmadd_ps(v, wx[k], s[ch]) };
                }
                for ch in 0..C {
                    acc[ch] = _mm256_fmadd_ps(s[ch], wr, acc[ch]);
                }
            } else if C == 1 {
                let [v0, v1, v2, v3] = gather_row_1::<T>(base, row);
                let s = _mm256_fmadd_ps(v1, wx[1], _mm256_mul_ps(v0, wx[0]));
                let s = _mm256_fmadd_ps(v3, wx[3], _mm256_fmadd_ps(v2, wx[2], s));
                acc[0] = _mm256_fmadd_ps(s, wr, acc[0]);
            } else {
                let mut s = [_mm256_setzero_ps(); C];
                for (k, &w) in wx.iter().enumerate() {
                    let v = gather_pixel::<T, C>(base, _mm256_add_epi32(row, _mm256_set1_epi32(k as i32 * C as i32 * size)));
                    for ch in 0..C {
                        s[ch] = if k == 0 { _mm256_mul_ps(v[ch], w) } else { _mm256_fmadd_ps(v[ch], w, s[ch]) };
                    }
                }
                for ch in 0..C {
                    acc[ch] = _mm256_fmadd_ps(s[ch], wr, acc[ch]);
                }
            }
        }
        store_8::<T, C>(dst, &acc);
    }

    /// `saturate_cast` of 8 pixels' channels (`acc[ch]`, one pixel per lane) into `dst`,
    /// interleaved: `cvtps_epi32` (round half to even; `INT_MIN` for NaN and out of range,
    /// as [`cv_round`]) and saturating packs, as [`CvPixel::from_f32`].
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn store_8<T: CvPixel, const C: usize>(dst: &mut [T], acc: &[__m256; C]) {
        let mut lanes = [[T::zeroed(); CUBIC_LANES]; C];
        for (ch, out) in lanes.iter_mut().enumerate() {
            let out = out.as_mut_ptr() as *mut u8;
            match T::DTYPE {
                DType::U8 | DType::U16 => {
                    let i = _mm256_cvtps_epi32(acc[ch]);
                    let (lo, hi) = (_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
                    if T::DTYPE == DType::U8 {
                        let w = _mm_packs_epi32(lo, hi);
                        _mm_storel_epi64(out as *mut __m128i, _mm_packus_epi16(w, w));
                    } else {
                        _mm_storeu_si128(out as *mut __m128i, _mm_packus_epi32(lo, hi));
                    }
                }
                _ => _mm256_storeu_ps(out as *mut f32, acc[ch]),
            }
        }
        interleave(dst, &lanes);
    }

    /// 8 pixels' channels (`lanes[channel][pixel]`) into `dst`, interleaved (`C` per pixel).
    #[inline(always)]
    pub(crate) fn interleave<T: Copy, const C: usize>(dst: &mut [T], lanes: &[[T; 8]; C]) {
        if C == 1 {
            dst.copy_from_slice(&lanes[0]);
            return;
        }
        for (l, px) in dst.chunks_exact_mut(C).enumerate() {
            for (ch, v) in px.iter_mut().enumerate() {
                *v = lanes[ch][l];
            }
        }
    }

    /// [`Image::cubic`] with AVX2 and FMA, out of line: the rare points [`cubic_lanes`]
    /// leaves (near the border, 1 or 2 channels) stay out of the row loop's registers.
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn cubic_per_channel<T: CvPixel>(src: &Image<'_, T>, out: &mut [T], p: &CubicPoint, vector: bool, border: BorderMode, fill: &[T; 4]) {
        src.cubic(out, p, vector, border, fill)
    }

    /// [`Image::cubic`] of a point whose 4x4 taps lie inside, for 3 or 4 channels: the
    /// channels in 4 f32 lanes, each lane the same fused multiply-adds in the same order
    /// (so the same bits). False (nothing written) for other points and channel counts, and
    /// where reading 4 values at the last tap would pass the end of the image.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    pub(super) unsafe fn cubic_lanes<T: CvPixel>(src: &Image<'_, T>, out: &mut [T], p: &CubicPoint, vector: bool) -> bool {
        let c = src.c;
        if c < 3 || p.ix < 0 || p.iy < 0 || p.ix + 3 >= src.w || p.iy + 3 >= src.h {
            return false;
        }
        let first = src.at(p.ix as usize, p.iy as usize);
        let stride = src.w as usize * c;
        if first + 3 * stride + 3 * c + 4 > src.data.len() {
            return false;
        }
        let (wx, wy) = (p.wx, p.wy);
        let load = |at: usize| -> __m128 {
            // SAFETY: `at + 4` is within the image (checked above for the last tap).
            unsafe {
                let ptr = src.data.as_ptr().add(at);
                match T::DTYPE {
                    DType::U8 => _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((ptr as *const i32).read_unaligned()))),
                    DType::U16 => _mm_cvtepi32_ps(_mm_cvtepu16_epi32(_mm_loadl_epi64(ptr as *const __m128i))),
                    DType::I16 => _mm_cvtepi32_ps(_mm_cvtepi16_epi32(_mm_loadl_epi64(ptr as *const __m128i))),
                    _ => _mm_loadu_ps(ptr as *const f32),
                }
            }
        };
        let w = wx.map(|v| _mm_set1_ps(v));
        let mut acc = _mm_setzero_ps();
        for (r, &wr) in wy.iter().enumerate() {
            let at = first + r * stride;
            let (v0, v1, v2, v3) = (load(at), load(at + c), load(at + 2 * c), load(at + 3 * c));
            let mut s = if vector { _mm_fmadd_ps(v1, w[1], _mm_mul_ps(v0, w[0])) } else { _mm_fmadd_ps(v0, w[0], _mm_mul_ps(v1, w[1])) };
            s = _mm_fmadd_ps(v2, w[2], s);
            s = _mm_fmadd_ps(v3, w[3], s);
            acc = _mm_fmadd_ps(s, _mm_set1_ps(wr), acc);
        }
        let mut lanes = [0f32; 4];
        _mm_storeu_ps(lanes.as_mut_ptr(), acc);
        for (o, &v) in out.iter_mut().zip(&lanes) {
            *o = T::from_f32(v);
        }
        true
    }

    /// [`super::warp_old`] compiled with AVX2 and FMA.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA ([`available`]).
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn warp_old<T: CvPixel>(dst: &mut [T], out_h: usize, out_w: usize, src: &Image<'_, T>, map: &Perspective, interp: Interp, border: BorderMode, fill: &[T; 4]) {
        super::warp_old(dst, out_h, out_w, src, map, interp, border, fill)
    }

    /// The source points of up to 16 consecutive output pixels of a row: the point, its
    /// integer part (`cvRound` for nearest, `cvFloor` for linear) and fraction.
    #[derive(Default)]
    struct Points {
        sx: [f32; VECTOR_PIXELS],
        sy: [f32; VECTOR_PIXELS],
        ix: [i32; VECTOR_PIXELS],
        iy: [i32; VECTOR_PIXELS],
        a: [f32; VECTOR_PIXELS],
        b: [f32; VECTOR_PIXELS],
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn rows<T: CvPixel, const C: usize, const LINEAR: bool>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, m: &[f32; 9], border: BorderMode, fill: &[T; 4]) {
        let (w, h) = (src.w, src.h);
        let (data, down) = (src.data, w as usize * C);
        let vend = vector_end(out_w);
        let mut pts = Points::default();
        // `linear8`'s preconditions: offsets within `i32`, and room for its 4-byte reads.
        let gather = w >= 4 && h >= 3 && data.len() < i32::MAX as usize / 4;
        for (y, row) in dst.chunks_exact_mut(out_w * C).enumerate() {
            let mut x0 = 0;
            while x0 < out_w {
                let n = (out_w - x0).min(VECTOR_PIXELS);
                let part = if x0 < vend { Part::Vector } else { Part::Tail };
                if part == Part::Vector {
                    vector_points::<LINEAR>(m, x0, y, &mut pts);
                } else {
                    for i in 0..n {
                        let (sx, sy) = mapped_point(m, x0 + i, y, Part::Tail);
                        let (ix, iy) = if LINEAR { (cv_floor(sx), cv_floor(sy)) } else { (cv_round(sx), cv_round(sy)) };
                        (pts.sx[i], pts.sy[i], pts.ix[i], pts.iy[i]) = (sx, sy, ix, iy);
                        (pts.a[i], pts.b[i]) = (sx - ix as f32, sy - iy as f32);
                    }
                }
                let out = &mut row[x0 * C..(x0 + n) * C];
                let mut i = 0;
                while i < n {
                    // One channel: 8 pixels at a time where all their taps lie inside.
                    if LINEAR && C == 1 && gather && n - i >= 8 && linear8(&mut out[i..i + 8], data, w, h, &pts, i) {
                        i += 8;
                        continue;
                    }
                    // UINT8 with 3 or 4 channels: likewise, each pixel's taps read as 16 bytes.
                    let bytes8 = C > 1 && T::DTYPE == DType::U8;
                    if LINEAR && bytes8 && n - i >= 8 && linear8_u8::<C>(bytemuck::cast_slice_mut(&mut out[i * C..(i + 8) * C]), bytemuck::cast_slice(data), w, h, &pts, i) {
                        i += 8;
                        continue;
                    }
                    let end = if LINEAR && (C == 1 || bytes8) { (i + 8).min(n) } else { n };
                    for i in i..end {
                        let px = &mut out[i * C..(i + 1) * C];
                        let (ix, iy, sx, sy) = (pts.ix[i], pts.iy[i], pts.sx[i], pts.sy[i]);
                        if !LINEAR {
                            if (ix as u32) < w as u32 && (iy as u32) < h as u32 {
                                let o = (iy as usize * w as usize + ix as usize) * C;
                                px.copy_from_slice(&data[o..o + C]);
                            } else {
                                src.nearest(px, sx, sy, border, fill);
                            }
                        } else if (ix as u32) < (w - 1) as u32 && (iy as u32) < (h - 1) as u32 {
                            let o = (iy as usize * w as usize + ix as usize) * C;
                            // 4 lanes read a 4th element past the last tap: within the image
                            // but for the last pixel of a 3-channel one.
                            if C > 1 && o + down + C + 4 <= data.len() {
                                linear_lanes::<T, C>(px, data.as_ptr().add(o), down, pts.a[i], pts.b[i]);
                            } else {
                                linear_scalar::<T, C>(px, &data[o..o + 2 * C], &data[o + down..o + down + 2 * C], pts.a[i], pts.b[i]);
                            }
                        } else {
                            let x = x0 + i;
                            src.linear(px, sx, sy, border, fill, || fills_directly(part, x, sx, sy, w, h, |x| mapped_point(m, x, y, Part::Vector)));
                        }
                    }
                    i = end;
                }
                x0 += n;
            }
        }
    }

    /// OpenCV's vector step: the points of pixels `x0..x0 + 16` of row `y`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn vector_points<const LINEAR: bool>(m: &[f32; 9], x0: usize, y: usize, pts: &mut Points) {
        let yf = y as f32;
        // `M1*y + M2` for each sum, rounded before the fused `M0*x` (as `mapped_point`).
        let (tx, ty, tw) = (yf * m[1] + m[2], yf * m[4] + m[5], yf * m[7] + m[8]);
        for half in 0..2 {
            let at = half * 8;
            let xv = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32((x0 + at) as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
            let wv = _mm256_fmadd_ps(_mm256_set1_ps(m[6]), xv, _mm256_set1_ps(tw));
            let sx = _mm256_div_ps(_mm256_fmadd_ps(_mm256_set1_ps(m[0]), xv, _mm256_set1_ps(tx)), wv);
            let sy = _mm256_div_ps(_mm256_fmadd_ps(_mm256_set1_ps(m[3]), xv, _mm256_set1_ps(ty)), wv);
            let (ix, iy) = if LINEAR { (floor(sx), floor(sy)) } else { (_mm256_cvtps_epi32(sx), _mm256_cvtps_epi32(sy)) };
            _mm256_storeu_ps(pts.sx.as_mut_ptr().add(at), sx);
            _mm256_storeu_ps(pts.sy.as_mut_ptr().add(at), sy);
            _mm256_storeu_si256(pts.ix.as_mut_ptr().add(at) as *mut __m256i, ix);
            _mm256_storeu_si256(pts.iy.as_mut_ptr().add(at) as *mut __m256i, iy);
            _mm256_storeu_ps(pts.a.as_mut_ptr().add(at), _mm256_sub_ps(sx, _mm256_cvtepi32_ps(ix)));
            _mm256_storeu_ps(pts.b.as_mut_ptr().add(at), _mm256_sub_ps(sy, _mm256_cvtepi32_ps(iy)));
        }
    }

    /// `v_floor` (= [`cv_floor`]): the rounded value, less one where it exceeds `v`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn floor(v: __m256) -> __m256i {
        let i = _mm256_cvtps_epi32(v);
        // The comparison's mask is -1 where true; NaN compares false.
        _mm256_add_epi32(i, _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(_mm256_cvtepi32_ps(i), v)))
    }

    /// Bilinear interpolation of an inside point, channel by channel (as `Image::linear`):
    /// `r0`, `r1` hold taps 00, 01 and 10, 11.
    #[inline(always)]
    fn linear_scalar<T: CvPixel, const C: usize>(px: &mut [T], r0: &[T], r1: &[T], a: f32, b: f32) {
        for k in 0..C {
            let (p00, p01, p10, p11) = (r0[k].to_f32(), r0[C + k].to_f32(), r1[k].to_f32(), r1[C + k].to_f32());
            let v0 = a.mul_add(p01 - p00, p00);
            let v1 = a.mul_add(p11 - p10, p10);
            px[k] = T::from_f32(b.mul_add(v1 - v0, v0));
        }
    }

    /// [`linear_lanes`] of 8 pixels of a UINT8 image with `C` (3 or 4) channels in the 8
    /// lanes (pixels `at..at + 8` of `pts`): each pixel's two rows of taps as 8 bytes each
    /// ([`bytes_as_lanes`]), each lane the same fused multiply-adds, so the same bits. False
    /// (nothing written) unless every tap lies inside and the 8-byte reads stay in the image.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn linear8_u8<const C: usize>(out: &mut [u8], data: &[u8], w: i32, h: i32, pts: &Points, at: usize) -> bool {
        if w < 2 || h < 2 {
            return false;
        }
        let ix = _mm256_loadu_si256(pts.ix.as_ptr().add(at) as *const __m256i);
        let iy = _mm256_loadu_si256(pts.iy.as_ptr().add(at) as *const __m256i);
        // Unsigned `ix <= w - 2` and `iy <= h - 2` (negative values are huge).
        let okx = _mm256_cmpeq_epi32(_mm256_min_epu32(ix, _mm256_set1_epi32(w - 2)), ix);
        let oky = _mm256_cmpeq_epi32(_mm256_min_epu32(iy, _mm256_set1_epi32(h - 2)), iy);
        if _mm256_movemask_epi8(_mm256_and_si256(okx, oky)) != -1 {
            return false;
        }
        let down = w as usize * C;
        let first = _mm256_mullo_epi32(_mm256_add_epi32(_mm256_mullo_epi32(iy, _mm256_set1_epi32(w)), ix), _mm256_set1_epi32(C as i32));
        let mut offsets = [0i32; 8];
        _mm256_storeu_si256(offsets.as_mut_ptr() as *mut __m256i, first);
        if offsets.iter().any(|&o| o as usize + down + 8 > data.len()) {
            return false;
        }
        let base = data.as_ptr();
        let q = |l: usize| {
            let top = _mm_loadl_epi64(base.add(offsets[l] as usize) as *const __m128i);
            _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(top), base.add(offsets[l] as usize + down) as *const f64))
        };
        let v = bytes_as_lanes([q(0), q(1), q(2), q(3), q(4), q(5), q(6), q(7)]);
        let a = _mm256_loadu_ps(pts.a.as_ptr().add(at));
        let b = _mm256_loadu_ps(pts.b.as_ptr().add(at));
        let mut blended = [_mm256_setzero_ps(); C];
        for (k, o) in blended.iter_mut().enumerate() {
            let (p00, p01, p10, p11) = (v[k], v[C + k], v[8 + k], v[8 + C + k]);
            let v0 = _mm256_fmadd_ps(a, _mm256_sub_ps(p01, p00), p00);
            let v1 = _mm256_fmadd_ps(a, _mm256_sub_ps(p11, p10), p10);
            *o = _mm256_fmadd_ps(b, _mm256_sub_ps(v1, v0), v0);
        }
        store_8::<u8, C>(out, &blended);
        true
    }

    /// Bilinear interpolation of an inside point, all channels in 4 lanes: tap 00 at `p`,
    /// the row below `down` elements on; 4 elements readable at each tap.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn linear_lanes<T: CvPixel, const C: usize>(px: &mut [T], p: *const T, down: usize, a: f32, b: f32) {
        let (p00, p01, p10, p11) = (load4(p), load4(p.add(C)), load4(p.add(down)), load4(p.add(down + C)));
        let (a, b) = (_mm_set1_ps(a), _mm_set1_ps(b));
        let v0 = _mm_fmadd_ps(a, _mm_sub_ps(p01, p00), p00);
        let v1 = _mm_fmadd_ps(a, _mm_sub_ps(p11, p10), p10);
        store::<T, C>(px, _mm_fmadd_ps(b, _mm_sub_ps(v1, v0), v0));
    }

    /// Bilinear interpolation of 8 one-channel pixels (points `at..at + 8` of `pts`) in 8
    /// lanes, the same operations as [`linear_scalar`], where every point has its taps
    /// inside and its lower taps above the last row (the 4-byte gathers of UINT8 and UINT16
    /// then stay within the image, `w` >= 4); false, writing nothing, otherwise.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn linear8<T: CvPixel>(out: &mut [T], data: &[T], w: i32, h: i32, pts: &Points, at: usize) -> bool {
        let ix = _mm256_loadu_si256(pts.ix.as_ptr().add(at) as *const __m256i);
        let iy = _mm256_loadu_si256(pts.iy.as_ptr().add(at) as *const __m256i);
        // Unsigned `ix <= w - 2` and `iy <= h - 3` (negative values are huge).
        let okx = _mm256_cmpeq_epi32(_mm256_min_epu32(ix, _mm256_set1_epi32(w - 2)), ix);
        let oky = _mm256_cmpeq_epi32(_mm256_min_epu32(iy, _mm256_set1_epi32(h - 3)), iy);
        if _mm256_movemask_epi8(_mm256_and_si256(okx, oky)) != -1 {
            return false;
        }
        let o = _mm256_add_epi32(_mm256_mullo_epi32(iy, _mm256_set1_epi32(w)), ix);
        let o1 = _mm256_add_epi32(o, _mm256_set1_epi32(w));
        let one = _mm256_set1_epi32(1);
        let base = data.as_ptr();
        let (p00, p01) = (gather8(base, o), gather8(base, _mm256_add_epi32(o, one)));
        let (p10, p11) = (gather8(base, o1), gather8(base, _mm256_add_epi32(o1, one)));
        let a = _mm256_loadu_ps(pts.a.as_ptr().add(at));
        let b = _mm256_loadu_ps(pts.b.as_ptr().add(at));
        let v0 = _mm256_fmadd_ps(a, _mm256_sub_ps(p01, p00), p00);
        let v1 = _mm256_fmadd_ps(a, _mm256_sub_ps(p11, p10), p10);
        let v = _mm256_fmadd_ps(b, _mm256_sub_ps(v1, v0), v0);
        match T::DTYPE {
            DType::U8 => {
                let i = _mm256_cvtps_epi32(v);
                let s16 = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
                _mm_storel_epi64(bytemuck::cast_slice_mut::<T, u8>(out).as_mut_ptr() as *mut __m128i, _mm_packus_epi16(s16, s16));
            }
            DType::U16 => {
                let i = _mm256_cvtps_epi32(v);
                let s = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
                _mm_storeu_si128(bytemuck::cast_slice_mut::<T, u16>(out).as_mut_ptr() as *mut __m128i, s);
            }
            DType::F32 => _mm256_storeu_ps(bytemuck::cast_slice_mut::<T, f32>(out).as_mut_ptr(), v),
            _ => unreachable!("the new kernels take UINT8, UINT16 and FLOAT"),
        }
        true
    }

    /// The elements at offsets `o` as f32 lanes (UINT8 and UINT16 read 4 bytes each).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn gather8<T: CvPixel>(base: *const T, o: __m256i) -> __m256 {
        match T::DTYPE {
            DType::U8 => _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_i32gather_epi32::<1>(base as *const i32, o), _mm256_set1_epi32(0xff))),
            DType::U16 => _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_i32gather_epi32::<2>(base as *const i32, o), _mm256_set1_epi32(0xffff))),
            DType::F32 => _mm256_i32gather_ps::<4>(base as *const f32, o),
            _ => unreachable!("the new kernels take UINT8, UINT16 and FLOAT"),
        }
    }

    /// 4 consecutive elements as f32 lanes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn load4<T: CvPixel>(p: *const T) -> __m128 {
        match T::DTYPE {
            DType::U8 => _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((p as *const i32).read_unaligned()))),
            DType::U16 => _mm_cvtepi32_ps(_mm_cvtepu16_epi32(_mm_loadl_epi64(p as *const __m128i))),
            DType::F32 => _mm_loadu_ps(p as *const f32),
            _ => unreachable!("the new kernels take UINT8, UINT16 and FLOAT"),
        }
    }

    /// The first `C` lanes as `saturate_cast<T>` stores them.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn store<T: CvPixel, const C: usize>(px: &mut [T], v: __m128) {
        match T::DTYPE {
            DType::U8 => {
                let i = _mm_cvtps_epi32(v);
                let packed = _mm_packus_epi16(_mm_packs_epi32(i, i), _mm_setzero_si128());
                let bytes = (_mm_cvtsi128_si32(packed) as u32).to_le_bytes();
                bytemuck::cast_slice_mut::<T, u8>(px).copy_from_slice(&bytes[..C]);
            }
            DType::U16 => {
                let i = _mm_cvtps_epi32(v);
                let mut t = [0u16; 8];
                _mm_storeu_si128(t.as_mut_ptr() as *mut __m128i, _mm_packus_epi32(i, i));
                bytemuck::cast_slice_mut::<T, u16>(px).copy_from_slice(&t[..C]);
            }
            DType::F32 => {
                let mut t = [0f32; 4];
                _mm_storeu_ps(t.as_mut_ptr(), v);
                bytemuck::cast_slice_mut::<T, f32>(px).copy_from_slice(&t[..C]);
            }
            _ => unreachable!("the new kernels take UINT8, UINT16 and FLOAT"),
        }
    }
}

/// `cv2.remap` of one HWC image with absolute f32 maps (`out_w` x `out_h` points each, plus
/// `shift`): the new kernels' sampler, or for the old path's types (INT16, 2 channels) the
/// point rounded to 1/32 pixel (`cvRound(v * 32)`) and `remapBilinear` (nearest is the same
/// on both paths).
#[allow(clippy::too_many_arguments)]
pub fn remap<T: CvPixel>(dst: &mut [T], out_w: usize, src: &Image<'_, T>, mapx: &[f32], mapy: &[f32], shift: f32, interp: Interp, border: BorderMode, fill: &[T; 4]) {
    let c = src.c;
    if dst.is_empty() {
        return;
    }
    let fresh = new_kernels(T::DTYPE, c);
    for (y, row) in dst.chunks_exact_mut(out_w * c).enumerate() {
        for (x, px) in row.chunks_exact_mut(c).enumerate() {
            let point = |x: usize| (mapx[y * out_w + x] + shift, mapy[y * out_w + x] + shift);
            let (sx, sy) = point(x);
            match interp {
                Interp::Nearest => src.nearest(px, sx, sy, border, fill),
                Interp::Linear if fresh => src.linear(px, sx, sy, border, fill, || fills_directly(Part::of(x, out_w), x, sx, sy, src.w, src.h, point)),
                Interp::Linear => {
                    let (fx, fy) = (cv_round(sx * 32.0), cv_round(sy * 32.0));
                    src.linear_fixed(px, sat_i16(fx >> 5), sat_i16(fy >> 5), fx & 31, fy & 31, border, fill);
                }
                Interp::Cubic => unreachable!("remap refuses INTERP_CUBIC"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cubic_lanes_equal_per_channel<T: CvPixel>(make: impl Fn(u32) -> T) {
        let (h, w) = (9, 11);
        for c in [3usize, 4] {
            let data: Vec<T> = (0..(h * w * c) as u32).map(|k| make(k.wrapping_mul(2_654_435_761) >> 7)).collect();
            let img = Image { data: &data, h: h as i32, w: w as i32, c };
            for k in 0..200 {
                let (vx, vy) = (1.0 + (k as f32 * 0.731) % 7.9, 1.0 + (k as f32 * 0.377) % 5.9);
                for vector in [false, true] {
                    let p = CubicPoint::new(vx, vy, &img, vector);
                    let (mut a, mut b) = (vec![make(0); c], vec![make(0); c]);
                    img.cubic(&mut a, &p, vector, BorderMode::Constant, &[make(0); 4]);
                    // SAFETY: only run where the CPU has the features.
                    let done = unsafe { x86::cubic_lanes(&img, &mut b, &p, vector) };
                    let last_tap_at_end = p.ix + 3 == w as i32 - 1 && p.iy + 3 == h as i32 - 1;
                    assert!(done || last_tap_at_end, "{vx} {vy}");
                    if done {
                        assert_eq!(bytemuck::cast_slice::<T, u8>(&a), bytemuck::cast_slice::<T, u8>(&b), "{:?} c {c} ({vx}, {vy}) vector {vector}", T::DTYPE);
                    }
                }
            }
        }
    }

    #[test]
    fn cubic_in_lanes_gives_the_bits_of_the_per_channel_sums() {
        if !x86::available() {
            return;
        }
        cubic_lanes_equal_per_channel(|v| v as u8);
        cubic_lanes_equal_per_channel(|v| v as u16);
        cubic_lanes_equal_per_channel(|v| v as i16);
        cubic_lanes_equal_per_channel(|v| (v % 100_000) as f32 * 0.013 - 300.0);
    }

    /// The 8-lane rows ([`x86::warp_cubic`]) against the per-pixel ones on `T` x `c`:
    /// images of 1 to 300 columns, [`random_map`]'s maps, every border.
    fn cubic_rows_8_equal_per_pixel<T: CvPixel + std::fmt::Debug>(make: impl Fn(u64) -> T) {
        let mut rng = Rng(0x5eed_cb1c);
        for case in 0..60 {
            let c = [1usize, 3, 4][case % 3];
            let (h, w) = (1 + (rng.next() % 40) as usize, [1usize, 3, 7, 8, 9, 40, 133, 300][case % 8]);
            let (oh, ow) = (1 + (rng.next() % 12) as usize, [5usize, 8, 13, 128, 136, 263, 301][(case / 3) % 7]);
            let data: Vec<T> = (0..h * w * c).map(|_| make(rng.next())).collect();
            let img = Image { data: &data, h: h as i32, w: w as i32, c };
            let m = random_map(&mut rng, h, w, case).f32();
            let border = [BorderMode::Constant, BorderMode::Replicate, BorderMode::Reflect, BorderMode::Wrap, BorderMode::Reflect101][case % 5];
            let fill = [make(7), make(8), make(9), make(10)];
            let (mut a, mut b) = (vec![make(0); oh * ow * c], vec![make(0); oh * ow * c]);
            warp_cubic_rows(&mut a, ow, &img, &m, border, &fill, |out, p, vector| img.cubic(out, p, vector, border, &fill));
            // SAFETY: only run where the CPU has the features.
            unsafe { x86::warp_cubic(&mut b, ow, &img, &m, border, &fill) };
            assert_eq!(bytemuck::cast_slice::<T, u8>(&a), bytemuck::cast_slice::<T, u8>(&b), "{:?} case {case}: c {c} {h}x{w} -> {oh}x{ow} {border:?} {m:?}", T::DTYPE);
        }
    }

    #[test]
    fn cubic_in_8_lanes_gives_the_bits_of_the_per_pixel_rows() {
        if !x86::available() {
            return;
        }
        cubic_rows_8_equal_per_pixel(|v| v as u8);
        cubic_rows_8_equal_per_pixel(|v| v as u16);
        cubic_rows_8_equal_per_pixel(|v| (v % 100_000) as f32 * 0.013 - 300.0);
    }

    #[test]
    fn cubic_of_a_flat_image_is_flat_and_fills_beyond() {
        let data = vec![77u8; 10 * 8 * 3];
        let img = Image { data: &data, h: 10, w: 8, c: 3 };
        // Source (x - 10, y + 2.5): rows 2.5 to 5.5, taps from row 1 to 7, all inside.
        let m = [1.0f32, 0.0, -10.0, 0.0, 1.0, 2.5, 0.0, 0.0, 1.0];
        let mut out = vec![0u8; 4 * 40 * 3];
        warp_cubic(&mut out, 40, &img, &m, BorderMode::Constant, &[9, 9, 9, 0]);
        for (x, px) in out.chunks_exact(3).enumerate().map(|(k, p)| (k % 40, p)) {
            // Taps inside for x in 11..=14: the flat value; well beyond: the fill.
            if (11..=14).contains(&x) {
                assert_eq!(px, [77, 77, 77], "{x}");
            } else if x <= 5 || x >= 24 {
                assert_eq!(px, [9, 9, 9], "{x}");
            }
        }
    }

    #[test]
    fn rounding_is_opencvs() {
        for (v, r, f) in [(2.5f32, 2, 2), (3.5, 4, 3), (-2.5, -2, -3), (-0.5, 0, -1), (0.49999997, 0, 0), (-1.0, -1, -1), (7.9, 8, 7)] {
            assert_eq!((cv_round(v), cv_floor(v)), (r, f), "{v}");
        }
        for v in [f32::NAN, 3e9, f32::INFINITY] {
            assert_eq!(cv_round(v), i32::MIN, "{v}");
            assert_eq!(cv_floor(v), i32::MIN, "{v}");
        }
        // Far below: the rounded INT_MIN exceeds the value, and the subtraction wraps (as in
        // OpenCV).
        for v in [-3e9, f32::NEG_INFINITY] {
            assert_eq!((cv_round(v), cv_floor(v)), (i32::MIN, i32::MAX), "{v}");
        }
        assert_eq!(cv_round_f64(-2.5), -2);
        assert_eq!(cv_round_f64(2147483647.4), i32::MAX);
        assert_eq!(cv_round_f64(f64::NAN), i32::MIN);
        assert_eq!(u8::from_f32(254.5), 254);
        assert_eq!(u8::from_f32(255.5), 255);
        assert_eq!(u8::from_f32(-3.0), 0);
        assert_eq!(i16::from_f32(-32768.6), -32768);
        assert_eq!(u16::from_f64(1.5), 2);
    }

    /// OpenCV's looping `borderInterpolate`, for comparison.
    fn reference_border(mut p: i32, len: i32, mode: BorderMode) -> i32 {
        if (p as u32) < len as u32 {
            return p;
        }
        match mode {
            BorderMode::Constant => -1,
            BorderMode::Replicate => if p < 0 { 0 } else { len - 1 },
            BorderMode::Reflect | BorderMode::Reflect101 => {
                if len == 1 {
                    return 0;
                }
                let delta = (mode == BorderMode::Reflect101) as i32;
                while (p as u32) >= len as u32 {
                    p = if p < 0 { -p - 1 + delta } else { len - 1 - (p - len) - delta };
                }
                p
            }
            BorderMode::Wrap => {
                if p < 0 {
                    p -= ((p - len + 1) / len) * len;
                }
                if p >= len { p % len } else { p }
            }
        }
    }

    #[test]
    fn border_indices_are_opencvs() {
        for mode in [BorderMode::Constant, BorderMode::Replicate, BorderMode::Reflect, BorderMode::Reflect101, BorderMode::Wrap] {
            for len in 1..7 {
                for p in -40..40 {
                    let want = reference_border(p, len, mode);
                    assert_eq!(border_index(p, len, mode).map_or(-1, |i| i as i32), want, "{mode:?} p={p} len={len}");
                }
            }
        }
        assert_eq!(BorderMode::parse("reflect_101"), Some(BorderMode::Reflect101));
        assert_eq!(BorderMode::parse("foo"), None);
    }

    #[test]
    fn the_identity_map_copies_on_both_paths() {
        let id = Perspective { m: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] };
        let data: Vec<u8> = (0..7 * 37 * 2).map(|v| (v * 7 % 251) as u8).collect();
        for c in [1usize, 2] {
            let (h, w) = (7, 37 * 2 / c);
            let img = Image { data: &data[..h * w * c], h: h as i32, w: w as i32, c };
            for interp in [Interp::Nearest, Interp::Linear] {
                let mut out = vec![0u8; h * w * c];
                warp_perspective(&mut out, h, w, &img, &id, interp, BorderMode::Constant, &[9; 4]);
                assert_eq!(out, img.data, "{c} channels, {interp:?}");
            }
        }
    }

    /// xorshift64*: reproducible test data.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform in [lo, hi).
        fn f(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Maps that stay inside, cross the borders, shrink, magnify, mirror, reach the horizon
    /// (`w` sums crossing 0: huge, infinite and NaN points) or land on exact halves.
    fn random_map(rng: &mut Rng, h: usize, w: usize, k: usize) -> Perspective {
        let (h, w) = (h as f64, w as f64);
        match k % 6 {
            0 => Perspective { m: [1.0, 0.0, rng.f(-0.5, 0.5).round() + 0.5, 0.0, 1.0, -0.5, 0.0, 0.0, 1.0] },
            1 => Perspective { m: [rng.f(-2.0, 2.0), rng.f(-0.5, 0.5), rng.f(-w, w), rng.f(-0.5, 0.5), rng.f(-2.0, 2.0), rng.f(-h, h), 0.0, 0.0, 1.0] },
            2 => Perspective { m: [rng.f(0.5, 1.5), rng.f(-0.3, 0.3), rng.f(-3.0, 3.0), rng.f(-0.3, 0.3), rng.f(0.5, 1.5), rng.f(-3.0, 3.0), rng.f(-2e-3, 2e-3), rng.f(-2e-3, 2e-3), 1.0] },
            3 => Perspective { m: [rng.f(-1.0, 1.0), rng.f(-1.0, 1.0), rng.f(-w, w), rng.f(-1.0, 1.0), rng.f(-1.0, 1.0), rng.f(-h, h), rng.f(-0.2, 0.2), rng.f(-0.2, 0.2), rng.f(-2.0, 2.0)] },
            // The horizon through the output: w = 0 at x = 4 on every row, 0/0 at (4, 4).
            4 => Perspective { m: [1.0, 0.0, -4.0, 0.0, 1.0, -4.0, 0.25, 0.0, -1.0] },
            _ => Perspective { m: [rng.f(0.9, 1.1), 0.0, rng.f(-1.0, 1.0), 0.0, rng.f(0.9, 1.1), rng.f(-1.0, 1.0), 0.0, 0.0, 1.0] },
        }
    }

    fn row_kernels_match<T: CvPixel + PartialEq + std::fmt::Debug>(rng: &mut Rng, value: impl Fn(&mut Rng) -> T, fill: T) {
        let borders = [BorderMode::Constant, BorderMode::Replicate, BorderMode::Reflect, BorderMode::Reflect101, BorderMode::Wrap];
        let sizes = [(1, 1), (1, 7), (5, 1), (2, 2), (9, 16), (13, 37), (24, 50), (7, 33)];
        let mut case = 0;
        for c in [1usize, 3, 4] {
            for &(h, w) in &sizes {
                let data: Vec<T> = (0..h * w * c).map(|_| value(rng)).collect();
                let img = Image { data: &data, h: h as i32, w: w as i32, c };
                for (oh, ow) in [(h, w), (6, 35), (3, 16), (4, 49)] {
                    for interp in [Interp::Nearest, Interp::Linear] {
                        for border in borders {
                            case += 1;
                            let m = random_map(rng, h, w, case).f32();
                            let mut want = vec![fill; oh * ow * c];
                            let mut got = want.clone();
                            warp_new_per_pixel(&mut want, ow, &img, &m, interp, border, &[fill; 4]);
                            // SAFETY: checked above.
                            unsafe { x86::warp_new(&mut got, ow, &img, &m, interp, border, &[fill; 4]) };
                            // Bit for bit, but for the sign and payload of NaNs: the
                            // reference's `mul_add` is glibc's `fmaf` without the FMA
                            // feature, which propagates NaNs unlike the instruction.
                            let bits = |v: &T| if v.to_f32().is_nan() { vec![0xff] } else { bytemuck::bytes_of(v).to_vec() };
                            let same = want.iter().zip(&got).all(|(a, b)| bits(a) == bits(b));
                            if !same {
                                let show = |v: &[T]| v.iter().map(|v| format!("{:x}", u32::from_le_bytes(std::array::from_fn(|k| *bytemuck::bytes_of(v).get(k).unwrap_or(&0))))).collect::<Vec<_>>().join(" ");
                                panic!("{:?} c={c} {h}x{w} -> {oh}x{ow} {interp:?} {border:?} m={m:?}\nwant {}\ngot  {}", T::DTYPE, show(&want), show(&got));
                            }
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 row kernels give the per-pixel code's bytes: every type, channel count,
    /// interpolation and border, rows with and without a scalar tail, points inside, on
    /// and past the borders, and non-finite ones.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn row_kernels_match_the_per_pixel_code() {
        if !x86::available() {
            eprintln!("no AVX2 + FMA: the row kernels cannot run here");
            return;
        }
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        row_kernels_match::<u8>(&mut rng, |r| r.next() as u8, 77);
        row_kernels_match::<u16>(&mut rng, |r| r.next() as u16, 60001);
        row_kernels_match::<f32>(&mut rng, |r| r.f(-1e3, 1e3) as f32, -2.5);
        // Extremes: saturation at both ends, and NaN pixels.
        row_kernels_match::<f32>(&mut rng, |r| [f32::NAN, 3e38, -3e38, 0.5, 1e-40][(r.next() % 5) as usize], f32::NAN);
    }

    /// The old path (INT16, 2 channels) gives the same bytes compiled with AVX2 and FMA.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_old_path_is_the_same_with_avx2() {
        if !x86::available() {
            return;
        }
        let mut rng = Rng(0x0dd_5eed);
        let borders = [BorderMode::Constant, BorderMode::Replicate, BorderMode::Reflect, BorderMode::Reflect101, BorderMode::Wrap];
        let mut case = 0;
        for &(h, w) in &[(1, 1), (5, 1), (9, 16), (13, 37), (40, 50)] {
            let d16: Vec<i16> = (0..h * w * 2).map(|_| rng.next() as i16).collect();
            let d8: Vec<u8> = (0..h * w * 2).map(|_| rng.next() as u8).collect();
            let df: Vec<f32> = (0..h * w * 2).map(|_| rng.f(-1e3, 1e3) as f32).collect();
            for (oh, ow) in [(h, w), (6, 35), (20, 70)] {
                for interp in [Interp::Nearest, Interp::Linear] {
                    for border in borders {
                        case += 1;
                        let map = random_map(&mut rng, h, w, case);
                        #[allow(clippy::too_many_arguments)]
                        fn check<T: CvPixel + PartialEq + std::fmt::Debug>(data: &[T], h: usize, w: usize, c: usize, oh: usize, ow: usize, map: &Perspective, interp: Interp, border: BorderMode, fill: T) {
                            let img = Image { data, h: h as i32, w: w as i32, c };
                            let mut want = vec![fill; oh * ow * c];
                            let mut got = want.clone();
                            warp_old(&mut want, oh, ow, &img, map, interp, border, &[fill; 4]);
                            // SAFETY: checked by the caller.
                            unsafe { x86::warp_old(&mut got, oh, ow, &img, map, interp, border, &[fill; 4]) };
                            assert!(bytemuck::cast_slice::<T, u8>(&want) == bytemuck::cast_slice::<T, u8>(&got), "{:?} {h}x{w}x{c} {interp:?} {border:?} {map:?}", T::DTYPE);
                        }
                        check(&d16, h, w, 1, oh, ow, &map, interp, border, -7i16);
                        check(&d16, h, w, 2, oh, ow, &map, interp, border, 1234i16);
                        check(&d8, h, w, 2, oh, ow, &map, interp, border, 9u8);
                        check(&df, h, w, 2, oh, ow, &map, interp, border, 0.5f32);
                    }
                }
            }
        }
    }

    /// `cargo test --release -p sluice --lib warp_timing -- --ignored --nocapture`: one
    /// 480x640x3 UINT8 image, linear, constant border, a mild perspective (some of it
    /// outside the source), single thread.
    #[test]
    #[ignore]
    fn warp_timing() {
        let (h, w, c) = (480usize, 640usize, 3usize);
        let mut rng = Rng(7);
        let data: Vec<u8> = (0..h * w * 4).map(|_| rng.next() as u8).collect();
        let img = Image { data: &data[..h * w * c], h: h as i32, w: w as i32, c };
        let map = Perspective { m: [0.95, 0.1, -20.0, -0.08, 1.05, 15.0, 1e-4, -5e-5, 1.0] };
        let m = map.f32();
        let mut out = vec![0u8; h * w * c];
        let time = |f: &mut dyn FnMut()| {
            let mut best = f64::INFINITY;
            for _ in 0..15 {
                let t = std::time::Instant::now();
                f();
                best = best.min(t.elapsed().as_secs_f64() * 1e3);
            }
            best
        };
        for c in [1usize, 3, 4] {
            let n = h * w * c;
            let img = Image { data: &data[..n], h: h as i32, w: w as i32, c };
            let mut out = vec![0u8; n];
            let t = time(&mut || warp_perspective(&mut out, h, w, &img, &map, Interp::Cubic, BorderMode::Constant, &[0; 4]));
            #[target_feature(enable = "avx2,fma")]
            unsafe fn pixel_by_pixel(out: &mut [u8], w: usize, img: &Image<'_, u8>, m: &[f32; 9]) {
                let fill = [0; 4];
                warp_cubic_rows(out, w, img, m, BorderMode::Constant, &fill, |o, p, vector| unsafe { x86::cubic_point(img, o, p, vector, BorderMode::Constant, &fill) })
            }
            let before = time(&mut || unsafe { pixel_by_pixel(&mut out, w, &img, &m) });
            eprintln!("UINT8 x{c} Cubic: pixel by pixel {before:.2} ms, 8 lanes {t:.2} ms ({:.1}x)", before / t);
        }
        for interp in [Interp::Linear, Interp::Nearest] {
            let before = time(&mut || warp_new_per_pixel(&mut out, w, &img, &m, interp, BorderMode::Constant, &[0; 4]));
            let after = time(&mut || warp_perspective(&mut out, h, w, &img, &map, interp, BorderMode::Constant, &[0; 4]));
            eprintln!("{interp:?}: per pixel {before:.2} ms, row kernels {after:.2} ms ({:.1}x)", before / after);
        }
        // Other channel counts and types, linear.
        let fdata: Vec<f32> = data[..h * w * c].iter().map(|&v| v as f32 * 0.37).collect();
        let wdata: Vec<u16> = data[..h * w * c].iter().map(|&v| v as u16 * 250).collect();
        for c in [1usize, 4] {
            let n = h * w * c;
            let img = Image { data: &data[..n], h: h as i32, w: w as i32, c };
            let mut out = vec![0u8; n];
            let before = time(&mut || warp_new_per_pixel(&mut out, w, &img, &m, Interp::Linear, BorderMode::Constant, &[0; 4]));
            let after = time(&mut || warp_perspective(&mut out, h, w, &img, &map, Interp::Linear, BorderMode::Constant, &[0; 4]));
            eprintln!("UINT8 x{c} Linear: per pixel {before:.2} ms, row kernels {after:.2} ms ({:.1}x)", before / after);
        }
        let img = Image { data: &wdata, h: h as i32, w: w as i32, c };
        let mut out = vec![0u16; h * w * c];
        let before = time(&mut || warp_new_per_pixel(&mut out, w, &img, &m, Interp::Linear, BorderMode::Replicate, &[0; 4]));
        let after = time(&mut || warp_perspective(&mut out, h, w, &img, &map, Interp::Linear, BorderMode::Replicate, &[0; 4]));
        eprintln!("UINT16 x3 Linear replicate: per pixel {before:.2} ms, row kernels {after:.2} ms ({:.1}x)", before / after);
        let img = Image { data: &fdata, h: h as i32, w: w as i32, c };
        let mut out = vec![0f32; h * w * c];
        let before = time(&mut || warp_new_per_pixel(&mut out, w, &img, &m, Interp::Linear, BorderMode::Constant, &[0.0; 4]));
        let after = time(&mut || warp_perspective(&mut out, h, w, &img, &map, Interp::Linear, BorderMode::Constant, &[0.0; 4]));
        eprintln!("FLOAT x3 Linear: per pixel {before:.2} ms, row kernels {after:.2} ms ({:.1}x)", before / after);
        // The old path: INT16.
        let d16: Vec<i16> = data[..h * w * c].iter().map(|&v| v as i16 * 100).collect();
        let img = Image { data: &d16, h: h as i32, w: w as i32, c };
        let mut out = vec![0i16; h * w * c];
        for interp in [Interp::Linear, Interp::Nearest] {
            let before = time(&mut || warp_old(&mut out, h, w, &img, &map, interp, BorderMode::Constant, &[0; 4]));
            let after = time(&mut || warp_perspective(&mut out, h, w, &img, &map, interp, BorderMode::Constant, &[0; 4]));
            eprintln!("INT16 {interp:?}: plain {before:.2} ms, with AVX2 + FMA {after:.2} ms ({:.1}x)", before / after);
        }
    }

    #[test]
    fn fill_and_borders_outside_the_source() {
        // Shift right by 2.5 pixels: x - 2.5 is left of the source for x < 2.
        let m = Perspective { m: [1.0, 0.0, -2.5, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0] };
        let data = [10u8, 20, 30, 40];
        let img = Image { data: &data, h: 1, w: 4, c: 1 };
        let mut out = [0u8; 4];
        warp_perspective(&mut out, 1, 4, &img, &m, Interp::Nearest, BorderMode::Constant, &[99; 4]);
        // round(-2.5) = -2, round(-1.5) = -2, round(-0.5) = 0, round(0.5) = 0 (half to even).
        assert_eq!(out, [99, 99, 10, 10]);
        warp_perspective(&mut out, 1, 4, &img, &m, Interp::Linear, BorderMode::Replicate, &[99; 4]);
        assert_eq!(out, [10, 10, 10, 15]);
        warp_perspective(&mut out, 1, 4, &img, &m, Interp::Linear, BorderMode::Constant, &[100; 4]);
        // x=1: -1.5 -> taps -2 (fill) and -1 (fill); x=2: -0.5 -> fill and 10: 55; x=3: 15.
        assert_eq!(out, [100, 100, 55, 15]);
    }
}
