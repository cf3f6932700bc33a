//! `ArithmeticGenericOp`: evaluates a whole arithmetic expression tree (built by the Python
//! `DataNode` operators `+ - * / // % ** == != < <= > >= & | ^`, unary `-`, and
//! `sluice.math`) per sample, element-wise, with DALI 2.4's type promotion and numpy-style
//! broadcasting between operands. Both backends share the typing and shape planning
//! (`Arithmetic::plan`); the GPU evaluates the same program in one launch per batch
//! (`gpu.rs`).

pub mod expr;
mod gpu;

use crate::error::{Error, Result};
use crate::ops::{arg, for_each_sample, ArgDefault as D, ArgType as T, Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, DType, Layout, TensorList};
use expr::{Ast, Operand, Program, MAX_NDIM};

/// Schema and backends. Hidden from `fn` (leading underscore); Python builds it from
/// expressions on DataNodes.
pub static ARITHMETIC_GENERIC: OpDef = OpDef {
    schema: OpSchema {
        name: "_ArithmeticGenericOp",
        doc: "Evaluates an arithmetic expression on its inputs, element-wise, with numpy-style broadcasting and DALI's type promotion. Created by arithmetic operators on DataNodes.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 1,
        max_inputs: 64,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[
            arg("expression_desc", T::Str, D::Required, "The expression in prefix form, e.g. `add(&0 mul(&1 $0:int32))`."),
            arg("integer_constants", T::IntList, D::IntList(&[]), "Integral and boolean constants referenced as `$N:type`."),
            arg("real_constants", T::FloatList, D::FloatList(&[]), "Floating-point constants referenced as `$N:type`."),
        ]],
        arg_aliases: &[],
        legacy_names: &[("ArithmeticGenericOp", None)],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Arithmetic::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _dev| Ok(Box::new(gpu::ArithmeticGpu::new(ctx)?))),
};

struct Arithmetic {
    ctx: OpContext,
    ast: Ast,
    /// Readable form of the expression for messages (`(&0 + 3)`).
    text: String,
    ints: Vec<i64>,
    reals: Vec<f64>,
}

/// Python-like text of an expression, for error messages.
pub fn describe(ast: &Ast, ints: &[i64], reals: &[f64]) -> String {
    match ast {
        Ast::Input(i) => format!("input{i}"),
        Ast::Const { index, dtype } => {
            if dtype.is_float() { format!("{}", reals.get(*index).copied().unwrap_or(f64::NAN)) } else { format!("{}", ints.get(*index).copied().unwrap_or(0)) }
        }
        Ast::Call(op, a) => {
            let s: Vec<String> = a.iter().map(|x| describe(x, ints, reals)).collect();
            match (op.symbol(), s.len()) {
                (sym, 2) if !sym.chars().next().unwrap().is_alphabetic() => format!("({} {sym} {})", s[0], s[1]),
                (sym, 1) if !sym.chars().next().unwrap().is_alphabetic() => format!("({sym}{})", s[0]),
                (sym, _) => format!("math.{sym}({})", s.join(", ")),
            }
        }
    }
}

impl Arithmetic {
    fn new(ctx: &OpContext) -> Result<Arithmetic> {
        let desc = ctx.args.str("expression_desc");
        let ast = expr::parse(desc).map_err(|m| Error::arg(&ctx.display_name, "expression_desc", format!("{m} in '{desc}'")))?;
        let ints = ctx.args.ints("integer_constants").to_vec();
        let reals = ctx.args.floats("real_constants").to_vec();
        let text = describe(&ast, &ints, &reals);
        Ok(Arithmetic { ctx: ctx.clone(), ast, text, ints, reals })
    }
}

/// A batch's typed program and output: per sample its output shape (`ndim` entries each,
/// flat) and the output's metadata.
struct Planned {
    prog: Program,
    ndim: usize,
    shapes: Vec<usize>,
    meta: BatchMeta,
}

