//! The cpu kernels of the reductions, typed: one sample reduced as DALI 2.4's `ReduceBaseCPU`
//! (dali/kernels/reduce/reduce_cpu.h and reductions.h) reduces it, with C++'s arithmetic
//! as x86-64 executes it.
//!
//! - The accumulator is the output type `D` (DALI's `Dst`): `acc += value` converts the value
//!   as C++ does ([`Value::into_dst`]: integers keep their low bits or sign-extend, integers
//!   become floats rounded to nearest) and integer sums wrap.
//! - The preprocessors are DALI's: the element itself, its square ([`Src::square`]: C++'s
//!   `x * x`, so an `int` for 8- and 16-bit types, which wraps for UINT16 above 46340, 64 bits
//!   for 32-bit types), or the squared deviation from the mean, in float.
//! - Float sums follow DALI's summation tree exactly ([`tree`], [`tree_1d`]), so float results
//!   are DALI's bit for bit. Integer sums (wrapping, hence associative) and min / max (the
//!   first of equal values wins in either order; NaN is never taken; the neutral element
//!   survives a run of infinities, as DALI's `max_value<float>()` does) give DALI's results in
//!   any order, so they run in memory order over contiguous runs ([`walk`]): vector code.
//! - Postprocessing is DALI's: `x * norm_factor` with `norm_factor = (float)(1.0 / v)`, its
//!   square root for `rms` / `std_dev`, converted back to `D` by C++'s float -> integer
//!   conversion on x86 ([`Dst::from_f32`]: truncation, and the "integer indefinite" value for
//!   NaN or out of range, which is what DALI gives for the mean of nothing as an integer).
//!
//! Checked against DALI 2.4's cpu operator (tests/test_reductions.py): every type pair DALI's
//! type maps allow, sums that wrap, UINT16 squares, empty samples, NaN and signed zeros.
//!
//! `reductions.cu` computes each output element the same way on the gpu (gpu.rs's tests run
//! it on the host against this module, the Python tests on the gpu): a change to the
//! arithmetic here is one there too.

use crate::tensor::DType;

/// Most dimensions a reduced tensor may have (DALI: "Reduce supports up to 64 dimensions").
pub const MAX_NDIM: usize = 64;

/// DALI's `kTreeReduceThreshold`: runs longer than this are halved.
pub(super) const TREE_THRESHOLD: usize = 32;

/// Output elements reduced side by side when the innermost axis is kept: each lane follows
/// DALI's tree for its own element (so the bits are the same), and the lanes' adds run as
/// vector code over consecutive input elements.
const LANES: usize = 8;

/// A value a preprocessor gives (an input element, its square, a squared deviation), as
/// C++'s `acc += value` converts it into the accumulator type `D`.
pub trait Value: Copy {
    fn into_dst<D: Dst>(self) -> D;
}

macro_rules! value {
    ($($t:ty => $f:ident),*) => {$(
        impl Value for $t {
            #[inline(always)]
            fn into_dst<D: Dst>(self) -> D {
                D::$f(self)
            }
        }
    )*};
}
value!(u8 => from_u8, i8 => from_i8, u16 => from_u16, i16 => from_i16, u32 => from_u32, i32 => from_i32, u64 => from_u64, i64 => from_i64, f32 => from_f32);

/// An output (accumulator) element type.
pub trait Dst: bytemuck::Pod + Send + Sync + PartialOrd {
    const DTYPE: DType;
    const ZERO: Self;
    /// DALI's `min_value<T>()`, the start of `max`: the lowest finite value (-FLT_MAX for float).
    const LOWEST: Self;
    /// DALI's `max_value<T>()`, the start of `min`.
    const HIGHEST: Self;
    /// `acc + v` in this type: integers wrap (DALI accumulates in the output type).
    fn plus(self, v: Self) -> Self;
    /// C++'s conversion to float: rounded to nearest.
    fn to_f32(self) -> f32;
    fn from_u8(v: u8) -> Self;
    fn from_i8(v: i8) -> Self;
    fn from_u16(v: u16) -> Self;
    fn from_i16(v: i16) -> Self;
    fn from_u32(v: u32) -> Self;
    fn from_i32(v: i32) -> Self;
    fn from_u64(v: u64) -> Self;
    fn from_i64(v: i64) -> Self;
    /// C++'s implicit float -> `Self` conversion as x86-64 executes it (see [`cvtt32`]).
    fn from_f32(v: f32) -> Self;
}

