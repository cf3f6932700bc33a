//! Shared memory written by the worker processes of parallel external sources
//! (`sluice._parallel`), read here without going through Python.
//!
//! A worker writes one task's samples into one POSIX shared-memory block (Python's
//! `multiprocessing.shared_memory`, which lives in /dev/shm on Linux). When a whole
//! iteration comes from one task, its samples lie back to back and the batch is made over
//! the block in place: the block is *lent* to the batch, and when the last batch made over
//! it is dropped (anywhere in the engine, or by the user holding an output) the lease's
//! token goes to a queue that Python drains to tell the worker it may write there again.
//! Iterations split over several workers are gathered into one batch with a copy.

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use sluice::error::{Error, Result};

fn fail(path: &str, message: String) -> Error {
    Error::Io { operator: "external_source (parallel)".into(), path: path.into(), message }
}

/// One worker block mapped into this process; unmapped when the last batch over it and
/// the registry let go of it (the worker may have unlinked it long before).
pub struct Block {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who writes it is governed by the leases.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    fn open(name: &str) -> Result<Block> {
        use std::os::fd::AsRawFd;
        // Python's SharedMemory names are portable names without the leading slash; on
        // Linux shm_open keeps them in /dev/shm.
        if name.is_empty() || name.contains('/') {
            return Err(fail(name, "not a shared memory name".into()));
        }
        let path = format!("/dev/shm/{name}");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| fail(&path, format!("cannot open the worker's shared memory: {e}")))?;
        let len = file.metadata().map_err(|e| fail(&path, e.to_string()))?.len() as usize;
        if len == 0 {
            return Err(fail(&path, "the block is empty".into()));
        }
        // SAFETY: a fresh shared read-write mapping of the whole file; the descriptor may
        // close after mmap returns.
        let raw = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if raw == libc::MAP_FAILED {
            return Err(fail(&path, format!("cannot map it: {}", std::io::Error::last_os_error())));
        }
        Ok(Block { ptr: NonNull::new(raw.cast()).expect("mmap returned null"), len })
    }

    /// The address of `len` bytes at `offset`, checked to lie in the block.
    fn range(&self, offset: usize, len: usize) -> Result<usize> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.ptr.as_ptr() as usize + offset),
            _ => Err(fail("shared memory", format!("a worker's sample at {offset}+{len} lies outside its {}-byte block", self.len))),
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: mapped in `open` with this length; no batch refers to it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The blocks this pipeline has mapped, by name, and the tokens of leases given back.
#[derive(Default)]
pub struct Blocks {
    mapped: Mutex<HashMap<String, Arc<Block>>>,
    returned: Arc<Mutex<Vec<u64>>>,
}

/// A block lent to the batches of one iteration; its token is returned when they are all gone.
pub struct Lease {
    _block: Arc<Block>,
    token: u64,
    returned: Arc<Mutex<Vec<u64>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.returned.lock().unwrap_or_else(|p| p.into_inner()).push(self.token);
    }
}

impl Blocks {
    pub fn get(&self, name: &str) -> Result<Arc<Block>> {
        let mut mapped = self.mapped.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = mapped.get(name) {
            return Ok(b.clone());
        }
        let b = Arc::new(Block::open(name)?);
        mapped.insert(name.to_string(), b.clone());
        Ok(b)
    }

    /// Lets go of a block its worker replaced (batches over it keep it mapped).
    pub fn forget(&self, name: &str) {
        self.mapped.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }

    pub fn lease(&self, block: Arc<Block>, token: u64) -> Arc<Lease> {
        Arc::new(Lease { _block: block, token, returned: self.returned.clone() })
    }

    /// Tokens of the leases whose batches are all gone since the last call.
    pub fn take_returned(&self) -> Vec<u64> {
        std::mem::take(&mut *self.returned.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A sample in a block: (offset, shape, type) as the worker wrote it.
pub type Placed = (usize, Vec<usize>, sluice::tensor::DType);

/// Addresses of `samples` in `block`, each checked to lie inside it.
pub fn addresses(block: &Block, samples: &[Placed]) -> Result<Vec<(usize, Vec<usize>, sluice::tensor::DType)>> {
    samples
        .iter()
        .map(|(off, shape, t)| Ok((block.range(*off, shape.iter().product::<usize>() * t.size())?, shape.clone(), *t)))
        .collect()
}

/// When `samples` (at least one) lie back to back from an aligned start, the memory they
/// span, lent to a buffer that holds `lease`; otherwise None (the caller copies).
pub fn lend(block: &Block, samples: &[Placed], lease: &Arc<Lease>) -> Result<Option<sluice::tensor::HostBuffer>> {
    let Some((first, _, _)) = samples.first() else { return Ok(None) };
    let mut end = *first;
    for (off, shape, t) in samples {
        if *off != end {
            return Ok(None);
        }
        end += shape.iter().product::<usize>() * t.size();
    }
    let start = block.range(*first, end - first)?;
    if start % sluice::tensor::ALIGN != 0 {
        return Ok(None);
    }
    let ptr = NonNull::new(start as *mut u8).expect("inside a mapping");
    // SAFETY: `start..start + len` lies in the block (checked above), which the lease keeps
    // mapped; the worker does not write it again until the lease's token is returned, which
    // happens only when this buffer (and every other holder of the lease) is dropped.
    Ok(Some(unsafe { sluice::tensor::HostBuffer::lent(ptr, end - first, Box::new(lease.clone())) }))
}
