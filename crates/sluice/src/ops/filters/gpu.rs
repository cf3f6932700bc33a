//! GPU backend of the separable filters: the cpu twin plans the batch (checks, windows);
//! one launch of `separable.cu` per spatial axis convolves every sample, innermost axis
//! first, through f32 planes in pool memory, with the cpu engine's arithmetic.

use sluice_cuda::DeviceBuffer;

use super::filter::{Filter, SamplePlan};
use super::gaussian_blur::SeparableFilter;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("separable.cu"));

cuda_struct! {
    /// One sample's pass (`struct SepSample` in separable.cu).
    pub(super) struct SepSample {
        r#in: u64,
        out: u64,
        window: u64,
        outer: i64,
        len: i64,
        inner: i64,
        taps: i32,
        pad: i32,
    }
}

pub(super) struct SeparableGpu {
    filter: Box<dyn SeparableFilter>,
    params: ParamUpload,
}

impl SeparableGpu {
    pub(super) fn new(filter: Box<dyn SeparableFilter>) -> SeparableGpu {
        SeparableGpu { filter, params: ParamUpload::default() }
    }
}

impl GpuOperator for SeparableGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.filter.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(plan.meta.clone(), ws.device, ws.stream)?;
        let n = input.len();
        let axes = plan.dims.spatial;
        let (in_name, out_name) = (short_name(plan.in_type), short_name(plan.out_type));
        let (Some(in_name), Some(out_name)) = (in_name, out_name) else {
            return Err(Error::Unsupported(format!("{}: {} -> {} on the GPU", self.filter.name(), plan.in_type, plan.out_type)));
        };
        // f32 planes between passes, one region per sample.
        let mut offsets = Vec::with_capacity(n);
        let mut total = 0usize;
        for i in 0..n {
            offsets.push(total);
            total += input.numel(i);
        }
        if total == 0 {
            return Ok(vec![out]);
        }
        let planes = if axes > 1 { 2 } else { 0 };
        let scratch = DeviceBuffer::alloc(ws.device, ws.stream, planes * total * 4).map_err(Error::from)?;
        let plane = |p: usize, i: usize| scratch.device_ptr() + ((p * total + offsets[i]) * 4) as u64;
        // Descriptors for every pass (innermost axis first), then the weights.
        let desc_bytes = axes * n * std::mem::size_of::<SepSample>();
        let len = desc_bytes + plan.weights.len() * 4;
        let base = self.params.upload_with(ws, len, |block, base| {
            let weights_at = base + desc_bytes as u64;
            let mut k = 0;
            for (pass, axis) in (0..axes).rev().enumerate() {
                for i in 0..n {
                    let (outer, spatial, c) = plan.dims.split(input.shape(i));
                    let (at, taps) = plan.windows[i * axes + axis];
                    let src = if pass == 0 { input.sample_ptr(i) } else { plane((pass + 1) % 2, i) };
                    let dst = if axis == 0 { out.sample_ptr(i) } else { plane(pass % 2, i) };
                    let d = SepSample {
                        r#in: src,
                        out: dst,
                        window: weights_at + (at * 4) as u64,
                        outer: (outer * spatial[..axis].iter().product::<usize>()) as i64,
                        len: spatial[axis] as i64,
                        inner: (spatial[axis + 1..].iter().product::<usize>() * c) as i64,
                        taps: taps as i32,
                        pad: 0,
                    };
                    block[k * std::mem::size_of::<SepSample>()..(k + 1) * std::mem::size_of::<SepSample>()].copy_from_slice(bytemuck::bytes_of(&d));
                    k += 1;
                }
            }
            block[desc_bytes..].copy_from_slice(bytemuck::cast_slice(&plan.weights));
            Ok(())
        })?;
        let max_elems = (0..n).map(|i| input.numel(i)).max().unwrap_or(0);
        for (pass, axis) in (0..axes).rev().enumerate() {
            let (i_t, o_t) = (if pass == 0 { in_name } else { "f32" }, if axis == 0 { out_name } else { "f32" });
            let kernel = format!("sep_{i_t}_{o_t}");
            let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "separable", SRC, &kernel)?;
            let descs = base + (pass * n * std::mem::size_of::<SepSample>()) as u64;
            // SAFETY: the descriptors point into `input`, `out` and `scratch` (alive until the
            // stream passes these launches: the scratch is freed on the stream), each pass
            // reading what the previous one wrote, in stream order.
            unsafe {
                launch_records::<SepSample>(&ws.stream, &f, descs, n, max_elems)?;
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
        crate::ops::gpu_params::check_cuda_source("separable", SRC, &[("SepSample", &SepSample::LAYOUT)]);
    }
}

