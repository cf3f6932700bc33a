//! `fn.sphere`: DALI 2.4's `SphereAugment`, a radial stretch about the image centre. With
//! `mid = (W * 0.5, H * 0.5)` and `d = (int)max(mid.x, mid.y)`, output pixel (x, y) is
//! `t = (x + 0.5, y + 0.5) - mid` from the centre and reads the input at
//! `mid + t * (|t| / d)`: the centre and the pixels at distance d (half the longer side) read
//! themselves, nearer ones read points nearer the centre, farther ones points farther out.
//! All in f32 as DALI's cpu build evaluates it (`sqrtf` is correctly rounded, no fused
//! multiply-add); `d` is truncated to an int and converted back for the division, so an
//! image of at most 1 x 1 pixels divides 0 by 0.

use super::{gpu, Displacement, Distortion, Kind, DISPLACEMENT_ARGS};
use crate::ops::{Device, OpDef, OpSchema};

const DOC: &str = "Performs a sphere augmentation: the image is stretched radially about its centre, as if seen on a sphere.

Output pixel (x, y), at t = (x + 0.5 - W/2, y + 0.5 - H/2) from the centre, reads the input at centre + t * |t| / d, where d is half the longer side (truncated to an integer): the centre and the circle of radius d stay; inside the circle each pixel reads a point nearer the centre (the middle is magnified), outside it a point farther out (the corners read beyond the image, i.e. `fill_value`). Sampling follows `interp_type`; points outside the image read `fill_value`. Images are HWC, UINT8 or FLOAT. `mask` (one value per sample) leaves the images where it is 0 unchanged.";

/// `fn.sphere`.
pub static SPHERE: OpDef = OpDef {
    schema: OpSchema {
        name: "Sphere",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[DISPLACEMENT_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Distortion::new(ctx, Kind::Sphere)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::DistortionGpu::new(Distortion::new(ctx, Kind::Sphere)?)))),
};

/// One image's sphere: its centre and the divisor, as DALI computes them per pixel (the
/// gpu descriptor carries these three floats).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SphereMap {
    pub mid_x: f32,
    pub mid_y: f32,
    pub d: f32,
}

impl SphereMap {
    pub(crate) fn new(h: usize, w: usize) -> SphereMap {
        // `W * 0.5f`: the int extent converted to float first.
        let mid_x = w as f32 * 0.5;
        let mid_y = h as f32 * 0.5;
        // `const int d = mid_x > mid_y ? mid_x : mid_y;` (positive and below 2^30: the
        // truncation is exact), converted back to float where `sqrtf(..) / d` divides.
        let d = (if mid_x > mid_y { mid_x } else { mid_y }) as i32;
        SphereMap { mid_x, mid_y, d: d as f32 }
    }
}

impl Displacement for SphereMap {
    #[inline(always)]
    fn source(&self, x: usize, y: usize) -> (f32, f32) {
        let ty = (y as f32 + 0.5) - self.mid_y;
        let tx = (x as f32 + 0.5) - self.mid_x;
        let rad = (tx * tx + ty * ty).sqrt() / self.d;
        (self.mid_x + rad * tx, self.mid_y + rad * ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_divisor_is_half_the_longer_side_truncated() {
        assert_eq!(SphereMap::new(4, 4), SphereMap { mid_x: 2.0, mid_y: 2.0, d: 2.0 });
        assert_eq!(SphereMap::new(3, 5), SphereMap { mid_x: 2.5, mid_y: 1.5, d: 2.0 });
        assert_eq!(SphereMap::new(7, 2), SphereMap { mid_x: 1.0, mid_y: 3.5, d: 3.0 });
        assert_eq!(SphereMap::new(1, 1).d, 0.0);
        assert_eq!(SphereMap::new(1, 2).d, 1.0);
    }

    #[test]
    fn points_move_radially() {
        let m = SphereMap::new(4, 4);
        // Pixel (0, 0) is (-1.5, -1.5) from the centre, |t| / d = sqrt(4.5) / 2.
        let (sx, sy) = m.source(0, 0);
        let rad = 4.5f32.sqrt() / 2.0;
        assert_eq!((sx, sy), (2.0 + rad * -1.5, 2.0 + rad * -1.5));
        assert!((sx - 0.409_01).abs() < 1e-5);
        // Symmetric about the centre (up to rounding).
        let (ax, ay) = m.source(3, 3);
        assert!((ax + sx - 4.0).abs() < 1e-6 && (ay + sy - 4.0).abs() < 1e-6);
        // A pixel at distance d along an axis stays at its centre: 1x5 rows, d = 2,
        // pixel 0 is at t = -2: 2.5 + 1 * -2 = 0.5.
        let m = SphereMap::new(1, 5);
        assert_eq!(m.source(0, 0), (0.5, 0.5));
        assert_eq!(m.source(2, 0), (2.5, 0.5));
    }

    #[test]
    fn an_image_of_one_pixel_divides_zero_by_zero() {
        let (x, y) = SphereMap::new(1, 1).source(0, 0);
        assert!(x.is_nan() && y.is_nan());
        // ... and the sampler puts the point outside: nearest gives the fill.
        assert_eq!(super::super::floor_int(x), i32::MIN);
    }
}
