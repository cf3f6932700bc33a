// fn.multi_paste on the GPU (ops/multi_paste/mod.rs), one launch per batch. The host plans
// every output sample as the cpu backend does (checks, per-sample arguments, regions in
// absolute coordinates, all inside their source and canvas), so the kernel only moves and
// converts elements. Each thread computes whole output elements: the last region (in paste
// order) covering the element gives its value, none gives 0. That is what the cpu's "zero,
// then paste in order" leaves, without ordering writes between threads, zeroing first or a
// launch per region.
// blockIdx.y selects the output sample; threads stride over its elements (frames included).
// element.cuh (prepended by gpu.rs) gives the conversions.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

struct MultiPasteSample {
    unsigned long long out;
    unsigned long long regions;  // device address of the sample's first MultiPasteRegion
    long long numel;             // frames * height * width * channels
    long long height, width, channels;
    int nregions;
    int small;                   // 1: this sample and its sources index below 2^31
};

struct MultiPasteRegion {
    unsigned long long in;       // the source sample (its first frame)
    long long src_height, src_width;
    long long in_y, in_x;
    long long out_y, out_x;
    long long height, width;
};

// ConvertSat as the cpu's `convert` (mod.rs): through float with DALI's rounding and
// saturation; the same type is moved as it is; FLOAT NaN to INT32 is INT32's minimum, as
// x86's conversion gives DALI's cpu (element.cuh's convert_sat gives 0 there).
template <typename I, typename O>
struct MultiPasteConvert {
    static __device__ __forceinline__ O apply(I v) { return channel_from_float<O>(channel_to_float<I>(v)); }
};
template <typename T>
struct MultiPasteConvert<T, T> {
    static __device__ __forceinline__ T apply(T v) { return v; }
};
template <>
struct MultiPasteConvert<float, int> {
    static __device__ __forceinline__ int apply(float v) { return v != v ? -2147483647 - 1 : convert_sat<int>(v); }
};

// N: the index type. 32-bit division is several times faster than 64-bit on the GPU; the
// host sets `small` when every index of the sample and its sources fits.
template <typename I, typename O, typename N>
__device__ __forceinline__ void multi_paste_elements(const MultiPasteSample& s) {
    O* out = (O*)s.out;
    const MultiPasteRegion* regions = (const MultiPasteRegion*)s.regions;
    const N n = (N)s.numel, c = (N)s.channels, w = (N)s.width, h = (N)s.height;
    const N step = (N)gridDim.x * (N)blockDim.x;
    for (N e = (N)blockIdx.x * (N)blockDim.x + (N)threadIdx.x; e < n; e += step) {
        const N pixel = e / c;
        const N ch = e - pixel * c;
        const N row = pixel / w;
        const N x = pixel - row * w;
        const N f = row / h;
        const N y = row - f * h;
        O v = (O)0;
        for (int j = s.nregions - 1; j >= 0; j--) {
            const MultiPasteRegion& r = regions[j];
            const long long ry = (long long)y - r.out_y, rx = (long long)x - r.out_x;
            if (ry >= 0 && ry < r.height && rx >= 0 && rx < r.width) {
                const N sy = (N)(ry + r.in_y), sx = (N)(rx + r.in_x);
                const N src = ((f * (N)r.src_height + sy) * (N)r.src_width + sx) * c + ch;
                v = MultiPasteConvert<I, O>::apply(((const I*)r.in)[src]);
                break;
            }
        }
        out[e] = v;
    }
}

template <typename I, typename O>
__device__ __forceinline__ void multi_paste(const MultiPasteSample* samples) {
    const MultiPasteSample& s = samples[blockIdx.y];
    if (s.small) {
        multi_paste_elements<I, O, unsigned>(s);
    } else {
        multi_paste_elements<I, O, unsigned long long>(s);
    }
}

// One kernel per (input, output) type pair: multi_paste_<in>_<out> (channel::short_name).
#define MULTI_PASTE_KERNEL(I, O, NAME) \
    extern "C" __global__ void NAME(const MultiPasteSample* s) { multi_paste<I, O>(s); }
MULTI_PASTE_KERNEL(unsigned char, unsigned char, multi_paste_u8_u8)
MULTI_PASTE_KERNEL(unsigned char, short, multi_paste_u8_i16)
MULTI_PASTE_KERNEL(unsigned char, int, multi_paste_u8_i32)
MULTI_PASTE_KERNEL(unsigned char, float, multi_paste_u8_f32)
MULTI_PASTE_KERNEL(short, unsigned char, multi_paste_i16_u8)
MULTI_PASTE_KERNEL(short, short, multi_paste_i16_i16)
MULTI_PASTE_KERNEL(short, int, multi_paste_i16_i32)
MULTI_PASTE_KERNEL(short, float, multi_paste_i16_f32)
MULTI_PASTE_KERNEL(int, unsigned char, multi_paste_i32_u8)
MULTI_PASTE_KERNEL(int, short, multi_paste_i32_i16)
MULTI_PASTE_KERNEL(int, int, multi_paste_i32_i32)
MULTI_PASTE_KERNEL(int, float, multi_paste_i32_f32)
MULTI_PASTE_KERNEL(float, unsigned char, multi_paste_f32_u8)
MULTI_PASTE_KERNEL(float, short, multi_paste_f32_i16)
MULTI_PASTE_KERNEL(float, int, multi_paste_f32_i32)
MULTI_PASTE_KERNEL(float, float, multi_paste_f32_f32)
