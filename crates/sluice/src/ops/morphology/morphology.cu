// fn.experimental.dilate / erode and fn.experimental.median_blur on the GPU
// (ops/morphology/). Values are only compared, through integer keys (UINT8 and UINT16 are
// their own keys; FLOAT bits map to an int in IEEE totalOrder, NaNs to an end), so every
// result is one of the inputs' values, the same bits as the cpu backend's.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

// One pass of a dilation/erosion along one axis for one sample: the sample's elements are
// outer x len (the axis) x inner; each output element is the max/min of the k elements from
// i - a to i - a + k - 1 along the axis, through the border. The first pass of an iteration
// reads the data (in_data: converted to keys), the others keys; the last writes the data
// (out_data), the others keys.
struct MorphPass {
    unsigned long long in, out;
    long long outer, len, inner;
    int k, a, border, dilate;
    int in_data, out_data, pad0, pad1;
};

// One sample of the median filter: slices images of h x w x c, window kw x kh (odd).
struct MedianSample {
    unsigned long long in, out;
    long long slices;
    int h, w, c, kw, kh, pad;
};

template <typename D> struct MorphKeys;
template <> struct MorphKeys<unsigned char> {
    typedef unsigned char K;
    static __device__ __forceinline__ K key(unsigned char v, bool) { return v; }
    static __device__ __forceinline__ unsigned char data(K k) { return k; }
    static __device__ __forceinline__ K lowest() { return 0; }
    static __device__ __forceinline__ K highest() { return 0xff; }
    static __device__ __forceinline__ unsigned int ordered(K k) { return k; }
    static __device__ __forceinline__ K from_ordered(unsigned int u) { return (K)u; }
    static const int bits = 8;
};
template <> struct MorphKeys<unsigned short> {
    typedef unsigned short K;
    static __device__ __forceinline__ K key(unsigned short v, bool) { return v; }
    static __device__ __forceinline__ unsigned short data(K k) { return k; }
    static __device__ __forceinline__ K lowest() { return 0; }
    static __device__ __forceinline__ K highest() { return 0xffff; }
    static __device__ __forceinline__ unsigned int ordered(K k) { return k; }
    static __device__ __forceinline__ K from_ordered(unsigned int u) { return (K)u; }
    static const int bits = 16;
};
// FLOAT, moved as its bits.
template <> struct MorphKeys<unsigned int> {
    typedef int K;
    static __device__ __forceinline__ K key(unsigned int v, bool nan_high) {
        if ((v & 0x7fffffffu) > 0x7f800000u) return nan_high ? 0x7fffffff : (int)0x80000000u;
        const int k = (int)v;
        return k < 0 ? (k ^ 0x7fffffff) : k;
    }
    static __device__ __forceinline__ unsigned int data(K k) { return k < 0 ? (unsigned int)(k ^ 0x7fffffff) : (unsigned int)k; }
    static __device__ __forceinline__ K lowest() { return (int)0x80000000u; }
    static __device__ __forceinline__ K highest() { return 0x7fffffff; }
    static __device__ __forceinline__ unsigned int ordered(K k) { return (unsigned int)k ^ 0x80000000u; }
    static __device__ __forceinline__ K from_ordered(unsigned int u) { return (int)(u ^ 0x80000000u); }
    static const int bits = 32;
};

// The input index standing for p on an axis of n points (the periodic extensions of
// CV-CUDA's GetIndexWithBorder, equal to ops/filters/filter.rs's Border::index); -1: the
// constant border. border: 0 reflect_101, 1 reflect, 2 replicate, 3 wrap, 4 constant.
__device__ __forceinline__ int morph_border_index(int p, int n, int border) {
    if (p >= 0 && p < n) return p;
    switch (border) {
    case 0: {
        if (n < 2) return 0;
        const int period = 2 * n - 2;
        int c = p % period;
        if (c < 0) c += period;
        const int d = n - 1 - c;
        return n - 1 - (d < 0 ? -d : d);
    }
    case 1: {
        const int period = 2 * n;
        int c = p % period;
        if (c < 0) c += period;
        const int d = 2 * c + 1 - period;
        return n - 1 - ((d < 0 ? -d : d) >> 1);
    }
    case 2: return p < 0 ? 0 : n - 1;
    case 3: { int c = p % n; return c < 0 ? c + n : c; }
    default: return -1;
    }
}

