//! GPU backend of the colour family: the cpu twin plans the batch (checks, output type, one
//! [`Transform`] per sample); one launch of `color.cu` applies every sample's map with the
//! cpu kernel's arithmetic, so both backends give the same bits.

use sluice_cuda::{DeviceBuffer, PushKernelArg};

use super::conversion::Conversion;
use super::equalize::Equalize;
use super::{Color, ColorBatch, Transform};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, per_sample_launch, per_sample_launches, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::{DType, TensorListGpu};

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
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream; each sample holds `count` elements (pixels of 3) in both.
        unsafe {
            launch_records::<ColorSample>(&ws.stream, &f, base, desc.len(), max_items)?;
        }
        Ok(vec![out])
    }
}

cuda_struct! {
    /// One map of a chain (`struct ColorMap` in color.cu).
    pub(super) struct ColorMap {
        m: [f32; 9],
        offset: f32,
        matrix: i32,
    }
}

cuda_struct! {
    /// One sample of a fused pair (`struct ChainSample` in color.cu).
    pub(super) struct ChainSample {
        r#in: u64,
        out: u64,
        /// Pixels when `pixels`, else elements.
        count: i64,
        pixels: i32,
        pad: i32,
        first: ColorMap,
        second: ColorMap,
    }
}

impl ColorMap {
    fn of(t: Transform) -> ColorMap {
        match t {
            Transform::Scale { mul, add } => ColorMap { m: [mul, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], offset: add, matrix: 0 },
            Transform::Matrix { m, offset } => ColorMap { m: [m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2], m[2][0], m[2][1], m[2][2]], offset, matrix: 1 },
        }
    }
}

/// Two colour operators in a row on the GPU (`Graph::fuse_color_chains`: `hsv` then
/// `brightness_contrast` in detection pipelines), as one pass with the unfused pair's bits:
/// each operator plans its own maps, checks and output type; one launch applies both per
/// pixel. Type chains without a fused kernel run as the two operators.
pub(super) struct ColorChainGpu {
    first: ColorGpu,
    second: ColorGpu,
    params: ParamUpload,
    desc: Vec<ChainSample>,
}

impl ColorChainGpu {
    pub(super) fn new(first: Color, second: Color) -> ColorChainGpu {
        ColorChainGpu { first: ColorGpu::new(first), second: ColorGpu::new(second), params: ParamUpload::default(), desc: Vec::new() }
    }

    /// The fused kernel for these types, if there is one (color.cu's CHAIN_KERNELS).
    fn kernel(types: [DType; 3]) -> Option<String> {
        let fused = |d: DType| matches!(d, DType::U8 | DType::F32);
        types.iter().all(|&d| fused(d)).then(|| format!("color_chain_{}", types.map(|d| short_name(d).expect("u8 or f32")).join("_")))
    }
}

