// Fused crop + mirror + normalize + layout change, one launch per batch.
// blockIdx.y selects the sample; threads stride over its output pixels. The arithmetic is
// (in - mean') * mul with explicit rounding intrinsics, so no fused multiply-add changes the
// result: GPU output equals the CPU backend's bit for bit.

struct Sample {
    unsigned long long in, out;
    int h, w, c;      // input extents
    int y0, x0;       // window anchor (may be negative with out_of_bounds_policy="pad")
    int oh, ow, oc;   // output extents (oc = 4 with pad_output)
    int mirror, pad;
};

struct Consts { float mean[16]; float mul[16]; float fill[16]; };

// Outputs (FLOAT16 as its bits, integers) by the cpu's rules: element.cuh's
// channel_from_float, prepended.

template <typename I, typename O>
__device__ void cmn(const Sample* samples, const Consts* consts, int chw, int per_sample_consts) {
    const Sample s = samples[blockIdx.y];
    // mean / std given per sample: one Consts block per sample, else one for the batch.
    const Consts* k = consts + (per_sample_consts ? blockIdx.y : 0);
    const I* in = (const I*)s.in;
    O* out = (O*)s.out;
    const int npix = s.oh * s.ow;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < npix; p += gridDim.x * blockDim.x) {
        const int y = p / s.ow, x = p - y * s.ow;
        const int sy = s.y0 + y;
        const int sx = s.x0 + (s.mirror ? s.ow - 1 - x : x);
        const bool ok = sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
        const I* px = in + ((long long)sy * s.w + sx) * s.c;
        for (int c = 0; c < s.oc; ++c) {
            O v;
            if (ok && c < s.c) {
                v = channel_from_float<O>(__fmul_rn(__fsub_rn((float)px[c], k->mean[c]), k->mul[c]));
            } else {
                v = channel_from_float<O>(k->fill[c < 16 ? c : 15]);
            }
            const long long o = chw ? ((long long)c * s.oh + y) * s.ow + x : (long long)p * s.oc + c;
            out[o] = v;
        }
    }
}

#define CMN(NAME, I, O) \
    extern "C" __global__ void NAME(const Sample* s, const Consts* k, int chw, int per_sample) { cmn<I, O>(s, k, chw, per_sample); }
CMN(cmn_u8_f32, unsigned char, float)
CMN(cmn_u8_f16, unsigned char, half_bits)
CMN(cmn_u8_u8, unsigned char, unsigned char)
CMN(cmn_u8_i8, unsigned char, signed char)
CMN(cmn_f32_f32, float, float)
CMN(cmn_f32_f16, float, half_bits)
CMN(cmn_f32_u8, float, unsigned char)
CMN(cmn_f32_i8, float, signed char)
