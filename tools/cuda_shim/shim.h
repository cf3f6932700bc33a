// Just enough of CUDA to compile the kernels with the host's C++ compiler, and to run one
// block of a kernel on the CPU: every thread of the block is a std::thread, __syncthreads()
// a barrier, __shared__ variables statics (one block at a time). For checking kernels where
// there is no GPU (CI): every .cu compiles against it (syntax, and parameter structs against
// their Rust twins: ops/gpu_params.rs), jpeg_entropy.cu runs (sluice-codecs' scan tests),
// element.cuh's conversions run. Not for speed. The intrinsics below are exact on the host
// when built with -ffp-contract=off (no fused multiply-adds), as the kernels expect.
#include <algorithm>
#include <barrier>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <math.h>
#include <thread>
#include <vector>

#define __restrict__ __restrict

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __constant__ static
#define __launch_bounds__(x)

struct Dim3 { unsigned x, y, z; };
thread_local Dim3 threadIdx, blockIdx;
static Dim3 blockDim, gridDim;
static std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
// Only the byte reversal (selector 0x0123) is used.
inline unsigned __byte_perm(unsigned x, unsigned, unsigned) { return __builtin_bswap32(x); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
// Leading zero bits of a 32-bit word (32 for 0), as the GPU intrinsic.
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
struct uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline float __double2float_rn(double v) { return (float)v; }
inline float __ll2float_rn(long long v) { return (float)v; }
inline float __ull2float_rn(unsigned long long v) { return (float)v; }
inline double __ll2double_rn(long long v) { return (double)v; }
inline double __ull2double_rn(unsigned long long v) { return (double)v; }
// Round to nearest, ties to even, saturating, NaN -> 0 (the kernels check the range first).
inline int __float2int_rn(float v) {
    if (v != v) return 0;
    const float f = nearbyintf(v);
    return f >= 2147483648.f ? INT_MAX : (f < -2147483648.f ? INT_MIN : (int)f);
}
inline int __double2int_rn(double v) {
    if (v != v) return 0;
    const double f = nearbyint(v);
    return f >= 2147483648.0 ? INT_MAX : (f < -2147483648.0 ? INT_MIN : (int)f);
}
// Round down, saturating, NaN -> 0.
inline int __float2int_rd(float v) {
    if (v != v) return 0;
    const float f = floorf(v);
    return f >= 2147483648.f ? INT_MAX : (f < -2147483648.f ? INT_MIN : (int)f);
}
