//! JPEG through libjpeg-turbo's TurboJPEG 3 API, with a reusable per-thread handle.

use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_int;

use turbojpeg_sys as tj;

use crate::color::{self, Src};
use crate::exif::{self, Orientation};
use crate::transform::blit;
use crate::{invalid, CodecError, ColorSpace, DecodeParams, ErrorKind, ImageFormat, ImageInfo, Plan};

/// Owns a TurboJPEG decompressor; destroyed when its thread exits.
struct Handle(tj::tjhandle);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed exactly once.
        unsafe { tj::tj3Destroy(self.0) }
    }
}

thread_local! {
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
    /// Holds decoded pixels that still need an orientation, crop or CMYK fix-up.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Second stage for CMYK (converted colour before orientation).
    static SCRATCH2: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Scratch larger than this is released after use so one huge image does not pin memory.
const SCRATCH_KEEP: usize = 64 << 20;

fn with_scratch<R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<u8>>>,
    len: usize,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    key.with(|cell| {
        let mut v = cell.borrow_mut();
        // Grow only: steady state reuses the buffer without reallocating or clearing.
        if v.len() < len {
            v.resize(len, 0);
        }
        let r = f(&mut v[..len]);
        if v.capacity() > SCRATCH_KEEP {
            *v = Vec::new();
        }
        r
    })
}

fn with_handle<R>(f: impl FnOnce(tj::tjhandle) -> Result<R, CodecError>) -> Result<R, CodecError> {
    HANDLE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            // SAFETY: plain FFI constructor; null is checked.
            let h = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
            if h.is_null() {
                return Err(CodecError::new(ErrorKind::Unsupported, "could not create a TurboJPEG decompressor"));
            }
            let handle = Handle(h);
            // SAFETY: valid handle; parameters are documented TurboJPEG 3 settings.
            unsafe {
                // A hostile progressive file can carry thousands of tiny scans; real ones have ~10.
                tj::tj3Set(h, tj::TJPARAM_TJPARAM_SCANLIMIT as c_int, 500);
                // Do not copy ICC profiles out of every header: we never use them.
                tj::tj3Set(h, tj::TJPARAM_TJPARAM_SAVEMARKERS as c_int, 0);
            }
            *slot = Some(handle);
        }
        let r = f(slot.as_ref().map(|h| h.0).unwrap_or(std::ptr::null_mut()));
        // After a fatal libjpeg error the decompressor's state is not trustworthy (a corrupt
        // scan can leave it mid-stream, and every later image on this thread would fail):
        // drop it, so the next image gets a fresh one. Errors are rare; creation is cheap.
        if r.is_err() {
            *slot = None;
        }
        r
    })
}

fn error_string(h: tj::tjhandle) -> String {
    // SAFETY: TurboJPEG returns a NUL-terminated static or per-handle buffer.
    unsafe {
        let p = tj::tj3GetErrorStr(h);
        if p.is_null() {
            return "unknown libjpeg-turbo error".into();
        }
        CStr::from_ptr(p).to_string_lossy().trim().replace('\n', " ")
    }
}

/// Turns a libjpeg message into an error whose text says what is wrong.
fn classify(msg: &str) -> CodecError {
    if msg.contains("Maximum supported image dimension") {
        CodecError::new(ErrorKind::TooLarge, format!("image too large ({msg})"))
    } else if msg.contains("remature end") {
        CodecError::new(ErrorKind::Truncated, format!("truncated JPEG data ({msg})"))
    } else {
        CodecError::new(ErrorKind::Corrupt, format!("corrupt JPEG data ({msg})"))
    }
}

/// Warnings that leave the pixels intact: junk between markers, a bad ICC chunk, odd JFIF
/// versions, unusual scan scripts. Anything else (premature end, bad Huffman code, lost restart
/// sync, or a fatal error) means part of the image is made-up grey, which a data loader must
/// not train on.
fn benign_warning(msg: &str) -> bool {
    const BENIGN: [&str; 6] = [
        "extraneous bytes before marker",
        "bad ICC marker",
        "unknown JFIF revision",
        "Inconsistent progression sequence",
        "Unknown Adobe color transform",
        "Invalid SOS parameters for sequential JPEG",
    ];
    BENIGN.iter().any(|b| msg.contains(b))
}

