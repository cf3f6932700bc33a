//! Arithmetic expressions: parsing DALI-style `expression_desc` strings, DALI's type
//! promotion rules, and chunked element-wise evaluation with no per-element or per-sample
//! allocation.
//!
//! Grammar (prefix form, as DALI's `expression_desc`): `op(arg arg ...)`, `&N` for input `N`,
//! `$N:type` for constant `N` of `type` (`int32`, `float32`, `bool`, ...), which indexes
//! `integer_constants` for integral/bool types and `real_constants` for float types.
//!
//! Values travel through the evaluator as 64-bit words: signed integers as `i64`, unsigned
//! integers and bools as `u64`, floats as `f64` (rounded to `f32` after every operation on
//! `FLOAT`), each wrapped to its node's type after every operation, so results are those of
//! computing in the node's own type.

use std::cell::RefCell;

use crate::tensor::DType;

/// Elements evaluated per chunk.
pub const CHUNK: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    // binary
    Add, Sub, Mul, FDiv, Div, Mod, Pow, FPow, Min, Max, Atan2,
    Eq, Neq, Lt, Leq, Gt, Geq, BitAnd, BitOr, BitXor,
    // unary
    Minus, Plus, Abs, FAbs, Sqrt, Rsqrt, Cbrt, Exp, Log, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan,
    Sinh, Cosh, Tanh, Asinh, Acosh, Atanh, Floor, Ceil,
    // ternary
    Clamp,
}

impl Op {
    /// Every operation, in declaration order (`op as i32` is its code in arithmetic.cu).
    pub const ALL: [Op; 46] = {
        use Op::*;
        [
            Add, Sub, Mul, FDiv, Div, Mod, Pow, FPow, Min, Max, Atan2, Eq, Neq, Lt, Leq, Gt, Geq, BitAnd, BitOr, BitXor,
            Minus, Plus, Abs, FAbs, Sqrt, Rsqrt, Cbrt, Exp, Log, Log2, Log10, Sin, Cos, Tan, Asin, Acos, Atan,
            Sinh, Cosh, Tanh, Asinh, Acosh, Atanh, Floor, Ceil, Clamp,
        ]
    };

    pub fn parse(s: &str) -> Option<Op> {
        use Op::*;
        Some(match s {
            "add" => Add, "sub" => Sub, "mul" => Mul, "fdiv" => FDiv, "div" => Div, "mod" => Mod,
            "pow" => Pow, "fpow" => FPow, "min" => Min, "max" => Max, "atan2" => Atan2,
            "eq" => Eq, "neq" => Neq, "lt" => Lt, "leq" => Leq, "gt" => Gt, "geq" => Geq,
            "bitand" => BitAnd, "bitor" => BitOr, "bitxor" => BitXor,
            "minus" => Minus, "plus" => Plus, "abs" => Abs, "fabs" => FAbs, "sqrt" => Sqrt, "rsqrt" => Rsqrt,
            "cbrt" => Cbrt, "exp" => Exp, "log" => Log, "log2" => Log2, "log10" => Log10,
            "sin" => Sin, "cos" => Cos, "tan" => Tan, "asin" => Asin, "acos" => Acos, "atan" => Atan,
            "sinh" => Sinh, "cosh" => Cosh, "tanh" => Tanh, "asinh" => Asinh, "acosh" => Acosh,
            "atanh" => Atanh, "floor" => Floor, "ceil" => Ceil, "clamp" => Clamp,
            _ => return None,
        })
    }

    pub fn arity(self) -> usize {
        use Op::*;
        match self {
            Clamp => 3,
            Minus | Plus | Abs | FAbs | Sqrt | Rsqrt | Cbrt | Exp | Log | Log2 | Log10 | Sin | Cos | Tan | Asin
            | Acos | Atan | Sinh | Cosh | Tanh | Asinh | Acosh | Atanh | Floor | Ceil => 1,
            _ => 2,
        }
    }

    /// The Python spelling, for messages.
    pub fn symbol(self) -> &'static str {
        use Op::*;
        match self {
            Add => "+", Sub | Minus => "-", Mul => "*", FDiv => "/", Div => "//", Mod => "%", Pow => "**",
            Eq => "==", Neq => "!=", Lt => "<", Leq => "<=", Gt => ">", Geq => ">=",
            BitAnd => "&", BitOr => "|", BitXor => "^", Plus => "+",
            FPow => "fpow", Min => "min", Max => "max", Atan2 => "atan2", Abs => "abs", FAbs => "fabs",
            Sqrt => "sqrt", Rsqrt => "rsqrt", Cbrt => "cbrt", Exp => "exp", Log => "log", Log2 => "log2",
            Log10 => "log10", Sin => "sin", Cos => "cos", Tan => "tan", Asin => "asin", Acos => "acos",
            Atan => "atan", Sinh => "sinh", Cosh => "cosh", Tanh => "tanh", Asinh => "asinh",
            Acosh => "acosh", Atanh => "atanh", Floor => "floor", Ceil => "ceil", Clamp => "clamp",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(self, Op::Eq | Op::Neq | Op::Lt | Op::Leq | Op::Gt | Op::Geq)
    }

    fn is_bitwise(self) -> bool {
        matches!(self, Op::BitAnd | Op::BitOr | Op::BitXor)
    }

    /// Unary operations that always give a floating-point result.
    fn is_float_fn(self) -> bool {
        use Op::*;
        matches!(self, FAbs | Sqrt | Rsqrt | Cbrt | Exp | Log | Log2 | Log10 | Sin | Cos | Tan | Asin | Acos | Atan
            | Sinh | Cosh | Tanh | Asinh | Acosh | Atanh | Floor | Ceil)
    }
}

