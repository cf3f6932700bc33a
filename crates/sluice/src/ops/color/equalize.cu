// fn.experimental.equalize on the GPU: three launches per batch over every plane (one channel
// of one frame) of every sample: histograms (shared-memory counts, then added to the plane's
// global bins, zeroed before), the cpu's lookup table per plane (one thread each, OpenCV's
// equalizeHist rules), then the table applied. blockIdx.y strides over planes.

struct EqualizePlane {
    unsigned long long in, out;  // the plane's first element
    long long stride, count;
};

extern "C" __global__ void equalize_histogram(const EqualizePlane* planes, int num_planes, unsigned int* hist) {
    __shared__ unsigned int bins[256];
    for (int p = blockIdx.y; p < num_planes; p += gridDim.y) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
        __syncthreads();
        const EqualizePlane& pl = planes[p];
        const unsigned char* in = (const unsigned char*)pl.in;
        const long long step = (long long)gridDim.x * blockDim.x;
        for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < pl.count; k += step)
            atomicAdd(&bins[in[k * pl.stride]], 1u);
        __syncthreads();
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            if (bins[b]) atomicAdd(&hist[256LL * p + b], bins[b]);
        __syncthreads();
    }
}

// One thread per plane; the table overwrites the plane's histogram (as bytes in its words).
extern "C" __global__ void equalize_table(int num_planes, unsigned int* hist) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= num_planes) return;
    unsigned int* h = hist + 256LL * p;
    int first = 0;
    unsigned int total = 0;
    for (int b = 0; b < 256; b++) total += h[b];
    while (first < 256 && h[first] == 0) first++;
    unsigned char lut[256];
    for (int b = 0; b < 256; b++) lut[b] = 0;
    if (first < 256) {
        if (h[first] == total) {
            lut[first] = (unsigned char)first;
        } else {
            const float scale = 255.0f / (float)(total - h[first]);
            unsigned int sum = 0;
            for (int j = first + 1; j < 256; j++) {
                sum += h[j];
                float v = rintf(__fmul_rn((float)sum, scale));  // to nearest, ties to even (cvRound)
                lut[j] = (unsigned char)(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
            }
        }
    }
    for (int b = 0; b < 256; b++) h[b] = lut[b];
}

extern "C" __global__ void equalize_apply(const EqualizePlane* planes, int num_planes, const unsigned int* tables) {
    __shared__ unsigned char lut[256];
    for (int p = blockIdx.y; p < num_planes; p += gridDim.y) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) lut[b] = (unsigned char)tables[256LL * p + b];
        __syncthreads();
        const EqualizePlane& pl = planes[p];
        const unsigned char* in = (const unsigned char*)pl.in;
        unsigned char* out = (unsigned char*)pl.out;
        const long long step = (long long)gridDim.x * blockDim.x;
        for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < pl.count; k += step)
            out[k * pl.stride] = lut[in[k * pl.stride]];
        __syncthreads();
    }
}
