//! `fn.rotate` on CPU: output size, pixel values and error handling, checked against
//! NVIDIA DALI 2.4 (`fn.rotate`, `device_id=None`). The literal reference arrays below were
//! printed by DALI 2.4 for the same inputs; a wider parity run (380 cases: 7 image sizes up to
//! 120x600, 12 angles, NN/LINEAR, clamp/fill, keep_size, size, float and mixed types) matched
//! DALI exactly, so these tests demand exact equality (tolerance 0).

// The f32 references are pasted as DALI printed them (f64 repr of each f32 value).
#![allow(clippy::excessive_precision, clippy::type_complexity)]

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::rotate::canvas::{rotated_canvas_size, rotation_mapping};
use sluice::ops::warp::kernel::{warp_affine, Border, Interp};
use sluice::ops::ArgValue;
use crate::common::op;

/// 3x4x1 image: (i*37 + 11) % 256 in row-major order.
const IMG: [u8; 12] = [11, 48, 85, 122, 159, 196, 233, 14, 51, 88, 125, 162];

fn rotate_u8(angle: f32, out: (usize, usize), interp: Interp, border: Border) -> Vec<u8> {
    let m = rotation_mapping(3, 4, out.0, out.1, angle);
    let mut dst = vec![0u8; out.0 * out.1];
    warp_affine(&mut dst, out.0, out.1, &IMG, 3, 4, 1, &m, interp, border);
    dst
}

#[test]
fn rotate_30_degrees_matches_dali_nn_and_linear_clamp_and_fill() {
    assert_eq!(rotated_canvas_size(3, 4, 30.0), (5, 6));
    #[rustfmt::skip]
    let cases: [(Interp, Border, [u8; 30]); 4] = [
        (Interp::Nearest, Border::Clamp, [
            11, 48, 85, 122, 122, 14,   11, 48, 85, 85, 14, 14,   11, 11, 196, 233, 162, 162,
            159, 159, 88, 88, 125, 162,   159, 51, 51, 88, 125, 162]),
        (Interp::Nearest, Border::Fill(200.0), [
            200, 200, 200, 122, 200, 200,   200, 200, 85, 85, 14, 200,   200, 11, 196, 233, 162, 200,
            200, 159, 88, 88, 200, 200,   200, 200, 51, 200, 200, 200]),
        (Interp::Linear, Border::Clamp, [
            23, 55, 87, 120, 120, 66,   11, 37, 69, 115, 27, 71,   11, 55, 161, 204, 130, 162,
            102, 146, 113, 104, 136, 162,   107, 53, 53, 86, 118, 150]),
        (Interp::Linear, Border::Fill(200.0), [
            200, 200, 198, 158, 184, 200,   200, 137, 84, 115, 78, 200,   153, 55, 161, 204, 130, 190,
            200, 162, 113, 115, 175, 200,   200, 170, 124, 198, 200, 200]),
    ];
    for (interp, border, want) in cases {
        assert_eq!(rotate_u8(30.0, (5, 6), interp, border), want, "{interp:?} {border:?}");
    }
}

#[test]
fn keep_size_and_explicit_size_match_dali() {
    // keep_size=True, angle=-45, linear.
    assert_eq!(rotate_u8(-45.0, (3, 4), Interp::Linear, Border::Clamp), [121, 123, 53, 80, 67, 163, 175, 106, 93, 120, 123, 52]);
    // size=(2.5, 3.0) -> 3x3 (DALI rounds half away from zero), angle=30, linear.
    assert_eq!(rotate_u8(30.0, (3, 3), Interp::Linear, Border::Clamp), [53, 105, 70, 108, 214, 146, 124, 102, 120]);
}

