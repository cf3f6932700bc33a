//! `fn.pad` on CPU. Expected outputs were printed by NVIDIA DALI 2.4 (`fn.pad`,
//! `device_id=None`) for the batch a = [[1, 2, 3], [4, 5, 6]], b = [[1, 2]], c = [[1], [2],
//! [3], [4]] (INT32, layout HW) fed through `fn.external_source`.
use sluice::ops::ArgValue;
use sluice::tensor::{DType, TensorList};

use crate::common::run_op;


fn abc() -> TensorList {
    TensorList::from_samples::<i32>(&[vec![2, 3], vec![1, 2], vec![4, 1]], &[vec![1, 2, 3, 4, 5, 6], vec![1, 2], vec![1, 2, 3, 4]]).with_layout("HW")
}

fn pad(x: &TensorList, args: Vec<(&str, ArgValue)>) -> TensorList {
    run_op("Pad", args, &[x], &[]).unwrap().remove(0)
}

/// (shape, values) of every sample.
fn samples(t: &TensorList) -> Vec<(Vec<usize>, Vec<i32>)> {
    (0..t.len()).map(|i| (t.shape(i).to_vec(), t.sample::<i32>(i).to_vec())).collect()
}

fn s(shape: &[usize], v: &[i32]) -> (Vec<usize>, Vec<i32>) {
    (shape.to_vec(), v.to_vec())
}

