//! Separable resampling kernels following DALI 2.4's CPU resampler
//! (`dali/kernels/imgproc/resample/`):
//!
//! * Filters are DALI's tabulated windows (triangle `[0,1,0]`, 65-tap Gaussian, 193-tap
//!   Lanczos3, 129-tap cubic), read with linear interpolation between table entries, and
//!   rescaled to the requested support exactly as `ResamplingFilter::rescale` does (f32).
//! * Taps (`InitializeResamplingFilter`): for output `x`, `sx0f = x*scale + origin + 0.5*scale
//!   - 0.5 - anchor`, first tap `ceil(sx0f)`, weight `k` is `filter((ceil - sx0f + k) *
//!   filter.scale)`, normalised to sum 1. Source indices outside the image are clamped.
//! * Two passes through an unrounded f32 intermediate; sums run over taps in ascending order
//!   (`acc += w * v`, no FMA), and the result is rounded half away from zero and saturated.
//! * Nearest neighbour (both axes NN) is DALI's `ResampleNN`: column `floor(ox + (x+.5)*sx)`,
//!   row from an accumulated `sy = oy + .5*scale_y; sy += scale_y`.
//!
//! The engine works a row at a time: the horizontal-first order keeps a ring of `support`
//! horizontally filtered rows; the vertical-first order blends input rows into one f32 row
//! and filters it horizontally. Scratch lives in a thread-local and is reused.

use std::any::TypeId;
use std::cell::RefCell;
use std::sync::OnceLock;

pub use crate::ops::rotate::kernel::Channel;

/// DALI's resampling filter types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterKind {
    Nearest,
    Linear,
    Triangular,
    Gaussian,
    Cubic,
    Lanczos3,
}

impl FilterKind {
    /// From a `DALIInterpType` id.
    pub fn from_interp(id: i64) -> Option<FilterKind> {
        Some(match id {
            0 => FilterKind::Nearest,
            1 => FilterKind::Linear,
            2 => FilterKind::Cubic,
            3 => FilterKind::Lanczos3,
            4 => FilterKind::Triangular,
            5 => FilterKind::Gaussian,
            _ => return None,
        })
    }
}

/// A tabulated filter (DALI's `ResamplingFilter`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Filter {
    pub table: &'static [f32],
    pub anchor: f32,
    pub scale: f32,
}

struct Tables {
    tri: Vec<f32>,
    gauss: Vec<f32>,
    lanczos: Vec<f32>,
    cubic: Vec<f32>,
}

fn sinc(x: f32) -> f32 {
    if x == 0.0 {
        1.0
    } else {
        let px = x * std::f32::consts::PI;
        px.sin() / px
    }
}

fn cubic_window(x: f32) -> f32 {
    let x = x.abs();
    if x >= 2.0 {
        return 0.0;
    }
    let x2 = x * x;
    let x3 = x2 * x;
    if x > 1.0 {
        -0.5 * x3 + 2.5 * x2 - 4.0 * x + 2.0
    } else {
        1.5 * x3 - 2.5 * x2 + 1.0
    }
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let gen = |n: usize, f: &dyn Fn(f32) -> f32, span: f32| -> Vec<f32> {
            (0..n).map(|i| f(span * (i as f32 - (n - 1) as f32 * 0.5) / (n - 1) as f32)).collect()
        };
        Tables {
            tri: vec![0.0, 1.0, 0.0],
            gauss: gen(65, &|x| (-x * x).exp(), 4.0),
            lanczos: gen(193, &|x| if x.abs() >= 3.0 { 0.0 } else { sinc(x) * sinc(x / 3.0) }, 6.0),
            cubic: gen(129, &cubic_window, 4.0),
        }
    })
}

impl Filter {
    fn base(table: &'static [f32]) -> Filter {
        Filter { table, anchor: 1.0, scale: (table.len() - 1) as f32 * 0.5 }
    }

