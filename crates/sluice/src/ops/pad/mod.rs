//! `fn.pad`: pads samples with `fill_value` at the end of the chosen axes, by default to the
//! largest extent in the batch (DALI's behaviour), or to `shape` (-1 = batch maximum; a
//! smaller extent than the sample's keeps the sample's), rounded up to `align`. Matches DALI
//! 2.4, including how the fill value is converted (C-style truncation, integers wrap).

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, MAX_LIST, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::store_static_cast;
use crate::tensor::TensorList;

/// Most dimensions a padded tensor may have.
pub const MAX_NDIM: usize = 16;

/// Schema and backends.
pub static PAD: OpDef = OpDef {
    schema: OpSchema {
        name: "Pad",
        doc: "Pads all samples with `fill_value` in the specified axes to match the biggest extent in the batch for those axes, or to a minimum `shape`, optionally aligned to a multiple of `align`.",
        devices: &[Device::Cpu],
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
    gpu: None,
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

impl Operator for Pad {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
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
        let fill = ws.per_sample(&self.ctx, "fill_value");
        let mut out = TensorList::new(input.dtype(), ndim, (0..n).map(|i| &self.shapes[i * ndim..(i + 1) * ndim]));
        out.set_layout(input.layout().clone());
        out.inherit_source_info(input);
        let dtype = input.dtype();
        let elem = dtype.size();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let v = fill.get(name, i)?.unwrap_or(0.0);
            // The argument is a float in DALI, stored with a plain static_cast.
            let pattern = store_static_cast(dtype, v as f32);
            let out_shape = &self.shapes[i * ndim..(i + 1) * ndim];
            pad_bytes(dst, input.bytes(i), input.shape(i), out_shape, &pattern[..elem]);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Copies `src` (dense, `in_shape`) into the leading corner of `dst` (dense, `out_shape`,
/// every extent >= the input's) and fills the rest with `fill` (one element's bytes).
pub fn pad_bytes(dst: &mut [u8], src: &[u8], in_shape: &[usize], out_shape: &[usize], fill: &[u8]) {
    let elem = fill.len();
    let ndim = in_shape.len();
    if fill.iter().all(|&b| b == 0) {
        dst.fill(0);
    } else {
        for d in dst.chunks_exact_mut(elem) {
            d.copy_from_slice(fill);
        }
    }
    if src.is_empty() {
        return;
    }
    if ndim == 0 {
        dst.copy_from_slice(src);
        return;
    }
    let row_in = in_shape[ndim - 1] * elem;
    let mut out_stride = [0usize; MAX_NDIM];
    let mut s = elem;
    for a in (0..ndim).rev() {
        out_stride[a] = s;
        s *= out_shape[a];
    }
    let mut idx = [0usize; MAX_NDIM];
    let mut off = 0usize;
    for row in src.chunks_exact(row_in) {
        dst[off..off + row_in].copy_from_slice(row);
        for a in (0..ndim - 1).rev() {
            idx[a] += 1;
            off += out_stride[a];
            if idx[a] < in_shape[a] {
                break;
            }
            off -= idx[a] * out_stride[a];
            idx[a] = 0;
        }
    }
}
