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

