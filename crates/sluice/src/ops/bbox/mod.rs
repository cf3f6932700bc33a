//! Bounding-box operators of DALI's detection (SSD) pipelines: `fn.bb_flip` ([`flip`]), `fn.bbox_paste`
//! ([`paste`]), `fn.random_bbox_crop` ([`random_crop`]), `fn.box_encoder` (`box_encoder`),
//! `fn.ssd_random_crop` ([`ssd_random_crop`]), `fn.bbox_rotate` ([`rotate`]).
//!
//! Boxes are float32, 4 (2-D) or 6 (3-D) coordinates each, relative to the image (0 to 1).
//! Each operator's module says which DALI behaviour it reproduces and how that was checked.

mod box_encoder;
mod box_encoder_gpu;
pub mod flip;
mod flip_gpu;
pub mod paste;
pub mod random_crop;
pub mod rotate;
pub mod ssd_random_crop;

pub use box_encoder::BOX_ENCODER;
pub use flip::BB_FLIP;
pub use paste::BBOX_PASTE;
pub use random_crop::RANDOM_BBOX_CROP;
pub use rotate::BBOX_ROTATE;
pub use ssd_random_crop::SSD_RANDOM_CROP;

use crate::error::{Error, Result};
use crate::ops::{Args, OpContext};
use crate::tensor::BatchMeta;

/// Checks that every sample of `boxes` holds whole boxes of `size` coordinates: `(N, size)`
/// (or more dimensions, the last one `size`), or a flat list of a multiple of `size`
/// values. An error names the operator, the input and the sample.
pub(crate) fn check_box_shapes(ctx: &OpContext, iteration: u64, input: &str, boxes: &BatchMeta, size: usize) -> Result<()> {
    for i in 0..boxes.len() {
        let shape = boxes.shape(i);
        let ok = match shape {
            [] => false,
            [n] => n % size == 0,
            [.., last] => *last == size,
        };
        if !ok {
            return Err(Error::data(ctx.at(iteration, i, ""), format!(
                "input '{input}': expected boxes of {size} coordinates (a shape (N, {size}) or a flat list of a multiple of {size} values); got shape {shape:?}"
            )));
        }
    }
    Ok(())
}

/// Outputs of the operators here whose count depends on their inputs or arguments (see
/// `graph::CheckedOp::num_outputs`); `None` for the others.
pub fn num_outputs(schema: &str, args: &Args, num_inputs: usize) -> Option<usize> {
    if schema == RANDOM_BBOX_CROP.schema.name {
        Some(random_crop::num_outputs(args, num_inputs))
    } else if schema == BBOX_ROTATE.schema.name {
        Some(rotate::num_outputs(num_inputs))
    } else {
        None
    }
}
