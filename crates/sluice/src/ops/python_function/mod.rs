//! `fn.python_function` (and its `torch_python_function` / `dl_tensor_python_function`
//! forms): a Python function run on a batch, per sample or on the whole batch
//! (`batch_processing`). The engine knows no Python: the Python binding installs a
//! [`FunctionHost`] that holds the functions (by `function_id`) and calls them with the
//! interpreter lock held only for the call. It runs on the executor's thread, one batch at
//! a time (Python runs one thread at a time anyway), so the pool's workers stay free for the
//! operators around it.
//!
//! The gpu backend hands the function GPU batches (CuPy arrays, PyTorch CUDA tensors or
//! DLPack capsules): the host waits for the work that produced them, runs the function with
//! the pipeline's stream as the framework's current stream (so its kernels queue behind
//! ours) and copies what it returns into the pipeline's memory on that stream.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Location, Result};
use sluice_cuda::{CudaStream, GpuDevice};

use crate::ops::{arg, ArgDefault as D, ArgType as T, Device, GpuOperator, GpuWorkspace, OpContext, OpDef, OpSchema, Operator, Workspace};
use crate::tensor::{BatchMeta, Layout, TensorList, TensorListGpu};

/// The most inputs a Python function takes (DALI: 256).
const MAX_INPUTS: usize = 256;

/// Schema and backends.
pub static PYTHON_FUNCTION: OpDef = OpDef {
    schema: OpSchema {
        name: "PythonFunction",
        doc: "Runs a Python function on the data: per sample (it receives one NumPy array per input and returns one per output), \
              or with batch_processing=True on whole batches (lists of arrays). The pipeline's operators around it run as usual.",
        devices: &[Device::Cpu, Device::Gpu],
        min_inputs: 0,
        max_inputs: MAX_INPUTS,
        // The most; the instance has `num_outputs` (see `OpSchema::outputs`).
        num_outputs: 384,
        host_inputs: &[],
        args: &[&[
            arg("function_id", T::Int, D::Required, "The function, as the Python front end registered it."),
            arg("num_outputs", T::Int, D::Int(1), "How many outputs the function returns."),
            arg("batch_processing", T::Bool, D::Bool(false), "Call the function once per batch with lists of arrays, instead of once per sample."),
            arg("output_layouts", T::StrList, D::Optional, "The layout of each output (one string: the same for all)."),
            arg("_kind", T::Str, D::Str("numpy"), "How the function receives data: numpy arrays, torch tensors or DLPack capsules."),
        ]],
        arg_aliases: &[],
        legacy_names: &[],
        is_reader: false,
        is_random: false,
    },
    cpu: Some(|ctx| Ok(Box::new(PythonFunction::new(ctx)?))),
    mixed: None,
    gpu: Some(|ctx, _| Ok(Box::new(PythonFunctionGpu(PythonFunction::new(ctx)?)))),
};

/// One call of a Python function, as the engine asks it of the host: on host batches
/// (`T` = [`TensorList`]) or GPU batches ([`TensorListGpu`]).
pub struct FunctionCall<'a, T> {
    pub function_id: i64,
    pub inputs: &'a [&'a T],
    /// Samples in the batch (for functions without inputs).
    pub batch_size: usize,
    pub batch_processing: bool,
    pub num_outputs: usize,
    /// "numpy", "torch" or "dlpack".
    pub kind: &'a str,
}