impl Arithmetic {
    /// Types the expression for the inputs' types and broadcasts each sample's shapes
    /// (both backends): errors name the expression, and the sample for shape mismatches.
    fn plan(&self, iteration: u64, inputs: &[&BatchMeta], batch_size: usize) -> Result<Planned> {
        let name = &self.ctx.display_name;
        let types: Vec<DType> = inputs.iter().map(|t| t.dtype()).collect();
        let prog = expr::compile(&self.ast, &types, &self.ints, &self.reals)
            .map_err(|m| Error::TypeMismatch { operator: name.clone(), message: format!("in expression {}: {m}", self.text) })?;
        let n = inputs.first().map_or(batch_size, |t| t.len());
        for (j, t) in inputs.iter().enumerate() {
            if t.len() != n {
                return Err(Error::Graph(format!("{name}: input {j} has {} samples, input 0 has {n}", t.len())));
            }
        }
        let ndim = inputs.iter().map(|t| t.ndim()).max().unwrap_or(0);
        if ndim > MAX_NDIM {
            return Err(Error::data(self.ctx.at(iteration, 0, ""), format!("inputs may have at most {MAX_NDIM} dimensions, got {ndim}")));
        }
        // Output shapes (one small allocation per batch).
        let mut shapes = vec![0usize; n * ndim];
        for i in 0..n {
            let mut out = [0usize; MAX_NDIM];
            let in_shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape(i)).collect();
            if expr::broadcast(&in_shapes, ndim, &mut out).is_err() {
                let listed: Vec<String> = in_shapes.iter().enumerate().map(|(j, s)| format!("input{j} {s:?}")).collect();
                return Err(Error::data(
                    self.ctx.at(iteration, i, inputs[0].source_info(i)),
                    format!("can't broadcast shapes in expression {}: {}", self.text, listed.join(", ")),
                ));
            }
            shapes[i * ndim..(i + 1) * ndim].copy_from_slice(&out[..ndim]);
        }
        let mut meta = BatchMeta::new(prog.out_type(), ndim, (0..n).map(|i| &shapes[i * ndim..(i + 1) * ndim]));
        // Layout: that of the first input with the output's dimensionality and a layout.
        match inputs.iter().find(|t| t.ndim() == ndim && !t.layout().is_empty()) {
            Some(l) => meta.set_layout(l.layout().clone()),
            None => meta.set_layout(Layout::empty()),
        }
        meta.inherit_source_info(inputs[0]);
        Ok(Planned { prog, ndim, shapes, meta })
    }

    /// The error for an integer division by zero in sample `i`.
    fn division_by_zero(&self, iteration: u64, i: usize, source: &str) -> Error {
        Error::data(self.ctx.at(iteration, i, source), format!("integer division by zero in expression {}", self.text))
    }
}

impl Operator for Arithmetic {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let inputs = &ws.inputs;
        let metas: Vec<&BatchMeta> = inputs.iter().map(|t| t.meta()).collect();
        let Planned { prog, ndim, shapes, meta } = self.plan(ws.iteration, &metas, ws.batch_size)?;
        let mut out = TensorList::for_overwrite(meta);
        let this = &*self;
        let prog = &prog;
        for_each_sample(ws.pool, &mut out, |i, dst| {
            let shape = &shapes[i * ndim..(i + 1) * ndim];
            let mut ops: [Option<Operand<'_>>; 64] = [const { None }; 64];
            for (j, t) in inputs.iter().enumerate() {
                let s = t.shape(i);
                ops[j] = Some(Operand { bytes: t.bytes(i), dtype: t.dtype(), strides: expr::strides_for(s, shape), dense: s == shape });
            }
            let operands: &[Option<Operand<'_>>] = &ops[..inputs.len()];
            expr::eval(prog, operands, shape, dst).map_err(|_| this.division_by_zero(ws.iteration, i, inputs[0].source_info(i)))
        })?;
        Ok(vec![out])
    }
}
