//! `fn.gaussian_blur`, bit for bit DALI 2.4's cpu operator (`tests/test_filters.py`):
//!
//! - Per spatial axis (one value, or one per axis, outermost first; per sample): a window of
//!   `window_size` points, or `2 * ceil(3 * sigma) + 1` when only `sigma` is given; a sigma of
//!   `((window_size - 1) / 2 - 1) * 0.3 + 0.8` when only the window is given.
//! - Weights in f32 as DALI's `FillGaussian`: `expf(-x² * (0.5 / sigma²))` for the left tail,
//!   summed left to right, doubled, plus one, each weight times the reciprocal; the centre is
//!   the reciprocal itself.
//! - The separable engine ([`super::separable`]); the output is the input type or FLOAT.
//!
//! Errors (an even window, negative values, both zero) name the argument, the sample and the
//! axis. Zero-sized spatial extents give an empty output (DALI crashes on them).

use super::gpu::SeparableGpu;
use super::separable;
use super::Dims;
use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace, MAX_LIST};
use crate::tensor::channel::{dispatch_same_or_float, Channel, PairKernel};
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn.gaussian_blur`.
pub static GAUSSIAN_BLUR: OpDef = OpDef {
    schema: OpSchema {
        name: "GaussianBlur",
        doc: "Applies a Gaussian blur to the input: a separable convolution with a Gaussian window per spatial axis (reflect-101 borders). Give `sigma`, `window_size` or both, one value or one per spatial axis.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("sigma", T::FloatList, D::FloatList(&[0.0]), "Sigma of the Gaussian, one value or one per spatial axis; derived from window_size when 0.").per_frame(),
            tensor_arg("window_size", T::IntList, D::IntList(&[0]), "Diameter of the window (odd), one value or one per spatial axis; derived from sigma when 0.").per_frame(),
            arg("dtype", T::DType, D::Optional, "Output data type: the input type (default) or FLOAT."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(GaussianBlur::new(ctx)))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(SeparableGpu::new(Box::new(GaussianBlur::new(ctx)))))),
};

/// The input types the engine takes.
pub const TYPES: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16, DType::U32, DType::I32, DType::F32];

/// A batch's plan: the output, its types, its dimensions, and per sample one window per
/// spatial axis (in `weights`, at `windows[sample * spatial + axis]`).
pub struct Plan {
    pub meta: BatchMeta,
    pub in_type: DType,
    pub out_type: DType,
    pub dims: Dims,
    pub weights: Vec<f32>,
    pub windows: Vec<(usize, usize)>,
}

impl Plan {
    /// Sample `i`'s windows, outermost axis first.
    pub fn sample_windows(&self, i: usize) -> impl Iterator<Item = &[f32]> {
        let s = self.dims.spatial;
        self.windows[i * s..(i + 1) * s].iter().map(|&(at, len)| &self.weights[at..at + len])
    }
}

/// What a separable filter tells the engine: its plan of a batch.
pub trait SeparableFilter: Send {
    fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Plan>;
    fn name(&self) -> &str;
}

pub struct GaussianBlur {
    ctx: OpContext,
    dtype: Option<DType>,
}

impl GaussianBlur {
    fn new(ctx: &OpContext) -> GaussianBlur {
        GaussianBlur { ctx: ctx.clone(), dtype: ctx.args.has("dtype").then(|| ctx.args.dtype("dtype")) }
    }
}

/// DALI's `FillGaussian`: the weights of an `n`-point window of `sigma`, in f32.
pub fn gaussian_window(sigma: f32, n: usize, out: &mut Vec<f32>) {
    let r = n / 2;
    let start = out.len();
    let exp_scale = 0.5f32 / (sigma * sigma);
    let mut sum = 0.0f32;
    for x in -(r as i64)..0 {
        let w = (-((x * x) as f32 * exp_scale)).exp();
        out.push(w);
        sum += w;
    }
    let sum = ((sum as f64 * 2.0) as f32 as f64 + 1.0) as f32;
    let scale = 1.0f32 / sum;
    for w in &mut out[start..] {
        *w *= scale;
    }
    out.push(scale);
    for x in (0..r).rev() {
        let w = out[start + x];
        out.push(w);
    }
}

impl SeparableFilter for GaussianBlur {
    fn name(&self) -> &str {
        &self.ctx.display_name
    }

    fn plan(&mut self, ws: &Workspace<'_>, input: &BatchMeta) -> Result<Plan> {
        let name = &self.ctx.display_name;
        let dims = Dims::parse(name, input.layout().as_str(), input.ndim())?;
        let in_type = input.dtype();
        let out_type = self.dtype.unwrap_or(in_type);
        if out_type != in_type && out_type != DType::F32 {
            return Err(Error::arg(name, "dtype", format!("the output type must be the input type ({in_type}) or FLOAT, got {out_type}")));
        }
        if !TYPES.contains(&in_type) && !input.is_empty() {
            let names: Vec<&str> = TYPES.iter().map(|t| t.dali_name()).collect();
            return Err(Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("unsupported input type {in_type}; supported: {}", names.join(", "))));
        }
        let axes = dims.spatial;
        let (sigma, window) = (ws.per_sample_list(&self.ctx, "sigma"), ws.per_sample_list(&self.ctx, "window_size"));
        let (mut sbuf, mut wbuf) = ([0.0; MAX_LIST], [0.0; MAX_LIST]);
        let mut plan = Plan { meta: input.clone(), in_type, out_type, dims, weights: Vec::new(), windows: Vec::with_capacity(input.len() * axes) };
        let lengths: &[usize] = if axes == 1 { &[1] } else { &[1, axes] };
        for i in 0..input.len() {
            let s = sigma.get(name, "sigma", i, lengths, &mut sbuf)?.unwrap_or(&[0.0]);
            let w = window.get(name, "window_size", i, lengths, &mut wbuf)?.unwrap_or(&[0.0]);
            for a in 0..axes {
                let sv = if s.len() == 1 { s[0] } else { s[a] } as f32;
                let wv = if w.len() == 1 { w[0] } else { w[a] };
                let at = format!("sample {i}, axis {a}");
                if !sv.is_finite() || sv < 0.0 {
                    return Err(Error::arg(name, "sigma", format!("must be non-negative and finite; got {sv} for {at}")));
                }
                if wv < 0.0 {
                    return Err(Error::arg(name, "window_size", format!("must be non-negative; got {wv} for {at}")));
                }
                if sv == 0.0 && wv == 0.0 {
                    return Err(Error::arg(name, "sigma", format!("`sigma` and `window_size` must not both be 0 ({at})")));
                }
                let n = if wv == 0.0 { (2.0f32 * (sv * 3.0f32).ceil() + 1.0f32) as i64 } else { wv as i64 };
                if n % 2 == 0 {
                    return Err(Error::arg(name, "window_size", format!("the window must have an odd length, got {n} ({at})")));
                }
                if n > 1 << 20 {
                    return Err(Error::arg(name, "window_size", format!("a window of {n} points is too long ({at})")));
                }
                let sigma = if sv == 0.0 { (((n - 1) / 2 - 1) as f64 * 0.3 + 0.8) as f32 } else { sv };
                let start = plan.weights.len();
                gaussian_window(sigma, n as usize, &mut plan.weights);
                plan.windows.push((start, n as usize));
            }
        }
        plan.meta = output_meta(input, out_type);
        Ok(plan)
    }
}

/// The input's shapes and layout, of `dtype`.
pub fn output_meta(input: &BatchMeta, dtype: DType) -> BatchMeta {
    let mut meta = BatchMeta::new(dtype, input.ndim(), (0..input.len()).map(|i| input.shape(i)));
    meta.set_layout(input.layout().clone());
    meta.inherit_source_info(input);
    meta
}

impl Operator for GaussianBlur {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let plan = self.plan(ws, input.meta())?;
        run_cpu(ws, input, plan)
    }
}

/// Runs a plan on the cpu over the worker pool.
pub fn run_cpu(ws: &Workspace<'_>, input: &TensorList, plan: Plan) -> Result<Vec<TensorList>> {
    let mut out = TensorList::for_overwrite(plan.meta.clone());
    let plan = &plan;
    for_each_sample(ws.pool, &mut out, |i, dst| {
        let (outer, spatial, c) = plan.dims.split(input.shape(i));
        let windows: Vec<&[f32]> = plan.sample_windows(i).collect();
        let job = Job { dst, src: input.bytes(i), outer, spatial, c, windows: &windows };
        dispatch_same_or_float(plan.in_type, plan.out_type, job).expect("types checked by the plan");
        Ok(())
    })?;
    Ok(vec![out])
}

struct Job<'a> {
    dst: &'a mut [u8],
    src: &'a [u8],
    outer: usize,
    spatial: &'a [usize],
    c: usize,
    windows: &'a [&'a [f32]],
}

impl PairKernel for Job<'_> {
    type Output = ();

    fn run<I: Channel, O: Channel>(self) {
        separable::convolve::<I, O>(bytemuck::cast_slice_mut(self.dst), bytemuck::cast_slice(self.src), self.outer, self.spatial, self.c, self.windows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DALI 2.4's windows (hex floats printed by DALI), including ones where `expf` and a
    /// double `exp` differ in the last bit.
    #[test]
    fn windows_are_dalis() {
        let mut w = Vec::new();
        gaussian_window(0.8, 3, &mut w);
        assert_eq!(w.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), [0x3e74baea, 0x3f05a28b, 0x3e74baea]);
        w.clear();
        gaussian_window(0.3747795820236206f64 as f32, 15, &mut w);
        // 0x1.b8f97ep-6 at 6 and 8
        assert_eq!(w[6].to_bits(), 0x3cdc7cbf);
        assert_eq!(w[8], w[6]);
    }
}
