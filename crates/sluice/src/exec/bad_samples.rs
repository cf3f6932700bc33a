//! What a pipeline does with a sample that cannot be read or decoded (`on_error`), and the
//! record of every sample it skipped.
//!
//! `"raise"` (the default, as DALI) fails the iteration: `run()` raises, naming operator,
//! sample and file, and the next `run()` goes on. `"skip"` excludes the sample from the
//! readers it came from and runs the iteration again, the readers giving the next good sample
//! of the same shard in its place (see [`crate::ops::readers::skip`]): the batch keeps its
//! size and the run goes on. `"replace"` keeps the sample's place: the failing operator runs
//! again with another sample of the batch standing in for it, and its outputs there are
//! zeros of that sample's shape (flagged in the record). Set for the pipeline, or for one
//! reader or decoder (the operator's own `on_error`, else that of a reader it reads from,
//! else the pipeline's).

use crate::error::{Error, Result};

/// The policy for a sample an operator fails on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    #[default]
    Raise,
    Skip,
    Replace,
}

impl OnError {
    /// `"raise"`, `"skip"` or `"replace"`; `what` names the setting in the error.
    pub fn parse(value: &str, what: &str) -> Result<OnError> {
        match value {
            "raise" => Ok(OnError::Raise),
            "skip" => Ok(OnError::Skip),
            "replace" => Ok(OnError::Replace),
            other => Err(Error::Unsupported(format!(
                "{what}: on_error must be \"raise\", \"skip\" or \"replace\", got {other:?}"
            ))),
        }
    }

    /// The name users write.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Raise => "raise",
            OnError::Skip => "skip",
            OnError::Replace => "replace",
        }
    }
}

/// The pipeline's `on_error` and `max_bad_samples`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorPolicy {
    pub on_error: OnError,
    /// Past this many skipped samples the next bad sample fails its iteration (None: no
    /// limit).
    pub max_bad_samples: Option<u64>,
}

/// One skipped sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSample {
    /// The iteration the sample was met in, and its place in that batch.
    pub iteration: u64,
    pub sample: usize,
    /// The operator that failed on it: its name, and its index in the graph.
    pub operator: String,
    pub operator_index: usize,
    /// Its file (or record), when the error names one.
    pub source: Option<String>,
    pub error: String,
    /// What was done: skipped (`Skip`) or replaced by zeros (`Replace`).
    pub action: OnError,
}

/// Every sample skipped so far, in iteration order.
#[derive(Debug, Default)]
pub struct BadLog {
    pub samples: Vec<BadSample>,
}

impl BadLog {
    /// Records a skipped sample.
    pub fn record(&mut self, bad: BadSample) {
        // In iteration order, then place, whatever order a batch's failures were met in.
        let at = self
            .samples
            .partition_point(|b| (b.iteration, b.sample) <= (bad.iteration, bad.sample));
        self.samples.insert(at, bad);
    }
}
