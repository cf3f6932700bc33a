//! `fn.cast`: converts every element to `dtype` with DALI's rules (checked against DALI 2.4):
//! float -> integer rounds half away from zero and saturates (NaN gives 0, or the pattern
//! x86 conversions produce for 32/64-bit targets: INT32/INT64 minimum, 2^63 for UINT64);
//! integer -> integer saturates; -> BOOL is `!= 0` (after rounding floats); -> FLOAT16 rounds half away from zero
//! and overflows to infinity. The conversion helpers are shared with other operators.

pub(crate) mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
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

/// A value on its way between types: exact for every source type.
#[derive(Debug, Clone, Copy)]
pub enum Num {
    Int(i128),
    Float(f64),
}

/// Element `k` of `bytes` (of type `dtype`), exactly.
#[inline(always)]
pub fn load(dtype: DType, b: &[u8], k: usize) -> Num {
    macro_rules! rd {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            <$t>::from_le_bytes(b[k * N..k * N + N].try_into().unwrap())
        }};
    }
    match dtype {
        DType::U8 => Num::Int(b[k] as i128),
        DType::Bool => Num::Int((b[k] != 0) as i128),
        DType::I8 => Num::Int(b[k] as i8 as i128),
        DType::U16 => Num::Int(rd!(u16) as i128),
        DType::I16 => Num::Int(rd!(i16) as i128),
        DType::U32 => Num::Int(rd!(u32) as i128),
        DType::I32 => Num::Int(rd!(i32) as i128),
        DType::U64 => Num::Int(rd!(u64) as i128),
        DType::I64 => Num::Int(rd!(i64) as i128),
        DType::F16 => Num::Float(f16_to_f64(rd!(u16))),
        DType::F32 => Num::Float(rd!(f32) as f64),
        DType::F64 => Num::Float(rd!(f64)),
    }
}

/// Element `k` of `bytes` as f64 (integers above 2^53 round).
#[inline(always)]
pub fn load_f64(dtype: DType, b: &[u8], k: usize) -> f64 {
    match load(dtype, b, k) {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

/// Writes `v` as element `k` of `bytes` (type `dtype`) with DALI's saturating conversion.
#[inline(always)]
pub fn store(dtype: DType, b: &mut [u8], k: usize, v: Num) {
    macro_rules! wr {
        ($t:ty, $x:expr) => {{
            const N: usize = std::mem::size_of::<$t>();
            b[k * N..k * N + N].copy_from_slice(&($x).to_le_bytes());
        }};
    }
    macro_rules! int {
        ($t:ty, $nan:expr) => {{
            let x: $t = match v {
                Num::Int(i) => i.clamp(<$t>::MIN as i128, <$t>::MAX as i128) as $t,
                Num::Float(f) if f.is_nan() => $nan,
                // `as` saturates; `round` is half away from zero, as DALI's ConvertSat.
                Num::Float(f) => f.round() as $t,
            };
            wr!($t, x)
        }};
    }
    match dtype {
        DType::U8 => int!(u8, 0),
        DType::I8 => int!(i8, 0),
        DType::U16 => int!(u16, 0),
        DType::I16 => int!(i16, 0),
        DType::U32 => int!(u32, 0),
        DType::I32 => int!(i32, i32::MIN),
        DType::U64 => int!(u64, 1u64 << 63),
        DType::I64 => int!(i64, i64::MIN),
        DType::Bool => b[k] = match v {
            Num::Int(i) => i != 0,
            // DALI rounds first: 0.4 -> false, 0.5 -> true, NaN -> true.
            Num::Float(f) => f.round() != 0.0,
        } as u8,
        DType::F32 => wr!(f32, match v {
            Num::Int(i) => i as f32,
            Num::Float(f) => f as f32,
        }),
        DType::F64 => wr!(f64, match v {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }),
        DType::F16 => wr!(u16, f64_to_f16(match v {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        })),
    }
}

/// [`store`] of a float value.
#[inline(always)]
pub fn store_f64(dtype: DType, b: &mut [u8], k: usize, v: f64) {
    store(dtype, b, k, Num::Float(v))
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

/// IEEE half -> f64 (exact).
pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 => {
            if frac == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        }
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// f64 -> IEEE half, rounding to nearest with ties away from zero (what DALI 2.4 does on
/// CPU: 1 + 2^-11 -> 1.0009765625, 2^-25 -> the smallest subnormal); overflow gives
/// infinity, NaN gives 0x7e00 (sign kept).
pub fn f64_to_f16(f: f64) -> u16 {
    let sign: u16 = if f.is_sign_negative() { 0x8000 } else { 0 };
    if f.is_nan() {
        return sign | 0x7e00;
    }
    let a = f.abs();
    // Values are multiples of 2^-24 in the subnormal range, of 2^(e-10) above.
    if a < 2f64.powi(-14) {
        let m = (a * 2f64.powi(24)).round(); // half away from zero; <= 1024 here
        return sign | m as u16; // m == 1024 is the smallest normal: same bits
    }
    if a >= 65520.0 {
        // Halfway between 65504 and 2^16 and above: rounds (away) out of range.
        return sign | 0x7c00;
    }
    let e = a.log2().floor() as i32;
    // Guard against log2 rounding at exact powers of two.
    let e = if 2f64.powi(e) > a { e - 1 } else if 2f64.powi(e + 1) <= a { e + 1 } else { e };
    if e > 15 {
        return sign | 0x7c00;
    }
    let m = (a / 2f64.powi(e - 10)).round() as u32; // in [1024, 2048]
    let (m, e) = if m == 2048 { (1024, e + 1) } else { (m, e) };
    if e > 15 {
        return sign | 0x7c00;
    }
    sign | (((e + 15) as u16) << 10) | (m - 1024) as u16
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
mod tests {
    use super::*;

    #[test]
    fn half_rounding_matches_dali() {
        // DALI 2.4 fn.cast(float32 -> FLOAT16) bit patterns.
        let v = [1.0 + 2f64.powi(-11), 1.0 + 3.0 * 2f64.powi(-11), -(1.0 + 2f64.powi(-11)), 2049.0, 2051.0,
            2f64.powi(-25), 3.0 * 2f64.powi(-25), 5.0 * 2f64.powi(-25), 2f64.powi(-14) + 2f64.powi(-25)];
        let got: Vec<u16> = v.iter().map(|&x| f64_to_f16(x)).collect();
        assert_eq!(got, [15361, 15362, 48129, 26625, 26626, 1, 2, 3, 1025]);
        assert_eq!(f64_to_f16(65519.99), 31743);
        assert_eq!(f64_to_f16(65520.0), 31744);
        assert_eq!(f64_to_f16(-0.0), 0x8000);
        assert_eq!(f64_to_f16(f64::NAN), 0x7e00);
        for h in 0u16..0x7c00 {
            assert_eq!(f64_to_f16(f16_to_f64(h)), h, "{h}");
        }
    }
}
