//! Host memory for batches: one aligned allocation per batch, never one per sample, and
//! large blocks recycled through a process-wide pool. Fresh multi-megabyte allocations come
//! from the kernel as untouched pages, and faulting them in on every batch serializes the
//! worker threads on the kernel's memory lock (seen on a 16-core VM: the CPU pipeline stopped
//! scaling past a few threads); reused blocks are already mapped.

use std::alloc::{self, Layout as AllocLayout};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Alignment of every host buffer: enough for any element type and for SIMD loads.
pub const ALIGN: usize = 64;

/// Blocks at least this large go back to the pool when dropped. Sub-batches come this small:
/// the halves a conditional splits a batch into, a few images each, are allocated afresh on
/// every branch and iteration, and from malloc they came back as newly faulted pages (a sixth
/// of RandAugment's time on 224x224 images went to the kernel zeroing them).
const POOL_MIN: usize = 64 << 10;
/// The pool keeps at most this many bytes of free blocks.
const POOL_MAX_BYTES: usize = 2 << 30;

struct Pool {
    free: Vec<(NonNull<u8>, usize)>,
    bytes: usize,
}

// SAFETY: the pool owns the free blocks exclusively; access goes through the mutex.
unsafe impl Send for Pool {}

static POOL: Mutex<Pool> = Mutex::new(Pool { free: Vec::new(), bytes: 0 });

/// A free pooled block of at least `len` bytes and at most twice that, if any.
fn take_pooled(len: usize) -> Option<(NonNull<u8>, usize)> {
    if len < POOL_MIN {
        return None;
    }
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    let best = (0..pool.free.len())
        .filter(|&k| pool.free[k].1 >= len && pool.free[k].1 <= 2 * len)
        .min_by_key(|&k| pool.free[k].1)?;
    let block = pool.free.swap_remove(best);
    pool.bytes -= block.1;
    Some(block)
}

/// An aligned block of host memory whose bytes are always initialised (zeroed when new).
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// Size of the allocation (>= len when the block came from the pool); 0 for memory
    /// this buffer does not own.
    cap: usize,
    /// The owner of memory lent to this buffer (see [`HostBuffer::lent`]): never read,
    /// only dropped with the buffer.
    #[allow(dead_code)]
    lender: Option<Box<dyn Send + Sync>>,
}

