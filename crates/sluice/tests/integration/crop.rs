//! `fn.crop` and `fn.crop_mirror_normalize` on CPU. Reference literals were printed by NVIDIA
//! DALI 2.4 (`device_id=None`, inputs fed with `fn.external_source(batch=True, layout="HWC")`)
//! for the small inputs built below; Sluice must match exactly.

use std::collections::HashMap;

use sluice::exec::Executor;
use sluice::graph::{Edge, OpSpec, PipelineSpec};
use sluice::ops::{lookup, Args, ArgValue, OpContext, Workspace};
use sluice::tensor::TensorList;

/// Runs operator `schema` once on `input` with constant `args`.
fn run1(schema: &str, input: &TensorList, args: Vec<(&str, ArgValue)>) -> sluice::error::Result<TensorList> {
    let (def, _) = lookup(schema).unwrap();
    let name = def.schema.fn_name();
    let given = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let ctx = OpContext {
        args: Args::check(&def.schema, &name, given, &[])?,
        display_name: name.clone(),
        instance_name: name,
        op_id: 1,
        seed: 1,
        max_batch_size: input.len(),
        num_threads: 1,
        device_id: None,
        arg_input_names: vec![],
        resume_samples: 0,
    };
    let mut op = (def.cpu.unwrap())(&ctx)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let ws = Workspace { inputs: vec![input], arg_inputs: HashMap::new(), iteration: 0, batch_size: input.len(), frames: None, pool: &pool };
    Ok(op.run(&ws)?.remove(0))
}

/// 5x3x3 HWC uint8 holding 1..=45 (DALI input `np.arange(1, 46).reshape(5, 3, 3)`).
fn img5x3() -> TensorList {
    TensorList::from_samples::<u8>(&[vec![5, 3, 3]], &[(1..=45).collect()]).with_layout("HWC")
}

/// The 2x3x3 image used for the normalize cases.
fn img2x3() -> TensorList {
    let v: Vec<u8> = vec![0, 100, 255, 10, 20, 30, 1, 2, 3, 200, 201, 202, 7, 8, 9, 50, 60, 70];
    TensorList::from_samples::<u8>(&[vec![2, 3, 3]], &[v]).with_layout("HWC")
}

fn fl(v: Vec<f64>) -> ArgValue {
    ArgValue::FloatList(v)
}

#[test]
fn center_crop_and_corners_match_dali() {
    // fn.crop(crop=(7, 2), out_of_bounds_policy="trim_to_shape", crop_pos_x=1.0, crop_pos_y=0.3)
    let o = run1("Crop", &img5x3(), vec![("crop", fl(vec![7.0, 2.0])), ("crop_pos_x", ArgValue::Float(1.0)), ("crop_pos_y", ArgValue::Float(0.3)), ("out_of_bounds_policy", ArgValue::Str("trim_to_shape".into()))]).unwrap();
    assert_eq!(o.shape(0), &[5, 2, 3]);
    assert_eq!(o.sample::<u8>(0), &[4, 5, 6, 7, 8, 9, 13, 14, 15, 16, 17, 18, 22, 23, 24, 25, 26, 27, 31, 32, 33, 34, 35, 36, 40, 41, 42, 43, 44, 45]);
    // Center crop (2, 2) as FLOAT: anchor y = roundf(1.5) = 2, x = roundf(0.5) = 1.
    let o = run1("Crop", &img5x3(), vec![("crop", fl(vec![2.0, 2.0])), ("dtype", ArgValue::Int(9))]).unwrap();
    assert_eq!(o.sample::<f32>(0), &[22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0]);
    // Corners: pos (0, 0) and (1, 1).
    let o = run1("Crop", &img5x3(), vec![("crop", fl(vec![1.0, 1.0])), ("crop_pos_x", ArgValue::Float(0.0)), ("crop_pos_y", ArgValue::Float(0.0))]).unwrap();
    assert_eq!(o.sample::<u8>(0), &[1, 2, 3]);
    let o = run1("Crop", &img5x3(), vec![("crop", fl(vec![1.0, 1.0])), ("crop_pos_x", ArgValue::Float(1.0)), ("crop_pos_y", ArgValue::Float(1.0))]).unwrap();
    assert_eq!(o.sample::<u8>(0), &[43, 44, 45]);
    // CHW input, crop (2, 2), crop_pos_x=1.0: DALI [22, 25, 31, 34, 23, 26, 32, 35, 24, 27, 33, 36].
    let src: Vec<u8> = (0..3).flat_map(|c| (0..15).map(move |p| (1 + p * 3 + c) as u8)).collect();
    let chw = TensorList::from_samples::<u8>(&[vec![3, 5, 3]], &[src]).with_layout("CHW");
    let o = run1("Crop", &chw, vec![("crop", fl(vec![2.0, 2.0])), ("crop_pos_x", ArgValue::Float(1.0))]).unwrap();
    assert_eq!(o.shape(0), &[3, 2, 2]);
    assert_eq!(o.sample::<u8>(0), &[22, 25, 31, 34, 23, 26, 32, 35, 24, 27, 33, 36]);
}

