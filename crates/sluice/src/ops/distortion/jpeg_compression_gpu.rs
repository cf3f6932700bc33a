//! GPU backend of `fn.jpeg_compression_distortion`: the cpu twin's plan (one entry per image
//! or frame), a descriptor per frame, and two launches of `jpeg_compression.cu` per batch:
//! the 8x8 blocks of every plane (encode and decode, into scratch planes), then the pixels
//! (upsampling and colour conversion). Equal to the cpu backend bit for bit.

use sluice_cuda::DeviceBuffer;

use super::jpeg_compression::{Frame, JpegCompressionDistortion};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("jpeg_compression.cu");

cuda_struct! {
    /// One frame (`struct JpegFrame` in jpeg_compression.cu).
    pub(super) struct JpegFrame {
        r#in: u64,
        out: u64,
        scratch: u64,
        width: i32,
        height: i32,
        quality: i32,
        pad: i32,
    }
}

/// Bytes of the decoded Y, Cb and Cr planes of a frame: whole 8x8 blocks of Y, and of the
/// two half-resolution chroma planes (`JpegPlanes` in the kernel).
pub(super) fn scratch_bytes(f: &Frame) -> usize {
    let luma = f.width.div_ceil(8) * f.height.div_ceil(8);
    let chroma = f.width.div_ceil(16) * f.height.div_ceil(16);
    64 * (luma + 2 * chroma)
}

/// The 8x8 blocks the first launch computes for `f`.
fn blocks(f: &Frame) -> usize {
    scratch_bytes(f) / 64
}

