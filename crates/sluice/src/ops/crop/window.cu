// The window copy behind fn.crop, fn.slice, fn.pad and fn.paste on the GPU
// (ops/crop/window_gpu.rs), one launch per batch. The host plans each sample as the cpu
// backend does (ops/crop/plan.rs: a window per dimension, whose anchor may be negative and
// whose end may pass the input), merges the dimensions the window spans whole, and converts
// the fill values to output element bits; the kernel then decides, per output element,
// "inside the input: the input element (converted as cast.cu converts); else: the fill
// value of its channel", which gives the cpu backend's bytes.
// blockIdx.y selects the sample; threads stride over its output elements.
// Needs element.cuh and cast.cu (load, store) before it. No headers: NVRTC runs without the
// CUDA toolkit's include folder on user machines.

#define WINDOW_MAX_DIMS 6

struct WindowSample {
    unsigned long long in, out;
    long long numel;                       // output elements
    long long out_ext[WINDOW_MAX_DIMS];    // merged output extents, outermost first; 1 past ndim
    long long in_ext[WINDOW_MAX_DIMS];     // merged input extents; 1 past ndim
    long long in_stride[WINDOW_MAX_DIMS];  // input element strides of the merged dimensions
    long long anchor[WINDOW_MAX_DIMS];     // input coordinate of output coordinate 0
    unsigned long long fill;               // device address of the fill words (output bits, low bytes)
    long long cstride;                     // output element e is in channel (e / cstride) % channels
    int ndim;
    int channels;                          // 1: every fill takes fill[0]
    int nfill;                             // fill words; channel c takes fill[min(c, nfill - 1)]
    int pad;
};

__device__ __forceinline__ void put_bits(void* p, long long k, int bytes, unsigned long long w) {
    switch (bytes) {
    case 1: ((unsigned char*)p)[k] = (unsigned char)w; break;
    case 2: ((unsigned short*)p)[k] = (unsigned short)w; break;
    case 4: ((unsigned int*)p)[k] = (unsigned int)w; break;
    default: ((unsigned long long*)p)[k] = w; break;
    }
}

__device__ __forceinline__ unsigned long long get_bits(const void* p, long long k, int bytes) {
    switch (bytes) {
    case 1: return ((const unsigned char*)p)[k];
    case 2: return ((const unsigned short*)p)[k];
    case 4: return ((const unsigned int*)p)[k];
    default: return ((const unsigned long long*)p)[k];
    }
}

// I: the index type. Samples below 2^31 output elements use 32-bit division (several times
// faster than 64-bit on the GPU).
template <typename I>
__device__ __forceinline__ void window_elements(const WindowSample& s, int in_type, int out_type, int copy_bytes, int out_bytes) {
    const unsigned long long* fill = (const unsigned long long*)s.fill;
    const I n = (I)s.numel;
    const int nd = s.ndim;
    I ext[WINDOW_MAX_DIMS];
    for (int d = 0; d < WINDOW_MAX_DIMS; d++) ext[d] = (I)s.out_ext[d];
    const I step = (I)gridDim.x * (I)blockDim.x;
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < n; e += step) {
        I rest = e;
        long long src = 0;
        bool inside = true;
        // Innermost first; constant loop bounds keep the arrays in registers.
        for (int d = WINDOW_MAX_DIMS - 1; d >= 0; d--) {
            if (d < nd) {
                I c;
                if (d > 0) {
                    c = rest % ext[d];
                    rest /= ext[d];
                } else {
                    c = rest;
                }
                const long long ic = (long long)c + s.anchor[d];
                inside = inside && ic >= 0 && ic < s.in_ext[d];
                src += ic * s.in_stride[d];
            }
        }
        if (inside) {
            if (copy_bytes) {
                put_bits((void*)s.out, (long long)e, copy_bytes, get_bits((const void*)s.in, src, copy_bytes));
            } else {
                store(out_type, (void*)s.out, (long long)e, load(in_type, (const void*)s.in, src));
            }
        } else {
            int c = s.channels > 1 ? (int)(((long long)e / s.cstride) % s.channels) : 0;
            if (c >= s.nfill) c = s.nfill - 1;
            put_bits((void*)s.out, (long long)e, out_bytes, fill[c]);
        }
    }
}

// copy_bytes: the element size when input and output types are the same (the bits are
// moved), else 0 (converted through cast.cu's `Num`).
extern "C" __global__ void window_copy(const WindowSample* samples, int in_type, int out_type, int copy_bytes, int out_bytes) {
    const WindowSample& s = samples[blockIdx.y];
    if (s.numel <= 0x7fffffffLL) {
        window_elements<unsigned>(s, in_type, out_type, copy_bytes, out_bytes);
    } else {
        window_elements<unsigned long long>(s, in_type, out_type, copy_bytes, out_bytes);
    }
}