/// `cvttss2si` with a 32-bit destination: truncation toward zero; NaN and values outside
/// the `int` range give `i32::MIN` (x86's "integer indefinite"). C++ converts float to
/// `int` and to the narrower types this way (then keeps the low bits).
#[inline(always)]
fn cvtt32(v: f32) -> i32 {
    if v >= -2_147_483_648.0 && v < 2_147_483_648.0 {
        v as i32
    } else {
        i32::MIN
    }
}

/// `cvttss2si` with a 64-bit destination (C++'s float -> `int64_t`, and -> `uint32_t`
/// keeping the low 32 bits); NaN and out of range give `i64::MIN`.
#[inline(always)]
fn cvtt64(v: f32) -> i64 {
    if v >= -9_223_372_036_854_775_808.0 && v < 9_223_372_036_854_775_808.0 {
        v as i64
    } else {
        i64::MIN
    }
}

/// C++'s float -> `uint64_t` as GCC compiles it for x86-64: from 2^63 up, 2^63 is taken off
/// before `cvttss2si` and its bit put back (so 2^64 and above give 0); below (NaN included:
/// the comparison is false) `cvttss2si` alone (NaN gives 2^63). DALI's mean of no UINT64
/// elements is 2^63.
#[inline(always)]
fn cvtt_u64(v: f32) -> u64 {
    const TWO_63: f32 = 9_223_372_036_854_775_808.0;
    if v >= TWO_63 {
        (cvtt64(v - TWO_63) as u64) ^ (1 << 63)
    } else {
        cvtt64(v) as u64
    }
}

#[inline(always)]
fn cvtt_u8(v: f32) -> u8 {
    cvtt32(v) as u8
}
#[inline(always)]
fn cvtt_i8(v: f32) -> i8 {
    cvtt32(v) as i8
}
#[inline(always)]
fn cvtt_u16(v: f32) -> u16 {
    cvtt32(v) as u16
}
#[inline(always)]
fn cvtt_i16(v: f32) -> i16 {
    cvtt32(v) as i16
}
#[inline(always)]
fn cvtt_u32(v: f32) -> u32 {
    cvtt64(v) as u32
}

macro_rules! int_dst {
    ($($t:ty => $d:ident, $cvt:ident);*) => {$(
        impl Dst for $t {
            const DTYPE: DType = DType::$d;
            const ZERO: Self = 0;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn plus(self, v: Self) -> Self { self.wrapping_add(v) }
            #[inline(always)]
            fn to_f32(self) -> f32 { self as f32 }
            // Integer to integer: `as` keeps the low bits or sign-extends, as C++ does.
            #[inline(always)]
            fn from_u8(v: u8) -> Self { v as $t }
            #[inline(always)]
            fn from_i8(v: i8) -> Self { v as $t }
            #[inline(always)]
            fn from_u16(v: u16) -> Self { v as $t }
            #[inline(always)]
            fn from_i16(v: i16) -> Self { v as $t }
            #[inline(always)]
            fn from_u32(v: u32) -> Self { v as $t }
            #[inline(always)]
            fn from_i32(v: i32) -> Self { v as $t }
            #[inline(always)]
            fn from_u64(v: u64) -> Self { v as $t }
            #[inline(always)]
            fn from_i64(v: i64) -> Self { v as $t }
            #[inline(always)]
            fn from_f32(v: f32) -> Self { $cvt(v) }
        }
    )*};
}
int_dst!(u8 => U8, cvtt_u8; i8 => I8, cvtt_i8; u16 => U16, cvtt_u16; i16 => I16, cvtt_i16; u32 => U32, cvtt_u32; i32 => I32, cvtt32; u64 => U64, cvtt_u64; i64 => I64, cvtt64);

