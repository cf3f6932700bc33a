//! `MakeContiguous`: what `DataNode.gpu()` inserts. On the cpu it hands its input on
//! unchanged (batches are already contiguous and shared, not copied); on the mixed stage it
//! uploads the batch to the GPU in one copy. `Copy` (`fn.copy`): its input, on either
//! backend. Batches are never written once made, so the "copy" shares the input's memory.

use crate::error::Result;
use crate::ops::{Device, GpuOperator, GpuWorkspace, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{TensorList, TensorListGpu};

/// Schema and backends.
pub static MAKE_CONTIGUOUS: OpDef = OpDef {
    schema: OpSchema {
        name: "MakeContiguous",
        doc: "Makes its input one contiguous batch; with device='mixed' copies it to the GPU.",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|_| Ok(Box::new(PassThrough))),
    mixed: Some(|_, _| Ok(Box::new(Upload))),
    gpu: None,
};

/// `fn.copy`.
pub static COPY: OpDef = OpDef {
    schema: OpSchema {
        name: "Copy",
        doc: "Creates a copy of the input tensor (batches are immutable: the copy shares the input's memory).",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|_| Ok(Box::new(PassThrough))),
    mixed: None,
    gpu: Some(|_, _| Ok(Box::new(PassThroughGpu))),
};

struct PassThrough;

impl Operator for PassThrough {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        // Clones share the batch's memory: no bytes move.
        Ok(vec![ws.inputs[0].clone()])
    }
}

struct PassThroughGpu;

impl GpuOperator for PassThroughGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        Ok(vec![input.reinterpreted(input.meta().clone())])
    }
}

struct Upload;

impl GpuOperator for Upload {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.cpu_inputs[0];
        let out = TensorListGpu::alloc(input.meta().clone(), ws.device, ws.stream)?;
        let bytes = &input.buffer().as_slice()[..input.total_bytes()];
        // SAFETY: from pageable memory the driver stages the copy before returning, so the
        // host batch may go away afterwards.
        unsafe { out.buffer().copy_from_host_async(0, bytes)? };
        Ok(vec![out])
    }
}
