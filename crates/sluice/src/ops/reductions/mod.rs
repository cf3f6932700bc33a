//! The reductions: `fn.reductions.min`, `max`, `sum`, `mean`, `mean_square`, `rms`,
//! `std_dev` and `variance`, per sample over `axes` (all axes by default), as DALI 2.4's cpu
//! operators compute them (dali/operators/generic/reduce, dali/kernels/reduce/reduce_cpu.h),
//! on the cpu and on the gpu. Results are DALI's cpu bits, float ones included, on both
//! backends: [`kernel`] follows DALI's summation tree and its C++ conversions
//! (tests/test_reductions.py compares every operator, input type, `dtype` and axes case with
//! DALI 2.4's cpu operator), and the gpu kernel (`reductions.cu`) computes each output
//! element as [`kernel`] does, its summation tree included (the same tests compare the gpu
//! with the cpu bit for bit; `gpu`'s unit tests run the kernel on the host against
//! [`kernel`]). So the gpu backend gives DALI's cpu results (DALI's own gpu operator reduces
//! with another algorithm, reduce_gpu_impl.cuh).
//!
//! What DALI does, checked against DALI 2.4:
//! - Inputs: UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, FLOAT; anything else is
//!   "Unsupported input type: float16" (C++ type names).
//! - Output types (`dtype`, which is also the accumulator: integer sums wrap): `min` / `max`
//!   keep the input type; `sum` gives UINT64 for unsigned and INT64 for signed inputs narrower
//!   than 64 bits (the input type otherwise), and takes the input type, that 64-bit type or
//!   FLOAT; `mean` and `rms` give FLOAT, or the input type; `mean_square` gives FLOAT, or
//!   UINT64 / INT64 by signedness; `std_dev` and `variance` give FLOAT. Other pairs are
//!   "Unsupported types: uint8, double".
//! - `axes` counts from the back when negative ("Axis index out of range: 5 not in range
//!   [-3,2]"; repeated: "Duplicate axis index 0"); `axis_names` names them in the input layout
//!   (exclusive with `axes`); neither reduces every axis; `axes=[]` / `axis_names=""` none.
//!   The output has the kept extents, or every extent with the reduced ones 1 (`keep_dims`),
//!   and the input layout without the reduced axes (all of it with `keep_dims`).
//! - The mean of nothing is NaN (0 / 0), and as an integer what x86 makes of NaN (0 for 8- to
//!   32-bit unsigned and narrow signed types, the minimum for INT32 / INT64, 2^63 for UINT64);
//!   the min / max of nothing is the type's largest / lowest finite value.
//! - `std_dev` / `variance` take the mean as a second input (FLOAT), holding one value per
//!   output element (any shape with that many elements, e.g. `fn.reductions.mean` with the
//!   same axes, with or without `keep_dims`); the divisor is `N - ddof`. With `axes=[]` the
//!   result is 0. Sluice also takes a mean of one element for all output elements (a scalar
//!   constant): DALI reads past it when there is more than one output element. On the gpu
//!   both inputs are gpu batches, as in DALI (the engine says so for a cpu one); a constant
//!   mean is made on the gpu.
//!
//! Planning ([`Reduce::plan`]: types, axes, output shapes and layout, the mean's shapes, and
//! each sample's [`Geometry`] and divisor) is shared by the backends; the cpu backend reduces
//! each sample on the pool, the gpu backend ([`gpu`]) uploads every sample's geometry once
//! per batch and launches one kernel for the batch, a thread per output element.

mod gpu;
mod kernel;

use kernel::{run_sample, Combine, Geometry, Post, Pre, Sample, Src, MAX_NDIM};

use crate::error::{Error, Result};
use crate::ops::cast::require_dtype;
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgSchema, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};

const AXES_ARGS: &[ArgSchema] = &[
    arg("axes", T::IntList, D::Optional, "Axis or axes along which reduction is performed. Accepted range is [-ndim, ndim-1]. Negative indices are counted from the back. Not providing any axis results in reduction of all elements."),
    arg("axis_names", T::Str, D::Optional, "Name(s) of the axis or axes along which the reduction is performed. The input layout is used to translate the axis names to axis indices, for example `axis_names=\"HW\"` with input layout \"FHWC\" is equivalent to specifying `axes=[1,2]`. This argument cannot be used together with `axes`."),
    arg("keep_dims", T::Bool, D::Bool(false), "If True, maintains original input dimensions."),
];
const DTYPE_ARGS: &[ArgSchema] = &[arg("dtype", T::DType, D::Optional, "Output data type. This type is used to accumulate the result.")];
const DDOF_ARGS: &[ArgSchema] = &[arg("ddof", T::Int, D::Int(0), "Delta Degrees of Freedom. Adjusts the divisor used in calculations, which is `N - ddof`.")];

