//! GPU backends of `fn.experimental.dilate` / `erode` and `fn.experimental.median_blur`: the
//! cpu twins plan the batch (layout, type, per-sample windows); `morphology.cu` filters it.
//! Dilation/erosion: per iteration one launch along the rows, then one along the columns
//! (keys in pool memory between passes); the median: one launch per batch.

use sluice_cuda::DeviceBuffer;

use super::median::MedianBlur;
use super::Morphology;
use crate::error::{Error, Result};
use crate::ops::filters::filter::Geometry;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = include_str!("morphology.cu");

cuda_struct! {
    /// One sample's pass along one axis (`struct MorphPass` in morphology.cu).
    pub(super) struct MorphPass {
        r#in: u64,
        out: u64,
        outer: i64,
        len: i64,
        inner: i64,
        k: i32,
        a: i32,
        border: i32,
        dilate: i32,
        in_data: i32,
        out_data: i32,
        pad0: i32,
        pad1: i32,
    }
}

cuda_struct! {
    /// One sample of the median filter (`struct MedianSample` in morphology.cu).
    pub(super) struct MedianSample {
        r#in: u64,
        out: u64,
        slices: i64,
        h: i32,
        w: i32,
        c: i32,
        kw: i32,
        kh: i32,
        pad: i32,
    }
}

/// The kernels' name suffix of a type.
fn suffix(t: DType) -> &'static str {
    match t {
        DType::U8 => "u8",
        DType::U16 => "u16",
        _ => "f32",
    }
}

/// Bytes of a key of type `t` (FLOAT's is an int).
fn key_size(t: DType) -> usize {
    t.size()
}

/// The descriptors of every pass, in launch order (`2 * iterations` groups of `n`), for
/// samples of `dims` whose data is at `input[i]` / `output[i]` and whose keys may go to the
/// scratch planes `scratch(p, i)` (p = 0 or 1).
pub(super) fn describe_passes(m: &Morphology, dims: &[(usize, usize, usize, usize)], input: &[u64], output: &[u64], scratch: impl Fn(usize, usize) -> u64) -> Vec<MorphPass> {
    let n = dims.len();
    let mut passes = Vec::with_capacity(2 * m.iterations * n);
    for it in 0..m.iterations {
        for axis in 0..2 {
            for (i, &(slices, h, w, c)) in dims.iter().enumerate() {
                let plan = &m.plans[i];
                let first = it == 0 && axis == 0;
                let last = it + 1 == m.iterations && axis == 1;
                // Rows read the previous iteration's result (plane 1) or the input, write plane
                // 0; columns read plane 0 and write plane 1 or the output.
                let (src, dst) = if axis == 0 { (if first { input[i] } else { scratch(1, i) }, scratch(0, i)) } else { (scratch(0, i), if last { output[i] } else { scratch(1, i) }) };
                let (outer, len, inner, k, a) = if axis == 0 { (slices * h, w, c, plan.mask.0, plan.anchor.0) } else { (slices, h, w * c, plan.mask.1, plan.anchor.1) };
                passes.push(MorphPass {
                    r#in: src,
                    out: dst,
                    outer: outer as i64,
                    len: len as i64,
                    inner: inner as i64,
                    k: k as i32,
                    a: a as i32,
                    border: m.border as i32,
                    dilate: (m.op == super::Op::Dilate) as i32,
                    in_data: first as i32,
                    out_data: last as i32,
                    pad0: 0,
                    pad1: 0,
                });
            }
        }
    }
    passes
}

pub(super) struct MorphologyGpu {
    morph: Morphology,
    params: ParamUpload,
}

impl MorphologyGpu {
    pub(super) fn new(morph: Morphology) -> MorphologyGpu {
        MorphologyGpu { morph, params: ParamUpload::default() }
    }
}

fn sample_dims(geometry: Geometry, input: &TensorListGpu) -> Vec<(usize, usize, usize, usize)> {
    (0..input.len()).map(|i| geometry.split(input.meta().shape(i))).collect()
}

