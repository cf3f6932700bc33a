//! GPU backend of `fn.bb_flip`: the cpu twin plans the batch (checks, per-sample flips);
//! one descriptor per sample is uploaded and one launch of `bb_flip.cu` flips every box
//! with the cpu's f32 operations.

use sluice_cuda::PushKernelArg;

use super::flip::{BbFlip, Flips};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, per_sample_launch, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = include_str!("bb_flip.cu");

cuda_struct! {
    /// One sample (`struct BbFlipSample` in bb_flip.cu).
    pub(super) struct BbFlipSample {
        r#in: u64,
        out: u64,
        boxes: i64,
        horizontal: i32,
        vertical: i32,
        ltrb: i32,
        pad: i32,
    }
}

/// The descriptor of a sample of `boxes` boxes with flips `f`, read from `input` and
/// written to `output` (device addresses).
pub(super) fn describe(f: Flips, ltrb: bool, boxes: usize, input: u64, output: u64) -> BbFlipSample {
    BbFlipSample {
        r#in: input,
        out: output,
        boxes: i64::try_from(boxes).expect("sizes fit in i64"),
        horizontal: f.horizontal as i32,
        vertical: f.vertical as i32,
        ltrb: ltrb as i32,
        pad: 0,
    }
}

pub(super) struct BbFlipGpu {
    flip: BbFlip,
    params: ParamUpload,
}

impl BbFlipGpu {
    pub(super) fn new(flip: BbFlip) -> BbFlipGpu {
        BbFlipGpu { flip, params: ParamUpload::default() }
    }
}

impl GpuOperator for BbFlipGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let meta = self.flip.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(meta, ws.device, ws.stream)?;
        let max_boxes = (0..input.len()).map(|i| input.numel(i) / 4).max().unwrap_or(0);
        if max_boxes == 0 {
            return Ok(vec![out]);
        }
        let ltrb = self.flip.ltrb;
        let desc: Vec<BbFlipSample> = self.flip.flips.iter().enumerate().map(|(i, &f)| describe(f, ltrb, input.numel(i) / 4, input.sample_ptr(i), out.sample_ptr(i))).collect();
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "bb_flip", SRC, "bb_flip")?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream), whose samples hold `4 * boxes` floats; the kernel touches no other.
        unsafe {
            ws.stream.launch_builder(&f).arg(&base).launch(per_sample_launch(max_boxes, desc.len())).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::flip::tests::{op, run};
    use super::*;
    use crate::ops::gpu_params::HostKernels;
    use crate::ops::ArgValue;
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("bb_flip", SRC, &[("BbFlipSample", &BbFlipSample::LAYOUT)]);
    }

    /// A C++ program running one launch of bb_flip.cu on the CPU (tools/cuda_shim/shim.h,
    /// every thread of the grid in turn) from a case file: sample count, threads, blocks,
    /// the descriptors (addresses as offsets), the input bytes, the output length.
    const HARNESS: &str = r#"#include <cstdlib>
#include <vector>
#include "@SHIM@"
#include "@SRC@"

static FILE* in_file;
static void read_exactly(void* p, size_t n) {
    if (fread(p, 1, n, in_file) != n) { fprintf(stderr, "short case file\n"); exit(2); }
}

int main(int argc, char** argv) {
    if (argc != 2 || !(in_file = fopen(argv[1], "rb"))) return 2;
    unsigned n, threads, blocks;
    read_exactly(&n, 4); read_exactly(&threads, 4); read_exactly(&blocks, 4);
    std::vector<BbFlipSample> samples(n);
    read_exactly(samples.data(), n * sizeof(BbFlipSample));
    unsigned long long in_len, out_len;
    read_exactly(&in_len, 8);
    std::vector<float> input(in_len / 4 + 1);
    read_exactly(input.data(), in_len);
    read_exactly(&out_len, 8);
    std::vector<unsigned> out(out_len / 4 + 1, 0xababababu);
    for (BbFlipSample& s : samples) {
        s.in += (unsigned long long)input.data();
        s.out += (unsigned long long)out.data();
    }
    blockDim = {threads, 1, 1};
    gridDim = {blocks, n, 1};
    for (unsigned y = 0; y < n; y++)
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < threads; t++) {
                blockIdx = {b, y, 0};
                threadIdx = {t, 0, 0};
                bb_flip(samples.data());
            }
    fwrite(out.data(), 1, out_len, stdout);
    return 0;
}
"#;

    fn harness() -> &'static HostKernels {
        static KERNELS: OnceLock<HostKernels> = OnceLock::new();
        KERNELS.get_or_init(|| HostKernels::build("bb_flip", SRC, HARNESS))
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend() {
        // Boxes of all kinds: inside [0, 1], outside, negative extents, values whose round
        // trip (x + w) - x is not w.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 1.5 - 0.25
        };
        let counts = [3usize, 0, 70, 1, 129];
        let shapes: Vec<Vec<usize>> = counts.iter().map(|&n| vec![n, 4]).collect();
        let data: Vec<Vec<f32>> = counts.iter().map(|&n| (0..4 * n).map(|_| next()).collect()).collect();
        let x = TensorList::from_samples(&shapes, &data);
        let h = TensorList::from_samples(&vec![vec![]; 5], &[1i32, 0, 1, 0, 1].map(|v| vec![v]));
        let v = TensorList::from_samples(&vec![vec![]; 5], &[0i32, 1, 1, 0, 1].map(|v| vec![v]));
        for ltrb in [false, true] {
            let mut f = op(vec![("ltrb", ArgValue::Bool(ltrb))], &["horizontal", "vertical"]).unwrap();
            let want = run(&mut f, &x, &[("horizontal", &h), ("vertical", &v)]).unwrap();
            let descs: Vec<BbFlipSample> = f.flips.iter().enumerate().map(|(i, &fl)| describe(fl, ltrb, x.numel(i) / 4, x.offset(i) as u64, x.offset(i) as u64)).collect();
            let (threads, blocks) = (32u32, 2u32);
            let mut case = Vec::new();
            for w in [descs.len() as u32, threads, blocks] {
                case.extend(w.to_le_bytes());
            }
            case.extend(bytemuck::cast_slice::<BbFlipSample, u8>(&descs));
            let input = &x.buffer().as_slice()[..x.total_bytes()];
            case.extend((input.len() as u64).to_le_bytes());
            case.extend(input);
            case.extend((x.total_bytes() as u64).to_le_bytes());
            let got = harness().run("bb_flip", &case);
            for i in 0..x.len() {
                assert_eq!(&got[x.byte_range(i)], want.bytes(i), "ltrb {ltrb}: sample {i}");
            }
        }
    }
}