#[test]
fn float_input_and_float_to_uint8_match_dali() {
    let src: Vec<f32> = (0..6).map(|i| i as f32 * 1.3 - 1.0).collect();
    assert_eq!(rotated_canvas_size(2, 3, 30.0), (4, 5));
    let m = rotation_mapping(2, 3, 4, 5, 30.0);
    let mut out = vec![0f32; 20];
    warp_affine(&mut out, 4, 5, &src, 2, 3, 1, &m, Interp::Linear, Border::Clamp);
    #[rustfmt::skip]
    let want: [f32; 20] = [
        -0.9766658544540405, 0.14916718006134033, 1.2750002145767212, 1.5999999046325684, 2.3837509155273438,
        -1.0, -0.5008328557014465, 0.8862500190734863, 3.8112499713897705, 5.5,
        -1.0, 0.6887485980987549, 3.613748788833618, 5.000833034515381, 5.5,
        2.1162478923797607, 2.8999998569488525, 3.2249999046325684, 4.350832939147949, 5.47666597366333,
    ];
    assert_eq!(out, want);
    let mut out8 = vec![0u8; 20];
    warp_affine(&mut out8, 4, 5, &src, 2, 3, 1, &m, Interp::Linear, Border::Clamp);
    assert_eq!(out8, [0, 0, 1, 2, 2, 0, 0, 1, 4, 6, 0, 1, 4, 5, 6, 2, 3, 3, 4, 5]);
}

// ---- through the executor -------------------------------------------------------------

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>, batch_size: usize) -> PipelineSpec {
    PipelineSpec { batch_size, num_threads: 2, device_id: None, seed: 99, prefetch_queue_depth: 2, exec_async: false, exec_pipelined: false, exec_dynamic: true, errors: Default::default(), ops, outputs }
}

/// random.uniform(shape, dtype) as the image source (there is no reader in this branch).
fn image_source(shape: &[i64], dtype: i64) -> OpSpec {
    op("random__Uniform", "img", vec![
        ("range", ArgValue::FloatList(vec![0.0, 256.0])),
        ("shape", ArgValue::IntList(shape.to_vec())),
        ("dtype", ArgValue::Int(dtype)),
    ])
}

const UINT8: i64 = 0;
const FLOAT64: i64 = 10;
const E: fn(usize) -> Edge = |op| Edge { op, output: 0 };

#[test]
fn operator_rotates_each_sample_by_its_own_angle_from_an_argument_input() {
    let angle = op("random__Uniform", "angle", vec![("range", ArgValue::FloatList(vec![-10.0, 10.0]))]);
    let mut rot = op("Rotate", "rot", vec![("interp_type", ArgValue::Int(1))]);
    rot.inputs = vec![E(0)];
    rot.arg_inputs = vec![("angle".into(), E(1))];
    let ops = vec![image_source(&[20, 30, 3], UINT8), angle, rot];
    let mut ex = Executor::new(&spec(ops, vec![E(0), E(1), E(2)], 4)).unwrap();
    for _ in 0..2 {
        let out = ex.next_cpu_batch().unwrap();
        let (img, ang, rot) = (&out[0], &out[1], &out[2]);
        assert_eq!(rot.dtype(), img.dtype());
        let mut sizes = std::collections::HashSet::new();
        for i in 0..4 {
            let a = ang.sample::<f32>(i)[0];
            let (oh, ow) = rotated_canvas_size(20, 30, a);
            assert_eq!(rot.shape(i), &[oh, ow, 3], "sample {i}, angle {a}");
            sizes.insert((oh, ow));
            let m = rotation_mapping(20, 30, oh, ow, a);
            let mut want = vec![0u8; oh * ow * 3];
            warp_affine(&mut want, oh, ow, img.sample::<u8>(i), 20, 30, 3, &m, Interp::Linear, Border::Clamp);
            assert_eq!(rot.sample::<u8>(i), &want[..], "sample {i}");
        }
        assert!(sizes.len() > 1 || ang.sample::<f32>(0)[0].abs() < 1.0, "different angles give different canvases");
    }
}

