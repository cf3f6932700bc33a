//! GPU backend of `resize`: the cpu backend plans the batch (sizes, windows, filters); the
//! filter tables live on the GPU between batches; one kernel launch resamples every sample.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_cuda::{DeviceBuffer, GpuDevice};

use super::kernel::{Filter, Plan, Taps};
use super::volume::{nn_slices, Depth};
use super::{Resize, ResizeBatch};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("resize.cu"));

cuda_struct! {
    /// One sample's resampling (`struct Sample` in resize.cu).
    struct ResizeSample {
        r#in: u64,
        out: u64,
        /// First-index (int32) and weight (f32) tables, rows then columns.
        fy: u64,
        wy: u64,
        fx: u64,
        wx: u64,
        /// The depth axis' tables; 0 for images.
        fz: u64,
        wz: u64,
        in_h: i32,
        in_w: i32,
        c: i32,
        out_h: i32,
        out_w: i32,
        sup_y: i32,
        sup_x: i32,
        /// Images (or volumes of `in_d` of them) one after the other, each resampled alike.
        planes: i32,
        in_d: i32,
        out_d: i32,
        sup_z: i32,
        pad: i32,
    }
}

pub(super) struct ResizeGpu {
    resize: Resize,
    resampler: GpuResampler,
}

impl ResizeGpu {
    pub(super) fn new(ctx: &OpContext, _device: &Arc<GpuDevice>) -> Result<ResizeGpu> {
        Ok(ResizeGpu::with(Resize::from_ctx(ctx)?))
    }

    /// The gpu backend of a planning made otherwise (`resize_crop_mirror`).
    pub(super) fn with(resize: Resize) -> ResizeGpu {
        ResizeGpu { resize, resampler: GpuResampler::default() }
    }
}

/// The GPU half of a resampling operator (`resize`, `random_resized_crop`): given every
/// sample's [`Plan`] (made by the cpu twin's planning), one launch resamples the batch.
#[derive(Default)]
pub(crate) struct GpuResampler {
    params: ParamUpload,
    tables: TableCache,
}

/// What one axis' filter table depends on: output length, source origin and step, and the
/// filter (its static table, anchor and scale), all bit for bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct TableKey {
    out: usize,
    origin: u32,
    scale: u32,
    filter: Option<(usize, u32, u32)>,
}

impl TableKey {
    fn new(out: usize, origin: f32, scale: f32, filter: Option<&Filter>) -> TableKey {
        let filter = filter.map(|f| (f.table.as_ptr() as usize, f.anchor.to_bits(), f.scale.to_bits()));
        TableKey { out, origin: origin.to_bits(), scale: scale.to_bits(), filter }
    }
}

/// One axis' table on the GPU: device addresses of its `first` and `weights` arrays.
#[derive(Clone, Copy)]
struct TableAt {
    first: u64,
    weights: u64,
    support: usize,
}

/// Filter tables already on the GPU. A training pipeline resizes random windows to one size,
/// so the same few hundred (output size, origin, step) tables come back batch after batch:
/// each is computed and uploaded once, and a batch uploads only its descriptors. Computing
/// every table every batch cost the pipeline thread 2-6 ms per batch on an H200 host (on
/// workers busy decoding), which delayed the next batch's decode.
#[derive(Default)]
struct TableCache {
    index: HashMap<TableKey, TableAt>,
    /// Device memory the tables live in, filled in order; dropping a chunk frees it in
    /// stream order, after the kernels queued before that read it.
    chunks: Vec<DeviceBuffer>,
    /// Bytes used in the last chunk.
    used: usize,
    /// Bytes of all chunks.
    bytes: usize,
    /// This batch's new tables, to be uploaded (vectors reused between batches).
    fresh: Vec<Taps>,
}

/// Chunk size of the table cache, and the size past which it starts again (arbitrary
/// origins, from a `roi` argument input say, would otherwise grow it without end).
const TABLE_CHUNK: usize = 4 << 20;
const TABLE_CACHE_LIMIT: usize = 64 << 20;

/// Where a sample's axis table comes from in this batch.
#[derive(Clone, Copy)]
enum Table {
    Cached(TableAt),
    /// Index into `TableCache::fresh`.
    Fresh(usize),
    /// No such axis (the depth of an image).
    Absent,
}