template <typename K>
__device__ __forceinline__ K morph_pick(K a, K b, bool dilate) {
    return dilate ? (a > b ? a : b) : (a < b ? a : b);
}

template <typename D, typename I, bool IN_DATA, bool OUT_DATA>
__device__ __forceinline__ void morph_pass_elems(const MorphPass& p) {
    typedef MorphKeys<D> T;
    typedef typename T::K K;
    const bool dilate = p.dilate != 0;
    const K identity = dilate ? T::lowest() : T::highest();
    const I inner = (I)p.inner;
    const I line = (I)p.len * inner;
    const I total = (I)p.outer * line;
    const int len = (int)p.len, k = p.k;
    const D* in_d = (const D*)p.in;
    const K* in_k = (const K*)p.in;
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
        const I o = e / line, rest = e - o * line;
        const int i = (int)(rest / inner);
        const I base = o * line + (rest - (I)i * inner);
        const int first = i - p.a;
        K acc = identity;
        if (first >= 0 && first + k <= len) {
            for (int t = 0; t < k; t++) {
                const I at = base + (I)(first + t) * inner;
                acc = morph_pick(acc, IN_DATA ? T::key(in_d[at], dilate) : in_k[at], dilate);
            }
        } else {
            for (int t = 0; t < k; t++) {
                const int q = morph_border_index(first + t, len, p.border);
                if (q < 0) continue;
                const I at = base + (I)q * inner;
                acc = morph_pick(acc, IN_DATA ? T::key(in_d[at], dilate) : in_k[at], dilate);
            }
        }
        if (OUT_DATA) ((D*)p.out)[e] = T::data(acc);
        else ((K*)p.out)[e] = acc;
    }
}

template <typename D, typename I>
__device__ __forceinline__ void morph_pass_io(const MorphPass& p) {
    if (p.in_data) {
        if (p.out_data) morph_pass_elems<D, I, true, true>(p);
        else morph_pass_elems<D, I, true, false>(p);
    } else {
        if (p.out_data) morph_pass_elems<D, I, false, true>(p);
        else morph_pass_elems<D, I, false, false>(p);
    }
}

// I: the index type. Samples below 2^31 elements use 32-bit division.
template <typename D>
__device__ __forceinline__ void morph_pass(const MorphPass* passes) {
    const MorphPass& p = passes[blockIdx.y];
    if (p.outer * p.len * p.inner <= 0x7fffffffLL) morph_pass_io<D, unsigned>(p);
    else morph_pass_io<D, unsigned long long>(p);
}

extern "C" __global__ void morph_u8(const MorphPass* p) { morph_pass<unsigned char>(p); }
extern "C" __global__ void morph_u16(const MorphPass* p) { morph_pass<unsigned short>(p); }
extern "C" __global__ void morph_f32(const MorphPass* p) { morph_pass<unsigned int>(p); }

// The median's windows of at most this many values are selected in a local array (Wirth's
// algorithm); larger ones bit by bit, from the most significant, counting the window's
// values under each candidate prefix (the window is read once per bit).
#define MEDIAN_LOCAL 81

