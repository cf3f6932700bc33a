//! Joining several inputs sample by sample: `fn.cat` (along an existing axis: the inputs may
//! differ in that axis only) and `fn.stack` (along a new axis: the inputs' shapes must be
//! equal). Behaviour checked against DALI 2.4:
//! - the input layout is input 0's; `cat` keeps it, `stack` drops it unless `axis_name`
//!   names the new axis (then inserted into the layout at `axis`);
//! - `cat` leaves out inputs whose whole batch holds no elements, so an empty input need not
//!   match the others' extents;
//! - `axis` counts from the back when negative: `[-ndim, ndim - 1]` for `cat`,
//!   `[-ndim, ndim]` for `stack` (`axis == ndim` interleaves the inputs element by element).
//!
//! Both backends share [`Join::plan`]: every output sample is `outer` runs of the used
//! inputs' chunks one after the other, where `outer` is the volume of the dimensions before
//! the axis and input j's chunk the volume of its dimensions from the axis on.

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList};

/// DALI allows this many inputs.
const MAX_INPUTS: usize = 999;

macro_rules! join_schema {
    ($name:literal, $doc:literal, $axis_doc:literal, $axis_name_doc:literal) => {
        OpSchema {
            name: $name,
            doc: $doc,
            devices: &[Device::Cpu, Device::Gpu],
            min_inputs: 1,
            max_inputs: MAX_INPUTS,
            num_outputs: 1,
            host_inputs: &[],
            args: &[&[arg("axis", T::Int, D::Int(0), $axis_doc), arg("axis_name", T::Str, D::Optional, $axis_name_doc)]],
            arg_aliases: &[],
            legacy_names: &[],
            is_reader: false,
            is_random: false,
        }
    };
}

/// `fn.cat`.
pub static CAT: OpDef = OpDef {
    schema: join_schema!(
        "Cat",
        "Joins the input tensors along an existing axis. The shapes of the inputs must match in all dimensions except the \
         concatenation axis.",
        "Axis along which the input tensors are concatenated; [-ndim, ndim-1], negative counts from the back.",
        "Name of the axis along which the tensors are concatenated (from the input layout); replaces `axis`."
    ),
    cpu: Some(|ctx| Ok(Box::new(Join::new(ctx, false)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::JoinGpu::new(Join::new(ctx, false))))),
};

/// `fn.stack`.
pub static STACK: OpDef = OpDef {
    schema: join_schema!(
        "Stack",
        "Joins the input tensors along a new axis. The shapes of respective tensors in the inputs must match.",
        "The axis in the output tensor along which the inputs are stacked: the new axis is inserted before the inputs' \
         axis of that index (0 stacks whole tensors, ndim interleaves them); [-ndim, ndim], negative counts from the back.",
        "A one-letter name of the new axis, inserted into the input layout at `axis`."
    ),
    cpu: Some(|ctx| Ok(Box::new(Join::new(ctx, true)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::JoinGpu::new(Join::new(ctx, true))))),
};

/// Planning shared by both backends.
struct Join {
    ctx: OpContext,
    /// `stack` (a new axis) rather than `cat`.
    new_axis: bool,
}

/// One batch's plan: the output metadata, the inputs that contribute (indices into the
/// operator's inputs), and per output sample its `outer` count and each used input's chunk
/// (elements), flat: `chunks[i * used.len() + k]`.
struct Plan {
    meta: BatchMeta,
    used: Vec<usize>,
    outer: Vec<usize>,
    chunks: Vec<usize>,
}

impl Join {
    fn new(ctx: &OpContext, new_axis: bool) -> Join {
        Join { ctx: ctx.clone(), new_axis }
    }

    fn op(&self) -> &str {
        &self.ctx.display_name
    }

