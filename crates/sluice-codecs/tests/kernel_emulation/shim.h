// Just enough of CUDA to run one block of a kernel on the CPU: every thread of the block is
// a std::thread, __syncthreads() a barrier, __shared__ variables statics (one block at a
// time). For checking a kernel's logic where there is no GPU; not for speed.
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __constant__ static
#define __launch_bounds__(x)

struct Dim3 { unsigned x, y, z; };
thread_local Dim3 threadIdx, blockIdx;
static Dim3 blockDim;
static std::barrier<>* block_barrier;
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
// Only the byte reversal (selector 0x0123) is used.
inline unsigned __byte_perm(unsigned x, unsigned, unsigned) { return __builtin_bswap32(x); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
