//! permute_batch on the GPU: the indices are planned on the host (an argument input, or the
//! list); the output is a view of the input's samples in that order (no device work).

use crate::error::Result;
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

use super::PermuteBatch;

pub(super) struct PermuteBatchGpu {
    op: PermuteBatch,
}

impl PermuteBatchGpu {
    pub(super) fn new(op: PermuteBatch) -> PermuteBatchGpu {
        PermuteBatchGpu { op }
    }
}

impl GpuOperator for PermuteBatchGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let picks = self.op.indices(&ws.arg_inputs, input.len(), ws.iteration)?;
        Ok(vec![input.picked(&picks)])
    }
}
