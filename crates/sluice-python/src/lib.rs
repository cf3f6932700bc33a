//! `sluice._core`: the thin bridge between Python and the engine. It converts graph specs
//! in, hands batches out without copying (array interface and DLPack), and turns engine
//! errors into Python exceptions. Everything else lives in the engine or in Python.

mod dlpack;
mod shm;

use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use sluice::error::ErrorKind;
use sluice::exec::Executor;
use sluice::graph::{check_op as engine_check_op, Edge, OpSpec, PipelineSpec};
use sluice::ops::{self, ArgDefault, ArgValue};
use sluice::ops::external_source::Feed;
use sluice::ops::python_function::FunctionCall;
use sluice::tensor::{Batch, BatchMeta, DType, Layout, TensorList as EngineTensorList, TensorListGpu as EngineTensorListGpu};
use sluice::Error;

/// `sluice.errors`' classes, made once from [`ErrorKind`]'s table when the module loads.
static ERROR_CLASSES: PyOnceLock<ErrorClasses> = PyOnceLock::new();

struct ErrorClasses {
    /// `SluiceError`, the base of all the others.
    base: Py<PyType>,
    by_kind: Vec<(ErrorKind, Py<PyType>)>,
}

/// Creates `SluiceError` (a `RuntimeError`, as DALI raises) and one subclass per error
/// kind, each also deriving from the built-in classes the kind names.
fn make_error_classes(py: Python<'_>) -> PyResult<ErrorClasses> {
    let builtins = PyModule::import(py, "builtins")?;
    let type_ = builtins.getattr("type")?;
    let class = |name: &str, bases: Vec<Bound<'_, PyAny>>, doc: &str| -> PyResult<Py<PyType>> {
        let dict = PyDict::new(py);
        dict.set_item("__doc__", doc)?;
        dict.set_item("__module__", "sluice.errors")?;
        // KeyError quotes its message; every Sluice error prints it as written.
        dict.set_item("__str__", builtins.getattr("BaseException")?.getattr("__str__")?)?;
        Ok(type_.call1((name, PyTuple::new(py, bases)?, dict))?.cast_into::<PyType>()?.unbind())
    };
    let base = class("SluiceError", vec![builtins.getattr("RuntimeError")?], "Every error Sluice raises (but StopIteration): a RuntimeError, as in DALI.")?;
    let mut by_kind = Vec::new();
    for kind in ErrorKind::ALL {
        let Some(name) = kind.class_name() else { continue };
        let mut bases = vec![base.bind(py).clone().into_any()];
        for b in kind.python_bases() {
            bases.push(builtins.getattr(*b)?);
        }
        by_kind.push((kind, class(name, bases, kind.doc())?));
    }
    Ok(ErrorClasses { base, by_kind })
}

/// Engine error -> the Python exception of its kind: the one mapping of the taxonomy.
fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    let kind = e.kind();
    if kind == ErrorKind::EndOfData {
        return PyStopIteration::new_err(msg);
    }
    Python::attach(|py| {
        let classes = ERROR_CLASSES.get(py).expect("error classes are made when the module loads");
        let class = classes.by_kind.iter().find(|(k, _)| *k == kind).map_or(&classes.base, |(_, c)| c);
        PyErr::from_type(class.bind(py).clone(), msg)
    })
}

