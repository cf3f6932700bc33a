//! `decoders.image_crop` (legacy `ImageDecoderCrop`): decodes only a crop window of each
//! image. The window is placed as DALI 2.4 places it (`crop` / `crop_h` / `crop_w` sizes
//! truncated to integers, anchor `round(pos * (extent - crop))`, or
//! truncated with `rounding="truncate"`; see [`anchor_with_rounding`]); a window that leaves the image is an error, as in
//! DALI. JPEGs decode only the window's rows and columns (libjpeg-turbo cropping); other
//! formats decode fully inside the codec and are cropped there. The output equals
//! `crop(decode(x))` bit for bit.
//!
//! This file also holds the ROI-decoding core shared by `image_slice` and
//! `image_random_crop`: [`decode_windows`].

use std::sync::Arc;

use sluice_codecs::{DecodeParams, ImageInfo, Roi};
use sluice_cuda::GpuDevice;

use super::image::read_headers;
use super::image_mixed::MixedDecoder;
use super::{color_space, MIXED_ONLY_ARGS};
use crate::error::{Error, Location, Result};
use crate::ops::crop::window::{anchor_with_rounding, crop_size};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

/// The arguments every ROI decoder shares with `decoders.image`.
pub(crate) const DECODE_ARGS: &[ArgSchema] = &[
    arg("output_type", T::ImageType, D::Int(0), "Color space of the output: RGB, BGR, GRAY, YCbCr or ANY_DATA (the stored channels)."),
    arg("dtype", T::DType, D::Int(0), "Output type: UINT8, or FLOAT (values scaled to [0, 1])."),
    arg("adjust_orientation", T::Bool, D::Bool(true), "Apply the EXIF orientation of JPEG files; the window is in oriented coordinates."),
    arg("use_fast_idct", T::Bool, D::Bool(false), "Use libjpeg-turbo's faster, less accurate integer IDCT."),
];

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

/// Decode parameters and output type of a ROI decoder, from the shared arguments.
pub(crate) fn decode_setup(ctx: &OpContext) -> Result<(DecodeParams, DType)> {
    let op = &ctx.display_name;
    let color = color_space(op, ctx.args.int("output_type"))?;
    let dtype = ctx.args.dtype("dtype");
    if !matches!(dtype, DType::U8 | DType::F32) {
        return Err(Error::arg(op, "dtype", format!("{dtype} is not supported; use UINT8 or FLOAT")));
    }
    let params = DecodeParams {
        color,
        adjust_orientation: ctx.args.bool("adjust_orientation"),
        fast_idct: ctx.args.bool("use_fast_idct"),
        ..DecodeParams::default()
    };
    Ok((params, dtype))
}

/// Reads every header (in parallel when `parallel`, see `read_headers`) and places every
/// sample's window with
/// `window(i, info, (height, width))`, `(height, width)` being the full oriented image size;
/// a window outside its image is an error naming the sample. Shared by the cpu and mixed
/// ROI decoders, so both decode the same windows.
pub(crate) fn plan_windows<F>(ctx: &OpContext, ws: &Workspace<'_>, params: &DecodeParams, parallel: bool, window: F) -> Result<(Vec<ImageInfo>, Vec<Roi>)>
where
    F: Fn(usize, &ImageInfo, (usize, usize)) -> Result<Roi>,
{
    let input = ws.inputs[0];
    let infos = read_headers(ctx, ws, input, parallel)?;
    let mut rois = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        let (h, w, _) = info.output_shape(params);
        let r = window(i, info, (h, w))?;
        if r.width == 0 || r.height == 0 || r.x + r.width > w || r.y + r.height > h {
            return Err(Error::data(
                ctx.at(ws.iteration, i, input.source_info(i)),
                format!("window {}x{} at (x {}, y {}) does not fit the {w}x{h} image", r.width, r.height, r.x, r.y),
            ));
        }
        rois.push(r);
    }
    Ok((infos, rois))
}

/// Decodes the window `window(i, info, (height, width))` of every sample (see
/// [`plan_windows`]). The batch is allocated once, and every sample decodes only its window
/// straight into its output slot.
///
/// With `downscale_to = Some([h, w])` (set by the graph when a fixed-size resize follows),
/// a JPEG window at least 2, 4 or 8 times larger than that in both dimensions is decoded at
/// 1/2, 1/4 or 1/8 scale in the DCT domain (libjpeg-turbo): far less work, and the resize
/// that follows starts from an image still at least as large as its output.
pub(crate) fn decode_windows<F>(
    ctx: &OpContext,
    ws: &Workspace<'_>,
    params: &DecodeParams,
    dtype: DType,
    downscale_to: Option<[usize; 2]>,
    window: F,
) -> Result<TensorList>
where
    F: Fn(usize, &ImageInfo, (usize, usize)) -> Result<Roi>,
{
    let input = ws.inputs[0];
    let (infos, windows) = plan_windows(ctx, ws, params, true, window)?;
    let mut rois = Vec::with_capacity(infos.len());
    let mut denoms = Vec::with_capacity(infos.len());
    let mut shapes = Vec::with_capacity(infos.len());
    for (info, &r) in infos.iter().zip(&windows) {
        let (r, d) = scaled_window(info, params, r, downscale_to);
        rois.push(r);
        denoms.push(d);
        shapes.push([r.height, r.width, info.output_channels(params.color)]);
    }
    // Every pixel is decoded into place; a failed sample fails the whole batch.
    let mut out = TensorList::for_overwrite(BatchMeta::new(dtype, 3, shapes.iter().map(|s| &s[..])));
    out.set_layout("HWC".into());
    out.inherit_source_info(input);
    let to_float = dtype == DType::F32;
    crate::ops::for_each_sample(ws.pool, &mut out, |i, dst| {
        let at = || ctx.at(ws.iteration, i, input.source_info(i));
        let p = DecodeParams { roi: Some(rois[i]), scale_denom: denoms[i], ..*params };
        if to_float {
            // Decode into the last quarter of the float storage, then widen front to back.
            let n = dst.len() / 4;
            sluice_codecs::decode_into(input.bytes(i), &infos[i], &p, &mut dst[3 * n..]).map_err(|e| Error::data(at(), e.to_string()))?;
            for k in 0..n {
                let v = dst[3 * n + k] as f32 * (1.0 / 255.0);
                dst[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
            }
            Ok(())
        } else {
            sluice_codecs::decode_into(input.bytes(i), &infos[i], &p, dst).map_err(|e| Error::data(at(), e.to_string()))
        }
    })?;
    Ok(out)
}

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
        let truncate = match ctx.args.str("rounding") {
            "round" => false,
            "truncate" => true,
            s => return Err(Error::arg(op, "rounding", format!("must be \"round\" or \"truncate\", got \"{s}\""))),
        };
        Ok(CropWindow { crop, truncate })
    }
}

