//! End-to-end promises of sluice-codecs, on images generated at test time.

use std::io::Cursor;

mod common;

use common::{jpeg, Enc};
use sluice_codecs::*;
use turbojpeg_sys as tj;

// ---------------------------------------------------------------- fixtures

/// A smooth colour image with some texture: JPEG reproduces it closely, and corners/edges are
/// all distinct so any wrong flip or transpose shows.
fn synth(w: usize, h: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let r = (x * 255 / w.max(1)) as u8;
            let g = (y * 255 / h.max(1)) as u8;
            let b = (128.0 + 90.0 * ((x as f32 / 9.0).sin() * (y as f32 / 13.0).cos())) as u8;
            v.extend_from_slice(&[r, g, b]);
        }
    }
    v
}

fn gray_of(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3).map(|p| ((p[0] as u32 + 2 * p[1] as u32 + p[2] as u32) / 4) as u8).collect()
}

const S444: tj::TJSAMP = tj::TJSAMP_TJSAMP_444;
const S422: tj::TJSAMP = tj::TJSAMP_TJSAMP_422;
const S420: tj::TJSAMP = tj::TJSAMP_TJSAMP_420;
const SGRAY: tj::TJSAMP = tj::TJSAMP_TJSAMP_GRAY;

fn enc(subsamp: tj::TJSAMP) -> Enc {
    Enc { subsamp, progressive: false, restart_blocks: 0, quality: 95 }
}

/// Inserts an APP1 Exif segment carrying `orientation` right after SOI.
fn with_exif(jpeg: &[u8], orientation: u16, big_endian: bool) -> Vec<u8> {
    let mut tiff = Vec::new();
    let p16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&if big_endian { x.to_be_bytes() } else { x.to_le_bytes() });
    let p32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&if big_endian { x.to_be_bytes() } else { x.to_le_bytes() });
    tiff.extend_from_slice(if big_endian { b"MM" } else { b"II" });
    p16(&mut tiff, 42);
    p32(&mut tiff, 8);
    p16(&mut tiff, 2); // two entries: an unrelated one first
    p16(&mut tiff, 0x010F); // Make, ASCII, offset to nowhere in particular
    p16(&mut tiff, 2);
    p32(&mut tiff, 4);
    tiff.extend_from_slice(b"abc\0");
    p16(&mut tiff, 0x0112);
    p16(&mut tiff, 3);
    p32(&mut tiff, 1);
    p16(&mut tiff, orientation);
    p16(&mut tiff, 0);
    p32(&mut tiff, 0);
    app1(jpeg, &tiff)
}

fn app1(jpeg: &[u8], tiff: &[u8]) -> Vec<u8> {
    let mut seg = b"Exif\0\0".to_vec();
    seg.extend_from_slice(tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&((seg.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&seg);
    out.extend_from_slice(&jpeg[2..]);
    out
}

fn params(color: ColorSpace) -> DecodeParams {
    DecodeParams { color, ..DecodeParams::default() }
}

fn dec(bytes: &[u8], p: &DecodeParams) -> (Vec<u8>, (usize, usize, usize)) {
    decode(bytes, p).unwrap_or_else(|e| panic!("decode failed: {e}"))
}

fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(&x, &y)| (x as i32 - y as i32).abs() as f64).sum::<f64>() / a.len() as f64
}

/// Crops an HWC image.
fn crop(img: &[u8], w: usize, c: usize, r: Roi) -> Vec<u8> {
    let mut v = Vec::new();
    for y in r.y..r.y + r.height {
        v.extend_from_slice(&img[(y * w + r.x) * c..(y * w + r.x + r.width) * c]);
    }
    v
}

/// Reference orientation, written as the PIL operations exif_transpose applies.
fn orient_ref(img: &[u8], w: usize, h: usize, c: usize, o: u16) -> (Vec<u8>, usize, usize) {
    let px = |x: usize, y: usize| &img[(y * w + x) * c..(y * w + x + 1) * c];
    let (ow, oh) = if o >= 5 { (h, w) } else { (w, h) };
    let mut out = Vec::with_capacity(img.len());
    for y in 0..oh {
        for x in 0..ow {
            let (sx, sy) = match o {
                1 => (x, y),
                2 => (w - 1 - x, y),         // FLIP_LEFT_RIGHT
                3 => (w - 1 - x, h - 1 - y), // ROTATE_180
                4 => (x, h - 1 - y),         // FLIP_TOP_BOTTOM
                5 => (y, x),                 // TRANSPOSE
                6 => (y, h - 1 - x),         // ROTATE_270 (i.e. 90 clockwise)
                7 => (w - 1 - y, h - 1 - x), // TRANSVERSE
                8 => (w - 1 - y, x),         // ROTATE_90 (counter-clockwise)
                _ => unreachable!(),
            };
            out.extend_from_slice(px(sx, sy));
        }
    }
    (out, ow, oh)
}