/// A parsed expression node (before types are known).
#[derive(Debug, Clone, PartialEq)]
pub enum Ast {
    Input(usize),
    Const { index: usize, dtype: DType },
    Call(Op, Vec<Ast>),
}

/// DALI's lower-case type names used in `$N:type`.
pub fn parse_type(s: &str) -> Option<DType> {
    Some(match s {
        "uint8" => DType::U8, "uint16" => DType::U16, "uint32" => DType::U32, "uint64" => DType::U64,
        "int8" => DType::I8, "int16" => DType::I16, "int32" => DType::I32, "int64" => DType::I64,
        "float16" => DType::F16, "float32" | "float" => DType::F32, "float64" | "double" => DType::F64,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// Parses an `expression_desc`.
pub fn parse(desc: &str) -> Result<Ast, String> {
    let toks: Vec<&str> = tokenize(desc);
    let mut pos = 0;
    let ast = parse_at(&toks, &mut pos)?;
    if pos != toks.len() {
        return Err(format!("unexpected '{}' after the expression", toks[pos]));
    }
    Ok(ast)
}

fn tokenize(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c == '(' || c == ')' || c.is_whitespace() || c == ',' {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
            if c == '(' || c == ')' {
                out.push(&s[i..i + 1]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

fn parse_at(toks: &[&str], pos: &mut usize) -> Result<Ast, String> {
    let t = *toks.get(*pos).ok_or("unexpected end of expression")?;
    *pos += 1;
    if let Some(n) = t.strip_prefix('&') {
        return n.parse().map(Ast::Input).map_err(|_| format!("bad input reference '{t}'"));
    }
    if let Some(c) = t.strip_prefix('$') {
        let (n, ty) = c.split_once(':').ok_or_else(|| format!("constant '{t}' needs a type, e.g. $0:int32"))?;
        let index = n.parse().map_err(|_| format!("bad constant reference '{t}'"))?;
        let dtype = parse_type(ty).ok_or_else(|| format!("unknown constant type '{ty}'"))?;
        return Ok(Ast::Const { index, dtype });
    }
    let op = Op::parse(t).ok_or_else(|| format!("unknown arithmetic operation '{t}'"))?;
    if toks.get(*pos) != Some(&"(") {
        return Err(format!("'{t}' must be followed by '('"));
    }
    *pos += 1;
    let mut args = Vec::new();
    while toks.get(*pos) != Some(&")") {
        if *pos >= toks.len() {
            return Err("missing ')'".into());
        }
        args.push(parse_at(toks, pos)?);
    }
    *pos += 1;
    if args.len() != op.arity() {
        return Err(format!("'{t}' takes {} operand(s), got {}", op.arity(), args.len()));
    }
    Ok(Ast::Call(op, args))
}

/// Value class of a type in the evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cls {
    S,
    U,
    F,
}

fn cls(d: DType) -> Cls {
    match d {
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => Cls::S,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => Cls::U,
        DType::F16 | DType::F32 | DType::F64 => Cls::F,
    }
}

fn is_signed(d: DType) -> bool {
    cls(d) == Cls::S
}

fn signed_of_size(n: usize) -> DType {
    match n {
        1 => DType::I8,
        2 => DType::I16,
        4 => DType::I32,
        _ => DType::I64,
    }
}

/// DALI's binary type promotion (checked against DALI 2.4 for every pair of types).
pub fn promote(a: DType, b: DType) -> DType {
    if a == b {
        return a;
    }
    if a.is_float() || b.is_float() {
        return if a == DType::F64 || b == DType::F64 { DType::F64 } else { DType::F32 };
    }
    if a == DType::Bool {
        return b;
    }
    if b == DType::Bool {
        return a;
    }
    if is_signed(a) == is_signed(b) {
        return if a.size() >= b.size() { a } else { b };
    }
    let (s, u) = if is_signed(a) { (a, b) } else { (b, a) };
    if s.size() > u.size() { s } else { signed_of_size((2 * u.size()).min(8)) }
}

/// A typed node of a compiled expression; children come before parents, the root is last.
#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    /// Type of the node's value.
    pub dtype: DType,
    /// Type the operands are converted to before the operation.
    pub compute: DType,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Input(usize),
    Const(u64),
    Call(Op, [usize; 3]),
}

/// A typed expression, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Program {
    pub nodes: Vec<Node>,
}

impl Program {
    pub fn out_type(&self) -> DType {
        self.nodes.last().expect("non-empty").dtype
    }

    /// Whether an integer `//` or `%` (which fails on a zero divisor) is in the program.
    pub fn divides_integers(&self) -> bool {
        self.nodes.iter().any(|n| matches!(n.kind, Kind::Call(Op::Div | Op::Mod, _)) && cls(n.compute) != Cls::F)
    }
}

/// Types `ast` for inputs of `input_types`; a message naming the offending operation on error.
pub fn compile(ast: &Ast, input_types: &[DType], ints: &[i64], reals: &[f64]) -> Result<Program, String> {
    let mut nodes = Vec::new();
    compile_at(ast, input_types, ints, reals, &mut nodes)?;
    Ok(Program { nodes })
}

fn check_type(d: DType, what: &str) -> Result<(), String> {
    if d == DType::F16 {
        return Err(format!("{what} has type FLOAT16, which arithmetic expressions do not support"));
    }
    Ok(())
}

fn compile_at(ast: &Ast, tys: &[DType], ints: &[i64], reals: &[f64], nodes: &mut Vec<Node>) -> Result<usize, String> {
    let node = match ast {
        Ast::Input(i) => {
            let d = *tys.get(*i).ok_or_else(|| format!("expression uses input {i} but the operator has {} input(s)", tys.len()))?;
            check_type(d, &format!("input {i}"))?;
            Node { kind: Kind::Input(*i), dtype: d, compute: d }
        }
        Ast::Const { index, dtype } => {
            check_type(*dtype, "a constant")?;
            let bits = if dtype.is_float() {
                let v = *reals.get(*index).ok_or_else(|| format!("real constant {index} is missing"))?;
                wrap_one(*dtype, v.to_bits())
            } else {
                let v = *ints.get(*index).ok_or_else(|| format!("integer constant {index} is missing"))?;
                let w = wrap_one(*dtype, v as u64);
                if (cls(*dtype) == Cls::S && w as i64 != v) || (cls(*dtype) == Cls::U && (v < 0 || w != v as u64)) {
                    return Err(format!("integer constant {v} out of range for {}", dtype.dali_name()));
                }
                w
            };
            Node { kind: Kind::Const(bits), dtype: *dtype, compute: *dtype }
        }
        Ast::Call(op, args) => {
            let mut ch = [0usize; 3];
            for (k, a) in args.iter().enumerate() {
                ch[k] = compile_at(a, tys, ints, reals, nodes)?;
            }
            let t: Vec<DType> = (0..args.len()).map(|k| nodes[ch[k]].dtype).collect();
            let (dtype, compute) = result_type(*op, &t)?;
            Node { kind: Kind::Call(*op, ch), dtype, compute }
        }
    };
    nodes.push(node);
    Ok(nodes.len() - 1)
}

const BOOL_HINT: &str = "Consider using bitwise operators `|`, `&`, `^` or a numeric type as one of the inputs to force type promotions of the booleans. Note: using `*` (multiplication) is still allowed for boolean inputs.";

/// (result type, compute type) of `op` on operands of types `t`, following DALI.
pub fn result_type(op: Op, t: &[DType]) -> Result<(DType, DType), String> {
    use Op::*;
    let all_bool = t.iter().all(|&d| d == DType::Bool);
    let p = t.iter().copied().reduce(promote).expect("operands");
    let float_of = |d: DType| if d == DType::F64 { DType::F64 } else { DType::F32 };
    match op {
        Minus | Abs if all_bool => Err(format!(
            "input to arithmetic operator `{}` cannot be a boolean. Consider using bitwise operator `~` or a numeric type.",
            op.symbol()
        )),
        Minus | Abs | Plus => Ok((p, p)),
        _ if op.is_float_fn() => Ok((float_of(p), float_of(p))),
        _ if op.is_comparison() => Ok((DType::Bool, p)),
        _ if op.is_bitwise() => {
            if t.iter().any(|d| d.is_float()) {
                Err(format!(
                    "inputs to bitwise operator `{}` must be of integral type, got {}",
                    op.symbol(),
                    t.iter().map(|d| d.dali_name()).collect::<Vec<_>>().join(" and ")
                ))
            } else {
                Ok((p, p))
            }
        }
        Mul => Ok((p, p)),
        _ if all_bool => Err(format!("inputs to arithmetic operator `{}` cannot be booleans. {BOOL_HINT}", op.symbol())),
        FDiv | FPow | Atan2 => Ok((float_of(p), float_of(p))),
        _ => Ok((p, p)),
    }
}

/// Wraps a value word to type `d` (integer overflow wraps; FLOAT rounds to f32).
#[inline]
fn wrap_one(d: DType, v: u64) -> u64 {
    match d {
        DType::I8 => v as i8 as i64 as u64,
        DType::I16 => v as i16 as i64 as u64,
        DType::I32 => v as i32 as i64 as u64,
        DType::U8 => v as u8 as u64,
        DType::U16 => v as u16 as u64,
        DType::U32 => v as u32 as u64,
        DType::Bool => (v != 0) as u64,
        DType::F32 | DType::F16 => (f64::from_bits(v) as f32 as f64).to_bits(),
        DType::I64 | DType::U64 | DType::F64 => v,
    }
}

fn wrap_all(d: DType, v: &mut [u64]) {
    // One loop per type (the match outside): each is vector code.
    fn each(v: &mut [u64], g: impl Fn(u64) -> u64) {
        v.iter_mut().for_each(|x| *x = g(*x));
    }
    match d {
        DType::I8 => each(v, |x| x as i8 as i64 as u64),
        DType::I16 => each(v, |x| x as i16 as i64 as u64),
        DType::I32 => each(v, |x| x as i32 as i64 as u64),
        DType::U8 => each(v, |x| x as u8 as u64),
        DType::U16 => each(v, |x| x as u16 as u64),
        DType::U32 => each(v, |x| x as u32 as u64),
        DType::Bool => each(v, |x| (x != 0) as u64),
        DType::F32 | DType::F16 => each(v, |x| (f64::from_bits(x) as f32 as f64).to_bits()),
        DType::I64 | DType::U64 | DType::F64 => {}
    }
}

/// True when words of type `from` are already words of type `to` (every value of `from` is
/// one of `to`, and both keep integers the same way): the conversion is a copy, skipped.
fn same_words(from: DType, to: DType) -> bool {
    from == to
        || match (cls(from), cls(to)) {
            (Cls::U, Cls::U) | (Cls::S, Cls::S) => to.size() >= from.size() && to != DType::Bool,
            (Cls::U, Cls::S) => to.size() > from.size(),
            _ => false,
        }
}

/// Converts words of type `from` to type `to`, in place.
fn convert(from: DType, to: DType, v: &mut [u64]) {
    if from == to {
        return;
    }
    match (cls(from), cls(to)) {
        (Cls::S, Cls::F) => {
            if to == DType::F32 {
                v.iter_mut().for_each(|x| *x = ((*x as i64) as f32 as f64).to_bits())
            } else {
                v.iter_mut().for_each(|x| *x = ((*x as i64) as f64).to_bits())
            }
        }
        (Cls::U, Cls::F) => {
            if to == DType::F32 {
                v.iter_mut().for_each(|x| *x = (*x as f32 as f64).to_bits())
            } else {
                v.iter_mut().for_each(|x| *x = (*x as f64).to_bits())
            }
        }
        (Cls::F, Cls::S) => v.iter_mut().for_each(|x| *x = f64::from_bits(*x) as i64 as u64),
        (Cls::F, Cls::U) => v.iter_mut().for_each(|x| *x = f64::from_bits(*x) as u64),
        (Cls::F, Cls::F) => {}
        _ => {}
    }
    if to != DType::F64 {
        wrap_all(to, v);
    }
}

#[inline]
fn f(x: u64) -> f64 {
    f64::from_bits(x)
}

fn un<F: Fn(u64) -> u64>(out: &mut [u64], a: &[u64], g: F) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = g(x);
    }
}

fn bin<F: Fn(u64, u64) -> u64>(out: &mut [u64], a: &[u64], b: &[u64], g: F) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = g(x, y);
    }
}

