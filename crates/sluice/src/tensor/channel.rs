//! Pixel channels as the image operators compute them: every supported element type read as
//! an `f32` (what DALI's image kernels compute in) and written back with DALI's `ConvertSat`
//! (round half away from zero, saturate, NaN to 0), plus the one dispatch from a pair of
//! runtime `DType`s to a kernel monomorphised for them. The element rules are
//! `tensor::element`'s; this is their typed, per-pixel form.

use super::element::{f16_to_f64, f64_to_f16};
use super::DType;

/// A pixel channel type the image kernels read and write.
pub trait Channel: bytemuck::Pod + Send + Sync + 'static {
    /// The element type's tag.
    const DTYPE: DType;
    /// Value as f32 (what DALI's image kernels compute in).
    fn to_f32(self) -> f32;
    /// Value as f64 (exact for every supported type).
    fn to_f64(self) -> f64;
    /// DALI's `ConvertSat<Self>(float)`: round half away from zero, saturate.
    fn sat_f32(v: f32) -> Self;
    /// `ConvertSat<Self>(double)`.
    fn sat_f64(v: f64) -> Self;
    /// The rounding half of `sat_f32` over a block, in place (vector code for the integer
    /// types; nothing for floats); `from_rounded` then saturates: together they are `sat_f32`.
    #[inline(always)]
    fn round_block(_values: &mut [f32]) {}
    /// `sat_f32` of a value `round_block` has rounded.
    #[inline(always)]
    fn from_rounded(v: f32) -> Self {
        Self::sat_f32(v)
    }
    /// `sat_f32` of each value into `out`: vector code for the 8- and 16-bit types, whose
    /// range an f32 holds exactly (the values are saturated in f32 first, so the rounding
    /// and the conversion need no range checks).
    #[inline(always)]
    fn sat_f32_row(out: &mut [Self], values: &[f32]) {
        for (o, &v) in out.iter_mut().zip(values) {
            *o = Self::sat_f32(v);
        }
    }
}

/// `$t => $d [sat_f32_row]`: the type's range fits an f32 exactly, so its `sat_f32_row` is
/// the vector form.
macro_rules! int_channel {
    ($($t:ty => $d:ident $([$sat_f32_row:ident])?),*) => {$(
        impl Channel for $t {
            const DTYPE: DType = DType::$d;
            #[inline(always)]
            fn to_f32(self) -> f32 { self as f32 }
            #[inline(always)]
            fn to_f64(self) -> f64 { self as f64 }
            #[inline(always)]
            fn sat_f32(v: f32) -> Self { round_half_away(v) as $t }
            #[inline(always)]
            fn sat_f64(v: f64) -> Self { v.round() as $t }
            #[inline(always)]
            fn round_block(values: &mut [f32]) {
                values.iter_mut().for_each(|v| *v = round_half_away(*v));
            }
            #[inline(always)]
            fn from_rounded(v: f32) -> Self { v as $t }
            $(
            #[inline(always)]
            fn $sat_f32_row(out: &mut [Self], values: &[f32]) {
                for (o, &v) in out.iter_mut().zip(values) {
                    let c = if v.is_nan() { 0.0 } else { v.clamp(<$t>::MIN as f32, <$t>::MAX as f32) };
                    // SAFETY: `c` is finite and within the type's range, so within i32's.
                    let t = unsafe { c.to_int_unchecked::<i32>() };
                    let d = c - t as f32;
                    *o = (t + (d >= 0.5) as i32 - (d <= -0.5) as i32) as $t;
                }
            }
            )?
        }
    )*};
}
int_channel!(u8 => U8 [sat_f32_row], i8 => I8 [sat_f32_row], u16 => U16 [sat_f32_row], i16 => I16 [sat_f32_row], u32 => U32, i32 => I32);

impl Channel for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 { self }
    #[inline(always)]
    fn to_f64(self) -> f64 { self as f64 }
    #[inline(always)]
    fn sat_f32(v: f32) -> Self { v }
    #[inline(always)]
    fn sat_f64(v: f64) -> Self { v as f32 }
}

/// An IEEE half, as its bits. Conversions are `tensor::element`'s: exact widening, and
/// narrowing to nearest with ties away from zero (DALI 2.4's cpu operators).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct F16(pub u16);

