//! The mixed (nvJPEG) image decoders: encoded bytes on the host in, HWC uint8 images on the
//! GPU out. `decoders.image` decodes whole images; `image_random_crop`, `image_crop` and
//! `image_slice` decode a window of each (placed by the same code as their cpu twins, so
//! both backends cut the same windows).
//!
//! One batch runs these ways at once:
//! - Baseline JPEGs that the engine would take are entropy-decoded on the GPU by Sluice's own
//!   kernel (`gpu_entropy`): a worker stages the scan, the GPU does the rest, bit-exact with
//!   libjpeg-turbo. Measured faster than the engine, so `hw_decoder_load` defaults to 0.
//! - Baseline colour JPEGs (`hw_decoder_load` of the batch) go to the GPU's hardware JPEG
//!   engine in one batched call, made on a thread of its own (nvJPEG's call blocks while
//!   the engine works) on one of two nvJPEG states used in turn, each with its own stream;
//!   a second thread first copies the batch's encoded images to page-locked memory. Neither
//!   the pipeline thread nor the (busy) workers stand between the engine and its next batch.
//!   Splitting a batch over parallel states was measured on an H200 and is slower (rn50-crop,
//!   16 threads: 1 part 20,770 img/s, 2 parts 17,165, 4 parts 13,379, 8 parts 11,348).
//! - Everything else (progressive files, restart markers, other formats, EXIF-rotated or
//!   non-RGB outputs) goes to the pipeline's workers in the background (`cpu_share`), one
//!   sample at a time, costliest first. JPEGs that `gpu_idct` reproduces are only
//!   entropy-decoded there and finished on the GPU (bit-exact with libjpeg-turbo); the rest are decoded by
//!   libjpeg-turbo / image-rs into pinned memory and uploaded. Windows decode only their
//!   rows and columns, and at a DCT scale when the graph says a fixed-size resize follows.
//! - Windows of engine-decoded samples are decoded on the engine (nvjpegDecodeBatchedEx
//!   with a ROI); where nvJPEG lacks that, whole images are decoded into one scratch buffer
//!   and the windows cut out with one 2-D copy each.
//!
//! A batch is begun (`MixedDecoder::begin`: routing, the output, the engine's submission
//! and the CPU share queued) and later finished (`finish`: the CPU share's uploads and GPU
//! half, then the pipeline stream joined to the engine's stream with an event once nvJPEG's
//! call returns). The executor begins batch n+1 before it finishes batch n, so the engine
//! and the workers keep busy while the pipeline thread queues batch n's later operators.
//! Queueing the later operators behind a device-memory gate before that call returns
//! (so the pipeline thread need not wait for the engine) deadlocks: nvJPEG synchronises
//! the device inside its call at times (first batch, growing buffers), which then waits for
//! the gate that only its own return would open.
//!
//! A batch the engine rejects is decoded on the CPU instead (on the engine's thread), so
//! one odd file costs time, not the batch; a file the CPU cannot decode either is an error
//! naming the sample.

use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};
use sluice_codecs::{CoefLayout, ColorSpace, DecodeParams, ImageFormat, ImageInfo, Roi};
use sluice_cuda::nvjpeg::{self, HwBatchDecoder, HwTarget, HwWindow, NvJpeg};
use sluice_cuda::GpuEvent;
use sluice_cuda::{DeviceBuffer, GpuDevice, PinnedBuffer};

mod cpu_share;
mod gpu_entropy;
mod gpu_huffman;
mod gpu_idct;
mod route;

use self::cpu_share::{CpuShare, ShareQueue, ShareSample};
use self::gpu_entropy::{GpuEntropy, ScanSample};
use self::gpu_huffman::{GpuShare, HuffmanPool};
use self::gpu_idct::{CoefSample, GpuIdct};
use self::route::{Route, Staged, STAGING_DEPTH};
use super::common::{color_space, read_headers, scaled_window};
use crate::error::{Error, Result};
use crate::exec::trace_clock;
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, DType, ReadyEvent, TensorList, TensorListGpu};

/// The CPU share's samples go to the workers costliest first; `SLUICE_COSTLIEST_FIRST=0`
/// keeps batch order instead (for measurements).
fn costliest_first() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_COSTLIEST_FIRST").is_none_or(|v| v != "0"))
}

/// `SLUICE_TRACE_DECODER=1` prints where each batch's host time goes (stderr).
fn trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_TRACE_DECODER").is_some_and(|v| v != "0"))
}

/// With tracing on, how long reading the headers (and placing windows) took.
pub(super) fn trace_headers(ctx: &OpContext, iteration: u64, since: std::time::Instant) {
    if trace() {
        eprintln!("[{}] it {iteration} headers {:.2} ms", ctx.display_name, since.elapsed().as_secs_f64() * 1e3);
    }
}

/// Pinned staging for CPU-decoded samples, with the event after which its last upload
/// finished (so it can be overwritten).
struct Staging {
    buf: Option<PinnedBuffer>,
    done: Option<ReadyEvent>,
    /// Recorded on the pipeline stream once the batch's output is allocated: the GPU-Huffman
    /// decodes start after it.
    ready: Option<Arc<GpuEvent>>,
}

