//! GPU backend of `fn.transpose`: the cpu backend's argument checks and output metadata,
//! then one gather-copy launch for the batch. Moves element bits only: equal to the cpu
//! backend exactly, for every element size.

use super::Transpose;
use crate::error::{Error, Result};
use crate::ops::strided_copy_gpu::{Gather, StridedCopy, MAX_DIMS};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::TensorListGpu;

pub(super) struct TransposeGpu {
    transpose: Transpose,
    copy: StridedCopy,
    gathers: Vec<Gather>,
}

impl TransposeGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<TransposeGpu> {
        Ok(TransposeGpu { transpose: Transpose::new(ctx)?, copy: StridedCopy::default(), gathers: Vec::new() })
    }
}

impl GpuOperator for TransposeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.transpose.output_meta(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let name = &self.transpose.ctx.display_name;
        self.gathers.clear();
        let perm = self.transpose.perm_for(input.ndim());
        for i in 0..input.len() {
            // Unit dimensions drop and dimensions that stay neighbours merge, so only
            // permutations that scatter more than MAX_DIMS dimensions are refused.
            let g = Gather::transpose(input.shape(i), &perm).ok_or_else(|| {
                Error::Unsupported(format!(
                    "{name}: sample {i} of shape {:?} keeps more than {MAX_DIMS} dimensions after merging; not supported on the GPU",
                    input.shape(i)
                ))
            })?;
            self.gathers.push(g);
        }
        self.copy.run(ws, name, input, &out, &self.gathers)?;
        Ok(vec![out])
    }
}
