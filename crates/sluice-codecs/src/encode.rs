//! JPEG encoding through libjpeg-turbo: used to make the demo's sample dataset and test
//! images, so nothing needs Pillow or an external tool.

use std::os::raw::c_int;

use turbojpeg_sys as tj;

use crate::{invalid, CodecError, ErrorKind};

/// Encodes packed 8-bit RGB (`channels` = 3) or gray (`channels` = 1) pixels as a baseline
/// JPEG with 4:2:0 chroma subsampling (for RGB) at `quality` (1-100).
pub fn encode_jpeg(pixels: &[u8], width: usize, height: usize, channels: usize, quality: u8) -> Result<Vec<u8>, CodecError> {
    if width == 0 || height == 0 || pixels.len() != width * height * channels {
        return Err(invalid(format!("{width}x{height}x{channels} image does not match {} bytes", pixels.len())));
    }
    let (pf, samp) = match channels {
        3 => (tj::TJPF_TJPF_RGB, tj::TJSAMP_TJSAMP_420),
        1 => (tj::TJPF_TJPF_GRAY, tj::TJSAMP_TJSAMP_GRAY),
        _ => return Err(invalid(format!("cannot encode {channels} channels as JPEG"))),
    };
    // SAFETY: a fresh compressor handle, destroyed on every path below.
    let h = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int) };
    if h.is_null() {
        return Err(CodecError::new(ErrorKind::Unsupported, "cannot create a JPEG compressor"));
    }
    let mut buf: *mut u8 = std::ptr::null_mut();
    let mut size: tj::size_t = 0;
    // SAFETY: `pixels` holds height rows of width*channels bytes (checked above); TurboJPEG
    // allocates `buf`, which is freed with tj3Free after copying.
    let rc = unsafe {
        tj::tj3Set(h, tj::TJPARAM_TJPARAM_QUALITY as c_int, quality.clamp(1, 100) as c_int);
        tj::tj3Set(h, tj::TJPARAM_TJPARAM_SUBSAMP as c_int, samp as c_int);
        tj::tj3Compress8(h, pixels.as_ptr(), width as c_int, 0, height as c_int, pf as c_int, &mut buf, &mut size)
    };
    let out = if rc == 0 && !buf.is_null() {
        // SAFETY: TurboJPEG wrote `size` bytes at `buf`.
        Ok(unsafe { std::slice::from_raw_parts(buf, size as usize) }.to_vec())
    } else {
        Err(CodecError::new(ErrorKind::Unsupported, "JPEG compression failed"))
    };
    // SAFETY: buf is null or TurboJPEG-allocated; h is live.
    unsafe {
        tj::tj3Free(buf as *mut _);
        tj::tj3Destroy(h);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_jpeg_decodes_back_close_to_the_source() {
        let (w, h) = (48, 32);
        let src: Vec<u8> = (0..w * h * 3).map(|i| ((i % (w * 3)) * 255 / (w * 3)) as u8).collect();
        let jpeg = encode_jpeg(&src, w, h, 3, 95).unwrap();
        let (px, shape) = crate::decode(&jpeg, &crate::DecodeParams::default()).unwrap();
        assert_eq!(shape, (h, w, 3));
        let mad = px.iter().zip(&src).map(|(a, b)| (*a as i32 - *b as i32).abs()).sum::<i32>() as f64 / src.len() as f64;
        assert!(mad < 3.0, "{mad}");
        assert!(encode_jpeg(&src, w, h + 1, 3, 90).is_err());
    }
}
