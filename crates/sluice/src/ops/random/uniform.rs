//! `random.uniform`: values drawn uniformly from `range` = [lo, hi), or picked from `values`.

use super::{dtype_or, output_batch, sample_shape, Generate, OnCpu, OnGpu};
use crate::error::{Error, Result};
use crate::ops::{generate_samples, ArgDefault as D, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Workspace, arg, tensor_arg, MAX_LIST};
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static UNIFORM: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Uniform",
        doc: "Generates random numbers uniformly distributed in [range[0], range[1]), or picked with equal probability from `values`. The shape comes from `shape`, or from the input (`shape_like`) when one is given; a scalar otherwise.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("range", T::FloatList, D::FloatList(&[-1.0, 1.0]), "Range [min, max) of the distribution."),
            tensor_arg("values", T::FloatList, D::Optional, "Discrete values to pick from, with equal probability; replaces `range`."),
            tensor_arg("shape", T::IntList, D::Optional, "Shape of each output sample (may differ per sample); a scalar when not given."),
            arg("dtype", T::DType, D::Optional, "Output type; FLOAT by default."),
        ]],
        arg_aliases: &[],
        legacy_names: &[("Uniform", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Uniform::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(Uniform::new(ctx)?)))),
};

/// Where one sample's values come from.
enum Source<'a> {
    Range(f64, f64),
    Values(&'a [f64]),
}

/// Checks a `range` pair: [min, max] with min <= max.
fn check_range(op: &str, r: &[f64], sample: Option<usize>) -> Result<Source<'static>> {
    if r.len() != 2 || !(r[0] <= r[1]) {
        let at = sample.map_or(String::new(), |i| format!(" (sample {i})"));
        return Err(Error::arg(op, "range", format!("must be [min, max] with min <= max, got {r:?}{at}")));
    }
    Ok(Source::Range(r[0], r[1]))
}

struct Uniform {
    ctx: OpContext,
    dtype: DType,
}

impl Uniform {
    fn new(ctx: &OpContext) -> Result<Uniform> {
        // Constants are checked at build; argument inputs per sample in `run`.
        let op = &ctx.display_name;
        if ctx.args.has("values") && ctx.args.floats("values").is_empty() {
            return Err(Error::arg(op, "values", "must not be empty"));
        }
        if ctx.args.has("range") {
            check_range(op, ctx.args.floats("range"), None)?;
        }
        sample_shape(ctx)?;
        Ok(Uniform { ctx: ctx.clone(), dtype: dtype_or(&ctx.args, DType::F32) })
    }
}

impl Generate for Uniform {
    fn generate(&mut self, ws: &Workspace<'_>, like: Option<&BatchMeta>) -> Result<TensorList> {
        let mut out = output_batch(&self.ctx, ws, like, self.dtype)?;
        let size = self.dtype.size();
        let op = &self.ctx.display_name;
        let (range, values) = (ws.per_sample_list(&self.ctx, "range"), ws.per_sample_list(&self.ctx, "values"));
        // Constant `values` may be longer than a per-sample list buffer: borrow it as is.
        let const_values = if values.is_input() { None } else { self.ctx.args.value("values") };
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let mut buf = [0f64; MAX_LIST];
            let source = match const_values {
                Some(ArgValue::FloatList(v)) => Source::Values(v),
                _ if values.is_set() => {
                    let v = values.get(op, "values", i, &[], &mut buf)?.unwrap_or_default();
                    if v.is_empty() {
                        return Err(Error::arg(op, "values", format!("must not be empty; sample {i} has no values")));
                    }
                    Source::Values(v)
                }
                _ => check_range(op, range.get(op, "range", i, &[2], &mut buf)?.unwrap_or(&[-1.0, 1.0]), Some(i))?,
            };
            let mut rng = ws.rng(&self.ctx, i);
            for k in 0..bytes.len() / size {
                let v = match &source {
                    Source::Range(lo, hi) => rng.uniform(*lo, *hi),
                    Source::Values(vals) => vals[rng.below(vals.len() as u64) as usize],
                };
                store_f64(self.dtype, bytes, k, v);
            }
            Ok(())
        })?;
        Ok(out)
    }
}
