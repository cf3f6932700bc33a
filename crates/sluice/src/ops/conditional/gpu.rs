//! GPU backends of split and merge: the host plans from the predicate (an argument input,
//! always on the host) exactly as the cpu twins do; one batched copy kernel moves the
//! samples.

use crate::error::Result;
use crate::ops::strided_copy_gpu::StridedCopy;
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

use super::{Merge, Split};

pub(super) struct SplitGpu {
    split: Split,
    copy: StridedCopy,
    jobs: Vec<(u64, u64, usize)>,
}

impl SplitGpu {
    pub(super) fn new(split: Split) -> SplitGpu {
        SplitGpu { split, copy: StridedCopy::default(), jobs: Vec::new() }
    }
}

impl GpuOperator for SplitGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let halves = self.split.halves(&ws.arg_inputs, input.len(), ws.iteration)?;
        let mut outs = Vec::with_capacity(2);
        self.jobs.clear();
        for picks in &halves {
            let out = TensorListGpu::alloc(input.meta().picked(picks), ws.device, ws.stream)?;
            self.jobs.extend(picks.iter().enumerate().map(|(k, &i)| (input.sample_ptr(i), out.sample_ptr(k), input.numel(i))));
            outs.push(out);
        }
        self.copy.copy_samples(ws, &self.split.ctx.display_name, input.dtype().size(), &self.jobs)?;
        Ok(outs)
    }
}

pub(super) struct MergeGpu {
    merge: Merge,
    copy: StridedCopy,
    jobs: Vec<(u64, u64, usize)>,
}

impl MergeGpu {
    pub(super) fn new(merge: Merge) -> MergeGpu {
        MergeGpu { merge, copy: StridedCopy::default(), jobs: Vec::new() }
    }
}

impl GpuOperator for MergeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let halves = [ws.gpu_inputs[0], ws.gpu_inputs[1]];
        let (plan, meta) = self.merge.plan([halves[0].meta(), halves[1].meta()], &ws.arg_inputs, ws.iteration)?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        self.jobs.clear();
        self.jobs.extend(plan.iter().enumerate().map(|(i, &(h, k))| (halves[h].sample_ptr(k), out.sample_ptr(i), out.numel(i))));
        self.copy.copy_samples(ws, &self.merge.ctx.display_name, out.dtype().size(), &self.jobs)?;
        Ok(vec![out])
    }
}
