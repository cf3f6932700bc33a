//! CUDA events: the one wrapper every crate uses.

use std::sync::Arc;

use cudarc::driver::{sys, CudaStream};

use crate::device::GpuDevice;
use crate::error::{check, CudaResult};

/// A CUDA event: a point on a stream that the host can wait for ([`wait`](Self::wait)) and
/// other streams can be made to wait for ([`make_wait`](Self::make_wait)). Decoders record one
/// after their work and wait for it before reusing their nvJPEG state, whose internal
/// (pinned and device) buffers the previous decode may still be reading; the engine records
/// one where a batch's data is complete.
pub struct GpuEvent {
    ev: sys::CUevent,
    /// Bound before the calls that may come from any thread (waits, destruction).
    device: Arc<GpuDevice>,
}

// SAFETY: a CUDA event handle may be used from any thread of the process.
unsafe impl Send for GpuEvent {}
unsafe impl Sync for GpuEvent {}

impl GpuEvent {
    /// An event whose [`wait`](Self::wait) spins: the lowest latency.
    pub fn new(device: &Arc<GpuDevice>) -> CudaResult<GpuEvent> {
        GpuEvent::with_flags(device, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
    }

    /// An event whose [`wait`](Self::wait) sleeps instead of spinning: for threads that
    /// have other work to give their core to (the pipeline's workers).
    pub fn blocking(device: &Arc<GpuDevice>) -> CudaResult<GpuEvent> {
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        GpuEvent::with_flags(device, flags)
    }

    /// A new event recorded on `stream` now.
    pub fn recorded(device: &Arc<GpuDevice>, stream: &CudaStream) -> CudaResult<GpuEvent> {
        let ev = GpuEvent::new(device)?;
        ev.record(stream)?;
        Ok(ev)
    }

    fn with_flags(device: &Arc<GpuDevice>, flags: u32) -> CudaResult<GpuEvent> {
        device.bind()?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        // SAFETY: context bound; out-pointer valid.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut ev, flags) })?;
        Ok(GpuEvent { ev, device: device.clone() })
    }

    /// Marks the current end of `stream`'s queue.
    pub fn record(&self, stream: &CudaStream) -> CudaResult<()> {
        // SAFETY: live event and stream of the same context.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.ev, stream.cu_stream()) })
    }

    /// Blocks until the last recorded point has run (at once if never recorded).
    pub fn wait(&self) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: live event.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.ev) })
    }

    /// Makes work queued on `stream` from now on wait for the last recorded point (later
    /// records do not affect this wait).
    pub fn make_wait(&self, stream: &CudaStream) -> CudaResult<()> {
        // SAFETY: live stream (borrowed) of this device.
        unsafe { self.make_raw_wait(stream.cu_stream()) }
    }

    /// [`make_wait`](Self::make_wait) for a raw stream handle from another library
    /// (PyTorch, CuPy); null is the legacy default stream, which needs the bound context.
    ///
    /// # Safety
    /// `stream` must be a live stream of this device or null: the driver dereferences it.
    pub unsafe fn make_raw_wait(&self, stream: sys::CUstream) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: live event; the caller vouches for the stream.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(stream, self.ev, 0) })
    }
}

impl Drop for GpuEvent {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: created by cuEventCreate, destroyed once (the driver defers the actual
            // release until pending records complete).
            unsafe {
                sys::cuEventDestroy_v2(self.ev);
            }
        }
    }
}
