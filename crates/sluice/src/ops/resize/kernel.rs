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
//! [`resample_window`] computes any rectangle of the output and hands over each finished f32
//! row, so a consumer (the fused resize + crop_mirror_normalize) can crop and convert
//! without the full image ever being stored.
//!
//! With AVX2 (detected at run time) the 3-channel horizontal pass works on two pixels per
//! 8-lane vector and the vertical sums stay in registers across taps. The lanes perform the
//! portable kernels' operations in the same order (separate mul and add: Rust never fuses
//! them into FMA), so both paths give identical bits.

use std::any::TypeId;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

pub use crate::tensor::channel::Channel;

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

/// DALI's `sinc(float)`: pi * x is taken in double and rounded to f32 (rounding `pi` to f32
/// first changes the Lanczos table in its last bits).
fn sinc(x: f32) -> f32 {
    let px = (x as f64 * std::f64::consts::PI) as f32;
    if px.abs() < 1e-5 {
        1.0 - px * px * (1.0 / 6.0)
    } else {
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
    pub regular: Range<usize>,
    /// The weights of output pairs (2j, 2j+1) as 8-lane vectors, `support` per pair: tap k
    /// is `[w(2j,k); 4]` then `[w(2j+1,k); 4]`, for the two-pixels-per-vector kernels.
    pub pair_weights: Vec<f32>,
}

impl Taps {
    /// `InitializeResamplingFilter`; a `None` filter gives one-tap nearest-neighbour taps.
    pub fn compute(&mut self, in_size: usize, out_size: usize, origin: f32, scale: f32, filter: Option<&Filter>) {
        self.compute_shifted(in_size, out_size, origin, scale, filter, 0);
    }

    /// [`Taps::compute`] as DALI computes the taps of an axis its first pass does not
    /// resample: relative to `shift`, the start of the input region that axis reads
    /// ([`roi_lo`]), in f32, then moved back by it. The weights differ in their last bits.
    pub fn compute_shifted(&mut self, in_size: usize, out_size: usize, origin: f32, scale: f32, filter: Option<&Filter>, shift: i64) {
        self.first.clear();
        self.weights.clear();
        self.fill(out_size, origin - shift as f32, scale, filter);
        if shift != 0 {
            self.first.iter_mut().for_each(|f| *f += shift as i32);
        }
        // `first` is monotonic (either direction), so the in-range outputs are contiguous.
        let ok = |x: &usize| self.first[*x] >= 0 && self.first[*x] as usize + self.support <= in_size;
        let start = (0..out_size).find(ok).unwrap_or(out_size);
        let end = (start..out_size).rev().find(ok).map_or(start, |x| x + 1);
        self.regular = start..end;
        let s = self.support;
        self.pair_weights.clear();
        for j in 0..out_size / 2 {
            for k in 0..s {
                for x in [2 * j, 2 * j + 1] {
                    self.pair_weights.extend([self.weights[x * s + k]; 4]);
                }
            }
        }
    }

    /// Only `first` and `weights` (what the GPU kernel reads), without the CPU kernels'
    /// `regular` range and vector layout. They depend on nothing but the arguments (not on
    /// the input's size), which lets the GPU backend keep them between batches.
    pub fn compute_tables(&mut self, out_size: usize, origin: f32, scale: f32, filter: Option<&Filter>) {
        self.first.clear();
        self.weights.clear();
        self.fill(out_size, origin, scale, filter);
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

/// Geometry and filters of one sample: `planes` images of `in_h` x `in_w` x `c`, one after
/// the other, each resampled alike (the frames of a sequence, the channel planes of CHW).
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub in_h: usize,
    pub in_w: usize,
    pub c: usize,
    pub planes: usize,
    pub out_h: usize,
    pub out_w: usize,
    /// Source origin and step per output pixel, (y, x).
    pub origin: [f32; 2],
    pub scale: [f32; 2],
    /// Source window end, (y, x): `origin + scale * out` as the sizing gave it, bit for bit
    /// (the input region DALI reads is bounded by it, not by the product).
    pub end: [f32; 2],
    /// Filters (y, x); `None` is nearest neighbour.
    pub filter: [Option<Filter>; 2],
}

impl Plan {
    /// DALI's pass order choice ([`pass_order`]): true when the vertical pass goes first.
    pub fn vertical_first(&self) -> bool {
        let axes = [(self.in_w, self.out_w, 1), (self.in_h, self.out_h, 0)];
        let ext = axes.map(|(n, _, a)| footprint(self.origin[a], self.end[a], self.filter[a].as_ref(), n));
        let support = axes.map(|(_, _, a)| self.filter[a].map_or(1, |f| f.support()) as i64);
        pass_order(ext, axes.map(|(_, out, _)| out as i64), support)[0] == 1
    }
}

/// The input range `[lo, hi)` along one axis that the source window (with the filter's
/// footprint) touches, as DALI's `ComputeScaleAndROI` bounds it.
pub(super) fn roi_range(start: f32, end: f32, filter: Option<&Filter>, n: usize) -> (i64, i64) {
    let (anchor, support) = filter.map_or((0.0, 1.0), |f| (f.anchor, f.support() as f32));
    let (a, b) = if start <= end { (start, end) } else { (end, start) };
    let clamp = |v: f32| (v as i64).clamp(0, n as i64);
    (clamp((a - anchor).floor()), clamp((b - anchor + support).ceil()))
}

/// The input extent of [`roi_range`]: what DALI's pass order weighs.
pub(super) fn footprint(start: f32, end: f32, filter: Option<&Filter>, n: usize) -> i64 {
    let (lo, hi) = roi_range(start, end, filter, n);
    hi - lo
}

/// The start of [`roi_range`]: DALI computes the taps of every axis but the first pass'
/// relative to it.
pub(super) fn roi_lo(start: f32, end: f32, filter: Option<&Filter>, n: usize) -> i64 {
    roi_range(start, end, filter, n).0
}

/// DALI's `ProcessingOrderCalculator`: the order of the passes (axes x = 0, y = 1, z = 2) of
/// least cost, a pass costing `mul[axis] * support * volume + 3 * volume` over the volume it
/// produces, summed in f32 as DALI sums it. Orders are tried in lexicographic order and the
/// first strictly cheapest is kept (DALI's depth-first search with pruning).
pub fn pass_order<const N: usize>(in_ext: [i64; N], out: [i64; N], support: [i64; N]) -> [usize; N] {
    const MUL: [f32; 3] = [1.4, 1.0, 1.2];
    const SIZE_BIAS: f32 = 3.0;
    let orders: &[[usize; 3]] = if N == 2 { &[[0, 1, 0], [1, 0, 0]] } else { &[[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] };
    let mut best = std::array::from_fn(|a| a);
    let mut min_cost = 1e30f32;
    for order in orders {
        let order: [usize; N] = std::array::from_fn(|p| order[p]);
        let mut size = in_ext;
        let mut total = 0f32;
        for &a in &order {
            size[a] = out[a];
            let vol = size.iter().product::<i64>();
            total += MUL[a] * (support[a] * vol) as f32 + vol as f32 * SIZE_BIAS;
        }
        if total < min_cost {
            min_cost = total;
            best = order;
        }
    }
    best
}

/// DALI's last pass stores integers two ways: its SIMD blocks convert with `cvtps`, rounding
/// half to even, and the scalar rest with `ConvertSat`, rounding half away from zero. Which
/// values fall in which depends on the pass, on where a block starts and on the lanes of the
/// output type (16 bytes: 16 u8, 8 i16, 4 i32). These are the rows' half-to-even ranges.
pub(super) enum LastPass<'a> {
    /// Along rows (x): runs of `lanes` pixels from the start of each of DALI's column
    /// segments (clamped left, clamped both sides, regular, clamped right), from the x taps
    /// and the input columns `[lo, hi)` the pass reads (DALI clamps to that region when x is
    /// not its first pass; see [`roi_range`]).
    Horizontal { taps: &'a Taps, lo: i64, hi: i64 },
    /// Across rows (y, or z over whole slices): runs of `lanes` values from the start of each
    /// 256-value tile of a row of `row_len` values.
    Vertical { row_len: usize },
    /// A nearest-neighbour last pass: DALI's `ResampleNN` rounds every value half away.
    Nearest,
}

/// The values (positions in an output row of `c` channels) DALI's last pass rounds half to
/// even, into `even`, for an output type of `lanes` per 16 bytes.
pub(super) fn even_ranges(last: LastPass<'_>, c: usize, lanes: usize, even: &mut Vec<Range<usize>>) {
    even.clear();
    let mut block = |start: usize, end: usize, unit: usize| {
        let n = (end.saturating_sub(start)) / lanes * lanes;
        if n > 0 {
            even.push(start * unit..(start + n) * unit);
        }
    };
    match last {
        LastPass::Nearest => {}
        LastPass::Vertical { row_len } => {
            for t in (0..row_len).step_by(256) {
                block(t, (t + 256).min(row_len), 1);
            }
        }
        LastPass::Horizontal { taps: t, lo: in_lo, hi: in_hi } => {
            // `GetFirstAndLastRegularCol` and the four runs of `ResamplHorzRow`.
            let (first, s, out_w) = (&t.first, t.support as i64, t.first.len());
            if out_w == 0 {
                return;
            }
            let flipped = first[out_w - 1] < first[0];
            let (mut lo, mut hi) = (0usize, out_w as i64 - 1);
            let (left_clamped, right_clamped) = (|f: i32| (f as i64) < in_lo, |f: i32| f as i64 + s > in_hi);
            let (from_left, from_right): (&dyn Fn(i32) -> bool, &dyn Fn(i32) -> bool) =
                if flipped { (&right_clamped, &left_clamped) } else { (&left_clamped, &right_clamped) };
            while lo < out_w && from_left(first[lo]) {
                lo += 1;
            }
            while hi >= 0 && from_right(first[hi as usize]) {
                hi -= 1;
            }
            let last_regular_end = (hi + 1) as usize;
            let one_sided = lo.min(last_regular_end);
            let mut x = 0;
            for end in [one_sided, lo, last_regular_end, out_w] {
                block(x, end, c);
                x = x.max(end);
            }
        }
    }
}

#[derive(Default)]
struct Scratch {
    key: Option<(usize, usize, usize, usize, [u32; 4], [Option<(usize, u32, u32)>; 2])>,
    ty: Taps,
    tx: Taps,
    ring: Vec<f32>,
    tags: Vec<i64>,
    /// Offsets into `ring` of the rows one output row blends, in tap order.
    ring_rows: Vec<usize>,
    row: Vec<f32>,
    acc: Vec<f32>,
    /// DALI's half-to-even ranges of an output row, and of the window's part of it.
    even: Vec<Range<usize>>,
    even_win: Vec<Range<usize>>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[inline]
fn clampi(v: i32, n: usize) -> usize {
    v.clamp(0, n as i32 - 1) as usize
}

use crate::tensor::channel::has_avx2;

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

/// Horizontal pass of output pixel `x` of `cols` into `out` (which starts at `cols.start`).
#[inline(always)]
fn horz_one<const C: usize, const L: usize>(out: &mut [f32], row: &[f32], w: usize, t: &Taps, x: usize, x_out: usize) {
    let s = t.support;
    let o: &mut [f32; L] = (&mut out[x_out * C..][..L]).try_into().unwrap();
    let wts = &t.weights[x * s..(x + 1) * s];
    if t.regular.contains(&x) {
        horz_px::<C, L, false>(o, row, w, t.first[x], wts);
    } else {
        horz_px::<C, L, true>(o, row, w, t.first[x], wts);
    }
}

/// Horizontal pass of one row with `C` channels summed in `L` lanes (see [`horz_px`]).
fn horz_row_c<const C: usize, const L: usize>(out: &mut [f32], row: &[f32], w: usize, t: &Taps, cols: &Range<usize>) {
    for x in cols.clone() {
        horz_one::<C, L>(out, row, w, t, x, x - cols.start);
    }
}

/// Padding after the rows [`horz_row`] reads and writes (the spare lane of 3-channel pixels).
pub(super) const ROW_PAD: usize = 1;

/// Horizontal pass of the output columns `cols` of one row:
/// `out[(x - cols.start)*c + ch] = sum_k w[x,k] * row[clamp(first[x]+k)*c + ch]`. `row` holds
/// `w * c` values and `out` `cols.len() * c`, each followed by [`ROW_PAD`].
pub(super) fn horz_row(out: &mut [f32], row: &[f32], w: usize, c: usize, t: &Taps, cols: &Range<usize>) {
    assert!(row.len() >= w * c + ROW_PAD && out.len() >= cols.len() * c + ROW_PAD && cols.end <= t.first.len());
    match c {
        1 => {
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: AVX2 is present; the sizes were checked above.
                return unsafe { horz_row1_avx2(out, row, w, t, cols) };
            }
            horz_row_c::<1, 1>(out, row, w, t, cols)
        }
        2 => horz_row_c::<2, 2>(out, row, w, t, cols),
        3 => {
            #[cfg(target_arch = "x86_64")]
            if has_avx2() {
                // SAFETY: AVX2 is present; the sizes were checked above.
                return unsafe { horz_row3_avx2(out, row, w, t, cols) };
            }
            horz_row_c::<3, 4>(out, row, w, t, cols)
        }
        4 => horz_row_c::<4, 4>(out, row, w, t, cols),
        _ => {
            let s = t.support;
            for (x, o) in cols.clone().zip(out.chunks_exact_mut(c)) {
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

/// The 1-channel horizontal pass with AVX2: eight output pixels per step, their taps and
/// weights gathered (each lane sums `w[k] * v[k]` in tap order, mul then add, as the portable
/// kernel does: the same bits). Edge pixels (clamped taps) go through [`horz_one`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn horz_row1_avx2(out: &mut [f32], row: &[f32], w: usize, t: &Taps, cols: &Range<usize>) {
    use std::arch::x86_64::*;
    let s = t.support;
    let lo = cols.start.max(t.regular.start).min(cols.end);
    let hi = cols.end.min(t.regular.end).max(lo);
    let blocks = (hi - lo) / 8;
    let mut x = cols.start;
    while x < lo {
        horz_one::<1, 1>(out, row, w, t, x, x - cols.start);
        x += 1;
    }
    let (rp, wp, op) = (row.as_ptr(), t.weights.as_ptr(), out.as_mut_ptr());
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let step = _mm256_set1_epi32(s as i32);
    for _ in 0..blocks {
        // In the regular range every tap reads inside the row; weights of pixel x+j, tap k
        // sit at (x+j)*s + k.
        let first = _mm256_loadu_si256(t.first.as_ptr().add(x) as *const __m256i);
        let mut widx = _mm256_mullo_epi32(_mm256_add_epi32(_mm256_set1_epi32(x as i32), lane), step);
        let mut sidx = first;
        let mut acc = _mm256_setzero_ps();
        for _ in 0..s {
            let v = _mm256_i32gather_ps::<4>(rp, sidx);
            let wk = _mm256_i32gather_ps::<4>(wp, widx);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(wk, v));
            sidx = _mm256_add_epi32(sidx, _mm256_set1_epi32(1));
            widx = _mm256_add_epi32(widx, _mm256_set1_epi32(1));
        }
        _mm256_storeu_ps(op.add(x - cols.start), acc);
        x += 8;
    }
    while x < cols.end {
        horz_one::<1, 1>(out, row, w, t, x, x - cols.start);
        x += 1;
    }
}

/// The 3-channel horizontal pass with AVX2: four output pixels per step, two per 8-lane
/// vector (each pixel's 3 channels plus the spare lane of [`horz_px`]), so four independent
/// sums are in flight instead of one dependent chain. Every lane still computes
/// `acc = 0; acc += w[k] * v[k]` in tap order (mul then add, never FMA), so the result is
/// bit-identical to the portable kernel. Pairs start at even output indices so one load
/// fetches their weights from [`Taps::pair_weights`]; edge pixels (clamped taps) and the
/// odd pixels at the window's ends go through [`horz_px`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn horz_row3_avx2(out: &mut [f32], row: &[f32], w: usize, t: &Taps, cols: &Range<usize>) {
    use std::arch::x86_64::*;
    let s = t.support;
    // Blocks of 4 start at even x and lie inside both the window and the regular range.
    let lo = cols.start.max(t.regular.start);
    let hi = cols.end.min(t.regular.end);
    let mut block_lo = (lo + 1) & !1;
    let blocks = if hi > block_lo { (hi - block_lo) / 4 } else { 0 };
    if blocks == 0 {
        block_lo = cols.start; // no block: every pixel goes through the tail loop
    }
    let block_hi = block_lo + 4 * blocks;
    let mut x = cols.start;
    while x < block_lo {
        horz_one::<3, 4>(out, row, w, t, x, x - cols.start);
        x += 1;
    }
    let (rp, op, wp, first) = (row.as_ptr(), out.as_mut_ptr(), t.pair_weights.as_ptr(), t.first.as_ptr());
    while x < block_hi {
        // In the regular range every tap reads `first + k < w`: 4 lanes from `(first+k)*3`
        // end at most at `3w`, the row's padding lane.
        let f = [*first.add(x), *first.add(x + 1), *first.add(x + 2), *first.add(x + 3)].map(|v| rp.add(v as usize * 3));
        let (wa, wb) = (wp.add((x / 2) * s * 8), wp.add((x / 2 + 1) * s * 8));
        let mut a = _mm256_setzero_ps();
        let mut b = _mm256_setzero_ps();
        for k in 0..s {
            let da = _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(_mm_loadu_ps(f[0].add(k * 3))), _mm_loadu_ps(f[1].add(k * 3)));
            let db = _mm256_insertf128_ps::<1>(_mm256_castps128_ps256(_mm_loadu_ps(f[2].add(k * 3))), _mm_loadu_ps(f[3].add(k * 3)));
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_loadu_ps(wa.add(k * 8)), da));
            b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_loadu_ps(wb.add(k * 8)), db));
        }
        // Pixel by pixel in order: each spare lane is overwritten by the next pixel.
        let o = op.add((x - cols.start) * 3);
        _mm_storeu_ps(o, _mm256_castps256_ps128(a));
        _mm_storeu_ps(o.add(3), _mm256_extractf128_ps::<1>(a));
        _mm_storeu_ps(o.add(6), _mm256_castps256_ps128(b));
        _mm_storeu_ps(o.add(9), _mm256_extractf128_ps::<1>(b));
        x += 4;
    }
    while x < cols.end {
        horz_one::<3, 4>(out, row, w, t, x, x - cols.start);
        x += 1;
    }
}