impl Dst for f32 {
    const DTYPE: DType = DType::F32;
    const ZERO: Self = 0.0;
    const LOWEST: Self = f32::MIN;
    const HIGHEST: Self = f32::MAX;
    #[inline(always)]
    fn plus(self, v: Self) -> Self {
        self + v
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    // Integer to float: `as` rounds to nearest, as x86's conversions (and GCC's UINT64
    // sequence) do.
    #[inline(always)]
    fn from_u8(v: u8) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_i8(v: i8) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_u16(v: u16) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_i16(v: i16) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_u32(v: u32) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_i32(v: i32) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

/// An input element type.
pub trait Src: Value + bytemuck::Pod + Send + Sync {
    const DTYPE: DType;
    /// What DALI's `reductions::square` gives for this type.
    type Square: Value;
    /// DALI's `reductions::square`: C++'s `x * x` (`int` for types narrower than `int`,
    /// wrapping as x86 does; `int64_t` / `uint64_t` for 32-bit types; the type itself above).
    fn square(self) -> Self::Square;
}

macro_rules! int_src {
    ($($t:ty => $d:ident, $sq:ty);*) => {$(
        impl Src for $t {
            const DTYPE: DType = DType::$d;
            type Square = $sq;
            #[inline(always)]
            fn square(self) -> $sq {
                (self as $sq).wrapping_mul(self as $sq)
            }
        }
    )*};
}
int_src!(u8 => U8, i32; i8 => I8, i32; u16 => U16, i32; i16 => I16, i32; u32 => U32, u64; i32 => I32, i64; u64 => U64, u64; i64 => I64, i64);

impl Src for f32 {
    const DTYPE: DType = DType::F32;
    type Square = f32;
    #[inline(always)]
    fn square(self) -> f32 {
        self * self
    }
}

/// What each element is turned into before it is reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pre {
    Identity,
    Square,
    /// `(x - mean)^2` in float: DALI's `reductions::variance`.
    Deviation,
}

/// How values are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    Sum,
    Min,
    Max,
}

/// What is done to each reduced value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    None,
    /// `x * norm_factor` (mean, mean_square, variance).
    Scale,
    /// `sqrt(x * norm_factor)` (rms, std_dev).
    Root,
}

/// One sample's reduction as DALI's `ReduceBaseCPU::Setup` lays it out: runs of adjacent
/// reduced axes merged into one group (`CollapseAxes`); runs of adjacent kept axes are merged
/// too (the output is row-major either way, so every output element reads the same input
/// elements in the same order).
pub struct Geometry {
    /// Groups, in input order: extent, output stride (kept groups; 0 for reduced ones), and
    /// whether the group is reduced.
    n: usize,
    size: [usize; MAX_NDIM],
    out_stride: [usize; MAX_NDIM],
    reduced: [bool; MAX_NDIM],
    /// The reduced groups (DALI's `strided_in`): extent, input stride, and the volume of the
    /// reduced groups after each one. The gpu backend uploads these and the kept groups.
    pub(super) red_n: usize,
    pub(super) red_size: [usize; MAX_NDIM],
    pub(super) red_stride: [usize; MAX_NDIM],
    pub(super) red_sub: [usize; MAX_NDIM],
    /// The kept groups (DALI's `step`): extent and input stride.
    pub(super) keep_n: usize,
    pub(super) keep_size: [usize; MAX_NDIM],
    pub(super) keep_stride: [usize; MAX_NDIM],
    /// Input elements reduced into each output element (DALI's `v` before `ddof`).
    pub count: usize,
}

#[inline(always)]
fn bit(mask: u64, a: usize) -> bool {
    (mask >> a) & 1 != 0
}

impl Geometry {
    /// The layout of a dense sample of `shape` (at most [`MAX_NDIM`] dimensions) reduced over
    /// the axes set in `mask`.
    pub fn new(shape: &[usize], mask: u64) -> Geometry {
        let mut g = Geometry {
            n: 0,
            size: [0; MAX_NDIM],
            out_stride: [0; MAX_NDIM],
            reduced: [false; MAX_NDIM],
            red_n: 0,
            red_size: [0; MAX_NDIM],
            red_stride: [0; MAX_NDIM],
            red_sub: [0; MAX_NDIM],
            keep_n: 0,
            keep_size: [0; MAX_NDIM],
            keep_stride: [0; MAX_NDIM],
            count: 1,
        };
        let nd = shape.len();
        let mut a = 0;
        while a < nd {
            let r = bit(mask, a);
            let mut b = a + 1;
            while b < nd && bit(mask, b) == r {
                b += 1;
            }
            let size: usize = shape[a..b].iter().product();
            let stride: usize = shape[b..].iter().product();
            g.size[g.n] = size;
            g.reduced[g.n] = r;
            g.n += 1;
            if r {
                g.red_size[g.red_n] = size;
                g.red_stride[g.red_n] = stride;
                g.red_n += 1;
                g.count *= size;
            } else {
                g.keep_size[g.keep_n] = size;
                g.keep_stride[g.keep_n] = stride;
                g.keep_n += 1;
            }
            a = b;
        }
        let mut sub = 1;
        for k in (0..g.red_n).rev() {
            g.red_sub[k] = sub;
            sub *= g.red_size[k];
        }
        let mut os = 1;
        for k in (0..g.n).rev() {
            if !g.reduced[k] {
                g.out_stride[k] = os;
                os *= g.size[k];
            }
        }
        g
    }