impl TableCache {
    /// The table of each sample's axes (y, x, and z for volumes): cached ones, or new ones
    /// computed into `fresh` (a table new twice in one batch is computed once;
    /// nearest-neighbour-on-every-axis samples, which use the cpu's exact indices, are never
    /// cached).
    fn tables(&mut self, plans: &[Plan], depths: &[Depth]) -> (Vec<[Table; 3]>, Vec<Option<TableKey>>) {
        let mut fresh_keys: Vec<Option<TableKey>> = Vec::new();
        let mut pending: HashMap<TableKey, usize> = HashMap::new();
        let mut out = Vec::with_capacity(plans.len());
        // The next fresh table (recycled from earlier batches), recorded under `key`.
        fn take(fresh: &mut Vec<Taps>, fresh_keys: &mut Vec<Option<TableKey>>, key: Option<TableKey>) -> usize {
            let k = fresh_keys.len();
            if fresh.len() == k {
                fresh.push(Taps::default());
            }
            fresh_keys.push(key);
            k
        }
        for (i, p) in plans.iter().enumerate() {
            let depth = depths.get(i);
            if p.filter[0].is_none() && p.filter[1].is_none() && depth.is_none_or(|z| z.filter.is_none()) {
                // Nearest neighbour on every axis: the cpu picks rows (and slices) by
                // accumulation; use its exact indices as one-tap filters.
                let (rows, cols) = super::kernel::nn_indices(p);
                let slices = depth.map(nn_slices);
                let mut tables = [Table::Absent; 3];
                for (a, idx) in [Some(rows), Some(cols), slices].into_iter().enumerate() {
                    let Some(idx) = idx else { continue };
                    let k = take(&mut self.fresh, &mut fresh_keys, None);
                    let t = &mut self.fresh[k];
                    t.support = 1;
                    t.first.clear();
                    t.first.extend(idx.iter().map(|&v| v as i32));
                    t.weights.clear();
                    t.weights.resize(idx.len(), 1.0);
                    tables[a] = Table::Fresh(k);
                }
                out.push(tables);
                continue;
            }
            let axes = [
                Some((p.out_h, p.origin[0], p.scale[0], p.filter[0].as_ref())),
                Some((p.out_w, p.origin[1], p.scale[1], p.filter[1].as_ref())),
                depth.map(|z| (z.out_d, z.origin, z.scale, z.filter.as_ref())),
            ];
            let mut tables = [Table::Absent; 3];
            for (slot, axis) in tables.iter_mut().zip(axes) {
                let Some((len, origin, scale, filter)) = axis else { continue };
                let key = TableKey::new(len, origin, scale, filter);
                *slot = if let Some(&at) = self.index.get(&key) {
                    Table::Cached(at)
                } else if let Some(&k) = pending.get(&key) {
                    Table::Fresh(k)
                } else {
                    let k = take(&mut self.fresh, &mut fresh_keys, Some(key));
                    self.fresh[k].compute_tables(len, origin, scale, filter);
                    pending.insert(key, k);
                    Table::Fresh(k)
                };
            }
            out.push(tables);
        }
        (out, fresh_keys)
    }

    /// Room for `len` bytes of new tables: the device address they go to, in the last chunk.
    fn room(&mut self, ws: &GpuWorkspace<'_>, len: usize) -> Result<(usize, usize)> {
        if self.chunks.last().is_none_or(|c| c.len() - self.used < len) {
            let size = len.max(TABLE_CHUNK);
            self.chunks.push(DeviceBuffer::alloc(ws.device, ws.stream, size)?);
            self.bytes += size;
            self.used = 0;
        }
        let at = self.used;
        self.used += len;
        Ok((self.chunks.len() - 1, at))
    }

    fn clear(&mut self) {
        self.index.clear();
        self.chunks.clear();
        self.used = 0;
        self.bytes = 0;
    }
}

impl GpuOperator for ResizeGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let ResizeBatch { meta, in_type, out_type } = self.resize.plan_batch(&ws.host_view(), input.meta())?;
        let (plans, depths) = (self.resize.plans(), self.resize.depths());
        let out = self.resampler.run(ws, self.resize.ctx(), input, plans, depths, meta, in_type, out_type, true)?;
        Ok(vec![out])
    }
}

