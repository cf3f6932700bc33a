//! `random.choice`: picks from `a`: a scalar integer n means `range(n)` (output has n's
//! type), an array means its elements along the first axis (output shape `shape + a.shape[1:]`,
//! its type and layout without the first letter). `fn.random.choice(5)` and
//! `fn.random.choice([1, 2])` reach it as the output of a `Constant` (INT32, or FLOAT for a
//! list of floats), as in DALI. `p` gives the probabilities, one list for the batch or one
//! per sample (an argument input).

use super::sample_shape;
use crate::error::{Error, Result};
use crate::ops::args::scalar_as_f64;
use crate::ops::{arg, for_each_sample, tensor_arg, MAX_LIST, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, Layout, TensorList};

/// Schema and backends.
pub static CHOICE: OpDef = OpDef {
    schema: OpSchema {
        name: "random__Choice",
        doc: "Generates a random sample from a given 1D array: input `a` is either a scalar n (then range(n) is used) or an array whose elements along the first axis are picked. A second input, if given, only supplies the output shape (`shape_like`).",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            tensor_arg("p", T::FloatList, D::Optional, "Probabilities of the elements; uniform when not given."),
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
    /// Cumulative probabilities (normalised) of sample i at `cdf[cdf_at[i]..cdf_at[i + 1]]`;
    /// empty for uniform. Refilled every batch, the buffers are reused.
    cdf: Vec<f64>,
    cdf_at: Vec<usize>,
    /// Output shapes, reused between iterations.
    shapes: Vec<usize>,
}

impl Choice {
    fn new(ctx: &OpContext) -> Result<Choice> {
        if ctx.args.has("p") {
            // Checked here too so a bad constant fails at build, not at the first run.
            cdf_of(&ctx.display_name, ctx.args.floats("p"), &mut Vec::new(), None)?;
        }
        Ok(Choice { ctx: ctx.clone(), shape: sample_shape(ctx)?, cdf: Vec::new(), cdf_at: Vec::new(), shapes: Vec::new() })
    }

    /// Index into `n` elements for sample `i`: uniform, or by its probabilities.
    fn pick(&self, rng: &mut crate::rng::SampleRng, i: usize, n: usize) -> usize {
        let cdf = if self.cdf.is_empty() { &[][..] } else { &self.cdf[self.cdf_at[i]..self.cdf_at[i + 1]] };
        if cdf.is_empty() {
            rng.below(n as u64) as usize
        } else {
            let u = rng.next_f64();
            cdf.partition_point(|&c| c <= u).min(n - 1)
        }
    }
}

/// Appends the normalised cumulative sums of `p` to `cdf`, checking that they are
/// probabilities; `sample` names the sample in errors when `p` came per sample.
fn cdf_of(op: &str, p: &[f64], cdf: &mut Vec<f64>, sample: Option<usize>) -> Result<()> {
    let at = sample.map_or(String::new(), |i| format!("; sample {i}"));
    let start = cdf.len();
    let mut acc = 0.0;
    for &v in p {
        if !(v >= 0.0) {
            return Err(Error::arg(op, "p", format!("probabilities must be >= 0, got {v}{at}")));
        }
        acc += v;
        cdf.push(acc);
    }
    if (acc - 1.0).abs() > 1e-4 {
        return Err(Error::arg(op, "p", format!("probabilities must sum to 1, got {acc}{at}")));
    }
    cdf[start..].iter_mut().for_each(|c| *c /= acc);
    Ok(())
}

impl Operator for Choice {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let name = self.ctx.display_name.clone();
        let (a, like) = (ws.inputs[0], ws.inputs.get(1).copied());
        let n_samples = a.len();
        // Output type, trailing shape and layout.
        let (dtype, tail_ndim, layout) = if a.ndim() == 0 {
            (a.dtype(), 0, Layout::empty())
        } else {
            let l = a.layout().as_str();
            (a.dtype(), a.ndim() - 1, if l.is_empty() { Layout::empty() } else { Layout::from(&l[1..]) })
        };
        let base_ndim = like.map_or(self.shape.len(), |l| l.ndim());
        let ndim = base_ndim + tail_ndim;
        let mut shapes = std::mem::take(&mut self.shapes);
        shapes.clear();
        for i in 0..n_samples {
            shapes.extend_from_slice(like.map_or(&self.shape[..], |l| l.shape(i)));
            if a.ndim() > 0 {
                shapes.extend_from_slice(&a.shape(i)[1..]);
            }
        }
        self.shapes = shapes;
        // Validate every sample's `a` first.
        let mut counts = Vec::with_capacity(n_samples);
        for i in 0..n_samples {
            let n = if a.ndim() == 0 {
                if a.dtype().is_float() || a.dtype() == DType::Bool {
                    return Err(Error::arg(&name, "a", format!("a scalar `a` must be an integer, got {} in sample {i}", a.dtype())));
                }
                let v = scalar_as_f64(a, i);
                if v < 1.0 {
                    return Err(Error::arg(&name, "a", format!("a scalar `a` must be >= 1; sample {i} has {v}")));
                }
                v as usize
            } else {
                a.shape(i)[0]
            };
            if n == 0 {
                return Err(Error::arg(&name, "a", format!("sample {i} has nothing to choose from")));
            }
            counts.push(n);
        }
        let mut out = TensorList::new(dtype, ndim, (0..n_samples).map(|i| &self.shapes[i * ndim..(i + 1) * ndim]));
        if !layout.is_empty() && layout.ndim() == ndim {
            out.set_layout(layout);
        }
        // Probabilities: one list per sample, as many as sample i of `a` has elements.
        let p = ws.per_sample_list(&self.ctx, "p");
        let mut buf = [0f64; MAX_LIST];
        let mut cdf = std::mem::take(&mut self.cdf);
        cdf.clear();
        self.cdf_at.clear();
        if p.is_set() {
            for (i, &n) in counts.iter().enumerate() {
                self.cdf_at.push(cdf.len());
                // A constant `p` is one list for every sample: its length must match each.
                let pi = p.get(&name, "p", i, &[], &mut buf)?.unwrap_or_default();
                if pi.len() != n {
                    return Err(Error::arg(&name, "p", format!("sample {i} has {} probabilities but `a` has {n} elements", pi.len())));
                }
                cdf_of(&name, pi, &mut cdf, p.is_input().then_some(i))?;
            }
            self.cdf_at.push(cdf.len());
        }
        self.cdf = cdf;
        let elem = dtype.size();
        let this = &*self;
        for_each_sample(ws.pool, &mut out, |i, bytes| {
            let mut rng = ws.rng(&this.ctx, i);
            let n = counts[i];
            if a.ndim() > 0 {
                let src = a.bytes(i);
                let row = src.len() / n;
                if row == 0 {
                    return Ok(());
                }
                for d in bytes.chunks_exact_mut(row) {
                    let k = this.pick(&mut rng, i, n);
                    d.copy_from_slice(&src[k * row..(k + 1) * row]);
                }
            } else {
                for k in 0..bytes.len() / elem {
                    let j = this.pick(&mut rng, i, n);
                    crate::tensor::element::store_f64(dtype, bytes, k, j as f64);
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