/// `acc[i] = sum_k weights[k] * rows[k][i]` over `acc.len()` values, `rows[k]` being the
/// `acc.len()` values at `ring[offsets[k]..]`; each sum starts at 0 and adds in tap order.
fn blend_rows(acc: &mut [f32], ring: &[f32], offsets: &[usize], weights: &[f32]) {
    let n = acc.len();
    assert!(offsets.len() == weights.len() && offsets.iter().all(|&o| o + n <= ring.len()));
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 is present; the ranges were checked above.
        return unsafe { blend_rows_avx2(acc, ring, offsets, weights) };
    }
    acc.fill(0.0);
    for (&off, &wk) in offsets.iter().zip(weights) {
        for (a, v) in acc.iter_mut().zip(&ring[off..off + n]) {
            *a += wk * *v;
        }
    }
}

/// [`blend_rows`] with 32 sums kept in registers across all taps, instead of reading and
/// writing `acc` once per tap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blend_rows_avx2(acc: &mut [f32], ring: &[f32], offsets: &[usize], weights: &[f32]) {
    use std::arch::x86_64::*;
    let n = acc.len();
    let (rp, ap) = (ring.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i + 32 <= n {
        let mut s = [_mm256_setzero_ps(); 4];
        for (&off, &wk) in offsets.iter().zip(weights) {
            let (wv, r) = (_mm256_set1_ps(wk), rp.add(off + i));
            for (j, sj) in s.iter_mut().enumerate() {
                *sj = _mm256_add_ps(*sj, _mm256_mul_ps(wv, _mm256_loadu_ps(r.add(8 * j))));
            }
        }
        for (j, sj) in s.iter().enumerate() {
            _mm256_storeu_ps(ap.add(i + 8 * j), *sj);
        }
        i += 32;
    }
    while i + 8 <= n {
        let mut s = _mm256_setzero_ps();
        for (&off, &wk) in offsets.iter().zip(weights) {
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(wk), _mm256_loadu_ps(rp.add(off + i))));
        }
        _mm256_storeu_ps(ap.add(i), s);
        i += 8;
    }
    for i in i..n {
        let mut s = 0f32;
        for (&off, &wk) in offsets.iter().zip(weights) {
            s += wk * *rp.add(off + i);
        }
        *ap.add(i) = s;
    }
}

