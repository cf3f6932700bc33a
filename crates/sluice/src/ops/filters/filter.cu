// fn.filter on the GPU, one launch per batch: each thread one output element, its taps in
// kernel order with the cpu's f32 arithmetic (mul then add, no fused multiply-add) and the
// same border rules and rounding (ops/filters/filter.rs), so both backends give the same
// bits. blockIdx.y selects the sample.

struct FilterSample {
    unsigned long long in, out, taps;  // taps: (row, col, weight) triples as 3 x 4 bytes
    long long slices;
    int h, w, c, oh, ow, ay, ax, ntaps;
    int border, valid;
    float fill;
    int pad;
};

// The input index standing for p on an axis of n points; -1: the fill.
__device__ __forceinline__ long long border_index(long long p, long long n, int border) {
    if (p >= 0 && p < n) return p;
    switch (border) {
    case 0:  // reflect_101
        if (n < 2) return 0;
        for (;;) { if (p < 0) p = -p; else if (p >= n) p = 2 * n - 2 - p; else return p; }
    case 1:  // reflect_1001
        for (;;) { if (p < 0) p = -p - 1; else if (p >= n) p = 2 * n - 1 - p; else return p; }
    case 2: return p < 0 ? 0 : n - 1;  // clamp
    case 3: { long long m = p % n; return m < 0 ? m + n : m; }  // wrap
    default: return -1;  // constant
    }
}

// OpenCV's saturate_cast<T>(float): cvRound (half to even; past the int range or NaN:
// INT_MIN), then saturation.
template <typename O> __device__ __forceinline__ O cv_round(float v) {
    const float i = (v != v || fabsf(v) >= 2147483648.0f) ? -2147483648.0f : rintf(v);
    return channel_from_float<O>(i);
}
template <> __device__ __forceinline__ float cv_round<float>(float v) { return v; }

template <typename I, typename O>
__device__ __forceinline__ void filter2d(const FilterSample* samples) {
    const FilterSample& s = samples[blockIdx.y];
    const I* in = (const I*)s.in;
    O* out = (O*)s.out;
    const unsigned int* taps = (const unsigned int*)s.taps;
    const long long per_slice = (long long)s.oh * s.ow * s.c;
    const long long total = s.slices * per_slice;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long sl = e / per_slice, r = e - sl * per_slice;
        const int y = (int)(r / ((long long)s.ow * s.c)), rest = (int)(r - (long long)y * s.ow * s.c);
        const int x = rest / s.c, ch = rest - x * s.c;
        const I* plane = in + sl * (long long)s.h * s.w * s.c;
        float acc = 0.0f;
        for (int t = 0; t < s.ntaps; t++) {
            const int ti = (int)taps[3 * t], tj = (int)taps[3 * t + 1];
            const float k = __int_as_float((int)taps[3 * t + 2]);
            float v;
            if (s.valid) {
                v = channel_to_float(plane[((long long)(y + ti) * s.w + (x + tj)) * s.c + ch]);
            } else {
                const long long sy = border_index((long long)y - s.ay + ti, s.h, s.border);
                const long long sx = border_index((long long)x - s.ax + tj, s.w, s.border);
                v = (sy < 0 || sx < 0) ? s.fill : channel_to_float(plane[(sy * s.w + sx) * s.c + ch]);
            }
            acc = __fadd_rn(acc, __fmul_rn(k, v));
        }
        out[e] = cv_round<O>(acc);
    }
}

#define FILTER(NI, I, NO, O) extern "C" __global__ void filter_##NI##_##NO(const FilterSample* s) { filter2d<I, O>(s); }
#define FILTER_TYPE(N, T) FILTER(N, T, N, T) FILTER(N, T, f32, float)
FILTER_TYPE(u8, unsigned char)
FILTER_TYPE(i8, signed char)
FILTER_TYPE(u16, unsigned short)
FILTER_TYPE(i16, short)
FILTER(f32, float, f32, float)
