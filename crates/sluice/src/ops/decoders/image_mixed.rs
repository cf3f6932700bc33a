//! `decoders.image` with device="mixed": encoded bytes on the host in, HWC uint8 images on
//! the GPU out. Baseline JPEGs go to the GPU's hardware JPEG engine in one batched call
//! (`hw_decoder_load` of them); the rest (progressive files, other formats, EXIF-rotated or
//! non-RGB outputs, and the share kept off the engine) are decoded by libjpeg-turbo on the
//! pipeline's CPU workers while the engine runs, into pinned memory, and uploaded.

use std::sync::Arc;

use rayon::prelude::*;
use sluice_codecs::{ColorSpace, DecodeParams, ImageFormat, ImageInfo};
use sluice_cuda::nvjpeg::{self, HwBatchDecoder, NvJpeg};
use sluice_cuda::{GpuDevice, PinnedBuffer};

use super::color_space;
use super::image::read_headers;
use crate::error::{Error, Result};
use crate::ops::{GpuOperator, GpuWorkspace, OpContext};
use crate::tensor::{BatchMeta, DType, ReadyEvent, TensorListGpu};

/// Pinned staging for CPU-decoded samples, with the event after which its last upload
/// finished (so it can be overwritten).
struct Staging {
    buf: Option<PinnedBuffer>,
    done: Option<ReadyEvent>,
}

pub(super) struct ImageDecoderMixed {
    ctx: OpContext,
    params: DecodeParams,
    hw: Option<HwBatchDecoder>,
    hw_load: f64,
    /// Two staging buffers used alternately, so decoding batch n+1 overlaps batch n's upload.
    staging: [Staging; 2],
    turn: usize,
}

impl ImageDecoderMixed {
    pub(super) fn new(ctx: &OpContext, device: &Arc<GpuDevice>) -> Result<ImageDecoderMixed> {
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
        let hw = if hw_load > 0.0 && nvjpeg::library_present() {
            NvJpeg::hardware(device).and_then(|nv| HwBatchDecoder::new(&nv, ctx.batch_size)).ok()
        } else {
            None
        };
        let params = DecodeParams {
            color,
            adjust_orientation: ctx.args.bool("adjust_orientation"),
            fast_idct: ctx.args.bool("use_fast_idct"),
            ..DecodeParams::default()
        };
        let staging = [Staging { buf: None, done: None }, Staging { buf: None, done: None }];
        Ok(ImageDecoderMixed { ctx: ctx.clone(), params, hw, hw_load, staging, turn: 0 })
    }

    /// Which samples the hardware engine takes: complete baseline colour JPEGs it supports,
    /// stored upright, decoded to RGB, up to `hw_decoder_load` of the batch. The cheap checks
    /// run on all workers; nvJPEG's own header check only on the candidates it needs.
    fn plan_hw(&mut self, ws: &GpuWorkspace<'_>, data: &[&[u8]], infos: &[ImageInfo]) -> Vec<bool> {
        let mut on_hw = vec![false; data.len()];
        let Some(hw) = self.hw.as_mut() else { return on_hw };
        if self.params.color != ColorSpace::Rgb {
            return on_hw;
        }
        let adjust = self.params.adjust_orientation;
        let candidate: Vec<bool> = ws.pool.install(|| {
            (0..data.len())
                .into_par_iter()
                .map(|i| {
                    let info = &infos[i];
                    // Grayscale JPEGs come out wrong from the engine with interleaved RGB
                    // output (seen on an H200 with nvJPEG 13), and a truncated file decodes
                    // into garbage without an error: both stay on the CPU path.
                    info.format == ImageFormat::Jpeg
                        && info.channels == 3
                        && (!adjust || info.orientation.to_exif() == 1)
                        && sluice_codecs::jpeg_is_complete(data[i])
                })
                .collect()
        });
        let quota = (self.hw_load * data.len() as f64).round() as usize;
        let mut taken = 0;
        for i in 0..data.len() {
            if taken == quota {
                break;
            }
            if candidate[i] && hw.supported(data[i]) {
                on_hw[i] = true;
                taken += 1;
            }
        }
        on_hw
    }
}

impl GpuOperator for ImageDecoderMixed {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.cpu_inputs[0];
        let infos = read_headers(&self.ctx, &ws.host_view(), input)?;
        let shapes: Vec<[usize; 3]> = infos
            .iter()
            .map(|info| {
                let (h, w, c) = info.output_shape(&self.params);
                [h, w, c]
            })
            .collect();
        let mut meta = BatchMeta::new(DType::U8, 3, shapes.iter().map(|s| &s[..]));
        meta.set_layout("HWC".into());
        meta.inherit_source_info(input.meta());
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;

        let data: Vec<&[u8]> = (0..input.len()).map(|i| input.bytes(i)).collect();
        let on_hw = self.plan_hw(ws, &data, &infos);

        // 1. Queue the hardware decode first: the engine works while the CPU decodes the rest.
        if let Some(hw) = self.hw.as_mut() {
            let idx: Vec<usize> = (0..data.len()).filter(|&i| on_hw[i]).collect();
            if !idx.is_empty() {
                let images: Vec<&[u8]> = idx.iter().map(|&i| data[i]).collect();
                let outputs: Vec<(u64, usize)> = idx.iter().map(|&i| (out.sample_ptr(i), shapes[i][1] * 3)).collect();
                // SAFETY: every output pointer addresses a sample of `out`, allocated on this
                // stream with room for h * w * 3 bytes at pitch w * 3; `data` outlives the call.
                unsafe { hw.decode(&images, &outputs, ws.stream) }.map_err(|e| {
                    let first = idx[0];
                    Error::data(
                        self.ctx.at(ws.iteration, first, input.source_info(first)),
                        format!("hardware JPEG decoding of {} images failed: {e}", idx.len()),
                    )
                })?;
            }
        }

        // 2. Everything else: libjpeg-turbo / image-rs on the CPU workers, into pinned memory.
        let cpu_idx: Vec<usize> = (0..data.len()).filter(|&i| !on_hw[i]).collect();
        if !cpu_idx.is_empty() {
            let total: usize = cpu_idx.iter().map(|&i| out.meta().byte_range(i).len()).sum();
            let slot = &mut self.staging[self.turn];
            self.turn ^= 1;
            if let Some(done) = slot.done.take() {
                done.synchronize()?; // its previous upload must have left before we overwrite it
            }
            if slot.buf.as_ref().is_none_or(|b| b.len() < total) {
                slot.buf = None;
                slot.buf = Some(PinnedBuffer::alloc(ws.device, total + total / 4)?);
            }
            let staging = slot.buf.as_mut().expect("allocated above");
            let mut chunks: Vec<(usize, &mut [u8])> = Vec::with_capacity(cpu_idx.len());
            let mut rest = &mut staging.as_mut_slice()[..total];
            for &i in &cpu_idx {
                let (c, r) = rest.split_at_mut(out.meta().byte_range(i).len());
                chunks.push((i, c));
                rest = r;
            }
            let (ctx, params, iteration) = (&self.ctx, self.params, ws.iteration);
            let results: Vec<Result<()>> = ws.pool.install(|| {
                chunks
                    .par_iter_mut()
                    .map(|(i, dst)| {
                        sluice_codecs::decode_into(data[*i], &infos[*i], &params, dst)
                            .map_err(|e| Error::data(ctx.at(iteration, *i, input.source_info(*i)), e.to_string()))
                    })
                    .collect()
            });
            results.into_iter().collect::<Result<()>>()?;
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
        Ok(vec![out])
    }
}
