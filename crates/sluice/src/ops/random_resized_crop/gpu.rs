//! GPU backend of `random_resized_crop`: the cpu backend's planning draws the windows; one
//! launch of the resize kernel resamples each window to the output size.

use super::RandomResizedCrop;
use crate::error::Result;
use crate::ops::resize::GpuResampler;
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::TensorListGpu;

pub(super) struct RandomResizedCropGpu {
    rrc: RandomResizedCrop,
    resampler: GpuResampler,
}

impl RandomResizedCropGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<RandomResizedCropGpu> {
        Ok(RandomResizedCropGpu { rrc: RandomResizedCrop::new(ctx)?, resampler: GpuResampler::default() })
    }
}

impl GpuOperator for RandomResizedCropGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let (plans, out_type, planes) = self.rrc.plan(&ws.host_view(), input.meta())?;
        let meta = RandomResizedCrop::output_meta(&plans, out_type, input.meta(), planes);
        // Random windows seldom repeat an origin, so the filter tables are not kept.
        let out = self.resampler.run(ws, &self.rrc.ctx, input, &plans, &[], meta, input.meta().dtype(), out_type, false)?;
        Ok(vec![out])
    }
}
