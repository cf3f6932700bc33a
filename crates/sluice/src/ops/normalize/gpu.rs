//! GPU backend of `fn.normalize`: the cpu backend's planning on the host (checks, axes,
//! broadcasting of a given mean / stddev, scale / stddev, element counts), then per batch:
//! * for each statistic computed from the data, the mean first (the variance is taken
//!   around the mean in use, given or computed), two launches: `normalize_partials` cuts
//!   every parameter's reduction into chunks fixed by the shape alone and writes one double
//!   partial sum per chunk to scratch memory from the stream-ordered pool;
//!   `normalize_finish` adds each parameter's partials in a fixed tree order (with
//!   `batch=True` the per-sample totals in sample order, as the cpu does) and writes the mean
//!   or scale / stddev into the parameter arrays on the device, where the output pass reads
//!   them: no host round trip, no atomics, the same bits on every run;
//! * one `normalize` launch for the output, the cpu's expression step for step.
//!
//! Given mean and stddev: bit-exact with the cpu backend. Computed ones are summed in
//! another order than the cpu's, so they may differ in the last bits of a double: FLOAT
//! outputs match the cpu's within rtol 1e-5 / atol 1e-5 after normalisation, integer
//! outputs within 1 (a value that lands next to a rounding boundary).

use sluice_cuda::{DeviceBuffer, LaunchConfig, PushKernelArg};

use super::{param_strides, Normalize, Param, Plan, MAX_NDIM};
use crate::error::{Error, Result};
use crate::ops::cast::gpu::type_code;
use crate::ops::gpu_params::{cuda_struct, per_sample_launches, push, MAX_GRID_ROWS, ParamUpload};
use crate::ops::strided_copy_gpu::{CopySample, Gather, MAX_DIMS};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, TensorListGpu};

/// cast.cu first: the kernels load and store through its conversions.
pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("../cast/cast.cu"), include_str!("normalize.cu"));

/// Elements a partial sum covers (at most): the chunks of a reduction follow from its size
/// alone, so the summation order, hence the result, never depends on timing.
const ELEMENTS_PER_PARTIAL: usize = 64;

/// Threads of a `normalize_finish` block (`FINISH_THREADS` in normalize.cu: a power of two).
const FINISH_THREADS: u32 = 256;

/// Most blocks along x of a `normalize_finish` launch; they stride over larger slot counts.
const MAX_FINISH_BLOCKS: usize = 1024;

cuda_struct! {
    /// A row-major index -> element offset map over merged axes (`struct Axes` in
    /// normalize.cu): a [`Gather`] without its base.
    pub(super) struct Axes {
        ndim: i64,
        extent: [i64; MAX_DIMS],
        stride: [i64; MAX_DIMS],
    }
}

cuda_struct! {
    /// One sample's reductions (`struct StatSample` in normalize.cu).
    pub(super) struct StatSample {
        r#in: u64,
        slots: i64,
        slot_base: i64,
        reduced: i64,
        chunks: i64,
        partial_base: i64,
        count: f64,
        slot_axes: Axes,
        reduced_axes: Axes,
    }
}

impl From<&Gather> for Axes {
    fn from(g: &Gather) -> Axes {
        Axes { ndim: g.ndim as i64, extent: g.extent, stride: g.stride }
    }
}

pub(super) struct NormalizeGpu {
    normalize: Normalize,
    params: ParamUpload,
    /// Output descriptors, the mean and 1 / stddev arrays, then the reduction descriptors
    /// when a statistic is computed; reused across batches.
    block: Vec<u8>,
}

/// This batch's reductions: where their descriptors sit in the block, and their sizes.
struct Reductions {
    descriptors_at: usize,
    /// Partial sums of the whole batch (the scratch buffer's length in doubles).
    partials: usize,
    /// Most (slot, chunk) pairs of one sample: pass 1's threads.
    max_items: usize,
    /// Most slots (parameters) of one sample: pass 2's blocks.
    max_slots: usize,
}

/// Device addresses of the uploaded block's parts the passes use.
struct BlockPtrs {
    mean: u64,
    inv: u64,
    reductions: u64,
}

/// Which computed statistic a pass pair produces.
#[derive(Clone, Copy, PartialEq)]
enum Statistic {
    Mean,
    /// scale / stddev, around the mean array's values.
    InvStddev,
}

