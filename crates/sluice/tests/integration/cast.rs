//! `fn.cast` on CPU. Every expected list below was printed by NVIDIA DALI 2.4 (`fn.cast`,
//! `device_id=None`, input from `fn.external_source`): float -> integer rounds half away
//! from zero and saturates; NaN gives 0 except INT32/INT64 minimum and 2^63 for UINT64;
//! FLOAT16 rounds ties away from zero and overflows to inf.

use sluice::tensor::element::f16_to_f64;
use sluice::ops::ArgValue;
use sluice::tensor::{DType, TensorList};

use crate::common::{raw, run_op};


fn cast(x: &TensorList, to: DType) -> TensorList {
    run_op("Cast", vec![("dtype", ArgValue::Int(to as i64))], &[x], &[]).unwrap().remove(0)
}

/// Sample 0 of `t` as f64 values (any type).
fn values(t: &TensorList) -> Vec<f64> {
    let b = t.bytes(0);
    let n = t.numel(0);
    (0..n).map(|k| sluice::tensor::element::load_f64(t.dtype(), b, k)).collect()
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn float32_to_every_type_matches_dali() {
    let src: Vec<f32> = vec![-1.5, -0.5, 0.5, 1.5, 2.5, 2.4999, 2.5001, -2.5, 300.7, -300.2, 1e10, -1e10, f32::NAN,
        f32::INFINITY, f32::NEG_INFINITY, 65504.5, 70000.0, 1e-8, 127.5, -128.5, 255.5];
    let x = TensorList::from_samples::<f32>(&[vec![src.len()]], &[src]).with_layout("X");
    let cases: Vec<(DType, Vec<f64>)> = vec![
        (DType::U8, vec![0., 0., 1., 2., 3., 2., 3., 0., 255., 0., 255., 0., 0., 255., 0., 255., 255., 0., 128., 0., 255.]),
        (DType::I8, vec![-2., -1., 1., 2., 3., 2., 3., -3., 127., -128., 127., -128., 0., 127., -128., 127., 127., 0., 127., -128., 127.]),
        (DType::I16, vec![-2., -1., 1., 2., 3., 2., 3., -3., 301., -300., 32767., -32768., 0., 32767., -32768., 32767., 32767., 0., 128., -129., 256.]),
        (DType::U16, vec![0., 0., 1., 2., 3., 2., 3., 0., 301., 0., 65535., 0., 0., 65535., 0., 65505., 65535., 0., 128., 0., 256.]),
        (DType::I32, vec![-2., -1., 1., 2., 3., 2., 3., -3., 301., -300., 2147483647., -2147483648., -2147483648., 2147483647., -2147483648., 65505., 70000., 0., 128., -129., 256.]),
        (DType::U32, vec![0., 0., 1., 2., 3., 2., 3., 0., 301., 0., 4294967295., 0., 0., 4294967295., 0., 65505., 70000., 0., 128., 0., 256.]),
        (DType::F16, vec![-1.5, -0.5, 0.5, 1.5, 2.5, 2.5, 2.5, -2.5, 300.75, -300.25, INF, -INF, NAN, INF, -INF, 65504.0, INF, 0.0, 127.5, -128.5, 255.5]),
        (DType::F64, vec![-1.5, -0.5, 0.5, 1.5, 2.5, 2.4999001026153564, 2.5000998973846436, -2.5, 300.70001220703125, -300.20001220703125,
            1e10, -1e10, NAN, INF, -INF, 65504.5, 70000.0, 9.99999993922529e-09, 127.5, -128.5, 255.5]),
        (DType::Bool, vec![1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 0., 1., 1., 1.]),
    ];
    for (to, want) in cases {
        let out = cast(&x, to);
        assert_eq!(out.dtype(), to);
        assert_eq!(out.layout().as_str(), "X", "layout kept");
        assert!(same(&values(&out), &want), "{to}: got {:?}", values(&out));
    }
    // 64-bit targets, checked as integers (f64 cannot hold them all).
    let out = cast(&x, DType::I64);
    assert_eq!(out.sample::<i64>(0), &[-2, -1, 1, 2, 3, 2, 3, -3, 301, -300, 10000000000, -10000000000, i64::MIN, i64::MAX, i64::MIN, 65505, 70000, 0, 128, -129, 256]);
    let out = cast(&x, DType::U64);
    assert_eq!(out.sample::<u64>(0), &[0, 0, 1, 2, 3, 2, 3, 0, 301, 0, 10000000000, 0, 1 << 63, u64::MAX, 0, 65505, 70000, 0, 128, 0, 256]);
}

#[test]
fn integers_saturate_like_dali() {
    let src: Vec<i64> = vec![-300, -129, -128, -1, 0, 1, 127, 128, 255, 256, 70000, 2147483647, -2147483648];
    let x = TensorList::from_samples::<i64>(&[vec![src.len()]], &[src]);
    let cases: Vec<(DType, Vec<f64>)> = vec![
        (DType::U8, vec![0., 0., 0., 0., 0., 1., 127., 128., 255., 255., 255., 255., 0.]),
        (DType::I8, vec![-128., -128., -128., -1., 0., 1., 127., 127., 127., 127., 127., 127., -128.]),
        (DType::I16, vec![-300., -129., -128., -1., 0., 1., 127., 128., 255., 256., 32767., 32767., -32768.]),
        (DType::U16, vec![0., 0., 0., 0., 0., 1., 127., 128., 255., 256., 65535., 65535., 0.]),
        (DType::U32, vec![0., 0., 0., 0., 0., 1., 127., 128., 255., 256., 70000., 2147483647., 0.]),
        (DType::F16, vec![-300., -129., -128., -1., 0., 1., 127., 128., 255., 256., INF, INF, -INF]),
        (DType::F32, vec![-300., -129., -128., -1., 0., 1., 127., 128., 255., 256., 70000., 2147483648., -2147483648.]),
        (DType::Bool, vec![1., 1., 1., 1., 0., 1., 1., 1., 1., 1., 1., 1., 1.]),
    ];
    for (to, want) in cases {
        assert!(same(&values(&cast(&x, to)), &want), "{to}: got {:?}", values(&cast(&x, to)));
    }
    let big = TensorList::from_samples::<i64>(&[vec![3]], &[vec![i64::MAX, i64::MIN, (1 << 53) + 1]]);
    assert_eq!(cast(&big, DType::F32).sample::<f32>(0), &[9.223372036854776e18, -9.223372036854776e18, 9007199254740992.0]);
    assert_eq!(cast(&big, DType::U64).sample::<u64>(0), &[9223372036854775807, 0, 9007199254740993]);
    assert_eq!(cast(&big, DType::I32).sample::<i32>(0), &[i32::MAX, i32::MIN, i32::MAX]);
    let u = TensorList::from_samples::<u64>(&[vec![4]], &[vec![0, 1, 1 << 63, u64::MAX]]);
    assert_eq!(cast(&u, DType::I64).sample::<i64>(0), &[0, 1, i64::MAX, i64::MAX]);
    assert_eq!(cast(&u, DType::I8).sample::<i8>(0), &[0, 1, 127, 127]);
    assert_eq!(cast(&u, DType::F32).sample::<f32>(0), &[0.0, 1.0, 9.223372036854776e18, 1.8446744073709552e19]);
}

fn half_batch(v: &[f32]) -> TensorList {
    let x = TensorList::from_samples::<f32>(&[vec![v.len()]], &[v.to_vec()]);
    cast(&x, DType::F16)
}

#[test]
fn float16_in_and_out_matches_dali() {
    // Ties round away from zero (DALI 2.4 bit patterns; NumPy would round to even).
    let t = [1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), -(1.0 + 2f32.powi(-11)), 2049.0, 2051.0, 2f32.powi(-25),
        3.0 * 2f32.powi(-25), 5.0 * 2f32.powi(-25), 2f32.powi(-14) + 2f32.powi(-25), 1.0 + 2f32.powi(-11) + 2f32.powi(-23),
        1.0 + 2f32.powi(-11) - 2f32.powi(-23), 65520.0];
    let h = half_batch(&t);
    let bits: Vec<u16> = h.bytes(0).chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    assert_eq!(bits, [15361, 15362, 48129, 26625, 26626, 1, 2, 3, 1025, 15361, 15360, 31744]);
    let x = half_batch(&[f32::NAN, 1e-45, -0.0, 65519.99]);
    let bits: Vec<u16> = x.bytes(0).chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    assert_eq!(bits, [32256, 0, 32768, 31743]);
    // From float16.
    let h = half_batch(&[0.5, 1.5, 2.5, -3.5, 65504.0, -65504.0, f32::INFINITY, 300.5]);
    assert_eq!(cast(&h, DType::U8).sample::<u8>(0), &[1, 2, 3, 0, 255, 0, 255, 255]);
    assert_eq!(cast(&h, DType::I8).sample::<i8>(0), &[1, 2, 3, -4, 127, -128, 127, 127]);
    assert_eq!(cast(&h, DType::I32).sample::<i32>(0), &[1, 2, 3, -4, 65504, -65504, i32::MAX, 301]);
    assert_eq!(cast(&h, DType::F32).sample::<f32>(0), &[0.5, 1.5, 2.5, -3.5, 65504.0, -65504.0, f32::INFINITY, 300.5]);
    assert_eq!(cast(&h, DType::Bool).bytes(0), &[1; 8]);
    assert_eq!(f16_to_f64(0x3c01), 1.0009765625);
    let nan = half_batch(&[f32::NAN]);
    assert_eq!(cast(&nan, DType::I32).sample::<i32>(0), &[i32::MIN]);
    assert_eq!(cast(&nan, DType::I64).sample::<i64>(0), &[i64::MIN]);
    assert_eq!(cast(&nan, DType::U64).sample::<u64>(0), &[1 << 63]);
    assert_eq!(cast(&nan, DType::U8).sample::<u8>(0), &[0]);
}

