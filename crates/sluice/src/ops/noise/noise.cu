// The noise operators on the GPU (ops/noise/mod.rs), one launch per batch. blockIdx.y
// selects the sample; threads stride over its draws (elements, or pixels for
// salt-and-pepper across channels). Every draw is the cpu's (ops/noise/draw.rs), operation
// for operation: Philox4x32-10 on the same keys and counters, then the same f64 arithmetic
// with every sum and product rounded on its own (__dadd_rn / __dmul_rn: NVRTC would fuse
// a * b + c otherwise). Normals use rng.rs' portable ln, sin and cos, so they are the cpu's
// bits; only the Poisson draws' log and exp are CUDA's own (glibc's on the cpu).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct NoiseSample {
    unsigned long long in, out;
    long long pixels;              // draws
    long long p_stride, c_stride;  // element (p, c) = p * p_stride + c * c_stride
    unsigned long long salt, pepper;  // element bytes, little-endian
    double a, b;                   // gaussian: mean, stddev; salt-and-pepper: prob, salt prob;
                                   // shot: factor, 1 / factor
    unsigned key0, key1;           // Philox key
    unsigned ctr1, ctr2, ctr3;     // counter words 1..3 of the sample stream (word 0: block)
    int channels;
};

// Block k of the sample stream (draw.rs `block`).
__device__ __forceinline__ Block sample_block(const NoiseSample& s, long long k) {
    return philox((unsigned)k, s.ctr1, s.ctr2, s.ctr3, s.key0, s.key1);
}

// Round j of element e's stream (draw.rs `element_block`).
__device__ __forceinline__ Block element_block(unsigned k0, unsigned k1, unsigned long long e, unsigned j) {
    return philox(j, (unsigned)e, (unsigned)(e >> 32), 0u, k0, k1);
}

// Uniform in [0, 1) from 53 bits, hi word first (draw.rs `u53`).
__device__ __forceinline__ double u53(unsigned hi, unsigned lo) {
    const unsigned long long bits = (((unsigned long long)hi << 32) | lo) >> 11;
    return __dmul_rn(__ull2double_rn(bits), 1.0 / 9007199254740992.0);
}

