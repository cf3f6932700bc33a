// fn.normalize on the GPU. Appended to cast.cu by the host, so loads and stores are the
// cpu's conversion rules. Per batch: for each statistic computed from the data (the mean
// first, the standard deviation around the mean in use), `normalize_partials` then
// `normalize_finish`; then one `normalize` launch for the output. Given statistics are
// broadcast into the per-sample parameter arrays by the host, as the cpu backend does.
//
// Determinism: every sum runs in double over a partition fixed by the shapes alone, in a
// fixed order, with no atomics, so a batch gives the same bits whatever the timing.
// Explicit rounding intrinsics (no fused multiply-add) keep each step the cpu's operation;
// only the summation order differs from the cpu's.

#define NORM_MAX_DIMS 8

// out = (float)((x - mean[p]) * inv[p] + shift) in double, then stored like the cpu's
// store_f64: bit-exact with the cpu for the same mean and inv.
// Parameter index p of element k: base + sum idx_d(k) * stride_d over the sample's extents,
// stride 0 on reduced axes (neighbouring axes merged on the host). blockIdx.y: the sample.
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

// Row-major index -> element offset over merged axes (a host `Gather` without base).
struct Axes {
    long long ndim;
    long long extent[NORM_MAX_DIMS]; // outermost first
    long long stride[NORM_MAX_DIMS]; // elements
};

// Offset of index k < the product of the extents. The outermost coordinate is what is left
// of k after the inner ones, so a single axis costs no division.
__device__ __forceinline__ long long axes_offset(const Axes& a, long long k) {
    if (a.ndim == 0) return 0;
    long long offset = 0;
    for (int d = (int)a.ndim - 1; d > 0; --d) {
        offset += (k % a.extent[d]) * a.stride[d];
        k /= a.extent[d];
    }
    return offset + k * a.stride[0];
}

// One sample's reductions. Its elements split into parameter slots (the non-reduced
// coordinates, numbered as the parameter arrays are) and, per slot, `reduced` elements (the
// reduced coordinates). Each slot's reduction is cut into `chunks` interleaved chunks:
// chunk c takes reduced elements c, c + chunks, c + 2 chunks, ... (neighbouring threads
// read neighbouring elements), and leaves its sum at partials[partial_base + slot * chunks + c].
struct StatSample {
    unsigned long long in;
    long long slots;        // parameters of the sample
    long long slot_base;    // first of them in the mean / inv arrays
    long long reduced;      // elements per slot
    long long chunks;       // partial sums per slot (>= 1)
    long long partial_base; // first partial sum of the sample
    double count;           // the statistic's element count (the batch's with batch=True)
    Axes slot_axes;         // slot -> offset of its first element
    Axes reduced_axes;      // reduced element -> offset from its slot's first element
};

// Pass 1, one thread per (slot, chunk) of sample blockIdx.y: the chunk's sum of x, or with
// `squares` of (x - mean)^2 around the slot's mean in use (given, or computed by the passes
// before), in chunk order.
extern "C" __global__ void normalize_partials(const StatSample* samples, const double* mean, int squares, int src_type,
                                              double* partials) {
    const StatSample& s = samples[blockIdx.y];
    const long long items = s.slots * s.chunks;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < items; t += step) {
        const long long slot = t / s.chunks;
        const long long first = axes_offset(s.slot_axes, slot);
        const double center = squares ? mean[s.slot_base + slot] : 0.0;
        double sum = 0.0;
        for (long long r = t % s.chunks; r < s.reduced; r += s.chunks) {
            const double x = as_double(load(src_type, (const void*)s.in, first + axes_offset(s.reduced_axes, r)));
            if (squares) {
                const double d = __dsub_rn(x, center);
                sum = __dadd_rn(sum, __dmul_rn(d, d));
            } else {
                sum = __dadd_rn(sum, x);
            }
        }
        partials[s.partial_base + t] = sum;
    }
}

// Threads of a finishing block; a power of two (the tree halves it), the host's FINISH_THREADS.
#define FINISH_THREADS 256

// Sum of `len` partials by the whole block, in an order fixed by `len` alone: thread i adds
// partials i, i + FINISH_THREADS, ..., then a halving tree. Every thread of the block must
// call it (it synchronises); every thread gets the sum.
__device__ double block_sum(const double* partials, long long len) {
    __shared__ double lane[FINISH_THREADS];
    double sum = 0.0;
    for (long long c = threadIdx.x; c < len; c += FINISH_THREADS) sum = __dadd_rn(sum, partials[c]);
    lane[threadIdx.x] = sum;
    __syncthreads();
    for (int half = FINISH_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) lane[threadIdx.x] = __dadd_rn(lane[threadIdx.x], lane[threadIdx.x + half]);
        __syncthreads();
    }
    sum = lane[0];
    __syncthreads(); // `lane` is rewritten by the next call
    return sum;
}

// The cpu's `inv_stddev` (normalize/mod.rs), operation for operation.
__device__ __forceinline__ double inv_stddev(double sum_sq, double count, double ddof, double epsilon, double scale) {
    const double var = __dadd_rn(__ddiv_rn(sum_sq, __dsub_rn(count, ddof)), epsilon);
    return var == 0.0 ? 0.0 : __ddiv_rn(scale, __dsqrt_rn(var));
}

// The statistic of a slot from its total: the mean, or with `squares` scale / stddev.
__device__ __forceinline__ double statistic(double total, double count, int squares, double ddof, double epsilon,
                                            double scale) {
    return squares ? inv_stddev(total, count, ddof, epsilon, scale) : __ddiv_rn(total, count);
}

// Pass 2, one block of FINISH_THREADS per slot (blocks stride over the slots): the slot's
// partials summed by `block_sum`, the statistic written to `out` (the mean or inv array).
// Per sample: grid row blockIdx.y is the sample. With `batch` (one grid row): every sample
// has the same slots; the per-sample totals are added in sample order, as the cpu adds its
// per-sample sums, and the statistic goes to every sample's slot.
extern "C" __global__ void normalize_finish(const StatSample* samples, int num_samples, int batch, const double* partials,
                                            int squares, double ddof, double epsilon, double scale, double* out) {
    const StatSample& s = samples[blockIdx.y];
    for (long long slot = blockIdx.x; slot < s.slots; slot += gridDim.x) {
        if (!batch) {
            const double total = block_sum(partials + s.partial_base + slot * s.chunks, s.chunks);
            if (threadIdx.x == 0) out[s.slot_base + slot] = statistic(total, s.count, squares, ddof, epsilon, scale);
            continue;
        }
        double total = 0.0;
        for (int i = 0; i < num_samples; ++i) {
            const StatSample& si = samples[i];
            total = __dadd_rn(total, block_sum(partials + si.partial_base + slot * si.chunks, si.chunks));
        }
        const double value = statistic(total, s.count, squares, ddof, epsilon, scale);
        for (int i = threadIdx.x; i < num_samples; i += FINISH_THREADS) out[samples[i].slot_base + slot] = value;
    }
}
