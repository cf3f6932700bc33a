// fn.experimental.warp_perspective on the GPU (ops/warp/perspective.rs), one launch per
// batch: blockIdx.y selects the sample, threads stride over its output pixels (every plane:
// frames, or the channels of a planar layout). Each pixel is computed as the cpu backend's
// OpenCV arithmetic computes it (cv_sampler.cuh, prepended): the new kernels' f32 map as
// their vector code computes it before `vec_end` (fma(M0, x, fma(y, M1, M2))) and as their
// scalar tail does after it (fma(x, M0, y*M1) + M2), or the old path's f64 map anchored at
// the pixel's block of `block_w` columns; cubic: genericWarp's f64 map and the bicubic
// kernels (cv.rs warp_cubic).

struct PerspectiveSample {
    unsigned long long src, dst;
    double md[9];      // old path: destination pixel -> source point, f64
    float m[9];        // new kernels: the same map in f32
    float fill[4];     // per channel, the pixel type's values
    int in_h, in_w, c, out_h, out_w, planes;
    int interp;        // 0 nearest, 1 linear, 2 cubic
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

// cv.rs warp_cubic_rows: OpenCV 5.0's genericWarp point of column x of row y, from the f32
// matrix: the row's sums in f32, the column's in f64, rounded to f32.
__device__ __forceinline__ void cubic_point(const float* m, int x, int y, float* sx, float* sy) {
    const float fy = (float)y;
    const double mx = (double)__fadd_rn(__fmul_rn(fy, m[1]), m[2]);
    const double my = (double)__fadd_rn(__fmul_rn(fy, m[4]), m[5]);
    const double mz = (double)__fadd_rn(__fmul_rn(fy, m[7]), m[8]);
    const double xf = (double)x;
    const double invz = __ddiv_rn(1.0, __dadd_rn(mz, __dmul_rn((double)m[6], xf)));
    *sx = __double2float_rn(__dmul_rn(__dadd_rn(mx, __dmul_rn((double)m[0], xf)), invz));
    *sy = __double2float_rn(__dmul_rn(__dadd_rn(my, __dmul_rn((double)m[3], xf)), invz));
}

// cv.rs CubicPoint: the clamped point's first tap, fractions, and whether every tap lies
// more than 4 pixels beyond the image. `vector`: the vector kernel's clamp (a NaN takes the
// low bound) instead of std::clamp (a NaN stays, and its floor is INT_MIN).
struct CubicPoint {
    int ix, iy;
    float alpha, beta;
    bool beyond;
    __device__ __forceinline__ CubicPoint(float sx, float sy, int w, int h, bool vector) {
        const float bw = (float)max(w, 16), bh = (float)max(h, 16);
        float vx, vy;
        if (vector) {
            vx = sx > -bw ? sx : -bw; vx = vx < 2.f * bw ? vx : 2.f * bw;
            vy = sy > -bh ? sy : -bh; vy = vy < 2.f * bh ? vy : 2.f * bh;
        } else {
            vx = sx < -bw ? -bw : (2.f * bw < sx ? 2.f * bw : sx);
            vy = sy < -bh ? -bh : (2.f * bh < sy ? 2.f * bh : sy);
        }
        const int fx = cv_floor(vx), fy = cv_floor(vy);
        ix = (int)((unsigned)fx - 1u); iy = (int)((unsigned)fy - 1u);
        alpha = __fsub_rn(vx, (float)fx); beta = __fsub_rn(vy, (float)fy);
        beyond = (unsigned)((int)((unsigned)ix + 4u)) >= (unsigned)(w + 4) || (unsigned)((int)((unsigned)iy + 4u)) >= (unsigned)(h + 4);
    }
};

// Output pixel (x, y) with INTER_CUBIC. The vector kernel (s.fresh) stores the fill value
// (constant border) only where all 8 points of the step that writes the pixel last are
// beyond: steps of 8 from each 128-column block's start, the last one moved back to end at
// the block's end; a block under 8 columns never fills (cv.rs cubic_row_block).
template <typename T>
__device__ __forceinline__ void warp_cubic(const PerspectiveSample& s, const CvImage<T>& img, T* out, int x, int y) {
    float sx, sy;
    cubic_point(s.m, x, y, &sx, &sy);
    const bool vector = s.fresh;
    const CubicPoint p(sx, sy, s.in_w, s.in_h, vector);
    bool fill = p.beyond && s.border == CV_BORDER_CONSTANT;
    if (fill && vector) {
        const int b0 = x / 128 * 128, len = min(128, s.out_w - b0), j = x - b0;
        const int step = (len % 8 != 0 && j >= len - 8) ? len - 8 : j / 8 * 8;
        fill = len >= 8;
        for (int k = 0; k < 8 && fill; ++k) {
            float kx, ky;
            cubic_point(s.m, b0 + step + k, y, &kx, &ky);
            fill = CubicPoint(kx, ky, s.in_w, s.in_h, true).beyond;
        }
    }
    if (fill) img.store_fill(out);
    else img.cubic(out, p.ix, p.iy, p.alpha, p.beta, vector);
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
        if (s.interp == 2) {
            warp_cubic(s, img, out, x, y);
            continue;
        }
        if (s.fresh) {
            const bool tail = x >= s.vec_end;
            float sx, sy;
            perspective_point(s.m, x, y, tail, &sx, &sy);
            if (s.interp == 0) {
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
        wd = wd != 0.0 ? __ddiv_rn(s.interp == 1 ? 32.0 : 1.0, wd) : 0.0;
        double fx = __dmul_rn(__dadd_rn(px, __dmul_rn(m[0], x1)), wd);
        double fy = __dmul_rn(__dadd_rn(py, __dmul_rn(m[3], x1)), wd);
        // Clamped to the int range; NaN stays NaN (and rounds to INT_MIN).
        fx = fx < -2147483648.0 ? -2147483648.0 : (fx > 2147483647.0 ? 2147483647.0 : fx);
        fy = fy < -2147483648.0 ? -2147483648.0 : (fy > 2147483647.0 ? 2147483647.0 : fy);
        const int X = cv_round_f64(fx), Y = cv_round_f64(fy);
        if (s.interp == 1) img.linear_fixed(out, min(max(X >> 5, -32768), 32767), min(max(Y >> 5, -32768), 32767), X & 31, Y & 31, u8);
        else img.nearest_fixed(out, min(max(X, -32768), 32767), min(max(Y, -32768), 32767));
    }
}

extern "C" __global__ void warp_perspective_u8(const PerspectiveSample* s) { warp_perspective<unsigned char>(s, true); }
extern "C" __global__ void warp_perspective_u16(const PerspectiveSample* s) { warp_perspective<unsigned short>(s, false); }
extern "C" __global__ void warp_perspective_i16(const PerspectiveSample* s) { warp_perspective<short>(s, false); }
extern "C" __global__ void warp_perspective_f32(const PerspectiveSample* s) { warp_perspective<float>(s, false); }
