//! The coefficient path's promise: a window decoded from `read_coefficients` by the
//! arithmetic the GPU kernel uses (idct_islow, the fancy upsampling triangle filters and
//! libjpeg's YCbCr -> RGB, written out below as the kernel's specification) equals
//! libjpeg-turbo's own decode of that window bit for bit.

use std::os::raw::c_int;

mod common;

use common::{photo, Enc};
use sluice_codecs::*;
use turbojpeg_sys as tj;

/// A TurboJPEG-made JPEG with these settings.
fn jpeg(px: &[u8], w: usize, h: usize, ch: usize, subsamp: tj::TJSAMP, progressive: bool, quality: c_int) -> Vec<u8> {
    common::jpeg(px, w, h, ch, Enc { subsamp, progressive, restart_blocks: 0, quality })
}

// ------------------------------------------------- the kernel's arithmetic, on the CPU

/// libjpeg's jpeg_idct_islow (CONST_BITS 13, PASS1_BITS 2), clamping like its SIMD code.
fn idct_islow(coef: &[i16], q: &[u16; 64], out: &mut [u8], pitch: usize) {
    const FIX_0_298: i64 = 2446;
    const FIX_0_390: i64 = 3196;
    const FIX_0_541: i64 = 4433;
    const FIX_0_765: i64 = 6270;
    const FIX_0_899: i64 = 7373;
    const FIX_1_175: i64 = 9633;
    const FIX_1_501: i64 = 12299;
    const FIX_1_847: i64 = 15137;
    const FIX_1_961: i64 = 16069;
    const FIX_2_053: i64 = 16819;
    const FIX_2_562: i64 = 20995;
    const FIX_3_072: i64 = 25172;
    let descale = |x: i64, n: u32| (x + (1 << (n - 1))) >> n;
    // One 1-D pass over 8 values; `shift` is the descale of that pass.
    let pass = |v: [i64; 8], shift: u32| -> [i64; 8] {
        let (z2, z3) = (v[2], v[6]);
        let z1 = (z2 + z3) * FIX_0_541;
        let tmp2 = z1 - z3 * FIX_1_847;
        let tmp3 = z1 + z2 * FIX_0_765;
        let tmp0 = (v[0] + v[4]) << 13;
        let tmp1 = (v[0] - v[4]) << 13;
        let (tmp10, tmp13, tmp11, tmp12) = (tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2);
        let (t0, t1, t2, t3) = (v[7], v[5], v[3], v[1]);
        let (z1, z2, z3, z4) = (t0 + t3, t1 + t2, t0 + t2, t1 + t3);
        let z5 = (z3 + z4) * FIX_1_175;
        let (t0, t1, t2, t3) = (t0 * FIX_0_298, t1 * FIX_2_053, t2 * FIX_3_072, t3 * FIX_1_501);
        let (z1, z2) = (-z1 * FIX_0_899, -z2 * FIX_2_562);
        let z3 = -z3 * FIX_1_961 + z5;
        let z4 = -z4 * FIX_0_390 + z5;
        let (t0, t1, t2, t3) = (t0 + z1 + z3, t1 + z2 + z4, t2 + z2 + z3, t3 + z1 + z4);
        [
            descale(tmp10 + t3, shift),
            descale(tmp11 + t2, shift),
            descale(tmp12 + t1, shift),
            descale(tmp13 + t0, shift),
            descale(tmp13 - t0, shift),
            descale(tmp12 - t1, shift),
            descale(tmp11 - t2, shift),
            descale(tmp10 - t3, shift),
        ]
    };
    let mut ws = [0i64; 64];
    for col in 0..8 {
        let v: [i64; 8] = std::array::from_fn(|r| i64::from(coef[r * 8 + col]) * i64::from(q[r * 8 + col]));
        let o = pass(v, 13 - 2);
        for r in 0..8 {
            ws[r * 8 + col] = o[r];
        }
    }
    for row in 0..8 {
        let v: [i64; 8] = std::array::from_fn(|c| ws[row * 8 + c]);
        let o = pass(v, 13 + 2 + 3);
        for c in 0..8 {
            out[row * pitch + c] = (o[c] + 128).clamp(0, 255) as u8;
        }
    }
}