/// Checks the return code of a TurboJPEG call; warnings pass unless they damage pixels.
///
/// Two libjpeg quirks shape this: the error code says WARNING whenever any warning happened,
/// even if a fatal error followed (so the message decides), and only the FIRST warning's text
/// is kept (so a benign warning could hide a later "premature end"). `complete` covers the
/// latter: it is true when an EOI marker follows the first SOS, i.e. the data was not cut off.
fn check(h: tj::tjhandle, rc: c_int, complete: bool) -> Result<(), CodecError> {
    if rc == 0 {
        return Ok(());
    }
    let msg = error_string(h);
    // SAFETY: valid handle.
    let code = unsafe { tj::tj3GetErrorCode(h) };
    if code == tj::TJERR_TJERR_WARNING as c_int && benign_warning(&msg) {
        if complete {
            return Ok(());
        }
        return Err(CodecError::new(ErrorKind::Truncated, format!("truncated JPEG data (no EOI marker; {msg})")));
    }
    Err(classify(&msg))
}

#[derive(Clone, Copy, Debug)]
struct Header {
    width: usize,
    height: usize,
    colorspace: c_int,
    subsamp: c_int,
    lossless: bool,
}

impl Header {
    fn cmyk(&self) -> bool {
        self.colorspace == tj::TJCS_TJCS_CMYK as c_int || self.colorspace == tj::TJCS_TJCS_YCCK as c_int
    }
    fn channels(&self) -> usize {
        if self.cmyk() {
            4
        } else if self.colorspace == tj::TJCS_TJCS_GRAY as c_int {
            1
        } else {
            3
        }
    }
}

/// Parses the header with TurboJPEG and cross-checks it against our own marker walk: a
/// tables-only stream "succeeds" in TurboJPEG without updating the handle's dimensions, which
/// would otherwise leak the previous image's size into this one.
fn read_header(h: tj::tjhandle, bytes: &[u8], markers: &exif::JpegMarkers) -> Result<Header, CodecError> {
    let Some((fw, fh, _)) = markers.frame else {
        return Err(if bytes.len() < 4 || !bytes.windows(2).any(|w| w == [0xFF, 0xDA]) {
            CodecError::new(ErrorKind::Truncated, "truncated JPEG data: no frame header (SOF) found")
        } else {
            CodecError::new(ErrorKind::Corrupt, "corrupt JPEG data: no frame header (SOF) found")
        });
    };
    // SAFETY: pointer/length describe a live slice; TurboJPEG only reads it.
    let rc = unsafe { tj::tj3DecompressHeader(h, bytes.as_ptr(), bytes.len() as _) };
    check(h, rc, true)?;
    let get = |p: tj::TJPARAM| unsafe { tj::tj3Get(h, p as c_int) };
    let hdr = Header {
        width: get(tj::TJPARAM_TJPARAM_JPEGWIDTH).max(0) as usize,
        height: get(tj::TJPARAM_TJPARAM_JPEGHEIGHT).max(0) as usize,
        colorspace: get(tj::TJPARAM_TJPARAM_COLORSPACE),
        subsamp: get(tj::TJPARAM_TJPARAM_SUBSAMP),
        lossless: get(tj::TJPARAM_TJPARAM_LOSSLESS) == 1,
    };
    let precision = get(tj::TJPARAM_TJPARAM_PRECISION);
    if precision != 8 {
        return Err(CodecError::new(
            ErrorKind::Unsupported,
            format!("unsupported JPEG: {precision}-bit samples (only 8-bit is supported)"),
        ));
    }
    if (hdr.width, hdr.height) != (fw, fh) {
        return Err(CodecError::new(ErrorKind::Corrupt, "corrupt JPEG data: inconsistent frame header"));
    }
    crate::check_size(hdr.width, hdr.height, hdr.channels())?;
    Ok(hdr)
}