    /// `ResamplingFilter::rescale`.
    fn rescale(mut self, support: f32) -> Filter {
        let old = self.scale;
        self.scale = (self.table.len() - 1) as f32 / support;
        self.anchor = self.anchor * old / self.scale;
        self
    }

    /// Taps per output pixel (`ceilf((n-1)/scale)`).
    pub fn support(&self) -> usize {
        ((self.table.len() - 1) as f32 / self.scale).ceil().max(1.0) as usize
    }

    #[inline]
    fn at(&self, x: f32) -> f32 {
        // Written as DALI's `operator()` (note `!(x > -1)` also catches NaN).
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(x > -1.0) {
            return 0.0;
        }
        let n = self.table.len();
        if x >= n as f32 {
            return 0.0;
        }
        let x0 = x.floor() as i32;
        let x1 = x0 + 1;
        let d = x - x0 as f32;
        let f0 = if x0 < 0 { 0.0 } else { self.table[x0 as usize] };
        let f1 = if x1 as usize >= n { 0.0 } else { self.table[x1 as usize] };
        f0 + d * (f1 - f0)
    }

    /// The filter DALI builds for `kind` with `radius` (`GetResamplingFilter`); `None` for NN.
    pub fn new(kind: FilterKind, radius: f32) -> Option<Filter> {
        let t = tables();
        Some(match kind {
            FilterKind::Nearest => return None,
            FilterKind::Linear => Filter::base(&t.tri).rescale(2.0),
            FilterKind::Triangular => Filter::base(&t.tri).rescale((2.0 * radius).max(1.0)),
            FilterKind::Gaussian => {
                let sigma = ((radius * 0.5) as f64 / std::f64::consts::SQRT_2) as f32;
                Filter::base(&t.gauss).rescale(((4.0 * std::f64::consts::SQRT_2) as f32 * sigma).max(1.0))
            }
            FilterKind::Cubic => Filter::base(&t.cubic).rescale(4.0).rescale(2.0 * radius.max(2.0)),
            FilterKind::Lanczos3 => Filter::base(&t.lanczos).rescale(6.0).rescale(2.0 * radius.max(3.0)),
        })
    }
}

/// DALI's `DefaultFilterRadius`.
pub fn default_radius(kind: FilterKind, antialias: bool, in_size: f32, out_size: f32) -> f32 {
    let aa = antialias && in_size > out_size;
    match kind {
        FilterKind::Triangular | FilterKind::Gaussian | FilterKind::Linear => if aa { in_size / out_size } else { 1.0 },
        FilterKind::Cubic => if aa { 2.0 * in_size / out_size } else { 2.0 },
        FilterKind::Lanczos3 => if aa { 3.0 * in_size / out_size } else { 3.0 },
        FilterKind::Nearest => 1.0,
    }
}

/// The filter of one axis: linear with antialiasing on a downscale becomes a triangle whose
/// radius is the scale ratio.
pub fn axis_filter(min: FilterKind, mag: FilterKind, antialias: bool, in_size: f32, out_size: usize) -> Option<Filter> {
    let out = out_size as f32;
    let kind = if out < in_size { min } else { mag };
    let radius = default_radius(kind, antialias, in_size, out);
    let kind = if kind == FilterKind::Linear && antialias && in_size > out { FilterKind::Triangular } else { kind };
    Filter::new(kind, radius)
}

/// Per-output-pixel taps along one axis: first source index and `support` weights each.
/// Outputs in `regular` read only in-range sources and skip the clamping.
#[derive(Debug, Default, Clone)]
pub struct Taps {
    pub first: Vec<i32>,
    pub weights: Vec<f32>,
    pub support: usize,
    pub regular: std::ops::Range<usize>,
}

