//! GPU backend of the reductions: the cpu twin plans the batch ([`Reduce::plan`]: types, axes,
//! output shapes and layout, the mean's shapes) and each sample's [`Geometry`] and divisor;
//! one block of descriptors goes up per batch and one launch of `reductions.cu` computes
//! every output element of the batch, a thread each, or a block each when there are few
//! outputs with long sums ([`Launch::cooperative`]), with the cpu kernel's arithmetic (its
//! summation tree for float sums), so both backends give the same bits.

use std::sync::OnceLock;

use sluice_cuda::PushKernelArg;

use super::kernel::{norm_factor, Combine, Geometry, Post, Pre, TREE_THRESHOLD};
use super::{Kind, Plan, Reduce, INPUT_TYPES};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{BatchMeta, DType, TensorListGpu};

pub(super) const SRC: &str = include_str!("reductions.cu");

/// Stack frames of the float sums' tree walk in the common kernels and in the `_deep` ones
/// (`REDUCE_FRAMES`, `REDUCE_DEEP_FRAMES` in reductions.cu). The deep ones fit any tree
/// ([`tree_frames`] is at most 126: 32 reduced groups, 2^63 elements); the common ones keep
/// the local memory the driver reserves per resident thread small.
const FRAMES: usize = 32;
const DEEP_FRAMES: usize = 128;

const THREADS: u32 = 256;
/// Enough blocks to fill any GPU; the threads stride over larger batches.
const MAX_BLOCKS: usize = 1 << 16;
/// A cooperative block has 2^BLOCK_LEVELS threads (`REDUCE_BLOCK_LEVELS` in reductions.cu).
const BLOCK_LEVELS: u32 = 8;
/// When a block per output element pays ([`Launch::cooperative`]): at most this many output
/// elements (a thread each would fill a small part of any GPU)...
const COOPERATIVE_MAX_OUTPUTS: usize = 1 << 14;
/// ... and at least one with this many input elements.
const COOPERATIVE_MIN_COUNT: usize = 1024;

cuda_struct! {
    /// One sample with output elements (`struct ReduceSample` in reductions.cu).
    pub(super) struct ReduceSample {
        r#in: u64,
        out: u64,
        /// `std_dev` / `variance`: the sample's means, one per output element or one for all.
        mean: u64,
        /// Its first output element's index in the batch: threads find their sample by it.
        first: i64,
        /// Input elements per output element.
        count: i64,
        /// Where its groups start in the block's group array (see [`Launch::describe`]).
        dims: i64,
        /// [`norm_factor`] of its divisor.
        norm: f32,
        red_n: i32,
        keep_n: i32,
        mean_one: i32,
    }
}

pub(super) struct ReduceGpu {
    reduce: Reduce,
    params: ParamUpload,
    launch: Launch,
    /// The uploaded block; reused across batches.
    block: Vec<u8>,
}

impl ReduceGpu {
    pub(super) fn new(reduce: Reduce) -> ReduceGpu {
        ReduceGpu { reduce, params: ParamUpload::default(), launch: Launch::default(), block: Vec::new() }
    }
}

/// Where sample `i`'s data lives, for [`Launch::describe`].
struct Addresses {
    input: u64,
    output: u64,
    mean: u64,
    /// Values in the sample's mean (0 without one).
    means: usize,
}

/// One batch's launch, described on the host; reused across batches.
#[derive(Default)]
struct Launch {
    samples: Vec<ReduceSample>,
    /// Per sample: the reduced groups' extents, input strides and volumes after them, then
    /// the kept groups' extents and input strides (the cpu's [`Geometry`]).
    dims: Vec<i64>,
    /// Output elements of the batch: one thread each.
    total: usize,
    /// The most frames any float sum's tree walk holds ([`tree_frames`]).
    frames: usize,
    /// The most input elements of an output element.
    longest: usize,
}

