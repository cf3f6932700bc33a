//! `fn.squeeze` (cpu and gpu, no copy): removes the dimensions `axes` (or the layout's
//! `axis_names`), as DALI 2.4 does (`dali/operators/generic/squeeze.cc`): the output layout
//! is the input's without them, and every sample must keep its volume, so the removed
//! extents are 1, or the volume is 0 before and after (DALI's message otherwise). Checked
//! against DALI 2.4 by `tests/test_squeeze.py`.

use super::{OnCpu, OnGpu, Relabel};
use crate::error::{Error, Result};
use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// Schema and backends.
pub static SQUEEZE: OpDef = OpDef {
    schema: OpSchema {
        name: "Squeeze",
        doc: "Removes the dimensions given as `axes` or `axis_names`. It's an error to remove a dimension that would cause the total volume to change.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("axes", T::IntList, D::Optional, "Indices of dimensions which should be removed. All squeezed dimensions should have size 1, unless the total volume of the tensor is 0 before and after squeeze. All indices must be in the range of valid dimensions of the input."),
            arg("axis_names", T::Str, D::Optional, "Layout columns which should be removed. All squeezed dimensions should have size 1, unless the total volume of the tensor is 0 before and after squeeze. All layout names should be present in data layout."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Squeeze::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(Squeeze::new(ctx)?)))),
};

struct Squeeze {
    op: String,
    axes: Option<Vec<i64>>,
    names: Option<String>,
}

impl Squeeze {
    fn new(ctx: &OpContext) -> Result<Squeeze> {
        let op = ctx.display_name.clone();
        let axes = ctx.args.has("axes").then(|| ctx.args.ints("axes").to_vec());
        let names = ctx.args.opt_str("axis_names").map(str::to_string);
        match (&axes, &names) {
            (Some(_), Some(_)) => return Err(Error::arg(&op, "axis_names", "Provided both ``axes`` and ``axis_names`` arguments")),
            (None, None) => return Err(Error::arg(&op, "axes", "Missing argument ``axes`` or ``axis_names``.")),
            _ => {}
        }
        Ok(Squeeze { op, axes, names })
    }
}

impl Relabel for Squeeze {
    fn output_meta(&self, input: &BatchMeta, _: Option<&TensorList>, _: &Workspace<'_>) -> Result<BatchMeta> {
        let op = self.op.as_str();
        let ndim = input.ndim();
        let layout = input.layout().as_str();
        let mut axes: Vec<usize> = match (&self.axes, &self.names) {
            (Some(axes), _) => axes
                .iter()
                .map(|&a| usize::try_from(a).ok().filter(|&a| a < ndim).ok_or_else(|| Error::arg(op, "axes", format!("Axis {a} is out of range for a {ndim}-D input"))))
                .collect::<Result<_>>()?,
            (None, Some(names)) => names
                .chars()
                .map(|c| layout.find(c).ok_or_else(|| Error::arg(op, "axis_names", format!("Axis '{c}' is not present in the input layout \"{layout}\""))))
                .collect::<Result<_>>()?,
            (None, None) => unreachable!("checked at build"),
        };
        axes.sort_unstable();
        if axes.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::arg(op, if self.axes.is_some() { "axes" } else { "axis_names" }, "Specified at least twice same dimension to remove."));
        }
        let kept: Vec<usize> = (0..ndim).filter(|d| axes.binary_search(d).is_err()).collect();
        let mut shapes = Vec::with_capacity(input.len() * kept.len());
        for i in 0..input.len() {
            let sh = input.shape(i);
            let before: usize = sh.iter().product();
            let after: usize = kept.iter().map(|&d| sh[d]).product();
            if before != after {
                return Err(Error::arg(op, "axes", format!("sample {i}: Requested a shape with {after} elements but the original shape has {before} elements.")));
            }
            shapes.extend(kept.iter().map(|&d| sh[d]));
        }
        let k = kept.len();
        let mut meta = BatchMeta::new(input.dtype(), k, (0..input.len()).map(|i| &shapes[i * k..(i + 1) * k]));
        if !layout.is_empty() {
            let out: String = kept.iter().map(|&d| layout.as_bytes()[d] as char).collect();
            meta.set_layout(Layout::new(&out).map_err(|e| Error::arg(op, "axis_names", e))?);
        }
        meta.inherit_source_info(input);
        Ok(meta)
    }
}
