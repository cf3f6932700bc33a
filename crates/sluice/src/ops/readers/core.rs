//! What every reader operator shares around its format: the sample order (a [`Sequencer`]
//! built from the common arguments, moved past a checkpoint's position), the loader thread
//! that reads `prefetch_queue_depth` batches ahead, the batch plan of readers that leave
//! padding out, the reader's metadata, and a clean stop when the pipeline goes away.
//!
//! A format implements [`BatchSource`]: given the indices of a batch's samples (its own
//! numbering, `0..num_samples`), read them into whatever the operator's `run` turns into its
//! outputs. `read` runs on the loader thread; a batch that fails to read fails its own
//! iteration only (the error travels in its place), and the next batch reads on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Select, Sender};

use super::list_shuffle::dali_list_order;
use super::loader::{BatchPlan, Sequencer, SequencerConfig};
use super::skip::Skipped;
use crate::error::{Error, Result};
use crate::ops::{OpContext, Operator, ReaderMeta, Workspace};
use crate::storage::Source;
use crate::tensor::TensorList;

/// A format's reading of one batch, on the loader thread.
pub trait BatchSource: Send + 'static {
    /// What one batch is read into (the operator's `run` turns it into outputs).
    type Batch: Send + 'static;

    /// Reads the samples `idx`, in that order, for the pipeline's batch `batch_no`. `stop`
    /// is set when the pipeline goes away: long reads may give up early.
    fn read(&mut self, idx: &[usize], batch_no: u64, stop: &AtomicBool) -> Result<Self::Batch>;

    /// Told the samples of a later batch (the next `prefetch_queue_depth` batches, each once,
    /// in order, before it is read): a format reading from object storage starts their
    /// requests now ([`crate::storage::read_ahead_objects`], [`read_ahead_spans`]). Local
    /// formats need nothing (the default).
    fn read_ahead(&mut self, _idx: &[usize]) {}

    /// Sizes of runs of consecutive samples `shuffle_after_epoch` moves as one (tfrecord:
    /// the files); `None` (the default): every sample on its own.
    fn shuffle_groups(&self) -> Option<Vec<usize>> {
        None
    }

    /// Whether DALI's reader of this format shuffles its whole list once, before sharding,
    /// when `random_shuffle` is on (its list readers: file, coco, sequence, numpy); the
    /// default: no (indexed formats shuffle within the shard only).
    fn shuffles_whole_list(&self) -> bool {
        false
    }
}

/// A batch the loader thread read: its samples and what they were read into.
type Loaded<B> = (Vec<usize>, Result<B>);

/// A request to read the samples again, for an iteration, answered on the sender.
type Reread<B> = (Vec<usize>, u64, Sender<Result<B>>);

