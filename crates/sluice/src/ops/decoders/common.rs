//! What every image decoder shares, cpu and mixed: the decode arguments and their
//! parameters, headers, where a window goes and at which DCT scale it is decoded. The leaf
//! of `decoders/`: it imports nothing else of it.

use rayon::prelude::*;
use sluice_codecs::{read_info, ColorSpace, DecodeParams, ImageInfo, Roi};

use crate::error::{Error, Result};
use crate::ops::{arg, removed_arg, ArgDefault as D, ArgSchema, ArgType as T, OpContext, Workspace};
use crate::tensor::{DType, TensorList};

/// `types.DALIImageType` id -> codec colour space.
pub(crate) fn color_space(op: &str, id: i64) -> Result<ColorSpace> {
    Ok(match id {
        0 => ColorSpace::Rgb,
        1 => ColorSpace::Bgr,
        2 => ColorSpace::Gray,
        3 => ColorSpace::YCbCr,
        4 => ColorSpace::AnyData,
        _ => return Err(Error::arg(op, "output_type", format!("unknown image type {id}; use types.RGB, BGR, GRAY, YCbCr or ANY_DATA"))),
    })
}

/// Arguments that only tune the GPU (mixed) decoder; the cpu backend accepts and ignores
/// them so that one pipeline definition serves both devices, as in DALI.
pub(crate) const MIXED_ONLY_ARGS: &[ArgSchema] = &[
    arg("affine", T::Bool, D::Bool(true), "mixed only: pin the decoder's host threads to cores."),
    arg("device_memory_padding", T::Int, D::Int(16 << 20), "mixed only: extra device memory per buffer to limit reallocations."),
    arg("device_memory_padding_jpeg2k", T::Int, D::Int(0), "mixed only: as device_memory_padding, for JPEG 2000."),
    arg("host_memory_padding", T::Int, D::Int(8 << 20), "mixed only: extra pinned host memory per buffer."),
    arg("host_memory_padding_jpeg2k", T::Int, D::Int(0), "mixed only: as host_memory_padding, for JPEG 2000."),
    arg(
        "hw_decoder_load",
        T::Float,
        D::Float(0.0),
        "mixed only: share of JPEGs sent to the hardware JPEG decoder. Default 0 (DALI: 0.65): Sluice's own GPU \
         entropy decoder is faster than the engine (H200: 36,100 vs 27,000 img/s on rn50-crop).",
    ),
    // DALI's default is 1,000,000; off here, as measured slower (see gpu_huffman.rs).
    arg("hybrid_huffman_threshold", T::Int, D::Int(i64::MAX), "mixed only: pixel count above which JPEGs the hardware decoder leaves over are decoded by nvJPEG's GPU-Huffman decoder instead of Sluice's own GPU entropy decoder (or the CPU). Off by default (DALI: 1000000): on an H200 with 16 cores it was slower than both."),
    arg("jpeg_fancy_upsampling", T::Bool, D::Bool(false), "mixed only: upsample chroma as the cpu decoder does."),
    arg("preallocate_width_hint", T::Int, D::Int(0), "mixed only: expected maximum width, to preallocate."),
    arg("preallocate_height_hint", T::Int, D::Int(0), "mixed only: expected maximum height, to preallocate."),
    removed_arg("split_stages", T::Bool),
    removed_arg("use_chunk_allocator", T::Bool),
    removed_arg("memory_stats", T::Bool),
    arg("cache_size", T::Int, D::Int(0), "mixed only: decoded-image cache size in MB."),
    arg("cache_threshold", T::Int, D::Int(0), "mixed only: minimum image size to cache."),
    arg("cache_type", T::Str, D::Str(""), "mixed only: cache policy."),
    arg("cache_debug", T::Bool, D::Bool(false), "mixed only: cache diagnostics."),
    arg("cache_batch_copy", T::Bool, D::Bool(true), "mixed only: copy cached images in one batch."),
];

/// The arguments every ROI decoder shares with `decoders.image`.
pub(crate) const DECODE_ARGS: &[ArgSchema] = &[
    arg("output_type", T::ImageType, D::Int(0), "Color space of the output: RGB, BGR, GRAY, YCbCr or ANY_DATA (the stored channels)."),
    arg("dtype", T::DType, D::Int(0), "Output type: UINT8, or FLOAT (values scaled to [0, 1])."),
    arg("adjust_orientation", T::Bool, D::Bool(true), "Apply the EXIF orientation of JPEG files; the window is in oriented coordinates."),
    arg("use_fast_idct", T::Bool, D::Bool(false), "Use libjpeg-turbo's faster, less accurate integer IDCT."),
];

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

/// Reads every sample's header: the output shapes, so the batch can be allocated once
/// before any pixel is decoded. In parallel on the workers for the cpu decoders; on this
/// thread (`parallel` false) for the mixed ones, whose workers are busy with CPU shares in
/// the background: a header costs microseconds, while a parallel step would wait for
/// workers to finish their current image.
pub(crate) fn read_headers(ctx: &OpContext, ws: &Workspace<'_>, input: &TensorList, parallel: bool) -> Result<Vec<ImageInfo>> {
    let infos = read_infos(ctx, ws, input, parallel)?;
    check_batch_size(ctx, ws, input, &infos)?;
    Ok(infos)
}

