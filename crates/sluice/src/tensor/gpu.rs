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
    /// Where each sample starts in `data`, for a batch that picks samples of another without
    /// copying them (a conditional's split: see [`picked`](Self::picked)); `None` when the
    /// samples lie back to back from the start of `data`, as `meta` lays them out.
    starts: Option<Arc<[usize]>>,
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
        TensorListGpu { meta, data: Arc::new(data), starts: None, ready: None }
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
        TensorListGpu { meta, data: self.data.clone(), starts: self.starts.clone(), ready: self.ready.clone() }
    }

    /// Samples `picks` of this batch, in that order, sharing its memory: no allocation on
    /// the device, no copy, nothing queued. Conditionals split every batch and every
    /// per-sample argument at each `if`; RandAugment does that ~150 times a batch, so a copy
    /// (allocation, parameter upload, launch) per split was half its GPU time.
    pub fn picked(&self, picks: &[usize]) -> TensorListGpu {
        self.view(self.meta.picked(picks), picks.iter().map(|&i| self.data_offset(i)).collect())
    }

    /// A batch of `meta` whose sample i is the bytes at offset `starts[i]` of this batch's
    /// memory, shared, not copied (picks; subscripts that keep one run of each sample).
    pub fn view(&self, meta: BatchMeta, starts: Arc<[usize]>) -> TensorListGpu {
        assert!(
            meta.len() == starts.len() && (0..meta.len()).all(|i| starts[i] + meta.byte_range(i).len() <= self.data.len()),
            "a view stays inside its batch's memory"
        );
        TensorListGpu { meta, data: self.data.clone(), starts: Some(starts), ready: self.ready.clone() }
    }

    /// Byte offset of sample `i` in [`buffer`](Self::buffer). Equal to `meta().offset(i)`
    /// unless the batch is a view made by [`picked`](Self::picked).
    pub fn data_offset(&self, i: usize) -> usize {
        self.starts.as_ref().map_or_else(|| self.meta.offset(i), |s| s[i])
    }

    /// Where sample 0 starts when the samples lie back to back as `meta` lays them out
    /// (from that point): the whole batch is one range of `buffer`. `None` for a view whose
    /// samples are scattered.
    pub fn packed_start(&self) -> Option<usize> {
        match &self.starts {
            None => Some(0),
            Some(s) => {
                let base = s.first().copied().unwrap_or(0);
                (0..self.len()).all(|i| s[i] == base + self.meta.offset(i)).then_some(base)
            }
        }
    }

    /// This batch with its samples back to back in memory of its own: itself when they
    /// already are, else a copy queued on the buffer's stream (one rectangle copy, or one
    /// copy per sample: for consumers that need one range, e.g. a pipeline output or a gpu
    /// `python_function` in a branch).
    pub fn packed(&self) -> Result<TensorListGpu> {
        if self.packed_start() == Some(0) {
            return Ok(self.clone());
        }
        let meta = self.meta.clone();
        let out = DeviceBuffer::alloc(self.data.device(), self.data.stream(), meta.total_bytes())?;
        // Samples of one size at evenly spaced starts (a frame or a row of each sample of a
        // uniform batch) are one rectangle: one copy call instead of one per sample.
        let n = self.len();
        let size = if n > 0 { meta.byte_range(0).len() } else { 0 };
        let pitch = if n > 1 { self.data_offset(1).checked_sub(self.data_offset(0)) } else { Some(size) };
        let even = |p: usize| (0..n).all(|i| meta.byte_range(i).len() == size && self.data_offset(i) == self.data_offset(0) + i * p);
        if let Some(pitch) = pitch.filter(|&p| size > 0 && p >= size && even(p)) {
            out.copy_rect_from(0, size, &self.data, self.data_offset(0), pitch, size, n)?;
        } else {
            self.copy_samples_into(&out)?;
        }
        // The copies come after the producer's event: whoever waits for this batch waits for them.
        let ready = ReadyEvent::record(self.data.device(), self.data.stream())?;
        Ok(TensorListGpu { meta, data: Arc::new(out), starts: None, ready: Some(Arc::new(ready)) })
    }

    /// One device-to-device copy per sample into `out`, laid out as `meta`.
    fn copy_samples_into(&self, out: &DeviceBuffer) -> Result<()> {
        for i in 0..self.len() {
            let range = self.meta.byte_range(i);
            // SAFETY: the source is sample i of this batch (alive: `self` holds its buffer
            // until the copy is queued, and the buffer's free is ordered after it on the same
            // stream); the destination range is inside `out` (`meta`'s layout).
            unsafe { out.copy_from_device_async(range.start, self.sample_ptr(i), range.len())? };
        }
        Ok(())
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
        self.data.device_ptr() + self.data_offset(i) as u64
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
        match self.packed_start() {
            Some(start) => self.data.copy_to_host(start, host.as_mut_slice())?,
            None => {
                for i in 0..self.len() {
                    let range = self.meta.byte_range(i);
                    self.data.copy_to_host(self.data_offset(i), &mut host.as_mut_slice()[range])?;
                }
            }
        }
        Ok(TensorList::from_parts(self.meta.clone(), host))
    }
}