/// One of the two engine slots used in turn: a hardware decoder (lent to the engine thread
/// while it submits) and the event its batches start from.
struct EngineSlot {
    dec: Option<HwBatchDecoder>,
    /// Page-locked copy of the engine's encoded input (lent with `dec`): nvJPEG then moves
    /// it to the GPU by DMA, where from ordinary memory the driver copies it through its
    /// own staging on the engine's thread. Measured on an H200 (engine alone, 166 images a
    /// batch): 27,950 -> 31,854 img/s for windows, 25,461 -> 31,882 for whole images.
    encoded: Option<PinnedBuffer>,
    start: Arc<GpuEvent>,
}

/// The engine's share of one batch, everything the engine thread needs, owned (the encoded
/// bytes stay alive through the batch's `TensorList`, the output through its buffer).
struct EngineWork {
    input: TensorList,
    idx: Vec<usize>,
    targets: Vec<HwTarget>,
    out: Arc<DeviceBuffer>,
    /// Per engine sample: where its slot starts in `out`, and the window it holds (for the
    /// CPU fallback).
    offsets: Vec<usize>,
    windows: Vec<Option<Roi>>,
    infos: Vec<ImageInfo>,
    params: DecodeParams,
    ctx: OpContext,
    iteration: u64,
    start: Arc<GpuEvent>,
    /// The encoded images copied to page-locked memory, and where each sits there.
    encoded: Option<PinnedBuffer>,
    spans: Vec<(usize, usize)>,
}

/// What the engine thread reports: the lent decoder and input buffer, how long the
/// submission took and which samples it had to decode on the CPU (or the first one it could
/// not decode at all).
type EngineOutcome = (HwBatchDecoder, Option<PinnedBuffer>, Result<(std::time::Instant, std::time::Duration, Vec<usize>)>);

/// The engine's two threads: one copies each batch's input to page-locked memory, then
/// hands the batch to the other, which submits it (nvJPEG's batched call blocks while the
/// engine takes the work, so neither may occupy the pipeline's workers or its own thread).
struct EngineThreads {
    input: rayon::ThreadPool,
    feed: Arc<rayon::ThreadPool>,
}

/// A submission under way on the engine thread.
struct EngineJob {
    slot: usize,
    iteration: u64,
    done: Receiver<EngineOutcome>,
    /// The report, once received (see `MixedDecoder::settle`).
    outcome: Option<Result<(std::time::Instant, std::time::Duration, Vec<usize>)>>,
}

/// Whether the engine reads its input from page-locked memory (`SLUICE_PINNED_ENGINE_INPUT=0`
/// turns it off, for measurements).
fn pinned_engine_input() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_PINNED_ENGINE_INPUT").is_none_or(|v| v != "0"))
}

impl EngineWork {
    /// Copies the encoded images into the slot's page-locked buffer `buf` (grown when
    /// short), so nvJPEG moves them by DMA; from ordinary memory the driver stages them on
    /// the engine's thread. Where page-locked memory is not to be had, the work keeps
    /// reading ordinary memory.
    fn pin(&mut self, dec: &HwBatchDecoder, buf: Option<PinnedBuffer>, device: &Arc<GpuDevice>) -> Result<()> {
        // The GPU may still be reading the slot's previous batch from this buffer.
        dec.wait_idle()?;
        let total: usize = self.idx.iter().map(|&i| self.input.bytes(i).len()).sum();
        let buf = buf.filter(|b| b.len() >= total).or_else(|| PinnedBuffer::alloc(device, total + total / 4).ok());
        let Some(mut buf) = buf else { return Ok(()) };
        let dst = buf.as_mut_slice();
        let mut at = 0;
        for &i in &self.idx {
            let src = self.input.bytes(i);
            dst[at..at + src.len()].copy_from_slice(src);
            self.spans.push((at, src.len()));
            at += src.len();
        }
        self.encoded = Some(buf);
        Ok(())
    }

    /// Hands the work to the submitting thread `feed`, which reports on `tx`.
    fn submit_on(self, feed: &rayon::ThreadPool, mut dec: HwBatchDecoder, tx: Sender<EngineOutcome>) {
        feed.spawn(move || {
            let result = self.run(&mut dec);
            let _ = tx.send((dec, self.encoded, result));
        });
    }

    /// Submits the batch on `dec` (blocks while the engine takes it); if the engine refuses
    /// it, decodes the samples on this thread and copies them into place on the decoder's
    /// stream.
    fn run(&self, dec: &mut HwBatchDecoder) -> Result<(std::time::Instant, std::time::Duration, Vec<usize>)> {
        let t = std::time::Instant::now();
        let images: Vec<&[u8]> = match &self.encoded {
            Some(buf) => self.spans.iter().map(|&(at, len)| &buf.as_slice()[at..at + len]).collect(),
            None => self.idx.iter().map(|&i| self.input.bytes(i)).collect(),
        };
        // SAFETY: every target is a slot of `out` (allocated on the pipeline stream before
        // `start` was recorded there) with room for the image or window at its pitch; the
        // encoded bytes live in `encoded` or `input`, which this work owns until the call
        // returns (and `encoded` is not rewritten before the GPU has read it: `pin`).
        // (`submit` waits for `start` on this thread, off the pipeline's threads: the outputs
        // may be memory the pipeline stream freed just before, see HwBatchDecoder.)
        let submitted = unsafe { dec.submit(&images, &self.targets, &self.start) };
        let busy = t.elapsed();
        match submitted {
            Ok(()) => Ok((t, busy, Vec::new())),
            Err(_) => self.decode_on_cpu(dec).map(|()| (t, busy, self.idx.clone())),
        }
    }

