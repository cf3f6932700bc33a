//! `MakeContiguous`: what `DataNode.gpu()` inserts. On the cpu it hands its input on
//! unchanged (batches are already contiguous and shared, not copied); the mixed backend,
//! which uploads to the GPU, arrives with the CUDA runtime.

use crate::error::Result;
use crate::ops::{Device, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::TensorList;

/// Schema and backends.
pub static MAKE_CONTIGUOUS: OpDef = OpDef {
    schema: OpSchema {
        name: "MakeContiguous",
        doc: "Makes its input one contiguous batch; with device='mixed' copies it to the GPU.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|_| Ok(Box::new(PassThrough))),
    mixed: None,
    gpu: None,
};

struct PassThrough;

impl Operator for PassThrough {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        // Clones share the batch's memory: no bytes move.
        Ok(vec![ws.inputs[0].clone()])
    }
}
