//! The flip kernel: reverses a dense tensor along any set of axes, on raw element bytes.
//!
//! Let `k` be the innermost flipped axis. Everything inside it (`inner` bytes) is copied as
//! one block; axis `k` itself is walked backwards, so for HWC a horizontal flip is a row copy
//! with reversed pixel order and a vertical flip is whole-row `memcpy`s. No allocation.

/// Most dimensions a flipped tensor may have.
pub const MAX_NDIM: usize = 8;

/// Writes `src` (a dense tensor of `shape`, elements of `elem` bytes) to `dst`, reversed
/// along every axis `a` with `flip[a]`. `dst` and `src` must both hold the whole tensor.
pub fn flip_bytes(dst: &mut [u8], src: &[u8], shape: &[usize], flip: &[bool], elem: usize) {
    let ndim = shape.len();
    assert!(ndim <= MAX_NDIM && flip.len() == ndim, "flip: {ndim} dimensions, {} flags", flip.len());
    let total = shape.iter().product::<usize>() * elem;
    assert!(dst.len() == total && src.len() == total, "flip: buffers do not match the shape");
    if total == 0 {
        return;
    }
    let Some(k) = (0..ndim).rev().find(|&a| flip[a] && shape[a] > 1) else {
        dst.copy_from_slice(src);
        return;
    };
    let inner = shape[k + 1..].iter().product::<usize>() * elem;
    let row = shape[k] * inner;
    // Byte strides of the outer axes 0..k.
    let mut stride = [0usize; MAX_NDIM];
    let mut s = row;
    for a in (0..k).rev() {
        stride[a] = s;
        s *= shape[a];
    }
    let rows = total / row;
    let mut idx = [0usize; MAX_NDIM];
    // Source offset of the current row: flipped outer axes count from their far end.
    let mut src_off: usize = (0..k).filter(|&a| flip[a]).map(|a| (shape[a] - 1) * stride[a]).sum();
    for r in 0..rows {
        let d = &mut dst[r * row..(r + 1) * row];
        let s = &src[src_off..src_off + row];
        reverse_blocks(d, s, inner);
        // Odometer over the outer axes, updating the source offset incrementally.
        for a in (0..k).rev() {
            idx[a] += 1;
            if idx[a] < shape[a] {
                if flip[a] { src_off -= stride[a] } else { src_off += stride[a] }
                break;
            }
            idx[a] = 0;
            let span = (shape[a] - 1) * stride[a];
            if flip[a] { src_off += span } else { src_off -= span }
        }
    }
}

/// `dst` = the `block`-byte blocks of `src` in reverse order.
fn reverse_blocks(dst: &mut [u8], src: &[u8], block: usize) {
    match block {
        1 => rev::<1>(dst, src),
        2 => rev::<2>(dst, src),
        3 => rev::<3>(dst, src),
        4 => rev::<4>(dst, src),
        6 => rev::<6>(dst, src),
        8 => rev::<8>(dst, src),
        12 => rev::<12>(dst, src),
        16 => rev::<16>(dst, src),
        _ => {
            for (d, s) in dst.chunks_exact_mut(block).zip(src.chunks_exact(block).rev()) {
                d.copy_from_slice(s);
            }
        }
    }
}

#[inline]
fn rev<const N: usize>(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_exact_mut(N).zip(src.chunks_exact(N).rev()) {
        let s: &[u8; N] = s.try_into().unwrap();
        let d: &mut [u8; N] = d.try_into().unwrap();
        *d = *s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip_u8(src: &[u8], shape: &[usize], flip: &[bool]) -> Vec<u8> {
        let mut dst = vec![0; src.len()];
        flip_bytes(&mut dst, src, shape, flip, 1);
        dst
    }

    /// Naive reference: element at multi-index `i` of the output comes from the mirrored index.
    fn reference(src: &[u8], shape: &[usize], flip: &[bool], elem: usize) -> Vec<u8> {
        let n: usize = shape.iter().product();
        let mut out = vec![0; n * elem];
        for lin in 0..n {
            let mut rem = lin;
            let mut idx = vec![0; shape.len()];
            for a in (0..shape.len()).rev() {
                idx[a] = rem % shape[a];
                rem /= shape[a];
            }
            let mut src_lin = 0;
            for a in 0..shape.len() {
                let i = if flip[a] { shape[a] - 1 - idx[a] } else { idx[a] };
                src_lin = src_lin * shape[a] + i;
            }
            out[lin * elem..(lin + 1) * elem].copy_from_slice(&src[src_lin * elem..(src_lin + 1) * elem]);
        }
        out
    }

    #[test]
    fn horizontal_flip_of_hwc_reverses_pixels_not_channels() {
        // 2x3 image, 2 channels: values 0..12 (same case checked against DALI 2.4 fn.flip).
        let src: Vec<u8> = (0..12).collect();
        let out = flip_u8(&src, &[2, 3, 2], &[false, true, false]);
        assert_eq!(out, [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
        let out = flip_u8(&src, &[2, 3, 2], &[true, false, false]);
        assert_eq!(out, [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]);
        let out = flip_u8(&src, &[2, 3, 2], &[true, true, false]);
        assert_eq!(out, [10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1]);
    }

    #[test]
    fn no_flip_copies_and_unit_axes_are_no_ops() {
        let src: Vec<u8> = (0..6).collect();
        assert_eq!(flip_u8(&src, &[1, 3, 2], &[false, false, false]), src);
        assert_eq!(flip_u8(&src, &[1, 3, 2], &[true, false, false]), src);
        let mut empty: [u8; 0] = [];
        flip_bytes(&mut empty, &[], &[0, 4, 3], &[true, true, false], 1);
    }

    #[test]
    fn matches_the_naive_reference_for_every_axis_set_and_element_size() {
        for shape in [vec![3usize, 4, 5], vec![2, 3, 4, 3], vec![2, 1, 3, 5, 2], vec![7]] {
            for elem in [1usize, 2, 3, 4, 8, 5] {
                let n: usize = shape.iter().product::<usize>() * elem;
                let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
                for mask in 0..(1u32 << shape.len()) {
                    let flip: Vec<bool> = (0..shape.len()).map(|a| mask >> a & 1 == 1).collect();
                    let mut dst = vec![0; n];
                    flip_bytes(&mut dst, &src, &shape, &flip, elem);
                    assert_eq!(dst, reference(&src, &shape, &flip, elem), "shape {shape:?} elem {elem} flip {flip:?}");
                }
            }
        }
    }
}
