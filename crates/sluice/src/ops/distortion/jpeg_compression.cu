// fn.jpeg_compression_distortion on the GPU (ops/distortion/jpeg_compression.rs): the JPEG
// round trip the cpu backend runs through libjpeg-turbo (baseline 4:2:0 at `quality`,
// accurate integer DCT and IDCT, fancy upsampling), computed without the entropy coding,
// which is lossless and so changes nothing. Every step is libjpeg-turbo's integer arithmetic
// (its SIMD paths give the same bits as its C code), so the output equals the cpu's bit for
// bit, which is more than DALI's gpu operator (a float DCT) gives:
//   encoder: RGB -> YCbCr (jccolor.c's 16-bit fixed point), Cb/Cr averaged over 2x2 pixels
//   with the alternating bias 1, 2 (jcsample.c), edges padded by repeating the last column
//   and row (of the full image for the 2x2 pairs, of the chroma plane past its last row),
//   jfdctint.c's forward DCT, jcdctmgr.c's reciprocal quantization with the standard tables
//   scaled by `quality` (jcparam.c, baseline: at most 255);
//   decoder: dequantization, jidctint.c's inverse DCT with its range-limit table, jdsample.c's
//   h2v2 "fancy" (triangle) upsampling, or pixel replication when the chroma plane is at
//   most 2 samples wide, and jdcolor.c's YCbCr -> RGB.
// Two launches per batch: `jpeg_distortion_blocks` (a thread per 8x8 block of a plane) writes
// the decoded Y, Cb and Cr planes to scratch memory; `jpeg_distortion_pixels` (a thread per
// pixel) upsamples and converts them, as the upsampling reads chroma across block edges.
// blockIdx.y selects the frame (an image, or a frame of a sequence).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct JpegFrame {
    unsigned long long in, out;   // HWC RGB, 8 bits
    unsigned long long scratch;   // the decoded planes: Y, then Cb, then Cr
    int width, height;
    int quality;                  // 1 to 100
    int pad;
};

__constant__ unsigned short jpeg_luma_table[64] = {
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};
__constant__ unsigned short jpeg_chroma_table[64] = {
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99};

// The planes' geometry: 8x8 blocks of Y, and of Cb and Cr at half resolution.
struct JpegPlanes {
    int luma_cols, luma_rows;       // blocks
    int chroma_cols, chroma_rows;   // blocks of each chroma plane
    __device__ JpegPlanes(int w, int h)
        : luma_cols((w + 7) / 8), luma_rows((h + 7) / 8), chroma_cols((w + 15) / 16), chroma_rows((h + 15) / 16) {}
    __device__ long long luma_blocks() const { return (long long)luma_cols * luma_rows; }
    __device__ long long chroma_blocks() const { return (long long)chroma_cols * chroma_rows; }
    // Plane p (0 Y, 1 Cb, 2 Cr): its first byte in the scratch and its row stride.
    __device__ long long offset(int p) const { return p == 0 ? 0 : 64 * (luma_blocks() + (p - 1) * chroma_blocks()); }
    __device__ int stride(int p) const { return 8 * (p == 0 ? luma_cols : chroma_cols); }
};

__device__ __forceinline__ int jpeg_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int jpeg_max(int a, int b) { return a > b ? a : b; }

// jccolor.c: FIX(0.29900) = 19595 and so on, SCALEBITS 16, ONE_HALF folded into the tables.
__device__ __forceinline__ int jpeg_y(int r, int g, int b) { return (19595 * r + 38470 * g + 7471 * b + 32768) >> 16; }
__device__ __forceinline__ int jpeg_cb(int r, int g, int b) { return (-11059 * r - 21709 * g + 32768 * b + (128 << 16) + 32767) >> 16; }
__device__ __forceinline__ int jpeg_cr(int r, int g, int b) { return (32768 * r - 27439 * g - 5329 * b + (128 << 16) + 32767) >> 16; }