// ---------------------------------------------------------------- format sniffing

#[test]
fn sniffs_magic_bytes() {
    let src = synth(16, 16);
    assert_eq!(sniff_format(&jpeg(&src, 16, 16, 3, enc(S420))), Some(ImageFormat::Jpeg));
    for (f, fmt) in [
        (image::ImageFormat::Png, ImageFormat::Png),
        (image::ImageFormat::Bmp, ImageFormat::Bmp),
        (image::ImageFormat::Tiff, ImageFormat::Tiff),
        (image::ImageFormat::Pnm, ImageFormat::Pnm),
        (image::ImageFormat::WebP, ImageFormat::Webp),
    ] {
        assert_eq!(sniff_format(&encode_rgb(&src, 16, 16, f)), Some(fmt), "{fmt:?}");
    }
    assert_eq!(sniff_format(b"GIF89a......"), None);
    assert_eq!(sniff_format(b""), None);
    let e = read_info(b"GIF89a......").unwrap_err();
    assert!(e.to_string().contains("unsupported format"), "{e}");
}

// ---------------------------------------------------------------- JPEG fidelity

#[test]
fn jpeg_roundtrip_each_variant() {
    let (w, h) = (123, 77); // not multiples of the MCU size
    let src = synth(w, h);
    let variants = [
        ("444", enc(S444)),
        ("422", enc(S422)),
        ("420", enc(S420)),
        ("progressive", Enc { progressive: true, ..enc(S420) }),
        ("restart", Enc { restart_blocks: 4, ..enc(S420) }),
        ("progressive444", Enc { progressive: true, ..enc(S444) }),
    ];
    for (name, e) in variants {
        let j = jpeg(&src, w, h, 3, e);
        let info = read_info(&j).unwrap();
        assert_eq!((info.format, info.width, info.height, info.channels), (ImageFormat::Jpeg, w, h, 3), "{name}");
        assert_eq!(info.orientation, Orientation::Normal);
        let (out, shape) = dec(&j, &params(ColorSpace::Rgb));
        assert_eq!(shape, (h, w, 3));
        let d = mean_abs_diff(&out, &src);
        assert!(d < 2.5, "{name}: mean abs diff {d}");
        // Same pixels with a reused handle, and BGR is the exact channel swap.
        let (again, _) = dec(&j, &params(ColorSpace::Rgb));
        assert_eq!(out, again, "{name}: decode not deterministic");
        let (bgr, _) = dec(&j, &params(ColorSpace::Bgr));
        let swapped: Vec<u8> = out.chunks_exact(3).flat_map(|p| [p[2], p[1], p[0]]).collect();
        assert_eq!(bgr, swapped, "{name}");
    }
}

#[test]
fn restart_markers_are_really_present_and_decode_identically() {
    let (w, h) = (64, 48);
    let src = synth(w, h);
    let plain = jpeg(&src, w, h, 3, enc(S420));
    let rst = jpeg(&src, w, h, 3, Enc { restart_blocks: 2, ..enc(S420) });
    assert!(rst.windows(2).any(|p| p[0] == 0xFF && (0xD0..=0xD7).contains(&p[1])));
    assert!(rst.windows(2).any(|p| p == [0xFF, 0xDD]), "no DRI marker");
    assert_eq!(dec(&plain, &DecodeParams::default()).0, dec(&rst, &DecodeParams::default()).0);
}

#[test]
fn grayscale_jpeg() {
    let (w, h) = (50, 37);
    let src = gray_of(&synth(w, h));
    let j = jpeg(&src, w, h, 1, enc(SGRAY));
    let info = read_info(&j).unwrap();
    assert_eq!(info.channels, 1);
    let (any, shape) = dec(&j, &params(ColorSpace::AnyData));
    assert_eq!(shape, (h, w, 1));
    assert!(mean_abs_diff(&any, &src) < 1.5);
    let (gray, _) = dec(&j, &params(ColorSpace::Gray));
    assert_eq!(gray, any);
    let (rgb, shape) = dec(&j, &params(ColorSpace::Rgb));
    assert_eq!(shape, (h, w, 3));
    assert!(rgb.chunks_exact(3).zip(&any).all(|(p, &g)| p == [g, g, g]), "gray must replicate");
    // Gray -> YCbCr: Y is the gray value in studio range, chroma is neutral.
    let (ycc, _) = dec(&j, &params(ColorSpace::YCbCr));
    assert!(ycc
        .chunks_exact(3)
        .zip(&any)
        .all(|(p, &g)| p == [(g as f32 * 219.0 / 255.0 + 16.0).round_ties_even() as u8, 128, 128]));
}