impl Taps {
    /// `InitializeResamplingFilter`; a `None` filter gives one-tap nearest-neighbour taps.
    pub fn compute(&mut self, in_size: usize, out_size: usize, origin: f32, scale: f32, filter: Option<&Filter>) {
        self.first.clear();
        self.weights.clear();
        self.fill(out_size, origin, scale, filter);
        // `first` is monotonic (either direction), so the in-range outputs are contiguous.
        let ok = |x: &usize| self.first[*x] >= 0 && self.first[*x] as usize + self.support <= in_size;
        let start = (0..out_size).find(ok).unwrap_or(out_size);
        let end = (start..out_size).rev().find(ok).map_or(start, |x| x + 1);
        self.regular = start..end;
    }

    fn fill(&mut self, out_size: usize, origin: f32, scale: f32, filter: Option<&Filter>) {
        let Some(f) = filter else {
            self.support = 1;
            for x in 0..out_size {
                self.first.push((origin + (x as f32 + 0.5) * scale).floor() as i32);
                self.weights.push(1.0);
            }
            return;
        };
        let support = f.support();
        self.support = support;
        let x0 = origin + (0.5 * scale - 0.5 - f.anchor);
        for x in 0..out_size {
            let sx0f = x as f32 * scale + x0;
            let sx0 = sx0f.ceil();
            self.first.push(sx0 as i32);
            let f0 = sx0 - sx0f;
            let base = self.weights.len();
            let mut sum = 0.0f32;
            for k in 0..support {
                let c = f.at((f0 + k as f32) * f.scale);
                self.weights.push(c);
                sum += c;
            }
            if sum != 0.0 {
                for w in &mut self.weights[base..] {
                    *w /= sum;
                }
            }
        }
    }
}

/// Geometry and filters of one sample.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub in_h: usize,
    pub in_w: usize,
    pub c: usize,
    pub out_h: usize,
    pub out_w: usize,
    /// Source origin and step per output pixel, (y, x).
    pub origin: [f32; 2],
    pub scale: [f32; 2],
    /// Filters (y, x); `None` is nearest neighbour.
    pub filter: [Option<Filter>; 2],
}

impl Plan {
    /// DALI's pass order choice (`SetupSample`): true when the vertical pass goes first.
    pub fn vertical_first(&self) -> bool {
        let sup = |f: &Option<Filter>| f.map_or(1, |f| f.support()) as i64;
        let (sy, sx) = (sup(&self.filter[0]), sup(&self.filter[1]));
        // Input rows / columns the ROI (with filter margins) touches.
        let extent = |axis: usize, n: usize| -> i64 {
            let anchor = self.filter[axis].map_or(0.0, |f| f.anchor);
            let s = sup(&self.filter[axis]) as f32;
            let start = self.origin[axis];
            let end = start + self.scale[axis] * if axis == 0 { self.out_h } else { self.out_w } as f32;
            let (a, b) = if start <= end { (start, end) } else { (end, start) };
            let clampf = |v: f32| (v.floor() as i64).clamp(0, n as i64);
            clampf(b - anchor + s) - clampf(a - anchor)
        };
        let (ey, ex) = (extent(0, self.in_h), extent(1, self.in_w));
        let (oh, ow) = (self.out_h as i64, self.out_w as i64);
        let size_vert = ex * oh;
        let size_horz = ow * ey;
        let area = oh * ow;
        let cost_vert = 3.0 * size_vert as f32 + (size_vert * sy + area * sx) as f32;
        let cost_horz = 3.0 * size_horz as f32 + (size_horz * sx + area * sy) as f32;
        cost_vert < cost_horz
    }
}

