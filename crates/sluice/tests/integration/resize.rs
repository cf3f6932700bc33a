//! `fn.resize` on CPU against NVIDIA DALI 2.4 (`fn.resize`, `device_id=None`). Shapes and the
//! literal pixel arrays below were printed by DALI 2.4 for the same inputs (scripts run with
//! `fn.external_source(..., layout="HWC")`; shapes table from 6 input sizes x 15 argument sets).

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::resize::kernel::{axis_filter, resample, FilterKind, Plan};
use sluice::ops::resize::{sample_params, Mode, Sizing};
use sluice::ops::ArgValue;
use crate::common::op;

const E: fn(usize) -> Edge = |op| Edge { op, output: 0 };
const UINT8: i64 = 0;

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>, batch_size: usize) -> PipelineSpec {
    PipelineSpec { batch_size, num_threads: 2, device_id: None, seed: 7, prefetch_queue_depth: 2, exec_async: false, exec_pipelined: false, exec_dynamic: true, errors: Default::default(), ops, outputs }
}

fn image_source(shape: &[i64]) -> OpSpec {
    op("random__Uniform", "img", vec![
        ("range", ArgValue::FloatList(vec![0.0, 256.0])),
        ("shape", ArgValue::IntList(shape.to_vec())),
        ("dtype", ArgValue::Int(UINT8)),
    ])
}

/// Output [H, W] of one resize through the executor.
fn out_shape(h: usize, w: usize, args: Vec<(&str, ArgValue)>) -> Result<(usize, usize), String> {
    let mut rz = op("Resize", "rz", args);
    rz.inputs = vec![E(0)];
    let mut ex = Executor::new(&spec(vec![image_source(&[h as i64, w as i64, 1]), rz], vec![E(1)], 1)).map_err(|e| e.to_string())?;
    let out = ex.next_cpu_batch().map_err(|e| e.to_string())?;
    let s = out[0].shape(0);
    Ok((s[0], s[1]))
}

fn f(v: f64) -> ArgValue {
    ArgValue::Float(v)
}
fn fl(v: &[f64]) -> ArgValue {
    ArgValue::FloatList(v.to_vec())
}
fn s(v: &str) -> ArgValue {
    ArgValue::Str(v.into())
}

#[test]
fn output_shapes_match_dali_for_every_sizing_mode() {
    let cases: Vec<Vec<(&str, ArgValue)>> = vec![
        vec![("resize_x", f(10.0))],
        vec![("resize_y", f(13.0))],
        vec![("resize_x", f(10.0)), ("resize_y", f(7.0))],
        vec![("resize_shorter", f(11.0))],
        vec![("resize_longer", f(11.0))],
        vec![("size", fl(&[12.0, 5.0]))],
        vec![("size", fl(&[0.0, 8.0]))],
        vec![("size", fl(&[9.0, 8.0])), ("mode", s("stretch"))],
        vec![("resize_x", f(8.0)), ("mode", s("stretch"))],
        vec![("size", fl(&[9.0, 8.0])), ("mode", s("not_smaller"))],
        vec![("size", fl(&[9.0, 8.0])), ("mode", s("not_larger"))],
        vec![("resize_shorter", f(11.0)), ("max_size", fl(&[15.0]))],
        vec![("resize_x", f(7.5))],
        vec![("resize_x", f(7.5)), ("subpixel_scale", ArgValue::Bool(false))],
        vec![("size", fl(&[20.0, 30.0])), ("max_size", fl(&[25.0, 25.0]))],
    ];
    // Printed by DALI 2.4: one row per input (H, W), one entry per case above.
    #[rustfmt::skip]
    let dali: [((usize, usize), [(usize, usize); 15]); 6] = [
        ((7, 5), [(14, 10), (13, 9), (7, 10), (15, 11), (11, 8), (12, 5), (11, 8), (9, 8), (7, 8), (11, 8), (9, 6), (15, 11), (11, 8), (11, 8), (20, 25)]),
        ((480, 640), [(8, 10), (13, 17), (7, 10), (11, 15), (8, 11), (12, 5), (6, 8), (9, 8), (480, 8), (9, 12), (6, 8), (11, 15), (6, 8), (6, 8), (20, 25)]),
        ((33, 17), [(19, 10), (13, 7), (7, 10), (21, 11), (11, 6), (12, 5), (16, 8), (9, 8), (33, 8), (16, 8), (9, 5), (15, 8), (15, 8), (15, 8), (20, 25)]),
        ((101, 99), [(10, 10), (13, 13), (7, 10), (11, 11), (11, 11), (12, 5), (8, 8), (9, 8), (101, 8), (9, 9), (8, 8), (11, 11), (8, 8), (8, 8), (20, 25)]),
        ((1, 9), [(1, 10), (13, 117), (7, 10), (11, 99), (1, 11), (12, 5), (1, 8), (9, 8), (1, 8), (9, 81), (1, 8), (2, 15), (1, 8), (1, 8), (20, 25)]),
        ((300, 200), [(15, 10), (13, 9), (7, 10), (17, 11), (11, 7), (12, 5), (12, 8), (9, 8), (300, 8), (12, 8), (9, 6), (15, 10), (11, 8), (11, 8), (20, 25)]),
    ];
    for ((h, w), want) in dali {
        for (args, want) in cases.iter().zip(want) {
            assert_eq!(out_shape(h, w, args.clone()).unwrap(), want, "input {h}x{w}, args {args:?}");
        }
    }
    // Negative extents flip (DALI accepts them): 6x8 with resize_shorter=-5 -> 5x7.
    assert_eq!(out_shape(6, 8, vec![("resize_shorter", f(-5.0))]).unwrap(), (5, 7));
    assert_eq!(out_shape(6, 8, vec![("resize_x", f(-5.0))]).unwrap(), (4, 5));
}

