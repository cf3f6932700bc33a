// cat and stack on the GPU, one launch per batch: every (output sample, used input) pair is
// a piece whose `outer` runs of `chunk` contiguous input elements land `out_stride` apart in
// the output (a strided scatter; the output's runs of all inputs tile it exactly). Only
// element bits move, so any type of that size works. blockIdx.y strides over the pieces
// (more of them than a grid row holds is fine); threads stride over a piece's elements.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct JoinPiece {
    unsigned long long in, out; // the input sample; the output sample plus the piece's offset
    long long count;            // elements of the piece: outer * chunk
    long long chunk;            // contiguous input elements per run
    long long out_stride;       // output elements between the starts of two runs
};

template <typename T>
__device__ void join(const JoinPiece* pieces, long long num_pieces) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = blockIdx.y; p < num_pieces; p += gridDim.y) {
        const JoinPiece& s = pieces[p];
        const T* in = (const T*)s.in;
        T* out = (T*)s.out;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < s.count; e += step) {
            const long long run = e / s.chunk;
            out[run * s.out_stride + (e - run * s.chunk)] = in[e];
        }
    }
}

extern "C" __global__ void join_1(const JoinPiece* p, long long n) { join<unsigned char>(p, n); }
extern "C" __global__ void join_2(const JoinPiece* p, long long n) { join<unsigned short>(p, n); }
extern "C" __global__ void join_4(const JoinPiece* p, long long n) { join<unsigned int>(p, n); }
extern "C" __global__ void join_8(const JoinPiece* p, long long n) { join<unsigned long long>(p, n); }
