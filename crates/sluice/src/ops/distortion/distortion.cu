// fn.water, fn.sphere and fn.jitter on the GPU (ops/distortion), one launch per batch: blockIdx.y
// selects the sample, threads stride over its pixels, one thread writing every channel of
// a pixel. The arithmetic repeats the cpu kernel's (ops/distortion/mod.rs, itself DALI's cpu
// operator) operation for operation in f32 with explicit rounding intrinsics, so no
// multiply-add is contracted: the water offsets come from the host's tables (the C
// library's sinf / cosf, which the GPU's differ from), the sphere's point is computed here
// (the division is IEEE's: NVRTC's default -prec-div=true), the sampling is DALI's with its
// x86 floor_int, and UINT8 results go through element.cuh's convert_sat (prepended), the
// cpu's Channel::sat_f32. Jitter's displacement of pixel p is drawn from the sample's Philox
// stream at counter (p low, p high, stream words 1, 2), as the cpu draws it (philox.cuh,
// prepended). Both backends give the same bits.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct DistortSample {
    unsigned long long in, out;
    unsigned long long rows, cols;  // water: device addresses of the row and column offsets
    int h, w, c;
    int apply;                      // 0: the sample's mask is 0, it is copied
    int linear;                     // 1: bilinear, 0: nearest
    unsigned fill;                  // fill_value as the element's bits (low bytes)
    float mid_x, mid_y, d;          // sphere: the centre and the divisor, as the cpu's
    int n_degree;                   // jitter: displacements in [-n_degree/2, n_degree - 1 - n_degree/2]
    unsigned key0, key1;            // jitter: the sample's Philox key
    unsigned ctr1, ctr2;            // jitter: its stream words
};

#define DISTORT_WATER 0
#define DISTORT_SPHERE 1
#define DISTORT_JITTER 2

#define DISTORT_INT_MIN (-2147483647 - 1)

// DALI's floor_int on x86: floor, then CVTTSS2SI, which gives INT_MIN for NaN and for
// values past the int range (so such points fall outside the image). __float2int_rd would
// saturate instead.
__device__ __forceinline__ int distort_floor_int(float v) {
    if (v >= -2147483648.f && v < 2147483648.f) {
        const int t = (int)v;
        return (float)t > v ? t - 1 : t;
    }
    return DISTORT_INT_MIN;
}

template <typename T> struct DistortFill;
template <> struct DistortFill<unsigned char> {
    static __device__ __forceinline__ unsigned char of(unsigned bits) { return (unsigned char)bits; }
};
template <> struct DistortFill<float> {
    static __device__ __forceinline__ float of(unsigned bits) { return __int_as_float((int)bits); }
};

// Where output pixel (x, y) (the sample's pixel p) reads: water from the tables, sphere from
// its centre, jitter a whole pixel drawn around it (DALI's: clamped to [0, W] x [0, H], so
// the column W and the row H read the fill).
template <int MODE>
__device__ __forceinline__ void distort_point(const DistortSample& s, int x, int y, unsigned long long p, float& sx, float& sy) {
    if (MODE == DISTORT_JITTER) {
        const Block b = philox((unsigned)p, (unsigned)(p >> 32), s.ctr1, s.ctr2, s.key0, s.key1);
        const unsigned n = (unsigned)s.n_degree;
        const int half = s.n_degree / 2;
        int nx = (int)(b.w0 % n) - half + x, ny = (int)(b.w1 % n) - half + y;
        nx = nx < 0 ? 0 : (nx > s.w ? s.w : nx);
        ny = ny < 0 ? 0 : (ny > s.h ? s.h : ny);
        sx = (float)nx;
        sy = (float)ny;
    } else if (MODE == DISTORT_SPHERE) {
        const float ty = __fsub_rn(__fadd_rn((float)y, 0.5f), s.mid_y);
        const float tx = __fsub_rn(__fadd_rn((float)x, 0.5f), s.mid_x);
        const float rad = __fsqrt_rn(__fadd_rn(__fmul_rn(tx, tx), __fmul_rn(ty, ty))) / s.d;
        sx = __fadd_rn(s.mid_x, __fmul_rn(rad, tx));
        sy = __fadd_rn(s.mid_y, __fmul_rn(rad, ty));
    } else {
        sx = __fadd_rn((float)x, ((const float*)s.rows)[y]);
        sy = __fadd_rn((float)y, ((const float*)s.cols)[x]);
    }
}

