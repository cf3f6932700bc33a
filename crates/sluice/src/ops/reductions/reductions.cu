// fn.reductions.* on the GPU (ops/reductions/mod.rs), one launch per batch, in one of two
// modes the host picks (gpu.rs `Launch::cooperative`):
// - a thread per output element of every sample of the batch (many outputs, or short sums);
// - a block per output element (few outputs with long sums, as an image's per-channel
//   minimum: a thread each would leave most of the GPU idle and walk 50,000 elements alone).
// Either way a thread finds its sample by a binary search over the samples' first output
// indices, and an output element is computed as the cpu kernel (kernel.rs `run_sample`)
// does, in the same arithmetic, so both backends give the same bits:
// - float sums follow DALI's summation tree (kernel.rs `tree` and `tree_1d`), walked with an
//   explicit stack (`tree_sum`): recursion would need a stack size the driver cannot know.
//   A block splits the tree's top levels among its threads and adds their subtrees' sums
//   back up the same tree (`block_tree_sum`);
// - integer sums wrap, and min / max keep the first of equal values and never take NaN, so
//   they fold in memory order (`fold`), as the cpu's `walk`; a block's threads fold every
//   REDUCE_BLOCK-th element and combine their results (`block_fold`): integer sums in any
//   order, min / max keeping the earliest of equal values (only +0 and -0 differ);
// - conversions are C++'s as x86-64 executes them (kernel.rs `Dst`, `cvtt32`, `cvtt64`,
//   `cvtt_u64`), squares C++'s `x * x` (an `int` for 8- and 16-bit types, which wraps);
// - every float operation is rounded on its own (__fadd_rn, __fmul_rn...): NVRTC would fuse
//   a * b + c otherwise.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

// Capacity of `tree_sum`'s stack: reduce_<in>_f32 kernels have REDUCE_FRAMES frames, the
// reduce_<in>_f32_deep ones REDUCE_DEEP_FRAMES (enough for any tree); the host counts the
// frames a batch needs (gpu.rs `tree_frames`) and picks the kernel. Local memory is reserved
// for every resident thread, hence the small common case.
#define REDUCE_FRAMES 32
#define REDUCE_DEEP_FRAMES 128
// DALI's kTreeReduceThreshold (kernel.rs TREE_THRESHOLD).
#define REDUCE_TREE_THRESHOLD 32
// A cooperative block's threads: 2^REDUCE_BLOCK_LEVELS (gpu.rs BLOCK_LEVELS; the host tests
// use fewer, so the tree's leaves fall at every depth).
#ifndef REDUCE_BLOCK_LEVELS
#define REDUCE_BLOCK_LEVELS 8
#endif
#define REDUCE_BLOCK (1 << REDUCE_BLOCK_LEVELS)
// A hook for the host tests: the depth of the stack after each push.
#ifndef REDUCE_FRAMES_SEEN
#define REDUCE_FRAMES_SEEN(depth)
#endif

struct ReduceSample {
    unsigned long long in, out;
    unsigned long long mean;  // std_dev / variance: one float per output element, or one for all
    long long first;          // index of its first output element in the batch
    long long count;          // input elements per output element
    long long dims;           // its groups in `dims`: red_size, red_stride, red_sub [red_n],
                              // keep_size, keep_stride [keep_n]
    float norm;               // (float)(1.0 / divisor)
    int red_n, keep_n;
    int mean_one;
};

enum { PRE_IDENTITY = 0, PRE_SQUARE = 1, PRE_DEVIATION = 2 };
enum { COMBINE_SUM = 0, COMBINE_MIN = 1, COMBINE_MAX = 2 };
enum { POST_NONE = 0, POST_SCALE = 1, POST_ROOT = 2 };

template <typename T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };

