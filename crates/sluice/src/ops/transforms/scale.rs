//! `fn.transforms.scale`: `diag(scale)`, with `center` the last column `center[d] * (1 -
//! scale[d])` (f32: the difference rounded, then the product; DALI's formula, not the
//! rotation's `L * (-center) + center`).
//!
//! The number of dimensions is DALI's: the length of `scale` when it has more than one
//! value; else the input transform's (the input wins over `ndim`); else `ndim` when given
//! and positive; else 1. An empty `scale` is an error (DALI crashes on it). A per-sample
//! `center` given as one scalar is used for every dimension (DALI reads past it).

use super::{check_ndim, identity, schema, List, Matrices, TransformOp, MAX_NDIM, REVERSE_ORDER};
use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, OpContext, OpDef, Workspace};

/// `fn.transforms.scale`.
pub static SCALE: OpDef = OpDef {
    schema: schema(
        "transforms__Scale",
        "Produces a scale affine transform matrix. If another transform matrix is passed as an input, the operator applies scaling to the matrix provided. The output of this operator can be fed directly to coord_transform and warp_affine.",
        &[&[
            tensor_arg("scale", T::FloatList, D::Required, "The scale factor, per dimension. The number of dimensions of the transform is inferred from this argument.").per_frame(),
            tensor_arg("center", T::FloatList, D::Optional, "The center of the scale operation. If provided, the number of elements should match the one of `scale` argument.").per_frame(),
            arg("ndim", T::Int, D::Optional, "Number of dimensions. It should be provided when the number of dimensions can't be inferred. For example, when `scale` is a scalar value and there's no input transform."),
            REVERSE_ORDER,
        ]],
        &[],
    ),
    cpu: Some(|ctx| Ok(Box::new(TransformOp::new(ctx, build)))),
    mixed: None,
    gpu: None,
};

fn build(ctx: &OpContext, ws: &Workspace<'_>, n: usize, input_ndim: Option<usize>) -> Result<Matrices> {
    let op = &ctx.display_name;
    let scale = List::read(ctx, ws, "scale", n)?;
    let center = List::read(ctx, ws, "center", n)?;
    let ndim_arg = ctx.args.opt_int("ndim").filter(|&d| d > 0);
    let (ndim, decided_by) = match (scale.len(), input_ndim, ndim_arg) {
        (0, _, _) => return Err(Error::arg(op, "scale", "must not be empty")),
        (len, _, _) if len > 1 => (len, "scale"),
        (_, Some(k), _) => (k, "scale"),
        (_, None, Some(d)) => (usize::try_from(d).unwrap_or(usize::MAX), "ndim"),
        _ => (1, "scale"),
    };
    check_ndim(op, decided_by, ndim, input_ndim, 1..=MAX_NDIM)?;
    center.expect_len(op, "center", ndim)?;
    let count = if scale.is_input() || center.is_input() { n } else { 1 };
    let mats = (0..count)
        .map(|i| {
            let mut m = identity();
            for d in 0..ndim {
                let s = scale.get(i, d);
                m[d][d] = s;
                if center.is_set() {
                    m[d][ndim] = center.get(i, d) * (1.0 - s);
                }
            }
            m
        })
        .collect();
    Ok(Matrices { ndim, mats })
}
