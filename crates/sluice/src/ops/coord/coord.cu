// fn.coord_transform and fn.coord_flip on the GPU (ops/coord/mod.rs), one launch per batch.
// The host plans every sample as the cpu backend does (the matrix and translation, or which
// coordinates flip about which mirror), so the kernels only repeat the cpu's f32 operations
// one by one (__fmul_rn, __fadd_rn, __fsub_rn: NVRTC would otherwise fuse them into
// multiply-adds, which the cpu, like DALI's cpu operator, does not).
// blockIdx.y selects the sample; threads stride over its points (coord_transform) or its
// values (coord_flip).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct CoordTransformSample {
    unsigned long long in, out;
    long long points;
    int n, m;            // components in, out (1 to 6)
    float mat[6][6];     // m x n, row r at mat[r]
    float t[6];
};

// The output element: FLOAT as computed; integers by DALI's ConvertSat (element.cuh), with
// INT32 from NaN the x86 minimum, as the cpu's element.rs `store` writes it.
template <typename Out> __device__ __forceinline__ Out coord_out(float v) { return convert_sat<Out>(v); }
template <> __device__ __forceinline__ float coord_out<float>(float v) { return v; }
template <> __device__ __forceinline__ int coord_out<int>(float v) { return v != v ? (int)0x80000000u : convert_sat<int>(v); }

template <typename In, typename Out>
__device__ __forceinline__ void coord_transform(const CoordTransformSample* samples) {
    const CoordTransformSample& s = samples[blockIdx.y];
    const In* in = (const In*)s.in;
    Out* out = (Out*)s.out;
    const int n = s.n, m = s.m;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < s.points; p += step) {
        float v[6];
        for (int j = 0; j < n; j++) v[j] = (float)in[p * n + j];
        for (int r = 0; r < m; r++) {
            float acc = __fmul_rn(s.mat[r][0], v[0]);
            for (int j = 1; j < n; j++) acc = __fadd_rn(acc, __fmul_rn(s.mat[r][j], v[j]));
            out[p * m + r] = coord_out<Out>(__fadd_rn(acc, s.t[r]));
        }
    }
}

#define COORD_TRANSFORM(name, In, Out) \
    extern "C" __global__ void coord_transform_##name(const CoordTransformSample* s) { coord_transform<In, Out>(s); }
COORD_TRANSFORM(u8_f32, unsigned char, float)
COORD_TRANSFORM(u8_u8, unsigned char, unsigned char)
COORD_TRANSFORM(i16_f32, short, float)
COORD_TRANSFORM(i16_i16, short, short)
COORD_TRANSFORM(u16_f32, unsigned short, float)
COORD_TRANSFORM(u16_u16, unsigned short, unsigned short)
COORD_TRANSFORM(i32_f32, int, float)
COORD_TRANSFORM(i32_i32, int, int)
COORD_TRANSFORM(f32_f32, float, float)

struct CoordFlipSample {
    unsigned long long in, out;
    long long values;    // points * ndim
    int ndim;
    int flip;            // bit d: coordinate d flips
    float mirror[3];     // 2 * center per coordinate
    int pad;
};

extern "C" __global__ void coord_flip(const CoordFlipSample* samples) {
    const CoordFlipSample& s = samples[blockIdx.y];
    const float* in = (const float*)s.in;
    float* out = (float*)s.out;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < s.values; k += step) {
        const int d = (int)(k % s.ndim);
        out[k] = (s.flip >> d) & 1 ? __fsub_rn(s.mirror[d], in[k]) : in[k];
    }
}
