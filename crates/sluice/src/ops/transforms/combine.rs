//! `fn.transforms.combine(T1, T2, ..., Tn)`: one transform applying T1, then T2, ... (DALI's
//! `combine_transforms.cc`). Each input is extended with the row `[0 .. 0 1]` and
//!
//! ```text
//! acc = T1; for k in 2..=n: acc = Tk * acc        (reverse_order: acc = acc * Tk)
//! ```
//!
//! i.e. `Tn * (... * (T2 * T1))`, or `((T1 * T2) * ...) * Tn` reversed: the association is
//! DALI's, and so are the f32 roundings ([`super::mul`]). 2 to 99 inputs of float32
//! `(ndim, ndim+1)` matrices, ndim 1 to 6, the same shape everywhere. DALI checks only
//! sample 0's shape of input 0 and reads other samples with it; Sluice requires every sample
//! to have that shape.

use super::{check_input, mul, output, read_mat, write_mat, REVERSE_ORDER};
use crate::error::{Error, Result};
use crate::ops::{Device, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::TensorList;

/// `fn.transforms.combine`.
pub static COMBINE: OpDef = OpDef {
    schema: OpSchema {
        name: "transforms__Combine",
        doc: "Combines two or more affine transforms. By default, the transforms are combined such that applying the resulting transform to a point is equivalent to applying the input transforms in the order as listed. Example: combining [T1, T2, T3] is equivalent to T3(T2(T1(...))) for default order and equivalent to T1(T2(T3(...))) for reversed order.",
        devices: &[Device::Cpu],
        min_inputs: 2,
        max_inputs: 99,
        num_outputs: 1,
        host_inputs: &[],
        args: &[&[REVERSE_ORDER]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(Combine { ctx: ctx.clone() }))),
    mixed: None,
    gpu: None,
};

struct Combine {
    ctx: OpContext,
}

impl Operator for Combine {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let op = &self.ctx.display_name;
        let first = ws.inputs[0];
        let n = first.len();
        if n == 0 {
            return Ok(vec![output(0, 2)]);
        }
        let ndim = check_input(op, "input 0", first)?;
        for (k, t) in ws.inputs.iter().enumerate().skip(1) {
            if t.len() != n {
                return Err(Error::type_mismatch(op, format!("input {k} has {} samples, input 0 has {n}", t.len())));
            }
            let got = check_input(op, &format!("input {k}"), t)?;
            if got != ndim {
                return Err(Error::type_mismatch(op, format!(
                    "All input transforms are expected to have the same shape. Got: {:?} and {:?} for the {k}-th input.",
                    first.shape(0),
                    t.shape(0)
                )));
            }
        }
        if !(1..=super::MAX_NDIM).contains(&ndim) {
            return Err(Error::type_mismatch(op, format!("Unsupported number of dimensions {ndim}; transforms of 1 to {} dimensions can be combined", super::MAX_NDIM)));
        }
        let reverse = self.ctx.args.bool("reverse_order");
        let mut out = output(n, ndim);
        for i in 0..n {
            let mut acc = read_mat(first, i, ndim);
            for t in &ws.inputs[1..] {
                let next = read_mat(t, i, ndim);
                acc = if reverse { mul(&acc, &next, ndim) } else { mul(&next, &acc, ndim) };
            }
            write_mat(&mut out, i, &acc, ndim);
        }
        out.inherit_source_info(first.meta());
        Ok(vec![out])
    }
}
