//! TensorListGpu: a batch in device memory. Its bytes can only be read on the host through
//! an explicit download (`to_host`), which waits for the work that produced them.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sluice_cuda::{sys, DeviceBuffer, GpuEvent};

use super::{BatchMeta, HostBuffer, TensorList};
use crate::error::Result;

/// A raw CUDA stream handle from another library (PyTorch, CuPy): 1 and 2 are the legacy
/// and per-thread default streams, as in the CUDA driver API.
pub type RawStream = sys::CUstream;

/// Marks the point in a stream after which a batch's data is complete.
pub struct ReadyEvent(GpuEvent);

impl ReadyEvent {
    /// Records an event on `stream` now.
    pub fn record(device: &Arc<sluice_cuda::GpuDevice>, stream: &sluice_cuda::CudaStream) -> Result<ReadyEvent> {
        Ok(ReadyEvent(GpuEvent::recorded(device, stream)?))
    }

    /// Makes `stream` (any stream of this device, e.g. PyTorch's) wait for the data.
    ///
    /// # Safety
    /// `stream` must be a live stream of this device (or null, the legacy default stream):
    /// the driver dereferences it.
    pub unsafe fn wait_on(&self, stream: RawStream) -> Result<()> {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { self.0.make_raw_wait(stream) }?)
    }

    /// Makes `stream`, one of Sluice's own, wait for the data.
    pub fn make_wait(&self, stream: &sluice_cuda::CudaStream) -> Result<()> {
        Ok(self.0.make_wait(stream)?)
    }

    /// Blocks the calling thread until the data is complete.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.0.wait()?)
    }
}

/// A batch on the GPU.
#[derive(Clone)]
pub struct TensorListGpu {
    meta: BatchMeta,
    data: Arc<DeviceBuffer>,
    ready: Option<Arc<ReadyEvent>>,
}

impl std::fmt::Debug for TensorListGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorListGpu({} samples, {}, {:?})", self.len(), self.dtype(), self.data)
    }
}

impl Deref for TensorListGpu {
    type Target = BatchMeta;
    fn deref(&self) -> &BatchMeta {
        &self.meta
    }
}

impl DerefMut for TensorListGpu {
    fn deref_mut(&mut self) -> &mut BatchMeta {
        &mut self.meta
    }
}

impl TensorListGpu {
    /// A batch over `data`, which must hold `meta.total_bytes()` bytes.
    pub fn new(meta: BatchMeta, data: DeviceBuffer) -> TensorListGpu {
        assert!(data.len() >= meta.total_bytes(), "device buffer smaller than the batch");
        TensorListGpu { meta, data: Arc::new(data), ready: None }
    }

    /// Allocates an uninitialised batch on `stream`.
    pub fn alloc(meta: BatchMeta, device: &Arc<sluice_cuda::GpuDevice>, stream: &Arc<sluice_cuda::CudaStream>) -> Result<TensorListGpu> {
        let buf = DeviceBuffer::alloc(device, stream, meta.total_bytes())?;
        Ok(TensorListGpu::new(meta, buf))
    }

    /// The same device memory under other metadata (a reshape): no copy, the same
    /// completion event. `meta` must describe samples of the same byte sizes, in order.
    pub fn reinterpreted(&self, meta: BatchMeta) -> TensorListGpu {
        assert!((0..self.len()).all(|i| self.meta.byte_range(i) == meta.byte_range(i)) && meta.len() == self.len(), "a reinterpretation keeps every sample's bytes");
        TensorListGpu { meta, data: self.data.clone(), ready: self.ready.clone() }
    }

    /// The batch's metadata.
    pub fn meta(&self) -> &BatchMeta {
        &self.meta
    }

    /// Device memory of the batch.
    pub fn buffer(&self) -> &Arc<DeviceBuffer> {
        &self.data
    }

    /// Device address of sample `i`.
    pub fn sample_ptr(&self, i: usize) -> u64 {
        self.data.device_ptr() + self.meta.offset(i) as u64
    }

    /// Sets the event after which the data is complete (done by the executor at the end of
    /// the GPU stage).
    pub fn set_ready(&mut self, ev: Arc<ReadyEvent>) {
        self.ready = Some(ev);
    }

    /// The completion event, if the batch left the executor.
    pub fn ready(&self) -> Option<&Arc<ReadyEvent>> {
        self.ready.as_ref()
    }

    /// Downloads the batch (waits for the work that produces it).
    pub fn to_host(&self) -> Result<TensorList> {
        if let Some(ev) = &self.ready {
            ev.synchronize()?;
        }
        let mut host = HostBuffer::zeroed(self.meta.total_bytes());
        self.data.copy_to_host(0, host.as_mut_slice())?;
        Ok(TensorList::from_parts(self.meta.clone(), host))
    }
}
