//! The format-independent part of every reader: which sample comes next.
//!
//! A [`Sequencer`] turns "N samples, this shard, these options" into an endless stream of
//! sample indices, batch after batch, with DALI's semantics (checked against DALI 2.4):
//!
//! * Shard `s` of `S` holds samples `floor(N*s/S) .. floor(N*(s+1)/S)`.
//! * The reader never ends. One *epoch* is one pass over the current shard. Without
//!   `pad_last_batch` batches straddle epoch boundaries; with it every shard's epoch is padded
//!   to `ceil(ceil(N/S) / batch_size) * batch_size` samples by repeating the epoch's last
//!   sample, so every shard yields the same number of whole batches and the next epoch starts
//!   in a fresh batch.
//! * Without `stick_to_shard` the reader moves on to shard `s+1` (mod `S`) after each epoch;
//!   with it, it stays on shard `s`.
//! * `shuffle_after_epoch`: each epoch (the first included) reads its shard's slice of a fresh
//!   permutation of the whole dataset, keyed by `shuffle_after_epoch_seed` and the epoch
//!   number only, so every shard of every pipeline sees the same global permutation. The shard
//!   does not rotate in this mode.
//! * `global_shuffle` (Sluice's, every reader): as `shuffle_after_epoch`, but keyed by the
//!   reader's own `seed` argument (not the pipeline's: ranks often seed their pipelines
//!   differently, and every rank must permute alike), or a fixed default. The whole dataset is permuted every epoch, not only an `initial_fill`
//!   window (DALI's readers shuffle only locally), and the concatenation of the shards'
//!   epochs is the same permutation whatever the number of shards: a job resized from 8 to
//!   16 GPUs reads the same global order.
//! * `random_shuffle`: a buffer of up to `initial_fill` samples is filled in reading order and
//!   each output is picked at random from it, the buffer being refilled as it drains. Picks
//!   never cross an epoch boundary, so every epoch is a permutation of its shard.
//!
//! * `_omit_padding` (set by a framework iterator with the PARTIAL policy, which throws the
//!   padding away): with `pad_last_batch`, the epoch's last batch holds only its real
//!   samples. Positions still count the padding, so checkpoints and every later batch are
//!   those of the padded stream. [`BatchPlan`] tells the executor each batch's size ahead.
//!
//! The randomness comes from the counter-based [`SampleRng`], keyed by the operator's seed and
//! the epoch: the order depends on nothing else (not on threads, not on timing).
//!
//! Readers of any format supply the number of samples and how to read sample `k`; they ask
//! the sequencer for the indices of each batch.

use crate::error::{Error, Result};
use crate::ops::{OpContext, ReaderMeta};
use crate::rng::SampleRng;

/// Key used for the `shuffle_after_epoch` permutation when no `shuffle_after_epoch_seed` is
/// given: a fixed value, so every run (and every shard) shuffles the same way, as in DALI.
pub const DEFAULT_SHUFFLE_AFTER_EPOCH_SEED: u64 = 0x5eed_da11;

/// Operator id mixed into the `shuffle_after_epoch` key (separates it from other streams).
const PERMUTATION_STREAM: u64 = 0x5045_524d; // "PERM"

/// Everything that decides the order of samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequencerConfig {
    /// Samples in the whole dataset.
    pub num_samples: usize,
    pub shard_id: usize,
    pub num_shards: usize,
    pub batch_size: usize,
    pub stick_to_shard: bool,
    pub pad_last_batch: bool,
    pub random_shuffle: bool,
    pub initial_fill: usize,
    pub shuffle_after_epoch: bool,
    /// Key of the `shuffle_after_epoch` permutations.
    pub shuffle_after_epoch_seed: u64,
    /// Permute the whole dataset every epoch (`global_shuffle`), keyed by `global_shuffle_seed`.
    pub global_shuffle: bool,
    /// The reader's own `seed` argument, or [`DEFAULT_SHUFFLE_AFTER_EPOCH_SEED`].
    pub global_shuffle_seed: u64,
    /// Key of the `random_shuffle` picks (the operator's seed and id).
    pub seed: u64,
    pub op_id: u64,
    /// Leave the padding out of batches (`_omit_padding`; only meaningful with `pad_last_batch`).
    pub omit_padding: bool,
    /// Sizes of runs of consecutive samples that `shuffle_after_epoch` keeps together, in
    /// order (tfrecord's files: DALI shuffles whole files there); `None`: single samples.
    pub groups: Option<std::sync::Arc<[usize]>>,
    /// The list order position `p` of the dataset reads (sample `list_order[p]`): DALI's list
    /// readers shuffle their whole list once, before sharding, with `random_shuffle`
    /// ([`super::list_shuffle`]); `None`: the readers' own order.
    pub list_order: Option<std::sync::Arc<[usize]>>,
}