// SAFETY: HostBuffer owns its memory exclusively; access goes through & / &mut.
unsafe impl Send for HostBuffer {}
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`].
    pub fn zeroed(len: usize) -> HostBuffer {
        if let Some((ptr, cap)) = take_pooled(len) {
            let mut b = HostBuffer { ptr, len, cap, lender: None };
            b.as_mut_slice().fill(0); // a recycled block holds old data
            return b;
        }
        HostBuffer::fresh(len)
    }

    /// `len` bytes whose content is unspecified (old data of a recycled block, or zeros):
    /// for producers that write every byte, such as decoders and resamplers.
    pub fn for_overwrite(len: usize) -> HostBuffer {
        if len == 0 {
            // A dangling but aligned pointer: never dereferenced for zero-length slices.
            let ptr = NonNull::new(ALIGN as *mut u8).expect("non-null");
            return HostBuffer { ptr, len, cap: 0, lender: None };
        }
        if let Some((ptr, cap)) = take_pooled(len) {
            return HostBuffer { ptr, len, cap, lender: None };
        }
        HostBuffer::fresh(len)
    }

    fn fresh(len: usize) -> HostBuffer {
        if len == 0 {
            let ptr = NonNull::new(ALIGN as *mut u8).expect("non-null");
            return HostBuffer { ptr, len, cap: 0, lender: None };
        }
        if len >= POOL_MIN {
            let (ptr, cap) = map_block(len);
            return HostBuffer { ptr, len, cap, lender: None };
        }
        let layout = AllocLayout::from_size_align(len, ALIGN).expect("buffer size overflow");
        // SAFETY: layout has non-zero size. Zeroed so every byte is initialised.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        HostBuffer { ptr, len, cap: len, lender: None }
    }

    /// A buffer over `len` bytes at `ptr` that belong to `lender` (shared memory another
    /// process filled, say): nothing is copied, and `lender` is dropped when the buffer is,
    /// which is how the owner learns the memory is free again.
    ///
    /// # Safety
    /// `ptr` must be aligned to [`ALIGN`] and valid for reads and writes of `len`
    /// initialised bytes for as long as `lender` lives, and nothing else may write them
    /// meanwhile.
    pub unsafe fn lent(ptr: NonNull<u8>, len: usize, lender: Box<dyn Send + Sync>) -> HostBuffer {
        debug_assert_eq!(ptr.as_ptr() as usize % ALIGN, 0, "lent memory must be aligned");
        HostBuffer { ptr, len, cap: 0, lender: Some(lender) }
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

/// Pooled blocks of a huge page or more are this much larger than the batch that first
/// needed them, rounded up to whole huge pages: batches of a data set vary in size, and a block a little too small for
/// the next batch would make the pool map yet another (a stall of tens of milliseconds each,
/// seen on the H100 machine for 180 MB batches of large photos in a training run's first
/// epochs).
fn block_capacity(len: usize) -> usize {
    if len < HUGE_PAGE {
        // Below a huge page, powers of two: a block serves any request from half its size.
        return len.next_power_of_two();
    }
    (len + len / 8).next_multiple_of(HUGE_PAGE)
}

const HUGE_PAGE: usize = 2 << 20;

/// A fresh zeroed block of at least `len` bytes straight from the kernel, which may back it
/// with huge pages: a 200 MB batch then faults in ~100 times instead of ~50,000 (every fault
/// takes the process's memory lock, which the other threads' faults wait for).
fn map_block(len: usize) -> (NonNull<u8>, usize) {
    let cap = block_capacity(len);
    // SAFETY: an anonymous private mapping owns no existing memory; checked for failure.
    let raw = unsafe { libc::mmap(std::ptr::null_mut(), cap, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if raw == libc::MAP_FAILED {
        alloc::handle_alloc_error(AllocLayout::from_size_align(cap, ALIGN).expect("layout"));
    }
    // Advice only: without transparent huge pages the block is ordinary pages.
    // SAFETY: the range is the mapping just made.
    unsafe { libc::madvise(raw, cap, libc::MADV_HUGEPAGE) };
    (NonNull::new(raw.cast()).expect("mmap gave a non-null address"), cap)
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.cap == 0 {
            // Lent memory (or none): the lender, dropped with the fields, frees it.
            return;
        }
        if self.cap >= POOL_MIN {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            if pool.bytes + self.cap <= POOL_MAX_BYTES {
                pool.bytes += self.cap;
                pool.free.push((self.ptr, self.cap));
                return;
            }
        }
        if self.cap >= POOL_MIN {
            // SAFETY: blocks of this size are mappings of `cap` bytes made by `map_block`.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.cap) };
            return;
        }
        let layout = AllocLayout::from_size_align(self.cap, ALIGN).expect("layout");
        // SAFETY: allocated in `fresh` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_recycled_and_zeroed_only_when_asked() {
        let len = 3 << 20;
        let mut a = HostBuffer::for_overwrite(len);
        a.as_mut_slice().fill(0xAB);
        let addr = a.as_ptr() as usize;
        drop(a);
        // Other tests may take the block concurrently; if we get it back, it holds old data.
        let b = HostBuffer::for_overwrite(len);
        if b.as_ptr() as usize == addr {
            assert!(b.as_slice().iter().all(|&v| v == 0xAB));
        }
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        drop(b);
        let z = HostBuffer::zeroed(len);
        assert!(z.as_slice().iter().all(|&v| v == 0), "zeroed must be zero even when recycled");
        assert_eq!(z.len(), len);
    }

    #[test]
    fn lent_memory_is_used_in_place_and_its_lender_dropped_with_the_buffer() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        struct Lender(Arc<AtomicBool>, #[allow(dead_code)] Vec<u64>);
        impl Drop for Lender {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let mut words = vec![0u64; 64]; // 8-aligned; take a 64-aligned window of it
        let base = words.as_mut_ptr() as usize;
        let start = (base + ALIGN - 1) / ALIGN * ALIGN;
        let ptr = NonNull::new(start as *mut u8).unwrap();
        // SAFETY: `start` lies in `words` with 256 bytes to spare; `words` moves into the
        // lender (a Vec's heap block does not move with it), which lives as long as `b`.
        unsafe { ptr.as_ptr().write_bytes(7, 256) };
        let lender = Lender(dropped.clone(), words);
        let b = unsafe { HostBuffer::lent(ptr, 256, Box::new(lender)) };
        assert_eq!(b.as_ptr() as usize, start, "no copy");
        assert!(b.as_slice().iter().all(|&v| v == 7));
        assert!(!dropped.load(Ordering::SeqCst));
        drop(b);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
