// The separable convolution on the GPU, one launch per spatial axis per batch: the cpu
// engine's sums (ops/filters/separable.rs) with explicit f32 rounding (no fused
// multiply-adds), so both backends give the same bits. blockIdx.y selects the sample;
// threads stride over its elements, each summing its window in window order.

struct SepSample {
    unsigned long long in, out;  // this pass's source and destination
    unsigned long long window;   // device address of `taps` f32 weights
    long long outer, len, inner;  // the block: outer x len (this axis) x inner elements
    int taps, pad;
};

__device__ __forceinline__ long long reflect101(long long i, long long size) {
    if (size < 2) return 0;
    for (;;) {
        if (i < 0) i = -i;
        else if (i >= size) i = 2 * size - 2 - i;
        else return i;
    }
}

template <typename I, typename O>
__device__ __forceinline__ void sep(const SepSample* samples) {
    const SepSample& s = samples[blockIdx.y];
    const I* in = (const I*)s.in;
    O* out = (O*)s.out;
    const float* w = (const float*)s.window;
    const long long total = s.outer * s.len * s.inner, line = s.len * s.inner;
    const long long r = s.taps / 2;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long o = e / line, rest = e - o * line;
        const long long i = rest / s.inner, j = rest - i * s.inner;
        const I* base = in + o * line + j;
        float acc = 0.0f;
        for (int k = 0; k < s.taps; k++)
            acc = __fadd_rn(acc, __fmul_rn(channel_to_float(base[reflect101(i - r + k, s.len) * s.inner]), w[k]));
        out[e] = channel_from_float<O>(acc);
    }
}

#define SEP(NI, I, NO, O) extern "C" __global__ void sep_##NI##_##NO(const SepSample* s) { sep<I, O>(s); }
#define SEP_TYPE(N, T) SEP(N, T, N, T) SEP(N, T, f32, float) SEP(f32, float, N, T)
SEP_TYPE(u8, unsigned char)
SEP_TYPE(i8, signed char)
SEP_TYPE(u16, unsigned short)
SEP_TYPE(i16, short)
SEP_TYPE(u32, unsigned int)
SEP_TYPE(i32, int)
SEP(f32, float, f32, float)
