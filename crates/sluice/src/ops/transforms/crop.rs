//! `fn.transforms.crop`: the map of the box [`from_start`, `from_end`] onto [`to_start`,
//! `to_end`], per dimension (DALI's `transform_crop.cc`, in f32):
//!
//! ```text
//! (absolute: swap start and end where start > end, for `from` and `to` separately)
//! s = (to_end - to_start) / (from_end - from_start)     // no check: a 0 extent gives inf/NaN
//! M[d][d] = s; M[d][ndim] = to_start - s * from_start
//! ```
//!
//! The number of dimensions is the longest of the four arguments; each has that many values
//! or one (used for every dimension). It is not taken from the input: with the one-value
//! defaults the transform is 1-D.

use super::{check_ndim, identity, schema, List, Matrices, TransformOp, MAX_NDIM, REVERSE_ORDER};
use crate::error::{Error, Result};
use crate::ops::{arg, tensor_arg, ArgDefault as D, ArgType as T, OpContext, OpDef, Workspace};

/// `fn.transforms.crop`.
pub static CROP: OpDef = OpDef {
    schema: schema(
        "transforms__Crop",
        "Produces an affine transform matrix that maps a reference coordinate space to another one. This transform can be used to adjust coordinates after a crop operation so that a `from_start` point will be mapped to `to_start` and `from_end` will be mapped to `to_end`. If another transform matrix is passed as an input, the operator applies the transformation to the matrix provided. The output of this operator can be fed directly to coord_transform and warp_affine.",
        &[&[
            tensor_arg("from_start", T::FloatList, D::FloatList(&[0.0]), "The lower bound of the original coordinate space. A single value is repeated to match the number of dimensions.").per_frame(),
            tensor_arg("from_end", T::FloatList, D::FloatList(&[1.0]), "The upper bound of the original coordinate space. A single value is repeated to match the number of dimensions.").per_frame(),
            tensor_arg("to_start", T::FloatList, D::FloatList(&[0.0]), "The lower bound of the destination coordinate space. A single value is repeated to match the number of dimensions.").per_frame(),
            tensor_arg("to_end", T::FloatList, D::FloatList(&[1.0]), "The upper bound of the destination coordinate space. A single value is repeated to match the number of dimensions.").per_frame(),
            arg("absolute", T::Bool, D::Bool(false), "If set to true, start and end coordinates will be swapped if start > end."),
            REVERSE_ORDER,
        ]],
        &[],
    ),
    cpu: Some(|ctx| Ok(Box::new(TransformOp::new(ctx, build)))),
    mixed: None,
    gpu: None,
};

const NAMES: [&str; 4] = ["from_start", "from_end", "to_start", "to_end"];

fn build(ctx: &OpContext, ws: &Workspace<'_>, n: usize, input_ndim: Option<usize>) -> Result<Matrices> {
    let op = &ctx.display_name;
    let [fs, fe, ts, te] = [
        List::read(ctx, ws, NAMES[0], n)?,
        List::read(ctx, ws, NAMES[1], n)?,
        List::read(ctx, ws, NAMES[2], n)?,
        List::read(ctx, ws, NAMES[3], n)?,
    ];
    let sizes = [fs.len(), fe.len(), ts.len(), te.len()];
    let ndim = sizes.iter().copied().max().unwrap_or(0);
    if let Some(k) = sizes.iter().position(|&s| s != ndim && s != 1) {
        return Err(Error::arg(op, NAMES[k], format!(
            "Arguments ``from_start``, ``from_end``, ``to_start`` and ``to_end`` should have the same number of dimensions or be a single element which will be broadcast to all dimensions; got {} values for {}",
            sizes[k], NAMES[k]
        )));
    }
    let widest = NAMES[sizes.iter().position(|&s| s == ndim).unwrap_or(0)];
    check_ndim(op, widest, ndim, input_ndim, 1..=MAX_NDIM)?;
    let absolute = ctx.args.bool("absolute");
    let count = if [&fs, &fe, &ts, &te].iter().any(|l| l.is_input()) { n } else { 1 };
    let mats = (0..count)
        .map(|i| {
            let mut m = identity();
            for d in 0..ndim {
                let (mut from_start, mut from_end, mut to_start, mut to_end) = (fs.get(i, d), fe.get(i, d), ts.get(i, d), te.get(i, d));
                if absolute {
                    if from_start > from_end {
                        std::mem::swap(&mut from_start, &mut from_end);
                    }
                    if to_start > to_end {
                        std::mem::swap(&mut to_start, &mut to_end);
                    }
                }
                let s = (to_end - to_start) / (from_end - from_start);
                m[d][d] = s;
                m[d][ndim] = to_start - s * from_start;
            }
            m
        })
        .collect();
    Ok(Matrices { ndim, mats })
}
