//! Segmentation operators (`fn.segmentation.*`): selecting masks' polygons, drawing pixels
//! of a mask and objects' boxes. One file per operator.

mod random_mask_pixel;
mod random_object_bbox;
mod select_masks;

pub use random_mask_pixel::RANDOM_MASK_PIXEL;
pub use random_object_bbox::RANDOM_OBJECT_BBOX;
pub use select_masks::SELECT_MASKS;

/// How many outputs an operator of this family has when its arguments decide (`None`: the
/// schema's count).
pub fn num_outputs(schema: &str, args: &crate::ops::Args) -> Option<usize> {
    (schema == RANDOM_OBJECT_BBOX.schema.name).then(|| random_object_bbox::num_outputs(args))
}
