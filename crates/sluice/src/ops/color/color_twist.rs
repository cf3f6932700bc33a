//! `fn.hsv`, `fn.hue`, `fn.saturation`, `fn.color_twist`: DALI's linear approximation of
//! hue, saturation, value, brightness and contrast changes. The RGB pixel is taken to YIQ,
//! rotated about the Y (grey) axis by `hue` degrees, its chroma scaled by `saturation`, the
//! whole scaled by `value`, taken back to RGB and scaled by `brightness * contrast`:
//!
//! ```text
//! M = B * C * YIQ->RGB * Hue(hue) * Sat(saturation) * V * RGB->YIQ
//! offset = (half_range - half_range * contrast) * brightness
//! ```
//!
//! with `half_range` 0.5 for floating-point inputs and 128 for integer ones (DALI's, INT16
//! and INT32 included). Everything is f32 and in DALI's order: the products left to right,
//! each element a dot product summed left to right, YIQ->RGB by Gauss-Jordan elimination
//! with fused multiply-adds (DALI's `inverse`), the hue angle rounded to f32 before its
//! cosine and sine. So the matrices, and the pixels, are DALI's bit for bit.

use super::{float_arg, Color, Kind, Transform};
use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::DType;

type Mat3 = [[f32; 3]; 3];

const HUE_ARG: ArgSchema = tensor_arg("hue", T::Float, D::Float(0.0), "Hue change, in degrees (an additive delta; values outside 0-360 wrap around).").per_frame();
const SATURATION_ARG: ArgSchema = tensor_arg("saturation", T::Float, D::Float(1.0), "The saturation multiplier: 0 is a completely desaturated image, 1 no change. Must not be negative.").per_frame();
const IMAGE_TYPE_ARG: ArgSchema = arg("image_type", T::ImageType, D::Int(0), "The color space of the input and the output image (accepted for compatibility: the transform is the same).");
const DTYPE_ARG: ArgSchema = arg("dtype", T::DType, D::Optional, "Output data type. If not set, the input type is used.");

const fn schema(name: &'static str, doc: &'static str, args: &'static [&'static [ArgSchema]]) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args,
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.hsv`.
pub static HSV: OpDef = OpDef {
    schema: schema(
        "Hsv",
        "Adjusts hue, saturation and value (brightness) of RGB images. `hue` is an additive delta in degrees; `saturation` and `value` are multipliers. For performance the operation is approximated by a linear transform in RGB space: the colour vector is projected along the neutral (grey) axis, rotated by the hue delta, scaled by the value and saturation multipliers and restored to the original colour space.",
        &[&[
            HUE_ARG,
            SATURATION_ARG,
            tensor_arg("value", T::Float, D::Float(1.0), "The value multiplier.").per_frame(),
            arg("dtype", T::DType, D::Int(DType::U8 as i64), "The output data type (UINT8 unless set, as in DALI)."),
        ]],
    ),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::Hsv)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::Hsv)?)))),
};

/// `fn.hue`.
pub static HUE: OpDef = OpDef {
    schema: schema("Hue", "Changes the hue level of the image.", &[&[HUE_ARG, IMAGE_TYPE_ARG, DTYPE_ARG]]),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::ColorTwist)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::ColorTwist)?)))),
};

/// `fn.saturation`.
pub static SATURATION: OpDef = OpDef {
    schema: schema("Saturation", "Changes the saturation level of the image.", &[&[SATURATION_ARG, IMAGE_TYPE_ARG, DTYPE_ARG]]),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::ColorTwist)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::ColorTwist)?)))),
};

/// `fn.color_twist`.
pub static COLOR_TWIST: OpDef = OpDef {
    schema: schema(
        "ColorTwist",
        "Adjusts hue, saturation, brightness and contrast of the image.",
        &[&[
            HUE_ARG,
            SATURATION_ARG,
            tensor_arg("contrast", T::Float, D::Float(1.0), "Contrast change factor: 0 is a uniform grey image, 1 no change.").per_frame(),
            tensor_arg("brightness", T::Float, D::Float(1.0), "Brightness change factor: 0 is a black image, 1 no change, 2 twice as bright.").per_frame(),
            IMAGE_TYPE_ARG,
            DTYPE_ARG,
        ]],
    ),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::ColorTwist)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::ColorTwist)?)))),
};

const RGB_TO_YIQ: Mat3 = [[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]];

/// Sample `i`'s map (arguments this schema lacks take their defaults).
pub(super) fn transform(ctx: &OpContext, ws: &Workspace<'_>, i: usize, in_type: DType) -> Result<Transform> {
    let hue = float_arg(ctx, ws, "hue", i, 0.0)?;
    let saturation = float_arg(ctx, ws, "saturation", i, 1.0)?;
    let value = float_arg(ctx, ws, "value", i, 1.0)?;
    let brightness = float_arg(ctx, ws, "brightness", i, 1.0)?;
    let contrast = float_arg(ctx, ws, "contrast", i, 1.0)?;
    if saturation < 0.0 {
        return Err(Error::arg(&ctx.display_name, "saturation", format!("must not be negative; sample {i} has {saturation}")));
    }
    let half_range: f32 = if matches!(in_type, DType::F16 | DType::F32 | DType::F64) { 0.5 } else { 128.0 };
    Ok(Transform::Matrix { m: twist_matrix(hue, saturation, value, brightness, contrast), offset: (half_range - half_range * contrast) * brightness })
}

/// `B * C * YIQ->RGB * Hue * Sat * V * RGB->YIQ`, multiplied left to right.
pub fn twist_matrix(hue: f32, saturation: f32, value: f32, brightness: f32, contrast: f32) -> Mat3 {
    let factors = [diag(brightness), diag(contrast), yiq_to_rgb(), hue_matrix(hue), saturation_matrix(saturation), diag(value), RGB_TO_YIQ];
    factors[1..].iter().fold(factors[0], |acc, f| mul(&acc, f))
}

fn diag(v: f32) -> Mat3 {
    [[v, 0.0, 0.0], [0.0, v, 0.0], [0.0, 0.0, v]]
}

/// Rotation about the Y axis of YIQ by `hue` degrees: DALI's `const float h_rad = hue *
/// M_PI / 180`, worked out in f64 and stored as f32, then `cos`/`sin` of that f32 in f32.
fn hue_matrix(hue: f32) -> Mat3 {
    let rad = (hue as f64 * std::f64::consts::PI / 180.0) as f32;
    let (c, s) = (rad.cos(), rad.sin());
    [[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]]
}

fn saturation_matrix(s: f32) -> Mat3 {
    [[1.0, 0.0, 0.0], [0.0, s, 0.0], [0.0, 0.0, s]]
}

/// Each element a dot product of a row and a column, summed left to right.
fn mul(a: &Mat3, b: &Mat3) -> Mat3 {
    let mut r = [[0.0f32; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            r[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
    r
}

/// RGB->YIQ inverted as DALI's `inverse` does it (Gauss-Jordan with fused multiply-adds,
/// `ops::warp::gauss_jordan_inverse3`).
fn yiq_to_rgb() -> Mat3 {
    crate::ops::warp::gauss_jordan_inverse3(RGB_TO_YIQ).expect("RGB->YIQ is invertible")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_twist_is_almost_the_identity() {
        let m = twist_matrix(0.0, 1.0, 1.0, 1.0, 1.0);
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((m[i][j] - want).abs() < 1e-5, "{m:?}");
            }
        }
        let inv = mul(&yiq_to_rgb(), &RGB_TO_YIQ);
        assert!((inv[1][1] - 1.0).abs() < 1e-6);
    }
}
