//! Crop operators: `fn.crop` and `fn.crop_mirror_normalize`, sharing the window math of
//! [`window`] (DALI 2.4 placement, sizes and out-of-bounds policies).

pub mod crop;
pub mod crop_mirror_normalize;
pub mod window;
pub mod window_copy;

pub use crop::CROP;
pub use crop_mirror_normalize::CROP_MIRROR_NORMALIZE;
