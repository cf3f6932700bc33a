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
    /// An argument is missing, out of range or inconsistent with others.
    #[error("{operator}: argument '{argument}': {message}")]
    InvalidArgument { operator: String, argument: String, message: String },
    /// An argument name the operator does not have.
    #[error("{operator}: unknown argument '{argument}'{hint}")]
    UnknownArgument { operator: String, argument: String, hint: String },
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
    /// A pipeline input (external source) named `name` does not exist or was not fed.
    #[error("{message}")]
    Input { name: String, message: String },
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

/// The kinds of [`Error`] as Python sees them: each is one exception class of
/// `sluice.errors`, created from this table when the module loads, so the taxonomy is
/// written once. Every class derives from `SluiceError`, a `RuntimeError` (what DALI raises
/// for nearly everything), and also from the built-in class idiomatic Python code catches,
/// so `except RuntimeError` (DALI code) and `except ValueError` both work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    UnknownArgument,
    TypeMismatch,
    Graph,
    Data,
    Io,
    Input,
    EndOfData,
    Cuda,
    Unsupported,
}

impl ErrorKind {
    /// Every kind, in the order the Python classes are created.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidArgument,
        ErrorKind::UnknownArgument,
        ErrorKind::TypeMismatch,
        ErrorKind::Graph,
        ErrorKind::Data,
        ErrorKind::Io,
        ErrorKind::Input,
        ErrorKind::EndOfData,
        ErrorKind::Cuda,
        ErrorKind::Unsupported,
    ];

    /// The Python class name in `sluice.errors`; `None` for [`ErrorKind::EndOfData`], which
    /// Python sees as `StopIteration` (the iterator protocol's own signal; it cannot share a
    /// base with `RuntimeError`, their instance layouts differ).
    pub fn class_name(self) -> Option<&'static str> {
        Some(match self {
            ErrorKind::InvalidArgument => "ArgumentError",
            ErrorKind::UnknownArgument => "UnknownArgumentError",
            ErrorKind::TypeMismatch => "ArgumentTypeError",
            ErrorKind::Graph => "GraphError",
            ErrorKind::Data => "DataError",
            ErrorKind::Io => "StorageError",
            ErrorKind::Input => "InputError",
            ErrorKind::Cuda => "CudaError",
            ErrorKind::Unsupported => "UnsupportedError",
            ErrorKind::EndOfData => return None,
        })
    }

    /// Built-in Python exception classes the class derives from besides `SluiceError`
    /// (DALI raises `KeyError` for an unknown argument and `ValueError` for a value of the
    /// wrong type; Python code expects `TypeError` for both).
    pub fn python_bases(self) -> &'static [&'static str] {
        match self {
            ErrorKind::InvalidArgument | ErrorKind::Graph => &["ValueError"],
            ErrorKind::UnknownArgument => &["KeyError", "TypeError"],
            ErrorKind::TypeMismatch => &["TypeError", "ValueError"],
            ErrorKind::Unsupported => &["NotImplementedError"],
            // DALI raises KeyError for an unknown input name, IndexError for an input not fed.
            ErrorKind::Input => &["KeyError", "IndexError"],
            ErrorKind::EndOfData | ErrorKind::Data | ErrorKind::Io | ErrorKind::Cuda => &[],
        }
    }

    /// One line for the class's docstring.
    pub fn doc(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "An argument is missing, out of range or inconsistent with the others.",
            ErrorKind::UnknownArgument => "An argument name the operator does not have.",
            ErrorKind::TypeMismatch => "An argument or input of the wrong type.",
            ErrorKind::Graph => "The pipeline graph cannot be built: unknown operator, wrong device or stage order, bad wiring, bad pipeline parameters.",
            ErrorKind::Data => "A sample cannot be read or decoded; the message names the operator, sample, iteration and file.",
            ErrorKind::Io => "A file, folder or object cannot be read.",
            ErrorKind::Input => "A pipeline input (external source) does not exist, or was not fed data for the iteration asked for.",
            ErrorKind::EndOfData => "The data source is exhausted.",
            ErrorKind::Cuda => "A CUDA, NVRTC or nvJPEG call failed, or no GPU is usable.",
            ErrorKind::Unsupported => "Something this build or machine does not support.",
        }
    }
}

impl Error {
    /// The kind, which decides the Python class.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            Error::UnknownArgument { .. } => ErrorKind::UnknownArgument,
            Error::TypeMismatch { .. } => ErrorKind::TypeMismatch,
            Error::Graph(_) => ErrorKind::Graph,
            Error::Data { .. } => ErrorKind::Data,
            Error::Io { .. } => ErrorKind::Io,
            Error::Input { .. } => ErrorKind::Input,
            Error::EndOfData => ErrorKind::EndOfData,
            Error::Cuda(_) => ErrorKind::Cuda,
            Error::Unsupported(_) => ErrorKind::Unsupported,
        }
    }

    /// Shorthand for a type error naming the operator.
    pub fn type_mismatch(operator: &str, message: impl Into<String>) -> Self {
        Error::TypeMismatch { operator: operator.to_string(), message: message.into() }
    }

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

    /// Where a data error happened (operator, sample, iteration, file); `None` for other
    /// errors.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Data { location, .. } => Some(location),
            _ => None,
        }
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
