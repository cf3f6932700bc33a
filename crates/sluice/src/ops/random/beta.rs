//! `random.beta`: values from Beta(alpha, beta) on [0, 1], FLOAT or FLOAT64, as
//! `X / (X + Y)` with `X ~ Gamma(alpha)`, `Y ~ Gamma(beta)` (Marsaglia and Tsang's method;
//! shape parameters below 1 boosted by `U^(1/a)`). DALI's generator is not reproduced (its
//! stream is its own); the distribution is, checked by moments and a Kolmogorov-Smirnov test
//! against DALI's samples (`tests/test_random_beta.py`). With an input, each output sample
//! takes that sample's shape.

use super::{output_batch, sample_shape, Generate, OnCpu};
use crate::error::{Error, Result};
use crate::ops::cast::require_dtype;
use crate::ops::{arg, generate_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::rng::SampleRng;
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backend.
pub static BETA: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Beta",
        doc: "Generates a random number from the [0, 1] range following the beta distribution. FLOAT or FLOAT64 output; the shape comes from `shape`, or from the input (`shape_like`) when one is given; a scalar otherwise.",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("alpha", T::Float, D::Float(1.0), "The alpha parameter, a positive float32 scalar."),
            tensor_arg("beta", T::Float, D::Float(1.0), "The beta parameter, a positive float32 scalar."),
            tensor_arg("shape", T::IntList, D::Optional, "Shape of the output data (may differ per sample)."),
            arg("dtype", T::DType, D::Optional, "Output data type: FLOAT (default) or FLOAT64."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Beta::new(ctx)?)))),
    mixed: None,
    gpu: None,
};

struct Beta {
    ctx: OpContext,
    dtype: DType,
}

impl Beta {
    fn new(ctx: &OpContext) -> Result<Beta> {
        let dtype = super::dtype_or(&ctx.args, DType::F32);
        require_dtype(&ctx.display_name, "dtype", dtype, &[DType::F32, DType::F64])?;
        sample_shape(ctx)?;
        Ok(Beta { ctx: ctx.clone(), dtype })
    }
}

/// Gamma(shape `a`, scale 1) by Marsaglia and Tsang; `a < 1` as `Gamma(a + 1) * U^(1/a)`.
fn gamma(rng: &mut SampleRng, a: f64) -> f64 {
    if a < 1.0 {
        let u = 1.0 - rng.next_f64(); // (0, 1]
        return gamma(rng, a + 1.0) * u.powf(1.0 / a);
    }
    let d = a - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.next_f64();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

impl Generate for Beta {
    fn generate(&mut self, ws: &Workspace<'_>, like: Option<&BatchMeta>) -> Result<TensorList> {
        let mut out = output_batch(&self.ctx, ws, like, self.dtype)?;
        let name = &self.ctx.display_name;
        let (alpha, beta) = (ws.per_sample(&self.ctx, "alpha"), ws.per_sample(&self.ctx, "beta"));
        let dtype = self.dtype;
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let a = alpha.get(name, i)?.unwrap_or(1.0) as f32 as f64;
            let b = beta.get(name, i)?.unwrap_or(1.0) as f32 as f64;
            for (arg, v) in [("alpha", a), ("beta", b)] {
                if !(v > 0.0) || !v.is_finite() {
                    return Err(Error::arg(name, arg, format!("must be a positive number; sample {i} has {v}")));
                }
            }
            let mut rng = ws.rng(&self.ctx, i);
            for k in 0..bytes.len() / dtype.size() {
                let x = gamma(&mut rng, a);
                let y = gamma(&mut rng, b);
                // Both tiny (shape parameters far below 1) would divide 0 by 0: split by a coin.
                let v = if x + y > 0.0 { x / (x + y) } else if rng.bernoulli(a / (a + b)) { 1.0 } else { 0.0 };
                store_f64(dtype, bytes, k, v);
            }
            Ok(())
        })?;
        Ok(out)
    }
}
