//! Host memory for batches: one aligned allocation per batch, never one per sample.

use std::alloc::{self, Layout as AllocLayout};
use std::ptr::NonNull;

/// Alignment of every host buffer: enough for any element type and for SIMD loads.
pub const ALIGN: usize = 64;

/// An aligned, zero-initialised block of host memory.
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: HostBuffer owns its memory exclusively; access goes through & / &mut.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`].
    pub fn zeroed(len: usize) -> HostBuffer {
        if len == 0 {
            // A dangling but aligned pointer: never dereferenced for zero-length slices.
            let ptr = NonNull::new(ALIGN as *mut u8).expect("non-null");
            return HostBuffer { ptr, len };
        }
        let layout = AllocLayout::from_size_align(len, ALIGN).expect("buffer size overflow");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        HostBuffer { ptr, len }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Address of the first byte, for zero-copy hand-off (array interface, DLPack).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.len != 0 {
            let layout = AllocLayout::from_size_align(self.len, ALIGN).expect("layout");
            // SAFETY: allocated in `zeroed` with this very layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({} bytes)", self.len)
    }
}
