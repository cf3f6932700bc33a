// The warps (fn.warp_affine, fn.rotate), one launch per batch: blockIdx.y selects the
// sample, threads stride over its output pixels (all frames of a sequence); `warp_*` for
// images, `warp3_*` for volumes. The arithmetic repeats the cpu kernels' (kernel.rs, itself
// DALI's WarpCPU) operation for operation in f32 with explicit rounding intrinsics (no
// contracted multiply-adds), including the row start, the re-anchoring every 256 pixels and
// the per-pixel increments, so both backends give the same bits.
//
// The map is the descriptor's `m`, or, with `from_input`, the sample's matrix in GPU memory
// (fn.warp_affine's second input on the GPU), inverted here as the cpu inverts it when
// `invert` is set (inverse_map=False). A singular matrix there maps every point outside the
// source: the output is the fill value (0 when the border repeats), since a kernel cannot
// raise; the cpu refuses it.

struct Sample {
    unsigned long long src, dst;
    unsigned long long mat;  // this sample's matrix (2x3 or 3x4 f32, row-major) when from_input
    float m[12];             // the map, output point -> source point: 2x3 or 3x4, row-major
    int in_d, in_h, in_w, c, out_d, out_h, out_w, frames;
    int linear, clamp;       // interpolation (0 nearest, 1 linear); repeat the border or fill
    int from_input, invert;  // the map comes from `mat`; invert it first
    float fill;              // fill_value
    int seg;                 // 3-D: output voxels a thread computes along a row (see warp3d)
};

#define TILE 256

__device__ __forceinline__ int floor_i32(float v) { return __float2int_rd(v); }  // saturates, NaN -> 0

// The cpu kernel's stores: ConvertSat (element.cuh, prepended) to integers, plain to float.
template <typename T> struct Sat {
    static __device__ __forceinline__ T f32(float v) { return convert_sat<T>(v); }
    static __device__ __forceinline__ T f64(double v) { return convert_sat<T>(v); }
};
template <> struct Sat<float> {
    static __device__ __forceinline__ float f32(float v) { return v; }
    static __device__ __forceinline__ float f64(double v) { return (float)v; }
};

// The cpu's `convert`: the value itself between equal types, else ConvertSat through f64.
template <typename I, typename O> struct Convert {
    static __device__ __forceinline__ O go(I v) { return Sat<O>::f64((double)v); }
};
template <typename T> struct Convert<T, T> {
    static __device__ __forceinline__ T go(T v) { return v; }
};

// The cpu's `invert` (warp/mod.rs) of a 2x3 map in place; false when it is singular.
__device__ bool invert2(float* m) {
    const float a = m[0], b = m[1], tx = m[2], c = m[3], d = m[4], ty = m[5];
    const float det = __fsub_rn(__fmul_rn(a, d), __fmul_rn(b, c));
    if (det == 0.f) return false;
    const float i00 = __fdiv_rn(d, det), i01 = __fdiv_rn(-b, det), i10 = __fdiv_rn(-c, det), i11 = __fdiv_rn(a, det);
    m[0] = i00; m[1] = i01; m[2] = __fadd_rn(__fmul_rn(-i00, tx), __fmul_rn(-i01, ty));
    m[3] = i10; m[4] = i11; m[5] = __fadd_rn(__fmul_rn(-i10, tx), __fmul_rn(-i11, ty));
    return true;
}

