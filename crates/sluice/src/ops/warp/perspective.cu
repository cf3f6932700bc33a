// fn.experimental.warp_perspective on the GPU (ops/warp/perspective.rs), one launch per
// batch: blockIdx.y selects the sample, threads stride over its output pixels (every plane:
// frames, or the channels of a planar layout). Each pixel is computed as the cpu backend's
// OpenCV arithmetic computes it (cv_sampler.cuh, prepended): the new kernels' f32 map as
// their vector code computes it before `vec_end` (fma(M0, x, fma(y, M1, M2))) and as their
// scalar tail does after it (fma(x, M0, y*M1) + M2), or the old path's f64 map anchored at
// the pixel's block of `block_w` columns.

struct PerspectiveSample {
    unsigned long long src, dst;
    double md[9];      // old path: destination pixel -> source point, f64
    float m[9];        // new kernels: the same map in f32
    float fill[4];     // per channel, the pixel type's values
    int in_h, in_w, c, out_h, out_w, planes;
    int linear;        // 0 nearest, 1 linear
    int border;        // CV_BORDER_*
    int fresh;         // 1: OpenCV's new kernels; 0: the old path
    int block_w;       // old path: columns per block
    int vec_end;       // new kernels: first column of a row's scalar tail
};

// The new kernels' source point of output pixel (x, y): the vector code's arithmetic
// (fma(M0, x, y*M1 + M2)) or the scalar tail's (fma(x, M0, y*M1) + M2).
__device__ __forceinline__ void perspective_point(const float* m, int x, int y, bool tail, float* sx, float* sy) {
    const float xf = (float)x, yf = (float)y;
    if (!tail) {
        const float w = __fmaf_rn(m[6], xf, __fadd_rn(__fmul_rn(yf, m[7]), m[8]));
        *sx = __fdiv_rn(__fmaf_rn(m[0], xf, __fadd_rn(__fmul_rn(yf, m[1]), m[2])), w);
        *sy = __fdiv_rn(__fmaf_rn(m[3], xf, __fadd_rn(__fmul_rn(yf, m[4]), m[5])), w);
    } else {
        const float w = __fadd_rn(__fmaf_rn(xf, m[6], __fmul_rn(yf, m[7])), m[8]);
        *sx = __fdiv_rn(__fadd_rn(__fmaf_rn(xf, m[0], __fmul_rn(yf, m[1])), m[2]), w);
        *sy = __fdiv_rn(__fadd_rn(__fmaf_rn(xf, m[3], __fmul_rn(yf, m[4])), m[5]), w);
    }
}

template <typename T>
__device__ void warp_perspective(const PerspectiveSample* samples, bool u8) {
    const PerspectiveSample& s = samples[blockIdx.y];
    const long long per_plane = (long long)s.out_h * s.out_w;
    const long long npix = per_plane * s.planes;
    const long long in_plane = (long long)s.in_h * s.in_w * s.c;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < npix; p += (long long)gridDim.x * blockDim.x) {
        const long long plane = p / per_plane, q = p - plane * per_plane;
        const int y = (int)(q / s.out_w), x = (int)(q - (long long)y * s.out_w);
        CvImage<T> img = {(const T*)s.src + plane * in_plane, s.in_h, s.in_w, s.c, s.border, s.fill};
        T* out = (T*)s.dst + p * s.c;
        if (s.fresh) {
            const bool tail = x >= s.vec_end;
            float sx, sy;
            perspective_point(s.m, x, y, tail, &sx, &sy);
            if (!s.linear) {
                img.nearest(out, sx, sy);
                continue;
            }
            // The fill value stands directly for a point whose taps all lie outside in the
            // tail, or where its whole vector step of 16 points does (only a non-finite
            // point can tell: cv.rs fills_directly).
            bool fill_directly = tail || (sx - sx == 0.f && sy - sy == 0.f);
            if (!fill_directly && s.border == CV_BORDER_CONSTANT) {
                fill_directly = true;
                const int step = x / 16 * 16;
                for (int k = step; k < step + 16 && fill_directly; ++k) {
                    float kx, ky;
                    perspective_point(s.m, k, y, false, &kx, &ky);
                    fill_directly = img.outside(kx, ky);
                }
            }
            img.linear(out, sx, sy, fill_directly);
            continue;
        }
        // Old path: sums anchored at the block's first column, in f64; 1/32 pixel steps.
        const int x0 = x / s.block_w * s.block_w;
        const double xb = (double)x0, yd = (double)y, x1 = (double)(x - x0);
        const double* m = s.md;
        const double px = __dadd_rn(__dadd_rn(__dmul_rn(m[0], xb), __dmul_rn(m[1], yd)), m[2]);
        const double py = __dadd_rn(__dadd_rn(__dmul_rn(m[3], xb), __dmul_rn(m[4], yd)), m[5]);
        const double pw = __dadd_rn(__dadd_rn(__dmul_rn(m[6], xb), __dmul_rn(m[7], yd)), m[8]);
        double wd = __dadd_rn(pw, __dmul_rn(m[6], x1));
        wd = wd != 0.0 ? __ddiv_rn(s.linear ? 32.0 : 1.0, wd) : 0.0;
        double fx = __dmul_rn(__dadd_rn(px, __dmul_rn(m[0], x1)), wd);
        double fy = __dmul_rn(__dadd_rn(py, __dmul_rn(m[3], x1)), wd);
        // Clamped to the int range; NaN stays NaN (and rounds to INT_MIN).
        fx = fx < -2147483648.0 ? -2147483648.0 : (fx > 2147483647.0 ? 2147483647.0 : fx);
        fy = fy < -2147483648.0 ? -2147483648.0 : (fy > 2147483647.0 ? 2147483647.0 : fy);
        const int X = cv_round_f64(fx), Y = cv_round_f64(fy);
        if (s.linear) img.linear_fixed(out, min(max(X >> 5, -32768), 32767), min(max(Y >> 5, -32768), 32767), X & 31, Y & 31, u8);
        else img.nearest_fixed(out, min(max(X, -32768), 32767), min(max(Y, -32768), 32767));
    }
}

extern "C" __global__ void warp_perspective_u8(const PerspectiveSample* s) { warp_perspective<unsigned char>(s, true); }
extern "C" __global__ void warp_perspective_u16(const PerspectiveSample* s) { warp_perspective<unsigned short>(s, false); }
extern "C" __global__ void warp_perspective_i16(const PerspectiveSample* s) { warp_perspective<short>(s, false); }
extern "C" __global__ void warp_perspective_f32(const PerspectiveSample* s) { warp_perspective<float>(s, false); }
