//! The gpu `reshape`: the cpu twin's planning, then the same device buffer under the new
//! metadata. No kernel, no copy.

use super::Reshape;
use crate::error::Result;
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) struct ReshapeGpu(pub(super) Reshape);

impl GpuOperator for ReshapeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        // A shape given as the second input lives on the host (a cpu operator's output).
        let meta = self.0.output_meta(input.meta(), ws.cpu_inputs.first().copied(), &ws.host_view())?;
        Ok(vec![input.reinterpreted(meta)])
    }
}
