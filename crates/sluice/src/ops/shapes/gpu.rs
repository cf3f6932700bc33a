//! The gpu `shapes`: the values come from the batch's metadata, which lives on the host, so
//! no kernel runs. They are written into a pinned staging block of the per-batch parameter
//! upload and copied into the output on the workspace's stream, never waiting for the GPU.

use super::Shapes;
use crate::error::Result;
use crate::ops::gpu_params::ParamUpload;
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::TensorListGpu;

pub(super) struct ShapesGpu {
    shapes: Shapes,
    staging: ParamUpload,
}

impl ShapesGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<ShapesGpu> {
        Ok(ShapesGpu { shapes: Shapes::new(ctx)?, staging: ParamUpload::default() })
    }
}

impl GpuOperator for ShapesGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0].meta();
        let out = TensorListGpu::alloc(self.shapes.output_meta(input), ws.device, ws.stream)?;
        let len = out.total_bytes();
        if len == 0 {
            // 0-D samples or no samples: nothing to copy.
            return Ok(vec![out]);
        }
        let shapes = &self.shapes;
        let staged = self.staging.upload_with(ws, len, |block, _| {
            shapes.write(input, block);
            Ok(())
        })?;
        // SAFETY: `staged` holds `len` bytes copied in just before on this stream (the
        // output's), and its slot is rewritten only by a later upload, ordered after this copy.
        unsafe { out.buffer().copy_from_device_async(0, staged, len)? };
        Ok(vec![out])
    }
}
