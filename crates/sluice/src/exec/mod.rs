//! The executor: runs iterations of a built graph off the caller's thread, with the
//! pipeline's `num_threads` CPU workers, and keeps up to `prefetch_queue_depth` finished
//! batches ready. A failed iteration is reported at the `run()` that asks for it; the next
//! iteration runs as usual, so one bad file never stops the pipeline.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use sluice_cuda::{CudaStream, GpuDevice};

mod bad_samples;
mod frames;
pub use bad_samples::{BadLog, BadSample, ErrorPolicy, OnError};

use crate::error::{Error, Result};
use crate::graph::{Edge, Graph, Node, PipelineSpec};
use crate::ops::external_source::Feed;
use crate::ops::readers::loader::BatchPlan;
use crate::ops::readers::skip::Skipped;
use crate::ops::{Device, GpuOperator, GpuWorkspace, OpContext, Operator, ReaderMeta, Workspace};
use crate::tensor::{Batch, BatchMeta, ReadyEvent, TensorList, TensorListGpu};

use frames::Frames;

/// Time spent in one operator since the pipeline was built.
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    pub name: String,
    pub calls: u64,
    pub total: Duration,
}

enum Backend {
    Cpu(Box<dyn Operator>),
    /// Mixed (host in, device out) or GPU.
    Gpu(Box<dyn GpuOperator>, Device),
}

struct Instance {
    ctx: OpContext,
    backend: Backend,
    inputs: Vec<Edge>,
    arg_inputs: Vec<(String, Edge)>,
    /// The schema's `host_inputs`: inputs a gpu backend reads on the host...
    host_inputs: &'static [usize],
    /// ...unless listed here and given on the GPU ([`crate::ops::gpu_or_host_inputs`]).
    gpu_or_host_inputs: &'static [usize],
    /// Arguments that take per-frame values (of every part of a fused node).
    per_frame_args: Vec<&'static str>,
    /// When it runs frame by frame besides for per-frame arguments.
    sequence_rules: crate::ops::SequenceRules,
}

/// The GPU the pipeline runs on and its stream.
struct GpuStage {
    device: Arc<GpuDevice>,
    stream: Arc<CudaStream>,
}

/// One iteration's operator outputs, by operator (None: not run yet).
type Results = Vec<Option<Vec<Batch>>>;

/// An iteration's front run ahead: its batch size and outputs, or the error it met.
type Front = Result<(usize, Results)>;

/// Owns the built operators and runs one iteration at a time.
///
/// Operators that start early (the mixed decoders, see [`GpuOperator::starts_early`]) and
/// the CPU operators they depend on form the iteration's *front*. An asynchronous pipeline
/// runs iteration n+1's front before the rest of iteration n, so the hardware JPEG engine
/// is handed batch n+1 while batch n's CPU share decodes and its later GPU operators are
/// planned: the engine never waits for the pipeline thread. Nothing changes in the
/// outputs: every random stream is keyed by iteration and sample, not by call order.
struct Runner {
    ops: Vec<Instance>,
    outputs: Vec<Edge>,
    pool: rayon::ThreadPool,
    gpu: Option<GpuStage>,
    batch_size: usize,
    iteration: u64,
    stats: Arc<Mutex<Vec<OpStats>>>,
    /// Per operator: part of the front.
    front: Vec<bool>,
    /// Run the next iteration's front ahead (asynchronous pipelines that have a front).
    run_ahead: bool,
    /// The next iteration's front, run ahead, and the operator it failed in.
    ahead: Option<(u64, Front, Option<usize>)>,
    /// The external sources' queues, staged at the start of each iteration.
    feeds: Vec<Arc<Feed>>,
    /// Readers whose batches vary in size (see `Operator::batch_plan`), by name.
    plans: Vec<(String, Arc<Mutex<BatchPlan>>)>,
    /// Wait for fed data (the asynchronous producer, which runs ahead of what is asked
    /// for); otherwise an iteration without data fails at once (see `Executor::next_batch`).
    wait_for_feeds: bool,
    /// Bad samples: the policies, the readers' excluded samples and the record.
    bad: BadSamples,
    /// The operator whose error the last run met.
    failed_op: Option<usize>,
    /// `on_error="replace"`: (iteration, operator, place) whose input another sample of
    /// the batch stands in for, and whose outputs are zeroed.
    stand_ins: Vec<(u64, usize, usize)>,
    /// The batch sizes of the last iterations staged (an iteration run again reuses its).
    staged: std::collections::VecDeque<(u64, usize)>,
}

/// What `on_error` needs in the runner.
pub(crate) struct BadSamples {
    pub policy: ErrorPolicy,
    /// Per operator: its own `on_error`.
    pub op_policy: Vec<Option<OnError>>,
    /// Per operator: the readers it reads from (itself included), with their excluded
    /// samples.
    pub readers_of: Vec<Vec<(usize, Arc<Skipped>)>>,
    pub log: Arc<Mutex<BadLog>>,
}

impl BadSamples {
    /// The policy for a sample operator `k` failed on: its own, else that of a reader it
    /// reads from, else the pipeline's.
    fn policy_for(&self, k: usize) -> OnError {
        self.op_policy[k].or_else(|| self.readers_of[k].iter().find_map(|(r, _)| self.op_policy[*r])).unwrap_or(self.policy.on_error)
    }
}