impl NormalizeGpu {
    pub(super) fn new(ctx: &OpContext) -> Result<NormalizeGpu> {
        Ok(NormalizeGpu { normalize: Normalize::new(ctx)?, params: ParamUpload::default(), block: Vec::new() })
    }

    /// Appends one `struct StatSample` per sample of `input` to the block.
    fn push_reductions(&mut self, input: &TensorListGpu, reduced: &[bool]) -> Result<Reductions> {
        let name = &self.normalize.ctx.display_name;
        let (offsets, counts) = (&self.normalize.offsets, &self.normalize.counts);
        let mut r = Reductions { descriptors_at: self.block.len(), partials: 0, max_items: 0, max_slots: 0 };
        for i in 0..input.len() {
            let shape = input.shape(i);
            let (slot_axes, reduced_axes) = reduction_axes(shape, reduced).ok_or_else(|| {
                Error::Unsupported(format!("{name}: sample {i} of shape {shape:?} needs more than {MAX_DIMS} dimensions on the GPU"))
            })?;
            let slots = offsets[i + 1] - offsets[i];
            let elements: usize = (0..shape.len()).filter(|&a| reduced[a]).map(|a| shape[a]).product();
            let chunks = chunks_for(elements);
            push(&mut self.block, StatSample {
                r#in: input.sample_ptr(i),
                slots: slots as i64,
                slot_base: offsets[i] as i64,
                reduced: elements as i64,
                chunks: chunks as i64,
                partial_base: r.partials as i64,
                count: counts[i],
                slot_axes: Axes::from(&slot_axes),
                reduced_axes: Axes::from(&reduced_axes),
            });
            r.partials += slots * chunks;
            r.max_items = r.max_items.max(slots * chunks);
            r.max_slots = r.max_slots.max(slots);
        }
        Ok(r)
    }
}

/// Partial sums of a reduction over `reduced` elements.
fn chunks_for(reduced: usize) -> usize {
    reduced.div_ceil(ELEMENTS_PER_PARTIAL).max(1)
}

/// A sample of `shape` as two gathers over its dense element strides: parameter slot ->
/// offset of the slot's first element (the non-reduced axes, numbered row-major as the
/// parameter arrays number them), and reduced element -> offset from there (the reduced
/// axes). `None` when either needs more than [`MAX_DIMS`] merged axes.
fn reduction_axes(shape: &[usize], reduced: &[bool]) -> Option<(Gather, Gather)> {
    let mut strides = [0i64; MAX_NDIM];
    let mut stride = 1i64;
    for a in (0..shape.len()).rev() {
        strides[a] = stride;
        stride *= shape[a] as i64;
    }
    let axes = |keep_reduced: bool| (0..shape.len()).filter(move |&a| reduced[a] == keep_reduced).map(move |a| (shape[a], strides[a]));
    Some((Gather::new(0, axes(false))?, Gather::new(0, axes(true))?))
}