    /// The slow path for a batch the engine refused (rare: the engine's vetting happens
    /// beforehand).
    fn decode_on_cpu(&self, dec: &HwBatchDecoder) -> Result<()> {
        let mut px = Vec::new();
        for (k, &i) in self.idx.iter().enumerate() {
            let at = || self.ctx.at(self.iteration, i, self.input.source_info(i));
            let p = DecodeParams { roi: self.windows[k], ..self.params };
            let (h, w, c) = self.infos[k].output_shape(&p);
            px.resize(h * w * c, 0);
            sluice_codecs::decode_into(self.input.bytes(i), &self.infos[k], &p, &mut px).map_err(|e| Error::data(at(), e.to_string()))?;
            self.out.copy_from_host_on(self.offsets[k], &px, dec.stream()).map_err(|e| Error::data(at(), e.to_string()))?;
        }
        Ok(())
    }
}

/// A batch whose engine share is under way and whose CPU share is still to do (between
/// `MixedDecoder::begin` and `finish`).
struct Started {
    iteration: u64,
    infos: Vec<ImageInfo>,
    routes: Vec<Route>,
    hw_idx: Vec<usize>,
    /// The CPU share (its samples in staging order) being decoded by the workers.
    share: Option<Arc<CpuShare>>,
    staging_slot: usize,
    /// The output, when allocated early (see `begin`), and its shapes.
    out: Option<TensorListGpu>,
    out_meta: BatchMeta,
    /// Whole images for the engine to decode windows out of (see `Route::HwWindow`).
    scratch: Option<DeviceBuffer>,
    engine: Option<EngineJob>,
    /// For the trace: routing the samples, and all of `begin`.
    t_plan: std::time::Duration,
    t_begin: std::time::Duration,
    /// When `begin` started (for the trace).
    began: std::time::Instant,
}

/// The decoding machinery shared by the mixed decoders.
pub(super) struct MixedDecoder {
    ctx: OpContext,
    params: DecodeParams,
    /// The hardware engine's handle, when there is one.
    nv: Option<NvJpeg>,
    /// Two engine slots used in turn (the second made on first use); empty without an engine.
    slots: Vec<EngineSlot>,
    next_slot: usize,
    /// The threads that prepare and submit the engine's work; None without an engine.
    engine_threads: Option<EngineThreads>,
    hw_load: f64,
    /// Staging buffers used in turn, so decoding the next batches overlaps earlier uploads
    /// (and the host does not wait for a stream still busy with the engine's work).
    staging: [Staging; STAGING_DEPTH],
    turn: usize,
    /// The GPU half of the CPU share's JPEG decodes.
    idct: GpuIdct,
    /// The GPU's entropy decoding of the CPU share's staged scans.
    entropy: GpuEntropy,
    /// Batches `begin` started, waiting for `finish`, oldest first (at most two: the
    /// executor runs one iteration ahead).
    started: std::collections::VecDeque<Started>,
    /// The CPU shares' samples, for the pool's workers.
    share_queue: Arc<ShareQueue>,
    /// nvJPEG's GPU-Huffman decoder states, made on the first batch with a JPEG larger than
    /// `huffman_threshold` pixels for it (None inside: nvJPEG cannot).
    huffman: std::sync::OnceLock<Option<Arc<HuffmanPool>>>,
    huffman_threshold: usize,
}

