//! Operators the graph builds by fusing operators of the user's pipeline (see
//! `Graph::fuse_resize_into_crop_mirror_normalize`). A fused operator is built from the
//! contexts of the operators it stands for, so its arguments, checks and error messages are
//! theirs.

mod resize_crop_mirror_normalize;

use crate::error::{Error, Result};
use crate::ops::{color, crop, resize, GpuOperator, OpContext, OpDef, Operator};

/// Builds the cpu operator that runs `parts` (operators with their contexts, in data
/// order) as one pass.
pub fn build_cpu(parts: &[(&'static OpDef, OpContext)]) -> Result<Box<dyn Operator>> {
    match parts {
        [(r, resize), (c, cmn)] if r.is(&resize::RESIZE) && c.is(&crop::CROP_MIRROR_NORMALIZE) => {
            Ok(Box::new(resize_crop_mirror_normalize::ResizeCmn::new(resize, cmn)?))
        }
        _ => Err(unsupported(parts)),
    }
}

/// Builds the GPU operator that runs `parts` as one pass (`Graph::fuse_color_chains`).
pub fn build_gpu(parts: &[(&'static OpDef, OpContext)]) -> Result<Box<dyn GpuOperator>> {
    match parts {
        [(a, first), (b, second)] => match (color::affine_kind(a), color::affine_kind(b)) {
            (Some(ka), Some(kb)) => color::chain_gpu((ka, first), (kb, second)),
            _ => Err(unsupported(parts)),
        },
        _ => Err(unsupported(parts)),
    }
}

fn unsupported(parts: &[(&'static OpDef, OpContext)]) -> Error {
    let names: Vec<&str> = parts.iter().map(|(d, _)| d.schema.name).collect();
    Error::Unsupported(format!("no fused operator for {names:?} (please report this)"))
}
