//! `random.normal`: values from N(mean, stddev²), converted to `dtype` with rounding and
//! saturation (as DALI). With an input, each output sample takes that sample's shape.

use super::{output_batch, sample_shape, Generate, OnCpu, OnGpu};
use crate::error::{Error, Result};
use crate::ops::cast::require_dtype;
use crate::tensor::element::store_f64;
use crate::ops::{arg, generate_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static NORMAL: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Normal",
        doc: "Generates random numbers following a normal distribution. The shape comes from `shape`, or from the input (`shape_like`) when one is given; a scalar otherwise.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("mean", T::Float, D::Float(0.0), "Mean of the distribution."),
            tensor_arg("stddev", T::Float, D::Float(1.0), "Standard deviation of the distribution."),
            tensor_arg("shape", T::IntList, D::Optional, "Shape of the output data (may differ per sample)."),
            arg("dtype", T::DType, D::Optional, "Output data type (FLOAT by default); values are rounded and clamped to it."),
        ]],
        arg_aliases: &[],
        legacy_names: &[("NormalDistribution", None)],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(OnCpu(Normal::new(ctx)?)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(OnGpu(Normal::new(ctx)?)))),
};

struct Normal {
    ctx: OpContext,
    dtype: DType,
}

impl Normal {
    fn new(ctx: &OpContext) -> Result<Normal> {
        let dtype = super::dtype_or(&ctx.args, DType::F32);
        require_dtype(&ctx.display_name, "dtype", dtype, &[
            DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32,
            DType::U64, DType::I64, DType::F16, DType::F32, DType::F64,
        ])?;
        sample_shape(ctx)?;
        Ok(Normal { ctx: ctx.clone(), dtype })
    }
}

impl Generate for Normal {
    fn generate(&mut self, ws: &Workspace<'_>, like: Option<&BatchMeta>) -> Result<TensorList> {
        let mut out = output_batch(&self.ctx, ws, like, self.dtype)?;
        let name = &self.ctx.display_name;
        let mean = ws.per_sample(&self.ctx, "mean");
        let stddev = ws.per_sample(&self.ctx, "stddev");
        let dtype = self.dtype;
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let m = mean.get(name, i)?.unwrap_or(0.0);
            let s = stddev.get(name, i)?.unwrap_or(1.0);
            if !(s >= 0.0) {
                return Err(Error::arg(name, "stddev", format!("must be >= 0; sample {i} has {s}")));
            }
            let (key, stream) = ws.rng(&self.ctx, i).key_and_stream();
            crate::rng::normals(key, stream, 0..bytes.len() / dtype.size(), |k, z| store_f64(dtype, bytes, k, m + s * z));
            Ok(())
        })?;
        Ok(out)
    }
}
