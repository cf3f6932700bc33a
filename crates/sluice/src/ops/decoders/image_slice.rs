//! `decoders.image_slice` (legacy `ImageDecoderSlice`): decodes only a slice of each image,
//! given by the `anchor` and `shape` inputs as in DALI 2.4: per sample one value per axis,
//! axes in `axes` / `axis_names` order (default "WH": x first), normalized to the image size
//! by default (`normalized_anchor`, `normalized_shape`). The slice is
//! `[round(anchor), round(anchor + shape))` per axis (half away from zero); it must lie
//! inside the (oriented) image.

use sluice_codecs::Roi;

use super::common::{PlaceWindow, DECODE_ARGS, MIXED_ONLY_ARGS};
use super::window::{WindowDecoderCpu, WindowDecoderMixed};
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::element::load_f64;
use crate::tensor::TensorList;

const SLICE_ARGS: &[ArgSchema] = &[
    arg("axes", T::IntList, D::Optional, "Dimension indices (of HWC) that anchor and shape describe, in their order; default [1, 0] (W, H). Used instead of axis_names when given."),
    arg("axis_names", T::Str, D::Optional, "Layout letters of the dimensions that anchor and shape describe, in their order; default \"WH\"."),
    arg("normalized_anchor", T::Bool, D::Bool(true), "The anchor is a fraction of the image extent (else pixels)."),
    arg("normalized_shape", T::Bool, D::Bool(true), "The shape is a fraction of the image extent (else pixels)."),
];

/// Schema and backends.
pub static IMAGE_SLICE: OpDef = OpDef {
    schema: OpSchema {
        name: "decoders__ImageSlice",
        doc: "Decodes images and slices them: inputs (data, anchor, shape), anchor and shape holding one value per sliced axis (default axes \"WH\"), normalized by default. Only the slice is decoded where the format allows (JPEG).",
        devices: &[Device::Cpu, Device::Mixed],
        min_inputs: 3,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[],
        args: &[DECODE_ARGS, SLICE_ARGS, MIXED_ONLY_ARGS],
        arg_aliases: &[("output_dtype", "dtype"), ("image_type", "output_type")],
        legacy_names: &[("ImageDecoderSlice", None)],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(WindowDecoderCpu::new(ctx, SliceWindow::new(ctx)?)?))),
    mixed: Some(|ctx, dev| Ok(Box::new(WindowDecoderMixed::new(ctx, dev, SliceWindow::new(ctx)?)?))),
    gpu: None,
};

/// `image_slice`'s window: from the anchor and shape inputs.
struct SliceWindow {
    /// For each value of anchor/shape: 0 = H, 1 = W.
    axes: Vec<usize>,
    norm_anchor: bool,
    norm_shape: bool,
}

impl SliceWindow {
    fn new(ctx: &OpContext) -> Result<SliceWindow> {
        let op = &ctx.display_name;
        let axes: Vec<usize> = if ctx.args.has("axes") {
            ctx.args
                .ints("axes")
                .iter()
                .map(|&a| match a {
                    0 | 1 | -3 | -2 => Ok(a.rem_euclid(3) as usize),
                    _ => Err(Error::arg(op, "axes", format!("only H (0) and W (1) of an HWC image can be sliced, got axis {a}"))),
                })
                .collect::<Result<_>>()?
        } else {
            let names = ctx.args.opt_str("axis_names").unwrap_or("WH");
            names
                .chars()
                .map(|c| match c {
                    'H' => Ok(0),
                    'W' => Ok(1),
                    _ => Err(Error::arg(op, "axis_names", format!("only H and W of an HWC image can be sliced, got '{c}' in \"{names}\""))),
                })
                .collect::<Result<_>>()?
        };
        if axes.is_empty() || axes.len() > 2 || (axes.len() == 2 && axes[0] == axes[1]) {
            return Err(Error::arg(op, if ctx.args.has("axes") { "axes" } else { "axis_names" }, format!("must name H and/or W once each, got {axes:?}")));
        }
        Ok(SliceWindow {
            axes,
            norm_anchor: ctx.args.bool("normalized_anchor"),
            norm_shape: ctx.args.bool("normalized_shape"),
        })
    }
}

/// DALI's slice along one axis: `[round(a), round(a + s))` after scaling normalized values.
pub(crate) fn slice_span(extent: usize, anchor: f64, shape: f64, norm_anchor: bool, norm_shape: bool) -> (i64, i64) {
    let a = if norm_anchor { anchor * extent as f64 } else { anchor };
    let s = if norm_shape { shape * extent as f64 } else { shape };
    let start = a.round() as i64;
    let end = (a + s).round() as i64;
    (start, end - start)
}

impl PlaceWindow for SliceWindow {
    fn place(&self, ctx: &OpContext, ws: &Workspace<'_>, i: usize, (h, w): (usize, usize)) -> Result<Roi> {
        let (data, anchors, shapes) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let n_ax = self.axes.len();
        {
            let at = || ctx.at(ws.iteration, i, data.source_info(i));
            let read = |t: &TensorList, name: &str| -> Result<Vec<f64>> {
                if t.numel(i) != n_ax {
                    return Err(Error::data(at(), format!("input '{name}' must hold {n_ax} numbers (one per axis of {:?}), got shape {:?} of {}", self.axes, t.shape(i), t.dtype())));
                }
                Ok((0..n_ax).map(|k| load_f64(t.dtype(), t.bytes(i), k)).collect())
            };
            let (a, s) = (read(anchors, "anchor")?, read(shapes, "shape")?);
            let mut roi = [(0i64, h as i64), (0i64, w as i64)];
            for (k, &ax) in self.axes.iter().enumerate() {
                roi[ax] = slice_span(if ax == 0 { h } else { w }, a[k], s[k], self.norm_anchor, self.norm_shape);
            }
            let [(y, sh), (x, sw)] = roi;
            if y < 0 || x < 0 || sh < 1 || sw < 1 || y + sh > h as i64 || x + sw > w as i64 {
                return Err(Error::data(
                    at(),
                    format!("slice (inputs 'anchor' {a:?}, 'shape' {s:?}) gives rows {y}..{} and columns {x}..{}, not a non-empty window inside the {h}x{w} (HxW) image", y + sh, x + sw),
                ));
            }
            Ok(Roi { x: x as usize, y: y as usize, width: sw as usize, height: sh as usize })
        }
    }
}
