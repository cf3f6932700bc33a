//! The random crop window of DALI's `RandomCropGenerator` (used by
//! `decoders.image_random_crop` and `fn.random_resized_crop`), driven by Sluice's
//! counter-based RNG keyed by (seed, operator, iteration, sample), so a window depends only
//! on those and the image size — never on thread count or batch order.
//!
//! DALI's algorithm (dali/util/random_crop_generator.cc), reproduced step for step in
//! single precision:
//! * images too wide (or too tall) for the aspect range to reach the minimum area take the
//!   full height (width) and the widest (tallest) allowed aspect;
//! * otherwise up to `num_attempts` draws of area `scale * H * W` (scale uniform in
//!   `random_area`) and aspect `exp(uniform(ln lo, ln hi))`, sizes `roundf(sqrt(area * r))`
//!   and `roundf(sqrt(area / r))` (at least 1); accepted when it fits and its realised
//!   aspect is in range;
//! * when every attempt fails: the whole image clamped to the aspect range, shrunk to at
//!   most `random_area[1]` of the area;
//! * the anchor is uniform over all positions that keep the window inside.

use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T, OpContext};
use crate::rng::SampleRng;

/// The random-window arguments, with DALI's defaults.
pub const RANDOM_CROP_ARGS: &[ArgSchema] = &[
    arg("random_area", T::FloatList, D::FloatList(&[0.08, 1.0]), "Range [min, max] of the window's area as a fraction of the image area."),
    arg("random_aspect_ratio", T::FloatList, D::FloatList(&[0.75, 1.333333]), "Range [min, max] of the window's aspect ratio (width / height), sampled log-uniformly."),
    arg("num_attempts", T::Int, D::Int(10), "Attempts at a window that fits before falling back to a centred-size window."),
];

/// A window: rows `y..y + h`, columns `x..x + w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropWindow {
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// Checked generator parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomCropParams {
    pub area: (f32, f32),
    pub aspect: (f32, f32),
    pub num_attempts: i64,
}

impl RandomCropParams {
    /// Reads and checks `random_area`, `random_aspect_ratio` and `num_attempts`.
    pub fn from_args(ctx: &OpContext) -> Result<RandomCropParams> {
        let op = &ctx.display_name;
        let pair = |name: &str| -> Result<(f32, f32)> {
            let v = ctx.args.floats(name);
            let (lo, hi) = match v.len() {
                1 => (v[0], v[0]),
                2 => (v[0], v[1]),
                _ => return Err(Error::arg(op, name, format!("must be [min, max], got {v:?}"))),
            };
            if !(lo > 0.0 && lo <= hi && hi.is_finite()) {
                return Err(Error::arg(op, name, format!("must be [min, max] with 0 < min <= max, got {v:?}")));
            }
            Ok((lo as f32, hi as f32))
        };
        // Fractions above 1 are allowed, as in DALI (old tutorials use [0.08, 1.25]): windows
        // larger than the image are drawn again, then the fallback keeps to the image.
        let area = pair("random_area")?;
        let aspect = pair("random_aspect_ratio")?;
        let num_attempts = ctx.args.int("num_attempts");
        if num_attempts < 1 {
            return Err(Error::arg(op, "num_attempts", format!("must be at least 1, got {num_attempts}")));
        }
        Ok(RandomCropParams { area, aspect, num_attempts })
    }