/// The descriptors of `frames`: pixels at `input(f)` / `output(f)`, scratch planes from
/// `scratch` on, each frame's after the previous one's.
pub(super) fn describe(frames: &[Frame], input: impl Fn(&Frame) -> u64, output: impl Fn(&Frame) -> u64, scratch: u64) -> Vec<JpegFrame> {
    let mut at = scratch;
    frames
        .iter()
        .map(|f| {
            let d = JpegFrame { r#in: input(f), out: output(f), scratch: at, width: f.width as i32, height: f.height as i32, quality: f.quality, pad: 0 };
            at += scratch_bytes(f) as u64;
            d
        })
        .collect()
}

pub(super) struct JpegCompressionGpu {
    op: JpegCompressionDistortion,
    params: ParamUpload,
}

impl JpegCompressionGpu {
    pub(super) fn new(op: JpegCompressionDistortion) -> JpegCompressionGpu {
        JpegCompressionGpu { op, params: ParamUpload::default() }
    }
}

impl GpuOperator for JpegCompressionGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let frames = self.op.plan(&ws.host_view(), input.meta())?;
        let mut meta = input.meta().clone();
        meta.name_guessed_layout();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        if frames.is_empty() {
            return Ok(vec![out]);
        }
        let scratch = DeviceBuffer::alloc(ws.device, ws.stream, frames.iter().map(scratch_bytes).sum()).map_err(Error::from)?;
        let desc = describe(&frames, |f| input.sample_ptr(f.sample) + f.offset as u64, |f| out.sample_ptr(f.sample) + f.offset as u64, scratch.device_ptr());
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let kernels = ws.device.kernels();
        let (ctx, cc) = (ws.device.context(), ws.device.compute_capability());
        let max_blocks = frames.iter().map(blocks).max().unwrap_or(0);
        let max_pixels = frames.iter().map(|f| f.width * f.height).max().unwrap_or(0);
        for (name, items) in [("jpeg_distortion_blocks", max_blocks), ("jpeg_distortion_pixels", max_pixels)] {
            let f = kernels.function(ctx, cc, "jpeg_compression", SRC, name)?;
            // SAFETY: every descriptor points at a frame of `input` and `out` (alive, ordered
            // on this stream) of width * height * 3 bytes, and at its own scratch planes of
            // `scratch_bytes` (freed on the stream, after these launches); the second launch
            // reads what the first wrote, in stream order.
            unsafe {
                launch_records::<JpegFrame>(&ws.stream, &f, base, desc.len(), items)?;
            }
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::JPEG_COMPRESSION_DISTORTION;
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::testing;
    use crate::ops::ArgValue;
    use crate::tensor::{DType, TensorList};

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("jpeg_compression", SRC, &[("JpegFrame", &JpegFrame::LAYOUT)]);
    }

    fn harness() -> &'static PerSampleKernels {
        static K: OnceLock<PerSampleKernels> = OnceLock::new();
        K.get_or_init(|| PerSampleKernels::build("jpeg_compression", SRC, "JpegFrame", &["in"], &["out", "scratch"], &["jpeg_distortion_blocks", "jpeg_distortion_pixels"]))
    }

    /// A smooth image with noise and hard edges (so every quality leaves artefacts, and
    /// clamping in both colour conversions is reached).
    fn image(h: usize, w: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761) | 1;
        let mut v = Vec::with_capacity(h * w * 3);
        for y in 0..h {
            for x in 0..w {
                for c in 0..3 {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    let smooth = ((x * (c + 1) * 7 + y * 5) % 256) as i32;
                    let edge = if (x / 5 + y / 3) % 2 == 0 { 90 } else { -90 };
                    v.push((smooth + edge + (state % 41) as i32 - 20).clamp(0, 255) as u8);
                }
            }
        }
        v
    }

    #[test]
    fn the_kernels_run_on_the_host_equal_the_cpu_backend() {
        // Sizes on and off the 8 and 16 grids, down to 1 pixel (chroma planes 1 and 2 wide
        // upsample by replication), and a 3-frame sequence.
        let shapes: Vec<Vec<usize>> = vec![vec![17, 23, 3], vec![1, 1, 3], vec![2, 5, 3], vec![9, 4, 3], vec![16, 16, 3], vec![33, 7, 3], vec![0, 5, 3], vec![5, 6, 3], vec![40, 31, 3]];
        let qualities = [1, 5, 30, 50, 51, 75, 90, 99, 100];
        let data: Vec<Vec<u8>> = shapes.iter().enumerate().map(|(i, s)| image(s[0], s[1], i as u32 + 1)).collect();
        let x = TensorList::from_samples(&shapes, &data).with_layout("HWC");
        let q = TensorList::from_samples(&vec![vec![]; shapes.len()], &qualities.map(|v| vec![v]));
        let seq_shapes = vec![vec![3, 13, 19, 3], vec![2, 8, 8, 3]];
        let seq_data: Vec<Vec<u8>> = seq_shapes.iter().enumerate().map(|(i, s)| image(s[0] * s[1], s[2], 50 + i as u32)).collect();
        let seq = TensorList::from_samples(&seq_shapes, &seq_data).with_layout("FHWC");
        let cases: Vec<(&TensorList, Vec<(&str, ArgValue)>, bool)> = vec![(&x, vec![], true), (&x, vec![("quality", ArgValue::Int(12))], false), (&seq, vec![("quality", ArgValue::Int(64))], false)];
        for (k, (x, given, per_sample)) in cases.into_iter().enumerate() {
            let inputs: &[&str] = if per_sample { &["quality"] } else { &[] };
            let args: Vec<(&'static str, &TensorList)> = if per_sample { vec![("quality", &q)] } else { vec![] };
            let ctx = testing::context(&JPEG_COMPRESSION_DISTORTION, given, inputs).unwrap();
            let mut op = JpegCompressionDistortion { ctx };
            let cpu = testing::run(&mut op, &[x], &args).unwrap().remove(0);
            let frames = testing::with_args(&args, x.len(), |ws| op.plan(ws, x.meta())).unwrap();
            let total = x.meta().total_bytes();
            let desc = describe(&frames, |f| (x.meta().offset(f.sample) + f.offset) as u64, |f| (x.meta().offset(f.sample) + f.offset) as u64, total as u64);
            let scratch: usize = frames.iter().map(scratch_bytes).sum();
            let input = &x.buffer().as_slice()[..total];
            let host = harness().run("jpeg_distortion_blocks,jpeg_distortion_pixels", bytemuck::cast_slice(&desc), desc.len(), input, total + scratch);
            let want = &cpu.buffer().as_slice()[..total];
            for i in 0..x.len() {
                let r = x.meta().byte_range(i);
                assert!(host[r.clone()] == want[r.clone()], "case {k}, sample {i} ({:?}): host-run kernels differ from libjpeg-turbo in {} of {} bytes", x.shape(i), host[r.clone()].iter().zip(&want[r.clone()]).filter(|(a, b)| a != b).count(), r.len());
            }
            assert_eq!(x.dtype(), DType::U8);
        }
    }
}
