//! `fn.flip` on CPU. Reference values were printed by NVIDIA DALI 2.4 (`fn.flip`,
//! `device_id=None`) for `np.arange(n).reshape(shape)` inputs; Sluice must match exactly.

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::flip::kernel::flip_bytes;
use sluice::ops::flip::find_axes;
use sluice::ops::ArgValue;
use sluice::tensor::Layout;
use crate::common::op;

/// Flips `0..n` of `shape` under `layout` like the operator does.
fn flip_layout(layout: &str, shape: &[usize], h: bool, v: bool, d: bool) -> Vec<u8> {
    let axes = find_axes(&Layout::from(layout), shape.len()).unwrap();
    let flags = axes.flags(shape.len(), h, v, d);
    let src: Vec<u8> = (0..shape.iter().product::<usize>() as u8).collect();
    let mut dst = vec![0; src.len()];
    flip_bytes(&mut dst, &src, shape, &flags[..shape.len()], 1);
    dst
}

#[test]
fn layouts_match_dali() {
    // 2x3x2 (HWC): horizontal (default), vertical only; depthwise is a no-op without D.
    assert_eq!(flip_layout("HWC", &[2, 3, 2], true, false, false), [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
    assert_eq!(flip_layout("HWC", &[2, 3, 2], false, true, false), [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]);
    assert_eq!(flip_layout("HWC", &[2, 3, 2], false, false, true), (0..12).collect::<Vec<u8>>());
    assert_eq!(flip_layout("", &[2, 3, 2], true, false, false), [4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
    // Same data as CHW: W is last.
    assert_eq!(flip_layout("CHW", &[2, 3, 2], true, false, false), [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10]);
    // 2x2x2x2 under several layouts.
    let s = [2, 2, 2, 2];
    let id: Vec<u8> = (0..16).collect();
    assert_eq!(flip_layout("", &s, false, false, true), id, "empty 4-D = FHWC: no D");
    assert_eq!(flip_layout("", &s, false, true, false), [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11]);
    assert_eq!(flip_layout("FHWC", &s, false, true, false), [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11]);
    assert_eq!(flip_layout("DHWC", &s, false, false, true), [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(flip_layout("DHWC", &s, false, true, false), [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11]);
    assert_eq!(flip_layout("CDHW", &s, false, false, true), [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11]);
    assert_eq!(flip_layout("CDHW", &s, false, true, false), [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13]);
    assert_eq!(flip_layout("FCHW", &s, false, false, true), id);
    assert_eq!(flip_layout("FCHW", &s, false, true, false), [2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13]);
}

#[test]
fn bad_layouts_are_rejected() {
    assert!(find_axes(&Layout::from("XYZ"), 3).unwrap_err().contains("XYZ"));
    assert!(find_axes(&Layout::empty(), 2).is_err());
    assert!(find_axes(&Layout::empty(), 5).is_err());
}

#[test]
fn wide_elements_move_whole() {
    // float32 1x3x2 HWC: DALI gives [[4, 5], [2, 3], [0, 1]].
    let src: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let mut dst = vec![0f32; 6];
    flip_bytes(bytemuck::cast_slice_mut(&mut dst), bytemuck::cast_slice(&src), &[1, 3, 2], &[false, true, false], 4);
    assert_eq!(dst, [4.0, 5.0, 2.0, 3.0, 0.0, 1.0]);
}

// ---- through the executor -------------------------------------------------------------

fn spec(ops: Vec<OpSpec>, outputs: Vec<Edge>) -> PipelineSpec {
    PipelineSpec { batch_size: 6, num_threads: 2, device_id: None, seed: 5, prefetch_queue_depth: 2, exec_async: true, exec_pipelined: true, exec_dynamic: true, errors: Default::default(), ops, outputs }
}

fn image_source(shape: &[i64], dtype: i64) -> OpSpec {
    op("random__Uniform", "img", vec![
        ("range", ArgValue::FloatList(vec![0.0, 256.0])),
        ("shape", ArgValue::IntList(shape.to_vec())),
        ("dtype", ArgValue::Int(dtype)),
    ])
}

fn e(op: usize) -> Edge {
    Edge { op, output: 0 }
}

#[test]
fn per_sample_flags_flip_each_sample_as_asked() {
    // horizontal from coin_flip (per sample), vertical constant 1.
    let coin = op("random__CoinFlip", "coin", vec![]);
    let mut flip = op("Flip", "flip", vec![("vertical", ArgValue::Int(1))]);
    flip.inputs = vec![e(0)];
    flip.arg_inputs = vec![("horizontal".into(), e(1))];
    let (h, w, c) = (5usize, 7usize, 3usize);
    let ops = vec![image_source(&[h as i64, w as i64, c as i64], 0), coin, flip];
    let mut ex = Executor::new(&spec(ops, vec![e(0), e(1), e(2)])).unwrap();
    let mut seen = [false; 2];
    for _ in 0..4 {
        let out = ex.next_cpu_batch().unwrap();
        for i in 0..6 {
            let src = out[0].sample::<u8>(i);
            let hflip = out[1].sample::<i32>(i)[0] != 0;
            seen[hflip as usize] = true;
            assert_eq!(out[2].shape(i), &[h, w, c]);
            let got = out[2].sample::<u8>(i);
            for y in 0..h {
                for x in 0..w {
                    let (sy, sx) = (h - 1 - y, if hflip { w - 1 - x } else { x });
                    assert_eq!(&got[(y * w + x) * c..][..c], &src[(sy * w + sx) * c..][..c], "sample {i} ({x}, {y})");
                }
            }
        }
    }
    assert!(seen[0] && seen[1], "both flag values occurred");
}

#[test]
fn any_dtype_and_sequences_flip() {
    // int64 FHWC-by-default 4-D input, horizontal flip: each frame's rows reversed by pixel.
    let mut flip = op("Flip", "flip", vec![]);
    flip.inputs = vec![e(0)];
    let ops = vec![image_source(&[2, 3, 4, 2], 7), flip];
    let mut ex = Executor::new(&spec(ops, vec![e(0), e(1)])).unwrap();
    let out = ex.next_cpu_batch().unwrap();
    for i in 0..6 {
        let (src, got) = (out[0].sample::<i64>(i), out[1].sample::<i64>(i));
        for f in 0..2 {
            for y in 0..3 {
                for x in 0..4 {
                    let o = ((f * 3 + y) * 4 + x) * 2;
                    let s = ((f * 3 + y) * 4 + (3 - x)) * 2;
                    assert_eq!(&got[o..o + 2], &src[s..s + 2]);
                }
            }
        }
    }
}

#[test]
fn inputs_without_h_and_w_are_errors_naming_the_operator_and_sample() {
    let mut flip = op("Flip", "flip", vec![]);
    flip.inputs = vec![e(0)];
    let mut ex = Executor::new(&spec(vec![image_source(&[4, 6], 0), flip], vec![e(1)])).unwrap();
    let err = ex.next_cpu_batch().expect_err("2-D input without layout must fail").to_string();
    assert!(err.contains("flip") && err.contains("sample 0") && err.contains("layout"), "{err}");
}