#[test]
fn jpeg_color_conversions() {
    let (w, h) = (40, 24);
    let src = synth(w, h);
    let j = jpeg(&src, w, h, 3, enc(S444));
    let (rgb, _) = dec(&j, &params(ColorSpace::Rgb));
    // AnyData of a colour JPEG is its RGB.
    let (any, shape) = dec(&j, &params(ColorSpace::AnyData));
    assert_eq!((shape.2, &any), (3, &rgb));
    // Gray is libjpeg's Y; it agrees with the BT.601 luma of the RGB pixels to rounding.
    let (gray, shape) = dec(&j, &params(ColorSpace::Gray));
    assert_eq!(shape, (h, w, 1));
    for (p, &g) in rgb.chunks_exact(3).zip(&gray) {
        let l = 0.299 * p[0] as f32 + 0.587 * p[1] as f32 + 0.114 * p[2] as f32;
        assert!((l - g as f32).abs() <= 2.0, "luma {l} vs Y {g}");
    }
    // YCbCr is BT.601 limited range from the RGB pixels, as DALI produces it.
    let (ycc, _) = dec(&j, &params(ColorSpace::YCbCr));
    for (p, q) in rgb.chunks_exact(3).zip(ycc.chunks_exact(3)) {
        let (r, g, b) = (p[0] as f32, p[1] as f32, p[2] as f32);
        let want = [
            16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0,
            128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0,
            128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0,
        ];
        for k in 0..3 {
            assert!((want[k].clamp(0.0, 255.0) - q[k] as f32).abs() <= 0.5 + 1e-3, "{want:?} vs {q:?}");
        }
    }
}

// ---------------------------------------------------------------- ROI and scaling

#[test]
fn roi_equals_region_of_full_decode() {
    let (w, h) = (203, 145);
    let src = synth(w, h);
    let rois = [
        Roi { x: 0, y: 0, width: 10, height: 10 },
        Roi { x: 1, y: 3, width: 57, height: 40 },
        Roi { x: 17, y: 9, width: 100, height: 100 },
        Roi { x: 33, y: 61, width: 1, height: 1 },
        Roi { x: 0, y: 0, width: 203, height: 145 },
        Roi { x: 150, y: 100, width: 53, height: 45 }, // touches the right and bottom edges
    ];
    let kinds = [
        enc(S444),
        enc(S422),
        enc(S420),
        Enc { progressive: true, ..enc(S420) },
        Enc { restart_blocks: 3, ..enc(S422) },
    ];
    for e in kinds {
        let j = jpeg(&src, w, h, 3, e);
        for denom in [1u32, 2, 4, 8] {
            for color in [ColorSpace::Rgb, ColorSpace::Gray] {
                let full_p = DecodeParams { color, scale_denom: denom, ..DecodeParams::default() };
                let (full, (fh, fw, c)) = dec(&j, &full_p);
                for r in rois {
                    let r = Roi {
                        x: r.x.min(fw - 1) / denom as usize,
                        y: r.y.min(fh - 1) / denom as usize,
                        width: (r.width / denom as usize).max(1),
                        height: (r.height / denom as usize).max(1),
                    };
                    let r = Roi { width: r.width.min(fw - r.x), height: r.height.min(fh - r.y), ..r };
                    let p = DecodeParams { roi: Some(r), ..full_p };
                    let (part, shape) = dec(&j, &p);
                    assert_eq!(shape, (r.height, r.width, c));
                    let want = crop(&full, fw, c, r);
                    if part != want {
                        let bad: Vec<usize> = (0..want.len()).filter(|&i| want[i] != part[i]).map(|i| i / c).collect();
                        let xs: std::collections::BTreeSet<usize> = bad.iter().map(|i| i % r.width).collect();
                        let ys: std::collections::BTreeSet<usize> = bad.iter().map(|i| i / r.width).collect();
                        panic!("ROI {r:?} denom {denom} {color:?} subsamp {} differs at cols {xs:?} rows {ys:?}", e.subsamp);
                    }
                }
            }
        }
    }
}

