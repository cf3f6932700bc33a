//! `on_error="skip"` on the reader's side: the samples found bad, and what takes their place.
//!
//! When an operator fails on one sample of a batch, the executor tells every reader the
//! sample came from to *exclude* the sample it gave at that place of that iteration, and runs
//! the iteration again. The reader then reads the batch again with every excluded sample
//! replaced by the next good sample of the same shard, in the reader's order (wrapping
//! around the shard; the whole data set for the readers that permute it every epoch). The
//! batch keeps its size, every epoch keeps its length and its boundaries (positions are not
//! shifted, so checkpoints and the iterators' epoch accounting stay exact), and the result is
//! a pure function of the excluded set: the same seed skips the same files, and gives the
//! same batches, whatever the thread count.
//!
//! Batches the loader thread read ahead before a sample was excluded are checked when taken
//! and read again if they hold it.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::loader::SequencerConfig;
use crate::error::{Error, Result};

/// Batches remembered per reader, by iteration, so that a failed one can be read again
/// (the executor runs at most one iteration ahead of the one that failed).
const SERVED_KEPT: usize = 4;

/// One reader's excluded samples and its recently served batches.
#[derive(Debug)]
pub struct Skipped {
    op: String,
    cfg: SequencerConfig,
    /// Whether anything is excluded: the fast path of every batch.
    any: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    bad: HashSet<usize>,
    /// Position of each sample in the reader's order (the inverse of `list_order`), made
    /// when the first sample is excluded from a reader that shuffles its list.
    position: Option<Vec<usize>>,
    /// (iteration, the samples of its batch) of the last batches served.
    served: VecDeque<(u64, Vec<usize>)>,
}

