//! The mixed decoders' CPU share, finished on the GPU: workers only entropy-decode each JPEG
//! window's blocks (`sluice_codecs::read_coefficients`, about a quarter cheaper than a
//! whole libjpeg-turbo decode on ImageNet-like files), and two launches per batch
//! (jpeg_idct.cu) do the IDCT, fancy upsampling and colour conversion of every such sample.
//! The pixels equal libjpeg-turbo's bit for bit, so `hw_decoder_load=0` still gives exactly
//! the cpu decoder's output.
//!
//! `SLUICE_GPU_IDCT=0` turns the path off (every CPU-share sample decodes fully on the
//! CPU), for measurements.

use sluice_codecs::{CoefLayout, DecodeParams, ImageFormat, ImageInfo, Roi};
use sluice_cuda::{DeviceBuffer, PushKernelArg};

use crate::error::Result;
use crate::ops::gpu_params::{per_sample_launch, push, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::TensorListGpu;

const SRC: &str = include_str!("jpeg_idct.cu");

/// Whether the coefficient path is on (see the module docs).
pub(super) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_GPU_IDCT").is_none_or(|v| v != "0"))
}

/// The layout for finishing `window` of sample `info` on the GPU, when it qualifies: a JPEG
/// the coefficient path reproduces (see `coefficient_layout`), decoded to RGB with the
/// accurate IDCT at full scale, stored upright (or orientation ignored).
pub(super) fn plan(bytes: &[u8], info: &ImageInfo, params: &DecodeParams, window: Roi, denom: u32) -> Option<CoefLayout> {
    let upright = !params.adjust_orientation || info.orientation.to_exif() == 1;
    if info.format != ImageFormat::Jpeg || params.color != sluice_codecs::ColorSpace::Rgb || params.fast_idct || denom != 1 || !upright {
        return None;
    }
    sluice_codecs::coefficient_layout(bytes, info, window)
}

/// One sample whose coefficients are staged: where they sit in the staged run, the window
/// they decode to, and its quantization tables.
pub(super) struct CoefSample {
    pub index: usize,
    pub window: Roi,
    pub layout: CoefLayout,
    /// Byte offset of its coefficients in the staged run.
    pub staged_at: usize,
    pub quant: [[u16; 64]; 3],
}

/// Per-batch descriptors and their upload ring.
#[derive(Default)]
pub(super) struct GpuIdct {
    params: ParamUpload,
    block: Vec<u8>,
}

impl GpuIdct {
    /// Uploads `staged` (the coefficients of `samples`, one copy) and queues the IDCT and
    /// the colour pass that writes each sample's window into its slot of `out`.
    ///
    /// # Safety
    /// `staged` must stay unchanged until the stream has run the copy queued here (pinned
    /// staging released through an event recorded after this call).
    pub(super) unsafe fn launch(&mut self, ws: &GpuWorkspace<'_>, staged: &[u8], samples: &[CoefSample], out: &TensorListGpu) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let coefs = DeviceBuffer::alloc(ws.device, ws.stream, staged.len())?;
        // SAFETY: forwarded contract.
        unsafe { coefs.copy_from_host_async(0, staged)? };
        let plane_bytes: usize = samples.iter().map(|s| (0..s.layout.components).map(|c| s.layout.blocks(c) * 64).sum::<usize>()).sum();
        let planes = DeviceBuffer::alloc(ws.device, ws.stream, plane_bytes)?;

        // Descriptors: every component's plane (struct Plane), then every sample (struct Sample).
        self.block.clear();
        let (mut plane_at, mut n_planes, mut max_blocks, mut max_pixels) = (0usize, 0usize, 0usize, 0usize);
        let mut plane_ptrs = Vec::with_capacity(samples.len() * 3);
        for s in samples {
            for c in 0..s.layout.components {
                let g = &s.layout.comp[c];
                let blocks = g.bw * g.bh;
                push(&mut self.block, coefs.device_ptr() + (s.staged_at + g.offset * 2) as u64);
                push(&mut self.block, planes.device_ptr() + plane_at as u64);
                push(&mut self.block, blocks as i64);
                push(&mut self.block, g.bw as i32);
                push(&mut self.block, 0i32);
                for q in s.quant[c] {
                    push(&mut self.block, q);
                }
                plane_ptrs.push(planes.device_ptr() + plane_at as u64);
                plane_at += blocks * 64;
                n_planes += 1;
                max_blocks = max_blocks.max(blocks);
            }
        }
        let samples_at = self.block.len();
        let mut k = 0;
        for s in samples {
            let w = s.window;
            push(&mut self.block, out.sample_ptr(s.index));
            for v in [w.x, w.y, w.width, w.height, s.layout.components, 0] {
                push(&mut self.block, v as i32);
            }
            for c in 0..3 {
                let g = &s.layout.comp[c.min(s.layout.components - 1)];
                let plane = plane_ptrs[k + c.min(s.layout.components - 1)];
                push(&mut self.block, plane);
                for v in [g.bw * 8, g.bx0 * 8, g.by0 * 8, g.width, g.height, g.h_up, g.v_up, 0] {
                    push(&mut self.block, v as i32);
                }
            }
            k += s.layout.components;
            max_pixels = max_pixels.max(w.width * w.height);
        }
        let base = self.params.upload(ws, &self.block)?;
        let samples_ptr = base + samples_at as u64;
        let kernels = ws.device.kernels();
        let idct = kernels.function(ws.device.context(), ws.device.compute_capability(), "jpeg_idct", SRC, "idct_islow")?;
        let color = kernels.function(ws.device.context(), ws.device.compute_capability(), "jpeg_idct", SRC, "ycc_to_rgb")?;
        // SAFETY: every descriptor points into `coefs`, `planes` (allocated above, freed in
        // stream order after these launches) or `out`, with the sizes the layouts give; the
        // kernels stay inside them.
        unsafe {
            ws.stream.launch_builder(&idct).arg(&base).launch(per_sample_launch(max_blocks, n_planes)).map_err(sluice_cuda::CudaError::from)?;
            ws.stream
                .launch_builder(&color)
                .arg(&samples_ptr)
                .launch(per_sample_launch(max_pixels, samples.len()))
                .map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(())
    }
}
