"""`fn.external_source` / `ops.ExternalSource`: data from Python into the pipeline.

The engine's `ExternalSource` operator is a queue that takes one batch per iteration and
checks it (type, dimensions, layout). This module is the Python half: it works out what
kind of `source` the user gave (a callable, an iterable, a generator function), calls it
once per iteration when the pipeline schedules one (`Pipeline.schedule_run`), turns what it
returns into batches and feeds them. A source that raises `StopIteration` ends the epoch:
`run()` returns the batches already scheduled, then raises `StopIteration`; `reset()`
starts the next epoch. Mirrors `nvidia.dali.external_source`.
"""

import functools
import inspect
import itertools

import numpy as np

from . import _core
from . import types as _types

_CYCLE_HELP = ('Valid values are\n  - "no", False or None - cycling disabled\n'
               '  - "quiet", True - quietly rewind the data\n  - "raise" - raise StopIteration on each rewind.')


def _cycle_mode(cycle):
    """`cycle` as one of None (no cycling), "quiet" or "raise"."""
    if cycle is None or cycle is False or cycle == "no":
        return None
    if cycle is True or cycle == "quiet":
        return "quiet"
    if cycle == "raise":
        return "raise"
    raise ValueError(f"Invalid value {cycle!r} for the argument `cycle`. {_CYCLE_HELP}")


def _is_generator_function(x):
    if inspect.isgeneratorfunction(x):
        return True
    if isinstance(x, functools.partial):
        return _is_generator_function(x.func)
    call = getattr(type(x), "__call__", None)
    return call is not None and not inspect.isfunction(x) and inspect.isgeneratorfunction(call)


def accepted_arg_count(callback):
    """How many positional arguments `callback` takes (0 or 1): 1 means it wants the
    sample's or batch's index information."""
    prefix = ("The `source` callable must accept either 0 or 1 positional arguments to indicate whether it "
              "accepts the batch or sample indexing information.")
    params = list(inspect.signature(callback).parameters.values())
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            raise TypeError(f"{prefix} Found var-positional argument `*{p.name}` which is not allowed.")
        if p.kind == p.VAR_KEYWORD:
            raise TypeError(f"{prefix} Found var-keyword argument `**{p.name}` which is not allowed.")
        if p.kind == p.KEYWORD_ONLY:
            raise TypeError(f"{prefix} Found keyword-only argument `{p.name}` which is not allowed.")
    if len(params) > 1:
        raise TypeError(f"{prefix} Found more than one positional argument, which is not allowed.")
    return len(params)


class _Cycle:
    """Iterates `make()` again each time it runs out; with "raise", says so first."""

    def __init__(self, make, mode):
        self._make = make
        self._raise = mode == "raise"
        self._it = make()

    def __call__(self):
        try:
            return next(self._it)
        except StopIteration:
            self._it = self._make()
            if self._raise:
                raise
            return next(self._it)


def _callback(source, cycle):
    """(callback, takes_info): a function giving the next datum, and whether it takes the
    index information (a callable of one argument)."""
    mode = _cycle_mode(cycle)
    if mode is not None:
        if inspect.isgenerator(source):
            raise TypeError("Cannot cycle through a generator - if the generator is a result of calling a generator "
                            "function, pass that function instead as `source`.")
        if _is_generator_function(source):
            return _Cycle(source, mode), False
        try:
            iter(source)
        except TypeError:
            raise ValueError("The argument `cycle` can only be specified if `source` is iterable.") from None
        return _Cycle(lambda: iter(source), mode), False
    if _is_generator_function(source):
        gen = source()
        return (lambda: next(gen)), False
    try:
        it = iter(source)
        return (lambda: next(it)), False
    except TypeError:
        pass
    if cycle is not None:
        raise ValueError("The argument `cycle` can only be specified if `source` is iterable.")
    if not callable(source):
        raise TypeError("The `source` must be callable, iterable or a parameterless generator function.")
    return source, accepted_arg_count(source) > 0


