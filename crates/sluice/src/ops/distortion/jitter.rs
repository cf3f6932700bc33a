//! `fn.jitter` (cpu, gpu; DALI 2.4 has a gpu backend only,
//! `dali/operators/image/remap/jitter.cu*`): every output pixel reads a whole pixel moved by
//! a random amount in `[-nDegree/2, nDegree - 1 - nDegree/2]` along x and along y (DALI's
//! `curand() % nDegree - nDegree/2`), clamped to `[0, W] x [0, H]` as DALI clamps, so the
//! column W and the row H read `fill_value`. One displacement per pixel, moving all its
//! channels together (DALI's aligned kernel; its unaligned one draws per channel).
//!
//! The draws are Sluice's counter-based Philox streams, not cuRAND's: pixel p of a sample
//! takes block `(p low, p high, stream words 1, 2)` under the sample's key, so the cpu and
//! the gpu (`distortion.cu`) move every pixel alike, whatever the thread count. Parity with
//! DALI is in distribution (`tests/test_jitter.py`). The points are whole pixels, so
//! `interp_type` does not change the result.

use super::{gpu, Displacement, Distortion, Kind, DISPLACEMENT_ARGS};
use crate::ops::{arg, ArgDefault as D, Device, OpDef, OpSchema, ArgType as T};
use crate::rng::philox4x32_10;

/// `fn.jitter`.
pub static JITTER: OpDef = OpDef {
    schema: OpSchema {
        name: "Jitter",
        doc: "Performs a random Jitter augmentation.

The output images are produced by moving each pixel by a random amount, in the x and y dimensions, and bounded by half of the `nDegree` parameter. Images are HWC, UINT8 or FLOAT.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[arg("nDegree", T::Int, D::Int(2), "Each pixel is moved by a random amount in the ``[-nDegree/2, nDegree/2]`` range.")], DISPLACEMENT_ARGS],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Distortion::new(ctx, Kind::Jitter(n_degree(ctx)?))?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::DistortionGpu::new(Distortion::new(ctx, Kind::Jitter(n_degree(ctx)?))?)))),
};

/// `nDegree`, checked: DALI divides by it.
fn n_degree(ctx: &crate::ops::OpContext) -> crate::error::Result<u32> {
    let n = ctx.args.int("nDegree");
    if !(1..=u16::MAX as i64).contains(&n) {
        return Err(crate::error::Error::arg(&ctx.display_name, "nDegree", format!("must be in [1, {}], got {n}", u16::MAX)));
    }
    Ok(n as u32)
}

/// One sample's displacements.
pub(crate) struct JitterMap {
    pub key: [u32; 2],
    pub stream: [u32; 3],
    pub n_degree: u32,
    pub h: usize,
    pub w: usize,
}

impl Displacement for JitterMap {
    #[inline(always)]
    fn source(&self, x: usize, y: usize) -> (f32, f32) {
        let p = (y * self.w + x) as u64;
        let b = philox4x32_10([p as u32, (p >> 32) as u32, self.stream[0], self.stream[1]], self.key);
        let half = (self.n_degree / 2) as i64;
        let nx = ((b[0] % self.n_degree) as i64 - half + x as i64).clamp(0, self.w as i64);
        let ny = ((b[1] % self.n_degree) as i64 - half + y as i64).clamp(0, self.h as i64);
        (nx as f32, ny as f32)
    }
}
