// fn.box_encoder on the GPU (ops/bbox/box_encoder.rs), one launch per batch: a block per
// sample (blockIdx.y; gridDim.x is 1), its threads striding over the anchors. The matching
// follows the cpu backend's order, so both find the same boxes:
// 1. each box's best anchor (the last among equals): every thread scans its anchors, then a
//    tree reduction in shared memory; thread 0 records it;
// 2. each anchor's best box: the last box whose best anchor it is, else the best IoU above
//    `criteria` (the last among equals).
// Every f32 operation is the cpu's, rounded on its own (`_rn`: no fused multiply-adds), so
// the bits agree, except logf (offset=True): CUDA's is within 1 ulp, the cpu's libm within
// 1 ulp, of the true logarithm.
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

// The launch's block size (box_encoder_gpu.rs); the reduction needs a power of two.
#define BOX_ENCODER_THREADS 256

struct BoxEncoderSample {
    unsigned long long boxes;       // float[num_boxes][4], ltrb
    unsigned long long labels;      // int[num_boxes]
    unsigned long long anchors;     // float[num_anchors][4], ltrb (the operator's, kept on the device)
    unsigned long long out_boxes;   // float[num_anchors][4]
    unsigned long long out_labels;  // int[num_anchors]
    long long num_boxes;            // < 2^31 (checked on the host): box indices are ints
    long long num_anchors;
    float means[4];
    float stds[4];
    float criteria;
    float scale;
    int offset;                     // non-zero: normalised offsets instead of centre-size rows
    int pad;
};

__device__ __forceinline__ float box_encoder_volume(const float* b) {
    return __fmul_rn(__fsub_rn(b[2], b[0]), __fsub_rn(b[3], b[1]));
}

// The cpu's `Corners::iou` of box `b` and anchor `a`: within [0, 1], or NaN. fmaxf and
// fminf take the number over a NaN, as Rust's f32::max and min.
__device__ float box_encoder_iou(const float* b, const float* a) {
    const float l = fmaxf(b[0], a[0]), t = fmaxf(b[1], a[1]);
    const float r = fminf(b[2], a[2]), btm = fminf(b[3], a[3]);
    if (!(r > l && btm > t)) return 0.0f;
    const float inter = __fmul_rn(__fsub_rn(r, l), __fsub_rn(btm, t));
    if (inter == 0.0f) return 0.0f;
    return __fdiv_rn(inter, __fsub_rn(__fadd_rn(box_encoder_volume(b), box_encoder_volume(a)), inter));
}

// Centre and size of an ltrb box, as the cpu's `centroid` and `extent`.
__device__ __forceinline__ void box_encoder_cwh(const float* b, float* c, float* e) {
    c[0] = __fmul_rn(0.5f, __fadd_rn(b[2], b[0]));
    c[1] = __fmul_rn(0.5f, __fadd_rn(b[3], b[1]));
    e[0] = __fsub_rn(b[2], b[0]);
    e[1] = __fsub_rn(b[3], b[1]);
}

