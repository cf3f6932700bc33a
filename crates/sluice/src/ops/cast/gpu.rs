//! GPU backend of `fn.cast`: the cpu backend's output metadata, then one launch for the
//! batch applying the cpu's conversion rules (cast.cu). Bit-exact with the cpu backend,
//! NaN payloads aside (a NaN stays a NaN; the GPU may canonicalise its bits).

use super::Cast;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, per_sample_launches, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use sluice_cuda::PushKernelArg;
use crate::tensor::{DType, TensorListGpu};

pub(crate) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("cast.cu"));

pub(super) struct CastGpu {
    cast: Cast,
    params: ParamUpload,
    /// Per-sample descriptors; reused across batches.
    samples: Vec<CastSample>,
}

cuda_struct! {
    /// One sample's work (`struct CastSample` in cast.cu).
    pub(crate) struct CastSample {
        r#in: u64,
        out: u64,
        count: i64,
    }
}

impl CastGpu {
    pub(super) fn new(ctx: &OpContext) -> CastGpu {
        CastGpu { cast: Cast::new(ctx), params: ParamUpload::default(), samples: Vec::new() }
    }

    pub(super) fn like(ctx: &OpContext) -> CastGpu {
        CastGpu { cast: Cast::like(ctx), params: ParamUpload::default(), samples: Vec::new() }
    }
}

/// The type's code in cast.cu (`enum Type`); `None` for types the kernel does not handle.
pub(crate) fn type_code(t: DType) -> Option<i32> {
    Some(match t {
        DType::U8 => 0,
        DType::I8 => 1,
        DType::U16 => 2,
        DType::I16 => 3,
        DType::U32 => 4,
        DType::I32 => 5,
        DType::I64 => 6,
        DType::F16 => 7,
        DType::F32 => 8,
        DType::F64 => 9,
        DType::Bool => 10,
        DType::U64 => 11,
    })
}

impl GpuOperator for CastGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        if self.cast.like {
            self.cast.dtype = ws.gpu_inputs[1].dtype();
        }
        let name = &self.cast.ctx.display_name;
        let (src, dst) = (input.dtype(), self.cast.dtype);
        let (Some(src_code), Some(dst_code)) = (type_code(src), type_code(dst)) else {
            return Err(Error::Unsupported(format!("{name}: {src} -> {dst} is not supported on the GPU")));
        };
        let out = TensorListGpu::alloc(self.cast.output_meta(input.meta()), ws.device, ws.stream)?;
        let n = input.len();
        self.samples.clear();
        let mut max_count = 0usize;
        for i in 0..n {
            let count = input.numel(i);
            max_count = max_count.max(count);
            self.samples.push(CastSample { r#in: input.sample_ptr(i), out: out.sample_ptr(i), count: count as i64 });
        }
        if max_count == 0 {
            return Ok(vec![out]);
        }
        let samples_ptr = self.params.upload(ws, bytemuck::cast_slice(&self.samples))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "cast", SRC, "cast")?;
        // Same type: the kernel copies the bits (as the cpu's `convert_slice`).
        let elem_bytes = if src == dst { src.size() as i32 } else { 0 };
        for (first, cfg) in per_sample_launches(max_count, n) {
            let samples_at = samples_ptr + (first * std::mem::size_of::<CastSample>()) as u64;
            // SAFETY: descriptors point into `input` and `out`, both alive on this stream; the
            // kernel reads and writes `count` elements of each sample, which both hold.
            unsafe {
                ws.stream
                    .launch_builder(&f)
                    .arg(&samples_at)
                    .arg(&src_code)
                    .arg(&dst_code)
                    .arg(&elem_bytes)
                    .launch(cfg)
                    .map_err(sluice_cuda::CudaError::from)?;
            }
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("cast", SRC, &[("CastSample", &CastSample::LAYOUT)]);
    }
}