/// Pass 2's launch: one block per slot (at most [`MAX_FINISH_BLOCKS`] along x), one grid row
/// per sample, or a single row with `batch=True`.
fn finish_launch(max_slots: usize, rows: usize) -> LaunchConfig {
    let blocks_x = max_slots.clamp(1, MAX_FINISH_BLOCKS) as u32;
    LaunchConfig { grid_dim: (blocks_x, rows as u32, 1), block_dim: (FINISH_THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// Queues pass 1 and pass 2 for `statistic`, writing it into its parameter array;
/// `partials` is the scratch buffer's address.
fn queue_passes(ws: &GpuWorkspace<'_>, input: &TensorListGpu, plan: &Plan<'_>, r: &Reductions, ptrs: &BlockPtrs, partials: u64, statistic: Statistic) -> Result<()> {
    let kernel = |f: &str| ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "normalize", SRC, f);
    let (partial_sums, finish) = (kernel("normalize_partials")?, kernel("normalize_finish")?);
    let squares = (statistic == Statistic::InvStddev) as i32;
    let out = if statistic == Statistic::Mean { ptrs.mean } else { ptrs.inv };
    let src_code = type_code(input.dtype()).expect("normalize's input types are all known to cast.cu");
    let (n, batch) = (input.len(), plan.batch as i32);
    let (num_samples, rows) = (n as i32, if plan.batch { 1 } else { n });
    let record = |first: usize| ptrs.reductions + (first * std::mem::size_of::<StatSample>()) as u64;
    // SAFETY: the descriptors point into `input` (alive on this stream) and at slots and
    // partials inside the uploaded block and the scratch buffer (sized from the same
    // descriptors); pass 2 reads the partials pass 1 wrote before it on the stream.
    unsafe {
        for (first, cfg) in per_sample_launches(r.max_items, n) {
            ws.stream
                .launch_builder(&partial_sums)
                .arg(&record(first))
                .arg(&ptrs.mean)
                .arg(&squares)
                .arg(&src_code)
                .arg(&partials)
                .launch(cfg)
                .map_err(sluice_cuda::CudaError::from)?;
        }
        // Per sample, a grid row each (in chunks of MAX_GRID_ROWS); with `batch`, one row
        // that reads every sample's descriptor.
        let mut first = 0;
        while first < rows {
            let chunk = (rows - first).min(MAX_GRID_ROWS);
            ws.stream
                .launch_builder(&finish)
                .arg(&record(first))
                .arg(&num_samples)
                .arg(&batch)
                .arg(&partials)
                .arg(&squares)
                .arg(&plan.ddof)
                .arg(&plan.epsilon)
                .arg(&plan.scale)
                .arg(&out)
                .launch(finish_launch(r.max_slots, chunk))
                .map_err(sluice_cuda::CudaError::from)?;
            first += chunk;
        }
    }
    Ok(())
}

/// Queues the passes of every computed statistic, the mean first. The scratch buffer holds
/// one pass's partial sums (the passes run in stream order, so the stddev's reuse it);
/// dropping it at the end frees it in stream order, after them.
fn compute_statistics(ws: &GpuWorkspace<'_>, input: &TensorListGpu, plan: &Plan<'_>, r: &Reductions, ptrs: &BlockPtrs) -> Result<()> {
    let scratch = DeviceBuffer::alloc(ws.device, ws.stream, r.partials * std::mem::size_of::<f64>())?;
    if matches!(plan.mean, Param::Computed) {
        queue_passes(ws, input, plan, r, ptrs, scratch.device_ptr(), Statistic::Mean)?;
    }
    if matches!(plan.stddev, Param::Computed) {
        queue_passes(ws, input, plan, r, ptrs, scratch.device_ptr(), Statistic::InvStddev)?;
    }
    Ok(())
}

impl GpuOperator for NormalizeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let name = self.normalize.ctx.display_name.clone();
        let plan = self.normalize.plan(&ws.host_view(), input.meta())?;
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
        // then mean[total], then inv[total] (f64, 8-byte aligned after 168-byte descriptors;
        // computed entries are placeholders the passes overwrite), then the reductions.
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
            push(&mut self.block, g.descriptor(input.sample_ptr(i), out.sample_ptr(i), count));
        }
        if max_count == 0 {
            return Ok(vec![out]);
        }
        let mean_at = self.block.len();
        self.block.extend_from_slice(bytemuck::cast_slice(&self.normalize.mean));
        let inv_at = self.block.len();
        self.block.extend_from_slice(bytemuck::cast_slice(&self.normalize.inv));
        let computed = matches!(plan.mean, Param::Computed) || matches!(plan.stddev, Param::Computed);
        let reductions = if computed { Some(self.push_reductions(input, &plan.reduced[..ndim])?) } else { None };
        let params = self.params.upload(ws, &self.block)?;
        let at = |offset: usize| params + offset as u64;
        if let Some(r) = &reductions {
            compute_statistics(ws, input, &plan, r, &BlockPtrs { mean: at(mean_at), inv: at(inv_at), reductions: at(r.descriptors_at) })?;
        }
        let (samples_ptr, mean_ptr, inv_ptr) = (params, at(mean_at), at(inv_at));
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "normalize", SRC, "normalize")?;
        let shift = plan.shift;
        for (first, cfg) in per_sample_launches(max_count, n) {
            let samples_at = samples_ptr + (first * std::mem::size_of::<CopySample>()) as u64;
            // SAFETY: descriptors point into `input` and `out`, both alive on this stream; the
            // parameter indices stay inside each sample's block of the uploaded arrays.
            unsafe {
                ws.stream
                    .launch_builder(&f)
                    .arg(&samples_at)
                    .arg(&mean_ptr)
                    .arg(&inv_ptr)
                    .arg(&shift)
                    .arg(&src_code)
                    .arg(&dst_code)
                    .launch(cfg)
                    .map_err(sluice_cuda::CudaError::from)?;
            }
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::super::walk;
    use super::*;

    /// `axes_offset` of normalize.cu: the outermost coordinate is what the inner ones leave.
    fn axes_offset(g: &Gather, mut k: i64) -> i64 {
        if g.ndim == 0 {
            return 0;
        }
        let mut offset = 0;
        for d in (1..g.ndim).rev() {
            offset += k % g.extent[d] * g.stride[d];
            k /= g.extent[d];
        }
        offset + k * g.stride[0]
    }

    /// What `normalize_partials` reads for a sample of `shape`: per slot, the elements of
    /// chunk 0, then chunk 1, ... Also counts the visits of every element.
    fn kernel_reads(shape: &[usize], reduced: &[bool], slots: usize) -> (Vec<Vec<usize>>, Vec<u32>) {
        let (slot_axes, reduced_axes) = reduction_axes(shape, reduced).expect("fits");
        let elements: usize = (0..shape.len()).filter(|&a| reduced[a]).map(|a| shape[a]).product();
        let chunks = chunks_for(elements);
        let mut visits = vec![0u32; shape.iter().product()];
        let mut reads = vec![Vec::new(); slots];
        for t in 0..slots * chunks {
            let (slot, first) = (t / chunks, axes_offset(&slot_axes, (t / chunks) as i64));
            for r in (t % chunks..elements).step_by(chunks) {
                let k = (first + axes_offset(&reduced_axes, r as i64)) as usize;
                visits[k] += 1;
                reads[slot].push(k);
            }
        }
        (reads, visits)
    }

    #[test]
    fn reductions_read_every_element_once_into_the_cpus_parameter_slot() {
        let shapes: [&[usize]; 8] = [&[4, 5, 3], &[2, 3, 4, 5], &[7], &[1, 3, 1, 2], &[], &[3, 0, 2], &[40, 30, 3], &[130, 2]];
        for shape in shapes {
            let ndim = shape.len();
            for mask in 0..(1u32 << ndim) {
                let reduced: Vec<bool> = (0..ndim).map(|a| mask >> a & 1 == 1).collect();
                let mut strides = [0; MAX_NDIM];
                let slots = param_strides(shape, &reduced, &mut strides);
                let mut want = vec![Vec::new(); slots];
                walk(shape, &strides, |k, p| want[p].push(k));
                let (mut got, visits) = kernel_reads(shape, &reduced, slots);
                assert!(visits.iter().all(|&v| v == 1), "{shape:?} {reduced:?}: visits {visits:?}");
                got.iter_mut().for_each(|g| g.sort_unstable());
                assert_eq!(got, want, "{shape:?} {reduced:?}");
            }
        }
    }

    #[test]
    fn reductions_are_cut_into_chunks_of_at_most_the_partial_size() {
        assert_eq!([0, 1, 64, 65, 128, 150528].map(chunks_for), [1, 1, 1, 2, 2, 2352]);
        // HWC per channel: one slot axis (C) and the merged H*W axis; all axes: one axis.
        let (slots, reduced) = reduction_axes(&[224, 224, 3], &[true, true, false]).unwrap();
        assert_eq!((slots.ndim, slots.extent[0], slots.stride[0]), (1, 3, 1));
        assert_eq!((reduced.ndim, reduced.extent[0], reduced.stride[0]), (1, 224 * 224, 3));
        let (slots, reduced) = reduction_axes(&[224, 224, 3], &[true; 3]).unwrap();
        assert_eq!((slots.ndim, reduced.ndim, reduced.extent[0], reduced.stride[0]), (0, 1, 224 * 224 * 3, 1));
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("normalize", SRC, &[("NormSample", &crate::ops::strided_copy_gpu::CopySample::LAYOUT), ("StatSample", &StatSample::LAYOUT), ("Axes", &Axes::LAYOUT)]);
    }
}
