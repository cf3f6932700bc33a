// OpenCV 5.0's sampling (ops/warp/cv.rs, which documents it), operation for operation in the
// same f32 / f64 roundings with explicit intrinsics (no contracted multiply-adds; fused ones
// exactly where OpenCV's code has them), so kernels that use it give the cpu backend's bits. Used by perspective.cu (fn.experimental.warp_perspective) and remap.cu
// (fn.experimental.remap). No headers: NVRTC runs without the CUDA toolkit's include folder.

#define CV_INT_MIN (-2147483647 - 1)
#define CV_INT_MAX 2147483647

// Border modes: OpenCV's codes (cv.rs BorderMode).
#define CV_BORDER_CONSTANT 0
#define CV_BORDER_REPLICATE 1
#define CV_BORDER_REFLECT 2
#define CV_BORDER_WRAP 3
#define CV_BORDER_REFLECT_101 4

// cvRound(float): half to even; NaN and values past the int range give INT_MIN (x86's answer).
__device__ __forceinline__ int cv_round(float v) {
    return (v >= -2147483648.f && v < 2147483648.f) ? __float2int_rn(v) : CV_INT_MIN;
}
__device__ __forceinline__ int cv_round_f64(double v) {
    return (v > -2147483648.5 && v < 2147483647.5) ? __double2int_rn(v) : CV_INT_MIN;
}
// cvFloor(float) / v_floor: the rounded value, less one where it exceeds v (wrapping).
__device__ __forceinline__ int cv_floor(float v) {
    const int i = cv_round(v);
    return (int)((unsigned)i - (unsigned)((float)i > v));
}

// The source index for coordinate p of an axis of len (>= 1) pixels; -1: the fill value.
__device__ __forceinline__ int cv_border_index(int p, int len, int mode) {
    if ((unsigned)p < (unsigned)len) return p;
    if (mode == CV_BORDER_CONSTANT) return -1;
    if (len == 1) return 0;
    const long long q0 = p, n = len;
    if (mode == CV_BORDER_REPLICATE) return q0 < 0 ? 0 : len - 1;
    if (mode == CV_BORDER_WRAP) { long long q = q0 % n; return (int)(q < 0 ? q + n : q); }
    const long long period = mode == CV_BORDER_REFLECT ? 2 * n : 2 * n - 2;
    long long q = q0 % period;
    if (q < 0) q += period;
    return (int)(q < n ? q : period - 1 + (mode == CV_BORDER_REFLECT ? 0 : 1) - q);
}

// Pixel types: value as f32, and saturate_cast from f32 (round half to even, saturate).
template <typename T> struct CvPx;
template <> struct CvPx<unsigned char> {
    static __device__ __forceinline__ float f(unsigned char v) { return (float)v; }
    static __device__ __forceinline__ unsigned char sat(float v) { return (unsigned char)min(max(cv_round(v), 0), 255); }
};
template <> struct CvPx<unsigned short> {
    static __device__ __forceinline__ float f(unsigned short v) { return (float)v; }
    static __device__ __forceinline__ unsigned short sat(float v) { return (unsigned short)min(max(cv_round(v), 0), 65535); }
};
template <> struct CvPx<short> {
    static __device__ __forceinline__ float f(short v) { return (float)v; }
    static __device__ __forceinline__ short sat(float v) { return (short)min(max(cv_round(v), -32768), 32767); }
};
template <> struct CvPx<float> {
    static __device__ __forceinline__ float f(float v) { return v; }
    static __device__ __forceinline__ float sat(float v) { return v; }
};