/// `acc[i] = sum_k w[k] * src_row(r_k)[i]` for the input values `lo..hi` of a row (rows of
/// `row_len` values), each sum starting at 0 and adding in tap order; u8 input with AVX2
/// converts 8 values at a time and keeps 32 sums in registers across the taps.
pub(super) fn blend_input_rows<I: Channel>(acc: &mut [f32], src: &[I], row_len: usize, rows: &[usize], weights: &[f32], lo: usize, hi: usize) {
    assert!(hi <= acc.len() && hi <= row_len && rows.iter().all(|&r| (r + 1) * row_len <= src.len()));
    #[cfg(target_arch = "x86_64")]
    if TypeId::of::<I>() == TypeId::of::<u8>() && has_avx2() {
        let src: &[u8] = bytemuck::cast_slice(src);
        // SAFETY: AVX2 is present; the ranges were checked above.
        return unsafe { blend_u8_rows_avx2(acc, src, row_len, rows, weights, lo, hi) };
    }
    #[cfg(target_arch = "x86_64")]
    if TypeId::of::<I>() == TypeId::of::<f32>() && has_avx2() && lo == 0 && hi == acc.len() {
        // Whole rows of f32 (the 3-D passes after the first): sums kept in registers.
        let src: &[f32] = bytemuck::cast_slice(src);
        let offsets = &mut [0usize; 64][..rows.len().min(64)];
        if offsets.len() == rows.len() {
            for (o, &r) in offsets.iter_mut().zip(rows) {
                *o = r * row_len;
            }
            // SAFETY: AVX2 is present; every row lies inside `src` (checked above).
            return unsafe { blend_rows_avx2(acc, src, offsets, weights) };
        }
    }
    acc[lo..hi].fill(0.0);
    for (&r, &wk) in rows.iter().zip(weights) {
        for (a, v) in acc[lo..hi].iter_mut().zip(&src[r * row_len + lo..r * row_len + hi]) {
            *a += wk * v.to_f32();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blend_u8_rows_avx2(acc: &mut [f32], src: &[u8], row_len: usize, rows: &[usize], weights: &[f32], lo: usize, hi: usize) {
    use std::arch::x86_64::*;
    let (sp, ap) = (src.as_ptr(), acc.as_mut_ptr());
    let load8 = |p: *const u8| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i)));
    let mut i = lo;
    while i + 32 <= hi {
        let mut s = [_mm256_setzero_ps(); 4];
        for (&r, &wk) in rows.iter().zip(weights) {
            let (wv, p) = (_mm256_set1_ps(wk), sp.add(r * row_len + i));
            for (j, sj) in s.iter_mut().enumerate() {
                *sj = _mm256_add_ps(*sj, _mm256_mul_ps(wv, load8(p.add(8 * j))));
            }
        }
        for (j, sj) in s.iter().enumerate() {
            _mm256_storeu_ps(ap.add(i + 8 * j), *sj);
        }
        i += 32;
    }
    while i + 8 <= hi {
        let mut s = _mm256_setzero_ps();
        for (&r, &wk) in rows.iter().zip(weights) {
            s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(wk), load8(sp.add(r * row_len + i))));
        }
        _mm256_storeu_ps(ap.add(i), s);
        i += 8;
    }
    for i in i..hi {
        let mut s = 0f32;
        for (&r, &wk) in rows.iter().zip(weights) {
            s += wk * *sp.add(r * row_len + i) as f32;
        }
        *ap.add(i) = s;
    }
}

