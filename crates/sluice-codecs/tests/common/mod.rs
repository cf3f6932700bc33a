//! Fixtures shared by the integration tests: JPEGs made by TurboJPEG with chosen settings.

use std::os::raw::c_int;

use turbojpeg_sys as tj;

#[derive(Clone, Copy)]
pub struct Enc {
    pub subsamp: tj::TJSAMP,
    pub progressive: bool,
    pub restart_blocks: c_int,
    pub quality: c_int,
}

/// Compresses packed pixels (`ch` = 1 gray or 3 RGB) with TurboJPEG.
pub fn jpeg(px: &[u8], w: usize, h: usize, ch: usize, e: Enc) -> Vec<u8> {
    unsafe {
        let hd = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int);
        assert!(!hd.is_null());
        tj::tj3Set(hd, tj::TJPARAM_TJPARAM_QUALITY as c_int, e.quality);
        tj::tj3Set(hd, tj::TJPARAM_TJPARAM_SUBSAMP as c_int, e.subsamp as c_int);
        tj::tj3Set(hd, tj::TJPARAM_TJPARAM_PROGRESSIVE as c_int, e.progressive as c_int);
        tj::tj3Set(hd, tj::TJPARAM_TJPARAM_RESTARTBLOCKS as c_int, e.restart_blocks);
        let pf = if ch == 1 { tj::TJPF_TJPF_GRAY } else { tj::TJPF_TJPF_RGB };
        let mut buf: *mut u8 = std::ptr::null_mut();
        let mut size = 0;
        let rc = tj::tj3Compress8(hd, px.as_ptr(), w as c_int, 0, h as c_int, pf as c_int, &mut buf, &mut size);
        assert_eq!(rc, 0, "compress failed");
        let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
        tj::tj3Free(buf as *mut _);
        tj::tj3Destroy(hd);
        out
    }
}

/// A photo-like image: smooth gradients, texture and noise, so every DCT frequency is used.
pub fn photo(w: usize, h: usize, seed: u32) -> Vec<u8> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let n = (s % 48) as f32 - 24.0;
            let t = 128.0 + 80.0 * ((x as f32 / 7.0).sin() * (y as f32 / 11.0).cos());
            let r = (x * 255 / w.max(1)) as f32 * 0.7 + n;
            let g = (y * 255 / h.max(1)) as f32 * 0.6 + t * 0.3 + n * 0.5;
            let b = t + n;
            v.extend_from_slice(&[r.clamp(0.0, 255.0) as u8, g.clamp(0.0, 255.0) as u8, b.clamp(0.0, 255.0) as u8]);
        }
    }
    v
}