/// Decodes `window` from the coefficients as the GPU does: IDCT of every copied block into a
/// plane per component, then per output pixel the upsampled components and the colour
/// conversion.
fn finish(layout: &CoefLayout, coefs: &[i16], quant: &[[u16; 64]; 3], window: Roi) -> Vec<u8> {
    let planes: Vec<Vec<u8>> = (0..layout.components)
        .map(|c| {
            let g = &layout.comp[c];
            let pitch = g.bw * 8;
            let mut plane = vec![0u8; pitch * g.bh * 8];
            for by in 0..g.bh {
                for bx in 0..g.bw {
                    let b = g.offset + (by * g.bw + bx) * 64;
                    idct_islow(&coefs[b..b + 64], &quant[c], &mut plane[by * 8 * pitch + bx * 8..], pitch);
                }
            }
            plane
        })
        .collect();
    let sample = |c: usize, i: usize, j: usize| -> i32 {
        let g = &layout.comp[c];
        i32::from(planes[c][(j - g.by0 * 8) * g.bw * 8 + (i - g.bx0 * 8)])
    };
    let upsampled = |c: usize, x: usize, y: usize| -> i32 {
        let g = &layout.comp[c];
        match (g.h_up, g.v_up) {
            (1, 1) => sample(c, x, y),
            (2, 1) => {
                let i = x / 2;
                if x % 2 == 0 {
                    if i == 0 { sample(c, 0, y) } else { (3 * sample(c, i, y) + sample(c, i - 1, y) + 1) >> 2 }
                } else if i == g.width - 1 {
                    sample(c, i, y)
                } else {
                    (3 * sample(c, i, y) + sample(c, i + 1, y) + 2) >> 2
                }
            }
            (1, 2) => {
                let j = y / 2;
                let (jn, bias) = if y % 2 == 0 { (j.saturating_sub(1), 1) } else { ((j + 1).min(g.height - 1), 2) };
                (3 * sample(c, x, j) + sample(c, x, jn) + bias) >> 2
            }
            (2, 2) => {
                let j = y / 2;
                let jn = if y % 2 == 0 { j.saturating_sub(1) } else { (j + 1).min(g.height - 1) };
                let colsum = |i: usize| 3 * sample(c, i, j) + sample(c, i, jn);
                let i = x / 2;
                if x % 2 == 0 {
                    if i == 0 { (colsum(0) * 4 + 8) >> 4 } else { (3 * colsum(i) + colsum(i - 1) + 8) >> 4 }
                } else if i == g.width - 1 {
                    (colsum(i) * 4 + 7) >> 4
                } else {
                    (3 * colsum(i) + colsum(i + 1) + 7) >> 4
                }
            }
            _ => unreachable!(),
        }
    };
    let mut out = Vec::with_capacity(window.width * window.height * 3);
    for y in window.y..window.y + window.height {
        for x in window.x..window.x + window.width {
            let yy = upsampled(0, x, y);
            if layout.components == 1 {
                out.extend_from_slice(&[yy as u8; 3]);
                continue;
            }
            let (cb, cr) = (upsampled(1, x, y) - 128, upsampled(2, x, y) - 128);
            let r = yy + ((91881 * cr + 32768) >> 16);
            let gr = yy + ((-22554 * cb + 32768 - 46802 * cr) >> 16);
            let b = yy + ((116130 * cb + 32768) >> 16);
            out.extend_from_slice(&[r.clamp(0, 255) as u8, gr.clamp(0, 255) as u8, b.clamp(0, 255) as u8]);
        }
    }
    out
}