// The encoder's component `plane` at full-resolution pixel (y, x), the image's edge repeated.
__device__ __forceinline__ int jpeg_component(const JpegFrame& f, int plane, int y, int x) {
    const unsigned char* p = (const unsigned char*)f.in + ((long long)jpeg_min(y, f.height - 1) * f.width + jpeg_min(x, f.width - 1)) * 3;
    const int r = p[0], g = p[1], b = p[2];
    return plane == 0 ? jpeg_y(r, g, b) : plane == 1 ? jpeg_cb(r, g, b) : jpeg_cr(r, g, b);
}

// jfdctint.c's jpeg_fdct_islow (CONST_BITS 13, PASS1_BITS 2); the output is scaled by 8.
__device__ void jpeg_fdct_islow(int* d) {
    for (int pass = 0; pass < 2; pass++) {
        const int step = pass == 0 ? 1 : 8, next = pass == 0 ? 8 : 1;
        const int shift = pass == 0 ? 13 - 2 : 13 + 2;
        for (int k = 0; k < 8; k++) {
            int* p = d + k * next;
            const long long tmp0 = p[0 * step] + p[7 * step], tmp7 = p[0 * step] - p[7 * step];
            const long long tmp1 = p[1 * step] + p[6 * step], tmp6 = p[1 * step] - p[6 * step];
            const long long tmp2 = p[2 * step] + p[5 * step], tmp5 = p[2 * step] - p[5 * step];
            const long long tmp3 = p[3 * step] + p[4 * step], tmp4 = p[3 * step] - p[4 * step];
            const long long tmp10 = tmp0 + tmp3, tmp13 = tmp0 - tmp3, tmp11 = tmp1 + tmp2, tmp12 = tmp1 - tmp2;
            if (pass == 0) {
                p[0 * step] = (int)((tmp10 + tmp11) << 2);
                p[4 * step] = (int)((tmp10 - tmp11) << 2);
            } else {
                p[0 * step] = (int)((tmp10 + tmp11 + 2) >> 2);
                p[4 * step] = (int)((tmp10 - tmp11 + 2) >> 2);
            }
            const long long round = 1LL << (shift - 1);
            const long long z1 = (tmp12 + tmp13) * 4433;
            p[2 * step] = (int)((z1 + tmp13 * 6270 + round) >> shift);
            p[6 * step] = (int)((z1 + tmp12 * -15137 + round) >> shift);
            const long long o1 = tmp4 + tmp7, o2 = tmp5 + tmp6, o3 = tmp4 + tmp6, o4 = tmp5 + tmp7;
            const long long z5 = (o3 + o4) * 9633;
            const long long t4 = tmp4 * 2446, t5 = tmp5 * 16819, t6 = tmp6 * 25172, t7 = tmp7 * 12299;
            const long long z1o = o1 * -7373, z2o = o2 * -20995, z3o = o3 * -16069 + z5, z4o = o4 * -3196 + z5;
            p[7 * step] = (int)((t4 + z1o + z3o + round) >> shift);
            p[5 * step] = (int)((t5 + z2o + z4o + round) >> shift);
            p[3 * step] = (int)((t6 + z2o + z3o + round) >> shift);
            p[1 * step] = (int)((t7 + z1o + z4o + round) >> shift);
        }
    }
}

// jidctint.c's range limit after the inverse DCT: x + 128 clamped to 0..255 for |x| up to
// 512, wrapping beyond as its table (indexed by x & 1023) does.
__device__ __forceinline__ unsigned char jpeg_idct_limit(long long x) {
    const int y = (int)(x & 1023);
    return (unsigned char)(y < 128 ? y + 128 : y < 512 ? 255 : y < 896 ? 0 : y - 896);
}

