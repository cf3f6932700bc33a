// fn.erase on the GPU (ops/erase/mod.rs), one launch per batch. The host plans every sample
// as the cpu backend does (DALI's rounding and clamping of the regions, dimensions merged
// where no region cuts them, fill values already converted to element bits), so the kernel
// only decides, per element, "inside some region: the fill value of its channel; else: the
// input", which gives the cpu backend's bytes. Elements are moved as unsigned integers of
// their size (values are never computed on), so four kernels serve every type.
// blockIdx.y selects the sample; threads stride over its elements.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

#define ERASE_MAX_DIMS 5

struct EraseSample {
    unsigned long long in, out;
    long long numel;
    long long ext[ERASE_MAX_DIMS];  // merged extents, outermost first; 1 past ndim
    unsigned long long regions;     // device address of the sample's first EraseRegion
    unsigned long long fill;        // device address of its fill words (element bits, low bytes)
    long long cstride;              // channels > 1: element e takes fill[(e / cstride) % channels]
    int nregions;
    int ndim;
    int channels;                   // 1: every erased element takes fill[0]
    int pad;
};

struct EraseRegion {
    long long lo[ERASE_MAX_DIMS];  // [lo, hi) per merged dimension
    long long hi[ERASE_MAX_DIMS];
};

// I: the index type. Samples below 2^31 elements use 32-bit division (several times faster
// than 64-bit on the GPU); e + step then stays below 2^32.
template <typename T, typename I>
__device__ __forceinline__ void erase_elements(const EraseSample& s) {
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const EraseRegion* regions = (const EraseRegion*)s.regions;
    const unsigned long long* fill = (const unsigned long long*)s.fill;
    const I n = (I)s.numel;
    const int nd = s.ndim;
    I ext[ERASE_MAX_DIMS];
    for (int d = 0; d < ERASE_MAX_DIMS; d++) ext[d] = (I)s.ext[d];
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < n; e += step) {
        // Coordinates, innermost first; constant loop bounds keep c[] in registers.
        I c[ERASE_MAX_DIMS];
        I rest = e;
        for (int d = ERASE_MAX_DIMS - 1; d > 0; d--) {
            if (d < nd) {
                c[d] = rest % ext[d];
                rest /= ext[d];
            } else {
                c[d] = 0;
            }
        }
        c[0] = rest;
        bool erased = false;
        for (int r = 0; r < s.nregions && !erased; r++) {
            const EraseRegion& g = regions[r];
            bool inside = true;
            for (int d = 0; d < ERASE_MAX_DIMS; d++) {
                if (d < nd) inside = inside && (I)g.lo[d] <= c[d] && c[d] < (I)g.hi[d];
            }
            erased = inside;
        }
        if (erased) {
            const unsigned long long w = s.channels > 1 ? fill[(e / (I)s.cstride) % (I)s.channels] : fill[0];
            out[e] = (T)w;  // the low bytes: the element's bits
        } else {
            out[e] = in[e];
        }
    }
}

template <typename T>
__device__ __forceinline__ void erase(const EraseSample* samples) {
    const EraseSample& s = samples[blockIdx.y];
    if (s.numel <= 0x7fffffffLL) {
        erase_elements<T, unsigned>(s);
    } else {
        erase_elements<T, unsigned long long>(s);
    }
}

extern "C" __global__ void erase_1(const EraseSample* s) { erase<unsigned char>(s); }
extern "C" __global__ void erase_2(const EraseSample* s) { erase<unsigned short>(s); }
extern "C" __global__ void erase_4(const EraseSample* s) { erase<unsigned int>(s); }
extern "C" __global__ void erase_8(const EraseSample* s) { erase<unsigned long long>(s); }
