//! `fn.normalize`: `out = scale * (in - mean) / stddev + shift`, with mean and standard
//! deviation given (scalars, or per-sample tensors broadcast over the reduced axes) or computed
//! over `axes` per sample or over the whole batch (`batch=True`), as DALI 2.4 does:
//! the computed variance is taken around the mean in use (given or computed), divided by
//! `N - ddof`, `epsilon` is added to it (also to a given `stddev` squared), and a computed
//! zero variance gives a zero output instead of a division by zero. Sums run in f64.

mod gpu;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ops::cast::require_dtype;
use crate::tensor::element::{load_f64, store_f64};
use crate::ops::{arg, for_each_sample, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// Most dimensions a normalized tensor may have.
pub const MAX_NDIM: usize = 16;

/// Schema and backends.
pub static NORMALIZE: OpDef = OpDef {
    schema: OpSchema {
        name: "Normalize",
        doc: "Normalizes the input by removing the mean and dividing by the standard deviation: out = scale * (in - mean) / stddev + shift. Mean and standard deviation are computed over `axes` (all by default) unless given.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("axes", T::IntList, D::Optional, "Indices of dimensions along which the input is normalized; all axes by default."),
            arg("axis_names", T::Str, D::Optional, "Names of the axes along which the input is normalized, from the input layout; excludes `axes`."),
            arg("batch", T::Bool, D::Bool(false), "Compute mean and standard deviation across all samples of the batch."),
            arg("ddof", T::Int, D::Int(0), "Delta degrees of freedom: the variance is sum((x - mean)^2) / (N - ddof)."),
            arg("dtype", T::DType, D::Optional, "Output type (FLOAT by default); integers are rounded and clamped."),
            arg("epsilon", T::Float, D::Float(0.0), "Added to the variance to avoid division by small numbers."),
            tensor_arg("mean", T::Float, D::Optional, "Mean to subtract: a scalar, or per-sample tensors with the input's dimensionality (extent 1 or the input's in each dimension). Computed when not given."),
            tensor_arg("stddev", T::Float, D::Optional, "Standard deviation: as `mean`. Computed when not given."),
            arg("scale", T::Float, D::Float(1.0), "Scaling factor applied to the output."),
            arg("shift", T::Float, D::Float(0.0), "Value the mean maps to in the output."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Normalize::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::NormalizeGpu::new(ctx)?))),
};

const INPUT_TYPES: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16, DType::I32, DType::F32];
const OUTPUT_TYPES: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16, DType::I32, DType::F32];

struct Normalize {
    ctx: OpContext,
    dtype: DType,
    /// Per-sample mean and 1/stddev (times scale), in parameter space; reused between runs.
    mean: Vec<f64>,
    inv: Vec<f64>,
    offsets: Vec<usize>,
    /// Per sample, how many elements each of its computed parameters is taken over: the
    /// product of the reduced extents, or with `batch=True` that summed over the batch.
    counts: Vec<f64>,
}

/// Where a parameter comes from.
#[derive(Clone, Copy)]
enum Param<'a> {
    Computed,
    Scalar(f64),
    Tensor(&'a TensorList),
}

impl Normalize {
    fn new(ctx: &OpContext) -> Result<Normalize> {
        let name = &ctx.display_name;
        let dtype = if ctx.args.has("dtype") { ctx.args.dtype("dtype") } else { DType::F32 };
        require_dtype(name, "dtype", dtype, OUTPUT_TYPES)?;
        if ctx.args.has("axes") && ctx.args.has("axis_names") {
            return Err(Error::arg(name, "axis_names", "`axes` and `axis_names` are mutually exclusive"));
        }
        if ctx.args.bool("batch") {
            for a in ["mean", "stddev"] {
                if ctx.arg_input_names.iter().any(|n| n == a) {
                    return Err(Error::arg(name, a, "per-sample values cannot be used with batch=True; pass a scalar"));
                }
            }
        }
        Ok(Normalize { ctx: ctx.clone(), dtype, mean: Vec::new(), inv: Vec::new(), offsets: Vec::new(), counts: Vec::new() })
    }

    fn param<'a>(&self, ws: &Workspace<'a>, name: &'static str) -> Param<'a> {
        match ws.arg_inputs.get(name) {
            Some(t) => Param::Tensor(t),
            None => match self.ctx.args.opt_float(name) {
                Some(v) => Param::Scalar(v),
                None => Param::Computed,
            },
        }
    }