/// 5x7x2 image: (i*37 + 11) % 256 in row-major order.
fn img() -> Vec<u8> {
    (0..70u32).map(|i| ((i * 37 + 11) % 256) as u8).collect()
}

fn plan_5x7(size: [f32; 2], roi: ([f32; 2], [f32; 2]), min: FilterKind, mag: FilterKind, antialias: bool) -> Plan {
    let sizing = Sizing { mode: Mode::Default, subpixel_scale: true };
    let (out, lo, hi) = sample_params(&sizing, None, size, roi.0, roi.1);
    let mut p = Plan { in_h: 5, in_w: 7, c: 2, planes: 1, out_h: out[0], out_w: out[1], origin: lo, scale: [0.0; 2], end: hi, filter: [None, None] };
    for d in 0..2 {
        p.scale[d] = (hi[d] - lo[d]) / out[d] as f32;
        p.filter[d] = axis_filter(min, mag, antialias, (hi[d] - lo[d]).abs(), out[d]);
    }
    p
}

fn resize_img_roi(size: [f32; 2], roi: ([f32; 2], [f32; 2]), min: FilterKind, mag: FilterKind, antialias: bool) -> Vec<u8> {
    let p = plan_5x7(size, roi, min, mag, antialias);
    let mut dst = vec![0u8; p.out_h * p.out_w * 2];
    resample(&mut dst, &img(), &p);
    dst
}

fn resize_img(size: [f32; 2], min: FilterKind, mag: FilterKind, antialias: bool) -> Vec<u8> {
    resize_img_roi(size, ([0.0; 2], [5.0, 7.0]), min, mag, antialias)
}

fn mad(got: &[u8], want: &[u8]) -> (f64, u8) {
    assert_eq!(got.len(), want.len());
    let d: Vec<u8> = got.iter().zip(want).map(|(a, b)| a.abs_diff(*b)).collect();
    (d.iter().map(|&x| x as f64).sum::<f64>() / d.len() as f64, d.iter().copied().max().unwrap_or(0))
}