#[test]
fn pad_with_fill_values_matches_dali() {
    // fn.crop(crop=(3, 5), crop_pos_x=0.5, out_of_bounds_policy="pad", fill_values=[7, 8, 9])
    let o = run1("Crop", &img5x3(), vec![("crop", fl(vec![3.0, 5.0])), ("out_of_bounds_policy", ArgValue::Str("pad".into())), ("fill_values", fl(vec![7.0, 8.0, 9.0]))]).unwrap();
    assert_eq!(o.shape(0), &[3, 5, 3]);
    assert_eq!(o.sample::<u8>(0), &[7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 7, 8, 9, 7, 8, 9, 19, 20, 21, 22, 23, 24, 25, 26, 27, 7, 8, 9, 7, 8, 9, 28, 29, 30, 31, 32, 33, 34, 35, 36, 7, 8, 9]);
}

#[test]
fn out_of_bounds_and_bad_sizes_are_errors() {
    let e = run1("Crop", &img5x3(), vec![("crop", fl(vec![7.0, 2.0]))]).unwrap_err().to_string();
    assert!(e.contains("crop") && e.contains("sample 0") && e.contains("'crop'") && e.contains("out_of_bounds_policy"), "{e}");
    for bad in [0.0, -1.0] {
        let e = run1("Crop", &img5x3(), vec![("crop", fl(vec![bad, 2.0]))]).unwrap_err().to_string();
        assert!(e.contains("crop") && e.contains("positive") && e.contains("sample 0"), "{e}");
    }
    let e = run1("Crop", &img5x3(), vec![("crop", fl(vec![2.0, 2.0])), ("crop_pos_x", ArgValue::Float(1.5))]).unwrap_err().to_string();
    assert!(e.contains("crop_pos_x"), "{e}");
    let e = run1("CropMirrorNormalize", &img2x3(), vec![("crop", fl(vec![2.0, 4.0]))]).unwrap_err().to_string();
    assert!(e.contains("crop_mirror_normalize") && e.contains("sample 0") && e.contains("'crop'"), "{e}");
}

#[test]
fn normalize_to_chw_and_hwc_with_mirror_matches_dali() {
    // crop=(2,2), mean=[1.5,2.5,3.5], std=[3,7,9] -> CHW float.
    let args = || vec![("crop", fl(vec![2.0, 2.0])), ("mean", fl(vec![1.5, 2.5, 3.5])), ("std", fl(vec![3.0, 7.0, 9.0]))];
    let o = run1("CropMirrorNormalize", &img2x3(), args()).unwrap();
    assert_eq!(o.shape(0), &[3, 2, 2]);
    assert_eq!(o.layout().as_str(), "CHW");
    let want: [f32; 12] = [2.8333334922790527, -0.1666666716337204, 1.8333333730697632, 16.166667938232422, 2.5, -0.0714285746216774, 0.785714328289032, 8.214285850524902, 2.944444417953491, -0.0555555559694767, 0.6111111044883728, 7.388888835906982];
    assert_eq!(o.sample::<f32>(0), &want);
    // + crop_pos_x=1.0, mirror=1, output_layout="HWC".
    let mut a = args();
    a.extend([("crop_pos_x", ArgValue::Float(1.0)), ("mirror", ArgValue::Int(1)), ("output_layout", ArgValue::Str("HWC".into()))]);
    let o = run1("CropMirrorNormalize", &img2x3(), a).unwrap();
    let want: [f32; 12] = [-0.1666666716337204, -0.0714285746216774, -0.0555555559694767, 2.8333334922790527, 2.5, 2.944444417953491, 16.166667938232422, 8.214285850524902, 7.388888835906982, 1.8333333730697632, 0.785714328289032, 0.6111111044883728];
    assert_eq!(o.sample::<f32>(0), &want);
}