// The cpu's `invert` of a 3x4 map in place (`gauss_jordan_inverse3`: partial pivoting, each
// elimination step a fused multiply-add); false when it is singular.
__device__ bool invert3(float* m) {
    float a[3][3], b[3][3];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) { a[i][j] = m[i * 4 + j]; b[i][j] = i == j ? 1.f : 0.f; }
    for (int v = 0; v < 3; ++v) {
        int pivot = v;
        for (int r = v + 1; r < 3; ++r)
            if (fabsf(a[r][v]) > fabsf(a[pivot][v])) pivot = r;
        if (a[pivot][v] == 0.f) return false;
        for (int j = 0; j < 3; ++j) {
            float t = a[v][j]; a[v][j] = a[pivot][j]; a[pivot][j] = t;
            t = b[v][j]; b[v][j] = b[pivot][j]; b[pivot][j] = t;
        }
        const float x = __fdiv_rn(1.f, a[v][v]);
        a[v][v] = 1.f;
        for (int j = v + 1; j < 3; ++j) a[v][j] = __fmul_rn(a[v][j], x);
        for (int j = 0; j < 3; ++j) b[v][j] = __fmul_rn(b[v][j], x);
        for (int i = 0; i < 3; ++i) {
            if (i == v) continue;
            const float c = -a[i][v];
            a[i][v] = 0.f;
            for (int j = v + 1; j < 3; ++j) a[i][j] = __fmaf_rn(c, a[v][j], a[i][j]);
            for (int j = 0; j < 3; ++j) b[i][j] = __fmaf_rn(c, b[v][j], b[i][j]);
        }
    }
    const float t[3] = {m[3], m[7], m[11]};
    for (int i = 0; i < 3; ++i) {
        m[i * 4 + 0] = b[i][0]; m[i * 4 + 1] = b[i][1]; m[i * 4 + 2] = b[i][2];
        m[i * 4 + 3] = __fadd_rn(__fadd_rn(__fmul_rn(-b[i][0], t[0]), __fmul_rn(-b[i][1], t[1])), __fmul_rn(-b[i][2], t[2]));
    }
    return true;
}

// The sample's map (`n` = 6 or 12 values) into `m`; false when an inverted matrix input is
// singular.
__device__ bool load_map(const Sample& s, float* m, int n) {
    const float* from = s.from_input ? (const float*)s.mat : s.m;
    for (int k = 0; k < n; ++k) m[k] = from[k];
    if (!s.from_input || !s.invert) return true;
    return n == 6 ? invert2(m) : invert3(m);
}

// Every output value of a sample whose map is singular: the fill value.
template <typename O>
__device__ void fill_sample(const Sample& s, long long values) {
    O* dst = (O*)s.dst;
    const O v = Sat<O>::f32(s.fill);
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < values; p += (long long)gridDim.x * blockDim.x) dst[p] = v;
}

template <typename I, typename O>
__device__ void warp2d(const Sample* samples) {
    const Sample s = samples[blockIdx.y];
    const I* src = (const I*)s.src;
    O* dst = (O*)s.dst;
    const int c = s.c;
    float m[6];
    if (!load_map(s, m, 6)) {
        fill_sample<O>(s, (long long)s.frames * s.out_h * s.out_w * c);
        return;
    }
    const long long in_frame = (long long)s.in_h * s.in_w * c, out_frame = (long long)s.out_h * s.out_w * c;
    const long long npix = (long long)s.frames * s.out_h * s.out_w;
    const float dx = m[0], dy = m[3];
    const float dx_tile = __fmul_rn((float)TILE, dx), dy_tile = __fmul_rn((float)TILE, dy);
    const O fill_out = Sat<O>::f32(s.fill);
    const I fill_in = Convert<O, I>::go(fill_out);
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < npix; p += (long long)gridDim.x * blockDim.x) {
        const long long per_frame = (long long)s.out_h * s.out_w;
        const int f = (int)(p / per_frame);
        const long long q = p - f * per_frame;
        const int y = (int)(q / s.out_w), x = (int)(q - (long long)y * s.out_w);
        const I* in = src + f * in_frame;
        O* out = dst + f * out_frame + q * c;
        // Row start, then whole tiles, then pixels, as the cpu accumulates them.
        const float fy = __fadd_rn((float)y, 0.5f);
        float tx = __fadd_rn(__fadd_rn(m[2], __fmul_rn(m[0], 0.5f)), __fmul_rn(m[1], fy));
        float ty = __fadd_rn(__fadd_rn(m[5], __fmul_rn(m[3], 0.5f)), __fmul_rn(m[4], fy));
        for (int t = 0; t < x / TILE; ++t) { tx = __fadd_rn(tx, dx_tile); ty = __fadd_rn(ty, dy_tile); }
        float sx = tx, sy = ty;
        for (int k = 0; k < x % TILE; ++k) { sx = __fadd_rn(sx, dx); sy = __fadd_rn(sy, dy); }
        const unsigned w = s.in_w, h = s.in_h;
        if (!s.linear) {
            int ix = floor_i32(sx), iy = floor_i32(sy);
            if (((unsigned)ix < w && (unsigned)iy < h) || s.clamp) {
                ix = min(max(ix, 0), s.in_w - 1); iy = min(max(iy, 0), s.in_h - 1);
                const I* px = in + ((long long)iy * s.in_w + ix) * c;
                for (int k = 0; k < c; ++k) out[k] = Convert<I, O>::go(px[k]);
            } else {
                for (int k = 0; k < c; ++k) out[k] = fill_out;
            }
            continue;
        }
        const float fx = __fsub_rn(sx, 0.5f), fyy = __fsub_rn(sy, 0.5f);
        const int x0 = floor_i32(fx), y0 = floor_i32(fyy);
        const float qx = __fsub_rn(fx, (float)x0), px_ = __fsub_rn(1.f, qx), qy = __fsub_rn(fyy, (float)y0);
        const int x1 = x0 == 2147483647 ? x0 : x0 + 1, y1 = y0 == 2147483647 ? y0 : y0 + 1;
        const bool all_in = x0 >= 0 && y0 >= 0 && x1 < s.in_w && y1 < s.in_h;
        for (int k = 0; k < c; ++k) {
            I v00, v01, v10, v11;
            if (all_in || s.clamp) {
                const int cx0 = min(max(x0, 0), s.in_w - 1), cx1 = min(max(x1, 0), s.in_w - 1);
                const int cy0 = min(max(y0, 0), s.in_h - 1), cy1 = min(max(y1, 0), s.in_h - 1);
                v00 = in[((long long)cy0 * s.in_w + cx0) * c + k]; v01 = in[((long long)cy0 * s.in_w + cx1) * c + k];
                v10 = in[((long long)cy1 * s.in_w + cx0) * c + k]; v11 = in[((long long)cy1 * s.in_w + cx1) * c + k];
            } else {
                const bool i00 = (unsigned)x0 < w && (unsigned)y0 < h, i01 = (unsigned)x1 < w && (unsigned)y0 < h;
                const bool i10 = (unsigned)x0 < w && (unsigned)y1 < h, i11 = (unsigned)x1 < w && (unsigned)y1 < h;
                v00 = i00 ? in[((long long)y0 * s.in_w + x0) * c + k] : fill_in; v01 = i01 ? in[((long long)y0 * s.in_w + x1) * c + k] : fill_in;
                v10 = i10 ? in[((long long)y1 * s.in_w + x0) * c + k] : fill_in; v11 = i11 ? in[((long long)y1 * s.in_w + x1) * c + k] : fill_in;
            }
            const float s0 = __fadd_rn(__fmul_rn((float)v00, px_), __fmul_rn((float)v01, qx));
            const float s1 = __fadd_rn(__fmul_rn((float)v10, px_), __fmul_rn((float)v11, qx));
            out[k] = Sat<O>::f32(__fadd_rn(s0, __fmul_rn(__fsub_rn(s1, s0), qy)));
        }
    }
}