#[test]
fn pixels_match_dali_within_one_grey_level() {
    #[rustfmt::skip]
    let cases: Vec<([f32; 2], FilterKind, FilterKind, bool, &str, Vec<u8>)> = vec![
        ([3.0, 4.0], FilterKind::Triangular, FilterKind::Linear, true, "default (triangular antialias)", vec![47, 84, 167, 132, 119, 84, 167, 204, 57, 94, 177, 142, 129, 94, 177, 214, 67, 104, 142, 152, 94, 104, 187, 131]),
        ([3.0, 4.0], FilterKind::Linear, FilterKind::Linear, true, "INTERP_LINEAR", vec![47, 84, 167, 132, 119, 84, 167, 204, 57, 94, 177, 142, 129, 94, 177, 214, 67, 104, 142, 152, 94, 104, 187, 131]),
        ([3.0, 4.0], FilterKind::Triangular, FilterKind::Linear, false, "antialias=False", vec![41, 78, 170, 175, 76, 81, 173, 210, 51, 88, 180, 185, 86, 91, 183, 220, 61, 98, 169, 195, 74, 101, 193, 124]),
        ([8.0, 11.0], FilterKind::Triangular, FilterKind::Linear, true, "upscale linear", vec![11, 48, 45, 82, 92, 129, 139, 176, 186, 130, 233, 14, 117, 61, 71, 108, 118, 155, 165, 202, 199, 236, 14, 51, 47, 84, 94, 131, 141, 178, 189, 132, 236, 17, 120, 64, 74, 111, 121, 158, 168, 205, 202, 239, 17, 54, 51, 88, 98, 135, 145, 182, 192, 136, 239, 20, 124, 67, 78, 115, 125, 162, 172, 209, 205, 242, 21, 58, 55, 92, 102, 139, 149, 186, 196, 140, 243, 24, 127, 71, 81, 118, 128, 165, 175, 212, 209, 246, 25, 62, 59, 96, 106, 143, 153, 190, 200, 144, 247, 28, 131, 75, 85, 122, 132, 169, 179, 216, 213, 250, 29, 66, 62, 99, 109, 146, 156, 193, 204, 147, 251, 32, 135, 79, 89, 126, 136, 173, 183, 220, 217, 254, 32, 69, 66, 103, 113, 150, 160, 197, 155, 151, 110, 35, 86, 82, 93, 130, 140, 177, 187, 145, 220, 113, 35, 72, 69, 106, 116, 153, 163, 200, 117, 154, 1, 38, 48, 85, 95, 132, 142, 179, 189, 87, 223, 4]),
        ([3.0, 4.0], FilterKind::Nearest, FilterKind::Nearest, true, "NN down", vec![11, 48, 159, 196, 51, 88, 199, 236, 23, 60, 171, 208, 63, 100, 211, 248, 35, 72, 183, 220, 75, 112, 223, 4]),
        ([8.0, 11.0], FilterKind::Nearest, FilterKind::Nearest, true, "NN up", vec![11, 48, 11, 48, 85, 122, 159, 196, 159, 196, 233, 14, 51, 88, 51, 88, 125, 162, 199, 236, 199, 236, 11, 48, 11, 48, 85, 122, 159, 196, 159, 196, 233, 14, 51, 88, 51, 88, 125, 162, 199, 236, 199, 236, 17, 54, 17, 54, 91, 128, 165, 202, 165, 202, 239, 20, 57, 94, 57, 94, 131, 168, 205, 242, 205, 242, 23, 60, 23, 60, 97, 134, 171, 208, 171, 208, 245, 26, 63, 100, 63, 100, 137, 174, 211, 248, 211, 248, 23, 60, 23, 60, 97, 134, 171, 208, 171, 208, 245, 26, 63, 100, 63, 100, 137, 174, 211, 248, 211, 248, 29, 66, 29, 66, 103, 140, 177, 214, 177, 214, 251, 32, 69, 106, 69, 106, 143, 180, 217, 254, 217, 254, 35, 72, 35, 72, 109, 146, 183, 220, 183, 220, 1, 38, 75, 112, 75, 112, 149, 186, 223, 4, 223, 4, 35, 72, 35, 72, 109, 146, 183, 220, 183, 220, 1, 38, 75, 112, 75, 112, 149, 186, 223, 4, 223, 4]),
        ([4.0, 9.0], FilterKind::Cubic, FilterKind::Cubic, true, "CUBIC", vec![9, 46, 58, 95, 119, 170, 181, 169, 234, 15, 80, 67, 79, 130, 153, 190, 203, 240, 16, 53, 66, 103, 126, 177, 189, 176, 241, 22, 87, 75, 86, 137, 161, 198, 210, 247, 24, 61, 73, 110, 133, 185, 198, 184, 255, 30, 97, 82, 93, 144, 168, 208, 218, 255, 31, 68, 81, 118, 153, 192, 163, 191, 47, 37, 62, 90, 113, 167, 176, 151, 225, 44]),
        ([3.0, 10.0], FilterKind::Lanczos3, FilterKind::Lanczos3, true, "LANCZOS3", vec![9, 46, 48, 78, 105, 159, 156, 202, 236, 73, 174, 11, 49, 95, 92, 147, 173, 201, 205, 236, 19, 56, 59, 88, 113, 169, 165, 212, 255, 83, 205, 21, 58, 105, 101, 154, 184, 223, 215, 255, 29, 66, 64, 98, 135, 179, 182, 222, 137, 93, 74, 29, 75, 117, 123, 183, 189, 155, 225, 95]),
        ([3.0, 5.0], FilterKind::Gaussian, FilterKind::Gaussian, true, "GAUSSIAN", vec![29, 66, 133, 166, 209, 43, 85, 118, 185, 222, 39, 76, 143, 176, 219, 52, 95, 128, 195, 232, 49, 86, 150, 186, 100, 62, 102, 138, 205, 115]),
        ([3.0, 4.0], FilterKind::Lanczos3, FilterKind::Lanczos3, false, "LANCZOS3 antialias=False", vec![33, 66, 176, 182, 68, 74, 184, 217, 43, 76, 186, 193, 78, 85, 195, 228, 51, 87, 175, 203, 67, 92, 202, 122]),
        ([4.0, 9.0], FilterKind::Nearest, FilterKind::Linear, true, "min_filter=NN (rows), mag_filter=LINEAR (columns)", vec![11, 48, 60, 97, 118, 155, 175, 156, 233, 14, 91, 72, 92, 129, 150, 187, 199, 236, 17, 54, 66, 103, 124, 161, 181, 162, 239, 20, 97, 78, 98, 135, 156, 193, 205, 242, 29, 66, 78, 115, 136, 173, 193, 174, 251, 32, 109, 90, 110, 147, 168, 205, 217, 254, 35, 72, 84, 121, 142, 179, 143, 180, 1, 38, 59, 96, 116, 153, 174, 125, 223, 4]),
        ([0.0, -5.0], FilterKind::Triangular, FilterKind::Linear, true, "resize_x=-5 (horizontal flip)", vec![178, 215, 85, 122, 187, 61, 127, 164, 34, 71, 185, 222, 92, 129, 194, 68, 134, 171, 41, 78, 193, 220, 100, 137, 194, 77, 142, 179, 49, 86, 200, 83, 107, 144, 70, 84, 149, 186, 56, 93]),
    ];
    for (size, min, mag, aa, what, want) in cases {
        let got = resize_img(size, min, mag, aa);
        let (m, max) = mad(&got, &want);
        // Measured: every case below is bit-exact (mean 0, max 0); allow f32 rounding noise.
        assert!(m <= 0.05 && max <= 1, "{what}: mean abs diff {m}, max {max}\n got {got:?}\nwant {want:?}");
        if min == FilterKind::Nearest && mag == FilterKind::Nearest {
            assert_eq!(got, want, "{what}: NN must be exact");
        }
    }
}

