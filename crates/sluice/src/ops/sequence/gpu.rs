//! The gpu backend of the sequence operators: the cpu twin's plans (one [`FrameGather`]
//! per output), then every frame copy of every output in one batched copy launch.

use super::FrameGather;
use crate::error::Result;
use crate::ops::strided_copy_gpu::StridedCopy;
use crate::ops::{GpuOperator, GpuWorkspace, Workspace};
use crate::tensor::{BatchMeta, TensorListGpu};

/// What both backends of a sequence operator share: the checks and the frames each output
/// sample is made of.
pub(super) trait FramePlan: Send {
    fn op(&self) -> &str;
    /// One plan per output.
    fn plans(&self, input: &BatchMeta, ws: &Workspace<'_>) -> Result<Vec<FrameGather>>;
}

/// Most copies one launch takes: one grid row each, and a grid has at most 65535 rows.
const MAX_JOBS: usize = 65535;

pub(super) struct FramesGpu<P> {
    plan: P,
    copy: StridedCopy,
    jobs: Vec<(u64, u64, usize)>,
}

impl<P: FramePlan> FramesGpu<P> {
    pub(super) fn new(plan: P) -> FramesGpu<P> {
        FramesGpu { plan, copy: StridedCopy::default(), jobs: Vec::new() }
    }
}

impl<P: FramePlan> GpuOperator for FramesGpu<P> {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plans = self.plan.plans(input.meta(), &ws.host_view())?;
        let elem = input.dtype().size();
        self.jobs.clear();
        let mut outs = Vec::with_capacity(plans.len());
        for g in plans {
            let out = TensorListGpu::alloc(g.meta.clone(), ws.device, ws.stream)?;
            for i in 0..input.len() {
                let frame_elems: usize = input.meta().shape(i)[1..].iter().product();
                let fb = (frame_elems * elem) as u64;
                let (src, dst) = (input.sample_ptr(i), out.sample_ptr(i));
                for (k, &f) in g.frames(i).iter().enumerate() {
                    if frame_elems > 0 {
                        self.jobs.push((src + f as u64 * fb, dst + k as u64 * fb, frame_elems));
                    }
                }
            }
            outs.push(out);
        }
        // One launch per batch; only a batch of more than 65535 frame copies takes more.
        for chunk in self.jobs.chunks(MAX_JOBS) {
            self.copy.copy_samples(ws, self.plan.op(), elem, chunk)?;
        }
        Ok(outs)
    }
}
