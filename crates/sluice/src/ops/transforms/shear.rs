//! `fn.transforms.shear`: `[[1, s0], [s1, 1]]` in 2-D, `[[1, s0, s1], [s2, 1, s3], [s4, s5,
//! 1]]` in 3-D (DALI's `shear`), the factors given by `shear` or as `tanf(deg2rad(angle))`
//! of `angles` (each in [-90, 90], NaN refused, as DALI's check does); `center` then sets the
//! last column to `L * (-center) + center`.
//!
//! The number of dimensions D comes from the factors, as in DALI: a constant list of `size`
//! values has `D = floor(sqrt(size)) + 1` and must hold `D * (D-1)` values; an argument input
//! holds per sample a `(2,)` vector (2-D) or a `(D, D-1)` matrix, read row by row (a flat
//! `(6,)` is refused). Exactly one of `shear` and `angles` is given.

use super::{check_ndim, deg2rad, identity, schema, set_center, List, Mat, Matrices, TransformOp, REVERSE_ORDER};
use crate::error::{Error, Result};
use crate::ops::{tensor_arg, ArgDefault as D, ArgType as T, OpContext, OpDef, Workspace};

/// `fn.transforms.shear`.
pub static SHEAR: OpDef = OpDef {
    schema: schema(
        "transforms__Shear",
        "Produces a shear affine transform matrix. If another transform matrix is passed as an input, the operator applies the shear mapping to the matrix provided. The output of this operator can be fed directly to coord_transform and warp_affine.",
        &[&[
            tensor_arg("shear", T::FloatList, D::Optional, "The shear factors. For 2D, `shear` contains two elements: shear_x, shear_y. For 3D, `shear` contains six elements: shear_xy, shear_xz, shear_yx, shear_yz, shear_zx, shear_zy. A shear factor value can be interpreted as the offset to be applied in the first axis when moving in the direction of the second axis. Mutually exclusive with `angles`; the number of dimensions of the transform is inferred from it.").per_frame(),
            tensor_arg("angles", T::FloatList, D::Optional, "The shear angles, in degrees, laid out as `shear`: shear_factor = tan(deg2rad(shear_angle)). The valid range of values is between -90 and 90 degrees. Mutually exclusive with `shear`; the number of dimensions of the transform is inferred from it.").per_frame(),
            tensor_arg("center", T::FloatList, D::Optional, "The center of the shear operation. If provided, the number of elements should match the dimensionality of the transform.").per_frame(),
            REVERSE_ORDER,
        ]],
        &[],
    ),
    cpu: Some(|ctx| Ok(Box::new(new(ctx)?))),
    mixed: None,
    gpu: None,
};

/// The operator, after DALI's construction-time check that exactly one of `shear` and
/// `angles` is given.
fn new(ctx: &OpContext) -> Result<TransformOp> {
    if ctx.given("shear") == ctx.given("angles") {
        return Err(Error::arg(&ctx.display_name, "shear", "One and only one of the following arguments is expected: ``shear`` or ``angles``"));
    }
    Ok(TransformOp::new(ctx, build))
}

fn build(ctx: &OpContext, ws: &Workspace<'_>, n: usize, input_ndim: Option<usize>) -> Result<Matrices> {
    let op = &ctx.display_name;
    let use_angles = ws.arg_inputs.contains_key("angles") || ctx.args.has("angles");
    let name = if use_angles { "angles" } else { "shear" };
    let factors = List::read_any(ctx, ws, name, n)?;
    let ndim = match &factors {
        List::Constant(v) => {
            let size = v.len();
            let d = (size as f64).sqrt() as usize + 1;
            if size != d * (d - 1) {
                return Err(Error::arg(op, name, format!("Shear matrix must have D*(D-1) elements where D is the number of dimensions. Got {size} elements.")));
            }
            d
        }
        List::Input { shape, .. } => match shape[..] {
            [2] => 2,
            [d, e] if e + 1 == d => d,
            _ => return Err(Error::arg(op, name, format!("Shear coefficient must be a D x (D-1) matrix or a 2-element vector per sample; got samples of shape {shape:?}"))),
        },
        List::Unset => return Err(Error::arg(op, "shear", "One and only one of the following arguments is expected: ``shear`` or ``angles``")),
    };
    if use_angles {
        let count = if factors.is_input() { n } else { 1 };
        for i in 0..count {
            for j in 0..factors.len() {
                let a = factors.get(i, j);
                if !(-90.0f32..=90.0).contains(&a) {
                    let at = if factors.is_input() { format!(" (sample {i})") } else { String::new() };
                    return Err(Error::arg(op, "angles", format!("Angle is expected to be in the range [-90, 90]. Got: {a}{at}")));
                }
            }
        }
    }
    let center = List::read(ctx, ws, "center", n)?;
    center.expect_len(op, "center", ndim)?;
    check_ndim(op, name, ndim, input_ndim, 2..=3)?;
    let count = if factors.is_input() || center.is_input() { n } else { 1 };
    let mats = (0..count)
        .map(|i| {
            let mut s = [0.0f32; 6];
            for (j, x) in s.iter_mut().enumerate().take(ndim * (ndim - 1)) {
                let v = factors.get(i, j);
                *x = if use_angles { deg2rad(v).tan() } else { v };
            }
            let mut m = shear_matrix(ndim, &s);
            if center.is_set() {
                set_center(&mut m, ndim, &center.vec(i, ndim));
            }
            m
        })
        .collect();
    Ok(Matrices { ndim, mats })
}

/// DALI's `shear(vec2)` / `shear(mat3x2)`.
fn shear_matrix(ndim: usize, s: &[f32; 6]) -> Mat {
    let mut m = identity();
    if ndim == 2 {
        m[0][1] = s[0];
        m[1][0] = s[1];
    } else {
        m[0][1] = s[0];
        m[0][2] = s[1];
        m[1][0] = s[2];
        m[1][2] = s[3];
        m[2][0] = s[4];
        m[2][1] = s[5];
    }
    m
}