/// A Python value as an argument value. Enums (ours are IntEnums; DALI's pybind enums
/// convert through `__index__`), NumPy scalars and arrays are accepted as DALI accepts them.
fn arg_value(v: &Bound<'_, PyAny>) -> PyResult<ArgValue> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
    if v.is_instance_of::<PyBool>() {
        return Ok(ArgValue::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(ArgValue::Int(v.extract()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(ArgValue::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(ArgValue::Str(v.extract()?));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
        let vals: Vec<ArgValue> = items.iter().map(arg_value).collect::<PyResult<_>>()?;
        if vals.iter().all(|x| matches!(x, ArgValue::Int(_) | ArgValue::Bool(_))) {
            return Ok(ArgValue::IntList(vals.iter().map(|x| match x { ArgValue::Int(i) => *i, ArgValue::Bool(b) => *b as i64, _ => 0 }).collect()));
        }
        if vals.iter().all(|x| matches!(x, ArgValue::Int(_) | ArgValue::Float(_) | ArgValue::Bool(_))) {
            return Ok(ArgValue::FloatList(vals.iter().map(|x| match x { ArgValue::Int(i) => *i as f64, ArgValue::Float(f) => *f, ArgValue::Bool(b) => *b as i64 as f64, _ => 0.0 }).collect()));
        }
        if vals.iter().all(|x| matches!(x, ArgValue::Str(_))) {
            return Ok(ArgValue::StrList(vals.into_iter().map(|x| match x { ArgValue::Str(s) => s, _ => String::new() }).collect()));
        }
        return Err(PyTypeError::new_err("a list argument must hold only numbers or only strings"));
    }
    // A dictionary (readers' `storage_options`): its `key=value` entries.
    if let Ok(d) = v.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, val) in d.iter() {
            let val = if val.is_instance_of::<PyBool>() { val.extract::<bool>()?.to_string() } else { val.str()?.to_string() };
            entries.push(format!("{}={val}", k.str()?));
        }
        return Ok(ArgValue::StrList(entries));
    }
    // NumPy scalars and arrays: their Python equivalents.
    if v.hasattr("tolist")? && v.hasattr("dtype")? {
        return arg_value(&v.call_method0("tolist")?);
    }
    if v.hasattr("__index__")? {
        return arg_value(&v.call_method0("__index__")?);
    }
    Err(PyTypeError::new_err(format!("unsupported argument value of type {}", v.get_type().name()?)))
}

/// Arguments as Python gave them, converted; a value of no argument type is a type error
/// naming the operator (`display`) and the argument.
fn arg_values(display: &str, args: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<Vec<(String, ArgValue)>> {
    args.into_iter()
        .map(|(k, v)| match arg_value(&v) {
            Ok(value) => Ok((k, value)),
            Err(e) => Err(to_py(Error::type_mismatch(display, format!("argument '{k}': {e}")))),
        })
        .collect()
}

/// An operator spec from the tuple Python records: (schema or legacy name, device as given
/// or None, instance name, [(op, output)], [(arg, op, output)], [(arg, value)]).
fn op_spec(t: &Bound<'_, PyTuple>) -> PyResult<OpSpec> {
    let (schema, device, name, inputs, arg_inputs, args): (
        String,
        Option<String>,
        String,
        Vec<(usize, usize)>,
        Vec<(String, usize, usize)>,
        Vec<(String, Bound<'_, PyAny>)>,
    ) = t.extract()?;
    let display = ops::lookup(&schema).map_or_else(|| schema.clone(), |(d, _)| d.schema.fn_name());
    let conv = arg_values(&display, args)?;
    Ok(OpSpec {
        schema,
        device,
        name,
        inputs: inputs.into_iter().map(|(op, output)| Edge { op, output }).collect(),
        arg_inputs: arg_inputs.into_iter().map(|(k, op, output)| (k, Edge { op, output })).collect(),
        args: conv,
    })
}

/// Checks one operator as the user creates it (see `sluice::graph::check_op`): `op` is the
/// tuple Python records (its edges are ignored), `inputs_on_gpu` / `arg_inputs_on_gpu`
/// where each input lives. Returns (number of outputs, whether they live on the GPU, the
/// deprecation warnings DALI gives for the arguments used). `exec_dynamic`: that of the
/// pipeline being defined (true when none is: the check is made again at build).
#[pyfunction]
#[pyo3(signature = (op, inputs_on_gpu, arg_inputs_on_gpu, exec_dynamic=true))]
fn check_op(op: &Bound<'_, PyTuple>, inputs_on_gpu: Vec<bool>, arg_inputs_on_gpu: Vec<bool>, exec_dynamic: bool) -> PyResult<(usize, bool, Vec<String>)> {
    let spec = op_spec(op)?;
    let c = engine_check_op(&spec, &inputs_on_gpu, &arg_inputs_on_gpu, exec_dynamic).map_err(to_py)?;
    let names = spec.args.iter().map(|(k, _)| k.as_str()).chain(spec.arg_inputs.iter().map(|(k, _)| k.as_str()));
    Ok((c.num_outputs(), c.outputs_on_gpu(), c.def.schema.deprecations(names)))
}

/// Checks the arguments an `ops.X(...)` object is created with, by name and type, before
/// it is called with its inputs (and maybe more arguments). Returns the deprecation
/// warnings DALI gives for them.
/// The tensor of a DLPack capsule, left unconsumed: (address, shape, NumPy type string).
/// The caller keeps the capsule while it uses the memory.
#[pyfunction]
fn dlpack_borrow(capsule: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>, String)> {
    let t = dlpack::borrow(capsule)?;
    Ok((t.address, t.shape, t.typestr))
}

/// The (device type, device id) of a DLPack capsule's tensor, as `__dlpack_device__` gives
/// it, for capsules handed over bare (dl_tensor_python_function's results).
#[pyfunction]
fn dlpack_device(capsule: &Bound<'_, PyAny>) -> PyResult<(i32, i32)> {
    Ok(dlpack::borrow(capsule)?.device)
}

#[pyfunction]
fn check_args(schema: &str, args: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<Vec<String>> {
    let (def, _) = ops::lookup(schema).ok_or_else(|| to_py(ops::unknown_operator(schema)))?;
    let display = def.schema.fn_name();
    let names: Vec<String> = args.iter().map(|(k, _)| k.clone()).collect();
    ops::Args::check_given(&def.schema, &display, arg_values(&display, args)?).map_err(to_py)?;
    Ok(def.schema.deprecations(names.iter().map(String::as_str)))
}

/// The pipeline's parameters as the engine will use them, checked, with DALI's defaults
/// resolved: `num_threads` -1 means one per CPU core, `device_id` -1 the first GPU (None
/// when there is none), `seed` -1 a random one, `prefetch_queue_depth` an int or DALI's
/// {"cpu_size": n, "gpu_size": m} (Sluice keeps one queue: the larger).
#[pyfunction]
#[pyo3(signature = (batch_size, num_threads, device_id, seed, prefetch_queue_depth))]
fn pipeline_params(
    batch_size: Option<i64>,
    num_threads: Option<i64>,
    device_id: Option<i64>,
    seed: Option<i64>,
    prefetch_queue_depth: &Bound<'_, PyAny>,
) -> PyResult<(Option<usize>, usize, Option<i32>, u64, usize)> {
    let prefetch_queue_depth: i64 = if let Ok(d) = prefetch_queue_depth.cast::<PyDict>() {
        let size = |k: &str| -> PyResult<i64> { d.get_item(k)?.map_or(Ok(2), |v| v.extract()) };
        size("cpu_size")?.max(size("gpu_size")?)
    } else {
        prefetch_queue_depth.extract()?
    };
    let given = sluice::graph::ParamsGiven { batch_size, num_threads, device_id, seed, prefetch_queue_depth };
    let p = given.resolve().map_err(to_py)?;
    Ok((p.batch_size, p.num_threads, p.device_id, p.seed, p.prefetch_queue_depth))
}

/// One host array's memory, through its `__array_interface__` (NumPy's): address, shape and
/// type. It must be C-contiguous (the Python side makes it so).
fn host_array(source: &str, k: usize, a: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>, DType)> {
    let bad = |what: String| to_py(Error::type_mismatch(source, format!("sample {k}: {what}")));
    let iface = a.getattr("__array_interface__").map_err(|_| bad(format!("{} is not an array", a.get_type().name().map_or("?".into(), |n| n.to_string()))))?;
    let iface = iface.cast_into::<PyDict>()?;
    let item = |key: &str| iface.get_item(key)?.ok_or_else(|| bad(format!("its __array_interface__ has no '{key}'")));
    let (ptr, _readonly): (usize, bool) = item("data")?.extract()?;
    let shape: Vec<usize> = item("shape")?.extract()?;
    let typestr: String = item("typestr")?.extract()?;
    if iface.get_item("strides")?.is_some_and(|s| !s.is_none()) {
        return Err(bad("the array is not C-contiguous".into()));
    }
    let dtype = DType::from_typestr(&typestr).ok_or_else(|| bad(format!("type '{typestr}' is not supported")))?;
    Ok((ptr, shape, dtype))
}

/// A batch copied from one array per sample, all of one type and number of dimensions.
fn host_samples(py: Python<'_>, source: &str, samples: &[Bound<'_, PyAny>]) -> PyResult<EngineTensorList> {
    let arrays = samples.iter().enumerate().map(|(k, a)| host_array(source, k, a)).collect::<PyResult<Vec<_>>>()?;
    copy_samples(py, source, &arrays)
}

/// The metadata of samples at (address, shape, type): one type and number of dimensions.
fn uniform_meta(source: &str, arrays: &[(usize, Vec<usize>, DType)]) -> PyResult<BatchMeta> {
    let Some((_, shape0, dtype)) = arrays.first() else {
        return Err(to_py(Error::Data { location: sluice::error::Location { operator: source.into(), ..Default::default() }, message: "the batch is empty; feed at least one sample".into() }));
    };
    for (k, (_, shape, t)) in arrays.iter().enumerate() {
        if t != dtype {
            return Err(to_py(Error::type_mismatch(source, format!("sample {k} is {t} but sample 0 is {dtype}: every sample of a batch must have the same type"))));
        }
        if shape.len() != shape0.len() {
            return Err(to_py(Error::type_mismatch(
                source,
                format!("sample {k} has {} dimensions but sample 0 has {}: all tensors in a batch must have the same number of dimensions", shape.len(), shape0.len()),
            )));
        }
    }
    Ok(BatchMeta::new(*dtype, shape0.len(), arrays.iter().map(|(_, s, _)| &s[..])))
}

/// Threads that copy a large batch from Python memory (see `copy_samples`).
const COPY_THREADS: usize = 4;

/// A batch copied from samples at (address, shape, type), all of one type and number of
/// dimensions; large batches are copied on several threads, without the interpreter lock.
fn copy_samples(py: Python<'_>, source: &str, arrays: &[(usize, Vec<usize>, DType)]) -> PyResult<EngineTensorList> {
    let mut out = EngineTensorList::for_overwrite(uniform_meta(source, arrays)?);
    let dsts: Vec<(usize, usize)> = out.samples_mut().into_iter().map(|d| (d.as_mut_ptr() as usize, d.len())).collect();
    let copy = |(&(dst, len), (src, _, _)): (&(usize, usize), &(usize, Vec<usize>, DType))| {
        // SAFETY: `src` is live memory of `len` bytes (its shape and type say so; the caller
        // holds it); `dst` is this sample's slot of the new batch.
        unsafe { std::ptr::copy_nonoverlapping(*src as *const u8, dst as *mut u8, len) };
    };
    py.detach(|| {
        use rayon::prelude::*;
        // Below a few MiB a thread hand-off costs more than the copy. Above, a few threads
        // reach the memory bandwidth; more only take cores from the sources' workers.
        if out.total_bytes() < 4 << 20 {
            dsts.iter().zip(arrays).for_each(copy);
        } else {
            dsts.par_iter().zip(arrays.par_iter()).with_min_len(dsts.len().div_ceil(COPY_THREADS)).for_each(copy);
        }
    });
    Ok(out)
}

/// A batch copied from one array whose first dimension is the batch.
fn host_dense(py: Python<'_>, source: &str, a: &Bound<'_, PyAny>) -> PyResult<EngineTensorList> {
    let (src, shape, dtype) = host_array(source, 0, a)?;
    let Some((&n, sample)) = shape.split_first() else {
        return Err(to_py(Error::type_mismatch(source, "a single array fed as a batch needs a first dimension (the samples)")));
    };
    let mut out = EngineTensorList::for_overwrite(BatchMeta::new(dtype, sample.len(), std::iter::repeat_n(sample, n)));
    let dsts: Vec<(usize, usize)> = out.samples_mut().into_iter().map(|d| (d.as_mut_ptr() as usize, d.len())).collect();
    py.detach(|| {
        for (i, (dst, len)) in dsts.into_iter().enumerate() {
            // SAFETY: the array holds n samples of `len` bytes back to back (C-contiguous,
            // the caller holds it); `dst` is sample i's slot of the new batch.
            unsafe { std::ptr::copy_nonoverlapping((src + i * len) as *const u8, dst as *mut u8, len) };
        }
    });
    Ok(out)
}

/// A pipeline built and running in the engine.
#[pyclass(module = "sluice._core", name = "Pipeline")]
struct PyPipeline {
    // The executor is driven by one Python thread at a time; the mutex makes that explicit.
    // Dropped by hand (see `Drop`), without the interpreter lock.
    exec: std::mem::ManuallyDrop<std::sync::Mutex<Executor>>,
    /// The external sources' queues, fed without the executor's lock (a `run()` waiting
    /// for a blocking source holds it).
    feeds: Vec<Arc<Feed>>,
    /// The pipeline's GPU and the stream GPU data fed from Python is copied on.
    gpu: Option<(Arc<sluice_cuda::GpuDevice>, std::sync::OnceLock<Arc<sluice_cuda::CudaStream>>)>,
    /// The parallel external sources' shared memory, mapped here.
    shm: shm::Blocks,
}

/// One worker task's share of an iteration: (shared block name, token, per output the
/// samples as (offset, shape, type string)).
type SharedChunk = (String, u64, Vec<Vec<(usize, Vec<usize>, String)>>);

#[pymethods]
impl PyPipeline {
    /// `ops` is a list of (schema, device|None, name, [(op, out)], [(arg, op, out)], [(arg, value)]).
    #[new]
    #[pyo3(signature = (batch_size, num_threads, device_id, seed, prefetch_queue_depth, exec_async, exec_pipelined, ops, outputs, restore=None, on_error="raise", max_bad_samples=None, exec_dynamic=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        batch_size: usize,
        num_threads: usize,
        device_id: Option<i32>,
        seed: u64,
        prefetch_queue_depth: usize,
        exec_async: bool,
        exec_pipelined: bool,
        ops: Vec<Bound<'_, PyTuple>>,
        outputs: Vec<(usize, usize)>,
        restore: Option<(u64, Vec<(String, u64)>, Vec<(String, Vec<u64>)>)>,
        on_error: &str,
        max_bad_samples: Option<u64>,
        exec_dynamic: bool,
    ) -> PyResult<PyPipeline> {
        let specs = ops.iter().map(op_spec).collect::<PyResult<Vec<_>>>()?;
        let spec = PipelineSpec {
            batch_size,
            num_threads,
            device_id,
            seed,
            prefetch_queue_depth,
            exec_async,
            exec_pipelined,
            exec_dynamic,
            errors: sluice::exec::ErrorPolicy {
                on_error: sluice::exec::OnError::parse(on_error, "Pipeline").map_err(to_py)?,
                max_bad_samples,
            },
            ops: specs,
            outputs: outputs.into_iter().map(|(op, output)| Edge { op, output }).collect(),
        };
        let restore = restore.map(|(iteration, readers, excluded)| sluice::exec::Checkpoint { iteration, readers, excluded });
        let exec = py.detach(|| Executor::restored(&spec, restore.as_ref())).map_err(to_py)?;
        let feeds = exec.feeds().to_vec();
        let gpu = exec.gpu_device().map(|d| (d.clone(), std::sync::OnceLock::new()));
        Ok(PyPipeline { exec: std::mem::ManuallyDrop::new(std::sync::Mutex::new(exec)), feeds, gpu, shm: shm::Blocks::default() })
    }

    /// Queues one iteration of a parallel external source from its workers' shared memory
    /// (see `shm`). `chunks`: in sample order, one per worker task: (block name, token,
    /// per output [(offset, shape, type string)] per sample). `outputs`: per output, the
    /// external source to feed and its layout, or None when pruned. An iteration of one
    /// chunk is fed in place (the block is lent to the batches); several are gathered with
    /// a copy. Either way each chunk's token comes back from `take_returned` once nothing
    /// uses its block any more.
    fn feed_shared(&self, py: Python<'_>, outputs: Vec<Option<(String, Option<String>)>>, mut chunks: Vec<SharedChunk>) -> PyResult<()> {
        let mut leases = Vec::with_capacity(chunks.len());
        for (block, token, _) in &chunks {
            let block = self.shm.get(block).map_err(to_py)?;
            leases.push((block.clone(), self.shm.lease(block, *token)));
        }
        for (k, out) in outputs.iter().enumerate() {
            let Some((name, layout)) = out else { continue };
            let feed = self.feed_named(name)?;
            let mut placed = Vec::with_capacity(chunks.len());
            for (_, _, per_output) in &mut chunks {
                let Some(samples) = per_output.get_mut(k) else {
                    return Err(to_py(Error::type_mismatch(name, "a worker returned fewer outputs than the source has")));
                };
                placed.push(typed_regions(name, std::mem::take(samples))?);
            }
            let lent = match (&leases[..], &placed[..]) {
                ([(block, lease)], [samples]) => shm::lend(block, samples, lease).map_err(to_py)?.map(|buf| (samples, buf)),
                _ => None,
            };
            let batch = match lent {
                Some((samples, buf)) => EngineTensorList::from_parts(uniform_meta(name, samples)?, buf),
                None => {
                    let mut addresses = Vec::new();
                    for ((block, _), samples) in leases.iter().zip(&placed) {
                        addresses.extend(shm::addresses(block, samples).map_err(to_py)?);
                    }
                    copy_samples(py, name, &addresses)?
                }
            };
            push(feed, name, Batch::Cpu(batch), layout.as_deref())?;
        }
        Ok(())
    }

    /// Tokens of shared-memory chunks (see `feed_shared`) nothing uses any more.
    fn take_returned(&self) -> Vec<u64> {
        self.shm.take_returned()
    }

    /// Unmaps a worker's block once no batch uses it (the worker replaced it).
    fn forget_shared(&self, block: &str) {
        self.shm.forget(block)
    }

    /// Queues one batch of GPU samples for external source `name`: (device address, shape,
    /// type string) per sample, all of one type and rank, in memory of the pipeline's GPU.
    /// They are copied on a stream of Sluice's that first waits for the work queued so far
    /// on `stream` (the producer's raw stream; None: the legacy default stream), and the copy
    /// is finished before this returns, so the caller may reuse its memory at once.
    #[pyo3(signature = (name, regions, stream=None, layout=None))]
    fn feed_gpu(&self, py: Python<'_>, name: &str, regions: Vec<(usize, Vec<usize>, String)>, stream: Option<usize>, layout: Option<&str>) -> PyResult<()> {
        let feed = self.feed_named(name)?;
        let Some((device, feed_stream)) = &self.gpu else {
            return Err(to_py(Error::Graph(format!("external source '{name}': GPU data needs a pipeline with a GPU (device_id) and device='gpu'"))));
        };
        let samples = typed_regions(name, regions)?;
        let meta = uniform_meta(name, &samples)?;
        let out = py.detach(|| -> sluice::error::Result<EngineTensorListGpu> {
            let s = match feed_stream.get() {
                Some(s) => s.clone(),
                None => {
                    let s = device.new_stream()?;
                    feed_stream.get_or_init(|| s).clone()
                }
            };
            let out = copy_to_gpu(device, &s, &samples, meta, stream)?;
            s.synchronize().map_err(|e| Error::Cuda(e.to_string()))?;
            Ok(out)
        });
        push(feed, name, Batch::Gpu(out.map_err(to_py)?), layout)
    }

    /// Where the pipeline stands after the batches returned so far: (iterations, [(reader
    /// name, samples read)], [(reader name, samples excluded by on_error="skip")]), what
    /// `restore` takes.
    #[allow(clippy::type_complexity)]
    fn checkpoint(&self) -> (u64, Vec<(String, u64)>, Vec<(String, Vec<u64>)>) {
        let c = self.exec().checkpoint();
        (c.iteration, c.readers, c.excluded)
    }

    /// The samples skipped or replaced so far (on_error) in the batches returned: [(file or
    /// None, error, iteration, place in the batch, operator, "skip" | "replace")], and the
    /// count per operator [(operator name, count)].
    #[allow(clippy::type_complexity)]
    fn bad_samples(&self) -> (Vec<(Option<String>, String, u64, usize, String, &'static str)>, Vec<(String, u64)>) {
        let exec = self.exec();
        let (samples, per_op) = exec.bad_samples();
        let names = exec.graph().nodes.iter().map(|n| n.name.clone());
        (
            samples.into_iter().map(|b| (b.source, b.error, b.iteration, b.sample, b.operator, b.action.name())).collect(),
            names.zip(per_op).collect(),
        )
    }

    /// The names of the external sources the built graph kept (the others were pruned).
    fn feed_names(&self) -> Vec<String> {
        self.feeds.iter().map(|f| f.name().to_string()).collect()
    }

    /// Queues one batch for external source `name`: a Sluice batch (shared, not copied), a
    /// list of C-contiguous arrays (one per sample), or one C-contiguous array whose first
    /// dimension is the batch (copied once). `layout` replaces the batch's own.
    #[pyo3(signature = (name, data, layout=None))]
    fn feed(&self, py: Python<'_>, name: &str, data: &Bound<'_, PyAny>, layout: Option<&str>) -> PyResult<()> {
        let feed = self.feed_named(name)?;
        if let Ok(t) = data.cast::<PyTensorListGpu>() {
            // A Sluice GPU batch is shared; the operator waits for the event that marks it done.
            return push(feed, name, Batch::Gpu((*t.get().inner).clone()), layout);
        }
        let batch = if let Ok(t) = data.cast::<PyTensorList>() {
            (*t.get().inner).clone()
        } else if let Ok(list) = data.cast::<PyList>() {
            host_samples(py, name, &list.iter().collect::<Vec<_>>())?
        } else {
            host_dense(py, name, data)?
        };
        push(feed, name, Batch::Cpu(batch), layout)
    }

    /// The next batch, one TensorList per output. Waits without holding the GIL.
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let out = py.detach(|| self.exec().next_batch()).map_err(to_py)?;
        out.into_iter()
            .map(|b| match b {
                Batch::Cpu(t) => Ok(Bound::new(py, PyTensorList { inner: Arc::new(t) })?.into_any()),
                // Outputs are exported as whole arrays: a view (permute_batch's) is gathered.
                Batch::Gpu(t) => Ok(Bound::new(py, PyTensorListGpu { inner: Arc::new(t.packed().map_err(to_py)?) })?.into_any()),
            })
            .collect()
    }

    /// {reader name: {epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch, stick_to_shard}}.
    fn reader_meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, m) in self.exec().readers() {
            let e = PyDict::new(py);
            e.set_item("epoch_size", m.epoch_size)?;
            e.set_item("epoch_size_padded", m.epoch_size_padded)?;
            e.set_item("number_of_shards", m.number_of_shards)?;
            e.set_item("shard_id", m.shard_id)?;
            e.set_item("pad_last_batch", m.pad_last_batch)?;
            e.set_item("stick_to_shard", m.stick_to_shard)?;
            d.set_item(name, e)?;
        }
        Ok(d)
    }

    /// The checked, pruned graph in Graphviz DOT.
    fn dot(&self) -> String {
        sluice::graph::to_dot(self.exec().graph())
    }

    /// [(operator name, calls, seconds)] since build.
    fn stats(&self) -> Vec<(String, u64, f64)> {
        self.exec().stats().into_iter().map(|s| (s.name, s.calls, s.total.as_secs_f64())).collect()
    }
}

impl PyPipeline {
    /// The external source `feed_input` names, if the built graph kept it.
    fn feed_named(&self, name: &str) -> PyResult<&Arc<Feed>> {
        self.feeds.iter().find(|f| f.name() == name).ok_or_else(|| {
            to_py(Error::Input { name: name.into(), message: format!("Could not find an input operator with name \"{name}\"") })
        })
    }
}

/// Queues `batch` for `feed`, under `layout` when one is given.
fn push(feed: &Feed, name: &str, mut batch: Batch, layout: Option<&str>) -> PyResult<()> {
    if let Some(l) = layout {
        let l = Layout::new(l).map_err(|e| to_py(Error::arg(name, "layout", e)))?;
        let ndim = match &batch {
            Batch::Cpu(t) => t.ndim(),
            Batch::Gpu(t) => t.ndim(),
        };
        if !l.is_empty() && l.ndim() != ndim {
            // DALI's words (external_source, feed_input).
            return Err(to_py(Error::arg(name, "layout", format!("The layout '{l}' cannot describe {ndim}-dimensional data"))));
        }
        match &mut batch {
            Batch::Cpu(t) => t.set_layout(l),
            Batch::Gpu(t) => t.set_layout(l),
        }
    }
    feed.push(batch).map_err(to_py)
}

/// A new GPU batch of `meta` copied on `stream` from device memory at (address, shape,
/// type), once the work queued so far on `producer` (a raw stream of another library; None:
/// the legacy default stream) is done. The copies are queued, not waited for: the caller
/// keeps the source memory alive until `stream` passes them.
fn copy_to_gpu(
    device: &Arc<sluice_cuda::GpuDevice>,
    stream: &Arc<sluice_cuda::CudaStream>,
    samples: &[(usize, Vec<usize>, DType)],
    meta: BatchMeta,
    producer: Option<usize>,
) -> sluice::error::Result<EngineTensorListGpu> {
    // Allocating binds the device's context, which the pointer query needs.
    let mut out = EngineTensorListGpu::alloc(meta, device, stream)?;
    if let Some(k) = samples.iter().position(|(src, _, _)| device.is_foreign_pointer(*src as u64)) {
        return Err(Error::Unsupported(format!(
            "sample {k} is in the memory of another GPU; the pipeline runs on GPU {} (device_id): move the data there first",
            device.ordinal()
        )));
    }
    // SAFETY: the producer's stream handle (or null, the legacy default stream) is live
    // while it hands us data; the wait only orders our copies after its work.
    unsafe { out.buffer().order_free_after(producer.unwrap_or(0) as sluice_cuda::sys::CUstream)? };
    for (i, (src, _, _)) in samples.iter().enumerate() {
        let range = out.byte_range(i);
        // SAFETY: `src` is the caller's live device memory of this sample's bytes (its shape
        // and type say so), written by work the stream now waits for.
        unsafe { out.buffer().copy_from_device_async(range.start, *src as u64, range.len())? };
    }
    out.set_ready(Arc::new(sluice::tensor::ReadyEvent::record(device, stream)?));
    Ok(out)
}

/// Samples given as (address, shape, type string), with their types parsed.
fn typed_regions(source: &str, regions: Vec<(usize, Vec<usize>, String)>) -> PyResult<Vec<(usize, Vec<usize>, DType)>> {
    regions
        .into_iter()
        .enumerate()
        .map(|(k, (ptr, shape, typestr))| {
            let dtype = DType::from_typestr(&typestr)
                .ok_or_else(|| to_py(Error::type_mismatch(source, format!("sample {k}: type '{typestr}' is not supported"))))?;
            Ok((ptr, shape, dtype))
        })
        .collect()
}

impl Drop for PyPipeline {
    fn drop(&mut self) {
        for f in &self.feeds {
            f.close();
        }
        // SAFETY: taken once, here; the field is not used after.
        let exec = unsafe { std::mem::ManuallyDrop::take(&mut self.exec) };
        // Dropping the executor joins its thread, which may be waiting for the interpreter
        // lock to run a Python function: let it have the lock meanwhile.
        Python::attach(|py| py.detach(move || drop(exec)));
    }
}

/// Runs `fn.python_function`'s functions for the engine: `sluice.python_function.call`
/// holds them and does the conversions; this only hands the batches over (shared, not
/// copied) and copies the results back.
struct PyFunctionHost;

impl sluice::ops::python_function::FunctionHost for PyFunctionHost {
    fn call(&self, call: &FunctionCall<'_, EngineTensorList>) -> Result<Vec<EngineTensorList>, String> {
        Python::attach(|py| {
            let run = || -> PyResult<Vec<EngineTensorList>> {
                let inputs = call
                    .inputs
                    .iter()
                    .map(|t| Bound::new(py, PyTensorList { inner: Arc::new((*t).clone()) }))
                    .collect::<PyResult<Vec<_>>>()?;
                let module = py.import("sluice.python_function")?;
                let args = (call.function_id, inputs, call.batch_size, call.batch_processing, call.num_outputs, call.kind);
                let outs: Vec<Bound<'_, PyList>> = module.getattr("call")?.call1(args)?.extract()?;
                outs.iter()
                    .map(|o| match o.is_empty() {
                        // A batch of no samples (an `if` branch no sample took) says nothing of its
                        // type: it takes its first input's, which merging ignores.
                        true => Ok(EngineTensorList::from_meta(empty_like(call.inputs.first().map(|t| t.meta())))),
                        false => host_samples(py, "python_function", &o.iter().collect::<Vec<_>>()),
                    })
                    .collect()
            };
            run().map_err(|e| python_error_text(py, &e))
        })
    }

    fn call_gpu(
        &self,
        call: &FunctionCall<'_, EngineTensorListGpu>,
        device: &Arc<sluice_cuda::GpuDevice>,
        stream: &Arc<sluice_cuda::CudaStream>,
    ) -> Result<Vec<EngineTensorListGpu>, String> {
        // The function sees each input as one array: a split's view inside a branch is
        // gathered first (queued on the pipeline stream, so the wait below covers it).
        let packed = call.inputs.iter().map(|t| t.packed()).collect::<sluice::error::Result<Vec<_>>>().map_err(|e| e.to_string())?;
        // The function may read its inputs on any stream (DLPack consumers, PyTorch's): they
        // must be complete first. Fed batches carry their event; the others were queued
        // on `stream` by this iteration's operators.
        for t in &packed {
            if let Some(ev) = t.ready() {
                ev.synchronize().map_err(|e| e.to_string())?;
            }
        }
        stream.synchronize().map_err(|e| e.to_string())?;
        Python::attach(|py| {
            let run = || -> PyResult<Vec<EngineTensorListGpu>> {
                let inputs = packed
                    .iter()
                    .map(|t| Bound::new(py, PyTensorListGpu { inner: Arc::new(t.clone()) }))
                    .collect::<PyResult<Vec<_>>>()?;
                let module = py.import("sluice.python_function")?;
                let args = (call.function_id, inputs, call.batch_size, call.batch_processing, call.num_outputs, call.kind, stream.cu_stream() as usize);
                // Per output: its samples as (address, shape, type string), the stream that
                // wrote them, and the objects that own them.
                let outs: Vec<(Vec<(usize, Vec<usize>, String)>, Option<usize>, Bound<'_, PyAny>)> = module.getattr("call_gpu")?.call1(args)?.extract()?;
                let mut batches = Vec::with_capacity(outs.len());
                for (k, (regions, producer, _keep)) in outs.iter().enumerate() {
                    let what = format!("python_function output {k}");
                    let samples = typed_regions(&what, regions.clone())?;
                    let meta = if samples.is_empty() { empty_like(call.inputs.first().map(|t| t.meta())) } else { uniform_meta(&what, &samples)? };
                    batches.push(py.detach(|| copy_to_gpu(device, stream, &samples, meta, *producer)).map_err(to_py)?);
                }
                // The function's arrays (`_keep`) are freed when this returns: the copies
                // out of them must be done by then.
                py.detach(|| stream.synchronize()).map_err(|e| to_py(Error::Cuda(e.to_string())))?;
                Ok(batches)
            };
            run().map_err(|e| python_error_text(py, &e))
        })
    }
}

/// The metadata of a batch of no samples, of `model`'s type and rank (UINT8 scalars without one).
fn empty_like(model: Option<&BatchMeta>) -> BatchMeta {
    let mut meta = BatchMeta::new(model.map_or(DType::U8, |m| m.dtype()), model.map_or(0, |m| m.ndim()), std::iter::empty());
    if let Some(m) = model {
        meta.set_layout(m.layout().clone());
    }
    meta
}

/// A Python exception as the engine reports it: its traceback (last frames) and message.
fn python_error_text(py: Python<'_>, e: &PyErr) -> String {
    let formatted = py
        .import("traceback")
        .and_then(|tb| tb.getattr("format_exception")?.call1((e.value(py),)))
        .and_then(|lines| lines.extract::<Vec<String>>());
    match formatted {
        Ok(lines) => format!("the Python function raised:\n{}", lines.concat().trim_end()),
        Err(_) => format!("the Python function raised {e}"),
    }
}

impl PyPipeline {
    fn exec(&self) -> std::sync::MutexGuard<'_, Executor> {
        // A panic cannot poison it (operators run under catch_unwind), but be tolerant anyway.
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A batch on the host. Python's TensorListCPU wraps it; views keep it alive.
#[pyclass(module = "sluice._core", name = "TensorList", frozen)]
struct PyTensorList {
    inner: Arc<EngineTensorList>,
}

#[pymethods]
impl PyTensorList {
    /// A batch copied from host arrays: a list of C-contiguous arrays (one per sample) or
    /// one array whose first dimension is the batch (`TensorListCPU(...)`, as in DALI).
    #[staticmethod]
    #[pyo3(signature = (data, layout=None))]
    fn from_host(py: Python<'_>, data: &Bound<'_, PyAny>, layout: Option<&str>) -> PyResult<PyTensorList> {
        let mut t = if let Ok(list) = data.cast::<PyList>() {
            if list.is_empty() {
                EngineTensorList::new(DType::U8, 0, std::iter::empty())
            } else {
                host_samples(py, "TensorListCPU", &list.iter().collect::<Vec<_>>())?
            }
        } else {
            host_dense(py, "TensorListCPU", data)?
        };
        if let Some(l) = layout {
            t.set_layout(Layout::new(l).map_err(|e| to_py(Error::arg("TensorListCPU", "layout", e)))?);
        }
        Ok(PyTensorList { inner: Arc::new(t) })
    }

    /// The same batch (shared, not copied) with another layout.
    fn with_layout(&self, layout: &str) -> PyResult<PyTensorList> {
        let mut t = (*self.inner).clone();
        let l = Layout::new(layout).map_err(|e| to_py(Error::arg("TensorListCPU", "layout", e)))?;
        if !l.is_empty() && l.ndim() != t.ndim() {
            return Err(to_py(Error::arg("TensorListCPU", "layout", format!("'{l}' cannot describe {}-dimensional samples", t.ndim()))));
        }
        t.set_layout(l);
        Ok(PyTensorList { inner: Arc::new(t) })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// DALI data type id.
    fn dtype_id(&self) -> i32 {
        self.inner.dtype() as i32
    }

    fn layout(&self) -> String {
        self.inner.layout().to_string()
    }

    fn ndim(&self) -> usize {
        self.inner.ndim()
    }

    fn shape(&self, i: usize) -> PyResult<Vec<usize>> {
        self.check(i)?;
        Ok(self.inner.shape(i).to_vec())
    }

    fn shapes(&self) -> Vec<Vec<usize>> {
        (0..self.inner.len()).map(|i| self.inner.shape(i).to_vec()).collect()
    }

    fn is_dense_tensor(&self) -> bool {
        self.inner.is_dense_tensor()
    }

    fn source_info(&self, i: usize) -> PyResult<String> {
        self.check(i)?;
        Ok(self.inner.source_info(i).to_string())
    }

    /// `__array_interface__` of sample `i` (read-only view of the batch's memory).
    fn sample_interface<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyDict>> {
        self.check(i)?;
        let t = &self.inner;
        interface(py, t.buffer().as_ptr() as usize + t.offset(i), t.shape(i).to_vec(), t.dtype().typestr())
    }

    /// `__array_interface__` of the whole batch as one (N, ...) array; dense batches only.
    fn batch_interface<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.inner;
        if !t.is_dense_tensor() {
            return Err(PyRuntimeError::new_err(format!(
                "the batch is not a dense tensor: samples have different shapes ({:?} ...); use at(i) per sample or pad them to one shape",
                (0..t.len().min(3)).map(|i| t.shape(i).to_vec()).collect::<Vec<_>>()
            )));
        }
        let mut shape = vec![t.len()];
        if t.len() > 0 {
            shape.extend_from_slice(t.shape(0));
        }
        let ptr = if t.is_empty() { t.buffer().as_ptr() as usize } else { t.buffer().as_ptr() as usize + t.offset(0) };
        interface(py, ptr, shape, t.dtype().typestr())
    }

    /// A DLPack capsule of sample `i`, or of the whole (dense) batch when `i` is None.
    #[pyo3(signature = (i=None))]
    fn dlpack<'py>(&self, py: Python<'py>, i: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let t = &self.inner;
        let (offset, shape) = match i {
            Some(i) => {
                self.check(i)?;
                (t.offset(i), t.shape(i).to_vec())
            }
            None => {
                if !t.is_dense_tensor() {
                    return Err(PyRuntimeError::new_err("the batch is not a dense tensor; export samples one by one"));
                }
                let mut s = vec![t.len()];
                if t.len() > 0 {
                    s.extend_from_slice(t.shape(0));
                }
                (if t.is_empty() { 0 } else { t.offset(0) }, s)
            }
        };
        dlpack::host_capsule(py, t.clone(), offset, shape)
    }
}

impl PyTensorList {
    fn check(&self, i: usize) -> PyResult<()> {
        check_index(i, self.inner.len())
    }
}

/// A batch on the GPU. Python's TensorListGPU wraps it.
#[pyclass(module = "sluice._core", name = "TensorListGpu", frozen)]
struct PyTensorListGpu {
    inner: Arc<EngineTensorListGpu>,
}

#[pymethods]
impl PyTensorListGpu {
    /// A batch copied from another library's GPU memory: samples at (device address, shape,
    /// type string), written by work queued on `stream` (None: the legacy default stream),
    /// on GPU `device_id` (None: the GPU the data is on). The copy is done when this returns
    /// (`TensorListGPU(cupy_array)`, as in DALI's backend).
    #[staticmethod]
    #[pyo3(signature = (regions, stream=None, layout=None, device_id=None))]
    fn from_device(py: Python<'_>, regions: Vec<(usize, Vec<usize>, String)>, stream: Option<usize>, layout: Option<&str>, device_id: Option<usize>) -> PyResult<PyTensorListGpu> {
        let samples = typed_regions("TensorListGPU", regions)?;
        let meta = uniform_meta("TensorListGPU", &samples)?;
        let out = py.detach(|| -> sluice::error::Result<EngineTensorListGpu> {
            let first = sluice_cuda::GpuDevice::open(device_id.unwrap_or(0))?;
            first.bind()?;
            let ordinal = device_id.or_else(|| samples.first().and_then(|(p, _, _)| sluice_cuda::pointer_ordinal(*p as u64)));
            let device = match ordinal {
                Some(o) if o != first.ordinal() => sluice_cuda::GpuDevice::open(o)?,
                _ => first,
            };
            let s = device.new_stream()?;
            let out = copy_to_gpu(&device, &s, &samples, meta, stream)?;
            s.synchronize().map_err(|e| Error::Cuda(e.to_string()))?;
            Ok(out)
        });
        let out = PyTensorListGpu { inner: Arc::new(out.map_err(to_py)?) };
        match layout {
            Some(l) => out.with_layout(l),
            None => Ok(out),
        }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn dtype_id(&self) -> i32 {
        self.inner.dtype() as i32
    }

    fn layout(&self) -> String {
        self.inner.layout().to_string()
    }

    fn shape(&self, i: usize) -> PyResult<Vec<usize>> {
        check_index(i, self.inner.len())?;
        Ok(self.inner.shape(i).to_vec())
    }

    fn shapes(&self) -> Vec<Vec<usize>> {
        (0..self.inner.len()).map(|i| self.inner.shape(i).to_vec()).collect()
    }

    fn is_dense_tensor(&self) -> bool {
        self.inner.is_dense_tensor()
    }

    fn source_info(&self, i: usize) -> PyResult<String> {
        check_index(i, self.inner.len())?;
        Ok(self.inner.source_info(i).to_string())
    }

    /// The same batch (shared) under another layout.
    fn with_layout(&self, layout: &str) -> PyResult<PyTensorListGpu> {
        let l = Layout::new(layout).map_err(|e| to_py(Error::arg("TensorListGPU", "layout", e)))?;
        if !l.is_empty() && l.ndim() != self.inner.ndim() {
            return Err(to_py(Error::arg("TensorListGPU", "layout", format!("'{l}' cannot describe {}-dimensional samples", self.inner.ndim()))));
        }
        let mut t = (*self.inner).clone();
        t.set_layout(l);
        Ok(PyTensorListGpu { inner: Arc::new(t) })
    }

    fn device_id(&self) -> usize {
        self.inner.buffer().device().ordinal()
    }

    /// Downloads the batch (waits for the GPU work that produces it).
    fn as_cpu(&self, py: Python<'_>) -> PyResult<PyTensorList> {
        let t = self.inner.clone();
        let host = py.detach(move || t.to_host()).map_err(to_py)?;
        Ok(PyTensorList { inner: Arc::new(host) })
    }

    /// `__cuda_array_interface__` of sample `i` or of the dense batch. Waits for the data
    /// first, so the consumer needs no stream synchronisation.
    #[pyo3(signature = (i=None))]
    fn cuda_interface<'py>(&self, py: Python<'py>, i: Option<usize>) -> PyResult<Bound<'py, PyDict>> {
        let (offset, shape) = self.view(i)?;
        if let Some(ev) = self.inner.ready() {
            let ev = ev.clone();
            py.detach(move || ev.synchronize()).map_err(to_py)?;
        }
        let d = interface(py, self.inner.buffer().device_ptr() as usize + offset, shape, self.inner.dtype().typestr())?;
        // Consumers (PyTorch) refuse read-only device memory; nothing else writes this batch.
        d.set_item("data", (self.inner.buffer().device_ptr() as usize + offset, false))?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// A DLPack capsule (kDLCUDA) of sample `i` or of the dense batch. `stream` is the
    /// consumer's CUDA stream handle: it is made to wait for the data, and the memory is
    /// recycled only after the work the consumer queued on it.
    #[pyo3(signature = (i=None, stream=None))]
    fn dlpack<'py>(&self, py: Python<'py>, i: Option<usize>, stream: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let (offset, shape) = self.view(i)?;
        let consumer = stream.map(|s| s as sluice::tensor::RawStream);
        match (self.inner.ready(), consumer) {
            // SAFETY: DLPack's protocol: `stream` is the consumer's live stream on this GPU.
            (Some(ev), Some(s)) => unsafe { ev.wait_on(s) }.map_err(to_py)?,
            (Some(ev), None) => {
                let ev = ev.clone();
                py.detach(move || ev.synchronize()).map_err(to_py)?
            }
            (None, _) => {}
        }
        dlpack::device_capsule(py, self.inner.clone(), offset, shape, consumer)
    }
}

impl PyTensorListGpu {
    fn view(&self, i: Option<usize>) -> PyResult<(usize, Vec<usize>)> {
        let t = &self.inner;
        match i {
            Some(i) => {
                check_index(i, t.len())?;
                Ok((t.offset(i), t.shape(i).to_vec()))
            }
            None => {
                if !t.is_dense_tensor() {
                    return Err(PyRuntimeError::new_err(format!(
                        "the batch is not a dense tensor: samples have different shapes ({:?} ...); export samples one by one",
                        (0..t.len().min(3)).map(|i| t.shape(i).to_vec()).collect::<Vec<_>>()
                    )));
                }
                let mut s = vec![t.len()];
                if t.len() > 0 {
                    s.extend_from_slice(t.shape(0));
                }
                Ok((if t.is_empty() { 0 } else { t.offset(0) }, s))
            }
        }
    }
}

fn check_index(i: usize, len: usize) -> PyResult<()> {
    if i >= len {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!("sample index {i} out of range for a batch of {len}")));
    }
    Ok(())
}

