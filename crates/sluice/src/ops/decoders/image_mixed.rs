//! The mixed (nvJPEG) image decoders: encoded bytes on the host in, HWC uint8 images on the
//! GPU out. `decoders.image` decodes whole images; `image_random_crop`, `image_crop` and
//! `image_slice` decode a window of each (placed by the same code as their cpu twins, so
//! both backends cut the same windows).
//!
//! One batch runs three ways at once:
//! - Baseline colour JPEGs (`hw_decoder_load` of the batch) go to the GPU's hardware JPEG
//!   engine in one batched call, made on a thread of its own (nvJPEG's call blocks while
//!   the engine works) on one of two nvJPEG states used in turn, each with its own stream.
//!   Splitting a batch over parallel states was measured on an H200 and is slower (rn50-crop,
//!   16 threads: 1 part 20,770 img/s, 2 parts 17,165, 4 parts 13,379, 8 parts 11,348).
//! - Everything else (progressive files, other formats, EXIF-rotated or non-RGB outputs,
//!   and the share kept off the engine) goes to the pipeline's workers, one sample at a
//!   time, costliest first. JPEGs that `gpu_idct` reproduces are only entropy-decoded there
//!   and finished on the GPU (bit-exact with libjpeg-turbo); the rest are decoded by
//!   libjpeg-turbo / image-rs into pinned memory and uploaded. Windows decode only their
//!   rows and columns, and at a DCT scale when the graph says a fixed-size resize follows.
//! - Windows of engine-decoded samples are decoded on the engine (nvjpegDecodeBatchedEx
//!   with a ROI); where nvJPEG lacks that, whole images are decoded into one scratch buffer
//!   and the windows cut out with one 2-D copy each.
//!
//! The engine's submission runs while the workers decode the CPU share; the decoder joins
//! the pipeline stream to the engine's stream with an event once nvJPEG's call returns.
//! Queueing the later operators behind a device-memory gate before that call returns
//! (so the pipeline thread need not wait for the engine) deadlocks: nvJPEG synchronises
//! the device inside its call at times (first batch, growing buffers), which then waits for
//! the gate that only its own return would open.
//!
//! A batch the engine rejects is decoded on the CPU instead (on the engine's thread), so
//! one odd file costs time, not the batch; a file the CPU cannot decode either is an error
//! naming the sample.

use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver};
use rayon::prelude::*;
use sluice_codecs::{CoefLayout, ColorSpace, DecodeParams, ImageFormat, ImageInfo, Roi};
use sluice_cuda::nvjpeg::{self, GpuEvent, HwBatchDecoder, HwTarget, HwWindow, NvJpeg};
use sluice_cuda::{DeviceBuffer, GpuDevice, PinnedBuffer};

use super::color_space;
use super::gpu_idct::{self, CoefSample, GpuIdct};
use super::image::read_headers;
use super::image_crop::scaled_window;
use crate::error::{Error, Result};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, DType, ReadyEvent, TensorList, TensorListGpu};

/// Pinned staging buffers in flight for the CPU share.
const STAGING_DEPTH: usize = 3;

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
}

/// Where one sample is decoded and what lands in its output slot. Unboxed on purpose (a
/// few hundred bytes per sample, no allocation per sample on the hot path).
#[derive(Clone, Copy)]
#[allow(clippy::large_enum_variant)]
enum Route {
    /// Hardware engine straight into the output: the whole image, or only a window.
    Hw { window: Option<Roi> },
    /// Hardware engine into scratch at this offset (whole image), then the window is copied
    /// out (for an nvJPEG that cannot decode windows on the engine).
    HwWindow { scratch: usize, window: Roi },
    /// libjpeg-turbo / image-rs on a worker: this window (None: whole image) at this DCT scale.
    Cpu { window: Option<Roi>, denom: u32 },
    /// A worker entropy-decodes the blocks of this window, the GPU does the rest (gpu_idct).
    Coef { window: Roi, layout: CoefLayout },
}

/// What a worker left in a CPU-share sample's staging.
#[allow(clippy::large_enum_variant)] // the tables inline: no allocation per sample
enum Staged {
    Pixels,
    /// Coefficients, with the sample's quantization tables.
    Coefficients([[u16; 64]; 3]),
    /// The coefficient read failed, and a full decode produced these pixels (rare).
    Fallback(Vec<u8>),
}

/// One of the two engine slots used in turn: a hardware decoder (lent to the engine thread
/// while it submits) and the event its batches start from.
struct EngineSlot {
    dec: Option<HwBatchDecoder>,
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
}