impl Runner {
    /// `run_ahead`: an asynchronous pipeline, which runs the next iteration's front early
    /// when it has one.
    fn new(
        ops: Vec<Instance>,
        outputs: Vec<Edge>,
        pool: rayon::ThreadPool,
        gpu: Option<GpuStage>,
        batch_size: usize,
        stats: Arc<Mutex<Vec<OpStats>>>,
        run_ahead: bool,
        wait_for_feeds: bool,
        bad: BadSamples,
    ) -> Runner {
        // The front: operators that start early, and everything they read from. Such an
        // operator takes only CPU inputs, so its ancestors are all CPU operators.
        let starts_early = |inst: &Instance| matches!(&inst.backend, Backend::Gpu(op, _) if op.starts_early());
        let mut front: Vec<bool> = ops.iter().map(starts_early).collect();
        for k in (0..ops.len()).rev() {
            if front[k] {
                for e in ops[k].inputs.iter().chain(ops[k].arg_inputs.iter().map(|(_, e)| e)) {
                    front[e.op] = true;
                }
            }
        }
        let ancestors_on_cpu = ops.iter().zip(&front).all(|(inst, &f)| !f || matches!(inst.backend, Backend::Cpu(_)) || starts_early(inst));
        if !ancestors_on_cpu {
            front.iter_mut().for_each(|f| *f = false);
        }
        let run_ahead = run_ahead && front.contains(&true);
        let feeds = ops.iter().filter_map(|inst| inst.feed()).collect();
        let plans = ops.iter().filter_map(|inst| inst.batch_plan()).collect();
        Runner {
            ops, outputs, pool, gpu, batch_size, iteration: 0, stats, front, run_ahead, ahead: None, feeds, plans, wait_for_feeds,
            bad, failed_op: None, stand_ins: Vec::new(), staged: Default::default(),
        }
    }

    fn run_iteration(&mut self) -> Result<Vec<Batch>> {
        let iteration = self.iteration;
        let ahead = self.ahead.take().filter(|(it, _, _)| *it == iteration);
        self.failed_op = None;
        // Staged before the iteration counts: an iteration without data fails here and is
        // run again once data is fed.
        let front = match ahead {
            Some((_, front, failed)) => {
                self.failed_op = failed;
                front
            }
            None => {
                let batch_size = self.stage(iteration)?;
                self.run_front(iteration, batch_size).map(|r| (batch_size, r))
            }
        };
        self.iteration += 1;
        let front_failed = self.failed_op.take();
        // The next front runs ahead only when its data is there: waiting for it here would
        // hold back this iteration (the caller feeds the next batch after taking this one).
        if self.run_ahead && self.feeds.iter().all(|f| f.ready()) {
            let next = self.stage(iteration + 1).and_then(|n| self.run_front(iteration + 1, n).map(|r| (n, r)));
            let failed = self.failed_op.take();
            self.ahead = Some((iteration + 1, next, failed));
        }
        self.failed_op = front_failed;
        let mut out = front.and_then(|(batch_size, results)| self.run_rest(iteration, batch_size, results));
        // on_error="skip" or "replace": the bad sample is excluded (or stood in for) and the
        // iteration runs again.
        while let Err(e) = &out {
            match self.handle_bad_sample(iteration, e) {
                Ok(true) => out = self.run_again(iteration),
                Ok(false) => break,
                Err(limit) => {
                    out = Err(limit);
                    break;
                }
            }
        }
        for f in &self.feeds {
            f.discard_through(iteration);
        }
        self.stand_ins.retain(|(it, _, _)| *it > iteration);
        out
    }

    /// Under `on_error="skip"`, excludes the sample the error of the last run names from the
    /// readers it came from; under `"replace"`, has another sample of the batch stand in for
    /// it in the failing operator (or, for a reader, read in its place), whose outputs there
    /// are then zeroed. Records it; whether the iteration should run again. An error past
    /// `max_bad_samples`.
    fn handle_bad_sample(&mut self, iteration: u64, e: &Error) -> Result<bool> {
        let Some(k) = self.failed_op.take() else {
            return Ok(false);
        };
        let Some(location) = e.location() else {
            return Ok(false);
        };
        let Some(slot) = location.sample else {
            return Ok(false);
        };
        let action = self.bad.policy_for(k);
        match action {
            OnError::Raise => return Ok(false),
            OnError::Skip => {
                let mut excluded_new = false;
                for (_, skipped) in &self.bad.readers_of[k] {
                    excluded_new |= skipped.exclude(iteration, slot).is_some_and(|(_, new)| new);
                }
                if !excluded_new {
                    // Nothing to replace (no reader behind the sample), or the same sample again.
                    return Ok(false);
                }
            }
            OnError::Replace => {
                if self.stand_ins.contains(&(iteration, k, slot)) {
                    return Ok(false); // the stand-in failed too
                }
                let reader = self.bad.readers_of[k].iter().find(|(r, _)| *r == k);
                let can = match (reader, &self.ops[k].backend) {
                    (Some((_, skipped)), _) => skipped.stand_in(iteration, slot),
                    (None, Backend::Cpu(_)) | (None, Backend::Gpu(_, Device::Mixed)) => true,
                    // A GPU operator's inputs are on the device: no stand-in there.
                    (None, Backend::Gpu(..)) => false,
                };
                if !can {
                    return Ok(false);
                }
                self.stand_ins.push((iteration, k, slot));
            }
        }
        let mut log = self.bad.log.lock().unwrap_or_else(|p| p.into_inner());
        log.record(BadSample {
            iteration,
            sample: slot,
            operator: location.operator.clone(),
            operator_index: k,
            source: location.source.clone(),
            error: e.to_string(),
            action,
        });
        match self.bad.policy.max_bad_samples {
            Some(max) if log.samples.len() as u64 > max => Err(Error::data(
                location.clone(),
                format!(
                    "on_error=\"{}\": {} bad samples, more than max_bad_samples={max}; this one: {e}",
                    action.name(),
                    log.samples.len()
                ),
            )),
            _ => Ok(true),
        }
    }

