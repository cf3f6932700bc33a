// JPEG entropy decoding on the GPU: baseline Huffman scans, one CUDA block per image, one
// thread per chunk of bits. The algorithm and its specification are in
// sluice-codecs/src/scan.rs (`decode_parallel`, checked there against libjpeg-turbo's
// coefficients for every sampling and chunking); this file repeats it step for step, so
// keep the two in step. The host prepared each scan (ScanHeader: derived Huffman tables and
// the MCU's blocks; data with the stuffing removed and 16 bytes of 0xFF after it).
//
//  1. Each thread decodes SYNC_LEAD bits before its chunk from a guessed state (block 0, a
//     DC next), which by then has fallen into step with the codewords, then its chunk,
//     counting the blocks it begins; its end state goes to shared memory.
//  2. Rounds: each thread re-decodes from its predecessor's end state when that differs
//     from the state it started from, until no end state changes (thread 0 starts right,
//     so the fixpoint is exact; one round on real files).
//  3. A prefix sum of the block counts gives each thread its first block; it decodes its
//     chunk once more, writing AC coefficients of the blocks inside the window straight
//     into their place (natural order) and every DC difference to scratch.
//  4. Each thread sums the DC differences of a run of MCUs per component; a prefix sum over
//     the runs, and the DC values of the window's blocks are written.
//
// The output is what sluice_codecs::read_coefficients lays out; jpeg_idct.cu finishes it.

#define LOOKAHEAD 9
#define SYNC_LEAD 4096u
#define THREADS 1024  // the most threads (chunks) per image; blockDim.x may be fewer
#define MAX_MCU_BLOCKS 10

struct HuffTable {
    unsigned short lookup[1 << LOOKAHEAD];  // len << 8 | symbol, 0: longer code
    int maxcode[18];                        // by length; [17] sentinel
    int valoffset[18];
    unsigned char values[256];
};

struct ScanHeader {
    HuffTable tables[4];  // DC 0, DC 1, AC 0, AC 1
    unsigned mcus_per_row, mcu_rows, blocks_per_mcu, data_bytes;
    unsigned char block_comp[MAX_MCU_BLOCKS], block_dc[MAX_MCU_BLOCKS], block_ac[MAX_MCU_BLOCKS];
    unsigned char block_x[MAX_MCU_BLOCKS], block_y[MAX_MCU_BLOCKS];
    unsigned char comp_h[3], comp_v[3], pad[8];
};

struct Window {
    int bx0, by0, bw, bh;  // the blocks kept, per component
    long long offset;      // where its first coefficient goes in the sample's run
};

struct Job {
    const ScanHeader* header;
    const unsigned* data;   // 4-byte aligned
    short* coefs;           // the sample's run of coefficients (zeroed beforehand)
    short* dc;              // scratch: a DC difference per block of the scan
    long long chunk_bits;
    int chunks;             // <= THREADS
    int components;
    Window win[3];
};

