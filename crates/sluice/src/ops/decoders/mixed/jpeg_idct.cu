// The second half of a JPEG decode on the GPU, after libjpeg-turbo has entropy-decoded the
// coefficients on a CPU worker (sluice_codecs::read_coefficients): libjpeg's accurate
// integer IDCT (jidctint.c), its fancy upsampling (jdsample.c) and its YCbCr -> RGB
// (jdcolor.c), integer for integer, so the pixels equal libjpeg-turbo's own decode bit for
// bit. sluice-codecs/tests/coefficients.rs holds the same arithmetic on the CPU, checked
// against libjpeg-turbo; keep the two in step.
//
// Two launches per batch: idct_islow (one thread per 8x8 block of every component of every
// sample) into per-component planes, then ycc_to_rgb (one thread per output pixel).

struct Plane {
    unsigned long long coefs;  // bw * bh blocks of 64 int16, natural order, row-major blocks
    unsigned long long out;    // (bw * 8) x (bh * 8) samples, rows bw * 8 bytes apart
    long long blocks;          // bw * bh
    int bw;
    int pad;
    unsigned short quant[64];  // natural order
};

struct Comp {
    unsigned long long plane;  // the component's plane (see Plane::out)
    int pitch;                 // bw * 8
    int x0, y0;                // component sample at the plane's top-left (bx0 * 8, by0 * 8)
    int width, height;         // the component's size in samples (edges replicate past it)
    int h_up, v_up;            // image pixels per sample across and down (1 or 2)
    int pad;                   // (the padding the compiler would add, named for the layout check)
};

struct Sample {
    unsigned long long dst;    // h x w x 3 RGB
    int x, y, w, h;            // the window, image coordinates
    int ncomp;                 // 1 (grayscale) or 3 (YCbCr)
    int pad;
    Comp comp[3];
};

#define FIX_0_298631336 2446
#define FIX_0_390180644 3196
#define FIX_0_541196100 4433
#define FIX_0_765366865 6270
#define FIX_0_899976223 7373
#define FIX_1_175875602 9633
#define FIX_1_501321110 12299
#define FIX_1_847759065 15137
#define FIX_1_961570560 16069
#define FIX_2_053119869 16819
#define FIX_2_562915447 20995
#define FIX_3_072711026 25172

// One 1-D pass of jpeg_idct_islow over v[0..8) (stride 1), descaling by `shift`.
__device__ __forceinline__ void idct_pass(int* v, int shift) {
    const int round = 1 << (shift - 1);
    int z2 = v[2], z3 = v[6];
    int z1 = (z2 + z3) * FIX_0_541196100;
    int tmp2 = z1 - z3 * FIX_1_847759065;
    int tmp3 = z1 + z2 * FIX_0_765366865;
    int tmp0 = (v[0] + v[4]) * 8192;  // << CONST_BITS, as a multiply (negative values)
    int tmp1 = (v[0] - v[4]) * 8192;
    int tmp10 = tmp0 + tmp3, tmp13 = tmp0 - tmp3, tmp11 = tmp1 + tmp2, tmp12 = tmp1 - tmp2;
    int t0 = v[7], t1 = v[5], t2 = v[3], t3 = v[1];
    z1 = t0 + t3;
    z2 = t1 + t2;
    z3 = t0 + t2;
    int z4 = t1 + t3;
    int z5 = (z3 + z4) * FIX_1_175875602;
    t0 *= FIX_0_298631336;
    t1 *= FIX_2_053119869;
    t2 *= FIX_3_072711026;
    t3 *= FIX_1_501321110;
    z1 *= -FIX_0_899976223;
    z2 *= -FIX_2_562915447;
    z3 = z3 * -FIX_1_961570560 + z5;
    z4 = z4 * -FIX_0_390180644 + z5;
    t0 += z1 + z3;
    t1 += z2 + z4;
    t2 += z2 + z3;
    t3 += z1 + z4;
    v[0] = (tmp10 + t3 + round) >> shift;
    v[7] = (tmp10 - t3 + round) >> shift;
    v[1] = (tmp11 + t2 + round) >> shift;
    v[6] = (tmp11 - t2 + round) >> shift;
    v[2] = (tmp12 + t1 + round) >> shift;
    v[5] = (tmp12 - t1 + round) >> shift;
    v[3] = (tmp13 + t0 + round) >> shift;
    v[4] = (tmp13 - t0 + round) >> shift;
}