/// DALI's integer power: negative exponents give 0.
fn ipow_s(mut b: i64, e: i64) -> i64 {
    if e < 0 {
        return 0;
    }
    let (mut e, mut r) = (e as u64, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

fn ipow_u(mut b: u64, mut e: u64) -> u64 {
    let mut r = 1u64;
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

/// Applies `op` in class `c` to operand words already converted to the compute type.
/// Returns false on an integer division by zero.
fn apply(op: Op, c: Cls, out: &mut [u64], a: &[u64], b: &[u64], z: &[u64]) -> bool {
    use Op::*;
    let mut ok = true;
    match (op, c) {
        (Plus, _) => out.copy_from_slice(a),
        (Add, Cls::F) => bin(out, a, b, |x, y| (f(x) + f(y)).to_bits()),
        (Add, _) => bin(out, a, b, u64::wrapping_add),
        (Sub, Cls::F) => bin(out, a, b, |x, y| (f(x) - f(y)).to_bits()),
        (Sub, _) => bin(out, a, b, u64::wrapping_sub),
        (Mul, Cls::F) => bin(out, a, b, |x, y| (f(x) * f(y)).to_bits()),
        (Mul, _) => bin(out, a, b, u64::wrapping_mul),
        (FDiv | Div, Cls::F) => bin(out, a, b, |x, y| (f(x) / f(y)).to_bits()),
        (Mod, Cls::F) => bin(out, a, b, |x, y| (f(x) % f(y)).to_bits()),
        (Div | Mod, _) => {
            ok = b.iter().all(|&y| y != 0);
            if ok {
                match (op, c) {
                    (Div, Cls::S) => bin(out, a, b, |x, y| (x as i64).wrapping_div(y as i64) as u64),
                    (Mod, Cls::S) => bin(out, a, b, |x, y| (x as i64).wrapping_rem(y as i64) as u64),
                    (Div, _) => bin(out, a, b, |x, y| x / y),
                    _ => bin(out, a, b, |x, y| x % y),
                }
            }
        }
        (Pow | FPow, Cls::F) => bin(out, a, b, |x, y| f(x).powf(f(y)).to_bits()),
        (Pow, Cls::S) => bin(out, a, b, |x, y| ipow_s(x as i64, y as i64) as u64),
        (Pow, _) => bin(out, a, b, ipow_u),
        (Atan2, _) => bin(out, a, b, |x, y| f(x).atan2(f(y)).to_bits()),
        (Min, Cls::F) => bin(out, a, b, |x, y| if f(y) < f(x) { y } else { x }),
        (Max, Cls::F) => bin(out, a, b, |x, y| if f(y) > f(x) { y } else { x }),
        (Min, Cls::S) => bin(out, a, b, |x, y| (x as i64).min(y as i64) as u64),
        (Max, Cls::S) => bin(out, a, b, |x, y| (x as i64).max(y as i64) as u64),
        (Min, _) => bin(out, a, b, u64::min),
        (Max, _) => bin(out, a, b, u64::max),
        (Clamp, Cls::F) => {
            for k in 0..out.len() {
                let (v, lo, hi) = (f(a[k]), f(b[k]), f(z[k]));
                out[k] = (if v < lo { lo } else if v > hi { hi } else { v }).to_bits();
            }
        }
        (Clamp, Cls::S) => {
            for k in 0..out.len() {
                let (v, lo, hi) = (a[k] as i64, b[k] as i64, z[k] as i64);
                out[k] = (if v < lo { lo } else if v > hi { hi } else { v }) as u64;
            }
        }
        (Clamp, _) => {
            for k in 0..out.len() {
                out[k] = if a[k] < b[k] { b[k] } else if a[k] > z[k] { z[k] } else { a[k] };
            }
        }
        (Eq, Cls::F) => bin(out, a, b, |x, y| (f(x) == f(y)) as u64),
        (Neq, Cls::F) => bin(out, a, b, |x, y| (f(x) != f(y)) as u64),
        (Lt, Cls::F) => bin(out, a, b, |x, y| (f(x) < f(y)) as u64),
        (Leq, Cls::F) => bin(out, a, b, |x, y| (f(x) <= f(y)) as u64),
        (Gt, Cls::F) => bin(out, a, b, |x, y| (f(x) > f(y)) as u64),
        (Geq, Cls::F) => bin(out, a, b, |x, y| (f(x) >= f(y)) as u64),
        (Eq, _) => bin(out, a, b, |x, y| (x == y) as u64),
        (Neq, _) => bin(out, a, b, |x, y| (x != y) as u64),
        (Lt, Cls::S) => bin(out, a, b, |x, y| ((x as i64) < y as i64) as u64),
        (Leq, Cls::S) => bin(out, a, b, |x, y| ((x as i64) <= y as i64) as u64),
        (Gt, Cls::S) => bin(out, a, b, |x, y| ((x as i64) > y as i64) as u64),
        (Geq, Cls::S) => bin(out, a, b, |x, y| ((x as i64) >= y as i64) as u64),
        (Lt, _) => bin(out, a, b, |x, y| (x < y) as u64),
        (Leq, _) => bin(out, a, b, |x, y| (x <= y) as u64),
        (Gt, _) => bin(out, a, b, |x, y| (x > y) as u64),
        (Geq, _) => bin(out, a, b, |x, y| (x >= y) as u64),
        (BitAnd, _) => bin(out, a, b, |x, y| x & y),
        (BitOr, _) => bin(out, a, b, |x, y| x | y),
        (BitXor, _) => bin(out, a, b, |x, y| x ^ y),
        (Minus, Cls::F) => un(out, a, |x| (-f(x)).to_bits()),
        (Minus, _) => un(out, a, |x| x.wrapping_neg()),
        (Abs | FAbs, Cls::F) => un(out, a, |x| f(x).abs().to_bits()),
        (Abs, Cls::S) => un(out, a, |x| (x as i64).wrapping_abs() as u64),
        (Abs, _) => out.copy_from_slice(a),
        (Sqrt, _) => un(out, a, |x| f(x).sqrt().to_bits()),
        (Rsqrt, _) => un(out, a, |x| (1.0 / f(x).sqrt()).to_bits()),
        (Cbrt, _) => un(out, a, |x| f(x).cbrt().to_bits()),
        (Exp, _) => un(out, a, |x| f(x).exp().to_bits()),
        (Log, _) => un(out, a, |x| f(x).ln().to_bits()),
        (Log2, _) => un(out, a, |x| f(x).log2().to_bits()),
        (Log10, _) => un(out, a, |x| f(x).log10().to_bits()),
        (Sin, _) => un(out, a, |x| f(x).sin().to_bits()),
        (Cos, _) => un(out, a, |x| f(x).cos().to_bits()),
        (Tan, _) => un(out, a, |x| f(x).tan().to_bits()),
        (Asin, _) => un(out, a, |x| f(x).asin().to_bits()),
        (Acos, _) => un(out, a, |x| f(x).acos().to_bits()),
        (Atan, _) => un(out, a, |x| f(x).atan().to_bits()),
        (Sinh, _) => un(out, a, |x| f(x).sinh().to_bits()),
        (Cosh, _) => un(out, a, |x| f(x).cosh().to_bits()),
        (Tanh, _) => un(out, a, |x| f(x).tanh().to_bits()),
        (Asinh, _) => un(out, a, |x| f(x).asinh().to_bits()),
        (Acosh, _) => un(out, a, |x| f(x).acosh().to_bits()),
        (Atanh, _) => un(out, a, |x| f(x).atanh().to_bits()),
        (Floor, _) => un(out, a, |x| f(x).floor().to_bits()),
        (Ceil, _) => un(out, a, |x| f(x).ceil().to_bits()),
        (FDiv | FPow, _) => unreachable!("float-only operations compute in float"),
        _ => unreachable!("{op:?} on {c:?}"),
    }
    ok
}

/// Where an input's elements come from for one sample: its bytes, type and per-output-axis
/// element strides (0 on broadcast axes).
pub struct Operand<'a> {
    pub bytes: &'a [u8],
    pub dtype: DType,
    pub strides: [usize; MAX_NDIM],
    /// True when the input has the output's shape (a contiguous read).
    pub dense: bool,
}

/// Most dimensions an arithmetic operand may have.
pub const MAX_NDIM: usize = 16;

/// Numpy broadcasting of `shapes` (right-aligned) into `ndim` dimensions.
pub fn broadcast(shapes: &[&[usize]], ndim: usize, out: &mut [usize; MAX_NDIM]) -> Result<(), ()> {
    out[..ndim].fill(1);
    for s in shapes {
        let off = ndim - s.len();
        for (k, &e) in s.iter().enumerate() {
            let o = &mut out[off + k];
            if *o == 1 {
                *o = e;
            } else if e != 1 && e != *o {
                return Err(());
            }
        }
    }
    Ok(())
}

/// Element strides of an input of `shape` read at an output of `out_shape`.
pub fn strides_for(shape: &[usize], out_shape: &[usize]) -> [usize; MAX_NDIM] {
    let mut st = [0usize; MAX_NDIM];
    let off = out_shape.len() - shape.len();
    let mut s = 1;
    for k in (0..shape.len()).rev() {
        st[off + k] = if shape[k] == 1 { 0 } else { s };
        s *= shape[k];
    }
    st
}

fn load<T: bytemuck::Pod>(src: &[u8], dst: &mut [u64], start: usize, op: &Operand<'_>, shape: &[usize], conv: impl Fn(T) -> u64) {
    let src: &[T] = bytemuck::cast_slice(src);
    if op.dense {
        let n = dst.len();
        for (d, &s) in dst.iter_mut().zip(&src[start..start + n]) {
            *d = conv(s);
        }
        return;
    }
    if src.len() == 1 {
        dst.fill(conv(src[0]));
        return;
    }
    // Odometer over the output coordinates from `start`, a run of the innermost axis at a
    // time: within a run the source is one repeated value (stride 0, e.g. a per-sample
    // scalar kept as 1x1x1) or a strided row.
    let nd = shape.len();
    let mut idx = [0usize; MAX_NDIM];
    let mut rem = start;
    let mut off = 0;
    for k in (0..nd).rev() {
        idx[k] = rem % shape[k];
        rem /= shape[k];
        off += idx[k] * op.strides[k];
    }
    let last = nd - 1;
    let (inner, inner_stride) = (shape[last], op.strides[last]);
    let mut done = 0;
    while done < dst.len() {
        let run = (inner - idx[last]).min(dst.len() - done);
        let out = &mut dst[done..done + run];
        match inner_stride {
            0 => out.fill(conv(src[off])),
            1 => out.iter_mut().zip(&src[off..off + run]).for_each(|(d, &x)| *d = conv(x)),
            st => out.iter_mut().enumerate().for_each(|(j, d)| *d = conv(src[off + j * st])),
        }
        done += run;
        // Move to the start of the next run (carry into the outer axes).
        idx[last] += run;
        off += run * inner_stride;
        for k in (0..nd).rev() {
            if idx[k] < shape[k] {
                break;
            }
            off -= idx[k] * op.strides[k];
            idx[k] = 0;
            if k > 0 {
                idx[k - 1] += 1;
                off += op.strides[k - 1];
            }
        }
    }
}

fn load_operand(op: &Operand<'_>, dst: &mut [u64], start: usize, shape: &[usize]) {
    let b = op.bytes;
    match op.dtype {
        DType::U8 | DType::Bool => load::<u8>(b, dst, start, op, shape, |x| x as u64),
        DType::U16 => load::<u16>(b, dst, start, op, shape, |x| x as u64),
        DType::U32 => load::<u32>(b, dst, start, op, shape, |x| x as u64),
        DType::U64 => load::<u64>(b, dst, start, op, shape, |x| x),
        DType::I8 => load::<i8>(b, dst, start, op, shape, |x| x as i64 as u64),
        DType::I16 => load::<i16>(b, dst, start, op, shape, |x| x as i64 as u64),
        DType::I32 => load::<i32>(b, dst, start, op, shape, |x| x as i64 as u64),
        DType::I64 => load::<i64>(b, dst, start, op, shape, |x| x as u64),
        DType::F32 => load::<f32>(b, dst, start, op, shape, |x| (x as f64).to_bits()),
        DType::F64 => load::<f64>(b, dst, start, op, shape, |x| x.to_bits()),
        DType::F16 => unreachable!("rejected when compiling"),
    }
}

fn store<T: bytemuck::Pod>(dst: &mut [u8], start: usize, v: &[u64], conv: impl Fn(u64) -> T) {
    let dst: &mut [T] = bytemuck::cast_slice_mut(dst);
    for (d, &x) in dst[start..start + v.len()].iter_mut().zip(v) {
        *d = conv(x);
    }
}

fn store_words(d: DType, dst: &mut [u8], start: usize, v: &[u64]) {
    match d {
        DType::U8 | DType::Bool => store::<u8>(dst, start, v, |x| x as u8),
        DType::U16 => store::<u16>(dst, start, v, |x| x as u16),
        DType::U32 => store::<u32>(dst, start, v, |x| x as u32),
        DType::U64 => store::<u64>(dst, start, v, |x| x),
        DType::I8 => store::<i8>(dst, start, v, |x| x as i8),
        DType::I16 => store::<i16>(dst, start, v, |x| x as i16),
        DType::I32 => store::<i32>(dst, start, v, |x| x as i32),
        DType::I64 => store::<i64>(dst, start, v, |x| x as i64),
        DType::F32 => store::<f32>(dst, start, v, |x| f64::from_bits(x) as f32),
        DType::F64 => store::<f64>(dst, start, v, f64::from_bits),
        DType::F16 => unreachable!("rejected when compiling"),
    }
}

thread_local! {
    /// Per-thread evaluation scratch: grows to the largest program once, then is reused.
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Evaluates `prog` for one sample of output shape `shape` into `out` (bytes of the output
/// type). Err(()) on an integer division by zero.
pub fn eval(prog: &Program, operands: &[Option<Operand<'_>>], shape: &[usize], out: &mut [u8]) -> Result<(), ()> {
    let total: usize = shape.iter().product();
    let n_nodes = prog.nodes.len();
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let need = (n_nodes + 3) * CHUNK;
        if s.len() < need {
            s.resize(need, 0);
        }
        let (vals, tmp) = s.split_at_mut(n_nodes * CHUNK);
        let mut start = 0;
        while start < total {
            let len = CHUNK.min(total - start);
            for (i, node) in prog.nodes.iter().enumerate() {
                let (done, rest) = vals.split_at_mut(i * CHUNK);
                let dst = &mut rest[..len];
                match node.kind {
                    Kind::Input(j) => load_operand(operands[j].as_ref().expect("operand"), dst, start, shape),
                    Kind::Const(bits) => dst.fill(bits),
                    Kind::Call(op, ch) => {
                        let (ta, rest_t) = tmp.split_at_mut(CHUNK);
                        let (tb, tz) = rest_t.split_at_mut(CHUNK);
                        let arity = op.arity();
                        // An operand already of the compute type is read where it is; only
                        // the others are copied and converted.
                        let mut args: [&[u64]; 3] = [&[], &[], &[]];
                        for (k, t) in [ta, tb, tz].into_iter().enumerate().take(arity) {
                            let c = &prog.nodes[ch[k]];
                            let value = &done[ch[k] * CHUNK..ch[k] * CHUNK + len];
                            if same_words(c.dtype, node.compute) {
                                args[k] = value;
                            } else {
                                let t = &mut t[..len];
                                t.copy_from_slice(value);
                                convert(c.dtype, node.compute, t);
                                args[k] = t;
                            }
                        }
                        let [a, b, z] = args;
                        if !apply(op, cls(node.compute), dst, a, b, z) {
                            return Err(());
                        }
                        // Integer results wrap to their width, FLOAT rounds to f32 (no-op for 64-bit);
                        // comparisons, bitwise operations, min and max of in-range words give
                        // in-range words, so they need no pass.
                        if !matches!(op, Op::Eq | Op::Neq | Op::Lt | Op::Leq | Op::Gt | Op::Geq | Op::BitAnd | Op::BitOr | Op::BitXor | Op::Min | Op::Max)
                            || node.dtype != node.compute && node.dtype != DType::Bool
                        {
                            wrap_all(node.dtype, dst);
                        }
                    }
                }
            }
            let root = &vals[(n_nodes - 1) * CHUNK..(n_nodes - 1) * CHUNK + len];
            store_words(prog.out_type(), out, start, root);
            start += len;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promotion_matches_dali_table() {
        // Rows/columns: u8 i8 u16 i16 i32 u32 i64 u64 f32 f64 bool; printed by DALI 2.4 for `a + b`.
        let order = [U8, I8, U16, I16, I32, U32, I64, U64, F32, F64, Bool];
        let table = [
            [U8, I16, U16, I16, I32, U32, I64, U64, F32, F64, U8],
            [I16, I8, I32, I16, I32, I64, I64, I64, F32, F64, I8],
            [U16, I32, U16, I32, I32, U32, I64, U64, F32, F64, U16],
            [I16, I16, I32, I16, I32, I64, I64, I64, F32, F64, I16],
            [I32, I32, I32, I32, I32, I64, I64, I64, F32, F64, I32],
            [U32, I64, U32, I64, I64, U32, I64, U64, F32, F64, U32],
            [I64, I64, I64, I64, I64, I64, I64, I64, F32, F64, I64],
            [U64, I64, U64, I64, I64, U64, I64, U64, F32, F64, U64],
            [F32, F32, F32, F32, F32, F32, F32, F32, F32, F64, F32],
            [F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64],
            [U8, I8, U16, I16, I32, U32, I64, U64, F32, F64, Bool],
        ];
        for (r, &a) in order.iter().enumerate() {
            for (c, &b) in order.iter().enumerate() {
                assert_eq!(promote(a, b), table[r][c], "{a} + {b}");
            }
        }
    }

    #[test]
    fn result_types_follow_dali() {
        assert_eq!(result_type(Op::FDiv, &[U8, U8]).unwrap().0, F32);
        assert_eq!(result_type(Op::FDiv, &[I32, F64]).unwrap().0, F64);
        assert_eq!(result_type(Op::Lt, &[U8, I8]).unwrap(), (Bool, I16));
        assert_eq!(result_type(Op::Sqrt, &[U8]).unwrap().0, F32);
        assert_eq!(result_type(Op::Minus, &[U8]).unwrap().0, U8);
        assert_eq!(result_type(Op::Mul, &[Bool, Bool]).unwrap().0, Bool);
        assert_eq!(result_type(Op::BitOr, &[Bool, Bool]).unwrap().0, Bool);
        assert!(result_type(Op::Add, &[Bool, Bool]).unwrap_err().contains("cannot be booleans"));
        assert!(result_type(Op::Minus, &[Bool]).is_err());
        assert!(result_type(Op::BitAnd, &[F32, I32]).unwrap_err().contains("integral"));
        assert_eq!(result_type(Op::Clamp, &[U8, I32, I32]).unwrap().0, I32);
    }

    fn run1(desc: &str, tys: &[DType], data: &[&[u8]], shape: &[usize], ints: &[i64], reals: &[f64]) -> (DType, Vec<u8>) {
        let prog = compile(&parse(desc).unwrap(), tys, ints, reals).unwrap();
        let ops: Vec<Option<Operand<'_>>> = tys
            .iter()
            .zip(data)
            .map(|(&t, &b)| Some(Operand { bytes: b, dtype: t, strides: strides_for(&[b.len() / t.size()], shape), dense: b.len() / t.size() == shape.iter().product::<usize>() }))
            .collect();
        let mut out = vec![0u8; shape.iter().product::<usize>() * prog.out_type().size()];
        eval(&prog, &ops, shape, &mut out).unwrap();
        (prog.out_type(), out)
    }

    /// Times common image expressions on one 224x224x3 sample (auto_aug's solarize, contrast,
    /// auto_contrast): `cargo test --release -p sluice --lib arithmetic::expr::tests::speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn speed() {
        let shape = [224usize, 224, 3];
        let n: usize = shape.iter().product();
        let img: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let thr = 100.5f32.to_le_bytes();
        let chan = [10u8, 20, 30];
        let scale = [1.5f32, 1.25, 2.0];
        let img: &'static [u8] = Box::leak(img.into_boxed_slice());
        let thr: &'static [u8] = Box::leak(Box::new(thr));
        let chan: &'static [u8] = Box::leak(Box::new(chan));
        let scale: &'static [u8] = Box::leak(Box::new(bytemuck::cast::<[f32; 3], [u8; 12]>(scale)));
        let cases: [(&str, Vec<(&'static [u8], DType, Vec<usize>)>); 4] = [
            ("bitxor(&0 mul(geq(&0 &1) $0:uint8))", vec![(img, U8, shape.to_vec()), (thr, F32, vec![1, 1, 1])]),
            ("add(&1 mul(sub(&0 &1) $0:float32))", vec![(img, U8, shape.to_vec()), (thr, F32, vec![1, 1, 1])]),
            ("mul(sub(&0 &1) &2)", vec![(img, U8, shape.to_vec()), (chan, U8, vec![1, 1, 3]), (scale, F32, vec![1, 1, 3])]),
            ("bitand(&0 $0:uint8)", vec![(img, U8, shape.to_vec())]),
        ];
        for (desc, ins) in cases {
            let tys: Vec<DType> = ins.iter().map(|i| i.1).collect();
            let prog = compile(&parse(desc).unwrap(), &tys, &[255], &[1.5]).unwrap();
            let ops: Vec<Option<Operand<'_>>> = ins
                .iter()
                .map(|(b, t, sh)| Some(Operand { bytes: b, dtype: *t, strides: strides_for(sh, &shape), dense: sh.iter().product::<usize>() == n }))
                .collect();
            let mut out = vec![0u8; n * prog.out_type().size()];
            let t = std::time::Instant::now();
            let reps = 200;
            for _ in 0..reps {
                eval(&prog, &ops, &shape, &mut out).unwrap();
            }
            println!("{desc:45} {:.3} ms", t.elapsed().as_secs_f64() * 1e3 / reps as f64);
        }
    }

    #[test]
    fn evaluates_like_dali() {
        // DALI 2.4: u8 [200, 3, 250] + 1 -> int32 [201, 4, 251]; -u8 -> uint8 [56, 253, 6].
        let u8s = [200u8, 3, 250];
        let (t, o) = run1("add(&0 $0:int32)", &[U8], &[&u8s], &[3], &[1], &[]);
        assert_eq!(t, I32);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [201, 4, 251]);
        let (t, o) = run1("minus(&0)", &[U8], &[&u8s], &[3], &[], &[]);
        assert_eq!((t, o), (U8, vec![56, 253, 6]));
        // i32 [7, -7, 9] // -2 -> [-3, 3, -4] (truncation); % 4 -> [3, -3, 1].
        let i32s: Vec<u8> = bytemuck::cast_slice(&[7i32, -7, 9]).to_vec();
        let (_, o) = run1("div(&0 $0:int32)", &[I32], &[&i32s], &[3], &[-2], &[]);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [-3, 3, -4]);
        let (_, o) = run1("mod(&0 $0:int32)", &[I32], &[&i32s], &[3], &[4], &[]);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [3, -3, 1]);
        // Integer power wraps; negative exponents give 0: 2 ** u8 [200, 3, 250] -> [0, 8, 0].
        let (_, o) = run1("pow($0:int32 &0)", &[U8], &[&u8s], &[3], &[2], &[]);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [0, 8, 0]);
        let (_, o) = run1("pow(&0 $0:int32)", &[I32], &[&i32s], &[3], &[-1], &[]);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [0, 0, 0]);
        // u8 // i8: [200, 3, 250] // [-100, 7, -3] -> int16 [-2, 0, -83].
        let i8s = [-100i8 as u8, 7, -3i8 as u8];
        let (t, o) = run1("div(&0 &1)", &[U8, I8], &[&u8s, &i8s], &[3], &[], &[]);
        assert_eq!(t, I16);
        assert_eq!(bytemuck::cast_slice::<u8, i16>(&o), [-2, 0, -83]);
        // Float floor division is plain division (DALI): f32 [1.5, -2.5, 3] // 2 -> [0.75, -1.25, 1.5].
        let f32s: Vec<u8> = bytemuck::cast_slice(&[1.5f32, -2.5, 3.0]).to_vec();
        let (t, o) = run1("div(&0 $0:int32)", &[F32], &[&f32s], &[3], &[2], &[]);
        assert_eq!(t, F32);
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&o), [0.75, -1.25, 1.5]);
        // Comparisons give BOOL; a fused tree: (u8 * 2 + 1.5) < 10.
        let (t, o) = run1("lt(add(mul(&0 $0:int32) $0:float32) $1:int32)", &[U8], &[&u8s], &[3], &[2, 10], &[1.5]);
        assert_eq!((t, o), (Bool, vec![0, 1, 0]));
    }

    #[test]
    fn broadcasting_and_long_samples() {
        let mut out = [0usize; MAX_NDIM];
        broadcast(&[&[2, 3], &[3]], 2, &mut out).unwrap();
        assert_eq!(&out[..2], &[2, 3]);
        broadcast(&[&[3], &[2, 1]], 2, &mut out).unwrap();
        assert_eq!(&out[..2], &[2, 3]);
        assert!(broadcast(&[&[2, 3], &[3, 2]], 2, &mut out).is_err());
        // [2,3] + [2,1] -> DALI: [[10,11,12],[23,24,25]] for arange(6) + [[10],[20]].
        let a: Vec<u8> = bytemuck::cast_slice(&[0i32, 1, 2, 3, 4, 5]).to_vec();
        let b: Vec<u8> = bytemuck::cast_slice(&[10i32, 20]).to_vec();
        let prog = compile(&parse("add(&0 &1)").unwrap(), &[I32, I32], &[], &[]).unwrap();
        let shape = [2usize, 3];
        let ops = [
            Some(Operand { bytes: &a, dtype: I32, strides: strides_for(&[2, 3], &shape), dense: true }),
            Some(Operand { bytes: &b, dtype: I32, strides: strides_for(&[2, 1], &shape), dense: false }),
        ];
        let mut o = vec![0u8; 24];
        eval(&prog, &ops, &shape, &mut o).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&o), [10, 11, 12, 23, 24, 25]);
        // More elements than one chunk.
        let n = CHUNK * 3 + 17;
        let x: Vec<u8> = (0..n).map(|i| i as u8).collect();
        let (_, o) = run1("bitxor(&0 $0:uint8)", &[U8], &[&x], &[n], &[0x5a], &[]);
        assert!(o.iter().enumerate().all(|(i, &v)| v == (i as u8) ^ 0x5a));
    }

    #[test]
    fn parse_errors_and_range_checks() {
        assert!(parse("add(&0)").unwrap_err().contains("2 operand"));
        assert!(parse("frob(&0 &1)").unwrap_err().contains("unknown"));
        assert!(compile(&parse("add(&0 $0:uint8)").unwrap(), &[U8], &[300], &[]).unwrap_err().contains("out of range"));
        assert!(compile(&parse("add(&0 &0)").unwrap(), &[F16], &[], &[]).unwrap_err().contains("FLOAT16"));
    }
}