const fn schema(name: &'static str, doc: &'static str, inputs: usize, args: &'static [&'static [ArgSchema]]) -> OpSchema {
    OpSchema {
        name,
        doc,
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: inputs,
        max_inputs: inputs,
        num_outputs: 1,
        host_inputs: &[],
        args,
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    }
}

/// `fn.reductions.min`.
pub static MIN: OpDef = OpDef {
    schema: schema("reductions__Min", "Gets minimal input element along provided axes.", 1, &[AXES_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Min)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Min)?)))),
};

/// `fn.reductions.max`.
pub static MAX: OpDef = OpDef {
    schema: schema("reductions__Max", "Gets maximal input element along provided axes.", 1, &[AXES_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Max)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Max)?)))),
};

/// `fn.reductions.sum`.
pub static SUM: OpDef = OpDef {
    schema: schema("reductions__Sum", "Gets sum of elements along provided axes.", 1, &[AXES_ARGS, DTYPE_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Sum)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Sum)?)))),
};

/// `fn.reductions.mean`.
pub static MEAN: OpDef = OpDef {
    schema: schema("reductions__Mean", "Gets mean of elements along provided axes.", 1, &[AXES_ARGS, DTYPE_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Mean)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Mean)?)))),
};

/// `fn.reductions.mean_square`.
pub static MEAN_SQUARE: OpDef = OpDef {
    schema: schema("reductions__MeanSquare", "Gets mean square of elements along provided axes.", 1, &[AXES_ARGS, DTYPE_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::MeanSquare)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::MeanSquare)?)))),
};

/// `fn.reductions.rms`.
pub static RMS: OpDef = OpDef {
    schema: schema("reductions__RMS", "Gets root mean square of elements along provided axes.", 1, &[AXES_ARGS, DTYPE_ARGS]),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Rms)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Rms)?)))),
};

/// `fn.reductions.std_dev`.
pub static STD_DEV: OpDef = OpDef {
    schema: schema(
        "reductions__StdDev",
        "Gets standard deviation of elements along provided axes. Inputs: `data`, and `mean` (float or TensorList of float): the mean value to use in the calculations, one per output element.",
        2,
        &[AXES_ARGS, DDOF_ARGS],
    ),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::StdDev)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::StdDev)?)))),
};

/// `fn.reductions.variance`.
pub static VARIANCE: OpDef = OpDef {
    schema: schema(
        "reductions__Variance",
        "Gets variance of elements along provided axes. Inputs: `data`, and `mean` (float or TensorList of float): the mean value to use in the calculations, one per output element.",
        2,
        &[AXES_ARGS, DDOF_ARGS],
    ),
    cpu: Some(|ctx| Ok(Box::new(Reduce::new(ctx, Kind::Variance)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::ReduceGpu::new(Reduce::new(ctx, Kind::Variance)?)))),
};

/// The input types every reduction takes (DALI's `REDUCE_TYPES`).
const INPUT_TYPES: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::U64, DType::I64, DType::F32];

/// Which reduction an operator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Min,
    Max,
    Sum,
    Mean,
    MeanSquare,
    Rms,
    StdDev,
    Variance,
}

impl Kind {
    /// True for the reductions with a mean input and `ddof`.
    fn with_mean(self) -> bool {
        matches!(self, Kind::StdDev | Kind::Variance)
    }

    fn pre(self) -> Pre {
        match self {
            Kind::Min | Kind::Max | Kind::Sum | Kind::Mean => Pre::Identity,
            Kind::MeanSquare | Kind::Rms => Pre::Square,
            Kind::StdDev | Kind::Variance => Pre::Deviation,
        }
    }

    fn combine(self) -> Combine {
        match self {
            Kind::Min => Combine::Min,
            Kind::Max => Combine::Max,
            _ => Combine::Sum,
        }
    }

    fn post(self) -> Post {
        match self {
            Kind::Min | Kind::Max | Kind::Sum => Post::None,
            Kind::Mean | Kind::MeanSquare | Kind::Variance => Post::Scale,
            Kind::Rms | Kind::StdDev => Post::Root,
        }
    }