/// The operator's side of a reader: its loader thread's batches, in order.
pub struct ReaderCore<B> {
    op: String,
    meta: ReaderMeta,
    plan: Option<Arc<Mutex<BatchPlan>>>,
    skipped: Arc<Skipped>,
    rx: Option<Receiver<Loaded<B>>>,
    reread: Option<Sender<Reread<B>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl<B: Send + 'static> ReaderCore<B> {
    /// Starts reading `source`'s `num_samples` samples in the order the reader arguments of
    /// `ctx` give (sharding, shuffling, padding), from the checkpoint position
    /// `ctx.resume_samples`.
    pub fn start<S: BatchSource<Batch = B>>(ctx: &OpContext, num_samples: usize, mut source: S) -> Result<ReaderCore<B>> {
        let op = ctx.display_name.clone();
        let mut cfg = SequencerConfig::from_context(ctx, num_samples, source.shuffle_groups())?;
        if cfg.random_shuffle && source.shuffles_whole_list() {
            cfg.list_order = Some(dali_list_order(num_samples).into());
        }
        let depth = ctx.args.int("prefetch_queue_depth");
        if depth < 1 {
            return Err(Error::arg(&op, "prefetch_queue_depth", format!("must be at least 1, got {depth}")));
        }
        let batch_size = cfg.batch_size as u64;
        let skipped = Arc::new(Skipped::new(&op, cfg.clone()));
        let mut seq = Sequencer::new(cfg);
        seq.skip(ctx.resume_samples);
        let plan = (seq.config().omit_padding && seq.config().pad_last_batch).then(|| Arc::new(Mutex::new(BatchPlan::new(seq.clone()))));
        let meta = seq.meta();
        // `depth - 1` queued plus one waiting in `send` keeps `depth` batches ready.
        let (tx, rx) = bounded::<Loaded<B>>(depth as usize - 1);
        let (reread_tx, reread_rx) = unbounded::<Reread<B>>();
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let stop = stop.clone();
            let skipped = skipped.clone();
            let mut batch_no = ctx.resume_samples / batch_size.max(1);
            std::thread::Builder::new()
                .name(format!("sluice-{}", ctx.display_name))
                .spawn(move || {
                    // The batches after the one being read, their samples known in advance
                    // so that the source can start reading them (object storage).
                    let mut upcoming: VecDeque<Vec<usize>> = VecDeque::with_capacity(depth as usize + 1);
                    while !stop.load(Ordering::Relaxed) {
                        while upcoming.len() <= depth as usize {
                            let mut idx = Vec::with_capacity(batch_size as usize);
                            seq.next_batch_into(&mut idx);
                            // Samples found bad so far give way now (an error here is
                            // reported when the batch is taken).
                            let _ = skipped.replace_excluded(&mut idx);
                            source.read_ahead(&idx);
                            upcoming.push_back(idx);
                        }
                        let idx = upcoming.pop_front().expect("filled above");
                        let batch = source.read(&idx, batch_no, &stop);
                        batch_no += 1;
                        if !send_serving_rereads(&tx, (idx, batch), &reread_rx, &mut source, &stop) {
                            break;
                        }
                    }
                })
                .map_err(|e| Error::Unsupported(format!("{op}: cannot start the loader thread: {e}")))?
        };
        Ok(ReaderCore { op, meta, plan, skipped, rx: Some(rx), reread: Some(reread_tx), stop, handle: Some(handle) })
    }

    /// The batch of `iteration` (waits for the loader thread). An iteration asked for again
    /// (`on_error="skip"` found a bad sample in it) is read again with its excluded samples
    /// replaced, and so is a batch read ahead that holds a sample excluded since.
    pub fn next(&mut self, iteration: u64) -> Result<B> {
        if let Some(mut idx) = self.skipped.served_batch(iteration) {
            self.skipped.replace_excluded(&mut idx)?;
            self.skipped.served(iteration, &idx);
            return self.read_again(idx, iteration);
        }
        let rx = self.rx.as_ref().expect("receiver lives until drop");
        let (mut idx, batch) = rx.recv().map_err(|_| Error::Unsupported(format!("{}: the loader thread stopped", self.op)))?;
        let replaced = self.skipped.replace_excluded(&mut idx);
        self.skipped.served(iteration, &idx);
        if replaced? {
            return self.read_again(idx, iteration);
        }
        batch
    }

    /// Reads `idx` on the loader thread, ahead of what it reads next.
    fn read_again(&self, idx: Vec<usize>, iteration: u64) -> Result<B> {
        let (reply_tx, reply_rx) = bounded(1);
        let stopped = || Error::Unsupported(format!("{}: the loader thread stopped", self.op));
        let sender = self.reread.as_ref().expect("lives until drop");
        sender.send((idx, iteration, reply_tx)).map_err(|_| stopped())?;
        reply_rx.recv().map_err(|_| stopped())?
    }

    /// See [`crate::ops::Operator::reader_meta`].
    pub fn meta(&self) -> ReaderMeta {
        self.meta.clone()
    }

    /// See [`crate::ops::Operator::batch_plan`].
    pub fn plan(&self) -> Option<Arc<Mutex<BatchPlan>>> {
        self.plan.clone()
    }

    /// See [`crate::ops::Operator::skipped`].
    pub fn skipped(&self) -> Arc<Skipped> {
        self.skipped.clone()
    }
}

/// Sends `loaded` on `tx`, reading the batches asked for again meanwhile; false once the
/// operator is gone or the pipeline stops.
fn send_serving_rereads<S: BatchSource>(
    tx: &Sender<Loaded<S::Batch>>,
    loaded: Loaded<S::Batch>,
    rereads: &Receiver<Reread<S::Batch>>,
    source: &mut S,
    stop: &AtomicBool,
) -> bool {
    let mut loaded = Some(loaded);
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let mut sel = Select::new();
        let send = sel.send(tx);
        let reread = sel.recv(rereads);
        let oper = sel.select();
        match oper.index() {
            i if i == send => return oper.send(tx, loaded.take().expect("sent once")).is_ok(),
            i if i == reread => match oper.recv(rereads) {
                Ok((idx, iteration, reply)) => {
                    let _ = reply.send(source.read(&idx, iteration, stop));
                }
                Err(_) => return false,
            },
            _ => unreachable!("two operations"),
        }
    }
}

