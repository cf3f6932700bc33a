// Runs jpeg_entropy.cu's entropy_decode on the CPU (shim.h) over case files written by
// tests/scan.rs (a prepared scan, the window's layout, libjpeg-turbo's coefficients) and
// compares. Exit status: the number of cases that differ.
#include "shim.h"
#include KERNEL_SOURCE
#include <fstream>

static unsigned long long read_u64(std::ifstream& f) {
    unsigned long long v = 0;
    f.read((char*)&v, 8);
    return v;
}

int main(int argc, char** argv) {
    int bad = 0;
    for (int a = 1; a < argc; a++) {
        std::ifstream f(argv[a], std::ios::binary);
        std::vector<char> header(read_u64(f));
        f.read(header.data(), header.size());
        unsigned long long data_len = read_u64(f);
        std::vector<unsigned> data((data_len + 3) / 4 + 2, 0xFFFFFFFFu);
        f.read((char*)data.data(), data_len);
        Job j;
        memset(&j, 0, sizeof j);
        j.components = (int)read_u64(f);
        for (int c = 0; c < 3; c++) {
            j.win[c].bx0 = (int)read_u64(f);
            j.win[c].by0 = (int)read_u64(f);
            j.win[c].bw = (int)read_u64(f);
            j.win[c].bh = (int)read_u64(f);
            j.win[c].offset = (long long)read_u64(f);
        }
        std::vector<short> want(read_u64(f));
        f.read((char*)want.data(), want.size() * 2);
        if (!f) {
            printf("%s: unreadable\n", argv[a]);
            bad++;
            continue;
        }
        const ScanHeader* h = (const ScanHeader*)header.data();
        std::vector<short> coefs(want.size(), 0);
        std::vector<short> dc((size_t)h->mcus_per_row * h->mcu_rows * h->blocks_per_mcu, 0);
        j.header = h;
        j.data = data.data();
        j.coefs = coefs.data();
        j.dc = dc.data();
        // As gpu_entropy.rs sizes the chunks and the block (the smallest power of two, at
        // least 32, that holds them).
        unsigned long long bits = (unsigned long long)h->data_bytes * 8;
        unsigned long long chunk = std::max((bits + THREADS - 1) / THREADS, 8192ull);
        j.chunk_bits = (long long)chunk;
        j.chunks = (int)std::max(1ull, (bits + chunk - 1) / chunk);
        unsigned block = 32;
        while (block < (unsigned)j.chunks) block *= 2;
        blockDim = {block, 1, 1};
        std::barrier<> barrier(block);
        block_barrier = &barrier;
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; t++)
            threads.emplace_back([&, t] {
                threadIdx = {t, 0, 0};
                blockIdx = {0, 0, 0};
                entropy_decode(&j);
            });
        for (auto& t : threads) t.join();
        size_t diff = 0, first = 0;
        for (size_t i = 0; i < want.size(); i++)
            if (coefs[i] != want[i] && diff++ == 0) first = i;
        printf("%s: %d chunks, %u threads, %s", argv[a], j.chunks, block, diff ? "DIFFERENT" : "equal");
        if (diff) printf(" (%zu of %zu, first at %zu: %d, want %d)", diff, want.size(), first, coefs[first], want[first]);
        printf("\n");
        bad += diff != 0;
    }
    return bad;
}