// An HWC image and the fill value (the pixel type's values, held as f32: exact for the
// integer types).
template <typename T> struct CvImage {
    const T* data;
    int h, w, c;
    int border;
    const float* fill;

    // Offset of pixel (x, y) through the border, or -1 for the fill value.
    __device__ __forceinline__ long long tap(int x, int y) const {
        if ((unsigned)x < (unsigned)w && (unsigned)y < (unsigned)h) return ((long long)y * w + x) * c;
        const int bx = cv_border_index(x, w, border), by = cv_border_index(y, h, border);
        if (bx < 0 || by < 0) return -1;
        return ((long long)by * w + bx) * c;
    }
    __device__ __forceinline__ float value(long long t, int k) const {
        return t < 0 ? fill[k] : CvPx<T>::f(data[t + k]);
    }
    __device__ __forceinline__ void store_fill(T* out) const {
        for (int k = 0; k < c; ++k) out[k] = CvPx<T>::sat(fill[k]);
    }

    // The new kernels' nearest neighbour of (sx, sy).
    __device__ __forceinline__ void nearest(T* out, float sx, float sy) const {
        const long long t = tap(cv_round(sx), cv_round(sy));
        if (t < 0) { store_fill(out); return; }
        for (int k = 0; k < c; ++k) out[k] = data[t + k];
    }

    // Whether the four taps around (sx, sy) all lie outside.
    __device__ __forceinline__ bool outside(float sx, float sy) const {
        const int x1 = (int)((unsigned)cv_floor(sx) + 1u), y1 = (int)((unsigned)cv_floor(sy) + 1u);
        return (unsigned)x1 >= (unsigned)(w + 1) || (unsigned)y1 >= (unsigned)(h + 1);
    }

    // The new kernels' bilinear interpolation at (sx, sy), with fused multiply-adds;
    // `fill_directly`: store the fill value where all four taps lie outside (constant border;
    // cv.rs fills_directly), else interpolate it.
    __device__ __forceinline__ void linear(T* out, float sx, float sy, bool fill_directly) const {
        const int ix = cv_floor(sx), iy = cv_floor(sy);
        const float a = __fsub_rn(sx, (float)ix), b = __fsub_rn(sy, (float)iy);
        long long t00, t01, t10, t11;
        if ((unsigned)ix < (unsigned)(w - 1) && (unsigned)iy < (unsigned)(h - 1)) {
            t00 = ((long long)iy * w + ix) * c; t01 = t00 + c; t10 = t00 + (long long)w * c; t11 = t10 + c;
        } else {
            const int x1 = (int)((unsigned)ix + 1u), y1 = (int)((unsigned)iy + 1u);
            if (fill_directly && border == CV_BORDER_CONSTANT && outside(sx, sy)) {
                store_fill(out);
                return;
            }
            t00 = tap(ix, iy); t01 = tap(x1, iy); t10 = tap(ix, y1); t11 = tap(x1, y1);
        }
        for (int k = 0; k < c; ++k) {
            const float p00 = value(t00, k), p01 = value(t01, k), p10 = value(t10, k), p11 = value(t11, k);
            const float v0 = __fmaf_rn(a, __fsub_rn(p01, p00), p00);
            const float v1 = __fmaf_rn(a, __fsub_rn(p11, p10), p10);
            out[k] = CvPx<T>::sat(__fmaf_rn(b, __fsub_rn(v1, v0), v0));
        }
    }

    // OpenCV 5.0's bicubic kernels (cv.rs warp_cubic, Image::cubic): 4x4 taps from
    // (ix, iy), Keys' weights (A = -0.75) of the fractions, rows summed with fused
    // multiply-adds: the vector kernel's weights and first product (`vector`), or the scalar
    // kernel's.
    __device__ __forceinline__ void cubic(T* out, int ix, int iy, float alpha, float beta, bool vector) const {
        float wx[4], wy[4];
        cubic_weights(alpha, vector, wx);
        cubic_weights(beta, vector, wy);
        long long t[4][4];
        const bool inside = ix >= 0 && iy >= 0 && ix + 3 < w && iy + 3 < h;
        for (int r = 0; r < 4; ++r)
            for (int k = 0; k < 4; ++k) {
                const int x = (int)((unsigned)ix + (unsigned)k), y = (int)((unsigned)iy + (unsigned)r);
                t[r][k] = inside ? ((long long)y * w + x) * c : tap(x, y);
            }
        for (int ch = 0; ch < c; ++ch) {
            float acc = 0.f;
            for (int r = 0; r < 4; ++r) {
                const float v0 = value(t[r][0], ch), v1 = value(t[r][1], ch), v2 = value(t[r][2], ch), v3 = value(t[r][3], ch);
                float sum = vector ? __fmaf_rn(v1, wx[1], __fmul_rn(v0, wx[0])) : __fmaf_rn(v0, wx[0], __fmul_rn(v1, wx[1]));
                sum = __fmaf_rn(v2, wx[2], sum);
                sum = __fmaf_rn(v3, wx[3], sum);
                acc = __fmaf_rn(sum, wy[r], acc);
            }
            out[ch] = CvPx<T>::sat(acc);
        }
    }

    // cv.rs cubic_weights.
    static __device__ __forceinline__ void cubic_weights(float a, bool vector, float* wt) {
        const float A = -0.75f;
        const float a2 = __fmul_rn(a, a), b = __fsub_rn(1.f, a), b2 = __fmul_rn(b, b);
        const float w0 = vector ? __fmul_rn(A, __fmul_rn(a, b2)) : __fmul_rn(__fmul_rn(A, a), b2);
        const float w3 = vector ? __fmul_rn(A, __fmul_rn(a2, b)) : __fmul_rn(__fmul_rn(A, a2), b);
        const float w1 = __fmaf_rn(a2, __fmaf_rn(1.25f, a, -2.25f), 1.f);
        wt[0] = w0; wt[1] = w1; wt[2] = __fsub_rn(__fsub_rn(__fsub_rn(1.f, w0), w1), w3); wt[3] = w3;
    }

    // The old path's nearest neighbour of the integer point (x, y).
    __device__ __forceinline__ void nearest_fixed(T* out, int x, int y) const {
        const long long t = tap(x, y);
        if (t < 0) { store_fill(out); return; }
        for (int k = 0; k < c; ++k) out[k] = data[t + k];
    }

    // The old path's bilinear interpolation at (x + fx/32, y + fy/32): f32 weights, 15-bit
    // integer weights for UINT8 (u8 set).
    __device__ __forceinline__ void linear_fixed(T* out, int x, int y, int fx, int fy, bool u8) const {
        long long t00, t01, t10, t11;
        if ((unsigned)x < (unsigned)max(w - 1, 0) && (unsigned)y < (unsigned)max(h - 1, 0)) {
            t00 = ((long long)y * w + x) * c; t01 = t00 + c; t10 = t00 + (long long)w * c; t11 = t10 + c;
        } else {
            const int x1 = (int)((unsigned)x + 1u), y1 = (int)((unsigned)y + 1u);
            if (border == CV_BORDER_CONSTANT && (x >= w || x1 < 0 || y >= h || y1 < 0)) { store_fill(out); return; }
            t00 = tap(x, y); t01 = tap(x1, y); t10 = tap(x, y1); t11 = tap(x1, y1);
        }
        const float ax = __fmul_rn((float)fx, 0.03125f), ay = __fmul_rn((float)fy, 0.03125f);
        const float bx = __fsub_rn(1.f, ax), by = __fsub_rn(1.f, ay);
        const float w0 = __fmul_rn(by, bx), w1 = __fmul_rn(by, ax), w2 = __fmul_rn(ay, bx), w3 = __fmul_rn(ay, ax);
        for (int k = 0; k < c; ++k) {
            const float p00 = value(t00, k), p01 = value(t01, k), p10 = value(t10, k), p11 = value(t11, k);
            if (u8) {
                // Exact: the weights are multiples of 1/1024, the pixels integers.
                const int sum = (int)p00 * (int)__fmul_rn(w0, 32768.f) + (int)p01 * (int)__fmul_rn(w1, 32768.f)
                              + (int)p10 * (int)__fmul_rn(w2, 32768.f) + (int)p11 * (int)__fmul_rn(w3, 32768.f);
                out[k] = CvPx<T>::sat((float)((sum + (1 << 14)) >> 15));
            } else {
                out[k] = CvPx<T>::sat(__fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(p00, w0), __fmul_rn(p01, w1)), __fmul_rn(p10, w2)), __fmul_rn(p11, w3)));
            }
        }
    }
};