impl GpuOperator for MorphologyGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let geometry = self.morph.plan(&ws.host_view(), input.meta())?;
        let dtype = input.meta().dtype();
        let out = TensorListGpu::alloc(input.meta().clone(), ws.device, ws.stream)?;
        let n = input.len();
        let dims = sample_dims(geometry, input);
        let mut offsets = Vec::with_capacity(n);
        let mut total = 0usize;
        for i in 0..n {
            offsets.push(total);
            total += input.numel(i);
        }
        if total == 0 {
            return Ok(vec![out]);
        }
        // Plane 0 holds the rows' result, plane 1 the columns' between iterations.
        let planes = if self.morph.iterations > 1 { 2 } else { 1 };
        let ks = key_size(dtype);
        let scratch = DeviceBuffer::alloc(ws.device, ws.stream, planes * total * ks).map_err(Error::from)?;
        let at = |p: usize, i: usize| scratch.device_ptr() + ((p * total + offsets[i]) * ks) as u64;
        let inputs: Vec<u64> = (0..n).map(|i| input.sample_ptr(i)).collect();
        let outputs: Vec<u64> = (0..n).map(|i| out.sample_ptr(i)).collect();
        let passes = describe_passes(&self.morph, &dims, &inputs, &outputs, at);
        let base = self.params.upload(ws, bytemuck::cast_slice(&passes))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "morphology", SRC, &format!("morph_{}", suffix(dtype)))?;
        let max_elems = (0..n).map(|i| input.numel(i)).max().unwrap_or(0);
        for group in 0..2 * self.morph.iterations {
            let descs = base + (group * n * std::mem::size_of::<MorphPass>()) as u64;
            // SAFETY: the descriptors point into `input`, `out` and `scratch` (alive until the
            // stream passes these launches: the scratch is freed on the stream), each pass
            // reading what the previous one wrote, in stream order; every index stays inside
            // its sample's outer * len * inner elements.
            unsafe {
                launch_records::<MorphPass>(&ws.stream, &f, descs, n, max_elems)?;
            }
        }
        Ok(vec![out])
    }
}

pub(super) struct MedianGpu {
    median: MedianBlur,
    params: ParamUpload,
}

impl MedianGpu {
    pub(super) fn new(median: MedianBlur) -> MedianGpu {
        MedianGpu { median, params: ParamUpload::default() }
    }
}

/// The median descriptor of a sample.
pub(super) fn describe_median((slices, h, w, c): (usize, usize, usize, usize), (kw, kh): (usize, usize), input: u64, output: u64) -> MedianSample {
    MedianSample { r#in: input, out: output, slices: slices as i64, h: h as i32, w: w as i32, c: c as i32, kw: kw as i32, kh: kh as i32, pad: 0 }
}

impl GpuOperator for MedianGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let geometry = self.median.plan(&ws.host_view(), input.meta())?;
        let dtype = input.meta().dtype();
        let out = TensorListGpu::alloc(input.meta().clone(), ws.device, ws.stream)?;
        let n = input.len();
        let max_elems = (0..n).map(|i| input.numel(i)).max().unwrap_or(0);
        if max_elems == 0 {
            return Ok(vec![out]);
        }
        let descs: Vec<MedianSample> = sample_dims(geometry, input).into_iter().enumerate().map(|(i, d)| describe_median(d, self.median.windows[i], input.sample_ptr(i), out.sample_ptr(i))).collect();
        let base = self.params.upload(ws, bytemuck::cast_slice(&descs))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "morphology", SRC, &format!("median_{}", suffix(dtype)))?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream); window reads are clamped into the sample, writes stay below its elements.
        unsafe {
            launch_records::<MedianSample>(&ws.stream, &f, base, n, max_elems)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::median::tests::reference as median_reference;
    use super::super::tests::{float_values, reference as morph_reference, values};
    use super::super::{Keyed, Op, SamplePlan};
    use super::*;
    use crate::ops::filters::filter::Border;
    use crate::ops::gpu_params::HostKernels;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("morphology", SRC, &[("MorphPass", &MorphPass::LAYOUT), ("MedianSample", &MedianSample::LAYOUT)]);
    }

    /// A C++ program running launches of morphology.cu on the CPU (tools/cuda_shim/shim.h):
    /// a case file holds a kernel name, the grid, the descriptors of each launch (whose
    /// pointers are byte offsets into one arena), and the arena; it writes the arena back.
    const HARNESS: &str = r#"#include <cstdlib>
