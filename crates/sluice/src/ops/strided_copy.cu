// Gather copy shared by flip and transpose, one launch per batch: output element o of a
// sample comes from input element base + sum_d idx_d(o) * stride_d, where idx_d are o's
// coordinates in the output extents. A flip is a negative stride (base at the far end), a
// transpose a permuted stride. Only element bits move, so any type of that size works.
// blockIdx.y selects the sample; threads stride over its output elements.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

#define MAX_DIMS 8

struct CopySample {
    unsigned long long in, out;
    long long count;            // output elements
    long long base;             // input element of output element 0
    int ndim, unused;
    long long extent[MAX_DIMS]; // output extents, outermost first
    long long stride[MAX_DIMS]; // input element stride per output dimension (may be < 0)
};

template <typename T>
__device__ void strided_copy(const CopySample* samples) {
    const CopySample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    T* out = (T*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < s.count; o += step) {
        long long rem = o, src = s.base;
        for (int d = s.ndim - 1; d >= 0; --d) {
            const long long e = s.extent[d];
            src += (rem % e) * s.stride[d];
            rem /= e;
        }
        out[o] = in[src];
    }
}

extern "C" __global__ void strided_copy_1(const CopySample* s) { strided_copy<unsigned char>(s); }
extern "C" __global__ void strided_copy_2(const CopySample* s) { strided_copy<unsigned short>(s); }
extern "C" __global__ void strided_copy_4(const CopySample* s) { strided_copy<unsigned int>(s); }
extern "C" __global__ void strided_copy_8(const CopySample* s) { strided_copy<unsigned long long>(s); }
