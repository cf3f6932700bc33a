//! `decoders.image` (legacy `ImageDecoder`, `HostDecoder`): encoded bytes in, HWC images out.

use rayon::prelude::*;
use sluice_codecs::{read_info, DecodeParams, ImageInfo};

use super::MIXED_ONLY_ARGS;
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static IMAGE: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__Image",
        doc: "Decodes images (JPEG, PNG, BMP, TIFF, WebP, PNM) into HWC arrays. The format is detected from the data, not the file name. JPEG EXIF orientation is applied unless adjust_orientation=False.",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[
            &[
                arg("output_type", T::ImageType, D::Int(0), "Color space of the output: RGB, BGR, GRAY, YCbCr or ANY_DATA (the stored channels)."),
                arg("dtype", T::DType, D::Int(0), "Output type: UINT8, or FLOAT (values scaled to [0, 1])."),
                arg("adjust_orientation", T::Bool, D::Bool(true), "Apply the EXIF orientation of JPEG files."),
                arg("use_fast_idct", T::Bool, D::Bool(false), "Use libjpeg-turbo's faster, less accurate integer IDCT."),
            ],
            MIXED_ONLY_ARGS,
        ],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoder", None), ("HostDecoder", Some(Device::Cpu))],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(ImageDecoderCpu::new(ctx)?))),
    mixed: Some(|ctx, dev| Ok(Box::new(super::image_mixed::ImageDecoderMixed::new(ctx, dev)?))),
    gpu: None,
};

struct ImageDecoderCpu {
    ctx: OpContext,
    params: DecodeParams,
    dtype: DType,
}

impl ImageDecoderCpu {
    fn new(ctx: &OpContext) -> Result<ImageDecoderCpu> {
        let (params, dtype) = super::image_crop::decode_setup(ctx)?;
        Ok(ImageDecoderCpu { ctx: ctx.clone(), params, dtype })
    }
}

/// Reads every sample's header: the output shapes, so the batch can be allocated once
/// before any pixel is decoded. In parallel on the workers for the cpu decoders; on this
/// thread (`parallel` false) for the mixed ones, whose workers are busy with CPU shares in
/// the background: a header costs microseconds, while a parallel step would wait for
/// workers to finish their current image.
pub(crate) fn read_headers(ctx: &OpContext, ws: &Workspace<'_>, input: &TensorList, parallel: bool) -> Result<Vec<ImageInfo>> {
    if input.dtype() != DType::U8 || input.ndim() != 1 {
        return Err(Error::TypeMismatch {
            operator: ctx.display_name.clone(),
            message: format!(
                "input must be encoded bytes (1-D UINT8 samples, e.g. from readers.file); got {}-D {}",
                input.ndim(),
                input.dtype()
            ),
        });
    }
    let header = |i: usize| {
        let bytes = input.bytes(i);
        if bytes.is_empty() {
            return Err(Error::data(ctx.at(ws.iteration, i, input.source_info(i)), "empty input: no encoded data"));
        }
        read_info(bytes).map_err(|e| Error::data(ctx.at(ws.iteration, i, input.source_info(i)), e.to_string()))
    };
    if !parallel {
        return (0..input.len()).map(header).collect();
    }
    let infos: Vec<Result<ImageInfo>> = ws.pool.install(|| (0..input.len()).into_par_iter().map(header).collect());
    infos.into_iter().collect()
}

impl Operator for ImageDecoderCpu {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let infos = read_headers(&self.ctx, ws, input, true)?;
        let shapes: Vec<[usize; 3]> = infos
            .iter()
            .map(|info| {
                let (h, w, c) = info.output_shape(&self.params);
                [h, w, c]
            })
            .collect();
        // Every pixel is decoded into place; a failed sample fails the whole batch.
        let mut out = TensorList::for_overwrite(BatchMeta::new(self.dtype, 3, shapes.iter().map(|s| &s[..])));
        out.set_layout("HWC".into());
        out.inherit_source_info(input);
        let params = self.params;
        let ctx = &self.ctx;
        let to_float = self.dtype == DType::F32;
        crate::ops::for_each_sample(ws.pool, &mut out, |i, dst| {
            let at = || ctx.at(ws.iteration, i, input.source_info(i));
            if to_float {
                // Decode the bytes into the last quarter of the sample's float storage, then
                // widen front to back: element k is read before anything overwrites it, so no
                // scratch buffer is needed.
                let n = dst.len() / 4;
                sluice_codecs::decode_into(input.bytes(i), &infos[i], &params, &mut dst[3 * n..])
                    .map_err(|e| Error::data(at(), e.to_string()))?;
                for k in 0..n {
                    let v = dst[3 * n + k] as f32 * (1.0 / 255.0);
                    dst[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
                }
                Ok(())
            } else {
                sluice_codecs::decode_into(input.bytes(i), &infos[i], &params, dst).map_err(|e| Error::data(at(), e.to_string()))
            }
        })?;
        Ok(vec![out])
    }
}