fn check(bytes: &[u8], window: Roi, what: &str) {
    let info = read_info(bytes).unwrap();
    let layout = coefficient_layout(bytes, &info, window).unwrap_or_else(|| panic!("{what}: no layout"));
    let mut coefs = vec![0i16; layout.coefficients];
    let mut quant = [[0u16; 64]; 3];
    assert!(read_coefficients(bytes, &info, &layout, &mut coefs, &mut quant), "{what}: read failed");
    let got = finish(&layout, &coefs, &quant, window);
    let p = DecodeParams { roi: Some(window), ..DecodeParams::default() };
    let mut want = vec![0u8; window.width * window.height * 3];
    decode_into(bytes, &info, &p, &mut want).unwrap();
    if got != want {
        let bad = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
        let px = bad / 3;
        panic!(
            "{what}: window {window:?} differs first at pixel ({}, {}) channel {}: {} vs libjpeg {} ({} of {} values differ)",
            window.x + px % window.width,
            window.y + px / window.width,
            bad % 3,
            got[bad],
            want[bad],
            got.iter().zip(&want).filter(|(a, b)| a != b).count(),
            got.len()
        );
    }
}

const SAMPLINGS: [(tj::TJSAMP, &str); 5] = [
    (tj::TJSAMP_TJSAMP_420, "4:2:0"),
    (tj::TJSAMP_TJSAMP_422, "4:2:2"),
    (tj::TJSAMP_TJSAMP_444, "4:4:4"),
    (tj::TJSAMP_TJSAMP_440, "4:4:0"),
    (tj::TJSAMP_TJSAMP_GRAY, "gray"),
];

#[test]
fn whole_images_match_libjpeg_turbo_bit_for_bit() {
    for (i, &(w, h)) in [(64, 48), (37, 29), (250, 187), (301, 199), (9, 17), (500, 375)].iter().enumerate() {
        let px = photo(w, h, i as u32 + 1);
        for &(s, name) in &SAMPLINGS {
            for progressive in [false, true] {
                for quality in [50, 95] {
                    let ch = if s == tj::TJSAMP_TJSAMP_GRAY { 1 } else { 3 };
                    let src = if ch == 1 { px.chunks_exact(3).map(|p| p[1]).collect() } else { px.clone() };
                    let bytes = jpeg(&src, w, h, ch, s, progressive, quality);
                    let what = format!("{w}x{h} {name} progressive={progressive} q{quality}");
                    check(&bytes, Roi { x: 0, y: 0, width: w, height: h }, &what);
                }
            }
        }
    }
}

#[test]
fn windows_match_libjpeg_turbo_bit_for_bit() {
    let (w, h) = (333, 251);
    let px = photo(w, h, 7);
    let mut s = 12345u32;
    let mut next = |n: usize| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s as usize % n
    };
    for &(samp, name) in &SAMPLINGS {
        let ch = if samp == tj::TJSAMP_TJSAMP_GRAY { 1 } else { 3 };
        let src: Vec<u8> = if ch == 1 { px.chunks_exact(3).map(|p| p[0]).collect() } else { px.clone() };
        let bytes = jpeg(&src, w, h, ch, samp, false, 90);
        let mut windows = vec![
            Roi { x: 0, y: 0, width: 1, height: 1 },
            Roi { x: w - 1, y: h - 1, width: 1, height: 1 },
            Roi { x: 15, y: 15, width: 2, height: 2 },
            Roi { x: 16, y: 16, width: 17, height: 9 },
            Roi { x: 1, y: 3, width: w - 2, height: h - 4 },
        ];
        for _ in 0..40 {
            let (x, y) = (next(w), next(h));
            windows.push(Roi { x, y, width: 1 + next(w - x), height: 1 + next(h - y) });
        }
        for r in windows {
            check(&bytes, r, name);
        }
    }
}

#[test]
fn layout_covers_the_window_and_its_filter_context() {
    let bytes = jpeg(&photo(100, 60, 3), 100, 60, 3, tj::TJSAMP_TJSAMP_420, false, 90);
    let info = read_info(&bytes).unwrap();
    let l = coefficient_layout(&bytes, &info, Roi { x: 40, y: 20, width: 10, height: 10 }).unwrap();
    assert_eq!(l.components, 3);
    // Luma: columns 40..49 -> blocks 5..6, rows 20..29 -> blocks 2..3.
    assert_eq!((l.comp[0].bx0, l.comp[0].bw, l.comp[0].by0, l.comp[0].bh), (5, 2, 2, 2));
    // Chroma (50x30 samples): columns 19..25 -> blocks 2..3, rows 9..15 -> block 1.
    assert_eq!((l.comp[1].width, l.comp[1].height, l.comp[1].h_up, l.comp[1].v_up), (50, 30, 2, 2));
    assert_eq!((l.comp[1].bx0, l.comp[1].bw, l.comp[1].by0, l.comp[1].bh), (2, 2, 1, 1));
    assert_eq!(l.comp[2].offset, l.comp[1].offset + 2 * 64);
    assert_eq!(l.coefficients, (4 + 2 + 2) * 64);
}

