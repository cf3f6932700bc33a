//! `fn.jpeg_compression_distortion` (cpu): each RGB image (or frame) is compressed as a
//! JPEG at `quality` and decompressed, as DALI 2.4's cpu operator does with OpenCV's
//! `imencode(".jpg")` / `imdecode` (`dali/operators/image/distortion/jpeg_compression_distortion_op_cpu.cc`):
//! baseline 4:2:0, accurate integer DCT and IDCT, fancy upsampling, through the same
//! libjpeg-turbo (`sluice_codecs::jpeg_round_trip`). Checked against DALI 2.4's cpu operator
//! by `tests/test_jpeg_compression_distortion.py`.
//!
//! - `quality` per sample (an argument input or a constant), clamped to 1-100 (DALI's
//!   documentation).
//! - UINT8 HWC (or 3 dimensions without a layout) and FHWC sequences (each frame on its
//!   own), 3 channels; the output has the input's shape and layout.
//!
//! Where Sluice departs from DALI 2.4: an input with other than 3 channels, or of another
//! type, is an error naming the sample (DALI reads it as 3-channel UINT8 whatever it is).
//!
//! The gpu backend (`jpeg_compression_gpu.rs`, `jpeg_compression.cu`) computes the same round
//! trip with libjpeg-turbo's integer arithmetic, without the (lossless) entropy coding, so it
//! equals the cpu bit for bit. DALI's gpu operator uses a float DCT and differs from its own
//! cpu by a few levels (its test allows a mean difference of 5 from OpenCV).

use crate::error::{Error, Result};
use crate::ops::{for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static JPEG_COMPRESSION_DISTORTION: OpDef = OpDef {
    schema: OpSchema {
        name: "JpegCompressionDistortion",
        doc: "Introduces JPEG compression artifacts to RGB images.

JPEG is a lossy compression format which exploits characteristics of natural images and human visual system to achieve high compression ratios. The information loss originates from sampling the color information at a lower spatial resolution than the brightness and from representing high frequency components of the image with a lower effective bit depth. The conversion to frequency domain and quantization is applied independently to 8x8 pixel blocks, which introduces additional artifacts at block boundaries.

This operation produces images by subjecting the input to a transformation that mimics JPEG compression with given `quality` factor followed by decompression.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg("quality", T::Int, D::Int(50), "JPEG compression quality from 1 (lowest quality) to 100 (highest quality). Any values outside the range 1-100 will be clamped.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(JpegCompressionDistortion { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(super::jpeg_compression_gpu::JpegCompressionGpu::new(JpegCompressionDistortion { ctx: ctx.clone() })))),
};

pub(super) struct JpegCompressionDistortion {
    pub(super) ctx: OpContext,
}

/// One image of the batch to round-trip: a sample, or a frame of a sequence.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    pub sample: usize,
    /// Byte offset of the frame in its sample.
    pub offset: usize,
    pub height: usize,
    pub width: usize,
    /// 1 to 100.
    pub quality: i32,
}

impl JpegCompressionDistortion {
    /// Checks the batch and lists its non-empty frames (both backends).
    pub(super) fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Vec<Frame>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let layout = input.layout().as_str();
        let sequence = match (layout, input.ndim()) {
            ("HWC", 3) | ("", 3) => false,
            ("FHWC", 4) => true,
            _ => return Err(Error::type_mismatch(op, format!("input 0: layout \"{layout}\" ({} dimensions) does not match any of the allowed layouts: HWC, FHWC", input.ndim()))),
        };
        if input.dtype() != DType::U8 && !input.is_empty() {
            return Err(Error::data(ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {}; supported: UINT8", input.dtype())));
        }
        let quality = ws.per_sample(ctx, "quality");
        let mut frames = Vec::new();
        for i in 0..input.len() {
            let sh = input.shape(i);
            let (count, hwc) = if sequence { (sh[0], &sh[1..]) } else { (1, sh) };
            let (height, width, c) = (hwc[0], hwc[1], hwc[2]);
            if c != 3 {
                return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("expects RGB images (3 channels), got shape {sh:?}")));
            }
            let quality = quality.get(op, i)?.unwrap_or(50.0).clamp(1.0, 100.0) as i32;
            if height == 0 || width == 0 {
                continue;
            }
            if width > i32::MAX as usize || height > i32::MAX as usize {
                return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("{width}x{height} is too large to encode")));
            }
            frames.extend((0..count).map(|f| Frame { sample: i, offset: f * height * width * 3, height, width, quality }));
        }
        Ok(frames)
    }
}

impl Operator for JpegCompressionDistortion {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let frames = self.plan(ws, input.meta())?;
        let ctx = &self.ctx;
        let mut meta = input.meta().clone();
        meta.name_guessed_layout();
        let mut out = TensorList::for_overwrite(meta);
        // Each sample's frames are consecutive in `frames`.
        let first: Vec<usize> = (0..=input.len()).map(|i| frames.partition_point(|f| f.sample < i)).collect();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let src = input.bytes(i);
            for f in &frames[first[i]..first[i + 1]] {
                let range = f.offset..f.offset + f.height * f.width * 3;
                sluice_codecs::jpeg_round_trip(&src[range.clone()], f.width, f.height, f.quality, &mut dst[range])
                    .map_err(|e| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), format!("JPEG round trip failed: {}", e.message())))?;
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
