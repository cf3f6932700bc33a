// The 2-D warp (fn.warp_affine, fn.rotate), one launch per batch: blockIdx.y selects the
// sample, threads stride over its output pixels (all frames of a sequence). The arithmetic
// repeats the cpu kernel's (kernel.rs, itself DALI's WarpCPU) operation for operation in f32 with explicit rounding
// intrinsics (no contracted multiply-adds), including the row start, the re-anchoring every
// 256 pixels and the per-pixel increments, so both backends give the same bits.

struct Sample {
    unsigned long long src, dst;
    float m[6];           // m00 m01 m02 m10 m11 m12: output pixel centre -> source point
    int in_h, in_w, c, out_h, out_w, frames;
    int linear, clamp;    // interpolation (0 nearest, 1 linear); repeat the border or fill
    float fill;           // fill_value
    int pad;
};

#define TILE 256

__device__ __forceinline__ int floor_i32(float v) { return __float2int_rd(v); }  // saturates, NaN -> 0

// The cpu kernel's stores: ConvertSat (element.cuh, prepended) to integers, plain to float.
template <typename T> struct Sat {
    static __device__ __forceinline__ T f32(float v) { return convert_sat<T>(v); }
    static __device__ __forceinline__ T f64(double v) { return convert_sat<T>(v); }
};
template <> struct Sat<float> {
    static __device__ __forceinline__ float f32(float v) { return v; }
    static __device__ __forceinline__ float f64(double v) { return (float)v; }
};

// The cpu's `convert`: the value itself between equal types, else ConvertSat through f64.
template <typename I, typename O> struct Convert {
    static __device__ __forceinline__ O go(I v) { return Sat<O>::f64((double)v); }
};
template <typename T> struct Convert<T, T> {
    static __device__ __forceinline__ T go(T v) { return v; }
};

