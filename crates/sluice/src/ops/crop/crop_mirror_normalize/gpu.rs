//! GPU backend of `crop_mirror_normalize`: the planning is the cpu backend's (same
//! windows, constants and errors); the pixels move in one fused kernel launch per batch.

use std::sync::Arc;

use sluice_cuda::{GpuDevice, PushKernelArg};

use super::Cmn;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, per_sample_launches, push, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../../element.cuh"), include_str!("crop_mirror_normalize.cu"));

cuda_struct! {
    /// One sample's window (`struct Sample` in crop_mirror_normalize.cu).
    pub(super) struct CmnSample {
        r#in: u64,
        out: u64,
        h: i32,
        w: i32,
        c: i32,
        y0: i32,
        x0: i32,
        oh: i32,
        ow: i32,
        oc: i32,
        mirror: i32,
        pad: i32,
    }
}

cuda_struct! {
    /// Per-channel constants, the last repeated to 16 (`struct Consts`).
    pub(super) struct CmnConsts {
        mean: [f32; 16],
        mul: [f32; 16],
        fill: [f32; 16],
    }
}

pub(super) struct CmnGpu {
    cmn: Cmn,
    params: ParamUpload,
}

impl CmnGpu {
    pub(super) fn new(ctx: &OpContext, _device: &Arc<GpuDevice>) -> Result<CmnGpu> {
        Ok(CmnGpu { cmn: Cmn::from_ctx(ctx)?, params: ParamUpload::default() })
    }
}

impl GpuOperator for CmnGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let b = self.cmn.plan_batch(&ws.host_view(), input.meta())?;
        if b.seq {
            return Err(Error::Unsupported(format!("{}: sequences (FHWC) are not supported on the GPU yet", ws_name(&self.cmn))));
        }
        let kernel = match (b.input_dtype, self.cmn.dtype()) {
            (DType::U8, DType::F32) => "cmn_u8_f32",
            (DType::U8, DType::F16) => "cmn_u8_f16",
            (DType::U8, DType::U8) => "cmn_u8_u8",
            (DType::U8, DType::I8) => "cmn_u8_i8",
            (DType::F32, DType::F32) => "cmn_f32_f32",
            (DType::F32, DType::F16) => "cmn_f32_f16",
            (DType::F32, DType::U8) => "cmn_f32_u8",
            (DType::F32, DType::I8) => "cmn_f32_i8",
            (i, o) => {
                return Err(Error::Unsupported(format!("{}: {i} -> {o} is not supported on the GPU; use UINT8 or FLOAT input", ws_name(&self.cmn))))
            }
        };
        let out = TensorListGpu::alloc(b.meta.clone(), ws.device, ws.stream)?;
        let n = input.len();
        if n == 0 {
            return Ok(vec![out]);
        }
        // Parameter block: n sample descriptors, then the per-channel constants.
        let mut block = Vec::with_capacity((n + 1) * (size_of::<CmnSample>() + size_of::<CmnConsts>()));
        let mut max_pix = 1usize;
        for (i, &(wh, ww, mirror)) in self.cmn.windows().iter().enumerate() {
            let sh = input.shape(i);
            let c = sh[2];
            let oc = if self.cmn.pad() { c.max(4) } else { c };
            push(&mut block, CmnSample {
                r#in: input.sample_ptr(i),
                out: out.sample_ptr(i),
                h: sh[0] as i32,
                w: sh[1] as i32,
                c: c as i32,
                y0: wh.anchor as i32,
                x0: ww.anchor as i32,
                oh: wh.len as i32,
                ow: ww.len as i32,
                oc: oc as i32,
                mirror: mirror as i32,
                pad: self.cmn.pad() as i32,
            });
            max_pix = max_pix.max(wh.len * ww.len);
        }
        // One `Consts` block for the batch, or one per sample when `mean` / `std` came
        // per sample (the kernel then indexes them by sample).
        let consts_at = block.len();
        let per_sample = (b.stride > 0) as i32;
        for i in 0..if b.stride > 0 { n } else { 1 } {
            let (mean, mul) = b.consts(i);
            let sixteen = |arr: &[f32]| std::array::from_fn(|k| arr[k.min(arr.len() - 1)]);
            push(&mut block, CmnConsts { mean: sixteen(mean), mul: sixteen(mul), fill: sixteen(&b.fill) });
        }
        let params = self.params.upload(ws, &block)?;
        let (samples_ptr, consts_ptr) = (params, params + consts_at as u64);
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "crop_mirror_normalize", SRC, kernel)?;
        let chw = self.cmn.chw() as i32;
        for (first, cfg) in per_sample_launches(max_pix, n) {
            // The kernel indexes the descriptors (and per-sample constants) by grid row.
            let samples_at = samples_ptr + (first * std::mem::size_of::<CmnSample>()) as u64;
            let consts_at = consts_ptr + (first * per_sample as usize * std::mem::size_of::<CmnConsts>()) as u64;
            // SAFETY: descriptors point into `input` and `out`, both alive on this stream; the
            // kernel writes exactly each sample's output extent.
            unsafe {
                ws.stream.launch_builder(&f).arg(&samples_at).arg(&consts_at).arg(&chw).arg(&per_sample).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
            }
        }
        Ok(vec![out])
    }
}

fn ws_name(cmn: &Cmn) -> &str {
    cmn.display_name()
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("crop_mirror_normalize", SRC, &[("Sample", &CmnSample::LAYOUT), ("Consts", &CmnConsts::LAYOUT)]);
    }
}
