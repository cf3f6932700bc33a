// fn.grid_mask on the GPU (ops/grid_mask/mod.rs), one launch per batch. The host plans every
// sample as the cpu backend does (checks, per-sample arguments, the grid's f32 steps
// ca = cosf(angle) / tile, sa, sx, sy computed by the host's C library, as DALI's cpu
// operator does), so the kernel only repeats the cpu's per-pixel f32 operations. Each
// product and sum is rounded on its own (__fmul_rn, __fadd_rn): NVRTC would otherwise fuse
// them into multiply-adds, which move pixels on the squares' edges (DALI's own gpu kernel
// does that, and differs from its cpu). Integers are kept or zeroed; FLOAT is moved as its
// bits and gets x86's `x * 1.0f` / `x * 0.0f` (mod.rs, float_times), which is what DALI's
// cpu writes.
// blockIdx.y selects the sample; threads stride over its elements (one element each, so
// neighbouring threads touch neighbouring bytes whatever the channel count).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct GridMaskSample {
    unsigned long long in, out;
    long long numel;     // height * width * channels
    long long width;
    long long channels;
    float ca, sa;        // cosf(angle) / tile, sinf(angle) / tile
    float sx, sy;        // shift_x / tile, shift_y / tile
    float ratio;
    int pad;
};

// True when pixel (y, x) keeps its value: the cpu's Grid::row then Grid::keeps, operation
// by operation. y and x are below 2^31 (the host checks), so they convert as C++'s int.
__device__ __forceinline__ bool grid_mask_keeps(const GridMaskSample& s, int y, int x) {
    const float fy = (float)y, fx = (float)x;
    const float row_x = __fadd_rn(-s.sx, __fmul_rn(fy, -s.sa));
    const float row_y = __fadd_rn(-s.sy, __fmul_rn(fy, s.ca));
    const float gx = __fadd_rn(row_x, __fmul_rn(fx, s.ca));
    const float gy = __fadd_rn(row_y, __fmul_rn(fx, s.sa));
    return __fsub_rn(gx, floorf(gx)) >= s.ratio || __fsub_rn(gy, floorf(gy)) >= s.ratio;
}

// An element kept (`in * 1`) or masked (`in * 0`): integers as they are or 0.
template <typename T>
struct GridMaskElem {
    static __device__ __forceinline__ T apply(T v, bool keep) { return keep ? v : (T)0; }
};

// FLOAT as its bits, x86's products: a NaN is quieted (sign and payload kept) whether kept
// or not, infinity times zero is the default NaN 0xffc00000, other values times zero are a
// zero of their sign.
template <>
struct GridMaskElem<unsigned> {
    static __device__ __forceinline__ unsigned apply(unsigned v, bool keep) {
        const bool special = (v & 0x7f800000u) == 0x7f800000u;
        if (special && (v & 0x007fffffu) != 0u) return v | 0x00400000u;
        if (keep) return v;
        return special ? 0xffc00000u : (v & 0x80000000u);
    }
};

// I: the index type. Samples below 2^31 elements use 32-bit division (several times faster
// than 64-bit on the GPU); e + step then stays below 2^32.
template <typename T, typename I>
__device__ __forceinline__ void grid_mask_elements(const GridMaskSample& s) {
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const I n = (I)s.numel, w = (I)s.width, c = (I)s.channels;
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < n; e += step) {
        const I pixel = e / c;
        const I y = pixel / w;
        const I x = pixel - y * w;
        out[e] = GridMaskElem<T>::apply(in[e], grid_mask_keeps(s, (int)y, (int)x));
    }
}

template <typename T>
__device__ __forceinline__ void grid_mask(const GridMaskSample* samples) {
    const GridMaskSample& s = samples[blockIdx.y];
    if (s.numel <= 0x7fffffffLL) {
        grid_mask_elements<T, unsigned>(s);
    } else {
        grid_mask_elements<T, unsigned long long>(s);
    }
}

extern "C" __global__ void grid_mask_u8(const GridMaskSample* s) { grid_mask<unsigned char>(s); }
extern "C" __global__ void grid_mask_i16(const GridMaskSample* s) { grid_mask<short>(s); }
extern "C" __global__ void grid_mask_i32(const GridMaskSample* s) { grid_mask<int>(s); }
extern "C" __global__ void grid_mask_f32(const GridMaskSample* s) { grid_mask<unsigned>(s); }