#[test]
fn files_outside_the_path_get_no_layout_or_fall_back() {
    let px = photo(64, 48, 5);
    let full = Roi { x: 0, y: 0, width: 64, height: 48 };
    // 4:1:1 chroma (quarter width) is not reproduced: no layout.
    let s411 = jpeg(&px, 64, 48, 3, tj::TJSAMP_TJSAMP_411, false, 90);
    assert!(coefficient_layout(&s411, &read_info(&s411).unwrap(), full).is_none());
    // A PNG is not a JPEG.
    let info = read_info(&jpeg(&px, 64, 48, 3, tj::TJSAMP_TJSAMP_420, false, 90)).unwrap();
    let png_info = ImageInfo { format: ImageFormat::Png, ..info };
    assert!(coefficient_layout(b"\x89PNG", &png_info, full).is_none());
    // A truncated file has a layout (the header is intact) but reading it reports damage,
    // so the caller decodes it the ordinary way, which names the defect.
    let good = jpeg(&px, 64, 48, 3, tj::TJSAMP_TJSAMP_420, false, 90);
    let cut = &good[..good.len() * 2 / 3];
    let l = coefficient_layout(cut, &info, full).unwrap();
    let mut coefs = vec![0i16; l.coefficients];
    assert!(!read_coefficients(cut, &info, &l, &mut coefs, &mut [[0; 64]; 3]));
    assert!(decode_into(cut, &info, &DecodeParams::default(), &mut vec![0; 64 * 48 * 3]).is_err());
    // And the reader is usable again afterwards.
    let l = coefficient_layout(&good, &info, full).unwrap();
    assert!(read_coefficients(&good, &info, &l, &mut coefs, &mut [[0; 64]; 3]));
}

#[test]
fn sequential_files_are_read_only_down_to_the_window() {
    // A baseline file cut at two thirds: a window near the top needs no byte past the cut,
    // so its coefficients read cleanly (and decode exactly as libjpeg-turbo's cropped decode
    // does); a window at the bottom runs into the cut and reports damage.
    let (w, h) = (200, 240);
    let good = jpeg(&photo(w, h, 11), w, h, 3, tj::TJSAMP_TJSAMP_420, false, 90);
    let cut = &good[..good.len() * 2 / 3];
    let info = read_info(&good).unwrap();
    let top = Roi { x: 10, y: 0, width: 120, height: 40 };
    let l = coefficient_layout(cut, &info, top).unwrap();
    let mut coefs = vec![0i16; l.coefficients];
    assert!(read_coefficients(cut, &info, &l, &mut coefs, &mut [[0; 64]; 3]));
    check(&good, top, "top window");
    let bottom = Roi { x: 10, y: h - 40, width: 120, height: 40 };
    let l = coefficient_layout(cut, &info, bottom).unwrap();
    let mut coefs = vec![0i16; l.coefficients];
    assert!(!read_coefficients(cut, &info, &l, &mut coefs, &mut [[0; 64]; 3]));
    // Progressive files need every scan: even the top window of a cut one is damage.
    let prog = jpeg(&photo(w, h, 11), w, h, 3, tj::TJSAMP_TJSAMP_420, true, 90);
    let cut = &prog[..prog.len() * 2 / 3];
    let l = coefficient_layout(cut, &info, top).unwrap();
    let mut coefs = vec![0i16; l.coefficients];
    assert!(!read_coefficients(cut, &info, &l, &mut coefs, &mut [[0; 64]; 3]));
}