// A volume's voxel (x, y, z), channel k: inside, else the nearest border voxel (`clamp`), else
// `fill`: the cpu's `Volume::tap`.
template <typename I>
__device__ __forceinline__ I tap3(const I* in, const Sample& s, int x, int y, int z, int k, bool clamp, I fill) {
    const bool inside = (unsigned)x < (unsigned)s.in_w && (unsigned)y < (unsigned)s.in_h && (unsigned)z < (unsigned)s.in_d;
    if (!inside) {
        if (!clamp) return fill;
        x = min(max(x, 0), s.in_w - 1); y = min(max(y, 0), s.in_h - 1); z = min(max(z, 0), s.in_d - 1);
    }
    return in[(((long long)z * s.in_h + y) * s.in_w + x) * s.c + k];
}

// The cpu's `Volume::linear` blend of a voxel's 8 taps (`taps[z*4 + y*2 + x]`, 0 the lower
// coordinate): along x with weights (px_, qx), along y with (py, qy), then z's step by qz.
__device__ __forceinline__ float trilinear(const float* taps, float px_, float qx, float py, float qy, float qz) {
    float s[4];
    for (int i = 0; i < 4; ++i) s[i] = __fadd_rn(__fmul_rn(taps[2 * i], px_), __fmul_rn(taps[2 * i + 1], qx));
    const float s0 = __fadd_rn(__fmul_rn(s[0], py), __fmul_rn(s[1], qy));
    const float s1 = __fadd_rn(__fmul_rn(s[2], py), __fmul_rn(s[3], qy));
    return __fadd_rn(s0, __fmul_rn(__fsub_rn(s1, s0), qz));
}