#[derive(Default)]
struct Scratch {
    key: Option<(usize, usize, usize, usize, [u32; 4], [Option<(usize, u32, u32)>; 2])>,
    ty: Taps,
    tx: Taps,
    ring: Vec<f32>,
    tags: Vec<i64>,
    row: Vec<f32>,
    acc: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[inline]
fn clampi(v: i32, n: usize) -> usize {
    v.clamp(0, n as i32 - 1) as usize
}

/// One output pixel of the horizontal pass: `o[ch] = sum_k w[k] * row[(x0+k)*C + ch]`, sources
/// clamped to the row when `CLAMP` (edge pixels only). The sum runs over `L >= C` lanes so that
/// 3 channels become one 4-wide vector operation per tap; the extra lane reads the next pixel
/// (or the row's padding) and lands where the next output pixel (or the padding) is written
/// afterwards. The kept lanes are computed exactly as with `L == C`.
#[inline(always)]
fn horz_px<const C: usize, const L: usize, const CLAMP: bool>(o: &mut [f32; L], row: &[f32], w: usize, x0: i32, wts: &[f32]) {
    let mut acc = [0f32; L];
    for (k, &wk) in wts.iter().enumerate() {
        let px = if CLAMP { clampi(x0 + k as i32, w) } else { x0 as usize + k };
        let p: &[f32; L] = row[px * C..][..L].try_into().unwrap();
        for l in 0..L {
            acc[l] += wk * p[l];
        }
    }
    *o = acc;
}

/// Horizontal pass of one row with `C` channels summed in `L` lanes (see [`horz_px`]).
fn horz_row_c<const C: usize, const L: usize>(out: &mut [f32], row: &[f32], w: usize, t: &Taps) {
    let s = t.support;
    for x in 0..t.first.len() {
        let o: &mut [f32; L] = (&mut out[x * C..][..L]).try_into().unwrap();
        let wts = &t.weights[x * s..(x + 1) * s];
        if t.regular.contains(&x) {
            horz_px::<C, L, false>(o, row, w, t.first[x], wts);
        } else {
            horz_px::<C, L, true>(o, row, w, t.first[x], wts);
        }
    }
}

/// Padding after the rows [`horz_row`] reads and writes (the spare lane of 3-channel pixels).
const ROW_PAD: usize = 1;

/// Horizontal pass of one row: `out[x*c + ch] = sum_k w[x,k] * row[clamp(first[x]+k)*c + ch]`;
/// `row` holds `w * c` values and `out` `t.first.len() * c`, each followed by [`ROW_PAD`].
fn horz_row(out: &mut [f32], row: &[f32], w: usize, c: usize, t: &Taps) {
    match c {
        1 => horz_row_c::<1, 1>(out, row, w, t),
        2 => horz_row_c::<2, 2>(out, row, w, t),
        3 => horz_row_c::<3, 4>(out, row, w, t),
        4 => horz_row_c::<4, 4>(out, row, w, t),
        _ => {
            let s = t.support;
            for (x, o) in out.chunks_exact_mut(c).enumerate().take(t.first.len()) {
                o.fill(0.0);
                for (k, &wk) in t.weights[x * s..(x + 1) * s].iter().enumerate() {
                    let p = &row[clampi(t.first[x] + k as i32, w) * c..][..c];
                    for (a, v) in o.iter_mut().zip(p) {
                        *a += wk * v;
                    }
                }
            }
        }
    }
}

/// Stores filtered values with DALI's conversion (`sat_f32`: round half away from zero,
/// saturate). For u8, the common case, an equivalent form the compiler vectorizes.
fn store_row<O: Channel>(dst: &mut [O], src: &[f32]) {
    if TypeId::of::<O>() == TypeId::of::<u8>() {
        let dst: &mut [u8] = bytemuck::cast_slice_mut(dst);
        for (d, &v) in dst.iter_mut().zip(src) {
            // On [0, 255], adding the largest f32 below 0.5 and truncating rounds half away
            // from zero exactly (a tie reaches the next integer, anything below does not).
            *d = (v.clamp(0.0, 255.0) + 0.49999997) as u8;
        }
    } else {
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = O::sat_f32(v);
        }
    }
}

