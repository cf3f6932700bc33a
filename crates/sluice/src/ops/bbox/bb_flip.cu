// fn.bb_flip on the GPU (ops/bbox/flip.rs), one launch per batch. The host plans the batch
// as the cpu backend does (checks, per-sample flips); the kernel repeats the cpu's f32
// operations on each box (flip.rs, flip_box: DALI's cpu ReadBoxes / AxisFlip / WriteBoxes),
// each sum rounded on its own, so both backends give the same bits.
// blockIdx.y selects the sample; threads stride over its boxes.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct BbFlipSample {
    unsigned long long in, out;
    long long boxes;
    int horizontal;   // non-zero: flip x
    int vertical;     // non-zero: flip y
    int ltrb;         // non-zero: [l, t, r, b]; else [x, y, w, h]
    int pad;
};

__device__ __forceinline__ void bb_flip_axis(float& lo, float& hi, int flip) {
    if (flip) {
        const float l = lo;
        lo = __fsub_rn(1.0f, hi);
        hi = __fsub_rn(1.0f, l);
    }
}

extern "C" __global__ void bb_flip(const BbFlipSample* samples) {
    const BbFlipSample& s = samples[blockIdx.y];
    const float* in = (const float*)s.in;
    float* out = (float*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < s.boxes; b += step) {
        const float* p = in + 4 * b;
        float lo0 = p[0], lo1 = p[1], hi0 = p[2], hi1 = p[3];
        if (!s.ltrb) {
            hi0 = __fadd_rn(lo0, hi0);
            hi1 = __fadd_rn(lo1, hi1);
        }
        bb_flip_axis(lo0, hi0, s.horizontal);
        bb_flip_axis(lo1, hi1, s.vertical);
        if (!s.ltrb) {
            hi0 = __fsub_rn(hi0, lo0);
            hi1 = __fsub_rn(hi1, lo1);
        }
        float* o = out + 4 * b;
        o[0] = lo0;
        o[1] = lo1;
        o[2] = hi0;
        o[3] = hi1;
    }
}