impl Skipped {
    pub fn new(op: &str, cfg: SequencerConfig) -> Skipped {
        Skipped {
            op: op.to_string(),
            cfg,
            any: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Excludes the sample served at `slot` of `iteration`'s batch; returns it and whether
    /// it is newly excluded, or `None` when that batch is not remembered or has no such slot.
    pub fn exclude(&self, iteration: u64, slot: usize) -> Option<(usize, bool)> {
        let mut st = self.lock();
        let sample = st
            .served
            .iter()
            .find(|(it, _)| *it == iteration)
            .and_then(|(_, idx)| idx.get(slot).copied())?;
        let new = st.bad.insert(sample);
        self.any.store(true, Ordering::Release);
        Some((sample, new))
    }

    /// `on_error="replace"`: the batch of `iteration` is read again with the sample at `slot`
    /// read from the batch's first other place instead (its outputs there are then zeroed and
    /// flagged); the sample is not excluded. Whether that batch is remembered.
    pub fn stand_in(&self, iteration: u64, slot: usize) -> bool {
        let mut st = self.lock();
        let Some((_, idx)) = st.served.iter_mut().find(|(it, _)| *it == iteration) else {
            return false;
        };
        let Some(other) = (0..idx.len()).find(|&k| k != slot) else {
            return false;
        };
        if slot >= idx.len() {
            return false;
        }
        idx[slot] = idx[other];
        true
    }

    /// Excludes `samples` (a checkpoint's).
    pub fn exclude_all(&self, samples: impl IntoIterator<Item = usize>) {
        let mut st = self.lock();
        st.bad
            .extend(samples.into_iter().filter(|&s| s < self.cfg.num_samples));
        if !st.bad.is_empty() {
            self.any.store(true, Ordering::Release);
        }
    }

    /// Every excluded sample, in order.
    pub fn excluded(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.lock().bad.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Replaces the excluded samples of `idx`; returns whether any was.
    pub fn replace_excluded(&self, idx: &mut [usize]) -> Result<bool> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut st = self.lock();
        let mut changed = false;
        for k in idx.iter_mut() {
            if st.bad.contains(k) {
                *k = self.replacement(&mut st, *k)?;
                changed = true;
            }
        }
        Ok(changed)
    }

    /// Records `idx` as the batch served for `iteration`.
    pub fn served(&self, iteration: u64, idx: &[usize]) {
        let mut st = self.lock();
        if let Some(e) = st.served.iter_mut().find(|(it, _)| *it == iteration) {
            e.1.clear();
            e.1.extend_from_slice(idx);
            return;
        }
        let mut v = if st.served.len() >= SERVED_KEPT {
            st.served.pop_front().map(|e| e.1).unwrap_or_default()
        } else {
            Vec::new()
        };
        v.clear();
        v.extend_from_slice(idx);
        st.served.push_back((iteration, v));
    }

    /// The batch served for `iteration`, if remembered.
    pub fn served_batch(&self, iteration: u64) -> Option<Vec<usize>> {
        self.lock()
            .served
            .iter()
            .find(|(it, _)| *it == iteration)
            .map(|(_, idx)| idx.clone())
    }

    /// The next good sample after `sample` in its shard, in the reader's order.
    fn replacement(&self, st: &mut State, sample: usize) -> Result<usize> {
        let cfg = &self.cfg;
        let n = cfg.num_samples;
        let order = cfg.list_order.as_deref();
        if let (Some(order), None) = (order, &st.position) {
            let mut pos = vec![0; n];
            for (p, &s) in order.iter().enumerate() {
                pos[s] = p;
            }
            st.position = Some(pos);
        }
        let p = st.position.as_ref().map_or(sample, |pos| pos[sample]);
        let range = if cfg.permutes_dataset() {
            0..n
        } else {
            let mut s = (p as u128 * cfg.num_shards as u128 / n as u128) as usize;
            while cfg.shard_start(s + 1) <= p {
                s += 1;
            }
            while cfg.shard_start(s) > p {
                s -= 1;
            }
            cfg.shard_range(s)
        };
        let at = |q: usize| order.map_or(q, |o| o[q]);
        (p + 1..range.end).chain(range.start..p).map(at).find(|c| !st.bad.contains(c)).ok_or_else(|| {
            Error::Unsupported(format!(
                "{}: on_error=\"skip\": every sample of the shard (samples at positions {}..{}) is bad; nothing is left to read",
                self.op, range.start, range.end
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize, shards: usize) -> SequencerConfig {
        SequencerConfig {
            num_samples: n,
            shard_id: 0,
            num_shards: shards,
            batch_size: 4,
            stick_to_shard: false,
            pad_last_batch: false,
            random_shuffle: false,
            initial_fill: 1,
            shuffle_after_epoch: false,
            shuffle_after_epoch_seed: 0,
            global_shuffle: false,
            global_shuffle_seed: 0,
            seed: 0,
            op_id: 0,
            omit_padding: false,
            groups: None,
            list_order: None,
        }
    }

    #[test]
    fn a_bad_sample_gives_way_to_the_next_good_one_of_its_shard() {
        // 10 samples, 2 shards: 0..5 and 5..10.
        let s = Skipped::new("r", cfg(10, 2));
        s.served(7, &[3, 4, 0, 1]);
        assert_eq!(s.exclude(7, 1), Some((4, true)));
        assert_eq!(s.exclude(7, 1), Some((4, false)), "already excluded");
        assert_eq!(s.exclude(8, 0), None, "an iteration not served");
        let mut idx = [3, 4, 0, 1];
        assert!(s.replace_excluded(&mut idx).unwrap());
        assert_eq!(idx, [3, 0, 0, 1], "the shard wraps: 4's next is 0, not 5");
        s.exclude_all([0]);
        let mut idx = [4, 0, 9];
        s.replace_excluded(&mut idx).unwrap();
        assert_eq!(idx, [1, 1, 9]);
        assert_eq!(s.excluded(), [0, 4]);
    }

    #[test]
    fn a_shuffled_list_replaces_in_its_own_order() {
        let mut c = cfg(6, 1);
        c.list_order = Some(vec![5, 2, 4, 0, 1, 3].into());
        let s = Skipped::new("r", c);
        s.exclude_all([4, 0]);
        let mut idx = [4, 3, 0];
        s.replace_excluded(&mut idx).unwrap();
        // 4 is at position 2; positions 3 (sample 0, bad) and 4 (sample 1) follow. 0 is at 3.
        assert_eq!(idx, [1, 3, 1]);
        // Position 5 (sample 3) wraps to position 0 (sample 5).
        s.exclude_all([3]);
        let mut idx = [3];
        s.replace_excluded(&mut idx).unwrap();
        assert_eq!(idx, [5]);
    }

    #[test]
    fn a_shard_of_bad_samples_is_an_error() {
        let s = Skipped::new("readers.file", cfg(4, 2));
        s.exclude_all([2, 3]);
        let e = s.replace_excluded(&mut [2]).unwrap_err().to_string();
        assert!(
            e.contains("readers.file") && e.contains("every sample of the shard"),
            "{e}"
        );
        assert_eq!(s.replace_excluded(&mut [1]).unwrap(), false);
    }
}
