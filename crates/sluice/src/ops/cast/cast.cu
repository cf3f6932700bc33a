// fn.cast on the GPU, one launch per batch: the cpu backend's conversion rules
// (ops/cast/mod.rs), element by element. blockIdx.y selects the sample; threads stride over
// its elements. The types come as codes (same for the whole launch, so the switches never
// diverge): one kernel instead of one per type pair keeps the NVRTC compile short.
// Every value goes through `Num` (an exact long long or double) as on the cpu:
//   float -> integer: round half away from zero, saturate, NaN -> 0 (INT32/INT64: minimum);
//   integer -> integer: saturate; -> BOOL: != 0 after rounding; -> FLOAT16: ties away from
//   zero (DALI 2.4's cpu quirk), overflow to infinity. UINT64 values past the long long range
//   are kept as their bits with `big` set: they saturate every other integer type and
//   convert to floats from the unsigned value.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

enum Type { U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, I64 = 6, F16 = 7, F32 = 8, F64 = 9, BOOL = 10, U64 = 11 };

struct CastSample {
    unsigned long long in, out;
    long long count;
};

struct Num {
    bool is_float;
    bool big;     // an unsigned value of 2^63 or more, whose bits are in `i`
    long long i;
    double f;
};

__device__ __forceinline__ Num from_int(long long i) { Num n; n.is_float = false; n.big = false; n.i = i; n.f = 0.0; return n; }
__device__ __forceinline__ Num from_float(double f) { Num n; n.is_float = true; n.big = false; n.i = 0; n.f = f; return n; }
__device__ __forceinline__ Num from_u64(unsigned long long u) { Num n = from_int((long long)u); n.big = u > 0x7fffffffffffffffULL; return n; }

__device__ __forceinline__ Num load(int type, const void* p, long long k) {
    switch (type) {
    case U8: return from_int(((const unsigned char*)p)[k]);
    case I8: return from_int(((const signed char*)p)[k]);
    case U16: return from_int(((const unsigned short*)p)[k]);
    case I16: return from_int(((const short*)p)[k]);
    case U32: return from_int(((const unsigned int*)p)[k]);
    case I32: return from_int(((const int*)p)[k]);
    case I64: return from_int(((const long long*)p)[k]);
    case F16: return from_float(f16_to_f64(((const unsigned short*)p)[k]));
    case F32: return from_float((double)((const float*)p)[k]);
    case F64: return from_float(((const double*)p)[k]);
    case U64: return from_u64(((const unsigned long long*)p)[k]);
    default: return from_int(((const unsigned char*)p)[k] != 0); // BOOL
    }
}

// Saturating conversion to an integer type spanning [lo, hi]; `nan` is what NaN gives.
__device__ __forceinline__ long long to_int(Num v, long long lo, long long hi, long long nan) {
    if (!v.is_float) return v.big ? hi : (v.i < lo ? lo : (v.i > hi ? hi : v.i));
    if (v.f != v.f) return nan;
    const double r = round(v.f); // half away from zero, as Rust's f64::round
    // (double)hi may round up (INT64: 2^63); anything at or past it saturates.
    if (r <= (double)lo) return lo;
    if (r >= (double)hi) return hi;
    return (long long)r;
}

__device__ __forceinline__ double as_double(Num v) { return v.is_float ? v.f : (v.big ? __ull2double_rn((unsigned long long)v.i) : __ll2double_rn(v.i)); }

__device__ __forceinline__ void store(int type, void* p, long long k, Num v) {
    switch (type) {
    case U8: ((unsigned char*)p)[k] = (unsigned char)to_int(v, 0, 255, 0); break;
    case I8: ((signed char*)p)[k] = (signed char)to_int(v, -128, 127, 0); break;
    case U16: ((unsigned short*)p)[k] = (unsigned short)to_int(v, 0, 65535, 0); break;
    case I16: ((short*)p)[k] = (short)to_int(v, -32768, 32767, 0); break;
    case U32: ((unsigned int*)p)[k] = (unsigned int)to_int(v, 0, 4294967295LL, 0); break;
    case I32: ((int*)p)[k] = (int)to_int(v, -2147483648LL, 2147483647LL, -2147483648LL); break;
    case I64: {
        const long long lo = (long long)(1ULL << 63), hi = 0x7fffffffffffffffLL;
        ((long long*)p)[k] = to_int(v, lo, hi, lo);
        break;
    }
    case F16: ((unsigned short*)p)[k] = f64_to_f16(as_double(v)); break;
    // One rounding from the exact value, as the cpu's `as f32` from i128 / f64.
    case F32: ((float*)p)[k] = v.is_float ? __double2float_rn(v.f) : (v.big ? __ull2float_rn((unsigned long long)v.i) : __ll2float_rn(v.i)); break;
    case F64: ((double*)p)[k] = as_double(v); break;
    case U64: {
        unsigned long long r;
        if (v.is_float) {
            const double x = round(v.f);
            r = v.f != v.f ? (1ULL << 63) : (x <= 0.0 ? 0ULL : (x >= 18446744073709551616.0 ? 0xffffffffffffffffULL : (unsigned long long)x));
        } else {
            r = v.big ? (unsigned long long)v.i : (v.i < 0 ? 0ULL : (unsigned long long)v.i);
        }
        ((unsigned long long*)p)[k] = r;
        break;
    }
    default: ((unsigned char*)p)[k] = v.is_float ? (round(v.f) != 0.0) : (v.i != 0); break; // BOOL (NaN -> 1)
    }
}

// `elem_bytes` > 0: same type in and out, copy the bits as the cpu does (a conversion
// round trip would rewrite NaN payloads and BOOL bytes other than 0 / 1).
extern "C" __global__ void cast(const CastSample* samples, int src_type, int dst_type, int elem_bytes) {
    const CastSample& s = samples[blockIdx.y];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < s.count; k += step) {
        switch (elem_bytes) {
        case 0: store(dst_type, (void*)s.out, k, load(src_type, (const void*)s.in, k)); break;
        case 1: ((unsigned char*)s.out)[k] = ((const unsigned char*)s.in)[k]; break;
        case 2: ((unsigned short*)s.out)[k] = ((const unsigned short*)s.in)[k]; break;
        case 4: ((unsigned int*)s.out)[k] = ((const unsigned int*)s.in)[k]; break;
        default: ((unsigned long long*)s.out)[k] = ((const unsigned long long*)s.in)[k]; break;
        }
    }
}