    /// Runs `iteration` again (its readers read their batches again, with the samples
    /// excluded since replaced). The next iteration's early operators, if started ahead,
    /// are started again: this run's start dropped them.
    fn run_again(&mut self, iteration: u64) -> Result<Vec<Batch>> {
        self.failed_op = None;
        let batch_size = self
            .staged
            .iter()
            .find(|(it, _)| *it == iteration)
            .map_or(self.batch_size, |(_, n)| *n);
        let out = self
            .run_front(iteration, batch_size)
            .and_then(|results| self.run_rest(iteration, batch_size, results));
        let failed = self.failed_op.take();
        if let Some((next, Ok((n, results)), _)) = self.ahead.take() {
            let restarted = self.start_early(next, n, &results);
            let failed_next = self.failed_op.take();
            self.ahead = Some((next, restarted.map(|()| (n, results)), failed_next));
        }
        self.failed_op = failed;
        out
    }

    /// Starts the early operators of `iteration` whose inputs `results` holds.
    fn start_early(&mut self, iteration: u64, batch_size: usize, results: &Results) -> Result<()> {
        for k in 0..self.ops.len() {
            if self.front[k] && matches!(self.ops[k].backend, Backend::Gpu(..)) {
                self.run_op(k, iteration, batch_size, results, true)?;
            }
        }
        Ok(())
    }

    /// The batch size of `iteration`: that of the batches fed for it, staged now (one per
    /// external source), or the size planned by readers whose batches vary, or the
    /// pipeline's. Sources and planned readers must agree.
    fn stage(&mut self, iteration: u64) -> Result<usize> {
        let n = self.stage_sizes(iteration)?;
        if self.staged.len() >= 4 {
            self.staged.pop_front();
        }
        self.staged.push_back((iteration, n));
        Ok(n)
    }

    fn stage_sizes(&mut self, iteration: u64) -> Result<usize> {
        let mut planned: Option<(usize, &str)> = None;
        for (name, plan) in &self.plans {
            let n = plan.lock().expect("batch plan").size_at(iteration);
            match planned {
                Some((m, other)) if m != n => {
                    return Err(Error::Unsupported(format!(
                        "the readers '{other}' and '{name}' give batches of {m} and {n} samples at iteration {iteration}: \
                         readers that leave out padding must agree on every batch's size"
                    )))
                }
                _ => planned = planned.or(Some((n, name.as_str()))),
            }
        }
        if self.feeds.is_empty() {
            return Ok(planned.map_or(self.batch_size, |(n, _)| n));
        }
        if !self.wait_for_feeds {
            // Synchronous: this iteration is the one the caller asked for.
            for f in &self.feeds {
                f.request(iteration + 1);
            }
            if let Some(f) = self.feeds.iter().find(|f| !f.blocking && !f.has_next()) {
                return Err(f.no_data(iteration));
            }
        }
        let mut first: Option<(usize, &str)> = None;
        for f in &self.feeds {
            let staged = f.stage(iteration, true).and_then(|n| match first {
                _ if f.any_batch_size => Ok(n),
                Some((m, other)) if m != n => Err(Error::Input {
                    name: f.name().into(),
                    message: format!(
                        "batch size clash: the external source '{}' gave a batch of {n} samples for iteration {iteration}, \
                         but '{other}' gave {m}; every source must give the same number of samples each iteration",
                        f.name()
                    ),
                }),
                _ => Ok(n),
            });
            match staged {
                Ok(n) => first = first.or(Some((n, f.name()))),
                Err(e) => {
                    for f in &self.feeds {
                        f.discard_through(iteration);
                    }
                    return Err(e);
                }
            }
        }
        match (first, planned) {
            (Some((n, source)), Some((m, reader))) if n != m => {
                for f in &self.feeds {
                    f.discard_through(iteration);
                }
                Err(Error::Input {
                    name: source.into(),
                    message: format!(
                        "batch size clash: the external source '{source}' gave {n} samples for iteration {iteration}, \
                         but the reader '{reader}' reads {m}"
                    ),
                })
            }
            _ => Ok(first.or(planned).map_or(self.batch_size, |(n, _)| n)),
        }
    }

    /// Runs what the front left of `iteration`.
    fn run_rest(&mut self, iteration: u64, batch_size: usize, mut results: Results) -> Result<Vec<Batch>> {
        for k in 0..self.ops.len() {
            if !(self.front[k] && matches!(self.ops[k].backend, Backend::Cpu(_))) {
                results[k] = Some(self.run_op(k, iteration, batch_size, &results, false)?);
            }
        }
        let mut outputs: Vec<Batch> = self.outputs.iter().map(|e| output(&results, e).clone()).collect();
        if let Some(stage) = &self.gpu {
            if outputs.iter().any(|b| matches!(b, Batch::Gpu(_))) {
                // One event marks the end of the iteration's GPU work; consumers wait on it
                // (on their own stream), never on the whole device.
                let ev = Arc::new(ReadyEvent::record(&stage.device, &stage.stream)?);
                for b in &mut outputs {
                    if let Batch::Gpu(t) = b {
                        t.set_ready(ev.clone());
                    }
                }
            }
        }
        Ok(outputs)
    }

    /// Runs the front's CPU operators and starts its early operators for `iteration`.
    fn run_front(&mut self, iteration: u64, batch_size: usize) -> Result<Results> {
        let mut results: Results = vec![None; self.ops.len()];
        for k in 0..self.ops.len() {
            if self.front[k] {
                let early = matches!(self.ops[k].backend, Backend::Gpu(..));
                let out = self.run_op(k, iteration, batch_size, &results, early)?;
                results[k] = Some(out).filter(|_| !early);
            }
        }
        Ok(results)
    }

