//! The separable convolution engine, as DALI 2.4's `SeparableConvolutionCpu` computes it:
//! one 1-D correlation per spatial axis, the innermost axis first, each output point
//! `acc = 0; acc += in[reflect101(i - r + k)] * w[k]` for k = 0..n in f32 (no fused
//! multiply-add), the f32 accumulator kept between passes without rounding, `ConvertSat` to
//! the output type at the end. Borders reflect without repeating the edge (`dcb|abcd|cba`,
//! repeatedly for windows wider than the axis).
//!
//! Every output point's sum runs in window order, so the loops below may go over whole rows
//! (vector code) and still give DALI's bits.

use std::cell::RefCell;

use crate::tensor::channel::{avx2_twin, Channel};

/// `idx` reflected into `0..size` (DALI's `idx_reflect_101`).
#[inline]
pub fn reflect101(mut idx: i64, size: i64) -> usize {
    if size < 2 {
        return 0;
    }
    loop {
        if idx < 0 {
            idx = -idx;
        } else if idx >= size {
            idx = 2 * size - 2 - idx;
        } else {
            return idx as usize;
        }
    }
}

thread_local! {
    /// Two f32 planes between passes, and a padded row: reused by every sample a worker runs.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

avx2_twin!(
    /// Convolves one sample: `outer` independent blocks, each of `spatial` extents (outermost
    /// first) times `c` channels, with `windows[a]` along spatial axis `a` (odd lengths).
    /// With AVX2 (checked once) the same code runs as 8-lane vectors; the arithmetic is the
    /// same (no fused multiply-adds either way).
    pub fn convolve<I: Channel, O: Channel>(dst: &mut [O], src: &[I], outer: usize, spatial: &[usize], c: usize, windows: &[&[f32]]) => convolve_body
);

#[inline(always)]
fn convolve_body<I: Channel, O: Channel>(dst: &mut [O], src: &[I], outer: usize, spatial: &[usize], c: usize, windows: &[&[f32]]) {
    let block: usize = spatial.iter().product::<usize>() * c;
    if block == 0 || outer == 0 {
        return;
    }
    SCRATCH.with(|s| {
        let (a, b, row) = &mut *s.borrow_mut();
        a.resize(block, 0.0);
        b.resize(block, 0.0);
        for o in 0..outer {
            let (src, dst) = (&src[o * block..(o + 1) * block], &mut dst[o * block..(o + 1) * block]);
            let last = spatial.len() - 1;
            // Innermost axis first; each pass reads the previous one's f32 plane.
            for axis in (0..spatial.len()).rev() {
                let (len, inner) = (spatial[axis], spatial[axis + 1..].iter().product::<usize>() * c);
                let w = windows[axis];
                match (axis == last, axis == 0) {
                    (true, true) => pass(dst, src, len, inner, w, row),
                    (true, false) => pass(a, src, len, inner, w, row),
                    (false, true) => pass(dst, a, len, inner, w, row),
                    (false, false) => {
                        pass(b, a, len, inner, w, row);
                        std::mem::swap(a, b);
                    }
                }
            }
        }
    });
}

/// One axis of `len` points, `inner` elements apart, over the whole block.
#[inline(always)]
fn pass<I: Channel, O: Channel>(dst: &mut [O], src: &[I], len: usize, inner: usize, w: &[f32], row: &mut Vec<f32>) {
    let r = (w.len() / 2) as i64;
    let line = len * inner;
    for (d, s) in dst.chunks_exact_mut(line).zip(src.chunks_exact(line)) {
        if inner <= 4 {
            // Innermost axis: pad the line with its reflections, then slide the window.
            let (c, padded) = (inner, len + 2 * r as usize);
            row.resize(padded * c + len * c, 0.0); // then room for the sums
            let r = r as usize;
            for p in (0..r).chain(r + len..padded) {
                let q = reflect101(p as i64 - r as i64, len as i64);
                for k in 0..c {
                    row[p * c + k] = s[q * c + k].to_f32();
                }
            }
            for (t, v) in row[r * c..(r + len) * c].iter_mut().zip(s) {
                *t = v.to_f32();
            }
            // Tap by tap over the whole line (vector code); each point still sums in window order.
            let n = len * c;
            let (taps, acc) = row.split_at_mut(padded * c);
            acc[..n].fill(0.0);
            for (k, &wk) in w.iter().enumerate() {
                for (a, &v) in acc[..n].iter_mut().zip(&taps[k * c..k * c + n]) {
                    *a += v * wk;
                }
            }
            O::sat_f32_row(d, &acc[..n]);
        } else {
            // Outer axis: whole rows of `inner` elements, window tap by window tap.
            row.resize(inner, 0.0);
            for (i, out) in d.chunks_exact_mut(inner).enumerate() {
                row.fill(0.0);
                for (k, &wk) in w.iter().enumerate() {
                    let q = reflect101(i as i64 - r + k as i64, len as i64);
                    for (acc, v) in row.iter_mut().zip(&s[q * inner..(q + 1) * inner]) {
                        *acc += v.to_f32() * wk;
                    }
                }
                O::sat_f32_row(out, row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflection_repeats_for_wide_windows() {
        let got: Vec<usize> = (-5..8).map(|i| reflect101(i, 3)).collect();
        assert_eq!(got, vec![1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1]);
        assert_eq!(reflect101(-3, 1), 0);
    }

    /// Both pass shapes give the same sums as the definition.
    #[test]
    fn passes_equal_the_direct_sum() {
        let (h, w, c) = (5usize, 7usize, 3usize);
        let src: Vec<u8> = (0..h * w * c).map(|v| (v * 37 % 251) as u8).collect();
        let win = [0.25f32, 0.5, 0.25];
        let mut out = vec![0.0f32; h * w * c];
        convolve(&mut out, &src, 1, &[h, w], c, &[&win, &win]);
        let at = |y: i64, x: i64, k: usize| src[(reflect101(y, h as i64) * w + reflect101(x, w as i64)) * c + k] as f32;
        for y in 0..h as i64 {
            for x in 0..w as i64 {
                for k in 0..c {
                    let mut acc = 0.0f32;
                    // The W pass then the H pass, each summed in window order.
                    let row = |yy: i64| {
                        let mut s = 0.0f32;
                        for (b, &wb) in win.iter().enumerate() {
                            s += at(yy, x - 1 + b as i64, k) * wb;
                        }
                        s
                    };
                    for (a, &wa) in win.iter().enumerate() {
                        acc += row(reflect101(y - 1 + a as i64, h as i64) as i64) * wa;
                    }
                    assert_eq!(out[((y as usize) * w + x as usize) * c + k], acc);
                }
            }
        }
    }
}
