//! Segmentation operators (`fn.segmentation.*`): selecting masks' polygons, drawing pixels
//! of a mask and objects' boxes. One file per operator.

mod random_mask_pixel;
mod select_masks;

pub use random_mask_pixel::RANDOM_MASK_PIXEL;
pub use select_masks::SELECT_MASKS;