#[test]
fn float64_and_bool_match_dali() {
    let d = TensorList::from_samples::<f64>(&[vec![7]], &[vec![0.1, 1e-40, 3.4e38, 1e39, -1e39, 2.5, 1e300]]);
    assert_eq!(cast(&d, DType::F32).sample::<f32>(0), &[0.1, 9.99994610111476e-41, 3.4e38, f32::INFINITY, f32::NEG_INFINITY, 2.5, f32::INFINITY]);
    assert!(same(&values(&cast(&d, DType::F16)), &[0.0999755859375, 0.0, INF, INF, -INF, 2.5, INF]));
    assert_eq!(cast(&d, DType::I64).sample::<i64>(0), &[0, 0, i64::MAX, i64::MAX, i64::MIN, 3, i64::MAX]);
    assert_eq!(cast(&d, DType::I32).sample::<i32>(0), &[0, 0, i32::MAX, i32::MAX, i32::MIN, 3, i32::MAX]);
    assert_eq!(cast(&d, DType::U8).sample::<u8>(0), &[0, 0, 255, 255, 0, 3, 255]);
    // A double just above a float16 tie rounds up directly (no double rounding through f32).
    let e = 1.0 + 2f64.powi(-11);
    let d = TensorList::from_samples::<f64>(&[vec![4]], &[vec![f64::NAN, e + 2f64.powi(-40), -(e + 2f64.powi(-40)), e]]);
    assert!(same(&values(&cast(&d, DType::F16)), &[NAN, 1.0009765625, -1.0009765625, 1.0009765625]));
    assert_eq!(cast(&d, DType::I32).sample::<i32>(0), &[i32::MIN, 1, -1, 1]);
    assert_eq!(cast(&d, DType::U64).sample::<u64>(0), &[1 << 63, 1, 0, 1]);
    assert_eq!(cast(&d, DType::U32).sample::<u32>(0), &[0, 1, 0, 1]);
    // float -> BOOL rounds first (DALI: [False, False, False, True, False, True]).
    let f = TensorList::from_samples::<f32>(&[vec![6]], &[vec![0.4, -0.4, 0.49999997, 0.5, 1e-8, f32::NAN]]);
    assert_eq!(cast(&f, DType::Bool).bytes(0), &[0, 0, 0, 1, 0, 1]);
    let b = raw(DType::Bool, &[vec![2]], &[vec![1, 0]], "");
    assert_eq!(cast(&b, DType::U8).sample::<u8>(0), &[1, 0]);
    assert_eq!(cast(&b, DType::F32).sample::<f32>(0), &[1.0, 0.0]);
    assert_eq!(values(&cast(&b, DType::F16)), [1.0, 0.0]);
    assert_eq!(cast(&b, DType::I64).sample::<i64>(0), &[1, 0]);
}

