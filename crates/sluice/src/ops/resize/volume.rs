//! 3-D resampling of volumes (DHWC), as DALI 2.4's `SeparableResampleCPU<Out, In, 3>` does it:
//! one pass per axis through f32 intermediates, in the order DALI's cost model picks
//! ([`pass_order`]), the last one rounding integers as DALI's stores do ([`even_ranges`]). Each pass uses the 2-D kernels' arithmetic, so the sums run over taps in
//! the same order as DALI's:
//!
//! * along W, every row goes through the horizontal row filter;
//! * along H, every slice's rows are blended as the vertical pass blends them;
//! * along D, whole slices are blended as rows of `H * W * C` values (DALI fuses H and W into
//!   one long row and reuses its vertical pass).
//!
//! The (H, W) part of the geometry is a [`Plan`]; [`Depth`] adds the third axis. With nearest
//! neighbour on every axis no filtering happens: slices are picked by accumulating the step
//! (DALI's `ResampleNN` for more than two dimensions) and each is resampled as an image.

use std::cell::RefCell;
use std::ops::Range;

use super::kernel::{blend_input_rows, even_ranges, footprint, roi_lo, roi_range, horz_row, pass_order, resample, store_row_as_dali, Channel, Filter, LastPass, Plan, Taps, ROW_PAD};

/// The depth axis of a volume's resampling; the [`Plan`]'s (y, x) geometry applies to every
/// slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Depth {
    pub in_d: usize,
    pub out_d: usize,
    /// Source origin and step per output slice, and the source window's end (as
    /// [`Plan::end`]).
    pub origin: f32,
    pub scale: f32,
    pub end: f32,
    /// `None` is nearest neighbour.
    pub filter: Option<Filter>,
}

/// The axes of a volume in DALI's pass numbering: x (W), y (H), z (D).
const X: usize = 0;
const Y: usize = 1;
const Z: usize = 2;

