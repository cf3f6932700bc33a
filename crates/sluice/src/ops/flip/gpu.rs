//! GPU backend of `fn.flip`: the cpu backend's planning (layout check, per-sample switches,
//! errors), then one gather-copy launch for the batch. Moves element bits only, so the
//! output equals the cpu backend's exactly for every element type.

use super::kernel::MAX_NDIM;
use super::Flip;
use crate::error::{Error, Result};
use crate::ops::strided_copy_gpu::{Gather, StridedCopy};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::TensorListGpu;

pub(super) struct FlipGpu {
    flip: Flip,
    copy: StridedCopy,
    gathers: Vec<Gather>,
}

impl FlipGpu {
    pub(super) fn new(ctx: &OpContext) -> FlipGpu {
        FlipGpu { flip: Flip::new(ctx), copy: StridedCopy::default(), gathers: Vec::new() }
    }
}

impl GpuOperator for FlipGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let axes = self.flip.plan(&ws.host_view(), input.meta())?;
        let mut meta = input.meta().clone();
        meta.name_guessed_layout();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        self.gathers.clear();
        for (i, &(h, v, d)) in self.flip.flags.iter().enumerate() {
            let shape = input.shape(i);
            let flip: [bool; MAX_NDIM] = axes.flags(shape.len(), h, v, d);
            // find_axes caps inputs at MAX_NDIM (8) dimensions, all of which a gather holds.
            let g = Gather::flip(shape, &flip[..shape.len()])
                .ok_or_else(|| Error::Unsupported(format!("{}: too many dimensions for the GPU", self.flip.ctx.display_name)))?;
            self.gathers.push(g);
        }
        self.copy.run(ws, &self.flip.ctx.display_name, input, &out, &self.gathers)?;
        Ok(vec![out])
    }
}
