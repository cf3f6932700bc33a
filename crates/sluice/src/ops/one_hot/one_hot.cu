// fn.one_hot on the GPU (ops/one_hot/mod.rs), one launch per batch. The host plans the
// batch as the cpu backend does and casts on_value / off_value to the output type, so the
// kernel only moves output elements as bits (O: an unsigned type of the output's size).
// blockIdx.y selects the sample; threads stride over its output elements, each writing one
// (on where its class index is the input's class, off elsewhere).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct OneHotSample {
    unsigned long long in, out;
    long long numel;     // output elements: outer * classes * inner
    long long inner;     // input elements after the new axis
    long long classes;
    unsigned long long on, off;  // the values' bits, in the low bytes
};

// The class of an input value, -1 when it is none of 0..classes: integers as they are,
// floats truncated toward zero (C++'s (int)); NaN and values out of range are none (mod.rs,
// class_of).
template <typename T> __device__ __forceinline__ long long one_hot_class(T v, long long classes) {
    return (v >= (T)0 && (unsigned long long)v < (unsigned long long)classes) ? (long long)v : -1;
}
template <> __device__ __forceinline__ long long one_hot_class<float>(float v, long long classes) {
    return (v > -1.0f && (double)v < (double)classes) ? (long long)v : -1;
}
template <> __device__ __forceinline__ long long one_hot_class<double>(double v, long long classes) {
    return (v > -1.0 && v < (double)classes) ? (long long)v : -1;
}

template <typename T, typename O>
__device__ __forceinline__ void one_hot(const OneHotSample* samples) {
    const OneHotSample& s = samples[blockIdx.y];
    const T* in = (const T*)s.in;
    O* out = (O*)s.out;
    const O on = (O)s.on, off = (O)s.off;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long block = (unsigned long long)s.classes * s.inner;
    for (unsigned long long e = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; e < (unsigned long long)s.numel; e += step) {
        const unsigned long long o = e / block;
        const unsigned long long rest = e - o * block;
        const unsigned long long c = rest / s.inner;
        const unsigned long long j = rest - c * s.inner;
        out[e] = one_hot_class<T>(in[o * s.inner + j], s.classes) == (long long)c ? on : off;
    }
}

#define ONE_HOT_OUT(name, T)                                                                                 \
    extern "C" __global__ void one_hot_##name##_1(const OneHotSample* s) { one_hot<T, unsigned char>(s); }      \
    extern "C" __global__ void one_hot_##name##_2(const OneHotSample* s) { one_hot<T, unsigned short>(s); }     \
    extern "C" __global__ void one_hot_##name##_4(const OneHotSample* s) { one_hot<T, unsigned int>(s); }       \
    extern "C" __global__ void one_hot_##name##_8(const OneHotSample* s) { one_hot<T, unsigned long long>(s); }

ONE_HOT_OUT(u8, unsigned char)
ONE_HOT_OUT(i8, signed char)
ONE_HOT_OUT(u16, unsigned short)
ONE_HOT_OUT(i16, short)
ONE_HOT_OUT(u32, unsigned int)
ONE_HOT_OUT(i32, int)
ONE_HOT_OUT(u64, unsigned long long)
ONE_HOT_OUT(i64, long long)
ONE_HOT_OUT(f32, float)
ONE_HOT_OUT(f64, double)
