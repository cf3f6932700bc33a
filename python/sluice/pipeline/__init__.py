"""Pipeline, pipeline_def and DataNode: describe a graph once in Python; the Rust engine
runs it. Mirrors `nvidia.dali.pipeline`."""

import collections
import functools
import inspect
import itertools
import threading
import warnings

import numpy as np

from .. import _conditionals, _core, _distributed, errors
from . import _checkpoint, _serialize
from ..tensors import TensorListCPU, TensorListGPU

_op_ids = itertools.count()
_local = threading.local()


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class DataNode:
    """An output of an operator: what operators take as inputs and pipelines return."""

    __slots__ = ("_op", "_index", "name", "device", "_expr")

    def __init__(self, op, index, device):
        self._op = op
        self._index = index
        self.device = device
        self.name = f"{op.name}[{index}]"
        # For outputs of arithmetic expressions: the expression tree, so that nested
        # expressions fuse into one operator (see _arith).
        self._expr = None

    def gpu(self):
        """This node copied to the GPU (a transfer operator on the 'mixed' stage); a node
        already on the GPU is itself, as in DALI."""
        if self.device == "gpu":
            return self
        from ..ops_gen import make_node

        return make_node("MakeContiguous", [self], {}, device="mixed")

    def cpu(self):
        """This node copied back to the CPU: a GPU node needs the dynamic executor
        (`exec_dynamic`, DALI's default since 2.0), and the engine downloads the batch once
        the GPU work producing it is done. A node already on the CPU is itself."""
        if self.device == "cpu":
            return self
        from ..ops_gen import make_node

        return make_node("MakeContiguous", [self], {}, device="cpu")

    def shape(self, *, dtype=None, device="cpu"):
        """The run-time shape of every sample of this node, as a new node (`fn.shapes`): a
        1-D tensor of `dtype` (INT64 unless given) per sample, on `device` ("cpu" or "gpu")."""
        from ..ops_gen import make_node

        if device not in ("cpu", "gpu"):
            raise ValueError(f"{self.name}.shape(): device must be \"cpu\" or \"gpu\", got {device!r}")
        if device == "cpu" and self.device == "gpu":
            from ._debug import DataNodeDebug

            if isinstance(self, DataNodeDebug):  # debug mode holds the batch: it can come back
                return self.cpu().shape(dtype=dtype)
            # Taken from the GPU batch's metadata, then only the shapes come back.
            return self.shape(dtype=dtype, device="gpu").cpu()
        # warn=False: DALI deprecates fn.shapes in favour of this method, which never warns.
        out = make_node("Shapes", [self], {} if dtype is None else {"dtype": dtype}, device=self.device, warn=False)
        # DALI's gpu operator reads a cpu node's shapes too; ours takes gpu inputs, so the
        # shapes are taken on the cpu and moved, which gives the same batch.
        return out.gpu() if device == "gpu" else out

    def property(self, key, *, device="cpu"):
        """A metadata property of every sample as a new node (`fn.get_property`): "source_info"
        (the file or record it came from) or "layout", as 1-D uint8 tensors, on `device`."""
        from ..ops_gen import make_node

        if device not in ("cpu", "gpu"):
            raise ValueError(f"{self.name}.property(): device must be \"cpu\" or \"gpu\", got {device!r}")
        out = make_node("GetProperty", [self], {"key": key}, device=self.device)
        return out.gpu() if device == "gpu" else out.cpu()

    def source_info(self, *, device="cpu"):
        """`property("source_info")`."""
        return self.property("source_info", device=device)

    def __repr__(self):
        return f"DataNode(name={self.name!r}, device={self.device!r})"

    def __bool__(self):
        raise TypeError(
            '"DataNode" was used in conditional context - it might have been used in truth evaluation for `if` '
            "statement, logical expression or cast to a boolean. To use conditional execution via `if` statements you "
            "need to specify `enable_conditionals=True` in `@sluice.pipeline_def` decorator. You can read more about "
            "conditional execution in specific section of the Pipeline documentation. Bool conversion can be achieved "
            "with the `cast` operator.")

    __hash__ = object.__hash__

    # -- arithmetic (one fused _ArithmeticGenericOp per expression, as DALI)
    def __add__(self, other):
        return _arith("add", self, other)

    def __radd__(self, other):
        return _arith("add", other, self)

    def __sub__(self, other):
        return _arith("sub", self, other)

    def __rsub__(self, other):
        return _arith("sub", other, self)

    def __mul__(self, other):
        return _arith("mul", self, other)

    def __rmul__(self, other):
        return _arith("mul", other, self)

    def __truediv__(self, other):
        return _arith("fdiv", self, other)

    def __rtruediv__(self, other):
        return _arith("fdiv", other, self)

    def __floordiv__(self, other):
        return _arith("div", self, other)

    def __rfloordiv__(self, other):
        return _arith("div", other, self)

    def __mod__(self, other):
        return _arith("mod", self, other)

    def __rmod__(self, other):
        return _arith("mod", other, self)

    def __pow__(self, other):
        return _arith("pow", self, other)

    def __rpow__(self, other):
        return _arith("pow", other, self)

    def __neg__(self):
        return _arith("minus", self)

    def __pos__(self):
        return self  # as DALI: unary + is a no-op

    def __abs__(self):
        return _arith("abs", self)

    def __eq__(self, other):
        return _arith("eq", self, other)

    def __ne__(self, other):
        return _arith("neq", self, other)

    def __lt__(self, other):
        return _arith("lt", self, other)

    def __le__(self, other):
        return _arith("leq", self, other)

    def __gt__(self, other):
        return _arith("gt", self, other)

    def __ge__(self, other):
        return _arith("geq", self, other)

    def __and__(self, other):
        return _arith("bitand", self, other)

    def __rand__(self, other):
        return _arith("bitand", other, self)

    def __or__(self, other):
        return _arith("bitor", self, other)

    def __ror__(self, other):
        return _arith("bitor", other, self)

    def __xor__(self, other):
        return _arith("bitxor", self, other)

    def __rxor__(self, other):
        return _arith("bitxor", other, self)

    # -- indexing (DALI's TensorSubscript)
    def __getitem__(self, val):
        """`node[1:3, :, 0]`: integer indices remove their axis, slices (with steps, negative
        bounds) keep it; `None` is a full slice, as in DALI. Indices may be DataNodes."""
        from ..ops_gen import make_node

        if not isinstance(val, tuple):
            val = (val,)
        args = {}
        for i, idx in enumerate(val):
            if idx is None:
                continue
            if idx is Ellipsis:
                raise NotImplementedError("Ellipsis in indexing is not implemented")
            if isinstance(idx, slice):
                for key, v in (("lo", idx.start), ("hi", idx.stop), ("step", idx.step)):
                    if v is not None:
                        args[f"{key}_{i}"] = _index_value(v)
            else:
                args[f"at_{i}"] = _index_value(idx)
        return make_node("_TensorSubscript", [self], dict(args, num_subscripts=len(val)))


