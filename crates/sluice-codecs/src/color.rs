//! Pixel colour conversions done outside libjpeg-turbo.

use crate::ColorSpace;

/// BT.601 luma as DALI computes it: float weights, rounded to nearest.
#[inline]
pub(crate) fn luma(r: u8, g: u8, b: u8) -> u8 {
    let y = 0.299f32 * r as f32 + 0.587f32 * g as f32 + 0.114f32 * b as f32;
    y.round_ties_even().clamp(0.0, 255.0) as u8
}

#[inline]
fn sat(v: f32) -> u8 {
    v.round_ties_even().clamp(0.0, 255.0) as u8
}

/// BT.601 limited-range RGB -> YCbCr, DALI's definition of its YCbCr output (checked
/// against DALI's decoder on 4096 random pixels).
#[inline]
pub(crate) fn ycbcr(r: u8, g: u8, b: u8) -> [u8; 3] {
    let (r, g, b) = (r as f32, g as f32, b as f32);
    [
        sat((65.481 * r + 128.553 * g + 24.966 * b) / 255.0 + 16.0),
        sat((-37.797 * r - 74.203 * g + 112.0 * b) / 255.0 + 128.0),
        sat((112.0 * r - 93.786 * g - 18.214 * b) / 255.0 + 128.0),
    ]
}

/// Converts packed RGB triplets to YCbCr in place.
pub(crate) fn rgb_to_ycbcr_in_place(buf: &mut [u8]) {
    for px in buf.chunks_exact_mut(3) {
        let v = ycbcr(px[0], px[1], px[2]);
        px.copy_from_slice(&v);
    }
}

/// Pillow's CMYK -> RGB (`cmyk2rgb`): channel = (255-ink)*(255-k)/255 with its rounding.
/// `adobe` files store the inks inverted (0 = full ink), as Photoshop writes them.
#[inline]
fn cmyk_to_rgb(px: &[u8], adobe: bool) -> [u8; 3] {
    let inv = |v: u8| if adobe { 255 - v } else { v };
    let nk = 255 - inv(px[3]) as u32;
    let f = |c: u8| {
        let t = inv(c) as u32 * nk + 128;
        (nk - (((t >> 8) + t) >> 8)) as u8
    };
    [f(px[0]), f(px[1]), f(px[2])]
}

/// How the channels of a packed source buffer are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA.
    Plain(usize),
    /// 4 channels of CMYK.
    Cmyk { adobe: bool },
}

impl Src {
    pub(crate) fn channels(self) -> usize {
        match self {
            Src::Plain(c) => c,
            Src::Cmyk { .. } => 4,
        }
    }
}

/// Converts packed pixels of `src` into packed pixels of `color` in `dst`.
/// `AnyData` copies the stored channels as they are.
pub(crate) fn convert(src: &[u8], kind: Src, color: ColorSpace, dst: &mut [u8]) {
    let sc = kind.channels();
    if color == ColorSpace::AnyData {
        dst.copy_from_slice(src);
        return;
    }
    let rgb = |p: &[u8]| -> [u8; 3] {
        match kind {
            Src::Plain(1) | Src::Plain(2) => [p[0], p[0], p[0]],
            Src::Plain(_) => [p[0], p[1], p[2]],
            Src::Cmyk { adobe } => cmyk_to_rgb(p, adobe),
        }
    };
    match color {
        ColorSpace::Gray => {
            for (d, p) in dst.iter_mut().zip(src.chunks_exact(sc)) {
                *d = match kind {
                    Src::Plain(1) | Src::Plain(2) => p[0],
                    _ => {
                        let [r, g, b] = rgb(p);
                        luma(r, g, b)
                    }
                };
            }
        }
        _ => {
            for (d, p) in dst.chunks_exact_mut(3).zip(src.chunks_exact(sc)) {
                let [r, g, b] = rgb(p);
                let v = match color {
                    ColorSpace::Bgr => [b, g, r],
                    ColorSpace::YCbCr => ycbcr(r, g, b),
                    _ => [r, g, b],
                };
                d.copy_from_slice(&v);
            }
        }
    }
}
