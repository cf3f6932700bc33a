//! `fn.water`: DALI 2.4's `WaterAugment`. Output pixel (x, y) reads the input at
//! `(x + ampl_x * sinf(freq_x * y + phase_x), y + ampl_y * cosf(freq_y * x + phase_y))`,
//! every operation in f32 as DALI's cpu build evaluates it (products and sums rounded one
//! by one; `sinf` / `cosf` are the C library's, see the module above). The horizontal offset
//! depends on the row only and the vertical one on the column only, which is why the plan
//! keeps them as two tables ([`Wave::row`], [`Wave::col`]); `x + rows[y]` is then the very
//! sum DALI computes per pixel.

use super::{gpu, Displacement, Distortion, Kind, DISPLACEMENT_ARGS};
use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema};

const DOC: &str = "Performs a water augmentation, which makes the image appear to be underwater: each row shifts sideways along a sine wave of its y, each column up and down along a cosine wave of its x.

Output pixel (x, y) reads the input at (x + ampl_x * sin(freq_x * y + phase_x), y + ampl_y * cos(freq_y * x + phase_y)), with `interp_type` sampling; points outside the image read `fill_value`. Images are HWC, UINT8 or FLOAT. `mask` (one value per sample) leaves the images where it is 0 unchanged.";

/// The default frequency: a period of 128 pixels, computed in double and kept as a float,
/// as DALI's schema does.
const FREQ: f64 = 2.0 * std::f64::consts::PI / 128.0;

const WATER_ARGS: &[ArgSchema] = &[
    arg("ampl_x", T::Float, D::Float(10.0), "Amplitude of the wave in the x direction, in pixels."),
    arg("ampl_y", T::Float, D::Float(10.0), "Amplitude of the wave in the y direction, in pixels."),
    arg("freq_x", T::Float, D::Float(FREQ), "Frequency of the wave in the x direction (radians per row)."),
    arg("freq_y", T::Float, D::Float(FREQ), "Frequency of the wave in the y direction (radians per column)."),
    arg("phase_x", T::Float, D::Float(0.0), "Phase of the wave in the x direction."),
    arg("phase_y", T::Float, D::Float(0.0), "Phase of the wave in the y direction."),
];

/// `fn.water`.
pub static WATER: OpDef = OpDef {
    schema: OpSchema {
        name: "Water",
        doc: DOC,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[WATER_ARGS, DISPLACEMENT_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Distortion::new(ctx, Kind::Water(Wave::new(ctx)))?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::DistortionGpu::new(Distortion::new(ctx, Kind::Water(Wave::new(ctx)))?)))),
};

/// The wave's arguments, as the floats DALI keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Wave {
    pub ampl_x: f32,
    pub ampl_y: f32,
    pub freq_x: f32,
    pub freq_y: f32,
    pub phase_x: f32,
    pub phase_y: f32,
}

impl Wave {
    pub(super) fn new(ctx: &OpContext) -> Wave {
        let f = |name: &str| ctx.args.float(name) as f32;
        Wave { ampl_x: f("ampl_x"), ampl_y: f("ampl_y"), freq_x: f("freq_x"), freq_y: f("freq_y"), phase_x: f("phase_x"), phase_y: f("phase_y") }
    }

    /// The x offset of row `y`: `ampl_x * sinf(freq_x * y + phase_x)` (y converted to float
    /// as DALI's int row index is).
    pub(crate) fn row(&self, y: usize) -> f32 {
        self.ampl_x * (self.freq_x * y as f32 + self.phase_x).sin()
    }

    /// The y offset of column `x`: `ampl_y * cosf(freq_y * x + phase_y)`.
    pub(crate) fn col(&self, x: usize) -> f32 {
        self.ampl_y * (self.freq_y * x as f32 + self.phase_y).cos()
    }
}

/// Water's source points from the plan's tables (which cover the sample).
pub(crate) struct WaterMap<'a> {
    pub rows: &'a [f32],
    pub cols: &'a [f32],
}

impl Displacement for WaterMap<'_> {
    #[inline(always)]
    fn source(&self, x: usize, y: usize) -> (f32, f32) {
        (x as f32 + self.rows[y], y as f32 + self.cols[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DALI's per-pixel expression, written out.
    fn dali_point(w: &Wave, x: usize, y: usize) -> (f32, f32) {
        let (xf, yf) = (x as f32, y as f32);
        (xf + w.ampl_x * (w.freq_x * yf + w.phase_x).sin(), yf + w.ampl_y * (w.freq_y * xf + w.phase_y).cos())
    }

    #[test]
    fn the_tables_give_dalis_per_pixel_points() {
        for w in [
            Wave { ampl_x: 10.0, ampl_y: 10.0, freq_x: FREQ as f32, freq_y: FREQ as f32, phase_x: 0.0, phase_y: 0.0 },
            Wave { ampl_x: 2.0, ampl_y: 3.0, freq_x: 0.06, freq_y: 0.08, phase_x: 0.2, phase_y: 0.5 },
            Wave { ampl_x: -7.3, ampl_y: 13.1, freq_x: 1.7, freq_y: -0.3, phase_x: 100.2, phase_y: -3.5 },
        ] {
            let rows: Vec<f32> = (0..300).map(|y| w.row(y)).collect();
            let cols: Vec<f32> = (0..301).map(|x| w.col(x)).collect();
            let map = WaterMap { rows: &rows, cols: &cols };
            for y in 0..300 {
                for x in 0..301 {
                    let (a, b) = (map.source(x, y), dali_point(&w, x, y));
                    assert_eq!((a.0.to_bits(), a.1.to_bits()), (b.0.to_bits(), b.1.to_bits()), "{w:?} ({x}, {y})");
                }
            }
        }
    }

    #[test]
    fn default_waves_have_a_128_pixel_period() {
        let w = Wave { ampl_x: 10.0, ampl_y: 10.0, freq_x: FREQ as f32, freq_y: FREQ as f32, phase_x: 0.0, phase_y: 0.0 };
        assert_eq!(FREQ as f32, 0.049_087_387);
        assert_eq!((w.row(0), w.col(0)), (0.0, 10.0));
        assert!((w.row(32) - 10.0).abs() < 1e-5 && (w.col(64) + 10.0).abs() < 1e-5);
        assert!(w.row(64).abs() < 1e-5 && w.row(128).abs() < 1e-5);
    }

    /// DALI's cpu operator calls the C library's `sinf` / `cosf`. Rust's `f32::sin` / `cos`
    /// lower to calls of those same functions on this target (std links the system libm;
    /// compiler-builtins provides no `sinf` here), which is what makes the tables DALI's
    /// bits. Should Rust ever compute them itself, this fails, and water's DALI parity with it.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn f32_sin_and_cos_are_the_c_librarys() {
        extern "C" {
            fn sinf(x: f32) -> f32;
            fn cosf(x: f32) -> f32;
        }
        // Arguments of every magnitude water meets, and some it does not.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut args: Vec<f32> = (0..20_000).map(|k| k as f32 * 0.049_087_387 + 0.2).collect();
        args.extend((0..20_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f32::from_bits((state >> 32) as u32 & 0x4fff_ffff | ((state as u32) & 0x8000_0000))
        }));
        for &a in &args {
            // SAFETY: pure C functions of one float.
            let (s, c) = unsafe { (sinf(a), cosf(a)) };
            assert!(a.sin().to_bits() == s.to_bits() || (s.is_nan() && a.sin().is_nan()), "sin({a:e})");
            assert!(a.cos().to_bits() == c.to_bits() || (c.is_nan() && a.cos().is_nan()), "cos({a:e})");
        }
    }
}