def _index_value(v):
    if isinstance(v, DataNode):
        return v
    if isinstance(v, (float, str)) or not hasattr(v, "__index__"):
        raise TypeError(f"invalid type for an index: {type(v).__name__}")
    return int(v.__index__())


_INT32 = (-(1 << 31), (1 << 31) - 1)


def _operand(x):
    """An expression operand: a DataNode (fused when it is itself an expression), a Python
    scalar constant, typed as DALI types them (bool -> BOOL, int -> INT32, float -> FLOAT), a
    NumPy scalar (its own type), or a list / tuple / array, a constant tensor."""
    if isinstance(x, DataNode):
        return x._expr if x._expr is not None else ("in", x)
    from ..types import ScalarConstant, to_numpy_type

    if isinstance(x, ScalarConstant):
        return ("const", x.value, np.dtype(to_numpy_type(x.dtype)).name)
    if isinstance(x, (np.integer, np.bool_, np.float16, np.float32)):
        # A NumPy scalar keeps its type, as DALI's types.Constant gives it (x + np.uint8(1)
        # stays UINT8); np.float64, a Python float, is taken as one below.
        kind = x.dtype.kind
        return ("const", int(x) if kind in "iub" else float(x), "bool" if kind == "b" else x.dtype.name)
    if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "shape", None) == ():
        x = x.item()  # a 0-d array
    if isinstance(x, bool):
        return ("const", int(x), "bool")
    if isinstance(x, int):
        if not _INT32[0] <= x <= _INT32[1]:
            raise OverflowError(f"integer constant {x} out of range for int32")
        return ("const", x, "int32")
    if isinstance(x, float):
        return ("const", x, "float32")
    if isinstance(x, (list, tuple, np.ndarray)):
        # As DALI: a list, tuple or array is a constant tensor, typed as types.Constant
        # types it (int64 -> INT32, float64 -> FLOAT), broadcast against the other operands.
        from ..types import Constant

        return ("in", Constant(np.asarray(x)))
    raise TypeError(f"unsupported operand type for an arithmetic expression: {type(x).__name__}")


def _arith(op, *operands):
    """One arithmetic operation; nested expressions are fused into a single
    `_ArithmeticGenericOp` whose `expression_desc` holds the whole tree."""
    from ..ops_gen import make_node

    tree = (op,) + tuple(_operand(x) for x in operands)
    inputs, index, ints, reals = [], {}, [], []

    def emit(t):
        kind = t[0]
        if kind == "in":
            node = t[1]
            if id(node) not in index:
                index[id(node)] = len(inputs)
                inputs.append(node)
            return f"&{index[id(node)]}"
        if kind == "const":
            _, v, ty = t
            lst = reals if ty.startswith("float") else ints
            lst.append(v)
            return f"${len(lst) - 1}:{ty}"
        return f"{kind}({' '.join(emit(c) for c in t[1:])})"

    desc = emit(tree)
    if not inputs:
        raise TypeError(f"arithmetic operation '{op}' needs at least one DataNode operand")
    if any(x.device != "cpu" for x in inputs):
        # As DALI: one GPU operand puts the expression on the GPU, the others follow it there.
        inputs = [x if x.device != "cpu" else x.gpu() for x in inputs]
    kwargs = {"expression_desc": desc}
    if ints:
        kwargs["integer_constants"] = ints
    if reals:
        kwargs["real_constants"] = [float(r) for r in reals]
    out = make_node("_ArithmeticGenericOp", inputs, kwargs)
    out._expr = tree
    return out


