//! GPU backend of `fn.normalize` for given `mean` and `stddev` (scalars or per-sample
//! tensors): the cpu backend's planning (checks, axes, broadcasting, 1 / stddev) on the
//! host, then one launch for the batch. Bit-exact with the cpu backend. Mean / stddev
//! computed from the data (per sample or batch-wide reductions) are not supported on the
//! GPU yet and fail with a clear error.

use sluice_cuda::PushKernelArg;

use super::{param_strides, Normalize, Param, MAX_NDIM};
use crate::error::{Error, Result};
use crate::ops::cast::gpu::type_code;
use crate::ops::gpu_params::{per_sample_launch, ParamUpload};
use crate::ops::strided_copy_gpu::{Gather, MAX_DIMS};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, TensorListGpu};

/// cast.cu first: the kernel loads and stores through its conversions.
const SRC: &str = concat!(include_str!("../cast/cast.cu"), include_str!("normalize.cu"));

pub(super) struct NormalizeGpu {
    normalize: Normalize,
    params: ParamUpload,
    /// Sample descriptors, then the mean and 1 / stddev arrays; reused across batches.
    block: Vec<u8>,
}

impl NormalizeGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<NormalizeGpu> {
        Ok(NormalizeGpu { normalize: Normalize::new(ctx)?, params: ParamUpload::default(), block: Vec::new() })
    }
}

impl GpuOperator for NormalizeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let name = self.normalize.ctx.display_name.clone();
        let plan = self.normalize.plan(&ws.host_view(), input.meta())?;
        if matches!(plan.mean, Param::Computed) || matches!(plan.stddev, Param::Computed) {
            return Err(Error::Unsupported(format!(
                "{name}: computing mean or stddev from the data is not supported on the GPU yet; pass both `mean` and `stddev`, or use device=\"cpu\""
            )));
        }
        let (ndim, n) = (input.ndim(), input.len());
        let (Some(src_code), Some(dst_code)) = (type_code(input.dtype()), type_code(self.normalize.dtype)) else {
            unreachable!("normalize's input and output types are all known to cast.cu");
        };
        let mut meta = BatchMeta::new(self.normalize.dtype, ndim, (0..n).map(|i| input.shape(i)));
        meta.set_layout(input.layout().clone());
        meta.inherit_source_info(input.meta());
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        if n == 0 {
            return Ok(vec![out]);
        }
        // Block: n descriptors (`struct NormSample`, laid out as the gather's CopySample),
        // then mean[total], then inv[total] (f64, 8-byte aligned after 168-byte descriptors).
        self.block.clear();
        let mut max_count = 0usize;
        let offsets = &self.normalize.offsets;
        for i in 0..n {
            let shape = input.shape(i);
            let mut st = [0usize; MAX_NDIM];
            param_strides(shape, &plan.reduced[..ndim], &mut st);
            // The parameter index is affine in the element's coordinates, so the gather's
            // dimension dropping and merging applies as is.
            let g = Gather::new(offsets[i] as i64, (0..ndim).map(|a| (shape[a], st[a] as i64))).ok_or_else(|| {
                Error::Unsupported(format!("{name}: sample {i} of shape {shape:?} needs more than {MAX_DIMS} dimensions on the GPU"))
            })?;
            let count = input.numel(i);
            max_count = max_count.max(count);
            g.push_descriptor(&mut self.block, input.sample_ptr(i), out.sample_ptr(i), count);
        }
        if max_count == 0 {
            return Ok(vec![out]);
        }
        let mean_at = self.block.len();
        self.block.extend_from_slice(bytemuck::cast_slice(&self.normalize.mean));
        let inv_at = self.block.len();
        self.block.extend_from_slice(bytemuck::cast_slice(&self.normalize.inv));
        let params = self.params.upload(ws, &self.block)?;
        let (samples_ptr, mean_ptr, inv_ptr) = (params, params + mean_at as u64, params + inv_at as u64);
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "normalize", SRC, "normalize")?;
        let cfg = per_sample_launch(max_count, n);
        let shift = plan.shift;
        // SAFETY: descriptors point into `input` and `out`, both alive on this stream; the
        // parameter indices stay inside each sample's block of the uploaded arrays.
        unsafe {
            ws.stream
                .launch_builder(&f)
                .arg(&samples_ptr)
                .arg(&mean_ptr)
                .arg(&inv_ptr)
                .arg(&shift)
                .arg(&src_code)
                .arg(&dst_code)
                .launch(cfg)
                .map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}
