//! GPU backend of `fn.erase`: the cpu twin plans the batch (checks, arguments, each sample's
//! clamped regions in its merged geometry, fill values as element bits); one block of
//! descriptors, regions and fill words is uploaded and one launch of `erase.cu` writes every
//! sample, element by element, so both backends give the same bytes.

use super::{Erase, MAX_DIMS};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("erase.cu");

cuda_struct! {
    /// One sample (`struct EraseSample` in erase.cu).
    pub(super) struct EraseSample {
        r#in: u64,
        out: u64,
        numel: i64,
        /// Merged extents, outermost first; 1 past `ndim`.
        ext: [i64; MAX_DIMS],
        /// Device addresses of the sample's first region and first fill word.
        regions: u64,
        fill: u64,
        /// `channels > 1`: element e takes fill word `(e / cstride) % channels`.
        cstride: i64,
        nregions: i32,
        ndim: i32,
        channels: i32,
        pad: i32,
    }
}

cuda_struct! {
    /// One region, `[lo, hi)` per merged dimension (`struct EraseRegion` in erase.cu).
    pub(super) struct EraseRegion {
        lo: [i64; MAX_DIMS],
        hi: [i64; MAX_DIMS],
    }
}

pub(super) struct EraseGpu {
    erase: Erase,
    params: ParamUpload,
}

impl EraseGpu {
    pub(super) fn new(erase: Erase) -> EraseGpu {
        EraseGpu { erase, params: ParamUpload::default() }
    }
}

/// `v` as the kernels' signed 64-bit fields (sizes of host-side batches always fit).
fn i64_of(v: usize) -> i64 {
    i64::try_from(v).expect("sizes fit in i64")
}

impl GpuOperator for EraseGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.erase.plan_batch(&ws.host_view(), input.meta())?;
        let size = meta.dtype().size();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let max_numel = (0..input.len()).map(|i| input.numel(i)).max().unwrap_or(0);
        if max_numel == 0 {
            return Ok(vec![out]);
        }
        let plan = &self.erase.plan;
        // One block: the descriptors, then every region, then the fill words (all 8-byte
        // aligned: both structs are multiples of 8 bytes).
        let desc_bytes = plan.samples.len() * std::mem::size_of::<EraseSample>();
        let region_bytes = plan.regions.len() * std::mem::size_of::<EraseRegion>();
        let len = desc_bytes + region_bytes + plan.fills.len() * 8;
        let base = self.params.upload_with(ws, len, |block, base| {
            let (descs, rest) = block.split_at_mut(desc_bytes);
            let (regions, fills) = rest.split_at_mut(region_bytes);
            let regions_at = base + desc_bytes as u64;
            let fills_at = regions_at + region_bytes as u64;
            for (dst, r) in regions.chunks_exact_mut(std::mem::size_of::<EraseRegion>()).zip(&plan.regions) {
                let g = EraseRegion { lo: r.lo.map(i64_of), hi: r.hi.map(i64_of) };
                dst.copy_from_slice(bytemuck::bytes_of(&g));
            }
            fills.copy_from_slice(bytemuck::cast_slice(&plan.fills));
            for (i, (dst, s)) in descs.chunks_exact_mut(std::mem::size_of::<EraseSample>()).zip(&plan.samples).enumerate() {
                let d = EraseSample {
                    r#in: input.sample_ptr(i),
                    out: out.sample_ptr(i),
                    numel: i64_of(input.numel(i)),
                    ext: s.geometry.ext.map(i64_of),
                    regions: regions_at + (s.regions.0 * std::mem::size_of::<EraseRegion>()) as u64,
                    fill: fills_at + (s.fill * 8) as u64,
                    cstride: i64_of(s.cstride),
                    nregions: (s.regions.1 - s.regions.0) as i32,
                    ndim: s.geometry.ndim as i32,
                    channels: s.channels as i32,
                    pad: 0,
                };
                dst.copy_from_slice(bytemuck::bytes_of(&d));
            }
            Ok(())
        })?;
        let kernel = format!("erase_{size}");
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "erase", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream) and at its regions and fill words inside the uploaded block; every region
        // lies inside its sample's `numel` elements and every fill index is below `channels`,
        // the number of words the sample has.
        unsafe {
            launch_records::<EraseSample>(&ws.stream, &f, base, plan.samples.len(), max_numel)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("erase", SRC, &[("EraseSample", &EraseSample::LAYOUT), ("EraseRegion", &EraseRegion::LAYOUT)]);
    }
}
