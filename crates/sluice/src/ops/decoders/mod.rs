//! Image decoders: `decoders.image` on the cpu (libjpeg-turbo for JPEG, image-rs codecs for
//! PNG, BMP, TIFF, WebP, PNM). The mixed (nvJPEG) backend arrives with the CUDA runtime.

mod cpu_share;
mod gpu_huffman;
mod gpu_entropy;
mod gpu_idct;
mod image;
mod image_crop;
mod image_mixed;
mod image_random_crop;
mod image_slice;
pub mod random_crop_window;

pub use self::image::IMAGE;
pub use self::image_crop::IMAGE_CROP;
pub use self::image_random_crop::IMAGE_RANDOM_CROP;
pub use self::image_slice::IMAGE_SLICE;

use sluice_codecs::ColorSpace;

use crate::error::{Error, Result};

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
pub(crate) const MIXED_ONLY_ARGS: &[crate::ops::ArgSchema] = {
    use crate::ops::{arg, ArgDefault as D, ArgType as T};
    &[
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
        arg("split_stages", T::Bool, D::Bool(false), "Accepted for DALI compatibility; no effect."),
        arg("use_chunk_allocator", T::Bool, D::Bool(false), "Accepted for DALI compatibility; no effect."),
        arg("memory_stats", T::Bool, D::Bool(false), "Accepted for DALI compatibility; no effect."),
        arg("cache_size", T::Int, D::Int(0), "mixed only: decoded-image cache size in MB."),
        arg("cache_threshold", T::Int, D::Int(0), "mixed only: minimum image size to cache."),
        arg("cache_type", T::Str, D::Str(""), "mixed only: cache policy."),
        arg("cache_debug", T::Bool, D::Bool(false), "mixed only: cache diagnostics."),
        arg("cache_batch_copy", T::Bool, D::Bool(true), "mixed only: copy cached images in one batch."),
    ]
};