    /// Every `dtype` some input allows (checked when the operator is built).
    fn dtypes(self) -> &'static [DType] {
        match self {
            Kind::MeanSquare => &[DType::U64, DType::I64, DType::F32],
            Kind::StdDev | Kind::Variance => &[DType::F32],
            _ => INPUT_TYPES,
        }
    }

    /// The output types DALI's type map allows for `input` (its `SUM_TYPES_MAP`,
    /// `MEAN_TYPES_MAP`, ... rows), the default first.
    fn outputs(self, input: DType) -> &'static [DType] {
        use DType::*;
        match (self, input) {
            (Kind::Min | Kind::Max, t) => same(t),
            (Kind::StdDev | Kind::Variance, _) => &[F32],
            (_, F32) => &[F32],
            (Kind::Sum, U8) => &[U64, U8, F32],
            (Kind::Sum, U16) => &[U64, U16, F32],
            (Kind::Sum, U32) => &[U64, U32, F32],
            (Kind::Sum, I8) => &[I64, I8, F32],
            (Kind::Sum, I16) => &[I64, I16, F32],
            (Kind::Sum, I32) => &[I64, I32, F32],
            (Kind::Sum, t) => same(t), // 64-bit integers
            (Kind::MeanSquare, U8 | U16 | U32 | U64) => &[F32, U64],
            (Kind::MeanSquare, _) => &[F32, I64],
            (Kind::Mean | Kind::Rms, U8) => &[F32, U8],
            (Kind::Mean | Kind::Rms, I8) => &[F32, I8],
            (Kind::Mean | Kind::Rms, U16) => &[F32, U16],
            (Kind::Mean | Kind::Rms, I16) => &[F32, I16],
            (Kind::Mean | Kind::Rms, U32) => &[F32, U32],
            (Kind::Mean | Kind::Rms, I32) => &[F32, I32],
            (Kind::Mean | Kind::Rms, U64) => &[F32, U64],
            (Kind::Mean | Kind::Rms, _) => &[F32, I64],
        }
    }
}

/// `[t]`, for the input types.
fn same(t: DType) -> &'static [DType] {
    match t {
        DType::U8 => &[DType::U8],
        DType::I8 => &[DType::I8],
        DType::U16 => &[DType::U16],
        DType::I16 => &[DType::I16],
        DType::U32 => &[DType::U32],
        DType::I32 => &[DType::I32],
        DType::U64 => &[DType::U64],
        DType::I64 => &[DType::I64],
        _ => &[DType::F32],
    }
}

/// The operator (all eight), both backends' planning and the cpu backend (the gpu backend
/// holds one).
pub struct Reduce {
    ctx: OpContext,
    kind: Kind,
    dtype: Option<DType>,
    keep_dims: bool,
    ddof: i64,
}

/// A planned batch.
struct Plan {
    meta: BatchMeta,
    /// The reduced axes, bit `a` for axis `a`.
    mask: u64,
    /// `std_dev` / `variance` with `axes=[]` (or `axis_names=""`): DALI writes zeros.
    zero_fill: bool,
    in_type: DType,
    out_type: DType,
}

impl Reduce {
    fn new(ctx: &OpContext, kind: Kind) -> Result<Reduce> {
        let op = &ctx.display_name;
        if ctx.args.has("axes") && ctx.args.has("axis_names") {
            return Err(Error::arg(op, "axis_names", "Arguments `axes` and `axis_names` are mutually exclusive"));
        }
        let dtype = if ctx.args.has("dtype") {
            let d = ctx.args.dtype("dtype");
            require_dtype(op, "dtype", d, kind.dtypes())?;
            Some(d)
        } else {
            None
        };
        let keep_dims = ctx.args.bool("keep_dims");
        let ddof = ctx.args.opt_int("ddof").unwrap_or(0);
        Ok(Reduce { ctx: ctx.clone(), kind, dtype, keep_dims, ddof })
    }

