//! `fn.slice` on CPU, inputs form, against NVIDIA DALI 2.4 (`device_id=None`): input
//! `np.arange(70, dtype=np.int32).reshape(7, 10, 1)` with layout HWC, anchor and shape fed
//! as float32 per-sample inputs; output shapes, first elements and padded values printed by
//! DALI 2.4.

use std::collections::HashMap;

use sluice::ops::{lookup, ArgValue, Args, OpContext, Workspace};
use sluice::tensor::TensorList;

fn run(input: &TensorList, a: &[f32], s: &[f32], args: Vec<(&str, ArgValue)>) -> sluice::error::Result<TensorList> {
    let (def, _) = lookup("Slice").unwrap();
    let name = def.schema.fn_name();
    let given = args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let ctx = OpContext {
        args: Args::check(&def.schema, &name, given, &[])?,
        display_name: name.clone(),
        instance_name: name,
        op_id: 1,
        seed: 1,
        max_batch_size: 1,
        num_threads: 1,
        device_id: None,
        arg_input_names: vec![],
        resume_samples: 0,
    };
    let mut op = (def.cpu.unwrap())(&ctx)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let an = TensorList::from_samples::<f32>(&[vec![a.len()]], &[a.to_vec()]);
    let sh = TensorList::from_samples::<f32>(&[vec![s.len()]], &[s.to_vec()]);
    let ws = Workspace { inputs: vec![input, &an, &sh], arg_inputs: HashMap::new(), iteration: 0, batch_size: 1, frames: None, pool: &pool };
    Ok(op.run(&ws)?.remove(0))
}

fn img() -> TensorList {
    TensorList::from_samples::<i32>(&[vec![7, 10, 1]], &[(0..70).collect()]).with_layout("HWC")
}

fn b(v: bool) -> ArgValue {
    ArgValue::Bool(v)
}

#[test]
fn windows_match_dali() {
    let abs = || vec![("normalized_anchor", b(false)), ("normalized_shape", b(false))];
    // (anchor, shape, args, DALI output [H, W], DALI first element (y, x)).
    let cases: Vec<([f32; 2], [f32; 2], Vec<(&str, ArgValue)>, [usize; 2], (i32, i32))> = vec![
        ([0.1, 0.2], [0.5, 0.5], vec![], [4, 5], (1, 1)),
        ([0.05, 0.05], [0.25, 0.3], vec![], [2, 2], (0, 1)),
        ([0.15, 0.15], [0.33, 0.33], vec![], [2, 3], (1, 2)),
        ([0.25, 0.5], [0.5, 0.5], vec![], [3, 5], (4, 3)),
        ([0.35, 0.5], [0.35, 0.5], vec![], [3, 4], (4, 3)),
        ([0.45, 0.07], [0.1, 0.43], vec![], [4, 1], (0, 4)),
        ([2.0, 3.0], [4.0, 2.0], abs(), [2, 4], (3, 2)),
        ([2.5, 3.5], [4.5, 2.5], abs(), [2, 4], (4, 3)),
        ([0.1, 0.2], [3.0, 2.0], vec![("normalized_shape", b(false))], [2, 3], (1, 1)),
        ([3.0, 1.0], [0.5, 0.5], vec![("normalized_anchor", b(false))], [4, 5], (1, 3)),
        ([1.0, 2.0], [3.0, 4.0], { let mut v = abs(); v.push(("axes", ArgValue::IntList(vec![0, 1]))); v }, [3, 4], (1, 2)),
        ([1.0, 2.0], [3.0, 4.0], { let mut v = abs(); v.push(("axis_names", ArgValue::Str("HW".into()))); v }, [3, 4], (1, 2)),
    ];
    for (a, s, args, shape, (y, x)) in cases {
        let desc = format!("anchor {a:?} shape {s:?} {args:?}");
        let o = run(&img(), &a, &s, args).unwrap();
        assert_eq!(o.shape(0), &[shape[0], shape[1], 1], "{desc}");
        // A full window of the arange: element (r, c) is (y + r) * 10 + x + c.
        let want: Vec<i32> = (0..shape[0]).flat_map(|r| (0..shape[1]).map(move |c| (y + r as i32) * 10 + x + c as i32)).collect();
        assert_eq!(o.sample::<i32>(0), want.as_slice(), "{desc}");
    }
}

#[test]
fn out_of_bounds_policies_match_dali() {
    let pad = |v: f64| vec![("out_of_bounds_policy", ArgValue::Str("pad".into())), ("fill_values", ArgValue::FloatList(vec![v]))];
    let o = run(&img(), &[0.8, 0.8], &[0.5, 0.5], pad(-5.0)).unwrap();
    assert_eq!(o.shape(0), &[3, 5, 1]);
    let mut want = vec![-5i32; 15];
    want[0] = 68;
    want[1] = 69;
    assert_eq!(o.sample::<i32>(0), want.as_slice());
    let o = run(&img(), &[0.8, 0.8], &[0.5, 0.5], vec![("out_of_bounds_policy", ArgValue::Str("trim_to_shape".into()))]).unwrap();
    assert_eq!((o.shape(0), o.sample::<i32>(0)), (&[1usize, 2, 1][..], &[68, 69][..]));
    let mut args = pad(0.0);
    args.extend([("normalized_anchor", b(false)), ("normalized_shape", b(false)), ("dtype", ArgValue::Int(9))]);
    let o = run(&img(), &[-1.0, 2.0], &[3.0, 2.0], args).unwrap();
    assert_eq!((o.shape(0), o.sample::<f32>(0)), (&[2usize, 3, 1][..], &[0.0f32, 20.0, 21.0, 0.0, 30.0, 31.0][..]));
    // Default policy: an error naming the operator, the inputs and the sample.
    let err = run(&img(), &[0.8, 0.8], &[0.5, 0.5], vec![]).unwrap_err().to_string();
    for part in ["slice", "anchor", "sample 0", "out_of_bounds_policy"] {
        assert!(err.contains(part), "error lacks '{part}': {err}");
    }
}

#[test]
fn any_dtype_and_layoutless_inputs() {
    // u16 2-D input without layout: axes default [1, 0] (x first).
    let t = TensorList::from_samples::<u16>(&[vec![4, 6]], &[(100..124).collect()]);
    let o = run(&t, &[2.0, 1.0], &[3.0, 2.0], vec![("normalized_anchor", b(false)), ("normalized_shape", b(false))]).unwrap();
    assert_eq!(o.shape(0), &[2, 3]);
    assert_eq!(o.sample::<u16>(0), &[108, 109, 110, 114, 115, 116]);
}