#[test]
fn scale_and_shift_match_dali_bit_for_bit() {
    // mean=[12.3,117.7,201.1], std=[3.3,57.1,0.7], scale=1.7, shift=-3.1, output_layout="HWC".
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("mean", fl(vec![12.3, 117.7, 201.1])), ("std", fl(vec![3.3, 57.1, 0.7])), ("scale", ArgValue::Float(1.7)), ("shift", ArgValue::Float(-3.1)), ("output_layout", ArgValue::Str("HWC".into()))]).unwrap();
    let want: [f32; 18] = [-9.43636417388916, -3.626970052719116, 127.79998016357422, -4.284848213195801, -6.008756160736084, -418.62860107421875, -8.921212196350098, -6.544658184051514, -484.2000427246094, 93.59394836425781, -0.619964599609375, -0.9143088459968567, -5.830303192138672, -6.366024494171143, -469.62860107421875, 16.32121467590332, -4.8178629875183105, -321.4857482910156];
    assert_eq!(o.sample::<f32>(0), &want);
}

#[test]
fn float16_output_matches_dali() {
    // mean=[0.3], dtype=FLOAT16, output_layout="HWC": DALI printed -0.300048828125, 99.6875,
    // 254.75, 9.703125, ...; these are the IEEE half bit patterns of its output.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("mean", fl(vec![0.3])), ("dtype", ArgValue::Int(8)), ("output_layout", ArgValue::Str("HWC".into()))]).unwrap();
    let bits: Vec<u16> = o.bytes(0).chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
    assert_eq!(bits, [0xb4cd, 0x563b, 0x5bf6, 0x48da, 0x4ced, 0x4f6d, 0x399a, 0x3ecd, 0x4166, 0x5a3e, 0x5a46, 0x5a4e, 0x46b3, 0x47b3, 0x485a, 0x5236, 0x5376, 0x545b]);
}

#[test]
fn uint8_output_rounds_half_away_and_saturates_like_dali() {
    let hwc = ("output_layout", ArgValue::Str("HWC".into()));
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("mean", fl(vec![0.5])), ("std", fl(vec![2.0])), ("dtype", ArgValue::Int(0)), hwc.clone()]).unwrap();
    assert_eq!(o.sample::<u8>(0), &[0, 50, 127, 5, 10, 15, 0, 1, 1, 100, 100, 101, 3, 4, 4, 25, 30, 35]);
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("scale", ArgValue::Float(1.5)), ("dtype", ArgValue::Int(0)), hwc.clone()]).unwrap();
    assert_eq!(o.sample::<u8>(0), &[0, 150, 255, 15, 30, 45, 2, 3, 5, 255, 255, 255, 11, 12, 14, 75, 90, 105]);
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("mean", fl(vec![127.5])), ("std", fl(vec![3.0])), ("scale", ArgValue::Float(0.7)), ("shift", ArgValue::Float(2.3)), ("dtype", ArgValue::Int(0)), hwc.clone()]).unwrap();
    assert_eq!(o.sample::<u8>(0), &[0, 0, 32, 0, 0, 0, 0, 0, 0, 19, 19, 20, 0, 0, 0, 0, 0, 0]);
    // INT8, mean 100.5: halves away from zero, saturating at 127.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("mean", fl(vec![100.5])), ("dtype", ArgValue::Int(4)), hwc]).unwrap();
    assert_eq!(o.sample::<i8>(0), &[-101, -1, 127, -91, -81, -71, -100, -99, -98, 100, 101, 102, -94, -93, -92, -51, -41, -31]);
}