/// u8 conversion of a filtered value, as DALI's `ConvertSat<uint8_t>` (round half away from
/// zero, saturate) in a form the compiler vectorizes. The fused resize + crop rounds through
/// this too, so it sees exactly the u8 pixels an unfused resize would store.
#[inline(always)]
pub fn round_to_u8(v: f32) -> u8 {
    // On [0, 255], adding the largest f32 below 0.5 and truncating rounds half away from
    // zero exactly (a tie reaches the next integer, anything below does not); NaN gives 0.
    (v.clamp(0.0, 255.0) + 0.49999997) as u8
}

/// `dst[i] = round_to_u8(src[i])` over `dst.len()` values.
pub fn round_row_to_u8(dst: &mut [u8], src: &[f32]) {
    assert!(src.len() >= dst.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 is present; the lengths were checked above.
        return unsafe { round_row_to_u8_avx2::<false>(dst, src) };
    }
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = round_to_u8(v);
    }
}

/// [`round_row_to_u8`], 32 values per step: the scalar form compiles to one conversion per
/// value. `max(v, 0)` also maps NaN to 0 (maxps returns its second operand on NaN), as the
/// scalar `as u8` does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn round_row_to_u8_avx2<const EVEN: bool>(dst: &mut [u8], src: &[f32]) {
    use std::arch::x86_64::*;
    let n = dst.len();
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    let (zero, top, half) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0), _mm256_set1_ps(0.49999997));
    // Half to even: `cvtps` in the default rounding mode; half away: add just under 0.5 and
    // truncate.
    let int = |p: *const f32| {
        let v = _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(p), zero), top);
        if EVEN {
            _mm256_cvtps_epi32(v)
        } else {
            _mm256_cvttps_epi32(_mm256_add_ps(v, half))
        }
    };
    let mut i = 0;
    while i + 32 <= n {
        let p = sp.add(i);
        // The packs work within 128-bit lanes; the permute puts the four groups back in order.
        let ab = _mm256_packs_epi32(int(p), int(p.add(8)));
        let cd = _mm256_packs_epi32(int(p.add(16)), int(p.add(24)));
        let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(dp.add(i) as *mut __m256i, bytes);
        i += 32;
    }
    for i in i..n {
        let v = *sp.add(i);
        *dp.add(i) = if EVEN { v.round_ties_even() as u8 } else { round_to_u8(v) };
    }
}

