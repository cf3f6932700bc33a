"""`fn.python_function`, `fn.torch_python_function` and `fn.dl_tensor_python_function`:
Python code as a pipeline operator. The engine's `PythonFunction` operator calls `call`
below (from its executor thread, holding the interpreter lock only meanwhile) with the
input batches; the function sees NumPy arrays (read-only views of the engine's memory),
PyTorch tensors or DLPack capsules, per sample or, with `batch_processing=True`, as lists.
With `device="gpu"` the function gets GPU data: CuPy arrays (`python_function`), PyTorch
CUDA tensors or DLPack capsules, and runs with the pipeline's CUDA stream as CuPy's or
PyTorch's current stream, so the kernels it launches queue behind the pipeline's. Mirrors
`nvidia.dali.fn.python_function`."""

import itertools

import numpy as np

from .tensors import TensorCPU

_functions = {}
_ids = itertools.count(1)


def _register(function):
    if not callable(function):
        raise TypeError(f"`function` must be callable, got {type(function).__name__}")
    fid = next(_ids)
    _functions[fid] = function
    return fid


def _make(kind, inputs, function, num_outputs, batch_processing, output_layouts, device, kwargs):
    from .ops_gen import make_node
    from .pipeline import Pipeline

    device = device or "cpu"
    if device not in ("cpu", "gpu"):
        raise ValueError(f"python_function: device must be 'cpu' or 'gpu', got '{device}'")
    if device == "gpu" and kind == "numpy":
        _cupy()  # DALI's gpu python_function works on CuPy arrays: say so at definition time
    if Pipeline.current() is None:
        raise RuntimeError("python_function has side effects, so it can be used only with a current pipeline: inside "
                           "`with pipe:`, a pipeline_def function or define_graph()")
    if isinstance(output_layouts, str):
        output_layouts = [output_layouts]
    args = dict(kwargs, function_id=_register(function), num_outputs=num_outputs, batch_processing=batch_processing,
                output_layouts=output_layouts, _kind=kind)
    out = make_node("PythonFunction", list(inputs), args, device=device)
    if num_outputs == 0:
        return None
    return out


def python_function(*inputs, function, num_outputs=1, batch_processing=False, output_layouts=None, device=None, **kwargs):
    """Runs `function` on NumPy arrays: one call per sample with one array per input
    (returning one array, or a tuple of `num_outputs`), or with `batch_processing=True` one
    call per batch with a list of arrays per input (returning a list per output)."""
    return _make("numpy", inputs, function, num_outputs, batch_processing, output_layouts, device, kwargs)


def torch_python_function(*inputs, function, num_outputs=1, batch_processing=True, output_layouts=None, device=None,
                          **kwargs):
    """As `python_function`, with PyTorch tensors; per batch by default (each input a list
    of tensors), as DALI."""
    return _make("torch", inputs, function, num_outputs, batch_processing, output_layouts, device, kwargs)


def dl_tensor_python_function(*inputs, function, num_outputs=1, batch_processing=True, output_layouts=None, device=None,
                              **kwargs):
    """As `python_function`, with DLPack capsules in and out; per batch by default."""
    return _make("dlpack", inputs, function, num_outputs, batch_processing, output_layouts, device, kwargs)


def _to_function(batch, kind):
    samples = [TensorCPU(batch, i) for i in range(len(batch))]
    if kind == "numpy":
        return [np.asarray(s) for s in samples]
    if kind == "torch":
        import torch

        return [torch.from_numpy(np.array(s)) for s in samples]  # a copy: the engine's memory is read-only
    return [s.__dlpack__() for s in samples]


def _from_function(x, kind):
    from .external_source import _as_array, _host_array

    return _host_array(x) if kind == "torch" else _as_array(x)


def call(function_id, inputs, batch_size, batch_processing, num_outputs, kind):
    """Called by the engine: runs function `function_id` on the input batches; returns a
    list (per output) of lists of C-contiguous arrays (per sample)."""
    function = _functions[function_id]
    args = [_to_function(b, kind) for b in inputs]
    if batch_processing:
        out = function(*args)
        outs = [out] if num_outputs == 1 else _split(out, num_outputs, "batch")
        return [[_from_function(x, kind) for x in o] for o in outs]
    per_sample = []
    for i in range(batch_size):
        out = function(*(a[i] for a in args))
        per_sample.append([out] if num_outputs == 1 else _split(out, num_outputs, "sample"))
    return [[_from_function(s[k], kind) for s in per_sample] for k in range(num_outputs)]


def _split(out, n, what):
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise TypeError(f"the function must return {n} outputs (num_outputs) per {what}, got {type(out).__name__}")
    return list(out)