def _warn_deprecated(messages):
    """DALI's deprecation warnings for old argument names, at the user's line."""
    if messages:
        import warnings

        for m in messages:
            warnings.warn(m, DeprecationWarning, stacklevel=5)


class _OpNode:
    """One operator instance as the user wrote it: name (schema or legacy class), device
    as given, inputs, argument inputs and arguments. The engine checks it as it is created
    and says what it produces; Python records, the engine decides."""

    __slots__ = ("id", "schema", "device", "name", "inputs", "arg_inputs", "args", "outputs", "source")

    def __init__(self, schema, device, name, inputs, arg_inputs, args, warn=True):
        self.id = next(_op_ids)
        self.schema = schema
        self.device = device
        self.name = name or f"__{schema.split('__')[-1]}_{self.id}"
        self.inputs = inputs
        self.arg_inputs = arg_inputs
        self.args = args
        self.source = None  # an external source's Python source (external_source._SourceGroup)
        # Edges are not known yet (operators are numbered at build): placeholders.
        current = Pipeline.current()
        num_outputs, on_gpu, deprecations = _core.check_op(
            self.spec([(0, 0)] * len(inputs), [(k, 0, 0) for k in arg_inputs]),
            [x.device == "gpu" for x in inputs],
            [x.device == "gpu" for x in arg_inputs.values()],
            # Outside a pipeline the check waits for the build, as in DALI.
            True if current is None else current._exec_dynamic,
        )
        if warn:
            _warn_deprecated(deprecations)
        out_device = "gpu" if on_gpu else "cpu"
        self.outputs = [DataNode(self, i, out_device) for i in range(num_outputs)]

    def spec(self, inputs, arg_inputs):
        """The tuple the engine reads, with edges given as (operator index, output)."""
        return (self.schema, self.device, self.name, inputs, arg_inputs, list(self.args.items()))


BadSample = collections.namedtuple("BadSample", ["file", "error", "iteration", "sample", "operator", "action"])
BadSample.__doc__ = ("A sample `on_error` skipped or replaced (see `Pipeline.bad_samples`); `action` is \"skip\" or "
                     "\"replace\".")

_PIPELINE_KWARGS = (
    "batch_size", "num_threads", "device_id", "seed", "exec_pipelined", "prefetch_queue_depth",
    "exec_async", "bytes_per_sample", "set_affinity", "max_streams", "default_cuda_stream_priority",
    "enable_memory_stats", "enable_checkpointing", "checkpoint", "py_num_workers", "py_start_method",
    "py_callback_pickler", "output_dtype", "output_ndim", "output_layout", "exec_dynamic",
    "experimental_exec_dynamic", "stream_policy", "concurrency", "on_error", "max_bad_samples",
)