#[derive(Default)]
struct Scratch {
    taps: [Taps; 3],
    /// Two intermediate volumes, alternating between passes.
    tmp: [Vec<f32>; 2],
    /// One row in and one row out of the horizontal filter, or one blended row or slice.
    row_in: Vec<f32>,
    row_out: Vec<f32>,
    rows: Vec<usize>,
    /// DALI's half-to-even ranges of the last pass' rows.
    even: Vec<Range<usize>>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The source slice of each output slice with nearest neighbour on every axis: DALI's
/// `ResampleNN` accumulates the step along the outermost axis. The GPU backend uses the same
/// indices.
pub fn nn_slices(z: &Depth) -> Vec<usize> {
    let mut sz = z.origin + 0.5 * z.scale;
    (0..z.out_d)
        .map(|_| {
            let s = (sz.floor() as i64).clamp(0, z.in_d as i64 - 1) as usize;
            sz += z.scale;
            s
        })
        .collect()
}

/// Resamples every volume of a sample: `dst` is `p.planes` volumes of
/// `out_d x out_h x out_w x c`, `src` as many of `in_d x in_h x in_w x c`. The taps, the pass
/// order and the rounding ranges are the sample's, computed once for all its volumes (the
/// frames of FDHWC, the channels of CDHW).
pub fn resample_volumes<I: Channel, O: Channel>(dst: &mut [O], src: &[I], p: &Plan, z: &Depth) {
    let c = p.c;
    let (in_slice, out_slice) = (p.in_h * p.in_w * c, p.out_h * p.out_w * c);
    let (in_vol, out_vol) = (z.in_d * in_slice, z.out_d * out_slice);
    assert!(dst.len() == out_vol * p.planes && src.len() == in_vol * p.planes, "resize: volume buffer sizes");
    if out_vol == 0 {
        return;
    }
    let volumes = dst.chunks_exact_mut(out_vol).zip(src.chunks_exact(in_vol));
    if z.filter.is_none() && p.filter[0].is_none() && p.filter[1].is_none() {
        let slices = nn_slices(z);
        for (dst, src) in volumes {
            for (out, &s) in dst.chunks_exact_mut(out_slice).zip(&slices) {
                resample(out, &src[s * in_slice..(s + 1) * in_slice], p);
            }
        }
        return;
    }
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        let filters = [p.filter[1].as_ref(), p.filter[0].as_ref(), z.filter.as_ref()];
        let ins = [p.in_w, p.in_h, z.in_d];
        let outs = [p.out_w, p.out_h, z.out_d];
        let origins = [p.origin[1], p.origin[0], z.origin];
        let scales = [p.scale[1], p.scale[0], z.scale];
        let ends = [p.end[1], p.end[0], z.end];
        let ext = [X, Y, Z].map(|a| footprint(origins[a], ends[a], filters[a], ins[a]));
        let support = [X, Y, Z].map(|a| filters[a].map_or(1, |f| f.support()) as i64);
        let order = pass_order(ext, outs.map(|v| v as i64), support);
        for a in [X, Y, Z] {
            // Axes after the first pass have their taps relative to their input region.
            let shift = if a == order[0] { 0 } else { roi_lo(origins[a], ends[a], filters[a], ins[a]) };
            s.taps[a].compute_shifted(ins[a], outs[a], origins[a], scales[a], filters[a], shift);
        }
        let Scratch { taps, tmp, row_in, row_out, rows, even } = s;
        // The extents (x, y, z) of the data before each pass.
        let mut sizes = [ins; 3];
        for (pass, &axis) in order.iter().enumerate() {
            let mut next = sizes[pass];
            next[axis] = outs[axis];
            if pass < 2 {
                sizes[pass + 1] = next;
            } else {
                let last_axis = order[2];
                let last = match last_axis {
                    _ if filters[last_axis].is_none() => LastPass::Nearest,
                    X => {
                        // Not the first pass: x reads (and clamps to) its region.
                        let (lo, hi) = roi_range(origins[X], ends[X], filters[X], ins[X]);
                        LastPass::Horizontal { taps: &taps[X], lo, hi }
                    }
                    Y => LastPass::Vertical { row_len: next[X] * c },
                    _ => LastPass::Vertical { row_len: next[X] * next[Y] * c },
                };
                even_ranges(last, c, 16 / size_of::<O>(), even);
            }
        }
        let [tmp_a, tmp_b] = tmp;
        let mut bufs = Bufs { row_in, row_out, rows };
        let len = |pass: usize| sizes[pass + 1].iter().product::<usize>() * c;
        tmp_a.resize(len(0), 0.0);
        tmp_b.resize(len(1), 0.0);
        let pass = |p: usize| (sizes[p], order[p], &taps[order[p]]);
        for (dst, src) in volumes {
            let (size, axis, t) = pass(0);
            resample_axis(tmp_a, src, size, c, axis, t, &[], &mut bufs);
            let (size, axis, t) = pass(1);
            resample_axis(tmp_b, tmp_a, size, c, axis, t, &[], &mut bufs);
            let (size, axis, t) = pass(2);
            resample_axis(dst, tmp_b, size, c, axis, t, even, &mut bufs);
        }
    })
}

struct Bufs<'a> {
    row_in: &'a mut Vec<f32>,
    row_out: &'a mut Vec<f32>,
    rows: &'a mut Vec<usize>,
}