fn interface<'py>(py: Python<'py>, ptr: usize, shape: Vec<usize>, typestr: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", 3)?;
    d.set_item("typestr", typestr)?;
    d.set_item("shape", PyTuple::new(py, shape)?)?;
    // Read-only: the engine may share this memory between outputs and views.
    d.set_item("data", (ptr, true))?;
    Ok(d)
}

fn default_value<'py>(py: Python<'py>, d: ArgDefault) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match d {
        ArgDefault::Required | ArgDefault::Optional => return Ok(None),
        ArgDefault::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        ArgDefault::Int(i) => i.into_pyobject(py)?.into_any(),
        ArgDefault::Float(f) => f.into_pyobject(py)?.into_any(),
        ArgDefault::Str(s) => s.into_pyobject(py)?.into_any(),
        ArgDefault::IntList(l) => PyList::new(py, l)?.into_any(),
        ArgDefault::FloatList(l) => PyList::new(py, l)?.into_any(),
        ArgDefault::StrList(l) => PyList::new(py, l)?.into_any(),
    }))
}

/// Every operator schema, for generating `fn.*` and `ops.*` in Python.
#[pyfunction]
fn schemas(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let mut out = Vec::new();
    for def in ops::registry() {
        let s = &def.schema;
        let d = PyDict::new(py);
        d.set_item("name", s.name)?;
        d.set_item("fn_name", s.fn_name())?;
        d.set_item("doc", s.doc)?;
        d.set_item("devices", s.devices.iter().map(|d| d.name()).collect::<Vec<_>>())?;
        d.set_item("min_inputs", s.min_inputs)?;
        d.set_item("max_inputs", s.max_inputs)?;
        d.set_item("num_outputs", s.num_outputs)?;
        d.set_item("host_inputs", s.host_inputs.to_vec())?;
        d.set_item("is_reader", s.is_reader)?;
        d.set_item("is_random", s.is_random)?;
        let args = PyList::empty(py);
        for a in s.all_args() {
            let ad = PyDict::new(py);
            ad.set_item("name", a.name)?;
            ad.set_item("type", a.ty.name())?;
            ad.set_item("required", a.default == ArgDefault::Required)?;
            ad.set_item("default", default_value(py, a.default)?)?;
            ad.set_item("per_sample", a.per_sample)?;
            ad.set_item("doc", a.doc)?;
            args.append(ad)?;
        }
        d.set_item("args", args)?;
        d.set_item("arg_aliases", s.arg_aliases.to_vec())?;
        d.set_item(
            "legacy_names",
            s.legacy_names.iter().map(|(n, dev)| (*n, dev.map(|d| d.name()))).collect::<Vec<_>>(),
        )?;
        out.push(d);
    }
    Ok(out)
}

