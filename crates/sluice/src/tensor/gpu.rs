//! TensorListGpu: a batch in device memory. Its bytes can only be read on the host through
//! an explicit download (`to_host`), which waits for the work that produced them.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sluice_cuda::{sys, DeviceBuffer};

use super::{BatchMeta, HostBuffer, TensorList};
use crate::error::{Error, Result};

/// A raw CUDA stream handle from another library (PyTorch, CuPy): 1 and 2 are the legacy
/// and per-thread default streams, as in the CUDA driver API.
pub type RawStream = sys::CUstream;

/// Marks the point in a stream after which a batch's data is complete.
pub struct ReadyEvent {
    event: sys::CUevent,
    buffer_device: Arc<sluice_cuda::GpuDevice>,
}

// SAFETY: a CUDA event handle may be used from any thread of the process.
unsafe impl Send for ReadyEvent {}
unsafe impl Sync for ReadyEvent {}

impl ReadyEvent {
    /// Records an event on `stream` now.
    pub fn record(device: &Arc<sluice_cuda::GpuDevice>, stream: &sluice_cuda::CudaStream) -> Result<ReadyEvent> {
        device.bind()?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        // SAFETY: plain driver calls on a bound context.
        unsafe {
            cuda_check(sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32), "cuEventCreate")?;
            cuda_check(sys::cuEventRecord(ev, stream.cu_stream()), "cuEventRecord")?;
        }
        Ok(ReadyEvent { event: ev, buffer_device: device.clone() })
    }

    /// Makes `stream` (any stream of this device, e.g. PyTorch's) wait for the data.
    ///
    /// # Safety
    /// `stream` must be a live stream of this device (or null, the legacy default stream):
    /// the driver dereferences it.
    pub unsafe fn wait_on(&self, stream: RawStream) -> Result<()> {
        self.buffer_device.bind()?;
        // SAFETY: live event; the caller vouches for the stream.
        unsafe { cuda_check(sys::cuStreamWaitEvent(stream, self.event, 0), "cuStreamWaitEvent") }
    }

    /// Blocks the calling thread until the data is complete.
    pub fn synchronize(&self) -> Result<()> {
        self.buffer_device.bind()?;
        // SAFETY: live event.
        unsafe { cuda_check(sys::cuEventSynchronize(self.event), "cuEventSynchronize") }
    }
}

impl Drop for ReadyEvent {
    fn drop(&mut self) {
        if self.buffer_device.bind().is_ok() {
            // SAFETY: created in `record`, destroyed once.
            unsafe {
                sys::cuEventDestroy_v2(self.event);
            }
        }
    }
}

pub(crate) fn cuda_check(status: sys::CUresult, what: &str) -> Result<()> {
    if status == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda(format!("{what} failed: {status:?}")))
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