/// One pass: resamples `src` (extents `size`, x y z, `c` channels) along `axis` with `t`
/// into `dst`, whose extent along `axis` is `t`'s output length. Every row (a whole slice
/// along z) is stored with the half-to-even ranges `even`.
#[allow(clippy::too_many_arguments)]
fn resample_axis<I: Channel, O: Channel>(dst: &mut [O], src: &[I], size: [usize; 3], c: usize, axis: usize, t: &Taps, even: &[Range<usize>], b: &mut Bufs<'_>) {
    let [w, h, d] = size;
    let out_len = t.first.len();
    let s = t.support;
    let clamp = |v: i32, n: usize| v.clamp(0, n as i32 - 1) as usize;
    match axis {
        X => {
            let (in_row, out_row) = (w * c, out_len * c);
            b.row_in.resize(in_row + ROW_PAD, 0.0);
            b.row_out.resize(out_row + ROW_PAD, 0.0);
            for (o, i) in dst.chunks_exact_mut(out_row).zip(src.chunks_exact(in_row)) {
                for (r, v) in b.row_in.iter_mut().zip(i) {
                    *r = v.to_f32();
                }
                horz_row(b.row_out, b.row_in, w, c, t, &(0..out_len));
                store_row_as_dali(o, &b.row_out[..out_row], even);
            }
        }
        Y => {
            // Per slice, blend `s` rows of `w * c` values into each output row.
            let row = w * c;
            b.row_out.resize(row, 0.0);
            for (o, i) in dst.chunks_exact_mut(out_len * row).zip(src.chunks_exact(h * row)) {
                for (y, out) in o.chunks_exact_mut(row).enumerate() {
                    b.rows.clear();
                    b.rows.extend((0..s).map(|k| clamp(t.first[y] + k as i32, h)));
                    blend_input_rows(b.row_out, i, row, b.rows, &t.weights[y * s..(y + 1) * s], 0, row);
                    store_row_as_dali(out, b.row_out, even);
                }
            }
        }
        _ => {
            // Whole slices are the rows.
            let slice = h * w * c;
            b.row_out.resize(slice, 0.0);
            for (zo, out) in dst.chunks_exact_mut(slice).enumerate() {
                b.rows.clear();
                b.rows.extend((0..s).map(|k| clamp(t.first[zo] + k as i32, d)));
                blend_input_rows(b.row_out, src, slice, b.rows, &t.weights[zo * s..(zo + 1) * s], 0, slice);
                store_row_as_dali(out, b.row_out, even);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernel::{axis_filter, FilterKind};
    use super::*;

    fn plan(inp: [usize; 3], out: [usize; 3], c: usize, kind: FilterKind) -> (Plan, Depth) {
        let f = |a: usize| axis_filter(kind, kind, true, inp[a] as f32, out[a]);
        let p = Plan {
            in_h: inp[1],
            in_w: inp[2],
            c,
            planes: 1,
            out_h: out[1],
            out_w: out[2],
            origin: [0.0; 2],
            scale: [inp[1] as f32 / out[1] as f32, inp[2] as f32 / out[2] as f32],
            end: [inp[1] as f32, inp[2] as f32],
            filter: [f(1), f(2)],
        };
        let z = Depth { in_d: inp[0], out_d: out[0], origin: 0.0, scale: inp[0] as f32 / out[0] as f32, end: inp[0] as f32, filter: f(0) };
        (p, z)
    }

    #[test]
    fn a_volume_of_one_slice_resizes_as_its_image() {
        let (inp, out) = ([1, 9, 11], [1, 5, 7]);
        for c in [1, 3] {
            let src: Vec<f32> = (0..inp.iter().product::<usize>() * c).map(|i| ((i * 37) % 101) as f32).collect();
            let (p, z) = plan(inp, out, c, FilterKind::Linear);
            let mut vol = vec![0f32; out.iter().product::<usize>() * c];
            resample_volumes(&mut vol, &src, &p, &z);
            let mut img = vec![0f32; vol.len()];
            resample(&mut img, &src, &p);
            // The depth pass of one slice multiplies by 1 and adds to 0: exact.
            assert_eq!(vol, img);
        }
    }

    #[test]
    fn a_linear_ramp_along_depth_stays_a_ramp() {
        // Each slice holds its index; upscaling depth x2 with linear interpolation gives the
        // midpoints (clamped at the ends), independent of (y, x).
        let (inp, out) = ([4, 3, 5], [8, 3, 5]);
        let src: Vec<f32> = (0..4).flat_map(|z| std::iter::repeat_n(z as f32, 15)).collect();
        let (p, z) = plan(inp, out, 1, FilterKind::Linear);
        let mut dst = vec![0f32; 8 * 15];
        resample_volumes(&mut dst, &src, &p, &z);
        let want = [0.0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.0];
        for (zo, slice) in dst.chunks_exact(15).enumerate() {
            assert!(slice.iter().all(|&v| (v - want[zo]).abs() < 1e-6), "slice {zo}: {slice:?}");
        }
    }

    #[test]
    fn the_pass_order_follows_dalis_costs() {
        // Downscaling depth only: depth goes first, so the later passes work on less data.
        assert_eq!(pass_order([64, 64, 64], [64, 64, 8], [2, 2, 16])[0], Z);
        // Downscaling width only: width goes first.
        assert_eq!(pass_order([64, 64, 64], [8, 64, 64], [16, 2, 2])[0], X);
    }
}
