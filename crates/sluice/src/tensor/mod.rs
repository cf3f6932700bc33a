//! Tensors: element types, layouts and batches.

mod buffer;
pub mod channel;
mod dtype;
pub mod element;
mod gpu;
mod layout;
mod meta;
mod tensor_list;

pub use buffer::{HostBuffer, ALIGN};
pub use dtype::{DType, Element};
pub use gpu::{RawStream, ReadyEvent, TensorListGpu};
pub use layout::Layout;
pub use meta::BatchMeta;
pub use tensor_list::TensorList;

/// A batch on either side of the PCIe bus, as operators exchange them.
#[derive(Debug, Clone)]
pub enum Batch {
    Cpu(TensorList),
    Gpu(TensorListGpu),
}

impl Batch {
    /// The host batch; panics for a GPU batch (the graph's stage checks rule that out).
    pub fn cpu(&self) -> &TensorList {
        match self {
            Batch::Cpu(t) => t,
            Batch::Gpu(_) => panic!("a GPU batch reached a CPU operator; the graph checks should have caught this"),
        }
    }

    /// The GPU batch; panics for a host batch.
    pub fn gpu(&self) -> &TensorListGpu {
        match self {
            Batch::Gpu(t) => t,
            Batch::Cpu(_) => panic!("a host batch reached a GPU operator; the graph checks should have caught this"),
        }
    }

    /// Metadata, wherever the data is.
    pub fn meta(&self) -> &BatchMeta {
        match self {
            Batch::Cpu(t) => t.meta(),
            Batch::Gpu(t) => t.meta(),
        }
    }
}