class Pipeline:
    """A data pipeline: a graph of operators and the engine that runs it batch after batch.

    `device_id=None` runs CPU-only, on any machine; `device_id="auto"` takes this process's
    GPU from the launcher (torchrun's LOCAL_RANK, Slurm, Open MPI; 0 outside one).

    `on_error` (Sluice's): what a sample that cannot be read or decoded does. `"raise"` (the
    default, as DALI): `run()` raises, naming operator, sample and file, and the next `run()`
    goes on. `"skip"`: the sample is replaced by the next good sample of the same shard, so
    the batch keeps its size and every epoch its length; the same seed skips the same files
    whatever `num_threads`. `"replace"`: the sample keeps its place, as zeros of the shape
    another sample of the batch gives there (labels and other outputs of a reader too).
    Skipped and replaced samples are listed by `bad_samples()` and counted in
    `executor_statistics()`; past `max_bad_samples` of them, the next one raises. A reader or
    decoder's own `on_error` argument overrides the pipeline's.
    """

    def __init__(self, batch_size=-1, num_threads=-1, device_id=-1, seed=-1, exec_pipelined=True,
                 prefetch_queue_depth=2, exec_async=True, bytes_per_sample=0, set_affinity=False,
                 max_streams=-1, default_cuda_stream_priority=0, *, enable_memory_stats=False,
                 enable_checkpointing=False, checkpoint=None, py_num_workers=1, py_start_method="fork",
                 py_callback_pickler=None, output_dtype=None, output_ndim=None, output_layout=None,
                 exec_dynamic=None, experimental_exec_dynamic=False, stream_policy=None, concurrency=None,
                 on_error="raise", max_bad_samples=None):
        if isinstance(device_id, str) and device_id == "auto":
            device_id = _distributed.local_device_id()
        batch_size, num_threads, device_id, seed, depth = _core.pipeline_params(
            batch_size, num_threads, device_id, seed, prefetch_queue_depth)
        self._batch_size = -1 if batch_size is None else batch_size
        self._num_threads = num_threads
        self._device_id = device_id
        self._seed = seed
        self._prefetch_queue_depth = depth
        self._exec_async = bool(exec_async)
        self._exec_pipelined = bool(exec_pipelined)
        if exec_dynamic is None:
            # DALI's default since 2.0: the dynamic executor wherever the pipeline is
            # asynchronous and pipelined, with one prefetch queue for both stages.
            exec_dynamic = bool(experimental_exec_dynamic) or (
                self._exec_async and self._exec_pipelined and not isinstance(prefetch_queue_depth, dict))
        self._exec_dynamic = bool(exec_dynamic)
        self._enable_checkpointing = bool(enable_checkpointing)
        self._checkpoint = checkpoint  # applied at build
        if on_error not in ("raise", "skip", "replace"):
            raise ValueError(f'on_error must be "raise", "skip" or "replace", got {on_error!r}')
        if max_bad_samples is not None and (not isinstance(max_bad_samples, int) or max_bad_samples < 0):
            raise ValueError(f"max_bad_samples must be a non-negative integer or None, got {max_bad_samples!r}")
        self._on_error = on_error
        self._max_bad_samples = max_bad_samples
        self._bad_samples_warned = False
        self._restored = False
        self._iterator_data = ""  # a framework iterator's state, from the checkpoint restored
        self._py_num_workers = py_num_workers
        self._py_start_method = py_start_method
        self._py_callback_pickler = py_callback_pickler
        self._pool = None  # worker processes of parallel external sources
        self._ops = []  # every operator created while this pipeline was current
        self._outputs = None
        self._engine = None
        self._built = False
        self._readers_without_padding = set()  # see _leave_out_padding
        # External sources: the Python sources the built graph kept, and the fed ones by name.
        self._sources = []
        self._input_names = {}
        self._es_devices = {}
        # Epoch bookkeeping, as DALI keeps it: iterations scheduled (sources called and fed)
        # but not yet returned; the end of the data reached; epochs begun.
        self._first_iter = True
        self._last_iter = False
        self._batches_to_consume = 0
        self._epoch_idx = 0
        self._consumer_iter = 0  # outputs() calls this epoch (checkpoints' `iter`)

    # -- properties DALI exposes
    @property
    def batch_size(self):
        return self._batch_size

    @property
    def max_batch_size(self):
        return self._batch_size

    @property
    def num_threads(self):
        return self._num_threads

    @property
    def device_id(self):
        return self._device_id

    @property
    def seed(self):
        return self._seed

    @property
    def exec_pipelined(self):
        return self._exec_pipelined

    @property
    def exec_async(self):
        return self._exec_async

    @property
    def exec_dynamic(self):
        return self._exec_dynamic

    @property
    def prefetch_queue_depth(self):
        return self._prefetch_queue_depth

    # -- graph definition
    @staticmethod
    def current():
        """The pipeline whose graph is being defined (inside `with pipe:` or a pipeline_def)."""
        s = _stack()
        return s[-1] if s else None

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False

    def _register(self, op):
        self._ops.append(op)

    def set_outputs(self, *outputs):
        """Declares the pipeline's outputs (DataNodes)."""
        flat = []
        for o in outputs:
            if isinstance(o, (list, tuple)) and o and all(isinstance(e, (int, float, bool, np.generic)) for e in o):
                # A 1-D list of numbers is one constant output, as in DALI.
                flat.append(np.asarray(o))
            elif isinstance(o, (list, tuple)):
                flat.extend(o)
            else:
                flat.append(o)
        from ..types import Constant, ScalarConstant

        # Constants returned as outputs become Constant operators, as in DALI.
        flat = [Constant(o.value, o.dtype, shape=[]) if isinstance(o, ScalarConstant)
                else Constant(o, shape=[]) if isinstance(o, (int, float, bool, np.generic))
                else Constant(o) if isinstance(o, np.ndarray) else o for o in flat]
        for o in flat:
            if not isinstance(o, DataNode):
                raise TypeError(f"pipeline outputs must be DataNodes, got {type(o).__name__}")
        self._outputs = flat

    def define_graph(self):
        """Override in a subclass: create the graph and return its outputs."""
        raise NotImplementedError("define the graph with pipeline_def, `with pipe:` + set_outputs, or override define_graph()")

    # -- building and running
    def build(self):
        """Checks the graph and starts the engine. Called by `run()` when needed."""
        if self._built:
            return
        if self._batch_size == -1:
            raise errors.GraphError("batch_size is required")
        self._define_outputs()
        restore = self._checkpoint_to_restore()
        ops = self._collect()
        self._start_workers(ops)
        index = {op.id: k for k, op in enumerate(ops)}
        spec = [op.spec([(index[n._op.id], n._index) for n in op.inputs],
                        [(k, index[n._op.id], n._index) for k, n in op.arg_inputs.items()])
                for op in ops]
        # An iterator's request, not the graph's: not in op.args, so never serialized.
        spec = [s[:5] + (s[5] + [("_omit_padding", True)],) if op.name in self._readers_without_padding else s
                for op, s in zip(ops, spec)]
        outputs = [(index[o._op.id], o._index) for o in self._outputs]
        try:
            self._engine = _core.Pipeline(self._batch_size, self._num_threads, self._device_id, self._seed,
                                          self._prefetch_queue_depth, self._exec_async, self._exec_pipelined,
                                          spec, outputs, None if restore is None else (
                                              restore["iteration"], [tuple(r) for r in restore["readers"]],
                                              [tuple(r) for r in restore.get("excluded", [])]),
                                          self._on_error, self._max_bad_samples, self._exec_dynamic)
        except BaseException:
            if self._pool is not None:  # the workers started above: stop them with the build
                self._pool.close()
                self._pool = None
            raise
        self._built = True
        self._bind_sources(ops)
        if self._enable_checkpointing:
            for group, _ in self._sources:
                group.warn_if_not_checkpointed()
        if restore is not None:
            # External sources' callbacks go on from the iteration and epoch the consumer
            # had reached (as DALI: an iteration's samples start at iteration * batch_size).
            data = restore["pipeline_data"]
            self._consumer_iter, self._epoch_idx = data["iter"], data["epoch_idx"]
            for group, _ in self._sources:
                group.resume_at(self._consumer_iter, self._consumer_iter * self._batch_size)
            self._iterator_data = restore.get("iterator_data", "")
            self._restored = True

    def _leave_out_padding(self, reader_name):
        """For an iterator that cuts each epoch's last batch to its real samples (PARTIAL):
        reader `reader_name`, if it pads (`pad_last_batch`), leaves the padding out of its
        batches instead, so the pipeline does not decode and augment samples nobody sees.
        Only before the pipeline is built (a built one runs as it was asked to); returns
        whether it took effect."""
        if self._built:
            return False
        self._readers_without_padding.add(reader_name)
        return True

    def _define_outputs(self, define_graph=None):
        """Runs `define_graph` (a subclass's, or the one given) once if no outputs are set."""
        if self._outputs is None:
            with self:
                outs = (define_graph or self.define_graph)()
            if isinstance(outs, DataNode):
                outs = [outs]
            self.set_outputs(*outs)

    def serialize(self, define_graph=None, filename=None):
        """The pipeline's definition as text: every operator with its arguments, the outputs
        and the constructor's parameters (not its state: see `checkpoint`). Also written to
        `filename` when given. External sources keep no Python `source` (feed them with
        `feed_input`); Python functions cannot be serialized."""
        if define_graph is not None and not callable(define_graph):
            raise TypeError("Provided `define_graph` argument is not callable."
                            + (" Didn't you want to write `.serialize(filename=...)`?" if isinstance(define_graph, str) else ""))
        self._define_outputs(define_graph)
        text = _serialize.dumps(self, self._collect(), self._outputs)
        if filename is not None:
            with open(filename, "w") as f:
                f.write(text)
        return text

    @classmethod
    def deserialize(cls, serialized_pipeline=None, filename=None, **kwargs):
        """A built pipeline from what `serialize()` gave (or the file it wrote), with the
        serialized parameters unless `kwargs` give others (`checkpoint=` included)."""
        if (serialized_pipeline is None) == (filename is None):
            raise ValueError("serialized_pipeline and filename arguments are mutually exclusive. Precisely one of them "
                             "should be defined.")
        if filename is not None:
            with open(filename) as f:
                serialized_pipeline = f.read()
        state = _serialize.loads(serialized_pipeline)
        pipe = cls(**dict(state["params"], **kwargs))
        _serialize.graph(pipe, state)
        pipe.build()
        return pipe

    def deserialize_and_build(self, serialized_pipeline):
        """Loads what `serialize()` gave into this pipeline (which must have no graph yet) and
        builds it; parameters this pipeline was not given come from the serialized one."""
        if self._outputs is not None or self._ops:
            raise RuntimeError("deserialize_and_build needs a pipeline with no operators of its own")
        state = _serialize.loads(serialized_pipeline)
        if self._batch_size == -1:
            self._batch_size = state["params"]["batch_size"]
        if not self._enable_checkpointing:
            self._enable_checkpointing = state["params"]["enable_checkpointing"]
        _serialize.graph(self, state)
        self.build()

    def _checkpoint_to_restore(self):
        """The checkpoint given to the constructor, decoded (its seed becomes the
        pipeline's), or None."""
        if self._checkpoint is None:
            return None
        if not self._enable_checkpointing:
            raise RuntimeError(_checkpoint.NOT_ENABLED_RESTORE)
        state = _checkpoint.decode(self._checkpoint)
        self._seed = state["seed"]
        return state

    def _rebuild_from_checkpoint(self, checkpoint):
        """Starts this pipeline over from `checkpoint`: the engine (and any worker
        processes) are rebuilt from the same graph (a framework iterator's
        `load_state_dict`)."""
        for group, _ in self._sources:
            group.reset_indices()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._engine = None
        self._built = False
        self._first_iter, self._last_iter = True, False
        self._batches_to_consume = self._epoch_idx = self._consumer_iter = 0
        self._checkpoint = checkpoint
        self.build()

    @property
    def is_restored_from_checkpoint(self):
        """True once built from a checkpoint (`checkpoint=`)."""
        return self._restored

    def checkpoint(self, filename=None):
        """The pipeline's state after the batches returned so far, as bytes; a pipeline made
        with `checkpoint=` these bytes (and the same definition) returns the batches this one
        would return next. Also written to `filename` when given."""
        data = self._get_checkpoint()
        if filename is not None:
            with open(filename, "wb") as f:
                f.write(data)
        return data

    def _get_checkpoint(self, iterator_data=""):
        if not self._enable_checkpointing:
            raise RuntimeError(_checkpoint.NOT_ENABLED_SAVE)
        self.build()
        iteration, readers, excluded = self._engine.checkpoint()
        return _checkpoint.encode(self._seed, iteration, readers,
                                  {"iter": self._consumer_iter, "epoch_idx": self._epoch_idx}, iterator_data,
                                  excluded)

    def _start_workers(self, ops):
        """Starts the worker processes of parallel external sources before the engine
        starts its threads (forking a process with threads risks the child; Python 3.12
        warns). Sources the engine later prunes get workers that are never asked anything."""
        parallel = list({id(op.source): op.source for op in ops
                         if op.schema == "ExternalSource" and op.source is not None and op.source.parallel}.values())
        if not parallel:
            return
        if self._py_num_workers == 0:
            for g in parallel:  # DALI: no workers means every source runs here
                g.run_in_process()
            return
        from .._parallel import WorkerPool

        for k, g in enumerate(parallel):
            g.index = k
        self._pool = WorkerPool(parallel, self._py_num_workers, self._py_start_method, self._py_callback_pickler)
        for g in parallel:
            g.pool = self._pool

    def _bind_sources(self, ops):
        """Keeps the Python sources whose external sources survived pruning; warns about
        outputs of a multi-output source that nothing uses (the source computes them anyway)."""
        kept = set(self._engine.feed_names())
        groups = {}
        self._es_devices = {op.name: op.device or "cpu" for op in ops if op.schema == "ExternalSource"}
        for op in ops:
            if op.schema != "ExternalSource":
                continue
            if op.source is None:
                self._input_names[op.name] = op
            else:
                groups[id(op.source)] = op.source
        for g in groups.values():
            used = [op.name in kept for op in g.nodes]
            if not any(used):
                continue
            unused = [i for i, u in enumerate(used) if not u]
            if unused:
                import warnings

                which = (f"output at the index {unused[0]} is" if len(unused) == 1
                         else f"outputs at the indices {', '.join(map(str, unused))} are")
                warnings.warn(f"The external source node '{str(g.source)[:103]}' produces {len(g.nodes)} outputs, "
                              f"but the {which} not used. For best performance, adjust your callback so that it "
                              "computes only the needed outputs.", Warning, stacklevel=3)
            self._sources.append((g, used))

    def _collect(self):
        """Every operator created for this pipeline, and those its outputs read that were
        created outside it, in creation order. The engine prunes what no output needs."""
        seen = {}
        stack = [o._op for o in self._outputs] + self._ops
        while stack:
            op = stack.pop()
            if op.id in seen:
                continue
            seen[op.id] = op
            stack.extend(n._op for n in op.inputs)
            stack.extend(n._op for n in op.arg_inputs.values())
        return sorted(seen.values(), key=lambda op: op.id)

    def iter_setup(self):
        """Override to feed inputs before each iteration (called once per iteration the
        pipeline schedules, `feed_input` included)."""

    def feed_input(self, data_node, data, layout=None, cuda_stream=None, use_copy_kernel=False):
        """Queues one batch for the external source `data_node` (its name or its DataNode):
        a list of arrays (one per sample), one array whose first dimension is the batch, or
        a TensorListCPU. Each iteration takes one batch."""
        self.build()
        name = data_node._op.name if isinstance(data_node, DataNode) else data_node
        if name not in self._input_names and any(name == op.name for g, _ in self._sources for op in g.nodes):
            raise errors.GraphError(f"Cannot use `feed_input` on the external source '{name}' with a `source` "
                                    "argument specified.")
        self._feed(name, data, layout, cuda_stream)

    def _feed(self, name, data, layout, cuda_stream=None):
        from ..external_source import gpu_regions, to_feed

        if cuda_stream is not None:  # a torch/cupy stream object, or a raw handle
            cuda_stream = getattr(cuda_stream, "cuda_stream", getattr(cuda_stream, "ptr", cuda_stream))
        on_gpu = None if isinstance(data, TensorListGPU) else gpu_regions(data, cuda_stream)
        if (on_gpu is not None or isinstance(data, TensorListGPU)) and self._es_devices.get(name, "cpu") != "gpu":
            raise errors.ArgumentTypeError(f"GPU data fed to the cpu external source '{name}': create it with "
                                           "device='gpu', or feed host data")
        if isinstance(data, TensorListGPU):
            self._engine.feed(name, data._b, layout)
        elif on_gpu is not None:
            regions, stream, keep = on_gpu  # (keep: DLPack capsules, alive until copied)
            self._engine.feed_gpu(name, regions, stream, layout)
            del keep
        else:
            batch, layout = to_feed(data, layout)
            self._engine.feed(name, batch, layout)

    def run(self, *cuda_stream, **inputs):
        """Runs one iteration; returns a tuple with one TensorList per output. `inputs`
        (name=data) are fed to the external sources of those names first; that needs
        `prefetch_queue_depth=1` or `exec_pipelined=False`, so the data is for this iteration."""
        if inputs and self._exec_pipelined and self._prefetch_queue_depth > 1:
            raise errors.GraphError(
                "When using pipeline inputs (run(**inputs)), `prefetch_queue_depth` in Pipeline constructor shall be "
                f"set to 1 (for both devices) or exec_pipelined=False. Received: "
                f"prefetch_queue_depth={self._prefetch_queue_depth},\n exec_pipelined={self._exec_pipelined}.")
        self.build()
        for name, data in inputs.items():
            self.feed_input(name, data)
        self.schedule_run()
        return self.outputs()

    def schedule_run(self):
        """Schedules iterations: calls every external source's `source` and `iter_setup()`
        and feeds what they give. The first call schedules `prefetch_queue_depth`
        iterations (the engine runs that far ahead), later ones one each. A source that
        raises StopIteration ends the epoch: nothing more is scheduled until `reset()`."""
        self.build()
        rounds = self._prefetch_queue_depth if self._first_iter and self._exec_pipelined else 1
        self._first_iter = False
        for _ in range(rounds):
            if self._last_iter:
                return
            if not self._schedule_iteration():
                self._last_iter = True
                return
            self._batches_to_consume += 1

    def _schedule_iteration(self):
        """One iteration's data: every source called, then `iter_setup()`; fed only when
        none raised StopIteration (then False: the epoch ended)."""
        ended = False
        data = []
        if self._pool is not None:  # blocks of batches gone since: back to their workers
            self._pool.give_back(self._engine.take_returned())
            for name in self._pool.take_retired():
                self._engine.forget_shared(name)
        for group, used in self._sources:
            try:
                data.append((group, used, group.next_data(self._batch_size, self._epoch_idx)))
            except StopIteration:
                ended = True
        try:
            self.iter_setup()
        except StopIteration:
            ended = True
        # Shared-memory chunks are the engine's once passed to it (it returns their tokens);
        # chunks not fed (the epoch ended, another source failed) go back to their workers.
        unfed = [g for g, _, _ in data if g.parallel]
        try:
            if ended:
                return False
            for group, used, outs in data:
                if group.parallel:  # outs: the workers' shared-memory chunks
                    unfed.remove(group)
                    self._engine.feed_shared([(op.name, layout) if u else None
                                              for op, u, layout in zip(group.nodes, used, group.layouts)], outs)
                    continue
                for op, u, out, layout in zip(group.nodes, used, outs, group.layouts):
                    if u:
                        self._feed(op.name, out, layout)
            return True
        finally:
            for group, _, outs in data:
                if group in unfed:
                    self._pool.give_back([token for _, token, _ in outs])

    def outputs(self):
        """The next scheduled iteration's outputs; StopIteration once the epoch's are all
        returned."""
        self.build()
        self._consumer_iter += 1  # a call that ends the epoch counts too, as in DALI
        if self._batches_to_consume == 0:
            if self._last_iter:
                raise StopIteration
            # More outputs() than scheduled iterations: schedule the next (DALI would wait).
            self.schedule_run()
            if self._batches_to_consume == 0:
                raise StopIteration
        self._batches_to_consume -= 1
        try:
            out = self._engine.run()
        except errors.InputError:
            self._batches_to_consume += 1  # not run: no data yet
            raise
        if self._on_error != "raise" and not self._bad_samples_warned:
            self._warn_first_bad_sample()
        return tuple(TensorListCPU(t) if isinstance(t, _core.TensorList) else TensorListGPU(t) for t in out)

    def share_outputs(self):
        return self.outputs()

    def release_outputs(self):
        """Output memory is released when the last view of it is dropped."""

    def reset(self):
        """Starts the next epoch once the last one ended (a source raised StopIteration
        and its batches were returned): sources are called again, from index 0 with
        `epoch_idx` one higher. Readers loop over epochs by themselves."""
        if self._last_iter:
            self._first_iter = True
            self._last_iter = False
            self._epoch_idx += 1
            self._consumer_iter = 0
            for group, _ in self._sources:
                group.reset_indices()

    def empty(self):
        """Whether no scheduled iteration is left to return (outputs() would run one)."""
        return self._batches_to_consume == 0

    def epoch_size(self, name=None):
        """Samples in an epoch of reader `name` (with `pad_last_batch`, padded so every shard
        has as many: `epoch_size_padded`, as DALI), or {name: size} for every reader."""
        meta = self.reader_meta()
        if name is None:
            return {k: v["epoch_size_padded"] for k, v in meta.items()}
        return self.reader_meta(name)["epoch_size_padded"]

    def reader_meta(self, name=None):
        """Reader metadata (epoch_size, epoch_size_padded, number_of_shards, shard_id,
        pad_last_batch, stick_to_shard) for reader `name`, or for every reader."""
        self.build()
        meta = self._engine.reader_meta()
        if name is None:
            return meta
        if name not in meta:
            raise KeyError(f"no reader named {name!r}; readers: {sorted(meta)}")
        return meta[name]

    def save_graph_to_dot_file(self, filename, show_tensors=False, show_ids=False, use_colors=False):
        """Writes the checked, pruned graph in Graphviz format."""
        self.build()
        with open(filename, "w") as f:
            f.write(self._engine.dot())

    def executor_statistics(self):
        """{operator name: {"calls": n, "seconds": total, "bad_samples": skipped}} since build
        (`bad_samples`: the samples `on_error="skip"` skipped on that operator)."""
        self.build()
        _, per_op = self._engine.bad_samples()
        bad = dict(per_op)
        return {name: {"calls": calls, "seconds": secs, "bad_samples": bad.get(name, 0)}
                for name, calls, secs in self._engine.stats()}

    def bad_samples(self):
        """The samples `on_error` skipped or replaced in the batches returned so far, in
        order: `BadSample(file, error, iteration, sample, operator, action)` (a named tuple;
        `file` is None where the error names none, `sample` the place in the iteration's
        batch, `action` "skip" or "replace": the replaced places of a batch are these)."""
        self.build()
        samples, _ = self._engine.bad_samples()
        return [BadSample(*b) for b in samples]

    def _warn_first_bad_sample(self):
        samples, _ = self._engine.bad_samples()
        if samples:
            self._bad_samples_warned = True
            first = BadSample(*samples[0])
            warnings.warn(f"on_error={self._on_error!r}: {first.action} of a bad sample ({first.error}); more may follow: "
                          "see Pipeline.bad_samples()", RuntimeWarning, stacklevel=3)

    def start_py_workers(self):
        """Starts the worker processes of parallel external sources (with the rest of the
        pipeline: Sluice's workers never touch the GPU, so forking after it is safe)."""
        self.build()

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()
        self._engine = None


