"""Debug mode (`sluice.pipeline.experimental.pipeline_def(debug=True)`): the pipeline
function runs again every iteration and every operator call runs at once, returning a
`DataNodeDebug` whose batch `.get()` gives (print it, look at it with NumPy, branch on it in
Python). NumPy arrays and lists of them are accepted as operator inputs.

Each operator call (the k-th of the function, which must call the same operators in the same
order every iteration, as in DALI) is an engine pipeline of its own, built the first time and
kept: external sources fed with the call's inputs, then the operator. Readers and external
sources therefore keep their place across iterations. Random operators without an explicit
`seed` draw from the debug pipeline's seed and the call's position: deterministic, but not
the numbers the compiled pipeline draws (as in DALI); give `seed=` for those."""

import contextlib
import threading

import numpy as np

from . import DataNode

_local = threading.local()


def active():
    """The debug pipeline whose function is running on this thread, or None."""
    return getattr(_local, "pipeline", None)


@contextlib.contextmanager
def _suspended():
    """While a call's own pipeline is defined: operators are recorded, not run."""
    saved = getattr(_local, "pipeline", None)
    _local.pipeline = None
    try:
        yield
    finally:
        _local.pipeline = saved


def _as_batch(x, what):
    """An operator input as a Sluice batch: a DataNodeDebug's, or NumPy data (a list of
    samples, or an array whose first dimension is the batch)."""
    from ..tensors import TensorListCPU, TensorListGPU

    if isinstance(x, DataNodeDebug):
        return x.get()
    if isinstance(x, DataNode):
        raise TypeError(f"{what}: in debug mode operators take the DataNodeDebug other operators return (or NumPy "
                        "data), not a DataNode of a compiled pipeline")
    if isinstance(x, (TensorListCPU, TensorListGPU)):
        return x
    if isinstance(x, (list, tuple)) or hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        return TensorListCPU(list(x) if isinstance(x, tuple) else x)
    raise TypeError(f"{what}: expected a DataNodeDebug, a list of arrays or an array whose first dimension is the batch, "
                    f"got {type(x).__name__}")


def _device(batch):
    from ..tensors import TensorListGPU

    return "gpu" if isinstance(batch, TensorListGPU) else "cpu"


class DataNodeDebug(DataNode):
    """An operator's output in debug mode: its batch for this iteration (`.get()`), usable
    as an input of the next operators and in arithmetic and indexing, as a DataNode is."""

    __slots__ = ("_batch",)

    def __init__(self, batch, name):
        self._op, self._index, self._expr = None, 0, None
        self._batch = batch
        self.name = name
        self.device = _device(batch)

    def get(self):
        """The batch (TensorListCPU or TensorListGPU)."""
        return self._batch

    def cpu(self):
        return self if self.device == "cpu" else DataNodeDebug(self._batch.as_cpu(), self.name)

    def __repr__(self):
        return f"DataNodeDebug(name={self.name!r}, device={self.device!r}, data={self._batch!r})"

    def __str__(self):
        return f"DataNodeDebug(name={self.name!r}, data={[np.array(s) for s in self._batch.as_cpu()]})"


class _Call:
    """One operator call of the function: its own engine pipeline, fed every iteration."""

    def __init__(self, owner, schema, inputs, arg_inputs, kwargs, device, name):
        from ..ops_gen import make_node
        from ..external_source import external_source
        from . import Pipeline

        self.input_names = [f"__debug_in{i}" for i in range(len(inputs))]
        self.arg_names = {k: f"__debug_arg_{k}" for k in arg_inputs}
        pipe = Pipeline(owner.batch_size, owner.num_threads, owner.device_id, seed=owner.seed + 7919 * (len(owner._calls) + 1),
                        exec_async=False, exec_pipelined=False, prefetch_queue_depth=1)
        with _suspended(), pipe:
            # The inputs' batches may differ in size (merge's inputs are halves of its
            # predicate's batch) and be empty (a branch no sample took); the first sizes the
            # call's iteration.
            ins = [external_source(name=n, device=_device(b), _any_batch_size=True)
                   for n, b in zip(self.input_names, inputs)]
            args = dict(kwargs)
            args.update({k: external_source(name=self.arg_names[k], device="cpu", _any_batch_size=True)
                         for k in arg_inputs})
            outs = make_node(schema, ins, args, device=device, name=name)
            outs = outs if isinstance(outs, list) else [outs]
            pipe.set_outputs(*outs)
            self.names = [o.name for o in outs]
        pipe.build()
        self.pipe = pipe

    def run(self, inputs, arg_inputs):
        for n, b in zip(self.input_names, inputs):
            self.pipe.feed_input(n, b.get() if isinstance(b, DataNodeDebug) else b)
        for k, b in arg_inputs.items():
            self.pipe.feed_input(self.arg_names[k], b)
        return [DataNodeDebug(t, n) for t, n in zip(self.pipe.run(), self.names)]


