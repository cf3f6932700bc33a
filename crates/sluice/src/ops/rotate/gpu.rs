//! GPU backend of `rotate`: the cpu backend plans the batch (checks, angles, output sizes,
//! the affine map per sample); one launch of `rotate.cu` warps every sample, with the cpu
//! kernel's arithmetic, so both backends give the same bits.

use sluice_cuda::PushKernelArg;

use super::kernel::{self, Border, Interp};
use super::{geometry, Rotate, RotateBatch};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, per_sample_launch, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("rotate.cu"));

cuda_struct! {
    /// One sample's warp (`struct Sample` in rotate.cu).
    pub(super) struct RotateSample {
        src: u64,
        dst: u64,
        /// m00 m01 m02 m10 m11 m12: output pixel centre -> source point.
        m: [f32; 6],
        in_h: i32,
        in_w: i32,
        c: i32,
        out_h: i32,
        out_w: i32,
        frames: i32,
        linear: i32,
        clamp: i32,
        fill: f32,
        pad: i32,
    }
}

pub(super) struct RotateGpu {
    rotate: Rotate,
    params: ParamUpload,
}

impl RotateGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<RotateGpu> {
        Ok(RotateGpu { rotate: Rotate::new(ctx)?, params: ParamUpload::default() })
    }
}

/// The kernel for an (input, output) element type pair: those the cpu backend accepts.
fn kernel_name(i: DType, o: DType) -> Option<&'static str> {
    Some(match (i, o) {
        (DType::U8, DType::U8) => "rotate_u8_u8",
        (DType::U8, DType::F32) => "rotate_u8_f32",
        (DType::I16, DType::I16) => "rotate_i16_i16",
        (DType::I16, DType::F32) => "rotate_i16_f32",
        (DType::I32, DType::I32) => "rotate_i32_i32",
        (DType::I32, DType::F32) => "rotate_i32_f32",
        (DType::F32, DType::F32) => "rotate_f32_f32",
        (DType::F32, DType::U8) => "rotate_f32_u8",
        (DType::F32, DType::I16) => "rotate_f32_i16",
        (DType::F32, DType::I32) => "rotate_f32_i32",
        _ => return None,
    })
}

impl GpuOperator for RotateGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let RotateBatch { meta, in_type, out_type, sequence } = self.rotate.plan_batch(&ws.host_view(), input.meta())?;
        let kernel = kernel_name(in_type, out_type).ok_or_else(|| Error::Unsupported(format!("{}: cannot convert {in_type} to {out_type}", self.rotate.ctx.display_name)))?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = input.len();
        if n == 0 {
            return Ok(vec![out]);
        }
        let (linear, (clamp, fill)) = (self.rotate.interp == Interp::Linear, match self.rotate.border {
            Border::Clamp => (true, 0.0f32),
            Border::Fill(v) => (false, v),
        });
        let mut desc = Vec::with_capacity(n);
        let mut max_pix = 1usize;
        for i in 0..n {
            let (frames, h, w, c) = geometry(input.shape(i), sequence);
            let p = self.rotate.plan[i];
            let m = kernel::rotation_mapping(h, w, p.out_h, p.out_w, p.angle);
            desc.push(RotateSample {
                src: input.sample_ptr(i),
                dst: out.sample_ptr(i),
                m: [m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2]],
                in_h: h as i32,
                in_w: w as i32,
                c: c as i32,
                out_h: p.out_h as i32,
                out_w: p.out_w as i32,
                frames: frames as i32,
                linear: linear as i32,
                clamp: clamp as i32,
                fill,
                pad: 0,
            });
            max_pix = max_pix.max(frames * p.out_h * p.out_w);
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "rotate", SRC, kernel)?;
        let cfg = per_sample_launch(max_pix, n);
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream; each thread writes inside its sample's output.
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
        crate::ops::gpu_params::check_cuda_source("rotate", SRC, &[("Sample", &RotateSample::LAYOUT)]);
    }
}
