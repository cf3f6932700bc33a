//! Tensors: element types, layouts and batches.

mod buffer;
mod dtype;
mod layout;
mod meta;
mod tensor_list;

pub use buffer::{HostBuffer, ALIGN};
pub use dtype::{DType, Element};
pub use layout::Layout;
pub use meta::BatchMeta;
pub use tensor_list::TensorList;
