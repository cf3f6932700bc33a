//! Where `fn.rotate` puts its output and where each output pixel comes from, as DALI 2.4's
//! CPU `fn.rotate` computes them:
//!
//! * Output canvas (`RotatedCanvasSize` in DALI's `rotate_params.h`): in f64,
//!   `w' = ceil(|cos a|*w + |sin a|*h - 0.01)`, `h' = ceil(|cos a|*h + |sin a|*w - 0.01)`, then
//!   each extent is bumped by one when its parity differs from the input extent it mostly
//!   comes from (W and H for |sin| <= |cos|, swapped otherwise), to keep the centre sharp.
//! * Mapping (destination to source, f32): `M = T(in/2) * R(a) * T(-out/2)` with
//!   `R = [[c, -s], [s, c]]`, `c = cosf(a)`, `s = sinf(a)`, `a = angle_deg * f32(pi/180)`;
//!   positive angles turn the picture counter-clockwise on screen (y points down).
//!
//! The warp itself is `ops::warp::kernel`'s.

/// The radians DALI uses for `deg` degrees (`deg2rad(float)`: one f32 multiply).
#[inline]
pub fn deg2rad(deg: f32) -> f32 {
    deg * (std::f64::consts::PI / 180.0) as f32
}

/// DALI's `RotatedCanvasSize` before its parity correction: the (height, width) the rotated
/// picture covers, and the parity (0/1) each extent should have, that of the input extent it
/// mostly comes from (W and H for |sin| <= |cos|, swapped otherwise).
fn raw_canvas(h: usize, w: usize, angle_deg: f32) -> ([usize; 2], [usize; 2]) {
    // DALI negates the (f32) angle for 2-D data before converting it; the size only depends on
    // |cos| and |sin|, but keep the same operations so rounding agrees.
    let a = deg2rad(-angle_deg) as f64;
    let eps = 1e-2;
    let (abs_cos, abs_sin) = (a.cos().abs(), a.sin().abs());
    let (wf, hf) = (w as f64, h as f64);
    let w_out = (abs_cos * wf + abs_sin * hf - eps).ceil().max(0.0) as usize;
    let h_out = (abs_cos * hf + abs_sin * wf - eps).ceil().max(0.0) as usize;
    let (pw, ph) = if abs_sin <= abs_cos { (w % 2, h % 2) } else { (h % 2, w % 2) };
    ([h_out, w_out], [ph, pw])
}

/// Output (height, width) for rotating an `h` x `w` image by `angle_deg` with
/// `keep_size=False` and no `size`: DALI's `RotatedCanvasSize` plus its parity correction.
pub fn rotated_canvas_size(h: usize, w: usize, angle_deg: f32) -> (usize, usize) {
    sequence_canvas_size(h, w, [angle_deg])
}

/// The one canvas of a sequence of `h` x `w` frames rotated by `angles` (one per frame, as
/// DALI's `InferSize` for sequences): each extent the largest any frame needs, then its
/// parity set by a majority vote of the frames, so at least half keep a sharp centre.
pub fn sequence_canvas_size(h: usize, w: usize, angles: impl IntoIterator<Item = f32>) -> (usize, usize) {
    let (mut size, mut odd, mut frames) = ([0usize; 2], [0usize; 2], 0usize);
    for a in angles {
        let (s, p) = raw_canvas(h, w, a);
        for d in 0..2 {
            size[d] = size[d].max(s[d]);
            odd[d] += p[d];
        }
        frames += 1;
    }
    let fix = |d: usize| size[d] + ((size[d] % 2) ^ (2 * odd[d] > frames) as usize);
    (fix(0), fix(1))
}

/// The destination-to-source affine map `[[m00, m01, m02], [m10, m11, m12]]` (x, y order)
/// rotating an `in_h` x `in_w` image onto an `out_h` x `out_w` canvas, centres aligned.
pub fn rotation_mapping(in_h: usize, in_w: usize, out_h: usize, out_w: usize, angle_deg: f32) -> [[f32; 3]; 2] {
    let a = deg2rad(angle_deg);
    let (c, s) = (a.cos(), a.sin());
    let (iw2, ih2) = (in_w as f32 * 0.5, in_h as f32 * 0.5);
    let (ow2, oh2) = (-(out_w as f32 * 0.5), -(out_h as f32 * 0.5));
    // T(in/2) * R * T(-out/2), evaluated in the order of DALI's mat3 product.
    let m02 = c * ow2 + (-s) * oh2 + iw2;
    let m12 = s * ow2 + c * oh2 + ih2;
    [[c, -s, m02], [s, c, m12]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canvas_size_follows_dalis_rule() {
        // (h, w, angle) -> (h', w') as printed by DALI 2.4 fn.rotate on CPU.
        let cases = [
            ((4, 6, 0.0), (4, 6)),
            ((4, 6, 90.0), (6, 4)),
            ((4, 6, 30.0), (8, 8)),
            ((4, 6, -45.0), (8, 8)),
            ((4, 6, 10.0), (6, 8)),
            ((5, 7, 30.0), (9, 9)),
            ((5, 7, 10.0), (7, 9)),
            ((7, 4, 30.0), (9, 8)),
            ((7, 4, -45.0), (8, 9)),
            ((7, 4, 10.0), (9, 6)),
            ((10, 3, 135.0), (10, 11)),
            ((10, 3, 60.0), (9, 12)),
            ((10, 3, 10.0), (12, 5)),
            ((1, 1, 10.0), (3, 3)),
            ((1, 1, 90.0), (1, 1)),
            ((2, 9, 10.0), (4, 11)),
            ((2, 9, 0.001), (2, 9)),
            ((3, 300, 137.3), (207, 224)),
        ];
        for ((h, w, a), want) in cases {
            assert_eq!(rotated_canvas_size(h, w, a), want, "{h}x{w} by {a}");
        }
    }

    #[test]
    fn a_sequence_takes_the_largest_canvas_with_the_majority_parity() {
        // One frame: the image's canvas.
        assert_eq!(sequence_canvas_size(5, 7, [30.0]), rotated_canvas_size(5, 7, 30.0));
        // The same angle on every frame: the image's canvas too.
        assert_eq!(sequence_canvas_size(4, 6, [10.0; 3]), rotated_canvas_size(4, 6, 10.0));
        // 4x6 by 0 (4, 6; parities 0, 0) and by 90 (6, 4; parities from the swapped extents,
        // 0, 0): the largest extents are 6 and 6, even, as both frames want.
        assert_eq!(sequence_canvas_size(4, 6, [0.0, 90.0]), (6, 6));
        // 5x7: by 0 it is (5, 7) and wants odd extents; by 90, (7, 5), odd too. Two frames of
        // three at 0 degrees and one at 10 degrees (raw 7x9, parities 1, 1): all odd -> (7, 9).
        assert_eq!(sequence_canvas_size(5, 7, [0.0, 0.0, 10.0]), (7, 9));
        // 4x7 by 0 (4, 7; wants even, odd) and by 90 (7, 4; wants odd, even): a tie is not a
        // majority, so each extent ends even.
        assert_eq!(sequence_canvas_size(4, 7, [0.0, 90.0]), (8, 8));
    }

}