#[test]
fn ragged_empty_and_argument_errors() {
    let x = TensorList::from_samples::<f32>(&[vec![2, 0], vec![1, 3]], &[vec![], vec![0.4, 0.6, -7.5]]).with_layout("HW");
    let out = cast(&x, DType::I16);
    assert_eq!(out.shape(0), &[2, 0]);
    assert_eq!(out.sample::<i16>(1), &[0, 1, -8]);
    assert_eq!(out.layout().as_str(), "HW");
    // DALI: 'Please specify values for arguments: "dtype"'.
    let err = run_op("Cast", vec![], &[&x], &[]).err().unwrap().to_string();
    assert!(err.contains("cast") && err.contains("dtype") && err.contains("required"), "{err}");
    let err = run_op("Cast", vec![("dtype", ArgValue::Int(99))], &[&x], &[]).err().unwrap().to_string();
    assert!(err.contains("cast") && err.contains("dtype"), "{err}");
}

/// FLOAT16 bits of every element of sample 0.
fn half_bits(t: &TensorList) -> Vec<u16> {
    assert_eq!(t.dtype(), DType::F16);
    t.bytes(0).chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

#[test]
fn every_operator_writing_float16_rounds_the_same_way() {
    // 3.0785803e-05 (516.50006 times the smallest subnormal) once gave 517 in some operators
    // and 516 in random.uniform (a converter that dropped bits before rounding); ties round
    // away from zero in all of DALI 2.4's CPU operators (fn.cast, fn.crop and
    // fn.crop_mirror_normalize printed 15361 and 48129).
    let v = [3.0785803e-05f32, 1.0 + 2f32.powi(-11), -(1.0 + 2f32.powi(-11)), -0.3, 99.7];
    let want = [517u16, 15361, 48129, 0xb4cd, 0x563b];
    let img = TensorList::from_samples::<f32>(&[vec![1, v.len(), 1]], &[v.to_vec()]).with_layout("HWC");
    let f16 = |t: DType| ArgValue::Int(t as i64);
    assert_eq!(half_bits(&cast(&img, DType::F16)), want);
    let crop = run_op("Crop", vec![("crop", ArgValue::FloatList(vec![1.0, v.len() as f64])), ("dtype", f16(DType::F16))], &[&img], &[]).unwrap();
    assert_eq!(half_bits(&crop[0]), want);
    let cmn_args = vec![("dtype", f16(DType::F16)), ("output_layout", ArgValue::Str("HWC".into()))];
    let cmn = run_op("CropMirrorNormalize", cmn_args, &[&img], &[]).unwrap();
    assert_eq!(half_bits(&cmn[0]), want);
    for (&x, &w) in v.iter().zip(&want) {
        let uniform_args = vec![("values", ArgValue::FloatList(vec![x as f64])), ("dtype", f16(DType::F16))];
        let drawn = run_op("random__Uniform", uniform_args, &[], &[]).unwrap();
        assert_eq!(half_bits(&drawn[0]), [w; 1]);
        let padded = run_op("Pad", vec![("fill_value", ArgValue::Float(x as f64)), ("shape", ArgValue::IntList(vec![2]))], &[&half_batch(&[0.0])], &[]).unwrap();
        assert_eq!(half_bits(&padded[0]), [0, w]);
    }
}