    /// The reduced axes of inputs of `ndim` dimensions with `layout` (bit `a` for axis `a`),
    /// and whether none were asked for explicitly (`axes=[]`, `axis_names=""`).
    fn axes(&self, layout: &Layout, ndim: usize) -> Result<(u64, bool)> {
        let op = &self.ctx.display_name;
        if let Some(names) = self.ctx.args.opt_str("axis_names") {
            let mut mask = 0u64;
            for c in names.chars() {
                let a = layout.find(c).ok_or_else(|| Error::arg(op, "axis_names", format!("Axis '{c}' is not present in the input layout \"{}\"", layout.as_str())))?;
                if mask & (1u64 << a) != 0 {
                    return Err(Error::arg(op, "axis_names", format!("Duplicate axis name '{c}'")));
                }
                mask |= 1u64 << a;
            }
            return Ok((mask, names.is_empty()));
        }
        if self.ctx.args.has("axes") {
            let axes = self.ctx.args.ints("axes");
            let n = ndim as i64;
            // DALI checks every index's range before looking for repeats.
            if let Some(&a) = axes.iter().find(|&&a| a < -n || a >= n) {
                return Err(Error::arg(op, "axes", format!("Axis index out of range: {a} not in range [{},{}]", -n, n - 1)));
            }
            let mut mask = 0u64;
            for &a in axes {
                let r = (if a < 0 { a + n } else { a }) as u32;
                if mask & (1u64 << r) != 0 {
                    return Err(Error::arg(op, "axes", format!("Duplicate axis index {r}")));
                }
                mask |= 1u64 << r;
            }
            return Ok((mask, axes.is_empty()));
        }
        Ok((if ndim >= 64 { u64::MAX } else { (1u64 << ndim) - 1 }, false))
    }

    /// Checks a batch of `input` (and of the `mean` input) and describes the output. Shared
    /// by both backends.
    fn plan(&self, ws: &Workspace<'_>, input: &BatchMeta, mean: Option<&BatchMeta>) -> Result<Plan> {
        let op = &self.ctx.display_name;
        let (n, ndim, in_type) = (input.len(), input.ndim(), input.dtype());
        let at = |i: usize| self.ctx.at(ws.iteration, i, input.source_info(i.min(n.saturating_sub(1))));
        if !INPUT_TYPES.contains(&in_type) {
            return Err(Error::data(at(0), format!(
                "Unsupported input type: {}; supported: uint8, int8, uint16, int16, uint32, int32, uint64, int64, float",
                in_type.cpp_name()
            )));
        }
        let allowed = self.kind.outputs(in_type);
        let out_type = self.dtype.unwrap_or(allowed[0]);
        if !allowed.contains(&out_type) {
            let names: Vec<&str> = allowed.iter().map(|d| d.dali_name()).collect();
            return Err(Error::arg(op, "dtype", format!(
                "Unsupported types: {}, {} (input, output); for {} input the output type may be {}",
                in_type.cpp_name(),
                out_type.cpp_name(),
                in_type.dali_name(),
                names.join(", ")
            )));
        }
        if ndim > MAX_NDIM {
            return Err(Error::type_mismatch(op, format!("input 0 has {ndim} dimensions; reductions support at most {MAX_NDIM}")));
        }
        let (mask, none_asked) = self.axes(input.layout(), ndim)?;
        let reduced = |a: usize| (mask >> a) & 1 != 0;

        let out_ndim = if self.keep_dims { ndim } else { ndim - mask.count_ones() as usize };
        let mut shapes = Vec::with_capacity(n * out_ndim);
        for i in 0..n {
            let s = input.shape(i);
            for (a, &e) in s.iter().enumerate() {
                if !reduced(a) {
                    shapes.push(e);
                } else if self.keep_dims {
                    shapes.push(1);
                }
            }
        }
        let mut meta = BatchMeta::new(out_type, out_ndim, (0..n).map(|i| &shapes[i * out_ndim..(i + 1) * out_ndim]));
        let layout = input.layout().as_str();
        if !layout.is_empty() {
            let kept: String = layout.chars().enumerate().filter(|&(a, _)| self.keep_dims || !reduced(a)).map(|(_, c)| c).collect();
            meta.set_layout(Layout::new(&kept).map_err(|e| Error::arg(op, "axes", e))?);
        }
        meta.inherit_source_info(input);

        let zero_fill = self.kind.with_mean() && none_asked;
        if let Some(m) = mean {
            if m.dtype() != DType::F32 {
                return Err(Error::type_mismatch(op, format!("input 1 (mean) must be FLOAT, got {}", m.dtype())));
            }
            if m.len() != n {
                return Err(Error::data(at(0), format!("input 1 (mean) has {} samples, input 0 has {n}", m.len())));
            }
            if !zero_fill {
                for i in 0..n {
                    let (have, want) = (m.numel(i), meta.numel(i));
                    if have != want && have != 1 {
                        return Err(Error::data(at(i), format!(
                            "input 1 (mean) has shape {:?} ({have} values); expected one value per output element ({want}: the reduced shape {:?}), or one for all",
                            m.shape(i),
                            meta.shape(i)
                        )));
                    }
                }
            }
        }
        Ok(Plan { meta, mask, zero_fill, in_type, out_type })
    }

