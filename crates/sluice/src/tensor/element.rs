//! Element values between types: every conversion, saturation and rounding rule the CPU
//! kernels apply, written once. `ops/element.cuh` mirrors it for the GPU kernels (a test
//! compiles that header on the host and compares it with this module).
//!
//! The rules, as DALI 2.4 applies them on the CPU (each checked against DALI's output):
//! - [`store`] is DALI's `ConvertSat`: float -> integer rounds half away from zero and
//!   saturates (NaN gives 0, or what x86 conversions give for 32/64-bit targets: INT32/INT64
//!   minimum, 2^63 for UINT64); integer -> integer saturates; -> BOOL is `!= 0` after
//!   rounding; -> FLOAT16 is [`f64_to_f16`]. `fn.cast`, `crop`, `slice`, `normalize` and
//!   the random generators (`random.uniform(values=[2.7], dtype=INT32)` gives 3, 300 as
//!   UINT8 gives 255) store this way.
//! - [`f64_to_f16`]: one rounding to the nearest half, ties away from zero, overflow to
//!   infinity. DALI's host float16 type rounds this way in `fn.cast`, `fn.crop` and
//!   `fn.crop_mirror_normalize` alike (1 + 2^-11 gives 0x3c01, where round-to-nearest-even
//!   would give 0x3c00).
//! - [`store_static_cast`]: C++'s `static_cast<T>(float)` as x86 executes it (truncation
//!   toward zero, integers wrap: 300 -> UINT8 44), for `fn.pad`'s `fill_value`.

use super::DType;

/// A value on its way between types: exact for every source type.
#[derive(Debug, Clone, Copy)]
pub enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    /// The value as f64 (integers above 2^53 round to nearest).
    #[inline(always)]
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// IEEE half bits -> f64, exactly.
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

/// f64 -> IEEE half bits: the nearest half, ties away from zero (DALI 2.4's CPU rounding,
/// see the module docs); beyond 65504 (from the halfway point 65520 on) infinity; NaN gives
/// 0x7e00 with the sign kept. An f32 converts exactly to f64 first, so `v as f64` is the
/// same single rounding for f32 values.
#[inline(always)]
pub fn f64_to_f16(v: f64) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if exp == 0x7ff {
        return sign | if frac != 0 { 0x7e00 } else { 0x7c00 };
    }
    let e = exp - 1023; // v = sig * 2^(e - 52) (for a normal double)
    if e >= 16 {
        return sign | 0x7c00;
    }
    if exp == 0 {
        return sign; // a subnormal double is far below half of the smallest half
    }
    let sig = frac | (1u64 << 52);
    // Halves are multiples of 2^(e - 10) from 2^-14 up, of 2^-24 below: drop the bits finer
    // than that and round the dropped part half up (away from zero: `sig` is a magnitude).
    let shift = if e >= -14 { 42 } else { (28 - e) as u32 };
    if shift > 53 {
        return sign; // below 2^-25: nearer to zero than to the smallest subnormal
    }
    let mut r = sig >> shift;
    if sig & ((1u64 << shift) - 1) >= 1u64 << (shift - 1) {
        r += 1;
    }
    // Normal: r in [1024, 2048] carries the implicit bit, which adding it onto the exponent
    // field absorbs (r = 2048 moves to the next binade, from 65504 up to infinity).
    // Subnormal: r <= 1024, where 1024 is the smallest normal's bits.
    let h = if e >= -14 { (((e + 14) as u32) << 10) + r as u32 } else { r as u32 };
    sign | h as u16
}

/// Element `k` of `b` (little-endian elements of type `dtype`), exactly. BOOL bytes other
/// than 0 read as 1.
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

/// Element `k` of `b` as f64 (integers above 2^53 round to nearest).
#[inline(always)]
pub fn load_f64(dtype: DType, b: &[u8], k: usize) -> f64 {
    load(dtype, b, k).as_f64()
}

