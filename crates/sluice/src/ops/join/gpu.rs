//! The gpu `cat` and `stack`: the cpu twin's plan, then one launch of `join.cu` that
//! scatters every used input's chunks into place.

use sluice_cuda::PushKernelArg;

use super::Join;
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, per_sample_launch, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{BatchMeta, TensorListGpu};

const SRC: &str = include_str!("join.cu");

/// The most grid rows a launch uses: the kernel strides over further pieces.
const MAX_GRID_ROWS: usize = 65_535;

cuda_struct! {
    /// `struct JoinPiece` in join.cu.
    struct JoinPiece {
        r#in: u64,
        out: u64,
        count: i64,
        chunk: i64,
        out_stride: i64,
    }
}

pub(super) struct JoinGpu {
    op: Join,
    params: ParamUpload,
    pieces: Vec<JoinPiece>,
}

impl JoinGpu {
    pub(super) fn new(op: Join) -> JoinGpu {
        JoinGpu { op, params: ParamUpload::default(), pieces: Vec::new() }
    }
}

impl GpuOperator for JoinGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let metas: Vec<&BatchMeta> = ws.gpu_inputs.iter().map(|t| t.meta()).collect();
        let plan = self.op.plan(&metas, ws.iteration)?;
        let out = TensorListGpu::alloc(plan.meta, ws.device, ws.stream)?;
        let size = out.dtype().size();
        let k = plan.used.len();
        self.pieces.clear();
        for i in 0..out.len() {
            let chunks = &plan.chunks[i * k..(i + 1) * k];
            let stride: usize = chunks.iter().sum();
            let mut offset = 0;
            for (&t, &chunk) in plan.used.iter().zip(chunks) {
                let count = chunk * plan.outer[i];
                if count > 0 {
                    let dst = out.sample_ptr(i) + (offset * size) as u64;
                    self.pieces.push(JoinPiece { r#in: ws.gpu_inputs[t].sample_ptr(i), out: dst, count: count as i64, chunk: chunk as i64, out_stride: stride as i64 });
                }
                offset += chunk;
            }
        }
        if self.pieces.is_empty() {
            return Ok(vec![out]);
        }
        let kernel = match size {
            1 => "join_1",
            2 => "join_2",
            4 => "join_4",
            8 => "join_8",
            s => return Err(Error::Unsupported(format!("{}: {s}-byte elements are not supported on the GPU", self.op.op()))),
        };
        let max_count = self.pieces.iter().map(|p| p.count as usize).max().unwrap_or(0);
        let pieces = self.params.upload(ws, bytemuck::cast_slice(&self.pieces))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "join", SRC, kernel)?;
        let cfg = per_sample_launch(max_count, self.pieces.len().min(MAX_GRID_ROWS));
        let n = self.pieces.len() as i64;
        // SAFETY: every piece reads `count` elements of a live input sample and writes inside
        // its live output sample (the plan sized the output from the same shapes), all on
        // this stream.
        unsafe {
            ws.stream.launch_builder(&f).arg(&pieces).arg(&n).launch(cfg).map_err(sluice_cuda::CudaError::from)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("join", SRC, &[("JoinPiece", &JoinPiece::LAYOUT)]);
    }
}
