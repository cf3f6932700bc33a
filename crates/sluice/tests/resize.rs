//! `fn.resize` on CPU against NVIDIA DALI 2.4 (`fn.resize`, `device_id=None`). Shapes and the
//! literal pixel arrays below were printed by DALI 2.4 for the same inputs (scripts run with
//! `fn.external_source(..., layout="HWC")`; shapes table from 6 input sizes x 15 argument sets).

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::resize::kernel::{axis_filter, resample, FilterKind, Plan};
use sluice::ops::resize::{sample_params, Mode, Sizing};
use sluice::ops::ArgValue;

const E: fn(usize) -> Edge = |op| Edge { op, output: 0 };
const UINT8: i64 = 0;

fn op(schema: &str, name: &str, args: Vec<(&str, ArgValue)>) -> OpSpec {
    OpSpec {
        schema: schema.into(),
        device: None,
        name: name.into(),
        inputs: vec![],
        arg_inputs: vec![],
        args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>, batch_size: usize) -> PipelineSpec {
    PipelineSpec { batch_size, num_threads: 2, device_id: None, seed: 7, prefetch_queue_depth: 2, exec_async: false, exec_pipelined: false, ops, outputs }
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
    let out = ex.next_batch().map_err(|e| e.to_string())?;
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

fn resize_img(size: [f32; 2], min: FilterKind, mag: FilterKind, antialias: bool) -> Vec<u8> {
    let sizing = Sizing { mode: Mode::Default, max_size: None, subpixel_scale: true };
    let (out, lo, hi) = sample_params(&sizing, size, [0.0; 2], [5.0, 7.0]);
    let mut p = Plan { in_h: 5, in_w: 7, c: 2, out_h: out[0], out_w: out[1], origin: lo, scale: [0.0; 2], filter: [None, None] };
    for d in 0..2 {
        p.scale[d] = (hi[d] - lo[d]) / out[d] as f32;
        p.filter[d] = axis_filter(min, mag, antialias, (hi[d] - lo[d]).abs(), out[d]);
    }
    let mut dst = vec![0u8; out[0] * out[1] * 2];
    resample(&mut dst, &img(), &p);
    dst
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
    ];
    for (size, min, mag, aa, what, want) in cases {
        let got = resize_img(size, min, mag, aa);
        let (m, max) = mad(&got, &want);
        eprintln!("{what}: mean abs diff {m:.4}, max {max}");
        assert!(m < 1.0 && max <= 2, "{what}: mean abs diff {m}, max {max}\n got {got:?}\nwant {want:?}");
        if min == FilterKind::Nearest {
            assert_eq!(got, want, "{what}: NN must be exact");
        }
    }
}

#[test]
fn bad_arguments_are_errors_naming_operator_and_argument() {
    for (args, needle) in [
        (vec![], "size"),
        (vec![("resize_x", f(5.0)), ("resize_shorter", f(4.0))], "resize_shorter"),
        (vec![("resize_shorter", f(4.0)), ("mode", s("stretch"))], "resize_shorter"),
        (vec![("size", fl(&[4.0, 5.0])), ("mode", s("bogus"))], "mode"),
        (vec![("size", fl(&[4.0, 5.0, 6.0]))], "size"),
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
    let sizing = Sizing { mode: Mode::NotSmaller, max_size: None, subpixel_scale: true };
    for _ in 0..2 {
        let out = ex.next_batch().unwrap();
        let mut seen = std::collections::HashSet::new();
        for i in 0..4 {
            let v = out[1].sample::<f32>(i)[0];
            let (o, _, _) = sample_params(&sizing, [v, v], [0.0; 2], [30.0, 45.0]);
            assert_eq!(out[2].shape(i), &[o[0], o[1], 3], "sample {i}, resize_shorter {v}");
            assert_eq!(o[0], (v.round() as usize).max(1), "shorter side (H) is resize_shorter");
            seen.insert(o);
        }
        assert!(seen.len() > 1);
    }
}
