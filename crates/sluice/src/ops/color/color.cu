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

// One map's arithmetic, shared by the single and the chained kernels so that a fused pair
// gives the bits of the two operators run one after the other.
__device__ __forceinline__ float scale_value(float v, float mul, float add) {
    return __fadd_rn(__fmul_rn(v, mul), add);
}
__device__ __forceinline__ float matrix_row(const float* row, float r, float g, float b, float offset) {
    return __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(row[0], r), __fmul_rn(row[1], g)), __fmul_rn(row[2], b)), offset);
}

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
            out[k] = channel_from_float<O>(scale_value(channel_to_float(in[k]), mul, add));
        return;
    }
    for (; k < s.count; k += step) {
        const float r = channel_to_float(in[3 * k]), g = channel_to_float(in[3 * k + 1]), b = channel_to_float(in[3 * k + 2]);
        for (int c = 0; c < 3; c++)
            out[3 * k + c] = channel_from_float<O>(matrix_row(s.m + 3 * c, r, g, b, s.offset));
    }
}

// Two colour operators fused (Graph::fuse_color_chains): the first map, its output type M
// (saturated and rounded exactly as its own output would be), then the second map; one read
// and one write of the image instead of two of each.
struct ColorMap {
    float m[9];  // scale: m[0] is the multiplier; matrix: row-major 3x3
    float offset;
    int matrix;
};

struct ChainSample {
    unsigned long long in, out;
    long long count;  // 3-channel pixels when `pixels`, else elements
    int pixels;
    int pad;
    ColorMap first, second;
};

// Channel c of pixel (r, g, b) through `map` (`v` is channel c's own value, for a scale).
__device__ __forceinline__ float map_channel(const ColorMap& map, int c, float r, float g, float b, float v) {
    return map.matrix ? matrix_row(map.m + 3 * c, r, g, b, map.offset) : scale_value(v, map.m[0], map.offset);
}

// `v` (3 channels) through `map`, then as the type T stores it.
template <typename T>
__device__ __forceinline__ void map_pixel(const ColorMap& map, float v[3]) {
    const float r = v[0], g = v[1], b = v[2];
    for (int c = 0; c < 3; c++) v[c] = channel_to_float(channel_from_float<T>(map_channel(map, c, r, g, b, v[c])));
}

template <typename I, typename M, typename O>
__device__ __forceinline__ void color_chain(const ChainSample* samples) {
    const ChainSample& s = samples[blockIdx.y];
    const I* in = (const I*)s.in;
    O* out = (O*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!s.pixels) {
        for (; k < s.count; k += step) {
            const float mid = channel_to_float(channel_from_float<M>(scale_value(channel_to_float(in[k]), s.first.m[0], s.first.offset)));
            out[k] = channel_from_float<O>(scale_value(mid, s.second.m[0], s.second.offset));
        }
        return;
    }
    for (; k < s.count; k += step) {
        float v[3] = {channel_to_float(in[3 * k]), channel_to_float(in[3 * k + 1]), channel_to_float(in[3 * k + 2])};
        map_pixel<M>(s.first, v);
        for (int c = 0; c < 3; c++) out[3 * k + c] = channel_from_float<O>(map_channel(s.second, c, v[0], v[1], v[2], v[c]));
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

// The chains common pipelines build (8-bit images, float after a cast); other type
// combinations run as two launches.
#define CHAIN_KERNEL(NI, I, NM, M, NO, O) \
    extern "C" __global__ void color_chain_##NI##_##NM##_##NO(const ChainSample* s) { color_chain<I, M, O>(s); }
#define CHAIN_KERNELS_FROM(NI, I) \
    CHAIN_KERNEL(NI, I, u8, unsigned char, u8, unsigned char) CHAIN_KERNEL(NI, I, u8, unsigned char, f32, float) \
    CHAIN_KERNEL(NI, I, f32, float, u8, unsigned char) CHAIN_KERNEL(NI, I, f32, float, f32, float)
CHAIN_KERNELS_FROM(u8, unsigned char)
CHAIN_KERNELS_FROM(f32, float)
