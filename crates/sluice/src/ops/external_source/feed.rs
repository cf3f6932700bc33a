//! The queue between the data fed from outside (Python's `feed_input` and `external_source`
//! callbacks) and the iterations that consume it.
//!
//! Each iteration consumes exactly one batch of every feed. The executor *stages* the
//! iteration's batches before running any operator (so every operator knows the
//! iteration's batch size, and feeds that disagree are caught at once); the operator then
//! takes the batch staged for its iteration. Asynchronous pipelines stage ahead, waiting
//! for data; a `run()` that asks for an iteration no batch was fed for fails at once
//! instead of waiting (unless the source is `blocking`).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::tensor::Batch;

/// One external source's queue (see the module docs).
pub struct Feed {
    /// The instance name `feed_input` addresses.
    name: String,
    /// The operator as users know it, for errors.
    display_name: String,
    max_batch_size: usize,
    /// Wait for data instead of failing when an iteration has none.
    pub blocking: bool,
    /// Re-use the last batch fed when nothing new was fed.
    repeat_last: bool,
    /// The batches may have any size, none included, not checked against the other sources'
    /// (`_any_batch_size`: debug mode feeds an operator's inputs through sources; merge's
    /// inputs are halves of its predicate's batch, and a branch may have no samples).
    pub any_batch_size: bool,
    state: Mutex<State>,
    fed: Condvar,
}

#[derive(Default)]
struct State {
    queued: VecDeque<Batch>,
    /// Batches fed since the pipeline was built.
    fed: u64,
    /// Taken out of the queue for an iteration, not yet consumed by the operator.
    staged: VecDeque<(u64, Batch)>,
    /// The last batch staged (with `repeat_last`).
    last: Option<Batch>,
    /// Iterations the pipeline's caller has asked for so far. A repeated batch is staged
    /// only for an iteration asked for: until then new data may still come (as DALI, where
    /// an iteration runs only once scheduled).
    requested: u64,
    /// The pipeline is going away: waits end.
    closed: bool,
}

impl Feed {
    pub fn new(name: &str, display_name: &str, max_batch_size: usize, blocking: bool, repeat_last: bool, any_batch_size: bool) -> Feed {
        Feed {
            name: name.into(),
            display_name: display_name.into(),
            max_batch_size,
            blocking,
            repeat_last,
            any_batch_size,
            state: Mutex::new(State::default()),
            fed: Condvar::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; tolerate poisoning anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts iterations from `iteration` (a pipeline restored from a checkpoint): the next
    /// batch fed is that iteration's, as if the ones before had been fed and consumed.
    pub fn start_at(&self, iteration: u64) {
        let mut s = self.lock();
        s.fed = iteration;
        s.requested = s.requested.max(iteration);
    }

    /// Queues one batch for a later iteration. An empty batch or one larger than the
    /// pipeline's `batch_size` is refused here, where the caller can still fix it.
    pub fn push(&self, batch: Batch) -> Result<()> {
        let n = batch.meta().len();
        if n > self.max_batch_size {
            return Err(Error::Data {
                location: self.location(),
                message: format!("the batch has {n} samples, more than the pipeline's batch_size ({})", self.max_batch_size),
            });
        }
        if n == 0 && !self.any_batch_size {
            return Err(Error::Data { location: self.location(), message: "the batch is empty; feed at least one sample".into() });
        }
        let mut s = self.lock();
        s.queued.push_back(batch);
        s.fed += 1;
        self.fed.notify_all();
        Ok(())
    }

    /// Whether iteration `iteration` (counting every iteration since the build) has data,
    /// fed already or repeated.
    pub fn has_data_for(&self, iteration: u64) -> bool {
        let s = self.lock();
        s.fed > iteration || (self.repeat_last && s.fed > 0)
    }

    /// Whether the next [`Feed::stage`] would find fed data without waiting (a repeat of
    /// the last batch does not count: see `State::requested`).
    pub fn ready(&self) -> bool {
        !self.lock().queued.is_empty()
    }

    /// Whether a batch can be staged now for an iteration the caller asked for: fed, or
    /// the last one repeated.
    pub fn has_next(&self) -> bool {
        let s = self.lock();
        !s.queued.is_empty() || (self.repeat_last && s.last.is_some())
    }

    /// The caller has asked for `count` iterations in all: repeats may be staged for them.
    pub fn request(&self, count: u64) {
        let mut s = self.lock();
        if count > s.requested {
            s.requested = count;
            self.fed.notify_all();
        }
    }

    /// Stages the next batch for `iteration` and returns its size. Without data, waits
    /// when `wait` (until data comes or the pipeline closes), else fails naming the source.
    pub fn stage(&self, iteration: u64, wait: bool) -> Result<usize> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return Err(Error::Unsupported(format!("{}: the pipeline was closed while waiting for data", self.display_name)));
            }
            let asked = !wait || s.requested > iteration;
            let next = match s.queued.pop_front() {
                Some(b) => Some(b),
                None if self.repeat_last && asked => s.last.clone(),
                None => None,
            };
            if let Some(b) = next {
                let n = b.meta().len();
                if self.repeat_last {
                    s.last = Some(b.clone());
                }
                s.staged.push_back((iteration, b));
                return Ok(n);
            }
            if !wait {
                return Err(self.no_data(iteration));
            }
            // (With `repeat_last` and data fed before, this waits for new data or the ask.)
            s = self.fed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The error for an iteration no batch was fed for.
    pub fn no_data(&self, iteration: u64) -> Error {
        Error::Input {
            name: self.name.clone(),
            message: format!(
                "{} '{}': no data was fed for iteration {iteration}. Feed it with feed_input(\"{}\", ...) or run(**inputs) \
                 before run(), give the operator a `source`, or set blocking=True to wait for data \
                 (an asynchronous pipeline runs prefetch_queue_depth iterations ahead, so feed that many batches first)",
                self.display_name, self.name, self.name
            ),
        }
    }

    /// The batch staged for `iteration` (the operator's own iteration).
    pub fn take(&self, iteration: u64) -> Batch {
        let mut s = self.lock();
        let k = s.staged.iter().position(|(it, _)| *it == iteration).expect("the executor stages every feed before the iteration runs");
        s.staged.remove(k).expect("position is in range").1
    }

    /// Drops what is staged for `iteration` and before: batches of an iteration that
    /// failed before its operator took them.
    pub fn discard_through(&self, iteration: u64) {
        self.lock().staged.retain(|(it, _)| *it > iteration);
    }

    /// Ends every wait: the pipeline is going away.
    pub fn close(&self) {
        self.lock().closed = true;
        self.fed.notify_all();
    }

    fn location(&self) -> crate::error::Location {
        crate::error::Location { operator: format!("{} '{}'", self.display_name, self.name), ..Default::default() }
    }
}