#include <string>
#include "@SHIM@"
#include "@SRC@"

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}

template <typename S> static void run(void (*kernel)(const S*), unsigned launches, unsigned n, unsigned threads, unsigned blocks, std::vector<unsigned long long>& arena) {
    std::vector<S> descs((size_t)launches * n);
    read_exactly(descs.data(), descs.size() * sizeof(S));
    unsigned long long arena_len;
    read_exactly(&arena_len, 8);
    arena.assign(arena_len / 8 + 1, 0);
    read_exactly(arena.data(), arena_len);
    for (S& d : descs) {
        d.in += (unsigned long long)arena.data();
        d.out += (unsigned long long)arena.data();
    }
    blockDim = {threads, 1, 1};
    gridDim = {blocks, n, 1};
    for (unsigned l = 0; l < launches; l++)
        for (unsigned y = 0; y < n; y++)
            for (unsigned b = 0; b < blocks; b++)
                for (unsigned t = 0; t < threads; t++) {
                    blockIdx = {b, y, 0};
                    threadIdx = {t, 0, 0};
                    kernel(descs.data() + (size_t)l * n);
                }
    fwrite(arena.data(), 1, arena_len, stdout);
}

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len, launches, n, threads, blocks;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    read_exactly(&launches, 4); read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    std::vector<unsigned long long> arena;
    if (name == "morph_u8") run<MorphPass>(morph_u8, launches, n, threads, blocks, arena);
    else if (name == "morph_u16") run<MorphPass>(morph_u16, launches, n, threads, blocks, arena);
    else if (name == "morph_f32") run<MorphPass>(morph_f32, launches, n, threads, blocks, arena);
    else if (name == "median_u8") run<MedianSample>(median_u8, launches, n, threads, blocks, arena);
    else if (name == "median_u16") run<MedianSample>(median_u16, launches, n, threads, blocks, arena);
    else if (name == "median_f32") run<MedianSample>(median_f32, launches, n, threads, blocks, arena);
    else { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    return 0;
}
"#;

    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("morphology", SRC, HARNESS))
    }

    /// Runs `launches` launches of kernel `name` over `descs` (`launches * n` of them) on an
    /// arena; returns the arena afterwards.
    fn run_on_host<S: bytemuck::Pod>(name: &str, launches: usize, n: usize, descs: &[S], arena: &[u8]) -> Vec<u8> {
        let (threads, blocks) = (32u32, 3u32);
        let mut case = Vec::new();
        case.extend((name.len() as u32).to_le_bytes());
        case.extend(name.as_bytes());
        for v in [launches as u32, n as u32, threads, blocks] {
            case.extend(v.to_le_bytes());
        }
        case.extend(bytemuck::cast_slice::<S, u8>(descs));
        case.extend((arena.len() as u64).to_le_bytes());
        case.extend(arena);
        let out = harness().run(name, &case);
        assert_eq!(out.len(), arena.len());
        out
    }

    const SHAPES: [(usize, usize, usize, usize); 6] = [(1, 7, 9, 3), (2, 5, 4, 1), (1, 1, 6, 2), (1, 6, 1, 1), (3, 2, 3, 4), (1, 13, 11, 1)];

    fn morph_case<E: Keyed>(gen: impl Fn(usize, u64) -> Vec<E>, name: &str) {
        let borders = [Border::Constant, Border::Clamp, Border::Reflect1001, Border::Reflect101, Border::Wrap];
        let masks = [((3, 3), (1, 1)), ((4, 2), (3, 0)), ((5, 7), (0, 6)), ((16, 3), (8, 1)), ((1, 6), (0, 2))];
        let esize = std::mem::size_of::<E>();
        let mut seed = 0;
        for border in borders {
            for iterations in [1usize, 2, 3] {
                for op in [Op::Dilate, Op::Erode] {
                    seed += 1;
                    let plans: Vec<SamplePlan> = (0..SHAPES.len()).map(|i| {
                        let (mask, anchor) = masks[(i + seed as usize) % masks.len()];
                        SamplePlan { mask, anchor }
                    }).collect();
                    let m = Morphology { ctx: super::super::tests::ctx_of(&super::super::DILATE, vec![], &[]).unwrap(), op, border, iterations, plans: plans.clone() };
                    // Arena: inputs, outputs, then two key planes.
                    let sizes: Vec<usize> = SHAPES.iter().map(|d| d.0 * d.1 * d.2 * d.3).collect();
                    let total: usize = sizes.iter().sum();
                    let mut offs = Vec::new();
                    let mut acc = 0;
                    for s in &sizes {
                        offs.push(acc);
                        acc += s;
                    }
                    let data: Vec<E> = gen(total, seed);
                    let mut arena = vec![0u8; total * esize * 4];
                    arena[..total * esize].copy_from_slice(bytemuck::cast_slice(&data));
                    let inputs: Vec<u64> = offs.iter().map(|&o| (o * esize) as u64).collect();
                    let outputs: Vec<u64> = offs.iter().map(|&o| ((total + o) * esize) as u64).collect();
                    let passes = describe_passes(&m, &SHAPES, &inputs, &outputs, |p, i| ((2 * total + p * total + offs[i]) * esize) as u64);
                    let got = run_on_host(name, 2 * iterations, SHAPES.len(), &passes, &arena);
                    for (i, &dims) in SHAPES.iter().enumerate() {
                        let src = &data[offs[i]..offs[i] + sizes[i]];
                        let want = morph_reference(src, dims, &plans[i], border, iterations, op == Op::Dilate);
                        let got = &got[(total + offs[i]) * esize..(total + offs[i] + sizes[i]) * esize];
                        assert_eq!(got, bytemuck::cast_slice::<E, u8>(&want), "{name} {dims:?} {:?} {border:?} x{iterations} {op:?}", plans[i]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_morphology_kernel_run_on_the_host_equals_the_definition() {
        morph_case::<u8>(|n, seed| values(n, seed, |r| (r >> 24) as u8), "morph_u8");
        morph_case::<u16>(|n, seed| values(n, seed, |r| (r >> 20) as u16), "morph_u16");
        morph_case::<f32>(float_values, "morph_f32");
    }

    fn median_case<E: Keyed>(gen: impl Fn(usize, u64) -> Vec<E>, name: &str) {
        let windows = [(3, 3), (1, 1), (1, 5), (5, 3), (5, 5), (7, 7), (9, 9), (3, 29), (11, 11)];
        let esize = std::mem::size_of::<E>();
        for (k, &win) in windows.iter().enumerate() {
            let sizes: Vec<usize> = SHAPES.iter().map(|d| d.0 * d.1 * d.2 * d.3).collect();
            let total: usize = sizes.iter().sum();
            let data: Vec<E> = gen(total, k as u64 + 50);
            let mut arena = vec![0u8; 2 * total * esize];
            arena[..total * esize].copy_from_slice(bytemuck::cast_slice(&data));
            let mut offs = Vec::new();
            let mut acc = 0;
            for s in &sizes {
                offs.push(acc);
                acc += s;
            }
            let descs: Vec<MedianSample> = SHAPES.iter().enumerate().map(|(i, &d)| describe_median(d, win, (offs[i] * esize) as u64, ((total + offs[i]) * esize) as u64)).collect();
            let got = run_on_host(name, 1, SHAPES.len(), &descs, &arena);
            for (i, &dims) in SHAPES.iter().enumerate() {
                let want = median_reference(&data[offs[i]..offs[i] + sizes[i]], dims, win);
                let got = &got[(total + offs[i]) * esize..(total + offs[i] + sizes[i]) * esize];
                assert_eq!(got, bytemuck::cast_slice::<E, u8>(&want), "{name} {dims:?} {win:?}");
            }
        }
    }

    #[test]
    fn the_median_kernel_run_on_the_host_equals_the_definition() {
        median_case::<u8>(|n, seed| values(n, seed, |r| (r >> 24) as u8), "median_u8");
        median_case::<u16>(|n, seed| values(n, seed, |r| (r >> 20) as u16), "median_u16");
        median_case::<f32>(float_values, "median_f32");
    }
}
