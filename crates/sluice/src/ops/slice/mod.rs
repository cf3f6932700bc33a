//! `fn.slice` (cpu, gpu) as DALI 2.4 (`dali/operators/generic/slice/slice_attr.h`), checked
//! against DALI's cpu operator by `tests/test_slice.py`. The window is given one of two ways:
//!
//! - positional inputs `(data, anchor, shape)`: one value per sliced axis, normalized to the
//!   extent by default (`normalized_anchor`, `normalized_shape`; integer inputs are always
//!   elements), both of INT32, INT64 or FLOAT;
//! - named arguments (constants or per-sample inputs): `start` or `rel_start`, and one of
//!   `end`, `rel_end`, `shape`, `rel_shape`; what is missing is the whole extent.
//!
//! The sliced axes are `axes` (may be per sample; negative counts from the end; empty means
//! all) or the letters `axis_names` of the layout (default "WH"). The slice of an axis is
//! `[round(start), round(end))` with halves away from zero, `end` computed in f64 (both
//! normalized: `(anchor + shape) * extent`, one rounding fewer, as DALI). Windows leaving
//! the input follow `out_of_bounds_policy` ("error", "pad" with `fill_values`,
//! "trim_to_shape"). Any element type; `dtype` converts. Both backends execute the same
//! [`WindowPlan`]; the gpu reads anchor and shape inputs on the host.

