//! Arithmetic expressions and subscripts through the executor: fused trees, broadcasting,
//! type promotion, and errors that name the operator and the sample.

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::ArgValue;

fn op(schema: &str, inputs: Vec<Edge>, args: Vec<(&str, ArgValue)>) -> OpSpec {
    OpSpec {
        schema: schema.into(),
        device: None,
        name: format!("{schema}_{}", inputs.len()),
        inputs,
        arg_inputs: vec![],
        args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>) -> PipelineSpec {
    PipelineSpec { batch_size: 4, num_threads: 2, device_id: None, seed: 7, prefetch_queue_depth: 1, exec_async: false, exec_pipelined: false, exec_dynamic: true, errors: Default::default(), ops, outputs }
}

fn uniform(shape: &[i64], dtype: i64, values: &[f64]) -> OpSpec {
    let mut o = op("random__Uniform", vec![], vec![
        ("values", ArgValue::FloatList(values.to_vec())),
        ("shape", ArgValue::IntList(shape.to_vec())),
        ("dtype", ArgValue::Int(dtype)),
    ]);
    o.name = format!("u{dtype}_{}", shape.len());
    o
}

const U8: i64 = 0;
const I16: i64 = 5;

#[test]
fn fused_expression_with_broadcasting_matches_a_scalar_reference() {
    // a: u8 [3, 4]; b: i16 [4]; out = (a * 2 - b) // 3 -> int32 (constants are INT32).
    let ops = vec![
        uniform(&[3, 4], U8, &[0.0, 7.0, 200.0, 255.0]),
        uniform(&[4], I16, &[-300.0, -1.0, 5.0, 1000.0]),
        op("_ArithmeticGenericOp", vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }], vec![
            ("expression_desc", ArgValue::Str("div(sub(mul(&0 $0:int32) &1) $1:int32)".into())),
            ("integer_constants", ArgValue::IntList(vec![2, 3])),
        ]),
    ];
    let mut ex = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }, Edge { op: 2, output: 0 }])).unwrap();
    let out = ex.next_cpu_batch().unwrap();
    for i in 0..4 {
        let a = out[0].sample::<u8>(i);
        let b = out[1].sample::<i16>(i);
        let c = out[2].sample::<i32>(i);
        assert_eq!(out[2].shape(i), &[3, 4]);
        for r in 0..3 {
            for k in 0..4 {
                assert_eq!(c[r * 4 + k], (a[r * 4 + k] as i32 * 2 - b[k] as i32) / 3);
            }
        }
    }
}

#[test]
fn shape_mismatch_names_the_operator_and_sample() {
    let ops = vec![
        uniform(&[3, 4], U8, &[1.0]),
        uniform(&[3], I16, &[1.0]),
        op("_ArithmeticGenericOp", vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }], vec![("expression_desc", ArgValue::Str("add(&0 &1)".into()))]),
    ];
    let mut ex = Executor::new(&spec(ops, vec![Edge { op: 2, output: 0 }])).unwrap();
    let err = ex.next_cpu_batch().err().unwrap().to_string();
    assert!(err.contains("arithmetic") && err.contains("sample 0") && err.contains("broadcast") && err.contains("[3, 4]"), "{err}");
}

#[test]
fn bool_arithmetic_and_division_by_zero_are_clear_errors() {
    let ops = vec![
        uniform(&[2], 11, &[1.0]),
        op("_ArithmeticGenericOp", vec![Edge { op: 0, output: 0 }], vec![("expression_desc", ArgValue::Str("sub(&0 &0)".into()))]),
    ];
    let err = Executor::new(&spec(ops, vec![Edge { op: 1, output: 0 }])).and_then(|mut e| e.next_cpu_batch()).err().unwrap().to_string();
    assert!(err.contains("cannot be booleans"), "{err}");
    let ops = vec![
        uniform(&[2], U8, &[0.0]),
        op("_ArithmeticGenericOp", vec![Edge { op: 0, output: 0 }], vec![("expression_desc", ArgValue::Str("div($0:int32 &0)".into())), ("integer_constants", ArgValue::IntList(vec![5]))]),
    ];
    let err = Executor::new(&spec(ops, vec![Edge { op: 1, output: 0 }])).and_then(|mut e| e.next_cpu_batch()).err().unwrap().to_string();
    assert!(err.contains("division by zero") && err.contains("sample 0"), "{err}");
}

#[test]
fn subscript_removes_indexed_axes_and_keeps_slices() {
    let ops = vec![
        uniform(&[4, 5, 3], U8, &[1.0, 2.0, 3.0, 9.0]),
        op("_TensorSubscript", vec![Edge { op: 0, output: 0 }], vec![
            ("num_subscripts", ArgValue::Int(3)),
            ("lo_0", ArgValue::Int(-3)),
            ("step_1", ArgValue::Int(-2)),
            ("at_2", ArgValue::Int(-1)),
        ]),
    ];
    let mut ex = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }])).unwrap();
    let out = ex.next_cpu_batch().unwrap();
    for i in 0..4 {
        let x = out[0].sample::<u8>(i);
        let y = out[1].sample::<u8>(i);
        assert_eq!(out[1].shape(i), &[3, 3]); // x[-3:, ::-2, -1]
        for r in 0..3 {
            for (c, col) in [4usize, 2, 0].iter().enumerate() {
                assert_eq!(y[r * 3 + c], x[((r + 1) * 5 + col) * 3 + 2]);
            }
        }
    }
}