/// Stores filtered values with DALI's conversion (`sat_f32`: round half away from zero,
/// saturate).
pub(super) fn store_row<O: Channel>(dst: &mut [O], src: &[f32]) {
    if TypeId::of::<O>() == TypeId::of::<u8>() {
        round_row_to_u8(bytemuck::cast_slice_mut(dst), src);
    } else {
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = O::sat_f32(v);
        }
    }
}

/// Stores a finished row as DALI's last pass does: the values in `even` (positions in `dst`)
/// rounded half to even, the rest half away from zero; floats as they are.
pub(crate) fn store_row_as_dali<O: Channel>(dst: &mut [O], src: &[f32], even: &[Range<usize>]) {
    if TypeId::of::<O>() == TypeId::of::<f32>() || even.is_empty() {
        return store_row(dst, src);
    }
    let mut at = 0;
    for r in even {
        store_row(&mut dst[at..r.start], &src[at..r.start]);
        if TypeId::of::<O>() == TypeId::of::<u8>() {
            round_row_to_u8_even(bytemuck::cast_slice_mut(&mut dst[r.clone()]), &src[r.clone()]);
        } else {
            for (d, &v) in dst[r.clone()].iter_mut().zip(&src[r.clone()]) {
                *d = O::sat_f32(v.round_ties_even());
            }
        }
        at = r.end;
    }
    store_row(&mut dst[at..], &src[at..]);
}