/// Number of CUDA devices Sluice can use (0 without a driver or GPU).
#[pyfunction]
fn gpu_count() -> usize {
    sluice_cuda_count()
}

fn sluice_cuda_count() -> usize {
    sluice::gpu_device_count()
}

/// Writes the built-in sample dataset (JPEGs in one folder per class); returns bytes written.
#[pyfunction]
#[pyo3(signature = (root, count=256, classes=8, seed=0))]
fn write_sample_dataset(py: Python<'_>, root: std::path::PathBuf, count: usize, classes: usize, seed: u64) -> PyResult<u64> {
    py.detach(|| sluice::sample::write_sample_dataset(&root, count, classes, seed)).map_err(to_py)
}

/// DALI's function name of a class name (`FileReader` -> `file_reader`), for the flat legacy
/// `fn.*` names: the engine's rule, so Python does not keep a second one.
#[pyfunction]
fn snake_case(camel: &str) -> String {
    sluice::ops::schema::snake_case(camel)
}

/// TFRecord's masked CRC-32C of `data` (for `sluice.tools.tfrecord2idx`).
#[pyfunction]
fn masked_crc32c(data: &[u8]) -> u32 {
    sluice::ops::readers::tfrecord::example::masked_crc(data)
}

/// The samples of a WebDataset archive as `readers.webdataset` groups them, each a list of
/// (extension, data offset, size, member name) (for `sluice.tools.wds2idx`).
#[pyfunction]
fn webdataset_samples(path: std::path::PathBuf) -> PyResult<Vec<Vec<(String, u64, u64, String)>>> {
    let listed = sluice::ops::readers::webdataset::tar::list_archive(&path, &Default::default())
        .map_err(|m| pyo3::exceptions::PyValueError::new_err(format!("{}: {m}", path.display())))?;
    Ok(listed.into_iter().map(|s| s.members.into_iter().map(|m| (m.ext, m.offset, m.size, m.filename)).collect()).collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    sluice::ops::python_function::set_function_host(Arc::new(PyFunctionHost));
    m.add_class::<PyPipeline>()?;
    m.add_class::<PyTensorList>()?;
    m.add_class::<PyTensorListGpu>()?;
    m.add_function(wrap_pyfunction!(gpu_count, m)?)?;
    m.add_function(wrap_pyfunction!(masked_crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(snake_case, m)?)?;
    m.add_function(wrap_pyfunction!(webdataset_samples, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack_borrow, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack_device, m)?)?;
    m.add_function(wrap_pyfunction!(schemas, m)?)?;
    m.add_function(wrap_pyfunction!(check_op, m)?)?;
    m.add_function(wrap_pyfunction!(check_args, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline_params, m)?)?;
    let classes = ERROR_CLASSES.get_or_try_init(m.py(), || make_error_classes(m.py()))?;
    for class in std::iter::once(&classes.base).chain(classes.by_kind.iter().map(|(_, c)| c)) {
        m.add(class.bind(m.py()).name()?, class.clone_ref(m.py()))?;
    }
    m.add_function(wrap_pyfunction!(write_sample_dataset, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