pub(super) const FILTER_SRC: &str = concat!(include_str!("../element.cuh"), include_str!("filter.cu"));

cuda_struct! {
    /// One sample (`struct FilterSample` in filter.cu).
    pub(super) struct FilterSample {
        r#in: u64,
        out: u64,
        taps: u64,
        slices: i64,
        h: i32,
        w: i32,
        c: i32,
        oh: i32,
        ow: i32,
        ay: i32,
        ax: i32,
        ntaps: i32,
        border: i32,
        valid: i32,
        fill: f32,
        pad: i32,
    }
}

/// GPU backend of `fn.filter`: the cpu twin's plan (kernel taps, anchors, fills read on the
/// host), then one launch for the batch.
pub(super) struct FilterGpu {
    filter: Filter,
    plans: Vec<SamplePlan>,
    params: ParamUpload,
}

impl FilterGpu {
    pub(super) fn new(filter: Filter) -> FilterGpu {
        FilterGpu { filter, plans: Vec::new(), params: ParamUpload::default() }
    }
}

impl GpuOperator for FilterGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let host = ws.host_view();
        let (meta, geometry, in_type, out_type) = self.filter.plan(&host, input.meta(), host.inputs[0], host.inputs.get(1).copied(), &mut self.plans)?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = input.len();
        let (Some(i_name), Some(o_name)) = (short_name(in_type), short_name(out_type)) else {
            return Err(Error::Unsupported(format!("{}: {in_type} -> {out_type} on the GPU", self.filter.ctx.display_name)));
        };
        let desc_bytes = n * std::mem::size_of::<FilterSample>();
        let taps_total: usize = self.plans.iter().map(|p| p.taps.len()).sum();
        let mut max_elems = 0usize;
        let (plans, filter) = (&self.plans, &self.filter);
        let base = self.params.upload_with(ws, desc_bytes + taps_total * 12, |block, base| {
            let mut tap_at = desc_bytes;
            for (i, p) in plans.iter().enumerate() {
                let (slices, h, w, c) = geometry.split(input.shape(i));
                let (kh, kw) = p.kernel;
                let (oh, ow) = if filter.valid { (h + 1 - kh, w + 1 - kw) } else { (h, w) };
                max_elems = max_elems.max(slices * oh * ow * c);
                let d = FilterSample {
                    r#in: input.sample_ptr(i),
                    out: out.sample_ptr(i),
                    taps: base + tap_at as u64,
                    slices: slices as i64,
                    h: h as i32,
                    w: w as i32,
                    c: c as i32,
                    oh: oh as i32,
                    ow: ow as i32,
                    ay: p.anchor.0 as i32,
                    ax: p.anchor.1 as i32,
                    ntaps: p.taps.len() as i32,
                    border: filter.border as i32,
                    valid: filter.valid as i32,
                    fill: p.fill,
                    pad: 0,
                };
                block[i * std::mem::size_of::<FilterSample>()..(i + 1) * std::mem::size_of::<FilterSample>()].copy_from_slice(bytemuck::bytes_of(&d));
                for &(r, c, k) in &p.taps {
                    block[tap_at..tap_at + 12].copy_from_slice(bytemuck::cast_slice(&[r, c, k.to_bits()]));
                    tap_at += 12;
                }
            }
            Ok(())
        })?;
        if max_elems == 0 {
            return Ok(vec![out]);
        }
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "filter", FILTER_SRC, &format!("filter_{i_name}_{o_name}"))?;
        // SAFETY: the descriptors point into `input` and `out` (alive, ordered on this stream)
        // and at their taps in the same uploaded block; threads stay within their samples.
        unsafe {
            launch_records::<FilterSample>(&ws.stream, &f, base, n, max_elems)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod filter_twins {
    use super::*;

    #[test]
    fn the_filter_kernel_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("filter", FILTER_SRC, &[("FilterSample", &FilterSample::LAYOUT)]);
    }
}