    /// Runs operator `k` on `results` (its inputs are there), or with `start` only begins
    /// it (an early operator: nothing to return yet; its time counts, its call does not).
    fn run_op(&mut self, k: usize, iteration: u64, batch_size: usize, results: &Results, start: bool) -> Result<Vec<Batch>> {
        let inst = &mut self.ops[k];
        // An operator's batch is that of its first input, else of its first argument input,
        // else the iteration's (readers, generators). Inside an `if` branch of a conditional
        // pipeline the inputs hold only the branch's samples.
        let batch_size = inst.inputs.first().or(inst.arg_inputs.first().map(|(_, e)| e)).map_or(batch_size, |e| output(results, e).meta().len());
        // on_error="replace": the places another sample of the batch stands in for.
        let stand_in: Vec<usize> = self
            .stand_ins
            .iter()
            .filter(|(it, op, _)| *it == iteration && *op == k)
            .map(|(_, _, slot)| *slot)
            .collect();
        let on_gpu = |n: usize| matches!(output(results, &inst.inputs[n]), Batch::Gpu(_));
        let host = |n: usize| match &inst.backend {
            Backend::Cpu(_) => true,
            Backend::Gpu(_, d) => *d == Device::Mixed || (inst.host_inputs.contains(&n) && !(inst.gpu_or_host_inputs.contains(&n) && on_gpu(n))),
        };
        let read_on_host: Vec<bool> = (0..inst.inputs.len()).map(host).collect();
        // GPU data read on the host (`.cpu()` in a dynamic pipeline; the graph allowed it):
        // downloaded once the work producing it is done.
        let downloaded: Vec<Option<TensorList>> = match download_host_reads(&self.gpu, &inst.inputs, &read_on_host, results) {
            Ok(d) => d,
            Err(e) => {
                self.failed_op = Some(k);
                return Err(e);
            }
        };
        let host_batch = |n: usize, e: &Edge| -> &TensorList { downloaded.get(n).and_then(Option::as_ref).unwrap_or_else(|| output(results, e).cpu()) };
        let stood_in: Vec<Option<TensorList>> = if stand_in.is_empty() {
            Vec::new()
        } else {
            inst.inputs
                .iter()
                .enumerate()
                .map(|(n, e)| {
                    host(n)
                        .then(|| with_stand_ins(&self.pool, host_batch(n, e), &stand_in))
                        .transpose()
                })
                .collect::<Result<_>>()?
        };
        let input_of = |n: usize, e: &Edge| -> &TensorList { stood_in.get(n).and_then(Option::as_ref).unwrap_or_else(|| host_batch(n, e)) };
        let mut arg_inputs: HashMap<&str, &TensorList> = inst.arg_inputs.iter().map(|(n, e)| (n.as_str(), output(results, e).cpu())).collect();
        // Per-frame arguments: the operator runs on the frames of the batch's sequences.
        let metas: Vec<&BatchMeta> = inst.inputs.iter().map(|e| output(results, e).meta()).collect();
        let pool = &self.pool;
        let unfolded = Frames::plan(&inst.ctx.display_name, &inst.per_frame_args, inst.sequence_rules, &metas, &arg_inputs).and_then(|frames| {
            let Some(f) = &frames else { return Ok((frames, Vec::new(), Vec::new(), HashMap::new())) };
            let (mut gpu, mut host_side) = (Vec::new(), Vec::new());
            for (n, e) in inst.inputs.iter().enumerate() {
                gpu.push(if host(n) { None } else { Some(f.input(pool, output(results, e))?) });
                host_side.push(if host(n) { Some(f.host_input(pool, input_of(n, e))?) } else { None });
            }
            let args = arg_inputs.iter().map(|(n, t)| Ok((*n, f.argument(pool, t, inst.per_frame_args.contains(n))?))).collect::<Result<HashMap<&str, TensorList>>>()?;
            Ok((frames, gpu, host_side, args))
        });
        let (frames, frame_inputs, frame_host_inputs, frame_args) = match unfolded {
            Ok(u) => u,
            Err(e) => {
                self.failed_op = Some(k);
                return Err(e);
            }
        };
        if frames.is_some() {
            arg_inputs = frame_args.iter().map(|(n, t)| (*n, t)).collect();
        }
        let batch_size = frames.as_ref().map_or(batch_size, |f| f.total());
        let input_of = |n: usize, e: &Edge| -> &TensorList {
            match frame_host_inputs.get(n) {
                Some(Some(t)) => t,
                _ => input_of(n, e),
            }
        };
        let gpu_input_of = |n: usize, e: &Edge| -> &TensorListGpu { frame_inputs.get(n).and_then(Option::as_ref).map_or_else(|| output(results, e).gpu(), Batch::gpu) };
        let begun = Instant::now();
        let (pool, gpu) = (&self.pool, &self.gpu);
        // A panic in an operator is a bug, but it must not take the user's process down.
        let out = catch_unwind(AssertUnwindSafe(|| -> Result<Vec<Batch>> {
            match &mut inst.backend {
                Backend::Cpu(op) => {
                    let ws = Workspace {
                        inputs: inst.inputs.iter().enumerate().map(|(n, e)| input_of(n, e)).collect(),
                        arg_inputs,
                        iteration,
                        batch_size,
                        frames: frames.as_ref().and_then(Frames::counts),
                        pool,
                    };
                    Ok(op.run(&ws)?.into_iter().map(Batch::Cpu).collect())
                }
                Backend::Gpu(op, _) => {
                    let stage = gpu.as_ref().expect("GPU stage exists when the graph has GPU operators");
                    // Mixed operators read every input on the host, gpu operators those their
                    // schema names (`host_inputs`, less those given on the GPU that it takes
                    // there too); the graph checked where each one lives.
                    let on_host = |k: &usize| read_on_host[*k];
                    let inputs = || inst.inputs.iter().enumerate();
                    let ws = GpuWorkspace {
                        cpu_inputs: inputs().filter(|(k, _)| on_host(k)).map(|(k, e)| input_of(k, e)).collect(),
                        gpu_inputs: inputs().filter(|(k, _)| !on_host(k)).map(|(k, e)| gpu_input_of(k, e)).collect(),
                        arg_inputs,
                        iteration,
                        batch_size,
                        frames: frames.as_ref().and_then(Frames::counts),
                        pool,
                        device: &stage.device,
                        stream: &stage.stream,
                    };
                    if start {
                        op.start(&ws)?;
                        return Ok(Vec::new());
                    }
                    Ok(op.run(&ws)?.into_iter().map(Batch::Gpu).collect())
                }
            }
        }))
        .unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Unsupported(format!("internal error in {} at iteration {iteration}: {msg} (please report this)", inst.ctx.display_name)))
        });
        let out = match &frames {
            Some(f) if !start => out.and_then(|o| o.into_iter().map(|b| f.output(&inst.ctx.display_name, b)).collect()).map_err(|e| f.locate(e)),
            _ => out,
        };
        let mut out = match out {
            Ok(out) => out,
            Err(e) => {
                self.failed_op = Some(k);
                return Err(e);
            }
        };
        for b in &mut out {
            zero_samples(b, &stand_in)?;
        }
        if trace_ops() {
            let (at, took) = (trace_clock(begun), begun.elapsed().as_secs_f64() * 1e3);
            eprintln!("[exec] it {iteration} {}{} at {at:.2} took {took:.2} ms", inst.ctx.display_name, if start { " (start)" } else { "" });
        }
        if let Ok(mut s) = self.stats.lock() {
            s[k].calls += !start as u64;
            s[k].total += begun.elapsed();
        }
        Ok(out)
    }
}

