//! `random.choice`: picks from `a`: a scalar integer n means `range(n)` (output has n's
//! type), an array means its elements along the first axis (output shape `shape + a.shape[1:]`,
//! its type and layout without the first letter). `a` may also be the constant `__a`
//! (INT32 output, as DALI's constant input). `p` gives the probabilities.

use super::sample_shape;
use crate::error::{Error, Result};
use crate::ops::args::scalar_as_f64;
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, Layout, TensorList};

/// Schema and backends.
pub static CHOICE: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Choice",
        doc: "Generates a random sample from a given 1D array: input `a` is either a scalar n (then range(n) is used) or an array whose elements along the first axis are picked. A second input, if given, only supplies the output shape (`shape_like`).",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 2,
        num_outputs: 1,
        args: &[&[
            arg("__a", T::Int, D::Optional, "Constant form of input `a`: a scalar n means range(n)."),
            arg("p", T::FloatList, D::Optional, "Probabilities of the elements; uniform when not given."),
            arg("shape", T::IntList, D::Optional, "Shape of the output data; a scalar when not given."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(Choice::new(ctx)?))),
    mixed: None,
    gpu: None,
};

struct Choice {
    ctx: OpContext,
    shape: Vec<usize>,
    /// Cumulative probabilities (normalised), empty for uniform.
    cdf: Vec<f64>,
    /// Output shapes, reused between iterations.
    shapes: Vec<usize>,
}

impl Choice {
    fn new(ctx: &OpContext) -> Result<Choice> {
        let name = &ctx.display_name;
        let mut cdf = Vec::new();
        if ctx.args.has("p") {
            let mut acc = 0.0;
            for &p in ctx.args.floats("p") {
                if !(p >= 0.0) {
                    return Err(Error::arg(name, "p", format!("probabilities must be >= 0, got {p}")));
                }
                acc += p;
                cdf.push(acc);
            }
            if (acc - 1.0).abs() > 1e-4 {
                return Err(Error::arg(name, "p", format!("probabilities must sum to 1, got {acc}")));
            }
            cdf.iter_mut().for_each(|c| *c /= acc);
        }
        if let Some(n) = ctx.args.opt_int("__a") {
            if n < 1 {
                return Err(Error::arg(name, "__a", format!("must be >= 1, got {n}")));
            }
        }
        Ok(Choice { ctx: ctx.clone(), shape: sample_shape(ctx)?, cdf, shapes: Vec::new() })
    }

    fn pick(&self, rng: &mut crate::rng::SampleRng, n: usize) -> usize {
        if self.cdf.is_empty() {
            rng.below(n as u64) as usize
        } else {
            let u = rng.next_f64();
            self.cdf.partition_point(|&c| c <= u).min(n - 1)
        }
    }
}

impl Operator for Choice {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let name = self.ctx.display_name.clone();
        let constant = self.ctx.args.opt_int("__a");
        let (a, like) = match constant {
            Some(_) => (None, ws.inputs.first().copied()),
            None => (ws.inputs.first().copied(), ws.inputs.get(1).copied()),
        };
        if a.is_none() && constant.is_none() {
            return Err(Error::arg(&name, "__a", "the operator needs input `a` (a scalar n or an array)"));
        }
        let n_samples = a.map_or(like.map_or(ws.batch_size, |l| l.len()), |t| t.len());
        // Output type, trailing shape and layout.
        let (dtype, tail_ndim, layout) = match a {
            None => (DType::I32, 0, Layout::empty()),
            Some(t) if t.ndim() == 0 => (t.dtype(), 0, Layout::empty()),
            Some(t) => {
                let l = t.layout().as_str();
                (t.dtype(), t.ndim() - 1, if l.is_empty() { Layout::empty() } else { Layout::from(&l[1..]) })
            }
        };
        let base_ndim = like.map_or(self.shape.len(), |l| l.ndim());
        let ndim = base_ndim + tail_ndim;
        let mut shapes = std::mem::take(&mut self.shapes);
        shapes.clear();
        for i in 0..n_samples {
            shapes.extend_from_slice(like.map_or(&self.shape[..], |l| l.shape(i)));
            if let Some(t) = a.filter(|t| t.ndim() > 0) {
                shapes.extend_from_slice(&t.shape(i)[1..]);
            }
        }
        self.shapes = shapes;
        // Validate every sample's `a` first.
        let mut counts = Vec::with_capacity(n_samples);
        for i in 0..n_samples {
            let n = match a {
                None => constant.unwrap() as usize,
                Some(t) if t.ndim() == 0 => {
                    if t.dtype().is_float() || t.dtype() == DType::Bool {
                        return Err(Error::arg(&name, "a", format!("a scalar `a` must be an integer, got {} in sample {i}", t.dtype())));
                    }
                    let v = scalar_as_f64(t, i);
                    if v < 1.0 {
                        return Err(Error::arg(&name, "a", format!("a scalar `a` must be >= 1; sample {i} has {v}")));
                    }
                    v as usize
                }
                Some(t) => t.shape(i)[0],
            };
            if n == 0 {
                return Err(Error::arg(&name, "a", format!("sample {i} has nothing to choose from")));
            }
            if !self.cdf.is_empty() && self.cdf.len() != n {
                return Err(Error::arg(&name, "p", format!("has {} probabilities but sample {i} of `a` has {n} elements", self.cdf.len())));
            }
            counts.push(n);
        }
        let mut out = TensorList::new(dtype, ndim, (0..n_samples).map(|i| &self.shapes[i * ndim..(i + 1) * ndim]));
        if !layout.is_empty() && layout.ndim() == ndim {
            out.set_layout(layout);
        }
        let elem = dtype.size();
        let this = &*self;
        for_each_sample(ws.pool, &mut out, |i, bytes| {
            let mut rng = ws.rng(&this.ctx, i);
            let n = counts[i];
            match a {
                Some(t) if t.ndim() > 0 => {
                    let src = t.bytes(i);
                    let row = src.len() / n;
                    if row == 0 {
                        return Ok(());
                    }
                    for d in bytes.chunks_exact_mut(row) {
                        let k = this.pick(&mut rng, n);
                        d.copy_from_slice(&src[k * row..(k + 1) * row]);
                    }
                }
                _ => {
                    for k in 0..bytes.len() / elem {
                        let v = this.pick(&mut rng, n) as f64;
                        crate::ops::cast::store_f64(dtype, bytes, k, v);
                    }
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