    /// Input offset of output element `index` counted over the first `n` kept groups
    /// (row-major); every one of their extents is nonzero when there is an output element.
    fn keep_offset(&self, mut index: usize, n: usize) -> usize {
        let mut off = 0;
        for k in (0..n).rev() {
            let s = self.keep_size[k];
            off += (index % s) * self.keep_stride[k];
            index /= s;
        }
        off
    }
}

#[inline(always)]
fn add_lanes<D: Dst, const L: usize>(mut a: [D; L], b: [D; L]) -> [D; L] {
    for l in 0..L {
        a[l] = a[l].plus(b[l]);
    }
    a
}

/// DALI's `reduce1D_stride`: the sum of `n` values `stride` apart from `off` (per lane `l`,
/// from `off + l`); above [`TREE_THRESHOLD`] the two halves (the first `n / 2`, then the
/// rest) are summed apart and added, below it a left-to-right run from zero. DALI's adds of
/// a result to a zero accumulator are left out: no sum here is -0 (every run starts from +0),
/// so they change nothing.
fn tree_1d<S: Copy, D: Dst, P: Fn(S, usize) -> D, const L: usize>(src: &[S], off: usize, stride: usize, n: usize, p: &P) -> [D; L] {
    if n > TREE_THRESHOLD {
        let m = n >> 1;
        let a = tree_1d::<S, D, P, L>(src, off, stride, m, p);
        let b = tree_1d::<S, D, P, L>(src, off + m * stride, stride, n - m, p);
        return add_lanes(a, b);
    }
    let mut t = [D::ZERO; L];
    if L == 1 && stride == 1 {
        for &x in &src[off..off + n] {
            t[0] = t[0].plus(p(x, 0));
        }
    } else {
        for i in 0..n {
            let at = off + i * stride;
            let x = &src[at..at + L];
            for l in 0..L {
                t[l] = t[l].plus(p(x[l], l));
            }
        }
    }
    t
}

/// DALI's `reduce` (reduce_cpu.h): the sum over reduced group `axis` (its first `extent`
/// slices from `off`) and the groups after it. The last group is [`tree_1d`]'s; above it,
/// when `extent >= 2` and the slices hold more than [`TREE_THRESHOLD`] elements together,
/// the slices are halved (the first `extent / 2`, then the rest), else summed one after the
/// other from zero.
fn tree<S: Copy, D: Dst, P: Fn(S, usize) -> D, const L: usize>(src: &[S], g: &Geometry, axis: usize, extent: usize, off: usize, p: &P) -> [D; L] {
    let stride = g.red_stride[axis];
    if axis + 1 == g.red_n {
        return tree_1d::<S, D, P, L>(src, off, stride, g.red_size[axis], p);
    }
    if extent >= 2 && extent * g.red_sub[axis] > TREE_THRESHOLD {
        let mid = extent / 2;
        let a = tree::<S, D, P, L>(src, g, axis, mid, off, p);
        let b = tree::<S, D, P, L>(src, g, axis, extent - mid, off + mid * stride, p);
        return add_lanes(a, b);
    }
    let mut acc = [D::ZERO; L];
    for i in 0..extent {
        acc = add_lanes(acc, tree::<S, D, P, L>(src, g, axis + 1, g.red_size[axis + 1], off + i * stride, p));
    }
    acc
}

