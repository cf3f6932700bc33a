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
    let [h, w] = vote(angles.into_iter().map(|a| raw_canvas(h, w, a)));
    (h, w)
}

/// DALI's canvas of several frames from each frame's raw canvas and wanted parities: each
/// extent the largest, then bumped by one unless a majority of the frames wants its parity.
fn vote<const N: usize>(frames: impl Iterator<Item = ([usize; N], [usize; N])>) -> [usize; N] {
    let (mut size, mut odd, mut count) = ([0usize; N], [0usize; N], 0usize);
    for (s, p) in frames {
        for d in 0..N {
            size[d] = size[d].max(s[d]);
            odd[d] += p[d];
        }
        count += 1;
    }
    std::array::from_fn(|d| size[d] + ((size[d] % 2) ^ (2 * odd[d] > count) as usize))
}

/// DALI's `rotation3D(axis, angle)` (`geom/transform.h`), the 3x3 part, x first: the identity
/// for a zero angle; an axis along one coordinate is made a unit vector by its sign, any
/// other divided by its f32 length; then Rodrigues' formula in f32.
pub fn rotation_3d(axis: [f32; 3], angle_rad: f32) -> [[f32; 3]; 3] {
    if angle_rad == 0.0 {
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    }
    let (c, s) = (angle_rad.cos(), angle_rad.sin());
    let [u, v, w] = if axis.iter().filter(|&&a| a != 0.0).count() == 1 {
        axis.map(|a| if a < 0.0 { -1.0 } else if a > 0.0 { 1.0 } else { 0.0 })
    } else {
        let len = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
        axis.map(|a| a / len)
    };
    let (uu, vv, ww, uv, uw, vw) = (u * u, v * v, w * w, u * v, u * w, v * w);
    [
        [uu + (vv + ww) * c, uv * (1.0 - c) - w * s, uw * (1.0 - c) + v * s],
        [uv * (1.0 - c) + w * s, vv + (uu + ww) * c, vw * (1.0 - c) - u * s],
        [uw * (1.0 - c) - v * s, vw * (1.0 - c) + u * s, ww + (uu + vv) * c],
    ]
}

/// DALI's 3-D `RotatedCanvasSize` before the parity correction, for a `[D, H, W]` volume:
/// the extents `ceil(|R| * (W, H, D) - 0.01)` in f32 (returned D, H, W), and each one's wanted
/// parity, that of the input extent contributing most to it (the diagonal one on ties).
fn raw_volume_canvas(ext: [usize; 3], axis: [f32; 3], angle_deg: f32) -> ([usize; 3], [usize; 3]) {
    let r = rotation_3d(axis, deg2rad(angle_deg)).map(|row| row.map(f32::abs));
    let size = [ext[2], ext[1], ext[0]]; // x, y, z
    let (mut out, mut parity) = ([0usize; 3], [0usize; 3]);
    for i in 0..3 {
        let v = r[i][0] * size[0] as f32 + r[i][1] * size[1] as f32 + r[i][2] * size[2] as f32;
        out[2 - i] = (v - 1e-2).ceil().max(0.0) as usize;
        let mut dominant = i;
        for j in 0..3 {
            if r[i][j] > r[i][dominant] {
                dominant = j;
            }
        }
        parity[2 - i] = size[dominant] % 2;
    }
    (out, parity)
}

/// The one `[D, H, W]` canvas of the volumes of a sequence (or of one volume), each rotated
/// by its `(axis, angle)`, as DALI's `InferSize`: see [`sequence_canvas_size`].
pub fn volume_canvas_size(ext: [usize; 3], rotations: impl IntoIterator<Item = ([f32; 3], f32)>) -> [usize; 3] {
    vote(rotations.into_iter().map(|(axis, a)| raw_volume_canvas(ext, axis, a)))
}

/// The destination-to-source map (3x4, x first) rotating an `inp` (`[D, H, W]`) volume about
/// `axis` by `angle_deg` onto an `out` canvas, centres aligned: DALI's
/// `T(in/2) * rotation3D(axis, -a) * T(-out/2)`, each entry summed in its mat4 product's order.
pub fn rotation_mapping_3d(inp: [usize; 3], out: [usize; 3], axis: [f32; 3], angle_deg: f32) -> [[f32; 4]; 3] {
    let r = rotation_3d(axis, -deg2rad(angle_deg));
    let half_in = [inp[2] as f32 * 0.5, inp[1] as f32 * 0.5, inp[0] as f32 * 0.5];
    let half_out = [-(out[2] as f32) * 0.5, -(out[1] as f32) * 0.5, -(out[0] as f32) * 0.5];
    std::array::from_fn(|i| {
        let t = r[i][0] * half_out[0] + r[i][1] * half_out[1] + r[i][2] * half_out[2] + half_in[i];
        [r[i][0], r[i][1], r[i][2], t]
    })
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


    #[test]
    fn volume_canvas_follows_dalis_rule() {
        // ([D, H, W], axis, angle) -> [D', H', W'] as printed by DALI 2.4 fn.rotate on CPU.
        let cases = [
            (([5, 6, 7], [1.0, 0.0, 0.0], 45.0), [9, 8, 7]),
            (([4, 9, 2], [1.0, 0.0, 0.0], 45.0), [10, 11, 2]),
            (([5, 6, 7], [1.0, 1.0, 0.5], 30.0), [9, 10, 9]),
            (([4, 9, 2], [1.0, 1.0, 0.5], 30.0), [8, 11, 6]),
        ];
        for ((ext, axis, a), want) in cases {
            assert_eq!(volume_canvas_size(ext, [(axis, a)]), want, "{ext:?} about {axis:?} by {a}");
        }
        // A zero angle keeps the volume; an axis along one coordinate turns that plane only.
        assert_eq!(volume_canvas_size([5, 6, 7], [([0.3, 0.2, 0.1], 0.0)]), [5, 6, 7]);
        assert_eq!(volume_canvas_size([5, 6, 7], [([0.0, 0.0, -2.0], 90.0)]), [5, 7, 6]);
    }

    #[test]
    fn the_3d_map_takes_output_centres_to_input_centres() {
        // About z (the D axis) by 90 degrees, the x-y plane turns as the 2-D map turns it by
        // -90: DALI's 2-D angles turn counter-clockwise on screen (y down), its 3-D ones follow
        // the right-hand rule.
        let m = rotation_mapping_3d([3, 4, 6], [3, 6, 4], [0.0, 0.0, 1.0], 90.0);
        let p = rotation_mapping(4, 6, 6, 4, -90.0);
        for i in 0..2 {
            for j in 0..2 {
                assert!((m[i][j] - p[i][j]).abs() < 1e-6, "{m:?} {p:?}");
            }
            assert!((m[i][3] - p[i][2]).abs() < 1e-5, "{m:?} {p:?}");
        }
        assert_eq!(m[2], [0.0, 0.0, 1.0, 0.0]);
        // The output centre maps to the input centre.
        let m = rotation_mapping_3d([5, 6, 7], [9, 8, 7], [1.0, 0.5, 0.25], 33.0);
        let centre_out = [3.5f32, 4.0, 4.5];
        let centre_in = [3.5f32, 3.0, 2.5];
        for i in 0..3 {
            let v = m[i][0] * centre_out[0] + m[i][1] * centre_out[1] + m[i][2] * centre_out[2] + m[i][3];
            assert!((v - centre_in[i]).abs() < 1e-4, "row {i}: {v}");
        }
    }
}