def do_not_convert(func=None):
    """Marks a function to run as it is when a pipeline with `enable_conditionals=True` calls
    it: its `if`s and logical expressions are not converted (DALI's `do_not_convert`). For
    sources of parallel external sources made inside a pipeline function, and for code that
    never branches on DataNodes."""
    return _conditionals.do_not_convert(func)


def pipeline_def(fn=None, **pipeline_kwargs):
    """Turns a function that builds a graph into a pipeline factory.

    Keyword arguments of the decorator are defaults; the same names passed when calling the
    factory override them; the other call arguments go to the function.
    """
    enable_conditionals = pipeline_kwargs.pop("enable_conditionals", False)

    def decorator(func):
        if getattr(func, "_sluice_do_not_convert", False):
            raise ValueError("Pipeline definition cannot be marked with @do_not_convert.")
        params = inspect.signature(func).parameters

        @functools.wraps(func)
        def create_pipeline(*args, **kwargs):
            ctor = dict(pipeline_kwargs)
            for k in list(kwargs):
                if k in _PIPELINE_KWARGS and k not in params:
                    ctor[k] = kwargs.pop(k)
            conditionals = kwargs.pop("enable_conditionals", enable_conditionals) if "enable_conditionals" not in params else enable_conditionals
            pipe = Pipeline(**ctor)
            body = func
            if conditionals:
                body = _conditionals.convert(func)
                pipe._condition_stack = _conditionals.ConditionStack()
                # DataNodes passed to the function belong to the whole batch.
                pipe._condition_stack.register([a for a in list(args) + list(kwargs.values()) if isinstance(a, DataNode)],
                                               has_node_inputs=False)
            with pipe:
                try:
                    outs = body(*args, **kwargs)
                except Exception as e:
                    if conditionals:
                        _conditionals.explain(e)
                    raise
                finally:
                    pipe._condition_stack = None
                # Returning nothing defines no outputs, as in DALI: building such a pipeline
                # is the error (a function may only be traced, as auto_aug's tests do).
                if outs is not None:
                    pipe.set_outputs(*((outs,) if isinstance(outs, DataNode) else outs))
            return pipe

        create_pipeline._is_pipeline_def = True
        return create_pipeline

    return decorator(fn) if fn is not None else decorator