    /// DALI's `v` for a sample of geometry `g`: the elements reduced into each output
    /// element, less `ddof` for `std_dev` / `variance`. Shared by the backends.
    fn divisor(&self, g: &Geometry) -> i64 {
        g.count as i64 - if self.kind.with_mean() { self.ddof } else { 0 }
    }
}

impl Operator for Reduce {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let mean = ws.inputs.get(1).copied();
        let Plan { meta, mask, zero_fill, in_type, out_type } = self.plan(ws, input.meta(), mean.map(|m| m.meta()))?;
        let mut out = TensorList::for_overwrite(meta); // every element is written
        let (pre, combine, post) = (self.kind.pre(), self.kind.combine(), self.kind.post());
        for_each_sample(ws.pool, &mut out, |i, dst| {
            if zero_fill {
                dst.fill(0);
                return Ok(());
            }
            let geometry = Geometry::new(input.shape(i), mask);
            let job = Sample {
                src: input.bytes(i),
                dst,
                geometry: &geometry,
                pre,
                combine,
                post,
                divisor: self.divisor(&geometry),
                mean: match mean {
                    Some(m) => bytemuck::cast_slice(m.bytes(i)),
                    None => &[],
                },
            };
            dispatch(in_type, out_type, job)
        })?;
        Ok(vec![out])
    }
}

