//! The executor: runs iterations of a built graph off the caller's thread, with the
//! pipeline's `num_threads` CPU workers, and keeps up to `prefetch_queue_depth` finished
//! batches ready. A failed iteration is reported at the `run()` that asks for it; the next
//! iteration runs as usual, so one bad file never stops the pipeline.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use sluice_cuda::{CudaStream, GpuDevice};

use crate::error::{Error, Result};
use crate::graph::{Edge, Graph, Node, PipelineSpec};
use crate::ops::{Device, GpuOperator, GpuWorkspace, OpContext, Operator, ReaderMeta, Workspace};
use crate::tensor::{Batch, ReadyEvent};

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
}

/// The GPU the pipeline runs on and its stream.
struct GpuStage {
    device: Arc<GpuDevice>,
    stream: Arc<CudaStream>,
}

/// Owns the built operators and runs one iteration at a time.
struct Runner {
    ops: Vec<Instance>,
    outputs: Vec<Edge>,
    pool: rayon::ThreadPool,
    gpu: Option<GpuStage>,
    batch_size: usize,
    iteration: u64,
    stats: Arc<Mutex<Vec<OpStats>>>,
}

impl Runner {
    fn run_iteration(&mut self) -> Result<Vec<Batch>> {
        let iteration = self.iteration;
        self.iteration += 1;
        let mut results: Vec<Vec<Batch>> = Vec::with_capacity(self.ops.len());
        for (k, inst) in self.ops.iter_mut().enumerate() {
            let arg_inputs = inst.arg_inputs.iter().map(|(n, e)| (n.as_str(), results[e.op][e.output].cpu())).collect();
            let start = Instant::now();
            let (pool, gpu, batch_size) = (&self.pool, &self.gpu, self.batch_size);
            // A panic in an operator is a bug, but it must not take the user's process down.
            let out = catch_unwind(AssertUnwindSafe(|| -> Result<Vec<Batch>> {
                match &mut inst.backend {
                    Backend::Cpu(op) => {
                        let ws = Workspace {
                            inputs: inst.inputs.iter().map(|e| results[e.op][e.output].cpu()).collect(),
                            arg_inputs,
                            iteration,
                            batch_size,
                            pool,
                        };
                        Ok(op.run(&ws)?.into_iter().map(Batch::Cpu).collect())
                    }
                    Backend::Gpu(op, device) => {
                        let stage = gpu.as_ref().expect("GPU stage exists when the graph has GPU operators");
                        let inputs = inst.inputs.iter().map(|e| &results[e.op][e.output]);
                        let ws = GpuWorkspace {
                            cpu_inputs: if *device == Device::Mixed { inputs.clone().map(Batch::cpu).collect() } else { Vec::new() },
                            gpu_inputs: if *device == Device::Gpu { inputs.map(Batch::gpu).collect() } else { Vec::new() },
                            arg_inputs,
                            iteration,
                            batch_size,
                            pool,
                            device: &stage.device,
                            stream: &stage.stream,
                        };
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
                Err(Error::Unsupported(format!(
                    "internal error in {} at iteration {iteration}: {msg} (please report this)",
                    inst.ctx.display_name
                )))
            })?;
            if let Ok(mut s) = self.stats.lock() {
                s[k].calls += 1;
                s[k].total += start.elapsed();
            }
            results.push(out);
        }
        let mut outputs: Vec<Batch> = self.outputs.iter().map(|e| results[e.op][e.output].clone()).collect();
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
    stats: Arc<Mutex<Vec<OpStats>>>,
    graph: Graph,
}

impl Executor {
    /// Checks the spec, builds every operator and, for asynchronous execution, starts the
    /// producer thread.
    pub fn new(spec: &PipelineSpec) -> Result<Executor> {
        let graph = Graph::build(spec)?;
        let num_threads = spec.num_threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads)
            .thread_name(|i| format!("sluice-cpu-{i}"))
            .build()
            .map_err(|e| Error::Unsupported(format!("cannot start {num_threads} worker threads: {e}")))?;
        let gpu = if graph.nodes.iter().any(|n| n.device != Device::Cpu) {
            let ordinal = spec.device_id.expect("graph checks keep GPU operators out of CPU-only pipelines");
            let device = GpuDevice::open(ordinal as usize)?;
            let stream = device.new_stream()?;
            Some(GpuStage { device, stream })
        } else {
            None
        };
        let mut ops = Vec::with_capacity(graph.nodes.len());
        let mut readers = Vec::new();
        for node in &graph.nodes {
            let ctx = context(node, spec, num_threads);
            let backend = match node.device {
                Device::Cpu if !node.fused.is_empty() => {
                    let schemas: Vec<&str> = node.fused.iter().map(|n| n.def.schema.name).collect();
                    let parts: Vec<OpContext> = node.fused.iter().map(|n| context(n, spec, num_threads)).collect();
                    Backend::Cpu(crate::ops::fused::build_cpu(&schemas, &parts)?)
                }
                Device::Cpu => {
                    let op = (node.def.cpu.expect("backend checked at build"))(&ctx)?;
                    if let Some(meta) = op.reader_meta() {
                        readers.push((node.name.clone(), meta));
                    }
                    Backend::Cpu(op)
                }
                d => {
                    let factory = if d == Device::Mixed { node.def.mixed } else { node.def.gpu };
                    let device = &gpu.as_ref().expect("GPU stage opened above").device;
                    Backend::Gpu((factory.expect("backend checked at build"))(&ctx, device)?, d)
                }
            };
            ops.push(Instance { ctx, backend, inputs: node.inputs.clone(), arg_inputs: node.arg_inputs.clone() });
        }
        let stats = Arc::new(Mutex::new(
            graph.nodes.iter().map(|n| OpStats { name: n.name.clone(), ..Default::default() }).collect(),
        ));
        let runner = Runner {
            ops,
            outputs: graph.outputs.clone(),
            pool,
            gpu,
            batch_size: spec.batch_size,
            iteration: 0,
            stats: stats.clone(),
        };
        let mode = if spec.exec_async && spec.exec_pipelined {
            start_producer(runner, spec.prefetch_queue_depth.max(1))?
        } else {
            Mode::Sync(Box::new(runner))
        };
        Ok(Executor { mode, readers, stats, graph })
    }

    /// The next batch: one TensorList per pipeline output. Blocks until it is ready.
    pub fn next_batch(&mut self) -> Result<Vec<Batch>> {
        match &mut self.mode {
            Mode::Sync(runner) => runner.run_iteration(),
            Mode::Async { rx, .. } => loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(r) => return r,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(Error::Unsupported("the pipeline's executor thread stopped".into()))
                    }
                }
            },
        }
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

/// The context an operator is built from.
fn context(node: &Node, spec: &PipelineSpec, num_threads: usize) -> OpContext {
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
        batch_size: spec.batch_size,
        num_threads,
        device_id: spec.device_id,
        arg_input_names: node.arg_inputs.iter().map(|(k, _)| k.clone()).collect(),
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