// jidctint.c's jpeg_idct_islow on dequantized coefficients `c` (columns, then rows); writes
// the 8x8 samples to `out` with row stride `stride`.
__device__ void jpeg_idct_islow(const int* c, unsigned char* out, int stride) {
    int ws[64];
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < 8; k++) {
            // Pass 0 reads column k of `c`; pass 1 row k of the workspace.
            const int* p = pass == 0 ? c + k : ws + 8 * k;
            const int step = pass == 0 ? 8 : 1;
            long long z2 = p[2 * step], z3 = p[6 * step];
            long long z1 = (z2 + z3) * 4433;
            const long long tmp2 = z1 + z3 * -15137, tmp3 = z1 + z2 * 6270;
            z2 = p[0]; z3 = p[4 * step];
            const long long tmp0 = (z2 + z3) << 13, tmp1 = (z2 - z3) << 13;
            const long long tmp10 = tmp0 + tmp3, tmp13 = tmp0 - tmp3, tmp11 = tmp1 + tmp2, tmp12 = tmp1 - tmp2;
            long long o0 = p[7 * step], o1 = p[5 * step], o2 = p[3 * step], o3 = p[1 * step];
            z1 = o0 + o3; z2 = o1 + o2; z3 = o0 + o2;
            long long z4 = o1 + o3;
            const long long z5 = (z3 + z4) * 9633;
            o0 *= 2446; o1 *= 16819; o2 *= 25172; o3 *= 12299;
            z1 *= -7373; z2 *= -20995; z3 = z3 * -16069 + z5; z4 = z4 * -3196 + z5;
            o0 += z1 + z3; o1 += z2 + z4; o2 += z2 + z3; o3 += z1 + z4;
            const long long v[8] = {tmp10 + o3, tmp11 + o2, tmp12 + o1, tmp13 + o0, tmp13 - o0, tmp12 - o1, tmp11 - o2, tmp10 - o3};
            if (pass == 0) {
                // DESCALE by CONST_BITS - PASS1_BITS (the all-zero AC shortcut gives the same).
                for (int i = 0; i < 8; i++) ws[8 * i + k] = (int)((v[i] + (1LL << 10)) >> 11);
            } else {
                for (int i = 0; i < 8; i++) out[(long long)k * stride + i] = jpeg_idct_limit((v[i] + (1LL << 17)) >> 18);
            }
        }
    }
}

// jcdctmgr.c's quantization of a DCT output `t` (scaled by 8) by `divisor` (= table value
// * 8): a 16-bit reciprocal multiply, rounding half up in magnitude (compute_reciprocal).
__device__ __forceinline__ int jpeg_quantize(int t, unsigned divisor) {
    const int b = 31 - __clz(divisor);          // flss(divisor) - 1
    int r = 16 + b;
    unsigned long long fq = (1ULL << r) / divisor;
    const unsigned long long fr = (1ULL << r) % divisor;
    unsigned c = divisor / 2;
    if (fr == 0) {
        fq >>= 1;
        r--;
    } else if (fr <= divisor / 2) {
        c++;
    } else {
        fq++;
    }
    const unsigned recip = (unsigned)(unsigned short)fq, corr = (unsigned)(unsigned short)c;
    const unsigned mag = (unsigned)(t < 0 ? -t : t);
    const int q = (int)(unsigned short)(((mag + corr) * recip) >> r);
    return t < 0 ? -q : q;
}

