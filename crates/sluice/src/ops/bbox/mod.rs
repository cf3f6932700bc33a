//! Bounding-box operators of DALI's detection (SSD) pipelines: `fn.bb_flip` ([`flip`]), `fn.bbox_paste`
//! ([`paste`]).
//!
//! Boxes are float32, 4 (2-D) or 6 (3-D) coordinates each, relative to the image (0 to 1).
//! Each operator's module says which DALI behaviour it reproduces and how that was checked.

pub mod flip;
mod flip_gpu;
pub mod paste;

pub use flip::BB_FLIP;
pub use paste::BBOX_PASTE;

use crate::error::{Error, Result};
use crate::ops::OpContext;
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