#[test]
fn scaled_shape_is_ceil() {
    let (w, h) = (101, 77);
    let src = synth(w, h);
    for e in [enc(S420), enc(S444), Enc { progressive: true, ..enc(S422) }] {
        let j = jpeg(&src, w, h, 3, e);
        let info = read_info(&j).unwrap();
        let (full, _) = dec(&j, &params(ColorSpace::Gray));
        for d in [1u32, 2, 4, 8] {
            let p = DecodeParams { scale_denom: d, ..DecodeParams::default() };
            let want = (h.div_ceil(d as usize), w.div_ceil(d as usize), 3);
            assert_eq!(info.output_shape(&p), want);
            let (_, shape) = dec(&j, &p);
            assert_eq!(shape, want);
            // The downscaled image still looks like the full one (block means of luma).
            let p = DecodeParams { color: ColorSpace::Gray, ..p };
            let want = (want.0, want.1, 1);
            let (out, shape) = dec(&j, &p);
            assert_eq!(shape, want);
            let ds = d as usize;
            let mut err = 0.0;
            for y in 0..h / ds {
                for x in 0..w / ds {
                    let mut s = 0.0;
                    for yy in 0..ds {
                        for xx in 0..ds {
                            s += full[(y * ds + yy) * w + x * ds + xx] as f64;
                        }
                    }
                    err += (s / (ds * ds) as f64 - out[y * want.1 + x] as f64).abs();
                }
            }
            let err = err / ((h / ds) * (w / ds)) as f64;
            assert!(err < 2.0, "denom {d}: block mean error {err}");
        }
    }
}

#[test]
fn invalid_params_are_rejected() {
    let src = synth(32, 16);
    let j = jpeg(&src, 32, 16, 3, enc(S420));
    let info = read_info(&j).unwrap();
    let mut buf = vec![0u8; 32 * 16 * 3];
    let bad_roi = DecodeParams { roi: Some(Roi { x: 30, y: 0, width: 4, height: 1 }), ..DecodeParams::default() };
    let mut b = vec![0u8; 12];
    let e = decode_into(&j, &info, &bad_roi, &mut b).unwrap_err();
    assert!(e.to_string().contains("invalid ROI"), "{e}");
    let empty = DecodeParams { roi: Some(Roi { x: 0, y: 0, width: 0, height: 1 }), ..DecodeParams::default() };
    assert!(decode_into(&j, &info, &empty, &mut []).is_err());
    let e = decode_into(&j, &info, &DecodeParams::default(), &mut buf[1..]).unwrap_err();
    assert!(e.to_string().contains("output buffer"), "{e}");
    let bad_scale = DecodeParams { scale_denom: 3, ..DecodeParams::default() };
    assert!(decode_into(&j, &info, &bad_scale, &mut buf).is_err());
    let png = encode_rgb(&src, 32, 16, image::ImageFormat::Png);
    let pinfo = read_info(&png).unwrap();
    let half = DecodeParams { scale_denom: 2, ..DecodeParams::default() };
    let e = decode_into(&png, &pinfo, &half, &mut buf[..16 * 8 * 3]).unwrap_err();
    assert!(e.to_string().contains("only supported for JPEG"), "{e}");
    // ImageInfo of another image must not be trusted.
    let other = jpeg(&synth(16, 16), 16, 16, 3, enc(S420));
    assert!(decode_into(&other, &info, &DecodeParams::default(), &mut buf).is_err());
    assert!(decode_into(&png, &info, &DecodeParams::default(), &mut buf).is_err());
}

// ---------------------------------------------------------------- EXIF orientation

#[test]
fn exif_orientation_all_eight() {
    let (w, h) = (48, 32);
    let src = synth(w, h);
    for e in [enc(S420), enc(S444)] {
        let base = jpeg(&src, w, h, 3, e);
        let (stored, _) = dec(&base, &DecodeParams::default());
        for o in 1u16..=8 {
            for be in [false, true] {
                let j = with_exif(&base, o, be);
                let info = read_info(&j).unwrap();
                assert_eq!(info.orientation.to_exif() as u16, o);
                assert_eq!((info.width, info.height), (w, h), "info is as stored");
                let (want, ow, oh) = orient_ref(&stored, w, h, 3, o);
                let (got, shape) = dec(&j, &DecodeParams::default());
                assert_eq!(shape, (oh, ow, 3), "orientation {o}");
                assert!(got == want, "orientation {o} big_endian {be}");
                // Turning it off returns the stored pixels.
                let off = DecodeParams { adjust_orientation: false, ..DecodeParams::default() };
                assert_eq!(dec(&j, &off).0, stored);
                // ROIs are in oriented coordinates.
                for r in [
                    Roi { x: 3, y: 5, width: 20, height: 11 },
                    Roi { x: 0, y: 0, width: ow, height: 1 },
                    Roi { x: ow - 9, y: oh - 7, width: 9, height: 7 },
                ] {
                    let p = DecodeParams { roi: Some(r), ..DecodeParams::default() };
                    assert!(dec(&j, &p).0 == crop(&want, ow, 3, r), "orientation {o} roi {r:?}");
                }
                // Scaling and gray combine with orientation.
                let p = DecodeParams { scale_denom: 2, color: ColorSpace::Gray, ..DecodeParams::default() };
                let (sg, sshape) = dec(&j, &p);
                let off2 = DecodeParams { adjust_orientation: false, ..p };
                let (sg_stored, (sh, sw, _)) = dec(&j, &off2);
                let (want2, ow2, oh2) = orient_ref(&sg_stored, sw, sh, 1, o);
                assert_eq!(sshape, (oh2, ow2, 1));
                assert_eq!(sg, want2);
            }
        }
    }
}

