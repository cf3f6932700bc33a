// Philox4x32-10, the counter-based generator of rng.rs (`philox4x32_10`), for the kernels
// that draw the cpu's numbers (noise.cu, distortion.cu's jitter). Prepended to their sources.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct Block { unsigned w0, w1, w2, w3; };

__device__ __forceinline__ Block philox(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1) {
    for (int r = 0; r < 10; r++) {
        const unsigned long long p0 = 0xD2511F53ULL * (unsigned long long)c0;
        const unsigned long long p1 = 0xCD9E8D57ULL * (unsigned long long)c2;
        const unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0;
        const unsigned n1 = (unsigned)p1;
        const unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;
        const unsigned n3 = (unsigned)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    Block b;
    b.w0 = c0; b.w1 = c1; b.w2 = c2; b.w3 = c3;
    return b;
}

