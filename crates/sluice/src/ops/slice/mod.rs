//! `fn.slice` (cpu), inputs form `(data, anchor, shape)` as DALI 2.4: anchor and shape hold
//! one value per sliced axis (`axes`, or `axis_names` looked up in the input's layout;
//! default "WH"), normalized to the extent by default; the slice of an axis is
//! `[round(a), round(a + s))`. Windows leaving the input follow `out_of_bounds_policy`
//! ("error", "pad" with `fill_values`, "trim_to_shape"). Any element type; `dtype` converts.

use crate::error::{Error, Result};
use crate::ops::crop::crop::crop_nd;
use crate::ops::crop::window::{fill_per_channel, OobPolicy, Span};
use crate::ops::{arg, removed_arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{load_f64, store_f64};
use crate::tensor::{DType, TensorList};

/// Schema and backends.
pub static SLICE: OpDef = OpDef {
    schema: OpSchema {
        name: "Slice",
        doc: "Extracts a slice of the input given by the anchor and shape inputs (one value per sliced axis, normalized by default). Any layout and element type.",
        devices: &[Device::Cpu],
        min_inputs: 3,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            removed_arg("image_type", T::ImageType),
            arg("axes", T::IntList, D::Optional, "Dimension indices that anchor and shape describe, in their order; default [1, 0]. Used instead of axis_names when given."),
            arg("axis_names", T::Str, D::Optional, "Layout letters of the dimensions that anchor and shape describe; default \"WH\" (needs a layout)."),
            arg("normalized_anchor", T::Bool, D::Bool(true), "The anchor is a fraction of the extent (else elements)."),
            arg("normalized_shape", T::Bool, D::Bool(true), "The shape is a fraction of the extent (else elements)."),
            arg("out_of_bounds_policy", T::Str, D::Str("error"), "\"error\", \"pad\" (fill with fill_values) or \"trim_to_shape\"."),
            arg("fill_values", T::FloatList, D::FloatList(&[0.0]), "Padding values: one, or one per channel."),
            arg("dtype", T::DType, D::Optional, "Output type; the input type when not given."),
        ]],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Slice { ctx: ctx.clone() }))),
    mixed: None,
    gpu: None,
};

struct Slice {
    ctx: OpContext,
}

