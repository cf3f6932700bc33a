//! `fn.cast`: converts every element to `dtype` with DALI's `ConvertSat` rules, as
//! [`crate::tensor::element::store`] implements them (checked against DALI 2.4).

pub(crate) mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::element::{load, store};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Schema and backends.
pub static CAST: OpDef = OpDef {
    schema: OpSchema {
        name: "Cast",
        doc: "Cast a tensor to a different type. Float to integer conversion rounds to nearest (half away from zero) and saturates.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("dtype", T::DType, D::Required, "Output data type.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Cast::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::CastGpu::new(ctx)))),
};

/// Shared by the cpu and gpu backends.
struct Cast {
    ctx: OpContext,
    dtype: DType,
}

impl Cast {
    fn new(ctx: &OpContext) -> Cast {
        Cast { ctx: ctx.clone(), dtype: ctx.args.dtype("dtype") }
    }

    /// The output of a batch of `input`: same shapes, layout and source info, new type.
    fn output_meta(&self, input: &BatchMeta) -> BatchMeta {
        let mut meta = BatchMeta::new(self.dtype, input.ndim(), (0..input.len()).map(|i| input.shape(i)));
        meta.set_layout(input.layout().clone());
        meta.inherit_source_info(input);
        meta
    }
}

impl Operator for Cast {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mut out = TensorList::for_overwrite(self.output_meta(input.meta())); // every element is written
        let (src, dst) = (input.dtype(), self.dtype);
        for_each_sample(ws.pool, &mut out, |i, bytes| {
            convert_slice(src, input.bytes(i), dst, bytes);
            Ok(())
        })?;
        Ok(vec![out])
    }
}

/// Converts a whole dense buffer. Monomorphised per (source, target) pair through the
/// `match`es in `load`/`store` being hoisted by the optimiser for each branch below.
pub fn convert_slice(src: DType, input: &[u8], dst: DType, out: &mut [u8]) {
    let n = input.len() / src.size();
    debug_assert_eq!(out.len(), n * dst.size());
    if src == dst {
        out.copy_from_slice(input);
        return;
    }
    macro_rules! go {
        ($s:expr, $d:expr) => {
            for k in 0..n {
                store($d, out, k, load($s, input, k))
            }
        };
    }
    macro_rules! per_dst {
        ($s:expr) => {
            match dst {
                DType::U8 => go!($s, DType::U8),
                DType::I8 => go!($s, DType::I8),
                DType::U16 => go!($s, DType::U16),
                DType::I16 => go!($s, DType::I16),
                DType::U32 => go!($s, DType::U32),
                DType::I32 => go!($s, DType::I32),
                DType::U64 => go!($s, DType::U64),
                DType::I64 => go!($s, DType::I64),
                DType::F16 => go!($s, DType::F16),
                DType::F32 => go!($s, DType::F32),
                DType::F64 => go!($s, DType::F64),
                DType::Bool => go!($s, DType::Bool),
            }
        };
    }
    match src {
        DType::U8 => per_dst!(DType::U8),
        DType::I8 => per_dst!(DType::I8),
        DType::U16 => per_dst!(DType::U16),
        DType::I16 => per_dst!(DType::I16),
        DType::U32 => per_dst!(DType::U32),
        DType::I32 => per_dst!(DType::I32),
        DType::U64 => per_dst!(DType::U64),
        DType::I64 => per_dst!(DType::I64),
        DType::F16 => per_dst!(DType::F16),
        DType::F32 => per_dst!(DType::F32),
        DType::F64 => per_dst!(DType::F64),
        DType::Bool => per_dst!(DType::Bool),
    }
}

/// Checks a dtype an operator cannot produce or read, naming the argument.
pub fn require_dtype(op: &str, argument: &str, dtype: DType, allowed: &[DType]) -> Result<()> {
    if allowed.contains(&dtype) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.dali_name()).collect();
    Err(Error::arg(op, argument, format!("unsupported type {dtype}; supported: {}", names.join(", "))))
}
