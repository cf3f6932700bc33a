//! `random.uniform`: values drawn uniformly from `range` = [lo, hi), or picked from `values`.

use super::{alloc, dtype_or, sample_shape, store};
use crate::error::{Error, Result};
use crate::ops::{for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace, arg};
use crate::tensor::{DType, TensorList};

/// Schema and backends.
pub static UNIFORM: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Uniform",
        doc: "Generates random numbers uniformly distributed in [range[0], range[1]), or picked with equal probability from `values`.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        args: &[&[
            arg("range", T::FloatList, D::FloatList(&[-1.0, 1.0]), "Range [min, max) of the distribution."),
            arg("values", T::FloatList, D::Optional, "Discrete values to pick from, with equal probability; replaces `range`."),
            arg("shape", T::IntList, D::Optional, "Shape of each output sample; a scalar when not given."),
            arg("dtype", T::DType, D::Optional, "Output type; FLOAT by default."),
        ]],
        arg_aliases: &[],
        legacy_names: &[("Uniform", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Uniform::new(ctx)?))),
    mixed: None,
    gpu: None,
};

enum Source {
    Range(f64, f64),
    Values(Vec<f64>),
}

struct Uniform {
    ctx: OpContext,
    source: Source,
    shape: Vec<usize>,
    dtype: DType,
}

impl Uniform {
    fn new(ctx: &OpContext) -> Result<Uniform> {
        let source = if ctx.args.has("values") {
            let v = ctx.args.floats("values").to_vec();
            if v.is_empty() {
                return Err(Error::arg(&ctx.display_name, "values", "must not be empty"));
            }
            Source::Values(v)
        } else {
            let r = ctx.args.floats("range");
            if r.len() != 2 || !(r[0] <= r[1]) {
                return Err(Error::arg(&ctx.display_name, "range", format!("must be [min, max] with min <= max, got {r:?}")));
            }
            Source::Range(r[0], r[1])
        };
        Ok(Uniform { ctx: ctx.clone(), source, shape: sample_shape(ctx)?, dtype: dtype_or(&ctx.args, DType::F32) })
    }
}

impl Operator for Uniform {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let mut out = alloc(self.dtype, &self.shape, ws.batch_size);
        let n: usize = self.shape.iter().product();
        for_each_sample(ws.pool, &mut out, |i, bytes| {
            let mut rng = ws.rng(&self.ctx, i);
            for k in 0..n {
                let v = match &self.source {
                    Source::Range(lo, hi) => rng.uniform(*lo, *hi),
                    Source::Values(vals) => vals[rng.below(vals.len() as u64) as usize],
                };
                store(self.dtype, bytes, k, v);
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
