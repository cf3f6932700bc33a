//! The GPU warps: one launch of `warp.cu` for a batch of per-sample 2-D or 3-D warps, with
//! the cpu kernels' arithmetic, so both backends give the same bits. `fn.rotate` and
//! `fn.warp_affine` describe their samples as [`WarpSample`]s and call [`launch`].

use super::kernel::{Border, Interp};
use crate::error::{Error, Result};
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::GpuWorkspace;
use crate::tensor::channel::short_name;
use crate::tensor::DType;

pub(crate) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("warp.cu"));

cuda_struct! {
    /// One sample's warp (`struct Sample` in warp.cu).
    pub(crate) struct WarpSample {
        src: u64,
        dst: u64,
        /// The sample's matrix in GPU memory, read instead of `m` when `from_input` is set.
        mat: u64,
        /// Output point -> source point: 2x3 (images) or 3x4 (volumes), row-major.
        m: [f32; 12],
        in_d: i32,
        in_h: i32,
        in_w: i32,
        c: i32,
        out_d: i32,
        out_h: i32,
        out_w: i32,
        frames: i32,
        linear: i32,
        clamp: i32,
        from_input: i32,
        invert: i32,
        fill: f32,
        /// 3-D: output voxels a thread computes along a row ([`voxels_per_thread`]).
        seg: i32,
    }
}

