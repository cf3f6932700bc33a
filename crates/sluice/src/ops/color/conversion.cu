// fn.color_space_conversion on the GPU, one launch per batch: the cpu's per-pixel formulas
// (ops/color/conversion.rs) with the same f32 operations (no fused multiply-adds), so both
// backends give the same bits. blockIdx.y selects the sample; threads stride over pixels.
// Spaces: 0 RGB, 1 BGR, 2 GRAY, 3 YCbCr (the same for the whole launch).

struct ConversionSample {
    unsigned long long in, out;
    long long pixels;
};

__device__ __forceinline__ unsigned char sat_u8(float v) { return convert_sat<unsigned char>(v); }

__device__ __forceinline__ float dot3(float a, float b, float c, float r, float g, float bl) {
    return __fadd_rn(__fadd_rn(__fmul_rn(a, r), __fmul_rn(b, g)), __fmul_rn(c, bl));
}

extern "C" __global__ void color_space_conversion(const ConversionSample* samples, int from, int to) {
    const ConversionSample& s = samples[blockIdx.y];
    const unsigned char* in = (const unsigned char*)s.in;
    unsigned char* out = (unsigned char*)s.out;
    const int fc = from == 2 ? 1 : 3, tc = to == 2 ? 1 : 3;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < s.pixels; k += step) {
        const unsigned char* p = in + fc * k;
        unsigned char* d = out + tc * k;
        if (from == to) {
            for (int c = 0; c < fc; c++) d[c] = p[c];
            continue;
        }
        unsigned char r, g, b;  // RGB of the source pixel (for RGB, BGR, GRAY sources)
        if (from == 3) {
            const float y = (float)p[0], cb = (float)p[1], cr = (float)p[2];
            if (to == 2) { d[0] = sat_u8(__fmul_rn(255.0f / 219.0f, __fsub_rn(y, 16.0f))); continue; }
            const float ys = __fmul_rn(__fsub_rn(y, 16.0f), 255.0f / 219.0f);
            const float tb = __fsub_rn(cb, 128.0f), tr = __fsub_rn(cr, 128.0f);
            r = sat_u8(__fadd_rn(ys, __fmul_rn(1.5960267848f, tr)));
            g = sat_u8(__fsub_rn(__fsub_rn(ys, __fmul_rn(0.39176228842f, tb)), __fmul_rn(0.81296764538f, tr)));
            b = sat_u8(__fadd_rn(ys, __fmul_rn(2.0172321417f, tb)));
        } else if (from == 2) {
            r = g = b = p[0];
            if (to == 3) {
                d[0] = sat_u8(__fadd_rn(__fmul_rn((float)p[0], 219.0f / 255.0f), 16.0f));
                d[1] = 128; d[2] = 128;
                continue;
            }
        } else {
            r = from == 1 ? p[2] : p[0]; g = p[1]; b = from == 1 ? p[0] : p[2];
        }
        if (to == 2) {
            d[0] = (unsigned char)(((unsigned)r * 9798u + (unsigned)g * 19235u + (unsigned)b * 3735u + (1u << 14)) >> 15);
        } else if (to == 3) {
            const float fr = r, fg = g, fb = b;
            d[0] = sat_u8(__fadd_rn(dot3(0.25678823529f, 0.50412941176f, 0.09790588235f, fr, fg, fb), 16.0f));
            d[1] = sat_u8(__fadd_rn(dot3(-0.14822289945f, -0.29099278682f, 0.43921568627f, fr, fg, fb), 128.0f));
            d[2] = sat_u8(__fadd_rn(dot3(0.43921568627f, -0.36778831435f, (float)-0.07142737192, fr, fg, fb), 128.0f));
        } else if (to == 1) {
            d[0] = b; d[1] = g; d[2] = r;
        } else {
            d[0] = r; d[1] = g; d[2] = b;
        }
    }
}