// One output voxel at source point `sv`: the cpu's `Volume::nearest` / `Volume::linear`.
template <typename I, typename O>
__device__ __forceinline__ void voxel(const I* in, const Sample& s, const float* sv, O* out, bool clamp, O fill_out, I fill_in) {
    const int c = s.c;
    if (!s.linear) {
        const int ix = floor_i32(sv[0]), iy = floor_i32(sv[1]), iz = floor_i32(sv[2]);
        const bool inside = (unsigned)ix < (unsigned)s.in_w && (unsigned)iy < (unsigned)s.in_h && (unsigned)iz < (unsigned)s.in_d;
        if (!clamp && !inside) {
            for (int k = 0; k < c; ++k) out[k] = fill_out;
        } else {
            for (int k = 0; k < c; ++k) out[k] = Convert<I, O>::go(tap3<I>(in, s, ix, iy, iz, k, true, I(0)));
        }
        return;
    }
    const float fx = __fsub_rn(sv[0], 0.5f), fyy = __fsub_rn(sv[1], 0.5f), fzz = __fsub_rn(sv[2], 0.5f);
    const int x0 = floor_i32(fx), y0 = floor_i32(fyy), z0 = floor_i32(fzz);
    const float qx = __fsub_rn(fx, (float)x0), qy = __fsub_rn(fyy, (float)y0), qz = __fsub_rn(fzz, (float)z0);
    const float px_ = __fsub_rn(1.f, qx), py = __fsub_rn(1.f, qy);
    const int x1 = x0 == 2147483647 ? x0 : x0 + 1, y1 = y0 == 2147483647 ? y0 : y0 + 1, z1 = z0 == 2147483647 ? z0 : z0 + 1;
    if (clamp || (x0 >= 0 && y0 >= 0 && z0 >= 0 && x1 < s.in_w && y1 < s.in_h && z1 < s.in_d)) {
        // Inside, or the border repeats: each tap is the voxel at its clamped coordinates
        // (the border rule of `tap3`), found once for every channel.
        const long long c0 = min(max(x0, 0), s.in_w - 1) * c, c1 = min(max(x1, 0), s.in_w - 1) * c;
        const long long row = (long long)s.in_w * c;
        const long long r0 = min(max(y0, 0), s.in_h - 1) * row, r1 = min(max(y1, 0), s.in_h - 1) * row;
        const long long p0 = min(max(z0, 0), s.in_d - 1) * row * s.in_h, p1 = min(max(z1, 0), s.in_d - 1) * row * s.in_h;
        for (int k = 0; k < c; ++k) {
            const I* v = in + k;
            const float taps[8] = {(float)v[p0 + r0 + c0], (float)v[p0 + r0 + c1], (float)v[p0 + r1 + c0], (float)v[p0 + r1 + c1],
                                   (float)v[p1 + r0 + c0], (float)v[p1 + r0 + c1], (float)v[p1 + r1 + c0], (float)v[p1 + r1 + c1]};
            out[k] = Sat<O>::f32(trilinear(taps, px_, qx, py, qy, qz));
        }
        return;
    }
    for (int k = 0; k < c; ++k) {
#define T3(X, Y, Z) ((float)tap3<I>(in, s, X, Y, Z, k, clamp, fill_in))
        const float taps[8] = {T3(x0, y0, z0), T3(x1, y0, z0), T3(x0, y1, z0), T3(x1, y1, z0),
                               T3(x0, y0, z1), T3(x1, y0, z1), T3(x0, y1, z1), T3(x1, y1, z1)};
#undef T3
        out[k] = Sat<O>::f32(trilinear(taps, px_, qx, py, qy, qz));
    }
}