    fn plan(&self, inputs: &[&BatchMeta], iteration: u64) -> Result<Plan> {
        let op = self.op();
        let first = inputs[0];
        let (dtype, ndim, n) = (first.dtype(), first.ndim(), first.len());
        for (t, m) in inputs.iter().enumerate().skip(1) {
            if m.dtype() != dtype || m.ndim() != ndim {
                return Err(Error::type_mismatch(
                    op,
                    format!(
                        "All inputs must have the same type and number of dimensions.\ninput #0: {}, {ndim}-D\ninput #{t}: {}, {}-D.",
                        dtype.dali_name(),
                        m.dtype().dali_name(),
                        m.ndim()
                    ),
                ));
            }
            if m.len() != n {
                return Err(Error::data(self.ctx.at(iteration, 0, ""), format!("input #{t} has {} samples, input #0 has {n}", m.len())));
            }
        }
        let layout = first.layout();
        let axis = self.axis(ndim, layout, iteration)?;
        // `cat` leaves out inputs with no elements in the whole batch (all of them empty: the first).
        let mut used: Vec<usize> = (0..inputs.len()).filter(|&t| self.new_axis || (0..n).any(|i| inputs[t].numel(i) > 0)).collect();
        if used.is_empty() {
            used.push(0);
        }
        let out_ndim = ndim + self.new_axis as usize;
        let mut shapes = Vec::with_capacity(n * out_ndim);
        let mut outer = Vec::with_capacity(n);
        let mut chunks = Vec::with_capacity(n * used.len());
        for i in 0..n {
            let s0 = inputs[used[0]].shape(i);
            let mut joined = 0;
            for &t in &used {
                let s = inputs[t].shape(i);
                for d in 0..ndim {
                    if s[d] != s0[d] && (self.new_axis || d != axis) {
                        let message = if self.new_axis {
                            format!("Tensor stacking requires that all tensors being stacked are of equal shape. Sample {i}: input #{} has a shape {s0:?}, input #{t} has a shape {s:?}", used[0])
                        } else {
                            format!(
                                "Concatenated tensors can differ in size only in the concatenation axis ({axis}).\nTensor {i} in input #{t} has a shape {s:?} which is not compatible with respective tensor in input #{} of shape {s0:?}. Mismatch in axis {d}.",
                                used[0]
                            )
                        };
                        return Err(Error::data(self.ctx.at(iteration, i, inputs[t].source_info(i)), message));
                    }
                }
                let chunk: usize = s[axis.min(ndim)..].iter().product();
                chunks.push(chunk);
                joined += if self.new_axis { 1 } else { s[axis] };
            }
            outer.push(s0[..axis.min(ndim)].iter().product());
            shapes.extend_from_slice(&s0[..axis]);
            shapes.push(joined);
            shapes.extend_from_slice(&s0[(axis + !self.new_axis as usize).min(ndim)..]);
        }
        let mut meta = BatchMeta::new(dtype, out_ndim, shapes.chunks(out_ndim));
        meta.set_layout(self.output_layout(layout, ndim, axis, iteration)?);
        // As DALI: each sample's source is the first input's that has one.
        if inputs.iter().any(|m| !m.source_infos().is_empty()) {
            let infos = (0..n).map(|i| inputs.iter().map(|m| m.source_info(i)).find(|s| !s.is_empty()).unwrap_or("").into()).collect();
            meta.set_source_info(infos);
        }
        Ok(Plan { meta, used, outer, chunks })
    }

    /// The axis for inputs of `ndim` dimensions, counted from the front.
    fn axis(&self, ndim: usize, layout: &Layout, iteration: u64) -> Result<usize> {
        let name = self.ctx.args.opt_str("axis_name");
        if let (Some(name), false) = (name, self.new_axis) {
            return name.chars().next().filter(|_| name.len() == 1).and_then(|c| layout.find(c)).ok_or_else(|| {
                Error::data(self.ctx.at(iteration, 0, ""), format!("``axis_name`` specifies an undefined axis '{name}' for layout \"{layout}\""))
            });
        }
        let axis = self.ctx.args.int("axis");
        let max = ndim as i64 - 1 + self.new_axis as i64;
        if axis < -(ndim as i64) || axis > max {
            return Err(Error::data(
                self.ctx.at(iteration, 0, ""),
                format!(
                    "Invalid axis argument, {axis} for {ndim}-D tensors. Accepted range is [ {}, {max} ], with negative indices being counted from the back.",
                    -(ndim as i64)
                ),
            ));
        }
        Ok(if axis < 0 { (axis + max + 1) as usize } else { axis as usize })
    }

    fn output_layout(&self, layout: &Layout, ndim: usize, axis: usize, iteration: u64) -> Result<Layout> {
        if !self.new_axis {
            return Ok(layout.clone());
        }
        let Some(name) = self.ctx.args.opt_str("axis_name") else { return Ok(Layout::empty()) };
        if layout.is_empty() && ndim > 0 {
            return Err(Error::data(
                self.ctx.at(iteration, 0, ""),
                "Specifying the new axis name with ``axis_name`` with non-scalar input requires a non-empty input layout.",
            ));
        }
        let s = layout.as_str();
        Layout::new(&format!("{}{name}{}", &s[..axis.min(s.len())], &s[axis.min(s.len())..])).map_err(|e| Error::arg(self.op(), "axis_name", e))
    }
}

