//! PNG, BMP, TIFF, WebP and PNM through the `image` crate.

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use image::codecs::{bmp::BmpDecoder, png::PngDecoder, pnm::PnmDecoder, tiff::TiffDecoder, webp::WebPDecoder};
use image::{ColorType, ImageDecoder, ImageError};

use crate::color::{self, Src};
use crate::transform::blit;
use crate::{invalid, CodecError, DecodeParams, ErrorKind, ImageFormat, ImageInfo, Orientation, Plan};

fn name(f: ImageFormat) -> &'static str {
    match f {
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::Png => "PNG",
        ImageFormat::Bmp => "BMP",
        ImageFormat::Tiff => "TIFF",
        ImageFormat::Webp => "WebP",
        ImageFormat::Pnm => "PNM",
    }
}

fn map_err(f: ImageFormat, e: ImageError) -> CodecError {
    let n = name(f);
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    match e {
        ImageError::Limits(_) => CodecError::new(ErrorKind::TooLarge, format!("image too large: {text}")),
        ImageError::Unsupported(_) => {
            CodecError::new(ErrorKind::Unsupported, format!("unsupported format: {n} variant ({text})"))
        }
        ImageError::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            CodecError::new(ErrorKind::Truncated, format!("truncated {n} data ({text})"))
        }
        _ if lower.contains("eof") || lower.contains("end of") || lower.contains("truncat") => {
            CodecError::new(ErrorKind::Truncated, format!("truncated {n} data ({text})"))
        }
        _ => CodecError::new(ErrorKind::Corrupt, format!("corrupt {n} data ({text})")),
    }
}

/// Runs decoder code with panics turned into errors: third-party decoders on hostile input
/// are the likeliest place for an unexpected panic, and a data loader must not die of one.
fn guarded<R>(f: ImageFormat, body: impl FnOnce() -> Result<R, CodecError>) -> Result<R, CodecError> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(CodecError::new(ErrorKind::Corrupt, format!("corrupt {} data (decoder panicked)", name(f))))
    })
}

fn decoder<'a>(bytes: &'a [u8], f: ImageFormat) -> Result<Box<dyn ImageDecoder + 'a>, CodecError> {
    let c = Cursor::new(bytes);
    let mut d: Box<dyn ImageDecoder + 'a> = match f {
        ImageFormat::Png => Box::new(PngDecoder::new(c).map_err(|e| map_err(f, e))?),
        ImageFormat::Bmp => Box::new(BmpDecoder::new(c).map_err(|e| map_err(f, e))?),
        ImageFormat::Tiff => Box::new(TiffDecoder::new(c).map_err(|e| map_err(f, e))?),
        ImageFormat::Webp => Box::new(WebPDecoder::new(c).map_err(|e| map_err(f, e))?),
        ImageFormat::Pnm => Box::new(PnmDecoder::new(c).map_err(|e| map_err(f, e))?),
        ImageFormat::Jpeg => return Err(invalid("JPEG is not decoded by the image crate path")),
    };
    // Our limits first, so that a hostile header is refused naming them (the image crate's
    // own check says only "Image size exceeds limit").
    let (w, h) = d.dimensions();
    crate::check_size(w as usize, h as usize, d.color_type().channel_count() as usize)?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(crate::MAX_DIMENSION as u32);
    limits.max_image_height = Some(crate::MAX_DIMENSION as u32);
    // Room for the largest accepted image at 16 bits per sample plus decoder overhead.
    limits.max_alloc = Some(4 * crate::MAX_OUTPUT_BYTES as u64);
    d.set_limits(limits).map_err(|e| map_err(f, e))?;
    Ok(d)
}

/// Bytes per sample of the decoder's native output, or None for layouts we do not handle.
fn sample_bytes(ct: ColorType) -> Option<usize> {
    use ColorType::*;
    match ct {
        L8 | La8 | Rgb8 | Rgba8 => Some(1),
        L16 | La16 | Rgb16 | Rgba16 => Some(2),
        Rgb32F | Rgba32F => Some(4),
        _ => None,
    }
}

