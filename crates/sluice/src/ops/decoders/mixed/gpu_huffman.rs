//! The mixed decoders' GPU-Huffman share: large baseline JPEGs the hardware engine does not
//! take are decoded by nvJPEG's GPU-Huffman backend instead of libjpeg-turbo, as DALI does
//! above `hybrid_huffman_threshold` pixels.
//!
//! Off by default (the threshold defaults to "never"), because it measured slower: on an
//! H200 host (16 cores), rn50-crop on large photos ran at 3,750-3,870 img/s with it against
//! 4,330-4,530 without (2026-11-23). nvJPEG's host phase for this backend costs about 5 ms of
//! CPU per 1-2 MP image (`gpu_huffman_speed`: 16 threads, 3,200 img/s, all 16 cores busy),
//! so it frees no CPU, while the CPU share decodes windows at a DCT scale and leaves the IDCT
//! to the GPU; with it the engine's batches also took longer. Since then those files go to
//! Sluice's own GPU entropy decoder (`gpu_entropy`), which needs no such host phase.
//!
//! The pipeline's workers run these samples from the CPU-share queue like any other: the
//! worker takes a free decoder state of the pool, which parses the image and stages its
//! entropy-coded data, and queues the GPU work on the state's own stream, writing straight
//! into the sample's output slot after the batch's output became ready (`ready`). Each
//! state records, per staging slot, an event after its last decode for that batch; the
//! batch's `finish` makes the pipeline stream wait on the events of the states it used.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_codecs::Roi;
use sluice_cuda::nvjpeg::{GpuHuffman, GpuHuffmanState, HwWindow, NvJpeg};
use sluice_cuda::GpuEvent;
use sluice_cuda::{CudaResult, CudaStream, GpuDevice};

use super::route::STAGING_DEPTH;

/// Most decoder states (one per thread decoding at once; `used` masks are 64 bits).
const MAX_STATES: usize = 64;

/// Decoder states shared by the threads that decode a CPU share, made on first use.
pub(super) struct HuffmanPool {
    decoder: Arc<GpuHuffman>,
    states: Vec<Mutex<Option<GpuHuffmanState>>>,
    /// Per state, per staging slot: recorded after the state's last decode for that slot's
    /// batch. Outside the states' locks, so joining never waits for a thread decoding the
    /// next batch.
    joined: Vec<[GpuEvent; STAGING_DEPTH]>,
}

/// What the workers of one batch need: the pool, the event after which the batch's output
/// may be written, its staging slot, and which states it used.
pub(super) struct GpuShare {
    pub pool: Arc<HuffmanPool>,
    pub ready: Arc<GpuEvent>,
    pub slot: usize,
    pub used: AtomicU64,
}

impl HuffmanPool {
    /// Errors when nvJPEG (or its decoupled API) is missing.
    pub(super) fn new(device: &Arc<GpuDevice>) -> CudaResult<Arc<HuffmanPool>> {
        let decoder = GpuHuffman::new(&NvJpeg::hybrid(device)?)?;
        let joined = (0..MAX_STATES)
            .map(|_| Ok([GpuEvent::new(device)?, GpuEvent::new(device)?, GpuEvent::new(device)?]))
            .collect::<CudaResult<Vec<_>>>()?;
        Ok(Arc::new(HuffmanPool { decoder, states: (0..MAX_STATES).map(|_| Mutex::new(None)).collect(), joined }))
    }
}

impl GpuShare {
    /// Decodes `window` (None: all) of the JPEG `data` into `out` (pointer, row pitch) on a
    /// free state. Ok(false): nvJPEG does not take this image (nothing queued).
    ///
    /// # Safety
    /// `out` must be the sample's slot of the batch's output, allocated before `ready` was
    /// recorded, large enough for the window at that pitch, and kept alive until the
    /// pipeline stream has waited on [`join`](Self::join).
    pub(super) unsafe fn decode(&self, data: &[u8], window: Option<Roi>, out: (u64, usize)) -> CudaResult<bool> {
        // A free state (there are more than threads); all busy cannot happen, but would
        // only mean waiting for the first.
        let pool = &self.pool;
        let (j, mut guard) = pool
            .states
            .iter()
            .enumerate()
            .find_map(|(j, m)| m.try_lock().ok().map(|g| (j, g)))
            .unwrap_or_else(|| (0, pool.states[0].lock().unwrap_or_else(|p| p.into_inner())));
        if guard.is_none() {
            *guard = Some(GpuHuffmanState::new(&pool.decoder)?);
        }
        let state = guard.as_mut().expect("made above");
        let window = window.map(|r| HwWindow { x: r.x, y: r.y, width: r.width, height: r.height });
        // SAFETY: per this function's contract.
        let took = unsafe { state.decode(data, window, out, &self.ready)? };
        if took {
            pool.joined[j][self.slot].record(state.stream())?;
            self.used.fetch_or(1 << j, Ordering::Relaxed);
        }
        Ok(took)
    }

    /// Makes `stream` wait for every decode of this batch. Call once no more are queued.
    pub(super) fn join(&self, stream: &CudaStream) -> CudaResult<()> {
        self.each_used(|e| e.make_wait(stream))
    }

    /// Blocks until every decode of this batch is done (for a batch given up on).
    pub(super) fn wait(&self) -> CudaResult<()> {
        self.each_used(|e| e.wait())
    }

    /// `f` on this batch's event of every state it used.
    fn each_used(&self, f: impl Fn(&GpuEvent) -> CudaResult<()>) -> CudaResult<()> {
        let used = self.used.load(Ordering::Relaxed);
        (0..MAX_STATES).filter(|j| used & (1 << j) != 0).try_for_each(|j| f(&self.pool.joined[j][self.slot]))
    }
}