extern "C" __global__ void jpeg_distortion_blocks(const JpegFrame* frames) {
    const JpegFrame& f = frames[blockIdx.y];
    const JpegPlanes planes(f.width, f.height);
    const long long luma = planes.luma_blocks(), chroma = planes.chroma_blocks();
    const long long total = luma + 2 * chroma;
    const int q = f.quality < 50 ? 5000 / f.quality : 200 - 2 * f.quality;
    // The last chroma row the image has (rows past it repeat it, see the top of the file).
    const int chroma_height = (f.height + 1) / 2;
    unsigned char* scratch = (unsigned char*)f.scratch;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total; k += step) {
        const int plane = k < luma ? 0 : k < luma + chroma ? 1 : 2;
        const long long in_plane = plane == 0 ? k : k - luma - (plane - 1) * chroma;
        const int cols = plane == 0 ? planes.luma_cols : planes.chroma_cols;
        const int by = (int)(in_plane / cols), bx = (int)(in_plane % cols);
        int d[64];
        for (int i = 0; i < 8; i++) {
            for (int j = 0; j < 8; j++) {
                int v;
                if (plane == 0) {
                    v = jpeg_component(f, 0, by * 8 + i, bx * 8 + j);
                } else {
                    const int cy = jpeg_min(by * 8 + i, chroma_height - 1), cx = bx * 8 + j;
                    const int sum = jpeg_component(f, plane, 2 * cy, 2 * cx) + jpeg_component(f, plane, 2 * cy, 2 * cx + 1)
                                  + jpeg_component(f, plane, 2 * cy + 1, 2 * cx) + jpeg_component(f, plane, 2 * cy + 1, 2 * cx + 1);
                    v = (sum + 1 + (cx & 1)) >> 2;
                }
                d[8 * i + j] = v - 128;
            }
        }
        jpeg_fdct_islow(d);
        const unsigned short* table = plane == 0 ? jpeg_luma_table : jpeg_chroma_table;
        for (int i = 0; i < 64; i++) {
            const int t = jpeg_min(jpeg_max((table[i] * q + 50) / 100, 1), 255);
            d[i] = jpeg_quantize(d[i], (unsigned)t << 3) * t;
        }
        const int stride = planes.stride(plane);
        jpeg_idct_islow(d, scratch + planes.offset(plane) + (long long)by * 8 * stride + bx * 8, stride);
    }
}

// jdcolor.c's tables, computed: Cr_r_tab, Cb_b_tab, Cr_g_tab + Cb_g_tab (with ONE_HALF).
__device__ __forceinline__ unsigned char jpeg_clamp(int v) { return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v); }

extern "C" __global__ void jpeg_distortion_pixels(const JpegFrame* frames) {
    const JpegFrame& f = frames[blockIdx.y];
    const JpegPlanes planes(f.width, f.height);
    const unsigned char* scratch = (const unsigned char*)f.scratch;
    const unsigned char* ys = scratch;
    const unsigned char* cbs = scratch + planes.offset(1);
    const unsigned char* crs = scratch + planes.offset(2);
    const int ys_stride = planes.stride(0), cs_stride = planes.stride(1);
    const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
    const bool fancy = cw > 2;
    unsigned char* out = (unsigned char*)f.out;
    const long long pixels = (long long)f.width * f.height;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < pixels; p += step) {
        const int y = (int)(p / f.width), x = (int)(p % f.width);
        const int yv = ys[(long long)y * ys_stride + x];
        int cb, cr;
        const int i = y >> 1, j = x >> 1;
        if (fancy) {
            // The nearer chroma row i and the farther one (above for even rows, below for odd),
            // 3:1; then the nearer and farther columns the same way, with +8 / +7 before >> 4.
            const int i2 = (y & 1) ? jpeg_min(i + 1, ch - 1) : jpeg_max(i - 1, 0);
            const int j2 = (x & 1) ? jpeg_min(j + 1, cw - 1) : jpeg_max(j - 1, 0);
            const long long r0 = (long long)i * cs_stride, r1 = (long long)i2 * cs_stride;
            const int bias = (x & 1) ? 7 : 8;
            cb = ((cbs[r0 + j] * 3 + cbs[r1 + j]) * 3 + cbs[r0 + j2] * 3 + cbs[r1 + j2] + bias) >> 4;
            cr = ((crs[r0 + j] * 3 + crs[r1 + j]) * 3 + crs[r0 + j2] * 3 + crs[r1 + j2] + bias) >> 4;
        } else {
            cb = cbs[(long long)i * cs_stride + j];
            cr = crs[(long long)i * cs_stride + j];
        }
        const int dcr = cr - 128, dcb = cb - 128;
        unsigned char* o = out + p * 3;
        o[0] = jpeg_clamp(yv + ((91881 * dcr + 32768) >> 16));
        o[1] = jpeg_clamp(yv + ((-22554 * dcb + 32768 - 46802 * dcr) >> 16));
        o[2] = jpeg_clamp(yv + ((116130 * dcb + 32768) >> 16));
    }
}
