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
    mixed: Some(|_, _| Ok(Box::new(Upload::default()))),
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

/// The mixed `MakeContiguous`: the batch goes up through pinned staging blocks, filled by
/// the workers, so the copy to the GPU is one asynchronous DMA. From pageable memory the
/// driver stages the bytes itself, one thread at ~3 GB/s, holding the host until it is done
/// (a 128 x 224x224x3 batch took 7 ms of every iteration that way).
#[derive(Default)]
struct Upload {
    slots: [Staging; STAGING_DEPTH],
    turn: usize,
}

/// Staging blocks in flight: one may still be on its way to the GPU while the next batches
/// are written, as for the parameter uploads (`gpu_params::ParamUpload`).
const STAGING_DEPTH: usize = 4;

/// Batches below this go up straight from their pageable memory: staging them costs more
/// than the driver's own copy (auto_aug's per-sample parameters moved inside branches).
const STAGE_FROM_BYTES: usize = 1 << 20;

/// Bytes each worker copies into the staging block at a time.
const STAGE_CHUNK: usize = 1 << 20;

#[derive(Default)]
struct Staging {
    host: Option<sluice_cuda::PinnedBuffer>,
    /// Recorded after the block's copy to the GPU: the block may be rewritten once it completes.
    copied: Option<crate::tensor::ReadyEvent>,
}

impl GpuOperator for Upload {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.cpu_inputs[0];
        let out = TensorListGpu::alloc(input.meta().clone(), ws.device, ws.stream)?;
        let bytes = &input.buffer().as_slice()[..input.total_bytes()];
        if bytes.len() < STAGE_FROM_BYTES {
            // SAFETY: from pageable memory the driver stages the copy before returning, so
            // the host batch may go away afterwards.
            unsafe { out.buffer().copy_from_host_async(0, bytes)? };
            return Ok(vec![out]);
        }
        let slot = &mut self.slots[self.turn];
        self.turn = (self.turn + 1) % STAGING_DEPTH;
        if let Some(ev) = slot.copied.take() {
            ev.synchronize()?;
        }
        if slot.host.as_ref().is_none_or(|h| h.len() < bytes.len()) {
            slot.host = None; // free the old block before the larger one is pinned
            slot.host = Some(sluice_cuda::PinnedBuffer::alloc(ws.device, bytes.len().next_power_of_two())?);
        }
        let host = &mut slot.host.as_mut().expect("allocated above").as_mut_slice()[..bytes.len()];
        {
            use rayon::prelude::*;
            ws.pool.install(|| {
                host.par_chunks_mut(STAGE_CHUNK).zip(bytes.par_chunks(STAGE_CHUNK)).for_each(|(d, s)| d.copy_from_slice(s))
            });
        }
        // SAFETY: the staging block is not written again before `copied` (recorded right
        // after this copy, on the same stream) has completed.
        unsafe { out.buffer().copy_from_host_async(0, host)? };
        slot.copied = Some(crate::tensor::ReadyEvent::record(ws.device, ws.stream)?);
        Ok(vec![out])
    }
}
