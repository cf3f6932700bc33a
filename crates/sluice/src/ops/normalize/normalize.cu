// fn.normalize on the GPU, one launch per batch, for given mean and stddev (the host
// broadcasts them into per-sample parameter arrays, as the cpu backend does). Appended to
// cast.cu by the host, so loads and stores are the cpu's conversion rules.
// out = (float)((x - mean[p]) * inv[p] + shift) in double with explicit rounding intrinsics
// (no fused multiply-add), then stored like the cpu's store_f64: bit-exact with the cpu.
// Parameter index p of element k: base + sum idx_d(k) * stride_d over the sample's extents,
// stride 0 on reduced axes (neighbouring axes merged on the host). blockIdx.y: the sample.

#define NORM_MAX_DIMS 8

struct NormSample {
    unsigned long long in, out;
    long long count;
    long long base;                  // first parameter of the sample
    int ndim, unused;
    long long extent[NORM_MAX_DIMS]; // sample extents, outermost first
    long long stride[NORM_MAX_DIMS]; // parameter stride per dimension (0 where reduced)
};

extern "C" __global__ void normalize(const NormSample* samples, const double* mean, const double* inv, double shift,
                                     int src_type, int dst_type) {
    const NormSample& s = samples[blockIdx.y];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < s.count; k += step) {
        long long rem = k, p = s.base;
        for (int d = s.ndim - 1; d >= 0; --d) {
            p += (rem % s.extent[d]) * s.stride[d];
            rem /= s.extent[d];
        }
        const double x = as_double(load(src_type, (const void*)s.in, k));
        const float y = __double2float_rn(__dadd_rn(__dmul_rn(__dsub_rn(x, mean[p]), inv[p]), shift));
        store(dst_type, (void*)s.out, k, from_float((double)y));
    }
}