def run_op(schema, inputs, kwargs, device, name):
    """What `make_node` does in debug mode: runs the call now."""
    owner = active()
    display = schema
    batches = [_as_batch(x, f"{display} input {i}") for i, x in enumerate(inputs)]
    from .. import types as _types

    kwargs = {k: (v.value if isinstance(v, _types.ScalarConstant) else v) for k, v in kwargs.items()}
    arg_inputs = {k: _as_batch(v, f"{display} argument '{k}'") for k, v in kwargs.items()
                  if isinstance(v, (DataNodeDebug, list)) and not _is_plain_list(v)}
    args = {k: v for k, v in kwargs.items() if k not in arg_inputs}
    k = owner._next_call
    owner._next_call += 1
    signature = (schema, device, name, len(batches), sorted(arg_inputs), repr(sorted(args.items())))
    if k == len(owner._calls) and owner._ever_run:
        raise RuntimeError(f"debug mode: this iteration calls more operators than the first ({display} is call {k + 1}); "
                           "the function must call the same operators in the same order every iteration")
    if k == len(owner._calls):
        owner._calls.append(_Call(owner, schema, batches, arg_inputs, args, device, name))
        owner._calls[k].signature = signature
    call = owner._calls[k]
    if getattr(call, "signature", None) != signature:
        raise RuntimeError(f"debug mode: operator call {k} of this iteration is {display}, not the operator the first "
                           "iteration called there; the function must call the same operators in the same order "
                           "every iteration (branch on data by choosing among outputs, not among operators)")
    outs = call.run(batches, arg_inputs)
    return outs[0] if len(outs) == 1 else outs


def _is_plain_list(v):
    """A list argument (e.g. `crop=[10, 20]`), not a batch of per-sample values."""
    return isinstance(v, list) and all(isinstance(x, (int, float, bool, str, np.integer, np.floating)) for x in v)


def external_source(group, count, device, layouts, args_per_output):
    """`fn.external_source` in debug mode: the source is called now, its data fed through an
    external source operator of the call's own pipeline (its checks, its GPU upload)."""
    owner = active()
    # The function makes a new source object every iteration: the first one is kept (its
    # position in the data is the source's state).
    group = owner._groups.setdefault(owner._next_call, group)
    outs = group.next_data(owner.batch_size, owner._epoch_idx)
    nodes = []
    for k in range(count):
        key = owner._next_call
        owner._next_call += 1
        if key == len(owner._calls) and owner._ever_run:
            raise RuntimeError("debug mode: this iteration calls more operators than the first (an external source); "
                               "the function must call the same operators in the same order every iteration")
        if key == len(owner._calls):
            owner._calls.append(_SourceCall(owner, args_per_output[k], device))
        nodes.append(owner._calls[key].run(outs[k], layouts[k]))
    from .. import _conditionals

    stack = _conditionals.active_stack()
    if stack is not None:  # a source has no inputs: its batch is the whole batch, wherever it is made
        stack.register(nodes, has_node_inputs=False)
    return nodes


class _SourceCall:
    def __init__(self, owner, args, device):
        from ..ops_gen import make_node
        from . import Pipeline

        pipe = Pipeline(owner.batch_size, owner.num_threads, owner.device_id, exec_async=False, exec_pipelined=False,
                        prefetch_queue_depth=1)
        with _suspended(), pipe:
            node = make_node("ExternalSource", [], dict(args), device=device, name="__debug_source")
            pipe.set_outputs(node)
        pipe.build()
        self.pipe = pipe

    def run(self, data, layout):
        self.pipe.feed_input("__debug_source", data, layout=layout)
        (out,) = self.pipe.run()
        return DataNodeDebug(out, "external_source")


class DebugPipeline:
    """What `experimental.pipeline_def(debug=True)` makes: runs the function every
    iteration, each operator at once; `run()` returns what the function returns."""

    def __init__(self, function, args, kwargs, batch_size=-1, num_threads=-1, device_id=-1, seed=-1,
                 enable_conditionals=False, **unused):
        from .. import _conditionals, _core

        # With conditionals the function is converted once, as for a compiled pipeline; each
        # run gets a fresh condition stack (the splits and merges run at once, as calls).
        self._conditionals = enable_conditionals
        self._function = _conditionals.convert(function) if enable_conditionals else function
        self._args, self._kwargs = args, kwargs
        self._condition_stack = None
        self.batch_size, self.num_threads, self.device_id, self.seed, _ = _core.pipeline_params(
            batch_size, num_threads, device_id, seed, 1)
        self._calls = []
        self._groups = {}  # call index -> the external source's _SourceGroup
        self._next_call = 0
        self._epoch_idx = 0
        self._ended = False
        self._ever_run = False

    @property
    def max_batch_size(self):
        return self.batch_size

    def build(self):
        """Nothing to build ahead: operators are built as the function first calls them."""

    def run(self):
        if self._ended:
            raise StopIteration
        from .. import _conditionals

        _local.pipeline = self
        self._next_call = 0
        if self._conditionals:
            self._condition_stack = _conditionals.ConditionStack()
        try:
            outs = self._function(*self._args, **self._kwargs)
        except StopIteration:
            self._ended = True
            raise
        except Exception as e:
            if self._conditionals:
                _conditionals.explain(e)
            raise
        finally:
            _local.pipeline = None
            self._condition_stack = None
        if self._ever_run and self._next_call != len(self._calls):
            raise RuntimeError(f"debug mode: this iteration called {self._next_call} operators, the first called "
                               f"{len(self._calls)}; the function must call the same operators in the same order "
                               "every iteration")
        self._ever_run = True
        outs = outs if isinstance(outs, (list, tuple)) else (outs,)
        return tuple(_as_batch(o, f"output {i}") for i, o in enumerate(outs))

    def reset(self):
        """Starts the next epoch of the external sources once one ended."""
        if self._ended:
            self._ended = False
            self._epoch_idx += 1
            for group in self._groups.values():
                group.reset_indices()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