impl MixedDecoder {
    pub(super) fn new(ctx: &OpContext, device: &Arc<GpuDevice>) -> Result<MixedDecoder> {
        let op = &ctx.display_name;
        let color = color_space(op, ctx.args.int("output_type"))?;
        if ctx.args.dtype("dtype") != DType::U8 {
            return Err(Error::arg(op, "dtype", "the mixed decoder outputs UINT8; cast on the GPU afterwards"));
        }
        let hw_load = ctx.args.float("hw_decoder_load");
        if !(0.0..=1.0).contains(&hw_load) {
            return Err(Error::arg(op, "hw_decoder_load", format!("must be in [0, 1], got {hw_load}")));
        }
        // The hardware engine is optional: GPUs without one (and machines without nvJPEG)
        // decode everything on the CPU path. Only the first slot is made now: the second
        // waits for the second batch, so the first batch is not held up by it.
        let nv = if hw_load > 0.0 && nvjpeg::library_present() { NvJpeg::hardware(device).ok() } else { None };
        let first = nv.as_ref().and_then(|nv| new_slot(nv, ctx.max_batch_size).ok());
        let nv = nv.filter(|_| first.is_some());
        let slots: Vec<EngineSlot> = first.into_iter().collect();
        let engine_threads = if slots.is_empty() {
            None
        } else {
            let thread = |name: &'static str| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(move |_| name.into()).build();
                pool.map_err(|e| Error::Unsupported(format!("{op}: cannot start the hardware decoder's thread: {e}")))
            };
            Some(EngineThreads { input: thread("sluice-nvjpeg-in")?, feed: Arc::new(thread("sluice-nvjpeg")?) })
        };
        let params = DecodeParams {
            color,
            adjust_orientation: ctx.args.bool("adjust_orientation"),
            fast_idct: ctx.args.bool("use_fast_idct"),
            ..DecodeParams::default()
        };
        let staging = std::array::from_fn(|_| Staging { buf: None, done: None, ready: None });
        let huffman_threshold = ctx.args.int("hybrid_huffman_threshold").max(0) as usize;
        Ok(MixedDecoder {
            ctx: ctx.clone(),
            params,
            nv,
            slots,
            next_slot: 0,
            engine_threads,
            hw_load,
            staging,
            turn: 0,
            idct: GpuIdct::default(),
            entropy: GpuEntropy::default(),
            started: Default::default(),
            share_queue: Default::default(),
            huffman: Default::default(),
            huffman_threshold,
        })
    }

    /// Waits for the engine thread to finish submitting `job`, keeps its report in the job
    /// and returns the decoder to its slot (once; later calls do nothing).
    fn settle(&mut self, job: &mut EngineJob) {
        if job.outcome.is_some() {
            return;
        }
        let op = &self.ctx.display_name;
        job.outcome = Some(match job.done.recv() {
            Ok((dec, encoded, result)) => {
                self.slots[job.slot].dec = Some(dec);
                self.slots[job.slot].encoded = encoded;
                if let (true, Ok((from, busy, _))) = (trace(), &result) {
                    let from = trace_clock(*from);
                    eprintln!("[{op}] it {} engine submit {:.2} ms (at {from:.2} to {:.2})", job.iteration, busy.as_secs_f64() * 1e3, from + busy.as_secs_f64() * 1e3);
                }
                result
            }
            Err(_) => Err(Error::Unsupported(format!("{op}: the hardware decoder's thread stopped"))),
        });
    }

    /// The slot for this batch (the other one than last time, made on first use; without
    /// it, out of memory say, one slot serves). Two slots also for large images, though the
    /// engine alone is no faster with them: in the pipeline one slot measured 3,250-3,370
    /// img/s on large photos against 3,540-3,970 with two (H200, 2026-11-23).
    fn take_slot(&mut self) -> usize {
        let want = self.next_slot;
        self.next_slot ^= 1;
        if want == 1 && self.slots.len() == 1 {
            match self.nv.as_ref().map(|nv| new_slot(nv, self.ctx.max_batch_size)) {
                Some(Ok(slot)) => self.slots.push(slot),
                _ => return 0,
            }
        }
        want.min(self.slots.len() - 1)
    }

    pub(super) fn ctx(&self) -> &OpContext {
        &self.ctx
    }

    pub(super) fn params(&self) -> &DecodeParams {
        &self.params
    }

    /// Whether sample `i`, left over by the engine, goes to GPU Huffman decoding: a JPEG of
    /// more than `hybrid_huffman_threshold` pixels that the engine's vetting would pass (the
    /// GPU decoders turn truncated files into garbage without an error), when nvJPEG has
    /// the decoder (made here on first need).
    fn suits_gpu_huffman(&self, device: &Arc<GpuDevice>, data: &[u8], info: &ImageInfo) -> bool {
        let upright = !self.params.adjust_orientation || info.orientation.to_exif() == 1;
        self.params.color == ColorSpace::Rgb
            && info.format == ImageFormat::Jpeg
            && info.channels == 3
            && upright
            && info.width * info.height > self.huffman_threshold
            && sluice_codecs::jpeg_suits_hardware_decoder(data)
            && self.huffman.get_or_init(|| nvjpeg::library_present().then(|| HuffmanPool::new(device).ok()).flatten()).is_some()
    }

    /// The full-scale window and coefficient layout for decoding sample `data` on the GPU
    /// from its scan (gpu_entropy), when the path is on and the file qualifies.
    fn scan_layout(&self, data: &[u8], info: &ImageInfo, window: Option<Roi>) -> Option<(Roi, CoefLayout)> {
        if !gpu_entropy::enabled() || !gpu_idct::enabled() || data.len() > gpu_entropy::MAX_FILE_BYTES {
            return None;
        }
        let window = window.unwrap_or(Roi { x: 0, y: 0, width: info.width, height: info.height });
        // Restart intervals are refused by the scan's preparation: such files take the
        // coefficient path instead (a second scan, rarer, is found only by the worker).
        if !sluice_codecs::jpeg_suits_hardware_decoder(data) || sluice_codecs::scan::has_restart_interval(data) {
            return None;
        }
        gpu_idct::plan(data, info, &self.params, window, 1).map(|layout| (window, layout))
    }

    /// Which samples the hardware engine takes: baseline colour JPEGs it decodes correctly
    /// (see [`sluice_codecs::jpeg_suits_hardware_decoder`]: no grayscale, which it gets
    /// wrong, and no truncated files, which it turns into garbage without an error), stored
    /// upright, decoded to RGB, up to `hw_decoder_load` of the batch.
    fn plan_hw(&self, data: &[&[u8]], infos: &[ImageInfo]) -> Vec<bool> {
        if self.slots.is_empty() || self.params.color != ColorSpace::Rgb {
            return vec![false; data.len()];
        }
        let adjust = self.params.adjust_orientation;
        let candidate = |i: usize| {
            let info = &infos[i];
            info.format == ImageFormat::Jpeg
                && info.channels == 3
                && (!adjust || info.orientation.to_exif() == 1)
                && sluice_codecs::jpeg_suits_hardware_decoder(data[i])
        };
        // On this thread, and only until the quota is met: a walk over the markers costs a
        // microsecond or two, while a parallel step here waits for workers busy decoding
        // (measured 4 ms on an H200 host, delaying the engine's next batch).
        let mut quota = (self.hw_load * data.len() as f64).round() as usize;
        let mut on_hw = vec![false; data.len()];
        for (i, take) in on_hw.iter_mut().enumerate() {
            if quota == 0 {
                break;
            }
            *take = candidate(i);
            quota -= *take as usize;
        }
        on_hw
    }

    /// Starts decoding the batch in `ws.cpu_inputs[0]`: whole images (`windows` None) or the
    /// given window of each (oriented coordinates, inside the image). Routes every sample,
    /// allocates the output and hands the engine its share; [`finish`](Self::finish) does
    /// the CPU share and joins the two. The executor calls this one iteration early, so
    /// the engine takes batch n+1 the moment it is done with batch n, while the pipeline
    /// thread still queues batch n's later operators. `downscale_to` lets the CPU share
    /// decode large windows at a DCT scale (see `image_crop::scaled_window`).
    pub(super) fn begin(
        &mut self,
        ws: &GpuWorkspace<'_>,
        infos: Vec<ImageInfo>,
        windows: Option<&[Roi]>,
        downscale_to: Option<[usize; 2]>,
    ) -> Result<()> {
        // At most the previous batch is still waiting for `finish` (the executor runs one
        // iteration ahead); anything older belongs to an iteration that failed elsewhere.
        while self.started.front().is_some_and(|s| s.iteration + 1 < ws.iteration || s.iteration >= ws.iteration) || self.started.len() > 1 {
            let stale = self.started.pop_front().expect("checked non-empty");
            self.abandon(stale);
        }
        let t0 = std::time::Instant::now();
        let input = ws.cpu_inputs[0];
        let n = input.len();
        let data: Vec<&[u8]> = (0..n).map(|i| input.bytes(i)).collect();
        let on_hw = self.plan_hw(&data, &infos);
        let t_plan = t0.elapsed();

        // Route every sample and size its output (which CPU-share samples are only
        // entropy-decoded, Route::Coef, is decided below, once the engine has its share).
        let mut routes = Vec::with_capacity(n);
        let mut shapes: Vec<[usize; 3]> = Vec::with_capacity(n);
        let mut scratch_len = 0usize;
        let engine_windows = self.slots.first().and_then(|s| s.dec.as_ref()).is_some_and(|d| d.decodes_windows());
        for i in 0..n {
            let (h, w, c) = infos[i].output_shape(&self.params);
            let window = windows.map(|w| w[i]);
            let scan = if on_hw[i] { None } else { self.scan_layout(data[i], &infos[i], window) };
            let (route, (oh, ow)) = match (on_hw[i], window) {
                (true, None) => (Route::Hw { window: None }, (h, w)),
                (true, Some(r)) if engine_windows => (Route::Hw { window: Some(r) }, (r.height, r.width)),
                (true, Some(r)) => {
                    let route = Route::HwWindow { scratch: scratch_len, window: r };
                    scratch_len += h * w * 3;
                    (route, (r.height, r.width))
                }
                (false, window) if self.suits_gpu_huffman(ws.device, data[i], &infos[i]) => {
                    (Route::GpuHuffman { window, out: 0 }, window.map_or((h, w), |r| (r.height, r.width)))
                }
                (false, _) if scan.is_some() => {
                    let (window, layout) = scan.expect("checked");
                    (Route::Scan { window, layout }, (window.height, window.width))
                }
                (false, None) => (Route::Cpu { window: None, denom: 1 }, (h, w)),
                (false, Some(r)) => {
                    let (r, denom) = scaled_window(&infos[i], &self.params, r, downscale_to);
                    (Route::Cpu { window: Some(r), denom }, (r.height, r.width))
                }
            };
            routes.push(route);
            shapes.push([oh, ow, c]);
        }
        let mut meta = BatchMeta::new(DType::U8, 3, shapes.iter().map(|s| &s[..]));
        meta.set_layout("HWC".into());
        meta.inherit_source_info(input.meta());
        // The output is needed now only by decoders that write into it while this batch is
        // begun ahead (the engine, GPU-Huffman); otherwise `finish` allocates it, so one
        // batch fewer of decoded images is alive (on large photos ~1 GiB of full-scale windows).
        let on_gpu_huffman = routes.iter().any(|r| matches!(r, Route::GpuHuffman { .. }));
        let early = on_gpu_huffman || on_hw.iter().any(|&h| h);
        let out_meta = meta.clone();
        let out = if early { Some(TensorListGpu::alloc(meta, ws.device, ws.stream)?) } else { None };
        let scratch = if scratch_len > 0 { Some(DeviceBuffer::alloc(ws.device, ws.stream, scratch_len)?) } else { None };
        if let (true, Some(out)) = (on_gpu_huffman, &out) {
            for (i, route) in routes.iter_mut().enumerate() {
                if let Route::GpuHuffman { out: ptr, .. } = route {
                    *ptr = out.sample_ptr(i);
                }
            }
        }

        // The engine's share, submitted on its thread right away (queued behind the
        // previous batch's, when that is still on the engine).
        let hw_idx: Vec<usize> = (0..n).filter(|&i| on_hw[i]).collect();
        let engine = if hw_idx.is_empty() {
            None
        } else {
            let out = out.as_ref().expect("allocated early for the engine");
            let slot = self.take_slot();
            // With one slot only, the previous batch may still hold its decoder.
            for k in 0..self.started.len() {
                if let Some(mut job) = self.started[k].engine.take() {
                    if job.slot == slot {
                        self.settle(&mut job);
                    }
                    self.started[k].engine = Some(job);
                }
            }
            let s = &mut self.slots[slot];
            let encoded = s.encoded.take();
            s.start.record(ws.stream)?;
            let mut work = EngineWork {
                input: input.clone(),
                idx: hw_idx.clone(),
                targets: Vec::with_capacity(hw_idx.len()),
                out: out.buffer().clone(),
                offsets: Vec::with_capacity(hw_idx.len()),
                windows: Vec::with_capacity(hw_idx.len()),
                infos: hw_idx.iter().map(|&i| infos[i]).collect(),
                params: self.params,
                ctx: self.ctx.clone(),
                iteration: ws.iteration,
                start: s.start.clone(),
                encoded: None,
                spans: Vec::new(),
            };
            for &i in &hw_idx {
                let width = infos[i].width;
                let (target, window) = match routes[i] {
                    Route::HwWindow { scratch: off, window } => (
                        HwTarget { ptr: scratch.as_ref().expect("sized above").device_ptr() + off as u64, pitch: width * 3, width, window: None },
                        Some(window),
                    ),
                    Route::Hw { window } => (
                        HwTarget {
                            ptr: out.sample_ptr(i),
                            pitch: window.map_or(width, |r| r.width) * 3,
                            width,
                            window: window.map(|r| HwWindow { x: r.x, y: r.y, width: r.width, height: r.height }),
                        },
                        window,
                    ),
                    Route::Cpu { .. } | Route::Coef { .. } | Route::Scan { .. } | Route::GpuHuffman { .. } => {
                        unreachable!("only engine-routed samples have targets")
                    }
                };
                work.targets.push(target);
                work.offsets.push(out.offset(i));
                work.windows.push(window);
            }
            let dec = s.dec.take().expect("a slot's decoder is home between batches");
            let (tx, done) = bounded(1);
            let threads = self.engine_threads.as_ref().expect("present with engine slots");
            if pinned_engine_input() {
                // The copy to page-locked memory runs on a thread of its own, while the
                // engine still works on the previous batch: neither this thread nor the
                // workers (busy with CPU shares) stand between the engine and its work.
                let device = ws.device.clone();
                let feed = threads.feed.clone();
                threads.input.spawn(move || {
                    if let Err(e) = work.pin(&dec, encoded, &device) {
                        let _ = tx.send((dec, None, Err(e)));
                        return;
                    }
                    work.submit_on(&feed, dec, tx);
                });
            } else {
                work.submit_on(&threads.feed, dec, tx);
            }
            Some(EngineJob { slot, iteration: ws.iteration, done, outcome: None })
        };

        // The CPU share: JPEGs that `gpu_idct` reproduces are only entropy-decoded there.
        let mut cpu_idx: Vec<usize> = (0..n).filter(|&i| !on_hw[i]).collect();
        // (A header walk per sample, on this thread: see `plan_hw`.)
        if gpu_idct::enabled() {
            for &i in &cpu_idx {
                let Route::Cpu { window, denom } = routes[i] else { continue };
                let window = window.unwrap_or(Roi { x: 0, y: 0, width: infos[i].width, height: infos[i].height });
                if let Some(layout) = gpu_idct::plan(data[i], &infos[i], &self.params, window, denom) {
                    routes[i] = Route::Coef { window, layout };
                }
            }
        }
        // One slice of pinned staging per sample, the coefficient samples' first, then the
        // scans (together they go up in one copy), and the samples queued for the workers,
        // costliest first.
        cpu_idx.sort_by_key(|&i| match routes[i] {
            Route::Coef { .. } => 0,
            Route::Scan { .. } => 1,
            _ => 2,
        });
        let mut samples = Vec::with_capacity(cpu_idx.len());
        let mut total = 0;
        for &i in &cpu_idx {
            let out_len = out_meta.byte_range(i).len();
            let staged_len = match routes[i] {
                Route::Coef { layout, .. } => layout.coefficients * 2,
                Route::Scan { .. } => gpu_entropy::staged_len(data[i].len()),
                Route::GpuHuffman { .. } => 0,
                _ => out_len,
            };
            samples.push(ShareSample { index: i, staged_at: total, staged_len, out_len });
            total += staged_len;
        }
        let staging_slot = self.turn;
        let share = if cpu_idx.is_empty() {
            None
        } else {
            self.turn = (self.turn + 1) % STAGING_DEPTH;
            let slot = &mut self.staging[staging_slot];
            if let Some(done) = slot.done.take() {
                done.synchronize()?; // its previous upload must have left before we overwrite it
            }
            if slot.buf.as_ref().is_none_or(|b| b.len() < total) {
                slot.buf = None;
                slot.buf = Some(PinnedBuffer::alloc(ws.device, total + total / 4)?);
            }
            let base = slot.buf.as_mut().expect("allocated above").as_mut_slice().as_mut_ptr();
            let gpu = match (on_gpu_huffman, self.huffman.get()) {
                (true, Some(Some(pool))) => {
                    let ready = match slot.ready.take() {
                        Some(ev) => ev,
                        None => Arc::new(GpuEvent::new(ws.device)?),
                    };
                    // Reused three batches on, when this batch's decodes are all queued.
                    ready.record(ws.stream)?;
                    slot.ready = Some(ready.clone());
                    Some(GpuShare { pool: pool.clone(), ready, slot: staging_slot, used: Default::default() })
                }
                _ => None,
            };
            // Cost: the bytes libjpeg must entropy-decode (a cropped decode stops below its
            // window).
            let cost = |i: usize| match routes[i] {
                Route::Cpu { window: Some(r), .. } => data[i].len() * (r.y + r.height) / infos[i].height.max(1),
                _ => data[i].len(),
            };
            let mut order: Vec<usize> = (0..samples.len()).collect();
            if costliest_first() {
                order.sort_by_key(|&k| std::cmp::Reverse(cost(samples[k].index)));
            }
            // SAFETY: the staging slot holds `total` bytes; nothing else touches it, nor
            // frees it, until `finish` or `abandon` has waited for the share (the ring of
            // STAGING_DEPTH > 2 slots is not reused while two batches are in flight).
            let share = unsafe { CpuShare::new(ws.iteration, input.clone(), infos.clone(), routes.clone(), self.params, self.ctx.clone(), base, samples, gpu) };
            self.share_queue.start(&share, &order, ws.pool);
            Some(share)
        };
        self.started.push_back(Started { iteration: ws.iteration, infos, routes, hw_idx, out, out_meta, scratch, engine, share, staging_slot, t_plan, t_begin: t0.elapsed(), began: t0 });
        Ok(())
    }

    /// Whether [`begin`](Self::begin) has started this iteration's batch.
    pub(super) fn started(&self, iteration: u64) -> bool {
        self.started.iter().any(|s| s.iteration == iteration)
    }

    /// A started batch nobody will finish (its iteration failed elsewhere, or the pipeline
    /// is going away): waits for its engine work, so the slot's decoder comes home and the
    /// output is not freed under the engine.
    fn abandon(&mut self, s: Started) {
        if let Some(share) = &s.share {
            self.share_queue.drain(Some(s.iteration));
            share.wait();
            // The output is freed next: the GPU-Huffman decodes into it must be over.
            if let Some(gpu) = share.gpu() {
                let _ = gpu.wait();
            }
        }
        if let Some(mut job) = s.engine {
            self.settle(&mut job);
            if let Some(dec) = &self.slots[job.slot].dec {
                let _ = dec.stream().synchronize();
            }
        }
    }

    /// Decodes the CPU share of the batch [`begin`](Self::begin) started for `ws.iteration`
    /// and orders the pipeline stream after the engine's share: the decoded batch.
    pub(super) fn finish(&mut self, ws: &GpuWorkspace<'_>) -> Result<TensorListGpu> {
        let t0 = std::time::Instant::now();
        while let Some(stale) = self.started.pop_front_if(|s| s.iteration < ws.iteration) {
            self.abandon(stale);
        }
        let Some(Started { infos, routes, hw_idx, out, out_meta, scratch, engine, share, staging_slot, t_plan, t_begin, began, .. }) =
            self.started.pop_front_if(|s| s.iteration == ws.iteration)
        else {
            return Err(Error::Unsupported(format!("internal error in {}: iteration {} was not started", self.ctx.display_name, ws.iteration)));
        };
        let out = match out {
            Some(out) => out,
            None => TensorListGpu::alloc(out_meta, ws.device, ws.stream)?,
        };

        let n = out.len();
        let samples = share.as_ref().map_or(&[][..], |s| s.samples());
        // The coefficient samples and the scans come first in the staging and go up in one copy.
        let up_bytes: usize = samples.iter().take_while(|s| matches!(routes[s.index], Route::Coef { .. } | Route::Scan { .. })).map(|s| s.staged_len).sum();
        // This thread helps with what is left of the share, then waits for the workers.
        let t_setup = t0.elapsed();
        let cpu_results = share.as_ref().map_or_else(Vec::new, |share| {
            self.share_queue.drain(Some(ws.iteration));
            share.wait();
            share.results()
        });
        // The GPU-Huffman decodes, on their own streams, come before anything else here
        // (even an error return, which frees the output on this stream).
        if let Some(gpu) = share.as_ref().and_then(|s| s.gpu()) {
            gpu.join(ws.stream)?;
        }
        let slot = &mut self.staging[staging_slot];
        let t_cpu = t0.elapsed();
        let staged = cpu_results.into_iter().collect::<Result<Vec<Staged>>>();

        // Uploads of the CPU share, and the GPU half of the coefficient samples.
        if let (Ok(staged), false) = (&staged, samples.is_empty()) {
            let staging = slot.buf.as_ref().expect("allocated in begin");
            let up = DeviceBuffer::alloc(ws.device, ws.stream, up_bytes)?;
            // SAFETY: the staging buffer is not touched again until `done` (recorded below,
            // after this copy) has completed.
            unsafe { up.copy_from_host_async(0, &staging.as_slice()[..up_bytes])? };
            let mut coef_samples = Vec::with_capacity(samples.len());
            let mut scan_samples = Vec::new();
            let mut fallbacks = false;
            for (&ShareSample { index: i, staged_at, staged_len, .. }, st) in samples.iter().zip(staged) {
                match (st, routes[i]) {
                    (Staged::OnGpu, _) => {}
                    (Staged::Coefficients(quant), Route::Coef { window, layout }) => {
                        coef_samples.push(CoefSample { index: i, window, layout, coefs: up.device_ptr() + staged_at as u64, quant: *quant });
                    }
                    (&Staged::Scan { quant, data_bytes, total_blocks }, Route::Scan { window, layout }) => {
                        scan_samples.push(ScanSample { index: i, window, layout, staged_at, quant, data_bytes, total_blocks });
                    }
                    (Staged::Fallback(px), _) => {
                        // SAFETY: `px` lives in `staged` until the synchronize below.
                        unsafe { out.buffer().copy_from_host_async(out.offset(i), px)? };
                        fallbacks = true;
                    }
                    // SAFETY: the staging buffer is not touched again until `done` (recorded
                    // below, after these copies) has completed.
                    _ => unsafe { out.buffer().copy_from_host_async(out.offset(i), &staging.as_slice()[staged_at..staged_at + staged_len])? },
                }
            }
            // SAFETY: the scans and coefficients are in `up` (copied above, on this stream),
            // which is freed in this stream's order after the launches that read it.
            unsafe { self.entropy.finish(ws, &mut self.idct, up.device_ptr(), &scan_samples, coef_samples, &out)? };
            drop(up);
            slot.done = Some(ReadyEvent::record(ws.device, ws.stream)?);
            if fallbacks {
                ws.stream.synchronize().map_err(sluice_cuda::CudaError::from)?;
            }
        }
        let cpu_ok = staged.map(|_| ());

        // Order the pipeline stream after the engine's work, once its thread is done.
        if let Some(mut job) = engine {
            self.settle(&mut job);
            if let Some(dec) = &self.slots[job.slot].dec {
                dec.join(ws.stream)?;
            }
            let (_, _, fell_back) = job.outcome.take().expect("settled above")?;
            // Windows of engine-decoded samples: cut out of the scratch images (those decoded
            // on the CPU instead are in place already).
            if let Some(scratch) = &scratch {
                for &i in &hw_idx {
                    if let Route::HwWindow { scratch: off, window: r } = routes[i] {
                        if fell_back.contains(&i) {
                            continue;
                        }
                        let pitch = infos[i].width * 3;
                        out.buffer().copy_rect_from(out.offset(i), r.width * 3, scratch, off + r.y * pitch + r.x * 3, pitch, r.width * 3, r.height)?;
                    }
                }
            }
        }
        cpu_ok?;
        if trace() {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            eprintln!(
                "[{}] it {} n {n} hw {} cpu {}: begin {:.2} (plan {:.2}) setup {:.2} cpu share {:.2} rest {:.2} ms (begun at {:.2}, finish {:.2} to {:.2})",
                self.ctx.display_name,
                ws.iteration,
                hw_idx.len(),
                samples.len(),
                ms(t_begin),
                ms(t_plan),
                ms(t_setup),
                ms(t_cpu - t_setup),
                ms(t0.elapsed() - t_cpu),
                trace_clock(began),
                trace_clock(t0),
                trace_clock(std::time::Instant::now())
            );
        }
        Ok(out)
    }
}