/// The window to decode and its DCT scale denominator: with a `downscale_to` hint, the
/// largest DCT scale (1/8, 1/4, 1/2) that keeps JPEG window `r` at least that large, and the
/// window in the scaled image's coordinates (edges rounded outwards); else `(r, 1)`.
pub(crate) fn scaled_window(info: &ImageInfo, params: &DecodeParams, r: Roi, downscale_to: Option<[usize; 2]>) -> (Roi, u32) {
    let Some(target) = downscale_to.filter(|_| info.format == sluice_codecs::ImageFormat::Jpeg) else { return (r, 1) };
    for d in [8u32, 4, 2] {
        let du = d as usize;
        if r.height / du >= target[0] && r.width / du >= target[1] {
            let (sh, sw, _) = info.output_shape(&DecodeParams { scale_denom: d, roi: None, ..*params });
            let (y0, x0) = (r.y / du, r.x / du);
            let (y1, x1) = ((r.y + r.height).div_ceil(du).min(sh), (r.x + r.width).div_ceil(du).min(sw));
            return (Roi { x: x0, y: y0, width: x1 - x0, height: y1 - y0 }, d);
        }
    }
    (r, 1)
}

/// Where a ROI decoder's window goes in each sample: the one thing `image_crop`,
/// `image_slice` and `image_random_crop` differ in. Shared by their cpu and mixed backends,
/// so both cut the same windows.
pub(crate) trait PlaceWindow: Send + 'static {
    /// The window of sample `i`, whose oriented image is `(height, width)`.
    fn place(&self, ctx: &OpContext, ws: &Workspace<'_>, i: usize, hw: (usize, usize)) -> Result<Roi>;
}

/// The cpu backend of a ROI decoder.
pub(crate) struct WindowDecoderCpu<P> {
    ctx: OpContext,
    params: DecodeParams,
    dtype: DType,
    place: P,
    downscale_to: Option<[usize; 2]>,
}

impl<P: PlaceWindow> WindowDecoderCpu<P> {
    pub(crate) fn new(ctx: &OpContext, place: P) -> Result<WindowDecoderCpu<P>> {
        let (params, dtype) = decode_setup(ctx)?;
        Ok(WindowDecoderCpu { ctx: ctx.clone(), params, dtype, place, downscale_to: downscale_hint(ctx) })
    }
}

impl<P: PlaceWindow> Operator for WindowDecoderCpu<P> {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let out = decode_windows(ctx, ws, &self.params, self.dtype, self.downscale_to, |i, _, hw| self.place.place(ctx, ws, i, hw))?;
        Ok(vec![out])
    }
}

/// The mixed backend of a ROI decoder.
pub(crate) struct WindowDecoderMixed<P> {
    dec: MixedDecoder,
    place: P,
    downscale_to: Option<[usize; 2]>,
}

impl<P: PlaceWindow> WindowDecoderMixed<P> {
    pub(crate) fn new(ctx: &OpContext, dev: &Arc<GpuDevice>, place: P) -> Result<WindowDecoderMixed<P>> {
        decode_setup(ctx)?;
        Ok(WindowDecoderMixed { dec: MixedDecoder::new(ctx, dev)?, place, downscale_to: downscale_hint(ctx) })
    }
}

impl<P: PlaceWindow> GpuOperator for WindowDecoderMixed<P> {
    fn starts_early(&self) -> bool {
        true
    }

    fn start(&mut self, ws: &GpuWorkspace<'_>) -> Result<()> {
        let ctx = self.dec.ctx();
        let host = ws.host_view();
        let t = std::time::Instant::now();
        let (infos, windows) = plan_windows(ctx, &host, self.dec.params(), false, |i, _, hw| self.place.place(ctx, &host, i, hw))?;
        super::image_mixed::trace_headers(ctx, ws.iteration, t);
        self.dec.begin(ws, infos, Some(&windows), self.downscale_to)
    }

    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        if !self.dec.started(ws.iteration) {
            self.start(ws)?;
        }
        Ok(vec![self.dec.finish(ws)?])
    }
}

/// The graph's `_downscale_to` hint (see `graph::fuse_random_crop_decode_with_resize`).
fn downscale_hint(ctx: &OpContext) -> Option<[usize; 2]> {
    ctx.args.has("_downscale_to").then(|| {
        let t = ctx.args.ints("_downscale_to");
        [t[0].max(1) as usize, t[1].max(1) as usize]
    })
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
