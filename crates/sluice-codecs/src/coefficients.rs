//! JPEG entropy decoding only: the quantized DCT coefficients of the blocks a window needs,
//! read by libjpeg-turbo (`jpeg_read_coefficients`, through csrc/coefficients.c) into a
//! caller-owned buffer, so the rest of the decode (IDCT, fancy upsampling, YCbCr -> RGB) can
//! run on a GPU. Huffman decoding is about half of libjpeg-turbo's time on typical photos;
//! the other half moves off the CPU this way.
//!
//! [`coefficient_layout`] says whether a file qualifies and which blocks to copy (and so how
//! much room to stage); [`read_coefficients`] fills that room. Whoever finishes the decode
//! must reproduce libjpeg-turbo's accurate integer IDCT (`jidctint.c`), its fancy
//! upsampling (`jdsample.c`, the 2x1, 1x2 and 2x2 triangle filters) and its YCbCr -> RGB
//! (`jdcolor.c`) to get the same pixels as [`crate::decode_into`].

use std::cell::RefCell;

use crate::exif;
use crate::{ImageFormat, ImageInfo, Roi};

/// One component of a [`CoefLayout`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoefComponent {
    /// Size of the component in samples (libjpeg's `downsampled_width` / `_height`).
    pub width: usize,
    pub height: usize,
    /// How many image pixels one sample covers across and down (1 or 2).
    pub h_up: usize,
    pub v_up: usize,
    /// The rectangle of 8x8 blocks copied: first column and row, and counts.
    pub bx0: usize,
    pub by0: usize,
    pub bw: usize,
    pub bh: usize,
    /// Where its first coefficient lands in the sample's run of coefficients.
    pub offset: usize,
}

/// Which coefficients of which components a window of one JPEG needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoefLayout {
    /// 1 (grayscale) or 3 (YCbCr).
    pub components: usize,
    pub comp: [CoefComponent; 3],
    /// Sampling factors (h, v) per component, as in the frame header.
    sampling: [(u8, u8); 3],
    /// Coefficients (i16) in all, 64 per block.
    pub coefficients: usize,
}

impl CoefLayout {
    /// The blocks of component `c`.
    pub fn blocks(&self, c: usize) -> usize {
        self.comp[c].bw * self.comp[c].bh
    }
}

/// The layout for decoding `window` (stored coordinates, inside the image) of a JPEG from
/// its coefficients, or `None` when the file is outside what the coefficient path
/// reproduces exactly: 8-bit Huffman or arithmetic-coded (baseline, extended, progressive),
/// grayscale or YCbCr with chroma at full, half-width, half-height or quarter resolution
/// (4:4:4, 4:2:2, 4:4:0, 4:2:0), no Adobe marker, chroma wider than 2 samples where it is
/// halved across (libjpeg switches to box upsampling below that).
pub fn coefficient_layout(bytes: &[u8], info: &ImageInfo, window: Roi) -> Option<CoefLayout> {
    if info.format != ImageFormat::Jpeg || window.width == 0 || window.height == 0 {
        return None;
    }
    if window.x + window.width > info.width || window.y + window.height > info.height {
        return None;
    }
    let m = exif::scan_jpeg(bytes);
    let (w, h, nc) = m.frame?;
    if (w, h) != (info.width, info.height) || m.precision != 8 || m.adobe {
        return None;
    }
    // Huffman: baseline, extended, progressive; arithmetic: extended, progressive.
    if !matches!(m.sof, Some(0xC0 | 0xC1 | 0xC2 | 0xC9 | 0xCA)) {
        return None;
    }
    let split = |hv: u8| (hv >> 4, hv & 15);
    let sampling: [(u8, u8); 3] = match nc {
        // A single component is never upsampled, whatever its factors say.
        1 => [split(m.components[0].1), (0, 0), (0, 0)],
        3 => {
            let [(id0, y), (_, cb), (_, cr)] = m.components;
            // Components named R, G, B are stored as RGB, not YCbCr.
            if id0 == b'R' || !matches!(y, 0x11 | 0x21 | 0x12 | 0x22) || cb != 0x11 || cr != 0x11 {
                return None;
            }
            [split(y), split(cb), split(cr)]
        }
        _ => return None,
    };
    let (max_h, max_v) = if nc == 1 { sampling[0] } else { (sampling[0].0, sampling[0].1) };
    if max_h == 0 || max_v == 0 {
        return None;
    }
    let mut comp = [CoefComponent::default(); 3];
    let mut offset = 0;
    for c in 0..nc {
        let (hs, vs) = if nc == 1 { (max_h, max_v) } else { sampling[c] };
        let (h_up, v_up) = (usize::from(max_h / hs), usize::from(max_v / vs));
        let width = (w * usize::from(hs)).div_ceil(usize::from(max_h));
        let height = (h * usize::from(vs)).div_ceil(usize::from(max_v));
        if h_up == 2 && width <= 2 {
            return None;
        }
        // Samples the window reads: its own, plus one on each side where the triangle
        // filter reaches a neighbour (clamped at the edges, as libjpeg replicates them).
        let span = |start: usize, len: usize, up: usize, size: usize| -> (usize, usize) {
            if up == 1 {
                (start, start + len - 1)
            } else {
                ((start / 2).saturating_sub(1), ((start + len - 1) / 2 + 1).min(size - 1))
            }
        };
        let (c0, c1) = span(window.x, window.width, h_up, width);
        let (r0, r1) = span(window.y, window.height, v_up, height);
        let (bx0, by0) = (c0 / 8, r0 / 8);
        let (bw, bh) = (c1 / 8 - bx0 + 1, r1 / 8 - by0 + 1);
        comp[c] = CoefComponent { width, height, h_up, v_up, bx0, by0, bw, bh, offset };
        offset += bw * bh * 64;
    }
    Some(CoefLayout { components: nc, comp, sampling, coefficients: offset })
}