extern "C" __global__ void __launch_bounds__(BOX_ENCODER_THREADS) box_encoder(const BoxEncoderSample* samples) {
    __shared__ float best_iou[BOX_ENCODER_THREADS];
    __shared__ int best_anchor[BOX_ENCODER_THREADS];
    __shared__ int box0_anchor;
    const BoxEncoderSample& s = samples[blockIdx.y];
    const float* boxes = (const float*)s.boxes;
    const float* anchors = (const float*)s.anchors;
    int* out_labels = (int*)s.out_labels;
    const unsigned t = threadIdx.x;
    const int num_boxes = (int)s.num_boxes;
    const long long num_anchors = s.num_anchors;

    // Until the last pass, out_labels[k] is scratch: the last box whose best anchor is k
    // (-1: none). Each box's best anchor must be known before any anchor picks its box, and
    // the labels are the one per-anchor buffer there is.
    for (long long k = t; k < num_anchors; k += blockDim.x) out_labels[k] = -1;
    __syncthreads();
    for (int b = 0; b < num_boxes; b++) {
        const float* box = boxes + 4 * (long long)b;
        // -1 is below every IoU, and a NaN never replaces: the scan keeps the last best.
        float v = -1.0f;
        int at = -1;
        for (long long k = t; k < num_anchors; k += blockDim.x) {
            const float w = box_encoder_iou(box, anchors + 4 * k);
            if (w >= v) {
                v = w;
                at = (int)k;
            }
        }
        best_iou[t] = v;
        best_anchor[t] = at;
        __syncthreads();
        // The larger IoU, the later anchor among equals: the same winner in any order.
        for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
            if (t < half) {
                const float w = best_iou[t + half];
                const int j = best_anchor[t + half];
                if (w > best_iou[t] || (w == best_iou[t] && j > best_anchor[t])) {
                    best_iou[t] = w;
                    best_anchor[t] = j;
                }
            }
            __syncthreads();
        }
        if (t == 0) {
            // The cpu's scan starts from anchor 0 and nothing is >= NaN: a NaN IoU with
            // anchor 0 keeps anchor 0.
            const float first = box_encoder_iou(box, anchors);
            const int k = first != first ? 0 : best_anchor[0];
            out_labels[k] = b;  // boxes in order: the last one stays
            if (b == 0) box0_anchor = k;
        }
        __syncthreads();
    }

    const int* labels = (const int*)s.labels;
    float* out = (float*)s.out_boxes;
    for (long long k = t; k < num_anchors; k += blockDim.x) {
        const float* a = anchors + 4 * k;
        int match = -1;
        if (num_boxes > 0) {
            // The cpu's scan over the boxes, where a box whose best anchor is k counts as an
            // IoU of 2, above any other (IoUs are at most 1): the last such box wins, unless
            // box 0's IoU is a NaN, which nothing replaces.
            const int forced = out_labels[k];
            float v = box0_anchor == k ? 2.0f : box_encoder_iou(boxes, a);
            match = 0;
            if (v == v) {
                if (forced >= 0) {
                    match = forced;
                    v = 2.0f;
                } else {
                    for (int b = 1; b < num_boxes; b++) {
                        const float w = box_encoder_iou(boxes + 4 * (long long)b, a);
                        if (w >= v) {
                            v = w;
                            match = b;
                        }
                    }
                }
            }
            if (v <= s.criteria) match = -1;
        }
        float* row = out + 4 * k;
        float ac[2], ae[2];
        box_encoder_cwh(a, ac, ae);
        if (match < 0) {
            if (s.offset) {
                row[0] = row[1] = row[2] = row[3] = 0.0f;
            } else {
                row[0] = ac[0];
                row[1] = ac[1];
                row[2] = ae[0];
                row[3] = ae[1];
            }
            out_labels[k] = 0;
            continue;
        }
        float bc[2], be[2];
        box_encoder_cwh(boxes + 4 * (long long)match, bc, be);
        if (s.offset) {
            for (int d = 0; d < 2; d++) {
                const float c = __fmul_rn(bc[d], s.scale), ca = __fmul_rn(ac[d], s.scale);
                const float e = __fmul_rn(be[d], s.scale), ea = __fmul_rn(ae[d], s.scale);
                row[d] = __fdiv_rn(__fsub_rn(__fdiv_rn(__fsub_rn(c, ca), ea), s.means[d]), s.stds[d]);
                row[2 + d] = __fdiv_rn(__fsub_rn(logf(__fdiv_rn(e, ea)), s.means[2 + d]), s.stds[2 + d]);
            }
        } else {
            row[0] = bc[0];
            row[1] = bc[1];
            row[2] = be[0];
            row[3] = be[1];
        }
        out_labels[k] = labels[match];
    }
}