/// Writes `v` as element `k` of `b` (type `dtype`) with DALI's `ConvertSat` (module docs).
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
                // `as` saturates; `round` is half away from zero.
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
        DType::Bool => {
            b[k] = match v {
                Num::Int(i) => i != 0,
                // Rounded first: 0.4 -> false, 0.5 -> true, NaN -> true.
                Num::Float(f) => f.round() != 0.0,
            } as u8
        }
        // One rounding from the exact value (i128 and f64 `as f32` round to nearest).
        DType::F32 => wr!(f32, match v {
            Num::Int(i) => i as f32,
            Num::Float(f) => f as f32,
        }),
        DType::F64 => wr!(f64, v.as_f64()),
        DType::F16 => wr!(u16, f64_to_f16(v.as_f64())),
    }
}

/// [`store`] of a float value.
#[inline(always)]
pub fn store_f64(dtype: DType, b: &mut [u8], k: usize, v: f64) {
    store(dtype, b, k, Num::Float(v))
}

/// One element of `dtype` holding `v` as C++'s `static_cast<T>(v)` gives it on x86:
/// floats convert (FLOAT16 by [`f64_to_f16`]), integers truncate toward zero and keep their
/// low bits (300 -> UINT8 44, -1.6 -> UINT8 255); UINT64 from a negative value wraps the
/// same way. The first `dtype.size()` bytes of the result are the element.
pub fn store_static_cast(dtype: DType, v: f32) -> [u8; 8] {
    let mut b = [0u8; 8];
    let t = v as i64;
    match dtype {
        DType::U8 | DType::I8 => b[0] = t as u8,
        DType::Bool => b[0] = (v != 0.0) as u8,
        DType::U16 | DType::I16 => b[..2].copy_from_slice(&(t as u16).to_le_bytes()),
        DType::U32 | DType::I32 => b[..4].copy_from_slice(&(t as u32).to_le_bytes()),
        DType::I64 => b.copy_from_slice(&t.to_le_bytes()),
        DType::U64 => b.copy_from_slice(&(if v >= 0.0 { v as u64 } else { t as u64 }).to_le_bytes()),
        DType::F16 => b[..2].copy_from_slice(&f64_to_f16(v as f64).to_le_bytes()),
        DType::F32 => b[..4].copy_from_slice(&v.to_le_bytes()),
        DType::F64 => b.copy_from_slice(&(v as f64).to_le_bytes()),
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finite half, ascending, as f64 (the reference's candidates).
    fn halves() -> Vec<f64> {
        (0u16..0x7c00).map(f16_to_f64).collect()
    }

    /// The reference rounding, by search instead of bit manipulation: the nearest finite
    /// half by exact f64 distance (every f32 and every half differ by an exact f64 in this
    /// range), ties to the larger magnitude; infinity from 65520 on.
    fn reference(table: &[f64], v: f32) -> u16 {
        let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
        let a = (v as f64).abs();
        if a >= 65520.0 {
            return sign | 0x7c00;
        }
        let hi = table.partition_point(|&h| h < a); // first half >= a
        if hi == table.len() {
            return sign | 0x7bff; // between 65504 and the halfway point to 2^16
        }
        if table[hi] == a {
            return sign | hi as u16;
        }
        let (below, above) = (a - table[hi - 1], table[hi] - a);
        sign | if above <= below { hi as u16 } else { (hi - 1) as u16 }
    }

    #[test]
    fn f16_rounding_equals_the_reference_for_every_f32_near_the_subnormal_boundary() {
        let table = halves();
        // Exponent fields 100..=115: 2^-27 up to 2^-12, through the whole subnormal range
        // and the first normal binades (~16.8M values, both signs).
        for bits in (100u32 << 23)..(116u32 << 23) {
            for v in [f32::from_bits(bits), f32::from_bits(bits | 0x8000_0000)] {
                assert_eq!(f64_to_f16(v as f64), reference(&table, v), "{v:e} ({bits:#x})");
            }
        }
        // The rest of the range, sampled, and the overflow boundary exhaustively.
        for bits in (0..(143u32 << 23)).step_by(997).chain((142u32 << 23)..(143u32 << 23)) {
            let v = f32::from_bits(bits);
            assert_eq!(f64_to_f16(v as f64), reference(&table, v), "{v:e}");
        }
        assert_eq!(f64_to_f16(f32::MAX as f64), 0x7c00);
        assert_eq!(f64_to_f16(f64::NEG_INFINITY), 0xfc00);
        assert_eq!(f64_to_f16(-f64::NAN), 0xfe00);
        assert_eq!(f64_to_f16(f64::MIN_POSITIVE / 2.0), 0);
    }

    #[test]
    fn f16_rounding_matches_dali() {
        // DALI 2.4 fn.cast / fn.crop / fn.crop_mirror_normalize (CPU) -> FLOAT16 bit patterns.
        let v = [1.0 + 2f64.powi(-11), 1.0 + 3.0 * 2f64.powi(-11), -(1.0 + 2f64.powi(-11)), 2049.0, 2051.0,
            2f64.powi(-25), 3.0 * 2f64.powi(-25), 5.0 * 2f64.powi(-25), 2f64.powi(-14) + 2f64.powi(-25)];
        let got: Vec<u16> = v.iter().map(|&x| f64_to_f16(x)).collect();
        assert_eq!(got, [15361, 15362, 48129, 26625, 26626, 1, 2, 3, 1025]);
        assert_eq!(f64_to_f16(65519.99), 31743);
        assert_eq!(f64_to_f16(65520.0), 31744);
        assert_eq!(f64_to_f16(-0.0), 0x8000);
        assert_eq!(f64_to_f16(f64::NAN), 0x7e00);
        // crop_mirror_normalize's FLOAT16 output (mean=[0.3]): -0.300048828125, 99.6875.
        assert_eq!(f64_to_f16(-0.3f32 as f64), 0xb4cd);
        assert_eq!(f64_to_f16(99.7f32 as f64), 0x563b);
        // A double just above a tie rounds up directly (no double rounding through f32).
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-40)), 15361);
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-12)), 15360);
        for h in 0u16..0x7c00 {
            assert_eq!(f64_to_f16(f16_to_f64(h)), h, "{h}");
            assert_eq!(f64_to_f16(-f16_to_f64(h)), h | 0x8000, "{h}");
        }
    }

    #[test]
    fn stores_follow_convert_sat_and_static_cast() {
        let sat = |t: DType, v: f64| {
            let mut b = [0u8; 8];
            store_f64(t, &mut b, 0, v);
            b
        };
        assert_eq!(sat(DType::U8, 300.0)[0], 255);
        assert_eq!(sat(DType::U8, -1.6)[0], 0);
        assert_eq!(sat(DType::I8, -3.5)[0] as i8, -4);
        assert_eq!(i32::from_le_bytes(sat(DType::I32, 2.7)[..4].try_into().unwrap()), 3);
        assert_eq!(i32::from_le_bytes(sat(DType::I32, f64::NAN)[..4].try_into().unwrap()), i32::MIN);
        assert_eq!(sat(DType::Bool, 0.4)[0], 0);
        assert_eq!(sat(DType::Bool, 0.5)[0], 1);
        assert_eq!(store_static_cast(DType::U8, 300.0)[0], 44);
        assert_eq!(store_static_cast(DType::U8, -1.6)[0], 255);
        assert_eq!(store_static_cast(DType::I16, -2.9)[..2], (-2i16).to_le_bytes());
        let mut b = [0u8; 2];
        store(DType::U16, &mut b, 0, Num::Int(-5));
        assert_eq!(b, [0, 0]);
        assert_eq!(load_f64(DType::Bool, &[7], 0), 1.0);
    }

    /// ops/element.cuh, compiled for the host against tools/cuda_shim/shim.h and run, gives
    /// the bits this module gives: the halves' neighbourhoods (every tie, and the doubles
    /// next to it), the whole subnormal boundary range at a stride, and the integer
    /// saturation edges, for doubles and for floats.
    #[test]
    fn the_cuda_header_converts_as_this_module() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!("sluice-element-cuh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("element.cpp");
        std::fs::write(&program, format!(r#"#include "{}"
#include "{}"
// Per input double (stdin): f64_to_f16 of it and of it as a float, then convert_sat of it
// to u8, i8, i16, i32 from the double and from the float (stdout, little-endian).
int main() {{
    double v;
    while (fread(&v, 8, 1, stdin) == 1) {{
        const float f = (float)v;
        unsigned short h[2] = {{f64_to_f16(v), f64_to_f16((double)f)}};
        unsigned char u8[2] = {{convert_sat<unsigned char>(v), convert_sat<unsigned char>(f)}};
        signed char i8[2] = {{convert_sat<signed char>(v), convert_sat<signed char>(f)}};
        short i16[2] = {{convert_sat<short>(v), convert_sat<short>(f)}};
        int i32[2] = {{convert_sat<int>(v), convert_sat<int>(f)}};
        fwrite(h, 2, 2, stdout); fwrite(u8, 1, 2, stdout); fwrite(i8, 1, 2, stdout);
        fwrite(i16, 2, 2, stdout); fwrite(i32, 4, 2, stdout);
    }}
}}
"#, root.join("../../tools/cuda_shim/shim.h").display(), root.join("src/ops/element.cuh").display())).unwrap();
        let exe = dir.join("element");
        let built = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
            .args(["-std=c++20", "-O1", "-ffp-contract=off", "-w", "-pthread", "-o"])
            .arg(&exe)
            .arg(&program)
            .output()
            .expect("a C++20 compiler (c++) to build element.cuh for the host");
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));

        let mut values: Vec<f64> = Vec::new();
        let table = halves();
        for pair in table.windows(2) {
            let mid = (pair[0] + pair[1]) / 2.0;
            for m in [mid, -mid] {
                values.extend([m, f64::from_bits(m.to_bits() + 1), f64::from_bits(m.to_bits() - 1)]);
            }
        }
        values.extend(((100u32 << 23)..(116u32 << 23)).step_by(61).map(|b| f32::from_bits(b) as f64));
        for edge in [0.0, 127.0, 128.0, 255.0, 256.0, 32767.0, 32768.0, 2147483647.0, 2147483648.0, 65504.0, 65520.0, 1e300] {
            for d in [-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0] {
                values.extend([edge + d, -(edge + d)]);
            }
        }
        values.extend([f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE / 3.0, -0.0]);
        let input: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut child = std::process::Command::new(&exe)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        const RECORD: usize = 4 + 2 + 2 + 4 + 8;
        assert_eq!(out.stdout.len(), values.len() * RECORD);
        for (v, r) in values.iter().zip(out.stdout.chunks_exact(RECORD)) {
            let mut want = Vec::with_capacity(RECORD);
            for x in [*v, *v as f32 as f64] {
                want.extend(f64_to_f16(x).to_le_bytes());
            }
            for t in [DType::U8, DType::I8, DType::I16, DType::I32] {
                for x in [*v, *v as f32 as f64] {
                    let mut b = [0u8; 8];
                    store_f64(t, &mut b, 0, x);
                    // element.cuh's convert_sat gives 0 for NaN; store's INT32 NaN is x86's minimum.
                    let b = if x.is_nan() { [0u8; 8] } else { b };
                    want.extend_from_slice(&b[..t.size()]);
                }
            }
            assert_eq!(r, &want[..], "{v:e}");
        }
    }
}