#[test]
fn roi_and_float_output_match_dali() {
    let (tri, lin) = (FilterKind::Triangular, FilterKind::Linear);
    // DALI 2.4: size=[4, 4], roi_start=[1, 1], roi_end=[4, 6] (and swapped: flips both axes).
    let want = vec![102, 139, 195, 125, 132, 62, 119, 156, 106, 143, 200, 130, 137, 67, 123, 160, 111, 148, 204, 134, 141, 71, 128, 165, 115, 152, 195, 139, 132, 76, 132, 167];
    assert_eq!(resize_img_roi([4.0, 4.0], ([1.0, 1.0], [4.0, 6.0]), tri, lin, true), want);
    let want = vec![132, 167, 132, 76, 195, 139, 115, 152, 128, 165, 141, 71, 204, 134, 111, 148, 123, 160, 137, 67, 200, 130, 106, 143, 119, 156, 132, 62, 195, 125, 102, 139];
    assert_eq!(resize_img_roi([4.0, 4.0], ([4.0, 6.0], [1.0, 1.0]), tri, lin, true), want);

    // DALI 2.4: size=[3, 4], dtype=FLOAT (printed to 4 decimals).
    let want = [47.1667, 84.1667, 167.17, 132.49, 119.01, 84.33, 167.3333, 204.3333, 56.9167, 93.9167, 176.92, 142.24, 128.76, 94.08, 177.0833, 214.0833, 66.6667, 103.6667, 141.87, 151.99, 93.71, 103.83, 186.8333, 130.5];
    let p = plan_5x7([3.0, 4.0], ([0.0; 2], [5.0, 7.0]), tri, lin, true);
    let mut got = vec![0f32; p.out_h * p.out_w * 2];
    resample(&mut got, &img(), &p);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < 1e-3, "element {i}: {g} vs DALI {w}");
    }
}

