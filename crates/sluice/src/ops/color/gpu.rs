//! GPU backend of the colour family: the cpu twin plans the batch (checks, output type, one
//! [`Transform`] per sample); one launch of `color.cu` applies every sample's map with the
//! cpu kernel's arithmetic, so both backends give the same bits.

use sluice_cuda::{DeviceBuffer, PushKernelArg};

use super::conversion::Conversion;
use super::equalize::Equalize;
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

pub(super) const CONVERSION_SRC: &str = concat!(include_str!("../element.cuh"), include_str!("conversion.cu"));

cuda_struct! {
    /// One sample (`struct ConversionSample` in conversion.cu).
    pub(super) struct ConversionSample {
        r#in: u64,
        out: u64,
        pixels: i64,
    }
}

/// GPU backend of `color_space_conversion`: the cpu twin's checks and output shapes, then
/// one launch for the batch.
pub(super) struct ConversionGpu {
    conversion: Conversion,
    params: ParamUpload,
}

impl ConversionGpu {
    pub(super) fn new(conversion: Conversion) -> ConversionGpu {
        ConversionGpu { conversion, params: ParamUpload::default() }
    }
}

impl GpuOperator for ConversionGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.conversion.output_meta(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let fc = self.conversion.from.channels();
        let desc: Vec<ConversionSample> = (0..input.len())
            .map(|i| ConversionSample { r#in: input.sample_ptr(i), out: out.sample_ptr(i), pixels: (input.numel(i) / fc) as i64 })
            .collect();
        let max_pixels = desc.iter().map(|d| d.pixels as usize).max().unwrap_or(0);
        if max_pixels == 0 {
            return Ok(vec![out]);
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "color_space_conversion", CONVERSION_SRC, "color_space_conversion")?;
        let (from, to) = (self.conversion.from.code(), self.conversion.to.code());
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream, holding `pixels` pixels of the input and output channel counts.
        unsafe {
            ws.stream.launch_builder(&f).arg(&base).arg(&from).arg(&to).launch(per_sample_launch(max_pixels, desc.len())).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod conversion_twins {
    use super::*;

    #[test]
    fn the_conversion_kernel_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("color_space_conversion", CONVERSION_SRC, &[("ConversionSample", &ConversionSample::LAYOUT)]);
    }
}

pub(super) const EQUALIZE_SRC: &str = include_str!("equalize.cu");

cuda_struct! {
    /// One channel of one frame (`struct EqualizePlane` in equalize.cu).
    pub(super) struct EqualizePlane {
        r#in: u64,
        out: u64,
        stride: i64,
        count: i64,
    }
}

/// GPU backend of `experimental.equalize`: the cpu twin's checks and planes, then histogram,
/// table and apply launches over every plane of the batch.
pub(super) struct EqualizeGpu {
    equalize: Equalize,
    params: ParamUpload,
}

impl EqualizeGpu {
    pub(super) fn new(equalize: Equalize) -> EqualizeGpu {
        EqualizeGpu { equalize, params: ParamUpload::default() }
    }
}

impl GpuOperator for EqualizeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let (meta, geometry) = self.equalize.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let mut planes = Vec::new();
        for i in 0..input.len() {
            let (src, dst) = (input.sample_ptr(i), out.sample_ptr(i));
            planes.extend(geometry.planes(input.shape(i)).filter(|p| p.count > 0).map(|p| EqualizePlane {
                r#in: src + p.offset as u64,
                out: dst + p.offset as u64,
                stride: p.stride as i64,
                count: p.count as i64,
            }));
        }
        if planes.is_empty() {
            return Ok(vec![out]);
        }
        let max_count = planes.iter().map(|p| p.count as usize).max().unwrap_or(0);
        let n = planes.len() as i32;
        let base = self.params.upload(ws, bytemuck::cast_slice(&planes))?;
        let hist = DeviceBuffer::alloc(ws.device, ws.stream, planes.len() * 256 * 4).map_err(crate::error::Error::from)?;
        hist.zero_async().map_err(crate::error::Error::from)?;
        let hist_ptr = hist.device_ptr();
        let function = |name: &str| ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "equalize", EQUALIZE_SRC, name);
        let (histogram, table, apply) = (function("equalize_histogram")?, function("equalize_table")?, function("equalize_apply")?);
        let mut cfg = per_sample_launch(max_count, planes.len());
        cfg.grid_dim.1 = cfg.grid_dim.1.min(65_535);
        let table_cfg = sluice_cuda::LaunchConfig { grid_dim: ((planes.len() as u32).div_ceil(64), 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the planes point into `input` and `out` (alive, ordered on this stream) and
        // stay inside their samples; `hist` holds 256 words per plane and is freed on this
        // stream after the launches.
        unsafe {
            ws.stream.launch_builder(&histogram).arg(&base).arg(&n).arg(&hist_ptr).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
            ws.stream.launch_builder(&table).arg(&n).arg(&hist_ptr).launch(table_cfg).map_err(sluice_cuda::CudaError::from)?;
            ws.stream.launch_builder(&apply).arg(&base).arg(&n).arg(&hist_ptr).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod equalize_twins {
    use super::*;

    #[test]
    fn the_equalize_kernels_compile_and_their_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("equalize", EQUALIZE_SRC, &[("EqualizePlane", &EqualizePlane::LAYOUT)]);
    }
}
