//! `fn.random_resized_crop` on CPU: output shape is `size`; pixels equal `fn.resize` of the
//! same window (given as its ROI) exactly, the window being the one the shared generator
//! draws for (seed, operator, iteration, sample); independent of the thread count.

use std::collections::HashMap;

use sluice::ops::decoders::random_crop_window::RandomCropParams;
use sluice::ops::{lookup, ArgValue, Args, OpContext, Workspace};
use sluice::rng::SampleRng;
use sluice::tensor::{DType, TensorList};

const SEED: u64 = 99;
const OP_ID: u64 = 5;

fn run(schema: &str, input: &TensorList, args: Vec<(&str, ArgValue)>, threads: usize, iter: u64) -> sluice::error::Result<TensorList> {
    let (def, _) = lookup(schema).unwrap();
    let name = def.schema.fn_name();
    let given = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let ctx = OpContext {
        args: Args::check(&def.schema, &name, given, &[])?,
        display_name: name.clone(),
        instance_name: name,
        op_id: OP_ID,
        seed: SEED,
        max_batch_size: input.len(),
        num_threads: threads,
        device_id: None,
        arg_input_names: vec![],
        resume_samples: 0,
    };
    let mut op = (def.cpu.unwrap())(&ctx)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let ws = Workspace { inputs: vec![input], arg_inputs: HashMap::new(), iteration: iter, batch_size: input.len(), frames: None, pool: &pool };
    Ok(op.run(&ws)?.remove(0))
}

fn images() -> TensorList {
    let dims = [(120usize, 90usize, 3usize), (37, 211, 3), (64, 64, 1), (300, 41, 3)];
    let shapes: Vec<Vec<usize>> = dims.iter().map(|&(h, w, c)| vec![h, w, c]).collect();
    let data: Vec<Vec<u8>> = dims
        .iter()
        .map(|&(h, w, c)| (0..h * w * c).map(|k| ((k * 7 + (k / (w * c)) * 13) ^ (k % 29)) as u8).collect())
        .collect();
    TensorList::from_samples::<u8>(&shapes, &data).with_layout("HWC")
}

fn fl(v: &[f64]) -> ArgValue {
    ArgValue::FloatList(v.to_vec())
}

#[test]
fn equals_resize_of_the_same_window() {
    let input = images();
    let gen = RandomCropParams { area: (0.08, 1.0), aspect: (0.75, 1.333333), num_attempts: 10 };
    for (size, interp, dtype) in [([32.0, 48.0], 1i64, None), ([224.0, 224.0], 1, Some(9i64)), ([17.0, 5.0], 3, None), ([40.0, 40.0], 0, None)] {
        for iter in 0..3u64 {
            let mut args = vec![("size", fl(&size)), ("interp_type", ArgValue::Int(interp))];
            if let Some(d) = dtype {
                args.push(("dtype", ArgValue::Int(d)));
            }
            let out = run("RandomResizedCrop", &input, args.clone(), 1, iter).unwrap();
            let out2 = run("RandomResizedCrop", &input, args, 2, iter).unwrap();
            assert_eq!(out.dtype(), if dtype.is_some() { DType::F32 } else { DType::U8 });
            for i in 0..input.len() {
                let s = input.shape(i);
                assert_eq!(out.shape(i), &[size[0] as usize, size[1] as usize, s[2]]);
                assert!(out.bytes(i) == out2.bytes(i), "thread count changed sample {i}");
                let w = gen.window(&mut SampleRng::new(SEED, OP_ID, iter, i as u64), s[0], s[1]);
                let one = TensorList::from_samples::<u8>(&[s.to_vec()], &[input.sample::<u8>(i).to_vec()]).with_layout("HWC");
                let mut rargs = vec![
                    ("size", fl(&size)),
                    ("interp_type", ArgValue::Int(interp)),
                    ("roi_start", fl(&[w.y as f64, w.x as f64])),
                    ("roi_end", fl(&[(w.y + w.h) as f64, (w.x + w.w) as f64])),
                ];
                if let Some(d) = dtype {
                    rargs.push(("dtype", ArgValue::Int(d)));
                }
                let want = run("Resize", &one, rargs, 1, 0).unwrap();
                assert_eq!(want.shape(0), out.shape(i));
                assert!(want.bytes(0) == out.bytes(i), "sample {i} window {w:?} size {size:?} interp {interp}");
            }
        }
    }
}

#[test]
fn bad_arguments_name_operator_and_argument() {
    let input = images();
    for (args, name) in [
        (vec![("size", fl(&[0.0, 4.0]))], "size"),
        (vec![("size", fl(&[4.0, 4.0, 4.0]))], "size"),
        (vec![("size", fl(&[4.0])), ("random_aspect_ratio", fl(&[2.0, 1.0]))], "random_aspect_ratio"),
        (vec![("size", fl(&[4.0])), ("interp_type", ArgValue::Int(42))], "interp_type"),
        (vec![("size", fl(&[4.0])), ("min_filter", ArgValue::Int(42))], "min_filter"),
    ] {
        let err = run("RandomResizedCrop", &input, args, 1, 0).err().expect("must fail").to_string();
        assert!(err.contains("random_resized_crop") && err.contains(name), "{err}");
    }
    // min_filter / mag_filter override interp_type, as in fn.resize.
    let a = run("RandomResizedCrop", &input, vec![("size", fl(&[20.0, 20.0])), ("min_filter", ArgValue::Int(3)), ("mag_filter", ArgValue::Int(0))], 1, 0).unwrap();
    let one = TensorList::from_samples::<u8>(&[input.shape(1).to_vec()], &[input.sample::<u8>(1).to_vec()]).with_layout("HWC");
    let s = input.shape(1);
    let w = RandomCropParams { area: (0.08, 1.0), aspect: (0.75, 1.333333), num_attempts: 10 }.window(&mut SampleRng::new(SEED, OP_ID, 0, 1), s[0], s[1]);
    let want = run("Resize", &one, vec![("size", fl(&[20.0, 20.0])), ("min_filter", ArgValue::Int(3)), ("mag_filter", ArgValue::Int(0)), ("roi_start", fl(&[w.y as f64, w.x as f64])), ("roi_end", fl(&[(w.y + w.h) as f64, (w.x + w.w) as f64]))], 1, 0).unwrap();
    assert!(want.bytes(0) == a.bytes(1));
    // One value of size means a square output.
    let out = run("RandomResizedCrop", &input, vec![("size", fl(&[12.0]))], 1, 0).unwrap();
    assert_eq!(out.shape(0), &[12, 12, 3]);
}
