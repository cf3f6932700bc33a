//! The mixed decoders' CPU share, decoded in the background by the pipeline's workers.
//!
//! `MixedDecoder::begin` queues a batch's CPU-share samples here and returns: the workers
//! decode them while the pipeline thread goes on with the previous batch's later operators
//! (the executor begins batch n+1 before it finishes batch n), so the pool never idles while
//! the pipeline thread plans resizes. Between samples a worker yields to rayon, so the
//! pipeline thread's own parallel steps (reading headers, resize taps) are not held up
//! behind a whole CPU share. Samples are taken oldest batch first and, within a batch,
//! costliest first (longest-processing-time order: the share is a few images per worker
//! and windows differ ~5x in cost, so a batch otherwise waits for an unlucky worker).

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use sluice_codecs::{DecodeParams, ImageInfo, Roi};

use super::gpu_entropy;
use super::gpu_huffman::GpuShare;
use super::route::{Route, Staged};
use crate::error::{Error, Result};
use crate::ops::OpContext;
use crate::tensor::TensorList;

thread_local! {
    /// The queue whose loop this thread runs (its address; 0: none). The same queue's loop
    /// started again on this thread (rayon hands a thread queued work while it yields or
    /// waits) returns at once, as the outer loop takes the samples anyway; another decoder's
    /// queue runs nested.
    static IN_LOOP: Cell<usize> = const { Cell::new(0) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One CPU-share sample: its index in the batch and where its bytes go in the staging.
pub(super) struct ShareSample {
    pub index: usize,
    pub staged_at: usize,
    pub staged_len: usize,
    /// Its output's size in bytes (for a full decode after a failed coefficient read).
    pub out_len: usize,
}

/// The base of a batch's pinned staging. Workers write through it: every sample's range is
/// disjoint and decoded by one thread only (it leaves the queue once), and the buffer is not
/// touched otherwise, nor freed, until the share is done (`CpuShare::wait`).
struct StagingPtr(*mut u8);

// SAFETY: see the type's docs: disjoint ranges, one writer each, buffer outlives the writes.
unsafe impl Send for StagingPtr {}
unsafe impl Sync for StagingPtr {}

/// One batch's CPU share: what the workers need (owned), and what they leave.
pub(super) struct CpuShare {
    iteration: u64,
    input: TensorList,
    infos: Vec<ImageInfo>,
    routes: Vec<Route>,
    params: DecodeParams,
    ctx: OpContext,
    staging: StagingPtr,
    samples: Vec<ShareSample>,
    /// For samples routed to GPU Huffman decoding.
    gpu: Option<GpuShare>,
    results: Vec<Mutex<Option<Result<Staged>>>>,
    left: Mutex<usize>,
    done: Condvar,
}

impl CpuShare {
    /// # Safety
    /// `staging` must point to at least `staged_at + staged_len` bytes for every sample,
    /// untouched by anyone else and alive until [`wait`](Self::wait) has returned.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn new(
        iteration: u64,
        input: TensorList,
        infos: Vec<ImageInfo>,
        routes: Vec<Route>,
        params: DecodeParams,
        ctx: OpContext,
        staging: *mut u8,
        samples: Vec<ShareSample>,
        gpu: Option<GpuShare>,
    ) -> Arc<CpuShare> {
        let results = samples.iter().map(|_| Mutex::new(None)).collect();
        let left = Mutex::new(samples.len());
        Arc::new(CpuShare { iteration, input, infos, routes, params, ctx, staging: StagingPtr(staging), samples, gpu, results, left, done: Condvar::new() })
    }

    /// The GPU-Huffman decodes of this share, when it has any (to join after `wait`).
    pub(super) fn gpu(&self) -> Option<&GpuShare> {
        self.gpu.as_ref()
    }

    /// The samples, in staging order.
    pub(super) fn samples(&self) -> &[ShareSample] {
        &self.samples
    }

    /// Blocks until every sample is decoded (or failed).
    pub(super) fn wait(&self) {
        let mut left = lock(&self.left);
        while *left > 0 {
            left = self.done.wait(left).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Per sample, in staging order: what it left in its staging, or its error. Call after
    /// [`wait`](Self::wait).
    pub(super) fn results(&self) -> Vec<Result<Staged>> {
        self.results.iter().map(|r| lock(r).take().expect("every sample was decoded")).collect()
    }

    /// Decodes sample `k` (of `samples`) and records the outcome. A panic is a bug, reported
    /// as an error for the sample, never taken out on the process.
    fn run(&self, k: usize) {
        let outcome = catch_unwind(AssertUnwindSafe(|| self.decode(k))).unwrap_or_else(|_| {
            Err(Error::Unsupported(format!(
                "internal error in {} at iteration {}: decoding sample {} panicked (please report this)",
                self.ctx.display_name, self.iteration, self.samples[k].index
            )))
        });
        *lock(&self.results[k]) = Some(outcome);
        let mut left = lock(&self.left);
        *left -= 1;
        if *left == 0 {
            self.done.notify_all();
        }
    }

    fn decode(&self, k: usize) -> Result<Staged> {
        let ShareSample { index: i, staged_at, staged_len, out_len } = self.samples[k];
        // SAFETY: see `StagingPtr`: this range belongs to sample k alone, and only this
        // thread decodes sample k.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.staging.0.add(staged_at), staged_len) };
        let (bytes, info) = (self.input.bytes(i), &self.infos[i]);
        let at = || self.ctx.at(self.iteration, i, self.input.source_info(i));
        // A whole decode of `window` (None: the image) into memory of its own, for a sample
        // its route could not take after all.
        let fallback = |window: Option<Roi>| -> Result<Staged> {
            let mut px = vec![0u8; out_len];
            let p = DecodeParams { roi: window, ..self.params };
            sluice_codecs::decode_into(bytes, info, &p, &mut px).map_err(|e| Error::data(at(), e.to_string()))?;
            Ok(Staged::Fallback(px))
        };
        let (window, denom) = match self.routes[i] {
            Route::Cpu { window, denom } => (window, denom),
            Route::Coef { window, layout } => {
                let mut quant = [[0u16; 64]; 3];
                // Staging offsets are multiples of 128 bytes from a page-aligned base.
                let coefs: &mut [i16] = bytemuck::cast_slice_mut(dst);
                if sluice_codecs::read_coefficients(bytes, info, &layout, coefs, &mut quant) {
                    return Ok(Staged::Coefficients(quant));
                }
                // Damaged or unusual after all: the full decode reports or handles it.
                return fallback(Some(window));
            }
            Route::Scan { window, .. } => {
                let (head, data) = dst.split_at_mut(gpu_entropy::HEADER_BYTES);
                if let Some(scan) = sluice_codecs::scan::prepare_scan(bytes, data) {
                    head.copy_from_slice(scan.header.as_bytes());
                    let (data_bytes, total_blocks) = (scan.header.data_bytes, scan.header.total_blocks());
                    return Ok(Staged::Scan { quant: scan.quant, data_bytes, total_blocks });
                }
                // Several scans, damage: libjpeg-turbo decodes it (rare in the files the
                // engine's vetting passes), or names the error.
                return fallback(Some(window));
            }
            Route::GpuHuffman { window, out } => {
                let gpu = self.gpu.as_ref().expect("a share with GPU-Huffman samples has a GpuShare");
                let pitch = window.map_or(info.width, |r| r.width) * 3;
                // SAFETY: `out` is this sample's slot of the batch's output (allocated before
                // `gpu.ready`, sized for the window), which lives until the batch is joined.
                if let Ok(true) = unsafe { gpu.decode(bytes, window, (out, pitch)) } {
                    return Ok(Staged::OnGpu);
                }
                // Refused or failed on the GPU: libjpeg-turbo decodes it, or names the error.
                return fallback(window);
            }
            Route::Hw { .. } | Route::HwWindow { .. } => unreachable!("engine samples are not in the CPU share"),
        };
        let p = DecodeParams { roi: window, scale_denom: denom, ..self.params };
        sluice_codecs::decode_into(bytes, info, &p, dst).map_err(|e| Error::data(at(), e.to_string()))?;
        Ok(Staged::Pixels)
    }
}

/// The samples of every CPU share in flight, oldest batch first.
#[derive(Default)]
pub(super) struct ShareQueue {
    items: Mutex<VecDeque<(Arc<CpuShare>, usize)>>,
}

impl ShareQueue {
    /// Queues `share`'s samples in `order` and has every worker of `pool` take them.
    pub(super) fn start(self: &Arc<Self>, share: &Arc<CpuShare>, order: &[usize], pool: &rayon::ThreadPool) {
        lock(&self.items).extend(order.iter().map(|&k| (share.clone(), k)));
        let queue = self.clone();
        pool.spawn_broadcast(move |_| queue.drain(None));
    }

    /// Decodes queued samples on this thread (of batches up to `iteration` when given) until
    /// none are left.
    pub(super) fn drain(&self, up_to: Option<u64>) {
        let me = self as *const ShareQueue as usize;
        let outer = IN_LOOP.with(|f| f.replace(me));
        if outer == me {
            return;
        }
        loop {
            let next = {
                let mut items = lock(&self.items);
                match items.front() {
                    Some((share, _)) if up_to.is_none_or(|it| share.iteration <= it) => items.pop_front(),
                    _ => None,
                }
            };
            let Some((share, k)) = next else { break };
            share.run(k);
            drop(share);
            // Let the pipeline thread's parallel steps in (no-op off the pool).
            let _ = rayon::yield_now();
        }
        IN_LOOP.with(|f| f.set(outer));
    }
}
