//! `decoders.image_slice` (legacy `ImageDecoderSlice`): decodes only a slice of each image,
//! given as `fn.slice`'s window (`ops/slice`, one home for DALI's slice arithmetic): named
//! arguments, or the `anchor` and `shape` inputs (per sample one value per axis, axes in
//! `axes` / `axis_names` order, default "WH": x first, normalized by default). The slice must
//! lie inside the (oriented) image and may cut H and W only.

use sluice_codecs::Roi;

use super::common::{PlaceWindow, DECODE_ARGS, MIXED_ONLY_ARGS};
use super::window::{WindowDecoderCpu, WindowDecoderMixed};
use crate::error::{Error, Result};
use crate::ops::crop::window::Span;
use crate::ops::slice::{Slice, SLICE_WINDOW_ARGS};
use crate::ops::{Device, OpContext, OpDef, OpSchema, Workspace};

/// Schema and backends.
pub static IMAGE_SLICE: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__ImageSlice",
        doc: "Decodes images and slices them. The slice is given as in `fn.slice`: by named arguments (`start`/`rel_start` with `end`/`rel_end`/`shape`/`rel_shape`), or by the positional inputs (data, anchor, shape), one value per sliced axis (default axes \"WH\"), normalized by default. Only the slice is decoded where the format allows (JPEG).",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 1,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[],
        args: &[DECODE_ARGS, SLICE_WINDOW_ARGS, MIXED_ONLY_ARGS],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoderSlice", None)],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(WindowDecoderCpu::new(ctx, SliceWindow(Slice::new(ctx)?))?))),
    mixed: Some(|ctx, dev| Ok(Box::new(WindowDecoderMixed::new(ctx, dev, SliceWindow(Slice::new(ctx)?))?))),
    gpu: None,
};

/// `image_slice`'s window: `fn.slice`'s, over the oriented HWC image.
struct SliceWindow(Slice);

impl PlaceWindow for SliceWindow {
    fn place(&self, ctx: &OpContext, ws: &Workspace<'_>, i: usize, (h, w): (usize, usize)) -> Result<Roi> {
        let data = ws.inputs[0];
        let positional = (ws.inputs.len() == 3).then(|| (ws.inputs[1], ws.inputs[2]));
        let mode = self.0.mode(ws.inputs.len(), positional)?;
        let (mut axes, mut spans) = (Vec::with_capacity(3), Vec::with_capacity(3));
        // The channels are not known before decoding; a slice of them is refused below.
        let source = data.source_info(i);
        self.0.sample_window(ws, mode, positional, i, &[h, w, 3], "HWC", source, &mut axes, &mut spans)?;
        let (y, x, c) = (spans[0], spans[1], spans[2]);
        if c != Span::full(3) {
            return Err(Error::arg(&ctx.display_name, "axes", "only H and W of an image can be sliced"));
        }
        if y.len == 0 || x.len == 0 {
            return Err(Error::data(ctx.at(ws.iteration, i, source), format!("the slice (rows {}..{}, columns {}..{}) of the {h}x{w} (HxW) image is empty", y.anchor, y.anchor + y.len as i64, x.anchor, x.anchor + x.len as i64)));
        }
        Ok(Roi { x: x.anchor as usize, y: y.anchor as usize, width: x.len, height: y.len })
    }
}
