//! Per-batch kernel parameters (one descriptor per sample) uploaded in one copy, so a GPU
//! operator launches one kernel per batch whatever the batch holds.

use std::sync::Arc;

use sluice_cuda::{DeviceBuffer, PinnedBuffer};

use crate::error::Result;
use crate::ops::GpuWorkspace;
use crate::tensor::ReadyEvent;

/// Pinned + device buffers for small per-batch uploads, two deep: batch n+1's parameters
/// are written while batch n's may still be on their way, so the host never waits for the
/// previous iteration's GPU work.
#[derive(Default)]
pub struct ParamUpload {
    slots: [Slot; DEPTH],
    turn: usize,
}

/// Parameter blocks in flight. The pipeline stream runs behind the host by up to the
/// prefetch depth plus the hardware decoder's own queue; with fewer slots the host would
/// wait here for the GPU and stop feeding the decoders.
const DEPTH: usize = 4;

#[derive(Default)]
struct Slot {
    host: Option<PinnedBuffer>,
    device: Option<Arc<DeviceBuffer>>,
    /// Recorded after this slot's last copy: its pinned side may be rewritten once it completes.
    copied: Option<ReadyEvent>,
}

impl ParamUpload {
    /// Makes room for `len` bytes in the next slot and returns the device address the next
    /// [`upload`](Self::upload) lands at (blocks that point into themselves need it first).
    pub fn reserve(&mut self, ws: &GpuWorkspace<'_>, len: usize) -> Result<u64> {
        let slot = &mut self.slots[self.turn];
        if let Some(ev) = slot.copied.take() {
            ev.synchronize()?;
        }
        let need = len.max(16);
        if slot.host.as_ref().is_none_or(|h| h.len() < need) {
            let cap = need.next_power_of_two();
            slot.host = Some(PinnedBuffer::alloc(ws.device, cap)?);
            slot.device = Some(Arc::new(DeviceBuffer::alloc(ws.device, ws.stream, cap)?));
        }
        Ok(slot.device.as_ref().expect("allocated above").device_ptr())
    }

    /// Like [`upload`](Self::upload), but `write` fills the `len` bytes in place in the
    /// pinned staging memory, given the device address they will land at (so a large block,
    /// e.g. tap tables, is written once, by as many threads as `write` likes, and never
    /// copied on the host).
    pub fn upload_with(&mut self, ws: &GpuWorkspace<'_>, len: usize, write: impl FnOnce(&mut [u8], u64) -> Result<()>) -> Result<u64> {
        let base = self.reserve(ws, len)?;
        let slot = &mut self.slots[self.turn];
        self.turn = (self.turn + 1) % DEPTH;
        let host = slot.host.as_mut().expect("reserved above");
        write(&mut host.as_mut_slice()[..len], base)?;
        let dev = slot.device.as_ref().expect("reserved above");
        // SAFETY: the slot's host memory is not touched again until `copied` (recorded
        // below, after this copy) has completed.
        unsafe { dev.copy_from_host_async(0, &host.as_slice()[..len])? };
        slot.copied = Some(ReadyEvent::record(ws.device, ws.stream)?);
        Ok(base)
    }

    /// Copies `bytes` to the device on the workspace's stream and returns the device
    /// address. Kernels queued after this on the same stream see the data; the slot's next
    /// use is two uploads later, ordered after them on the stream.
    pub fn upload(&mut self, ws: &GpuWorkspace<'_>, bytes: &[u8]) -> Result<u64> {
        self.reserve(ws, bytes.len())?;
        let slot = &mut self.slots[self.turn];
        self.turn = (self.turn + 1) % DEPTH;
        let host = slot.host.as_mut().expect("reserved above");
        host.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let dev = slot.device.as_ref().expect("reserved above");
        // SAFETY: the pinned buffer is not rewritten before `copied` completes.
        unsafe { dev.copy_from_host_async(0, &host.as_slice()[..bytes.len()])? };
        slot.copied = Some(ReadyEvent::record(ws.device, ws.stream)?);
        Ok(dev.device_ptr())
    }
}

impl ParamUpload {
    /// Copies `dst.len()` bytes from `offset` of the last uploaded block back to the host,
    /// after the work queued so far on the block's stream (the workspace's): for kernels
    /// that report through their block (a flag per sample). Waits for the stream.
    pub fn read_back_last(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let slot = &self.slots[(self.turn + DEPTH - 1) % DEPTH];
        let dev = slot.device.as_ref().expect("read back after an upload");
        Ok(dev.copy_to_host(offset, dst)?)
    }
}

