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

use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, push, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("jpeg_idct.cu");

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

/// One sample whose coefficients are on the GPU: where they are, the window they decode
/// to, and its quantization tables.
pub(super) struct CoefSample {
    pub index: usize,
    pub window: Roi,
    pub layout: CoefLayout,
    /// Device address of its run of coefficients (as `read_coefficients` lays them out).
    pub coefs: u64,
    pub quant: [[u16; 64]; 3],
}

cuda_struct! {
    /// One component's blocks to transform (`struct Plane` in jpeg_idct.cu).
    pub(super) struct Plane {
        /// bw * bh blocks of 64 int16 (natural order, row-major blocks).
        coefs: u64,
        /// (bw * 8) x (bh * 8) samples, rows bw * 8 bytes apart.
        out: u64,
        blocks: i64,
        bw: i32,
        pad: i32,
        /// Natural order.
        quant: [u16; 64],
    }
}

cuda_struct! {
    /// Where a sample's component is in its plane (`struct Comp` in jpeg_idct.cu).
    pub(super) struct Comp {
        plane: u64,
        pitch: i32,
        x0: i32,
        y0: i32,
        width: i32,
        height: i32,
        h_up: i32,
        v_up: i32,
        pad: i32,
    }
}

cuda_struct! {
    /// One sample's colour conversion (`struct Sample` in jpeg_idct.cu).
    pub(super) struct IdctSample {
        dst: u64,
        x: i32,
        y: i32,
        w: i32,
        h: i32,
        ncomp: i32,
        pad: i32,
        comp: [Comp; 3],
    }
}

/// Per-batch descriptors and their upload ring.
#[derive(Default)]
pub(super) struct GpuIdct {
    params: ParamUpload,
    block: Vec<u8>,
}

/// A group of samples decoded together (their planes share one buffer, reused by the next
/// group in stream order): where its descriptors start, and its launch sizes.
pub(super) struct IdctGroup {
    planes_at: u64,
    n_planes: usize,
    max_blocks: usize,
    samples_at: u64,
    n_samples: usize,
    max_pixels: usize,
}

/// The plane bytes (one byte per coefficient) the IDCT of `s` writes.
pub(super) fn plane_bytes(s: &CoefLayout) -> usize {
    (0..s.components).map(|c| s.blocks(c) * 64).sum()
}

impl GpuIdct {
    /// Builds and uploads the descriptors of every group (`groups`: ranges of `samples`),
    /// all groups' planes at `planes` (room for the largest group: groups run one after the
    /// other on `ws.stream`). Returns each group's launch, to pass to [`launch`](Self::launch).
    pub(super) fn prepare(&mut self, ws: &GpuWorkspace<'_>, samples: &[CoefSample], groups: &[std::ops::Range<usize>], planes: u64, out: &TensorListGpu) -> Result<Vec<IdctGroup>> {
        // Descriptors: per group, every component's plane (struct Plane), then every sample
        // (struct Sample).
        self.block.clear();
        let mut plan = Vec::with_capacity(groups.len());
        for range in groups {
            let group = &samples[range.clone()];
            let planes_at = self.block.len() as u64;
            let (mut plane_at, mut n_planes, mut max_blocks, mut max_pixels) = (0usize, 0usize, 0usize, 0usize);
            let mut plane_ptrs = Vec::with_capacity(group.len() * 3);
            for s in group {
                for c in 0..s.layout.components {
                    let g = &s.layout.comp[c];
                    let blocks = g.bw * g.bh;
                    push(&mut self.block, Plane {
                        coefs: s.coefs + (g.offset * 2) as u64,
                        out: planes + plane_at as u64,
                        blocks: blocks as i64,
                        bw: g.bw as i32,
                        pad: 0,
                        quant: s.quant[c],
                    });
                    plane_ptrs.push(planes + plane_at as u64);
                    plane_at += blocks * 64;
                    n_planes += 1;
                    max_blocks = max_blocks.max(blocks);
                }
            }
            let samples_at = self.block.len() as u64;
            let mut k = 0;
            for s in group {
                let w = s.window;
                let comp = std::array::from_fn(|c| {
                    let c = c.min(s.layout.components - 1);
                    let g = &s.layout.comp[c];
                    Comp {
                        plane: plane_ptrs[k + c],
                        pitch: (g.bw * 8) as i32,
                        x0: (g.bx0 * 8) as i32,
                        y0: (g.by0 * 8) as i32,
                        width: g.width as i32,
                        height: g.height as i32,
                        h_up: g.h_up as i32,
                        v_up: g.v_up as i32,
                        pad: 0,
                    }
                });
                push(&mut self.block, IdctSample {
                    dst: out.sample_ptr(s.index),
                    x: w.x as i32,
                    y: w.y as i32,
                    w: w.width as i32,
                    h: w.height as i32,
                    ncomp: s.layout.components as i32,
                    pad: 0,
                    comp,
                });
                k += s.layout.components;
                max_pixels = max_pixels.max(w.width * w.height);
            }
            plan.push(IdctGroup { planes_at, n_planes, max_blocks, samples_at, n_samples: group.len(), max_pixels });
        }
        let base = self.params.upload(ws, &self.block)?;
        for g in &mut plan {
            g.planes_at += base;
            g.samples_at += base;
        }
        Ok(plan)
    }

    /// Queues the IDCT and the colour pass of one group, which write each sample's window
    /// into its slot of the `out` given to `prepare`.
    ///
    /// # Safety
    /// Every sample's `coefs` must hold its layout's coefficients on the device (written by
    /// work queued on `ws.stream` before this call), the planes given to `prepare` must be
    /// allocated, and both stay so until these launches have run (a buffer freed in
    /// `ws.stream`'s order after the call is).
    pub(super) unsafe fn launch(&self, ws: &GpuWorkspace<'_>, g: &IdctGroup) -> Result<()> {
        if g.n_samples == 0 {
            return Ok(());
        }
        let kernels = ws.device.kernels();
        let idct = kernels.function(ws.device.context(), ws.device.compute_capability(), "jpeg_idct", SRC, "idct_islow")?;
        let color = kernels.function(ws.device.context(), ws.device.compute_capability(), "jpeg_idct", SRC, "ycc_to_rgb")?;
        // SAFETY: every descriptor points into a sample's coefficients, the planes or the
        // output (see the contract), with the sizes the layouts give; the kernels stay
        // inside them.
        unsafe {
            launch_records::<Plane>(&ws.stream, &idct, g.planes_at, g.n_planes, g.max_blocks)?;
            launch_records::<IdctSample>(&ws.stream, &color, g.samples_at, g.n_samples, g.max_pixels)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("jpeg_idct", SRC, &[("Plane", &Plane::LAYOUT), ("Comp", &Comp::LAYOUT), ("Sample", &IdctSample::LAYOUT)]);
    }
}