#[repr(C)]
struct Region {
    bx0: i32,
    by0: i32,
    bw: i32,
    bh: i32,
    dst: *mut i16,
}

#[repr(C)]
struct RawReader {
    _private: [u8; 0],
}

extern "C" {
    fn sluice_coef_reader_new() -> *mut RawReader;
    fn sluice_coef_reader_free(r: *mut RawReader);
    fn sluice_read_coefficients(
        r: *mut RawReader,
        data: *const u8,
        len: std::os::raw::c_ulong,
        width: i32,
        height: i32,
        ncomp: i32,
        sampling: *const i32,
        regions: *const Region,
        quant: *mut u16,
    ) -> i32;
}

/// A libjpeg decompressor kept per thread (creating one allocates its memory manager).
struct Reader(*mut RawReader);

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: made by sluice_coef_reader_new, freed exactly once.
        unsafe { sluice_coef_reader_free(self.0) }
    }
}

thread_local! {
    static READER: RefCell<Option<Reader>> = const { RefCell::new(None) };
}

/// Reads the coefficients `layout` names into `dst` (`layout.coefficients` values: each
/// component's blocks row by row from `comp[c].offset`, 64 per block in natural order) and
/// each component's quantization table into `quant[c]` (natural order). Sequential files are
/// entropy-decoded only down to the last block row the layout needs (libjpeg's progress hook
/// stops the read there), as a cropped libjpeg-turbo decode stops below its window.
///
/// Returns false when the file cannot be read this way after all (its header disagrees with
/// the marker walk, or libjpeg reports damage of any kind, even a warning): decode it with
/// [`crate::decode_into`] instead, which tells benign defects from fatal ones and names them.
pub fn read_coefficients(bytes: &[u8], info: &ImageInfo, layout: &CoefLayout, dst: &mut [i16], quant: &mut [[u16; 64]; 3]) -> bool {
    assert!(dst.len() >= layout.coefficients, "coefficient buffer too small");
    let nc = layout.components;
    let mut regions: [Region; 3] = std::array::from_fn(|_| Region { bx0: 0, by0: 0, bw: 0, bh: 0, dst: std::ptr::null_mut() });
    let mut sampling = [0i32; 6];
    for c in 0..nc {
        let g = &layout.comp[c];
        let (Ok(bx0), Ok(by0), Ok(bw), Ok(bh)) = (i32::try_from(g.bx0), i32::try_from(g.by0), i32::try_from(g.bw), i32::try_from(g.bh)) else {
            return false;
        };
        // SAFETY: offset + bw*bh*64 <= layout.coefficients <= dst.len() by construction.
        regions[c] = Region { bx0, by0, bw, bh, dst: unsafe { dst.as_mut_ptr().add(g.offset) } };
        sampling[2 * c] = i32::from(layout.sampling[c].0);
        sampling[2 * c + 1] = i32::from(layout.sampling[c].1);
    }
    let (Ok(width), Ok(height)) = (i32::try_from(info.width), i32::try_from(info.height)) else { return false };
    let mut q = [0u16; 192];
    let rc = READER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            // SAFETY: plain constructor; null (out of memory) is checked.
            let r = unsafe { sluice_coef_reader_new() };
            if r.is_null() {
                return 2;
            }
            *slot = Some(Reader(r));
        }
        let r = slot.as_ref().map_or(std::ptr::null_mut(), |r| r.0);
        // SAFETY: `bytes` is live for the call; every region points into `dst` with room for
        // its blocks (checked against the component's size in blocks by the C side before
        // anything is written); `q` holds 3 x 64 entries.
        unsafe {
            sluice_read_coefficients(
                r,
                bytes.as_ptr(),
                bytes.len() as std::os::raw::c_ulong,
                width,
                height,
                nc as i32,
                sampling.as_ptr(),
                regions.as_ptr(),
                q.as_mut_ptr(),
            )
        }
    });
    if rc != 0 {
        return false;
    }
    for (c, table) in quant.iter_mut().enumerate().take(nc) {
        table.copy_from_slice(&q[c * 64..c * 64 + 64]);
    }
    true
}