/// Launch shape of the per-sample kernels: one grid row (y) per sample, 256 threads per
/// block, enough blocks along x for the largest sample's `max_items`, at most 1024 (the
/// kernels' threads stride over larger samples). Counted in usize, so no sample size wraps.
pub fn per_sample_launch(max_items: usize, samples: usize) -> sluice_cuda::LaunchConfig {
    const THREADS: u32 = 256;
    let blocks_x = max_items.div_ceil(THREADS as usize).clamp(1, 1024) as u32;
    sluice_cuda::LaunchConfig { grid_dim: (blocks_x, samples as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// CUDA's limit on grid rows (`gridDim.y`).
pub const MAX_GRID_ROWS: usize = 65_535;

/// The launches of a per-sample kernel over `samples` samples: [`per_sample_launch`]es of at
/// most [`MAX_GRID_ROWS`] rows each, with the index of each one's first sample. A kernel
/// reads its sample's records as `records[blockIdx.y]`, so each launch passes its per-sample
/// arrays advanced by its first sample. Batches of more samples than that come from
/// operators run frame by frame on long sequences.
pub fn per_sample_launches(max_items: usize, samples: usize) -> impl Iterator<Item = (usize, sluice_cuda::LaunchConfig)> {
    (0..samples).step_by(MAX_GRID_ROWS).map(move |first| (first, per_sample_launch(max_items, (samples - first).min(MAX_GRID_ROWS))))
}

/// Launches `f(records)`, a per-sample kernel whose only parameter is its array of `samples`
/// records of type `R` at `records` (each thread reading `records[blockIdx.y]`), in the
/// launches [`per_sample_launches`] makes.
///
/// # Safety
/// As for any launch: `f` takes one pointer to `R`s, and the records and everything they
/// point to are alive and ordered on `stream`.
pub unsafe fn launch_records<R>(stream: &sluice_cuda::CudaStream, f: &sluice_cuda::CudaFunction, records: u64, samples: usize, max_items: usize) -> Result<()> {
    // SAFETY: the caller's promise.
    unsafe { launch_records_in_rows::<R>(stream, f, records, samples, |rows| per_sample_launch(max_items, rows)) }
}

/// A block of `threads` per record, one grid row each: the launch of kernels whose block
/// works on one record together (`gridDim.x` is 1).
pub fn block_per_record(threads: u32, rows: usize) -> sluice_cuda::LaunchConfig {
    sluice_cuda::LaunchConfig { grid_dim: (1, rows as u32, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Launches `f(records)` as [`launch_records`] does, over `samples` records of type `R`, each
/// launch shaped by `launch(rows)` for its (at most [`MAX_GRID_ROWS`]) rows.
///
/// # Safety
/// As for [`launch_records`].
pub unsafe fn launch_records_in_rows<R>(stream: &sluice_cuda::CudaStream, f: &sluice_cuda::CudaFunction, records: u64, samples: usize, launch: impl Fn(usize) -> sluice_cuda::LaunchConfig) -> Result<()> {
    use sluice_cuda::PushKernelArg;
    for first in (0..samples).step_by(MAX_GRID_ROWS) {
        let at = records + (first * std::mem::size_of::<R>()) as u64;
        // SAFETY: the caller's promise; `at` is the chunk's first record.
        unsafe { stream.launch_builder(f).arg(&at).launch(launch((samples - first).min(MAX_GRID_ROWS))).map_err(sluice_cuda::CudaError::from)? };
    }
    Ok(())
}

/// Appends a parameter struct (or a plain value) to a block of several kinds of records.
pub fn push<T: bytemuck::Pod>(block: &mut Vec<u8>, v: T) {
    block.extend_from_slice(bytemuck::bytes_of(&v));
}

/// Size and field offsets of a kernel parameter struct, which its twin in the CUDA source
/// must have (checked by compiling the sources on the host, see the tests below).
#[derive(Debug)]
pub struct CudaLayout {
    pub size: usize,
    /// (field name, offset), in declaration order.
    pub fields: &'static [(&'static str, usize)],
}

/// Declares a kernel parameter struct: `#[repr(C)]` and `Pod`, so it uploads as its bytes
/// and has no hidden padding (every byte is a named field), with its [`CudaLayout`] as
/// `LAYOUT`. Field names are the CUDA twin's (`r#in` for `in`).
macro_rules! cuda_struct {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
        $vis struct $name { $($(#[$fmeta])* $fvis $field: $ty,)* }

        #[cfg(test)]
        impl $name {
            /// The layout its CUDA twin must have.
            pub const LAYOUT: $crate::ops::gpu_params::CudaLayout = $crate::ops::gpu_params::CudaLayout {
                size: std::mem::size_of::<$name>(),
                fields: &[$((stringify!($field), std::mem::offset_of!($name, $field))),*],
            };
        }
    };
}
pub(crate) use cuda_struct;

/// A `.cu` source's kernels run on the host, for tests that compare them with the cpu
/// backend: a C++ program (`harness`, with `@SHIM@` and `@SRC@` where the shim's and the
/// source's paths go) that includes the source over tools/cuda_shim/shim.h, reads a case file
/// in its own format and writes the output to stdout. Built once (`CXX`, else `c++`), without
/// fused multiply-adds, so the shim's `_rn` intrinsics round as the GPU's.
#[cfg(test)]
pub(crate) struct HostKernels {
    dir: std::path::PathBuf,
    exe: std::path::PathBuf,
    cases: std::sync::atomic::AtomicUsize,
}

#[cfg(test)]
impl HostKernels {
    pub(crate) fn build(name: &str, source: &str, harness: &str) -> HostKernels {
        let dir = std::env::temp_dir().join(format!("sluice-{name}-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shim = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/cuda_shim/shim.h");
        let cu = dir.join(format!("{name}.cu"));
        std::fs::write(&cu, source).unwrap();
        let program = dir.join("harness.cpp");
        std::fs::write(&program, harness.replace("@SHIM@", &shim.display().to_string()).replace("@SRC@", &cu.display().to_string())).unwrap();
        let exe = dir.join("harness");
        let built = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
            .args(["-std=c++20", "-O1", "-ffp-contract=off", "-w", "-pthread", "-o"])
            .arg(&exe)
            .arg(&program)
            .output()
            .unwrap_or_else(|e| panic!("a C++20 compiler (c++) to run {name}.cu on the host: {e}"));
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        HostKernels { dir, exe, cases: std::sync::atomic::AtomicUsize::new(0) }
    }

    /// The harness's output for `case`; panics with its report (naming `what`) if it fails.
    pub(crate) fn run(&self, what: &str, case: &[u8]) -> Vec<u8> {
        let n = self.cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = self.dir.join(format!("case-{n}"));
        std::fs::write(&file, case).unwrap();
        let out = std::process::Command::new(&self.exe).arg(&file).output().unwrap();
        let _ = std::fs::remove_file(&file);
        assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }
}

/// The common case of [`HostKernels`]: kernels `void k(const Desc* samples)` launched as
/// [`per_sample_launch`] does (grid row y = sample), whose descriptors hold device addresses
/// in the fields `inputs` (into one input block) and `outputs` (into one output block). The
/// test writes those fields as byte offsets; the harness relocates them, runs every thread
/// of a small grid (32 threads x 3 blocks, so the kernels' stride loops run; or, with
/// [`run_blocks`](PerSampleKernels::run_blocks), one cooperative block of 32 per sample) and
/// returns the output block, with the bytes no thread wrote left as 0xab.
#[cfg(test)]
pub(crate) struct PerSampleKernels(HostKernels);

#[cfg(test)]
impl PerSampleKernels {
    /// Builds the harness of `source` (named `name`) for descriptor struct `desc` and the
    /// kernels `kernels`.
    pub(crate) fn build(name: &str, source: &str, desc: &str, inputs: &[&str], outputs: &[&str], kernels: &[&str]) -> PerSampleKernels {
        let mut relocate = String::new();
        for (fields, base) in [(inputs, "input"), (outputs, "out")] {
            for f in fields {
                relocate.push_str(&format!("        s.{f} += (unsigned long long){base}.data();\n"));
            }
        }
        let dispatch: String = kernels.iter().map(|k| format!("        if (k == \"{k}\") kernel = {k};\n")).collect();
        let harness = PER_SAMPLE_HARNESS.replace("@DESC@", desc).replace("@RELOCATE@", &relocate).replace("@DISPATCH@", &dispatch);
        PerSampleKernels(HostKernels::build(name, source, &harness))
    }

    /// Runs `kernel` (or several, separated by commas, in turn) over the descriptors
    /// `descs` with `input` and an output block of `out_len` bytes; returns the output block.
    pub(crate) fn run(&self, kernel: &str, descs: &[u8], samples: usize, input: &[u8], out_len: usize) -> Vec<u8> {
        self.launch(kernel, descs, samples, input, out_len, 3, false)
    }

    /// Like [`run`](Self::run), for kernels of one block per sample (grid 1 x samples) whose
    /// threads cooperate through `__shared__` memory and `__syncthreads()`: each block's 32
    /// threads run as OS threads meeting at a barrier (tools/cuda_shim/shim.h).
    pub(crate) fn run_blocks(&self, kernel: &str, descs: &[u8], samples: usize, input: &[u8], out_len: usize) -> Vec<u8> {
        self.launch(kernel, descs, samples, input, out_len, 1, true)
    }

    fn launch(&self, kernel: &str, descs: &[u8], samples: usize, input: &[u8], out_len: usize, blocks: u32, cooperative: bool) -> Vec<u8> {
        let threads = 32u32;
        let mut case = Vec::new();
        case.extend((kernel.len() as u32).to_le_bytes());
        case.extend(kernel.as_bytes());
        for v in [samples as u32, threads, blocks, cooperative as u32] {
            case.extend(v.to_le_bytes());
        }
        case.extend((descs.len() as u64).to_le_bytes());
        case.extend(descs);
        case.extend((input.len() as u64).to_le_bytes());
        case.extend(input);
        case.extend((out_len as u64).to_le_bytes());
        let stdout = self.0.run(kernel, &case);
        assert_eq!(stdout.len(), out_len, "{kernel}: output size");
        stdout
    }
}

#[cfg(test)]
const PER_SAMPLE_HARNESS: &str = r#"#include <cstdlib>
#include <string>
#include "@SHIM@"
#include "@SRC@"
typedef void (*Kernel)(const @DESC@*);

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len, n, threads, blocks, cooperative;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4); read_exactly(&cooperative, 4);
    unsigned long long desc_len, in_len, out_len;
    read_exactly(&desc_len, 8);
    if (desc_len != n * sizeof(@DESC@)) { fprintf(stderr, "descriptor size\n"); return 2; }
    std::vector<@DESC@> samples(n);
    read_exactly(samples.data(), desc_len);
    read_exactly(&in_len, 8);
    std::vector<unsigned long long> input(in_len / 8 + 1);
    read_exactly(input.data(), in_len);
    read_exactly(&out_len, 8);
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    for (@DESC@& s : samples) {
@RELOCATE@    }
    // `name`: kernels separated by commas, launched in turn (as on one stream).
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find(',', start);
        if (end == std::string::npos) end = name.size();
        const std::string k = name.substr(start, end - start);
        start = end + 1;
        Kernel kernel = nullptr;
@DISPATCH@        if (!kernel) { fprintf(stderr, "no kernel %s\n", k.c_str()); return 3; }
        blockDim = {threads, 1, 1};
        gridDim = {blocks, n, 1};
        for (unsigned y = 0; y < n; y++)
            for (unsigned b = 0; b < blocks; b++) {
                if (cooperative) {
                    // One block at a time, so its __shared__ statics are its own.
                    std::barrier<> barrier(threads);
                    block_barrier = &barrier;
                    std::vector<std::thread> block;
                    for (unsigned t = 0; t < threads; t++)
                        block.emplace_back([&, t] {
                            blockIdx = {b, y, 0};
                            threadIdx = {t, 0, 0};
                            kernel(samples.data());
                        });
                    for (std::thread& t : block) t.join();
                    continue;
                }
                for (unsigned t = 0; t < threads; t++) {
                    blockIdx = {b, y, 0};
                    threadIdx = {t, 0, 0};
                    kernel(samples.data());
                }
            }
    }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

/// Checks a kernel source where there is no GPU: compiles it, as NVRTC receives it, with
/// the host's C++ compiler (`CXX`, else `c++`) against tools/cuda_shim/shim.h, with a
/// `static_assert` per size and field offset of each parameter struct's Rust layout
/// (`twins`: the struct's name in the source, its Rust layout). Panics with the compiler's
/// report when the source does not compile or a twin disagrees.
#[cfg(test)]
pub(crate) fn check_cuda_source(name: &str, source: &str, twins: &[(&str, &CudaLayout)]) {
    use std::fmt::Write;
    let shim = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/cuda_shim/shim.h");
    let mut cpp = format!("#include \"{}\"\n{source}\n", shim.display());
    for (c_name, layout) in twins {
        let size = layout.size;
        writeln!(cpp, "static_assert(sizeof({c_name}) == {size}, \"{c_name}: {size} bytes in Rust\");").unwrap();
        for (field, offset) in layout.fields {
            let field = field.trim_start_matches("r#");
            writeln!(cpp, "static_assert(offsetof({c_name}, {field}) == {offset}, \"{c_name}.{field}: at byte {offset} in Rust\");").unwrap();
        }
    }
    let dir = std::env::temp_dir().join(format!("sluice-cuda-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.cpp"));
    std::fs::write(&file, cpp).unwrap();
    let out = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
        .args(["-std=c++20", "-fsyntax-only", "-w"])
        .arg(&file)
        .output()
        .expect("a C++20 compiler (c++) to check the CUDA sources");
    let _ = std::fs::remove_file(&file);
    assert!(out.status.success(), "{name}: the CUDA source or its parameter structs disagree with Rust:\n{}", String::from_utf8_lossy(&out.stderr));
}