#[test]
fn pad_output_and_out_of_bounds_pad_and_trim_match_dali() {
    let hwc = || ("output_layout", ArgValue::Str("HWC".into()));
    let img = TensorList::from_samples::<u8>(&[vec![2, 2, 3]], &[(0..12).collect()]).with_layout("HWC");
    // pad_output with the default "error" policy: the extra channel is 0 (fill_values unused).
    let o = run1("CropMirrorNormalize", &img, vec![("pad_output", ArgValue::Bool(true)), ("fill_values", fl(vec![1.0, 2.0, 3.0, 4.0])), hwc()]).unwrap();
    assert_eq!(o.shape(0), &[2, 2, 4]);
    assert_eq!(o.sample::<f32>(0), &[0., 1., 2., 0., 3., 4., 5., 0., 6., 7., 8., 0., 9., 10., 11., 0.]);
    // pad_output + crop (2, 3) padded: fill_values [1,2,3,4] fill the outside and channel 4.
    let o = run1("CropMirrorNormalize", &img, vec![("pad_output", ArgValue::Bool(true)), ("fill_values", fl(vec![1.0, 2.0, 3.0, 4.0])), ("crop", fl(vec![2.0, 3.0])), ("out_of_bounds_policy", ArgValue::Str("pad".into())), hwc()]).unwrap();
    assert_eq!(o.sample::<f32>(0), &[1., 2., 3., 4., 0., 1., 2., 4., 3., 4., 5., 4., 1., 2., 3., 4., 6., 7., 8., 4., 9., 10., 11., 4.]);
    // CHW pad_output (default fill): DALI shape (4, 2, 3) with a zero plane.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("pad_output", ArgValue::Bool(true))]).unwrap();
    assert_eq!(o.shape(0), &[4, 2, 3]);
    assert_eq!(o.sample::<f32>(0), &[0., 10., 1., 200., 7., 50., 100., 20., 2., 201., 8., 60., 255., 30., 3., 202., 9., 70., 0., 0., 0., 0., 0., 0.]);
    // Out-of-bounds pad: fill values are written raw, not normalized.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("crop", fl(vec![2.0, 4.0])), ("out_of_bounds_policy", ArgValue::Str("pad".into())), ("fill_values", fl(vec![-1.0, -2.0, -3.0])), ("mean", fl(vec![1.0, 2.0, 3.0])), ("std", fl(vec![2.0, 2.0, 2.0])), hwc()]).unwrap();
    assert_eq!(o.sample::<f32>(0), &[-1.0, -2.0, -3.0, -0.5, 49.0, 126.0, 4.5, 9.0, 13.5, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, 99.5, 99.5, 99.5, 3.0, 3.0, 3.0, 24.5, 29.0, 33.5]);
    // Mirror applies to the padded window.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("crop", fl(vec![2.0, 4.0])), ("out_of_bounds_policy", ArgValue::Str("pad".into())), ("fill_values", fl(vec![-1.0, -2.0, -3.0])), ("mirror", ArgValue::Int(1)), hwc()]).unwrap();
    assert_eq!(o.sample::<f32>(0), &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 0.0, 100.0, 255.0, -1.0, -2.0, -3.0, 50.0, 60.0, 70.0, 7.0, 8.0, 9.0, 200.0, 201.0, 202.0, -1.0, -2.0, -3.0]);
    // trim_to_shape: the window shrinks to the image.
    let o = run1("CropMirrorNormalize", &img2x3(), vec![("crop", fl(vec![2.0, 4.0])), ("out_of_bounds_policy", ArgValue::Str("trim_to_shape".into())), ("mirror", ArgValue::Int(1)), hwc()]).unwrap();
    assert_eq!(o.shape(0), &[2, 3, 3]);
    assert_eq!(o.sample::<f32>(0), &[1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 0.0, 100.0, 255.0, 50.0, 60.0, 70.0, 7.0, 8.0, 9.0, 200.0, 201.0, 202.0]);
}

// ---- through the executor -------------------------------------------------------------