#[test]
fn signed_outputs_round_half_away_from_zero_like_dali() {
    // DALI 2.4, int16 1x2x1 resized to size=[1, 1] (linear): the exact mean -2.5 gives -3.
    for (v, want) in [([-3i16, -2], -3i16), ([-7, -2], -5), ([2, 3], 3)] {
        let lin = FilterKind::Linear;
        let p = Plan { in_h: 1, in_w: 2, c: 1, planes: 1, out_h: 1, out_w: 1, origin: [0.0; 2], scale: [1.0, 2.0], end: [1.0, 2.0], filter: [axis_filter(lin, lin, true, 1.0, 1), axis_filter(lin, lin, true, 2.0, 1)] };
        let mut dst = [0i16];
        resample(&mut dst, &v, &p);
        assert_eq!(dst[0], want, "{v:?}");
    }
}

#[test]
fn bad_arguments_are_errors_naming_operator_and_argument() {
    for (args, needle) in [
        (vec![], "size"),
        (vec![("resize_x", f(5.0)), ("resize_shorter", f(4.0))], "resize_shorter"),
        (vec![("resize_shorter", f(4.0)), ("mode", s("stretch"))], "resize_shorter"),
        (vec![("size", fl(&[4.0, 5.0])), ("mode", s("bogus"))], "mode"),
        (vec![("size", fl(&[4.0, 5.0, 6.0, 7.0]))], "size"),
        (vec![("resize_shorter", f(4.0)), ("max_size", fl(&[-3.0]))], "max_size"),
        (vec![("resize_x", f(4.0)), ("interp_type", ArgValue::Int(9))], "interp_type"),
        (vec![("resize_x", f(4.0)), ("roi_start", fl(&[0.0, 0.0]))], "roi_start"),
    ] {
        let mut rz = op("Resize", "rz", args.clone());
        rz.inputs = vec![E(0)];
        let err = Executor::new(&spec(vec![image_source(&[6, 8, 3]), rz], vec![E(1)], 2)).err().expect("must fail").to_string();
        assert!(err.contains("resize") && err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn per_sample_resize_shorter_from_an_argument_input() {
    let short = op("random__Uniform", "short", vec![("range", fl(&[4.0, 40.0]))]);
    let mut rz = op("Resize", "rz", vec![]);
    rz.inputs = vec![E(0)];
    rz.arg_inputs = vec![("resize_shorter".into(), E(1))];
    let ops = vec![image_source(&[30, 45, 3]), short, rz];
    let mut ex = Executor::new(&spec(ops, vec![E(0), E(1), E(2)], 4)).unwrap();
    let sizing = Sizing { mode: Mode::NotSmaller, subpixel_scale: true };
    for _ in 0..2 {
        let out = ex.next_cpu_batch().unwrap();
        let mut seen = std::collections::HashSet::new();
        for i in 0..4 {
            let v = out[1].sample::<f32>(i)[0];
            let (o, _, _) = sample_params(&sizing, None, [v, v], [0.0; 2], [30.0, 45.0]);
            assert_eq!(out[2].shape(i), &[o[0], o[1], 3], "sample {i}, resize_shorter {v}");
            assert_eq!(o[0], (v.round() as usize).max(1), "shorter side (H) is resize_shorter");
            seen.insert(o);
        }
        assert!(seen.len() > 1);
    }
}

/// Photo-like 8-bit HWC image from integers only (so numpy builds the identical array for
/// DALI): gradients, a stripe texture, a disc, a flat rectangle and hashed noise of +-16.
fn photo(h: usize, w: usize) -> Vec<u8> {
    let mut out = vec![0u8; h * w * 3];
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let (xi, yi, ci) = (x as i64, y as i64, c as i64);
                let mut v = xi * (90 + 30 * ci) / w as i64 + yi * (150 - 40 * ci) / h as i64 + ((xi / 7 + yi / 5) % 9) * 2;
                let (cx, cy, r) = (w as i64 * (ci + 2) / 6, h as i64 / 2, h as i64 / 4);
                if (xi - cx).pow(2) + (yi - cy).pow(2) < r * r {
                    v = 230 - v / 3;
                }
                if x > w / 8 && x < w / 3 && y > h / 6 && y < h * 2 / 3 {
                    v = 25 + ci * 20;
                }
                let hash = ((x as u64 * 73856093) ^ (y as u64 * 19349663) ^ (c as u64 * 83492791)) & 0xFFFF_FFFF;
                let hash = (hash * 2654435761) & 0xFFFF_FFFF;
                v += ((hash >> 27) & 31) as i64 - 16;
                out[(y * w + x) * 3 + c] = v.clamp(0, 255) as u8;
            }
        }
    }
    out
}

