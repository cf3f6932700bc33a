//! Read-ahead: a reader's requests for the batches after the one it is reading, started early.
//!
//! Over a high-latency link a reader that asks for a batch's objects only when it reads that
//! batch pays the round trip per batch, and its request slots sit idle while the batch's
//! slowest objects arrive. So the reader core tells each format the samples of the next
//! `prefetch_queue_depth` batches as soon as their order is known (`BatchSource::read_ahead`),
//! the format names the requests reading them will make (whole objects, or the coalesced
//! ranges of [`super::read_many`]), and they start here, queued in batch order behind one
//! per-reader limit of requests in flight ([`super::max_in_flight`]). When the batch is read,
//! its requests find their responses (or their failures) here instead of asking again.
//!
//! A request is identified by (URI, range); one that reading does not take (the format asked
//! for something else) is dropped once a later batch's requests are taken, so nothing piles up.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// An object, or a byte range of it.
pub(super) type RequestKey = (String, Option<Range<u64>>);

/// A request under way on the storage runtime; dropping it cancels it.
pub(super) struct InFlight(pub(super) JoinHandle<Result<bytes::Bytes, String>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One reader's requests started ahead, and its limit of requests in flight.
#[derive(Default)]
pub struct ReadAhead {
    pending: Mutex<HashMap<RequestKey, (u64, InFlight)>>,
    /// Read-aheads so far: the generation of the requests the next one starts.
    generation: AtomicU64,
    slots: OnceLock<Arc<Semaphore>>,
}

impl ReadAhead {
    /// The reader's request slots: every request, read ahead or not, holds one while it runs.
    pub(super) fn slots(&self) -> Arc<Semaphore> {
        self.slots.get_or_init(|| Arc::new(Semaphore::new(super::max_in_flight()))).clone()
    }

    /// Records the requests `start` starts for one later batch (those not already pending).
    pub(super) fn start(&self, keys: impl IntoIterator<Item = RequestKey>, start: impl Fn(&RequestKey) -> Option<InFlight>) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            if !pending.contains_key(&key) {
                if let Some(request) = start(&key) {
                    pending.insert(key, (generation, request));
                }
            }
        }
    }

    /// The pending request for `key`, if it was read ahead. Taking one means its batch is
    /// being read: what earlier read-aheads started and reading never took is dropped.
    pub(super) fn take(&self, key: &RequestKey) -> Option<InFlight> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (generation, request) = pending.remove(key)?;
        pending.retain(|_, (g, _)| *g >= generation);
        Some(request)
    }

    /// How many requests are pending (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request that never finishes (cancelled when dropped).
    fn forever() -> Option<InFlight> {
        Some(InFlight(super::super::runtime().spawn(std::future::pending())))
    }

    #[test]
    fn taking_a_batch_drops_what_earlier_batches_left() {
        let ahead = ReadAhead::default();
        let key = |name: &str| (name.to_string(), None);
        ahead.start([key("a"), key("b")], |_| forever()); // batch 0
        ahead.start([key("c"), key("a")], |_| forever()); // batch 1 (a: still pending from 0)
        ahead.start([key("d")], |_| forever()); // batch 2
        assert_eq!(ahead.len(), 4);
        assert!(ahead.take(&key("a")).is_some()); // batch 0 read; b still wanted by it
        assert_eq!(ahead.len(), 3);
        assert!(ahead.take(&key("c")).is_some()); // batch 1 read: b (batch 0's, never taken) goes
        assert_eq!(ahead.len(), 1);
        assert!(ahead.take(&key("b")).is_none());
        assert!(ahead.take(&key("d")).is_some());
        assert_eq!(ahead.len(), 0);
    }
}