impl Launch {
    /// Describes every sample with output elements: `input` / `output` are the batches'
    /// shapes (from the plan), `mask` the reduced axes.
    fn describe(&mut self, reduce: &Reduce, mask: u64, input: &BatchMeta, output: &BatchMeta, addresses: impl Fn(usize) -> Addresses) {
        self.samples.clear();
        self.dims.clear();
        self.total = 0;
        self.frames = 0;
        self.longest = 0;
        for i in 0..input.len() {
            let outputs = output.numel(i);
            if outputs == 0 {
                continue;
            }
            let g = Geometry::new(input.shape(i), mask);
            let at = addresses(i);
            self.samples.push(ReduceSample {
                r#in: at.input,
                out: at.output,
                mean: at.mean,
                first: self.total as i64,
                count: g.count as i64,
                dims: self.dims.len() as i64,
                norm: norm_factor(reduce.divisor(&g)),
                red_n: g.red_n as i32,
                keep_n: g.keep_n as i32,
                mean_one: (at.means == 1) as i32,
            });
            let (r, k) = (g.red_n, g.keep_n);
            for part in [&g.red_size[..r], &g.red_stride[..r], &g.red_sub[..r], &g.keep_size[..k], &g.keep_stride[..k]] {
                self.dims.extend(part.iter().map(|&v| v as i64));
            }
            if g.count > 0 {
                self.frames = self.frames.max(tree_frames(&g));
            }
            self.longest = self.longest.max(g.count);
            self.total += outputs;
        }
    }

    /// A block per output element: when there are few, with long sums (an image's mean or
    /// per-channel minimum: 3 threads walking 50,000 elements each would leave the GPU idle).
    /// Else a thread per output element, whose neighbours read neighbouring elements when
    /// the innermost axis is kept.
    fn cooperative(&self) -> bool {
        self.total <= COOPERATIVE_MAX_OUTPUTS && self.longest >= COOPERATIVE_MIN_COUNT
    }

    /// The launch's grid, block and `cooperative` argument.
    fn shape(&self) -> (u32, u32, i32) {
        if self.cooperative() {
            (self.total.min(MAX_BLOCKS) as u32, 1 << BLOCK_LEVELS, 1)
        } else {
            (self.total.div_ceil(THREADS as usize).min(MAX_BLOCKS) as u32, THREADS, 0)
        }
    }

    /// The descriptors, then the groups (8-byte aligned: the descriptors' size is a multiple
    /// of 8).
    fn pack(&self, block: &mut Vec<u8>) {
        block.clear();
        block.extend_from_slice(bytemuck::cast_slice(&self.samples));
        block.extend_from_slice(bytemuck::cast_slice(&self.dims));
    }
}

/// The most frames `tree_sum` (reductions.cu) holds at once for an output element of a sample
/// of geometry `g` (with elements): every reduced group's subtrees have one shape, so the
/// deepest path takes the larger (second) half at every halving of every group, and passes a
/// run of slices in every group but the last.
fn tree_frames(g: &Geometry) -> usize {
    let mut frames = g.red_n.saturating_sub(1);
    for a in 0..g.red_n {
        let mut e = g.red_size[a];
        while e >= 2 && e.saturating_mul(g.red_sub[a]) > TREE_THRESHOLD {
            frames += 1;
            e -= e / 2;
        }
    }
    frames
}

/// Every (input, output) pair of the cpu's type maps (`Kind::outputs`: the input type, the
/// 64-bit integer of its signedness, FLOAT), as `REDUCE_PAIRS` in reductions.cu lists them.
const PAIRS: [(DType, DType); 23] = {
    use DType::*;
    [
        (U8, U8), (U8, U64), (U8, F32),
        (I8, I8), (I8, I64), (I8, F32),
        (U16, U16), (U16, U64), (U16, F32),
        (I16, I16), (I16, I64), (I16, F32),
        (U32, U32), (U32, U64), (U32, F32),
        (I32, I32), (I32, I64), (I32, F32),
        (U64, U64), (U64, F32),
        (I64, I64), (I64, F32),
        (F32, F32),
    ]
};

/// One kernel of reductions.cu: a pair of [`PAIRS`], with the deep stack (FLOAT outputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KernelId {
    input: DType,
    output: DType,
    deep: bool,
}

/// The kernels' type names (`channel::short_name`'s, and the 64-bit integers) and C++ types.
fn names(t: DType) -> (&'static str, &'static str) {
    match t {
        DType::U8 => ("u8", "unsigned char"),
        DType::I8 => ("i8", "signed char"),
        DType::U16 => ("u16", "unsigned short"),
        DType::I16 => ("i16", "short"),
        DType::U32 => ("u32", "unsigned int"),
        DType::I32 => ("i32", "int"),
        DType::U64 => ("u64", "unsigned long long"),
        DType::I64 => ("i64", "long long"),
        _ => ("f32", "float"),
    }
}

