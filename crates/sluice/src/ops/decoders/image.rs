//! `decoders.image` (legacy `ImageDecoder`, `HostDecoder`): encoded bytes in, HWC images out.

use sluice_codecs::DecodeParams;

use super::common::{decode_sample, decode_setup, read_headers, MIXED_ONLY_ARGS};
use crate::error::Result;
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
    mixed: Some(|ctx, dev| Ok(Box::new(super::mixed::ImageDecoderMixed::new(ctx, dev)?))),
    gpu: None,
};

struct ImageDecoderCpu {
    ctx: OpContext,
    params: DecodeParams,
    dtype: DType,
}

impl ImageDecoderCpu {
    fn new(ctx: &OpContext) -> Result<ImageDecoderCpu> {
        let (params, dtype) = decode_setup(ctx)?;
        Ok(ImageDecoderCpu { ctx: ctx.clone(), params, dtype })
    }
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
        let (ctx, params, dtype) = (&self.ctx, &self.params, self.dtype);
        crate::ops::for_each_sample(ws.pool, &mut out, |i, dst| decode_sample(ctx, ws, input, i, &infos[i], params, dtype, dst))?;
        Ok(vec![out])
    }
}