def _cupy():
    try:
        import cupy
    except ImportError:
        raise ImportError("python_function with device='gpu' passes CuPy arrays to the function, and CuPy is not "
                          "installed (pip install cupy-cuda12x or cupy-cuda13x); dl_tensor_python_function and "
                          "torch_python_function need no CuPy") from None
    return cupy


def _on_stream(kind, stream):
    """The context in which the function runs: the pipeline's stream as the current stream
    of the framework whose arrays it gets (DLPack capsules: none, the inputs are complete)."""
    import contextlib

    if kind == "numpy":
        cupy = _cupy()
        if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14; ExternalStream is deprecated there
            return cupy.cuda.Stream.from_external(_StreamHandle(stream))
        return cupy.cuda.ExternalStream(stream)
    if kind == "torch":
        import torch

        return torch.cuda.stream(torch.cuda.ExternalStream(stream))
    return contextlib.nullcontext()


class _StreamHandle:
    """A raw CUDA stream handle under the CUDA stream protocol (`__cuda_stream__`)."""

    def __init__(self, handle):
        self._handle = handle

    def __cuda_stream__(self):
        return (0, self._handle)


def _to_function_gpu(batch, kind):
    samples = [batch[i] for i in range(len(batch))]
    if kind == "numpy":
        cupy = _cupy()
        return [cupy.asarray(s) for s in samples]
    if kind == "torch":
        import torch

        return [torch.as_tensor(s, device=f"cuda:{batch.device_id()}") for s in samples]
    return [s.__dlpack__() for s in samples]


def _from_function_gpu(samples, kind, stream):
    """An output batch (a list of samples, or one array whose first dimension is the batch)
    as the engine copies it: (regions, producer stream, what keeps the memory alive)."""
    from .external_source import _bare_capsules, _gpu_kind, gpu_regions

    samples = _bare_capsules(samples)
    if not all(_gpu_kind(x) for x in (samples if isinstance(samples, list) else [samples])):
        raise TypeError("a python_function with device='gpu' must return GPU data (CuPy arrays, PyTorch CUDA tensors, "
                        "DLPack capsules of GPU memory)")
    regions, producer, keep = gpu_regions(samples, stream)
    return regions, producer, [samples, keep]


def call_gpu(function_id, inputs, batch_size, batch_processing, num_outputs, kind, stream):
    """As `call`, on GPU batches (`TensorListGPU`s); `stream` is the pipeline's raw CUDA
    stream. Returns, per output, what `_from_function_gpu` gives."""
    function = _functions[function_id]
    from .tensors import TensorListGPU

    args = [_to_function_gpu(TensorListGPU(b), kind) for b in inputs]
    with _on_stream(kind, stream):
        if batch_processing:
            out = function(*args)
            outs = [out] if num_outputs == 1 else _split(out, num_outputs, "batch")
        else:
            per_sample = []
            for i in range(batch_size):
                o = function(*(a[i] for a in args))
                per_sample.append([o] if num_outputs == 1 else _split(o, num_outputs, "sample"))
            outs = [[s[k] for s in per_sample] for k in range(num_outputs)]
    # CuPy and PyTorch ran on the pipeline's stream. Bare DLPack capsules say nothing of
    # their stream: the copy waits for the legacy default stream, where PyTorch and CuPy
    # work unless told otherwise.
    return [_from_function_gpu(o, kind, None if kind == "dlpack" else stream) for o in outs]


class _PythonFunctionClass:
    """The object API (`ops.PythonFunction(function=..., ...)`, then called on inputs)."""

    _kind = "numpy"
    _batch_default = False

    def __init__(self, function, num_outputs=1, device="cpu", batch_processing=None, output_layouts=None, **kwargs):
        self._function = function
        self._num_outputs = num_outputs
        self._device = device
        self._batch = self._batch_default if batch_processing is None else batch_processing
        self._layouts = output_layouts
        self._kwargs = kwargs

    @property
    def device(self):
        return self._device

    def __call__(self, *inputs, **kwargs):
        kw = dict(self._kwargs, **kwargs)
        return _make(self._kind, inputs, self._function, self._num_outputs, self._batch, self._layouts, self._device, kw)


class PythonFunction(_PythonFunctionClass):
    """`ops.PythonFunction`: see `python_function`."""


class TorchPythonFunction(_PythonFunctionClass):
    """`ops.TorchPythonFunction`: see `torch_python_function`."""

    _kind = "torch"
    _batch_default = True


class DLTensorPythonFunction(_PythonFunctionClass):
    """`ops.DLTensorPythonFunction`: see `dl_tensor_python_function`."""

    _kind = "dlpack"
    _batch_default = True
