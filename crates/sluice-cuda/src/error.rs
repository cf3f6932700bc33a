//! CUDA failures as one error type with a message that says what was being done.

/// A CUDA, NVRTC or nvJPEG failure, or a missing library.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct CudaError(pub String);

impl CudaError {
    /// Wraps any error with what was being attempted.
    pub fn during(what: &str, err: impl std::fmt::Display) -> CudaError {
        CudaError(format!("{what}: {err}"))
    }
}

impl From<cudarc::driver::DriverError> for CudaError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        CudaError(format!("CUDA driver error: {e}"))
    }
}

/// Result with [`CudaError`].
pub type CudaResult<T> = Result<T, CudaError>;

/// Turns a raw driver status into a result.
pub(crate) fn check(what: &str, status: cudarc::driver::sys::CUresult) -> CudaResult<()> {
    if status == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(CudaError(format!("{what} failed: {status:?}")))
    }
}