impl Instance {
    fn feed(&self) -> Option<Arc<Feed>> {
        match &self.backend {
            Backend::Cpu(op) => op.feed(),
            Backend::Gpu(op, _) => op.feed(),
        }
    }

    /// A reader's plan of batch sizes, with its name.
    fn batch_plan(&self) -> Option<(String, Arc<Mutex<BatchPlan>>)> {
        match &self.backend {
            Backend::Cpu(op) => op.batch_plan().map(|p| (self.ctx.instance_name.clone(), p)),
            Backend::Gpu(..) => None,
        }
    }
}

/// Host copies of the inputs read on the host (`read_on_host`) whose batches are on the
/// GPU; None for the rest. The stream is synchronized first: the operators that produced
/// them queued their work on it.
fn download_host_reads(gpu: &Option<GpuStage>, inputs: &[Edge], read_on_host: &[bool], results: &Results) -> Result<Vec<Option<TensorList>>> {
    let mut out = Vec::with_capacity(inputs.len());
    let mut synchronized = false;
    for (e, &host) in inputs.iter().zip(read_on_host) {
        match output(results, e) {
            Batch::Gpu(t) if host => {
                if !synchronized {
                    gpu.as_ref().expect("GPU batches come from the GPU stage").stream.synchronize().map_err(sluice_cuda::CudaError::from)?;
                    synchronized = true;
                }
                out.push(Some(t.to_host()?));
            }
            _ => out.push(None),
        }
    }
    Ok(out)
}

/// The batch an edge carries (its operator ran before: the graph is in topological order).
fn output<'r>(results: &'r Results, e: &Edge) -> &'r Batch {
    &results[e.op].as_ref().expect("inputs run before their consumers")[e.output]
}

enum Mode {
    /// Iterations run inside `run()` (exec_async=False or exec_pipelined=False).
    Sync(Box<Runner>),
    /// Iterations run ahead on a producer thread into a bounded queue.
    Async { rx: Receiver<Result<Vec<Batch>>>, stop: Arc<AtomicBool>, handle: Option<JoinHandle<()>> },
}

/// A built, running pipeline.
pub struct Executor {
    mode: Mode,
    readers: Vec<(String, ReaderMeta)>,
    /// The external sources' queues (by instance name: `Feed::name`).
    feeds: Vec<Arc<Feed>>,
    /// Iterations asked for by `next_batch` so far.
    requested: u64,
    /// The pipeline's GPU, when it has GPU operators.
    gpu_device: Option<Arc<GpuDevice>>,
    stats: Arc<Mutex<Vec<OpStats>>>,
    graph: Graph,
    /// Where the pipeline started: iteration 0, or a checkpoint's position.
    resumed: Checkpoint,
    batch_size: u64,
    /// The samples skipped (on_error="skip") and each reader's excluded samples.
    bad_log: Arc<Mutex<BadLog>>,
    reader_skips: Vec<(String, Arc<Skipped>)>,
}

/// The state a pipeline continues from: the iterations returned (which key every random
/// stream) and the samples each reader returned (by reader name, in graph order). Readers
/// move past that many samples when built; nothing else keeps state between iterations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub iteration: u64,
    pub readers: Vec<(String, u64)>,
    /// Samples `on_error="skip"` excluded, by reader name (they stay excluded).
    pub excluded: Vec<(String, Vec<u64>)>,
}

/// A checkpoint's readers must be the pipeline's: the same count, and where both have names
/// the user gave (not generated ones), the same names.
fn check_readers(saved: &[(String, u64)], readers: &[String]) -> Result<()> {
    let generated = |n: &str| n.starts_with("__");
    for (k, name) in readers.iter().enumerate() {
        match saved.get(k) {
            None => return Err(Error::Graph(format!("There's no checkpoint for operator \"{name}\". (The checkpoint comes from a pipeline with {} reader(s); this one has {}.)", saved.len(), readers.len()))),
            Some((s, _)) if s != name && !generated(s) && !generated(name) => {
                return Err(Error::Graph(format!("The executor doesn't recognize \"{s}\" as a name of an operator.\nThe checkpoint might come from another pipeline.")))
            }
            _ => {}
        }
    }
    if let Some((s, _)) = saved.get(readers.len()) {
        return Err(Error::Graph(format!("The executor doesn't recognize \"{s}\" as a name of an operator.\nThe checkpoint might come from another pipeline.")));
    }
    Ok(())
}

