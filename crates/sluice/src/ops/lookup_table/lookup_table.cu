// fn.lookup_table on the GPU (ops/lookup_table/mod.rs), one launch per batch. The table
// (65536 output elements, built on the host with the cpu's conversions) is uploaded once;
// the kernel looks every input key up, moving output elements as bits (O: an unsigned type
// of the output's size). A key outside 0..65535 (negative included) gives the default.
// blockIdx.y selects the sample; threads stride over its elements.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct LutSample {
    unsigned long long in, out;
    long long numel;
    unsigned long long table;    // device address of the 65536-entry table
    unsigned long long fallback; // default_value's bits, in the low bytes
};

template <typename T, typename O>
__device__ __forceinline__ void lookup(const LutSample* samples) {
    const LutSample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    O* out = (O*)s.out;
    const O* table = (const O*)s.table;
    const O fallback = (O)s.fallback;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long e = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; e < (unsigned long long)s.numel; e += step) {
        const T key = in[e];
        // As DALI's DoLookup: the key as unsigned, compared with the last entry.
        out[e] = (key >= (T)0 && (unsigned long long)key <= 0xffffULL) ? table[(unsigned long long)key] : fallback;
    }
}

#define LUT_OUT(name, T)                                                                                   \
    extern "C" __global__ void lut_##name##_1(const LutSample* s) { lookup<T, unsigned char>(s); }         \
    extern "C" __global__ void lut_##name##_2(const LutSample* s) { lookup<T, unsigned short>(s); }        \
    extern "C" __global__ void lut_##name##_4(const LutSample* s) { lookup<T, unsigned int>(s); }          \
    extern "C" __global__ void lut_##name##_8(const LutSample* s) { lookup<T, unsigned long long>(s); }

LUT_OUT(u8, unsigned char)
LUT_OUT(i8, signed char)
LUT_OUT(u16, unsigned short)
LUT_OUT(i16, short)
LUT_OUT(u32, unsigned int)
LUT_OUT(i32, int)
LUT_OUT(u64, unsigned long long)
LUT_OUT(i64, long long)
