//! Image decoding for Sluice.
//!
//! JPEG goes through libjpeg-turbo (TurboJPEG 3 API) with its default accurate integer IDCT
//! and fancy upsampling, so pixels equal those of Pillow and NVIDIA DALI's CPU decoder bit for
//! bit. PNG, BMP, TIFF, WebP and PNM go through the `image` crate. Every decoder writes into a
//! caller-owned HWC `u8` buffer whose shape [`ImageInfo::output_shape`] predicts, so a data
//! loader can size its batch before decoding.
//!
//! Typical use:
//! ```no_run
//! # fn f(bytes: &[u8]) -> Result<(), sluice_codecs::CodecError> {
//! use sluice_codecs::{read_info, decode_into, DecodeParams};
//! let info = read_info(bytes)?;
//! let p = DecodeParams::default();
//! let (h, w, c) = info.output_shape(&p);
//! let mut out = vec![0u8; h * w * c];
//! decode_into(bytes, &info, &p, &mut out)?;
//! # Ok(()) }
//! ```

mod coefficients;
mod color;
mod encode;
mod exif;
mod jpeg;
mod other;
pub mod scan;
mod transform;

pub use coefficients::{coefficient_layout, read_coefficients, CoefComponent, CoefLayout};
pub use encode::{encode_jpeg, jpeg_round_trip};
pub use exif::Orientation;

/// Image container formats that can be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    Jpeg,
    Png,
    Bmp,
    Tiff,
    Webp,
    Pnm,
}

/// Identifies the format from the leading magic bytes; file names lie, headers rarely do.
pub fn sniff_format(bytes: &[u8]) -> Option<ImageFormat> {
    match bytes {
        [0xFF, 0xD8, 0xFF, ..] => Some(ImageFormat::Jpeg),
        [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, ..] => Some(ImageFormat::Png),
        [b'B', b'M', ..] => Some(ImageFormat::Bmp),
        [b'I', b'I', 42, 0, ..] | [b'M', b'M', 0, 42, ..] => Some(ImageFormat::Tiff),
        // BigTIFF: the `tiff` crate reads it too.
        [b'I', b'I', 43, 0, ..] | [b'M', b'M', 0, 43, ..] => Some(ImageFormat::Tiff),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some(ImageFormat::Webp),
        [b'P', b'1'..=b'7', ..] => Some(ImageFormat::Pnm),
        _ => None,
    }
}

/// Output colour space, mirroring DALI's `output_type` (`DALIImageType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ColorSpace {
    /// 3 channels, R G B.
    #[default]
    Rgb,
    /// 3 channels, B G R.
    Bgr,
    /// 1 channel. JPEG: libjpeg's own Y channel; other formats: BT.601 luma.
    Gray,
    /// 3 channels, BT.601 limited-range (studio swing: Y 16..235, Cb/Cr 16..240) Y Cb Cr
    /// computed from the RGB pixels, as DALI produces.
    YCbCr,
    /// The stored channels, unconverted (gray stays 1, RGBA keeps alpha, CMYK stays 4).
    AnyData,
}

/// Header facts of an encoded image, as stored (before orientation or scaling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    pub format: ImageFormat,
    /// Stored width in pixels.
    pub width: usize,
    /// Stored height in pixels.
    pub height: usize,
    /// Native channel count: 1 gray, 2 gray+alpha, 3 colour, 4 RGBA or CMYK.
    pub channels: usize,
    /// EXIF orientation; [`Orientation::Normal`] when the file carries none.
    pub orientation: Orientation,
}

/// A region of interest in OUTPUT coordinates, i.e. after orientation and scaling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Roi {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
}

/// What to produce from an encoded image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeParams {
    pub color: ColorSpace,
    /// Apply the EXIF orientation (DALI's default is true).
    pub adjust_orientation: bool,
    /// Crop in output coordinates; `None` decodes the whole image.
    pub roi: Option<Roi>,
    /// 1, 2, 4 or 8: JPEG DCT-domain downscale, output dims are `ceil(dim / scale_denom)`.
    /// Other formats accept only 1.
    pub scale_denom: u32,
    /// JPEG only: libjpeg-turbo's fast integer IDCT (faster, slightly less accurate). Off by
    /// default, which gives the accurate IDCT that Pillow and DALI use.
    pub fast_idct: bool,
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams { color: ColorSpace::Rgb, adjust_orientation: true, roi: None, scale_denom: 1, fast_idct: false }
    }
}

/// Broad class of a [`CodecError`], for callers that react differently (skip vs. abort).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Not a format (or format variant) this crate decodes.
    Unsupported,
    /// The data ended before the image did.
    Truncated,
    /// The data is malformed.
    Corrupt,
    /// The header declares an image larger than [`MAX_DIMENSION`] / [`MAX_OUTPUT_BYTES`].
    TooLarge,
    /// The caller's parameters or buffer do not fit the image.
    InvalidArgument,
}

