//! Argument values: checked against the schema once, at build time, so operators read
//! them with plain getters and never see a wrong type.

use std::collections::HashMap;

use super::schema::{ArgDefault, ArgType, OpSchema};
use crate::error::{Error, Result};
use crate::tensor::{DType, TensorList};

/// A value as it arrives from Python (or a Rust caller).
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    StrList(Vec<String>),
}

impl ArgValue {
    fn kind(&self) -> &'static str {
        match self {
            ArgValue::Bool(_) => "bool",
            ArgValue::Int(_) => "int",
            ArgValue::Float(_) => "float",
            ArgValue::Str(_) => "str",
            ArgValue::IntList(_) => "list of int",
            ArgValue::FloatList(_) => "list of float",
            ArgValue::StrList(_) => "list of str",
        }
    }

    /// Converts to the schema's type where DALI would (int -> float, scalar -> list of one,
    /// int 0/1 -> bool); `None` when the value cannot be that type.
    fn coerce(self, ty: ArgType) -> Option<ArgValue> {
        use ArgValue as V;
        Some(match (ty, self) {
            (ArgType::Bool, V::Bool(b)) => V::Bool(b),
            (ArgType::Bool, V::Int(i)) if i == 0 || i == 1 => V::Bool(i == 1),
            (ArgType::Int | ArgType::DType | ArgType::ImageType | ArgType::InterpType, V::Int(i)) => V::Int(i),
            (ArgType::Int, V::Bool(b)) => V::Int(b as i64),
            (ArgType::Float, V::Float(f)) => V::Float(f),
            (ArgType::Float, V::Int(i)) => V::Float(i as f64),
            (ArgType::Str, V::Str(s)) => V::Str(s),
            (ArgType::IntList, V::IntList(l)) => V::IntList(l),
            (ArgType::IntList, V::Int(i)) => V::IntList(vec![i]),
            (ArgType::FloatList, V::FloatList(l)) => V::FloatList(l),
            (ArgType::FloatList, V::IntList(l)) => V::FloatList(l.into_iter().map(|i| i as f64).collect()),
            (ArgType::FloatList, V::Float(f)) => V::FloatList(vec![f]),
            (ArgType::FloatList, V::Int(i)) => V::FloatList(vec![i as f64]),
            (ArgType::StrList, V::StrList(l)) => V::StrList(l),
            (ArgType::StrList, V::Str(s)) => V::StrList(vec![s]),
            // An empty Python list arrives as an empty int list.
            (ArgType::StrList, V::IntList(l)) if l.is_empty() => V::StrList(vec![]),
            (ArgType::FloatList, V::StrList(l)) if l.is_empty() => V::FloatList(vec![]),
            (ArgType::IntList, V::StrList(l)) if l.is_empty() => V::IntList(vec![]),
            _ => return None,
        })
    }
}

/// The error for an argument name `schema` does not have, suggesting the closest name
/// users may set (hidden `_` arguments are never suggested).
fn unknown_argument(schema: &OpSchema, display: &str, name: &str) -> Error {
    let closest = schema
        .all_args()
        .filter(|a| !a.name.starts_with('_'))
        .map(|a| (edit_distance(a.name, name), a.name))
        .filter(|&(d, candidate)| d <= 2.max(candidate.len() / 4))
        .min();
    Error::UnknownArgument {
        operator: display.to_string(),
        argument: name.to_string(),
        hint: closest.map_or(String::new(), |(_, c)| format!("; did you mean '{c}'?")),
    }
}

/// Levenshtein distance (names are short: the quadratic table is nothing).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + (ca != cb) as usize).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// An operator's constant arguments after checking: every known argument present (with its
/// default) unless it is optional and was not given.
#[derive(Debug, Clone)]
pub struct Args {
    op: String,
    values: HashMap<&'static str, ArgValue>,
    /// The arguments the user gave as constants (the others hold defaults or are unset).
    given: Vec<&'static str>,
}

