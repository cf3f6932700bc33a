//! GPU backend of the colour family: the cpu twin plans the batch (checks, output type, one
//! [`Transform`] per sample); one launch of `color.cu` applies every sample's map with the
//! cpu kernel's arithmetic, so both backends give the same bits.

use sluice_cuda::PushKernelArg;

use super::{Color, ColorBatch, Transform};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, per_sample_launch, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("color.cu"));

cuda_struct! {
    /// One sample's map (`struct ColorSample` in color.cu).
    pub(super) struct ColorSample {
        r#in: u64,
        out: u64,
        /// Elements (scale) or pixels (matrix).
        count: i64,
        m: [f32; 9],
        offset: f32,
        matrix: i32,
        pad: i32,
    }
}

pub(super) struct ColorGpu {
    color: Color,
    params: ParamUpload,
}

impl ColorGpu {
    pub(super) fn new(color: Color) -> ColorGpu {
        ColorGpu { color, params: ParamUpload::default() }
    }
}

impl GpuOperator for ColorGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let ColorBatch { meta, in_type, out_type } = self.color.plan_batch(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let mut desc = Vec::with_capacity(input.len());
        let mut max_items = 0usize;
        for (i, t) in self.color.transforms.iter().enumerate() {
            let numel = input.numel(i);
            let (count, m, offset, matrix) = match *t {
                Transform::Scale { mul, add } => (numel, [mul, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], add, 0),
                Transform::Matrix { m, offset } => (numel / 3, [m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2], m[2][0], m[2][1], m[2][2]], offset, 1),
            };
            max_items = max_items.max(count);
            desc.push(ColorSample { r#in: input.sample_ptr(i), out: out.sample_ptr(i), count: count as i64, m, offset, matrix, pad: 0 });
        }
        if max_items == 0 {
            return Ok(vec![out]);
        }
        let kernel = format!("color_{}_{}", short_name(in_type).expect("checked by plan_batch"), short_name(out_type).expect("checked by plan_batch"));
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "color", SRC, &kernel)?;
        let cfg = per_sample_launch(max_items, desc.len());
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream; each sample holds `count` elements (pixels of 3) in both.
        unsafe {
            ws.stream.launch_builder(&f).arg(&base).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("color", SRC, &[("ColorSample", &ColorSample::LAYOUT)]);
    }
}
