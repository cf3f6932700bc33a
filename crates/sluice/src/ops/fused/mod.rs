//! Operators the graph builds by fusing operators of the user's pipeline (see
//! `Graph::fuse_resize_into_crop_mirror_normalize`). A fused operator is built from the
//! contexts of the operators it stands for, so its arguments, checks and error messages are
//! theirs.

mod resize_crop_mirror_normalize;

use crate::error::{Error, Result};
use crate::ops::{OpContext, Operator};

/// Builds the cpu operator that runs `parts` (contexts in data order) as one pass.
pub fn build_cpu(schemas: &[&str], parts: &[OpContext]) -> Result<Box<dyn Operator>> {
    match (schemas, parts) {
        (["Resize", "CropMirrorNormalize"], [resize, cmn]) => Ok(Box::new(resize_crop_mirror_normalize::ResizeCmn::new(resize, cmn)?)),
        _ => Err(Error::Unsupported(format!("no fused operator for {schemas:?} (please report this)"))),
    }
}