/// `dst[i] = src[i]` rounded half to even and saturated to u8 (`cvtps` then packing, as DALI's
/// SIMD stores); NaN gives 0.
pub fn round_row_to_u8_even(dst: &mut [u8], src: &[f32]) {
    assert!(src.len() >= dst.len());
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 is present; the lengths were checked above.
        return unsafe { round_row_to_u8_avx2::<true>(dst, src) };
    }
    for (d, &v) in dst.iter_mut().zip(src) {
        // `as` saturates (and maps NaN to 0).
        *d = v.round_ties_even() as u8;
    }
}

/// Resamples every plane of a sample: `dst` is `planes` x `out_h * out_w * c`, `src` is
/// `planes` x `in_h * in_w * c`.
pub fn resample_planes<I: Channel, O: Channel>(dst: &mut [O], src: &[I], p: &Plan) {
    let (in_plane, out_plane) = (p.in_h * p.in_w * p.c, p.out_h * p.out_w * p.c);
    assert!(dst.len() == out_plane * p.planes && src.len() == in_plane * p.planes, "resize: sample buffer sizes");
    if out_plane == 0 {
        return;
    }
    for (d, s) in dst.chunks_exact_mut(out_plane).zip(src.chunks_exact(in_plane)) {
        resample(d, s, p);
    }
}

/// Resamples one HWC image. `dst` is `out_h * out_w * c`, `src` is `in_h * in_w * c`.
pub fn resample<I: Channel, O: Channel>(dst: &mut [O], src: &[I], p: &Plan) {
    if p.out_h == 0 || p.out_w == 0 || p.c == 0 {
        return;
    }
    if p.filter[0].is_none() && p.filter[1].is_none() {
        return resample_nn(dst, src, p);
    }
    let out_row = p.out_w * p.c;
    let all = Window { rows: 0..p.out_h, cols: 0..p.out_w };
    let lanes = 16 / size_of::<O>();
    resample_window(src, p, &all, lanes, |y, row, even| store_row_as_dali(&mut dst[y * out_row..(y + 1) * out_row], row, even));
}

/// The part of a resized image to compute: output rows and columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
}