/// Why an image could not be inspected or decoded; the message says what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CodecError {
    kind: ErrorKind,
    message: String,
}

impl CodecError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CodecError { kind, message: message.into() }
    }
    /// The class of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The human-readable description (same as `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

pub(crate) fn invalid(msg: impl Into<String>) -> CodecError {
    CodecError::new(ErrorKind::InvalidArgument, msg)
}

/// Largest accepted width or height: hostile headers must not drive allocations.
pub const MAX_DIMENSION: usize = 65535;
/// Largest accepted `width * height * channels` of a decoded image.
pub const MAX_OUTPUT_BYTES: usize = 1 << 31;

pub(crate) fn check_size(width: usize, height: usize, channels: usize) -> Result<(), CodecError> {
    if width == 0 || height == 0 {
        return Err(CodecError::new(ErrorKind::Corrupt, "image has zero width or height"));
    }
    if width > MAX_DIMENSION || height > MAX_DIMENSION {
        return Err(CodecError::new(
            ErrorKind::TooLarge,
            format!("image too large: {width}x{height} exceeds {MAX_DIMENSION} pixels per side"),
        ));
    }
    // Checked in u128 so the product itself cannot overflow on 32-bit targets.
    if (width as u128) * (height as u128) * (channels.max(4) as u128) > MAX_OUTPUT_BYTES as u128 {
        return Err(CodecError::new(
            ErrorKind::TooLarge,
            format!("image too large: {width}x{height}x{channels} exceeds {MAX_OUTPUT_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Reads the header only: dimensions, channels and orientation, without decoding pixels.
pub fn read_info(bytes: &[u8]) -> Result<ImageInfo, CodecError> {
    let format = sniff_format(bytes).ok_or_else(|| {
        CodecError::new(ErrorKind::Unsupported, "unsupported format: unrecognised magic bytes")
    })?;
    let info = match format {
        ImageFormat::Jpeg => jpeg::read_info(bytes)?,
        _ => other::read_info(bytes, format)?,
    };
    check_size(info.width, info.height, info.channels)?;
    Ok(info)
}

impl ImageInfo {
    /// The orientation that decoding with `p` applies.
    fn effective_orientation(&self, p: &DecodeParams) -> Orientation {
        if p.adjust_orientation {
            self.orientation
        } else {
            Orientation::Normal
        }
    }

    /// Stored dims after DCT scaling (ceil, as libjpeg-turbo's TJSCALED rounds).
    fn scaled_dims(&self, p: &DecodeParams) -> (usize, usize) {
        let d = p.scale_denom.max(1) as usize;
        (self.width.div_ceil(d), self.height.div_ceil(d))
    }

    /// Output channel count for a colour space.
    pub fn output_channels(&self, color: ColorSpace) -> usize {
        match color {
            ColorSpace::Rgb | ColorSpace::Bgr | ColorSpace::YCbCr => 3,
            ColorSpace::Gray => 1,
            ColorSpace::AnyData => self.channels,
        }
    }

    /// (height, width, channels) of the output for these params (after orientation, scaling, roi).
    pub fn output_shape(&self, p: &DecodeParams) -> (usize, usize, usize) {
        let c = self.output_channels(p.color);
        if let Some(r) = p.roi {
            return (r.height, r.width, c);
        }
        let (w, h) = self.scaled_dims(p);
        let (w, h) = if self.effective_orientation(p).swaps_axes() { (h, w) } else { (w, h) };
        (h, w, c)
    }

    /// Validates `p` against this image and returns the full oriented scaled dims and the ROI.
    pub(crate) fn plan(&self, p: &DecodeParams, out_len: usize) -> Result<Plan, CodecError> {
        if !matches!(p.scale_denom, 1 | 2 | 4 | 8) {
            return Err(invalid(format!("invalid scale_denom {}: must be 1, 2, 4 or 8", p.scale_denom)));
        }
        if p.scale_denom != 1 && self.format != ImageFormat::Jpeg {
            return Err(invalid(format!(
                "scale_denom {} is only supported for JPEG, not {:?}",
                p.scale_denom, self.format
            )));
        }
        check_size(self.width, self.height, self.channels)?;
        if self.channels == 0 || self.channels > 4 {
            return Err(invalid(format!("invalid channel count {} in ImageInfo", self.channels)));
        }
        let orientation = self.effective_orientation(p);
        let (sw, sh) = self.scaled_dims(p);
        let (ow, oh) = if orientation.swaps_axes() { (sh, sw) } else { (sw, sh) };
        let roi = p.roi.unwrap_or(Roi { x: 0, y: 0, width: ow, height: oh });
        if roi.width == 0
            || roi.height == 0
            || roi.x.checked_add(roi.width).map_or(true, |e| e > ow)
            || roi.y.checked_add(roi.height).map_or(true, |e| e > oh)
        {
            return Err(invalid(format!(
                "invalid ROI {roi:?}: must be non-empty and inside the {ow}x{oh} output image"
            )));
        }
        let (h, w, c) = self.output_shape(p);
        if out_len != h * w * c {
            return Err(invalid(format!(
                "output buffer has {out_len} bytes, expected {h}x{w}x{c} = {}",
                h * w * c
            )));
        }
        let stored = orientation.roi_to_stored(roi, sw, sh);
        Ok(Plan { orientation, scaled: (sw, sh), roi, stored, out_channels: c })
    }
}

/// A validated decode request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub orientation: Orientation,
    /// Stored dims after scaling.
    pub scaled: (usize, usize),
    /// ROI in output coordinates.
    #[allow(dead_code)]
    pub roi: Roi,
    /// The same ROI in stored (scaled) coordinates.
    pub stored: Roi,
    pub out_channels: usize,
}

/// True when a JPEG ends with its EOI marker (trailing zero padding allowed). Decoders that
/// do not detect truncation themselves (the GPU's hardware engine decodes a cut file into
/// garbage without an error) must only get JPEGs that pass this. It looks at the tail only,
/// so it is cheap on the hot path; files with other trailing bytes simply fail it (and go to
/// a decoder that checks for itself).
pub fn jpeg_is_complete(bytes: &[u8]) -> bool {
    ends_after_scan(bytes, exif::scan_jpeg(bytes).sos)
}

/// EOI at the tail (zero padding allowed), after the first scan's header at `sos`.
fn ends_after_scan(bytes: &[u8], sos: Option<usize>) -> bool {
    let end = bytes.len() - bytes.iter().rev().take(64).take_while(|&&b| b == 0).count();
    end >= 4 && bytes[end - 2..end] == [0xFF, 0xD9] && sos.is_some_and(|sos| sos + 2 < end - 2)
}

/// True when a JPEG is what GPU hardware JPEG engines (A100/H100/H200 NVJPG) decode
/// correctly: baseline (SOF0) 8-bit YCbCr with three components, chroma sampled 1x1 and
/// luma 1x1, 2x1, 1x2 or 2x2 (4:4:4, 4:2:2, 4:4:0, 4:2:0), no Adobe colour transform
/// marker, and complete (see [`jpeg_is_complete`]). One walk over the markers, no decoding:
/// cheap enough to run on every sample, on every worker, which the library's own check
/// (nvjpegJpegStreamParse + nvjpegDecodeBatchedSupported, serial per handle) is not.
/// Grayscale is excluded on purpose: the engine decodes it wrongly to interleaved RGB.
pub fn jpeg_suits_hardware_decoder(bytes: &[u8]) -> bool {
    if bytes.len() < 4 || bytes[..2] != [0xFF, 0xD8] {
        return false;
    }
    let m = exif::scan_jpeg(bytes);
    let Some((w, h, 3)) = m.frame else { return false };
    let [(id0, y), (_, cb), (_, cr)] = m.components;
    m.sof == Some(0xC0)
        && m.precision == 8
        && w > 0
        && h > 0
        && !m.adobe
        && id0 != b'R' // components named R, G, B are stored as RGB, not YCbCr
        && matches!(y, 0x11 | 0x21 | 0x12 | 0x22)
        && cb == 0x11
        && cr == 0x11
        && ends_after_scan(bytes, m.sos)
}

/// Decodes into a caller-owned HWC u8 buffer of exactly `info.output_shape(p)`'s size.
///
/// Nothing of the output is allocated here; JPEG uses a per-thread TurboJPEG handle and a
/// per-thread scratch buffer (only needed for orientation, unaligned crops or CMYK), so a
/// steady-state decode allocates nothing beyond libjpeg-turbo's own working memory.
pub fn decode_into(
    bytes: &[u8],
    info: &ImageInfo,
    p: &DecodeParams,
    out: &mut [u8],
) -> Result<(), CodecError> {
    let plan = info.plan(p, out.len())?;
    if sniff_format(bytes) != Some(info.format) {
        return Err(invalid(format!("data is not {:?} as ImageInfo says", info.format)));
    }
    match info.format {
        ImageFormat::Jpeg => jpeg::decode_into(bytes, info, p, &plan, out),
        _ => other::decode_into(bytes, info, p, &plan, out),
    }
}

/// Convenience: reads the header, allocates the output and decodes; returns (pixels, (h, w, c)).
pub fn decode(bytes: &[u8], p: &DecodeParams) -> Result<(Vec<u8>, (usize, usize, usize)), CodecError> {
    let info = read_info(bytes)?;
    let shape = info.output_shape(p);
    let mut out = vec![0u8; shape.0 * shape.1 * shape.2];
    decode_into(bytes, &info, p, &mut out)?;
    Ok((out, shape))
}