/// `resize_shorter=224` of an HWC u8 image with one filter for both directions.
fn resize_shorter_224(src: &[u8], h: usize, w: usize, kind: FilterKind, antialias: bool) -> (Vec<u8>, [usize; 2]) {
    let sizing = Sizing { mode: Mode::NotSmaller, subpixel_scale: true };
    let (out, lo, hi) = sample_params(&sizing, None, [224.0, 224.0], [0.0; 2], [h as f32, w as f32]);
    let mut p = Plan { in_h: h, in_w: w, c: 3, planes: 1, out_h: out[0], out_w: out[1], origin: lo, scale: [0.0; 2], end: hi, filter: [None, None] };
    for d in 0..2 {
        p.scale[d] = (hi[d] - lo[d]) / out[d] as f32;
        p.filter[d] = axis_filter(kind, kind, antialias, (hi[d] - lo[d]).abs(), out[d]);
    }
    let mut dst = vec![0u8; out[0] * out[1] * 3];
    resample(&mut dst, src, &p);
    (dst, out)
}

fn crop(src: &[u8], w: usize, y0: usize, x0: usize, h: usize, cw: usize) -> Vec<u8> {
    (y0..y0 + h).flat_map(|y| src[(y * w + x0) * 3..(y * w + x0 + cw) * 3].iter().copied()).collect()
}

const FILTERS: [(&str, FilterKind); 6] = [
    ("NN", FilterKind::Nearest),
    ("LINEAR", FilterKind::Linear),
    ("TRIANGULAR", FilterKind::Triangular),
    ("CUBIC", FilterKind::Cubic),
    ("LANCZOS3", FilterKind::Lanczos3),
    ("GAUSSIAN", FilterKind::Gaussian),
];

