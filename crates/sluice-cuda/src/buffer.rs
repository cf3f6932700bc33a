//! Device and pinned host memory. Device buffers come from the stream-ordered pool
//! (cuMemAllocAsync) and go back to it ordered after every stream that used them, so a
//! buffer can be recycled the moment its last consumer is done, with no device-wide sync.

use std::sync::Arc;

use cudarc::driver::{sys, CudaStream};

use crate::device::GpuDevice;
use crate::error::{check, CudaResult};

/// Device memory owned by Sluice, allocated and freed in stream order.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    device: Arc<GpuDevice>,
    /// The stream the memory is ordered on: its free is queued here.
    stream: Arc<CudaStream>,
}

// SAFETY: a device pointer is an address; all access goes through CUDA calls ordered on
// streams, and the buffer frees itself exactly once.
unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `len` bytes ordered on `stream` (usable by work queued on it from now on).
    pub fn alloc(device: &Arc<GpuDevice>, stream: &Arc<CudaStream>, len: usize) -> CudaResult<DeviceBuffer> {
        device.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        if len > 0 {
            // SAFETY: live context bound to this thread; out-pointer valid.
            check("cuMemAllocAsync", unsafe { sys::cuMemAllocAsync(&mut ptr, len, stream.cu_stream()) })?;
        }
        Ok(DeviceBuffer { ptr, len, device: device.clone(), stream: stream.clone() })
    }

    /// Device address of the first byte.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        &self.device
    }

    /// The stream this buffer's work and free are ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes the buffer's free wait for everything queued so far on `other` (a consumer's
    /// stream, given as a raw handle: PyTorch's, CuPy's...). Call before dropping the last
    /// reference when the data was used outside our stream.
    ///
    /// # Safety
    /// `other` must be a live stream of this buffer's GPU (or null, the legacy default
    /// stream): the driver dereferences it.
    pub unsafe fn order_free_after(&self, other: sys::CUstream) -> CudaResult<()> {
        if other == self.stream.cu_stream() {
            return Ok(());
        }
        self.device.bind()?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        // SAFETY: plain driver calls; the event is destroyed after the wait is queued (the
        // driver keeps it alive until the wait completes).
        unsafe {
            check("cuEventCreate", sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32))?;
            check("cuEventRecord", sys::cuEventRecord(ev, other))?;
            check("cuStreamWaitEvent", sys::cuStreamWaitEvent(self.stream.cu_stream(), ev, 0))?;
            check("cuEventDestroy", sys::cuEventDestroy_v2(ev))?;
        }
        Ok(())
    }

    /// Sets every byte to zero, ordered on the buffer's stream.
    pub fn zero_async(&self) -> CudaResult<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the whole allocation, on its own stream.
        check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(self.ptr, 0, self.len, self.stream.cu_stream()) })
    }

    /// Sets `len` bytes from `offset` to zero, ordered on the buffer's stream.
    pub fn zero_range_async(&self, offset: usize, len: usize) -> CudaResult<()> {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "range within the buffer");
        if len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: within the allocation (checked above), on its own stream.
        check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(self.ptr + offset as u64, 0, len, self.stream.cu_stream()) })
    }

    /// Copies host bytes into the buffer at `offset`, ordered on the buffer's stream. The
    /// source must stay alive and unchanged until the stream reaches the copy (use pinned
    /// memory and keep it until an event after this point completes).
    ///
    /// # Safety
    /// `src` must remain valid until the copy has executed on the stream.
    pub unsafe fn copy_from_host_async(&self, offset: usize, src: &[u8]) -> CudaResult<()> {
        assert!(offset + src.len() <= self.len, "copy past the end of a device buffer");
        self.device.bind()?;
        // SAFETY: bounds checked; caller keeps `src` alive until the copy runs.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(self.ptr + offset as u64, src.as_ptr() as *const _, src.len(), self.stream.cu_stream())
        })
    }

    /// Copies `src` to `offset` on `stream` (any stream of this buffer's GPU) and waits for
    /// the copy: for rare paths that must finish on a stream other than the buffer's own.
    pub fn copy_from_host_on(&self, offset: usize, src: &[u8], stream: &CudaStream) -> CudaResult<()> {
        assert!(offset + src.len() <= self.len, "copy past the end of a device buffer");
        self.device.bind()?;
        // SAFETY: bounds checked; the synchronize below keeps `src` alive until the copy ran.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(self.ptr + offset as u64, src.as_ptr() as *const _, src.len(), stream.cu_stream())
        })?;
        stream.synchronize().map_err(Into::into)
    }

    /// Copies `len` bytes from device address `src` (memory of this GPU, usable on this
    /// buffer's stream) to `offset`, ordered on this buffer's stream.
    ///
    /// # Safety
    /// `src..src + len` must be live device memory of this buffer's GPU until the copy has
    /// run, written (if at all) by work ordered before it on this buffer's stream.
    pub unsafe fn copy_from_device_async(&self, offset: usize, src: u64, len: usize) -> CudaResult<()> {
        assert!(offset + len <= self.len, "copy past the end of a device buffer");
        if len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the destination is inside this buffer (checked); the source is the caller's.
        check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(self.ptr + offset as u64, src, len, self.stream.cu_stream()) })
    }

    /// Copies a `rows` x `row_bytes` rectangle from `src` (starting at `src_offset`, rows
    /// `src_pitch` apart) into this buffer (at `dst_offset`, rows `dst_pitch` apart), ordered
    /// on this buffer's stream; `src` must be usable there (same stream, or ordered before).
    /// Crops a window out of a decoded image in one call.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_rect_from(
        &self,
        dst_offset: usize,
        dst_pitch: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        src_pitch: usize,
        row_bytes: usize,
        rows: usize,
    ) -> CudaResult<()> {
        if rows == 0 || row_bytes == 0 {
            return Ok(());
        }
        let span = |off: usize, pitch: usize| off + (rows - 1) * pitch + row_bytes;
        assert!(row_bytes <= dst_pitch && row_bytes <= src_pitch, "rectangle wider than its pitch");
        assert!(span(dst_offset, dst_pitch) <= self.len && span(src_offset, src_pitch) <= src.len, "rectangle copy out of bounds");
        self.device.bind()?;
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src.ptr + src_offset as u64,
            srcArray: std::ptr::null_mut(),
            srcPitch: src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: self.ptr + dst_offset as u64,
            dstArray: std::ptr::null_mut(),
            dstPitch: dst_pitch,
            WidthInBytes: row_bytes,
            Height: rows,
        };
        // SAFETY: both rectangles lie inside live device buffers (checked above).
        check("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(&copy, self.stream.cu_stream()) })
    }

    /// Copies the buffer (from `offset`) to host memory and waits for the copy.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> CudaResult<()> {
        assert!(offset + dst.len() <= self.len, "copy past the end of a device buffer");
        self.device.bind()?;
        // SAFETY: bounds checked; we synchronize before returning, so `dst` outlives the copy.
        unsafe {
            check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr() as *mut _, self.ptr + offset as u64, dst.len(), self.stream.cu_stream()))?;
        }
        Ok(self.stream.synchronize()?)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // Errors here (a dead context at process exit) cannot be reported; the pool goes
        // with the context anyway.
        if self.device.bind().is_ok() {
            // SAFETY: allocated by cuMemAllocAsync; freed once, ordered on its stream.
            unsafe {
                sys::cuMemFreeAsync(self.ptr, self.stream.cu_stream());
            }
        }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} bytes on GPU {})", self.len, self.device.ordinal())
    }
}

/// Page-locked host memory for fast, asynchronous uploads.
pub struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    device: Arc<GpuDevice>,
}

// SAFETY: owned host memory; access goes through & / &mut.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` bytes of pinned host memory.
    pub fn alloc(device: &Arc<GpuDevice>, len: usize) -> CudaResult<PinnedBuffer> {
        device.bind()?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        if len > 0 {
            // SAFETY: out-pointer valid; portable so any context may use it.
            check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut p, len, sys::CU_MEMHOSTALLOC_PORTABLE) })?;
        }
        Ok(PinnedBuffer { ptr: p as *mut u8, len, device: device.clone() })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr is valid for len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: ptr is valid for len bytes and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.len != 0 && self.device.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            unsafe {
                sys::cuMemFreeHost(self.ptr as *mut _);
            }
        }
    }
}
