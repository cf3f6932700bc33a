// fn.decoders.inflate on the GPU (ops/decoders/inflate/gpu.rs): LZ4 blocks, one launch per
// batch (per 65535 chunks), one block of one warp per chunk (blockIdx.y; gridDim.x is 1).
//
// Reading an LZ4 block is serial: where a sequence starts is known only once the one before
// it is read. So thread 0 reads each sequence (token, lengths, offset) and hands it to the
// warp through shared memory, and the warp copies its literals, then its match. A match's
// byte k is byte (k mod offset) of the `offset` bytes before the match (an overlapping copy
// repeats them), all written before the match starts, so the warp copies every byte of it at
// once, whatever the offset. Barriers: the literals are in place before the match reads
// them; one match's bytes are in place before the next match can read them.
//
// Checked as lz4.rs's decoder checks (the same faults, at the same bytes): no read past the
// chunk's input, no write past its output. The decoded size is counted on past the output's
// end. The chunk's InflateStatus says how it went; the host reads it back. The output past
// the decoded data is zeroed (DALI's FillTheTails).
// No headers: NVRTC runs without the CUDA toolkit's include folder on user machines.

// Faults (lz4.rs, FaultKind).
#define INFLATE_FAULT_NO_TOKEN 1
#define INFLATE_FAULT_LITERAL_LENGTH 2
#define INFLATE_FAULT_LITERALS 3
#define INFLATE_FAULT_OFFSET 4
#define INFLATE_FAULT_ZERO_OFFSET 5
#define INFLATE_FAULT_DISTANCE 6
#define INFLATE_FAULT_MATCH_LENGTH 7

struct InflateChunk {
    unsigned long long in;        // the compressed chunk
    unsigned long long out;       // its output
    unsigned long long in_size;   // bytes
    unsigned long long out_size;  // bytes
    unsigned long long status;    // its InflateStatus
};

struct InflateStatus {
    unsigned long long decoded;   // the decoded size; after a fault, the bytes decoded before it
    unsigned long long fault;     // 0, or INFLATE_FAULT_*
    unsigned long long at;        // the fault's byte in the block
    unsigned long long value;     // the fault's literal count or offset
};

// One sequence as thread 0 read it.
struct InflateSequence {
    unsigned long long lit_from;   // the literals: input bytes [lit_from, lit_from + lit_len)
    unsigned long long lit_len;
    unsigned long long out;        // where they go; the match follows them
    unsigned long long offset;     // the match (match_len 0: none)
    unsigned long long match_len;
    int state;                     // INFLATE_MORE, INFLATE_END, INFLATE_FAULT
};

#define INFLATE_MORE 0
#define INFLATE_END 1    // the block ends after these literals
#define INFLATE_FAULT 2  // the status holds the fault; the literals (if any) are valid

// A token nibble `v` with its extension bytes from `ip` (when it is 15); false when the input
// ends before the last one.
__device__ __forceinline__ bool inflate_extend(const unsigned char* in, unsigned long long n, unsigned long long& ip, unsigned long long& v) {
    if (v != 15) return true;
    for (;;) {
        if (ip >= n) return false;
        const unsigned b = in[ip++];
        v += b;
        if (b != 255) return true;
    }
}

__device__ __forceinline__ void inflate_fault(InflateStatus& st, InflateSequence& s, unsigned long long kind,
                                              unsigned long long at, unsigned long long value) {
    st.fault = kind;
    st.at = at;
    st.value = value;
    s.state = INFLATE_FAULT;
}

// Thread 0: reads the sequence at `ip` of the block in[0, n), `op` bytes decoded so far.
__device__ InflateSequence inflate_read(const unsigned char* in, unsigned long long n, unsigned long long& ip,
                                        unsigned long long& op, InflateStatus& st) {
    InflateSequence s;
    s.lit_from = 0;
    s.lit_len = 0;
    s.out = op;
    s.offset = 0;
    s.match_len = 0;
    s.state = INFLATE_MORE;
    if (ip >= n) {
        inflate_fault(st, s, INFLATE_FAULT_NO_TOKEN, ip, 0);
        return s;
    }
    const unsigned token = in[ip++];
    unsigned long long lit = token >> 4;
    const unsigned long long lit_start = ip;
    if (!inflate_extend(in, n, ip, lit)) {
        inflate_fault(st, s, INFLATE_FAULT_LITERAL_LENGTH, lit_start, 0);
        return s;
    }
    if (lit > n - ip) {
        inflate_fault(st, s, INFLATE_FAULT_LITERALS, ip, lit);
        return s;
    }
    s.lit_from = ip;
    s.lit_len = lit;
    ip += lit;
    op += lit;
    if (ip == n) {
        s.state = INFLATE_END;
        return s;
    }
    if (n - ip < 2) {
        inflate_fault(st, s, INFLATE_FAULT_OFFSET, ip, 0);
        return s;
    }
    const unsigned long long offset = (unsigned long long)in[ip] | ((unsigned long long)in[ip + 1] << 8);
    if (offset == 0) {
        inflate_fault(st, s, INFLATE_FAULT_ZERO_OFFSET, ip, 0);
        return s;
    }
    if (offset > op) {
        inflate_fault(st, s, INFLATE_FAULT_DISTANCE, ip, offset);
        return s;
    }
    ip += 2;
    unsigned long long len = token & 15;
    const unsigned long long len_start = ip;
    if (!inflate_extend(in, n, ip, len)) {
        inflate_fault(st, s, INFLATE_FAULT_MATCH_LENGTH, len_start, 0);
        return s;
    }
    s.offset = offset;
    s.match_len = len + 4;
    op += len + 4;
    return s;
}

extern "C" __global__ void inflate_lz4(const InflateChunk* chunks) {
    const InflateChunk& c = chunks[blockIdx.y];
    const unsigned char* in = (const unsigned char*)c.in;
    unsigned char* out = (unsigned char*)c.out;
    const unsigned long long n = c.in_size, cap = c.out_size;
    const unsigned t = threadIdx.x, step = blockDim.x;
    __shared__ InflateSequence shared_seq;
    // Thread 0's: where it reads, how much is decoded, the status.
    unsigned long long ip = 0, op = 0;
    InflateStatus st;
    st.decoded = 0;
    st.fault = 0;
    st.at = 0;
    st.value = 0;
    InflateSequence s;
    for (;;) {
        if (t == 0) shared_seq = inflate_read(in, n, ip, op, st);
        __syncthreads();
        s = shared_seq;  // every thread has it before thread 0 writes the next (after a barrier below)
        for (unsigned long long k = t; k < s.lit_len && s.out + k < cap; k += step) out[s.out + k] = in[s.lit_from + k];
        if (s.state != INFLATE_MORE) break;  // the same for every thread
        __syncthreads();
        const unsigned long long at = s.out + s.lit_len, from = at - s.offset;
        const unsigned offset = (unsigned)s.offset;  // 1..65535
        unsigned j = offset > step ? t : t % offset;  // k mod offset, kept up to date as k steps
        for (unsigned long long k = t; k < s.match_len && at + k < cap; k += step) {
            out[at + k] = out[from + j];
            j += step;
            if (j >= offset) j = offset > step ? j - offset : j % offset;
        }
    }
    const unsigned long long end = s.out + s.lit_len;
    for (unsigned long long k = end + t; k < cap; k += step) out[k] = 0;
    if (t == 0) {
        st.decoded = op;
        *(InflateStatus*)c.status = st;
    }
}