__constant__ unsigned char ZIGZAG_TO_NATURAL[64] = {
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42,
    49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

struct State {
    unsigned pos;
    int block;
    int k;
};

__device__ __forceinline__ unsigned long long key(State s) {
    return ((unsigned long long)s.pos << 16) | ((unsigned)s.block << 8) | (unsigned)s.k;
}

__device__ __forceinline__ State unkey(unsigned long long v) {
    State s;
    s.pos = (unsigned)(v >> 16);
    s.block = (int)((v >> 8) & 0xFF);
    s.k = (int)(v & 0xFF);
    return s;
}

// The 32 bits from bit `pos` on, most significant first.
__device__ __forceinline__ unsigned peek32(const unsigned* words, unsigned pos) {
    unsigned w = pos >> 5, sh = pos & 31;
    unsigned hi = __byte_perm(words[w], 0, 0x0123);
    if (sh == 0) return hi;
    unsigned lo = __byte_perm(words[w + 1], 0, 0x0123);
    return (hi << sh) | (lo >> (32 - sh));
}

__device__ __forceinline__ int extend(unsigned r, int s) {
    return s == 0 ? 0 : (r < (1u << (s - 1)) ? (int)r - (1 << s) + 1 : (int)r);
}

__device__ __forceinline__ bool decode_symbol(const HuffTable& t, unsigned bits, int& len, int& sym) {
    unsigned e = t.lookup[bits >> (32 - LOOKAHEAD)];
    if (e != 0) {
        len = (int)(e >> 8);
        sym = (int)(e & 0xFF);
        return true;
    }
    for (int l = LOOKAHEAD + 1; l <= 16; l++) {
        int code = (int)(bits >> (32 - l));
        if (code <= t.maxcode[l]) {
            int idx = code + t.valoffset[l];
            if (idx < 0 || idx > 255) return false;
            len = l;
            sym = t.values[idx];
            return true;
        }
    }
    return false;
}

enum Unit { UNIT_DC, UNIT_AC, UNIT_SKIP, UNIT_INVALID };

// One codeword and its extra bits (scan.rs `step`).
__device__ __forceinline__ Unit step(const ScanHeader* h, const HuffTable* tabs, const unsigned* data, State& s, int& value,
                                     int& kout) {
    unsigned bits = peek32(data, s.pos);
    int b = s.block;
    int len, sym;
    if (s.k == 0) {
        if (!decode_symbol(tabs[h->block_dc[b]], bits, len, sym) || sym > 15) {
            s.pos += 1;
            return UNIT_INVALID;
        }
        unsigned extra = sym == 0 ? 0u : (bits << len) >> (32 - sym);
        s.pos += len + sym;
        s.k = 1;
        value = extend(extra, sym);
        return UNIT_DC;
    }
    if (!decode_symbol(tabs[h->block_ac[b]], bits, len, sym)) {
        s.pos += 1;
        s.k = 0;
        return UNIT_INVALID;
    }
    int run = sym >> 4, size = sym & 15;
    Unit u;
    if (size != 0) {
        kout = min(s.k + run, 63);
        unsigned extra = (bits << len) >> (32 - size);
        s.pos += len + size;
        s.k = s.k + run + 1;
        value = extend(extra, size);
        u = UNIT_AC;
    } else {
        s.pos += len;
        s.k = run == 15 ? s.k + 16 : 64;
        u = UNIT_SKIP;
    }
    if (s.k >= 64) {
        s.k = 0;
        s.block = s.block + 1 == (int)h->blocks_per_mcu ? 0 : s.block + 1;
    }
    return u;
}

// Where block g (decode order) lands in the sample's run, or -1 outside the window.
__device__ __forceinline__ long long block_slot(const ScanHeader* h, const Job& j, unsigned long long g) {
    unsigned bpm = h->blocks_per_mcu;
    unsigned long long m = g / bpm;
    int b = (int)(g - m * bpm);
    unsigned mx = (unsigned)(m % h->mcus_per_row), my = (unsigned)(m / h->mcus_per_row);
    int c = h->block_comp[b];
    int bx = (int)(mx * h->comp_h[c]) + h->block_x[b];
    int by = (int)(my * h->comp_v[c]) + h->block_y[b];
    const Window& w = j.win[c];
    if (bx < w.bx0 || bx >= w.bx0 + w.bw || by < w.by0 || by >= w.by0 + w.bh) return -1;
    return w.offset + ((long long)(by - w.by0) * w.bw + (bx - w.bx0)) * 64;
}

// Decodes from `s` to the first boundary at or past `end` (scan.rs `run_chunk`). With
// `first` >= 0 it writes: AC values of window blocks, DC differences to scratch; block
// indices count from `first` - 1 (the block the start state is inside).
__device__ void run_chunk(const ScanHeader* h, const HuffTable* tabs, const Job& j, State& s, unsigned end, unsigned& begun,
                          long long first, unsigned long long total_blocks) {
    const unsigned limit = h->data_bytes * 8u;
    unsigned long long g = first > 0 ? (unsigned long long)(first - 1) : 0;
    long long slot = first > 0 && g < total_blocks ? block_slot(h, j, g) : -1;
    bool started = false;
    begun = 0;
    while (s.pos < end) {
        bool dc = s.k == 0;
        int value = 0, k = 0;
        Unit u = step(h, tabs, j.data, s, value, k);
        if (u == UNIT_INVALID) {
            if (dc && s.block == 0 && limit - (s.pos - 1) < 8) s.pos = limit;
            continue;
        }
        if (u == UNIT_DC) {
            begun++;
            if (first >= 0) {
                g = (unsigned long long)first + begun - 1;
                started = true;
                slot = g < total_blocks ? block_slot(h, j, g) : -1;
                if (g < total_blocks) j.dc[g] = (short)value;
            }
        } else if (u == UNIT_AC && first >= 0 && slot >= 0 && (started || first > 0)) {
            j.coefs[slot + ZIGZAG_TO_NATURAL[k]] = (short)value;
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) entropy_decode(const Job* jobs) {
    const Job& j = jobs[blockIdx.x];
    const ScanHeader* h = j.header;
    __shared__ HuffTable tabs[4];
    __shared__ unsigned long long ends[THREADS];
    __shared__ unsigned counts[THREADS];
    __shared__ int sums[3][THREADS];
    __shared__ int changed;

    const int t = threadIdx.x;
    {
        const int* src = (const int*)h->tables;
        int* dst = (int*)tabs;
        for (int i = t; i < (int)(sizeof(tabs) / 4); i += (int)blockDim.x) dst[i] = src[i];
    }
    __syncthreads();

    const unsigned bits = h->data_bytes * 8u;
    const int n = j.chunks;
    const unsigned long long chunk = (unsigned long long)j.chunk_bits;
    const unsigned long long total_blocks =
        (unsigned long long)h->mcus_per_row * h->mcu_rows * h->blocks_per_mcu;
    const unsigned my_end = t < n ? (unsigned)min((unsigned long long)(t + 1) * chunk, (unsigned long long)bits) : 0;

    // 1. From a guess, SYNC_LEAD bits early.
    State entry = {0, 0, 0};
    if (t < n) {
        unsigned start = (unsigned)(t * chunk);
        if (t > 0) {
            State guess = {start > SYNC_LEAD ? start - SYNC_LEAD : 0u, 0, 0};
            unsigned unused;
            run_chunk(h, tabs, j, guess, start, unused, -1, total_blocks);
            entry = guess;
        }
        State s = entry;
        unsigned c;
        run_chunk(h, tabs, j, s, my_end, c, -1, total_blocks);
        ends[t] = key(s);
        counts[t] = c;
    }
    __syncthreads();

    // 2. Rounds until no end state moves.
    for (int round = 0; round <= n; round++) {
        if (t == 0) changed = 0;
        State from = entry;
        if (t > 0 && t < n) from = unkey(ends[t - 1]);
        __syncthreads();
        bool redo = t > 0 && t < n && key(from) != key(entry);
        unsigned long long new_end = 0;
        unsigned c = 0;
        if (redo) {
            entry = from;
            State s = from;
            run_chunk(h, tabs, j, s, my_end, c, -1, total_blocks);
            new_end = key(s);
            if (new_end != ends[t]) changed = 1;
        }
        __syncthreads();
        if (redo) {
            ends[t] = new_end;
            counts[t] = c;
        }
        __syncthreads();
        int again = changed;
        __syncthreads();
        if (!again) break;
    }

    // 3. First block of each chunk, then the write pass.
    if (t == 0) {
        unsigned acc = 0;
        for (int i = 0; i < n; i++) {
            unsigned c = counts[i];
            counts[i] = acc;
            acc += c;
        }
    }
    __syncthreads();
    if (t < n) {
        State s = entry;
        unsigned c;
        run_chunk(h, tabs, j, s, my_end, c, (long long)counts[t], total_blocks);
    }
    __syncthreads();

    // 4. DC values: per component, a running sum over the MCUs in decode order.
    const unsigned bpm = h->blocks_per_mcu;
    const unsigned long long mcus = (unsigned long long)h->mcus_per_row * h->mcu_rows;
    const unsigned long long per = (mcus + blockDim.x - 1) / blockDim.x;
    const unsigned long long m0 = min(mcus, (unsigned long long)t * per), m1 = min(mcus, m0 + per);
    int acc[3] = {0, 0, 0};
    for (unsigned long long m = m0; m < m1; m++)
        for (unsigned b = 0; b < bpm; b++) acc[h->block_comp[b]] += j.dc[m * bpm + b];
    for (int c = 0; c < 3; c++) sums[c][t] = acc[c];
    __syncthreads();
    if (t < 3) {
        int run = 0;
        for (int i = 0; i < (int)blockDim.x; i++) {
            int v = sums[t][i];
            sums[t][i] = run;
            run += v;
        }
    }
    __syncthreads();
    int pred[3] = {sums[0][t], sums[1][t], sums[2][t]};
    for (unsigned long long m = m0; m < m1; m++) {
        for (unsigned b = 0; b < bpm; b++) {
            unsigned long long g = m * bpm + b;
            int c = h->block_comp[b];
            pred[c] += j.dc[g];
            long long slot = block_slot(h, j, g);
            if (slot >= 0) j.coefs[slot] = (short)pred[c];
        }
    }
}