pub(crate) fn read_info(bytes: &[u8]) -> Result<ImageInfo, CodecError> {
    let markers = exif::scan_jpeg(bytes);
    let hdr = with_handle(|h| read_header(h, bytes, &markers))?;
    Ok(ImageInfo {
        format: ImageFormat::Jpeg,
        width: hdr.width,
        height: hdr.height,
        channels: hdr.channels(),
        orientation: markers.orientation,
    })
}

/// iMCU width in pixels per TJSAMP value, as in turbojpeg.h's tjMCUWidth.
fn mcu_width(subsamp: c_int) -> Option<usize> {
    const W: [usize; 7] = [8, 16, 16, 8, 8, 32, 8];
    W.get(usize::try_from(subsamp).ok()?).copied()
}

/// Runs tj3Decompress8 into `dst`, which must hold `rows` rows of `pitch` bytes.
fn decompress(
    h: tj::tjhandle,
    bytes: &[u8],
    dst: &mut [u8],
    pitch: usize,
    rows: usize,
    pf: tj::TJPF,
) -> Result<(), CodecError> {
    // TurboJPEG writes rows*pitch bytes; this is the guarantee that it stays in bounds.
    assert!(dst.len() >= pitch * rows, "decode buffer too small");
    let pitch = c_int::try_from(pitch).map_err(|_| invalid("row pitch too large"))?;
    // SAFETY: input slice is live; dst has room for the cropped, scaled image at this pitch
    // (checked above, and the cropping region/scale set on the handle define `rows`).
    let rc = unsafe { tj::tj3Decompress8(h, bytes.as_ptr(), bytes.len() as _, dst.as_mut_ptr(), pitch, pf as c_int) };
    check(h, rc, rc == 0 || exif::has_eoi_after_sos(bytes))
}

/// Like [`decompress`], but accepts a sequential JPEG whose only defect is a missing EOI
/// marker (common in the wild; every pixel is present). libjpeg reports that as "premature
/// end", exactly like a real truncation, so on that error the data is retried with an EOI
/// appended: a real truncation then still fails ("premature end of data segment") because the
/// entropy-coded data stops mid-scan. Progressive files are not retried: one cut between scans
/// decodes "successfully" to a blurry image. The copy happens only on this rare error path.
fn decompress_eoi_tolerant(
    h: tj::tjhandle,
    bytes: &[u8],
    markers: &exif::JpegMarkers,
    dst: &mut [u8],
    pitch: usize,
    rows: usize,
    pf: tj::TJPF,
) -> Result<(), CodecError> {
    match decompress(h, bytes, dst, pitch, rows, pf) {
        Err(e) if e.kind() == ErrorKind::Truncated && !markers.progressive && !bytes.ends_with(&[0xFF, 0xD9]) => {
            let mut fixed = Vec::with_capacity(bytes.len() + 2);
            fixed.extend_from_slice(bytes);
            fixed.extend_from_slice(&[0xFF, 0xD9]);
            // The cropping region and scale persist on the handle, so the retry decodes the same
            // region into the same layout.
            decompress(h, &fixed, dst, pitch, rows, pf).map_err(|_| e)
        }
        r => r,
    }
}

