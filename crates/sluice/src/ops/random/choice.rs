//! `random.choice`: picks from `a`: a scalar integer n (any integer type) means `range(n)`
//! (output has n's type), an array means its elements along the first axis (output shape
//! `shape + a.shape[1:]`, its type). `fn.random.choice(5)` and `fn.random.choice([1, 2])`
//! reach it as the output of a `Constant` (INT32, or FLOAT for a list of floats), as in DALI.
//! The leading output shape is `shape` (one list, or one per sample: an argument input, every
//! sample with as many extents), or the shape of the second input (`shape_like`, not both), or
//! none. `p` gives the probabilities, one list for the batch or one per sample (an argument
//! input, any length); a single constant value stands for every element, as DALI broadcasts
//! it. The layout follows DALI's rule: the input's when the output has as many dimensions,
//! the input's without its first letter when it has one fewer, else none. DALI's generator is
//! not reproduced; the distribution is (`tests/test_random_choice.py`).

use super::sample_shape;
use crate::error::{Error, Result};
use crate::ops::args::element_as_f64;
use crate::ops::{generate_samples, tensor_arg, ArgDefault as D, ArgType as T, ArgValue, Device, OpContext, OpDef, OpSchema, Operator, PerSampleList, Workspace, MAX_LIST};
use crate::tensor::element::{load, store, Num};
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
            tensor_arg("shape", T::IntList, D::Optional, "Shape of the output data; a scalar when not given."),
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
    /// Cumulative probabilities (normalised) of sample i at `cdf[cdf_at[i]..cdf_at[i + 1]]`;
    /// empty for uniform. Refilled every batch, the buffers are reused.
    cdf: Vec<f64>,
    cdf_at: Vec<usize>,
    /// One sample's probabilities as read, reused.
    probs: Vec<f64>,
    /// Output shapes, reused between iterations.
    shapes: Vec<usize>,
}

impl Choice {
    fn new(ctx: &OpContext) -> Result<Choice> {
        // Checked here too so a bad constant fails at build, not at the first run.
        sample_shape(ctx)?;
        if ctx.args.has("p") {
            let p = ctx.args.floats("p");
            if p.len() == 1 {
                // One value is broadcast: its sum depends on the number of elements, known at run.
                check_range(&ctx.display_name, p, None)?;
            } else {
                cdf_of(&ctx.display_name, p, &mut Vec::new(), None)?;
            }
        }
        Ok(Choice { ctx: ctx.clone(), cdf: Vec::new(), cdf_at: Vec::new(), probs: Vec::new(), shapes: Vec::new() })
    }

    /// Index into `n` elements for sample `i`: uniform, or by its probabilities.
    fn pick(&self, rng: &mut crate::rng::SampleRng, i: usize, n: u64) -> u64 {
        let cdf = if self.cdf.is_empty() { &[][..] } else { &self.cdf[self.cdf_at[i]..self.cdf_at[i + 1]] };
        if cdf.is_empty() {
            rng.below(n)
        } else {
            let u = rng.next_f64();
            (cdf.partition_point(|&c| c <= u) as u64).min(n - 1)
        }
    }
}

fn at(sample: Option<usize>) -> String {
    sample.map_or(String::new(), |i| format!("; sample {i}"))
}

/// DALI's first check: every probability in [0, 1] (NaN is not).
fn check_range(op: &str, p: &[f64], sample: Option<usize>) -> Result<()> {
    match p.iter().position(|v| !(0.0..=1.0).contains(v)) {
        Some(k) => Err(Error::arg(op, "p", format!("each probability must be >= 0 and <= 1, got {} at index {k}{}", p[k], at(sample)))),
        None => Ok(()),
    }
}