/// Each kernel's module name and source, made when first used.
static MODULES: [OnceLock<(String, String)>; PAIRS.len() + INPUT_TYPES.len()] = [const { OnceLock::new() }; PAIRS.len() + INPUT_TYPES.len()];

impl KernelId {
    /// `None` for a pair without a kernel.
    fn new(input: DType, output: DType, deep: bool) -> Option<KernelId> {
        (PAIRS.contains(&(input, output)) && (!deep || output == DType::F32)).then_some(KernelId { input, output, deep })
    }

    fn name(self) -> String {
        format!("reduce_{}_{}{}", names(self.input).0, names(self.output).0, if self.deep { "_deep" } else { "" })
    }

    /// reductions.cu with only this kernel: NVRTC takes seconds for all of them, about half a
    /// second for one, and a pipeline uses a few.
    fn source(self) -> String {
        let ((ni, ci), (no, co)) = (names(self.input), names(self.output));
        let only = if self.deep { format!("#define REDUCE_ONLY_DEEP(X) X({ni}, {ci})") } else { format!("#define REDUCE_ONLY(X) X({ni}, {ci}, {no}, {co})") };
        format!("{only}\n{SRC}")
    }

    /// The module (name, source) to compile, the same strings for the whole process.
    fn module(self) -> (&'static str, &'static str) {
        let slot = if self.deep {
            PAIRS.len() + INPUT_TYPES.iter().position(|&t| t == self.input).expect("a pair's input")
        } else {
            PAIRS.iter().position(|&p| p == (self.input, self.output)).expect("checked by new")
        };
        let (name, source) = MODULES[slot].get_or_init(|| (self.name(), self.source()));
        (name, source)
    }
}

/// The kernel's `pre`, `combine` and `post` codes (the enums in reductions.cu).
fn codes(kind: Kind) -> (i32, i32, i32) {
    let pre = match kind.pre() {
        Pre::Identity => 0,
        Pre::Square => 1,
        Pre::Deviation => 2,
    };
    let combine = match kind.combine() {
        Combine::Sum => 0,
        Combine::Min => 1,
        Combine::Max => 2,
    };
    let post = match kind.post() {
        Post::None => 0,
        Post::Scale => 1,
        Post::Root => 2,
    };
    (pre, combine, post)
}