#[test]
fn orientation_reference_corners() {
    // Sanity check of the test's own reference. Where the stored top-left pixel ends up, per EXIF value (TL, TR, BR, BL).
    let (w, h) = (16, 8);
    let mut src = vec![0u8; w * h];
    src[0] = 255; // top-left marker
    let expect = ["TL", "TR", "BR", "BL", "TL", "TR", "BR", "BL"];
    for o in 1..=8u16 {
        let (img, _, _) = orient_ref(&src, w, h, 1, o);
        let ow = if o >= 5 { h } else { w };
        let pos = img.iter().position(|&v| v == 255).unwrap();
        let (x, y) = (pos % ow, pos / ow);
        let corner = match (x == 0, y == 0) {
            (true, true) => "TL",
            (false, true) => "TR",
            (false, false) => "BR",
            (true, false) => "BL",
        };
        assert_eq!(corner, expect[o as usize - 1], "reference for {o}");
    }
}

#[test]
fn exif_garbage_never_panics() {
    let src = synth(16, 16);
    let base = jpeg(&src, 16, 16, 3, enc(S420));
    // Hand-made nasties: offsets past the end, huge counts, wrong types, short segments.
    let nasty: Vec<Vec<u8>> = vec![
        b"II*\0\xff\xff\xff\xff".to_vec(),
        b"MM\0*\0\0\0\x08\xff\xff".to_vec(),
        b"II*\0\x08\0\0\0\xff\xff\x12\x01\x03\0\x01\0\0\0".to_vec(),
        b"II*\0\x08\0\0\0\x01\0\x12\x01\x07\0\x01\0\0\0\x06\0\0\0".to_vec(), // wrong type
        b"II*\0\x08\0\0\0\x01\0\x12\x01\x03\0\x01\0\0\0\x09\0\0\0".to_vec(), // out of range
        b"II".to_vec(),
        vec![],
    ];
    for t in &nasty {
        let j = app1(&base, t);
        let info = read_info(&j).unwrap();
        assert_eq!(info.orientation, Orientation::Normal);
        dec(&j, &DecodeParams::default());
    }
    // Pseudo-random payloads.
    let mut s = 0x1234_5678u32;
    for n in 0..300 {
        let mut t = if n % 2 == 0 { b"II*\0".to_vec() } else { b"MM\0*".to_vec() };
        for _ in 0..(n % 40) {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            t.push((s >> 24) as u8);
        }
        let j = app1(&base, &t);
        if let Ok(info) = read_info(&j) {
            let _ = decode(&j, &DecodeParams::default());
            assert!((1..=8).contains(&info.orientation.to_exif()));
        }
    }
    // A LONG-typed orientation is honoured (some writers do this).
    let long = b"II*\0\x08\0\0\0\x01\0\x12\x01\x04\0\x01\0\0\0\x06\0\0\0\0\0\0\0".to_vec();
    assert_eq!(read_info(&app1(&base, &long)).unwrap().orientation, Orientation::Rotate90);
}

// ---------------------------------------------------------------- robustness

fn assert_all_truncations_fail(name: &str, data: &[u8], cuts: &[usize]) {
    for &cut in cuts {
        let t = &data[..cut.min(data.len() - 1)];
        let r = decode(t, &DecodeParams::default());
        assert!(r.is_err(), "{name}: truncated to {} of {} bytes decoded", t.len(), data.len());
    }
}

