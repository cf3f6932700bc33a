//! Random number generators: `random.uniform`, `random.coin_flip`. Every value comes from the
//! counter-based stream of (seed, operator, iteration, sample), so results do not depend on
//! the thread count.

mod choice;
mod coin_flip;
mod normal;
mod uniform;

pub use choice::CHOICE;
pub use coin_flip::COIN_FLIP;
pub use normal::NORMAL;
pub use uniform::UNIFORM;

use crate::error::{Error, Result};
use crate::ops::{Args, OpContext};
use crate::tensor::{DType, TensorList};

/// The output shape of one sample: the `shape` argument, or a scalar.
pub(crate) fn sample_shape(ctx: &OpContext) -> Result<Vec<usize>> {
    if !ctx.args.has("shape") {
        return Ok(Vec::new());
    }
    ctx.args
        .ints("shape")
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::arg(&ctx.display_name, "shape", format!("extents must be >= 0, got {d}"))))
        .collect()
}

/// A batch of `batch_size` samples of `shape`.
pub(crate) fn alloc(dtype: DType, shape: &[usize], batch_size: usize) -> TensorList {
    TensorList::uniform(dtype, shape, batch_size)
}

/// Writes `v` as element `k` of a sample of type `dtype` (little-endian bytes).
pub(crate) fn store(dtype: DType, bytes: &mut [u8], k: usize, v: f64) {
    let n = dtype.size();
    let dst = &mut bytes[k * n..(k + 1) * n];
    match dtype {
        DType::U8 => dst[0] = v as u8,
        DType::I8 => dst[0] = v as i8 as u8,
        DType::Bool => dst[0] = (v != 0.0) as u8,
        DType::U16 => dst.copy_from_slice(&(v as u16).to_le_bytes()),
        DType::I16 => dst.copy_from_slice(&(v as i16).to_le_bytes()),
        DType::U32 => dst.copy_from_slice(&(v as u32).to_le_bytes()),
        DType::I32 => dst.copy_from_slice(&(v as i32).to_le_bytes()),
        DType::U64 => dst.copy_from_slice(&(v as u64).to_le_bytes()),
        DType::I64 => dst.copy_from_slice(&(v as i64).to_le_bytes()),
        DType::F32 => dst.copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => dst.copy_from_slice(&v.to_le_bytes()),
        DType::F16 => dst.copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
    }
}

/// Round-to-nearest-even float16 conversion (enough for random values and casts).
pub(crate) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = (mant | 0x80_0000) >> (1 - e);
        let round = (m & 0x1fff) > 0x1000 || ((m & 0x1fff) == 0x1000 && (m & 0x2000) != 0);
        return sign | ((m >> 13) as u16 + round as u16);
    }
    let round = (mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (mant & 0x2000) != 0);
    (sign | ((e as u16) << 10) | (mant >> 13) as u16) + round as u16
}

/// The `dtype` argument, or `default` when not given.
pub(crate) fn dtype_or(args: &Args, default: DType) -> DType {
    if args.has("dtype") { args.dtype("dtype") } else { default }
}
