//! `fn.peek_image_shape` (and `fn.experimental.peek_image_shape`): the `[H, W, C]` shape an
//! encoded image decodes to, from its header alone (no pixel is decoded), as DALI 2.4's cpu
//! operator gives it: oriented by EXIF unless `adjust_orientation=False`, with the channels
//! of `image_type` (3 for RGB/BGR/YCbCr, 1 for GRAY, the stored ones for ANY_DATA), in
//! `dtype` (INT64 by default; INT32, UINT32, INT64, UINT64, FLOAT or FLOAT64). The shape is
//! what `decoders.image` with the same arguments outputs: both ask the codec's
//! `ImageInfo::output_shape`. Headers are read by the decoders' own `read_infos`, so a bad
//! file fails with the same error naming the operator, the sample and the file.

use sluice_codecs::DecodeParams;

use super::common::{color_space, read_infos};
use crate::error::Result;
use crate::ops::shapes::{check_output_type, write_shape};
use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

const ARGS: &[ArgSchema] = &[
    arg("dtype", T::DType, D::Int(DType::I64 as i64), "Data type, to which the sizes are converted."),
    arg("adjust_orientation", T::Bool, D::Bool(true), "Use the EXIF orientation metadata when calculating the shape."),
    arg("image_type", T::ImageType, D::Int(0), "Color format of the image."),
];

const fn schema(name: &'static str, doc: &'static str) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.peek_image_shape`.
pub static PEEK_IMAGE_SHAPE: OpDef = OpDef {
    schema: schema("PeekImageShape", "Obtains the shape of the encoded image: the shape it would have after decoding."),
    cpu: Some(|ctx| Ok(Box::new(PeekImageShape::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// `fn.experimental.peek_image_shape`: the same operator under DALI's imgcodec name.
pub static EXPERIMENTAL_PEEK_IMAGE_SHAPE: OpDef = OpDef {
    schema: schema("experimental__PeekImageShape", "Obtains the shape of the encoded image: the shape it would have after decoding."),
    cpu: Some(|ctx| Ok(Box::new(PeekImageShape::new(ctx)?))),
    mixed: None,
    gpu: None,
};

struct PeekImageShape {
    ctx: OpContext,
    dtype: DType,
    params: DecodeParams,
}

impl PeekImageShape {
    fn new(ctx: &OpContext) -> Result<PeekImageShape> {
        let dtype = ctx.args.dtype("dtype");
        check_output_type(ctx, dtype)?;
        let params = DecodeParams {
            color: color_space(&ctx.display_name, ctx.args.int("image_type"))?,
            adjust_orientation: ctx.args.bool("adjust_orientation"),
            ..DecodeParams::default()
        };
        Ok(PeekImageShape { ctx: ctx.clone(), dtype, params })
    }
}

impl Operator for PeekImageShape {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let infos = read_infos(&self.ctx, ws, input, true)?;
        let mut meta = BatchMeta::new(self.dtype, 1, std::iter::repeat_n(&[3usize][..], input.len()));
        meta.inherit_source_info(input.meta());
        let mut out = TensorList::for_overwrite(meta); // every element is written below
        for (bytes, info) in out.samples_mut().into_iter().zip(&infos) {
            let (h, w, c) = info.output_shape(&self.params);
            write_shape(&[h, w, c], self.dtype, bytes);
        }
        Ok(vec![out])
    }
}