/// Appends the normalised cumulative sums of `p` to `cdf`, checking that they are
/// probabilities; `sample` names the sample in errors (none for the build-time check).
fn cdf_of(op: &str, p: &[f64], cdf: &mut Vec<f64>, sample: Option<usize>) -> Result<()> {
    check_range(op, p, sample)?;
    let start = cdf.len();
    let mut acc = 0.0;
    for &v in p {
        acc += v;
        cdf.push(acc);
    }
    if (acc - 1.0).abs() > 1e-4 {
        return Err(Error::arg(op, "p", format!("probabilities must sum to 1, got {acc}{}", at(sample))));
    }
    cdf[start..].iter_mut().for_each(|c| *c /= acc);
    Ok(())
}

/// Sample `i`'s probabilities into `out`, of any length: `PerSampleList::get` caps lists at
/// `MAX_LIST` values, and a choice may be among thousands of elements.
fn read_p(op: &str, p: &PerSampleList<'_>, i: usize, out: &mut Vec<f64>) -> Result<()> {
    out.clear();
    match *p {
        PerSampleList::Unset => {}
        PerSampleList::Constant(v) => match v {
            ArgValue::FloatList(l) => out.extend_from_slice(l),
            ArgValue::IntList(l) => out.extend(l.iter().map(|&x| x as f64)),
            ArgValue::Float(x) => out.push(*x),
            ArgValue::Int(x) => out.push(*x as f64),
            _ => return Err(Error::arg(op, "p", "must be a list of floats")),
        },
        PerSampleList::Input { batch, .. } => {
            if batch.ndim() > 1 {
                return Err(Error::arg(op, "p", format!("argument input must be a 1-D list per sample; sample {i} has shape {:?}", batch.shape(i))));
            }
            out.extend((0..batch.numel(i)).map(|k| element_as_f64(batch, i, k)));
        }
    }
    Ok(())
}