#[test]
fn operator_keep_size_size_fill_and_dtype() {
    let mut rot = op("Rotate", "rot", vec![
        ("angle", ArgValue::Float(90.0)),
        ("interp_type", ArgValue::Int(0)),
        ("keep_size", ArgValue::Bool(true)),
        ("fill_value", ArgValue::Float(255.0)),
        ("output_dtype", ArgValue::Int(9)), // FLOAT, through the deprecated alias
    ]);
    rot.inputs = vec![E(0)];
    let mut sized = op("Rotate", "sized", vec![("angle", ArgValue::Float(180.0)), ("size", ArgValue::FloatList(vec![4.4, 6.5]))]);
    sized.inputs = vec![E(0)];
    let ops = vec![image_source(&[4, 6, 1], UINT8), rot, sized];
    let mut ex = Executor::new(&spec(ops, vec![E(0), E(1), E(2)], 2)).unwrap();
    let out = ex.next_cpu_batch().unwrap();
    for i in 0..2 {
        let src = out[0].sample::<u8>(i);
        // 90 degrees CCW on a kept 4x6 canvas: the middle 4x4 square is the rotated centre of
        // the image; the left and right canvas columns fall outside it and take fill_value.
        assert_eq!(out[1].shape(i), &[4, 6, 1]);
        let got = out[1].sample::<f32>(i);
        for y in 0..4 {
            assert_eq!(got[y * 6], 255.0);
            assert_eq!(got[y * 6 + 5], 255.0);
            for x in 1..5 {
                // Source point of output (x, y) is (col 4.5 - y, row x - 0.5): the rotated image
                // (6 tall) loses its top and bottom source columns (5 and 0) to the 4-row canvas.
                assert_eq!(got[y * 6 + x], src[(x - 1) * 6 + (4 - y)] as f32, "({x}, {y})");
            }
        }
        // size [4.4, 6.5] rounds to 4x7 (half away from zero).
        assert_eq!(out[2].shape(i), &[4, 7, 1]);
    }
}

#[test]
fn bad_inputs_are_errors_naming_the_operator() {
    let cases: Vec<(Vec<i64>, i64, Vec<(&str, ArgValue)>, &str)> = vec![
        (vec![4, 6], UINT8, vec![("angle", ArgValue::Float(10.0))], "3 dimensions"),
        (vec![4, 6, 3], FLOAT64, vec![("angle", ArgValue::Float(10.0))], "FLOAT64"),
        (vec![2, 4, 6, 3], UINT8, vec![("angle", ArgValue::Float(10.0))], "FHWC"),
    ];
    for (shape, dtype, args, needle) in cases {
        let mut rot = op("Rotate", "rot", args);
        rot.inputs = vec![E(0)];
        let mut ex = Executor::new(&spec(vec![image_source(&shape, dtype), rot], vec![E(1)], 2)).unwrap();
        let err = ex.next_cpu_batch().expect_err("must fail").to_string();
        assert!(err.contains("rotate") && err.contains("sample 0") && err.contains(needle), "{err}");
    }
    // Build-time argument errors.
    for (args, needle) in [
        (vec![], "angle"),
        (vec![("angle", ArgValue::Float(1.0)), ("interp_type", ArgValue::Int(2))], "interp_type"),
        (vec![("angle", ArgValue::Float(1.0)), ("size", ArgValue::FloatList(vec![3.0]))], "size"),
        (vec![("angle", ArgValue::Float(1.0)), ("dtype", ArgValue::Int(FLOAT64))], "dtype"),
    ] {
        let mut rot = op("Rotate", "rot", args);
        rot.inputs = vec![E(0)];
        let err = Executor::new(&spec(vec![image_source(&[4, 6, 3], UINT8), rot], vec![E(1)], 2)).err().expect("must fail").to_string();
        assert!(err.contains("rotate") && err.contains(needle), "{err}");
    }
}