/// Resamples one HWC image. `dst` is `out_h * out_w * c`, `src` is `in_h * in_w * c`.
pub fn resample<I: Channel, O: Channel>(dst: &mut [O], src: &[I], p: &Plan) {
    let (c, in_w, in_h) = (p.c, p.in_w, p.in_h);
    if p.out_h == 0 || p.out_w == 0 || c == 0 {
        return;
    }
    if p.filter[0].is_none() && p.filter[1].is_none() {
        return resample_nn(dst, src, p);
    }
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        let fk = |f: &Option<Filter>| f.map(|f| (f.table.len(), f.anchor.to_bits(), f.scale.to_bits()));
        let key = (
            p.in_h,
            p.in_w,
            p.out_h,
            p.out_w,
            [p.origin[0].to_bits(), p.origin[1].to_bits(), p.scale[0].to_bits(), p.scale[1].to_bits()],
            [fk(&p.filter[0]), fk(&p.filter[1])],
        );
        if s.key != Some(key) {
            s.ty.compute(p.in_h, p.out_h, p.origin[0], p.scale[0], p.filter[0].as_ref());
            s.tx.compute(p.in_w, p.out_w, p.origin[1], p.scale[1], p.filter[1].as_ref());
            s.key = Some(key);
        }
        let (ty, tx) = (&s.ty, &s.tx);
        let sy = ty.support;
        let out_row = p.out_w * c;
        let in_row = in_w * c;
        if p.vertical_first() {
            // Blend input rows into one f32 row of the full input width, then filter it.
            s.acc.clear();
            s.acc.resize(in_row + ROW_PAD, 0.0);
            s.row.clear();
            s.row.resize(out_row + ROW_PAD, 0.0);
            for (y, drow) in dst.chunks_exact_mut(out_row).enumerate() {
                s.acc.fill(0.0);
                for k in 0..sy {
                    let wk = ty.weights[y * sy + k];
                    let r = clampi(ty.first[y] + k as i32, in_h);
                    for (a, v) in s.acc.iter_mut().zip(&src[r * in_row..(r + 1) * in_row]) {
                        *a += wk * v.to_f32();
                    }
                }
                horz_row(&mut s.row, &s.acc, in_w, c, tx);
                store_row(drow, &s.row);
            }
        } else {
            // Ring of `sy` horizontally filtered rows, tagged with their source row; the rows
            // an output row needs are contiguous, so they never evict each other.
            let stride = out_row + ROW_PAD;
            s.ring.clear();
            s.ring.resize(sy * stride, 0.0);
            s.tags.clear();
            s.tags.resize(sy, -1);
            s.acc.clear();
            s.acc.resize(out_row, 0.0);
            s.row.clear();
            s.row.resize(in_row + ROW_PAD, 0.0);
            for (y, drow) in dst.chunks_exact_mut(out_row).enumerate() {
                s.acc.fill(0.0);
                for k in 0..sy {
                    let r = clampi(ty.first[y] + k as i32, in_h);
                    let slot = r % sy;
                    let ring_row = &mut s.ring[slot * stride..(slot + 1) * stride];
                    if s.tags[slot] != r as i64 {
                        // Convert the row once (vectorized): each source pixel feeds several taps.
                        for (d, v) in s.row.iter_mut().zip(&src[r * in_row..(r + 1) * in_row]) {
                            *d = v.to_f32();
                        }
                        horz_row(ring_row, &s.row, in_w, c, tx);
                        s.tags[slot] = r as i64;
                    }
                    let wk = ty.weights[y * sy + k];
                    for (a, v) in s.acc.iter_mut().zip(ring_row.iter()) {
                        *a += wk * *v;
                    }
                }
                store_row(drow, &s.acc);
            }
        }
    })
}

