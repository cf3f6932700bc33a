//! `_TensorSubscript` on the GPU: the cpu twin's plan, then per sample either a view (the
//! selection is one run of the sample's memory: `x[i]` of a sequence, `x[a:b]` of the outer
//! axis; no copy at all) or one strided gather for the whole batch.

use std::sync::Arc;

use super::{walk, Subscript};
use crate::error::{Error, Result};
use crate::ops::strided_copy_gpu::{Gather, StridedCopy};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) struct SubscriptGpu {
    op: Subscript,
    copy: StridedCopy,
    gathers: Vec<Gather>,
}

impl SubscriptGpu {
    pub(super) fn new(op: Subscript) -> SubscriptGpu {
        SubscriptGpu { op, copy: StridedCopy::default(), gathers: Vec::new() }
    }
}

impl GpuOperator for SubscriptGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.op.plan(&ws.host_view(), input.meta())?;
        self.gathers.clear();
        for i in 0..input.len() {
            let (base, walked) = walk(input.shape(i), plan.sample(i));
            let g = Gather::new(base, walked).ok_or_else(|| {
                Error::Unsupported(format!("{}: sample {i} walks more than 8 separate axes; the GPU gather handles at most 8", self.op.ctx.display_name))
            })?;
            self.gathers.push(g);
        }
        let elem = input.dtype().size() as i64;
        let one_run = |g: &Gather| g.ndim == 0 || (g.ndim == 1 && g.stride[0] == 1);
        if self.gathers.iter().all(one_run) {
            let starts: Arc<[usize]> = self.gathers.iter().enumerate().map(|(i, g)| input.data_offset(i) + (g.base * elem) as usize).collect();
            return Ok(vec![input.view(plan.meta, starts)]);
        }
        let out = TensorListGpu::alloc(plan.meta, ws.device, ws.stream)?;
        self.copy.run(ws, &self.op.ctx.display_name, input, &out, &self.gathers)?;
        Ok(vec![out])
    }
}