#[test]
fn truncated_jpeg_is_an_error() {
    let (w, h) = (96, 80);
    let src = synth(w, h);
    for e in [enc(S420), Enc { progressive: true, ..enc(S420) }, Enc { restart_blocks: 2, ..enc(S444) }] {
        let j = jpeg(&src, w, h, 3, e);
        let n = j.len();
        let cuts: Vec<usize> = vec![0, 1, 2, 3, 10, 100, n / 3, n / 2, n * 9 / 10, n - 20, n - 3];
        assert_all_truncations_fail("jpeg", &j, &cuts);
        let e = decode(&j[..n / 2], &DecodeParams::default()).unwrap_err();
        assert!(e.to_string().contains("truncated JPEG"), "{e}");
        assert_eq!(e.kind(), ErrorKind::Truncated);
        // Also through a crop (skip_scanlines path) and through scaling.
        let info = read_info(&j[..n / 2]).unwrap();
        let p = DecodeParams { roi: Some(Roi { x: 20, y: 60, width: 30, height: 20 }), ..DecodeParams::default() };
        let mut out = vec![0u8; 30 * 20 * 3];
        assert!(decode_into(&j[..n / 2], &info, &p, &mut out).is_err());
    }
}

#[test]
fn jpeg_missing_only_eoi_still_decodes() {
    let (w, h) = (64, 40);
    let j = jpeg(&synth(w, h), w, h, 3, enc(S420));
    assert!(j.ends_with(&[0xFF, 0xD9]));
    let full = dec(&j, &DecodeParams::default()).0;
    assert_eq!(dec(&j[..j.len() - 2], &DecodeParams::default()).0, full);
}

#[test]
fn corrupt_jpeg_is_an_error() {
    let (w, h) = (96, 80);
    let j = jpeg(&synth(w, h), w, h, 3, enc(S420));
    let sos = j.windows(2).position(|p| p == [0xFF, 0xDA]).unwrap();
    // An invalid marker in the middle of the entropy-coded data.
    let mut bad = j.clone();
    let mid = sos + (j.len() - sos) / 2;
    bad[mid] = 0xFF;
    bad[mid + 1] = 0x05;
    let e = decode(&bad, &DecodeParams::default()).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("JPEG"), "{e}");
    // Frame header with zero height.
    let mut bad = j.clone();
    let sof = j.windows(2).position(|p| p == [0xFF, 0xC0]).unwrap();
    bad[sof + 5] = 0;
    bad[sof + 6] = 0;
    assert!(read_info(&bad).is_err());
    // Garbage after SOI; tables-only stream.
    assert!(read_info(&[0xFF, 0xD8, 0xFF, 0x00, 0x01, 0x02]).is_err());
    assert!(read_info(&[0xFF, 0xD8, 0xFF, 0xD9]).is_err());
    // Random byte flips: Ok or Err, never a panic.
    let mut s = 99u32;
    for _ in 0..300 {
        let mut m = j.clone();
        for _ in 0..4 {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let i = (s as usize >> 8) % m.len();
            m[i] = (s >> 3) as u8;
        }
        let _ = decode(&m, &DecodeParams::default());
        let _ = decode(&m, &DecodeParams { scale_denom: 4, color: ColorSpace::Gray, ..DecodeParams::default() });
    }
}

#[test]
fn hostile_dimensions_are_refused_before_allocation() {
    let j = jpeg(&synth(16, 16), 16, 16, 3, enc(S420));
    let sof = j.windows(2).position(|p| p == [0xFF, 0xC0]).unwrap();
    let mut big = j.clone();
    big[sof + 5..sof + 9].copy_from_slice(&[0xFF, 0xF0, 0xFF, 0xF0]); // 65520 x 65520
    let e = read_info(&big).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");
    // PNG header claiming 60000 x 60000 RGBA (beyond the byte limit).
    let mut png = encode_rgb(&synth(4, 4), 4, 4, image::ImageFormat::Png);
    png[16..24].copy_from_slice(&[0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60]);
    assert!(read_info(&png).is_err());
}

// ---------------------------------------------------------------- other formats

fn encode_rgb(px: &[u8], w: usize, h: usize, f: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbImage::from_raw(w as u32, h as u32, px.to_vec()).unwrap();
    let mut c = Cursor::new(Vec::new());
    if f == image::ImageFormat::WebP {
        image::codecs::webp::WebPEncoder::new_lossless(&mut c)
            .encode(&img, w as u32, h as u32, image::ExtendedColorType::Rgb8)
            .unwrap();
    } else {
        img.write_to(&mut c, f).unwrap();
    }
    c.into_inner()
}

fn encode_gray(px: &[u8], w: usize, h: usize) -> Vec<u8> {
    let img = image::GrayImage::from_raw(w as u32, h as u32, px.to_vec()).unwrap();
    let mut c = Cursor::new(Vec::new());
    img.write_to(&mut c, image::ImageFormat::Png).unwrap();
    c.into_inner()
}

