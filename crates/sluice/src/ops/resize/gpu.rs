//! GPU backend of `resize`: the cpu backend plans the batch (sizes, windows, filters) and
//! computes the filter taps; one kernel launch resamples every sample.

use std::sync::Arc;

use sluice_cuda::{GpuDevice, PushKernelArg};

use super::kernel::Taps;
use super::{Resize, ResizeBatch};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{per_sample_launch, push, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{DType, TensorListGpu};

const SRC: &str = include_str!("resize.cu");

pub(super) struct ResizeGpu {
    resize: Resize,
    params: ParamUpload,
    /// Per-sample (rows, columns) taps, kept between batches so their vectors are reused.
    taps: Vec<(Taps, Taps)>,
}

impl ResizeGpu {
    pub(super) fn new(ctx: &OpContext, _device: &Arc<GpuDevice>) -> Result<ResizeGpu> {
        Ok(ResizeGpu { resize: Resize::from_ctx(ctx)?, params: ParamUpload::default(), taps: Vec::new() })
    }
}

impl GpuOperator for ResizeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let ResizeBatch { meta, in_type, out_type } = self.resize.plan_batch(&ws.host_view(), input.meta())?;
        let kernel = match (in_type, out_type) {
            (DType::U8, DType::U8) => "resize_u8_u8",
            (DType::U8, DType::F32) => "resize_u8_f32",
            (DType::F32, DType::F32) => "resize_f32_f32",
            (i, o) => return Err(Error::Unsupported(format!("resize: {i} -> {o} is not supported on the GPU yet; use UINT8 or FLOAT"))),
        };
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = input.len();
        if n == 0 {
            return Ok(vec![out]);
        }
        // Block layout: n descriptors (80 bytes, `struct Sample` in resize.cu), then the tap
        // tables; descriptors hold absolute device addresses of the tables.
        const DESC: usize = 80;
        if let Some((i, p)) = self.resize.plans().iter().enumerate().find(|(_, p)| p.c > 4) {
            return Err(Error::data(self.resize_ctx_at(ws, input, i), format!("{} channels: the GPU resize handles up to 4", p.c)));
        }
        // Taps of every sample on the CPU workers (the host side of this operator).
        self.taps.resize_with(n, Default::default);
        let plans = self.resize.plans();
        ws.pool.install(|| {
            use rayon::prelude::*;
            self.taps.par_iter_mut().zip(plans.par_iter()).for_each(|((ty, tx), p)| {
                if p.filter[0].is_none() && p.filter[1].is_none() {
                    // Nearest neighbour on both axes: the cpu picks rows by accumulation; use
                    // its exact indices as one-tap filters.
                    let (rows, cols) = super::kernel::nn_indices(p);
                    for (t, idx) in [(&mut *ty, rows), (&mut *tx, cols)] {
                        t.support = 1;
                        t.first.clear();
                        t.first.extend(idx.iter().map(|&v| v as i32));
                        t.weights.clear();
                        t.weights.resize(idx.len(), 1.0);
                    }
                } else {
                    ty.compute(p.in_h, p.out_h, p.origin[0], p.scale[0], p.filter[0].as_ref());
                    tx.compute(p.in_w, p.out_w, p.origin[1], p.scale[1], p.filter[1].as_ref());
                }
            });
        });
        // Layout: n descriptors, then per sample its four tables (16-byte aligned), written
        // straight into the pinned upload block by the workers.
        let align = |v: usize| v.next_multiple_of(16);
        let mut offsets = Vec::with_capacity(n);
        let mut at = align(n * DESC);
        let mut max_pix = 1usize;
        for (p, (ty, tx)) in plans.iter().zip(&self.taps) {
            let fy = at;
            let wy = align(fy + 4 * ty.first.len());
            let fx = align(wy + 4 * ty.weights.len());
            let wx = align(fx + 4 * tx.first.len());
            at = align(wx + 4 * tx.weights.len());
            offsets.push((fy, wy, fx, wx, ty.support, tx.support));
            max_pix = max_pix.max(p.out_h * p.out_w);
        }
        let taps = &self.taps;
        let pool = ws.pool;
        let base = self.params.upload_with(ws, at, |block, base| {
            let (desc, mut tables) = block.split_at_mut(align(n * DESC));
            // Each sample's tables are a disjoint slice: hand them to the workers.
            let mut parts = Vec::with_capacity(n);
            let mut consumed = align(n * DESC);
            for (i, &(fy, _, _, _, _, _)) in offsets.iter().enumerate() {
                let end = offsets.get(i + 1).map_or(at, |o| o.0);
                let (head, rest) = std::mem::take(&mut tables).split_at_mut(end - consumed);
                parts.push((fy, head));
                tables = rest;
                consumed = end;
            }
            pool.install(|| {
                use rayon::prelude::*;
                parts.par_iter_mut().zip(taps.par_iter()).zip(offsets.par_iter()).for_each(|(((start, dst), (ty, tx)), o)| {
                    for (off, bytes) in [(o.0, bytemuck::cast_slice::<i32, u8>(&ty.first)), (o.1, bytemuck::cast_slice(&ty.weights)), (o.2, bytemuck::cast_slice(&tx.first)), (o.3, bytemuck::cast_slice(&tx.weights))] {
                        dst[off - *start..off - *start + bytes.len()].copy_from_slice(bytes);
                    }
                });
            });
            let mut d = Vec::with_capacity(n * DESC);
            for (i, p) in plans.iter().enumerate() {
                let (fy, wy, fx, wx, sy, sx) = offsets[i];
                push(&mut d, input.sample_ptr(i));
                push(&mut d, out.sample_ptr(i));
                for off in [fy, wy, fx, wx] {
                    push(&mut d, base + off as u64);
                }
                for v in [p.in_h, p.in_w, p.c, p.out_h, p.out_w, sy, sx, 0] {
                    push(&mut d, v as i32);
                }
            }
            desc[..d.len()].copy_from_slice(&d);
            Ok(())
        })?;
        let at = base;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "resize", SRC, kernel)?;
        let cfg = per_sample_launch(max_pix, n);
        // SAFETY: descriptors point into `input`, `out` and the uploaded tables, all alive and
        // ordered on this stream; each thread writes inside its sample's output.
        unsafe {
            ws.stream.launch_builder(&f).arg(&at).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

impl ResizeGpu {
    fn resize_ctx_at(&self, ws: &GpuWorkspace<'_>, input: &TensorListGpu, i: usize) -> crate::error::Location {
        self.resize.ctx().at(ws.iteration, i, input.source_info(i))
    }
}
