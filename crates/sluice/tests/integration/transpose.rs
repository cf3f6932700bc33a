//! `fn.transpose` on CPU. Reference values were printed by NVIDIA DALI 2.4 (`fn.transpose`,
//! `device_id=None`, inputs from `fn.external_source` of `np.arange(n).reshape(shape)`).

use sluice::exec::Executor;
use sluice::graph::{Edge, PipelineSpec};
use sluice::ops::transpose::transpose_bytes;
use sluice::ops::ArgValue;
use sluice::tensor::{DType, TensorList};

use crate::common::{raw, run_op};
use crate::common::op;


fn arange_u8(shape: &[usize], layout: &str) -> TensorList {
    let n: usize = shape.iter().product();
    raw(DType::U8, &[shape.to_vec()], &[(0..n as u8).collect()], layout)
}

fn perm(p: &[i64]) -> (&'static str, ArgValue) {
    ("perm", ArgValue::IntList(p.to_vec()))
}

#[test]
fn hwc_to_chw_matches_dali_and_permutes_the_layout() {
    let x = arange_u8(&[2, 3, 2], "HWC");
    let out = run_op("Transpose", vec![perm(&[2, 0, 1])], &[&x], &[]).unwrap();
    // DALI: [[[0, 2, 4], [6, 8, 10]], [[1, 3, 5], [7, 9, 11]]], layout CHW, UINT8.
    assert_eq!(out[0].shape(0), &[2, 2, 3]);
    assert_eq!(out[0].sample::<u8>(0), &[0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]);
    assert_eq!(out[0].layout().as_str(), "CHW");
    assert_eq!(out[0].dtype(), DType::U8);
    // And back: CHW -> HWC restores the input.
    let back = run_op("Transpose", vec![perm(&[1, 2, 0])], &[&out[0]], &[]).unwrap();
    assert_eq!(back[0].shape(0), &[2, 3, 2]);
    assert_eq!(back[0].sample::<u8>(0), x.sample::<u8>(0));
    assert_eq!(back[0].layout().as_str(), "HWC");
}

#[test]
fn layout_arguments_match_dali() {
    let x = arange_u8(&[2, 3, 2], "HWC");
    let l = |args: Vec<(&str, ArgValue)>, x: &TensorList| run_op("Transpose", args, &[x], &[]).unwrap()[0].layout().to_string();
    // DALI: transpose_layout=False keeps 'HWC'; output_layout wins; no input layout -> ''.
    assert_eq!(l(vec![perm(&[2, 0, 1]), ("transpose_layout", ArgValue::Bool(false))], &x), "HWC");
    assert_eq!(l(vec![perm(&[2, 0, 1]), ("output_layout", ArgValue::Str("ABC".into()))], &x), "ABC");
    assert_eq!(l(vec![perm(&[2, 0, 1])], &arange_u8(&[2, 3, 2], "")), "");
}

#[test]
fn generic_permutations_and_wide_types_match_dali() {
    // int16 2x3x4, layout ABC, perm [1, 2, 0] -> 3x4x2, layout BCA.
    let v: Vec<i16> = (0..24).collect();
    let x = TensorList::from_samples::<i16>(&[vec![2, 3, 4]], &[v]).with_layout("ABC");
    let out = run_op("Transpose", vec![perm(&[1, 2, 0])], &[&x], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[3, 4, 2]);
    assert_eq!(out[0].layout().as_str(), "BCA");
    assert_eq!(out[0].sample::<i16>(0), &[0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23]);
    // float32 2x3x4x1 FHWC, perm [3, 1, 0, 2] -> 1x3x2x4 CHFW.
    let v: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let x = TensorList::from_samples::<f32>(&[vec![2, 3, 4, 1]], &[v]).with_layout("FHWC");
    let out = run_op("Transpose", vec![perm(&[3, 1, 0, 2])], &[&x], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[1, 3, 2, 4]);
    assert_eq!(out[0].layout().as_str(), "CHFW");
    let want: Vec<f32> = [0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23].iter().map(|&i| i as f32).collect();
    assert_eq!(out[0].sample::<f32>(0), &want[..]);
    // bool 1x3 -> 3x1 (DALI keeps BOOL).
    let x = raw(DType::Bool, &[vec![1, 3]], &[vec![1, 0, 1]], "");
    let out = run_op("Transpose", vec![perm(&[1, 0])], &[&x], &[]).unwrap();
    assert_eq!((out[0].dtype(), out[0].shape(0), out[0].bytes(0)), (DType::Bool, &[3usize, 1][..], &[1u8, 0, 1][..]));
}