// rng.rs `portable_ln`: ln(x) for a positive normal x, every operation rounded on its own
// (the cpu's bits: no fused multiply-add on either side).
__device__ __forceinline__ double portable_ln(double x) {
    const long long bits = __double_as_longlong(x);
    const double m1 = __longlong_as_double((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);
    const bool high = m1 > 1.4142135623730951;
    const double m = high ? __dmul_rn(m1, 0.5) : m1;
    const long long k = ((bits >> 52) & 0x7ff) - 1023 + (high ? 1 : 0);
    const double f = __dsub_rn(m, 1.0);
    const double s = __ddiv_rn(f, __dadd_rn(2.0, f));
    const double z = __dmul_rn(s, s);
    const double w = __dmul_rn(z, z);
    const double t1 = __dmul_rn(w, __dadd_rn(3.999999999940941908e-01, __dmul_rn(w, __dadd_rn(2.222219843214978396e-01, __dmul_rn(w, 1.531383769920937332e-01)))));
    const double t2 = __dmul_rn(z, __dadd_rn(6.666666666666735130e-01, __dmul_rn(w, __dadd_rn(2.857142874366239149e-01,
                          __dmul_rn(w, __dadd_rn(1.818357216161805012e-01, __dmul_rn(w, 1.479819860511658591e-01)))))));
    const double r = __dadd_rn(t2, t1);
    const double hfsq = __dmul_rn(__dmul_rn(0.5, f), f);
    const double dk = (double)k;
    return __dsub_rn(__dmul_rn(dk, 6.93147180369123816490e-01),
                     __dsub_rn(__dsub_rn(hfsq, __dadd_rn(__dmul_rn(s, __dadd_rn(hfsq, r)), __dmul_rn(dk, 1.90821492927058770002e-10))), f));
}

// rng.rs `portable_sincos_turn`: sin and cos of 2 pi u for u in [0, 1).
__device__ __forceinline__ void portable_sincos_turn(double u, double* sin_out, double* cos_out) {
    const double u4 = __dmul_rn(u, 4.0);
    const long long q = (long long)__dadd_rn(u4, 0.5);
    const double x = __dmul_rn(__dsub_rn(u4, (double)q), 1.5707963267948966);
    const double z = __dmul_rn(x, x);
    const double v = __dmul_rn(z, x);
    const double ps = __dadd_rn(-1.66666666666666324348e-01, __dmul_rn(z, __dadd_rn(8.33333333332248946124e-03, __dmul_rn(z,
        __dadd_rn(-1.98412698298579493134e-04, __dmul_rn(z, __dadd_rn(2.75573137070700676789e-06, __dmul_rn(z,
        __dadd_rn(-2.50507602534068634195e-08, __dmul_rn(z, 1.58969099521155010221e-10))))))))));
    const double sn = __dadd_rn(x, __dmul_rn(v, ps));
    const double rc = __dmul_rn(z, __dadd_rn(4.16666666666666019037e-02, __dmul_rn(z, __dadd_rn(-1.38888888888741095749e-03, __dmul_rn(z,
        __dadd_rn(2.48015872894767294178e-05, __dmul_rn(z, __dadd_rn(-2.75573143513906633035e-07, __dmul_rn(z,
        __dadd_rn(2.08757232129817482790e-09, __dmul_rn(z, -1.13596475577881948265e-11)))))))))));
    const double hz = __dmul_rn(0.5, z);
    const double w = __dsub_rn(1.0, hz);
    const double cs = __dadd_rn(w, __dadd_rn(__dsub_rn(__dsub_rn(1.0, w), hz), __dmul_rn(z, rc)));
    double s2 = (q & 1) ? cs : sn, c2 = (q & 1) ? -sn : cs;
    if (q & 2) { s2 = -s2; c2 = -c2; }
    *sin_out = s2;
    *cos_out = c2;
}

// rng.rs `box_muller`: both halves of one block, the cpu's bits.
__device__ __forceinline__ void box_muller(Block b, double* c, double* s) {
    const double u1 = __dsub_rn(1.0, u53(b.w0, b.w1));
    const double u2 = u53(b.w2, b.w3);
    const double r = __dsqrt_rn(__dmul_rn(-2.0, portable_ln(u1)));
    double sn, cs;
    portable_sincos_turn(u2, &sn, &cs);
    *c = __dmul_rn(r, cs);
    *s = __dmul_rn(r, sn);
}

// Standard normal from one block (draw.rs `normal`, rng.rs `SampleRng::normal`).
__device__ __forceinline__ double normal(Block b) {
    double c, s;
    box_muller(b, &c, &s);
    return c;
}

// Value e of the sample's standard normals (rng.rs `normals`): Box-Muller on block e / 2,
// its cosine half for even e and its sine half for odd e.
__device__ __forceinline__ double normal_at(const NoiseSample& s, long long e) {
    double c, sn;
    box_muller(sample_block(s, e >> 1), &c, &sn);
    return (e & 1) ? sn : c;
}

// ln Gamma(x) for x >= 1 (draw.rs `loggam`, NumPy's random_loggam).
__device__ double loggam(double x) {
    if (x == 1.0 || x == 2.0) return 0.0;
    const long long n = x < 7.0 ? (long long)(7.0 - x) : 0;
    double x0 = __dadd_rn(x, (double)n);
    const double r = __ddiv_rn(1.0, x0);
    const double x2 = __dmul_rn(r, r);
    const double a[10] = {8.333333333333333e-02, -2.777777777777778e-03, 7.936507936507937e-04, -5.952380952380952e-04,
                          8.417508417508418e-04, -1.917526917526918e-03, 6.410256410256410e-03, -2.955065359477124e-02,
                          1.796443723688307e-01, -1.39243221690590e+00};
    double gl0 = a[9];
    for (int k = 8; k >= 0; k--) gl0 = __dadd_rn(__dmul_rn(gl0, x2), a[k]);
    const double lx0 = log(x0);
    double gl = __dsub_rn(__dadd_rn(__dadd_rn(__ddiv_rn(gl0, x0), __dmul_rn(0.5, 1.8378770664093453)), __dmul_rn(__dsub_rn(x0, 0.5), lx0)), x0);
    for (long long k = 0; k < n; k++) {
        gl = __dsub_rn(gl, log(__dsub_rn(x0, 1.0)));
        x0 = __dsub_rn(x0, 1.0);
    }
    return gl;
}

// A Poisson draw of mean lam for element e (draw.rs `poisson`).
__device__ double poisson(double lam, unsigned k0, unsigned k1, unsigned long long e) {
    if (!(lam > 0.0)) return 0.0;
    if (lam < 10.0) {
        const Block w = element_block(k0, k1, e, 0);
        const double u = u53(w.w0, w.w1);
        double p = exp(-lam);
        double f = p;
        double k = 0.0;
        while (u > f && k < 1000.0) {
            k = __dadd_rn(k, 1.0);
            p = __ddiv_rn(__dmul_rn(p, lam), k);
            f = __dadd_rn(f, p);
        }
        return k;
    }
    if (lam < 1e10) {
        const double slam = sqrt(lam);
        const double loglam = log(lam);
        const double b = __dadd_rn(0.931, __dmul_rn(2.53, slam));
        const double a = __dadd_rn(-0.059, __dmul_rn(0.02483, b));
        const double log_invalpha = log(__dadd_rn(1.1239, __ddiv_rn(1.1328, __dsub_rn(b, 3.4))));
        const double vr = __dsub_rn(0.9277, __ddiv_rn(3.6224, __dsub_rn(b, 2.0)));
        for (unsigned j = 0; j < 1000u; j++) {
            const Block w = element_block(k0, k1, e, j);
            const double u = __dsub_rn(u53(w.w0, w.w1), 0.5);
            const double v = u53(w.w2, w.w3);
            const double us = __dsub_rn(0.5, fabs(u));
            const double k = floor(__dadd_rn(__dadd_rn(__dmul_rn(__dadd_rn(__ddiv_rn(__dmul_rn(2.0, a), us), b), u), lam), 0.43));
            if (us >= 0.07 && v <= vr) return k;
            if (k < 0.0 || (us < 0.013 && v > us)) continue;
            const double lhs = __dsub_rn(__dadd_rn(log(v), log_invalpha), log(__dadd_rn(__ddiv_rn(a, __dmul_rn(us, us)), b)));
            const double rhs = __dsub_rn(__dadd_rn(-lam, __dmul_rn(k, loglam)), loggam(__dadd_rn(k, 1.0)));
            if (lhs <= rhs) return k;
        }
        return floor(__dadd_rn(lam, 0.5));
    }
    if (lam <= 1.7976931348623157e308) {
        const double z = normal(element_block(k0, k1, e, 0));
        return fmax(floor(__dadd_rn(__dadd_rn(lam, __dmul_rn(sqrt(lam), z)), 0.5)), 0.0);
    }
    return lam;
}

// DALI's ConvertSat<T> of a double (tensor/element.rs `store`): round half away from zero,
// saturate. element.cuh's convert_sat covers the 8- to 32-bit integers.
template <typename T> __device__ __forceinline__ T store(double v) { return convert_sat<T>(v); }
template <> __device__ __forceinline__ float store<float>(double v) { return __double2float_rn(v); }
template <> __device__ __forceinline__ unsigned long long store<unsigned long long>(double v) {
    if (v != v) return 1ULL << 63;
    const double r = round(v);
    if (r <= 0.0) return 0ULL;
    if (r >= 18446744073709551616.0) return 0xFFFFFFFFFFFFFFFFULL;
    return (unsigned long long)r;
}
template <> __device__ __forceinline__ long long store<long long>(double v) {
    const long long lo = -9223372036854775807LL - 1;
    if (v != v) return lo;
    const double r = round(v);
    if (r <= -9223372036854775808.0) return lo;
    if (r >= 9223372036854775808.0) return 9223372036854775807LL;
    return (long long)r;
}

// Gaussian noise is added in float for 8- and 16-bit integers and float, in double for the
// 32- and 64-bit integers (DALI's FloatType; mod.rs `Elem::ADD_IN_F32`).
template <typename T> struct AddInDouble { static constexpr bool value = false; };
template <> struct AddInDouble<unsigned int> { static constexpr bool value = true; };
template <> struct AddInDouble<int> { static constexpr bool value = true; };
template <> struct AddInDouble<unsigned long long> { static constexpr bool value = true; };
template <> struct AddInDouble<long long> { static constexpr bool value = true; };

template <typename T> __device__ __forceinline__ T add_noise(T x, double g) {
    if constexpr (AddInDouble<T>::value) {
        return store<T>(__dadd_rn((double)x, g));
    } else {
        return store<T>((double)__fadd_rn((float)x, __double2float_rn(g)));
    }
}

// An element from its little-endian bytes in the low bytes of a word.
template <typename T> __device__ __forceinline__ T from_bits(unsigned long long b) { return (T)b; }
template <> __device__ __forceinline__ float from_bits<float>(unsigned long long b) { return __int_as_float((int)(unsigned)b); }

template <typename T>
__device__ __forceinline__ void noise_gaussian(const NoiseSample* samples) {
    const NoiseSample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < s.pixels; e += step) {
        const double g = __dadd_rn(s.a, __dmul_rn(s.b, normal_at(s, e)));
        out[e] = add_noise<T>(in[e], g);
    }
}

