//! The reshape family: `fn.reshape`, `fn.reinterpret` (`reinterpret.rs`), `fn.expand_dims`
//! (`expand_dims.rs`), `fn.squeeze` (`squeeze.rs`) and `fn.per_frame` (`per_frame.rs`, a new
//! layout only): the same bytes seen with other shapes
//! (and maybe another layout or type). Nothing is copied on either backend: each operator
//! only computes the output's metadata ([`Relabel`]), and [`OnCpu`] / [`OnGpu`] hand out the
//! input's buffer under it.
//!
//! `fn.reshape`:
//!
//! The output shape of a sample comes from one of (checked against DALI 2.4):
//! - `shape` (or the second input, a 1-D integer tensor per sample): the extents; one
//!   negative extent takes what the volume needs (`[8, -1]` of 4x6x3 is 8x9); 0 is an error;
//! - `rel_shape`: each extent a multiple of the input's (`out[i] = in[i] * rel[i]`, rounded
//!   half away from zero), one negative entry taking the rest; a shorter list keeps fewer
//!   dimensions, a negative last entry past the input's dimensions appends one;
//! - `src_dims`: the input's dimensions picked in a new order, -1 inserting an extent of 1
//!   (combined with `rel_shape`, `out[i] = in[src_dims[i]] * rel[i]`).
//!
//! Every sample must keep its volume. `layout` sets the output layout; without it the
//! input's layout stays when the number of dimensions does, and is dropped otherwise.
//! DALI 2.4 refuses a `src_dims` that changes the number of dimensions ("Unexpected
//! dimensionality of output"), against its own documentation; Sluice does what the
//! documentation says (`src_dims=[-1, 1, 0]` of 300x200x1 is 1x200x300).

mod expand_dims;
mod per_frame;
mod reinterpret;
mod squeeze;

pub use expand_dims::EXPAND_DIMS;
pub use per_frame::PER_FRAME;
pub use reinterpret::REINTERPRET;
pub use squeeze::SQUEEZE;

use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace, MAX_LIST};
use crate::tensor::{BatchMeta, Layout, TensorList, TensorListGpu};

/// An operator of this family: the output's metadata from the input's (and the optional
/// second input, read on the host, and the argument inputs in `ws`).
pub(crate) trait Relabel: Send + 'static {
    fn output_meta(&self, input: &BatchMeta, second: Option<&TensorList>, ws: &Workspace<'_>) -> Result<BatchMeta>;
}

/// The cpu backend of a [`Relabel`] operator: the input's buffer under the new metadata.
pub(crate) struct OnCpu<R>(pub R);

impl<R: Relabel> Operator for OnCpu<R> {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let meta = self.0.output_meta(input.meta(), ws.inputs.get(1).copied(), ws)?;
        Ok(vec![input.reinterpreted(meta)])
    }
}

/// The gpu backend of a [`Relabel`] operator: the input's device memory under the new
/// metadata (no kernel, no copy). A second input lives on the host (a cpu operator's output).
pub(crate) struct OnGpu<R>(pub R);

impl<R: Relabel> GpuOperator for OnGpu<R> {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.0.output_meta(input.meta(), ws.cpu_inputs.first().copied(), &ws.host_view())?;
        Ok(vec![input.reinterpreted(meta)])
    }
}

