//! GPU backends of split and merge: the host plans from the predicate (an argument input,
//! always on the host) exactly as the cpu twins do. A split's halves are views of its input
//! (no device work at all); a merge gathers the branches' samples with one batched copy.

use crate::error::Result;
use crate::ops::strided_copy_gpu::StridedCopy;
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

use super::{Merge, Split};

pub(super) struct SplitGpu {
    split: Split,
}

impl SplitGpu {
    pub(super) fn new(split: Split) -> SplitGpu {
        SplitGpu { split }
    }
}

impl GpuOperator for SplitGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let halves = self.split.halves(&ws.arg_inputs, input.len(), ws.iteration)?;
        Ok(halves.iter().map(|picks| input.picked(picks)).collect())
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
