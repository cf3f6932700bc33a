//! GPU backend of `rotate`: the cpu backend plans the batch (checks, rotations, output sizes,
//! the affine map per sample); one launch of the warp kernel (`ops::warp::gpu`) warps every
//! sample, with the cpu kernel's arithmetic, so both backends give the same bits.

use super::{Rotate, RotateBatch};
use crate::error::Result;
use crate::ops::gpu_params::ParamUpload;
use crate::ops::warp::gpu::{launch, WarpSample};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::TensorListGpu;

pub(super) struct RotateGpu {
    rotate: Rotate,
    params: ParamUpload,
}

impl RotateGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<RotateGpu> {
        Ok(RotateGpu { rotate: Rotate::new(ctx)?, params: ParamUpload::default() })
    }
}

impl GpuOperator for RotateGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let RotateBatch { meta, in_type, out_type, geometry } = self.rotate.plan_batch(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let desc: Vec<WarpSample> = (0..input.len())
            .map(|i| {
                let (frames, ext, c) = geometry.split(input.shape(i));
                let p = self.rotate.plan[i];
                let map = p.map(ext, geometry);
                WarpSample::new(input.sample_ptr(i), out.sample_ptr(i), map.gpu(), frames, ext, c, p.out, self.rotate.interp, self.rotate.border)
            })
            .collect();
        launch(ws, &mut self.params, &self.rotate.ctx.display_name, &desc, geometry.volume(), in_type, out_type)?;
        Ok(vec![out])
    }
}
