//! GPU backends of `fn.coord_transform` and `fn.coord_flip`: the cpu twin plans the batch
//! (checks, per-sample matrices or flips); one descriptor per sample is uploaded and one
//! launch of `coord.cu` writes every sample with the cpu's f32 operations, so both backends
//! give the same bits.

use super::{Affine, CoordFlip, CoordTransform, FlipSample, MAX_POINT_DIM};
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::channel::short_name;
use crate::tensor::TensorListGpu;

pub(super) const SRC: &str = concat!(include_str!("../element.cuh"), include_str!("coord.cu"));

cuda_struct! {
    /// One sample of `coord_transform` (`struct CoordTransformSample` in coord.cu).
    pub(super) struct CoordTransformSample {
        r#in: u64,
        out: u64,
        points: i64,
        n: i32,
        m: i32,
        mat: [[f32; MAX_POINT_DIM]; MAX_POINT_DIM],
        t: [f32; MAX_POINT_DIM],
    }
}

cuda_struct! {
    /// One sample of `coord_flip` (`struct CoordFlipSample` in coord.cu).
    pub(super) struct CoordFlipSample {
        r#in: u64,
        out: u64,
        values: i64,
        ndim: i32,
        /// Bit d set: coordinate d flips.
        flip: i32,
        mirror: [f32; 3],
        pad: i32,
    }
}

/// The descriptor of sample `i` of a batch whose map is `affine`, with `points` points, read
/// from `input` and written to `output` (device addresses).
pub(super) fn describe_transform(affine: &Affine, i: usize, points: usize, input: u64, output: u64) -> CoordTransformSample {
    let (mat, t) = affine.sample(i);
    let mut d = CoordTransformSample {
        r#in: input,
        out: output,
        points: i64::try_from(points).expect("sizes fit in i64"),
        n: affine.n as i32,
        m: affine.m as i32,
        mat: [[0.0; MAX_POINT_DIM]; MAX_POINT_DIM],
        t: [0.0; MAX_POINT_DIM],
    };
    for (r, row) in mat.chunks_exact(affine.n).enumerate() {
        d.mat[r][..affine.n].copy_from_slice(row);
    }
    d.t[..affine.m].copy_from_slice(t);
    d
}

/// The descriptor of a `coord_flip` sample of `values` floats in points of `ndim`.
pub(super) fn describe_flip(s: &FlipSample, ndim: usize, values: usize, input: u64, output: u64) -> CoordFlipSample {
    CoordFlipSample {
        r#in: input,
        out: output,
        values: i64::try_from(values).expect("sizes fit in i64"),
        ndim: ndim as i32,
        flip: (0..3).filter(|&d| s.flip[d]).map(|d| 1 << d).sum(),
        mirror: s.mirror,
        pad: 0,
    }
}

pub(super) struct CoordTransformGpu {
    transform: CoordTransform,
    params: ParamUpload,
}

impl CoordTransformGpu {
    pub(super) fn new(transform: CoordTransform) -> CoordTransformGpu {
        CoordTransformGpu { transform, params: ParamUpload::default() }
    }
}

impl GpuOperator for CoordTransformGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.transform.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(plan.meta, ws.device, ws.stream)?;
        let Some(affine) = plan.affine else { return Ok(vec![out]) };
        let points = |i: usize| if input.numel(i) == 0 { 0 } else { input.numel(i) / affine.n };
        let max_points = (0..input.len()).map(points).max().unwrap_or(0);
        if max_points == 0 {
            return Ok(vec![out]);
        }
        let desc: Vec<CoordTransformSample> = (0..input.len()).map(|i| describe_transform(&affine, i, points(i), input.sample_ptr(i), out.sample_ptr(i))).collect();
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let kernel = format!("coord_transform_{}_{}", short_name(input.dtype()).expect("types checked by plan"), short_name(out.dtype()).expect("types checked by plan"));
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "coord", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream), whose samples hold `points * n` and `points * m` elements of the kernel's
        // types; the kernel touches no others.
        unsafe {
            launch_records::<CoordTransformSample>(&ws.stream, &f, base, desc.len(), max_points)?;
        }
        Ok(vec![out])
    }
}

pub(super) struct CoordFlipGpu {
    flip: CoordFlip,
    params: ParamUpload,
}