    /// Reduced-axis mask for an input of `ndim` dimensions.
    fn reduced(&self, ws: &Workspace<'_>, input: &BatchMeta, ndim: usize, mean: Param<'_>, stddev: Param<'_>) -> Result<[bool; MAX_NDIM]> {
        let err = |arg: &str, m: String| Error::data(self.ctx.at(ws.iteration, 0, input.source_info(0)), format!("argument '{arg}': {m}"));
        let mut mask = [false; MAX_NDIM];
        if let Some(names) = self.ctx.args.opt_str("axis_names") {
            let layout = input.layout().as_str();
            for c in names.chars() {
                let a = layout.find(c).ok_or_else(|| err("axis_names", format!("axis '{c}' is not in the input layout '{layout}'")))?;
                mask[a] = true;
            }
        } else if self.ctx.args.has("axes") {
            for &a in self.ctx.args.ints("axes") {
                let r = if a < 0 { a + ndim as i64 } else { a };
                if r < 0 || r >= ndim as i64 {
                    return Err(err("axes", format!("axis {a} is out of range for a {ndim}-D input")));
                }
                mask[r as usize] = true;
            }
        } else {
            // Inferred from a tensor parameter (extent 1 = reduced), else all axes.
            match [mean, stddev].into_iter().find_map(|p| if let Param::Tensor(t) = p { Some(t) } else { None }) {
                Some(t) if t.len() > 0 && t.ndim() == ndim => {
                    for a in 0..ndim {
                        mask[a] = t.shape(0)[a] == 1;
                    }
                }
                _ => mask[..ndim].fill(true),
            }
        }
        Ok(mask)
    }
}

/// Parameter-space strides (0 on reduced axes) of a sample of `shape`; returns the count.
pub(crate) fn param_strides(shape: &[usize], reduced: &[bool], strides: &mut [usize; MAX_NDIM]) -> usize {
    let mut s = 1;
    for a in (0..shape.len()).rev() {
        if reduced[a] {
            strides[a] = 0;
        } else {
            strides[a] = s;
            s *= shape[a];
        }
    }
    s
}

/// A computed standard deviation turned into what the output multiplies by, from the sum of
/// squared deviations over `count` elements: scale / sqrt(sum / (count - ddof) + epsilon),
/// and 0 where that variance is 0 (DALI: a constant input normalizes to `shift`). The gpu's
/// `inv_stddev` in normalize.cu is this, operation for operation.
pub(crate) fn inv_stddev(sum_sq: f64, count: f64, ddof: f64, epsilon: f64, scale: f64) -> f64 {
    let var = sum_sq / (count - ddof) + epsilon;
    if var == 0.0 {
        0.0
    } else {
        scale / var.sqrt()
    }
}

/// `buf` cut at `offsets` (n + 1 entries) into one slice per sample.
fn split<'a>(buf: &'a mut [f64], offsets: &[usize]) -> Vec<&'a mut [f64]> {
    let mut rest = buf;
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        out.push(a);
        rest = b;
    }
    out
}

/// Calls `f(element, param_index)` for every element of a dense tensor of `shape`.
#[inline(always)]
fn walk(shape: &[usize], strides: &[usize; MAX_NDIM], mut f: impl FnMut(usize, usize)) {
    let ndim = shape.len();
    let n: usize = shape.iter().product();
    if n == 0 {
        return;
    }
    if ndim == 0 {
        f(0, 0);
        return;
    }
    let last = ndim - 1;
    let (inner, ls) = (shape[last], strides[last]);
    let mut idx = [0usize; MAX_NDIM];
    let mut p0 = 0usize;
    let mut k = 0;
    while k < n {
        let mut p = p0;
        for _ in 0..inner {
            f(k, p);
            k += 1;
            p += ls;
        }
        for a in (0..last).rev() {
            idx[a] += 1;
            p0 += strides[a];
            if idx[a] < shape[a] {
                break;
            }
            p0 -= idx[a] * strides[a];
            idx[a] = 0;
        }
    }
}

/// A batch's plan: what [`Normalize::plan`] worked out for both backends.
struct Plan<'a> {
    reduced: [bool; MAX_NDIM],
    mean: Param<'a>,
    stddev: Param<'a>,
    batch: bool,
    ddof: f64,
    epsilon: f64,
    scale: f64,
    shift: f64,
}

