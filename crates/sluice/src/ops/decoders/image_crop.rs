//! `decoders.image_crop` (legacy `ImageDecoderCrop`): decodes only a crop window of each
//! image. The window is placed as DALI 2.4 places it (`crop` / `crop_h` / `crop_w` sizes
//! truncated to integers, anchor `round(pos * (extent - crop))`, or
//! truncated with `rounding="truncate"`; see [`anchor_with_rounding`]); a window that leaves the image is an error, as in
//! DALI. JPEGs decode only the window's rows and columns (libjpeg-turbo cropping); other
//! formats decode fully inside the codec and are cropped there. The output equals
//! `crop(decode(x))` bit for bit.

use sluice_codecs::Roi;

use super::common::{PlaceWindow, DECODE_ARGS, MIXED_ONLY_ARGS};
use super::window::{WindowDecoderCpu, WindowDecoderMixed};
use crate::error::{Error, Location, Result};
use crate::ops::crop::window::{anchor_with_rounding, crop_size, truncates};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};

/// Crop-window arguments of `decoders.image_crop` (DALI's CropAttr; no padding policy).
const IMAGE_CROP_ARGS: &[ArgSchema] = &[
    arg("crop", T::FloatList, D::Optional, "Crop window shape [H, W] in pixels; non-integer sizes are truncated."),
    tensor_arg("crop_h", T::Float, D::Optional, "Crop window height in pixels (given together with crop_w)."),
    tensor_arg("crop_w", T::Float, D::Optional, "Crop window width in pixels (given together with crop_h)."),
    tensor_arg("crop_d", T::Float, D::Optional, "Accepted for DALI compatibility; images have no depth, so it must not be given."),
    tensor_arg("crop_pos_x", T::Float, D::Float(0.5), "Normalized (0.0 - 1.0) horizontal position of the crop window."),
    tensor_arg("crop_pos_y", T::Float, D::Float(0.5), "Normalized (0.0 - 1.0) vertical position of the crop window."),
    tensor_arg("crop_pos_z", T::Float, D::Float(0.5), "Accepted for DALI compatibility; no effect on images."),
    arg("rounding", T::Str, D::Str("round"), "How the window's start becomes an integer: \"round\" (half away from zero) or \"truncate\"."),
];

/// Schema and backends.
pub static IMAGE_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__ImageCrop",
        doc: "Decodes images and crops them to a window: only the window is decoded where the format allows (JPEG). The window is given by crop (or crop_h/crop_w) and crop_pos_x/crop_pos_y as in fn.crop; it must lie inside the (oriented) image.",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[DECODE_ARGS, IMAGE_CROP_ARGS, MIXED_ONLY_ARGS],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoderCrop", None)],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(WindowDecoderCpu::new(ctx, CropWindow::new(ctx)?)?))),
    mixed: Some(|ctx, dev| Ok(Box::new(WindowDecoderMixed::new(ctx, dev, CropWindow::new(ctx)?)?))),
    gpu: None,
};

/// `image_crop`'s window: fixed size, placed at crop_pos_x / crop_pos_y.
struct CropWindow {
    crop: Option<[f64; 2]>,
    truncate: bool,
}

impl CropWindow {
    fn new(ctx: &OpContext) -> Result<CropWindow> {
        let op = &ctx.display_name;
        let crop = if ctx.args.has("crop") {
            let c = ctx.args.floats("crop");
            if c.len() != 2 {
                return Err(Error::arg(op, "crop", format!("must be [H, W] for images, got {c:?}")));
            }
            Some([c[0], c[1]])
        } else {
            None
        };
        let given = |n: &str| ctx.args.has(n) || ctx.arg_input_names.iter().any(|a| a == n);
        if given("crop_d") {
            return Err(Error::arg(op, "crop_d", "images have no depth dimension; give crop or crop_h/crop_w"));
        }
        if crop.is_some() && (given("crop_h") || given("crop_w")) {
            return Err(Error::arg(op, "crop", "give either crop or crop_h/crop_w, not both"));
        }
        if crop.is_none() && (given("crop_h") != given("crop_w")) {
            return Err(Error::arg(op, if given("crop_h") { "crop_w" } else { "crop_h" }, "crop_h and crop_w must be given together"));
        }
        if crop.is_none() && !given("crop_h") {
            return Err(Error::arg(op, "crop", "no crop window: give crop=[H, W] or crop_h and crop_w"));
        }
        let truncate = truncates(op, ctx.args.str("rounding"))?;
        Ok(CropWindow { crop, truncate })
    }
}

impl PlaceWindow for CropWindow {
    fn place(&self, ctx: &OpContext, ws: &Workspace<'_>, i: usize, (h, w): (usize, usize)) -> Result<Roi> {
        let op = ctx.display_name.as_str();
        let input = ws.inputs[0];
        let (ph, pw) = (ws.per_sample(ctx, "crop_h"), ws.per_sample(ctx, "crop_w"));
        let (px, py) = (ws.per_sample(ctx, "crop_pos_x"), ws.per_sample(ctx, "crop_pos_y"));
        {
            let at = || -> Location { ctx.at(ws.iteration, i, input.source_info(i)) };
            let in_sample = |name: &str, e: Error| match e {
                Error::InvalidArgument { message, .. } => Error::data(at(), format!("argument '{name}': {message}")),
                e => e,
            };
            let (ch, cw) = match self.crop {
                Some([a, b]) => (("crop", a), ("crop", b)),
                None => (("crop_h", ph.get(op, i)?.unwrap_or(0.0)), ("crop_w", pw.get(op, i)?.unwrap_or(0.0))),
            };
            let sh = crop_size(op, ch.0, ch.1).map_err(|e| in_sample(ch.0, e))?;
            let sw = crop_size(op, cw.0, cw.1).map_err(|e| in_sample(cw.0, e))?;
            let pos = |p: &crate::ops::PerSample, name: &str| -> Result<f64> {
                let v = p.get(op, i)?.unwrap_or(0.5);
                if !(0.0..=1.0).contains(&v) {
                    return Err(Error::data(at(), format!("argument '{name}' must be in [0, 1], got {v}")));
                }
                Ok(v)
            };
            let y = anchor_with_rounding(h, sh, pos(&py, "crop_pos_y")?, self.truncate);
            let x = anchor_with_rounding(w, sw, pos(&px, "crop_pos_x")?, self.truncate);
            if y < 0 || x < 0 || y as usize + sh > h || x as usize + sw > w {
                return Err(Error::data(
                    at(),
                    format!(
                        "crop window (argument '{}' = [{sh}, {sw}], anchor y {y} x {x}) does not fit the {h}x{w} (HxW) image",
                        if self.crop.is_some() { "crop" } else { "crop_h/crop_w" }
                    ),
                ));
            }
            Ok(Roi { x: x as usize, y: y as usize, width: sw, height: sh })
        }
    }
}