impl Operator for Slice {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let (data, anchors, shapes) = (ws.inputs[0], ws.inputs[1], ws.inputs[2]);
        let nd = data.ndim();
        let layout = data.layout().to_string();
        let axes: Vec<usize> = if ctx.args.has("axes") || (layout.is_empty() && !ctx.args.has("axis_names")) {
            let list = if ctx.args.has("axes") { ctx.args.ints("axes").to_vec() } else { vec![1, 0] };
            list.iter()
                .map(|&a| {
                    let r = if a < 0 { a + nd as i64 } else { a };
                    if r < 0 || r >= nd as i64 { Err(Error::arg(op, "axes", format!("axis {a} is out of range for {nd}-D input"))) } else { Ok(r as usize) }
                })
                .collect::<Result<_>>()?
        } else {
            let names = ctx.args.opt_str("axis_names").unwrap_or("WH");
            names
                .chars()
                .map(|c| layout.find(c).ok_or_else(|| Error::arg(op, "axis_names", format!("'{c}' is not in the input layout '{layout}'"))))
                .collect::<Result<_>>()?
        };
        let policy = OobPolicy::parse(op, ctx.args.str("out_of_bounds_policy"))?;
        // As DALI: integer anchors and shapes are in elements whatever the flags say, and the
        // two inputs share one type (INT32, INT64 or FLOAT).
        if anchors.dtype() != shapes.dtype() {
            return Err(Error::arg(op, "shape", format!("Anchor and shape should have the same type. Got: {} and {}", anchors.dtype().cpp_name(), shapes.dtype().cpp_name())));
        }
        if !matches!(anchors.dtype(), DType::I32 | DType::I64 | DType::F32) {
            return Err(Error::arg(op, "anchor", format!("Unsupported type of anchor and shape arguments: {}", anchors.dtype().cpp_name())));
        }
        let float_args = anchors.dtype() == DType::F32;
        let (na, ns) = (float_args && ctx.args.bool("normalized_anchor"), float_args && ctx.args.bool("normalized_shape"));
        let it = data.dtype();
        let ot = if ctx.args.has("dtype") { ctx.args.dtype("dtype") } else { it };
        let n = data.len();
        let mut spans: Vec<Span> = Vec::with_capacity(n * nd);
        for i in 0..n {
            let at = || ctx.at(ws.iteration, i, data.source_info(i));
            let sh = data.shape(i);
            let read = |t: &TensorList, name: &str| -> Result<Vec<f64>> {
                if t.numel(i) != axes.len() {
                    return Err(Error::data(at(), format!("input '{name}' must hold {} values (one per sliced axis {axes:?}), got shape {:?}", axes.len(), t.shape(i))));
                }
                Ok((0..axes.len()).map(|k| load_f64(t.dtype(), t.bytes(i), k)).collect())
            };
            let (a, s) = (read(anchors, "anchor")?, read(shapes, "shape")?);
            let mut sp: Vec<Span> = sh.iter().map(|&e| Span::full(e)).collect();
            for (k, &ax) in axes.iter().enumerate() {
                let e = sh[ax];
                let e_f = e as f64;
                // Both normalized: one product of the sum, as DALI computes it (fewer roundings).
                let (a0, end0) = match (na, ns) {
                    (true, true) => (a[k] * e_f, (a[k] + s[k]) * e_f),
                    _ => {
                        let a0 = if na { a[k] * e_f } else { a[k] };
                        (a0, a0 + if ns { s[k] * e_f } else { s[k] })
                    }
                };
                let (start, end) = (a0.round() as i64, end0.round() as i64);
                if end < start {
                    return Err(Error::data(at(), format!("input 'shape' is negative for axis {ax}: {}", s[k])));
                }
                let mut span = Span { anchor: start, len: (end - start) as usize };
                if !span.inside(e) {
                    match policy {
                        OobPolicy::Error => {
                            return Err(Error::data(
                                at(),
                                format!("slice {start}..{end} of axis {ax} (inputs 'anchor' {a:?}, 'shape' {s:?}) is out of bounds of extent {e}; set out_of_bounds_policy to \"pad\" or \"trim_to_shape\""),
                            ))
                        }
                        OobPolicy::Pad => {}
                        OobPolicy::TrimToShape => {
                            let lo = start.clamp(0, e as i64);
                            let hi = end.clamp(0, e as i64);
                            span = Span { anchor: lo, len: (hi - lo).max(0) as usize };
                        }
                    }
                }
                sp[ax] = span;
            }
            spans.extend(sp);
        }
        let out_shapes: Vec<Vec<usize>> = (0..n).map(|i| spans[i * nd..(i + 1) * nd].iter().map(|s| s.len).collect()).collect();
        let ca = layout.find('C');
        let channels = ca.filter(|_| !data.is_empty()).map_or(1, |c| data.shape(0).get(c).copied().unwrap_or(1)).max(1);
        let fill = fill_per_channel(op, ctx.args.floats("fill_values"), channels)?;
        let fill: Vec<Vec<u8>> = fill.iter().map(|&v| { let mut e = vec![0u8; ot.size()]; store_f64(ot, &mut e, 0, v); e }).collect();
        let mut out = TensorList::new(ot, nd, out_shapes.iter().map(|s| s.as_slice()));
        out.set_layout(data.layout().clone());
        out.inherit_source_info(data);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            crop_nd(dst, data.bytes(i), data.shape(i), &spans[i * nd..(i + 1) * nd], it, ot, &fill, ca);
            Ok(())
        })?;
        Ok(vec![out])
    }
}