impl<B> Drop for ReaderCore<B> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver and the re-read sender wakes a loader blocked in `send`.
        drop(self.rx.take());
        drop(self.reread.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A reader whose loader thread reads its outputs whole (file, tfrecord, webdataset) is the
/// operator itself.
impl Operator for ReaderCore<Vec<TensorList>> {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        self.next(ws.iteration)
    }

    fn reader_meta(&self) -> Option<ReaderMeta> {
        Some(self.meta())
    }

    fn batch_plan(&self) -> Option<Arc<Mutex<BatchPlan>>> {
        self.plan()
    }

    fn skipped(&self) -> Option<Arc<Skipped>> {
        Some(self.skipped())
    }
}

/// A reader operator made by `make`, at once or, with `lazy_init`, when it is first used
/// (run, or asked for its metadata): listing a large data set then waits until it is needed.
/// An error in the deferred making comes from `run`, and making is tried again next time.
pub fn lazily(ctx: &OpContext, make: fn(&OpContext) -> Result<Box<dyn Operator>>) -> Result<Box<dyn Operator>> {
    if !ctx.args.bool("lazy_init") {
        return make(ctx);
    }
    Ok(Box::new(Lazy { ctx: ctx.clone(), make, inner: Mutex::new(None) }))
}

struct Lazy {
    ctx: OpContext,
    make: fn(&OpContext) -> Result<Box<dyn Operator>>,
    inner: Mutex<Option<Box<dyn Operator>>>,
}

impl Lazy {
    fn with<T>(&self, f: impl FnOnce(&mut dyn Operator) -> T) -> Result<T> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.is_none() {
            *inner = Some((self.make)(&self.ctx)?);
        }
        Ok(f(inner.as_deref_mut().expect("made above")))
    }
}

impl Operator for Lazy {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        self.with(|op| op.run(ws))?
    }

    fn reader_meta(&self) -> Option<ReaderMeta> {
        self.with(|op| op.reader_meta()).ok().flatten()
    }

    fn batch_plan(&self) -> Option<Arc<Mutex<BatchPlan>>> {
        self.with(|op| op.batch_plan()).ok().flatten()
    }

    fn skipped(&self) -> Option<Arc<Skipped>> {
        self.with(|op| op.skipped()).ok().flatten()
    }
}