/// Where a sample's map comes from.
#[derive(Clone, Copy)]
pub(crate) enum GpuMap<'a> {
    /// A 2x3 map, computed on the host.
    Planar(&'a [[f32; 3]; 2]),
    /// A 3x4 map, computed on the host.
    Volume(&'a [[f32; 4]; 3]),
    /// The sample's matrix in GPU memory (2x3 or 3x4, as the launch's `volume` says),
    /// inverted by the kernel when `invert` is set.
    Device { ptr: u64, invert: bool },
}

impl WarpSample {
    /// A sample of `frames` frames of `inp` ([D, H, W], D = 1 for images) x `c` at `src`,
    /// warped by `map` to `out` x `c` at `dst`.
    pub(crate) fn new(src: u64, dst: u64, map: GpuMap<'_>, frames: usize, inp: [usize; 3], c: usize, out: [usize; 3], interp: Interp, border: Border) -> WarpSample {
        let (clamp, fill) = match border {
            Border::Clamp => (1, 0.0),
            Border::Fill(v) => (0, v),
        };
        let mut m = [0.0f32; 12];
        let (mut mat, mut from_input, mut invert) = (0, 0, 0);
        match map {
            GpuMap::Planar(p) => m[..6].copy_from_slice(p.as_flattened()),
            GpuMap::Volume(v) => m.copy_from_slice(v.as_flattened()),
            GpuMap::Device { ptr, invert: inv } => (mat, from_input, invert) = (ptr, 1, inv as i32),
        }
        WarpSample {
            src,
            dst,
            mat,
            m,
            in_d: inp[0] as i32,
            in_h: inp[1] as i32,
            in_w: inp[2] as i32,
            c: c as i32,
            out_d: out[0] as i32,
            out_h: out[1] as i32,
            out_w: out[2] as i32,
            frames: frames as i32,
            linear: (interp == Interp::Linear) as i32,
            clamp,
            from_input,
            invert,
            fill,
            seg: voxels_per_thread(out[2]) as i32,
        }
    }

    /// The kernel's work items: output pixels (2-D), or runs of `seg` voxels of a row (3-D).
    fn items(&self, volume: bool) -> usize {
        let rows = self.frames as usize * self.out_d as usize * self.out_h as usize;
        rows * if volume { (self.out_w as usize).div_ceil(self.seg as usize) } else { self.out_w as usize }
    }
}

/// Output voxels a thread of the 3-D warp computes along a row of `out_w`: the cpu's source
/// points come from a sequence of additions along the row, which each thread repeats up to
/// its first voxel, so longer runs pay that less often (and keep fewer threads busy).
/// (16: on an H200, 8, 16 and 32 ran 32x64x64 volumes within the spread between runs; 16
/// keeps the catch-up of wide rows down to about 8 additions a voxel.)
fn voxels_per_thread(out_w: usize) -> usize {
    16.min(out_w.max(1))
}

/// The type pairs the kernel is built for (DALI's warp: the input type, or FLOAT on either side).
pub(crate) fn supports(i: DType, o: DType) -> bool {
    let base = [DType::U8, DType::I16, DType::I32, DType::F32];
    base.contains(&i) && base.contains(&o) && (i == o || i == DType::F32 || o == DType::F32)
}

/// Warps every sample of `samples` (input type `i`, output type `o`; volumes when `volume`) in
/// one launch on `ws.stream`. Samples with nothing to write, or nothing to read, must be left
/// out.
pub(crate) fn launch(ws: &GpuWorkspace<'_>, params: &mut ParamUpload, op: &str, samples: &[WarpSample], volume: bool, i: DType, o: DType) -> Result<()> {
    if !supports(i, o) {
        return Err(Error::Unsupported(format!("{op}: cannot convert {i} to {o}")));
    }
    let max_points = samples.iter().map(|s| s.items(volume)).max().unwrap_or(0);
    if max_points == 0 {
        return Ok(());
    }
    let family = if volume { "warp3" } else { "warp" };
    let kernel = format!("{family}_{}_{}", short_name(i).expect("supported"), short_name(o).expect("supported"));
    let base = params.upload(ws, bytemuck::cast_slice(samples))?;
    let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "warp", SRC, &kernel)?;
    // SAFETY: each descriptor points into buffers its caller keeps alive and ordered on this
    // stream; each thread writes inside its sample's output.
    unsafe {
        launch_records::<WarpSample>(&ws.stream, &f, base, samples.len(), max_points)?;
    }
    Ok(())
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::warp::{invert, kernel, to_map, Map};
    use crate::tensor::channel::Channel;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("warp", SRC, &[("Sample", &WarpSample::LAYOUT)]);
    }

    const KERNELS: [&str; 6] = ["warp_u8_u8", "warp_f32_u8", "warp_i16_f32", "warp3_u8_u8", "warp3_f32_u8", "warp3_i16_f32"];

    fn harness() -> &'static PerSampleKernels {
        static K: OnceLock<PerSampleKernels> = OnceLock::new();
        K.get_or_init(|| PerSampleKernels::build("warp", SRC, "Sample", &["src", "mat"], &["dst"], &KERNELS))
    }

    /// One test sample: extents [D, H, W] in and out, channels, frames, the map's values (6
    /// or 12), whether the kernel reads them as the matrix input (inverting them when
    /// `invert`), interpolation and border.
    struct Case {
        inp: [usize; 3],
        out: [usize; 3],
        c: usize,
        frames: usize,
        m: Vec<f32>,
        from_input: bool,
        invert: bool,
        interp: Interp,
        border: Border,
    }

    fn values<I: Channel>(n: usize, seed: u32) -> Vec<I> {
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                I::sat_f32((x % 2000) as f32 * 0.25 - 100.0)
            })
            .collect()
    }

    /// The cpu kernels' output of every case, and the host-run CUDA kernel's, as bytes.
    fn both<I: Channel, O: Channel>(kernel_name: &str, cases: &[Case]) -> (Vec<u8>, Vec<u8>) {
        let volume = kernel_name.starts_with("warp3");
        let (mut input, mut want, mut descs) = (Vec::new(), Vec::new(), Vec::new());
        for (n, case) in cases.iter().enumerate() {
            let src: Vec<I> = values(case.frames * case.inp.iter().product::<usize>() * case.c, n as u32 + 7);
            let src_at = input.len() as u64;
            input.extend_from_slice(bytemuck::cast_slice(&src));
            while input.len() % 8 != 0 {
                input.push(0);
            }
            let mat_at = input.len() as u64;
            input.extend_from_slice(bytemuck::cast_slice(&case.m));
            while input.len() % 8 != 0 {
                input.push(0);
            }
            let nd = if volume { 3 } else { 2 };
            let map = to_map(&case.m, nd);
            let map = if case.from_input && case.invert { invert(map) } else { Some(map) };
            let (in_frame, out_frame) = (case.inp.iter().product::<usize>() * case.c, case.out.iter().product::<usize>() * case.c);
            let mut dst = vec![O::sat_f32(0.0); case.frames * out_frame];
            for f in 0..case.frames {
                let (o, i) = (&mut dst[f * out_frame..(f + 1) * out_frame], &src[f * in_frame..(f + 1) * in_frame]);
                let [d, h, w] = case.inp;
                let [od, oh, ow] = case.out;
                match map {
                    None => o.fill(O::sat_f32(if let Border::Fill(v) = case.border { v } else { 0.0 })),
                    Some(Map::Planar(m)) => kernel::warp_affine(o, oh, ow, i, h, w, case.c, &m, case.interp, case.border),
                    Some(Map::Volume(m)) => kernel::warp_affine_3d(o, (od, oh, ow), i, (d, h, w), case.c, &m, case.interp, case.border),
                }
            }
            let dst_at = want.len() as u64;
            want.extend_from_slice(bytemuck::cast_slice(&dst));
            while want.len() % 8 != 0 {
                want.push(0xab);
            }
            let gpu_map = match &map {
                _ if case.from_input => GpuMap::Device { ptr: mat_at, invert: case.invert },
                Some(m) => m.gpu(),
                None => unreachable!("only matrix inputs are inverted"),
            };
            descs.push(WarpSample::new(src_at, dst_at, gpu_map, case.frames, case.inp, case.c, case.out, case.interp, case.border));
        }
        let got = harness().run(kernel_name, bytemuck::cast_slice(&descs), descs.len(), &input, want.len());
        (want, got)
    }

    #[test]
    fn the_kernels_run_on_the_host_equal_the_cpu_kernels() {
        use Border::{Clamp, Fill};
        use Interp::{Linear, Nearest};
        let planar = |m: [f32; 6]| m.to_vec();
        let rot = crate::ops::rotate::canvas::rotation_mapping_3d([5, 6, 7], [9, 8, 7], [1.0, 0.5, 0.25], 33.0);
        let images = || {
            vec![
                Case { inp: [1, 9, 11], out: [1, 13, 7], c: 3, frames: 2, m: planar([0.9, -0.3, 1.5, 0.4, 1.1, -2.0]), from_input: false, invert: false, interp: Linear, border: Clamp },
                Case { inp: [1, 9, 11], out: [1, 5, 300], c: 1, frames: 1, m: planar([0.03, 0.01, 0.2, 0.0, 1.0, 0.5]), from_input: false, invert: false, interp: Nearest, border: Fill(17.0) },
                Case { inp: [1, 6, 5], out: [1, 6, 5], c: 4, frames: 1, m: planar([1.2, 0.3, -1.0, -0.2, 0.8, 2.5]), from_input: true, invert: true, interp: Linear, border: Fill(-3.5) },
                Case { inp: [1, 6, 5], out: [1, 7, 3], c: 2, frames: 3, m: planar([0.7, 0.0, 0.25, 0.1, 1.3, -0.5]), from_input: true, invert: false, interp: Nearest, border: Clamp },
                Case { inp: [1, 4, 4], out: [1, 3, 3], c: 1, frames: 1, m: planar([1.0, 2.0, 0.0, 2.0, 4.0, 0.0]), from_input: true, invert: true, interp: Linear, border: Fill(9.0) },
            ]
        };
        let volumes = || {
            vec![
                Case { inp: [5, 6, 7], out: [9, 8, 7], c: 3, frames: 1, m: rot.as_flattened().to_vec(), from_input: false, invert: false, interp: Linear, border: Clamp },
                Case { inp: [4, 5, 3], out: [3, 4, 270], c: 1, frames: 2, m: vec![0.01, 0.2, 0.1, 0.3, 0.05, 0.9, 0.0, -0.5, 0.2, 0.1, 1.1, 0.25], from_input: false, invert: false, interp: Nearest, border: Fill(5.0) },
                Case { inp: [3, 4, 5], out: [4, 4, 4], c: 2, frames: 1, m: vec![0.9, 0.1, -0.2, 0.5, 0.3, 1.1, 0.0, -1.0, 0.1, 0.2, 0.8, 0.75], from_input: true, invert: true, interp: Linear, border: Fill(-2.0) },
                Case { inp: [3, 4, 5], out: [2, 3, 4], c: 1, frames: 2, m: vec![0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, -0.25], from_input: true, invert: true, interp: Nearest, border: Clamp },
                Case { inp: [3, 4, 5], out: [2, 2, 2], c: 1, frames: 1, m: vec![1.0, 2.0, 3.0, 0.0, 2.0, 4.0, 6.0, 0.0, 0.0, 0.0, 1.0, 0.0], from_input: true, invert: true, interp: Linear, border: Fill(4.0) },
            ]
        };
        for (k, (want, got)) in [
            ("warp_u8_u8", both::<u8, u8>("warp_u8_u8", &images())),
            ("warp_f32_u8", both::<f32, u8>("warp_f32_u8", &images())),
            ("warp_i16_f32", both::<i16, f32>("warp_i16_f32", &images())),
            ("warp3_u8_u8", both::<u8, u8>("warp3_u8_u8", &volumes())),
            ("warp3_f32_u8", both::<f32, u8>("warp3_f32_u8", &volumes())),
            ("warp3_i16_f32", both::<i16, f32>("warp3_i16_f32", &volumes())),
        ] {
            assert_eq!(want.len(), got.len(), "{k}");
            let diff = want.iter().zip(&got).position(|(a, b)| a != b);
            assert_eq!(diff, None, "{k}: first differing byte");
        }
    }
}