/// Every sample's header, without the limit on the bytes the batch decodes to (for
/// `peek_image_shape`, which decodes nothing).
pub(crate) fn read_infos(ctx: &OpContext, ws: &Workspace<'_>, input: &TensorList, parallel: bool) -> Result<Vec<ImageInfo>> {
    if input.dtype() != DType::U8 || input.ndim() != 1 {
        return Err(Error::TypeMismatch {
            operator: ctx.display_name.clone(),
            message: format!(
                "input must be encoded bytes (1-D UINT8 samples, e.g. from readers.file); got {}-D {}",
                input.ndim(),
                input.dtype()
            ),
        });
    }
    let header = |i: usize| {
        let bytes = input.bytes(i);
        if bytes.is_empty() {
            return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), "empty input: no encoded data"));
        }
        read_info(bytes).map_err(|e| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), e.to_string()))
    };
    let infos: Vec<ImageInfo> = if parallel {
        let infos: Vec<Result<ImageInfo>> = ws.pool.install(|| (0..input.len()).into_par_iter().map(header).collect());
        infos.into_iter().collect::<Result<_>>()?
    } else {
        (0..input.len()).map(header).collect::<Result<_>>()?
    };
    Ok(infos)
}

/// Bytes the images of one batch may declare in all (width x height x channels, summed),
/// unless `SLUICE_MAX_BATCH_DECODED_BYTES` says otherwise. Each image is held to
/// `sluice_codecs::MAX_OUTPUT_BYTES` (2 GiB) on its own; this holds a batch of small files
/// that each declare a huge image (a few hundred bytes of WebP may declare 16k x 16k pixels)
/// from taking all memory at once.
pub const MAX_BATCH_DECODED_BYTES: u64 = 32 << 30;

pub(crate) fn max_batch_decoded_bytes() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("SLUICE_MAX_BATCH_DECODED_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(MAX_BATCH_DECODED_BYTES)
    })
}

/// When the per-sample `bytes` of a batch sum past [`max_batch_decoded_bytes`]: the place
/// of the (first) largest sample, the total and the limit. The sample to fail, so that under
/// `on_error="skip"` the one that matters most gives way.
pub(crate) fn over_batch_limit(bytes: &[u64]) -> Option<(usize, u64, u64)> {
    let total: u64 = bytes.iter().sum();
    let limit = max_batch_decoded_bytes();
    let largest = (0..bytes.len()).fold(0, |best, k| if bytes[k] > bytes[best] { k } else { best });
    (total > limit).then_some((largest, total, limit))
}

/// GiB, for messages.
pub(crate) fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// Fails the batch's largest image when the images declare more than the batch limit.
fn check_batch_size(ctx: &OpContext, ws: &Workspace<'_>, input: &TensorList, infos: &[ImageInfo]) -> Result<()> {
    let bytes: Vec<u64> = infos.iter().map(|i| (i.width as u64) * (i.height as u64) * (i.channels.max(1) as u64)).collect();
    let Some((largest, total, limit)) = over_batch_limit(&bytes) else { return Ok(()) };
    let info = &infos[largest];
    Err(Error::data(
        ctx.at(ws.iteration, largest, input.source_info(largest)),
        format!(
            "the batch's images declare {:.1} GiB decoded, more than the {:.1} GiB a batch may take \
             (SLUICE_MAX_BATCH_DECODED_BYTES); the largest is this one, {} x {} with {} channel(s)",
            gib(total), gib(limit), info.width, info.height, info.channels
        ),
    ))
}

/// Decodes sample `i` of `input` into its output slot `dst` with `params`: UINT8 as decoded,
/// FLOAT scaled to [0, 1]. A FLOAT sample is decoded into the last quarter of its storage and
/// widened front to back: element k is read before anything overwrites it, so no scratch
/// buffer is needed. A failure names the sample.
pub(crate) fn decode_sample(ctx: &OpContext, ws: &Workspace<'_>, input: &TensorList, i: usize, info: &ImageInfo, params: &DecodeParams, dtype: DType, dst: &mut [u8]) -> Result<()> {
    let failed = |e: sluice_codecs::CodecError| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), e.to_string());
    if dtype != DType::F32 {
        return sluice_codecs::decode_into(input.bytes(i), info, params, dst).map_err(failed);
    }
    let n = dst.len() / 4;
    sluice_codecs::decode_into(input.bytes(i), info, params, &mut dst[3 * n..]).map_err(failed)?;
    for k in 0..n {
        let v = dst[3 * n + k] as f32 * (1.0 / 255.0);
        dst[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
    }
    Ok(())
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

/// The graph's `_downscale_to` hint (see `graph::fuse_random_crop_decode_with_resize`).
pub(crate) fn downscale_hint(ctx: &OpContext) -> Option<[usize; 2]> {
    ctx.args.has("_downscale_to").then(|| {
        let t = ctx.args.ints("_downscale_to");
        [t[0].max(1) as usize, t[1].max(1) as usize]
    })
}

