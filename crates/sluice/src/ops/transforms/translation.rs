//! `fn.transforms.translation` (and DALI's deprecated `fn.transform_translation` /
//! `ops.TransformTranslation`, a legacy name of the same operator): the identity with
//! `offset` as its last column. The number of dimensions is the length of `offset` (a
//! single value makes a 1-D transform, also with a 2-D input, which is then an error, as in
//! DALI).

use super::{check_ndim, identity, schema, List, Matrices, TransformOp, MAX_NDIM, REVERSE_ORDER};
use crate::error::Result;
use crate::ops::{tensor_arg, ArgDefault as D, ArgType as T, OpContext, OpDef, Workspace};

/// `fn.transforms.translation`.
pub static TRANSLATION: OpDef = OpDef {
    schema: schema(
        "transforms__Translation",
        "Produces a translation affine transform matrix. If another transform matrix is passed as an input, the operator applies translation to the matrix provided. The output of this operator can be fed directly to coord_transform and warp_affine.",
        &[&[
            tensor_arg("offset", T::FloatList, D::Required, "The translation vector. The number of dimensions of the transform is inferred from this argument.").per_frame(),
            REVERSE_ORDER,
        ]],
        &[("TransformTranslation", None)],
    ),
    cpu: Some(|ctx| Ok(Box::new(TransformOp::new(ctx, build)))),
    mixed: None,
    gpu: None,
};

fn build(ctx: &OpContext, ws: &Workspace<'_>, n: usize, input_ndim: Option<usize>) -> Result<Matrices> {
    let offset = List::read(ctx, ws, "offset", n)?;
    let ndim = offset.len();
    check_ndim(&ctx.display_name, "offset", ndim, input_ndim, 1..=MAX_NDIM)?;
    let count = if offset.is_input() { n } else { 1 };
    let mats = (0..count)
        .map(|i| {
            let mut m = identity();
            for d in 0..ndim {
                m[d][ndim] = offset.get(i, d);
            }
            m
        })
        .collect();
    Ok(Matrices { ndim, mats })
}