impl Executor {
    /// Checks the spec, builds every operator and, for asynchronous execution, starts the
    /// producer thread.
    pub fn new(spec: &PipelineSpec) -> Result<Executor> {
        Executor::restored(spec, None)
    }

    /// As [`Executor::new`], continuing from a checkpoint (see [`Checkpoint`]): the first
    /// batch is the one the checkpointed pipeline would have returned next.
    pub fn restored(spec: &PipelineSpec, from: Option<&Checkpoint>) -> Result<Executor> {
        let graph = Graph::build(spec)?;
        let reader_names: Vec<String> = graph.nodes.iter().filter(|n| n.def.schema.is_reader).map(|n| n.name.clone()).collect();
        if let Some(c) = from {
            check_readers(&c.readers, &reader_names)?;
        }
        let start = from.map_or(0, |c| c.iteration);
        // Samples each reader returned before, in graph order (all 0 without a checkpoint).
        let reader_samples: Vec<u64> = from.map_or_else(|| vec![0; reader_names.len()], |c| c.readers.iter().map(|(_, n)| *n).collect());
        let mut resume = reader_samples.iter().copied();
        let num_threads = spec.num_threads.max(1);
        let has_gpu_ops = graph.nodes.iter().any(|n| n.device != Device::Cpu);
        let nice = std::env::var("SLUICE_WORKER_NICE").ok().and_then(|v| v.parse().ok()).unwrap_or(if has_gpu_ops { GPU_WORKER_NICE } else { 0 });
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads)
            .thread_name(|i| format!("sluice-cpu-{i}"))
            .start_handler(move |_| lower_worker_priority(nice))
            .build()
            .map_err(|e| Error::Unsupported(format!("cannot start {num_threads} worker threads: {e}")))?;
        let gpu = if has_gpu_ops {
            let ordinal = spec.device_id.expect("graph checks keep GPU operators out of CPU-only pipelines");
            let device = GpuDevice::open(ordinal as usize)?;
            let stream = device.new_stream()?;
            Some(GpuStage { device, stream })
        } else {
            None
        };
        let mut ops = Vec::with_capacity(graph.nodes.len());
        let mut readers = Vec::new();
        // Per operator: a reader's excluded samples (on_error="skip").
        let mut skipped: Vec<Option<Arc<Skipped>>> = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            let resume_samples = if node.def.schema.is_reader { resume.next().unwrap_or(0) } else { 0 };
            let ctx = context(node, spec, num_threads, resume_samples);
            let backend = match node.device {
                Device::Cpu if !node.fused.is_empty() => {
                    let parts: Vec<_> = node.fused.iter().map(|n| (n.def, context(n, spec, num_threads, 0))).collect();
                    Backend::Cpu(crate::ops::fused::build_cpu(&parts)?)
                }
                Device::Cpu => {
                    let op = (node.def.cpu.expect("backend checked at build"))(&ctx)?;
                    if let Some(meta) = op.reader_meta() {
                        readers.push((node.name.clone(), meta));
                    }
                    skipped.push(op.skipped());
                    Backend::Cpu(op)
                }
                Device::Gpu if !node.fused.is_empty() => {
                    let parts: Vec<_> = node.fused.iter().map(|n| (n.def, context(n, spec, num_threads, 0))).collect();
                    Backend::Gpu(crate::ops::fused::build_gpu(&parts)?, Device::Gpu)
                }
                d => {
                    let factory = if d == Device::Mixed { node.def.mixed } else { node.def.gpu };
                    let device = &gpu.as_ref().expect("GPU stage opened above").device;
                    Backend::Gpu((factory.expect("backend checked at build"))(&ctx, device)?, d)
                }
            };
            skipped.resize(ops.len() + 1, None);
            ops.push(Instance {
                ctx,
                backend,
                inputs: node.inputs.clone(),
                arg_inputs: node.arg_inputs.clone(),
                host_inputs: node.def.schema.host_inputs,
                gpu_or_host_inputs: crate::ops::gpu_or_host_inputs(node.def),
                per_frame_args: std::iter::once(node)
                    .chain(&node.fused)
                    .flat_map(|n| n.def.schema.all_args())
                    .filter(|a| a.per_frame)
                    .map(|a| a.name)
                    .collect(),
                sequence_rules: crate::ops::sequence_rules(node.def),
            });
        }
        let stats = Arc::new(Mutex::new(
            graph.nodes.iter().map(|n| OpStats { name: n.name.clone(), ..Default::default() }).collect(),
        ));
        let bad = bad_samples_of(&ops, &skipped, spec.errors)?;
        let log = bad.log.clone();
        let reader_skips: Vec<(String, Arc<Skipped>)> = graph
            .nodes
            .iter()
            .zip(&skipped)
            .filter_map(|(n, s)| Some((n.name.clone(), s.clone()?)))
            .collect();
        if let Some(c) = from {
            for (name, samples) in &c.excluded {
                if let Some((_, s)) = reader_skips.iter().find(|(n, _)| n == name) {
                    s.exclude_all(samples.iter().map(|&k| k as usize));
                }
            }
        }
        let asynchronous = spec.exec_async && spec.exec_pipelined;
        let mut runner = Runner::new(
            ops,
            graph.outputs.clone(),
            pool,
            gpu,
            spec.batch_size,
            stats.clone(),
            asynchronous && run_ahead(),
            asynchronous,
            bad,
        );
        // Random streams are keyed by iteration: continuing the count continues them.
        runner.iteration = start;
        for f in &runner.feeds {
            f.start_at(start);
        }
        let feeds = runner.feeds.clone();
        let resumed = Checkpoint {
            iteration: start,
            readers: reader_names.into_iter().zip(reader_samples).collect(),
            excluded: Vec::new(),
        };
        let gpu_device = runner.gpu.as_ref().map(|g| g.device.clone());
        let mode = if asynchronous {
            start_producer(runner, spec.prefetch_queue_depth.max(1))?
        } else {
            Mode::Sync(Box::new(runner))
        };
        Ok(Executor {
            mode,
            readers,
            feeds,
            requested: start,
            gpu_device,
            stats,
            graph,
            resumed,
            batch_size: spec.batch_size as u64,
            bad_log: log,
            reader_skips,
        })
    }

    /// Where the pipeline stands after the batches returned so far: what a pipeline
    /// restored from it continues from. Batches prepared ahead do not count.
    pub fn checkpoint(&self) -> Checkpoint {
        let returned = match &self.mode {
            Mode::Sync(runner) => runner.iteration,
            Mode::Async { .. } => self.requested,
        };
        // A reader reads `batch_size` samples every iteration.
        let since = returned - self.resumed.iteration;
        Checkpoint {
            iteration: returned,
            readers: self
                .resumed
                .readers
                .iter()
                .map(|(name, n)| (name.clone(), n + since * self.batch_size))
                .collect(),
            excluded: self
                .reader_skips
                .iter()
                .map(|(name, s)| {
                    (
                        name.clone(),
                        s.excluded()
                            .into_iter()
                            .map(|k| k as u64)
                            .collect::<Vec<u64>>(),
                    )
                })
                .filter(|(_, v)| !v.is_empty())
                .collect(),
        }
    }

    /// The samples skipped so far (on_error="skip"), in iteration order, of the iterations
    /// returned (an asynchronous pipeline's batches prepared ahead do not count yet); and
    /// per operator, how many.
    pub fn bad_samples(&self) -> (Vec<BadSample>, Vec<u64>) {
        let returned = match &self.mode {
            Mode::Sync(runner) => runner.iteration,
            Mode::Async { .. } => self.requested,
        };
        let log = self.bad_log.lock().unwrap_or_else(|p| p.into_inner());
        let samples: Vec<BadSample> = log
            .samples
            .iter()
            .filter(|b| b.iteration < returned)
            .cloned()
            .collect();
        let mut per_op = vec![0u64; self.graph.nodes.len()];
        for b in &samples {
            per_op[b.operator_index] += 1;
        }
        (samples, per_op)
    }

    /// The next batch: one TensorList per pipeline output. Blocks until it is ready; fails
    /// at once when an external source (not `blocking`) was fed no data for it, and the
    /// same iteration is asked for again by the next call.
    pub fn next_batch(&mut self) -> Result<Vec<Batch>> {
        match &mut self.mode {
            Mode::Sync(runner) => runner.run_iteration(),
            Mode::Async { rx, .. } => {
                if let Some(f) = self.feeds.iter().find(|f| !f.blocking && !f.has_data_for(self.requested)) {
                    return Err(f.no_data(self.requested));
                }
                self.requested += 1;
                for f in &self.feeds {
                    f.request(self.requested);
                }
                recv(rx)
            }
        }
    }

    /// The external source fed by `feed_input(name, ...)`, if the built graph has it.
    pub fn feed(&self, name: &str) -> Option<&Arc<Feed>> {
        self.feeds.iter().find(|f| f.name() == name)
    }

    /// The pipeline's GPU, when it has GPU operators (external sources' GPU data is copied
    /// there).
    pub fn gpu_device(&self) -> Option<&Arc<GpuDevice>> {
        self.gpu_device.as_ref()
    }

    /// Every external source's queue, in graph order.
    pub fn feeds(&self) -> &[Arc<Feed>] {
        &self.feeds
    }



    /// The next batch when every output is on the host (CPU pipelines, tests).
    pub fn next_cpu_batch(&mut self) -> Result<Vec<crate::tensor::TensorList>> {
        self.next_batch()?
            .into_iter()
            .map(|b| match b {
                Batch::Cpu(t) => Ok(t),
                Batch::Gpu(_) => Err(Error::Unsupported("a pipeline output is on the GPU; use next_batch()".into())),
            })
            .collect()
    }

    /// Facts of every reader, by instance name, in graph order.
    pub fn readers(&self) -> &[(String, ReaderMeta)] {
        &self.readers
    }

    /// Per-operator timings so far.
    pub fn stats(&self) -> Vec<OpStats> {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The checked, pruned graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
}