/// Resamples the output pixels of `p` inside `win` (within `out_h` x `out_w`) and passes
/// each finished row, unrounded, to `sink(y, values)`: `y` counts rows from `win.rows.start`,
/// `values` holds `win.cols.len() * c` f32 values, HWC. Every pixel comes out exactly as in
/// a full-size resample (the same taps, sums and pass order); only pixels outside the window
/// and the input they alone need are skipped. At least one axis must have a filter (two
/// nearest-neighbour axes go through `resample_nn`).
pub fn resample_window<I: Channel>(src: &[I], p: &Plan, win: &Window, lanes: usize, mut sink: impl FnMut(usize, &[f32], &[Range<usize>])) {
    let (c, in_w, in_h) = (p.c, p.in_w, p.in_h);
    assert!(win.rows.end <= p.out_h && win.cols.end <= p.out_w && src.len() >= in_h * in_w * c);
    assert!(p.filter[0].is_some() || p.filter[1].is_some(), "nearest neighbour on both axes goes through resample_nn");
    if win.rows.is_empty() || win.cols.is_empty() || c == 0 {
        return;
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
        let vertical_first = p.vertical_first();
        if s.key != Some(key) {
            // The axis of the second pass has its taps relative to its input region.
            let shift = |a: usize, n: usize| roi_lo(p.origin[a], p.end[a], p.filter[a].as_ref(), n);
            let (shift_y, shift_x) = if vertical_first { (0, shift(1, p.in_w)) } else { (shift(0, p.in_h), 0) };
            s.ty.compute_shifted(p.in_h, p.out_h, p.origin[0], p.scale[0], p.filter[0].as_ref(), shift_y);
            s.tx.compute_shifted(p.in_w, p.out_w, p.origin[1], p.scale[1], p.filter[1].as_ref(), shift_x);
            s.key = Some(key);
        }
        let (ty, tx) = (&s.ty, &s.tx);
        // Which of the window's values DALI's last pass rounds half to even.
        let last = match (vertical_first, p.filter[vertical_first as usize ^ 1].is_some()) {
            (_, false) => LastPass::Nearest,
            (true, true) => {
                // x is the second pass: it reads (and clamps to) its region of the input.
                let (lo, hi) = roi_range(p.origin[1], p.end[1], p.filter[1].as_ref(), in_w);
                LastPass::Horizontal { taps: tx, lo, hi }
            }
            (false, true) => LastPass::Vertical { row_len: p.out_w * c },
        };
        even_ranges(last, c, lanes, &mut s.even);
        let (off, len) = (win.cols.start * c, win.cols.len() * c);
        s.even_win.clear();
        s.even_win.extend(s.even.iter().map(|r| r.start.max(off) - off..r.end.min(off + len).max(off) - off).filter(|r| !r.is_empty()));
        let even = &s.even_win;
        let sy = ty.support;
        let cols = &win.cols;
        let out_row = cols.len() * c;
        let in_row = in_w * c;
        // The input columns the window's taps read (taps are monotonic in x).
        let (a, b) = (tx.first[cols.start], tx.first[cols.end - 1]);
        let col_lo = clampi(a.min(b), in_w);
        let col_hi = (a.max(b) + tx.support as i32).clamp(col_lo as i32 + 1, in_w as i32) as usize;
        let (lo, hi) = (col_lo * c, col_hi * c);
        if vertical_first {
            // Blend input rows into one f32 row of the input width (only the columns the
            // window reads), then filter it.
            s.acc.resize(in_row + ROW_PAD, 0.0);
            s.row.resize(out_row + ROW_PAD, 0.0);
            s.ring_rows.clear();
            for y in win.rows.clone() {
                s.ring_rows.clear();
                s.ring_rows.extend((0..sy).map(|k| clampi(ty.first[y] + k as i32, in_h)));
                blend_input_rows(&mut s.acc, src, in_row, &s.ring_rows, &ty.weights[y * sy..(y + 1) * sy], lo, hi);
                horz_row(&mut s.row, &s.acc, in_w, c, tx, cols);
                sink(y - win.rows.start, &s.row[..out_row], even);
            }
        } else {
            // Ring of `sy` horizontally filtered rows, tagged with their source row; the rows
            // an output row needs are contiguous, so they never evict each other.
            let stride = out_row + ROW_PAD;
            s.ring.clear();
            s.ring.resize(sy * stride, 0.0);
            s.tags.clear();
            s.tags.resize(sy, -1);
            s.acc.resize(out_row, 0.0);
            s.row.resize(in_row + ROW_PAD, 0.0);
            for y in win.rows.clone() {
                s.ring_rows.clear();
                for k in 0..sy {
                    let r = clampi(ty.first[y] + k as i32, in_h);
                    let slot = r % sy;
                    let ring_row = &mut s.ring[slot * stride..(slot + 1) * stride];
                    if s.tags[slot] != r as i64 {
                        // Convert the row once (vectorized): each source pixel feeds several taps.
                        for (d, v) in s.row[lo..hi].iter_mut().zip(&src[r * in_row + lo..r * in_row + hi]) {
                            *d = v.to_f32();
                        }
                        horz_row(ring_row, &s.row, in_w, c, tx, cols);
                        s.tags[slot] = r as i64;
                    }
                    s.ring_rows.push(slot * stride);
                }
                blend_rows(&mut s.acc[..out_row], &s.ring, &s.ring_rows, &ty.weights[y * sy..(y + 1) * sy]);
                sink(y - win.rows.start, &s.acc[..out_row], even);
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
            let p = Plan { in_h: h, in_w: w, c, planes: 1, out_h: h, out_w: w, origin: [0.0; 2], scale: [1.0; 2], end: [h as f32, w as f32], filter: [f, g] };
            let mut dst = vec![0u8; src.len()];
            resample(&mut dst, &src, &p);
            assert_eq!(dst, src, "{c} channels");
        }
    }

    /// Deterministic pseudo-random values in [0, 256).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 * 256.0
            })
            .collect()
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_kernels_match_the_portable_ones_bit_for_bit() {
        assert!(has_avx2(), "this test needs an AVX2 machine to compare the two kernels");
        for (in_w, out_w, kind, flip) in [(500, 224, FilterKind::Linear, false), (75, 224, FilterKind::Lanczos3, false), (341, 256, FilterKind::Cubic, true), (9, 5, FilterKind::Linear, false)] {
            let f = axis_filter(kind, kind, true, in_w as f32, out_w);
            let mut t = Taps::default();
            let (origin, scale) = if flip { (in_w as f32, -(in_w as f32) / out_w as f32) } else { (0.0, in_w as f32 / out_w as f32) };
            t.compute(in_w, out_w, origin, scale, f.as_ref());
            let row = noise(in_w * 3 + ROW_PAD, in_w as u64);
            for cols in [0..out_w, 1..out_w - 1, 3..out_w / 2 + 1, out_w / 3..out_w / 3 + 1] {
                let mut want = vec![0f32; cols.len() * 3 + ROW_PAD];
                let mut got = want.clone();
                horz_row_c::<3, 4>(&mut want, &row, in_w, &t, &cols);
                unsafe { horz_row3_avx2(&mut got, &row, in_w, &t, &cols) };
                let bits = |v: &[f32], c: usize| v[..cols.len() * c].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got, 3), bits(&want, 3), "{kind:?} {in_w}->{out_w} cols {cols:?}");
                // One channel: gathered taps.
                horz_row_c::<1, 1>(&mut want, &row, in_w, &t, &cols);
                unsafe { horz_row1_avx2(&mut got, &row, in_w, &t, &cols) };
                assert_eq!(bits(&got, 1), bits(&want, 1), "1 channel: {kind:?} {in_w}->{out_w} cols {cols:?}");
            }
        }
        for n in [5, 37, 200, 672] {
            let ring = noise(4 * n + 3, n as u64);
            let offsets = [3 * n + 3, 0, n, 2 * n + 1];
            let weights = [0.3f32, -0.1, 0.55, 0.25];
            let mut want = vec![0f32; n];
            for (&o, &wk) in offsets.iter().zip(&weights) {
                for (a, v) in want.iter_mut().zip(&ring[o..]) {
                    *a += wk * *v;
                }
            }
            let mut got = vec![f32::NAN; n];
            unsafe { blend_rows_avx2(&mut got, &ring, &offsets, &weights) };
            assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "blend of {n}");
            let src: Vec<u8> = ring.iter().map(|&v| v as u8).collect();
            let rows = [3usize, 0, 1];
            let (lo, hi) = (1, n - 1);
            let mut want = vec![0f32; n];
            for (&r, &wk) in rows.iter().zip(&weights) {
                for i in lo..hi {
                    want[i] += wk * src[r * n + i] as f32;
                }
            }
            let mut got = vec![0f32; n];
            unsafe { blend_u8_rows_avx2(&mut got, &src, n, &rows, &weights[..3], lo, hi) };
            assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "u8 blend of {n}");
        }
    }

    #[test]
    fn rounding_to_u8_matches_the_scalar_conversion() {
        let mut v: Vec<f32> = noise(200, 3).iter().map(|x| x * 1.2 - 20.0).collect();
        // Ties, the extremes, NaN and infinities, signed zero.
        v.extend([0.5, 1.5, 254.5, 255.5, -0.5, -0.0, 0.49999997, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e9, -1e9]);
        v.extend((0..64).map(|i| i as f32 * 4.0 + 0.5));
        let want: Vec<u8> = v.iter().map(|&x| round_to_u8(x)).collect();
        let mut got = vec![0u8; v.len()];
        round_row_to_u8(&mut got, &v);
        assert_eq!(got, want);
        assert_eq!(&want[200..206], &[1, 2, 255, 255, 0, 0]);
    }

    #[test]
    fn a_window_equals_the_same_part_of_the_full_resample() {
        let (h, w, c) = (61, 83, 3);
        let src: Vec<u8> = noise(h * w * c, 5).iter().map(|&v| v as u8).collect();
        // Downscale and upscale on each axis: both pass orders get exercised.
        let mut orders = [false; 2];
        for (out_h, out_w) in [(40, 29), (29, 40), (97, 120), (120, 97), (61, 50)] {
            let fy = axis_filter(FilterKind::Triangular, FilterKind::Linear, true, h as f32, out_h);
            let fx = axis_filter(FilterKind::Triangular, FilterKind::Cubic, true, w as f32, out_w);
            let p = Plan { in_h: h, in_w: w, c, planes: 1, out_h, out_w, origin: [0.0; 2], scale: [h as f32 / out_h as f32, w as f32 / out_w as f32], end: [h as f32, w as f32], filter: [fy, fx] };
            orders[p.vertical_first() as usize] = true;
            let mut full = vec![0f32; out_h * out_w * c];
            resample(&mut full, &src, &p);
            for win in [Window { rows: 0..out_h, cols: 0..out_w }, Window { rows: 3..out_h - 5, cols: 1..out_w - 2 }, Window { rows: out_h - 1..out_h, cols: 0..1 }] {
                let mut rows_seen = 0;
                resample_window(&src, &p, &win, 4, |y, vals, _| {
                    let r = win.rows.start + y;
                    let want = &full[(r * out_w + win.cols.start) * c..(r * out_w + win.cols.end) * c];
                    assert_eq!(vals.len(), want.len());
                    assert!(vals.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{out_h}x{out_w} window {win:?} row {r} (vertical first: {})", p.vertical_first());
                    rows_seen += 1;
                });
                assert_eq!(rows_seen, win.rows.len());
            }
        }
        assert_eq!(orders, [true, true], "both pass orders");
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
