//! GPU backend of `fn.bb_flip`: the cpu twin plans the batch (checks, per-sample flips);
//! one descriptor per sample is uploaded and one launch of `bb_flip.cu` flips every box
//! with the cpu's f32 operations.

use super::flip::{BbFlip, Flips};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
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
            launch_records::<BbFlipSample>(&ws.stream, &f, base, desc.len(), max_boxes)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::flip::tests::{op, run};
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::ArgValue;
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("bb_flip", SRC, &[("BbFlipSample", &BbFlipSample::LAYOUT)]);
    }

    fn harness() -> &'static PerSampleKernels {
        static KERNELS: OnceLock<PerSampleKernels> = OnceLock::new();
        KERNELS.get_or_init(|| PerSampleKernels::build("bb_flip", SRC, "BbFlipSample", &["in"], &["out"], &["bb_flip"]))
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
            let input = &x.buffer().as_slice()[..x.total_bytes()];
            let got = harness().run("bb_flip", bytemuck::cast_slice(&descs), descs.len(), input, x.total_bytes());
            for i in 0..x.len() {
                assert_eq!(&got[x.byte_range(i)], want.bytes(i), "ltrb {ltrb}: sample {i}");
            }
        }
    }
}
