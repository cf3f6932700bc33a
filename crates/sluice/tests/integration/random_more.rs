//! `fn.random.normal` and `fn.random.choice`. Values come from Sluice's counter-based
//! generator, so they cannot equal DALI's: these tests check distributions, shapes, types,
//! layouts and determinism. Shape/type facts were checked against NVIDIA DALI 2.4:
//! normal is FLOAT by default, takes its shape from an input when given, and rounds/clamps to
//! integer dtypes; choice keeps the input's type (INT32 for a Python constant), picks
//! along the first axis of an array (shape `shape + a.shape[1:]`, layout without its first
//! letter), and `p` weights the picks.

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::ArgValue;
use sluice::tensor::{DType, TensorList};

use crate::common::run_op;
use crate::common::op;


fn e(op: usize) -> Edge {
    Edge { op, output: 0 }
}

fn pipeline(ops: Vec<OpSpec>, outputs: Vec<Edge>, threads: usize) -> Executor {
    let spec = PipelineSpec {
        batch_size: 8, num_threads: threads, device_id: None, seed: 99, prefetch_queue_depth: 2,
        exec_async: threads > 1, exec_pipelined: threads > 1, exec_dynamic: true, errors: Default::default(), ops, outputs,
    };
    Executor::new(&spec).unwrap()
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (m, (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt())
}

#[test]
fn normal_has_the_requested_mean_and_stddev() {
    let out = run_op("random__Normal", vec![("shape", ArgValue::IntList(vec![100, 50])), ("mean", ArgValue::Float(3.0)), ("stddev", ArgValue::Float(2.0))], &[], &[]).unwrap();
    assert_eq!(out[0].len(), 3);
    assert_eq!(out[0].dtype(), DType::F32);
    let all: Vec<f64> = (0..3).flat_map(|i| out[0].sample::<f32>(i).iter().map(|&v| v as f64).collect::<Vec<_>>()).collect();
    let (m, s) = mean_std(&all);
    assert!((m - 3.0).abs() < 0.05 && (s - 2.0).abs() < 0.05, "mean {m} stddev {s}");
    // Roughly 68% within one stddev.
    let within = all.iter().filter(|x| (*x - 3.0).abs() < 2.0).count() as f64 / all.len() as f64;
    assert!((within - 0.6827).abs() < 0.02, "{within}");
    assert_ne!(out[0].sample::<f32>(0), out[0].sample::<f32>(1), "samples differ");
    // Scalar by default; stddev 0 gives the mean exactly (DALI: [10.0, 10.0]).
    let out = run_op("random__Normal", vec![], &[], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[] as &[usize]);
    let out = run_op("random__Normal", vec![("shape", ArgValue::IntList(vec![2])), ("mean", ArgValue::Float(10.0)), ("stddev", ArgValue::Float(0.0))], &[], &[]).unwrap();
    assert_eq!(out[0].sample::<f32>(0), &[10.0, 10.0]);
}

#[test]
fn normal_integer_dtypes_round_and_clamp() {
    let out = run_op("random__Normal", vec![("shape", ArgValue::IntList(vec![4000])), ("stddev", ArgValue::Float(100.0)), ("dtype", ArgValue::Int(DType::U8 as i64))], &[], &[]).unwrap();
    let v = out[0].sample::<u8>(0);
    let zeros = v.iter().filter(|&&x| x == 0).count() as f64 / v.len() as f64;
    assert!((zeros - 0.5).abs() < 0.05, "negative values clamp to 0: {zeros}");
    assert!(v.iter().any(|&x| x == 255), "values above 255 clamp");
    let out = run_op("random__Normal", vec![("shape", ArgValue::IntList(vec![3])), ("mean", ArgValue::Float(2.4)), ("stddev", ArgValue::Float(0.0)), ("dtype", ArgValue::Int(DType::I32 as i64))], &[], &[]).unwrap();
    assert_eq!(out[0].sample::<i32>(0), &[2, 2, 2]);
    let out = run_op("random__Normal", vec![("mean", ArgValue::Float(-2.5)), ("stddev", ArgValue::Float(0.0)), ("dtype", ArgValue::Int(DType::I64 as i64))], &[], &[]).unwrap();
    assert_eq!(out[0].sample::<i64>(0), &[-3], "half away from zero");
    let err = run_op("random__Normal", vec![("dtype", ArgValue::Int(DType::Bool as i64))], &[], &[]).err().unwrap().to_string();
    assert!(err.contains("random.normal") && err.contains("dtype"), "{err}");
}

#[test]
fn normal_takes_shape_from_its_input_and_per_sample_arguments() {
    let like = TensorList::from_samples::<u8>(&[vec![2, 2], vec![3, 1]], &[vec![0; 4], vec![0; 3]]);
    let mean = TensorList::from_samples::<f32>(&[vec![], vec![]], &[vec![-100.0], vec![100.0]]);
    let std = TensorList::from_samples::<f64>(&[vec![], vec![]], &[vec![0.0], vec![0.5]]);
    let out = run_op("random__Normal", vec![], &[&like], &[("mean", &mean), ("stddev", &std)]).unwrap();
    assert_eq!(out[0].shape(0), &[2, 2]);
    assert_eq!(out[0].shape(1), &[3, 1]);
    assert_eq!(out[0].sample::<f32>(0), &[-100.0; 4]);
    assert!(out[0].sample::<f32>(1).iter().all(|&v| (v - 100.0).abs() < 4.0 && v != 100.0));
    let neg = TensorList::from_samples::<f32>(&[vec![], vec![]], &[vec![1.0], vec![-1.0]]);
    let err = run_op("random__Normal", vec![], &[&like], &[("stddev", &neg)]).err().unwrap().to_string();
    assert!(err.contains("random.normal") && err.contains("stddev") && err.contains("sample 1"), "{err}");
}

#[test]
fn normal_and_choice_are_deterministic_across_thread_counts() {
    let run = |threads: usize| -> Vec<Vec<u8>> {
        let ops = vec![
            op("random__Normal", "n", vec![("shape", ArgValue::IntList(vec![5, 3]))]),
            op("Constant", "ten", vec![("idata", ArgValue::IntList(vec![10])), ("shape", ArgValue::IntList(vec![]))]),
            OpSpec { inputs: vec![e(1)], ..op("random__Choice", "c", vec![("shape", ArgValue::IntList(vec![7]))]) },
        ];
        let mut ex = pipeline(ops, vec![e(0), e(2)], threads);
        (0..3).flat_map(|_| {
            let out = ex.next_cpu_batch().unwrap();
            out.into_iter().flat_map(|t| (0..t.len()).map(move |i| t.bytes(i).to_vec()).collect::<Vec<_>>()).collect::<Vec<_>>()
        }).collect()
    };
    let (a, b, c) = (run(1), run(2), run(4));
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_ne!(a[0], a[16], "iterations differ");
}

#[test]
fn choice_of_a_scalar_is_range_n_with_the_input_type() {
    let n = TensorList::from_samples::<i64>(&[vec![], vec![]], &[vec![5], vec![2]]);
    let out = run_op("random__Choice", vec![("shape", ArgValue::IntList(vec![5000]))], &[&n], &[]).unwrap();
    assert_eq!(out[0].dtype(), DType::I64);
    assert_eq!(out[0].shape(0), &[5000]);
    let mut hist = [0usize; 5];
    for &v in out[0].sample::<i64>(0) {
        hist[v as usize] += 1;
    }
    assert!(hist.iter().all(|&h| (900..1100).contains(&h)), "{hist:?}");
    assert!(out[0].sample::<i64>(1).iter().all(|&v| v == 0 || v == 1));
    // No shape: a scalar (DALI: [2] of INT64 for a = np.int64(5)); UINT8 in, UINT8 out.
    let out = run_op("random__Choice", vec![], &[&n], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[] as &[usize]);
    let u = TensorList::from_samples::<u8>(&[vec![]], &[vec![3]]);
    assert_eq!(run_op("random__Choice", vec![], &[&u], &[]).unwrap()[0].dtype(), DType::U8);
    // A Python constant arrives as INT32 (DALI: fn.random.choice(5) is INT32).
    let three = TensorList::from_samples::<i32>(&[vec![], vec![], vec![]], &[vec![3], vec![3], vec![3]]);
    let out = run_op("random__Choice", vec![("shape", ArgValue::IntList(vec![4]))], &[&three], &[]).unwrap();
    assert_eq!(out[0].dtype(), DType::I32);
    assert_eq!(out[0].len(), 3);
    assert!(out[0].sample::<i32>(0).iter().all(|&v| (0..3).contains(&v)));
}

#[test]
fn choice_probabilities_weight_the_picks() {
    // DALI: p=[0, 0, 1] always gives 2.
    let three = TensorList::from_samples::<i32>(&[vec![]], &[vec![3]]);
    let out = run_op("random__Choice", vec![("p", ArgValue::FloatList(vec![0.0, 0.0, 1.0])), ("shape", ArgValue::IntList(vec![3]))], &[&three], &[]).unwrap();
    assert_eq!(out[0].sample::<i32>(0), &[2, 2, 2]);
    let out = run_op("random__Choice", vec![("p", ArgValue::FloatList(vec![0.1, 0.6, 0.3])), ("shape", ArgValue::IntList(vec![20000]))], &[&three], &[]).unwrap();
    let mut hist = [0f64; 3];
    for &v in out[0].sample::<i32>(0) {
        hist[v as usize] += 1.0 / 20000.0;
    }
    for (h, p) in hist.iter().zip([0.1, 0.6, 0.3]) {
        assert!((h - p).abs() < 0.015, "{hist:?}");
    }
    for (p, msg) in [(vec![0.5, 0.6, 0.1], "sum"), (vec![-0.5, 1.0, 0.5], ">= 0")] {
        let err = run_op("random__Choice", vec![("p", ArgValue::FloatList(p))], &[&three], &[]).err().unwrap().to_string();
        assert!(err.contains("random.choice") && err.contains("'p'") && err.contains(msg), "{err}");
    }
    let n = TensorList::from_samples::<i32>(&[vec![]], &[vec![4]]);
    let err = run_op("random__Choice", vec![("p", ArgValue::FloatList(vec![0.5, 0.5]))], &[&n], &[]).err().unwrap().to_string();
    assert!(err.contains("random.choice") && err.contains("'p'") && err.contains("sample 0"), "{err}");
}

#[test]
fn choice_of_an_array_picks_along_the_first_axis() {
    // DALI: 1-D float input [1.5, 2.5], shape [2, 3] -> 2x3 FLOAT of those values.
    let a = TensorList::from_samples::<f32>(&[vec![2]], &[vec![1.5, 2.5]]).with_layout("X");
    let out = run_op("random__Choice", vec![("shape", ArgValue::IntList(vec![2, 3]))], &[&a], &[]).unwrap();
    assert_eq!((out[0].dtype(), out[0].shape(0)), (DType::F32, &[2usize, 3][..]));
    assert!(out[0].sample::<f32>(0).iter().all(|&v| v == 1.5 || v == 2.5));
    assert_eq!(out[0].layout().as_str(), "");
    // DALI: a 3x2 INT16 input with layout AB gives a row [4, 5]-like 2-vector with layout B.
    let a = TensorList::from_samples::<i16>(&[vec![3, 2]], &[(0..6).collect()]).with_layout("AB");
    let out = run_op("random__Choice", vec![], &[&a], &[]).unwrap();
    assert_eq!((out[0].dtype(), out[0].shape(0), out[0].layout().as_str()), (DType::I16, &[2usize][..], "B"));
    let row = out[0].sample::<i16>(0);
    assert!(row[1] == row[0] + 1 && row[0] % 2 == 0, "{row:?}");
    let out = run_op("random__Choice", vec![("shape", ArgValue::IntList(vec![300]))], &[&a], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[300, 2]);
    let picks = out[0].sample::<i16>(0);
    for r in 0..3 {
        assert!(picks.chunks(2).any(|c| c == [2 * r as i16, 2 * r as i16 + 1]), "row {r} picked");
    }
    assert!(picks.chunks(2).all(|c| c[1] == c[0] + 1 && c[0] % 2 == 0));
    // shape_like second input.
    let like = TensorList::from_samples::<u8>(&[vec![4, 1]], &[vec![0; 4]]);
    let out = run_op("random__Choice", vec![], &[&a, &like], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[4, 1, 2]);
    // A float scalar is an error naming the operator (no input at all is refused by the
    // graph: `a` is a required input).
    let f = TensorList::from_samples::<f32>(&[vec![]], &[vec![3.0]]);
    let err = run_op("random__Choice", vec![], &[&f], &[]).err().unwrap().to_string();
    assert!(err.contains("random.choice") && err.contains("integer"), "{err}");
}