impl Drop for MixedDecoder {
    fn drop(&mut self) {
        while let Some(s) = self.started.pop_front() {
            self.abandon(s);
        }
    }
}

/// An engine slot: a hardware decoder for batches of up to `batch_size` and its start event.
fn new_slot(nv: &NvJpeg, batch_size: usize) -> sluice_cuda::CudaResult<EngineSlot> {
    let dec = HwBatchDecoder::new(nv, batch_size.max(1))?;
    Ok(EngineSlot { dec: Some(dec), encoded: None, start: Arc::new(GpuEvent::blocking(nv.device())?) })
}

/// `decoders.image` with device="mixed".
pub(super) struct ImageDecoderMixed {
    dec: MixedDecoder,
}

impl ImageDecoderMixed {
    pub(super) fn new(ctx: &OpContext, device: &Arc<GpuDevice>) -> Result<ImageDecoderMixed> {
        Ok(ImageDecoderMixed { dec: MixedDecoder::new(ctx, device)? })
    }
}

impl GpuOperator for ImageDecoderMixed {
    fn starts_early(&self) -> bool {
        true
    }

    fn start(&mut self, ws: &GpuWorkspace<'_>) -> Result<()> {
        let t = std::time::Instant::now();
        let infos = read_headers(self.dec.ctx(), &ws.host_view(), ws.cpu_inputs[0], false)?;
        trace_headers(self.dec.ctx(), ws.iteration, t);
        self.dec.begin(ws, infos, None, None)
    }

    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        if !self.dec.started(ws.iteration) {
            self.start(ws)?;
        }
        Ok(vec![self.dec.finish(ws)?])
    }
}