/// `input` with the samples at `places` replaced by the batch's first sample at another
/// place (on_error="replace": what the operator runs on there, its outputs then zeroed).
fn with_stand_ins(
    pool: &rayon::ThreadPool,
    input: &TensorList,
    places: &[usize],
) -> Result<TensorList> {
    let n = input.len();
    let Some(other) = (0..n).find(|i| !places.contains(i)) else {
        return Err(Error::Unsupported(
            "on_error=\"replace\": every sample of the batch failed; none can stand in".into(),
        ));
    };
    let picks: Vec<usize> = (0..n)
        .map(|i| if places.contains(&i) { other } else { i })
        .collect();
    crate::ops::gather_samples(pool, input, &picks)
}

/// Sets the samples at `places` of `b` to zeros (on_error="replace"); on the GPU, ordered on
/// the batch's stream after the operator's work.
fn zero_samples(b: &mut Batch, places: &[usize]) -> Result<()> {
    match b {
        Batch::Cpu(t) => {
            let mut samples = if places.is_empty() {
                Vec::new()
            } else {
                t.samples_mut()
            };
            for &i in places {
                if let Some(s) = samples.get_mut(i) {
                    s.fill(0);
                }
            }
        }
        Batch::Gpu(t) => {
            for &i in places.iter().filter(|&&i| i < t.len()) {
                t.buffer().zero_range_async(t.data_offset(i), t.meta().byte_range(i).len())?;
            }
        }
    }
    Ok(())
}