/// Reads up to `dst.len()` bytes of `f` at `offset`; returns how many there were.
pub fn read_at_most(f: &std::fs::File, dst: &mut [u8], offset: u64) -> std::result::Result<usize, String> {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < dst.len() {
        match f.read_at(&mut dst[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read file: {e}")),
        }
    }
    Ok(got)
}

/// Reads exactly `dst.len()` bytes of `f` at `offset` (`what` names them in the error).
pub fn read_exact_at(f: &std::fs::File, dst: &mut [u8], offset: u64, what: &str) -> std::result::Result<(), String> {
    let got = read_at_most(f, dst, offset)?;
    if got < dst.len() {
        return Err(format!("truncated file: {got} of {what}'s {} bytes could be read", dst.len()));
    }
    Ok(())
}

/// [`BatchSource::read_ahead`] for formats read with [`read_spans`]: starts the requests for
/// the samples `idx` whose files are in object storage (nothing is allocated for local ones).
pub fn read_ahead_spans(files: &[Source], idx: &[usize], span: impl Fn(usize) -> (u32, u64, u64)) {
    let reads: Vec<(&Source, u64, u64)> =
        idx.iter().map(|&k| span(k)).map(|(f, offset, len)| (&files[f as usize], offset, len)).filter(|r| r.0.is_remote()).collect();
    if !reads.is_empty() {
        crate::storage::read_ahead_ranges(&reads);
    }
}

/// Reads the byte ranges of a batch's samples (`span(k)`: file, offset, length of sample `k`)
/// back to back into `scratch`, on several threads for large batches (or all requested at
/// once from object storage), and runs `check` on each as it is read (framing, CRCs).
/// Returns, per sample, where its bytes start in `scratch` and what `check` gave.
/// `located(i, k, message)` makes the error of sample `i` (index `k`).
#[allow(clippy::too_many_arguments)]
pub fn read_spans<T: Send + Default>(
    files: &[Source],
    idx: &[usize],
    span: impl Fn(usize) -> (u32, u64, u64),
    scratch: &mut Vec<u8>,
    threads: usize,
    stop: &AtomicBool,
    located: impl Fn(usize, usize, String) -> Error + Sync,
    check: impl Fn(&[u8]) -> std::result::Result<T, String> + Sync,
) -> Result<Vec<(usize, T)>> {
    let spans: Vec<(u32, u64, u64)> = idx.iter().map(|&k| span(k)).collect();
    let total: usize = spans.iter().map(|s| s.2 as usize).sum();
    scratch.resize(total, 0);
    let mut found: Vec<(usize, T)> = spans.iter().scan(0, |at, s| { let start = *at; *at += s.2 as usize; Some((start, T::default())) }).collect();
    let mut slots = Vec::with_capacity(idx.len());
    let mut rest = &mut scratch[..];
    for ((i, s), f) in spans.iter().enumerate().zip(found.iter_mut()) {
        let (dst, tail) = rest.split_at_mut(s.2 as usize);
        slots.push((i, dst, f));
        rest = tail;
    }
    let remote = spans.iter().any(|s| files[s.0 as usize].is_remote());
    if remote {
        // Every range requested at once; then the checks on the read threads.
        let mut jobs: Vec<(&Source, u64, &mut [u8])> = slots.iter_mut().map(|(i, dst, _)| (&files[spans[*i].0 as usize], spans[*i].1, &mut **dst)).collect();
        crate::storage::read_many(&mut jobs, threads, |i, m| located(i, idx[i], m))?;
    }
    read_in_parallel(&mut slots, threads, total, |s| s.1.len(), |(i, dst, f)| {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::Unsupported("the reader stopped".into()));
        }
        let (file, offset, _) = spans[*i];
        let fail = |m| located(*i, idx[*i], m);
        if !remote {
            files[file as usize].read_exact_at(dst, offset, "the record").map_err(fail)?;
        }
        f.1 = check(dst).map_err(|m| located(*i, idx[*i], m))?;
        Ok(())
    })?;
    Ok(found)
}

/// Most threads one batch is read with: page-cache copies stop scaling well before this.
pub const MAX_READ_THREADS: usize = 8;

/// Batches smaller than this are read by the loader thread alone (starting threads would
/// cost more than they save).
pub const PARALLEL_READ_BYTES: usize = 8 << 20;

/// Runs `read(item)` (a read, or a copy) for every item, on up to `threads` scoped threads
/// when `total_bytes` is worth it: contiguous runs of items of about the same number of bytes (`bytes(item)`),
/// one per thread. Returns the error of the lowest failing item, whichever thread met it.
pub fn read_in_parallel<T: Send>(
    items: &mut [T],
    threads: usize,
    total_bytes: usize,
    bytes: impl Fn(&T) -> usize,
    read: impl Fn(&mut T) -> Result<()> + Sync,
) -> Result<()> {
    let threads = if total_bytes < PARALLEL_READ_BYTES { 1 } else { threads.clamp(1, MAX_READ_THREADS).min(items.len()) };
    let read_run = |run: &mut [T]| -> Result<()> { run.iter_mut().try_for_each(&read) };
    if threads <= 1 {
        return read_run(items);
    }
    let per_thread = total_bytes.div_ceil(threads);
    let mut runs = Vec::with_capacity(threads);
    let mut rest: &mut [T] = items;
    while !rest.is_empty() {
        let (mut n, mut sum) = (0, 0);
        while n < rest.len() && (n == 0 || sum + bytes(&rest[n]) <= per_thread) {
            sum += bytes(&rest[n]);
            n += 1;
        }
        let (run, tail) = rest.split_at_mut(n);
        runs.push(run);
        rest = tail;
    }
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = runs.into_iter().map(|run| s.spawn(|| read_run(run))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Unsupported("a read thread panicked".into())))).collect()
    });
    // Runs are in item order: the first error is the lowest item's.
    results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
}
