//! GPU backend of the noise operators: the cpu twin plans the batch (checks, arguments,
//! each sample's Philox stream and draw geometry); one launch of `noise.cu` applies every
//! sample's noise, drawing the cpu's numbers (see the module docs for how exactly).

use super::{Noise, Params};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("../philox.cuh"), include_str!("noise.cu"));

cuda_struct! {
    /// One sample (`struct NoiseSample` in noise.cu).
    pub(super) struct NoiseSample {
        r#in: u64,
        out: u64,
        /// Draws: elements, or pixels (salt_and_pepper with `per_channel=False`).
        pixels: i64,
        /// Element (p, c) is `p * p_stride + c * c_stride`.
        p_stride: i64,
        c_stride: i64,
        /// salt_and_pepper's values: the element's bytes, little-endian.
        salt: u64,
        pepper: u64,
        /// gaussian: mean, stddev; salt_and_pepper: prob, prob * salt_vs_pepper (f32 values);
        /// shot: factor, 1 / factor (f32 values).
        a: f64,
        b: f64,
        key0: u32,
        key1: u32,
        ctr1: u32,
        ctr2: u32,
        ctr3: u32,
        channels: i32,
    }
}

pub(super) struct NoiseGpu {
    noise: Noise,
    params: ParamUpload,
}

impl NoiseGpu {
    pub(super) fn new(noise: Noise) -> NoiseGpu {
        NoiseGpu { noise, params: ParamUpload::default() }
    }
}

/// The type part of the kernel names.
fn type_name(d: DType) -> &'static str {
    match d {
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::U16 => "u16",
        DType::I16 => "i16",
        DType::U32 => "u32",
        DType::I32 => "i32",
        DType::U64 => "u64",
        DType::I64 => "i64",
        DType::F32 => "f32",
        _ => unreachable!("types checked by plan"),
    }
}

impl GpuOperator for NoiseGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.noise.plan(&ws.host_view(), input.meta())?;
        let dtype = meta.dtype();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let mut max_pixels = 0usize;
        let mut desc = Vec::with_capacity(self.noise.plans.len());
        for (i, p) in self.noise.plans.iter().enumerate() {
            let (a, b, salt, pepper) = match p.params {
                Params::Gaussian { mean, stddev } => (mean, stddev, 0, 0),
                Params::SaltAndPepper { prob, salt_prob, salt, pepper } => (prob as f64, salt_prob as f64, u64::from_le_bytes(salt), u64::from_le_bytes(pepper)),
                Params::Shot { factor } => (factor as f64, if factor == 0.0 { 0.0 } else { (1.0f32 / factor) as f64 }, 0, 0),
            };
            max_pixels = max_pixels.max(p.pixels);
            desc.push(NoiseSample {
                r#in: input.sample_ptr(i),
                out: out.sample_ptr(i),
                pixels: p.pixels as i64,
                p_stride: p.p_stride as i64,
                c_stride: p.c_stride as i64,
                salt,
                pepper,
                a,
                b,
                key0: p.key[0],
                key1: p.key[1],
                ctr1: p.stream[0],
                ctr2: p.stream[1],
                ctr3: p.stream[2],
                channels: p.channels as i32,
            });
        }
        if max_pixels == 0 {
            return Ok(vec![out]);
        }
        let kernel = format!("noise_{}_{}", self.noise.kind.kernel_name(), type_name(dtype));
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "noise", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream; every (pixel, channel) it names lies inside both samples.
        unsafe {
            launch_records::<NoiseSample>(&ws.stream, &f, base, desc.len(), max_pixels)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("noise", SRC, &[("NoiseSample", &NoiseSample::LAYOUT)]);
    }
}
