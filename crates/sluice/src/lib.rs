//! Sluice engine: tensors, operators, the pipeline graph and its executor.
//!
//! Python (crate `sluice-python`) describes a [`graph::PipelineSpec`]; [`exec::Executor`]
//! checks it, builds every operator from the [`ops::registry`] and produces batches of
//! [`tensor::TensorList`] off the caller's thread.

pub mod error;
pub mod exec;
pub mod graph;
pub mod ops;
pub mod rng;
pub mod sample;
pub mod storage;
pub mod tensor;

pub use error::{Error, Result};

/// Number of CUDA devices the engine can use (0 without a driver or GPU). Never panics.
pub fn gpu_device_count() -> usize {
    sluice_cuda::device_count()
}