/// Every output element as DALI's summation tree gives it (`g` reduces at least one group).
/// `make(k)` is the preprocessor of output elements `k..`: lane `l` is element `k + l`.
fn reduce_tree<S, D, P, F>(src: &[S], out: &mut [D], g: &Geometry, make: F)
where
    S: Copy,
    D: Dst,
    P: Fn(S, usize) -> D,
    F: Fn(usize) -> P,
{
    let top = g.red_size[0];
    match g.keep_n.checked_sub(1) {
        // The innermost axis is kept: consecutive output elements read consecutive input
        // elements, LANES at a time.
        Some(last) if g.keep_stride[last] == 1 => {
            let inner = g.keep_size[last];
            if inner == 0 {
                return; // no output element
            }
            for (r, row) in out.chunks_exact_mut(inner).enumerate() {
                let base = g.keep_offset(r, last);
                let mut j = 0;
                while j + LANES <= inner {
                    let v = tree::<S, D, P, LANES>(src, g, 0, top, base + j, &make(r * inner + j));
                    row[j..j + LANES].copy_from_slice(&v);
                    j += LANES;
                }
                // The rest (all of an image's 3 channels) in one pass of as many lanes, not one
                // strided pass each.
                while j < inner {
                    let (k, at) = (r * inner + j, base + j);
                    j += match inner - j {
                        1 => {
                            row[j] = tree::<S, D, P, 1>(src, g, 0, top, at, &make(k))[0];
                            1
                        }
                        2 => {
                            row[j..j + 2].copy_from_slice(&tree::<S, D, P, 2>(src, g, 0, top, at, &make(k)));
                            2
                        }
                        3 => {
                            row[j..j + 3].copy_from_slice(&tree::<S, D, P, 3>(src, g, 0, top, at, &make(k)));
                            3
                        }
                        _ => {
                            row[j..j + 4].copy_from_slice(&tree::<S, D, P, 4>(src, g, 0, top, at, &make(k)));
                            4
                        }
                    };
                }
            }
        }
        _ => {
            for (k, o) in out.iter_mut().enumerate() {
                *o = tree::<S, D, P, 1>(src, g, 0, top, g.keep_offset(k, g.keep_n), &make(k))[0];
            }
        }
    }
}

/// `out[k] = combine(out[k], pre(x))` for every input element `x` and the output element
/// `k` it reduces into, in memory order, the output first set to `init`: for the reductions
/// whose result does not depend on the order (wrapping integer sums, min, max). Each
/// contiguous run of the innermost axis is one tight loop: into one accumulator when that
/// axis is reduced, element by element into a row of the output when it is kept.
fn walk<S: Copy, D: Dst>(src: &[S], out: &mut [D], g: &Geometry, init: D, pre: impl Fn(S) -> D, combine: impl Fn(D, D) -> D) {
    out.fill(init);
    if src.is_empty() || g.n == 0 {
        return;
    }
    let last = g.n - 1;
    let inner = g.size[last]; // nonzero: the sample has elements
    let inner_reduced = g.reduced[last];
    if !D::DTYPE.is_float() && last >= 1 && !inner_reduced && g.reduced[last - 1] && inner <= WIDE / 2 {
        return walk_short_rows(src, out, g, pre, combine);
    }
    let mut idx = [0usize; MAX_NDIM];
    let mut p = 0usize;
    for run in src.chunks_exact(inner) {
        if inner_reduced {
            let mut acc = out[p];
            for &x in run {
                acc = combine(acc, pre(x));
            }
            out[p] = acc;
        } else {
            for (o, &x) in out[p..p + inner].iter_mut().zip(run) {
                *o = combine(*o, pre(x));
            }
        }
        for a in (0..last).rev() {
            idx[a] += 1;
            p += g.out_stride[a];
            if idx[a] < g.size[a] {
                break;
            }
            p -= idx[a] * g.out_stride[a];
            idx[a] = 0;
        }
    }
}

/// Accumulators of [`walk_short_rows`].
const WIDE: usize = 64;

