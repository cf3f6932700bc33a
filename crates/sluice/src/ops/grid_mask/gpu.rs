//! GPU backend of `fn.grid_mask`: the cpu twin plans the batch (checks, per-sample
//! arguments, each sample's grid in DALI's f32 values); one descriptor per sample is
//! uploaded and one launch of `grid_mask.cu` writes every sample with the cpu kernel's
//! operations, so both backends give the same bits.

use super::{GridMask, SamplePlan};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("grid_mask.cu");

cuda_struct! {
    /// One sample (`struct GridMaskSample` in grid_mask.cu).
    pub(super) struct GridMaskSample {
        r#in: u64,
        out: u64,
        /// height * width * channels.
        numel: i64,
        width: i64,
        channels: i64,
        /// The grid ([`super::Grid`]): steps per pixel and shift, in tile units.
        ca: f32,
        sa: f32,
        sx: f32,
        sy: f32,
        ratio: f32,
        pad: i32,
    }
}

/// The descriptor of a sample planned as `s`, read from `input` and written to `output`
/// (device addresses).
pub(super) fn describe(s: &SamplePlan, input: u64, output: u64) -> GridMaskSample {
    let i64_of = |v: usize| i64::try_from(v).expect("sizes fit in i64");
    let g = s.grid;
    GridMaskSample {
        r#in: input,
        out: output,
        numel: i64_of(s.height * s.width * s.channels),
        width: i64_of(s.width),
        channels: i64_of(s.channels),
        ca: g.ca,
        sa: g.sa,
        sx: g.sx,
        sy: g.sy,
        ratio: g.ratio,
        pad: 0,
    }
}

pub(super) struct GridMaskGpu {
    grid_mask: GridMask,
    params: ParamUpload,
}

impl GridMaskGpu {
    pub(super) fn new(grid_mask: GridMask) -> GridMaskGpu {
        GridMaskGpu { grid_mask, params: ParamUpload::default() }
    }
}

impl GpuOperator for GridMaskGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.grid_mask.plan_batch(&ws.host_view(), input.meta())?;
        let dtype = meta.dtype();
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let max_numel = (0..input.len()).map(|i| input.numel(i)).max().unwrap_or(0);
        if max_numel == 0 {
            return Ok(vec![out]);
        }
        let desc: Vec<GridMaskSample> = self.grid_mask.samples.iter().enumerate().map(|(i, s)| describe(s, input.sample_ptr(i), out.sample_ptr(i))).collect();
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let kernel = format!("grid_mask_{}", short_name(dtype).expect("types checked by plan"));
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "grid_mask", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream), whose samples hold `numel` elements of the kernel's type; the kernel
        // touches elements below `numel` only.
        unsafe {
            launch_records::<GridMaskSample>(&ws.stream, &f, base, desc.len(), max_numel)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use crate::ops::gpu_params::HostKernels;

    use super::super::tests::{op, run};
    use super::*;
    use crate::ops::ArgValue;
    use crate::tensor::{DType, TensorList};

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("grid_mask", SRC, &[("GridMaskSample", &GridMaskSample::LAYOUT)]);
    }

    /// A C++ program running one launch of grid_mask.cu on the CPU (tools/cuda_shim/shim.h,
    /// every thread of the grid in turn) from a case file (see [`run_on_host`]); it writes
    /// the output bytes.
    const HARNESS: &str = r#"#include <cstdlib>