impl Args {
    /// Checks `given` against `schema`: unknown names, wrong types and missing required
    /// arguments are errors naming the operator and the argument. `per_sample` lists the
    /// arguments given as argument inputs (they count as given).
    pub fn check(schema: &OpSchema, display: &str, given: Vec<(String, ArgValue)>, per_sample: &[String]) -> Result<Args> {
        let mut values = Args::check_given(schema, display, given)?;
        let given: Vec<&'static str> = values.keys().copied().collect();
        for name in per_sample {
            let Some(a) = schema.find_arg(name) else {
                return Err(unknown_argument(schema, display, name));
            };
            if !a.per_sample {
                return Err(Error::arg(display, name, "does not accept a per-sample argument input (a DataNode); pass a constant"));
            }
            if values.contains_key(a.name) {
                return Err(Error::arg(display, name, "given both as a constant and as an argument input"));
            }
        }
        for a in schema.all_args() {
            if values.contains_key(a.name) || per_sample.iter().any(|p| schema.find_arg(p).is_some_and(|s| s.name == a.name)) {
                continue;
            }
            let v = match a.default {
                ArgDefault::Required => return Err(Error::arg(display, a.name, "is required")),
                ArgDefault::Optional => continue,
                ArgDefault::Bool(b) => ArgValue::Bool(b),
                ArgDefault::Int(i) => ArgValue::Int(i),
                ArgDefault::Float(f) => ArgValue::Float(f),
                ArgDefault::Str(s) => ArgValue::Str(s.to_string()),
                ArgDefault::IntList(l) => ArgValue::IntList(l.to_vec()),
                ArgDefault::FloatList(l) => ArgValue::FloatList(l.to_vec()),
                ArgDefault::StrList(l) => ArgValue::StrList(l.iter().map(|s| s.to_string()).collect()),
            };
            values.insert(a.name, v);
        }
        Ok(Args { op: display.to_string(), values, given })
    }