impl GpuOperator for ColorChainGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let ws_first = ws.for_part(&self.first.color.ctx, vec![input]);
        let first = self.first.color.plan_batch(&ws_first.host_view(), input.meta())?;
        let second = self.second.color.plan_batch(&ws.for_part(&self.second.color.ctx, vec![]).host_view(), &first.meta)?;
        let Some(kernel) = Self::kernel([first.in_type, first.out_type, second.out_type]) else {
            let mid = self.first.run(&ws_first)?.pop().expect("one output");
            return self.second.run(&ws.for_part(&self.second.color.ctx, vec![&mid]));
        };
        let out = TensorListGpu::alloc(second.meta, ws.device, ws.stream)?;
        let maps = self.first.color.transforms.iter().zip(&self.second.color.transforms);
        let pixels = maps.clone().any(|(a, b)| matches!(a, Transform::Matrix { .. }) || matches!(b, Transform::Matrix { .. }));
        self.desc.clear();
        for (i, (&a, &b)) in maps.enumerate() {
            let count = input.numel(i) / if pixels { 3 } else { 1 };
            self.desc.push(ChainSample {
                r#in: input.sample_ptr(i),
                out: out.sample_ptr(i),
                count: count as i64,
                pixels: pixels as i32,
                pad: 0,
                first: ColorMap::of(a),
                second: ColorMap::of(b),
            });
        }
        let max_items = self.desc.iter().map(|d| d.count as usize).max().unwrap_or(0);
        if max_items == 0 {
            return Ok(vec![out]);
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&self.desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "color", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out`, alive and ordered on this
        // stream; each sample holds `count` elements (pixels of 3: both maps' plans checked
        // 3 channels wherever a matrix is involved) in both.
        unsafe {
            launch_records::<ChainSample>(&ws.stream, &f, base, self.desc.len(), max_items)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::testing::{context, run, with_args};
    use crate::ops::{ArgValue, OpDef};
    use crate::tensor::TensorList;

    fn chains() -> &'static PerSampleKernels {
        static KERNELS: OnceLock<PerSampleKernels> = OnceLock::new();
        let kernels = ["u8", "f32"].iter().flat_map(|i| ["u8_u8", "u8_f32", "f32_u8", "f32_f32"].map(move |mo| format!("color_chain_{i}_{mo}")));
        let kernels: Vec<String> = kernels.collect();
        let names: Vec<&str> = kernels.iter().map(String::as_str).collect();
        KERNELS.get_or_init(|| PerSampleKernels::build("color", SRC, "ChainSample", &["in"], &["out"], &names))
    }

    /// Three HWC samples of `dtype` (one of them a single pixel), values across the range.
    fn images(dtype: DType) -> TensorList {
        let shapes = [vec![7usize, 5, 3], vec![1, 1, 3], vec![4, 9, 3]];
        let vals = |n: usize, k: usize| (0..n).map(move |j| ((j * 37 + k * 101) % 256) as f32);
        match dtype {
            DType::U8 => TensorList::from_samples(&shapes, &shapes.iter().enumerate().map(|(k, s)| vals(s.iter().product(), k).map(|v| v as u8).collect::<Vec<_>>()).collect::<Vec<_>>()),
            _ => TensorList::from_samples(&shapes, &shapes.iter().enumerate().map(|(k, s)| vals(s.iter().product(), k).map(|v| v * 1.37 - 60.0).collect::<Vec<_>>()).collect::<Vec<_>>()),
        }
    }

    fn color(def: &OpDef, kind: super::super::Kind, args: Vec<(&str, ArgValue)>) -> Color {
        Color::new(&context(def, args, &[]).unwrap(), kind).unwrap()
    }

    /// Every fused type chain, matrix and scale maps in both orders: the kernel run on the
    /// host gives the bits of the two cpu operators one after the other.
    #[test]
    fn the_chain_kernel_run_on_the_host_equals_the_two_cpu_operators() {
        use super::super::{Kind, BRIGHTNESS_CONTRAST, HSV};
        let f32_ = ArgValue::Int(DType::F32 as i64);
        let u8_ = ArgValue::Int(DType::U8 as i64);
        for in_type in [DType::U8, DType::F32] {
            for (mid, out) in [(&u8_, &u8_), (&u8_, &f32_), (&f32_, &u8_), (&f32_, &f32_)] {
                let hsv = || color(&HSV, Kind::Hsv, vec![("hue", ArgValue::Float(23.0)), ("saturation", ArgValue::Float(1.3)), ("value", ArgValue::Float(0.9)), ("dtype", mid.clone())]);
                let bc = |d: &ArgValue| color(&BRIGHTNESS_CONTRAST, Kind::BrightnessContrast, vec![("brightness", ArgValue::Float(1.2)), ("contrast", ArgValue::Float(0.7)), ("brightness_shift", ArgValue::Float(0.05)), ("dtype", d.clone())]);
                let bc_then_hsv = || color(&HSV, Kind::Hsv, vec![("hue", ArgValue::Float(-40.0)), ("saturation", ArgValue::Float(0.5)), ("dtype", out.clone())]);
                for (mut a, mut b) in [(hsv(), bc(out)), (bc(mid), bc_then_hsv()), (bc(mid), bc(out))] {
                    let x = images(in_type);
                    let mid_out = run(&mut a, &[&x], &[]).unwrap().pop().unwrap();
                    let want = run(&mut b, &[&mid_out], &[]).unwrap().pop().unwrap();
                    let (pa, pb) = with_args(&[], x.len(), |ws| (a.plan_batch(ws, x.meta()).unwrap(), b.plan_batch(ws, mid_out.meta()).unwrap()));
                    let kernel = ColorChainGpu::kernel([pa.in_type, pa.out_type, pb.out_type]).expect("a fused chain");
                    let pixels = a.transforms.iter().chain(&b.transforms).any(|t| matches!(t, Transform::Matrix { .. }));
                    let descs: Vec<ChainSample> = (0..x.len())
                        .map(|i| ChainSample {
                            r#in: x.offset(i) as u64,
                            out: want.offset(i) as u64,
                            count: (x.numel(i) / if pixels { 3 } else { 1 }) as i64,
                            pixels: pixels as i32,
                            pad: 0,
                            first: ColorMap::of(a.transforms[i]),
                            second: ColorMap::of(b.transforms[i]),
                        })
                        .collect();
                    let got = chains().run(&kernel, bytemuck::cast_slice(&descs), descs.len(), &x.buffer().as_slice()[..x.total_bytes()], want.total_bytes());
                    assert_eq!(&got[..], &want.buffer().as_slice()[..want.total_bytes()], "{kernel}");
                }
            }
        }
    }

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source(
            "color",
            SRC,
            &[("ColorSample", &ColorSample::LAYOUT), ("ColorMap", &ColorMap::LAYOUT), ("ChainSample", &ChainSample::LAYOUT)],
        );
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
        for (first, cfg) in per_sample_launches(max_pixels, desc.len()) {
            let descs_at = base + (first * std::mem::size_of::<ConversionSample>()) as u64;
            unsafe {
                ws.stream.launch_builder(&f).arg(&descs_at).arg(&from).arg(&to).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
            }
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