// DALI's min_value / max_value: where max / min start (the lowest finite float for float).
template <typename T> struct Limits;
template <> struct Limits<unsigned char> { static constexpr unsigned char lowest = 0, highest = 255; };
template <> struct Limits<signed char> { static constexpr signed char lowest = -128, highest = 127; };
template <> struct Limits<unsigned short> { static constexpr unsigned short lowest = 0, highest = 65535; };
template <> struct Limits<short> { static constexpr short lowest = -32768, highest = 32767; };
template <> struct Limits<unsigned int> { static constexpr unsigned int lowest = 0, highest = 4294967295u; };
template <> struct Limits<int> { static constexpr int lowest = -2147483647 - 1, highest = 2147483647; };
template <> struct Limits<unsigned long long> { static constexpr unsigned long long lowest = 0, highest = 18446744073709551615ull; };
template <> struct Limits<long long> { static constexpr long long lowest = -9223372036854775807LL - 1, highest = 9223372036854775807LL; };
template <> struct Limits<float> { static constexpr float lowest = -3.40282347e+38f, highest = 3.40282347e+38f; };

// C++'s conversion to float: rounded to nearest (every integer type but UINT64 is exact as a
// long long first).
__device__ __forceinline__ float to_f32(unsigned char v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(signed char v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(unsigned short v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(short v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(unsigned int v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(int v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(long long v) { return __ll2float_rn(v); }
__device__ __forceinline__ float to_f32(unsigned long long v) { return __ull2float_rn(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

// x86's cvttss2si (kernel.rs `cvtt32`, `cvtt64`): truncation; NaN and out of range give the
// "integer indefinite" minimum, where a GPU conversion would saturate.
__device__ __forceinline__ int cvtt32(float v) {
    return v >= -2147483648.0f && v < 2147483648.0f ? (int)v : -2147483647 - 1;
}
__device__ __forceinline__ long long cvtt64(float v) {
    return v >= -9223372036854775808.0f && v < 9223372036854775808.0f ? (long long)v : -9223372036854775807LL - 1;
}
// GCC's float -> uint64_t (kernel.rs `cvtt_u64`): from 2^63 up, 2^63 off and its bit back.
__device__ __forceinline__ unsigned long long cvtt_u64(float v) {
    const float two63 = 9223372036854775808.0f;
    if (v >= two63) return (unsigned long long)cvtt64(__fsub_rn(v, two63)) ^ (1ULL << 63);
    return (unsigned long long)cvtt64(v);
}

// C++'s implicit float -> D as x86-64 executes it (kernel.rs `Dst::from_f32`).
template <typename D> __device__ __forceinline__ D from_f32(float v);
template <> __device__ __forceinline__ unsigned char from_f32<unsigned char>(float v) { return (unsigned char)cvtt32(v); }
template <> __device__ __forceinline__ signed char from_f32<signed char>(float v) { return (signed char)cvtt32(v); }
template <> __device__ __forceinline__ unsigned short from_f32<unsigned short>(float v) { return (unsigned short)cvtt32(v); }
template <> __device__ __forceinline__ short from_f32<short>(float v) { return (short)cvtt32(v); }
template <> __device__ __forceinline__ unsigned int from_f32<unsigned int>(float v) { return (unsigned int)cvtt64(v); }
template <> __device__ __forceinline__ int from_f32<int>(float v) { return cvtt32(v); }
template <> __device__ __forceinline__ unsigned long long from_f32<unsigned long long>(float v) { return cvtt_u64(v); }
template <> __device__ __forceinline__ long long from_f32<long long>(float v) { return cvtt64(v); }
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }

// `acc += v`'s conversion of v into the accumulator type (kernel.rs `Value::into_dst`):
// integers keep their low bits or sign-extend.
template <typename D, typename V> __device__ __forceinline__ D convert(V v) {
    if constexpr (IsFloat<D>::value) {
        return to_f32(v);
    } else if constexpr (IsFloat<V>::value) {
        return from_f32<D>(v);
    } else {
        return (D)v;
    }
}

// DALI's reductions::square, C++'s `x * x` (kernel.rs `Src::square`), multiplied unsigned so
// the wrap is defined: an int for 8- and 16-bit types (65535^2 wraps to -131071), 64 bits
// for 32-bit types, the type itself above.
__device__ __forceinline__ int square(unsigned char x) { const unsigned u = x; return (int)(u * u); }
__device__ __forceinline__ int square(signed char x) { const unsigned u = (unsigned)(int)x; return (int)(u * u); }
__device__ __forceinline__ int square(unsigned short x) { const unsigned u = x; return (int)(u * u); }
__device__ __forceinline__ int square(short x) { const unsigned u = (unsigned)(int)x; return (int)(u * u); }
__device__ __forceinline__ unsigned long long square(unsigned int x) { const unsigned long long u = x; return u * u; }
__device__ __forceinline__ long long square(int x) { const long long w = x; return w * w; }
__device__ __forceinline__ unsigned long long square(unsigned long long x) { return x * x; }
__device__ __forceinline__ long long square(long long x) { const unsigned long long u = (unsigned long long)x; return (long long)(u * u); }
__device__ __forceinline__ float square(float x) { return __fmul_rn(x, x); }

// What element `at` of the input adds to its output element, in the accumulator type.
template <typename S, typename D> struct Element {
    const S* src;
    int pre;
    float mean;
    __device__ __forceinline__ D operator()(long long at) const {
        const S x = src[at];
        if (pre == PRE_SQUARE) return convert<D>(square(x));
        if (pre == PRE_DEVIATION) {
            // DALI's reductions::variance: the element as a float, less the mean, squared.
            const float d = __fsub_rn(to_f32(x), mean);
            return convert<D>(__fmul_rn(d, d));
        }
        return convert<D>(x);
    }
};

struct Plus {
    static constexpr bool selects = false;
    __device__ __forceinline__ float operator()(float a, float v) const { return __fadd_rn(a, v); }
    // Integer sums wrap in the accumulator type, computed unsigned.
    template <typename D> __device__ __forceinline__ D operator()(D a, D v) const {
        return (D)((unsigned long long)a + (unsigned long long)v);
    }
};
// The first of equal values stays; NaN compares false, so it is never taken.
struct MinOf {
    static constexpr bool selects = true;
    template <typename D> __device__ __forceinline__ static bool takes(D a, D v) { return v < a; }
    template <typename D> __device__ __forceinline__ D operator()(D a, D v) const { return takes(a, v) ? v : a; }
};
struct MaxOf {
    static constexpr bool selects = true;
    template <typename D> __device__ __forceinline__ static bool takes(D a, D v) { return v > a; }
    template <typename D> __device__ __forceinline__ D operator()(D a, D v) const { return takes(a, v) ? v : a; }
};

// `acc` combined with every reduced element of the output element at `base`, in memory order
// (the cpu's `walk` order for this element): the innermost reduced group as one strided run,
// the outer groups counted off per run. For results that do not depend on the order.
template <typename D, typename V, typename F>
__device__ __forceinline__ D fold(const long long* size, const long long* stride, int n, long long base, D acc, const V& value, F combine) {
    const long long inner = size[n - 1], step = stride[n - 1];
    long long runs = 1;
    for (int a = 0; a + 1 < n; a++) runs *= size[a];
    for (long long r = 0; r < runs; r++) {
        long long off = base, rest = r;
        for (int a = n - 2; a >= 0; a--) {
            off += (rest % size[a]) * stride[a];
            rest /= size[a];
        }
        for (long long i = 0; i < inner; i++) acc = combine(acc, value(off + i * step));
    }
    return acc;
}

// Frame kinds of `tree_sum` (tag = axis * 4 + kind).
enum { FRAME_SPLIT = 0, FRAME_RIGHT = 1, FRAME_SLICES = 2 };

// The float sum of a node of DALI's tree (kernel.rs `tree`; an output element's whole sum
// is the node (0, its extent, the element's `base`)). A node is (axis, extent, offset): the
// first `extent` slices of reduced group `axis` from `offset`, and the groups after it. It is
// halved (the first extent / 2 slices, then the rest; the halves' sums added) while it has
// at least 2 slices and more than REDUCE_TREE_THRESHOLD elements; otherwise, in the last
// group, its elements are summed left to right from zero (`tree_1d`'s run), and above it its
// slices' sums (nodes of the next group, whole) are added one after the other to zero.
// The stack holds, per pending node: a halving waiting for its first half (FRAME_SPLIT: the
// second half's offset and extent), or for its second (FRAME_RIGHT: the first half's sum),
// or a run of slices (FRAME_SLICES: the next slice's offset, the slices left, the sum so far).
template <int FRAMES, typename V>
__device__ __forceinline__ float tree_sum(const long long* size, const long long* stride, const long long* sub, int n, int axis, long long ext, long long off, const V& value) {
    long long f_off[FRAMES], f_ext[FRAMES];
    float f_val[FRAMES];
    unsigned char f_tag[FRAMES];
    int sp = 0;
    for (;;) {
        float v;
        // Down to a run of elements.
        for (;;) {
            if (ext >= 2 && ext * sub[axis] > REDUCE_TREE_THRESHOLD) {
                const long long mid = ext >> 1;
                f_off[sp] = off + mid * stride[axis];
                f_ext[sp] = ext - mid;
                f_tag[sp] = (unsigned char)(axis * 4 + FRAME_SPLIT);
                sp++;
                REDUCE_FRAMES_SEEN(sp);
                ext = mid;
            } else if (axis + 1 == n) {
                const long long step = stride[axis];
                v = 0.0f;
                for (long long i = 0; i < ext; i++) v = __fadd_rn(v, value(off + i * step));
                break;
            } else {
                f_off[sp] = off + stride[axis];
                f_ext[sp] = ext - 1;
                f_val[sp] = 0.0f;
                f_tag[sp] = (unsigned char)(axis * 4 + FRAME_SLICES);
                sp++;
                REDUCE_FRAMES_SEEN(sp);
                axis++;
                ext = size[axis];
            }
        }
        // Up, adding, to the first node with work left.
        for (;;) {
            if (sp == 0) return v;
            const int t = sp - 1, a = f_tag[t] >> 2, kind = f_tag[t] & 3;
            if (kind == FRAME_SPLIT) {
                f_val[t] = v;
                f_tag[t] = (unsigned char)(a * 4 + FRAME_RIGHT);
                axis = a;
                off = f_off[t];
                ext = f_ext[t];
                break;
            }
            if (kind == FRAME_RIGHT) {
                v = __fadd_rn(f_val[t], v);
                sp--;
                continue;
            }
            f_val[t] = __fadd_rn(f_val[t], v);
            if (f_ext[t] > 0) {
                axis = a + 1;
                ext = size[axis];
                off = f_off[t];
                f_off[t] += stride[a];
                f_ext[t]--;
                break;
            }
            v = f_val[t];
            sp--;
        }
    }
}

// A cooperative block's share of DALI's tree for the output element at `base`: the tree's
// top REDUCE_BLOCK_LEVELS levels of halvings are split among the threads (thread t takes
// the first or second half at level d by its bit REDUCE_BLOCK_LEVELS - 1 - d), each sums
// the node it reaches with `tree_sum`, and the sums are added back up the same halvings:
// the halves of a node meet at stride 2^bit, left + right, as `tree_sum` adds them. A node
// that is not halved (at most REDUCE_TREE_THRESHOLD elements) is summed by the first thread
// below it; the others give +0, which changes no sum (a sum is never -0: every run starts
// from +0). A node of one slice above the last group is its slice (0 + its sum).
// The result is thread 0's.
template <int FRAMES, typename V>
__device__ __forceinline__ float block_tree_sum(const long long* size, const long long* stride, const long long* sub, int n, long long base, const V& value) {
    __shared__ float part[REDUCE_BLOCK];
    const int t = threadIdx.x;
    int axis = 0;
    long long ext = size[0], off = base;
    bool mine = true;
    for (int bit = REDUCE_BLOCK_LEVELS - 1; bit >= 0; bit--) {
        while (ext == 1 && axis + 1 < n) {
            axis++;
            ext = size[axis];
        }
        if (!(ext >= 2 && ext * sub[axis] > REDUCE_TREE_THRESHOLD)) {
            mine = (t & ((2 << bit) - 1)) == 0;
            break;
        }
        const long long mid = ext >> 1;
        if ((t >> bit) & 1) {
            off += mid * stride[axis];
            ext -= mid;
        } else {
            ext = mid;
        }
    }
    part[t] = mine ? tree_sum<FRAMES>(size, stride, sub, n, axis, ext, off, value) : 0.0f;
    for (int step = 1; step < REDUCE_BLOCK; step <<= 1) {
        __syncthreads();
        if ((t & (2 * step - 1)) == 0) part[t] = __fadd_rn(part[t], part[t + step]);
    }
    __syncthreads();
    const float v = part[0];
    __syncthreads();  // `part` is free for the next output element
    return v;
}

// The offset of the output element's reduced element j (row-major over the reduced groups,
// which is memory order).
__device__ __forceinline__ long long reduced_offset(const long long* size, const long long* stride, int n, long long base, long long j) {
    if (n == 1) return base + j * stride[0];
    long long off = base;
    for (int a = n - 1; a >= 0; a--) {
        off += (j % size[a]) * stride[a];
        j /= size[a];
    }
    return off;
}

// A cooperative block's fold of the output element at `base` (`count` elements): thread t
// folds elements t, t + REDUCE_BLOCK, ... in order, then the threads' results are combined.
// Integer sums wrap, so any order gives the same bits. Min / max (`F::takes`) keep, of equal
// values, the one met first in memory order, as `fold` does: each result carries the index
// of its element. The result is thread 0's.
template <typename D, typename V, typename F>
__device__ __forceinline__ D block_fold(const long long* size, const long long* stride, int n, long long base, long long count, D init, const V& value, F combine) {
    __shared__ D part[REDUCE_BLOCK];
    __shared__ long long first[REDUCE_BLOCK];
    constexpr bool select = F::selects;
    const int t = threadIdx.x;
    D acc = init;
    long long at = 9223372036854775807LL;  // no element taken
    for (long long j = t; j < count; j += REDUCE_BLOCK) {
        const D v = value(reduced_offset(size, stride, n, base, j));
        if constexpr (select) {
            if (F::takes(acc, v)) {
                acc = v;
                at = j;
            }
        } else {
            acc = combine(acc, v);
        }
    }
    part[t] = acc;
    first[t] = at;
    for (int step = 1; step < REDUCE_BLOCK; step <<= 1) {
        __syncthreads();
        if ((t & (2 * step - 1)) == 0) {
            const D a = part[t], v = part[t + step];
            if constexpr (select) {
                if (F::takes(a, v) || (!F::takes(v, a) && first[t + step] < first[t])) {
                    part[t] = v;
                    first[t] = first[t + step];
                }
            } else {
                part[t] = combine(a, v);
            }
        }
    }
    __syncthreads();
    const D v = part[0];
    __syncthreads();  // `part` is free for the next output element
    return v;
}

// Output element k of the batch: its sample, its index q in the sample, and where its
// elements are.
struct OutputElement {
    const ReduceSample* s;
    long long q, base;
    const long long *red_size, *red_stride, *red_sub;
};

__device__ __forceinline__ OutputElement locate(const ReduceSample* samples, int n, const long long* dims, long long k) {
    int lo = 0, hi = n;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (samples[mid].first <= k) lo = mid;
        else hi = mid;
    }
    const ReduceSample& s = samples[lo];
    const long long q = k - s.first;
    const long long* red_size = dims + s.dims;
    const long long* red_stride = red_size + s.red_n;
    const long long* red_sub = red_stride + s.red_n;
    const long long* keep_size = red_sub + s.red_n;
    const long long* keep_stride = keep_size + s.keep_n;
    // The input offset of output element q (row-major over the kept groups).
    long long base = 0, rest = q;
    for (int a = s.keep_n - 1; a >= 0; a--) {
        base += (rest % keep_size[a]) * keep_stride[a];
        rest /= keep_size[a];
    }
    return {&s, q, base, red_size, red_stride, red_sub};
}

template <typename S, typename D>
__device__ __forceinline__ Element<S, D> element_of(const OutputElement& o, int pre) {
    const ReduceSample& s = *o.s;
    const float mean = pre == PRE_DEVIATION ? ((const float*)s.mean)[s.mean_one ? 0 : o.q] : 0.0f;
    return {(const S*)s.in, pre, mean};
}

// DALI's Postprocess (kernel.rs `postprocess`), and the store.
template <typename D>
__device__ __forceinline__ void finish(const OutputElement& o, D acc, int post) {
    if (post != POST_NONE) {
        float x = __fmul_rn(to_f32(acc), o.s->norm);
        if (post == POST_ROOT) x = __fsqrt_rn(x);
        acc = from_f32<D>(x);
    }
    ((D*)o.s->out)[o.q] = acc;
}

// A thread per output element.
template <typename S, typename D, int FRAMES>
__device__ __forceinline__ void reduce(const ReduceSample* samples, int n, const long long* dims, long long total, int pre, int combine, int post) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += step) {
        const OutputElement o = locate(samples, n, dims, k);
        const ReduceSample& s = *o.s;
        const Element<S, D> value = element_of<S, D>(o, pre);
        D acc;
        if (s.red_n == 0) {
            // DALI's ReduceForEmptyAxes: the element converted, not added to zero (-0.0 stays).
            acc = value(o.base);
        } else if (combine == COMBINE_MIN) {
            acc = fold(o.red_size, o.red_stride, s.red_n, o.base, Limits<D>::highest, value, MinOf());
        } else if (combine == COMBINE_MAX) {
            acc = fold(o.red_size, o.red_stride, s.red_n, o.base, Limits<D>::lowest, value, MaxOf());
        } else if constexpr (IsFloat<D>::value) {
            // Nothing to add gives +0, as every run of the tree starts from +0.
            acc = s.count == 0 ? 0.0f : tree_sum<FRAMES>(o.red_size, o.red_stride, o.red_sub, s.red_n, 0, o.red_size[0], o.base, value);
        } else {
            acc = fold(o.red_size, o.red_stride, s.red_n, o.base, (D)0, value, Plus());
        }
        finish(o, acc, post);
    }
}

// A block of REDUCE_BLOCK threads per output element (the host launches that many). Every
// branch below is the same for the whole block: it depends on the output element only.
template <typename S, typename D, int FRAMES>
__device__ __forceinline__ void reduce_cooperative(const ReduceSample* samples, int n, const long long* dims, long long total, int pre, int combine, int post) {
    for (long long k = blockIdx.x; k < total; k += gridDim.x) {
        const OutputElement o = locate(samples, n, dims, k);
        const ReduceSample& s = *o.s;
        const Element<S, D> value = element_of<S, D>(o, pre);
        D acc;
        if (s.red_n == 0) {
            acc = value(o.base);
        } else if (combine == COMBINE_MIN) {
            acc = block_fold(o.red_size, o.red_stride, s.red_n, o.base, s.count, Limits<D>::highest, value, MinOf());
        } else if (combine == COMBINE_MAX) {
            acc = block_fold(o.red_size, o.red_stride, s.red_n, o.base, s.count, Limits<D>::lowest, value, MaxOf());
        } else if constexpr (IsFloat<D>::value) {
            acc = s.count == 0 ? 0.0f : block_tree_sum<FRAMES>(o.red_size, o.red_stride, o.red_sub, s.red_n, o.base, value);
        } else {
            acc = block_fold(o.red_size, o.red_stride, s.red_n, o.base, s.count, (D)0, value, Plus());
        }
        if (threadIdx.x == 0) finish(o, acc, post);
    }
}

template <typename S, typename D, int FRAMES>
__device__ __forceinline__ void reduce_kernel(const ReduceSample* samples, int n, const long long* dims, long long total, int pre, int combine, int post, int cooperative) {
    if (cooperative) reduce_cooperative<S, D, FRAMES>(samples, n, dims, total, pre, combine, post);
    else reduce<S, D, FRAMES>(samples, n, dims, total, pre, combine, post);
}

// Every (input, output) pair of the cpu's type maps (mod.rs `Kind::outputs`): the input
// type itself, the 64-bit integer of its signedness, and float.
#define REDUCE_PAIRS(X) \
    X(u8, unsigned char, u8, unsigned char) X(u8, unsigned char, u64, unsigned long long) X(u8, unsigned char, f32, float) \
    X(i8, signed char, i8, signed char) X(i8, signed char, i64, long long) X(i8, signed char, f32, float) \
    X(u16, unsigned short, u16, unsigned short) X(u16, unsigned short, u64, unsigned long long) X(u16, unsigned short, f32, float) \
    X(i16, short, i16, short) X(i16, short, i64, long long) X(i16, short, f32, float) \
    X(u32, unsigned int, u32, unsigned int) X(u32, unsigned int, u64, unsigned long long) X(u32, unsigned int, f32, float) \
    X(i32, int, i32, int) X(i32, int, i64, long long) X(i32, int, f32, float) \
    X(u64, unsigned long long, u64, unsigned long long) X(u64, unsigned long long, f32, float) \
    X(i64, long long, i64, long long) X(i64, long long, f32, float) \
    X(f32, float, f32, float)
// The inputs of the pairs with a float output, which may need a deep stack.
#define REDUCE_FLOAT_SUMS(X) \
    X(u8, unsigned char) X(i8, signed char) X(u16, unsigned short) X(i16, short) X(u32, unsigned int) \
    X(i32, int) X(u64, unsigned long long) X(i64, long long) X(f32, float)

#define REDUCE_PARAMS const ReduceSample* samples, int n, const long long* dims, long long total, int pre, int combine, int post, int cooperative
#define REDUCE_KERNEL(NI, I, NO, O) \
    extern "C" __global__ void reduce_##NI##_##NO(REDUCE_PARAMS) { reduce_kernel<I, O, REDUCE_FRAMES>(samples, n, dims, total, pre, combine, post, cooperative); }
#define REDUCE_DEEP_KERNEL(NI, I) \
    extern "C" __global__ void reduce_##NI##_f32_deep(REDUCE_PARAMS) { reduce_kernel<I, float, REDUCE_DEEP_FRAMES>(samples, n, dims, total, pre, combine, post, cooperative); }
// The host compiles each kernel as a module of its own (gpu.rs `KernelId::source`): all of
// them take NVRTC seconds, one about half a second, and a pipeline uses a few. It defines
// REDUCE_ONLY(X) (or REDUCE_ONLY_DEEP(X)) as X applied to the kernel's entry of the lists.
#if defined(REDUCE_ONLY)
REDUCE_ONLY(REDUCE_KERNEL)
#elif defined(REDUCE_ONLY_DEEP)
REDUCE_ONLY_DEEP(REDUCE_DEEP_KERNEL)
#else
REDUCE_PAIRS(REDUCE_KERNEL)
REDUCE_FLOAT_SUMS(REDUCE_DEEP_KERNEL)
#endif