impl Normalize {
    /// Checks a batch of `input` and its arguments and lays out the parameter space
    /// (`offsets`, and `counts` for computed parameters): given `mean` / `stddev` are broadcast into `self.mean` / `self.inv` and
    /// a given stddev is already turned into scale / sqrt(stddev^2 + epsilon). Computed ones
    /// are left to the caller (they need the data). Same checks and messages on both backends.
    fn plan<'a>(&mut self, ws: &Workspace<'a>, input: &BatchMeta) -> Result<Plan<'a>> {
        let name = self.ctx.display_name.clone();
        let (ndim, n, dtype) = (input.ndim(), input.len(), input.dtype());
        let at = |i: usize| self.ctx.at(ws.iteration, i, input.source_info(i));
        if !INPUT_TYPES.contains(&dtype) {
            return Err(Error::data(at(0), format!("unsupported input type {dtype}; supported: UINT8, INT8, UINT16, INT16, INT32, FLOAT")));
        }
        if ndim > MAX_NDIM {
            return Err(Error::data(at(0), format!("at most {MAX_NDIM} dimensions are supported, got {ndim}")));
        }
        let mean_p = self.param(ws, "mean");
        let std_p = self.param(ws, "stddev");
        let reduced = self.reduced(ws, input, ndim, mean_p, std_p)?;
        let batch = self.ctx.args.bool("batch");
        let (eps, scale, shift) = (self.ctx.args.float("epsilon"), self.ctx.args.float("scale"), self.ctx.args.float("shift"));
        let ddof = self.ctx.args.int("ddof") as f64;

        // Parameter-space layout: one block per sample (plus one for the batch).
        self.offsets.clear();
        self.offsets.push(0);
        self.counts.clear();
        for i in 0..n {
            let s = input.shape(i);
            if batch && (0..ndim).any(|a| !reduced[a] && s[a] != input.shape(0)[a]) {
                return Err(Error::data(at(i), format!(
                    "with batch=True the non-reduced extents must match across samples; sample {i} has shape {s:?}, sample 0 {:?}",
                    input.shape(0)
                )));
            }
            let mut st = [0; MAX_NDIM];
            let pn = param_strides(s, &reduced[..ndim], &mut st);
            self.offsets.push(self.offsets[i] + pn);
            self.counts.push((0..ndim).filter(|&a| reduced[a]).map(|a| s[a] as f64).product());
        }
        if batch {
            let total: f64 = self.counts.iter().sum();
            self.counts.fill(total);
        }
        let total = self.offsets[n];
        self.mean.clear();
        self.mean.resize(total, 0.0);
        self.inv.clear();
        self.inv.resize(total, 0.0);

        if let (Param::Tensor(m), Param::Tensor(s)) = (mean_p, std_p) {
            // DALI: "When providing both `mean` and `stddev`, their shapes must match."
            if let Some(i) = (0..n.min(m.len()).min(s.len())).find(|&i| m.shape(i) != s.shape(i)) {
                return Err(Error::arg(&name, "stddev", format!(
                    "when both `mean` and `stddev` are given, their shapes must match; sample {i}: {:?} vs {:?}",
                    m.shape(i),
                    s.shape(i)
                )));
            }
        }
        // Tensor parameters: check shapes, broadcast into parameter space.
        for (pname, p, buf) in [("mean", mean_p, &mut self.mean), ("stddev", std_p, &mut self.inv)] {
            if let Param::Tensor(t) = p {
                if t.len() != n {
                    return Err(Error::arg(&name, pname, format!("has {} samples, the input {n}", t.len())));
                }
                for i in 0..n {
                    let s = input.shape(i);
                    let ps = t.shape(i);
                    let scalar = t.numel(i) == 1 && (t.ndim() == 0 || t.ndim() != ndim);
                    if !scalar {
                        let ok = t.ndim() == ndim && (0..ndim).all(|a| ps[a] == 1 || (!reduced[a] && ps[a] == s[a]));
                        if !ok {
                            return Err(Error::arg(&name, pname, format!(
                                "sample {i} has shape {ps:?}; each extent must be 1 or match the input {s:?} (1 on reduced axes)"
                            )));
                        }
                    }
                    // Walk the parameter space of this sample.
                    let mut pshape = [1usize; MAX_NDIM];
                    for a in 0..ndim {
                        if !reduced[a] {
                            pshape[a] = s[a];
                        }
                    }
                    let mut tst = [0usize; MAX_NDIM];
                    if !scalar {
                        let mut acc = 1;
                        for a in (0..ndim).rev() {
                            tst[a] = if ps[a] == 1 { 0 } else { acc };
                            acc *= ps[a];
                        }
                    }
                    let dst = &mut buf[self.offsets[i]..self.offsets[i + 1]];
                    let src = t.bytes(i);
                    let td = t.dtype();
                    walk(&pshape[..ndim], &tst, |k, tp| dst[k] = load_f64(td, src, tp));
                }
            }
        }
        if let Param::Scalar(v) = mean_p {
            self.mean.fill(v);
        }
        if let Param::Scalar(v) = std_p {
            self.inv.fill(v);
        }

        if !matches!(std_p, Param::Computed) {
            for v in &mut self.inv {
                *v = scale / (*v * *v + eps).sqrt();
            }
        }
        Ok(Plan { reduced, mean: mean_p, stddev: std_p, batch, ddof, epsilon: eps, scale, shift })
    }
}

