//! Reordering a batch's samples: `fn.permute_batch` (output sample i is input sample
//! `indices[i]`; repetitions allowed, and the output has as many samples as `indices`) and
//! `fn.batch_permutation` (random indices for it: a permutation of the batch, or with
//! `allow_repetitions` independent draws). Inside an `if` branch `batch_permutation` permutes
//! the branch's samples: conditional tracing gives it the hidden `_scope` argument input,
//! whose batch size is the branch's (as DALI's `ImplicitScopeAttr`).

mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, gather_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{DType, TensorList};

/// `fn.permute_batch`.
pub static PERMUTE_BATCH: OpDef = OpDef {
    schema: OpSchema {
        name: "PermuteBatch",
        doc: "Returns a batch made of the input's samples in the order `indices` gives: output sample i is input sample \
              indices[i]. Indices may repeat; the output has as many samples as indices.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg("indices", T::IntList, D::Required, "Input sample of each output sample: a list, or a scalar per sample.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(PermuteBatch { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::PermuteBatchGpu::new(PermuteBatch { ctx: ctx.clone() })))),
};

/// `fn.batch_permutation`.
pub static BATCH_PERMUTATION: OpDef = OpDef {
    schema: OpSchema {
        name: "BatchPermutation",
        doc: "Random indices for permute_batch: an INT32 scalar per sample, a random permutation of the batch (or, with \
              allow_repetitions, independent picks).",
        devices: &[Device::Cpu],
        min_inputs: 0,
        max_inputs: 0,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("allow_repetitions", T::Bool, D::Bool(false), "Pick every index independently (repetitions possible)."),
            arg("no_fixed_points", T::Bool, D::Bool(false), "No sample keeps its place (index i never at position i)."),
            tensor_arg("_scope", T::Int, D::Optional, "Set by `if` statements: the branch's samples, whose count is the batch."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: true,
    },
    cpu: Some(|ctx| Ok(Box::new(BatchPermutation::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// Shared by the cpu and gpu backends of permute_batch.
struct PermuteBatch {
    ctx: OpContext,
}

impl PermuteBatch {
    /// The input sample of every output sample, checked against the input's size.
    fn indices(&self, ws_args: &std::collections::HashMap<&str, &TensorList>, len: usize, iteration: u64) -> Result<Vec<usize>> {
        let op = &self.ctx.display_name;
        let raw: Vec<i64> = match ws_args.get("indices") {
            Some(b) => {
                if b.ndim() != 0 {
                    return Err(Error::arg(op, "indices", format!("as an argument input it must be a scalar per sample, got {}-dimensional samples", b.ndim())));
                }
                (0..b.len()).map(|i| crate::ops::args::scalar_as_f64(b, i) as i64).collect()
            }
            None => self.ctx.args.ints("indices").to_vec(),
        };
        raw.iter()
            .enumerate()
            .map(|(k, &i)| {
                usize::try_from(i).ok().filter(|&i| i < len).ok_or_else(|| {
                    Error::data(self.ctx.at(iteration, k, ""), format!("index {i} (indices[{k}]) is out of range for a batch of {len} samples"))
                })
            })
            .collect()
    }
}

impl Operator for PermuteBatch {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let picks = self.indices(&ws.arg_inputs, input.len(), ws.iteration)?;
        Ok(vec![gather_samples(ws.pool, input, &picks)?])
    }
}

struct BatchPermutation {
    ctx: OpContext,
    repetitions: bool,
    no_fixed_points: bool,
}

impl BatchPermutation {
    fn new(ctx: &OpContext) -> Result<BatchPermutation> {
        Ok(BatchPermutation { ctx: ctx.clone(), repetitions: ctx.args.bool("allow_repetitions"), no_fixed_points: ctx.args.bool("no_fixed_points") })
    }

    /// The indices for a batch of `n`, drawn from the batch's own stream (keyed by the
    /// iteration, like every random stream: the same whatever the threads).
    fn draw(&self, n: usize, iteration: u64) -> Result<Vec<usize>> {
        if self.no_fixed_points && n == 1 {
            return Err(Error::arg(&self.ctx.display_name, "no_fixed_points", "a batch of one sample has no permutation without fixed points"));
        }
        let mut rng = crate::rng::SampleRng::new(self.ctx.seed, self.ctx.op_id, iteration, u64::MAX);
        if self.repetitions {
            return Ok((0..n)
                .map(|i| loop {
                    let j = rng.below(n as u64) as usize;
                    if !(self.no_fixed_points && j == i) {
                        break j;
                    }
                })
                .collect());
        }
        let mut perm: Vec<usize> = (0..n).collect();
        if self.no_fixed_points {
            // Sattolo's algorithm: a uniformly random cyclic permutation, which moves every sample.
            for i in (1..n).rev() {
                perm.swap(i, rng.below(i as u64) as usize);
            }
        } else {
            for i in (1..n).rev() {
                perm.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        Ok(perm)
    }
}

impl Operator for BatchPermutation {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        // `ws.batch_size` is the branch's when `_scope` is wired (the executor takes the
        // first argument input's), the iteration's otherwise.
        let perm = self.draw(ws.batch_size, ws.iteration)?;
        let values: Vec<Vec<i32>> = perm.iter().map(|&j| vec![j as i32]).collect();
        let mut out = TensorList::from_samples(&vec![vec![]; perm.len()], &values);
        debug_assert_eq!(out.dtype(), DType::I32);
        out.set_layout(crate::tensor::Layout::empty());
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(repetitions: bool, no_fixed_points: bool) -> BatchPermutation {
        let ctx = OpContext {
            args: crate::ops::Args::check(&BATCH_PERMUTATION.schema, "batch_permutation", vec![], &[]).unwrap(),
            display_name: "batch_permutation".into(),
            instance_name: "p".into(),
            op_id: 3,
            seed: 11,
            max_batch_size: 16,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec![],
            resume_samples: 0,
        };
        BatchPermutation { ctx, repetitions, no_fixed_points }
    }

    #[test]
    fn permutations_are_permutations_and_derangements_move_every_sample() {
        for it in 0..50 {
            let mut p = op(false, false).draw(9, it).unwrap();
            p.sort();
            assert_eq!(p, (0..9).collect::<Vec<_>>());
            let d = op(false, true).draw(9, it).unwrap();
            assert!(d.iter().enumerate().all(|(i, &j)| i != j));
            let mut s = d.clone();
            s.sort();
            assert_eq!(s, (0..9).collect::<Vec<_>>());
            assert!(op(true, true).draw(5, it).unwrap().iter().enumerate().all(|(i, &j)| j < 5 && i != j));
        }
        assert_eq!(op(false, false).draw(9, 7).unwrap(), op(false, false).draw(9, 7).unwrap());
        assert!(op(false, true).draw(1, 0).is_err());
    }
}