impl SequencerConfig {
    /// Reads the shared reader arguments ([`super::READER_ARGS`]) and `shuffle_after_epoch`
    /// (when the schema has it) from `ctx`, for a dataset of `num_samples` samples, and checks
    /// them. Errors name the operator and the argument.
    pub fn from_context(ctx: &OpContext, num_samples: usize, groups: Option<Vec<usize>>) -> Result<SequencerConfig> {
        let op = ctx.display_name.as_str();
        let a = &ctx.args;
        let num_shards = a.int("num_shards");
        let shard_id = a.int("shard_id");
        if num_shards < 1 {
            return Err(Error::arg(op, "num_shards", format!("must be at least 1, got {num_shards}")));
        }
        if shard_id < 0 || shard_id >= num_shards {
            return Err(Error::arg(op, "shard_id", format!("must be in [0, num_shards) = [0, {num_shards}), got {shard_id}")));
        }
        let random_shuffle = a.bool("random_shuffle");
        let initial_fill = a.int("initial_fill");
        if random_shuffle && initial_fill < 1 {
            return Err(Error::arg(op, "initial_fill", format!("must be at least 1 with random_shuffle, got {initial_fill}")));
        }
        let shuffle_after_epoch = a.has("shuffle_after_epoch") && a.bool("shuffle_after_epoch");
        let stick_to_shard = a.bool("stick_to_shard");
        if shuffle_after_epoch && random_shuffle && groups.is_none() {
            return Err(Error::arg(op, "shuffle_after_epoch", "cannot be used together with random_shuffle"));
        }
        if shuffle_after_epoch && stick_to_shard {
            return Err(Error::arg(op, "shuffle_after_epoch", "cannot be used together with stick_to_shard"));
        }
        let global_shuffle = a.has("global_shuffle") && a.bool("global_shuffle");
        for (other, set) in [("random_shuffle", random_shuffle), ("shuffle_after_epoch", shuffle_after_epoch), ("stick_to_shard", stick_to_shard)] {
            if global_shuffle && set {
                return Err(Error::arg(op, "global_shuffle", format!(
                    "cannot be used together with {other}: global_shuffle already permutes the whole dataset every epoch and gives each shard its slice"
                )));
            }
        }
        let shuffle_after_epoch_seed = match a.opt_int("shuffle_after_epoch_seed") {
            Some(s) => s as u64,
            None => DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
        };
        let cfg = SequencerConfig {
            num_samples,
            shard_id: shard_id as usize,
            num_shards: num_shards as usize,
            batch_size: ctx.max_batch_size,
            stick_to_shard,
            pad_last_batch: a.bool("pad_last_batch"),
            random_shuffle,
            initial_fill: initial_fill.max(1) as usize,
            shuffle_after_epoch,
            shuffle_after_epoch_seed,
            global_shuffle,
            global_shuffle_seed: match a.int("seed") {
                s if s >= 0 => s as u64,
                _ => DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
            },
            seed: ctx.seed,
            op_id: ctx.op_id,
            omit_padding: a.has("_omit_padding") && a.bool("_omit_padding"),
            groups: groups.map(Into::into),
            list_order: None,
        };
        cfg.check(op)?;
        Ok(cfg)
    }

    /// Checks the dataset size against the sharding.
    pub fn check(&self, op: &str) -> Result<()> {
        if self.num_samples == 0 {
            return Err(Error::arg(op, "num_shards", "the dataset is empty: no samples found"));
        }
        if self.num_shards == 0 || self.shard_id >= self.num_shards {
            return Err(Error::arg(op, "shard_id", format!("must be in [0, {}), got {}", self.num_shards, self.shard_id)));
        }
        if self.num_shards > self.num_samples {
            return Err(Error::arg(op, "num_shards", format!(
                "the dataset has {} samples, fewer than the {} shards requested",
                self.num_samples, self.num_shards
            )));
        }
        Ok(())
    }

