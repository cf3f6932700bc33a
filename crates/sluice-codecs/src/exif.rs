//! EXIF orientation: the enum, coordinate mapping, and a bounds-checked APP1/TIFF parser.

use crate::Roi;

/// EXIF orientation (tag 0x0112), named by what must be done to the stored pixels to view them
/// upright.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Orientation {
    /// 1: as stored.
    #[default]
    Normal = 1,
    /// 2: mirror left-right.
    FlipHorizontal = 2,
    /// 3: rotate 180 degrees.
    Rotate180 = 3,
    /// 4: mirror top-bottom.
    FlipVertical = 4,
    /// 5: mirror across the main diagonal.
    Transpose = 5,
    /// 6: rotate 90 degrees clockwise.
    Rotate90 = 6,
    /// 7: mirror across the anti-diagonal.
    Transverse = 7,
    /// 8: rotate 90 degrees counter-clockwise.
    Rotate270 = 8,
}

impl Orientation {
    /// Maps an EXIF value; anything outside 1..=8 is treated as absent, as Pillow does.
    pub fn from_exif(v: u32) -> Orientation {
        match v {
            2 => Orientation::FlipHorizontal,
            3 => Orientation::Rotate180,
            4 => Orientation::FlipVertical,
            5 => Orientation::Transpose,
            6 => Orientation::Rotate90,
            7 => Orientation::Transverse,
            8 => Orientation::Rotate270,
            _ => Orientation::Normal,
        }
    }

    /// The EXIF value 1..=8.
    pub fn to_exif(self) -> u8 {
        self as u8
    }

    /// Whether width and height trade places.
    pub fn swaps_axes(self) -> bool {
        matches!(
            self,
            Orientation::Transpose | Orientation::Rotate90 | Orientation::Transverse | Orientation::Rotate270
        )
    }

    /// Stored coordinate of output pixel (ox, oy) for a stored image of `w` x `h`.
    #[inline]
    pub(crate) fn to_stored(self, ox: usize, oy: usize, w: usize, h: usize) -> (usize, usize) {
        match self {
            Orientation::Normal => (ox, oy),
            Orientation::FlipHorizontal => (w - 1 - ox, oy),
            Orientation::Rotate180 => (w - 1 - ox, h - 1 - oy),
            Orientation::FlipVertical => (ox, h - 1 - oy),
            Orientation::Transpose => (oy, ox),
            Orientation::Rotate90 => (oy, h - 1 - ox),
            Orientation::Transverse => (w - 1 - oy, h - 1 - ox),
            Orientation::Rotate270 => (w - 1 - oy, ox),
        }
    }

    /// The stored-coordinate rectangle that, once oriented, becomes `roi` of the output.
    /// `w`, `h` are the stored dims; `roi` must lie inside the oriented image.
    pub(crate) fn roi_to_stored(self, roi: Roi, w: usize, h: usize) -> Roi {
        let Roi { x, y, width: rw, height: rh } = roi;
        let (sx, sy, sw, sh) = match self {
            Orientation::Normal => (x, y, rw, rh),
            Orientation::FlipHorizontal => (w - x - rw, y, rw, rh),
            Orientation::Rotate180 => (w - x - rw, h - y - rh, rw, rh),
            Orientation::FlipVertical => (x, h - y - rh, rw, rh),
            Orientation::Transpose => (y, x, rh, rw),
            Orientation::Rotate90 => (y, h - x - rw, rh, rw),
            Orientation::Transverse => (w - y - rh, h - x - rw, rh, rw),
            Orientation::Rotate270 => (w - y - rh, x, rh, rw),
        };
        Roi { x: sx, y: sy, width: sw, height: sh }
    }
}

/// Reads the orientation from a TIFF structure (the payload of an `Exif\0\0` APP1 segment).
/// Returns None on anything malformed; every read is bounds-checked.
pub(crate) fn orientation_from_tiff(t: &[u8]) -> Option<Orientation> {
    let le = match t.get(0..2)? {
        b"II" => true,
        b"MM" => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b = t.get(o..o.checked_add(2)?)?;
        Some(if le { u16::from_le_bytes([b[0], b[1]]) } else { u16::from_be_bytes([b[0], b[1]]) })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b = t.get(o..o.checked_add(4)?)?;
        let a = [b[0], b[1], b[2], b[3]];
        Some(if le { u32::from_le_bytes(a) } else { u32::from_be_bytes(a) })
    };
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd = u32_at(4)? as usize;
    let count = u16_at(ifd)? as usize;
    for i in 0..count {
        let e = ifd.checked_add(2)?.checked_add(i.checked_mul(12)?)?;
        if u16_at(e)? != 0x0112 {
            continue;
        }
        let value = match u16_at(e + 2)? {
            3 => u16_at(e + 8)? as u32, // SHORT, the standard type
            4 => u32_at(e + 8)?,        // LONG, written by some tools
            _ => return None,
        };
        return Some(Orientation::from_exif(value));
    }
    None
}