/// [`walk`] where the innermost group is kept and short (an image's channels) and the one
/// before it reduced: element by element into a row of 3 outputs is mostly loop overhead.
/// Each block of rows (the reduced group, for one position of the outer groups) is folded
/// through `WIDE / inner` rows of accumulators at a time, a loop the compiler vectorizes,
/// then the accumulator rows into the output row. Integer results only: wrapping sums, min
/// and max of integers do not depend on the order (float min / max keep the first of +0 and
/// -0, so floats take `walk`'s loop).
fn walk_short_rows<S: Copy, D: Dst>(src: &[S], out: &mut [D], g: &Geometry, pre: impl Fn(S) -> D, combine: impl Fn(D, D) -> D) {
    let last = g.n - 1;
    let inner = g.size[last];
    let block = g.size[last - 1] * inner;
    let width = WIDE / inner * inner;
    let mut idx = [0usize; MAX_NDIM];
    let mut p = 0usize;
    for rows in src.chunks_exact(block) {
        let row = &mut out[p..p + inner];
        let mut chunks = rows.chunks_exact(width);
        if let Some(first) = chunks.next() {
            let mut acc = [row[0]; WIDE];
            for (a, &x) in acc.iter_mut().zip(first) {
                *a = pre(x);
            }
            for chunk in &mut chunks {
                for (a, &x) in acc[..width].iter_mut().zip(chunk) {
                    *a = combine(*a, pre(x));
                }
            }
            for (j, &a) in acc[..width].iter().enumerate() {
                row[j % inner] = combine(row[j % inner], a);
            }
        }
        for (j, &x) in chunks.remainder().iter().enumerate() {
            row[j % inner] = combine(row[j % inner], pre(x));
        }
        for a in (0..last - 1).rev() {
            idx[a] += 1;
            p += g.out_stride[a];
            if idx[a] < g.size[a] {
                break;
            }
            p -= idx[a] * g.out_stride[a];
            idx[a] = 0;
        }
    }
}

/// DALI's `reductions::variance`: `d = x - mean` in float (the element converted as C++
/// does), `d * d`.
#[inline(always)]
fn deviation<S: Src, D: Dst>(x: S, mean: f32) -> D {
    let d = x.into_dst::<f32>() - mean;
    D::from_f32(d * d)
}

/// The means of output elements `k..k + LANES` (one mean broadcast when `mean` holds one).
#[inline(always)]
fn lane_means(mean: &[f32], k: usize) -> [f32; LANES] {
    let mut m = [0.0f32; LANES];
    if mean.len() == 1 {
        m = [mean[0]; LANES];
    } else {
        for (l, v) in m.iter_mut().enumerate() {
            if let Some(&x) = mean.get(k + l) {
                *v = x;
            }
        }
    }
    m
}

/// One sample's work.
pub struct Sample<'a> {
    /// The input sample's bytes (dense, of the input type).
    pub src: &'a [u8],
    /// The output sample's bytes (of the output type), all written.
    pub dst: &'a mut [u8],
    pub geometry: &'a Geometry,
    pub pre: Pre,
    pub combine: Combine,
    pub post: Post,
    /// DALI's `v`: the elements reduced into each output element, less `ddof` for
    /// `variance` / `std_dev`; `post` scales by `1 / divisor`.
    pub divisor: i64,
    /// For [`Pre::Deviation`]: the sample's means, one per output element, or one for all.
    pub mean: &'a [f32],
}

/// Reduces one sample with input type `S` and output (accumulator) type `D`.
pub fn run_sample<S: Src, D: Dst>(job: Sample<'_>) {
    let src: &[S] = bytemuck::cast_slice(job.src);
    let out: &mut [D] = bytemuck::cast_slice_mut(job.dst);
    let g = job.geometry;
    let mean = job.mean;
    if g.red_n == 0 {
        // No axis reduced (`axes=[]`, or a 0-D input): DALI's `ReduceForEmptyAxes`, each
        // element preprocessed and converted, not added to zero (-0.0 stays -0.0).
        match job.pre {
            Pre::Identity => out.iter_mut().zip(src).for_each(|(o, &x)| *o = x.into_dst::<D>()),
            Pre::Square => out.iter_mut().zip(src).for_each(|(o, &x)| *o = x.square().into_dst::<D>()),
            Pre::Deviation => out.iter_mut().zip(src).enumerate().for_each(|(k, (o, &x))| {
                *o = deviation::<S, D>(x, if mean.len() == 1 { mean[0] } else { mean[k] })
            }),
        }
    } else {
        let float = D::DTYPE.is_float();
        match (job.combine, job.pre) {
            (Combine::Min, _) => walk(src, out, g, D::HIGHEST, |x: S| x.into_dst::<D>(), |a: D, v: D| if v < a { v } else { a }),
            (Combine::Max, _) => walk(src, out, g, D::LOWEST, |x: S| x.into_dst::<D>(), |a: D, v: D| if v > a { v } else { a }),
            (Combine::Sum, Pre::Identity) if !float => walk(src, out, g, D::ZERO, |x: S| x.into_dst::<D>(), |a: D, v: D| a.plus(v)),
            (Combine::Sum, Pre::Square) if !float => walk(src, out, g, D::ZERO, |x: S| x.square().into_dst::<D>(), |a: D, v: D| a.plus(v)),
            (Combine::Sum, Pre::Identity) => reduce_tree(src, out, g, |_k: usize| |x: S, _l: usize| x.into_dst::<D>()),
            (Combine::Sum, Pre::Square) => reduce_tree(src, out, g, |_k: usize| |x: S, _l: usize| x.square().into_dst::<D>()),
            (Combine::Sum, Pre::Deviation) => reduce_tree(src, out, g, |k: usize| {
                let m = lane_means(mean, k);
                move |x: S, l: usize| deviation::<S, D>(x, m[l])
            }),
        }
    }
    postprocess(out, job.post, job.divisor);
}

