//! The operators of conditional execution (`fn._conditional.*`), which the Python tracing
//! of `if` statements and `and`/`or`/`not` inserts (python/sluice/_conditionals.py), and
//! which users may call themselves as in DALI:
//! - `split` divides a batch by a per-sample predicate into the samples that take the `if`
//!   branch and those that take the `else` branch, each half in the batch's order;
//! - `merge` interleaves the two halves back into the order the predicate gives;
//! - `not_` negates per-sample scalars, `validate_logical` checks an operand of `and`/`or`.
//!
//! A half is a new batch (a copy): a batch's samples lie back to back in one buffer (see
//! `BatchMeta`), so a subset of them cannot be described in place.
//!
//! Predicates are argument inputs (on the host), one scalar per sample of any numeric type,
//! non-zero meaning `if`. Batches of no samples are valid halves.

mod gpu;

use crate::error::{Error, Location, Result};
use crate::ops::{arg, copy_samples, gather_samples, tensor_arg, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, TensorList};

/// `fn._conditional.split`.
pub static SPLIT: OpDef = OpDef {
    schema: OpSchema {
        name: "_conditional__Split",
        doc: "Splits a batch by a per-sample predicate: output 0 holds the samples whose predicate is true, output 1 the others, \
              each in the batch's order. Inserted by `if` statements when enable_conditionals=True.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 2,
        host_inputs: &[],
        args: &[&[
            tensor_arg("predicate", T::Float, D::Required, "One scalar per sample: non-zero sends the sample to output 0."),
            arg("_if_stmt", T::Bool, D::Bool(false), "Set by `if` statements: errors speak of the `if` condition."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Split::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::SplitGpu::new(Split::new(ctx)?)))),
};

/// `fn._conditional.merge`.
pub static MERGE: OpDef = OpDef {
    schema: OpSchema {
        name: "_conditional__Merge",
        doc: "Merges the two halves of a split batch back: output sample i is the next sample of input 0 where the predicate \
              of sample i is true, of input 1 where it is false. Inserted after `if` statements when enable_conditionals=True.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 2,
        max_inputs: 2,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[tensor_arg("predicate", T::Float, D::Required, "One scalar per output sample: non-zero takes it from input 0.")]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Merge { ctx: ctx.clone() }))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(gpu::MergeGpu::new(Merge { ctx: ctx.clone() })))),
};

