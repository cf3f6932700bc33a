//! JPEG encoding through libjpeg-turbo: the demo's sample dataset and test images (so
//! nothing needs Pillow or an external tool), and `fn.jpeg_compression_distortion`'s round
//! trip.

use std::cell::RefCell;
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

/// A TurboJPEG compressor and its output buffer, kept per thread: a round trip per image
/// then allocates nothing once the buffer is large enough.
struct Compressor {
    handle: tj::tjhandle,
    buf: *mut u8,
    cap: usize,
}

impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: buf is null or from tj3Alloc; handle is live.
        unsafe {
            tj::tj3Free(self.buf as *mut _);
            tj::tj3Destroy(self.handle);
        }
    }
}

thread_local! {
    static COMPRESSOR: RefCell<Option<Compressor>> = const { RefCell::new(None) };
}

/// Compresses packed 8-bit RGB pixels as a baseline JPEG (4:2:0, accurate integer DCT,
/// standard Huffman tables: what OpenCV's `imencode(".jpg")` writes) at `quality` (clamped
/// to 1-100), then decodes it (accurate IDCT, fancy upsampling: OpenCV's `imdecode`) into
/// `out`, which holds as many bytes as `pixels`. DALI's `jpeg_compression_distortion`.
pub fn jpeg_round_trip(pixels: &[u8], width: usize, height: usize, quality: i32, out: &mut [u8]) -> Result<(), CodecError> {
    if width == 0 || height == 0 || pixels.len() != width * height * 3 || out.len() != pixels.len() {
        return Err(invalid(format!("{width}x{height}x3 image does not match {} bytes", pixels.len())));
    }
    if width > i32::MAX as usize || height > i32::MAX as usize {
        return Err(invalid(format!("{width}x{height} is too large to encode")));
    }
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            // SAFETY: plain FFI constructor; null is checked.
            let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int) };
            if handle.is_null() {
                return Err(CodecError::new(ErrorKind::Unsupported, "cannot create a JPEG compressor"));
            }
            *slot = Some(Compressor { handle, buf: std::ptr::null_mut(), cap: 0 });
        }
        let c = slot.as_mut().expect("set above");
        // SAFETY: plain query of the worst-case size.
        let need = unsafe { tj::tj3JPEGBufSize(width as c_int, height as c_int, tj::TJSAMP_TJSAMP_420 as c_int) } as usize;
        if need == 0 {
            return Err(invalid(format!("{width}x{height} is too large to encode")));
        }
        if c.cap < need {
            // SAFETY: the old buffer is ours (or null); the new one is checked.
            unsafe {
                tj::tj3Free(c.buf as *mut _);
                c.buf = tj::tj3Alloc(need as _) as *mut u8;
            }
            c.cap = if c.buf.is_null() { 0 } else { need };
            if c.buf.is_null() {
                return Err(CodecError::new(ErrorKind::Unsupported, "cannot allocate the JPEG buffer"));
            }
        }
        let mut size: tj::size_t = c.cap as _;
        let mut buf = c.buf;
        // SAFETY: `pixels` holds height rows of width*3 bytes (checked); `buf` holds `cap`
        // bytes, the worst case for this size, and NOREALLOC keeps TurboJPEG from replacing it.
        let rc = unsafe {
            tj::tj3Set(c.handle, tj::TJPARAM_TJPARAM_QUALITY as c_int, quality.clamp(1, 100));
            tj::tj3Set(c.handle, tj::TJPARAM_TJPARAM_SUBSAMP as c_int, tj::TJSAMP_TJSAMP_420 as c_int);
            tj::tj3Set(c.handle, tj::TJPARAM_TJPARAM_NOREALLOC as c_int, 1);
            tj::tj3Compress8(c.handle, pixels.as_ptr(), width as c_int, 0, height as c_int, tj::TJPF_TJPF_RGB as c_int, &mut buf, &mut size)
        };
        if rc != 0 || buf != c.buf {
            return Err(CodecError::new(ErrorKind::Unsupported, "JPEG compression failed"));
        }
        // SAFETY: TurboJPEG wrote `size` bytes at `buf`, which stays ours until the next
        // compression on this thread. The decoder has its own per-thread handle.
        let encoded = unsafe { std::slice::from_raw_parts(buf, size as usize) };
        let info = crate::read_info(encoded)?;
        let p = crate::DecodeParams { adjust_orientation: false, ..Default::default() };
        crate::decode_into(encoded, &info, &p, out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_lose_more_at_lower_quality_and_reuse_the_buffer() {
        let (w, h) = (37, 21);
        let src: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7919) % 251) as u8).collect();
        let mad = |q: i32| {
            let mut out = vec![0u8; src.len()];
            jpeg_round_trip(&src, w, h, q, &mut out).unwrap();
            out.iter().zip(&src).map(|(a, b)| (*a as i32 - *b as i32).abs()).sum::<i32>() as f64 / src.len() as f64
        };
        let (q95, q10, q0) = (mad(95), mad(10), mad(-5));
        assert!(q95 < q10, "{q95} {q10}");
        assert_eq!(q0, mad(1), "quality is clamped to 1..=100");
        // A larger image after a smaller one grows the buffer; the same image gives the same bytes.
        let big: Vec<u8> = (0..300 * 200 * 3).map(|i| (i % 256) as u8).collect();
        let (mut a, mut b) = (vec![0u8; big.len()], vec![0u8; big.len()]);
        jpeg_round_trip(&big, 300, 200, 50, &mut a).unwrap();
        jpeg_round_trip(&src, w, h, 50, &mut vec![0u8; src.len()]).unwrap();
        jpeg_round_trip(&big, 300, 200, 50, &mut b).unwrap();
        assert_eq!(a, b);
        assert!(jpeg_round_trip(&src, w, h + 1, 50, &mut vec![0u8; src.len()]).is_err());
    }

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