    /// The arguments given so far, checked by name and type (aliases resolved), with
    /// nothing filled in: what an `ops.X(...)` object holds before it is called with the
    /// rest. [`Args::check`] starts with this.
    pub fn check_given(schema: &OpSchema, display: &str, given: Vec<(String, ArgValue)>) -> Result<HashMap<&'static str, ArgValue>> {
        let mut values = HashMap::new();
        for (name, value) in given {
            let Some(a) = schema.find_arg(&name) else {
                return Err(unknown_argument(schema, display, &name));
            };
            if values.contains_key(a.name) {
                // A deprecated alias given with the name it stands for (DALI's TypeError).
                let old = if name != a.name { name.as_str() } else { schema.arg_aliases.iter().find(|(_, new)| *new == a.name).map_or(a.name, |(old, _)| old) };
                return Err(Error::type_mismatch(display, format!(
                    "Operator `{display}` got an unexpected '{old}' deprecated argument when '{}' was already provided",
                    a.name
                )));
            }
            let kind = value.kind();
            let v = value
                .coerce(a.ty)
                .ok_or_else(|| Error::type_mismatch(display, format!("argument '{}' must be {}, got {kind}", a.name, a.ty.name())))?;
            if a.ty == ArgType::DType {
                if let ArgValue::Int(id) = v {
                    if DType::from_id(id).is_none() {
                        return Err(Error::arg(display, a.name, format!("unsupported data type id {id}")));
                    }
                }
            }
            values.insert(a.name, v);
        }
        Ok(values)
    }

    /// Sets an argument the schema declares (graph passes use it for hidden arguments).
    /// Panics on a name the schema does not have: a programming error.
    pub fn set(&mut self, schema: &OpSchema, name: &str, value: ArgValue) {
        let a = schema.find_arg(name).unwrap_or_else(|| panic!("{}: no argument '{name}'", self.op));
        self.values.insert(a.name, value);
        if !self.given.contains(&a.name) {
            self.given.push(a.name);
        }
    }

    /// The operator's display name (for error messages).
    pub fn op(&self) -> &str {
        &self.op
    }

    /// True when the argument has a value (given or defaulted).
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// True when the user gave `name` as a constant (not its schema default).
    pub fn was_given(&self, name: &str) -> bool {
        self.given.contains(&name)
    }

    /// The raw value, or `None` when unset.
    pub fn value(&self, name: &str) -> Option<&ArgValue> {
        self.values.get(name)
    }

    fn get(&self, name: &str) -> &ArgValue {
        self.values.get(name).unwrap_or_else(|| panic!("{}: argument '{name}' read but not set", self.op))
    }

    /// A numeric argument (int, float or bool) as f64; `None` when unset or not numeric.
    pub fn numeric(&self, name: &str) -> Option<f64> {
        match self.values.get(name)? {
            ArgValue::Int(i) => Some(*i as f64),
            ArgValue::Float(f) => Some(*f),
            ArgValue::Bool(b) => Some(*b as i64 as f64),
            _ => None,
        }
    }

    /// A bool argument.
    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            ArgValue::Bool(b) => *b,
            v => panic!("{}: '{name}' is {v:?}, not bool", self.op),
        }
    }

    /// An int argument (also DType / ImageType / InterpType ids).
    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            ArgValue::Int(i) => *i,
            v => panic!("{}: '{name}' is {v:?}, not int", self.op),
        }
    }

    /// A float argument.
    pub fn float(&self, name: &str) -> f64 {
        match self.get(name) {
            ArgValue::Float(f) => *f,
            v => panic!("{}: '{name}' is {v:?}, not float", self.op),
        }
    }

    /// A string argument.
    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            ArgValue::Str(s) => s,
            v => panic!("{}: '{name}' is {v:?}, not str", self.op),
        }
    }

    /// A list-of-float argument.
    pub fn floats(&self, name: &str) -> &[f64] {
        match self.get(name) {
            ArgValue::FloatList(l) => l,
            v => panic!("{}: '{name}' is {v:?}, not a float list", self.op),
        }
    }

    /// A list-of-int argument.
    pub fn ints(&self, name: &str) -> &[i64] {
        match self.get(name) {
            ArgValue::IntList(l) => l,
            v => panic!("{}: '{name}' is {v:?}, not an int list", self.op),
        }
    }

    /// A list-of-str argument.
    pub fn strs(&self, name: &str) -> &[String] {
        match self.get(name) {
            ArgValue::StrList(l) => l,
            v => panic!("{}: '{name}' is {v:?}, not a str list", self.op),
        }
    }

    /// A DType argument.
    pub fn dtype(&self, name: &str) -> DType {
        DType::from_id(self.int(name)).expect("checked at build")
    }

    /// An optional float (None when not given and without default).
    pub fn opt_float(&self, name: &str) -> Option<f64> {
        self.has(name).then(|| self.float(name))
    }

    /// An optional int.
    pub fn opt_int(&self, name: &str) -> Option<i64> {
        self.has(name).then(|| self.int(name))
    }

    /// An optional string.
    pub fn opt_str(&self, name: &str) -> Option<&str> {
        self.has(name).then(|| self.str(name))
    }
}

/// An argument that is either one constant for the whole batch or one value per sample
/// from an argument input. Operators read it with [`PerSample::get`].
#[derive(Debug, Clone, Copy)]
pub enum PerSample<'a> {
    Constant(f64),
    Input { name: &'static str, batch: &'a TensorList },
    Unset,
}

impl PerSample<'_> {
    /// The value for sample `i`, or `None` when the argument was not given.
    pub fn get(&self, op: &str, i: usize) -> Result<Option<f64>> {
        match *self {
            PerSample::Constant(v) => Ok(Some(v)),
            PerSample::Unset => Ok(None),
            PerSample::Input { name, batch } => {
                if batch.numel(i) != 1 {
                    return Err(Error::arg(op, name, format!(
                        "argument input must hold one value per sample; sample {i} has shape {:?}",
                        batch.shape(i)
                    )));
                }
                Ok(Some(scalar_as_f64(batch, i)))
            }
        }
    }
}