extern "C" __global__ void idct_islow(const Plane* __restrict__ planes) {
    const Plane& p = planes[blockIdx.y];
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < p.blocks; b += (long long)gridDim.x * blockDim.x) {
        const short* c = (const short*)p.coefs + b * 64;
        int ws[64];
        // Columns: dequantize and transform (descale by CONST_BITS - PASS1_BITS).
        for (int col = 0; col < 8; col++) {
            int v[8];
            for (int r = 0; r < 8; r++) v[r] = (int)c[r * 8 + col] * (int)p.quant[r * 8 + col];
            idct_pass(v, 13 - 2);
            for (int r = 0; r < 8; r++) ws[r * 8 + col] = v[r];
        }
        // Rows: transform, descale by CONST_BITS + PASS1_BITS + 3, level-shift and clamp.
        long long by = b / p.bw, bx = b % p.bw;
        unsigned char* out = (unsigned char*)p.out + by * 8 * (p.bw * 8) + bx * 8;
        for (int r = 0; r < 8; r++) {
            int* v = ws + r * 8;
            idct_pass(v, 13 + 2 + 3);
            unsigned int lo = 0, hi = 0;
            for (int k = 0; k < 4; k++) {
                lo |= (unsigned int)min(max(v[k] + 128, 0), 255) << (8 * k);
                hi |= (unsigned int)min(max(v[k + 4] + 128, 0), 255) << (8 * k);
            }
            *(uint2*)(out + r * (p.bw * 8)) = make_uint2(lo, hi);
        }
    }
}

__device__ __forceinline__ int at(const Comp& c, int i, int j) {
    return ((const unsigned char*)c.plane)[(long long)(j - c.y0) * c.pitch + (i - c.x0)];
}

// The component's value at image pixel (x, y): jdsample.c's fancy upsampling (triangle
// filters with libjpeg's biases; edges replicate the last real sample).
__device__ __forceinline__ int upsampled(const Comp& c, int x, int y) {
    if (c.h_up == 1 && c.v_up == 1) return at(c, x, y);
    if (c.v_up == 1) {  // 2x1
        int i = x >> 1;
        if ((x & 1) == 0) return i == 0 ? at(c, 0, y) : (3 * at(c, i, y) + at(c, i - 1, y) + 1) >> 2;
        return i == c.width - 1 ? at(c, i, y) : (3 * at(c, i, y) + at(c, i + 1, y) + 2) >> 2;
    }
    int j = y >> 1;
    int jn = (y & 1) == 0 ? max(j - 1, 0) : min(j + 1, c.height - 1);
    if (c.h_up == 1) {  // 1x2
        return (3 * at(c, x, j) + at(c, x, jn) + ((y & 1) == 0 ? 1 : 2)) >> 2;
    }
    // 2x2: vertical sums first, then the horizontal filter over them.
    int i = x >> 1;
    int here = 3 * at(c, i, j) + at(c, i, jn);
    if ((x & 1) == 0) {
        if (i == 0) return (here * 4 + 8) >> 4;
        int left = 3 * at(c, i - 1, j) + at(c, i - 1, jn);
        return (3 * here + left + 8) >> 4;
    }
    if (i == c.width - 1) return (here * 4 + 7) >> 4;
    int right = 3 * at(c, i + 1, j) + at(c, i + 1, jn);
    return (3 * here + right + 7) >> 4;
}

extern "C" __global__ void ycc_to_rgb(const Sample* __restrict__ samples) {
    const Sample& s = samples[blockIdx.y];
    long long n = (long long)s.w * s.h;
    unsigned char* dst = (unsigned char*)s.dst;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x) {
        int x = s.x + (int)(p % s.w), y = s.y + (int)(p / s.w);
        int luma = upsampled(s.comp[0], x, y);
        int r, g, b;
        if (s.ncomp == 1) {
            r = g = b = luma;
        } else {
            // jdcolor.c's tables, computed: FIX(1.40200), FIX(1.77200), FIX(0.71414),
            // FIX(0.34414) with SCALEBITS 16 and ONE_HALF rounding.
            int cb = upsampled(s.comp[1], x, y) - 128, cr = upsampled(s.comp[2], x, y) - 128;
            r = luma + ((91881 * cr + 32768) >> 16);
            g = luma + ((-22554 * cb + 32768 - 46802 * cr) >> 16);
            b = luma + ((116130 * cb + 32768) >> 16);
        }
        dst[p * 3 + 0] = (unsigned char)min(max(r, 0), 255);
        dst[p * 3 + 1] = (unsigned char)min(max(g, 0), 255);
        dst[p * 3 + 2] = (unsigned char)min(max(b, 0), 255);
    }
}
