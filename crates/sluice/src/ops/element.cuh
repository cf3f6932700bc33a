// Element conversions for the GPU kernels: the rules of the cpu's tensor/element.rs, written
// once for every .cu file that converts values (the host prepends this file to their source
// with `concat!`). A test compiles it on the host and compares it with element.rs.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

// 2^k for -1022 <= k <= 1023, exactly (built from its bits: no library call to trust).
__device__ __forceinline__ double pow2(int k) { return __longlong_as_double((long long)(k + 1023) << 52); }

// IEEE half bits -> double, exactly (element.rs `f16_to_f64`).
__device__ __forceinline__ double f16_to_f64(unsigned short h) {
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const int biased_exp = (h >> 10) & 0x1f;
    const double frac = (double)(h & 0x3ff);
    if (biased_exp == 0) return sign * (frac * pow2(-24));
    if (biased_exp == 31) return frac == 0.0 ? sign * __longlong_as_double(0x7ff0000000000000LL) : __longlong_as_double(0x7ff8000000000000LL);
    return sign * ((1.0 + frac / 1024.0) * pow2(biased_exp - 15));
}

// double -> IEEE half bits, nearest with ties away from zero, overflow to infinity, NaN to
// 0x7e00 with its sign (element.rs `f64_to_f16`, step for step; a float widens exactly).
__device__ __forceinline__ unsigned short f64_to_f16(double v) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    const unsigned short sign = (unsigned short)((bits >> 48) & 0x8000);
    const int exp = (int)((bits >> 52) & 0x7ff);
    const unsigned long long frac = bits & ((1ULL << 52) - 1);
    if (exp == 0x7ff) return sign | (frac ? 0x7e00 : 0x7c00);
    const int e = exp - 1023;
    if (e >= 16) return sign | 0x7c00;
    if (exp == 0) return sign;
    const unsigned long long sig = frac | (1ULL << 52);
    const unsigned shift = e >= -14 ? 42u : (unsigned)(28 - e);
    if (shift > 53) return sign;
    unsigned long long r = sig >> shift;
    if ((sig & ((1ULL << shift) - 1)) >= (1ULL << (shift - 1))) r += 1;
    const unsigned h = e >= -14 ? ((unsigned)(e + 14) << 10) + (unsigned)r : (unsigned)r;
    return sign | (unsigned short)h;
}

// DALI's ConvertSat from a float or double to an integer type: round half away from zero,
// saturate, NaN -> 0 (element.rs `store` for these types, but for INT32 from NaN, where
// fn.cast gives x86's minimum; the image kernels using this give 0, as their cpu twins).
template <typename T> struct SatRange;
template <> struct SatRange<unsigned char> { static constexpr long long lo = 0, hi = 255; };
template <> struct SatRange<signed char> { static constexpr long long lo = -128, hi = 127; };
template <> struct SatRange<short> { static constexpr long long lo = -32768, hi = 32767; };
template <> struct SatRange<unsigned short> { static constexpr long long lo = 0, hi = 65535; };
template <> struct SatRange<unsigned int> { static constexpr long long lo = 0, hi = 4294967295LL; };
template <> struct SatRange<int> { static constexpr long long lo = -2147483648LL, hi = 2147483647LL; };

__device__ __forceinline__ float round_half_away(float v) { return roundf(v); }
__device__ __forceinline__ double round_half_away(double v) { return round(v); }

template <typename T, typename F> __device__ __forceinline__ T convert_sat(F v) {
    if (v != v) return 0;
    const F r = round_half_away(v);
    // The bounds as F may round outward (INT32's maximum as a float is 2^31): values at or
    // past them saturate.
    if (r <= (F)SatRange<T>::lo) return (T)SatRange<T>::lo;
    if (r >= (F)SatRange<T>::hi) return (T)SatRange<T>::hi;
    return (T)r;
}

// Pixel channels as the image kernels compute them (the cpu's tensor/channel.rs): any
// supported element type read as a float, and written back with ConvertSat. A FLOAT16
// channel travels as its bits.
struct half_bits { unsigned short bits; };
template <typename T> __device__ __forceinline__ float channel_to_float(T v) { return (float)v; }
template <> __device__ __forceinline__ float channel_to_float<half_bits>(half_bits v) { return (float)f16_to_f64(v.bits); }
template <typename T> __device__ __forceinline__ T channel_from_float(float v) { return convert_sat<T>(v); }
template <> __device__ __forceinline__ float channel_from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ half_bits channel_from_float<half_bits>(float v) { half_bits h; h.bits = f64_to_f16((double)v); return h; }