/// The runner's share of `on_error`: each operator's own policy (checked), the readers each
/// operator reads from, the record.
fn bad_samples_of(
    ops: &[Instance],
    skipped: &[Option<Arc<Skipped>>],
    policy: ErrorPolicy,
) -> Result<BadSamples> {
    let op_policy = ops
        .iter()
        .map(|inst| {
            let a = &inst.ctx.args;
            (a.has("on_error") && a.opt_str("on_error").is_some())
                .then(|| OnError::parse(a.str("on_error"), &inst.ctx.display_name))
                .transpose()
        })
        .collect::<Result<Vec<_>>>()?;
    // Operators come in data order: an operator's readers are its inputs' readers.
    let mut readers_of: Vec<Vec<(usize, Arc<Skipped>)>> = Vec::with_capacity(ops.len());
    for (k, inst) in ops.iter().enumerate() {
        let mut mine: Vec<(usize, Arc<Skipped>)> =
            skipped[k].iter().map(|s| (k, s.clone())).collect();
        for e in inst
            .inputs
            .iter()
            .chain(inst.arg_inputs.iter().map(|(_, e)| e))
        {
            for r in &readers_of[e.op] {
                if !mine.iter().any(|(m, _)| *m == r.0) {
                    mine.push(r.clone());
                }
            }
        }
        readers_of.push(mine);
    }
    Ok(BadSamples {
        policy,
        op_policy,
        readers_of,
        log: Arc::new(Mutex::new(BadLog::default())),
    })
}

/// The next result of the producer thread.
fn recv(rx: &Receiver<Result<Vec<Batch>>>) -> Result<Vec<Batch>> {
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return r,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Err(Error::Unsupported("the pipeline's executor thread stopped".into())),
        }
    }
}

/// How many nice levels the CPU workers of a pipeline with GPU operators run below its
/// other threads. Those others are on the critical path: the hardware decoder's feeder
/// (nvJPEG's call is CPU work between waits) and the executor that queues the GPU work;
/// the workers are the bulk, and a batch's CPU share tolerates being preempted. Measured on
/// an H200, rn50-crop, alternating on one lease: nice 5 was ahead of nice 0 in each of
/// three rounds (25,326 / 26,252 / 27,672 vs 24,072 / 25,154 / 26,307 img/s). The engine
/// alone loses 19% to 16 spinning threads at equal priority. `SLUICE_WORKER_NICE`
/// overrides (0: equal priority).
const GPU_WORKER_NICE: i32 = 5;

/// Lowers the calling worker thread's priority by `levels` nice levels (Linux; elsewhere,
/// and where the system refuses, the priority stays).
fn lower_worker_priority(levels: i32) {
    if levels <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on this thread's own id.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + levels).min(19));
    }
}

/// Milliseconds from the first traced event to `t`, so trace lines of different threads
/// line up in time.
pub(crate) fn trace_clock(t: Instant) -> f64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| t);
    t.saturating_duration_since(epoch).as_secs_f64() * 1e3
}

/// `SLUICE_TRACE_OPS=1` prints when each operator call started and how long it took (stderr).
fn trace_ops() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SLUICE_TRACE_OPS").is_some_and(|v| v != "0"))
}

/// Whether asynchronous pipelines start the next iteration's front early (see [`Runner`]);
/// `SLUICE_RUN_AHEAD=0` turns it off, for measurements.
fn run_ahead() -> bool {
    std::env::var_os("SLUICE_RUN_AHEAD").is_none_or(|v| v != "0")
}

/// The context an operator is built from.
fn context(node: &Node, spec: &PipelineSpec, num_threads: usize, resume_samples: u64) -> OpContext {
    let explicit_seed = node.args.int("seed");
    // An explicit seed fixes the stream by itself (same seed, same numbers, as in
    // DALI); otherwise the pipeline seed and the operator's position key it.
    let (seed, op_id) = if explicit_seed >= 0 {
        (explicit_seed as u64, 0)
    } else {
        (spec.seed, node.spec_index as u64 + 1)
    };
    OpContext {
        args: node.args.clone(),
        display_name: node.display_name(),
        instance_name: node.name.clone(),
        op_id,
        seed,
        max_batch_size: spec.batch_size,
        num_threads,
        device_id: spec.device_id,
        arg_input_names: node.arg_inputs.iter().map(|(k, _)| k.clone()).collect(),
        resume_samples,
    }
}

fn start_producer(mut runner: Runner, depth: usize) -> Result<Mode> {
    // `depth - 1` queued plus one waiting in `send` keeps at most `depth` batches ahead.
    let (tx, rx) = bounded(depth - 1);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name("sluice-executor".into())
        .spawn(move || {
            while !stop_flag.load(Ordering::Relaxed) {
                let r = runner.run_iteration();
                if tx.send(r).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::Unsupported(format!("cannot start the executor thread: {e}")))?;
    Ok(Mode::Async { rx, stop, handle: Some(handle) })
}

impl Drop for Executor {
    fn drop(&mut self) {
        // A producer waiting for fed data wakes up and stops.
        for f in &self.feeds {
            f.close();
        }
        if let Mode::Async { rx, stop, handle } = &mut self.mode {
            stop.store(true, Ordering::Relaxed);
            // Drain so a producer blocked in `send` wakes up, sees the flag and exits.
            let (_, dummy) = bounded(0);
            let rx = std::mem::replace(rx, dummy);
            drop(rx);
            if let Some(h) = handle.take() {
                let _ = h.join();
            }
        }
    }
}