#[test]
fn default_pads_every_axis_to_the_batch_maximum_and_is_dense() {
    let out = pad(&abc(), vec![]);
    // DALI: [[[1,2,3],[4,5,6],[0,0,0],[0,0,0]], [[1,2,0],[0,0,0],[0,0,0],[0,0,0]], [[1,0,0],[2,0,0],[3,0,0],[4,0,0]]]
    assert_eq!(samples(&out), vec![
        s(&[4, 3], &[1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]),
        s(&[4, 3], &[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        s(&[4, 3], &[1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 0]),
    ]);
    assert!(out.is_dense_tensor());
    assert_eq!(out.layout().as_str(), "HW");
    assert_eq!(out.dtype(), DType::I32);
}

#[test]
fn axes_axis_names_and_fill_value_match_dali() {
    let out = pad(&abc(), vec![("fill_value", ArgValue::Float(-1.0)), ("axes", ArgValue::IntList(vec![0]))]);
    assert_eq!(samples(&out), vec![
        s(&[4, 3], &[1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, -1]),
        s(&[4, 2], &[1, 2, -1, -1, -1, -1, -1, -1]),
        s(&[4, 1], &[1, 2, 3, 4]),
    ]);
    assert!(!out.is_dense_tensor());
    let out = pad(&abc(), vec![("fill_value", ArgValue::Float(9.0)), ("axis_names", ArgValue::Str("W".into()))]);
    assert_eq!(samples(&out), vec![
        s(&[2, 3], &[1, 2, 3, 4, 5, 6]),
        s(&[1, 3], &[1, 2, 9]),
        s(&[4, 3], &[1, 9, 9, 2, 9, 9, 3, 9, 9, 4, 9, 9]),
    ]);
    // Negative axes count from the back: -1 is W.
    let neg = pad(&abc(), vec![("fill_value", ArgValue::Float(9.0)), ("axes", ArgValue::IntList(vec![-1]))]);
    assert_eq!(samples(&neg), samples(&out));
}

#[test]
fn shape_and_align_match_dali() {
    let out = pad(&abc(), vec![("fill_value", ArgValue::Float(7.0)), ("shape", ArgValue::IntList(vec![3, -1]))]);
    assert_eq!(samples(&out), vec![
        s(&[3, 3], &[1, 2, 3, 4, 5, 6, 7, 7, 7]),
        s(&[3, 3], &[1, 2, 7, 7, 7, 7, 7, 7, 7]),
        s(&[4, 3], &[1, 7, 7, 2, 7, 7, 3, 7, 7, 4, 7, 7]),
    ]);
    // A requested extent smaller than the sample keeps the sample's.
    let out = pad(&abc(), vec![("fill_value", ArgValue::Float(7.0)), ("shape", ArgValue::IntList(vec![1, 4]))]);
    assert_eq!(samples(&out), vec![
        s(&[2, 4], &[1, 2, 3, 7, 4, 5, 6, 7]),
        s(&[1, 4], &[1, 2, 7, 7]),
        s(&[4, 4], &[1, 7, 7, 7, 2, 7, 7, 7, 3, 7, 7, 7, 4, 7, 7, 7]),
    ]);
    let out = pad(&abc(), vec![("axes", ArgValue::IntList(vec![1])), ("align", ArgValue::IntList(vec![4]))]);
    assert_eq!(samples(&out), vec![
        s(&[2, 4], &[1, 2, 3, 0, 4, 5, 6, 0]),
        s(&[1, 4], &[1, 2, 0, 0]),
        s(&[4, 4], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]),
    ]);
    let out = pad(&abc(), vec![("align", ArgValue::IntList(vec![2, 4]))]);
    assert!(out.is_dense_tensor());
    assert_eq!(out.shape(0), &[4, 4]);
    assert_eq!(out.sample::<i32>(2), &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
    // shape 5 aligned to 4 -> 8.
    let out = pad(&abc(), vec![("axes", ArgValue::IntList(vec![1])), ("shape", ArgValue::IntList(vec![5])), ("align", ArgValue::IntList(vec![4]))]);
    assert_eq!(samples(&out)[1], s(&[1, 8], &[1, 2, 0, 0, 0, 0, 0, 0]));
    assert_eq!(out.shape(0), &[2, 8]);
    assert_eq!(out.shape(2), &[4, 8]);
}

#[test]
fn fill_values_convert_like_dali_for_every_type() {
    // float32: fill 1.7 -> 1.7f.
    let f = TensorList::from_samples::<f32>(&[vec![2, 3], vec![1, 2]], &[vec![1., 2., 3., 4., 5., 6.], vec![1., 2.]]);
    let out = pad(&f, vec![("fill_value", ArgValue::Float(1.7))]);
    assert_eq!(out.sample::<f32>(1), &[1.0, 2.0, 1.7, 1.7, 1.7, 1.7]);
    assert!(out.is_dense_tensor());
    // uint8: 300 -> 44, -1.6 -> 255 (C-style cast on x86); int32: 2.7 -> 2.
    let u = TensorList::from_samples::<u8>(&[vec![2, 3], vec![1, 2]], &[vec![1, 2, 3, 4, 5, 6], vec![1, 2]]);
    assert_eq!(pad(&u, vec![("fill_value", ArgValue::Float(300.0))]).sample::<u8>(1), &[1, 2, 44, 44, 44, 44]);
    assert_eq!(pad(&u, vec![("fill_value", ArgValue::Float(-1.6))]).sample::<u8>(1), &[1, 2, 255, 255, 255, 255]);
    let i = TensorList::from_samples::<i32>(&[vec![2, 3], vec![1, 2]], &[vec![1, 2, 3, 4, 5, 6], vec![1, 2]]);
    assert_eq!(pad(&i, vec![("fill_value", ArgValue::Float(2.7))]).sample::<i32>(1), &[1, 2, 2, 2, 2, 2]);
    // int64 and float64 wide elements.
    let l = TensorList::from_samples::<i64>(&[vec![3], vec![1]], &[vec![1, 2, 3], vec![9]]);
    assert_eq!(pad(&l, vec![("fill_value", ArgValue::Float(-5.0))]).sample::<i64>(1), &[9, -5, -5]);
    let d = TensorList::from_samples::<f64>(&[vec![1], vec![2]], &[vec![0.5], vec![1.0, 2.0]]);
    assert_eq!(pad(&d, vec![("fill_value", ArgValue::Float(0.25))]).sample::<f64>(0), &[0.5, 0.25]);
}

#[test]
fn per_sample_fill_values_come_from_an_argument_input() {
    let fill = TensorList::from_samples::<f32>(&[vec![], vec![], vec![]], &[vec![-1.0], vec![-2.0], vec![-3.0]]);
    let out = run_op("Pad", vec![], &[&abc()], &[("fill_value", &fill)]).unwrap().remove(0);
    assert_eq!(out.sample::<i32>(1), &[1, 2, -2, -2, -2, -2, -2, -2, -2, -2, -2, -2]);
    assert_eq!(out.sample::<i32>(2), &[1, -3, -3, 2, -3, -3, 3, -3, -3, 4, -3, -3]);
}

#[test]
fn bad_arguments_are_errors_naming_the_operator_and_argument() {
    // DALI rejects these too (axis out of range, shape/align length mismatch).
    for (args, arg) in [
        (vec![("axes", ArgValue::IntList(vec![2]))], "axes"),
        (vec![("axes", ArgValue::IntList(vec![0])), ("shape", ArgValue::IntList(vec![1, 2]))], "shape"),
        (vec![("axes", ArgValue::IntList(vec![0, 1])), ("align", ArgValue::IntList(vec![1, 2, 3]))], "align"),
        (vec![("align", ArgValue::IntList(vec![0]))], "align"),
        (vec![("axes", ArgValue::IntList(vec![0])), ("axis_names", ArgValue::Str("H".into()))], "axis_names"),
        (vec![("axis_names", ArgValue::Str("C".into()))], "axis_names"),
    ] {
        let err = run_op("Pad", args, &[&abc()], &[]).err().expect("must fail").to_string();
        assert!(err.contains("pad") && err.contains(arg), "{err}");
    }
}
