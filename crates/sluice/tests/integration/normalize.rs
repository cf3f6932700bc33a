//! `fn.normalize` on CPU. Expected values were printed by NVIDIA DALI 2.4 (`fn.normalize`,
//! `device_id=None`) for a = [[1, 2, 3], [4, 5, 7]] and b = [[0, 10, 20], [1, 1, 1],
//! [2, 3, 9]] (FLOAT, layout HW) fed through `fn.external_source`; Sluice must agree within
//! 1e-5 relative (DALI computes in float32, Sluice sums in float64).
use sluice::ops::ArgValue;
use sluice::tensor::{DType, TensorList};

use crate::common::run_op;


fn ab() -> TensorList {
    TensorList::from_samples::<f32>(&[vec![2, 3], vec![3, 3]], &[vec![1., 2., 3., 4., 5., 7.], vec![0., 10., 20., 1., 1., 1., 2., 3., 9.]]).with_layout("HW")
}

fn norm(x: &TensorList, args: Vec<(&str, ArgValue)>) -> TensorList {
    run_op("Normalize", args, &[x], &[]).unwrap().remove(0)
}

fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        let (g, w) = (*g as f64, *w);
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1e-1) || (g.is_infinite() && g == w), "{got:?} vs {want:?}");
    }
}

fn check(out: &TensorList, want: &[&[f64]]) {
    assert_eq!(out.len(), want.len());
    for (i, w) in want.iter().enumerate() {
        close(out.sample::<f32>(i), w);
    }
}

#[test]
fn default_normalizes_each_sample_over_all_axes() {
    let out = norm(&ab(), vec![]);
    assert_eq!((out.dtype(), out.layout().as_str()), (DType::F32, "HW"));
    check(&out, &[
        &[-1.3522467613220215, -0.8451542854309082, -0.33806172013282776, 0.1690308004617691, 0.676123321056366, 1.6903084516525269],
        &[-0.8355637788772583, 0.7644519805908203, 2.3644676208496094, -0.6755622029304504, -0.6755622029304504, -0.6755622029304504,
            -0.5155606269836426, -0.3555590808391571, 0.6044504046440125],
    ]);
}

#[test]
fn axes_and_axis_names_match_dali() {
    check(&norm(&ab(), vec![("axes", ArgValue::IntList(vec![0]))]), &[
        &[-0.9999999403953552, -0.9999999403953552, -0.9999999403953552, 0.9999999403953552, 0.9999999403953552, 0.9999999403953552],
        &[-1.2247447967529297, 1.382189393043518, 1.2838815450668335, 0.0, -0.9502553343772888, -1.1554933786392212, 1.2247447967529297,
            -0.43193426728248596, -0.1283881515264511],
    ]);
    let w = norm(&ab(), vec![("axis_names", ArgValue::Str("W".into()))]);
    check(&w, &[
        &[-1.2247447967529297, 0.0, 1.2247447967529297, -1.069045066833496, -0.2672613859176636, 1.336306095123291],
        // The constant row [1, 1, 1] has zero variance: DALI outputs 0, not NaN.
        &[-1.2247447967529297, 0.0, 1.2247447967529297, 0.0, 0.0, 0.0, -0.8626622557640076, -0.5391639471054077, 1.4018259048461914],
    ]);
    check(&norm(&ab(), vec![("axes", ArgValue::IntList(vec![-1]))]), &[w.sample::<f32>(0).iter().map(|&v| v as f64).collect::<Vec<_>>().as_slice(), &[
        -1.2247447967529297, 0.0, 1.2247447967529297, 0.0, 0.0, 0.0, -0.8626622557640076, -0.5391639471054077, 1.4018259048461914]]);
}

