//! Per-batch kernel parameters (one descriptor per sample) uploaded in one copy, so a GPU
//! operator launches one kernel per batch whatever the batch holds.

use std::sync::Arc;

use sluice_cuda::{DeviceBuffer, PinnedBuffer};

use crate::error::Result;
use crate::ops::GpuWorkspace;
use crate::tensor::ReadyEvent;

/// Pinned + device buffers for small per-batch uploads, two deep: batch n+1's parameters
/// are written while batch n's may still be on their way, so the host never waits for the
/// previous iteration's GPU work.
#[derive(Default)]
pub struct ParamUpload {
    slots: [Slot; DEPTH],
    turn: usize,
}

/// Parameter blocks in flight. The pipeline stream runs behind the host by up to the
/// prefetch depth plus the hardware decoder's own queue; with fewer slots the host would
/// wait here for the GPU and stop feeding the decoders.
const DEPTH: usize = 4;

#[derive(Default)]
struct Slot {
    host: Option<PinnedBuffer>,
    device: Option<Arc<DeviceBuffer>>,
    /// Recorded after this slot's last copy: its pinned side may be rewritten once it completes.
    copied: Option<ReadyEvent>,
}

impl ParamUpload {
    /// Makes room for `len` bytes in the next slot and returns the device address the next
    /// [`upload`](Self::upload) lands at (blocks that point into themselves need it first).
    pub fn reserve(&mut self, ws: &GpuWorkspace<'_>, len: usize) -> Result<u64> {
        let slot = &mut self.slots[self.turn];
        if let Some(ev) = slot.copied.take() {
            ev.synchronize()?;
        }
        let need = len.max(16);
        if slot.host.as_ref().is_none_or(|h| h.len() < need) {
            let cap = need.next_power_of_two();
            slot.host = Some(PinnedBuffer::alloc(ws.device, cap)?);
            slot.device = Some(Arc::new(DeviceBuffer::alloc(ws.device, ws.stream, cap)?));
        }
        Ok(slot.device.as_ref().expect("allocated above").device_ptr())
    }

    /// Like [`upload`](Self::upload), but `write` fills the `len` bytes in place in the
    /// pinned staging memory, given the device address they will land at (so a large block,
    /// e.g. tap tables, is written once, by as many threads as `write` likes, and never
    /// copied on the host).
    pub fn upload_with(&mut self, ws: &GpuWorkspace<'_>, len: usize, write: impl FnOnce(&mut [u8], u64) -> Result<()>) -> Result<u64> {
        let base = self.reserve(ws, len)?;
        let slot = &mut self.slots[self.turn];
        self.turn = (self.turn + 1) % DEPTH;
        let host = slot.host.as_mut().expect("reserved above");
        write(&mut host.as_mut_slice()[..len], base)?;
        let dev = slot.device.as_ref().expect("reserved above");
        // SAFETY: the slot's host memory is not touched again until `copied` (recorded
        // below, after this copy) has completed.
        unsafe { dev.copy_from_host_async(0, &host.as_slice()[..len])? };
        slot.copied = Some(ReadyEvent::record(ws.device, ws.stream)?);
        Ok(base)
    }

    /// Copies `bytes` to the device on the workspace's stream and returns the device
    /// address. Kernels queued after this on the same stream see the data; the slot's next
    /// use is two uploads later, ordered after them on the stream.
    pub fn upload(&mut self, ws: &GpuWorkspace<'_>, bytes: &[u8]) -> Result<u64> {
        self.reserve(ws, bytes.len())?;
        let slot = &mut self.slots[self.turn];
        self.turn = (self.turn + 1) % DEPTH;
        let host = slot.host.as_mut().expect("reserved above");
        host.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let dev = slot.device.as_ref().expect("reserved above");
        // SAFETY: the pinned buffer is not rewritten before `copied` completes.
        unsafe { dev.copy_from_host_async(0, &host.as_slice()[..bytes.len()])? };
        slot.copied = Some(ReadyEvent::record(ws.device, ws.stream)?);
        Ok(dev.device_ptr())
    }
}

impl ParamUpload {
    /// Copies `dst.len()` bytes from `offset` of the last uploaded block back to the host,
    /// after the work queued so far on the block's stream (the workspace's): for kernels
    /// that report through their block (a flag per sample). Waits for the stream.
    pub fn read_back_last(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let slot = &self.slots[(self.turn + DEPTH - 1) % DEPTH];
        let dev = slot.device.as_ref().expect("read back after an upload");
        Ok(dev.copy_to_host(offset, dst)?)
    }
}

/// Appends a plain-old-data value's bytes to a parameter block.
/// Launch shape of the per-sample kernels: one grid row (y) per sample, 256 threads per
/// block, enough blocks along x for the largest sample's `max_items`, at most 1024 (the
/// kernels' threads stride over larger samples). Counted in usize, so no sample size wraps.
pub fn per_sample_launch(max_items: usize, samples: usize) -> sluice_cuda::LaunchConfig {
    const THREADS: u32 = 256;
    let blocks_x = max_items.div_ceil(THREADS as usize).clamp(1, 1024) as u32;
    sluice_cuda::LaunchConfig { grid_dim: (blocks_x, samples as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

pub fn push<T: bytemuck::Pod>(block: &mut Vec<u8>, v: T) {
    block.extend_from_slice(bytemuck::bytes_of(&v));
}