// I: the pixel index type. Samples below 2^31 pixels use 32-bit division (several times
// faster than 64-bit on the GPU); p + step then stays below 2^32.
template <typename T, int MODE, typename I>
__device__ __forceinline__ void distort_pixels(const DistortSample& s) {
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const int c = s.c;
    const I w = (I)s.w;
    const I n = (I)s.h * w;
    const unsigned uw = (unsigned)s.w, uh = (unsigned)s.h;
    const T fill = DistortFill<T>::of(s.fill);
    const float fillf = channel_to_float<T>(fill);
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I p = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; p < n; p += step) {
        T* o = out + (unsigned long long)p * c;
        if (!s.apply) {
            const T* i = in + (unsigned long long)p * c;
            for (int k = 0; k < c; ++k) o[k] = i[k];
            continue;
        }
        const int y = (int)(p / w), x = (int)(p - (I)y * w);
        float sx, sy;
        distort_point<MODE>(s, x, y, (unsigned long long)p, sx, sy);
        if (!s.linear) {
            const int ix = distort_floor_int(sx), iy = distort_floor_int(sy);
            if ((unsigned)ix < uw && (unsigned)iy < uh) {
                const T* px = in + ((unsigned long long)(unsigned)iy * uw + (unsigned)ix) * c;
                for (int k = 0; k < c; ++k) o[k] = px[k];
            } else {
                for (int k = 0; k < c; ++k) o[k] = fill;
            }
            continue;
        }
        const float fx = __fsub_rn(sx, 0.5f), fy = __fsub_rn(sy, 0.5f);
        const int x0 = distort_floor_int(fx), y0 = distort_floor_int(fy);
        // DALI's int sums (never past INT_MAX: see distort_floor_int).
        const int x1 = (int)((unsigned)x0 + 1u), y1 = (int)((unsigned)y0 + 1u);
        const float qx = __fsub_rn(fx, (float)x0), px = __fsub_rn(1.f, qx), qy = __fsub_rn(fy, (float)y0);
        const bool in00 = (unsigned)x0 < uw && (unsigned)y0 < uh, in01 = (unsigned)x1 < uw && (unsigned)y0 < uh;
        const bool in10 = (unsigned)x0 < uw && (unsigned)y1 < uh, in11 = (unsigned)x1 < uw && (unsigned)y1 < uh;
        // Element offsets, read only for taps inside (unsigned: wrapping is harmless).
        const unsigned long long r0 = (unsigned long long)(unsigned)y0 * uw, r1 = (unsigned long long)(unsigned)y1 * uw;
        const unsigned long long o00 = (r0 + (unsigned)x0) * c, o01 = (r0 + (unsigned)x1) * c;
        const unsigned long long o10 = (r1 + (unsigned)x0) * c, o11 = (r1 + (unsigned)x1) * c;
        for (int k = 0; k < c; ++k) {
            const float v00 = in00 ? channel_to_float<T>(in[o00 + k]) : fillf;
            const float v01 = in01 ? channel_to_float<T>(in[o01 + k]) : fillf;
            const float v10 = in10 ? channel_to_float<T>(in[o10 + k]) : fillf;
            const float v11 = in11 ? channel_to_float<T>(in[o11 + k]) : fillf;
            const float s0 = __fadd_rn(__fmul_rn(v00, px), __fmul_rn(v01, qx));
            const float s1 = __fadd_rn(__fmul_rn(v10, px), __fmul_rn(v11, qx));
            o[k] = channel_from_float<T>(__fadd_rn(s0, __fmul_rn(__fsub_rn(s1, s0), qy)));
        }
    }
}

template <typename T, int MODE>
__device__ __forceinline__ void distort(const DistortSample* samples) {
    const DistortSample& s = samples[blockIdx.y];
    if ((long long)s.h * s.w <= 0x7fffffffLL) {
        distort_pixels<T, MODE, unsigned>(s);
    } else {
        distort_pixels<T, MODE, unsigned long long>(s);
    }
}

extern "C" __global__ void water_u8(const DistortSample* s) { distort<unsigned char, DISTORT_WATER>(s); }
extern "C" __global__ void water_f32(const DistortSample* s) { distort<float, DISTORT_WATER>(s); }
extern "C" __global__ void sphere_u8(const DistortSample* s) { distort<unsigned char, DISTORT_SPHERE>(s); }
extern "C" __global__ void sphere_f32(const DistortSample* s) { distort<float, DISTORT_SPHERE>(s); }
extern "C" __global__ void jitter_u8(const DistortSample* s) { distort<unsigned char, DISTORT_JITTER>(s); }
extern "C" __global__ void jitter_f32(const DistortSample* s) { distort<float, DISTORT_JITTER>(s); }