/// Facts gathered by walking JPEG markers up to the first SOS.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct JpegMarkers {
    pub orientation: Orientation,
    /// An APP14 "Adobe" segment was seen: CMYK samples are stored inverted.
    pub adobe: bool,
    /// (width, height, components) from the first SOFn.
    pub frame: Option<(usize, usize, usize)>,
    /// The frame is progressive (SOF2/6/10/14).
    pub progressive: bool,
    /// Offset of the first SOS marker.
    pub sos: Option<usize>,
    /// The first SOFn marker (0xC0 baseline, 0xC1 extended, 0xC2 progressive, ...).
    pub sof: Option<u8>,
    /// Sample precision in bits, from the SOF.
    pub precision: u8,
    /// (component id, sampling factors H<<4|V) of the first three components.
    pub components: [(u8, u8); 3],
    /// From the last DRI before the scan (0: no restart markers).
    pub restart_interval: u16,
}

/// Whether an EOI marker follows the first SOS. Entropy-coded data cannot contain 0xFF 0xD9
/// (0xFF is stuffed), so this tells a complete stream from one cut off mid-scan.
pub(crate) fn has_eoi_after_sos(bytes: &[u8]) -> bool {
    match scan_jpeg(bytes).sos {
        Some(sos) => bytes[sos..].windows(2).any(|w| w == [0xFF, 0xD9]),
        None => false,
    }
}

/// One marker segment of a JPEG header: its marker, where its 0xFF is, and its payload
/// (after the length field; for SOS, the scan header, empty when its length is unreadable).
pub(crate) struct Segment<'a> {
    pub marker: u8,
    pub at: usize,
    pub data: &'a [u8],
}

impl Segment<'_> {
    /// The offset just past the segment (for SOS: where the entropy-coded data begins).
    pub fn end(&self) -> usize {
        self.at + 4 + self.data.len()
    }
}

/// The marker segments after SOI, found as libjpeg's next_marker() finds them (garbage up to
/// the next 0xFF and 0xFF fill bytes skipped, standalone markers passed over), up to and
/// including the first SOS; ends at EOI or anything malformed.
pub(crate) fn segments(bytes: &[u8]) -> impl Iterator<Item = Segment<'_>> {
    let mut pos = 2usize; // after SOI
    let mut done = false;
    std::iter::from_fn(move || loop {
        if done {
            return None;
        }
        while bytes.get(pos).is_some_and(|&b| b != 0xFF) {
            pos += 1;
        }
        while bytes.get(pos) == Some(&0xFF) && bytes.get(pos + 1) == Some(&0xFF) {
            pos += 1;
        }
        let (Some(&0xFF), Some(&marker)) = (bytes.get(pos), bytes.get(pos + 1)) else { return None };
        let at = pos;
        pos += 2;
        // Standalone markers carry no length.
        if marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            continue;
        }
        if marker == 0xD9 {
            return None;
        }
        let len = bytes.get(pos..pos + 2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize);
        let data = len.filter(|&l| l >= 2).and_then(|l| bytes.get(pos + 2..pos + l));
        if marker == 0xDA {
            done = true;
            return Some(Segment { marker, at, data: data.unwrap_or(&[]) });
        }
        let data = data?;
        pos += 2 + data.len();
        return Some(Segment { marker, at, data });
    })
}

/// Walks the marker segments of a JPEG; stops at SOS or on anything malformed.
pub(crate) fn scan_jpeg(bytes: &[u8]) -> JpegMarkers {
    let mut m = JpegMarkers::default();
    let mut exif_seen = false;
    for Segment { marker, at, data: seg } in segments(bytes) {
        match marker {
            0xDA => m.sos = Some(at),
            0xE1 if !exif_seen && seg.starts_with(b"Exif\0\0") => {
                // Pillow uses the first Exif segment; so do we.
                exif_seen = true;
                if let Some(o) = orientation_from_tiff(&seg[6..]) {
                    m.orientation = o;
                }
            }
            0xEE if seg.starts_with(b"Adobe") => m.adobe = true,
            0xDD if seg.len() >= 2 => m.restart_interval = u16::from_be_bytes([seg[0], seg[1]]),
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) && m.frame.is_none() => {
                if seg.len() >= 6 {
                    let h = u16::from_be_bytes([seg[1], seg[2]]) as usize;
                    let w = u16::from_be_bytes([seg[3], seg[4]]) as usize;
                    m.frame = Some((w, h, seg[5] as usize));
                    m.progressive = matches!(marker, 0xC2 | 0xC6 | 0xCA | 0xCE);
                    m.sof = Some(marker);
                    m.precision = seg[0];
                    for (k, c) in m.components.iter_mut().enumerate().take((seg[5] as usize).min(3)) {
                        if let Some(d) = seg.get(6 + 3 * k..8 + 3 * k) {
                            *c = (d[0], d[1]);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    m
}