/// DALI's `norm_factor = 1.0 / v`: a double quotient stored as a float (so `v = 0` gives
/// infinity, and the mean of nothing NaN). The gpu backend uploads it, so both backends scale
/// by the same float.
pub fn norm_factor(divisor: i64) -> f32 {
    (1.0 / divisor as f64) as f32
}

/// DALI's `Postprocess`: the product with [`norm_factor`], and its square root, are float
/// operations; the result converts to `D` as C++ does.
fn postprocess<D: Dst>(out: &mut [D], post: Post, divisor: i64) {
    let norm = norm_factor(divisor);
    match post {
        Post::None => {}
        Post::Scale => out.iter_mut().for_each(|o| *o = D::from_f32(o.to_f32() * norm)),
        Post::Root => out.iter_mut().for_each(|o| *o = D::from_f32((o.to_f32() * norm).sqrt())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DALI's recursion written as reduce_cpu.h has it (one output element at a time, the
    /// adds to zero accumulators kept), over the reduced groups of `g`.
    fn dali_reference(src: &[f32], g: &Geometry, off: usize) -> f32 {
        fn r1d(src: &[f32], off: usize, stride: usize, n: usize) -> f32 {
            if n > 32 {
                let m = n >> 1;
                let mut a = r1d(src, off, stride, m);
                a += r1d(src, off + m * stride, stride, n - m);
                return 0.0 + a;
            }
            let mut t = 0.0f32;
            for i in 0..n {
                t += src[off + i * stride];
            }
            0.0 + t
        }
        fn red(src: &[f32], g: &Geometry, axis: usize, extent: usize, off: usize) -> f32 {
            let stride = g.red_stride[axis];
            if axis + 1 == g.red_n {
                return 0.0 + r1d(src, off, stride, g.red_size[axis]);
            }
            if extent >= 2 && extent * g.red_sub[axis] > 32 {
                let mid = extent / 2;
                let mut a = red(src, g, axis, mid, off);
                a += red(src, g, axis, extent - mid, off + mid * stride);
                return 0.0 + a;
            }
            let mut acc = 0.0f32;
            for i in 0..extent {
                acc += red(src, g, axis + 1, g.red_size[axis + 1], off + i * stride);
            }
            acc
        }
        0.0 + red(src, g, 0, g.red_size[0], off)
    }

    /// Deterministic values of both signs (DALI_FNV was computed from the same LCG in NumPy
    /// float32 arithmetic).
    fn values(n: usize) -> Vec<f32> {
        let mut x: u32 = 12345;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345) & 0x7fff_ffff;
                ((x >> 8) as f32 / 8_388_608.0 - 0.5) * 1000.0
            })
            .collect()
    }

    fn sum(shape: &[usize], mask: u64, src: &[f32]) -> Vec<f32> {
        let g = Geometry::new(shape, mask);
        let outputs: usize = (0..shape.len()).filter(|&a| !bit(mask, a)).map(|a| shape[a]).product();
        let mut out = vec![0.0f32; outputs];
        let job = Sample {
            src: bytemuck::cast_slice(src),
            dst: bytemuck::cast_slice_mut(&mut out[..]),
            geometry: &g,
            pre: Pre::Identity,
            combine: Combine::Sum,
            post: Post::None,
            divisor: 1,
            mean: &[],
        };
        run_sample::<f32, f32>(job);
        out
    }

    /// FNV-1a over the outputs' bits.
    fn fnv(v: &[f32]) -> u64 {
        v.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ x.to_bits() as u64).wrapping_mul(0x100_0000_01b3))
    }

    #[test]
    fn float_sums_follow_dalis_tree_on_every_path() {
        for (shape, mask) in [
            (vec![1000], 0b1),
            (vec![40, 45], 0b01),
            (vec![40, 45], 0b10),
            (vec![37, 41, 3], 0b011),
            (vec![6, 50, 20], 0b101),
            (vec![6, 50, 20], 0b010),
            (vec![3, 70, 2, 9], 0b1010),
            (vec![33, 2, 17], 0b111),
        ] {
            let n: usize = shape.iter().product();
            let src = values(n);
            let g = Geometry::new(&shape, mask);
            let got = sum(&shape, mask, &src);
            for (k, &v) in got.iter().enumerate() {
                let want = dali_reference(&src, &g, g.keep_offset(k, g.keep_n));
                assert_eq!(v.to_bits(), want.to_bits(), "{shape:?} mask {mask:#b} output {k}");
            }
        }
    }

    #[test]
    fn float_sums_are_dalis_bits() {
        // DALI 2.4 fn.reductions.sum (cpu) of `values` reshaped, FNV-1a of the outputs' bits.
        let cases: [(&[usize], u64, u64); 4] = [
            (&[1000], 0b1, DALI_FNV[0]),
            (&[40, 45], 0b01, DALI_FNV[1]),
            (&[37, 41, 3], 0b011, DALI_FNV[2]),
            (&[6, 50, 20], 0b101, DALI_FNV[3]),
        ];
        for (shape, mask, want) in cases {
            let src = values(shape.iter().product());
            assert_eq!(fnv(&sum(shape, mask, &src)), want, "{shape:?} mask {mask:#b}");
        }
    }

    /// See `float_sums_are_dalis_bits`.
    const DALI_FNV: [u64; 4] = [0xf078_61db_1b97_cc3e, 0x1d31_830f_7b9b_e66d, 0xf664_a2bf_66b4_61ac, 0xb8db_9cef_78d9_2c22];

    #[test]
    fn integer_sums_wrap_and_min_max_start_from_the_type_limits() {
        let src: Vec<u8> = vec![200; 300];
        let g = Geometry::new(&[3, 100], 0b11);
        let mut out = [0u8; 1];
        run_sample::<u8, u8>(Sample { src: &src, dst: &mut out, geometry: &g, pre: Pre::Identity, combine: Combine::Sum, post: Post::None, divisor: 1, mean: &[] });
        assert_eq!(out[0], (60000u32 % 256) as u8);
        // mean of UINT8 as UINT8: the wrapped sum times (float)(1/300), truncated.
        run_sample::<u8, u8>(Sample { src: &src, dst: &mut out, geometry: &g, pre: Pre::Identity, combine: Combine::Sum, post: Post::Scale, divisor: 300, mean: &[] });
        assert_eq!(out[0], 0);
        let f = [f32::INFINITY, f32::INFINITY];
        let g = Geometry::new(&[2], 0b1);
        let mut o = [0.0f32];
        run_sample::<f32, f32>(Sample { src: bytemuck::cast_slice(&f[..]), dst: bytemuck::cast_slice_mut(&mut o[..]), geometry: &g, pre: Pre::Identity, combine: Combine::Min, post: Post::None, divisor: 1, mean: &[] });
        assert_eq!(o[0], f32::MAX);
        // UINT16 squares wrap as C++'s int products do.
        assert_eq!(65535u16.square(), -131071);
    }

    #[test]
    fn float_to_integer_conversions_are_x86s() {
        assert_eq!(<i32 as Dst>::from_f32(f32::NAN), i32::MIN);
        assert_eq!(<u8 as Dst>::from_f32(f32::NAN), 0);
        assert_eq!(<u32 as Dst>::from_f32(f32::NAN), 0);
        assert_eq!(<i64 as Dst>::from_f32(f32::NAN), i64::MIN);
        assert_eq!(<u64 as Dst>::from_f32(f32::NAN), 1 << 63);
        assert_eq!(<u64 as Dst>::from_f32(18_446_744_073_709_551_616.0), 0);
        assert_eq!(<u64 as Dst>::from_f32(9_223_373_136_366_403_584.0), 9_223_373_136_366_403_584);
        assert_eq!(<i64 as Dst>::from_f32(9_223_372_036_854_775_807i64 as f32), i64::MIN);
        assert_eq!(<i8 as Dst>::from_f32(-32.7), -32);
        assert_eq!(<u8 as Dst>::from_f32(67.9), 67);
    }
}