// The 3-D warp: the cpu's `warp_affine_3d`, a thread per run of `s.seg` voxels of a row,
// computed one after the other: the source point of the first is reached by the cpu's
// sequence of additions (a tile step per 256 voxels, then a step per voxel), and each next
// one by one more step, so that catch-up is paid once per run.
template <typename I, typename O>
__device__ void warp3d(const Sample* samples) {
    const Sample s = samples[blockIdx.y];
    const I* src = (const I*)s.src;
    O* dst = (O*)s.dst;
    const int c = s.c;
    float m[12];
    if (!load_map(s, m, 12)) {
        fill_sample<O>(s, (long long)s.frames * s.out_d * s.out_h * s.out_w * c);
        return;
    }
    const long long in_frame = (long long)s.in_d * s.in_h * s.in_w * c;
    const long long rows_per_frame = (long long)s.out_d * s.out_h;
    const int seg = s.seg, segs = (s.out_w + seg - 1) / seg;
    const long long items = (long long)s.frames * rows_per_frame * segs;
    const float d[3] = {m[0], m[4], m[8]};
    const float d_tile[3] = {__fmul_rn((float)TILE, d[0]), __fmul_rn((float)TILE, d[1]), __fmul_rn((float)TILE, d[2])};
    const O fill_out = Sat<O>::f32(s.fill);
    const I fill_in = Convert<O, I>::go(fill_out);
    const bool clamp = s.clamp;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < items; p += (long long)gridDim.x * blockDim.x) {
        const long long row = p / segs;  // over every frame's rows
        const int x0 = (int)(p - row * segs) * seg;
        const int f = (int)(row / rows_per_frame);
        const long long zy = row - f * rows_per_frame;
        const int z = (int)(zy / s.out_h), y = (int)(zy - (long long)z * s.out_h);
        const I* in = src + f * in_frame;
        O* out = dst + (row * s.out_w + x0) * c;
        const float fy = __fadd_rn((float)y, 0.5f), fz = __fadd_rn((float)z, 0.5f);
        float t[3], sv[3];
        for (int i = 0; i < 3; ++i) {
            t[i] = __fadd_rn(__fadd_rn(__fadd_rn(m[i * 4 + 3], __fmul_rn(m[i * 4], 0.5f)), __fmul_rn(m[i * 4 + 1], fy)), __fmul_rn(m[i * 4 + 2], fz));
            for (int k = 0; k < x0 / TILE; ++k) t[i] = __fadd_rn(t[i], d_tile[i]);
            sv[i] = t[i];
            for (int k = 0; k < x0 % TILE; ++k) sv[i] = __fadd_rn(sv[i], d[i]);
        }
        const int x_end = min(x0 + seg, s.out_w);
        for (int x = x0; x < x_end; ++x, out += c) {
            voxel<I, O>(in, s, sv, out, clamp, fill_out, fill_in);
            if ((x + 1) % TILE == 0) {
                for (int i = 0; i < 3; ++i) { t[i] = __fadd_rn(t[i], d_tile[i]); sv[i] = t[i]; }
            } else {
                for (int i = 0; i < 3; ++i) sv[i] = __fadd_rn(sv[i], d[i]);
            }
        }
    }
}

extern "C" __global__ void warp_u8_u8(const Sample* s) { warp2d<unsigned char, unsigned char>(s); }
extern "C" __global__ void warp_u8_f32(const Sample* s) { warp2d<unsigned char, float>(s); }
extern "C" __global__ void warp_i16_i16(const Sample* s) { warp2d<short, short>(s); }
extern "C" __global__ void warp_i16_f32(const Sample* s) { warp2d<short, float>(s); }
extern "C" __global__ void warp_i32_i32(const Sample* s) { warp2d<int, int>(s); }
extern "C" __global__ void warp_i32_f32(const Sample* s) { warp2d<int, float>(s); }
extern "C" __global__ void warp_f32_f32(const Sample* s) { warp2d<float, float>(s); }
extern "C" __global__ void warp_f32_u8(const Sample* s) { warp2d<float, unsigned char>(s); }
extern "C" __global__ void warp_f32_i16(const Sample* s) { warp2d<float, short>(s); }
extern "C" __global__ void warp_f32_i32(const Sample* s) { warp2d<float, int>(s); }
extern "C" __global__ void warp3_u8_u8(const Sample* s) { warp3d<unsigned char, unsigned char>(s); }
extern "C" __global__ void warp3_u8_f32(const Sample* s) { warp3d<unsigned char, float>(s); }
extern "C" __global__ void warp3_i16_i16(const Sample* s) { warp3d<short, short>(s); }
extern "C" __global__ void warp3_i16_f32(const Sample* s) { warp3d<short, float>(s); }
extern "C" __global__ void warp3_i32_i32(const Sample* s) { warp3d<int, int>(s); }
extern "C" __global__ void warp3_i32_f32(const Sample* s) { warp3d<int, float>(s); }
extern "C" __global__ void warp3_f32_f32(const Sample* s) { warp3d<float, float>(s); }
extern "C" __global__ void warp3_f32_u8(const Sample* s) { warp3d<float, unsigned char>(s); }
extern "C" __global__ void warp3_f32_i16(const Sample* s) { warp3d<float, short>(s); }
extern "C" __global__ void warp3_f32_i32(const Sample* s) { warp3d<float, int>(s); }
