//! The mixed (nvJPEG) image decoders: encoded bytes on the host in, HWC uint8 images on the
//! GPU out. `decoders.image` decodes whole images; `image_random_crop`, `image_crop` and
//! `image_slice` decode a window of each (placed by the same code as their cpu twins, so
//! both backends cut the same windows).
//!
//! One batch runs three ways at once:
//! - Baseline colour JPEGs (`hw_decoder_load` of the batch) go to the GPU's hardware JPEG
//!   engine in one batched call, submitted from a thread of its own (nvJPEG's call blocks
//!   while the engine takes the work) on its own nvJPEG state and stream. Two states
//!   alternate between batches, so batch n+1 never waits for batch n's engine work.
//!   Splitting a batch into sub-batches on parallel states was measured on an H200 and is
//!   slower (rn50-crop, 16 threads: 1 part 20,770 img/s, 2 parts 17,165, 4 parts 13,379,
//!   8 parts 11,348; GPU memory grows with the parts), so [`HW_SPLIT`] is 1; the
//!   SLUICE_HW_SPLIT environment variable overrides it for experiments on other GPUs.
//! - Everything else (progressive files, other formats, EXIF-rotated or non-RGB outputs,
//!   and the share kept off the engine) is decoded by libjpeg-turbo on the remaining
//!   workers into pinned memory and uploaded; windows decode only their rows and columns,
//!   and at a DCT scale when the graph says a fixed-size resize follows.
//! - Windows of engine-decoded samples are decoded on the engine (nvjpegDecodeBatchedEx
//!   with a ROI); where nvJPEG lacks that, whole images are decoded into one scratch buffer
//!   and the windows cut out with one 2-D copy each.
//!
//! A sub-batch the engine rejects is decoded on the CPU instead, so one odd file costs
//! time, not the batch; a file the CPU cannot decode either is an error naming the sample.

use std::sync::Arc;

use rayon::prelude::*;
use sluice_codecs::{ColorSpace, DecodeParams, ImageFormat, ImageInfo, Roi};
use sluice_cuda::nvjpeg::{self, GpuEvent, HwBatchDecoder, HwTarget, HwWindow, NvJpeg};
use sluice_cuda::{DeviceBuffer, GpuDevice, PinnedBuffer};

use super::color_space;
use super::image::read_headers;
use super::image_crop::scaled_window;
use crate::error::{Error, Result};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, DType, ReadyEvent, TensorListGpu};

/// Hardware sub-batches per batch (see the module docs); each costs one nvJPEG state (and
/// its buffers) per set.
const HW_SPLIT: usize = 1;

/// Sub-batches per batch: [`HW_SPLIT`], or SLUICE_HW_SPLIT (1-16) for tuning experiments.
fn hw_split() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::env::var("SLUICE_HW_SPLIT").ok().and_then(|v| v.parse().ok()).filter(|n| (1..=16).contains(n)).unwrap_or(HW_SPLIT))
}

/// Pinned staging buffers in flight for the CPU share.
const STAGING_DEPTH: usize = 3;

/// `SLUICE_TRACE_DECODER=1` prints where each batch's host time goes (stderr).
fn trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_TRACE_DECODER").is_some_and(|v| v != "0"))
}

/// [`HW_SPLIT`] hardware decoders for sub-batches of up to `per_state` images, made side by
/// side (each allocates and pre-sizes its nvJPEG state, which takes a while).
fn new_decoders(nv: &NvJpeg, per_state: usize) -> sluice_cuda::CudaResult<Vec<HwBatchDecoder>> {
    std::thread::scope(|s| {
        let made: Vec<_> = (0..hw_split()).map(|_| s.spawn(|| HwBatchDecoder::new(nv, per_state))).collect();
        made.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(sluice_cuda::CudaError("creating a hardware JPEG decoder panicked".into()))))
            .collect()
    })
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