#[test]
fn lossless_formats_roundtrip_exactly() {
    let (w, h) = (37, 23);
    let src = synth(w, h);
    for f in [
        image::ImageFormat::Png,
        image::ImageFormat::Bmp,
        image::ImageFormat::Tiff,
        image::ImageFormat::Pnm,
        image::ImageFormat::WebP,
    ] {
        let data = encode_rgb(&src, w, h, f);
        let info = read_info(&data).unwrap();
        assert_eq!((info.width, info.height, info.channels), (w, h, 3), "{f:?}");
        let (out, shape) = dec(&data, &DecodeParams::default());
        assert_eq!(shape, (h, w, 3));
        assert!(out == src, "{f:?} not exact");
        // ROI and BGR on the same path.
        let r = Roi { x: 5, y: 7, width: 11, height: 13 };
        let p = DecodeParams { roi: Some(r), color: ColorSpace::Bgr, ..DecodeParams::default() };
        let want: Vec<u8> = crop(&src, w, 3, r).chunks_exact(3).flat_map(|p| [p[2], p[1], p[0]]).collect();
        assert_eq!(dec(&data, &p).0, want, "{f:?}");
    }
}

#[test]
fn png_channel_layouts() {
    let (w, h) = (9, 5);
    let rgb = synth(w, h);
    let rgba: Vec<u8> = rgb.chunks_exact(3).enumerate().flat_map(|(i, p)| [p[0], p[1], p[2], (i * 7) as u8]).collect();
    let mut c = Cursor::new(Vec::new());
    image::RgbaImage::from_raw(w as u32, h as u32, rgba.clone()).unwrap().write_to(&mut c, image::ImageFormat::Png).unwrap();
    let png = c.into_inner();
    assert_eq!(read_info(&png).unwrap().channels, 4);
    let (any, shape) = dec(&png, &params(ColorSpace::AnyData));
    assert_eq!((shape, &any), ((h, w, 4), &rgba), "AnyData keeps alpha");
    assert_eq!(dec(&png, &params(ColorSpace::Rgb)).0, rgb, "RGB drops alpha");
    // Gray from colour is BT.601 luma, rounded.
    let (g, shape) = dec(&png, &params(ColorSpace::Gray));
    assert_eq!(shape, (h, w, 1));
    for (p, &v) in rgb.chunks_exact(3).zip(&g) {
        let l = 0.299f32 * p[0] as f32 + 0.587f32 * p[1] as f32 + 0.114f32 * p[2] as f32;
        assert!((l - v as f32).abs() <= 0.5 + 1e-3);
    }
    // Known YCbCr values (BT.601 limited range, as DALI): pure red/green/blue/white/black.
    let prim = [255u8, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0];
    let png = encode_rgb(&prim, 5, 1, image::ImageFormat::Png);
    let (y, _) = dec(&png, &params(ColorSpace::YCbCr));
    assert_eq!(y, vec![81, 90, 240, 145, 54, 34, 41, 240, 110, 235, 128, 128, 16, 128, 128]);

    // Gray PNG: 1 channel natively, replicated for RGB.
    let gray = gray_of(&rgb);
    let png = encode_gray(&gray, w, h);
    assert_eq!(read_info(&png).unwrap().channels, 1);
    assert_eq!(dec(&png, &params(ColorSpace::AnyData)).0, gray);
    assert_eq!(dec(&png, &params(ColorSpace::Gray)).0, gray);
    let (r3, _) = dec(&png, &params(ColorSpace::Rgb));
    assert!(r3.chunks_exact(3).zip(&gray).all(|(p, &v)| p == [v, v, v]));

    // 16-bit RGB scales to 8 bits: v * 255 / 65535, rounded.
    let v16: Vec<u16> = vec![0, 257, 65535, 32896, 128, 65278];
    let mut c = Cursor::new(Vec::new());
    image::ImageBuffer::<image::Rgb<u16>, _>::from_raw(2, 1, v16.clone()).unwrap().write_to(&mut c, image::ImageFormat::Png).unwrap();
    let png16 = c.into_inner();
    assert_eq!(read_info(&png16).unwrap().channels, 3);
    assert_eq!(dec(&png16, &DecodeParams::default()).0, vec![0, 1, 255, 128, 0, 254]);
}

