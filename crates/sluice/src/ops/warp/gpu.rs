//! The GPU warp: one launch of `warp.cu` for a batch of per-sample 2-D warps, with the cpu
//! kernel's arithmetic, so both backends give the same bits. `fn.rotate` and
//! `fn.warp_affine` describe their samples as [`WarpSample`]s and call [`launch`].

use sluice_cuda::PushKernelArg;

use super::kernel::{Border, Interp};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, per_sample_launch, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::channel::short_name;
use crate::tensor::DType;

pub(crate) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("warp.cu"));

cuda_struct! {
    /// One sample's warp (`struct Sample` in warp.cu).
    pub(crate) struct WarpSample {
        src: u64,
        dst: u64,
        /// m00 m01 m02 m10 m11 m12: output pixel centre -> source point.
        m: [f32; 6],
        in_h: i32,
        in_w: i32,
        c: i32,
        out_h: i32,
        out_w: i32,
        frames: i32,
        linear: i32,
        clamp: i32,
        fill: f32,
        pad: i32,
    }
}

impl WarpSample {
    /// A sample of `frames` frames of `in_h` x `in_w` x `c` at `src`, warped by `m` to
    /// `out_h` x `out_w` x `c` at `dst`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(src: u64, dst: u64, m: &[[f32; 3]; 2], (frames, in_h, in_w, c): (usize, usize, usize, usize), (out_h, out_w): (usize, usize), interp: Interp, border: Border) -> WarpSample {
        let (clamp, fill) = match border {
            Border::Clamp => (1, 0.0),
            Border::Fill(v) => (0, v),
        };
        WarpSample {
            src,
            dst,
            m: [m[0][0], m[0][1], m[0][2], m[1][0], m[1][1], m[1][2]],
            in_h: in_h as i32,
            in_w: in_w as i32,
            c: c as i32,
            out_h: out_h as i32,
            out_w: out_w as i32,
            frames: frames as i32,
            linear: (interp == Interp::Linear) as i32,
            clamp,
            fill,
            pad: 0,
        }
    }

    fn pixels(&self) -> usize {
        self.frames as usize * self.out_h as usize * self.out_w as usize
    }
}

/// The type pairs the kernel is built for (DALI's warp: the input type, or FLOAT on either side).
pub(crate) fn supports(i: DType, o: DType) -> bool {
    let base = [DType::U8, DType::I16, DType::I32, DType::F32];
    base.contains(&i) && base.contains(&o) && (i == o || i == DType::F32 || o == DType::F32)
}

/// Warps every sample of `samples` (input type `i`, output type `o`) in one launch on
/// `ws.stream`. Samples with nothing to write, or nothing to read, must be left out.
pub(crate) fn launch(ws: &GpuWorkspace<'_>, params: &mut ParamUpload, op: &str, samples: &[WarpSample], i: DType, o: DType) -> Result<()> {
    if !supports(i, o) {
        return Err(Error::Unsupported(format!("{op}: cannot convert {i} to {o}")));
    }
    let max_pixels = samples.iter().map(WarpSample::pixels).max().unwrap_or(0);
    if max_pixels == 0 {
        return Ok(());
    }
    let kernel = format!("warp_{}_{}", short_name(i).expect("supported"), short_name(o).expect("supported"));
    let base = params.upload(ws, bytemuck::cast_slice(samples))?;
    let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "warp", SRC, &kernel)?;
    // SAFETY: each descriptor points into buffers its caller keeps alive and ordered on this
    // stream; each thread writes inside its sample's output.
    unsafe {
        ws.stream.launch_builder(&f).arg(&base).launch(per_sample_launch(max_pixels, samples.len())).map_err(sluice_cuda::CudaError::from)?;
    }
    Ok(())
}

#[cfg(test)]
mod cuda_twins {
    use super::*;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("warp", SRC, &[("Sample", &WarpSample::LAYOUT)]);
    }
}
