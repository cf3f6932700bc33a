// fn.laplacian on the GPU, the last launch of a batch: separable.cu's passes left each
// partial derivative in an f32 plane; this scales them, sums them in axis order and
// converts once, with the cpu's f32 operations (ops/filters/laplacian.rs: a multiply then
// an add, each rounded, no fused multiply-add), so both backends give the same bits.
// blockIdx.y selects the sample; threads stride over its elements.

struct LapSum {
    unsigned long long part[3];  // f32 planes of the partial derivatives, outermost axis first
    unsigned long long out;
    long long n;                 // elements of the sample
    float scale[3];
    int axes;
};

template <typename O>
__device__ __forceinline__ void lap_sum(const LapSum* samples) {
    const LapSum& s = samples[blockIdx.y];
    O* out = (O*)s.out;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < s.n; e += (long long)gridDim.x * blockDim.x) {
        float acc = __fmul_rn(((const float*)s.part[0])[e], s.scale[0]);
        for (int a = 1; a < s.axes; a++)
            acc = __fadd_rn(__fmul_rn(((const float*)s.part[a])[e], s.scale[a]), acc);
        out[e] = channel_from_float<O>(acc);
    }
}

#define LAP_SUM(N, T) extern "C" __global__ void lap_sum_##N(const LapSum* s) { lap_sum<T>(s); }
LAP_SUM(u8, unsigned char)
LAP_SUM(i8, signed char)
LAP_SUM(u16, unsigned short)
LAP_SUM(i16, short)
LAP_SUM(u32, unsigned int)
LAP_SUM(i32, int)
LAP_SUM(f32, float)