impl Channel for F16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 { f16_to_f64(self.0) as f32 }
    #[inline(always)]
    fn to_f64(self) -> f64 { f16_to_f64(self.0) }
    #[inline(always)]
    fn sat_f32(v: f32) -> Self { F16(f64_to_f16(v as f64)) }
    #[inline(always)]
    fn sat_f64(v: f64) -> Self { F16(f64_to_f16(v)) }
}

/// True when kernels compiled for AVX2 (`#[target_feature(enable = "avx2")]` twins of
/// `#[inline(always)]` bodies) may run: checked once, the CPU does not change. The wheel is
/// built for baseline x86-64, so this is how the pixel loops get 8-lane vectors.
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `fn name(args)`: runs `body(args)` (an `#[inline(always)]` function of the same
/// signature) compiled for AVX2 when the CPU has it ([`has_avx2`]), else as it is. The
/// arithmetic is the same either way (no fused multiply-adds); the twin only lets the
/// compiler use 8-lane vectors. One line per kernel:
/// `avx2_twin!(pub fn scale<I: Channel, O: Channel>(dst: &mut [O], src: &[I], k: f32) => scale_body);`
macro_rules! avx2_twin {
    ($(#[$meta:meta])* $vis:vis fn $name:ident $(<$($g:ident: $bound:path),*>)? ($($arg:ident: $ty:ty),* $(,)?) => $body:ident) => {
        $(#[$meta])*
        $vis fn $name $(<$($g: $bound),*>)? ($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2 $(<$($g: $bound),*>)? ($($arg: $ty),*) {
                    $body $(::<$($g),*>)? ($($arg),*)
                }
                if $crate::tensor::channel::has_avx2() {
                    // SAFETY: the CPU has AVX2 (checked just above).
                    return unsafe { avx2 $(::<$($g),*>)? ($($arg),*) };
                }
            }
            $body $(::<$($g),*>)? ($($arg),*)
        }
    };
}
pub(crate) use avx2_twin;

/// `v.round()` (half away from zero) without a libm call; saturates like `as` casts do.
#[inline(always)]
pub fn round_half_away(v: f32) -> f32 {
    // Below 2^23 every f32 with a fraction fits an i32 and `v - trunc(v)` is exact.
    if v.abs() < 8_388_608.0 {
        let t = v as i32 as f32;
        let d = v - t;
        // Branch-free: the fraction is data-dependent and would defeat the branch predictor.
        t + ((d >= 0.5) as i32 - (d <= -0.5) as i32) as f32
    } else {
        v // already an integer (or inf / NaN)
    }
}

/// A kernel generic over its input and output channel types; [`dispatch_pair`] picks them
/// from runtime `DType`s. (Closures cannot be generic, hence the trait.)
pub trait PairKernel {
    type Output;
    fn run<I: Channel, O: Channel>(self) -> Self::Output;
}

/// Runs `kernel` monomorphised for `(input, output)`, each one of UINT8, INT16, INT32, FLOAT
/// and FLOAT16; `None` for other types (the operator checks its own subset first).
pub fn dispatch_pair<K: PairKernel>(input: DType, output: DType, kernel: K) -> Option<K::Output> {
    macro_rules! out {
        ($i:ty) => {
            match output {
                DType::U8 => Some(kernel.run::<$i, u8>()),
                DType::I16 => Some(kernel.run::<$i, i16>()),
                DType::I32 => Some(kernel.run::<$i, i32>()),
                DType::F32 => Some(kernel.run::<$i, f32>()),
                DType::F16 => Some(kernel.run::<$i, F16>()),
                _ => None,
            }
        };
    }
    match input {
        DType::U8 => out!(u8),
        DType::I16 => out!(i16),
        DType::I32 => out!(i32),
        DType::F32 => out!(f32),
        DType::F16 => out!(F16),
        _ => None,
    }
}

/// Runs `kernel` for `(input, output)` where the output is the input type or FLOAT and the
/// input one of UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT (what filters take); `None`
/// otherwise.
pub fn dispatch_same_or_float<K: PairKernel>(input: DType, output: DType, kernel: K) -> Option<K::Output> {
    macro_rules! go {
        ($i:ty) => {
            if output == input {
                Some(kernel.run::<$i, $i>())
            } else if output == DType::F32 {
                Some(kernel.run::<$i, f32>())
            } else {
                None
            }
        };
    }
    match input {
        DType::U8 => go!(u8),
        DType::I8 => go!(i8),
        DType::U16 => go!(u16),
        DType::I16 => go!(i16),
        DType::U32 => go!(u32),
        DType::I32 => go!(i32),
        DType::F32 => go!(f32),
        _ => None,
    }
}

/// The short name kernels use for a channel type (`u8`, `i8`, `u16`, `i16`, `u32`, `i32`,
/// `f32`, `f16`): a GPU
/// kernel for a type pair is named `<op>_<in>_<out>`.
pub fn short_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::U16 => "u16",
        DType::I16 => "i16",
        DType::U32 => "u32",
        DType::I32 => "i32",
        DType::F32 => "f32",
        DType::F16 => "f16",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::element::store_f64;

    /// The row form is `sat_f32` value by value, NaN, infinities and out-of-range values
    /// included.
    #[test]
    fn sat_f32_row_is_sat_f32() {
        let mut values = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e10, -1e10, 8_388_608.5, 2_147_483_648.0];
        for base in [-32769.0f32, -32768.0, -129.0, -128.0, -1.0, 0.0, 1.0, 127.0, 128.0, 254.0, 255.0, 256.0, 32767.0, 65535.0, 65536.0] {
            for frac in [-0.75f32, -0.5, -0.49999997, -0.25, 0.0, 0.25, 0.49999997, 0.5, 0.75] {
                values.push(base + frac);
            }
        }
        fn check<T: Channel + PartialEq + std::fmt::Debug>(values: &[f32]) {
            let mut row = vec![T::zeroed(); values.len()];
            T::sat_f32_row(&mut row, values);
            for (&v, &got) in values.iter().zip(&row) {
                assert_eq!(got, T::sat_f32(v), "{} of {v}", T::DTYPE);
            }
        }
        check::<u8>(&values);
        check::<i8>(&values);
        check::<u16>(&values);
        check::<i16>(&values);
        check::<i32>(&values);
        check::<f32>(&values[1..]);
    }

    /// The typed conversions are `tensor::element`'s `store` of the same value.
    #[test]
    fn saturating_stores_agree_with_the_element_rules() {
        let values = [0.0f32, 0.5, 1.5, -0.5, -1.5, 2.5, 254.5, 255.49, 255.5, 300.0, -300.0, 32767.5, -32768.5, 1e10, -1e10, f32::NAN, 65504.0, 65520.0, 1e-8, 0.1];
        fn check<C: Channel>(v: f32) {
            let mut bytes = vec![0u8; C::DTYPE.size()];
            store_f64(C::DTYPE, &mut bytes, 0, v as f64);
            let typed = C::sat_f32(v);
            assert_eq!(bytemuck::bytes_of(&typed), &bytes[..], "{} <- {v}", C::DTYPE);
        }
        for v in values {
            check::<u8>(v);
            check::<i16>(v);
            check::<F16>(v);
            // NaN: image kernels give 0 where `fn.cast` gives x86's INT32 minimum.
            if !v.is_nan() {
                check::<i32>(v);
            }
        }
        assert_eq!(i32::sat_f32(f32::NAN), 0);
    }

    #[test]
    fn rounding_a_block_then_converting_is_sat_f32() {
        let mut values = vec![0.5f32, -0.5, 1.49999, 2.5, 254.5, 255.5, 1e10, -1e10, f32::NAN, 0.49999997, -3.5];
        let want: Vec<i16> = values.iter().map(|&v| i16::sat_f32(v)).collect();
        i16::round_block(&mut values);
        let got: Vec<i16> = values.iter().map(|&v| i16::from_rounded(v)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_supported_pair_dispatches() {
        struct Names;
        impl PairKernel for Names {
            type Output = (DType, DType);
            fn run<I: Channel, O: Channel>(self) -> (DType, DType) {
                (I::DTYPE, O::DTYPE)
            }
        }
        let types = [DType::U8, DType::I16, DType::I32, DType::F32, DType::F16];
        for i in types {
            for o in types {
                assert_eq!(dispatch_pair(i, o, Names), Some((i, o)));
            }
        }
        assert_eq!(dispatch_pair(DType::U16, DType::U8, Names), None);
    }
}