_CONVERTED_SOURCE = (
    "The `source` parameter that was passed to external source was created in a scope that was converted with "
    "AutoGraph. To allow the `source` to be correctly used with parallel external source, it must remain unconverted. "
    "To prevent conversion, two steps may need to be taken:\n1. The `source` or a factory creating the `source` must be "
    "defined at a global scope (i.e. outside of `pipeline_def` scope).\n2. If the `source` is created by a factory "
    "function that is invoked within pipeline definition, the factory function must be decorated with "
    "`@sluice.pipeline.do_not_convert`. Otherwise it will be recursively converted when the pipeline definition is "
    "traced.\nYou can read more details and see examples in the `@sluice.pipeline.do_not_convert` decorator "
    "documentation. The AutoGraph conversion is part of conditional execution in DALI.")


def _is_iterable(x):
    try:
        iter(x)
        return True
    except TypeError:
        return False


def _fresh_iterator(source):
    return source() if _is_generator_function(source) else iter(source)


def _iterate(source, cycle):
    """A parallel iterable source's iterator, made in its worker (picklable for spawn)."""
    return _quiet_cycle(source) if cycle == "quiet" else _fresh_iterator(source)


def _quiet_cycle(source):
    while True:
        it = _fresh_iterator(source)
        empty = True
        for x in it:
            empty = False
            yield x
        if empty:
            return


