//! One error type for the whole engine. Every variant says what went wrong and where
//! (operator, argument, sample, file) so the Python layer can raise it unchanged.

use std::fmt;

/// Where in a pipeline an error happened. Operators attach this to data errors so the
/// user learns which operator, which sample and which file were involved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// Operator name as the user wrote it, e.g. `decoders.image`.
    pub operator: String,
    /// Sample index inside the batch.
    pub sample: Option<usize>,
    /// Pipeline iteration (batch number since build).
    pub iteration: Option<u64>,
    /// Source of the sample: a file path or a record name.
    pub source: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operator {}", self.operator)?;
        if let Some(s) = self.sample {
            write!(f, ", sample {s}")?;
        }
        if let Some(i) = self.iteration {
            write!(f, " of iteration {i}")?;
        }
        if let Some(src) = &self.source {
            write!(f, ", file '{src}'")?;
        }
        Ok(())
    }
}

/// Every failure the engine reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument has the wrong type, is unknown, missing or out of range.
    #[error("{operator}: argument '{argument}': {message}")]
    InvalidArgument { operator: String, argument: String, message: String },
    /// An argument or input has the wrong Python/engine type.
    #[error("{operator}: {message}")]
    TypeMismatch { operator: String, message: String },
    /// The graph cannot be built (stage order, unknown operator, bad wiring).
    #[error("{0}")]
    Graph(String),
    /// Input data is bad: a corrupt image, a truncated file, an empty sample.
    #[error("Error in {location}: {message}")]
    Data { location: Location, message: String },
    /// A file or folder could not be read.
    #[error("{operator}: {path}: {message}")]
    Io { operator: String, path: String, message: String },
    /// The pipeline has no more data (an external source ended).
    #[error("end of data")]
    EndOfData,
    /// A CUDA, NVRTC or nvJPEG call failed, or no GPU is usable.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// The engine was asked for something it does not support on this machine.
    #[error("{0}")]
    Unsupported(String),
}

impl Error {
    /// Shorthand for an invalid-argument error.
    pub fn arg(operator: &str, argument: &str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            operator: operator.to_string(),
            argument: argument.to_string(),
            message: message.into(),
        }
    }

    /// Shorthand for a data error at a known location.
    pub fn data(location: Location, message: impl Into<String>) -> Self {
        Error::Data { location, message: message.into() }
    }

    /// Shorthand for an I/O error on a path.
    pub fn io(operator: &str, path: impl fmt::Display, err: impl fmt::Display) -> Self {
        Error::Io { operator: operator.to_string(), path: path.to_string(), message: err.to_string() }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sluice_cuda::CudaError> for Error {
    fn from(e: sluice_cuda::CudaError) -> Self {
        Error::Cuda(e.0)
    }
}