impl Operator for Join {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let metas: Vec<&BatchMeta> = ws.inputs.iter().map(|t| t.meta()).collect();
        let plan = self.plan(&metas, ws.iteration)?;
        let size = plan.meta.dtype().size();
        let k = plan.used.len();
        let mut out = TensorList::for_overwrite(plan.meta.clone());
        let sources: Vec<&TensorList> = plan.used.iter().map(|&t| ws.inputs[t]).collect();
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let chunks = &plan.chunks[i * k..(i + 1) * k];
            let stride = chunks.iter().sum::<usize>() * size;
            let mut offset = 0;
            for (src, &c) in sources.iter().zip(chunks) {
                scatter(dst, src.bytes(i), c * size, stride, offset);
                offset += c * size;
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Copies `src`, runs of `chunk` bytes, into `dst` at `offset`, `offset + stride`, ... One
/// input at a time, so each is read in order; small runs (stack's interleaving along the
/// last axis moves one element per run) are copied as fixed-size moves, not memcpy calls.
fn scatter(dst: &mut [u8], src: &[u8], chunk: usize, stride: usize, offset: usize) {
    if chunk == 0 {
        return;
    }
    if chunk == stride {
        dst[offset..offset + src.len()].copy_from_slice(src);
        return;
    }
    macro_rules! runs {
        ($n:expr) => {
            for (run, s) in dst[offset..].chunks_mut(stride).zip(src.chunks_exact($n)) {
                run[..$n].copy_from_slice(s);
            }
        };
    }
    match chunk {
        1 => runs!(1),
        2 => runs!(2),
        3 => runs!(3),
        4 => runs!(4),
        8 => runs!(8),
        12 => runs!(12),
        16 => runs!(16),
        n => runs!(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn join(new_axis: bool, axis: i64, axis_name: Option<&str>) -> Join {
        let def = if new_axis { &STACK } else { &CAT };
        let mut given = vec![("axis".to_string(), crate::ops::ArgValue::Int(axis))];
        if let Some(n) = axis_name {
            given.push(("axis_name".to_string(), crate::ops::ArgValue::Str(n.into())));
        }
        let ctx = OpContext {
            args: crate::ops::Args::check(&def.schema, "join", given, &[]).unwrap(),
            display_name: "join".into(),
            instance_name: "j".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        };
        Join::new(&ctx, new_axis)
    }

    fn run(op: &mut Join, inputs: &[&TensorList]) -> Result<TensorList> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ws = Workspace { inputs: inputs.to_vec(), arg_inputs: Default::default(), iteration: 0, batch_size: inputs[0].len(), frames: None, pool: &pool };
        Ok(op.run(&ws)?.remove(0))
    }

    fn batch(shape: &[usize], start: i32) -> TensorList {
        let n: usize = shape.iter().product();
        TensorList::from_samples(&[shape.to_vec()], &[(start..start + n as i32).collect::<Vec<i32>>()]).with_layout("HW")
    }

    #[test]
    fn cat_and_stack_interleave_chunks_as_numpy() {
        let a = batch(&[2, 3], 0);
        let b = batch(&[2, 2], 100);
        let out = run(&mut join(false, 1, None), &[&a, &b]).unwrap();
        assert_eq!(out.shape(0), &[2, 5]);
        assert_eq!(out.sample::<i32>(0), &[0, 1, 2, 100, 101, 3, 4, 5, 102, 103]);
        assert_eq!(out.layout().as_str(), "HW");
        let c = batch(&[2, 3], 100);
        let out = run(&mut join(true, -1, Some("C")), &[&a, &c]).unwrap();
        assert_eq!(out.shape(0), &[2, 3, 2]);
        assert_eq!(out.sample::<i32>(0), &[0, 100, 1, 101, 2, 102, 3, 103, 4, 104, 5, 105]);
        assert_eq!(out.layout().as_str(), "HWC");
        let out = run(&mut join(true, 0, None), &[&a, &c]).unwrap();
        assert_eq!(out.shape(0), &[2, 2, 3]);
        assert!(out.layout().is_empty());
    }

    #[test]
    fn cat_skips_inputs_with_no_elements_and_checks_the_rest() {
        let a = batch(&[2, 3], 0);
        let empty = batch(&[0, 0], 0);
        let out = run(&mut join(false, 1, Some("W")), &[&a, &empty, &a]).unwrap();
        assert_eq!(out.shape(0), &[2, 6]);
        let wrong = batch(&[3, 3], 0);
        let e = run(&mut join(false, 1, None), &[&a, &wrong]).unwrap_err().to_string();
        assert!(e.contains("Mismatch in axis 0"), "{e}");
        let e = run(&mut join(true, 0, None), &[&a, &batch(&[2, 2], 0)]).unwrap_err().to_string();
        assert!(e.contains("equal shape"), "{e}");
        let e = run(&mut join(false, 2, None), &[&a, &a]).unwrap_err().to_string();
        assert!(e.contains("Accepted range is [ -2, 1 ]"), "{e}");
        let f = TensorList::uniform(DType::F32, &[2, 3], 1);
        assert!(run(&mut join(false, 0, None), &[&a, &f]).unwrap_err().to_string().contains("same type"));
    }
}