class _SourceGroup:
    """One `source` and the external source operators it feeds (one per output)."""

    def __init__(self, source, cycle, batch, batch_info, num_outputs, parallel=False, lead=1):
        self.source = source
        self.cycle = _cycle_mode(cycle)
        self.parallel = bool(parallel)
        self.lead = lead
        self.pool = None  # the pipeline's WorkerPool, for parallel sources
        self.index = None  # this group's index in the pool
        self.in_flight = {}  # iteration -> [(task id, first sample)]
        if self.parallel:
            self._check_parallel_source(source, cycle, batch)
        self.callback, self.takes_info = _callback(source, cycle) if not self.parallel or not self._iterates() else (None, False)
        self.batch = batch
        self.batch_info = batch_info
        self.num_outputs = num_outputs  # None: one output, the datum itself
        self.nodes = []  # the operators' _OpNodes, by output
        self.layouts = []
        self.reset_indices()

    def resume_at(self, iteration, sample):
        """Continues from a checkpoint: the callback is next called for this iteration and
        sample of the epoch."""
        self.iteration, self.sample = iteration, sample

    def warn_if_not_checkpointed(self):
        """DALI's warning for sources whose position a checkpoint cannot hold: they start
        from the beginning in a restored pipeline."""
        if self._iterates():
            kind = "SourceKind.GENERATOR_FUNC" if _is_generator_function(self.source) else "SourceKind.ITERABLE"
            reason = f"with {kind} as a 'source'"
        elif self.callback is not None and not self.takes_info:
            reason = "with parameterless callable as a 'source'"
        else:
            return
        import warnings

        warnings.warn(f"Checkpointing enabled in a pipeline with external source operator, {reason}. DALI doesn't "
                      "capture state of such 'source'. When loading the checkpoint, the 'source' must be manually "
                      "adjusted by the user to start from the correct point, otherwise it will start from the "
                      "beginning, potentially leading to mismatch with other data sources.", UserWarning, stacklevel=4)

    def reset_indices(self):
        self.iteration = 0
        self.sample = 0
        self._restart = True
        for tasks in getattr(self, "in_flight", {}).values():
            for task_id, _ in tasks:
                self.pool.discard(task_id)
        self.in_flight = {}

    # -- parallel sources
    def _iterates(self):
        return _is_generator_function(self.source) or (not callable(self.source) and _is_iterable(self.source))

    def _check_parallel_source(self, source, cycle, batch):
        from ._conditionals import made_by_converted_code

        if made_by_converted_code(source):
            raise ValueError(_CONVERTED_SOURCE)
        if self._iterates():
            if batch is False:
                kind = "a generator function" if _is_generator_function(source) else "an iterable"
                raise TypeError(f"Parallel external source with {kind} must be run in a batch mode "
                                "(specify `batch=True` in the external source definition and make sure "
                                "your source returns batches)")
            if inspect.isgenerator(source):
                raise TypeError("A parallel external source cannot iterate a generator object: pass the generator "
                                "function instead")
            return
        if not callable(source):
            raise TypeError("The `source` must be callable, iterable or a parameterless generator function.")
        if accepted_arg_count(source) != 1:
            raise TypeError("Callable passed to External Source in parallel mode (when `parallel=True`) must accept "
                            "exactly one argument: `nvidia.dali.types.SampleInfo` if run with `batch=False` or either "
                            "`nvidia.dali.types.BatchInfo` or integer that represents the index of the batch within "
                            "the epoch otherwise.")

    def worker_callable(self):
        """What a worker calls: the source, or for iterables a function making the iterator."""
        if self._iterates():
            return functools.partial(_iterate, self.source, self.cycle)
        return self.source

    def _submit(self, iteration, epoch_idx, batch_size):
        pool, workers = self.pool, len(self.pool.procs)
        outputs = self.num_outputs
        if self._iterates():
            mode_args = "restart" if self._restart else None
            self._restart = False
            tasks = [(pool.submit(self.index, "iterate", mode_args, outputs, pinned=self.index % workers), 0)]
        elif self.batch:
            mode = "batch_info" if self.batch_info else "iteration"
            args = (iteration, epoch_idx) if self.batch_info else iteration
            tasks = [(pool.submit(self.index, mode, args, outputs), 0)]
        else:
            # One share per worker: the work stays balanced and the look-ahead (the source's
            # prefetch depth) bounds the memory. (Whole iterations per worker would be fed
            # without the gather copy, but leave workers idle behind a slow one unless many
            # more iterations are computed ahead: measured slower on Pillow sources.)
            share = -(-batch_size // workers)
            first = self.sample + (iteration - self.iteration) * batch_size
            tasks = []
            for lo in range(0, batch_size, share):
                infos = [(first + i, i, iteration, epoch_idx) for i in range(lo, min(lo + share, batch_size))]
                tasks.append((pool.submit(self.index, "samples", infos, outputs), lo))
        self.in_flight[iteration] = tasks

    def _next_parallel(self, batch_size, epoch_idx):
        # Iterations computed ahead: the source's prefetch depth; for batch sources (one task
        # per iteration) at least one per worker, or workers would idle (as DALI's do).
        ahead = self.lead + 1
        if self.batch and not self._iterates():
            ahead = max(ahead, len(self.pool.procs))
        for it in range(self.iteration, self.iteration + ahead):
            if it not in self.in_flight:
                self._submit(it, epoch_idx, batch_size)
        tasks = self.in_flight.pop(self.iteration)
        msgs = [self.pool.wait(t, f"external source '{self._name()}'") for t, _ in tasks]
        failed = next((m for m in msgs if m[0] == "error"), None)
        ended = any(m[0] == "end" for m in msgs)
        if failed or ended:
            for m in msgs:
                self.pool.release(m)
        if failed:
            self.iteration += 1
            self.sample += batch_size
            raise RuntimeError(f"external source '{self._name()}' (parallel, worker process {failed[2]}), iteration "
                               f"{self.iteration - 1}: the source raised:\n{failed[3]}")
        if ended:
            raise StopIteration
        return self.pool.lend(msgs)

    def run_in_process(self):
        """Runs a parallel source here after all (`py_num_workers=0`, as DALI)."""
        self.parallel = False
        if self.callback is None:
            self.callback, _ = _callback(self.source, self.cycle)

    def _name(self):
        return self.nodes[0].name if self.nodes else "?"

    def next_data(self, batch_size, epoch_idx):
        """The data of every output for the next iteration. `StopIteration` ends the epoch."""
        try:
            if self.parallel:
                outs = self._next_parallel(batch_size, epoch_idx)
            elif self.batch:
                if not self.takes_info:
                    data = self.callback()
                elif self.batch_info:
                    data = self.callback(_types.BatchInfo(self.iteration, epoch_idx))
                else:
                    data = self.callback(self.iteration)
                outs = self._split(data)
            else:
                samples = []
                for i in range(batch_size):
                    info = _types.SampleInfo(self.sample + i, i, self.iteration, epoch_idx)
                    samples.append(self.callback(info) if self.takes_info else self.callback())
                outs = [samples] if self.num_outputs is None else [[s[k] for s in samples] for k in range(self.num_outputs)]
        except StopIteration:
            self.reset_indices()
            raise
        self.iteration += 1
        self.sample += batch_size
        return outs

    def _split(self, data):
        if self.num_outputs is None:
            return [data]
        if not isinstance(data, (tuple, list)) or len(data) != self.num_outputs:
            raise TypeError(f"the external source's `source` must return {self.num_outputs} batches (num_outputs), "
                            f"got {type(data).__name__}{f' of {len(data)}' if isinstance(data, (tuple, list)) else ''}")
        return list(data)


def _per_output(value, n, what):
    """A per-output argument (`layout`, `dtype`, `ndim`) as a list of `n`: a list or tuple
    gives one per output (missing ones unset), anything else applies to all."""
    if isinstance(value, (list, tuple)):
        if len(value) > n:
            raise ValueError(f"`{what}` has {len(value)} entries but the external source has {n} outputs")
        return list(value) + [None] * (n - len(value))
    return [value] * n


def _check_parallel(parallel, no_copy, prefetch_queue_depth, bytes_per_sample_hint):
    if not parallel:
        for name, v in (("prefetch_queue_depth", prefetch_queue_depth), ("bytes_per_sample_hint", bytes_per_sample_hint)):
            if v is not None:
                raise ValueError(f"The argument `{name}` is valid only for parallel external sources "
                                 "(when ``parallel`` is True).")
        return
    if no_copy is False:
        raise ValueError("The argument ``no_copy`` cannot be specified to False  when used with ``parallel=True``.")
    for name, v in (("prefetch_queue_depth", prefetch_queue_depth), ("bytes_per_sample_hint", bytes_per_sample_hint)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise ValueError(f"``{name}`` must be a positive integer, got {v}.")


def _make(device, name, num_outputs, source, cycle, batch, batch_info, repeat_last, layout, dtype, ndim, kwargs, api,
          parallel=False, lead=None):
    """Records the external source operator(s); returns a DataNode, or a list of them when
    `num_outputs` is given."""
    from .ops_gen import make_node

    if source is None:
        if cycle is not None and _cycle_mode(cycle) is not None:
            raise ValueError("`cycle` argument is only valid for iterable `source`")
        if num_outputs is not None and api == "fn":
            raise ValueError("The parameter ``num_outputs`` is only valid when using ``source`` to provide data. "
                             "To feed multiple external sources in ``feed_input``, use multiple "
                             "`nvidia.dali.external_source` nodes.")
    elif repeat_last:
        raise ValueError("``repeat_last`` must not be set when using the ``source`` argument It's usable only with "
                         "manually fed `nvidia.dali.ops.ExternalSource`.")
    if num_outputs is not None and name is not None:
        raise ValueError("``num_outputs`` is not compatible with named external sources: give each its own "
                         "`external_source` to name them")
    n = 1 if num_outputs is None else int(num_outputs)
    if parallel and source is None:
        raise ValueError("A parallel external source needs a `source`")
    if batch is None:
        batch = not parallel if api == "ops" else True
    group = None if source is None else _SourceGroup(source, cycle, batch, bool(batch_info), num_outputs,
                                                     parallel=bool(parallel), lead=lead or 1)
    layouts, dtypes, ndims = _per_output(layout, n, "layout"), _per_output(dtype, n, "dtype"), _per_output(ndim, n, "ndim")
    from .pipeline import _debug

    if _debug.active() is not None:  # debug mode: the source is called now
        if group is None:
            raise NotImplementedError("debug mode runs external sources that have a `source`; feed_input is not "
                                      "available there")
        outs = _debug.external_source(group, n, device, layouts, [dict(kwargs, layout=layouts[k], dtype=dtypes[k],
                                                                      ndim=ndims[k]) for k in range(n)])
        return outs[0] if num_outputs is None else outs
    outs = []
    for k in range(n):
        args = dict(kwargs, layout=layouts[k], dtype=dtypes[k], ndim=ndims[k], repeat_last=repeat_last or None)
        node = make_node("ExternalSource", [], args, device=device, name=name)
        node._op.source = group
        if group is not None:
            group.nodes.append(node._op)
            group.layouts.append(layouts[k])
        outs.append(node)
    return outs[0] if num_outputs is None else outs


def external_source(source=None, num_outputs=None, *, cycle=None, name=None, device="cpu", layout=None, dtype=None,
                    ndim=None, cuda_stream=None, use_copy_kernel=None, blocking=None, batch=None, repeat_last=False,
                    parallel=None, no_copy=None, prefetch_queue_depth=None, bytes_per_sample_hint=None,
                    batch_info=None, **kwargs):
    """Data from Python: `source` (a callable, an iterable or a generator function) is
    called once per iteration, or the pipeline is fed with `Pipeline.feed_input(name, data)`
    / `run(name=data)`. Returns a DataNode, or a list of `num_outputs` of them."""
    _check_parallel(parallel, no_copy, prefetch_queue_depth, bytes_per_sample_hint)
    kwargs = dict(kwargs, blocking=blocking, no_copy=no_copy)
    return _make(device, name, num_outputs, source, cycle, batch, batch_info, repeat_last, layout, dtype, ndim, kwargs, "fn",
                 parallel=parallel, lead=prefetch_queue_depth)


class ExternalSource:
    """The object API of `external_source`: arguments given to the constructor or when
    the object is called (not both)."""

    def __init__(self, source=None, num_outputs=None, *, cycle=None, layout=None, dtype=None, ndim=None, name=None,
                 device="cpu", cuda_stream=None, use_copy_kernel=None, batch=None, parallel=None, no_copy=None,
                 prefetch_queue_depth=None, bytes_per_sample_hint=None, batch_info=None, repeat_last=False, **kwargs):
        _check_parallel(parallel, no_copy, prefetch_queue_depth, bytes_per_sample_hint)
        if num_outputs is not None and name is not None:
            raise ValueError("`num_outputs` is not compatible with named `nvidia.dali.ops.ExternalSource`")
        self._device = device
        self._num_outputs = num_outputs
        self._given = dict(source=source, cycle=cycle, layout=layout, dtype=dtype, ndim=ndim, name=name, batch=batch,
                           batch_info=batch_info, repeat_last=repeat_last or None, parallel=parallel,
                           prefetch_queue_depth=prefetch_queue_depth)
        self._kwargs = dict(kwargs, no_copy=no_copy)

    @property
    def device(self):
        return self._device

    def __call__(self, *, source=None, cycle=None, name=None, layout=None, dtype=None, ndim=None, cuda_stream=None,
                 use_copy_kernel=None, batch=None, parallel=None, no_copy=None, prefetch_queue_depth=None,
                 bytes_per_sample_hint=None, batch_info=None, repeat_last=False, **kwargs):
        _check_parallel(parallel, no_copy, prefetch_queue_depth, bytes_per_sample_hint)
        given = dict(self._given)
        call = dict(source=source, cycle=cycle, layout=layout, dtype=dtype, ndim=ndim, name=name, batch=batch,
                    batch_info=batch_info, repeat_last=repeat_last or None, parallel=parallel,
                    prefetch_queue_depth=prefetch_queue_depth)
        for k, v in call.items():
            if v is None:
                continue
            if given.get(k) is not None and k != "name":
                raise ValueError(f"The argument ``{k}`` already specified in constructor.")
            given[k] = v
        if cycle is not None and source is None:
            raise ValueError("The argument ``cycle`` can only be specified if ``source`` is a reusable iterable or a "
                             "generator function specified in this call.")
        kw = dict(self._kwargs, **kwargs)
        return _make(self._device, given["name"], self._num_outputs, given["source"], given["cycle"], given["batch"],
                     given["batch_info"], bool(given["repeat_last"]), given["layout"], given["dtype"], given["ndim"], kw, "ops",
                     parallel=given["parallel"], lead=given["prefetch_queue_depth"])


def to_feed(data, layout):
    """What the engine's `feed` takes for `data`: a Sluice batch (shared, not copied), a
    list of C-contiguous arrays (one per sample), or one array whose first dimension is the
    batch; and the layout to give it (None: keep the batch's own)."""
    from .tensors import TensorCPU, TensorListCPU

    if isinstance(data, TensorListCPU):
        return data._b, layout
    if isinstance(data, (list, tuple)):
        samples = []
        for x in data:
            if isinstance(x, TensorCPU) and layout is None:
                layout = x.layout() or None
            samples.append(_as_array(x))
        return samples, layout
    return _as_array(data, batch=True), layout


def gpu_regions(data, stream=None):
    """For data on the GPU (objects with `__cuda_array_interface__`: CuPy, PyTorch, Numba...;
    or with only `__dlpack__` on a CUDA device: JAX; one whose first dimension is the batch,
    or a list of samples): the samples as (device address, shape, type string), the stream
    to order after (from the interface; None: the legacy default stream), and what must stay
    alive until they are copied (DLPack capsules). `stream`: the caller's raw stream handle,
    which DLPack producers are asked to order their work before. None for host data."""
    if isinstance(data, (list, tuple)):
        gpu = [_gpu_kind(x) for x in data]
        if not any(gpu):
            return None
        if not all(gpu):
            raise TypeError("a batch mixes GPU and host samples; give all on one side")
        regions, keep = [], []
        for x, kind in zip(data, gpu):
            (r,), stream, k = _gpu_samples(x, kind, False, stream)
            regions.append(r)
            keep += k
        return regions, stream, keep
    kind = _gpu_kind(data)
    return None if kind is None else _gpu_samples(data, kind, True, stream)


def _gpu_kind(x):
    if hasattr(x, "__cuda_array_interface__"):
        return "cai"
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and not isinstance(x, np.ndarray) and dev()[0] in (2, 13):  # kDLCUDA, kDLCUDAManaged
        return "dlpack"
    return None


def _gpu_samples(x, kind, dense, stream):
    if kind == "cai":
        regions, own_stream = _cuda_samples(x.__cuda_array_interface__, dense)
        return regions, own_stream if stream is None else stream, []
    # DLPack: the producer orders its work before `stream` (1: the legacy default stream,
    # which a None stream means to the engine too).
    capsule = x.__dlpack__(stream=1 if stream is None else stream)
    ptr, shape, typestr = _core.dlpack_borrow(capsule)
    cai = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "strides": None}
    regions, _ = _cuda_samples(cai, dense)
    return regions, stream, [capsule]


def _cuda_samples(cai, dense):
    shape, typestr = tuple(cai["shape"]), cai["typestr"]
    itemsize = np.dtype(typestr).itemsize
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != tuple(int(np.prod(shape[k + 1:])) * itemsize for k in range(len(shape))):
        raise TypeError("GPU data must be C-contiguous (make it so with .contiguous() / cupy.ascontiguousarray)")
    ptr = cai["data"][0]
    stream = cai.get("stream")
    if not dense:
        return [(ptr, list(shape), typestr)], stream
    if not shape:
        raise TypeError("a single GPU array fed as a batch needs a first dimension (the samples)")
    size = int(np.prod(shape[1:])) * itemsize
    return [(ptr + i * size, list(shape[1:]), typestr) for i in range(shape[0])], stream


def _host_array(x):
    """`_as_array` of what Python code returned (a source in a worker, a python_function):
    PyTorch tensors, on the GPU too, are copied to the host first."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
    return _as_array(x)


class _Capsule:
    """A bare DLPack capsule (what dl_tensor_python_function's functions return) as an object
    with `__dlpack__`, for `np.from_dlpack` and `gpu_regions`."""

    def __init__(self, capsule):
        self._c = capsule

    def __dlpack__(self, stream=None, **kw):
        return self._c

    def __dlpack_device__(self):
        return _core.dlpack_device(self._c)


def _bare_capsules(data):
    """`data` (one object or a list) with bare DLPack capsules wrapped in `_Capsule`."""
    def wrap(x):
        return _Capsule(x) if type(x).__name__ == "PyCapsule" else x

    return [wrap(x) for x in data] if isinstance(data, (list, tuple)) else wrap(data)


def _as_array(x, batch=False):
    if type(x).__name__ == "PyCapsule":
        x = np.from_dlpack(_Capsule(x))
    elif hasattr(x, "__cuda_array_interface__") and not hasattr(x, "__array_interface__"):
        raise NotImplementedError("GPU data cannot become host data here: feed it to a device='gpu' external source, "
                                  "or copy it to the host first")
    elif type(x).__module__.startswith("torch"):
        x = x.detach().cpu().numpy()
    elif hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__") and not hasattr(x, "__array__"):
        x = np.from_dlpack(x)  # host data known only through DLPack
    a = np.asarray(x)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)  # (not for 0-d arrays: it makes them 1-d)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"data of type {a.dtype} is not supported; give numeric arrays")
    if batch and a.ndim == 0:
        raise TypeError("a single array fed as a batch needs a first dimension (the samples); "
                        "give a list of arrays for a batch of scalars")
    return a