pub(crate) fn decode_into(
    bytes: &[u8],
    info: &ImageInfo,
    p: &DecodeParams,
    plan: &Plan,
    out: &mut [u8],
) -> Result<(), CodecError> {
    let markers = exif::scan_jpeg(bytes);
    with_handle(|h| {
        let hdr = read_header(h, bytes, &markers)?;
        if (hdr.width, hdr.height, hdr.channels()) != (info.width, info.height, info.channels) {
            return Err(invalid("ImageInfo does not match the JPEG data"));
        }
        if hdr.lossless && p.scale_denom != 1 {
            return Err(CodecError::new(ErrorKind::Unsupported, "lossless JPEG cannot be decoded with scaling"));
        }
        // The handle is shared by every decode on this thread, so set the IDCT each time.
        // SAFETY: valid handle; FASTDCT takes 0 or 1.
        unsafe { tj::tj3Set(h, tj::TJPARAM_TJPARAM_FASTDCT as c_int, p.fast_idct as c_int) };
        let denom = p.scale_denom as c_int;
        // SAFETY: valid handle; 1/1, 1/2, 1/4, 1/8 are among TurboJPEG's scaling factors.
        check(h, unsafe { tj::tj3SetScalingFactor(h, tj::tjscalingfactor { num: 1, denom }) }, true)?;

        let cmyk = hdr.cmyk();
        let (pf, dch) = if cmyk {
            (tj::TJPF_TJPF_CMYK, 4)
        } else {
            match p.color {
                ColorSpace::Gray => (tj::TJPF_TJPF_GRAY, 1),
                ColorSpace::Bgr => (tj::TJPF_TJPF_BGR, 3),
                ColorSpace::Rgb | ColorSpace::YCbCr => (tj::TJPF_TJPF_RGB, 3),
                ColorSpace::AnyData if hdr.channels() == 1 => (tj::TJPF_TJPF_GRAY, 1),
                ColorSpace::AnyData => (tj::TJPF_TJPF_RGB, 3),
            }
        };

        let st = plan.stored;
        let (sw, sh) = plan.scaled;
        // libjpeg-turbo crops horizontally only at scaled iMCU boundaries: decode from the
        // boundary at or left of the ROI and skip the extra columns when copying out.
        let (ax, aw, cy, chh) = match mcu_width(hdr.subsamp) {
            Some(mcu) if !hdr.lossless => {
                let m = mcu.div_ceil(p.scale_denom as usize);
                // Fancy upsampling of subsampled chroma reads the neighbouring chroma column;
                // libjpeg replicates the edge at a crop boundary instead, so keep one iMCU of
                // real context on each side (unless at the image edge) to stay bit-exact.
                let ax = (st.x / m * m).saturating_sub(m);
                let end = ((st.x + st.width).div_ceil(m) * m + m).min(sw);
                (ax, end - ax, st.y, st.height)
            }
            _ => (0, sw, 0, sh),
        };
        let full = ax == 0 && aw == sw && cy == 0 && chh == sh;
        let region = if full {
            tj::tjregion { x: 0, y: 0, w: 0, h: 0 }
        } else {
            tj::tjregion { x: ax as c_int, y: cy as c_int, w: aw as c_int, h: chh as c_int }
        };
        // Always set (zeros = none): the handle keeps the previous image's region otherwise.
        // SAFETY: valid handle whose header was just read; the region lies in the scaled image.
        check(h, unsafe { tj::tj3SetCroppingRegion(h, region) }, true)?;
        let (dx, dy) = (st.x - ax, st.y - cy);
        let direct = !cmyk
            && plan.orientation == Orientation::Normal
            && dx == 0
            && dy == 0
            && aw == st.width
            && chh == st.height;

        if direct {
            decompress_eoi_tolerant(h, bytes, &markers, out, st.width * dch, st.height, pf)?;
        } else {
            let pitch = aw * dch;
            with_scratch(&SCRATCH, pitch * chh, |buf| -> Result<(), CodecError> {
                decompress_eoi_tolerant(h, bytes, &markers, buf, pitch, chh, pf)?;
                let region = &buf[dy * pitch..];
                if cmyk {
                    let oc = plan.out_channels;
                    let kind = Src::Cmyk { adobe: markers.adobe };
                    with_scratch(&SCRATCH2, st.width * st.height * oc, |conv| {
                        for (r, drow) in conv.chunks_exact_mut(st.width * oc).enumerate() {
                            let s = r * pitch + dx * 4;
                            color::convert(&region[s..s + st.width * 4], kind, p.color, drow);
                        }
                        blit(conv, st.width * oc, 0, st.width, st.height, oc, plan.orientation, out);
                    });
                } else {
                    blit(region, pitch, dx, st.width, st.height, dch, plan.orientation, out);
                }
                Ok(())
            })?;
        }
        if p.color == ColorSpace::YCbCr && !cmyk {
            color::rgb_to_ycbcr_in_place(out);
        }
        Ok(())
    })
}