#[test]
fn ragged_batches_transpose_each_sample() {
    // DALI: [[[0, 3], [1, 4], [2, 5]], [[0, 1, 2, 3]]].
    let x = TensorList::from_samples::<i32>(&[vec![2, 3], vec![4, 1]], &[(0..6).collect(), (0..4).collect()]);
    let out = run_op("Transpose", vec![perm(&[1, 0])], &[&x], &[]).unwrap();
    assert_eq!(out[0].shape(0), &[3, 2]);
    assert_eq!(out[0].sample::<i32>(0), &[0, 3, 1, 4, 2, 5]);
    assert_eq!(out[0].shape(1), &[1, 4]);
    assert_eq!(out[0].sample::<i32>(1), &[0, 1, 2, 3]);
}

#[test]
fn bad_permutations_are_errors_naming_the_operator_and_argument() {
    let x = arange_u8(&[2, 3, 2], "HWC");
    for p in [&[0, 0, 1][..], &[0, 1, 3], &[-1, 0, 1]] {
        let err = run_op("Transpose", vec![perm(p)], &[&x], &[]).err().expect("not a permutation").to_string();
        assert!(err.contains("transpose") && err.contains("perm") && err.contains("permutation"), "{err}");
    }
    // Valid permutation of the wrong length: a run-time error naming the sample.
    let err = run_op("Transpose", vec![perm(&[1, 0])], &[&x], &[]).err().unwrap().to_string();
    assert!(err.contains("transpose") && err.contains("perm") && err.contains("sample 0"), "{err}");
}

#[test]
fn without_perm_the_axes_are_reversed() {
    let x = arange_u8(&[2, 3, 4], "HWC");
    let out = run_op("Transpose", vec![], &[&x], &[]).expect("perm is optional (DALI 2.4)");
    assert_eq!(out[0].shape(0), &[4, 3, 2]);
    assert_eq!(out[0].layout().as_str(), "CWH");
    assert_eq!(out[0].bytes(0), &reference(x.bytes(0), &[2, 3, 4], &[2, 1, 0], 1)[..]);
}

/// Naive reference: out[idx] = in[idx permuted back].
fn reference(src: &[u8], shape: &[usize], p: &[usize], elem: usize) -> Vec<u8> {
    let out_shape: Vec<usize> = p.iter().map(|&a| shape[a]).collect();
    let n: usize = shape.iter().product();
    let mut out = vec![0; n * elem];
    for lin in 0..n {
        let mut rem = lin;
        let mut ii = vec![0; shape.len()];
        for a in (0..shape.len()).rev() {
            ii[p[a]] = rem % out_shape[a];
            rem /= out_shape[a];
        }
        let s = ii.iter().zip(shape).fold(0, |acc, (&i, &e)| acc * e + i);
        out[lin * elem..(lin + 1) * elem].copy_from_slice(&src[s * elem..(s + 1) * elem]);
    }
    out
}

#[test]
fn kernel_matches_reference_for_all_element_sizes() {
    for elem in [1usize, 2, 4, 8] {
        for (shape, p) in [
            (vec![5usize, 7, 3], vec![2usize, 0, 1]),
            (vec![3, 5, 7], vec![1, 2, 0]),
            (vec![2, 3, 4, 5], vec![3, 1, 0, 2]),
            (vec![2, 1, 4, 3], vec![0, 3, 2, 1]),
            (vec![6, 4], vec![1, 0]),
            (vec![2, 3, 4, 5, 2], vec![4, 2, 0, 3, 1]),
        ] {
            let n = shape.iter().product::<usize>() * elem;
            let src: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
            let mut dst = vec![0; n];
            transpose_bytes(&mut dst, &src, &shape, &p, elem);
            assert_eq!(dst, reference(&src, &shape, &p, elem), "{shape:?} {p:?} elem {elem}");
        }
    }
}

#[test]
fn in_a_pipeline_hwc_images_become_chw_whatever_the_thread_count() {
    let run = |threads: usize| {
        let src = op("random__Uniform", "img", vec![
            ("range", ArgValue::FloatList(vec![0.0, 256.0])),
            ("shape", ArgValue::IntList(vec![6, 5, 3])),
            ("dtype", ArgValue::Int(0)),
        ]);
        let mut t = op("Transpose", "t", vec![perm(&[2, 0, 1])]);
        t.inputs = vec![Edge { op: 0, output: 0 }];
        let spec = PipelineSpec {
            batch_size: 4, num_threads: threads, device_id: None, seed: 3, prefetch_queue_depth: 2,
            exec_async: false, exec_pipelined: false, exec_dynamic: true, errors: Default::default(), ops: vec![src, t],
            outputs: vec![Edge { op: 0, output: 0 }, Edge { op: 1, output: 0 }],
        };
        let mut ex = Executor::new(&spec).unwrap();
        ex.next_cpu_batch().unwrap()
    };
    let (a, b) = (run(1), run(3));
    for i in 0..4 {
        assert_eq!(a[1].shape(i), &[3, 6, 5]);
        assert!(a[1].is_dense_tensor());
        assert_eq!(a[1].bytes(i), reference(a[0].bytes(i), &[6, 5, 3], &[2, 0, 1], 1));
        assert_eq!(a[1].bytes(i), b[1].bytes(i));
    }
}