fn header(d: &mut Box<dyn ImageDecoder + '_>, f: ImageFormat) -> Result<(usize, usize, ColorType), CodecError> {
    let (w, h) = d.dimensions();
    let ct = d.color_type();
    if sample_bytes(ct).is_none() {
        return Err(CodecError::new(ErrorKind::Unsupported, format!("unsupported {} pixel layout {ct:?}", name(f))));
    }
    crate::check_size(w as usize, h as usize, ct.channel_count() as usize)?;
    Ok((w as usize, h as usize, ct))
}

pub(crate) fn read_info(bytes: &[u8], f: ImageFormat) -> Result<ImageInfo, CodecError> {
    guarded(f, || {
        let mut d = decoder(bytes, f)?;
        let (width, height, ct) = header(&mut d, f)?;
        // A broken EXIF block should not make an otherwise fine image unreadable.
        let orientation = d.orientation().map(|o| Orientation::from_exif(o.to_exif() as u32)).unwrap_or_default();
        Ok(ImageInfo { format: f, width, height, channels: ct.channel_count() as usize, orientation })
    })
}

/// Native samples -> u8: 16-bit rounds v*255/65535 (DALI's normalising conversion), float
/// clamps [0, 1].
fn to_u8(native: &[u8], sb: usize, dst: &mut [u8]) {
    match sb {
        2 => {
            for (d, s) in dst.iter_mut().zip(native.chunks_exact(2)) {
                let v = u16::from_ne_bytes([s[0], s[1]]) as u32;
                *d = ((v * 255 + 32767) / 65535) as u8;
            }
        }
        4 => {
            for (d, s) in dst.iter_mut().zip(native.chunks_exact(4)) {
                let v = f32::from_ne_bytes([s[0], s[1], s[2], s[3]]);
                *d = if v.is_nan() { 0 } else { (v.clamp(0.0, 1.0) * 255.0).round() as u8 };
            }
        }
        _ => dst.copy_from_slice(native),
    }
}

pub(crate) fn decode_into(
    bytes: &[u8],
    info: &ImageInfo,
    p: &DecodeParams,
    plan: &Plan,
    out: &mut [u8],
) -> Result<(), CodecError> {
    let f = info.format;
    guarded(f, || {
        let mut d = decoder(bytes, f)?;
        let (w, h, ct) = header(&mut d, f)?;
        let sc = ct.channel_count() as usize;
        if (w, h, sc) != (info.width, info.height, info.channels) {
            return Err(invalid(format!("ImageInfo does not match the {} data", name(f))));
        }
        let sb = sample_bytes(ct).unwrap_or(1);
        let total = usize::try_from(d.total_bytes()).map_err(|_| invalid("image too large"))?;
        let mut native = vec![0u8; total];
        d.read_image_boxed(&mut native).map_err(|e| map_err(f, e))?;
        let pixels = if sb == 1 {
            native
        } else {
            let mut px = vec![0u8; w * h * sc];
            to_u8(&native, sb, &mut px);
            px
        };

        let st = plan.stored;
        let oc = plan.out_channels;
        let kind = Src::Plain(sc);
        let src_row = |r: usize| {
            let s = ((st.y + r) * w + st.x) * sc;
            &pixels[s..s + st.width * sc]
        };
        if plan.orientation == Orientation::Normal {
            for (r, drow) in out.chunks_exact_mut(st.width * oc).enumerate() {
                color::convert(src_row(r), kind, p.color, drow);
            }
        } else {
            let mut conv = vec![0u8; st.width * st.height * oc];
            for (r, drow) in conv.chunks_exact_mut(st.width * oc).enumerate() {
                color::convert(src_row(r), kind, p.color, drow);
            }
            blit(&conv, st.width * oc, 0, st.width, st.height, oc, plan.orientation, out);
        }
        Ok(())
    })
}