#include <string>
#include "@SHIM@"
#include "@SRC@"
typedef void (*Kernel)(const GridMaskSample*);

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned name_len, n, threads, blocks;
    read_exactly(&name_len, 4);
    std::string name(name_len, '\0');
    read_exactly(&name[0], name_len);
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    std::vector<GridMaskSample> samples(n);
    read_exactly(samples.data(), n * sizeof(GridMaskSample));
    unsigned long long in_len, out_len;
    read_exactly(&in_len, 8);
    std::vector<unsigned long long> input(in_len / 8 + 1);
    read_exactly(input.data(), in_len);
    read_exactly(&out_len, 8);
    // Bytes no thread writes show as 0xab.
    std::vector<unsigned long long> out(out_len / 8 + 1, 0xababababababababULL);
    for (GridMaskSample& s : samples) {
        s.in += (unsigned long long)input.data();
        s.out += (unsigned long long)out.data();
    }
    Kernel kernel = name == "grid_mask_u8" ? grid_mask_u8 : name == "grid_mask_i16" ? grid_mask_i16
                  : name == "grid_mask_i32" ? grid_mask_i32 : name == "grid_mask_f32" ? grid_mask_f32 : nullptr;
    if (!kernel) { fprintf(stderr, "no kernel %s\n", name.c_str()); return 3; }
    blockDim = {threads, 1, 1};
    gridDim = {blocks, n, 1};
    for (unsigned y = 0; y < n; y++)
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < threads; t++) {
                blockIdx = {b, y, 0};
                threadIdx = {t, 0, 0};
                kernel(samples.data());
            }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    /// The kernels of `grid_mask.cu` on the host, built once per test run.
    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("grid_mask", SRC, HARNESS))
    }

    /// Runs kernel `name` on the host over `descs` (their `in`/`out` are byte offsets into
    /// `input` and into an output of `out_len` bytes) with a small grid, so the threads'
    /// stride loop runs; returns the output bytes.
    fn run_on_host(name: &str, descs: &[GridMaskSample], input: &[u8], out_len: usize) -> Vec<u8> {
        let (threads, blocks) = (32u32, 3u32);
        let mut case = Vec::new();
        case.extend((name.len() as u32).to_le_bytes());
        case.extend(name.as_bytes());
        for v in [descs.len() as u32, threads, blocks] {
            case.extend(v.to_le_bytes());
        }
        case.extend(bytemuck::cast_slice::<GridMaskSample, u8>(descs));
        case.extend((input.len() as u64).to_le_bytes());
        case.extend(input);
        case.extend((out_len as u64).to_le_bytes());
        let stdout = harness().run(name, &case);
        assert_eq!(stdout.len(), out_len);
        stdout
    }

    /// A batch of `t` with `shapes`, layout HWC: integers over their whole range, FLOAT of
    /// both signs with NaNs (quiet and signaling), infinities, zeros and denormals among them.
    fn batch(t: DType, shapes: &[[usize; 3]], seed: u64) -> TensorList {
        let shapes: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
        let mut x = TensorList::new(t, 3, shapes).with_layout("HWC");
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let specials: [u32; 9] = [0x7fc1_2345, 0x7f80_0001, 0xff81_2345, 0x7f80_0000, 0xff80_0000, 0x8000_0000, 0, 1, 0x8000_0001];
        for s in x.samples_mut() {
            for (k, b) in s.iter_mut().enumerate() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = (state >> 24) as u8;
                // FLOAT: a tamer exponent for most elements (bits 23..30 of each word).
                if t == DType::F32 && k % 4 == 3 {
                    *b = (*b & 0x80) | 0x40 | (*b & 0x03);
                }
            }
            if t == DType::F32 {
                for (k, w) in s.chunks_exact_mut(4).enumerate().filter(|(k, _)| k % 5 == 0) {
                    w.copy_from_slice(&specials[(k / 5) % specials.len()].to_le_bytes());
                }
            }
        }
        x
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend() {
        let shapes = [[37, 41, 3], [5, 9, 1], [0, 4, 3], [12, 0, 2], [3, 3, 0], [64, 23, 4], [9, 70, 5]];
        let tiles = TensorList::from_samples(&vec![vec![]; shapes.len()], &[3i32, 1, 5, 8, 2, 17, 4].map(|v| vec![v]));
        let angles = TensorList::from_samples(&vec![vec![]; shapes.len()], &[0.3f32, -2.0, 1.0, 0.0, 7.5, -0.61, 3.1].map(|v| vec![v]));
        let cases: Vec<(Vec<(&str, ArgValue)>, bool)> = vec![
            (vec![("tile", ArgValue::Int(6))], false),
            (vec![("ratio", ArgValue::Float(0.37)), ("shift_x", ArgValue::Float(-3.25)), ("shift_y", ArgValue::Float(11.0))], true),
            (vec![("ratio", ArgValue::Float(0.6)), ("angle", ArgValue::Float(-0.9)), ("tile", ArgValue::Int(13))], false),
        ];
        for t in [DType::U8, DType::I16, DType::I32, DType::F32] {
            for (k, (args, per_sample)) in cases.iter().enumerate() {
                let x = batch(t, &shapes, 7 + k as u64);
                let what = format!("{t} {args:?} per-sample {per_sample}");
                let inputs: &[&str] = if *per_sample { &["tile", "angle"] } else { &[] };
                let arg_inputs: Vec<(&'static str, &TensorList)> = if *per_sample { vec![("tile", &tiles), ("angle", &angles)] } else { vec![] };
                let mut g = op(args.clone(), inputs).unwrap();
                let want = run(&mut g, &x, &arg_inputs).unwrap();
                let descs: Vec<GridMaskSample> = g.samples.iter().enumerate().map(|(i, s)| describe(s, x.offset(i) as u64, x.offset(i) as u64)).collect();
                let input = &x.buffer().as_slice()[..x.total_bytes()];
                let name = format!("grid_mask_{}", short_name(t).unwrap());
                let got = run_on_host(&name, &descs, input, x.total_bytes());
                for i in 0..x.len() {
                    assert_eq!(&got[x.byte_range(i)], want.bytes(i), "{what}: sample {i} of shape {:?}", x.shape(i));
                }
            }
        }
    }
}