/// Runs `job` typed for `(input, output)`: every pair [`Kind::outputs`] allows (the output is
/// the input type, UINT64, INT64 or FLOAT).
fn dispatch(input: DType, output: DType, job: Sample<'_>) -> Result<()> {
    macro_rules! outputs {
        ($s:ty) => {
            match output {
                DType::U64 => run_sample::<$s, u64>(job),
                DType::I64 => run_sample::<$s, i64>(job),
                DType::F32 => run_sample::<$s, f32>(job),
                t if t == <$s as Src>::DTYPE => run_sample::<$s, $s>(job),
                t => return Err(Error::Unsupported(format!("internal error (please report this): reduction of {} to {}", input, t))),
            }
        };
    }
    match input {
        DType::U8 => outputs!(u8),
        DType::I8 => outputs!(i8),
        DType::U16 => outputs!(u16),
        DType::I16 => outputs!(i16),
        DType::U32 => outputs!(u32),
        DType::I32 => outputs!(i32),
        DType::U64 => outputs!(u64),
        DType::I64 => outputs!(i64),
        DType::F32 => outputs!(f32),
        t => return Err(Error::Unsupported(format!("internal error (please report this): reduction of {t}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{ArgValue, Args};

    pub(super) fn op(def: &OpDef, kind: Kind, given: Vec<(&str, ArgValue)>) -> Result<Reduce> {
        let ctx = OpContext {
            args: Args::check(&def.schema, "reductions.x", given.into_iter().map(|(k, v)| (k.to_string(), v)).collect(), &[])?,
            display_name: "reductions.x".into(),
            instance_name: "r".into(),
            op_id: 1,
            seed: 1,
            max_batch_size: 4,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        };
        Reduce::new(&ctx, kind)
    }

    pub(super) fn run(r: &mut Reduce, inputs: &[&TensorList]) -> Result<TensorList> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ws = Workspace { inputs: inputs.to_vec(), arg_inputs: Default::default(), iteration: 0, batch_size: inputs[0].len(), frames: None, pool: &pool };
        Ok(r.run(&ws)?.remove(0))
    }

    fn batch(shape: &[usize]) -> TensorList {
        let n: usize = shape.iter().product();
        TensorList::from_samples(&[shape.to_vec()], &[(0..n as i32).collect::<Vec<i32>>()]).with_layout("HWC")
    }

    #[test]
    fn shapes_layouts_and_default_types_are_dalis() {
        let x = batch(&[2, 3, 4]);
        let out = run(&mut op(&SUM, Kind::Sum, vec![]).unwrap(), &[&x]).unwrap();
        assert_eq!((out.dtype(), out.ndim(), out.layout().as_str()), (DType::I64, 0, ""));
        assert_eq!(out.sample::<i64>(0), &[276]);
        let out = run(&mut op(&SUM, Kind::Sum, vec![("axes", ArgValue::IntList(vec![-1, 0]))]).unwrap(), &[&x]).unwrap();
        assert_eq!((out.shape(0), out.layout().as_str()), (&[3][..], "W"));
        assert_eq!(out.sample::<i64>(0), &[60, 92, 124]);
        let out = run(&mut op(&MAX, Kind::Max, vec![("axis_names", ArgValue::Str("H".into())), ("keep_dims", ArgValue::Bool(true))]).unwrap(), &[&x]).unwrap();
        assert_eq!((out.dtype(), out.shape(0), out.layout().as_str()), (DType::I32, &[1, 3, 4][..], "HWC"));
        let out = run(&mut op(&MEAN, Kind::Mean, vec![("axes", ArgValue::IntList(vec![]))]).unwrap(), &[&x]).unwrap();
        assert_eq!((out.dtype(), out.shape(0), out.layout().as_str()), (DType::F32, &[2, 3, 4][..], "HWC"));
        assert_eq!(out.sample::<f32>(0)[5], 5.0);
    }

    #[test]
    fn errors_name_the_operator_and_the_argument() {
        let x = batch(&[2, 3, 4]);
        let e = run(&mut op(&SUM, Kind::Sum, vec![("axes", ArgValue::IntList(vec![5]))]).unwrap(), &[&x]).unwrap_err().to_string();
        assert!(e.contains("reductions.x") && e.contains("axes") && e.contains("Axis index out of range: 5 not in range [-3,2]"), "{e}");
        let e = run(&mut op(&SUM, Kind::Sum, vec![("axes", ArgValue::IntList(vec![0, -3]))]).unwrap(), &[&x]).unwrap_err().to_string();
        assert!(e.contains("Duplicate axis index 0"), "{e}");
        let e = op(&SUM, Kind::Sum, vec![("axes", ArgValue::IntList(vec![0])), ("axis_names", ArgValue::Str("H".into()))]).err().unwrap().to_string();
        assert!(e.contains("mutually exclusive"), "{e}");
        let e = run(&mut op(&RMS, Kind::Rms, vec![("dtype", ArgValue::Int(DType::I64 as i64))]).unwrap(), &[&x]).unwrap_err().to_string();
        assert!(e.contains("dtype") && e.contains("Unsupported types: int32, int64"), "{e}");
        let e = op(&MEAN_SQUARE, Kind::MeanSquare, vec![("dtype", ArgValue::Int(DType::U8 as i64))]).err().unwrap().to_string();
        assert!(e.contains("dtype") && e.contains("UINT8"), "{e}");
        let h = TensorList::uniform(DType::F16, &[2], 1);
        let e = run(&mut op(&SUM, Kind::Sum, vec![]).unwrap(), &[&h]).unwrap_err().to_string();
        assert!(e.contains("Unsupported input type: float16"), "{e}");
    }

    #[test]
    fn variance_takes_one_mean_per_output_element_or_one_for_all() {
        let x = TensorList::from_samples(&[vec![2, 2]], &[vec![1.0f32, 2.0, 3.0, 5.0]]);
        let m = TensorList::from_samples(&[vec![2]], &[vec![2.0f32, 3.5]]);
        let out = run(&mut op(&VARIANCE, Kind::Variance, vec![("axes", ArgValue::IntList(vec![0]))]).unwrap(), &[&x, &m]).unwrap();
        assert_eq!(out.sample::<f32>(0), &[1.0, 2.25]);
        let one = TensorList::from_samples(&[vec![]], &[vec![2.0f32]]);
        let out = run(&mut op(&STD_DEV, Kind::StdDev, vec![("axes", ArgValue::IntList(vec![0])), ("ddof", ArgValue::Int(1))]).unwrap(), &[&x, &one]).unwrap();
        assert_eq!(out.sample::<f32>(0), &[2f32.sqrt(), 3.0]);
        let three = TensorList::from_samples(&[vec![3]], &[vec![0.0f32; 3]]);
        let e = run(&mut op(&VARIANCE, Kind::Variance, vec![("axes", ArgValue::IntList(vec![0]))]).unwrap(), &[&x, &three]).unwrap_err().to_string();
        assert!(e.contains("mean") && e.contains("sample 0"), "{e}");
        let out = run(&mut op(&VARIANCE, Kind::Variance, vec![("axes", ArgValue::IntList(vec![]))]).unwrap(), &[&x, &three]).unwrap();
        assert_eq!(out.sample::<f32>(0), &[0.0; 4]);
    }
}
