//! `fn.transforms.rotation`: a 2-D rotation, or a 3-D one about `axis` when `axis` is given
//! (DALI's `rotation2D` / `rotation3D`, `include/dali/core/geom/transform.h`):
//!
//! ```text
//! a = deg2rad(angle); c = cosf(a); s = sinf(a)
//! 2-D: [[c, -s], [s, c]]
//! 3-D: identity if a == 0; else axis = sign(axis) when one component is non-zero, else
//!      axis / sqrtf((x*x + y*y) + z*z); with u, v, w its components
//!      [[uu + (vv+ww)*c, uv*(1-c) - w*s, uw*(1-c) + v*s], ...]
//! ```
//!
//! in f32, in DALI's order; `center` then sets the last column to `L * (-center) + center`.
//! A zero axis gives NaNs, as in DALI. The 2-D matrix is the counter-clockwise one in (x, y)
//! (no sign flip, unlike `fn.rotate`).

use super::{check_ndim, deg2rad, identity, schema, set_center, List, Mat, Matrices, TransformOp, REVERSE_ORDER};
use crate::error::Result;
use crate::ops::{tensor_arg, ArgDefault as D, ArgType as T, OpContext, OpDef, Workspace};

/// `fn.transforms.rotation`.
pub static ROTATION: OpDef = OpDef {
    schema: schema(
        "transforms__Rotation",
        "Produces a rotation affine transform matrix. If another transform matrix is passed as an input, the operator applies rotation to the matrix provided. The number of dimensions is assumed to be 3 if a rotation axis is provided or 2 otherwise. The output of this operator can be fed directly to coord_transform and warp_affine.",
        &[&[
            tensor_arg("angle", T::Float, D::Required, "Angle, in degrees.").per_frame(),
            tensor_arg("axis", T::FloatList, D::Optional, "Axis of rotation (applies only to 3D transforms). The vector does not need to be normalized, but it must have a non-zero length. Reversing the vector is equivalent to changing the sign of `angle`.").per_frame(),
            tensor_arg("center", T::FloatList, D::Optional, "The center of the rotation. If provided, the number of elements should match the dimensionality of the transform.").per_frame(),
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
    let angle = List::read_scalar(ctx, ws, "angle", n)?;
    let axis = List::read(ctx, ws, "axis", n)?;
    let center = List::read(ctx, ws, "center", n)?;
    let ndim = if axis.is_set() { 3 } else { 2 };
    axis.expect_len(op, "axis", 3)?;
    center.expect_len(op, "center", ndim)?;
    check_ndim(op, if axis.is_set() { "axis" } else { "angle" }, ndim, input_ndim, 2..=3)?;
    let count = if angle.is_input() || axis.is_input() || center.is_input() { n } else { 1 };
    let mats = (0..count)
        .map(|i| {
            let a = deg2rad(angle.get(i, 0));
            let mut m = if ndim == 2 { rotation_2d(a) } else { rotation_3d(axis.vec(i, 3), a) };
            if center.is_set() {
                set_center(&mut m, ndim, &center.vec(i, ndim));
            }
            m
        })
        .collect();
    Ok(Matrices { ndim, mats })
}

/// DALI's `rotation2D(angle)` (radians).
fn rotation_2d(a: f32) -> Mat {
    let (c, s) = (a.cos(), a.sin());
    let mut m = identity();
    m[0][0] = c;
    m[0][1] = -s;
    m[1][0] = s;
    m[1][1] = c;
    m
}

/// DALI's `rotation3D(axis, angle)` (radians), operation for operation.
fn rotation_3d(axis: [f32; super::MAX_NDIM], a: f32) -> Mat {
    let mut m = identity();
    if a == 0.0 {
        return m; // DALI's `if (!angle)`: the axis is not even looked at
    }
    let (c, s) = (a.cos(), a.sin());
    let mut axis = [axis[0], axis[1], axis[2]];
    if axis.iter().filter(|&&x| x != 0.0).count() == 1 {
        // One non-zero component (NaN counts): its sign, as DALI's `x < 0 ? -1 : x > 0 ? 1 : 0`.
        for x in &mut axis {
            *x = if *x < 0.0 { -1.0 } else if *x > 0.0 { 1.0 } else { 0.0 };
        }
    } else {
        let len = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
        for x in &mut axis {
            *x /= len;
        }
    }
    let [u, v, w] = axis;
    let (uu, vv, ww, uv, uw, vw) = (u * u, v * v, w * w, u * v, u * w, v * w);
    m[0][0] = uu + (vv + ww) * c;
    m[0][1] = uv * (1.0 - c) - w * s;
    m[0][2] = uw * (1.0 - c) + v * s;
    m[1][0] = uv * (1.0 - c) + w * s;
    m[1][1] = vv + (uu + ww) * c;
    m[1][2] = vw * (1.0 - c) - u * s;
    m[2][0] = uw * (1.0 - c) - v * s;
    m[2][1] = vw * (1.0 - c) + u * s;
    m[2][2] = ww + (uu + vv) * c;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_angle_is_the_identity_whatever_the_axis() {
        assert_eq!(rotation_3d([0.0; 6], 0.0), identity());
    }

    #[test]
    fn a_zero_axis_gives_nans() {
        let m = rotation_3d([0.0; 6], deg2rad(30.0));
        assert!(m[0][0].is_nan() && m[2][2].is_nan());
    }

    #[test]
    fn a_single_axis_component_is_reduced_to_its_sign() {
        let mut axis = [0.0; 6];
        axis[1] = -2.5;
        let mut unit = [0.0; 6];
        unit[1] = -1.0;
        assert_eq!(rotation_3d(axis, 0.3), rotation_3d(unit, 0.3));
    }
}