/// Where one sample is decoded and what lands in its output slot.
#[derive(Clone, Copy)]
enum Route {
    /// Hardware engine straight into the output: the whole image, or only a window.
    Hw { window: Option<Roi> },
    /// Hardware engine into scratch at this offset (whole image), then the window is copied
    /// out (for an nvJPEG that cannot decode windows on the engine).
    HwWindow { scratch: usize, window: Roi },
    /// libjpeg-turbo / image-rs on a worker: this window (None: whole image) at this DCT scale.
    Cpu { window: Option<Roi>, denom: u32 },
}

/// The decoding machinery shared by the mixed decoders.
pub(super) struct MixedDecoder {
    ctx: OpContext,
    params: DecodeParams,
    /// The hardware engine's handle, when there is one.
    nv: Option<NvJpeg>,
    /// Two sets of [`HW_SPLIT`] hardware decoders, used alternately batch by batch.
    hw: Vec<HwBatchDecoder>,
    hw_set: usize,
    /// The thread(s) that submit to the engine: nvJPEG's batched call blocks while the engine
    /// takes the work, so it must not occupy the pipeline's CPU workers, which decode the
    /// CPU share meanwhile.
    hw_threads: Option<rayon::ThreadPool>,
    hw_load: f64,
    /// Where the pipeline stream stood once the batch's outputs were allocated: the engine's
    /// streams start from here.
    start: Option<GpuEvent>,
    /// Staging buffers used in turn, so decoding the next batches overlaps earlier uploads
    /// (and the host does not wait for a stream still busy with the engine's work).
    staging: [Staging; STAGING_DEPTH],
    turn: usize,
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
        // decode everything on the CPU path.
        // Only the first set is made now (in parallel): the second waits for the second
        // batch, so the first batch is not held up by it.
        let per_state = ctx.batch_size.div_ceil(hw_split()).max(1);
        let nv = if hw_load > 0.0 && nvjpeg::library_present() { NvJpeg::hardware(device).ok() } else { None };
        let hw: Vec<HwBatchDecoder> = nv.as_ref().and_then(|nv| new_decoders(nv, per_state).ok()).unwrap_or_default();
        let nv = nv.filter(|_| !hw.is_empty());
        let start = if hw.is_empty() { None } else { Some(GpuEvent::new(device)?) };
        let hw_threads = if hw.is_empty() {
            None
        } else {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(hw_split()).thread_name(|i| format!("sluice-nvjpeg-{i}")).build();
            Some(pool.map_err(|e| Error::Unsupported(format!("{op}: cannot start the hardware decoder's threads: {e}")))?)
        };
        let params = DecodeParams {
            color,
            adjust_orientation: ctx.args.bool("adjust_orientation"),
            fast_idct: ctx.args.bool("use_fast_idct"),
            ..DecodeParams::default()
        };
        let staging = std::array::from_fn(|_| Staging { buf: None, done: None });
        Ok(MixedDecoder { ctx: ctx.clone(), params, nv, hw, hw_set: 0, hw_threads, hw_load, start, staging, turn: 0 })
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
        if self.hw.is_empty() || self.params.color != ColorSpace::Rgb {
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
        let engine_windows = self.hw.first().is_some_and(|d| d.decodes_windows());
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
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let scratch = if scratch_len > 0 { Some(DeviceBuffer::alloc(ws.device, ws.stream, scratch_len)?) } else { None };

        // Hardware sub-batches: where each sample goes.
        let hw_idx: Vec<usize> = (0..n).filter(|&i| on_hw[i]).collect();
        let target = |i: usize| -> HwTarget {
            let width = infos[i].width;
            match routes[i] {
                Route::HwWindow { scratch: off, .. } => {
                    HwTarget { ptr: scratch.as_ref().expect("sized above").device_ptr() + off as u64, pitch: width * 3, width, window: None }
                }
                Route::Hw { window } => HwTarget {
                    ptr: out.sample_ptr(i),
                    pitch: window.map_or(width, |r| r.width) * 3,
                    width,
                    window: window.map(|r| HwWindow { x: r.x, y: r.y, width: r.width, height: r.height }),
                },
                Route::Cpu { .. } => unreachable!("only engine-routed samples have targets"),
            }
        };
        let mut set = self.hw_set;
        self.hw_set ^= 1;
        if set == 1 && self.hw.len() == hw_split() && !hw_idx.is_empty() {
            // The second set, on first use; without it (out of memory...) one set serves.
            let per_state = self.hw[0].max_batch();
            match self.nv.as_ref().map(|nv| new_decoders(nv, per_state)) {
                Some(Ok(more)) => self.hw.extend(more),
                _ => set = 0,
            }
        }
        let set = if self.hw.len() < 2 * hw_split() { 0 } else { set };
        let chunk = hw_idx.len().div_ceil(hw_split()).max(1);
        let hw_jobs: Vec<(&mut HwBatchDecoder, &[usize])> = if hw_idx.is_empty() {
            Vec::new()
        } else {
            self.start.as_ref().expect("present with hardware decoders").record(ws.stream)?;
            self.hw.iter_mut().skip(set * hw_split()).take(hw_split()).zip(hw_idx.chunks(chunk)).collect()
        };

        // CPU share: one slice of pinned staging per sample.
        let cpu_idx: Vec<usize> = (0..n).filter(|&i| !on_hw[i]).collect();
        let total: usize = cpu_idx.iter().map(|&i| out.meta().byte_range(i).len()).sum();
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
                let (c, r) = rest.split_at_mut(out.meta().byte_range(i).len());
                chunks.push((i, c));
                rest = r;
            }
        }

        // Run both at once: the sub-batch submissions as tasks, the CPU share on the rest.
        let (ctx, params, iteration) = (&self.ctx, self.params, ws.iteration);
        let start = self.start.as_ref();
        let at = |i: usize| ctx.at(iteration, i, input.source_info(i));
        let mut hw_results: Vec<Option<String>> = vec![None; hw_jobs.len()];
        let mut hw_busy = vec![std::time::Duration::ZERO; hw_jobs.len()];
        let mut cpu_results: Vec<Result<()>> = Vec::new();
        let t_setup = t0.elapsed();
        let mut t_cpu = std::time::Duration::ZERO;
        let decode_cpu_share = |chunks: &mut Vec<(usize, &mut [u8])>| -> Vec<Result<()>> {
            ws.pool.install(|| {
                chunks
                    .par_iter_mut()
                    .map(|(i, dst)| {
                        let (window, denom) = match routes[*i] {
                            Route::Cpu { window, denom } => (window, denom),
                            _ => unreachable!("only CPU-routed samples have staging"),
                        };
                        let p = DecodeParams { roi: window, scale_denom: denom, ..params };
                        sluice_codecs::decode_into(data[*i], &infos[*i], &p, dst).map_err(|e| Error::data(at(*i), e.to_string()))
                    })
                    .collect()
            })
        };
        match &self.hw_threads {
            Some(hw_threads) if !hw_jobs.is_empty() => hw_threads.in_place_scope(|s| {
                for (((dec, idx), res), busy) in hw_jobs.into_iter().zip(hw_results.iter_mut()).zip(hw_busy.iter_mut()) {
                    let (data, target) = (&data, &target);
                    s.spawn(move |_| {
                        let t = std::time::Instant::now();
                        let images: Vec<&[u8]> = idx.iter().map(|&i| data[i]).collect();
                        let targets: Vec<HwTarget> = idx.iter().map(|&i| target(i)).collect();
                        // SAFETY: every target is a slot of `out` or `scratch` (allocated on the
                        // pipeline stream before `start` was recorded) with room for the image
                        // or window at its pitch; `data` (the input batch) outlives the
                        // iteration; the pipeline stream joins this decoder below before
                        // anything reads.
                        let r = unsafe { dec.submit(&images, &targets, start.expect("recorded above")) };
                        *res = r.err().map(|e| e.to_string());
                        *busy = t.elapsed();
                    });
                }
                // Meanwhile, on the pipeline's workers:
                let t = std::time::Instant::now();
                cpu_results = decode_cpu_share(&mut chunks);
                t_cpu = t.elapsed();
            }),
            _ => {
                let t = std::time::Instant::now();
                cpu_results = decode_cpu_share(&mut chunks);
                t_cpu = t.elapsed();
            }
        }
        let used = if hw_idx.is_empty() { 0 } else { hw_idx.len().div_ceil(chunk) };
        for dec in self.hw.iter().skip(set * hw_split()).take(used) {
            dec.join(ws.stream)?;
        }
        let t_scope = t0.elapsed();
        cpu_results.into_iter().collect::<Result<()>>()?;

        // Uploads of the CPU share.
        if !cpu_idx.is_empty() {
            let staging = slot.buf.as_ref().expect("allocated above");
            let mut offset = 0;
            for &i in &cpu_idx {
                let len = out.meta().byte_range(i).len();
                // SAFETY: the staging buffer is not touched again until `done` (recorded
                // below, after these copies) has completed.
                unsafe { out.buffer().copy_from_host_async(out.offset(i), &staging.as_slice()[offset..offset + len])? };
                offset += len;
            }
            slot.done = Some(ReadyEvent::record(ws.device, ws.stream)?);
        }
        if trace() {
            let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
            eprintln!(
                "[{}] it {} n {n} hw {} cpu {}: plan {:.2} setup {:.2} decode {:.2} (cpu share {:.2}, hw submits {:?}) uploads {:.2} ms",
                ctx.display_name,
                ws.iteration,
                hw_idx.len(),
                cpu_idx.len(),
                ms(t_plan),
                ms(t_setup - t_plan),
                ms(t_scope - t_setup),
                ms(t_cpu),
                hw_busy.iter().map(|&d| (ms(d) * 100.0).round() / 100.0).collect::<Vec<_>>(),
                ms(t0.elapsed() - t_scope)
            );
        }

        // Sub-batches the engine refused: decode those samples on the CPU instead.
        let failed: Vec<usize> = hw_results
            .iter()
            .zip(hw_idx.chunks(chunk))
            .filter(|(r, _)| r.is_some())
            .flat_map(|(_, idx)| idx.iter().copied())
            .collect();
        if !failed.is_empty() {
            self.redecode_on_cpu(ws, &failed, &routes, infos, &out)?;
        }

        // Windows of engine-decoded samples: cut out of the scratch images.
        if let Some(scratch) = &scratch {
            for &i in &hw_idx {
                if let Route::HwWindow { scratch: off, window: r } = routes[i] {
                    if failed.contains(&i) {
                        continue;
                    }
                    let pitch = infos[i].width * 3;
                    out.buffer().copy_rect_from(out.offset(i), r.width * 3, scratch, off + r.y * pitch + r.x * 3, pitch, r.width * 3, r.height)?;
                }
            }
        }
        Ok(out)
    }

    /// The slow path for samples of a failed hardware sub-batch: decode each on the workers
    /// and upload, waiting for the copies (rare: the engine's vetting happens beforehand).
    fn redecode_on_cpu(&self, ws: &GpuWorkspace<'_>, idx: &[usize], routes: &[Route], infos: &[ImageInfo], out: &TensorListGpu) -> Result<()> {
        let input = ws.cpu_inputs[0];
        let (ctx, params) = (&self.ctx, self.params);
        let decoded: Vec<Result<Vec<u8>>> = ws.pool.install(|| {
            idx.par_iter()
                .map(|&i| {
                    let roi = match routes[i] {
                        Route::HwWindow { window, .. } => Some(window),
                        Route::Hw { window } => window,
                        Route::Cpu { .. } => None,
                    };
                    let p = DecodeParams { roi, ..params };
                    let mut px = vec![0u8; out.meta().byte_range(i).len()];
                    sluice_codecs::decode_into(input.bytes(i), &infos[i], &p, &mut px)
                        .map_err(|e| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), e.to_string()))?;
                    Ok(px)
                })
                .collect()
        });
        let decoded = decoded.into_iter().collect::<Result<Vec<_>>>()?;
        for (&i, px) in idx.iter().zip(&decoded) {
            // SAFETY: `decoded` outlives the synchronize below.
            unsafe { out.buffer().copy_from_host_async(out.offset(i), px)? };
        }
        ws.stream.synchronize().map_err(|e| Error::data(self.ctx.at(ws.iteration, idx[0], input.source_info(idx[0])), e.to_string()))?;
        Ok(())
    }
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
