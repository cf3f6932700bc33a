//! `decoders.image_random_crop` (legacy `ImageDecoderRandomCrop`): decodes only a random
//! window of each image, the window drawn as DALI's `RandomCropGenerator` draws it (see
//! [`super::random_crop_window`]) with Sluice's per-sample random streams.

use sluice_codecs::Roi;

use super::common::{PlaceWindow, DECODE_ARGS, MIXED_ONLY_ARGS};
use super::window::{WindowDecoderCpu, WindowDecoderMixed};
use super::random_crop_window::{RandomCropParams, RANDOM_CROP_ARGS};
use crate::error::Result;
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};

/// Schema and backends.
pub static IMAGE_RANDOM_CROP: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__ImageRandomCrop",
        doc: "Decodes images and crops them to a random window (area in random_area of the image, aspect ratio in random_aspect_ratio, drawn as DALI's RandomCropGenerator). Only the window is decoded where the format allows (JPEG).",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[DECODE_ARGS, RANDOM_CROP_ARGS, MIXED_ONLY_ARGS, &[arg(
            "_downscale_to",
            T::IntList,
            D::Optional,
            "Set by the graph, not by users: [H, W] of the fixed-size resize this decoder feeds, so large windows decode at 1/2, 1/4 or 1/8 scale (on the CPU).",
        )]],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoderRandomCrop", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(WindowDecoderCpu::new(ctx, RandomWindow { gen: RandomCropParams::from_args(ctx)? })?))),
    mixed: Some(|ctx, dev| Ok(Box::new(WindowDecoderMixed::new(ctx, dev, RandomWindow { gen: RandomCropParams::from_args(ctx)? })?))),
    gpu: None,
};

/// `image_random_crop`'s window: drawn from the sample's random stream.
struct RandomWindow {
    gen: RandomCropParams,
}

impl PlaceWindow for RandomWindow {
    fn place(&self, ctx: &OpContext, ws: &Workspace<'_>, i: usize, (h, w): (usize, usize)) -> Result<Roi> {
        let c = self.gen.window(&mut ws.rng(ctx, i), h, w);
        Ok(Roi { x: c.x, y: c.y, width: c.w, height: c.h })
    }
}