/// A list argument (`mean`, `size`, `shape`, ...) that is either one constant list for the
/// whole batch or one list per sample from an argument input. Operators read it with
/// [`PerSampleList::get`], which checks the length, so no operator repeats that check.
#[derive(Debug, Clone, Copy)]
pub enum PerSampleList<'a> {
    Constant(&'a ArgValue),
    Input { name: &'static str, batch: &'a TensorList },
    Unset,
}

/// Most values a list argument may hold per sample (enough for any shape or channel list);
/// reading into a fixed array keeps the per-sample path free of allocation.
pub const MAX_LIST: usize = 64;

impl<'a> PerSampleList<'a> {
    /// True when the argument was given (as a constant or an input).
    pub fn is_set(&self) -> bool {
        !matches!(self, PerSampleList::Unset)
    }

    /// True when the values come from an argument input (they may differ per sample).
    pub fn is_input(&self) -> bool {
        matches!(self, PerSampleList::Input { .. })
    }

    /// The values for sample `i` copied into `buf`, or `None` when the argument was not
    /// given. `allowed` lists the accepted lengths (empty: any length up to [`MAX_LIST`]);
    /// a per-sample length outside it is an error naming the operator, the argument and
    /// the sample. Constant lists were already checked at build, but pass the same check.
    pub fn get<'b>(&self, op: &str, name: &str, i: usize, allowed: &[usize], buf: &'b mut [f64; MAX_LIST]) -> Result<Option<&'b [f64]>> {
        let len = match *self {
            PerSampleList::Unset => return Ok(None),
            PerSampleList::Constant(v) => {
                let (ints, floats): (&[i64], &[f64]) = match v {
                    ArgValue::FloatList(l) => (&[], l),
                    ArgValue::IntList(l) => (l, &[]),
                    ArgValue::Int(x) => (std::slice::from_ref(x), &[]),
                    ArgValue::Float(x) => (&[], std::slice::from_ref(x)),
                    v => panic!("{op}: '{name}' is {v:?}, not numeric"),
                };
                let l = ints.len() + floats.len();
                if (!allowed.is_empty() && !allowed.contains(&l)) || l > MAX_LIST {
                    let want = if allowed.is_empty() { format!("at most {MAX_LIST}") } else { lengths(allowed) };
                    return Err(Error::arg(op, name, format!("has {l} values; expected {want}")));
                }
                for (d, &s) in buf.iter_mut().zip(ints) {
                    *d = s as f64;
                }
                buf[..floats.len()].copy_from_slice(floats);
                l
            }
            PerSampleList::Input { batch, .. } => {
                if batch.ndim() > 1 {
                    return Err(Error::arg(op, name, format!(
                        "argument input must be a 1-D list per sample; sample {i} has shape {:?}", batch.shape(i)
                    )));
                }
                let l = batch.numel(i);
                if (!allowed.is_empty() && !allowed.contains(&l)) || l > MAX_LIST {
                    let want = if allowed.is_empty() { format!("at most {MAX_LIST}") } else { lengths(allowed) };
                    return Err(Error::arg(op, name, format!("argument input sample {i} has {l} values; expected {want}")));
                }
                for (k, d) in buf[..l].iter_mut().enumerate() {
                    *d = element_as_f64(batch, i, k);
                }
                l
            }
        };
        Ok(Some(&buf[..len]))
    }
}

/// "2", "1 or 3", "1, 2 or 3".
fn lengths(allowed: &[usize]) -> String {
    let s: Vec<String> = allowed.iter().map(|l| l.to_string()).collect();
    match s.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => s.concat(),
    }
}

/// The single element of sample `i`, converted to f64.
pub fn scalar_as_f64(batch: &TensorList, i: usize) -> f64 {
    element_as_f64(batch, i, 0)
}

/// Element `k` of sample `i` (flat index), converted to f64.
pub fn element_as_f64(batch: &TensorList, i: usize, k: usize) -> f64 {
    crate::tensor::element::load_f64(batch.dtype(), batch.bytes(i), k)
}