use crate::error::{Error, Result};
use crate::ops::crop::window::{OobPolicy, Span};
use crate::ops::crop::window_copy::{WindowCopyGpu, WindowPlan};
use crate::ops::{arg, removed_arg, tensor_arg, ArgDefault as D, ArgSchema, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::element::load_f64;
use crate::tensor::{BatchMeta, DType, TensorList, TensorListGpu};

/// The arguments giving the window, shared with `decoders.image_slice`.
pub(crate) const SLICE_WINDOW_ARGS: &[ArgSchema] = &[
    tensor_arg("axes", T::IntList, D::Optional, "Order of dimensions used for the anchor and shape slice inputs, as dimension indices (negative: from the end; empty: all dimensions). Default [1, 0]; excludes axis_names."),
    arg("axis_names", T::Str, D::Optional, "Order of the dimensions used for the anchor and shape slice inputs, as described in the layout; default \"WH\". Excludes axes."),
    tensor_arg("start", T::IntList, D::Optional, "Slice start coordinates (absolute); excludes rel_start."),
    tensor_arg("rel_start", T::FloatList, D::Optional, "Slice start coordinates (relative to the extent); excludes start."),
    tensor_arg("end", T::IntList, D::Optional, "Slice end coordinates (absolute); excludes rel_end, shape and rel_shape."),
    tensor_arg("rel_end", T::FloatList, D::Optional, "Slice end coordinates (relative); excludes end, shape and rel_shape."),
    tensor_arg("shape", T::IntList, D::Optional, "Slice shape (absolute); excludes end, rel_end and rel_shape."),
    tensor_arg("rel_shape", T::FloatList, D::Optional, "Slice shape (relative); excludes end, rel_end and shape."),
    arg("normalized_anchor", T::Bool, D::Bool(true), "Whether the anchor input is normalized to the extent (else absolute). Only for positional inputs; integer inputs are always absolute."),
    arg("normalized_shape", T::Bool, D::Bool(true), "Whether the shape input is normalized to the extent (else absolute). Only for positional inputs; integer inputs are always absolute."),
];

/// Schema and backends.
pub static SLICE: OpDef = OpDef {
    schema: OpSchema {
        name: "Slice",
        doc: "Extracts a subtensor, or slice.

The slice is given by named arguments (`start` or `rel_start`, and `end`, `rel_end`, `shape` or `rel_shape`; absolute or relative to the extent), or by two extra positional inputs, anchor and shape, whose nature `normalized_anchor` and `normalized_shape` give (integer inputs are always absolute). The two ways exclude each other. The slice arguments hold one value per axis of `axes` or `axis_names` (default \"WH\", normalized coordinates). Windows leaving the input follow `out_of_bounds_policy`. Supports volumetric data and any element type.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 3,
        num_outputs: 1,
        host_inputs: &[1, 2],
        args: &[&[removed_arg("image_type", T::ImageType)], SLICE_WINDOW_ARGS, &[
            arg("out_of_bounds_policy", T::Str, D::Str("error"), "\"error\", \"pad\" (fill with fill_values) or \"trim_to_shape\"."),
            arg("fill_values", T::FloatList, D::FloatList(&[0.0]), "Padding values: one, or one per channel (needs a C in the layout)."),
            arg("dtype", T::DType, D::Optional, "Output type; the input type when not given."),
        ]],
        arg_aliases: &[("output_dtype", "dtype")],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Slice::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(SliceGpu { slice: Slice::new(ctx)?, copy: WindowCopyGpu::default() }))),
};

/// The named slice arguments, in DALI's order of precedence.
const STARTS: [&str; 2] = ["start", "rel_start"];
const ENDS: [&str; 4] = ["end", "rel_end", "shape", "rel_shape"];

pub(crate) struct Slice {
    ctx: OpContext,
    policy: OobPolicy,
    /// The named arguments given for the start and for the end (or shape), if any.
    start_arg: Option<&'static str>,
    end_arg: Option<&'static str>,
}

impl Slice {
    pub(crate) fn new(ctx: &OpContext) -> Result<Slice> {
        let op = ctx.display_name.as_str();
        if STARTS.iter().all(|n| ctx.given(n)) {
            return Err(Error::arg(op, "rel_start", "\"start\" and \"rel_start\" arguments are mutually exclusive"));
        }
        if ENDS.iter().filter(|n| ctx.given(n)).count() > 1 {
            return Err(Error::arg(op, "shape", "\"end\", \"rel_end\", \"shape\", and \"rel_shape\" arguments are mutually exclusive"));
        }
        if ctx.given("axes") && ctx.args.has("axis_names") {
            return Err(Error::arg(op, "axis_names", "\"axes\" and \"axis_names\" are mutually exclusive"));
        }
        // Operators without the argument (decoders.image_slice) refuse windows leaving the input.
        let policy = OobPolicy::parse(op, ctx.args.opt_str("out_of_bounds_policy").unwrap_or("error"))?;
        let start_arg = STARTS.into_iter().find(|n| ctx.given(n));
        let end_arg = ENDS.into_iter().find(|n| ctx.given(n));
        Ok(Slice { ctx: ctx.clone(), policy, start_arg, end_arg })
    }

    fn named(&self) -> bool {
        self.start_arg.is_some() || self.end_arg.is_some()
    }

    /// The sliced axes of sample `i` (checked, negatives resolved) into `out`.
    fn axes(&self, ws: &Workspace<'_>, i: usize, layout: &str, nd: usize, out: &mut Vec<usize>) -> Result<()> {
        let op = self.ctx.display_name.as_str();
        out.clear();
        let use_names = self.ctx.args.has("axis_names") || (!self.ctx.given("axes") && !layout.is_empty());
        if use_names {
            let names = self.ctx.args.opt_str("axis_names").unwrap_or("WH");
            for c in names.chars() {
                out.push(layout.find(c).ok_or_else(|| Error::arg(op, "axis_names", format!("'{c}' is not in the input layout '{layout}'")))?);
            }
        } else {
            let mut buf = [0.0; MAX_LIST];
            let list: Vec<i64> = match ws.per_sample_list(&self.ctx, "axes").get(op, "axes", i, &[], &mut buf)? {
                Some(v) => v.iter().map(|&a| a as i64).collect(),
                None => vec![1, 0],
            };
            for a in list {
                let r = if a < 0 { a + nd as i64 } else { a };
                if r < 0 || r >= nd as i64 {
                    return Err(Error::arg(op, "axes", format!("Axis {a} out of range. Expected range is [{}, {}] for a {nd}D input", -(nd as i64), nd as i64 - 1)));
                }
                out.push(r as usize);
            }
        }
        if out.is_empty() {
            out.extend(0..nd); // DALI: no axes means all of them
        }
        for (k, a) in out.iter().enumerate() {
            if out[..k].contains(a) {
                return Err(Error::arg(op, "axes", format!("Axis index {a} occurs more than once in ``axes`` (might include negative indices referring to the same axis)")));
            }
        }
        Ok(())
    }

    /// Which way the windows are given, checked: `Some((normalized anchor, normalized
    /// shape))` for positional inputs, `None` for named arguments.
    pub(crate) fn mode(&self, n_inputs: usize, positional: Option<(&TensorList, &TensorList)>) -> Result<Option<(bool, bool)>> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let named = self.named();
        match positional {
            Some(_) if named => Err(Error::arg(op, "start", "Named arguments start/end/shape are not compatible with positional anchor and shape inputs")),
            Some((anchors, shapes)) => {
                // As DALI: integer anchors and shapes are in elements whatever the flags say,
                // and the two inputs share one type (INT32, INT64 or FLOAT).
                if anchors.dtype() != shapes.dtype() {
                    return Err(Error::arg(op, "shape", format!("Anchor and shape should have the same type. Got: {} and {}", anchors.dtype().cpp_name(), shapes.dtype().cpp_name())));
                }
                if !matches!(anchors.dtype(), DType::I32 | DType::I64 | DType::F32) {
                    return Err(Error::arg(op, "anchor", format!("Unsupported type of anchor and shape arguments: {}", anchors.dtype().cpp_name())));
                }
                let float_inputs = anchors.dtype() == DType::F32;
                Ok(Some((float_inputs && ctx.args.bool("normalized_anchor"), float_inputs && ctx.args.bool("normalized_shape"))))
            }
            None if !named || n_inputs != 1 => Err(Error::arg(op, "start", format!("Expected named slice arguments (e.g. start/end, start/shape) or positional inputs (start, shape). Got {n_inputs} inputs."))),
            None => Ok(None),
        }
    }

    /// The window of sample `i` (shape `sh`, layout `layout`) into `spans`, one per
    /// dimension, after the out-of-bounds policy. `mode` and `positional` as from
    /// [`Slice::mode`]; `axes` is scratch.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sample_window(&self, ws: &Workspace<'_>, mode: Option<(bool, bool)>, positional: Option<(&TensorList, &TensorList)>, i: usize, sh: &[usize], layout: &str, source: &str, axes: &mut Vec<usize>, spans: &mut Vec<Span>) -> Result<()> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let at = || ctx.at(ws.iteration, i, source);
        let (start_arg, end_arg) = (self.start_arg, self.end_arg);
        let (mut start_buf, mut end_buf) = ([0.0; MAX_LIST], [0.0; MAX_LIST]);
        self.axes(ws, i, layout, sh.len(), axes)?;
        let axes: &[usize] = axes;
        spans.clear();
        spans.extend(sh.iter().map(|&e| Span::full(e)));
        // (start, end) in elements, per sliced axis, before rounding.
        let mut bounds = |k: usize, ax: usize| -> Result<(f64, f64)> {
            let e = sh[ax] as f64;
            if let (Some((na, ns)), Some((anchors, shapes))) = (mode, positional) {
                let read = |t: &TensorList, name: &str| -> Result<f64> {
                    if t.numel(i) != axes.len() {
                        return Err(Error::data(at(), format!("input '{name}' must hold {} values (one per sliced axis {axes:?}), got shape {:?}", axes.len(), t.shape(i))));
                    }
                    Ok(load_f64(t.dtype(), t.bytes(i), k))
                };
                let (a, s) = (read(anchors, "anchor")?, read(shapes, "shape")?);
                // Both normalized: one product of the sum, as DALI computes it.
                return Ok(match (na, ns) {
                    (true, true) => (a * e, (a + s) * e),
                    _ => {
                        let a0 = if na { a * e } else { a };
                        (a0, a0 + if ns { s * e } else { s })
                    }
                });
            }
            let lens = [axes.len()];
            let read = |name: Option<&'static str>, buf: &mut [f64; MAX_LIST]| -> Result<Option<f64>> {
                let Some(name) = name else { return Ok(None) };
                Ok(ws.per_sample_list(ctx, name).get(op, name, i, &lens, buf)?.map(|v| v[k]))
            };
            let start = read(start_arg, &mut start_buf)?;
            let end = read(end_arg, &mut end_buf)?;
            let a = match (start_arg, start) {
                (Some("rel_start"), Some(v)) => v * e,
                (_, Some(v)) => v,
                _ => 0.0,
            };
            let end = match (end_arg, end) {
                (Some("end"), Some(v)) => v,
                (Some("rel_end"), Some(v)) => v * e,
                (Some("shape"), Some(v)) | (Some("rel_shape"), Some(v)) if v < 0.0 => {
                    return Err(Error::arg(op, end_arg.unwrap(), format!("sample {i}: shape value out of range [0, {}]. Got: {v}", i64::MAX)));
                }
                (Some("shape"), Some(v)) => a + v,
                // Both relative: one product of the sum, as DALI computes it.
                (Some("rel_shape"), Some(v)) if start_arg == Some("rel_start") => (start.unwrap() + v) * e,
                (Some("rel_shape"), Some(v)) => a + v * e,
                _ => e,
            };
            Ok((a, end))
        };
        for (k, &ax) in axes.iter().enumerate() {
            let e = sh[ax];
            let (a0, end0) = bounds(k, ax)?;
            if !(a0.abs() <= i64::MAX as f64) || !(end0.abs() <= i64::MAX as f64) {
                return Err(Error::data(at(), format!("slice coordinates out of range for axis {ax}: start={a0}, end={end0}")));
            }
            if end0 < a0 {
                return Err(Error::data(at(), format!("end coordinates can't be before start coordinates. Got: start={a0} end={end0} (axis {ax})")));
            }
            let (start, end) = (a0.round() as i64, end0.round() as i64);
            let mut span = Span { anchor: start, len: (end - start) as usize };
            if !span.inside(e) {
                match self.policy {
                    OobPolicy::Error => {
                        return Err(Error::data(
                            at(),
                            format!("slice {start}..{end} of axis {ax} (from {}) is out of bounds of extent {e}; set out_of_bounds_policy to \"pad\" or \"trim_to_shape\"", given_by(mode, start_arg, end_arg)),
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
            spans[ax] = span;
        }
        Ok(())
    }

    /// The batch's windows, shared by both backends. `positional`: the anchor and shape
    /// inputs, when given.
    fn plan(&self, ws: &Workspace<'_>, data: &BatchMeta, n_inputs: usize, positional: Option<(&TensorList, &TensorList)>) -> Result<WindowPlan> {
        let ctx = &self.ctx;
        let op = ctx.display_name.as_str();
        let mode = self.mode(n_inputs, positional)?;
        let nd = data.ndim();
        let layout = data.layout().to_string();
        let it = data.dtype();
        let ot = if ctx.args.has("dtype") { ctx.args.dtype("dtype") } else { it };
        let ca = layout.find('C');
        let mut plan = WindowPlan::new(nd, it, ot, ca);
        let (mut axes, mut spans) = (Vec::with_capacity(nd), Vec::with_capacity(nd));
        for i in 0..data.len() {
            self.sample_window(ws, mode, positional, i, data.shape(i), &layout, data.source_info(i), &mut axes, &mut spans)?;
            plan.push_sample(spans.iter().copied());
        }
        let fill = ctx.args.floats("fill_values");
        if fill.len() > 1 && ca.is_none() {
            return Err(Error::arg(op, "fill_values", "Multi-channel fill_values was provided but channel dimension could not be found in layout"));
        }
        let channels = ca.filter(|_| !data.is_empty()).map_or(1, |c| data.shape(0).get(c).copied().unwrap_or(1)).max(1);
        plan.set_fill(op, fill, channels)?;
        Ok(plan)
    }
}

/// What gave the window, for errors: the inputs, or the named arguments.
fn given_by(mode: Option<(bool, bool)>, start: Option<&str>, end: Option<&str>) -> String {
    match (mode, start, end) {
        (Some(_), _, _) => "inputs 'anchor' and 'shape'".into(),
        (None, Some(s), Some(e)) => format!("arguments '{s}' and '{e}'"),
        (None, Some(a), None) | (None, None, Some(a)) => format!("argument '{a}'"),
        (None, None, None) => "no slice arguments".into(),
    }
}

impl Operator for Slice {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let data = ws.inputs[0];
        let positional = (ws.inputs.len() == 3).then(|| (ws.inputs[1], ws.inputs[2]));
        Ok(vec![self.plan(ws, data.meta(), ws.inputs.len(), positional)?.run_cpu(ws.pool, data)?])
    }
}

/// The gpu backend: the cpu twin's windows (anchor and shape inputs read on the host), one
/// launch of the window copy.
struct SliceGpu {
    slice: Slice,
    copy: WindowCopyGpu,
}

impl GpuOperator for SliceGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let data = ws.gpu_inputs[0];
        let host = ws.host_view();
        let positional = (host.inputs.len() == 2).then(|| (host.inputs[0], host.inputs[1]));
        let plan = self.slice.plan(&host, data.meta(), 1 + host.inputs.len(), positional)?;
        Ok(vec![self.copy.run(ws, &self.slice.ctx.display_name, &plan, data)?])
    }
}