/// What the engine thread reports: how long the submission took and which samples it had to
/// decode on the CPU (or the first one it could not decode at all).
type EngineOutcome = (HwBatchDecoder, Result<(std::time::Duration, Vec<usize>)>);

/// A submission under way on the engine thread.
struct EngineJob {
    slot: usize,
    iteration: u64,
    done: Receiver<EngineOutcome>,
}

impl EngineWork {
    /// Submits the batch on `dec` (blocks while the engine takes it); if the engine refuses
    /// it, decodes the samples on this thread and copies them into place on the decoder's
    /// stream.
    fn run(self, dec: &mut HwBatchDecoder) -> Result<(std::time::Duration, Vec<usize>)> {
        let t = std::time::Instant::now();
        let images: Vec<&[u8]> = self.idx.iter().map(|&i| self.input.bytes(i)).collect();
        // SAFETY: every target is a slot of `out` (allocated on the pipeline stream before
        // `start` was recorded there) with room for the image or window at its pitch; the
        // encoded bytes live in `input`, which this work owns until the call returns.
        let submitted = unsafe { dec.submit(&images, &self.targets, &self.start) };
        let busy = t.elapsed();
        match submitted {
            Ok(()) => Ok((busy, Vec::new())),
            Err(_) => self.decode_on_cpu(dec).map(|()| (busy, self.idx.clone())),
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

/// The decoding machinery shared by the mixed decoders.
pub(super) struct MixedDecoder {
    ctx: OpContext,
    params: DecodeParams,
    /// The hardware engine's handle, when there is one.
    nv: Option<NvJpeg>,
    /// Two engine slots used in turn (the second made on first use); empty without an engine.
    slots: Vec<EngineSlot>,
    next_slot: usize,
    /// The thread that submits to the engine: nvJPEG's batched call blocks while the engine
    /// takes the work, so it must not occupy the pipeline's CPU workers or its own thread.
    engine_thread: Option<rayon::ThreadPool>,
    hw_load: f64,
    /// Staging buffers used in turn, so decoding the next batches overlaps earlier uploads
    /// (and the host does not wait for a stream still busy with the engine's work).
    staging: [Staging; STAGING_DEPTH],
    turn: usize,
    /// The GPU half of the CPU share's JPEG decodes.
    idct: GpuIdct,
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
        let first = nv.as_ref().and_then(|nv| new_slot(nv, ctx.batch_size).ok());
        let nv = nv.filter(|_| first.is_some());
        let slots: Vec<EngineSlot> = first.into_iter().collect();
        let engine_thread = if slots.is_empty() {
            None
        } else {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(|_| "sluice-nvjpeg".into()).build();
            Some(pool.map_err(|e| Error::Unsupported(format!("{op}: cannot start the hardware decoder's thread: {e}")))?)
        };
        let params = DecodeParams {
            color,
            adjust_orientation: ctx.args.bool("adjust_orientation"),
            fast_idct: ctx.args.bool("use_fast_idct"),
            ..DecodeParams::default()
        };
        let staging = std::array::from_fn(|_| Staging { buf: None, done: None });
        Ok(MixedDecoder { ctx: ctx.clone(), params, nv, slots, next_slot: 0, engine_thread, hw_load, staging, turn: 0, idct: GpuIdct::default() })
    }

    /// Waits for the engine thread's last submission and returns its decoder to its slot.
    fn collect(&mut self, job: EngineJob) -> Result<(std::time::Duration, Vec<usize>)> {
        let op = &self.ctx.display_name;
        let (dec, result) = job.done.recv().map_err(|_| Error::Unsupported(format!("{op}: the hardware decoder's thread stopped")))?;
        self.slots[job.slot].dec = Some(dec);
        if trace() {
            if let Ok((busy, _)) = &result {
                eprintln!("[{op}] it {} engine submit {:.2} ms", job.iteration, busy.as_secs_f64() * 1e3);
            }
        }
        result
    }

    /// The slot for this batch (the other one than last time, made on first use; without
    /// it, out of memory say, one slot serves).
    fn take_slot(&mut self) -> usize {
        let want = self.next_slot;
        self.next_slot ^= 1;
        if want == 1 && self.slots.len() == 1 {
            match self.nv.as_ref().map(|nv| new_slot(nv, self.ctx.batch_size)) {
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

    /// Which samples the hardware engine takes: baseline colour JPEGs it decodes correctly
    /// (see [`sluice_codecs::jpeg_suits_hardware_decoder`]: no grayscale, which it gets
    /// wrong, and no truncated files, which it turns into garbage without an error), stored
    /// upright, decoded to RGB, up to `hw_decoder_load` of the batch.
    fn plan_hw(&self, ws: &GpuWorkspace<'_>, data: &[&[u8]], infos: &[ImageInfo]) -> Vec<bool> {
        if self.slots.is_empty() || self.params.color != ColorSpace::Rgb {
            return vec![false; data.len()];
        }
        let adjust = self.params.adjust_orientation;
        let candidate: Vec<bool> = ws.pool.install(|| {
            (0..data.len())
                .into_par_iter()
                .map(|i| {
                    let info = &infos[i];
                    info.format == ImageFormat::Jpeg
                        && info.channels == 3
                        && (!adjust || info.orientation.to_exif() == 1)
                        && sluice_codecs::jpeg_suits_hardware_decoder(data[i])
                })
                .collect()
        });
        let mut quota = (self.hw_load * data.len() as f64).round() as usize;
        candidate
            .into_iter()
            .map(|c| {
                let take = c && quota > 0;
                quota -= take as usize;
                take
            })
            .collect()
    }

    /// Decodes the batch in `ws.cpu_inputs[0]`: whole images (`windows` None) or the given
    /// window of each (oriented coordinates, inside the image). `downscale_to` lets the
    /// CPU share decode large windows at a DCT scale (see `image_crop::scaled_window`).
    pub(super) fn decode(
        &mut self,
        ws: &GpuWorkspace<'_>,
        infos: &[ImageInfo],
        windows: Option<&[Roi]>,
        downscale_to: Option<[usize; 2]>,
    ) -> Result<TensorListGpu> {
        let t0 = std::time::Instant::now();
        let input = ws.cpu_inputs[0];
        let n = input.len();
        let data: Vec<&[u8]> = (0..n).map(|i| input.bytes(i)).collect();
        let on_hw = self.plan_hw(ws, &data, infos);
        let t_plan = t0.elapsed();

        // Route every sample and size its output.
        let mut routes = Vec::with_capacity(n);
        let mut shapes: Vec<[usize; 3]> = Vec::with_capacity(n);
        let mut scratch_len = 0usize;
        let engine_windows = self.slots.first().and_then(|s| s.dec.as_ref()).is_some_and(|d| d.decodes_windows());
        let gpu_idct = gpu_idct::enabled();
        for i in 0..n {
            let (h, w, c) = infos[i].output_shape(&self.params);
            let window = windows.map(|w| w[i]);
            let (route, (oh, ow)) = match (on_hw[i], window) {
                (true, None) => (Route::Hw { window: None }, (h, w)),
                (true, Some(r)) if engine_windows => (Route::Hw { window: Some(r) }, (r.height, r.width)),
                (true, Some(r)) => {
                    let route = Route::HwWindow { scratch: scratch_len, window: r };
                    scratch_len += h * w * 3;
                    (route, (r.height, r.width))
                }
                (false, None) => {
                    let whole = Roi { x: 0, y: 0, width: infos[i].width, height: infos[i].height };
                    match gpu_idct.then(|| gpu_idct::plan(data[i], &infos[i], &self.params, whole, 1)).flatten() {
                        Some(layout) => (Route::Coef { window: whole, layout }, (h, w)),
                        None => (Route::Cpu { window: None, denom: 1 }, (h, w)),
                    }
                }
                (false, Some(r)) => {
                    let (r, denom) = scaled_window(&infos[i], &self.params, r, downscale_to);
                    match gpu_idct.then(|| gpu_idct::plan(data[i], &infos[i], &self.params, r, denom)).flatten() {
                        Some(layout) => (Route::Coef { window: r, layout }, (r.height, r.width)),
                        None => (Route::Cpu { window: Some(r), denom }, (r.height, r.width)),
                    }
                }
            };
            routes.push(route);
            shapes.push([oh, ow, c]);
        }
        let mut meta = BatchMeta::new(DType::U8, 3, shapes.iter().map(|s| &s[..]));
        meta.set_layout("HWC".into());
        meta.inherit_source_info(input.meta());
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let scratch = if scratch_len > 0 { Some(DeviceBuffer::alloc(ws.device, ws.stream, scratch_len)?) } else { None };

        // The engine's share, submitted on its thread right away.
        let hw_idx: Vec<usize> = (0..n).filter(|&i| on_hw[i]).collect();
        let engine = if hw_idx.is_empty() {
            None
        } else {
            let slot = self.take_slot();
            let s = &mut self.slots[slot];
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
                    Route::Cpu { .. } | Route::Coef { .. } => unreachable!("only engine-routed samples have targets"),
                };
                work.targets.push(target);
                work.offsets.push(out.offset(i));
                work.windows.push(window);
            }
            let mut dec = s.dec.take().expect("a slot's decoder is home between batches");
            let (tx, done) = bounded(1);
            self.engine_thread.as_ref().expect("present with engine slots").spawn(move || {
                let result = work.run(&mut dec);
                let _ = tx.send((dec, result));
            });
            Some(EngineJob { slot, iteration: ws.iteration, done })
        };

        // CPU share: one slice of pinned staging per sample, the coefficient samples' first
        // (they go up in one copy).
        let staged_len = |i: usize| match routes[i] {
            Route::Coef { layout, .. } => layout.coefficients * 2,
            _ => out.meta().byte_range(i).len(),
        };
        let mut cpu_idx: Vec<usize> = (0..n).filter(|&i| !on_hw[i]).collect();
        cpu_idx.sort_by_key(|&i| !matches!(routes[i], Route::Coef { .. }));
        let coef_count = cpu_idx.iter().take_while(|&&i| matches!(routes[i], Route::Coef { .. })).count();
        let coef_bytes: usize = cpu_idx[..coef_count].iter().map(|&i| staged_len(i)).sum();
        let total: usize = cpu_idx.iter().map(|&i| staged_len(i)).sum();
        let slot = &mut self.staging[self.turn];
        if !cpu_idx.is_empty() {
            self.turn = (self.turn + 1) % STAGING_DEPTH;
            if let Some(done) = slot.done.take() {
                done.synchronize()?; // its previous upload must have left before we overwrite it
            }
            if slot.buf.as_ref().is_none_or(|b| b.len() < total) {
                slot.buf = None;
                slot.buf = Some(PinnedBuffer::alloc(ws.device, total + total / 4)?);
            }
        }
        let mut chunks: Vec<(usize, &mut [u8])> = Vec::with_capacity(cpu_idx.len());
        if let Some(buf) = slot.buf.as_mut().filter(|_| !cpu_idx.is_empty()) {
            let mut rest = &mut buf.as_mut_slice()[..total];
            for &i in &cpu_idx {
                let (c, r) = rest.split_at_mut(staged_len(i));
                chunks.push((i, c));
                rest = r;
            }
        }
        let (ctx, params, iteration) = (&self.ctx, self.params, ws.iteration);
        let at = |i: usize| ctx.at(iteration, i, input.source_info(i));
        let t_setup = t0.elapsed();
        // One sample at a time to whichever worker is free, the costliest first (greedy
        // longest-processing-time order): the CPU share is only ~6 images per worker, and
        // windows differ ~5x in cost, so the batch otherwise waits for an unlucky worker.
        // Cost: the bytes libjpeg must entropy-decode (a cropped decode stops below its window).
        let cost = |i: usize| -> usize {
            match routes[i] {
                Route::Cpu { window: Some(r), .. } => data[i].len() * (r.y + r.height) / infos[i].height.max(1),
                _ => data[i].len(),
            }
        };
        let mut order: Vec<usize> = (0..chunks.len()).collect();
        if costliest_first() {
            order.sort_by_key(|&k| std::cmp::Reverse(cost(chunks[k].0)));
        }
        // Per sample: its index, its staging and, once decoded, what it left there. The lock
        // only hands the slice to whichever worker takes the sample; nobody else touches it.
        type Item<'s> = (usize, &'s mut [u8], Option<Result<Staged>>);
        let work: Vec<std::sync::Mutex<Item>> = chunks.into_iter().map(|(i, dst)| std::sync::Mutex::new((i, dst, None))).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let decode_one = |i: usize, dst: &mut [u8]| -> Result<Staged> {
            let (window, denom) = match routes[i] {
                Route::Cpu { window, denom } => (window, denom),
                Route::Coef { window, layout } => {
                    let mut quant = [[0u16; 64]; 3];
                    // Staging offsets are multiples of 128 bytes from a page-aligned base.
                    let coefs: &mut [i16] = bytemuck::cast_slice_mut(dst);
                    if sluice_codecs::read_coefficients(data[i], &infos[i], &layout, coefs, &mut quant) {
                        return Ok(Staged::Coefficients(quant));
                    }
                    // Damaged or unusual after all: the full decode reports or handles it.
                    let mut px = vec![0u8; out.meta().byte_range(i).len()];
                    let p = DecodeParams { roi: Some(window), ..params };
                    sluice_codecs::decode_into(data[i], &infos[i], &p, &mut px).map_err(|e| Error::data(at(i), e.to_string()))?;
                    return Ok(Staged::Fallback(px));
                }
                _ => unreachable!("only CPU-routed samples have staging"),
            };
            let p = DecodeParams { roi: window, scale_denom: denom, ..params };
            sluice_codecs::decode_into(data[i], &infos[i], &p, dst).map_err(|e| Error::data(at(i), e.to_string()))?;
            Ok(Staged::Pixels)
        };
        if !work.is_empty() {
            ws.pool.broadcast(|_| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&w) = order.get(k) else { break };
                let mut item = work[w].lock().unwrap_or_else(|p| p.into_inner());
                let (i, dst, staged) = &mut *item;
                *staged = Some(decode_one(*i, dst));
            });
        }
        let cpu_results: Vec<Result<Staged>> =
            work.into_iter().map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()).2.expect("every sample was decoded")).collect();
        let t_cpu = t0.elapsed();
        let staged = cpu_results.into_iter().collect::<Result<Vec<Staged>>>();

        // Uploads of the CPU share, and the GPU half of the coefficient samples.
        if let (Ok(staged), false) = (&staged, cpu_idx.is_empty()) {
            let staging = slot.buf.as_ref().expect("allocated above");
            let mut coef_samples = Vec::with_capacity(coef_count);
            let mut fallbacks = false;
            let mut offset = 0;
            for (&i, st) in cpu_idx.iter().zip(staged) {
                let len = staged_len(i);
                match (st, routes[i]) {
                    (Staged::Coefficients(quant), Route::Coef { window, layout }) => {
                        coef_samples.push(CoefSample { index: i, window, layout, staged_at: offset, quant: *quant });
                    }
                    (Staged::Fallback(px), _) => {
                        // SAFETY: `px` lives in `staged` until the synchronize below.
                        unsafe { out.buffer().copy_from_host_async(out.offset(i), px)? };
                        fallbacks = true;
                    }
                    // SAFETY: the staging buffer is not touched again until `done` (recorded
                    // below, after these copies) has completed.
                    _ => unsafe { out.buffer().copy_from_host_async(out.offset(i), &staging.as_slice()[offset..offset + len])? },
                }
                offset += len;
            }
            // SAFETY: as for the copies above: the staging is released by `done`.
            unsafe { self.idct.launch(ws, &staging.as_slice()[..coef_bytes], &coef_samples, &out)? };
            slot.done = Some(ReadyEvent::record(ws.device, ws.stream)?);
            if fallbacks {
                ws.stream.synchronize().map_err(sluice_cuda::CudaError::from)?;
            }
        }
        let cpu_ok = staged.map(|_| ());

        // Order the pipeline stream after the engine's work, once its thread is done.
        if let Some(job) = engine {
            let slot = job.slot;
            let engine_result = self.collect(job);
            if let Some(dec) = &self.slots[slot].dec {
                dec.join(ws.stream)?;
            }
            let (_, fell_back) = engine_result?;
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
                "[{}] it {} n {n} hw {} cpu {}: plan {:.2} setup {:.2} cpu share {:.2} rest {:.2} ms",
                self.ctx.display_name,
                ws.iteration,
                hw_idx.len(),
                cpu_idx.len(),
                ms(t_plan),
                ms(t_setup - t_plan),
                ms(t_cpu - t_setup),
                ms(t0.elapsed() - t_cpu)
            );
        }
        Ok(out)
    }

}

/// An engine slot: a hardware decoder for batches of up to `batch_size` and its start event.
fn new_slot(nv: &NvJpeg, batch_size: usize) -> sluice_cuda::CudaResult<EngineSlot> {
    let dec = HwBatchDecoder::new(nv, batch_size.max(1))?;
    Ok(EngineSlot { dec: Some(dec), start: Arc::new(GpuEvent::new(nv.device())?) })
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
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let t = std::time::Instant::now();
        let infos = read_headers(self.dec.ctx(), &ws.host_view(), ws.cpu_inputs[0])?;
        trace_headers(self.dec.ctx(), ws.iteration, t);
        Ok(vec![self.dec.decode(ws, &infos, None, None)?])
    }

}
