//! permute_batch on the GPU: the indices are planned on the host (an argument input, or the
//! list), one batched copy launch moves the samples.

use crate::error::Result;
use crate::ops::strided_copy_gpu::StridedCopy;
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

use super::PermuteBatch;

pub(super) struct PermuteBatchGpu {
    op: PermuteBatch,
    copy: StridedCopy,
    jobs: Vec<(u64, u64, usize)>,
}

impl PermuteBatchGpu {
    pub(super) fn new(op: PermuteBatch) -> PermuteBatchGpu {
        PermuteBatchGpu { op, copy: StridedCopy::default(), jobs: Vec::new() }
    }
}

impl GpuOperator for PermuteBatchGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let picks = self.op.indices(&ws.arg_inputs, input.len(), ws.iteration)?;
        let out = TensorListGpu::alloc(input.meta().picked(&picks), ws.device, ws.stream)?;
        self.jobs.clear();
        self.jobs.extend(picks.iter().enumerate().map(|(k, &i)| (input.sample_ptr(i), out.sample_ptr(k), input.numel(i))));
        self.copy.copy_samples(ws, &self.op.ctx.display_name, input.dtype().size(), &self.jobs)?;
        Ok(vec![out])
    }
}
