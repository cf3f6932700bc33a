// The colour family on the GPU (ops/color/mod.rs), one launch per batch: each sample's
// affine map, planned on the host, applied with the cpu kernel's f32 arithmetic (no fused
// multiply-adds: __fmul_rn / __fadd_rn) and ConvertSat, so both backends give the same bits.
// blockIdx.y selects the sample; threads stride over its elements (scale) or pixels (matrix).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct ColorSample {
    unsigned long long in, out;
    long long count;  // elements (scale) or 3-channel pixels (matrix)
    float m[9];       // scale: m[0] is the multiplier; matrix: row-major 3x3
    float offset;     // added last
    int matrix;
    int pad;
};

template <typename I, typename O>
__device__ __forceinline__ void color(const ColorSample* samples) {
    const ColorSample& s = samples[blockIdx.y];
    const I* in = (const I*)s.in;
    O* out = (O*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!s.matrix) {
        const float mul = s.m[0], add = s.offset;
        for (; k < s.count; k += step)
            out[k] = channel_from_float<O>(__fadd_rn(__fmul_rn(channel_to_float(in[k]), mul), add));
        return;
    }
    for (; k < s.count; k += step) {
        const float r = channel_to_float(in[3 * k]), g = channel_to_float(in[3 * k + 1]), b = channel_to_float(in[3 * k + 2]);
        for (int c = 0; c < 3; c++) {
            const float* row = s.m + 3 * c;
            const float v = __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(row[0], r), __fmul_rn(row[1], g)), __fmul_rn(row[2], b)), s.offset);
            out[3 * k + c] = channel_from_float<O>(v);
        }
    }
}

#define COLOR_KERNEL(NI, I, NO, O) \
    extern "C" __global__ void color_##NI##_##NO(const ColorSample* s) { color<I, O>(s); }
#define COLOR_KERNELS_FROM(NI, I) \
    COLOR_KERNEL(NI, I, u8, unsigned char) COLOR_KERNEL(NI, I, i16, short) COLOR_KERNEL(NI, I, i32, int) \
    COLOR_KERNEL(NI, I, f32, float) COLOR_KERNEL(NI, I, f16, half_bits)
COLOR_KERNELS_FROM(u8, unsigned char)
COLOR_KERNELS_FROM(i16, short)
COLOR_KERNELS_FROM(i32, int)
COLOR_KERNELS_FROM(f32, float)
COLOR_KERNELS_FROM(f16, half_bits)