#[test]
fn truncated_and_corrupt_other_formats_fail() {
    let (w, h) = (40, 30);
    let src = synth(w, h);
    for f in [image::ImageFormat::Png, image::ImageFormat::Bmp, image::ImageFormat::Tiff, image::ImageFormat::Pnm, image::ImageFormat::WebP] {
        let data = encode_rgb(&src, w, h, f);
        let n = data.len();
        assert_all_truncations_fail(&format!("{f:?}"), &data, &[0, 1, 2, 5, 12, n / 2, n - 10]);
        // Random corruption: never a panic.
        let mut s = 7u32;
        for _ in 0..200 {
            let mut m = data.clone();
            for _ in 0..3 {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let i = (s as usize >> 8) % n;
                m[i] = (s >> 5) as u8;
            }
            let _ = decode(&m, &DecodeParams::default());
        }
    }
    // A PNG with a damaged IDAT checksum.
    let mut png = encode_rgb(&src, w, h, image::ImageFormat::Png);
    let idat = png.windows(4).position(|p| p == b"IDAT").unwrap();
    png[idat + 6] ^= 0x55;
    assert!(decode(&png, &DecodeParams::default()).is_err());
}

#[test]
fn tiff_orientation_is_applied() {
    // The image crate exposes TIFF's orientation tag; check it flows through.
    let (w, h) = (6, 4);
    let src = synth(w, h);
    let mut c = Cursor::new(Vec::new());
    {
        let mut enc = tiff::encoder::TiffEncoder::new(&mut c).unwrap();
        let mut img = enc.new_image::<tiff::encoder::colortype::RGB8>(w as u32, h as u32).unwrap();
        img.encoder().write_tag(tiff::tags::Tag::Orientation, 6u16).unwrap();
        img.write_data(&src).unwrap();
    }
    let t = c.into_inner();
    let info = read_info(&t).unwrap();
    assert_eq!(info.orientation, Orientation::Rotate90);
    let (want, ow, oh) = orient_ref(&src, w, h, 3, 6);
    let (got, shape) = dec(&t, &DecodeParams::default());
    assert_eq!(shape, (oh, ow, 3));
    assert_eq!(got, want);
}

#[test]
fn a_corrupt_jpeg_does_not_poison_later_decodes_on_the_same_thread() {
    let (w, h) = (64, 48);
    let src = synth(w, h);
    let good = jpeg(&src, w, h, 3, enc(S420));
    let (want, _) = dec(&good, &params(ColorSpace::Rgb));
    // Scribble over the entropy-coded data and a marker: a fatal libjpeg error mid-decode.
    let mut bad = good.clone();
    for k in (bad.len() / 3..bad.len() - 2).step_by(7) {
        bad[k] = 0x5A;
    }
    let info = read_info(&good).unwrap();
    let mut out = vec![0u8; w * h * 3];
    for _ in 0..3 {
        let _ = read_info(&bad).and_then(|i| decode_into(&bad, &i, &params(ColorSpace::Rgb), &mut out));
        decode_into(&good, &info, &params(ColorSpace::Rgb), &mut out).expect("good JPEG after a corrupt one");
        assert_eq!(out, want);
    }
}

#[test]
fn hardware_decoder_eligibility() {
    let (w, h) = (64, 48);
    let px = synth(w, h);
    for (name, e) in [("420", enc(S420)), ("422", enc(S422)), ("444", enc(S444)), ("restarts", Enc { restart_blocks: 2, ..enc(S420) })] {
        let data = jpeg(&px, w, h, 3, e);
        assert!(jpeg_suits_hardware_decoder(&data), "{name}: baseline colour JPEG must qualify");
        // A cut file never does: the engine would decode it into garbage without an error.
        assert!(!jpeg_suits_hardware_decoder(&data[..data.len() - 40]), "{name}: truncated");
        assert!(!jpeg_suits_hardware_decoder(&data[..data.len() / 2]), "{name}: half");
    }
    let gray = jpeg(&gray_of(&px), w, h, 1, enc(tj::TJSAMP_TJSAMP_GRAY));
    assert!(!jpeg_suits_hardware_decoder(&gray), "grayscale");
    let prog = jpeg(&px, w, h, 3, Enc { progressive: true, ..enc(S420) });
    assert!(!jpeg_suits_hardware_decoder(&prog), "progressive");
    let s411 = jpeg(&px, w, h, 3, enc(tj::TJSAMP_TJSAMP_411));
    assert!(!jpeg_suits_hardware_decoder(&s411), "4:1:1");
    assert!(!jpeg_suits_hardware_decoder(b"\xFF\xD8\xFF\xD9"), "no frame");
    assert!(!jpeg_suits_hardware_decoder(&encode_rgb(&px, w, h, image::ImageFormat::Png)), "PNG");
}
