//! `fn.pad`: pads samples with `fill_value` at the end of the chosen axes, by default to the
//! largest extent in the batch (DALI's behaviour), or to `shape` (-1 = batch maximum; a
//! smaller extent than the sample's keeps the sample's), rounded up to `align`. Matches DALI
//! 2.4, including how the fill value is converted (C-style truncation, integers wrap).
//! Both backends execute the same window plan (`ops/crop/window_copy.rs`): each sample at
//! the origin of its padded shape, the rest its fill value.

use crate::error::{Error, Result};
use crate::ops::crop::window::Span;
use crate::ops::crop::window_copy::{WindowCopyGpu, WindowPlan};
use crate::ops::{arg, tensor_arg, MAX_LIST, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::store_static_cast;
use crate::tensor::{BatchMeta, TensorList, TensorListGpu};

/// Most dimensions a padded tensor may have.
pub const MAX_NDIM: usize = 16;

/// Schema and backends.
pub static PAD: OpDef = OpDef {
    schema: OpSchema {
        name: "Pad",
        doc: "Pads all samples with `fill_value` in the specified axes to match the biggest extent in the batch for those axes, or to a minimum `shape`, optionally aligned to a multiple of `align`.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("axes", T::IntList, D::Optional, "Indices of the axes to pad (negative counts from the back). All axes when neither `axes` nor `axis_names` is given."),
            arg("axis_names", T::Str, D::Optional, "Names of the axes to pad, from the input layout. Excludes `axes`."),
            tensor_arg("fill_value", T::Float, D::Float(0.0), "The value to pad the batch with."),
            tensor_arg("shape", T::IntList, D::Optional, "Output extents in the padded axes; -1 pads to the batch's largest (aligned) extent."),
            tensor_arg("align", T::IntList, D::Optional, "Extents in the padded axes are rounded up to a multiple of this (one value for all axes, or one per axis)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Pad::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(PadGpu { pad: Pad::new(ctx)?, copy: WindowCopyGpu::default() }))),
};

struct Pad {
    ctx: OpContext,
    /// Output shapes, reused between iterations.
    shapes: Vec<usize>,
}

impl Pad {
    fn new(ctx: &OpContext) -> Result<Pad> {
        let name = &ctx.display_name;
        if ctx.args.has("axes") && ctx.args.has("axis_names") {
            return Err(Error::arg(name, "axis_names", "`axes` and `axis_names` are mutually exclusive"));
        }
        for (a, what) in [("shape", "-1 or >= 1"), ("align", ">= 1")] {
            if ctx.args.has(a) {
                for &v in ctx.args.ints(a) {
                    if (a == "shape" && v != -1 && v < 1) || (a == "align" && v < 1) {
                        return Err(Error::arg(name, a, format!("values must be {what}, got {v}")));
                    }
                }
            }
        }
        Ok(Pad { ctx: ctx.clone(), shapes: Vec::new() })
    }

    /// The padded axes for an input of `ndim` dimensions with `layout`.
    fn axes(&self, ndim: usize, layout: &str, iteration: u64) -> Result<([bool; MAX_NDIM], Vec<usize>)> {
        let mut list = Vec::new();
        if let Some(names) = self.ctx.args.opt_str("axis_names").filter(|s| !s.is_empty()) {
            for c in names.chars() {
                let a = layout.find(c).ok_or_else(|| {
                    Error::data(self.ctx.at(iteration, 0, ""), format!("argument 'axis_names': axis '{c}' is not in the input layout '{layout}'"))
                })?;
                list.push(a);
            }
        } else if self.ctx.args.has("axes") && !self.ctx.args.ints("axes").is_empty() {
            for &a in self.ctx.args.ints("axes") {
                let r = if a < 0 { a + ndim as i64 } else { a };
                if r < 0 || r >= ndim as i64 {
                    return Err(Error::data(
                        self.ctx.at(iteration, 0, ""),
                        format!("argument 'axes': axis {a} is out of range [-{ndim}, {}]", ndim as i64 - 1),
                    ));
                }
                list.push(r as usize);
            }
        } else {
            list.extend(0..ndim);
        }
        let mut mask = [false; MAX_NDIM];
        for &a in &list {
            mask[a] = true;
        }
        Ok((mask, list))
    }
}

impl Pad {
    /// The batch's windows (each sample at the origin of its padded shape) and fill values,
    /// shared by both backends.
    fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<WindowPlan> {
        let ndim = input.ndim();
        let n = input.len();
        if ndim > MAX_NDIM {
            return Err(Error::data(self.ctx.at(ws.iteration, 0, ""), format!("at most {MAX_NDIM} dimensions are supported, got {ndim}")));
        }
        let (_, list) = self.axes(ndim, input.layout().as_str(), ws.iteration)?;
        // `shape` and `align` may differ per sample (argument inputs): read each sample's
        // lists once, checked against the number of padded axes.
        let name = &self.ctx.display_name;
        let shape_arg = ws.per_sample_list(&self.ctx, "shape");
        let align_arg = ws.per_sample_list(&self.ctx, "align");
        let k = list.len();
        let (mut sbuf, mut abuf) = ([0f64; MAX_LIST], [0f64; MAX_LIST]);
        let mut batch_max = [0usize; MAX_NDIM];
        self.shapes.clear();
        for i in 0..n {
            self.shapes.extend_from_slice(input.shape(i));
            for &a in &list {
                batch_max[a] = batch_max[a].max(input.shape(i)[a]);
            }
        }
        for i in 0..n {
            let want = shape_arg.get(name, "shape", i, &[k], &mut sbuf)?;
            let align = align_arg.get(name, "align", i, &[1, k], &mut abuf)?;
            for (j, &a) in list.iter().enumerate() {
                let w = want.map_or(-1.0, |s| s[j]);
                let al = align.map_or(1.0, |l| if l.len() == 1 { l[0] } else { l[j] });
                // 0 keeps the sample's extent (as DALI does for per-sample shapes).
                if w != -1.0 && !(w >= 0.0) {
                    return Err(Error::arg(name, "shape", format!("values must be -1 or >= 0; sample {i} has {w}")));
                }
                if !(al >= 1.0) {
                    return Err(Error::arg(name, "align", format!("values must be >= 1; sample {i} has {al}")));
                }
                let ext = &mut self.shapes[i * ndim + a];
                let target = if w < 0.0 { batch_max[a] } else { (*ext).max(w as usize) };
                *ext = target.div_ceil(al as usize) * al as usize;
            }
        }
        let dtype = input.dtype();
        let mut plan = WindowPlan::new(ndim, dtype, dtype, None);
        for i in 0..n {
            plan.push_sample(self.shapes[i * ndim..(i + 1) * ndim].iter().map(|&len| Span { anchor: 0, len }));
        }
        let fill = ws.per_sample(&self.ctx, "fill_value");
        let mut fills = Vec::with_capacity(n);
        for i in 0..n {
            let v = fill.get(name, i)?.unwrap_or(0.0);
            // The argument is a float in DALI, stored with a plain static_cast.
            fills.push(store_static_cast(dtype, v as f32)[..dtype.size()].to_vec());
        }
        plan.set_sample_fill(fills);
        Ok(plan)
    }
}

impl Operator for Pad {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        Ok(vec![self.plan(ws, input.meta())?.run_cpu(ws.pool, input)?])
    }
}

/// The gpu backend: the cpu twin's windows, one launch of the window copy.
struct PadGpu {
    pad: Pad,
    copy: WindowCopyGpu,
}

impl GpuOperator for PadGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.pad.plan(&ws.host_view(), input.meta())?;
        Ok(vec![self.copy.run(ws, &self.pad.ctx.display_name, &plan, input)?])
    }
}