impl GpuResampler {
    /// Resamples every sample of `input` by its plan (and depth, for volumes: `depths` is
    /// empty or has one per sample) into a new batch shaped `meta`.
    /// `keep_tables`: keep the filter tables on the device for later batches (worth it when
    /// they repeat; random windows, whose origins rarely do, pass false). Planning has
    /// checked the batch already (no empty samples); samples of more than 4 channels are
    /// an error naming `ctx`'s operator.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &mut self,
        ws: &GpuWorkspace<'_>,
        ctx: &OpContext,
        input: &TensorListGpu,
        plans: &[Plan],
        depths: &[Depth],
        meta: crate::tensor::BatchMeta,
        in_type: DType,
        out_type: DType,
        keep_tables: bool,
    ) -> Result<TensorListGpu> {
        let kernel = match (in_type, out_type) {
            (DType::U8, DType::U8) => "resize_u8_u8",
            (DType::U8, DType::F32) => "resize_u8_f32",
            (DType::I16, DType::I16) => "resize_i16_i16",
            (DType::I16, DType::F32) => "resize_i16_f32",
            (DType::U16, DType::U16) => "resize_u16_u16",
            (DType::U16, DType::F32) => "resize_u16_f32",
            (DType::I32, DType::I32) => "resize_i32_i32",
            (DType::I32, DType::F32) => "resize_i32_f32",
            (DType::F32, DType::F32) => "resize_f32_f32",
            (i, o) => return Err(Error::Unsupported(format!("{}: {i} -> {o} is not supported: the output is the input type or FLOAT", ctx.display_name))),
        };
        if let Some((i, p)) = plans.iter().enumerate().find(|(_, p)| p.c > 4) {
            let at = ctx.at(ws.iteration, i, input.source_info(i));
            return Err(Error::data(at, format!("{} channels: the GPU {} handles up to 4", p.c, ctx.display_name)));
        }
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let n = input.len();
        if n == 0 {
            return Ok(out);
        }
        let cache = &mut self.tables;
        if cache.bytes > TABLE_CACHE_LIMIT || !keep_tables {
            cache.clear();
        }
        let (tables, fresh_keys) = cache.tables(plans, depths);

        // Upload block: n descriptors, then the new tables (16-byte aligned arrays), which
        // one device-to-device copy then moves into the cache (or which the kernel reads in
        // place, when the tables are not kept).
        let align = |v: usize| v.next_multiple_of(16);
        let head = align(n * size_of::<ResizeSample>());
        let mut fresh_at = Vec::with_capacity(fresh_keys.len());
        let mut at = head;
        for t in &cache.fresh[..fresh_keys.len()] {
            let weights = align(at + 4 * t.first.len());
            fresh_at.push((at - head, weights - head));
            at = align(weights + 4 * t.weights.len());
        }
        let fresh_len = at - head;
        let (chunk, chunk_at) = if fresh_len > 0 && keep_tables { cache.room(ws, fresh_len)? } else { (0, 0) };
        // Where the fresh tables are read from: the cache's chunk, or the upload block.
        let block = self.params.reserve(ws, at)? + head as u64;
        let dest = |off: usize| if keep_tables { cache.chunks.get(chunk).map_or(0, |c| c.device_ptr() + (chunk_at + off) as u64) } else { block + off as u64 };
        let fresh_tables: Vec<TableAt> = fresh_at
            .iter()
            .zip(&cache.fresh)
            .map(|(&(first, weights), t)| TableAt { first: dest(first), weights: dest(weights), support: t.support })
            .collect();
        let resolve = |t: Table| match t {
            Table::Cached(at) => at,
            Table::Fresh(k) => fresh_tables[k],
            Table::Absent => TableAt { first: 0, weights: 0, support: 0 },
        };
        let mut max_pix = 1usize;
        let mut desc = Vec::with_capacity(n);
        for (i, (p, [ty, tx, tz])) in plans.iter().zip(&tables).enumerate() {
            let (ty, tx, tz) = (resolve(*ty), resolve(*tx), resolve(*tz));
            let (in_d, out_d) = depths.get(i).map_or((1, 1), |z| (z.in_d, z.out_d));
            desc.push(ResizeSample {
                r#in: input.sample_ptr(i),
                out: out.sample_ptr(i),
                fy: ty.first,
                wy: ty.weights,
                fx: tx.first,
                wx: tx.weights,
                fz: tz.first,
                wz: tz.weights,
                in_h: p.in_h as i32,
                in_w: p.in_w as i32,
                c: p.c as i32,
                out_h: p.out_h as i32,
                out_w: p.out_w as i32,
                sup_y: ty.support as i32,
                sup_x: tx.support as i32,
                planes: p.planes as i32,
                in_d: in_d as i32,
                out_d: out_d as i32,
                sup_z: tz.support as i32,
                pad: 0,
            });
            max_pix = max_pix.max(p.out_h * p.out_w * out_d * p.planes);
        }
        let fresh = &cache.fresh;
        let base = self.params.upload_with(ws, at, |block, _| {
            let desc: &[u8] = bytemuck::cast_slice(&desc);
            block[..desc.len()].copy_from_slice(desc);
            for (&(first, weights), t) in fresh_at.iter().zip(fresh) {
                let first_bytes: &[u8] = bytemuck::cast_slice(&t.first);
                let weight_bytes: &[u8] = bytemuck::cast_slice(&t.weights);
                block[head + first..head + first + first_bytes.len()].copy_from_slice(first_bytes);
                block[head + weights..head + weights + weight_bytes.len()].copy_from_slice(weight_bytes);
            }
            Ok(())
        })?;
        debug_assert_eq!(base + head as u64, block, "reserve and upload_with use the same slot");
        if fresh_len > 0 && keep_tables {
            // SAFETY: the upload block was copied in on this stream just before, and lives
            // until a later batch reuses its slot (ordered after this copy on the stream).
            unsafe { cache.chunks[chunk].copy_from_device_async(chunk_at, base + head as u64, fresh_len)? };
            for (key, table) in fresh_keys.iter().zip(&fresh_tables) {
                if let Some(key) = key {
                    cache.index.insert(*key, *table);
                }
            }
        }
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "resize", SRC, kernel)?;
        // SAFETY: descriptors point into `input`, `out` and the tables (cached, or in the
        // upload block), all alive and ordered on this stream (the tables' copy above, a
        // dropped chunk's free after this launch); each thread writes inside its sample's
        // output.
        unsafe {
            launch_records::<ResizeSample>(&ws.stream, &f, base, n, max_pix)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("resize", SRC, &[("Sample", &ResizeSample::LAYOUT)]);
    }
}
