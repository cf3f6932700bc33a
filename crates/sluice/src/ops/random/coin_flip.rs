//! `random.coin_flip`: 1 with probability `probability`, else 0 (Bernoulli).

use super::{dtype_or, output_batch, sample_shape, Generate, OnCpu, OnGpu};
use crate::error::{Error, Result};
use crate::ops::{arg, generate_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::element::store_f64;
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static COIN_FLIP: OpDef = OpDef {
    schema: OpSchema {
        name: "random__CoinFlip",
        doc: "Generates random boolean values (0 or 1) following a Bernoulli distribution. The shape comes from `shape`, or from the input (`shape_like`) when one is given; a scalar otherwise.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("probability", T::Float, D::Float(0.5), "Probability of a 1."),
            tensor_arg("shape", T::IntList, D::Optional, "Shape of each output sample (may differ per sample); a scalar when not given."),
            arg("dtype", T::DType, D::Optional, "Output type; INT32 by default."),
        ]],
        arg_aliases: &[],
        legacy_names: &[("CoinFlip", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(CoinFlip::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(CoinFlip::new(ctx)?)))),
};

struct CoinFlip {
    ctx: OpContext,
    dtype: DType,
}

impl CoinFlip {
    fn new(ctx: &OpContext) -> Result<CoinFlip> {
        sample_shape(ctx)?;
        Ok(CoinFlip { ctx: ctx.clone(), dtype: dtype_or(&ctx.args, DType::I32) })
    }
}

impl Generate for CoinFlip {
    fn generate(&mut self, ws: &Workspace<'_>, like: Option<&BatchMeta>) -> Result<TensorList> {
        let mut out = output_batch(&self.ctx, ws, like, self.dtype)?;
        let size = self.dtype.size();
        let probability = ws.per_sample(&self.ctx, "probability");
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let p = probability.get(&self.ctx.display_name, i)?.unwrap_or(0.5);
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::arg(&self.ctx.display_name, "probability", format!("must be in [0, 1]; sample {i} has {p}")));
            }
            let mut rng = ws.rng(&self.ctx, i);
            for k in 0..bytes.len() / size {
                store_f64(self.dtype, bytes, k, rng.bernoulli(p) as u8 as f64);
            }
            Ok(())
        })?;
        Ok(out)
    }
}
