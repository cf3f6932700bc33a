// Separable resampling, one launch per batch: blockIdx.y selects the sample, threads stride
// over its output pixels, plane after plane (the frames of a sequence, the channels of CHW,
// each resampled alike; for volumes, slice after slice of each). Filter taps (first source
// index and normalized weights per output row, column and slice) are computed on the host
// by the same code as the cpu backend, so both backends use identical weights; each output
// pixel filters rows horizontally first, then blends them vertically, then (volumes) blends
// slices, in f32. Source indices clamp at the edges, as on the cpu.

struct Sample {
    unsigned long long in, out;
    unsigned long long fy, wy, fx, wx;  // first-index and weight tables (int32 / f32)
    unsigned long long fz, wz;          // the depth axis' tables; 0 for images
    int in_h, in_w, c, out_h, out_w, sup_y, sup_x, planes;
    int in_d, out_d, sup_z, pad;
};

template <typename I> __device__ __forceinline__ float load(const I* p) { return (float)*p; }

template <typename O> __device__ __forceinline__ O store(float v);
template <> __device__ __forceinline__ float store<float>(float v) { return v; }
template <> __device__ __forceinline__ unsigned char store<unsigned char>(float v) { return convert_sat<unsigned char>(v); }
template <> __device__ __forceinline__ short store<short>(float v) { return convert_sat<short>(v); }
template <> __device__ __forceinline__ unsigned short store<unsigned short>(float v) { return convert_sat<unsigned short>(v); }
template <> __device__ __forceinline__ int store<int>(float v) { return convert_sat<int>(v); }

// Output pixel (y, x) of one image (`in`: in_h x in_w x c): rows filtered horizontally, then
// blended vertically.
template <typename I>
__device__ __forceinline__ void filter_2d(const Sample& s, const I* in, int y, int x, float acc[4]) {
    const int* fy = (const int*)s.fy; const float* wy = (const float*)s.wy;
    const int* fx = (const int*)s.fx; const float* wx = (const float*)s.wx;
    for (int k = 0; k < 4; ++k) acc[k] = 0.f;
    for (int j = 0; j < s.sup_y; ++j) {
        int sy = fy[y] + j;
        sy = sy < 0 ? 0 : (sy >= s.in_h ? s.in_h - 1 : sy);
        const I* row = in + (long long)sy * s.in_w * s.c;
        float h[4] = {0.f, 0.f, 0.f, 0.f};
        for (int i = 0; i < s.sup_x; ++i) {
            int sx = fx[x] + i;
            sx = sx < 0 ? 0 : (sx >= s.in_w ? s.in_w - 1 : sx);
            const float w = wx[x * s.sup_x + i];
            for (int k = 0; k < s.c && k < 4; ++k) h[k] = __fadd_rn(h[k], __fmul_rn(w, load(row + sx * s.c + k)));
        }
        const float w = wy[y * s.sup_y + j];
        for (int k = 0; k < s.c && k < 4; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(w, h[k]));
    }
}

template <typename I, typename O>
__device__ void resize(const Sample* samples) {
    const Sample s = samples[blockIdx.y];
    const long long in_slice = (long long)s.in_h * s.in_w * s.c, out_slice = (long long)s.out_h * s.out_w * s.c;
    const long long in_plane = in_slice * s.in_d, out_plane = out_slice * s.out_d;
    const int* fz = (const int*)s.fz; const float* wz = (const float*)s.wz;
    const long long npix = (long long)s.out_h * s.out_w, nvox = npix * s.out_d, total = nvox * s.planes;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < total; q += (long long)gridDim.x * blockDim.x) {
        const long long plane = q / nvox, v = q - plane * nvox;
        const int z = (int)(v / npix);
        const long long p = v - z * npix;
        const I* in = (const I*)s.in + plane * in_plane;
        O* out = (O*)s.out + plane * out_plane + z * out_slice;
        const int y = (int)(p / s.out_w), x = (int)(p - (long long)y * s.out_w);
        float acc[4];
        if (!fz) {
            filter_2d<I>(s, in, y, x, acc);
        } else {
            for (int k = 0; k < 4; ++k) acc[k] = 0.f;
            for (int j = 0; j < s.sup_z; ++j) {
                int sz = fz[z] + j;
                sz = sz < 0 ? 0 : (sz >= s.in_d ? s.in_d - 1 : sz);
                float g[4];
                filter_2d<I>(s, in + sz * in_slice, y, x, g);
                const float w = wz[z * s.sup_z + j];
                for (int k = 0; k < s.c && k < 4; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(w, g[k]));
            }
        }
        for (int k = 0; k < s.c && k < 4; ++k) out[(long long)p * s.c + k] = store<O>(acc[k]);
    }
}

extern "C" __global__ void resize_u8_u8(const Sample* s) { resize<unsigned char, unsigned char>(s); }
extern "C" __global__ void resize_u8_f32(const Sample* s) { resize<unsigned char, float>(s); }
extern "C" __global__ void resize_i16_i16(const Sample* s) { resize<short, short>(s); }
extern "C" __global__ void resize_i16_f32(const Sample* s) { resize<short, float>(s); }
extern "C" __global__ void resize_u16_u16(const Sample* s) { resize<unsigned short, unsigned short>(s); }
extern "C" __global__ void resize_u16_f32(const Sample* s) { resize<unsigned short, float>(s); }
extern "C" __global__ void resize_i32_i32(const Sample* s) { resize<int, int>(s); }
extern "C" __global__ void resize_i32_f32(const Sample* s) { resize<int, float>(s); }
extern "C" __global__ void resize_f32_f32(const Sample* s) { resize<float, float>(s); }