template <typename I, typename O>
__device__ void warp2d(const Sample* samples) {
    const Sample s = samples[blockIdx.y];
    const I* src = (const I*)s.src;
    O* dst = (O*)s.dst;
    const int c = s.c;
    const long long in_frame = (long long)s.in_h * s.in_w * c, out_frame = (long long)s.out_h * s.out_w * c;
    const long long npix = (long long)s.frames * s.out_h * s.out_w;
    const float dx = s.m[0], dy = s.m[3];
    const float dx_tile = __fmul_rn((float)TILE, dx), dy_tile = __fmul_rn((float)TILE, dy);
    const O fill_out = Sat<O>::f32(s.fill);
    const I fill_in = Convert<O, I>::go(fill_out);
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < npix; p += (long long)gridDim.x * blockDim.x) {
        const long long per_frame = (long long)s.out_h * s.out_w;
        const int f = (int)(p / per_frame);
        const long long q = p - f * per_frame;
        const int y = (int)(q / s.out_w), x = (int)(q - (long long)y * s.out_w);
        const I* in = src + f * in_frame;
        O* out = dst + f * out_frame + q * c;
        // Row start, then whole tiles, then pixels, as the cpu accumulates them.
        const float fy = __fadd_rn((float)y, 0.5f);
        float tx = __fadd_rn(__fadd_rn(s.m[2], __fmul_rn(s.m[0], 0.5f)), __fmul_rn(s.m[1], fy));
        float ty = __fadd_rn(__fadd_rn(s.m[5], __fmul_rn(s.m[3], 0.5f)), __fmul_rn(s.m[4], fy));
        for (int t = 0; t < x / TILE; ++t) { tx = __fadd_rn(tx, dx_tile); ty = __fadd_rn(ty, dy_tile); }
        float sx = tx, sy = ty;
        for (int k = 0; k < x % TILE; ++k) { sx = __fadd_rn(sx, dx); sy = __fadd_rn(sy, dy); }
        const unsigned w = s.in_w, h = s.in_h;
        if (!s.linear) {
            int ix = floor_i32(sx), iy = floor_i32(sy);
            if (((unsigned)ix < w && (unsigned)iy < h) || s.clamp) {
                ix = min(max(ix, 0), s.in_w - 1); iy = min(max(iy, 0), s.in_h - 1);
                const I* px = in + ((long long)iy * s.in_w + ix) * c;
                for (int k = 0; k < c; ++k) out[k] = Convert<I, O>::go(px[k]);
            } else {
                for (int k = 0; k < c; ++k) out[k] = fill_out;
            }
            continue;
        }
        const float fx = __fsub_rn(sx, 0.5f), fyy = __fsub_rn(sy, 0.5f);
        const int x0 = floor_i32(fx), y0 = floor_i32(fyy);
        const float qx = __fsub_rn(fx, (float)x0), px_ = __fsub_rn(1.f, qx), qy = __fsub_rn(fyy, (float)y0);
        const int x1 = x0 == 2147483647 ? x0 : x0 + 1, y1 = y0 == 2147483647 ? y0 : y0 + 1;
        const bool all_in = x0 >= 0 && y0 >= 0 && x1 < s.in_w && y1 < s.in_h;
        for (int k = 0; k < c; ++k) {
            I v00, v01, v10, v11;
            if (all_in || s.clamp) {
                const int cx0 = min(max(x0, 0), s.in_w - 1), cx1 = min(max(x1, 0), s.in_w - 1);
                const int cy0 = min(max(y0, 0), s.in_h - 1), cy1 = min(max(y1, 0), s.in_h - 1);
                v00 = in[((long long)cy0 * s.in_w + cx0) * c + k]; v01 = in[((long long)cy0 * s.in_w + cx1) * c + k];
                v10 = in[((long long)cy1 * s.in_w + cx0) * c + k]; v11 = in[((long long)cy1 * s.in_w + cx1) * c + k];
            } else {
                const bool i00 = (unsigned)x0 < w && (unsigned)y0 < h, i01 = (unsigned)x1 < w && (unsigned)y0 < h;
                const bool i10 = (unsigned)x0 < w && (unsigned)y1 < h, i11 = (unsigned)x1 < w && (unsigned)y1 < h;
                v00 = i00 ? in[((long long)y0 * s.in_w + x0) * c + k] : fill_in; v01 = i01 ? in[((long long)y0 * s.in_w + x1) * c + k] : fill_in;
                v10 = i10 ? in[((long long)y1 * s.in_w + x0) * c + k] : fill_in; v11 = i11 ? in[((long long)y1 * s.in_w + x1) * c + k] : fill_in;
            }
            const float s0 = __fadd_rn(__fmul_rn((float)v00, px_), __fmul_rn((float)v01, qx));
            const float s1 = __fadd_rn(__fmul_rn((float)v10, px_), __fmul_rn((float)v11, qx));
            out[k] = Sat<O>::f32(__fadd_rn(s0, __fmul_rn(__fsub_rn(s1, s0), qy)));
        }
    }
}

extern "C" __global__ void warp_u8_u8(const Sample* s) { warp2d<unsigned char, unsigned char>(s); }
extern "C" __global__ void warp_u8_f32(const Sample* s) { warp2d<unsigned char, float>(s); }
extern "C" __global__ void warp_i16_i16(const Sample* s) { warp2d<short, short>(s); }
extern "C" __global__ void warp_i16_f32(const Sample* s) { warp2d<short, float>(s); }
extern "C" __global__ void warp_i32_i32(const Sample* s) { warp2d<int, int>(s); }
extern "C" __global__ void warp_i32_f32(const Sample* s) { warp2d<int, float>(s); }
extern "C" __global__ void warp_f32_f32(const Sample* s) { warp2d<float, float>(s); }
extern "C" __global__ void warp_f32_u8(const Sample* s) { warp2d<float, unsigned char>(s); }
extern "C" __global__ void warp_f32_i16(const Sample* s) { warp2d<float, short>(s); }
extern "C" __global__ void warp_f32_i32(const Sample* s) { warp2d<float, int>(s); }
