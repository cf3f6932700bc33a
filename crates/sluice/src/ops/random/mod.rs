//! Random number generators (`random.uniform`, `random.coin_flip`, ...) and `roi_random_crop`
//! (a random window start). Every value comes from the counter-based stream of (seed,
//! operator, iteration, sample), so results do not depend on the thread count.

mod beta;
mod choice;
mod coin_flip;
mod crop_generator;
mod normal;
mod roi_random_crop;
mod uniform;

pub use beta::BETA;
pub use choice::CHOICE;
pub use coin_flip::COIN_FLIP;
pub use crop_generator::RANDOM_CROP_GENERATOR;
pub use normal::NORMAL;
pub use roi_random_crop::ROI_RANDOM_CROP;
pub use uniform::UNIFORM;

use crate::error::{Error, Result};
use crate::ops::{Args, OpContext};
use crate::tensor::{DType, TensorList};

/// The output shape of one sample: the `shape` argument, or a scalar.
pub(crate) fn sample_shape(ctx: &OpContext) -> Result<Vec<usize>> {
    if !ctx.args.has("shape") {
        return Ok(Vec::new());
    }
    ctx.args
        .ints("shape")
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::arg(&ctx.display_name, "shape", format!("extents must be >= 0, got {d}"))))
        .collect()
}

/// A batch of `batch_size` samples of `shape`.
pub(crate) fn alloc(dtype: DType, shape: &[usize], batch_size: usize) -> TensorList {
    TensorList::uniform(dtype, shape, batch_size)
}

/// The `dtype` argument, or `default` when not given.
pub(crate) fn dtype_or(args: &Args, default: DType) -> DType {
    if args.has("dtype") { args.dtype("dtype") } else { default }
}