    /// First sample of shard `s`: `floor(N * s / S)`, as DALI computes it.
    pub fn shard_start(&self, s: usize) -> usize {
        (self.num_samples as u128 * s as u128 / self.num_shards as u128) as usize
    }

    /// Sample range of shard `s`.
    pub fn shard_range(&self, s: usize) -> std::ops::Range<usize> {
        self.shard_start(s)..self.shard_start(s + 1)
    }

    /// Samples a shard's epoch yields with `pad_last_batch`: the largest shard,
    /// `ceil(N/S)`, rounded up to whole batches.
    pub fn padded_shard_len(&self) -> usize {
        self.num_samples.div_ceil(self.num_shards).div_ceil(self.batch_size) * self.batch_size
    }

    /// Whether every epoch reads the shard's slice of a fresh permutation of the whole
    /// dataset (and the shard does not rotate).
    pub fn permutes_dataset(&self) -> bool {
        self.shuffle_after_epoch || self.global_shuffle
    }

    /// The order of epoch `epoch`'s samples when [`Self::permutes_dataset`].
    fn epoch_permutation(&self, epoch: u64) -> Option<Vec<usize>> {
        if self.global_shuffle {
            return Some(permutation(self.num_samples, self.global_shuffle_seed, epoch));
        }
        self.shuffle_after_epoch.then(|| match &self.groups {
            Some(groups) => group_permutation(groups, self.shuffle_after_epoch_seed, epoch),
            None => permutation(self.num_samples, self.shuffle_after_epoch_seed, epoch),
        })
    }

    /// DALI's `reader_meta()` numbers. `epoch_size_padded` is `S * ceil(N/S)` with padding
    /// (it does not depend on the batch size), else `N`.
    pub fn meta(&self) -> ReaderMeta {
        ReaderMeta {
            epoch_size: self.num_samples,
            epoch_size_padded: if self.pad_last_batch {
                self.num_shards * self.num_samples.div_ceil(self.num_shards)
            } else {
                self.num_samples
            },
            number_of_shards: self.num_shards,
            shard_id: self.shard_id,
            pad_last_batch: self.pad_last_batch,
            stick_to_shard: self.stick_to_shard,
        }
    }
}