impl GpuOperator for ReduceGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let mean = ws.gpu_inputs.get(1).copied();
        let Plan { meta, mask, zero_fill, in_type, out_type } = self.reduce.plan(&ws.host_view(), input.meta(), mean.map(|m| m.meta()))?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        if zero_fill {
            out.buffer().zero_async().map_err(Error::from)?;
            return Ok(vec![out]);
        }
        self.launch.describe(&self.reduce, mask, input.meta(), out.meta(), |i| Addresses {
            input: input.sample_ptr(i),
            output: out.sample_ptr(i),
            mean: mean.map_or(0, |m| m.sample_ptr(i)),
            means: mean.map_or(0, |m| m.numel(i)),
        });
        if self.launch.total == 0 {
            return Ok(vec![out]);
        }
        let name = &self.reduce.ctx.display_name;
        let tree = out_type == DType::F32 && self.reduce.kind.combine() == Combine::Sum;
        if tree && self.launch.frames > DEEP_FRAMES {
            return Err(Error::Unsupported(format!("internal error (please report this): {name}: a summation tree {} deep", self.launch.frames)));
        }
        let deep = tree && self.launch.frames > FRAMES;
        let kernel = KernelId::new(in_type, out_type, deep)
            .ok_or_else(|| Error::Unsupported(format!("internal error (please report this): {name}: no gpu kernel for {in_type} -> {out_type}")))?;
        self.launch.pack(&mut self.block);
        let base = self.params.upload(ws, &self.block)?;
        let dims = base + std::mem::size_of_val(&self.launch.samples[..]) as u64;
        let (module, source) = kernel.module();
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), module, source, module)?;
        let n = self.launch.samples.len() as i32;
        let total = self.launch.total as i64;
        let (pre, combine, post) = codes(self.reduce.kind);
        let (blocks, threads, cooperative) = self.launch.shape();
        let cfg = sluice_cuda::LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: each descriptor points into `input`, `out` and the mean input, alive and
        // ordered on this stream; its groups address only elements of its input sample, its
        // output elements are `first..first + outputs` of `total`, and its mean holds one
        // value per output element or one (checked by `plan`).
        unsafe {
            ws.stream
                .launch_builder(&f)
                .arg(&base)
                .arg(&n)
                .arg(&dims)
                .arg(&total)
                .arg(&pre)
                .arg(&combine)
                .arg(&post)
                .arg(&cooperative)
                .launch(cfg)
                .map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use crate::ops::gpu_params::HostKernels;

    use super::*;
    use crate::ops::reductions::tests::{op, run};
    use crate::ops::reductions::{INPUT_TYPES, MAX, MEAN, MEAN_SQUARE, MIN, RMS, STD_DEV, SUM, VARIANCE};
    use crate::ops::{ArgValue, OpDef, Workspace};
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        let twins = [("ReduceSample", &ReduceSample::LAYOUT)];
        crate::ops::gpu_params::check_cuda_source("reductions", SRC, &twins);
        // As NVRTC gets them: one kernel per module, which defines it.
        for (input, output, deep) in [(DType::U8, DType::F32, false), (DType::I64, DType::I64, false), (DType::I16, DType::F32, true)] {
            let id = KernelId::new(input, output, deep).unwrap();
            let (name, source) = id.module();
            crate::ops::gpu_params::check_cuda_source(name, &format!("{source}\nstatic auto* const reduce_defined = &{name};"), &twins);
        }
    }

    const KINDS: [Kind; 8] = [Kind::Min, Kind::Max, Kind::Sum, Kind::Mean, Kind::MeanSquare, Kind::Rms, Kind::StdDev, Kind::Variance];

    #[test]
    fn every_pair_of_the_type_maps_has_a_kernel_and_no_other() {
        let mut pairs = Vec::new();
        for kind in KINDS {
            for &input in INPUT_TYPES {
                for &output in kind.outputs(input) {
                    assert!(KernelId::new(input, output, false).is_some(), "{kind:?}: {input} -> {output}");
                    if !pairs.contains(&(input, output)) {
                        pairs.push((input, output));
                    }
                }
            }
        }
        assert_eq!(pairs.len(), PAIRS.len());
        for (input, output) in PAIRS {
            let ((ni, ci), (no, co)) = (names(input), names(output));
            assert!(SRC.contains(&format!("X({ni}, {ci}, {no}, {co})")), "{input} -> {output} is not in REDUCE_PAIRS");
            if output == DType::F32 {
                assert!(SRC.contains(&format!("X({ni}, {ci})")), "{input} is not in REDUCE_FLOAT_SUMS");
            }
            for deep in [false, true] {
                if let Some(id) = KernelId::new(input, output, deep) {
                    assert_eq!(id.module().0, id.name(), "every kernel has a module slot of its own");
                }
            }
        }
        let listed = SRC.split("#define REDUCE_PAIRS(X)").nth(1).unwrap().split("#define").next().unwrap().matches("X(").count();
        assert_eq!(listed, PAIRS.len());
        assert_eq!(KernelId::new(DType::U8, DType::F32, true).unwrap().name(), "reduce_u8_f32_deep");
        assert_eq!(KernelId::new(DType::U8, DType::U64, true), None);
        assert_eq!(KernelId::new(DType::U8, DType::I64, false), None);
        assert!(SRC.contains(&format!("#define REDUCE_FRAMES {FRAMES}\n")) && SRC.contains(&format!("#define REDUCE_DEEP_FRAMES {DEEP_FRAMES}\n")));
        assert!(SRC.contains(&format!("#define REDUCE_TREE_THRESHOLD {TREE_THRESHOLD}\n")));
        assert!(SRC.contains(&format!("#define REDUCE_BLOCK_LEVELS {BLOCK_LEVELS}\n")) && THREADS == 1 << BLOCK_LEVELS);
    }

    /// A C++ program running one launch of reductions.cu on the CPU (tools/cuda_shim/shim.h:
    /// every thread of the grid in turn) from a case file (see [`run_on_host`]); it writes the
    /// most stack frames a tree walk held, then the output bytes.
    const HARNESS: &str = r#"#include <atomic>