impl Operator for Choice {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let name = self.ctx.display_name.clone();
        let (a, like) = (ws.inputs[0], ws.inputs.get(1).copied());
        let n_samples = a.len();
        let dtype = a.dtype();
        let tail_ndim = a.ndim().saturating_sub(1);
        let shape_arg = ws.per_sample_list(&self.ctx, "shape");
        if like.is_some() && shape_arg.is_set() {
            return Err(Error::arg(&name, "shape", "Providing argument \"shape\" is incompatible with providing a shape-like input (the second input)"));
        }
        // Output shapes: the leading shape (`shape_like`'s, or `shape`'s) then the element's.
        let mut shapes = std::mem::take(&mut self.shapes);
        shapes.clear();
        let mut buf = [0f64; MAX_LIST];
        let mut lead_ndim = None;
        for i in 0..n_samples {
            let start = shapes.len();
            if let Some(l) = like {
                shapes.extend_from_slice(l.shape(i));
            } else if let Some(dims) = shape_arg.get(&name, "shape", i, &[], &mut buf)? {
                for &d in dims {
                    if !(d >= 0.0 && d.fract() == 0.0) {
                        return Err(Error::arg(&name, "shape", format!("extents must be integers >= 0; sample {i} has {dims:?}")));
                    }
                    shapes.push(d as usize);
                }
            }
            let k = shapes.len() - start;
            let first = *lead_ndim.get_or_insert(k);
            if k != first {
                // One output batch has one number of dimensions (DALI's uniform dimensionality).
                return Err(Error::arg(&name, "shape", format!("sample {i} has {k} extents, earlier samples {first}; every sample needs the same number")));
            }
            if a.ndim() > 0 {
                shapes.extend_from_slice(&a.shape(i)[1..]);
            }
        }
        let lead_ndim = lead_ndim.unwrap_or_else(|| match like {
            Some(l) => l.ndim(),
            None if self.ctx.args.has("shape") => self.ctx.args.ints("shape").len(),
            None => 0,
        });
        let ndim = lead_ndim + tail_ndim;
        self.shapes = shapes;
        // Validate every sample's `a` first.
        let mut counts: Vec<u64> = Vec::with_capacity(n_samples);
        for i in 0..n_samples {
            let n = if a.ndim() == 0 {
                if dtype.is_float() || dtype == DType::Bool {
                    return Err(Error::arg(&name, "a", format!("a scalar (0-D) `a` must be of an integer type (uint8 ... int64), got {dtype} in sample {i}")));
                }
                // Read exactly: a UINT64 or INT64 n may exceed 2^53.
                match load(dtype, a.bytes(i), 0) {
                    Num::Int(v) if v >= 1 => v as u64,
                    Num::Int(v) => return Err(Error::arg(&name, "a", format!("a scalar `a` must be >= 1; sample {i} has {v}"))),
                    Num::Float(v) => return Err(Error::arg(&name, "a", format!("a scalar `a` must be an integer; sample {i} has {v}"))),
                }
            } else {
                a.shape(i)[0] as u64
            };
            if n == 0 {
                return Err(Error::arg(&name, "a", format!("sample {i} has nothing to choose from")));
            }
            counts.push(n);
        }
        let mut out = TensorList::new(dtype, ndim, (0..n_samples).map(|i| &self.shapes[i * ndim..(i + 1) * ndim]));
        // DALI's rule: the whole layout when the dimensions match, the elements' when the
        // output is one element (one dimension fewer), else none.
        let in_layout = a.layout();
        if !in_layout.is_empty() {
            if a.ndim() == ndim {
                out.set_layout(in_layout.clone());
            } else if a.ndim() == ndim + 1 {
                out.set_layout(Layout::from(&in_layout.as_str()[1..]));
            }
        }
        // Probabilities: one list per sample, as many as sample i of `a` has elements.
        let p = ws.per_sample_list(&self.ctx, "p");
        let mut cdf = std::mem::take(&mut self.cdf);
        let mut probs = std::mem::take(&mut self.probs);
        cdf.clear();
        self.cdf_at.clear();
        if p.is_set() {
            for (i, &n) in counts.iter().enumerate() {
                self.cdf_at.push(cdf.len());
                read_p(&name, &p, i, &mut probs)?;
                if probs.len() == 1 && n != 1 && !p.is_input() {
                    // One constant value stands for every element (DALI broadcasts it): valid
                    // when n of them sum to 1, and then the choice is uniform, which an empty
                    // range of `cdf` means (no n-long table for a scalar n of 2^40).
                    check_range(&name, &probs, Some(i))?;
                    let sum = probs[0] * n as f64;
                    if (sum - 1.0).abs() > 1e-4 {
                        return Err(Error::arg(&name, "p", format!("probabilities must sum to 1, got {sum} ({n} elements of {}); sample {i}", probs[0])));
                    }
                    continue;
                }
                // A constant `p` is one list for every sample: its length must match each.
                if probs.len() as u64 != n {
                    return Err(Error::arg(&name, "p", format!("sample {i} has {} probabilities but `a` has {n} elements", probs.len())));
                }
                cdf_of(&name, &probs, &mut cdf, Some(i))?;
            }
            self.cdf_at.push(cdf.len());
        }
        self.cdf = cdf;
        self.probs = probs;
        let elem = dtype.size();
        let this = &*self;
        generate_samples(ws.pool, &mut out, |i, bytes| {
            let mut rng = ws.rng(&this.ctx, i);
            let n = counts[i];
            if a.ndim() > 0 {
                let src = a.bytes(i);
                let row = src.len() / n as usize;
                if row == 0 {
                    return Ok(());
                }
                for d in bytes.chunks_exact_mut(row) {
                    let k = this.pick(&mut rng, i, n) as usize;
                    d.copy_from_slice(&src[k * row..(k + 1) * row]);
                }
            } else {
                for k in 0..bytes.len() / elem {
                    let j = this.pick(&mut rng, i, n);
                    store(dtype, bytes, k, Num::Int(j as i128));
                }
            }
            Ok(())
        })?;
        Ok(vec![out])
    }
}