/// A random permutation of `0..n` keyed by `seed` and `epoch` (Fisher-Yates).
pub fn permutation(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut rng = SampleRng::new(seed, PERMUTATION_STREAM, epoch, 0);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// The samples in an order that permutes whole runs of consecutive samples (`groups`, their
/// sizes), each run keeping its order; keyed as [`permutation`].
pub fn group_permutation(groups: &[usize], seed: u64, epoch: u64) -> Vec<usize> {
    let starts: Vec<usize> = groups.iter().scan(0, |at, &n| { let s = *at; *at += n; Some(s) }).collect();
    permutation(groups.len(), seed, epoch).into_iter().flat_map(|g| starts[g]..starts[g] + groups[g]).collect()
}

/// The endless stream of sample indices of one reader.
#[derive(Debug, Clone)]
pub struct Sequencer {
    cfg: SequencerConfig,
    /// Epochs started so far (the current one is `epoch - 1` once started).
    epoch: u64,
    /// Shard the next epoch reads (DALI's virtual shard id).
    next_shard: usize,
    cur: Epoch,
}

/// State of the epoch being read.
#[derive(Debug, Clone, Default)]
struct Epoch {
    /// Samples of the shard, in reading order: positions `range` of the dataset, mapped
    /// through `perm` when shuffling after every epoch.
    range: std::ops::Range<usize>,
    perm: Option<Vec<usize>>,
    /// Next position of `range` to feed (into the shuffle buffer or out).
    fed: usize,
    /// Outputs of this epoch so far (real and padding).
    emitted: usize,
    /// Outputs this epoch yields in all.
    len: usize,
    /// The random-shuffle buffer.
    buffer: Vec<usize>,
    rng: Option<SampleRng>,
    /// The last sample returned, repeated as padding.
    last: usize,
}

impl Sequencer {
    /// A sequencer positioned before the first sample of shard `cfg.shard_id`.
    pub fn new(cfg: SequencerConfig) -> Sequencer {
        let next_shard = cfg.shard_id;
        Sequencer { cfg, epoch: 0, next_shard, cur: Epoch::default() }
    }

    /// The configuration.
    pub fn config(&self) -> &SequencerConfig {
        &self.cfg
    }

    /// Reader facts for `reader_meta()`.
    pub fn meta(&self) -> ReaderMeta {
        self.cfg.meta()
    }

    /// Epochs started so far (1 while the first epoch is read).
    pub fn epochs_started(&self) -> u64 {
        self.epoch
    }

    fn start_epoch(&mut self) {
        let cfg = self.cfg.clone();
        let cfg = &cfg;
        let shard = if cfg.permutes_dataset() { cfg.shard_id } else { self.next_shard };
        let range = cfg.shard_range(shard);
        let real = range.len();
        let len = if cfg.pad_last_batch { cfg.padded_shard_len() } else { real };
        let perm = cfg.epoch_permutation(self.epoch);
        let rng = cfg.random_shuffle.then(|| SampleRng::new(cfg.seed, cfg.op_id, self.epoch, u64::MAX));
        let mut buffer = std::mem::take(&mut self.cur.buffer);
        buffer.clear();
        self.cur = Epoch { range, perm, fed: 0, emitted: 0, len, buffer, rng, last: 0 };
        if cfg.random_shuffle {
            let fill = cfg.initial_fill.min(real);
            for _ in 0..fill {
                let s = self.feed().expect("within the shard");
                self.cur.buffer.push(s);
            }
        }
        if !cfg.stick_to_shard {
            self.next_shard = (shard + 1) % cfg.num_shards;
        }
        self.epoch += 1;
    }

    /// The next sample of the shard in reading order, if any is left this epoch.
    fn feed(&mut self) -> Option<usize> {
        let e = &mut self.cur;
        if e.fed >= e.range.len() {
            return None;
        }
        let pos = e.range.start + e.fed;
        e.fed += 1;
        let p = match &e.perm {
            Some(p) => p[pos],
            None => pos,
        };
        Some(match &self.cfg.list_order {
            Some(order) => order[p],
            None => p,
        })
    }

    /// The index of the next sample.
    pub fn next_index(&mut self) -> usize {
        self.next_position().0
    }

    /// The next position: its sample, and whether it is padding.
    fn next_position(&mut self) -> (usize, bool) {
        if self.epoch == 0 || self.cur.emitted >= self.cur.len {
            self.start_epoch();
        }
        let real = self.cur.range.len();
        let padding = self.cur.emitted >= real;
        let s = if padding {
            self.cur.last
        } else if self.cfg.random_shuffle {
            let e = &mut self.cur;
            let rng = e.rng.as_mut().expect("random_shuffle has an rng");
            let j = rng.below(e.buffer.len() as u64) as usize;
            let s = e.buffer.swap_remove(j);
            if let Some(next) = self.feed() {
                self.cur.buffer.push(next);
            }
            s
        } else {
            self.feed().expect("within the shard")
        };
        self.cur.emitted += 1;
        self.cur.last = s;
        (s, padding)
    }

    /// Moves past the next `n` samples (a checkpoint's position): whole epochs at once, as
    /// an epoch's order depends only on its number and shard, then sample by sample.
    pub fn skip(&mut self, mut n: u64) {
        while n > 0 {
            if self.epoch == 0 || self.cur.emitted >= self.cur.len {
                let shard = if self.cfg.permutes_dataset() { self.cfg.shard_id } else { self.next_shard };
                let real = self.cfg.shard_range(shard).len();
                let len = if self.cfg.pad_last_batch { self.cfg.padded_shard_len() } else { real } as u64;
                if len > 0 && n >= len {
                    self.epoch += 1;
                    if !self.cfg.stick_to_shard {
                        self.next_shard = (shard + 1) % self.cfg.num_shards;
                    }
                    self.cur = Epoch::default(); // read in full: the next sample starts an epoch
                    n -= len;
                    continue;
                }
            }
            self.next_index();
            n -= 1;
        }
    }

    /// Replaces `out` with the indices of the next batch: `batch_size` positions, less the
    /// padding with `omit_padding`. A batch of padding only keeps one padding sample: a batch
    /// of no samples would have outputs of no known sample shape, where the iterator's cut of
    /// one sample to none keeps it (`[0, C, H, W]`, as DALI gives).
    pub fn next_batch_into(&mut self, out: &mut Vec<usize>) {
        out.clear();
        let mut first_padding = None;
        for _ in 0..self.cfg.batch_size {
            let (s, padding) = self.next_position();
            if !(padding && self.cfg.omit_padding) {
                out.push(s);
            } else {
                first_padding.get_or_insert(s);
            }
        }
        if let (true, Some(s)) = (out.is_empty(), first_padding) {
            out.push(s);
        }
    }

    /// The indices of the next batch.
    pub fn next_batch(&mut self) -> Vec<usize> {
        let mut v = Vec::with_capacity(self.cfg.batch_size);
        self.next_batch_into(&mut v);
        v
    }
}

/// The size of each iteration's batch of a reader whose batches vary (`omit_padding`), known
/// before the iteration runs: the executor sizes the operators without inputs (random
/// numbers, constants) by it. A twin of the reader's sequencer, asked in iteration order.
#[derive(Debug)]
pub struct BatchPlan {
    seq: Sequencer,
    /// The iteration the next batch of `seq` is for (set by the first question).
    next_iteration: Option<u64>,
    last: Option<(u64, usize)>,
    idx: Vec<usize>,
}

impl BatchPlan {
    /// For a reader whose sequencer is `seq` (positioned where the reader starts).
    pub fn new(seq: Sequencer) -> BatchPlan {
        BatchPlan { seq, next_iteration: None, last: None, idx: Vec::new() }
    }

    /// Samples in the batch of `iteration`. Iterations are asked in order (the same one may
    /// be asked again); the first one asked is the reader's first batch.
    pub fn size_at(&mut self, iteration: u64) -> usize {
        if let Some((it, n)) = self.last {
            if it == iteration {
                return n;
            }
        }
        let next = self.next_iteration.get_or_insert(iteration);
        while *next <= iteration {
            self.seq.next_batch_into(&mut self.idx);
            self.last = Some((*next, self.idx.len()));
            *next += 1;
        }
        self.last.map_or(self.seq.cfg.batch_size, |(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize, shards: usize, sid: usize, bs: usize) -> SequencerConfig {
        SequencerConfig {
            num_samples: n,
            shard_id: sid,
            num_shards: shards,
            batch_size: bs,
            stick_to_shard: false,
            pad_last_batch: false,
            random_shuffle: false,
            initial_fill: 1024,
            shuffle_after_epoch: false,
            shuffle_after_epoch_seed: DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
            global_shuffle: false,
            global_shuffle_seed: DEFAULT_SHUFFLE_AFTER_EPOCH_SEED,
            seed: 7,
            op_id: 1,
            omit_padding: false,
            groups: None,
            list_order: None,
        }
    }

    #[test]
    fn omitting_padding_leaves_the_real_samples_of_the_padded_stream() {
        // 11 samples, 3 shards (3, 4, 4 samples), batch 3: each epoch is padded to 6.
        for shuffle in [false, true] {
            let mut c = cfg(11, 3, 0, 3);
            c.pad_last_batch = true;
            c.random_shuffle = shuffle;
            let padded = batches(c.clone(), 12);
            c.omit_padding = true;
            let omitted = batches(c.clone(), 12);
            let mut plan = BatchPlan::new(Sequencer::new(c.clone()));
            for (k, (p, o)) in padded.iter().zip(&omitted).enumerate() {
                // Epochs read shards 0, 1, 2, 0, ...: 3, 4, 4 real samples, so the second batch
                // of each epoch holds 0, 1 or 1 of them; one of padding only keeps a padding
                // sample (its outputs keep their sample shape).
                let real = [3, 0, 3, 1, 3, 1][k % 6];
                let kept = real.max(1);
                assert_eq!(o.len(), kept, "batch {k}");
                assert_eq!(&p[..kept], &o[..], "batch {k}");
                assert_eq!(plan.size_at(5 + k as u64), kept);
                assert_eq!(plan.size_at(5 + k as u64), kept, "asked twice");
            }
        }
    }

    fn batches(c: SequencerConfig, n: usize) -> Vec<Vec<usize>> {
        let mut s = Sequencer::new(c);
        (0..n).map(|_| s.next_batch()).collect()
    }

    #[test]
    fn skipping_gives_the_samples_a_full_run_gives_after_them() {
        for (pad, shuffle, after, stick) in [(false, false, false, false), (true, true, false, false), (true, false, true, false), (false, true, false, true), (true, false, false, true)] {
            let mut c = cfg(23, 3, 1, 4);
            c.pad_last_batch = pad;
            c.random_shuffle = shuffle;
            c.initial_fill = 5;
            c.shuffle_after_epoch = after;
            c.stick_to_shard = stick;
            for n in [0u64, 1, 3, 7, 8, 9, 31, 64, 100] {
                let mut full = Sequencer::new(c.clone());
                for _ in 0..n {
                    full.next_index();
                }
                let mut skipped = Sequencer::new(c.clone());
                skipped.skip(n);
                let want: Vec<usize> = (0..40).map(|_| full.next_index()).collect();
                let got: Vec<usize> = (0..40).map(|_| skipped.next_index()).collect();
                assert_eq!(got, want, "pad {pad} shuffle {shuffle} after {after} stick {stick} n {n}");
            }
        }
    }

    #[test]
    fn shard_boundaries_are_floor_n_s_over_shards() {
        let c = cfg(10, 3, 0, 1);
        assert_eq!((0..4).map(|s| c.shard_start(s)).collect::<Vec<_>>(), vec![0, 3, 6, 10]);
        let c = cfg(10, 4, 0, 1);
        assert_eq!((0..5).map(|s| c.shard_start(s)).collect::<Vec<_>>(), vec![0, 2, 5, 7, 10]);
    }

    // Every expected sequence below was printed by DALI 2.4 for the same settings.
    #[test]
    fn unpadded_reading_moves_through_the_whole_dataset() {
        assert_eq!(batches(cfg(10, 3, 1, 3), 4), vec![vec![3, 4, 5], vec![6, 7, 8], vec![9, 0, 1], vec![2, 3, 4]]);
        assert_eq!(batches(cfg(10, 4, 3, 4), 3), vec![vec![7, 8, 9, 0], vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
    }

    #[test]
    fn padding_fills_each_shard_to_whole_batches_of_the_largest_shard() {
        let mut c = cfg(10, 3, 0, 3);
        c.pad_last_batch = true;
        assert_eq!(
            batches(c.clone(), 7),
            vec![vec![0, 1, 2], vec![2, 2, 2], vec![3, 4, 5], vec![5, 5, 5], vec![6, 7, 8], vec![9, 9, 9], vec![0, 1, 2]]
        );
        c.batch_size = 4;
        assert_eq!(batches(c.clone(), 4), vec![vec![0, 1, 2, 2], vec![3, 4, 5, 5], vec![6, 7, 8, 9], vec![0, 1, 2, 2]]);
        c.stick_to_shard = true;
        c.shard_id = 1;
        c.batch_size = 3;
        assert_eq!(batches(c.clone(), 3), vec![vec![3, 4, 5], vec![5, 5, 5], vec![3, 4, 5]]);
        let mut c = cfg(10, 4, 0, 4);
        c.pad_last_batch = true;
        assert_eq!(batches(c, 3), vec![vec![0, 1, 1, 1], vec![2, 3, 4, 4], vec![5, 6, 6, 6]]);
    }

    #[test]
    fn meta_matches_dali() {
        for (n, s, pad, padded) in [(10, 1, true, 10), (10, 2, true, 10), (10, 3, true, 12), (10, 4, true, 12), (7, 3, true, 9), (10, 3, false, 10)] {
            for bs in [1, 3, 4, 20] {
                let mut c = cfg(n, s, 0, bs);
                c.pad_last_batch = pad;
                let m = c.meta();
                assert_eq!((m.epoch_size, m.epoch_size_padded, m.number_of_shards), (n, padded, s), "n={n} s={s} bs={bs}");
            }
        }
    }

    #[test]
    fn stick_to_shard_stays() {
        let mut c = cfg(10, 3, 1, 4);
        c.stick_to_shard = true;
        assert_eq!(batches(c, 3), vec![vec![3, 4, 5, 3], vec![4, 5, 3, 4], vec![5, 3, 4, 5]]);
    }

    #[test]
    fn shuffle_after_epoch_gives_a_new_permutation_per_epoch_shared_by_shards() {
        let mut c = cfg(10, 1, 0, 10);
        c.shuffle_after_epoch = true;
        let e = batches(c.clone(), 3);
        for b in &e {
            let mut s = b.clone();
            s.sort();
            assert_eq!(s, (0..10).collect::<Vec<_>>());
        }
        assert_ne!(e[0], (0..10).collect::<Vec<_>>(), "the first epoch is shuffled too");
        assert_ne!(e[0], e[1]);
        // Two shards read the two halves of the same permutation, epoch after epoch.
        c.num_shards = 2;
        c.batch_size = 5;
        let s0 = batches(c.clone(), 3);
        c.shard_id = 1;
        let s1 = batches(c.clone(), 3);
        for k in 0..3 {
            assert_eq!([s0[k].clone(), s1[k].clone()].concat(), e[k]);
        }
        // The operator seed does not change it; shuffle_after_epoch_seed does.
        c.seed = 99;
        assert_eq!(batches(c.clone(), 3), s1);
        c.shuffle_after_epoch_seed = 3;
        assert_ne!(batches(c, 3), s1);
    }

    #[test]
    fn global_shuffle_gives_the_same_global_order_for_any_number_of_shards() {
        // 23 samples: uneven shards, and groups (tfrecord's files) are not kept together.
        let mut c = cfg(23, 1, 0, 23);
        c.global_shuffle = true;
        c.groups = Some(vec![10, 13].into());
        let whole = batches(c.clone(), 4);
        for b in &whole {
            let mut s = b.clone();
            s.sort();
            assert_eq!(s, (0..23).collect::<Vec<_>>());
        }
        assert_ne!(whole[0], whole[1]);
        assert!(whole[0][..10].iter().any(|&i| i >= 10), "records move one by one, not by file");
        for shards in [2usize, 3, 8] {
            let per_shard: Vec<Vec<Vec<usize>>> = (0..shards)
                .map(|sid| {
                    let mut c = c.clone();
                    (c.num_shards, c.shard_id, c.batch_size) = (shards, sid, 1);
                    let len = c.shard_range(sid).len();
                    let flat: Vec<usize> = batches(c, 4 * len).concat();
                    flat.chunks(len).map(|e| e.to_vec()).collect()
                })
                .collect();
            for epoch in 0..4 {
                let joined: Vec<usize> = per_shard.iter().flat_map(|s| s[epoch].clone()).collect();
                assert_eq!(joined, whole[epoch], "{shards} shards, epoch {epoch}");
            }
        }
        // Keyed by the reader's own seed, not the pipeline's.
        c.seed = 8;
        assert_eq!(batches(c.clone(), 1)[0], whole[0]);
        c.global_shuffle_seed = 8;
        assert_ne!(batches(c.clone(), 1)[0], whole[0]);
        // Resuming mid-epoch reads on exactly.
        let mut s = Sequencer::new(c.clone());
        let stream: Vec<usize> = (0..60).map(|_| s.next_index()).collect();
        let mut r = Sequencer::new(c);
        r.skip(31);
        assert_eq!((0..29).map(|_| r.next_index()).collect::<Vec<_>>(), stream[31..]);
    }

    #[test]
    fn random_shuffle_permutes_each_epoch_and_is_deterministic() {
        for fill in [1usize, 4, 1024] {
            let mut c = cfg(10, 1, 0, 3);
            c.random_shuffle = true;
            c.initial_fill = fill;
            let mut s = Sequencer::new(c.clone());
            let stream: Vec<usize> = (0..40).map(|_| s.next_index()).collect();
            for epoch in stream.chunks(10) {
                let mut e = epoch.to_vec();
                e.sort();
                assert_eq!(e, (0..10).collect::<Vec<_>>(), "fill {fill}");
            }
            let mut again = Sequencer::new(c.clone());
            assert_eq!((0..40).map(|_| again.next_index()).collect::<Vec<_>>(), stream);
            if fill == 1 {
                assert_eq!(&stream[..10], &(0..10).collect::<Vec<_>>()[..], "a buffer of one does not shuffle");
            } else {
                assert_ne!(&stream[..10], &(0..10).collect::<Vec<_>>()[..]);
                assert_ne!(&stream[..10], &stream[10..20]);
                c.seed = 8;
                let mut other = Sequencer::new(c);
                assert_ne!((0..40).map(|_| other.next_index()).collect::<Vec<_>>(), stream);
            }
        }
    }

    #[test]
    fn random_shuffle_with_padding_repeats_the_last_pick() {
        let mut c = cfg(10, 3, 0, 3);
        c.random_shuffle = true;
        c.pad_last_batch = true;
        let b = batches(c, 2);
        let mut first = b[0].clone();
        first.sort();
        assert_eq!(first, vec![0, 1, 2]);
        assert_eq!(b[1], vec![b[0][2]; 3]);
    }
}