/// Source rows and columns of nearest-neighbour resampling, as DALI's `ResampleNN` picks
/// them (columns directly, rows by accumulating the step). The GPU backend uses the same
/// indices, so both backends agree exactly.
pub fn nn_indices(p: &Plan) -> (Vec<usize>, Vec<usize>) {
    let [oy, ox] = p.origin;
    let [scy, scx] = p.scale;
    let cols: Vec<usize> = if scx == 1.0 {
        let sx0 = (ox + 0.5).floor() as i64;
        (0..p.out_w).map(|x| (sx0 + x as i64).clamp(0, p.in_w as i64 - 1) as usize).collect()
    } else {
        (0..p.out_w).map(|x| clampi((ox + (x as f32 + 0.5) * scx).floor() as i32, p.in_w)).collect()
    };
    let mut sy = oy + 0.5 * scy;
    let rows = (0..p.out_h)
        .map(|_| {
            let r = clampi(sy.floor() as i32, p.in_h);
            sy += scy;
            r
        })
        .collect();
    (rows, cols)
}

/// DALI's `ResampleNN` for HWC.
fn resample_nn<I: Channel, O: Channel>(dst: &mut [O], src: &[I], p: &Plan) {
    let (c, in_w) = (p.c, p.in_w);
    let (rows, cols) = nn_indices(p);
    for (drow, &r) in dst.chunks_exact_mut(p.out_w * c).zip(&rows) {
        let srow = &src[r * in_w * c..(r + 1) * in_w * c];
        for (d, &sx) in drow.chunks_exact_mut(c).zip(&cols) {
            for (o, i) in d.iter_mut().zip(&srow[sx * c..(sx + 1) * c]) {
                *o = O::sat_f64(i.to_f64());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_range_is_exactly_the_unclamped_outputs() {
        for (in_size, out_size, kind, aa) in [
            (500, 224, FilterKind::Linear, true),
            (75, 224, FilterKind::Lanczos3, true),
            (7, 3, FilterKind::Cubic, false),
            (3, 1, FilterKind::Gaussian, true),
        ] {
            for (origin, scale) in [(0.0, in_size as f32 / out_size as f32), (in_size as f32, -(in_size as f32) / out_size as f32)] {
                let f = axis_filter(kind, kind, aa, in_size as f32, out_size);
                let mut t = Taps::default();
                t.compute(in_size, out_size, origin, scale, f.as_ref());
                for x in 0..out_size {
                    let inside = t.first[x] >= 0 && t.first[x] as usize + t.support <= in_size;
                    assert_eq!(t.regular.contains(&x), inside, "{kind:?} {in_size}->{out_size} scale {scale}, x {x}");
                    let sum: f32 = t.weights[x * t.support..(x + 1) * t.support].iter().sum();
                    assert!((sum - 1.0).abs() < 1e-5, "weights of x {x} sum to {sum}");
                }
            }
        }
    }

    #[test]
    fn same_size_linear_is_identity_for_every_channel_count() {
        for c in 1..=5 {
            let (h, w) = (6, 9);
            let src: Vec<u8> = (0..h * w * c).map(|i| (i * 97 % 251) as u8).collect();
            let f = axis_filter(FilterKind::Triangular, FilterKind::Linear, true, 6.0, 6);
            let g = axis_filter(FilterKind::Triangular, FilterKind::Linear, true, 9.0, 9);
            let p = Plan { in_h: h, in_w: w, c, out_h: h, out_w: w, origin: [0.0; 2], scale: [1.0; 2], filter: [f, g] };
            let mut dst = vec![0u8; src.len()];
            resample(&mut dst, &src, &p);
            assert_eq!(dst, src, "{c} channels");
        }
    }

    #[test]
    fn tables_peak_at_the_centre() {
        let t = tables();
        for table in [&t.tri, &t.gauss, &t.lanczos, &t.cubic] {
            assert_eq!(table[(table.len() - 1) / 2], 1.0);
        }
        // Lanczos3 and cubic are 0 at their support's ends; the Gaussian is cut at exp(-4).
        for table in [&t.lanczos, &t.cubic] {
            assert!(table[0].abs() < 1e-6 && table[table.len() - 1].abs() < 1e-6);
        }
        assert!((t.gauss[0] - (-4f32).exp()).abs() < 1e-6);
    }
}