impl Operator for Normalize {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let Plan { reduced, mean: mean_p, stddev: std_p, batch, ddof, epsilon, scale, shift } = self.plan(ws, input.meta())?;
        let (ndim, n, dtype) = (input.ndim(), input.len(), input.dtype());
        let (offsets, counts) = (&self.offsets, &self.counts);
        // Combines per-sample sums over the batch into every sample's block.
        let batch_combine = |buf: &mut Vec<f64>| {
            let pn = offsets.get(1).copied().unwrap_or(0);
            for i in 1..n {
                for k in 0..pn {
                    buf[k] += buf[offsets[i] + k];
                }
            }
            for i in 1..n {
                let (head, tail) = buf.split_at_mut(offsets[i]);
                tail[..pn].copy_from_slice(&head[..pn]);
            }
        };

        if let Param::Computed = mean_p {
            let slices = split(&mut self.mean, offsets);
            ws.pool.install(|| {
                slices.into_par_iter().enumerate().for_each(|(i, m)| {
                    let mut st = [0; MAX_NDIM];
                    param_strides(input.shape(i), &reduced[..ndim], &mut st);
                    let src = input.bytes(i);
                    walk(input.shape(i), &st, |k, p| m[p] += load_f64(dtype, src, k));
                })
            });
            if batch {
                batch_combine(&mut self.mean);
            }
            for i in 0..n {
                self.mean[offsets[i]..offsets[i + 1]].iter_mut().for_each(|m| *m /= counts[i]);
            }
        }
        if let Param::Computed = std_p {
            let mean = &self.mean;
            let slices = split(&mut self.inv, offsets);
            ws.pool.install(|| {
                slices.into_par_iter().enumerate().for_each(|(i, v)| {
                    let mut st = [0; MAX_NDIM];
                    param_strides(input.shape(i), &reduced[..ndim], &mut st);
                    let src = input.bytes(i);
                    let m = &mean[offsets[i]..offsets[i + 1]];
                    walk(input.shape(i), &st, |k, p| {
                        let d = load_f64(dtype, src, k) - m[p];
                        v[p] += d * d;
                    });
                })
            });
            if batch {
                batch_combine(&mut self.inv);
            }
            for i in 0..n {
                for v in &mut self.inv[offsets[i]..offsets[i + 1]] {
                    *v = inv_stddev(*v, counts[i], ddof, epsilon, scale);
                }
            }
        }

        let mut out = TensorList::new(self.dtype, ndim, (0..n).map(|i| input.shape(i)));
        out.set_layout(input.layout().clone());
        out.inherit_source_info(input);
        let (mean, inv, odt) = (&self.mean, &self.inv, self.dtype);
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let mut st = [0; MAX_NDIM];
            param_strides(input.shape(i), &reduced[..ndim], &mut st);
            let src = input.bytes(i);
            let (m, v) = (&mean[offsets[i]..offsets[i + 1]], &inv[offsets[i]..offsets[i + 1]]);
            walk(input.shape(i), &st, |k, p| {
                let x = load_f64(dtype, src, k);
                let y = ((x - m[p]) * v[p] + shift) as f32;
                store_f64(odt, dst, k, y as f64);
            });
            Ok(())
        })?;
        Ok(vec![out])
    }
}
