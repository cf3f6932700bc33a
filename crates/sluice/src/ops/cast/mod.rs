//! `fn.cast`: converts every element to `dtype` with DALI's `ConvertSat` rules, as
//! [`crate::tensor::element::store`] implements them (checked against DALI 2.4);
//! `fn.cast_like`: the same, to the second input's type.

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

/// `fn.cast_like`: `fn.cast` to the type of the second input (whose data is not read).
pub static CAST_LIKE: OpDef = OpDef {
    schema: OpSchema {
        name: "CastLike",
        doc: "Cast the first tensor to the type of the second tensor. Float to integer conversion rounds to nearest (half away from zero) and saturates.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 2,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[],
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Cast::like(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::CastGpu::like(ctx)))),
};

/// Shared by the cpu and gpu backends.
struct Cast {
    ctx: OpContext,
    dtype: DType,
    /// `cast_like`: `dtype` is set from the second input's type before each batch.
    like: bool,
}

impl Cast {
    fn new(ctx: &OpContext) -> Cast {
        Cast { ctx: ctx.clone(), dtype: ctx.args.dtype("dtype"), like: false }
    }

    /// `cast_like`: the type comes from each batch's second input.
    fn like(ctx: &OpContext) -> Cast {
        Cast { ctx: ctx.clone(), dtype: DType::F32, like: true }
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
        if self.like {
            self.dtype = ws.inputs[1].dtype();
        }
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
    if convert_common(src, input, dst, out) {
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

/// The conversions pipelines use most (image bytes to floats and back), on typed slices:
/// the generic path goes through a wide number per element and is several times slower.
/// Same rules: round half away from zero, saturate, NaN to 0. False when `(src, dst)` is not
/// one of them (or the bytes are not aligned for their type).
fn convert_common(src: DType, input: &[u8], dst: DType, out: &mut [u8]) -> bool {
    macro_rules! float_to_int {
        ($f:ty, $t:ty) => {{
            let (Ok(i), Ok(o)) = (bytemuck::try_cast_slice::<u8, $f>(input), bytemuck::try_cast_slice_mut::<u8, $t>(out)) else { return false };
            // `as` saturates (and maps NaN to 0); `round` is half away from zero.
            o.iter_mut().zip(i).for_each(|(o, &x)| *o = x.round() as $t);
            true
        }};
    }
    macro_rules! int_to_float {
        ($t:ty, $f:ty) => {{
            let (Ok(i), Ok(o)) = (bytemuck::try_cast_slice::<u8, $t>(input), bytemuck::try_cast_slice_mut::<u8, $f>(out)) else { return false };
            o.iter_mut().zip(i).for_each(|(o, &x)| *o = x as $f);
            true
        }};
    }
    match (src, dst) {
        (DType::F32, DType::U8) => float_to_int!(f32, u8),
        (DType::F32, DType::I8) => float_to_int!(f32, i8),
        (DType::F32, DType::U16) => float_to_int!(f32, u16),
        (DType::F32, DType::I16) => float_to_int!(f32, i16),
        (DType::U8, DType::F32) => int_to_float!(u8, f32),
        (DType::I16, DType::F32) => int_to_float!(i16, f32),
        (DType::U16, DType::F32) => int_to_float!(u16, f32),
        (DType::I32, DType::F32) => int_to_float!(i32, f32),
        _ => false,
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

#[cfg(test)]
mod common_conversion_tests {
    use super::*;

    /// The fast paths give what the generic path gives, edge values included.
    #[test]
    fn common_conversions_match_the_generic_rules() {
        let floats: Vec<f32> = vec![0.0, 0.49, 0.5, 1.5, 2.5, -0.5, -1.5, 254.5, 255.4, 255.5, 300.0, -300.0, 1e20, -1e20, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 127.5, -128.5, 65535.5, 32767.5];
        let input: Vec<u8> = bytemuck::cast_slice(&floats).to_vec();
        for dst in [DType::U8, DType::I8, DType::U16, DType::I16] {
            let mut fast = vec![0u8; floats.len() * dst.size()];
            assert!(convert_common(DType::F32, &input, dst, &mut fast));
            let mut slow = vec![0u8; fast.len()];
            for k in 0..floats.len() {
                store(dst, &mut slow, k, load(DType::F32, &input, k));
            }
            assert_eq!(fast, slow, "FLOAT -> {dst}");
        }
        let ints: Vec<i32> = vec![0, 1, -1, 255, 16_777_217, i32::MIN, i32::MAX];
        for (src, bytes) in [
            (DType::U8, (0u8..=255).collect::<Vec<u8>>()),
            (DType::I16, bytemuck::cast_slice(&[0i16, -1, i16::MIN, i16::MAX]).to_vec()),
            (DType::U16, bytemuck::cast_slice(&[0u16, 1, u16::MAX]).to_vec()),
            (DType::I32, bytemuck::cast_slice(&ints).to_vec()),
        ] {
            let n = bytes.len() / src.size();
            let mut fast = vec![0u8; n * 4];
            assert!(convert_common(src, &bytes, DType::F32, &mut fast));
            let mut slow = vec![0u8; n * 4];
            for k in 0..n {
                store(DType::F32, &mut slow, k, load(src, &bytes, k));
            }
            assert_eq!(fast, slow, "{src} -> FLOAT");
        }
    }
}
