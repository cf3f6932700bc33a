//! `fn.brightness`, `fn.contrast`, `fn.brightness_contrast`: DALI's one formula,
//!
//! ```text
//! out = brightness_shift * output_range + brightness * (contrast_center + contrast * (in - contrast_center))
//! ```
//!
//! rearranged, as DALI does in f32, into `in * mul + add` with `mul = brightness * contrast`
//! and `add = brightness_shift * output_range + brightness * (contrast_center - contrast *
//! contrast_center)`. `output_range` is the output type's maximum (1 for FLOAT);
//! `contrast_center` defaults to half the input type's positive range (128 for UINT8, 16384
//! for INT16, 2^30 for INT32, 0.5 for FLOAT).

use super::{float_arg, Color, Kind, Transform};
use crate::error::Result;
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::DType;

const BRIGHTNESS_ARGS: &[ArgSchema] = &[
    tensor_arg("brightness", T::Float, D::Float(1.0), "Brightness multiplier.").per_frame(),
    tensor_arg("brightness_shift", T::Float, D::Float(0.0), "The brightness shift. For signed types, 1.0 represents the maximum positive value that can be represented by the type.").per_frame(),
];
const CONTRAST_ARGS: &[ArgSchema] = &[
    tensor_arg("contrast", T::Float, D::Float(1.0), "The contrast multiplier, where 0.0 produces the uniform grey.").per_frame(),
    tensor_arg("contrast_center", T::Float, D::Optional, "The intensity level that is unaffected by contrast: the value all pixels take when the contrast is zero. When not set, half of the input type's positive range (or 0.5 for FLOAT) is used.").per_frame(),
];
const DTYPE_ARGS: &[ArgSchema] = &[arg("dtype", T::DType, D::Optional, "Output data type. If not set, the input type is used.")];

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

/// `fn.brightness`.
pub static BRIGHTNESS: OpDef = OpDef {
    schema: schema(
        "Brightness",
        "Adjusts the brightness of the images: out = brightness_shift * output_range + brightness * in, where output_range is 1 for float outputs or the maximum positive value for integral types. This operator can also change the type of data.",
        &[BRIGHTNESS_ARGS, DTYPE_ARGS],
    ),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::BrightnessContrast)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::BrightnessContrast)?)))),
};

/// `fn.contrast`.
pub static CONTRAST: OpDef = OpDef {
    schema: schema(
        "Contrast",
        "Adjusts the contrast of the images: out = contrast_center + contrast * (in - contrast_center). This operator can also change the type of data.",
        &[CONTRAST_ARGS, DTYPE_ARGS],
    ),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::BrightnessContrast)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::BrightnessContrast)?)))),
};

/// `fn.brightness_contrast`.
pub static BRIGHTNESS_CONTRAST: OpDef = OpDef {
    schema: schema(
        "BrightnessContrast",
        "Adjusts the brightness and contrast of the images: out = brightness_shift * output_range + brightness * (contrast_center + contrast * (in - contrast_center)), where output_range is 1 for float outputs or the maximum positive value for integral types. This operator can also change the type of data.",
        &[BRIGHTNESS_ARGS, CONTRAST_ARGS, DTYPE_ARGS],
    ),
    cpu: Some(|ctx| Ok(Box::new(Color::new(ctx, Kind::BrightnessContrast)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::gpu::ColorGpu::new(Color::new(ctx, Kind::BrightnessContrast)?)))),
};

/// DALI's `FullRange<Out>`: what a `brightness_shift` of 1 adds.
fn full_range(t: DType) -> f32 {
    match t {
        DType::U8 => 255.0,
        DType::I16 => 32767.0,
        DType::I32 => i32::MAX as f32,
        _ => 1.0,
    }
}

/// DALI's `HalfRange<In>`: the default `contrast_center`.
fn half_range(t: DType) -> f32 {
    match t {
        DType::U8 => 128.0,
        DType::I16 => 16384.0,
        DType::I32 => 1_073_741_824.0,
        _ => 0.5,
    }
}

/// Sample `i`'s map (arguments this schema lacks take their defaults).
pub(super) fn transform(ctx: &OpContext, ws: &Workspace<'_>, i: usize, in_type: DType, out_type: DType) -> Result<Transform> {
    let brightness = float_arg(ctx, ws, "brightness", i, 1.0)?;
    let shift = float_arg(ctx, ws, "brightness_shift", i, 0.0)?;
    let contrast = float_arg(ctx, ws, "contrast", i, 1.0)?;
    let center = float_arg(ctx, ws, "contrast_center", i, half_range(in_type))?;
    let add = shift * full_range(out_type) + brightness * (center - contrast * center);
    Ok(Transform::Scale { mul: brightness * contrast, add })
}