template <typename D, typename I>
__device__ __forceinline__ void median_elems(const MedianSample& s) {
    typedef MorphKeys<D> T;
    typedef typename T::K K;
    const D* in = (const D*)s.in;
    const I c = (I)s.c, w = (I)s.w, h = (I)s.h;
    const I plane = h * w * c, total = (I)s.slices * plane;
    const int n = s.kw * s.kh, rx = s.kw / 2, ry = s.kh / 2;
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
        const I sl = e / plane, r = e - sl * plane;
        const int y = (int)(r / (w * c));
        const I r2 = r - (I)y * w * c;
        const int x = (int)(r2 / c);
        const I ch = r2 - (I)x * c;
        const D* base = in + sl * plane + ch;
        K result;
        if (n <= MEDIAN_LOCAL) {
            K v[MEDIAN_LOCAL];
            int m = 0;
            for (int i = 0; i < s.kh; i++) {
                int sy = y - ry + i;
                sy = sy < 0 ? 0 : (sy >= s.h ? s.h - 1 : sy);
                for (int j = 0; j < s.kw; j++) {
                    int sx = x - rx + j;
                    sx = sx < 0 ? 0 : (sx >= s.w ? s.w - 1 : sx);
                    v[m++] = T::key(base[((I)sy * w + (I)sx) * c], true);
                }
            }
            // Wirth's selection of rank n / 2.
            const int kth = n / 2;
            int l = 0, u = n - 1;
            while (l < u) {
                const K pivot = v[kth];
                int a = l, b = u;
                do {
                    while (v[a] < pivot) a++;
                    while (pivot < v[b]) b--;
                    if (a <= b) {
                        const K t = v[a];
                        v[a] = v[b];
                        v[b] = t;
                        a++;
                        b--;
                    }
                } while (a <= b);
                if (b < kth) l = a;
                if (kth < a) u = b;
            }
            result = v[kth];
        } else {
            unsigned int prefix = 0, mask = 0;
            int rank = n / 2;
            for (int bit = T::bits - 1; bit >= 0; bit--) {
                const unsigned int b = 1u << bit;
                int below = 0;
                for (int i = 0; i < s.kh; i++) {
                    int sy = y - ry + i;
                    sy = sy < 0 ? 0 : (sy >= s.h ? s.h - 1 : sy);
                    for (int j = 0; j < s.kw; j++) {
                        int sx = x - rx + j;
                        sx = sx < 0 ? 0 : (sx >= s.w ? s.w - 1 : sx);
                        const unsigned int u = T::ordered(T::key(base[((I)sy * w + (I)sx) * c], true));
                        below += ((u & mask) == prefix && !(u & b)) ? 1 : 0;
                    }
                }
                if (rank >= below) {
                    rank -= below;
                    prefix |= b;
                }
                mask |= b;
            }
            result = T::from_ordered(prefix);
        }
        ((D*)s.out)[e] = T::data(result);
    }
}

// The common small windows, KW x KH known at compile time: the window is read into
// registers (every index static) and the median found by a partial selection sort,
// compare-exchanges unrolled (KTH + 1 passes). Rank KTH of the same keys: the same value as
// the general path, several times faster than selecting in a local array.
template <typename D, typename I, int KW, int KH>
__device__ __forceinline__ void median_fixed(const MedianSample& s) {
    typedef MorphKeys<D> T;
    typedef typename T::K K;
    constexpr int N = KW * KH, KTH = N / 2, RX = KW / 2, RY = KH / 2;
    const D* in = (const D*)s.in;
    const I c = (I)s.c, w = (I)s.w, h = (I)s.h;
    const I plane = h * w * c, total = (I)s.slices * plane;
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += step) {
        const I sl = e / plane, r = e - sl * plane;
        const int y = (int)(r / (w * c));
        const I r2 = r - (I)y * w * c;
        const int x = (int)(r2 / c);
        const I ch = r2 - (I)x * c;
        const D* base = in + sl * plane + ch;
        K v[N];
#pragma unroll
        for (int i = 0; i < KH; i++) {
            int sy = y - RY + i;
            sy = sy < 0 ? 0 : (sy >= s.h ? s.h - 1 : sy);
#pragma unroll
            for (int j = 0; j < KW; j++) {
                int sx = x - RX + j;
                sx = sx < 0 ? 0 : (sx >= s.w ? s.w - 1 : sx);
                v[i * KW + j] = T::key(base[((I)sy * w + (I)sx) * c], true);
            }
        }
#pragma unroll
        for (int i = 0; i <= KTH; i++) {
#pragma unroll
            for (int j = i + 1; j < N; j++) {
                const K a = v[i], b = v[j];
                const bool swap = b < a;
                v[i] = swap ? b : a;
                v[j] = swap ? a : b;
            }
        }
        ((D*)s.out)[e] = T::data(v[KTH]);
    }
}

template <typename D, typename I>
__device__ __forceinline__ void median_any(const MedianSample& s) {
    if (s.kw == 3 && s.kh == 3) median_fixed<D, I, 3, 3>(s);
    else if (s.kw == 5 && s.kh == 5) median_fixed<D, I, 5, 5>(s);
    else median_elems<D, I>(s);
}

template <typename D>
__device__ __forceinline__ void median(const MedianSample* samples) {
    const MedianSample& s = samples[blockIdx.y];
    if (s.slices * s.h * s.w * s.c <= 0x7fffffffLL) median_any<D, unsigned>(s);
    else median_any<D, unsigned long long>(s);
}

extern "C" __global__ void median_u8(const MedianSample* s) { median<unsigned char>(s); }
extern "C" __global__ void median_u16(const MedianSample* s) { median<unsigned short>(s); }
extern "C" __global__ void median_f32(const MedianSample* s) { median<unsigned int>(s); }
