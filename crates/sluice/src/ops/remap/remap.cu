// fn.experimental.remap on the GPU (ops/remap/mod.rs), one launch per batch: blockIdx.y
// selects the sample, threads stride over its output pixels (all frames). Each pixel samples
// the input at (mapx + shift, mapy + shift) with OpenCV's arithmetic (cv_sampler.cuh,
// prepended; the cpu backend's ops/warp/cv.rs); columns from `vec_end` on are OpenCV's
// scalar tail, the others its vector steps of 16 points. Border: constant 0.

struct RemapSample {
    unsigned long long src, dst, mapx, mapy;
    long long map_frame;   // map elements between frames: h * w, or 0 (one map for all)
    int h, w, c, frames;
    int linear;            // 0 nearest, 1 linear
    int vec_end;           // first column of a row's scalar tail
    float shift;           // added to every map value (-0.5: corner origin)
    int fresh;             // 1: OpenCV's new kernels; 0: the old path (linear in 1/32 pixel steps)
};

template <typename T>
__device__ void remap_kernel(const RemapSample* samples) {
    const RemapSample& s = samples[blockIdx.y];
    const long long points = (long long)s.h * s.w;
    const long long npix = points * s.frames;
    const float zero_fill[4] = {0.f, 0.f, 0.f, 0.f};
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < npix; p += (long long)gridDim.x * blockDim.x) {
        const long long f = p / points, q = p - f * points;
        const int x = (int)(q % s.w);
        CvImage<T> img = {(const T*)s.src + f * points * s.c, s.h, s.w, s.c, CV_BORDER_CONSTANT, zero_fill};
        const float* mx = (const float*)s.mapx + f * s.map_frame + (q - x);  // this row of the maps
        const float* my = (const float*)s.mapy + f * s.map_frame + (q - x);
        const float sx = __fadd_rn(mx[x], s.shift), sy = __fadd_rn(my[x], s.shift);
        T* out = (T*)s.dst + p * s.c;
        if (!s.linear) {
            img.nearest(out, sx, sy);
            continue;
        }
        if (!s.fresh) {
            const int fx = cv_round(__fmul_rn(sx, 32.f)), fy = cv_round(__fmul_rn(sy, 32.f));
            img.linear_fixed(out, min(max(fx >> 5, -32768), 32767), min(max(fy >> 5, -32768), 32767), fx & 31, fy & 31, false);
            continue;
        }
        // The fill value stands directly for a point whose taps all lie outside in the tail,
        // or where its whole vector step of 16 points does (cv.rs fills_directly).
        bool fill_directly = x >= s.vec_end || (sx - sx == 0.f && sy - sy == 0.f);
        if (!fill_directly) {
            fill_directly = true;
            const int step = x / 16 * 16;
            for (int k = step; k < step + 16 && fill_directly; ++k)
                fill_directly = img.outside(__fadd_rn(mx[k], s.shift), __fadd_rn(my[k], s.shift));
        }
        img.linear(out, sx, sy, fill_directly);
    }
}

extern "C" __global__ void remap_u8(const RemapSample* s) { remap_kernel<unsigned char>(s); }
extern "C" __global__ void remap_u16(const RemapSample* s) { remap_kernel<unsigned short>(s); }
extern "C" __global__ void remap_i16(const RemapSample* s) { remap_kernel<short>(s); }
extern "C" __global__ void remap_f32(const RemapSample* s) { remap_kernel<float>(s); }