/// Schema and backends.
pub static RESHAPE: OpDef = OpDef {
    schema: OpSchema {
        name: "Reshape",
        doc: "Treats content of the input as if it had a different shape and/or layout. The buffer contents are not copied.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[1],
        args: &[&[
            tensor_arg("shape", T::IntList, D::Optional, "The desired shape of the output; one negative extent receives what the input's volume needs."),
            tensor_arg("rel_shape", T::FloatList, D::Optional, "The output shape relative to the input's: out[i] = in[i] * rel_shape[i] (or in[src_dims[i]]); one negative extent receives the rest."),
            tensor_arg("src_dims", T::IntList, D::Optional, "Indices of the input's dimensions to keep, in the output's order; -1 inserts an extent of 1."),
            arg("layout", T::Str, D::Optional, "New layout; by default the input's when the number of dimensions matches, else none."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Reshape::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(Reshape::new(ctx)?)))),
};

/// The planning both backends share: arguments in, output metadata out.
pub(crate) struct Reshape {
    ctx: OpContext,
    layout: Option<Layout>,
}

impl Reshape {
    fn new(ctx: &OpContext) -> Result<Reshape> {
        let op = &ctx.display_name;
        let given = |name: &str| ctx.args.has(name) || ctx.arg_input_names.iter().any(|a| a == name);
        if given("shape") && given("rel_shape") {
            return Err(Error::arg(op, "rel_shape", "`shape` and `rel_shape` are mutually exclusive"));
        }
        let layout = ctx.args.opt_str("layout").map(|l| Layout::new(l).map_err(|e| Error::arg(op, "layout", e))).transpose()?;
        Ok(Reshape { ctx: ctx.clone(), layout })
    }

    /// The output metadata of `input` for this batch. `shape_input` is the optional second
    /// positional input; `ws` holds the argument inputs.
    pub(crate) fn shaped(&self, input: &BatchMeta, shape_input: Option<&TensorList>, ws: &Workspace<'_>) -> Result<BatchMeta> {
        let op = self.ctx.display_name.as_str();
        if shape_input.is_some() && (self.ctx.args.has("shape") || ws.arg_inputs.contains_key("shape")) {
            return Err(Error::arg(op, "shape", "given both as an argument and as the second input"));
        }
        let shape = match shape_input {
            Some(batch) => PerSampleList::Input { name: "shape", batch },
            None => ws.per_sample_list(&self.ctx, "shape"),
        };
        let rel_shape = ws.per_sample_list(&self.ctx, "rel_shape");
        let src_dims = ws.per_sample_list(&self.ctx, "src_dims");
        let (mut a, mut b, mut c) = ([0f64; MAX_LIST], [0f64; MAX_LIST], [0f64; MAX_LIST]);
        let mut shapes = Vec::with_capacity(input.len() * input.ndim());
        let mut ndim = None;
        for i in 0..input.len() {
            let start = shapes.len();
            let in_shape = input.shape(i);
            let src = src_dims.get(op, "src_dims", i, &[], &mut c)?;
            if let Some(s) = shape.get(op, "shape", i, &[], &mut a)? {
                explicit_shape(op, i, s, in_shape, &mut shapes)?;
            } else {
                let rel = rel_shape.get(op, "rel_shape", i, &[], &mut b)?;
                relative_shape(op, i, rel, src, in_shape, &mut shapes)?;
            }
            let out_ndim = shapes.len() - start;
            if *ndim.get_or_insert(out_ndim) != out_ndim {
                return Err(Error::arg(op, "shape", format!("sample {i} has {out_ndim} dimensions, earlier samples {}; every sample needs the same number", ndim.unwrap_or(0))));
            }
            let (have, want) = (in_shape.iter().product::<usize>(), shapes[start..].iter().product::<usize>());
            if have != want {
                return Err(Error::arg(op, "shape", format!("sample {i}: {:?} holds {want} elements, the input {in_shape:?} {have}", &shapes[start..])));
            }
        }
        let ndim = ndim.unwrap_or(input.ndim());
        let mut meta = BatchMeta::new(input.dtype(), ndim, (0..input.len()).map(|i| &shapes[i * ndim..(i + 1) * ndim]));
        let layout = match &self.layout {
            Some(l) if !l.is_empty() && l.ndim() != ndim => {
                return Err(Error::arg(op, "layout", format!("'{l}' has {} dimensions, the output {ndim}", l.ndim())));
            }
            Some(l) => l.clone(),
            None if input.ndim() == ndim => input.layout().clone(),
            None => Layout::empty(),
        };
        meta.set_layout(layout);
        meta.inherit_source_info(input);
        Ok(meta)
    }
}

/// `shape` for one sample: extents as given, one negative extent inferred from the volume.
fn explicit_shape(op: &str, i: usize, shape: &[f64], in_shape: &[usize], out: &mut Vec<usize>) -> Result<()> {
    let start = out.len();
    let mut infer = None;
    for (k, &v) in shape.iter().enumerate() {
        if v < 0.0 {
            if infer.replace(k).is_some() {
                return Err(Error::arg(op, "shape", format!("sample {i}: only one extent may be negative (inferred), got {shape:?}")));
            }
            out.push(1);
        } else if v == 0.0 {
            return Err(Error::arg(op, "shape", format!("sample {i}: an extent of 0 is not allowed, got {shape:?}")));
        } else {
            out.push(v as usize);
        }
    }
    infer_extent(op, "shape", i, infer, in_shape, &mut out[start..])
}

/// `rel_shape` and/or `src_dims` for one sample (with neither, the input's shape).
fn relative_shape(op: &str, i: usize, rel: Option<&[f64]>, src: Option<&[f64]>, in_shape: &[usize], out: &mut Vec<usize>) -> Result<()> {
    let start = out.len();
    let ndim = in_shape.len();
    if let Some(src) = src {
        if rel.is_some_and(|r| r.len() != src.len()) {
            return Err(Error::arg(op, "rel_shape", format!("sample {i}: {} values, but `src_dims` has {}", rel.map_or(0, |r| r.len()), src.len())));
        }
        for &d in src {
            if d != -1.0 && !(d >= 0.0 && (d as usize) < ndim) {
                return Err(Error::arg(op, "src_dims", format!("sample {i}: {d} is not a dimension of the {ndim}-D input (or -1)")));
            }
        }
    } else if let Some(rel) = rel {
        let extra = rel.last().is_some_and(|&r| r < 0.0) as usize;
        if rel.len() > ndim + extra {
            return Err(Error::arg(op, "rel_shape", format!("sample {i}: {} values for a {ndim}-D input", rel.len())));
        }
    }
    let len = src.map_or(rel.map_or(ndim, |r| r.len()), |s| s.len());
    let mut infer = None;
    for k in 0..len {
        let base = match src.map(|s| s[k]) {
            Some(d) if d < 0.0 => 1,
            Some(d) => in_shape[d as usize],
            None => in_shape.get(k).copied().unwrap_or(1),
        };
        match rel.map(|r| r[k]) {
            Some(r) if r < 0.0 => {
                if infer.replace(k).is_some() {
                    return Err(Error::arg(op, "rel_shape", format!("sample {i}: only one extent may be negative (inferred)")));
                }
                out.push(1);
            }
            // Half away from zero, as DALI: 4 * 0.625 is 3.
            Some(r) => out.push((base as f64 * r).round() as usize),
            None => out.push(base),
        }
    }
    infer_extent(op, "rel_shape", i, infer, in_shape, &mut out[start..])
}

/// Sets the extent at `at` of one sample's `out` (when one is to be inferred) so the
/// volumes match.
fn infer_extent(op: &str, arg: &str, i: usize, at: Option<usize>, in_shape: &[usize], out: &mut [usize]) -> Result<()> {
    let Some(at) = at else { return Ok(()) };
    let volume: usize = in_shape.iter().product();
    let rest: usize = out.iter().enumerate().filter(|&(k, _)| k != at).map(|(_, &e)| e).product();
    if rest == 0 || volume % rest != 0 {
        return Err(Error::arg(op, arg, format!("sample {i}: the input's {volume} elements do not divide into the other extents' {rest}")));
    }
    out[at] = volume / rest;
    Ok(())
}

impl Relabel for Reshape {
    fn output_meta(&self, input: &BatchMeta, second: Option<&TensorList>, ws: &Workspace<'_>) -> Result<BatchMeta> {
        self.shaped(input, second, ws)
    }
}