template <typename T>
__device__ __forceinline__ void noise_salt_and_pepper(const NoiseSample* samples) {
    const NoiseSample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const T salt = from_bits<T>(s.salt), pepper = from_bits<T>(s.pepper);
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < s.pixels; p += step) {
        // Pixel p's uniform: words 0-1 (even p) or 2-3 (odd p) of block p / 2 (mod.rs).
        const Block w = sample_block(s, p >> 1);
        const double u = (p & 1) ? u53(w.w2, w.w3) : u53(w.w0, w.w1);
        const long long base = p * s.p_stride;
        if (u < s.a) {
            const T v = u < s.b ? salt : pepper;
            for (int c = 0; c < s.channels; c++) out[base + c * s.c_stride] = v;
        } else {
            for (int c = 0; c < s.channels; c++) out[base + c * s.c_stride] = in[base + c * s.c_stride];
        }
    }
}

template <typename T>
__device__ __forceinline__ void noise_shot(const NoiseSample* samples) {
    const NoiseSample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const float factor = (float)s.a, inv = (float)s.b;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < s.pixels; e += step) {
        if (factor == 0.0f) {
            out[e] = in[e];
            continue;
        }
        const float lam = __fmul_rn((float)in[e], inv);
        const double n = poisson(lam > 0.0f ? (double)lam : 0.0, s.key0, s.key1, (unsigned long long)e);
        out[e] = store<T>((double)__fmul_rn(__double2float_rn(n), factor));
    }
}

#define NOISE_KERNELS(N, T) \
    extern "C" __global__ void noise_gaussian_##N(const NoiseSample* s) { noise_gaussian<T>(s); } \
    extern "C" __global__ void noise_salt_and_pepper_##N(const NoiseSample* s) { noise_salt_and_pepper<T>(s); } \
    extern "C" __global__ void noise_shot_##N(const NoiseSample* s) { noise_shot<T>(s); }
NOISE_KERNELS(u8, unsigned char)
NOISE_KERNELS(i8, signed char)
NOISE_KERNELS(u16, unsigned short)
NOISE_KERNELS(i16, short)
NOISE_KERNELS(u32, unsigned int)
NOISE_KERNELS(i32, int)
NOISE_KERNELS(u64, unsigned long long)
NOISE_KERNELS(i64, long long)
NOISE_KERNELS(f32, float)
