//! `fn.expand_dims` (cpu and gpu, no copy): inserts dimensions of extent 1 at `axes` (output
//! positions), as DALI 2.4 does (`dali/operators/generic/expand_dims.cc`): the axes are
//! sorted with their names; `new_axis_names` names them in the output layout when the input
//! has a layout (or is 0-D), which is then required; without it the layout is dropped.
//! Checked against DALI 2.4 by `tests/test_expand_dims.py`.

use super::{OnCpu, OnGpu, Relabel};
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Schema and backends.
pub static EXPAND_DIMS: OpDef = OpDef {
    schema: OpSchema {
        name: "ExpandDims",
        doc: "Insert new dimension(s) with extent 1 to the data shape. The new dimensions are inserted at the positions specified by `axes`. If `new_axis_names` is provided, the new dimension names will be inserted in the data layout, at the positions specified by `axes`. If `new_axis_names` is not provided, the output data layout will be empty.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("axes", T::IntList, D::Required, "Indices at which the new dimensions are inserted."),
            arg("new_axis_names", T::Str, D::Str(""), "Names of the new dimensions in the data layout. The length of `new_axis_names` must match the length of `axes`. If argument isn't be provided, the layout will be cleared."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(ExpandDims::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(ExpandDims::new(ctx)?)))),
};

struct ExpandDims {
    op: String,
    /// Output positions of the new dimensions, ascending.
    axes: Vec<usize>,
    /// Their names, in the same order, when `new_axis_names` was given.
    names: Option<Vec<char>>,
}

impl ExpandDims {
    fn new(ctx: &OpContext) -> Result<ExpandDims> {
        let op = ctx.display_name.clone();
        let axes = ctx.args.ints("axes");
        if axes.iter().any(|&a| a < 0) {
            return Err(Error::arg(&op, "axes", "Axis value can't be negative"));
        }
        let given_names = ctx.given("new_axis_names");
        let names: Vec<char> = ctx.args.str("new_axis_names").chars().collect();
        if !names.is_empty() && names.len() != axes.len() {
            return Err(Error::arg(&op, "new_axis_names", format!("Specified {} new dimensions, but layout contains only {} new dimension names", axes.len(), names.len())));
        }
        let mut pairs: Vec<(usize, Option<char>)> = axes.iter().enumerate().map(|(k, &a)| (a as usize, names.get(k).copied())).collect();
        pairs.sort_unstable();
        if pairs.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Error::arg(&op, "axes", "Duplicate axis index found."));
        }
        // An empty `new_axis_names` names nothing: DALI's layout then ends at the first new
        // axis (a NUL in it), which is no layout, unless there is no new axis at all.
        let named = given_names && (!names.is_empty() || axes.is_empty());
        Ok(ExpandDims { op, axes: pairs.iter().map(|p| p.0).collect(), names: named.then(|| pairs.iter().map(|p| p.1.unwrap_or('?')).collect()) })
    }
}

impl Relabel for ExpandDims {
    fn output_meta(&self, input: &BatchMeta, _: Option<&TensorList>, _: &Workspace<'_>) -> Result<BatchMeta> {
        let op = self.op.as_str();
        let ndim = input.ndim();
        let in_layout = input.layout().as_str();
        if in_layout.is_empty() && ndim > 0 && self.names.is_some() {
            return Err(Error::arg(op, "new_axis_names", "Specifying ``new_axis_names`` requires an input with a proper layout."));
        }
        let out_ndim = ndim + self.axes.len();
        // For each output dimension: Some(input dimension) or None (a new one, with its name).
        let mut plan: Vec<Option<usize>> = Vec::with_capacity(out_ndim);
        let mut out_layout = String::new();
        let (mut k, mut d) = (0, 0);
        for o in 0..out_ndim {
            if k < self.axes.len() && self.axes[k] == o {
                plan.push(None);
                if let Some(names) = &self.names {
                    out_layout.push(names[k]);
                }
                k += 1;
                continue;
            }
            if d >= ndim {
                return Err(Error::arg(op, "axes", "Data has not enough dimensions to add new axes at specified indices."));
            }
            if let Some(c) = in_layout.chars().nth(d) {
                out_layout.push(c);
            }
            plan.push(Some(d));
            d += 1;
        }
        if k < self.axes.len() {
            return Err(Error::arg(op, "axes", "Data has not enough dimensions to add new axes at specified indices."));
        }
        let mut shapes = Vec::with_capacity(input.len() * out_ndim);
        for i in 0..input.len() {
            let sh = input.shape(i);
            shapes.extend(plan.iter().map(|p| p.map_or(1, |d| sh[d])));
        }
        let mut meta = BatchMeta::new(input.dtype(), out_ndim, (0..input.len()).map(|i| &shapes[i * out_ndim..(i + 1) * out_ndim]));
        if self.names.is_some() && (!in_layout.is_empty() || ndim == 0) {
            meta.set_layout(Layout::new(&out_layout).map_err(|e| Error::arg(op, "new_axis_names", e))?);
        }
        meta.inherit_source_info(input);
        Ok(meta)
    }
}