/// 480x640 photo-like image (and a 75x100 crop of it) to `resize_shorter=224` (224x299) with
/// every filter, antialias on and off, against DALI 2.4 on the identical numpy array. Full-image
/// comparison (outputs dumped from both and diffed, mean abs diff / max):
///
/// | filter     | down, aa on   | down, aa off  | up (aa irrelevant) |
/// |------------|---------------|---------------|--------------------|
/// | NN         | 0 / 0 (exact) | 0 / 0 (exact) | 0 / 0 (exact)      |
/// | LINEAR     | 0.000045 / 1  | 0.0021 / 1    | 0.000085 / 1       |
/// | TRIANGULAR | 0.000045 / 1  | 0.0021 / 1    | 0.000085 / 1       |
/// | CUBIC      | 0 / 0         | 0.00018 / 1   | 0.00001 / 1        |
/// | LANCZOS3   | 0.00002 / 1   | 0.00001 / 1   | 0.000015 / 1       |
/// | GAUSSIAN   | 0.000015 / 1  | 0.00022 / 1   | 0.00001 / 1        |
///
/// The few off-by-one pixels (for LINEAR, all +1) are not explained yet; forcing the other pass
/// order does not remove them. Literals below are DALI's pixel sum of the whole output and its
/// 2x4x3 patch at (112, 149).
#[test]
fn photo_matches_dali_for_every_filter() {
    #[rustfmt::skip]
    let dali: [(&str, &str, bool, u64, [u8; 24]); 24] = [
        ("down", "NN", true, 25080939, [203, 202, 179, 192, 203, 188, 189, 194, 179, 176, 182, 181, 200, 192, 197, 192, 178, 203, 193, 184, 190, 199, 198, 205]),
        ("down", "NN", false, 25080939, [203, 202, 179, 192, 203, 188, 189, 194, 179, 176, 182, 181, 200, 192, 197, 192, 178, 203, 193, 184, 190, 199, 198, 205]),
        ("down", "LINEAR", true, 25083985, [191, 190, 194, 190, 191, 188, 189, 193, 190, 186, 192, 188, 188, 187, 192, 188, 183, 190, 187, 187, 198, 189, 194, 195]),
        ("down", "LINEAR", false, 25085887, [194, 193, 193, 192, 191, 184, 188, 196, 184, 181, 191, 184, 189, 190, 195, 189, 178, 189, 189, 183, 196, 197, 198, 203]),
        ("down", "TRIANGULAR", true, 25083985, [191, 190, 194, 190, 191, 188, 189, 193, 190, 186, 192, 188, 188, 187, 192, 188, 183, 190, 187, 187, 198, 189, 194, 195]),
        ("down", "TRIANGULAR", false, 25085887, [194, 193, 193, 192, 191, 184, 188, 196, 184, 181, 191, 184, 189, 190, 195, 189, 178, 189, 189, 183, 196, 197, 198, 203]),
        ("down", "CUBIC", true, 25083885, [191, 191, 195, 190, 191, 187, 189, 195, 190, 185, 193, 187, 187, 186, 193, 188, 182, 189, 188, 186, 201, 189, 195, 196]),
        ("down", "CUBIC", false, 25085349, [196, 194, 193, 193, 192, 183, 187, 198, 180, 178, 190, 183, 189, 193, 197, 190, 176, 189, 191, 182, 195, 198, 200, 207]),
        ("down", "LANCZOS3", true, 25084000, [191, 191, 196, 190, 192, 186, 189, 196, 190, 186, 192, 186, 186, 187, 192, 188, 182, 188, 188, 186, 203, 189, 196, 197]),
        ("down", "LANCZOS3", false, 25085656, [199, 197, 191, 194, 191, 182, 186, 200, 179, 177, 191, 182, 188, 196, 200, 189, 174, 186, 192, 182, 195, 199, 202, 210]),
        ("down", "GAUSSIAN", true, 25084026, [192, 191, 194, 191, 191, 186, 188, 195, 189, 184, 193, 187, 188, 187, 194, 188, 181, 189, 187, 186, 199, 190, 195, 196]),
        ("down", "GAUSSIAN", false, 25084021, [194, 193, 193, 192, 193, 184, 188, 196, 181, 180, 189, 184, 191, 192, 194, 191, 178, 194, 191, 183, 194, 198, 198, 204]),
        ("up", "NN", true, 34746189, [131, 185, 174, 131, 185, 174, 131, 185, 174, 138, 196, 201, 128, 171, 188, 128, 171, 188, 128, 171, 188, 130, 181, 183]),
        ("up", "NN", false, 34746189, [131, 185, 174, 131, 185, 174, 131, 185, 174, 138, 196, 201, 128, 171, 188, 128, 171, 188, 128, 171, 188, 130, 181, 183]),
        ("up", "LINEAR", true, 34742325, [134, 180, 186, 132, 182, 180, 132, 184, 180, 134, 188, 187, 132, 181, 186, 130, 179, 183, 130, 180, 183, 132, 183, 187]),
        ("up", "LINEAR", false, 34742325, [134, 180, 186, 132, 182, 180, 132, 184, 180, 134, 188, 187, 132, 181, 186, 130, 179, 183, 130, 180, 183, 132, 183, 187]),
        ("up", "TRIANGULAR", true, 34742325, [134, 180, 186, 132, 182, 180, 132, 184, 180, 134, 188, 187, 132, 181, 186, 130, 179, 183, 130, 180, 183, 132, 183, 187]),
        ("up", "TRIANGULAR", false, 34742325, [134, 180, 186, 132, 182, 180, 132, 184, 180, 134, 188, 187, 132, 181, 186, 130, 179, 183, 130, 180, 183, 132, 183, 187]),
        ("up", "CUBIC", true, 34742263, [135, 179, 186, 131, 182, 176, 131, 186, 177, 134, 191, 188, 132, 181, 186, 130, 178, 182, 130, 179, 182, 132, 183, 188]),
        ("up", "CUBIC", false, 34742263, [135, 179, 186, 131, 182, 176, 131, 186, 177, 134, 191, 188, 132, 181, 186, 130, 178, 182, 130, 179, 182, 132, 183, 188]),
        ("up", "LANCZOS3", true, 34742396, [135, 178, 185, 132, 181, 176, 131, 187, 177, 133, 192, 189, 133, 181, 185, 131, 178, 180, 130, 179, 182, 132, 183, 189]),
        ("up", "LANCZOS3", false, 34742396, [135, 178, 185, 132, 181, 176, 131, 187, 177, 133, 192, 189, 133, 181, 185, 131, 178, 180, 130, 179, 182, 132, 183, 189]),
        ("up", "GAUSSIAN", true, 34742526, [135, 180, 186, 131, 184, 176, 131, 185, 177, 134, 190, 188, 132, 181, 186, 130, 178, 182, 130, 179, 182, 132, 183, 187]),
        ("up", "GAUSSIAN", false, 34742526, [135, 180, 186, 131, 184, 176, 131, 185, 177, 134, 190, 188, 132, 181, 186, 130, 178, 182, 130, 179, 182, 132, 183, 187]),
    ];
    let big = photo(480, 640);
    let small = crop(&big, 640, 200, 300, 75, 100);
    for (dir, name, aa, sum, patch) in dali {
        let kind = FILTERS.iter().find(|f| f.0 == name).unwrap().1;
        let (src, h, w) = if dir == "down" { (&big, 480, 640) } else { (&small, 75, 100) };
        let (o, out) = resize_shorter_224(src, h, w, kind, aa);
        assert_eq!(out, [224, 299]);
        let got_sum: u64 = o.iter().map(|&v| v as u64).sum();
        let got_patch = crop(&o, 299, 112, 149, 2, 4);
        let what = format!("{dir} {name} antialias={aa}");
        if kind == FilterKind::Nearest {
            assert_eq!((got_sum, &got_patch[..]), (sum, &patch[..]), "{what}");
        } else {
            let (m, max) = mad(&got_patch, &patch);
            assert!(max <= 1 && m <= 0.1, "{what}: patch {got_patch:?} vs DALI {patch:?}");
            let mean_shift = (got_sum as f64 - sum as f64).abs() / o.len() as f64;
            assert!(mean_shift < 0.01, "{what}: mean differs from DALI's by {mean_shift}");
        }
    }
}

/// Nanoseconds this thread has spent on a CPU (Linux schedstat), 0 where unavailable.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// Single-thread throughput of the common training resize; run with
/// `cargo test --release -p sluice --test resize -- --ignored --nocapture`. Reports CPU time
/// per image as well as wall time, since other load on a shared machine inflates the latter.
#[test]
#[ignore]
fn speed_linear_antialias_500x375() {
    let src = photo(500, 375);
    let (_, out) = resize_shorter_224(&src, 500, 375, FilterKind::Linear, true);
    let iters = 500;
    let (t, cpu) = (std::time::Instant::now(), thread_cpu_ns());
    for _ in 0..iters {
        std::hint::black_box(resize_shorter_224(std::hint::black_box(&src), 500, 375, FilterKind::Linear, true));
    }
    let wall = t.elapsed().as_secs_f64() * 1e3 / iters as f64;
    let cpu = (thread_cpu_ns() - cpu) as f64 * 1e-6 / iters as f64;
    println!("500x375x3 -> {}x{}x3 linear+antialias: {cpu:.3} ms/image CPU, {wall:.3} ms wall", out[0], out[1]);
}