    /// The window for an `h` x `w` image, drawn from `rng`.
    pub fn window(&self, rng: &mut SampleRng, h: usize, w: usize) -> CropWindow {
        if h == 0 || w == 0 {
            return CropWindow { x: 0, y: 0, w: 0, h: 0 };
        }
        let (hh, ww) = (h as i64, w as i64);
        let (min_wh, max_wh) = self.aspect;
        let max_hw = 1.0 / min_wh;
        let min_area = (ww * hh) as f32 * self.area.0;
        let max_w = ((hh as f32 * max_wh) as i64).max(1);
        let max_h = ((ww as f32 * max_hw) as i64).max(1);
        let (log_lo, log_hi) = (self.aspect.0.ln(), self.aspect.1.ln());
        let (mut cw, mut ch);
        if ((hh * max_w) as f32) < min_area {
            (ch, cw) = (hh, max_w); // too wide for the aspect range
        } else if ((ww * max_h) as f32) < min_area {
            (ch, cw) = (max_h, ww); // too tall
        } else {
            let mut found = false;
            (ch, cw) = (hh, ww);
            for _ in 0..self.num_attempts {
                let scale = rng.uniform(self.area.0 as f64, self.area.1 as f64) as f32;
                let target = scale * (hh * ww) as f32;
                let ratio = (rng.uniform(log_lo as f64, log_hi as f64) as f32).exp();
                cw = ((target * ratio).sqrt().round() as i64).max(1);
                ch = ((target / ratio).sqrt().round() as i64).max(1);
                let r = cw as f32 / ch as f32;
                if cw <= ww && ch <= hh && r >= min_wh && r <= max_wh {
                    found = true;
                    break;
                }
            }
            if !found {
                let max_area = self.area.1 * (ww * hh) as f32;
                let r = ww as f32 / hh as f32;
                (ch, cw) = if r > max_wh {
                    (hh, max_w)
                } else if r < min_wh {
                    (max_h, ww)
                } else {
                    (hh, ww)
                };
                let scale = 1.0f32.min(max_area / (cw * ch) as f32);
                let s = (scale as f64).sqrt();
                cw = ((cw as f64 * s) as i64).max(1);
                ch = ((ch as f64 * s) as i64).max(1);
            }
        }
        let (cw, ch) = (cw.min(ww), ch.min(hh));
        let x = rng.below((ww - cw + 1) as u64) as usize;
        let y = rng.below((hh - ch + 1) as u64) as usize;
        CropWindow { x, y, w: cw as usize, h: ch as usize }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(area: (f32, f32), aspect: (f32, f32), n: i64) -> RandomCropParams {
        RandomCropParams { area, aspect, num_attempts: n }
    }

    #[test]
    fn windows_fit_and_respect_ranges() {
        let p = params((0.08, 1.0), (0.75, 4.0 / 3.0), 10);
        for (h, w) in [(480usize, 640usize), (37, 1000), (1000, 37), (1, 1), (3, 5), (224, 224)] {
            for s in 0..200u64 {
                let mut rng = SampleRng::new(7, 3, s, s % 5);
                let c = p.window(&mut rng, h, w);
                assert!(c.w >= 1 && c.h >= 1 && c.x + c.w <= w && c.y + c.h <= h, "{h}x{w}: {c:?}");
            }
        }
        // A 480x640 image always finds a window in range within 10 attempts in practice.
        for s in 0..500u64 {
            let c = p.window(&mut SampleRng::new(1, 1, 0, s), 480, 640);
            let area = (c.w * c.h) as f64 / (480.0 * 640.0);
            let r = c.w as f64 / c.h as f64;
            assert!((0.079..=1.0).contains(&area), "{c:?} area {area}");
            assert!((0.75..=4.0 / 3.0 + 1e-6).contains(&r), "{c:?} aspect {r}");
        }
    }

    #[test]
    fn impossible_aspect_falls_back_like_dali() {
        // Too wide: 10x1000 with aspect <= 4/3 and area >= 0.08: full height, width 13.
        let p = params((0.08, 1.0), (0.75, 4.0 / 3.0), 10);
        let c = p.window(&mut SampleRng::new(1, 1, 0, 0), 10, 1000);
        assert_eq!((c.h, c.w), (10, 13));
        let c = p.window(&mut SampleRng::new(1, 1, 0, 0), 1000, 10);
        assert_eq!((c.h, c.w), (13, 10));
        // Exact area 0.5 of a square with aspect 1 exactly: after failures, fallback
        // shrinks the whole image to sqrt(0.5).
        let p = params((0.5, 0.5), (1.0, 1.0), 1);
        let c = p.window(&mut SampleRng::new(1, 1, 0, 0), 100, 100);
        assert!(c.w == c.h && (70..=71).contains(&c.w), "{c:?}");
    }

    #[test]
    fn deterministic_per_key() {
        let p = params((0.08, 1.0), (0.75, 4.0 / 3.0), 10);
        let a = p.window(&mut SampleRng::new(5, 2, 9, 4), 300, 500);
        let b = p.window(&mut SampleRng::new(5, 2, 9, 4), 300, 500);
        assert_eq!(a, b);
        let differ = (0..20u64).any(|s| p.window(&mut SampleRng::new(5, 2, 9, s), 300, 500) != a);
        assert!(differ);
    }
}