fn op(schema: &str, name: &str, args: Vec<(&str, ArgValue)>) -> OpSpec {
    OpSpec { schema: schema.into(), device: None, name: name.into(), inputs: vec![], arg_inputs: vec![], args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect() }
}

fn e(op: usize) -> Edge {
    Edge { op, output: 0 }
}

#[test]
fn per_sample_mirror_from_coin_flip_through_the_executor() {
    let img = op("random__Uniform", "img", vec![("range", fl(vec![0.0, 256.0])), ("shape", ArgValue::IntList(vec![6, 7, 3])), ("dtype", ArgValue::Int(0))]);
    let coin = op("random__CoinFlip", "coin", vec![]);
    let mut cmn = op("CropMirrorNormalize", "cmn", vec![("crop", fl(vec![4.0, 5.0])), ("mean", fl(vec![10.0, 20.0, 30.0])), ("std", fl(vec![2.0, 4.0, 8.0]))]);
    cmn.inputs = vec![e(0)];
    cmn.arg_inputs = vec![("mirror".into(), e(1))];
    let spec = PipelineSpec { batch_size: 6, num_threads: 2, device_id: None, seed: 5, prefetch_queue_depth: 2, exec_async: true, exec_pipelined: true, exec_dynamic: true, errors: Default::default(), ops: vec![img, coin, cmn], outputs: vec![e(0), e(1), e(2)] };
    let mut ex = Executor::new(&spec).unwrap();
    let (mean, std) = ([10f32, 20., 30.], [2f32, 4., 8.]);
    let mut seen = [false; 2];
    for _ in 0..4 {
        let out = ex.next_cpu_batch().unwrap();
        for i in 0..6 {
            let src = out[0].sample::<u8>(i);
            let m = out[1].sample::<i32>(i)[0] != 0;
            seen[m as usize] = true;
            assert_eq!(out[2].shape(i), &[3, 4, 5]);
            let got = out[2].sample::<f32>(i);
            // Window: y anchor roundf(0.5 * 2) = 1, x anchor roundf(0.5 * 2) = 1.
            for c in 0..3 {
                for y in 0..4 {
                    for x in 0..5 {
                        let sx = 1 + if m { 4 - x } else { x };
                        let v = src[((1 + y) * 7 + sx) * 3 + c] as f32;
                        assert_eq!(got[(c * 4 + y) * 5 + x], (v - mean[c]) * (1.0 / std[c]), "sample {i} c {c} ({x}, {y})");
                    }
                }
            }
        }
    }
    assert!(seen[0] && seen[1]);
}

#[test]
fn per_sample_crop_arguments_through_the_executor() {
    let img = op("random__Uniform", "img", vec![("range", fl(vec![0.0, 256.0])), ("shape", ArgValue::IntList(vec![6, 7, 2])), ("dtype", ArgValue::Int(0))]);
    let pos = op("random__Uniform", "pos", vec![("range", fl(vec![0.0, 1.0]))]);
    let mut crop = op("Crop", "crop", vec![("crop_h", ArgValue::Float(3.0)), ("crop_w", ArgValue::Float(2.0))]);
    crop.inputs = vec![e(0)];
    crop.arg_inputs = vec![("crop_pos_x".into(), e(1))];
    let spec = PipelineSpec { batch_size: 4, num_threads: 2, device_id: None, seed: 3, prefetch_queue_depth: 2, exec_async: true, exec_pipelined: true, exec_dynamic: true, errors: Default::default(), ops: vec![img, pos, crop], outputs: vec![e(0), e(1), e(2)] };
    let mut ex = Executor::new(&spec).unwrap();
    let out = ex.next_cpu_batch().unwrap();
    for i in 0..4 {
        let px = out[1].sample::<f32>(i)[0];
        let ax = (px * 5.0).round() as usize;
        let (src, got) = (out[0].sample::<u8>(i), out[2].sample::<u8>(i));
        assert_eq!(out[2].shape(i), &[3, 2, 2]);
        for y in 0..3 {
            for x in 0..2 {
                for c in 0..2 {
                    assert_eq!(got[(y * 2 + x) * 2 + c], src[((y + 2) * 7 + ax + x) * 2 + c]);
                }
            }
        }
    }
}
