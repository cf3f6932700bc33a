//! Executor promises: batches come out in order, the same seed gives the same batches
//! whatever the thread count or execution mode, and graph errors name the operator.

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::ArgValue;
use crate::common::op;

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>, threads: usize, exec_async: bool) -> PipelineSpec {
    PipelineSpec {
        batch_size: 16,
        num_threads: threads,
        device_id: None,
        seed: 1234,
        prefetch_queue_depth: 2,
        exec_async,
        exec_pipelined: exec_async, exec_dynamic: true,
        errors: Default::default(),
        ops,
        outputs,
    }
}

fn uniform_batches(threads: usize, exec_async: bool) -> Vec<Vec<f32>> {
    let ops = vec![op("random__Uniform", "u", vec![("range", ArgValue::FloatList(vec![0.0, 10.0])), ("shape", ArgValue::IntList(vec![3]))])];
    let mut ex = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }], threads, exec_async)).unwrap();
    (0..4)
        .map(|_| {
            let out = ex.next_cpu_batch().unwrap();
            (0..out[0].len()).flat_map(|i| out[0].sample::<f32>(i).to_vec()).collect()
        })
        .collect()
}

#[test]
fn same_seed_gives_identical_batches_whatever_the_thread_count_and_mode() {
    let a = uniform_batches(1, false);
    let b = uniform_batches(4, true);
    let c = uniform_batches(3, true);
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert_ne!(a[0], a[1], "consecutive iterations must differ");
    assert!(a.iter().flatten().all(|v| (0.0..10.0).contains(v)));
}

#[test]
fn coin_flip_takes_a_per_sample_probability_from_an_argument_input() {
    let mut ops = vec![op("random__Uniform", "p", vec![("values", ArgValue::FloatList(vec![0.0, 1.0]))])];
    let mut flip = op("random__CoinFlip", "c", vec![]);
    flip.arg_inputs = vec![("probability".into(), Edge { op: 0, output: 0 })];
    ops.push(flip);
    let mut ex = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }], 2, true)).unwrap();
    for _ in 0..3 {
        let out = ex.next_cpu_batch().unwrap();
        for i in 0..16 {
            let p = out[0].sample::<f32>(i)[0];
            let c = out[1].sample::<i32>(i)[0];
            assert_eq!(c as f32, p, "probability 0 or 1 decides the flip");
        }
    }
}

#[test]
fn graph_errors_name_the_operator() {
    let ops = vec![op("random__Uniform", "u", vec![("bogus", ArgValue::Int(1))])];
    let err = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }], 1, false)).err().unwrap().to_string();
    assert!(err.contains("random.uniform") && err.contains("bogus"), "{err}");

    let mut gpu_op = op("random__Uniform", "u", vec![]);
    gpu_op.device = Some("gpu".into());
    let err = Executor::new(&spec(vec![gpu_op], vec![Edge { op: 0, output: 0 }], 1, false)).err().unwrap().to_string();
    assert!(err.contains("random.uniform") && err.contains("gpu"), "{err}");

    let ops = vec![op("random__Uniform", "u", vec![("range", ArgValue::Str("x".into()))])];
    let err = Executor::new(&spec(ops, vec![Edge { op: 0, output: 0 }], 1, false)).err().unwrap().to_string();
    assert!(err.contains("range") && err.contains("list of float"), "{err}");
}

#[test]
fn unused_branches_are_pruned() {
    let ops = vec![
        op("random__Uniform", "unused", vec![("range", ArgValue::FloatList(vec![5.0, 1.0]))]), // invalid, but pruned
        op("random__CoinFlip", "used", vec![]),
    ];
    let ex = Executor::new(&spec(ops, vec![Edge { op: 1, output: 0 }], 1, false)).unwrap();
    assert_eq!(ex.graph().nodes.len(), 1);
    assert_eq!(ex.graph().nodes[0].name, "used");
}