#[test]
fn ddof_epsilon_and_given_mean_and_stddev_match_dali() {
    check(&norm(&ab(), vec![("ddof", ArgValue::Int(1))]), &[
        &[-1.2344268560409546, -0.7715167999267578, -0.30860674381256104, 0.15430331230163574, 0.6172133684158325, 1.543033480644226],
        &[-0.7877771258354187, 0.7207322120666504, 2.2292416095733643, -0.6369261741638184, -0.6369261741638184, -0.6369261741638184,
            -0.4860752522945404, -0.33522433042526245, 0.5698813199996948],
    ]);
    check(&norm(&ab(), vec![("epsilon", ArgValue::Float(1.0))]), &[
        &[-1.206045389175415, -0.753778338432312, -0.30151137709617615, 0.1507556289434433, 0.6030226349830627, 1.5075565576553345],
        &[-0.8250694274902344, 0.7548507452011108, 2.334770917892456, -0.6670774221420288, -0.6670774221420288, -0.6670774221420288,
            -0.5090854167938232, -0.3510933816432953, 0.5968587398529053],
    ]);
    // Given mean: the standard deviation is computed around it.
    check(&norm(&ab(), vec![("mean", ArgValue::Float(2.0))]), &[
        &[-0.3872983157634735, 0.0, 0.3872983157634735, 0.774596631526947, 1.1618949174880981, 1.93649160861969],
        &[-0.284427285194397, 1.137709140777588, 2.559845447540283, -0.1422136425971985, -0.1422136425971985, -0.1422136425971985,
            0.0, 0.1422136425971985, 0.9954954981803894],
    ]);
    check(&norm(&ab(), vec![("stddev", ArgValue::Float(2.0))]), &[
        &[-1.3333333730697632, -0.8333333730697632, -0.3333333730697632, 0.16666662693023682, 0.6666666269302368, 1.6666666269302368],
        &[-2.6111111640930176, 2.3888888359069824, 7.388888835906982, -2.1111111640930176, -2.1111111640930176, -2.1111111640930176,
            -1.6111111640930176, -1.1111111640930176, 1.8888888359069824],
    ]);
    // epsilon is added to a given stddev squared too: (x - 1) / sqrt(4 + 5).
    check(&norm(&ab(), vec![("mean", ArgValue::Float(1.0)), ("stddev", ArgValue::Float(2.0)), ("epsilon", ArgValue::Float(5.0))]), &[
        &[0.0, 0.3333333134651184, 0.6666666269302368, 0.9999999403953552, 1.3333332538604736, 1.9999998807907104],
        &[-0.3333333134651184, 2.999999761581421, 6.3333330154418945, 0.0, 0.0, 0.0, 0.3333333134651184, 0.6666666269302368, 2.6666665077209473],
    ]);
    // A given stddev of 0 divides by zero (DALI: -inf / inf).
    let a = TensorList::from_samples::<f32>(&[vec![2, 3]], &[vec![1., 2., 3., 4., 5., 7.]]);
    let out = norm(&a, vec![("stddev", ArgValue::Float(0.0))]);
    assert_eq!(out.sample::<f32>(0), &[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY, f32::INFINITY, f32::INFINITY]);
    // A constant sample normalizes to 0.
    let ones = TensorList::from_samples::<f32>(&[vec![2, 2]], &[vec![1.0; 4]]);
    assert_eq!(norm(&ones, vec![]).sample::<f32>(0), &[0.0; 4]);
}

#[test]
fn integer_inputs_and_outputs_match_dali() {
    let out = norm(&ab(), vec![("scale", ArgValue::Float(64.0)), ("shift", ArgValue::Float(128.0)), ("dtype", ArgValue::Int(DType::U8 as i64))]);
    assert_eq!(out.dtype(), DType::U8);
    assert_eq!(out.sample::<u8>(0), &[41, 74, 106, 139, 171, 236]);
    assert_eq!(out.sample::<u8>(1), &[75, 177, 255, 85, 85, 85, 95, 105, 167]);
    let a = TensorList::from_samples::<f32>(&[vec![2, 3]], &[vec![1., 2., 3., 4., 5., 7.]]);
    let out = norm(&a, vec![("scale", ArgValue::Float(10.0)), ("dtype", ArgValue::Int(DType::I16 as i64))]);
    assert_eq!(out.sample::<i16>(0), &[-14, -8, -3, 2, 7, 17]);
    let u = TensorList::from_samples::<u8>(&[vec![2, 2]], &[vec![0, 255, 7, 9]]);
    close(norm(&u, vec![]).sample::<f32>(0), &[-0.6263840794563293, 1.7312238216400146, -0.561665415763855, -0.5431743860244751]);
    // DALI: "Normalize: unsupported output type: float16"; FLOAT64 and 64-bit inputs too.
    for dt in [DType::F16, DType::F64] {
        let err = run_op("Normalize", vec![("dtype", ArgValue::Int(dt as i64))], &[&a], &[]).err().unwrap().to_string();
        assert!(err.contains("normalize") && err.contains("dtype"), "{err}");
    }
    let d = TensorList::from_samples::<f64>(&[vec![2]], &[vec![1.0, 2.0]]);
    let err = run_op("Normalize", vec![], &[&d], &[]).err().unwrap().to_string();
    assert!(err.contains("normalize") && err.contains("FLOAT64") && err.contains("sample 0"), "{err}");
}