/// `fn._conditional.not_`.
pub static NOT: OpDef = OpDef {
    schema: OpSchema {
        name: "_conditional__Not_",
        doc: "Logical `not` of per-sample scalars (of any numeric type): a bool scalar per sample.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Not { ctx: ctx.clone() }))),
    mixed: None,
    gpu: None,
};

/// `fn._conditional.validate_logical`.
pub static VALIDATE_LOGICAL: OpDef = OpDef {
    schema: OpSchema {
        name: "_conditional__ValidateLogical",
        doc: "Passes its input through after checking it is a bool scalar per sample, as operands of `and` and `or` must be.",
        devices: &[Device::Cpu],
        min_inputs: 1,
        max_inputs: 1,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("expression_name", T::Str, D::Required, "The expression checked: and, or, not or if."),
            arg("expression_side", T::Str, D::Str(""), "Which operand: left, right (or empty)."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(ValidateLogical::new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// DALI's advice after every error about conditions and logical operands.
const SUGGESTION: &str = "\n\nThis input restriction allows the logical expressions to always return scalar boolean outputs and to be \
used in unambiguous way in DALI conditionals (`if` statements). You can set the `dtype` parameter of some operators to \
`nvidia.dali.types.BOOL` or use comparison operators which always return booleans.\nIf you need to process inputs of higher \
dimensionality, different type, or device placement, you may use bitwise arithmetic operators `&`, `|` or comparison operator \
(`== 0`) to emulate logical `and`, `or` and `not` expressions.  Those operations performed on boolean inputs are equivalent to \
logical expressions. Keep in mind that, in contrast to using logical operators, all subexpressions of elementwise arithmetic \
operators are always evaluated.";

/// What a condition or logical operand is, for the messages about it.
#[derive(Clone, Copy)]
enum Operand<'a> {
    /// The condition of an `if` statement.
    If,
    /// An operand of `and`/`or`/`not`, and which side ("" for `not`).
    Logical(&'a str, &'a str),
}

impl Operand<'_> {
    /// DALI's message for a condition that is not a scalar (or not bool, where bool is required).
    fn error(self, bool_required: bool, got: &str) -> String {
        let (subject, place) = match self {
            Operand::If => ("Conditions inside `if` statements are restricted to".to_string(), " as a condition of the `if` statement.".to_string()),
            Operand::Logical(name, "") => (format!("Logical expression `{name}` is restricted to"), " in logical expression.".to_string()),
            Operand::Logical(name, side) => (format!("Logical expression `{name}` is restricted to"), format!(" as the {side} argument in logical expression.")),
        };
        let of_bool = if bool_required { " of `bool` type" } else { "" };
        format!("{subject} scalar (0-d tensors) inputs{of_bool}, that are placed on CPU. Got {got}{place}{SUGGESTION}")
    }

    /// Checks that every sample of `batch` is a scalar (and bool when `bool_required`).
    fn check(self, batch: &BatchMeta, bool_required: bool) -> std::result::Result<(), String> {
        if batch.ndim() != 0 {
            return Err(self.error(bool_required, &format!("a {}-d input", batch.ndim())));
        }
        if bool_required && batch.dtype() != DType::Bool {
            return Err(self.error(true, &format!("an input of type `{}`", batch.dtype().cpp_name())));
        }
        if !bool_required && !evaluates_as_bool(batch.dtype()) {
            return Err(format!("Can't evaluate {} as boolean value.", batch.dtype().cpp_name()));
        }
        Ok(())
    }
}

/// The types whose scalars `if` accepts as conditions (non-zero: true), as DALI.
fn evaluates_as_bool(dtype: DType) -> bool {
    use DType::*;
    matches!(dtype, Bool | U8 | I8 | U16 | I16 | U32 | I32 | U64 | I64 | F16 | F32 | F64)
}

/// Reads a predicate: `Some(true)` per sample taking the `if` branch.
fn read_predicate(ctx: &OpContext, ws_args: &std::collections::HashMap<&str, &TensorList>, expected: usize, what: &str, iteration: u64, if_stmt: bool) -> Result<Vec<bool>> {
    let at = || Location { operator: ctx.display_name.clone(), iteration: Some(iteration), ..Default::default() };
    let pred = ws_args.get("predicate").ok_or_else(|| Error::data(at(), "The 'predicate' argument is required to be present as argument input."))?;
    if if_stmt {
        Operand::If.check(pred.meta(), false).map_err(|m| Error::data(at(), m))?;
    }
    if pred.len() != expected {
        return Err(Error::data(at(), format!("{what} description must cover whole input, got {expected} input samples and {} elements denoting the {}.", pred.len(), what.to_lowercase())));
    }
    if pred.ndim() != 0 {
        return Err(Error::data(at(), "Only scalar indexing is supported."));
    }
    if !evaluates_as_bool(pred.dtype()) {
        return Err(Error::data(at(), format!("Can't evaluate {} as boolean value.", pred.dtype().cpp_name())));
    }
    Ok((0..pred.len()).map(|i| crate::ops::args::scalar_as_f64(pred, i) != 0.0).collect())
}

/// Shared by the cpu and gpu backends of split.
struct Split {
    ctx: OpContext,
    if_stmt: bool,
}

impl Split {
    fn new(ctx: &OpContext) -> Result<Split> {
        Ok(Split { ctx: ctx.clone(), if_stmt: ctx.args.bool("_if_stmt") })
    }

    /// The samples of each half: (true, false).
    fn halves(&self, arg_inputs: &std::collections::HashMap<&str, &TensorList>, len: usize, iteration: u64) -> Result<[Vec<usize>; 2]> {
        let pred = read_predicate(&self.ctx, arg_inputs, len, "Split", iteration, self.if_stmt)?;
        let mut halves = [Vec::new(), Vec::new()];
        for (i, p) in pred.into_iter().enumerate() {
            halves[!p as usize].push(i);
        }
        Ok(halves)
    }
}

impl Operator for Split {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        let halves = self.halves(&ws.arg_inputs, input.len(), ws.iteration)?;
        halves.iter().map(|picks| gather_samples(ws.pool, input, picks)).collect()
    }
}

/// Shared by the cpu and gpu backends of merge.
struct Merge {
    ctx: OpContext,
}

impl Merge {
    /// Checks the halves agree (those with samples: an empty half says nothing) and returns,
    /// per output sample, (half, index in it), and the metadata of the output.
    fn plan(&self, halves: [&BatchMeta; 2], arg_inputs: &std::collections::HashMap<&str, &TensorList>, iteration: u64) -> Result<(Vec<(usize, usize)>, BatchMeta)> {
        let at = || Location { operator: self.ctx.display_name.clone(), iteration: Some(iteration), ..Default::default() };
        let [t, f] = halves;
        if !t.is_empty() && !f.is_empty() {
            let divergent = "Divergent data found in different branches of conditional operation. All paths in conditional operation are \
                             merged into one batch which must have consistent type, number of dimensions, layout and other metadata. ";
            if t.dtype() != f.dtype() {
                return Err(Error::data(at(), format!("{divergent}Found distinct types: {} and {}.", t.dtype().cpp_name(), f.dtype().cpp_name())));
            }
            if t.ndim() != f.ndim() {
                return Err(Error::data(at(), format!("{divergent}Found distinct sample dimensions: {} and {}.", t.ndim(), f.ndim())));
            }
            if t.layout() != f.layout() {
                return Err(Error::data(at(), format!("{divergent}Found distinct layouts: \"{}\" and \"{}\".", t.layout(), f.layout())));
            }
        }
        let pred = read_predicate(&self.ctx, arg_inputs, t.len() + f.len(), "Merge", iteration, false)?;
        let mut next = [0usize; 2];
        let mut plan = Vec::with_capacity(pred.len());
        for p in pred {
            let half = !p as usize;
            if next[half] == halves[half].len() {
                return Err(Error::data(at(), format!("the predicate sends more samples to the {} branch than it holds ({})", ["`if`", "`else`"][half], halves[half].len())));
            }
            plan.push((half, next[half]));
            next[half] += 1;
        }
        let model = if t.is_empty() { f } else { t };
        let mut meta = BatchMeta::new(model.dtype(), model.ndim(), plan.iter().map(|&(h, k)| halves[h].shape(k)));
        meta.set_layout(model.layout().clone());
        if plan.iter().all(|&(h, _)| !halves[h].source_infos().is_empty()) && !plan.is_empty() {
            meta.set_source_info(plan.iter().map(|&(h, k)| halves[h].source_infos()[k].clone()).collect());
        }
        Ok((plan, meta))
    }
}

impl Operator for Merge {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let halves = [ws.inputs[0], ws.inputs[1]];
        let (plan, meta) = self.plan([halves[0].meta(), halves[1].meta()], &ws.arg_inputs, ws.iteration)?;
        let mut out = TensorList::for_overwrite(meta);
        copy_samples(ws.pool, &mut out, |i| {
            let (h, k) = plan[i];
            halves[h].bytes(k)
        });
        Ok(vec![out])
    }
}

struct Not {
    ctx: OpContext,
}

impl Operator for Not {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        Operand::Logical("not", "").check(input.meta(), false).map_err(|m| Error::data(self.ctx.at(ws.iteration, 0, ""), m))?;
        let mut meta = BatchMeta::new(DType::Bool, 0, (0..input.len()).map(|_| &[][..]));
        meta.inherit_source_info(input.meta());
        let mut out = TensorList::for_overwrite(meta);
        for (i, dst) in out.samples_mut().into_iter().enumerate() {
            dst[0] = (crate::ops::args::scalar_as_f64(input, i) == 0.0) as u8;
        }
        Ok(vec![out])
    }
}