/// What runs Python functions: installed once by the Python binding.
pub trait FunctionHost: Send + Sync {
    /// Runs the call; returns `num_outputs` batches, or the function's error as a message
    /// (its exception and traceback).
    fn call(&self, call: &FunctionCall<'_, TensorList>) -> std::result::Result<Vec<TensorList>, String>;

    /// Runs the call on GPU batches: the inputs' work is queued on `stream` (or marked by
    /// their ready events); the outputs are new batches whose copies are queued on `stream`.
    fn call_gpu(&self, call: &FunctionCall<'_, TensorListGpu>, device: &Arc<GpuDevice>, stream: &Arc<CudaStream>) -> std::result::Result<Vec<TensorListGpu>, String>;
}

static HOST: OnceLock<Arc<dyn FunctionHost>> = OnceLock::new();

/// Installs the host that runs Python functions (the Python binding, when it loads).
pub fn set_function_host(host: Arc<dyn FunctionHost>) {
    let _ = HOST.set(host);
}

struct PythonFunction {
    ctx: OpContext,
    function_id: i64,
    num_outputs: usize,
    batch_processing: bool,
    layouts: Vec<Option<Layout>>,
    kind: String,
}

impl PythonFunction {
    fn new(ctx: &OpContext) -> Result<PythonFunction> {
        let op = &ctx.display_name;
        let num_outputs = usize::try_from(ctx.args.int("num_outputs")).map_err(|_| Error::arg(op, "num_outputs", "must be >= 0"))?;
        let layouts = if ctx.args.has("output_layouts") {
            let given = ctx.args.strs("output_layouts");
            if given.len() != 1 && given.len() != num_outputs {
                return Err(Error::arg(op, "output_layouts", format!("give one layout or {num_outputs} (one per output), got {}", given.len())));
            }
            (0..num_outputs)
                .map(|k| Layout::new(&given[if given.len() == 1 { 0 } else { k }]).map(Some).map_err(|e| Error::arg(op, "output_layouts", e)))
                .collect::<Result<_>>()?
        } else {
            vec![None; num_outputs]
        };
        let kind = ctx.args.str("_kind").to_string();
        if !matches!(kind.as_str(), "numpy" | "torch" | "dlpack") {
            return Err(Error::arg(op, "_kind", format!("unknown kind '{kind}'")));
        }
        Ok(PythonFunction { ctx: ctx.clone(), function_id: ctx.args.int("function_id"), num_outputs, batch_processing: ctx.args.bool("batch_processing"), layouts, kind })
    }
}

impl PythonFunction {
    /// The call for a batch of `inputs`, after checking they agree in size.
    fn call<'a, T: std::ops::Deref<Target = BatchMeta>>(&'a self, inputs: &'a [&'a T], batch_size: usize, iteration: u64) -> Result<FunctionCall<'a, T>> {
        if let Some(k) = (1..inputs.len()).find(|&k| inputs[k].len() != inputs[0].len()) {
            return Err(Error::data(self.at(iteration), format!("input {k} has {} samples but input 0 has {}", inputs[k].len(), inputs[0].len())));
        }
        Ok(FunctionCall {
            function_id: self.function_id,
            inputs,
            batch_size: inputs.first().map_or(batch_size, |b| b.len()),
            batch_processing: self.batch_processing,
            num_outputs: self.num_outputs,
            kind: &self.kind,
        })
    }

    /// Checks what the function returned against the call and applies `output_layouts`.
    fn finish<T: std::ops::DerefMut<Target = BatchMeta>>(&self, outs: std::result::Result<Vec<T>, String>, batch_size: usize, iteration: u64) -> Result<Vec<T>> {
        let mut outs = outs.map_err(|m| Error::data(self.at(iteration), m))?;
        if outs.len() != self.num_outputs {
            return Err(Error::data(self.at(iteration), format!("the function gave {} outputs, num_outputs is {}", outs.len(), self.num_outputs)));
        }
        for (k, (out, layout)) in outs.iter_mut().zip(&self.layouts).enumerate() {
            if out.len() != batch_size {
                return Err(Error::data(self.at(iteration), format!("output {k} has {} samples, the batch {batch_size}", out.len())));
            }
            if let Some(l) = layout {
                if !l.is_empty() && l.ndim() != out.ndim() {
                    return Err(Error::data(self.at(iteration), format!("output {k}: layout \"{l}\" (output_layouts) cannot describe {}-dimensional data", out.ndim())));
                }
                out.set_layout(l.clone());
            }
        }
        Ok(outs)
    }

    fn at(&self, iteration: u64) -> Location {
        Location { operator: self.ctx.display_name.clone(), iteration: Some(iteration), ..Default::default() }
    }

    fn host(&self) -> Result<&'static Arc<dyn FunctionHost>> {
        HOST.get().ok_or_else(|| Error::Unsupported(format!("{}: Python functions run only from Python", self.ctx.display_name)))
    }
}

impl Operator for PythonFunction {
    fn run(&mut self, ws: &Workspace<'_>) -> Result<Vec<TensorList>> {
        let call = self.call(&ws.inputs, ws.batch_size, ws.iteration)?;
        self.finish(self.host()?.call(&call), call.batch_size, ws.iteration)
    }
}

/// The gpu backend: the same function on GPU batches.
struct PythonFunctionGpu(PythonFunction);

impl GpuOperator for PythonFunctionGpu {
    fn run(&mut self, ws: &GpuWorkspace<'_>) -> Result<Vec<TensorListGpu>> {
        let op = &self.0;
        let call = op.call(&ws.gpu_inputs, ws.batch_size, ws.iteration)?;
        op.finish(op.host()?.call_gpu(&call, ws.device, ws.stream), call.batch_size, ws.iteration)
    }
}
