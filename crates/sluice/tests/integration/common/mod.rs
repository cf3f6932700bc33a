//! Shared by the operator test files: run one operator directly on hand-built batches.
#![allow(dead_code)]

use sluice::error::Result;
use sluice::graph::OpSpec;
use sluice::ops::{lookup, ArgValue, Args, OpContext, Workspace};
use sluice::tensor::{DType, TensorList};

/// Runs operator `schema` once on `inputs` (and argument inputs), 2 worker threads.
pub fn run_op(schema: &str, args: Vec<(&str, ArgValue)>, inputs: &[&TensorList], arg_inputs: &[(&'static str, &TensorList)]) -> Result<Vec<TensorList>> {
    let (def, _) = lookup(schema).expect("registered");
    let per_sample: Vec<String> = arg_inputs.iter().map(|(n, _)| n.to_string()).collect();
    let display = def.schema.fn_name();
    let args = Args::check(&def.schema, &display, args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &per_sample)?;
    let n = inputs.first().map_or(3, |t| t.len());
    let ctx = OpContext {
        args,
        display_name: display,
        instance_name: "t".into(),
        op_id: 1,
        seed: 7,
        max_batch_size: n,
        num_threads: 2,
        device_id: None,
        arg_input_names: per_sample,
        resume_samples: 0,
    };
    let mut op = (def.cpu.expect("cpu backend"))(&ctx)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let ws = Workspace { inputs: inputs.to_vec(), arg_inputs: arg_inputs.iter().map(|(k, v)| (*k, *v)).collect(), iteration: 0, batch_size: n, frames: None, pool: &pool };
    op.run(&ws)
}

/// A batch of raw little-endian samples of any type.
pub fn raw(dtype: DType, shapes: &[Vec<usize>], bytes: &[Vec<u8>], layout: &str) -> TensorList {
    let ndim = shapes[0].len();
    let mut t = TensorList::new(dtype, ndim, shapes.iter().map(|s| s.as_slice()));
    for (d, s) in t.samples_mut().into_iter().zip(bytes) {
        d.copy_from_slice(s);
    }
    t.with_layout(layout)
}

/// An operator of a pipeline spec: `schema` named `name`, no inputs yet, `args` as given.
pub fn op(schema: &str, name: &str, args: Vec<(&str, ArgValue)>) -> OpSpec {
    OpSpec {
        schema: schema.into(),
        device: None,
        name: name.into(),
        inputs: vec![],
        arg_inputs: vec![],
        args: args.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}