#include <cstdlib>
#include <string>
#include "@SHIM@"
static std::atomic<long long> frames_seen{0};
#define REDUCE_FRAMES_SEEN(depth) \
    for (long long d = (depth), seen = frames_seen.load(); seen < d && !frames_seen.compare_exchange_weak(seen, d);) {}
// Cooperative blocks of 8 threads: the tree's top 3 levels split, leaves at every depth.
#define REDUCE_BLOCK_LEVELS 3
#include "@SRC@"
typedef void (*Kernel)(REDUCE_PARAMS);
struct Entry { const char* name; Kernel f; };
#define ENTRY(NI, I, NO, O) {"reduce_" #NI "_" #NO, reduce_##NI##_##NO},
#define DEEP_ENTRY(NI, I) {"reduce_" #NI "_f32_deep", reduce_##NI##_f32_deep},
static const Entry entries[] = {REDUCE_PAIRS(ENTRY) REDUCE_FLOAT_SUMS(DEEP_ENTRY)};

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}
// A buffer of `len` bytes from the file, 8-byte aligned.
static std::vector<unsigned long long> read_buffer(unsigned long long* len) {
    read_exactly(len, 8);
    std::vector<unsigned long long> v(*len / 8 + 1);
    read_exactly(v.data(), *len);
    return v;
}

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    int pre, combine, post, n, threads, blocks, cooperative;
    long long total;
    read_exactly(&pre, 4); read_exactly(&combine, 4); read_exactly(&post, 4);
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4); read_exactly(&cooperative, 4);
    read_exactly(&total, 8);
    unsigned long long block_len, in_len, mean_len, out_len;
    std::vector<unsigned long long> block = read_buffer(&block_len);
    std::vector<unsigned long long> input = read_buffer(&in_len);
    std::vector<unsigned long long> mean = read_buffer(&mean_len);
    read_exactly(&out_len, 8);
    // Bytes no thread writes show as 0xab.
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    ReduceSample* samples = (ReduceSample*)block.data();
    for (int j = 0; j < n; j++) {
        samples[j].in += (unsigned long long)input.data();
        samples[j].out += (unsigned long long)out.data();
        samples[j].mean += (unsigned long long)mean.data();
    }
    const long long* dims = (const long long*)((const char*)block.data() + n * sizeof(ReduceSample));
    Kernel kernel = nullptr;
    for (const Entry& e : entries)
        if (name == e.name) kernel = e.f;
    if (!kernel) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    blockDim = {(unsigned)threads, 1, 1};
    gridDim = {(unsigned)blocks, 1, 1};
    for (unsigned b = 0; b < (unsigned)blocks; b++) {
        if (cooperative) {
            // The block's threads as OS threads meeting at a barrier, one block at a time
            // (its __shared__ arrays are statics).
            std::barrier<> barrier(threads);
            block_barrier = &barrier;
            std::vector<std::thread> block;
            for (unsigned t = 0; t < (unsigned)threads; t++)
                block.emplace_back([&, b, t] {
                    blockIdx = {b, 0, 0};
                    threadIdx = {t, 0, 0};
                    kernel(samples, n, dims, total, pre, combine, post, cooperative);
                });
            for (std::thread& t : block) t.join();
            continue;
        }
        for (unsigned t = 0; t < (unsigned)threads; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            kernel(samples, n, dims, total, pre, combine, post, cooperative);
        }
    }
    fwrite(&frames_seen, 8, 1, stdout);
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    /// The kernels of `reductions.cu` on the host, built once per test run.
    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("reductions", SRC, HARNESS))
    }

    /// Runs kernel `name` on the host over `launch` (addresses in it are offsets into
    /// `input`, the output and `mean`); returns the most frames seen and the output bytes.
    fn run_on_host(name: &str, kind: Kind, launch: &Launch, cooperative: bool, input: &[u8], mean: &[u8], out_len: usize) -> (usize, Vec<u8>) {
        let (pre, combine, post) = codes(kind);
        // Few threads and blocks: the grid-stride loop and the sample search both run. A
        // cooperative block has the harness's 8 threads (REDUCE_BLOCK_LEVELS 3).
        let (threads, blocks) = if cooperative { (8i32, launch.total.min(3) as i32) } else { (32, launch.total.div_ceil(32).min(3) as i32) };
        let mut block = Vec::new();
        launch.pack(&mut block);
        let mut case = Vec::new();
        case.extend((name.len() as u32).to_le_bytes());
        case.extend(name.as_bytes());
        for v in [pre, combine, post, launch.samples.len() as i32, threads, blocks, cooperative as i32] {
            case.extend(v.to_le_bytes());
        }
        case.extend((launch.total as i64).to_le_bytes());
        for buf in [&block[..], input, mean] {
            case.extend((buf.len() as u64).to_le_bytes());
            case.extend(buf);
        }
        case.extend((out_len as u64).to_le_bytes());
        let stdout = harness().run(name, &case);
        assert_eq!(stdout.len(), 8 + out_len);
        let frames = i64::from_le_bytes(stdout[..8].try_into().unwrap()) as usize;
        (frames, stdout[8..].to_vec())
    }

    /// Equal bits, any NaN equal to any NaN for FLOAT (the GPU's NaNs are canonical).
    fn same_bits(t: DType, a: &[u8], b: &[u8]) -> bool {
        if t != DType::F32 {
            return a == b;
        }
        a.len() == b.len()
            && a.chunks_exact(4).zip(b.chunks_exact(4)).all(|(x, y)| {
                let (x, y) = (f32::from_le_bytes(x.try_into().unwrap()), f32::from_le_bytes(y.try_into().unwrap()));
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            })
    }

    /// Reduces `x` (and `mean`) with the cpu backend and with reductions.cu on the host, as
    /// the gpu backend describes the batch, and compares the bits; returns the frames the
    /// tree walk held.
    fn check(def: &OpDef, kind: Kind, args: Vec<(&str, ArgValue)>, x: &TensorList, mean: Option<&TensorList>) -> usize {
        let what = format!("{kind:?} {args:?} of {} {:?}", x.dtype(), (0..x.len()).map(|i| x.shape(i).to_vec()).collect::<Vec<_>>());
        let mut r = op(def, kind, args).unwrap();
        let inputs: Vec<&TensorList> = std::iter::once(x).chain(mean).collect();
        let want = run(&mut r, &inputs).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let ws = Workspace { inputs: inputs.clone(), arg_inputs: Default::default(), iteration: 0, batch_size: x.len(), frames: None, pool: &pool };
        let plan = r.plan(&ws, x.meta(), mean.map(|m| m.meta())).unwrap();
        if plan.zero_fill {
            return 0; // a memset on the gpu
        }
        let mut launch = Launch::default();
        launch.describe(&r, plan.mask, x.meta(), &plan.meta, |i| Addresses {
            input: x.offset(i) as u64,
            output: plan.meta.offset(i) as u64,
            mean: mean.map_or(0, |m| m.offset(i) as u64),
            means: mean.map_or(0, |m| m.numel(i)),
        });
        if launch.total == 0 {
            return 0;
        }
        let tree = plan.out_type == DType::F32 && kind.combine() == Combine::Sum;
        let deep = tree && launch.frames > FRAMES;
        let name = KernelId::new(plan.in_type, plan.out_type, deep).unwrap().name();
        let bytes = |t: &TensorList| t.buffer().as_slice()[..t.total_bytes()].to_vec();
        // Both modes, whichever the gpu would pick for this batch; blocks only for batches of
        // few outputs (where the gpu uses them): on the host, a block's threads are OS threads
        // meeting at barriers, slow for thousands of outputs.
        let mut frames = 0;
        let modes: &[bool] = if launch.total <= 300 { &[false, true] } else { &[false] };
        for &cooperative in modes {
            let (seen, got) = run_on_host(&name, kind, &launch, cooperative, &bytes(x), &mean.map(bytes).unwrap_or_default(), plan.meta.total_bytes());
            for i in 0..x.len() {
                let g = &got[plan.meta.byte_range(i)];
                assert!(same_bits(plan.out_type, want.bytes(i), g), "{what} (cooperative: {cooperative}): sample {i}: cpu {:?} vs host-run kernel {:?}", want.bytes(i), g);
            }
            if cooperative {
                // A block's threads walk subtrees: no deeper than the whole tree.
                assert!(seen <= frames, "{what}: cooperative frames {seen} > {frames}");
            } else {
                assert_eq!(seen, if tree { launch.frames } else { 0 }, "{what}: frames");
                frames = seen;
            }
        }
        frames
    }

    /// A batch of `t` with `shapes`: integers over their whole range (sums wrap, UINT16
    /// squares overflow an int), floats of both signs over six orders of magnitude.
    fn batch(t: DType, shapes: &[Vec<usize>], seed: u64) -> TensorList {
        let mut x = TensorList::new(t, shapes[0].len(), shapes.iter().map(|s| s.as_slice()));
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for s in x.samples_mut() {
            if t == DType::F32 {
                for c in s.chunks_exact_mut(4) {
                    let r = next();
                    let unit = (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    let scale = [1e-3f32, 0.1, 1.0, 10.0, 1e3][(r % 5) as usize];
                    c.copy_from_slice(&(unit * scale).to_le_bytes());
                }
            } else {
                s.iter_mut().for_each(|b| *b = next() as u8);
            }
        }
        x
    }

    fn def(kind: Kind) -> &'static OpDef {
        match kind {
            Kind::Min => &MIN,
            Kind::Max => &MAX,
            Kind::Sum => &SUM,
            Kind::Mean => &MEAN,
            Kind::MeanSquare => &MEAN_SQUARE,
            Kind::Rms => &RMS,
            Kind::StdDev => &STD_DEV,
            Kind::Variance => &VARIANCE,
        }
    }

    /// Every reduction of `x` with `axes` (every `dtype` its type map allows; `std_dev` and
    /// `variance` with the mean of the same axes and with one mean for all, `ddof` 0 and 1).
    fn check_all(x: &TensorList, axes: &[(&'static str, ArgValue)]) -> usize {
        let mut frames = 0;
        for kind in KINDS {
            if kind.with_mean() {
                let mut m = op(&MEAN, Kind::Mean, axes.to_vec()).unwrap();
                let per_output = run(&mut m, &[x]).unwrap();
                let n = x.len();
                let one = TensorList::from_samples(&vec![vec![]; n], &vec![vec![0.25f32]; n]);
                for mean in [&per_output, &one] {
                    for ddof in [0, 1] {
                        let mut args = axes.to_vec();
                        args.push(("ddof", ArgValue::Int(ddof)));
                        frames = frames.max(check(def(kind), kind, args, x, Some(mean)));
                    }
                }
                continue;
            }
            let dtypes: Vec<Option<DType>> = match kind {
                Kind::Min | Kind::Max => vec![None],
                _ => std::iter::once(None).chain(kind.outputs(x.dtype()).iter().map(|&d| Some(d))).collect(),
            };
            for dtype in dtypes {
                let mut args = axes.to_vec();
                if let Some(d) = dtype {
                    args.push(("dtype", ArgValue::Int(d as i64)));
                }
                frames = frames.max(check(def(kind), kind, args, x, None));
            }
        }
        frames
    }

    #[test]
    fn the_kernel_run_on_the_host_gives_the_cpu_bits() {
        // tests/test_reductions.py's shapes: runs above and below 32 elements, a reduced outer
        // axis over a long kept inner one, an empty sample.
        let shapes: Vec<Vec<usize>> = [[5, 7, 3], [40, 45, 3], [1, 9, 2], [6, 4, 67], [70, 3, 1], [0, 4, 3]].iter().map(|s| s.to_vec()).collect();
        let axes_cases: Vec<Vec<(&str, ArgValue)>> = vec![
            vec![],
            vec![("axes", ArgValue::IntList(vec![]))],
            vec![("axes", ArgValue::IntList(vec![0]))],
            vec![("axes", ArgValue::IntList(vec![1]))],
            vec![("axes", ArgValue::IntList(vec![2]))],
            vec![("axes", ArgValue::IntList(vec![0, 1]))],
            vec![("axes", ArgValue::IntList(vec![0, 2]))],
            vec![("axes", ArgValue::IntList(vec![1, 2]))],
            vec![("axes", ArgValue::IntList(vec![0, 2])), ("keep_dims", ArgValue::Bool(true))],
        ];
        let mut frames = 0;
        for (k, &t) in INPUT_TYPES.iter().enumerate() {
            let x = batch(t, &shapes, k as u64 + 1);
            for axes in &axes_cases {
                frames = frames.max(check_all(&x, axes));
            }
        }
        assert!(frames > 1, "the float sums' trees were walked");
    }

    #[test]
    fn long_sums_nan_infinities_signed_zeros_and_scalars_give_the_cpu_bits() {
        let long = batch(DType::F32, &[vec![300, 200], vec![1, 70000], vec![257, 255]], 11);
        for axes in [vec![], vec![("axes", ArgValue::IntList(vec![0]))], vec![("axes", ArgValue::IntList(vec![1]))]] {
            check_all(&long, &axes);
        }
        let (inf, nan) = (f32::INFINITY, f32::NAN);
        let special = TensorList::from_samples(
            &[vec![2, 4], vec![2, 4], vec![2, 4]],
            &[
                vec![nan, 1.0, -inf, 5.0, 0.0, -0.0, inf, inf],
                vec![-0.0, 0.0, -0.0, 0.0, nan, nan, nan, nan],
                vec![3.4e38, 3.4e38, -3.4e38, 1.0, -inf, -inf, 2.0, -0.0],
            ],
        );
        for axes in [vec![], vec![("axes", ArgValue::IntList(vec![0]))], vec![("axes", ArgValue::IntList(vec![1]))], vec![("axes", ArgValue::IntList(vec![]))]] {
            check_all(&special, &axes);
        }
        // Zeros of both signs spread over a cooperative block's threads: the first in memory
        // order is the minimum (and the maximum where nothing is above zero).
        let zeros = |k: usize| -> Vec<f32> { (0..1500).map(|j| if (j * 7 + k) % 5 == 0 { -0.0 } else if j % 3 == 0 { 0.0 } else if k == 0 { 1.0 } else { -1.0 }).collect() };
        let signed = TensorList::from_samples(&[vec![3, 500], vec![1, 1500]], &[zeros(0), zeros(1)]);
        check_all(&signed, &[]);
        let signed_2d = TensorList::from_samples(&[vec![5, 300]], &[zeros(2)]);
        for axes in [vec![("axes", ArgValue::IntList(vec![0]))], vec![("axes", ArgValue::IntList(vec![1]))]] {
            check_all(&signed_2d, &axes);
        }
        let scalars = TensorList::from_samples(&[vec![], vec![], vec![], vec![]], &[vec![3.0f32], vec![-2.0], vec![0.0], vec![-0.0]]);
        check_all(&scalars, &[]);
        let wrap = TensorList::from_samples(&[vec![3, 100]], &[vec![65535u16; 300]]);
        check_all(&wrap, &[]);
        check_all(&wrap, &[("axes", ArgValue::IntList(vec![1]))]);
    }

    #[test]
    fn a_tree_deeper_than_the_common_stack_takes_the_deep_kernels() {
        // 16 reduced groups between kept axes of extent 1 (the first of extent 2): 9 of
        // extent 3 (two halvings each), 6 of extent 1, and 64 elements innermost.
        let mut shape = Vec::new();
        let mut axes = Vec::new();
        for (j, e) in [3usize; 9].into_iter().chain([1; 6]).chain([64]).enumerate() {
            if j > 0 {
                shape.push(if j == 1 { 2 } else { 1 });
            }
            axes.push(shape.len() as i64);
            shape.push(e);
        }
        let g = Geometry::new(&shape, axes.iter().fold(0u64, |m, &a| m | 1u64 << a));
        assert_eq!((g.red_n, tree_frames(&g)), (16, 34));
        let axes_arg = || vec![("axes", ArgValue::IntList(axes.clone()))];
        for t in [DType::F32, DType::U8] {
            let x = batch(t, &[shape.clone()], 5);
            let mut frames = 0;
            for (kind, dtype) in [(Kind::Sum, Some(DType::F32)), (Kind::Mean, None), (Kind::Rms, None), (Kind::Min, None)] {
                let mut args = axes_arg();
                if let Some(d) = dtype {
                    args.push(("dtype", ArgValue::Int(d as i64)));
                }
                frames = frames.max(check(def(kind), kind, args, &x, None));
            }
            let mean = run(&mut op(&MEAN, Kind::Mean, axes_arg()).unwrap(), &[&x]).unwrap();
            for kind in [Kind::StdDev, Kind::Variance] {
                frames = frames.max(check(def(kind), kind, axes_arg(), &x, Some(&mean)));
            }
            assert_eq!(frames, 34, "{t}");
        }
    }
}