struct ValidateLogical {
    ctx: OpContext,
    name: String,
    side: String,
}

impl ValidateLogical {
    fn new(ctx: &OpContext) -> Result<ValidateLogical> {
        let (name, side) = (ctx.args.str("expression_name").to_string(), ctx.args.str("expression_side").to_string());
        if !matches!(name.as_str(), "and" | "or" | "not" | "if") || !matches!(side.as_str(), "" | "left" | "right" | "if-stmt") {
            return Err(Error::arg(&ctx.display_name, "expression_name", "Internal error - DALI diagnostic configured incorrectly."));
        }
        Ok(ValidateLogical { ctx: ctx.clone(), name, side })
    }
}

impl Operator for ValidateLogical {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let input = ws.inputs[0];
        Operand::Logical(&self.name, &self.side).check(input.meta(), true).map_err(|m| Error::data(self.ctx.at(ws.iteration, 0, ""), m))?;
        Ok(vec![input.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn ctx() -> OpContext {
        OpContext {
            args: crate::ops::Args::check(&SPLIT.schema, "split", vec![], &["predicate".to_string()]).unwrap(),
            display_name: "_conditional.split".into(),
            instance_name: "s".into(),
            op_id: 0,
            seed: 0,
            max_batch_size: 8,
            num_threads: 1,
            device_id: None,
            arg_input_names: vec!["predicate".into()],
            resume_samples: 0,
        }
    }

    #[test]
    fn split_then_merge_gives_the_batch_back_and_empty_halves_are_valid() {
        let data = TensorList::from_samples(&[vec![2], vec![1], vec![3], vec![2]], &[vec![1i32, 2], vec![3], vec![4, 5, 6], vec![7, 8]]);
        for pred in [vec![1u8, 0, 1, 0], vec![0, 0, 0, 0], vec![1, 1, 1, 1]] {
            // Scalars of any numeric type are predicates: u8 here.
            let p = TensorList::from_samples(&vec![vec![]; 4], &pred.iter().map(|&b| vec![b]).collect::<Vec<_>>());
            let args: HashMap<&str, &TensorList> = [("predicate", &p)].into();
            let split = Split { ctx: ctx(), if_stmt: true };
            let halves = split.halves(&args, 4, 0).unwrap();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
            let t = gather_samples(&pool, &data, &halves[0]).unwrap();
            let f = gather_samples(&pool, &data, &halves[1]).unwrap();
            assert_eq!(t.len(), pred.iter().filter(|&&b| b == 1).count());
            let merge = Merge { ctx: ctx() };
            let (plan, meta) = merge.plan([t.meta(), f.meta()], &args, 0).unwrap();
            assert_eq!(plan.len(), 4);
            for i in 0..4 {
                assert_eq!(meta.shape(i), data.shape(i));
                let (h, k) = plan[i];
                assert_eq!([&t, &f][h].sample::<i32>(k), data.sample::<i32>(i));
            }
        }
    }
}