#[test]
fn batch_statistics_match_dali() {
    let x = TensorList::from_samples::<f32>(&[vec![2, 3], vec![2, 3]], &[vec![1., 2., 3., 4., 5., 7.], vec![0., 10., 20., 1., 1., 1.]]);
    check(&norm(&x, vec![("batch", ArgValue::Bool(true))]), &[
        &[-0.6588926911354065, -0.47501567006111145, -0.2911386489868164, -0.10726162791252136, 0.07661539316177368, 0.44436943531036377],
        &[-0.8427696824073792, 0.9960005283355713, 2.834770679473877, -0.6588926911354065, -0.6588926911354065, -0.6588926911354065],
    ]);
    check(&norm(&x, vec![("batch", ArgValue::Bool(true)), ("axes", ArgValue::IntList(vec![1]))]), &[
        &[-0.7094756364822388, -0.56758052110672, -0.42568540573120117, 0.35623517632484436, 0.7837173938751221, 1.6386818885803223],
        &[-0.8513708114624023, 0.56758052110672, 1.9865318536758423, -0.9262115955352783, -0.9262115955352783, -0.9262115955352783],
    ]);
    // Non-reduced extents must agree across the batch.
    let err = run_op("Normalize", vec![("batch", ArgValue::Bool(true)), ("axes", ArgValue::IntList(vec![1]))], &[&ab()], &[]).err().unwrap().to_string();
    assert!(err.contains("normalize") && err.contains("batch") && err.contains("sample 1"), "{err}");
}

#[test]
fn per_sample_mean_and_stddev_tensors_broadcast() {
    // DALI 2.4 with mean = [[1], [2]] / [[0], [5]] and stddev = [[2], [1]] / [[4], [2]] (2x1 per sample).
    let x = TensorList::from_samples::<f32>(&[vec![2, 3], vec![2, 3]], &[vec![1., 2., 3., 4., 5., 7.], vec![0., 10., 20., 1., 1., 1.]]);
    let mean = TensorList::from_samples::<f32>(&[vec![2, 1], vec![2, 1]], &[vec![1., 2.], vec![0., 5.]]);
    let std = TensorList::from_samples::<f32>(&[vec![2, 1], vec![2, 1]], &[vec![2., 1.], vec![4., 2.]]);
    let out = run_op("Normalize", vec![], &[&x], &[("mean", &mean), ("stddev", &std)]).unwrap().remove(0);
    check(&out, &[&[0.0, 0.5, 1.0, 2.0, 3.0, 5.0], &[0.0, 2.5, 5.0, -2.0, -2.0, -2.0]]);
    // Given mean, stddev computed around it over W (explicit axes, or inferred from the extent of 1).
    let want: [&[f64]; 2] = [
        &[0.0, 0.774596631526947, 1.549193263053894, 0.5619514584541321, 0.8429272174835205, 1.4048786163330078],
        &[0.0, 0.7745966911315918, 1.5491933822631836, -0.9999999403953552, -0.9999999403953552, -0.9999999403953552],
    ];
    check(&run_op("Normalize", vec![("axes", ArgValue::IntList(vec![1]))], &[&x], &[("mean", &mean)]).unwrap().remove(0), &want);
    check(&run_op("Normalize", vec![], &[&x], &[("mean", &mean)]).unwrap().remove(0), &want);
    // Given stddev, mean computed per row.
    check(&run_op("Normalize", vec![], &[&x], &[("stddev", &std)]).unwrap().remove(0), &[
        &[-0.5, 0.0, 0.5, -1.3333334922790527, -0.33333349227905273, 1.6666665077209473],
        &[-2.5, 0.0, 2.5, 0.0, 0.0, 0.0],
    ]);
    // DALI: "When providing both `mean` and `stddev`, their shapes must match."
    let s11 = TensorList::from_samples::<f32>(&[vec![1, 1], vec![1, 1]], &[vec![2.], vec![4.]]);
    let err = run_op("Normalize", vec![], &[&x], &[("mean", &mean), ("stddev", &s11)]).err().unwrap().to_string();
    assert!(err.contains("normalize") && err.contains("stddev") && err.contains("sample 0"), "{err}");
    // A mean whose extent matches neither 1 nor the input is rejected, naming the sample.
    let bad = TensorList::from_samples::<f32>(&[vec![2, 2], vec![2, 2]], &[vec![0.; 4], vec![0.; 4]]);
    let err = run_op("Normalize", vec![("axes", ArgValue::IntList(vec![1]))], &[&x], &[("mean", &bad)]).err().unwrap().to_string();
    assert!(err.contains("normalize") && err.contains("mean") && err.contains("sample 0"), "{err}");
}
