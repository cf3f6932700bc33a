//! `decoders.image_random_crop` (legacy `ImageDecoderRandomCrop`): decodes only a random
//! window of each image, the window drawn as DALI's `RandomCropGenerator` draws it (see
//! [`super::random_crop_window`]) with Sluice's per-sample random streams.

use sluice_codecs::{DecodeParams, Roi};

use super::image_crop::{decode_setup, decode_windows, DECODE_ARGS};
use super::random_crop_window::{RandomCropParams, RANDOM_CROP_ARGS};
use super::MIXED_ONLY_ARGS;
use crate::error::Result;
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, TensorList};

/// Schema and backends.
pub static IMAGE_RANDOM_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__ImageRandomCrop",
        doc: "Decodes images and crops them to a random window (area in random_area of the image, aspect ratio in random_aspect_ratio, drawn as DALI's RandomCropGenerator). Only the window is decoded where the format allows (JPEG).",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        args: &[DECODE_ARGS, RANDOM_CROP_ARGS, MIXED_ONLY_ARGS, &[arg(
            "_downscale_to",
            T::IntList,
            D::Optional,
            "Set by the graph, not by users: [H, W] of the fixed-size resize this decoder feeds, so large windows decode at 1/2, 1/4 or 1/8 scale.",
        )]],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoderRandomCrop", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(ImageRandomCropCpu::new(ctx)?))),
    mixed: None,
    gpu: None,
};

struct ImageRandomCropCpu {
    ctx: OpContext,
    params: DecodeParams,
    dtype: DType,
    gen: RandomCropParams,
    downscale_to: Option<[usize; 2]>,
}

impl ImageRandomCropCpu {
    fn new(ctx: &OpContext) -> Result<ImageRandomCropCpu> {
        let (params, dtype) = decode_setup(ctx)?;
        let downscale_to = ctx.args.has("_downscale_to").then(|| {
            let t = ctx.args.ints("_downscale_to");
            [t[0].max(1) as usize, t[1].max(1) as usize]
        });
        Ok(ImageRandomCropCpu { ctx: ctx.clone(), params, dtype, gen: RandomCropParams::from_args(ctx)?, downscale_to })
    }
}

impl Operator for ImageRandomCropCpu {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let out = decode_windows(ctx, ws, &self.params, self.dtype, self.downscale_to, |i, _, (h, w)| {
            let c = self.gen.window(&mut ws.rng(ctx, i), h, w);
            Ok(Roi { x: c.x, y: c.y, width: c.w, height: c.h })
        })?;
        Ok(vec![out])
    }
}
