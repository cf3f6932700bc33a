//! Per-batch kernel parameters (one descriptor per sample) uploaded in one copy, so a GPU
//! operator launches one kernel per batch whatever the batch holds.

use std::sync::Arc;

use sluice_cuda::{DeviceBuffer, PinnedBuffer};

use crate::error::Result;
use crate::ops::GpuWorkspace;
use crate::tensor::ReadyEvent;

/// A reusable pinned + device buffer pair for small per-batch uploads.
#[derive(Default)]
pub struct ParamUpload {
    host: Option<PinnedBuffer>,
    device: Option<Arc<DeviceBuffer>>,
    /// Recorded after the last copy: the pinned side may be rewritten once it completes.
    copied: Option<ReadyEvent>,
}

impl ParamUpload {
    /// Copies `bytes` to the device on the workspace's stream and returns the device
    /// address. Kernels queued after this on the same stream see the data; the next upload is
    /// ordered after them, so the device side is never overwritten while in use.
    pub fn upload(&mut self, ws: &GpuWorkspace<'_>, bytes: &[u8]) -> Result<u64> {
        self.reserve(ws, bytes.len())?;
        let host = self.host.as_mut().expect("allocated above");
        host.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let dev = self.device.as_ref().expect("allocated above");
        // SAFETY: the pinned buffer is not rewritten before `copied` completes.
        unsafe { dev.copy_from_host_async(0, &host.as_slice()[..bytes.len()])? };
        self.copied = Some(ReadyEvent::record(ws.device, ws.stream)?);
        Ok(dev.device_ptr())
    }
}

impl ParamUpload {
    /// Makes room for `len` bytes and returns the device address the next upload will land
    /// at (parameter blocks that point into themselves need it before they are written).
    pub fn reserve(&mut self, ws: &GpuWorkspace<'_>, len: usize) -> Result<u64> {
        if let Some(ev) = self.copied.take() {
            ev.synchronize()?;
        }
        let need = len.max(16);
        if self.host.as_ref().is_none_or(|h| h.len() < need) {
            let cap = need.next_power_of_two();
            self.host = Some(PinnedBuffer::alloc(ws.device, cap)?);
            self.device = Some(Arc::new(DeviceBuffer::alloc(ws.device, ws.stream, cap)?));
        }
        Ok(self.device.as_ref().expect("allocated above").device_ptr())
    }
}

/// Appends a plain-old-data value's bytes to a parameter block.
pub fn push<T: bytemuck::Pod>(block: &mut Vec<u8>, v: T) {
    block.extend_from_slice(bytemuck::bytes_of(&v));
}