impl CoordFlipGpu {
    pub(super) fn new(flip: CoordFlip) -> CoordFlipGpu {
        CoordFlipGpu { flip, params: ParamUpload::default() }
    }
}

impl GpuOperator for CoordFlipGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.flip.plan(&ws.host_view(), input.meta())?;
        let out = TensorListGpu::alloc(input.meta().clone(), ws.device, ws.stream)?;
        let max_values = (0..input.len()).map(|i| input.numel(i)).max().unwrap_or(0);
        if max_values == 0 {
            return Ok(vec![out]);
        }
        let desc: Vec<CoordFlipSample> = plan.samples.iter().enumerate().map(|(i, s)| describe_flip(s, plan.ndim, input.numel(i), input.sample_ptr(i), out.sample_ptr(i))).collect();
        let base = self.params.upload(ws, bytemuck::cast_slice(&desc))?;
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "coord", SRC, "coord_flip")?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream), whose samples hold `values` floats; the kernel touches no others.
        unsafe {
            launch_records::<CoordFlipSample>(&ws.stream, &f, base, desc.len(), max_values)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::{COORD_FLIP, COORD_TRANSFORM};
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::testing;
    use crate::ops::ArgValue;
    use crate::tensor::{BatchMeta, DType, TensorList};

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_structs_match() {
        crate::ops::gpu_params::check_cuda_source("coord", SRC, &[("CoordTransformSample", &CoordTransformSample::LAYOUT), ("CoordFlipSample", &CoordFlipSample::LAYOUT)]);
    }

    const TRANSFORM_KERNELS: [&str; 9] = [
        "coord_transform_u8_f32",
        "coord_transform_u8_u8",
        "coord_transform_i16_f32",
        "coord_transform_i16_i16",
        "coord_transform_u16_f32",
        "coord_transform_u16_u16",
        "coord_transform_i32_f32",
        "coord_transform_i32_i32",
        "coord_transform_f32_f32",
    ];

    fn transform_harness() -> &'static PerSampleKernels {
        static K: OnceLock<PerSampleKernels> = OnceLock::new();
        K.get_or_init(|| PerSampleKernels::build("coord_transform", SRC, "CoordTransformSample", &["in"], &["out"], &TRANSFORM_KERNELS))
    }

    fn flip_harness() -> &'static PerSampleKernels {
        static K: OnceLock<PerSampleKernels> = OnceLock::new();
        K.get_or_init(|| PerSampleKernels::build("coord_flip", SRC, "CoordFlipSample", &["in"], &["out"], &["coord_flip"]))
    }

    /// Deterministic bytes, FLOAT values of both signs with NaN, infinities and values past
    /// every integer range among them.
    fn points(t: DType, shapes: &[[usize; 2]], seed: u64) -> TensorList {
        let shapes: Vec<&[usize]> = shapes.iter().map(|s| &s[..]).collect();
        let mut x = TensorList::new(t, 2, shapes);
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let specials = [f32::NAN, f32::INFINITY, -f32::INFINITY, 3e9, -3e9, 70000.5, -0.0, 2.5, -2.5];
        for s in x.samples_mut() {
            for b in s.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = (state >> 24) as u8;
            }
            if t == DType::F32 {
                for (k, w) in s.chunks_exact_mut(4).enumerate() {
                    let v = if k % 4 == 0 { specials[(k / 4) % specials.len()] } else { (i32::from_le_bytes([w[0], w[1], w[2], w[3]]) % 100_000) as f32 / 7.0 };
                    w.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        x
    }

    /// The host-run kernel's bytes for `input` planned by `plan_of` into `out_meta`.
    fn on_host<D: bytemuck::Pod>(harness: &PerSampleKernels, kernel: &str, input: &TensorList, out_meta: &BatchMeta, describe: impl Fn(usize, u64, u64) -> D) -> Vec<u8> {
        let descs: Vec<D> = (0..input.len()).map(|i| describe(i, input.meta().offset(i) as u64, out_meta.offset(i) as u64)).collect();
        let mut bytes = Vec::new();
        for i in 0..input.len() {
            bytes.extend_from_slice(input.bytes(i));
        }
        harness.run(kernel, bytemuck::cast_slice(&descs), descs.len(), &bytes, out_meta.total_bytes())
    }

    #[test]
    fn coord_transform_run_on_the_host_equals_the_cpu_backend() {
        let shapes = [[37, 3], [0, 3], [1, 3], [90, 3], [5, 3]];
        let mats = TensorList::from_samples(&vec![vec![2, 3]; 5], &[
            vec![1.5f32, -2.25, 0.125, 3.0, 0.0, -1.0],
            vec![0.0; 6],
            vec![1e30, 1e-30, 7.0, -0.5, 0.25, 9.75],
            vec![-0.3, 0.7, 1.1, 2.2, -3.3, 0.01],
            vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        ]);
        let cases: Vec<(Vec<(&str, ArgValue)>, bool)> = vec![
            (vec![("M", ArgValue::FloatList(vec![0.5, -1.0, 2.0, 0.25, 3.5, -0.75, 1.0, 1.0, 1.0])), ("T", ArgValue::FloatList(vec![10.5, -7.25, 0.5]))], false),
            (vec![("MT", ArgValue::Float(-1.5))], false),
            (vec![("T", ArgValue::Float(100.25))], true),
        ];
        for t in [DType::U8, DType::I16, DType::U16, DType::I32, DType::F32] {
            for same in [false, true] {
                for (k, (given, per_sample)) in cases.iter().enumerate() {
                    let mut given = given.clone();
                    if same {
                        given.push(("dtype", ArgValue::Int(t as i64)));
                    }
                    let inputs: &[&str] = if *per_sample { &["M"] } else { &[] };
                    let ctx = testing::context(&COORD_TRANSFORM, given, inputs).unwrap();
                    let args: Vec<(&'static str, &TensorList)> = if *per_sample { vec![("M", &mats)] } else { vec![] };
                    let x = points(t, &shapes, 7 + k as u64);
                    let mut op = CoordTransform::new(&ctx).unwrap();
                    let cpu = testing::run(&mut op, &[&x], &args).unwrap().remove(0);
                    let plan = testing::with_args(&args, x.len(), |ws| op.plan(ws, x.meta())).unwrap();
                    let affine = plan.affine.unwrap();
                    let kernel = format!("coord_transform_{}_{}", short_name(t).unwrap(), short_name(plan.meta.dtype()).unwrap());
                    let host = on_host(transform_harness(), &kernel, &x, &plan.meta, |i, a, b| describe_transform(&affine, i, x.numel(i) / affine.n, a, b));
                    assert_eq!(host, cpu.buffer().as_slice()[..cpu.total_bytes()], "{kernel}, case {k}");
                }
            }
        }
    }

    #[test]
    fn coord_flip_run_on_the_host_equals_the_cpu_backend() {
        let flips = TensorList::from_samples(&vec![vec![]; 4], &[vec![1i32], vec![0], vec![1], vec![1]]);
        let centers = TensorList::from_samples(&vec![vec![]; 4], &[vec![0.3f32], vec![-2.0], vec![1e20], vec![f32::NAN]]);
        for ndim in 1..=3 {
            let shapes = [[41, ndim], [0, ndim], [100, ndim], [3, ndim]];
            let layouts: &[&str] = match ndim {
                1 => &["", "x"],
                2 => &["", "yx"],
                _ => &["", "zxy"],
            };
            for layout in layouts {
                let given = vec![("layout", ArgValue::Str(layout.to_string())), ("flip_z", ArgValue::Int(1)), ("center_x", ArgValue::Float(0.75))];
                let ctx = testing::context(&COORD_FLIP, given, &["flip_y", "center_y"]).unwrap();
                let args: Vec<(&'static str, &TensorList)> = vec![("flip_y", &flips), ("center_y", &centers)];
                let x = points(DType::F32, &shapes, ndim as u64);
                let mut op = CoordFlip { ctx };
                let cpu = testing::run(&mut op, &[&x], &args).unwrap().remove(0);
                let plan = testing::with_args(&args, x.len(), |ws| op.plan(ws, x.meta())).unwrap();
                let host = on_host(flip_harness(), "coord_flip", &x, x.meta(), |i, a, b| describe_flip(&plan.samples[i], plan.ndim, x.numel(i), a, b));
                assert_eq!(host, cpu.buffer().as_slice()[..cpu.total_bytes()], "ndim {ndim}, layout {layout:?}");
            }
        }
    }
}
