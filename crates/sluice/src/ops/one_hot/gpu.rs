//! GPU backend of `fn.one_hot`: the cpu twin's plan (checks, shapes, layout, the on and off
//! values cast to the output type), one descriptor per sample uploaded, one launch of
//! `one_hot.cu` for the batch.

use super::OneHot;
use crate::error::Result;
use crate::ops::gpu_params::{cuda_struct, launch_records, ParamUpload};
use crate::ops::{GpuOperator, GpuWorkspace};
use crate::tensor::{DType, TensorListGpu};

pub(super) const SRC: &str = include_str!("one_hot.cu");

cuda_struct! {
    /// One sample (`struct OneHotSample` in one_hot.cu).
    pub(super) struct OneHotSample {
        r#in: u64,
        out: u64,
        numel: i64,
        inner: i64,
        classes: i64,
        on: u64,
        off: u64,
    }
}

/// The kernel's name for input type `t` and output elements of `size` bytes.
pub(super) fn kernel_name(t: DType, size: usize) -> String {
    let name = match t {
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::U16 => "u16",
        DType::I16 => "i16",
        DType::U32 => "u32",
        DType::I32 => "i32",
        DType::U64 => "u64",
        DType::I64 => "i64",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 | DType::Bool => unreachable!("refused by the plan"),
    };
    format!("one_hot_{name}_{size}")
}

impl OneHot {
    /// The descriptor of sample `i` (`outer`, `inner` from the plan) at device addresses
    /// `input` and `output`.
    pub(super) fn describe(&self, split: (usize, usize), input: u64, output: u64) -> OneHotSample {
        let (outer, inner) = split;
        OneHotSample {
            r#in: input,
            out: output,
            numel: (outer * self.classes * inner) as i64,
            inner: inner as i64,
            classes: self.classes as i64,
            on: u64::from_le_bytes(self.on),
            off: u64::from_le_bytes(self.off),
        }
    }
}

pub(super) struct OneHotGpu {
    one_hot: OneHot,
    params: ParamUpload,
    desc: Vec<OneHotSample>,
}

impl OneHotGpu {
    pub(super) fn new(one_hot: OneHot) -> OneHotGpu {
        OneHotGpu { one_hot, params: ParamUpload::default(), desc: Vec::new() }
    }
}

impl GpuOperator for OneHotGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let input = ws.gpu_inputs[0];
        let plan = self.one_hot.plan(input.meta())?;
        let out = TensorListGpu::alloc(plan.meta, ws.device, ws.stream)?;
        let max_numel = (0..out.len()).map(|i| out.numel(i)).max().unwrap_or(0);
        if max_numel == 0 {
            return Ok(vec![out]);
        }
        self.desc.clear();
        for (i, &split) in plan.split.iter().enumerate() {
            self.desc.push(self.one_hot.describe(split, input.sample_ptr(i), out.sample_ptr(i)));
        }
        let base = self.params.upload(ws, bytemuck::cast_slice(&self.desc))?;
        let kernel = kernel_name(input.dtype(), self.one_hot.dtype.size());
        let f = ws.device.kernels().function(ws.device.context(), ws.device.compute_capability(), "one_hot", SRC, &kernel)?;
        // SAFETY: each descriptor points into `input` and `out` (alive, ordered on this
        // stream); the kernel reads the input's outer * inner elements and writes the
        // output's `numel`, as the plan sized them.
        unsafe {
            launch_records::<OneHotSample>(&ws.stream, &f, base, self.desc.len(), max_numel)?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod cuda_twins {
    use std::sync::OnceLock;

    use super::super::tests::{op, run};
    use super::*;
    use crate::ops::gpu_params::PerSampleKernels;
    use crate::ops::ArgValue;
    use crate::tensor::TensorList;

    #[test]
    fn the_kernel_source_compiles_and_its_parameter_struct_matches() {
        crate::ops::gpu_params::check_cuda_source("one_hot", SRC, &[("OneHotSample", &OneHotSample::LAYOUT)]);
    }

    fn harness() -> &'static PerSampleKernels {
        static KERNELS: OnceLock<PerSampleKernels> = OnceLock::new();
        KERNELS.get_or_init(|| {
            let names: Vec<String> = ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64"]
                .iter()
                .flat_map(|t| [1, 2, 4, 8].map(|size| format!("one_hot_{t}_{size}")))
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            PerSampleKernels::build("one_hot", SRC, "OneHotSample", &["in"], &["out"], &names)
        })
    }

    /// A batch of `t` holding classes in and around 0..classes (negative, too large,
    /// fractions and NaN for the float types).
    fn batch(t: DType, shapes: &[Vec<usize>]) -> TensorList {
        let mut x = TensorList::new(t, shapes[0].len(), shapes.iter().map(|s| &s[..]));
        let values = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, -1.0, 7.0, 2.7, -0.5, 3.999, 100.0, 200.0, -3.0, f64::NAN];
        for (i, s) in x.samples_mut().into_iter().enumerate() {
            let n = s.len() / t.size();
            for k in 0..n {
                let v = values[(k * 7 + i * 3) % values.len()];
                let v = if t.is_float() { v } else if v.is_nan() { 1.0 } else { v.trunc() };
                crate::tensor::element::store_f64(t, s, k, v);
            }
        }
        x
    }

    #[test]
    fn the_kernel_run_on_the_host_equals_the_cpu_backend() {
        let shapes = vec![vec![3, 5], vec![4, 1], vec![0, 3], vec![7, 6], vec![1, 2]];
        let in_types = [DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64, DType::F32, DType::F64];
        let out_types = [DType::U8, DType::I16, DType::F32, DType::I64, DType::F64];
        for t in in_types {
            let x = batch(t, &shapes);
            for (k, &o) in out_types.iter().enumerate() {
                for axis in [None, Some(0), Some(1), Some(2)] {
                    let mut args = vec![("num_classes", ArgValue::Int(5)), ("dtype", ArgValue::Int(o as i64)), ("on_value", ArgValue::Float(3.5 + k as f64)), ("off_value", ArgValue::Float(-2.0))];
                    if let Some(a) = axis {
                        args.push(("axis", ArgValue::Int(a)));
                    }
                    let mut g = op(args).unwrap();
                    let want = run(&mut g, &x).unwrap();
                    let plan = g.plan(x.meta()).unwrap();
                    let descs: Vec<OneHotSample> = plan.split.iter().enumerate().map(|(i, &s)| g.describe(s, x.offset(i) as u64, want.offset(i) as u64)).collect();
                    let name = kernel_name(t, o.size());
                    let got = harness().run(&name, bytemuck::cast_slice(&descs), descs.len(), &x.buffer().as_slice()[..x.total_bytes()], want.total_bytes());
                    for i in 0..x.len() {
                        assert_eq!(&got[want.byte_range(i)], want.bytes(i), "{t} -> {o}, axis {axis:?}, sample {i}");
                    }
                }
            }
        }
    }
}
