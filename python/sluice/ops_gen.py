"""Builds `fn.*` functions and `ops.*` classes from the engine's operator schemas, so an
operator added in Rust appears here with no Python edit."""

import inspect
import sys
import types as _pytypes

import numpy as np

from . import _conditionals, _core, _distributed
from .pipeline import DataNode, Pipeline, _OpNode, _debug, _warn_deprecated

SCHEMAS = {s["name"]: s for s in _core.schemas()}

_INT32 = (-(1 << 31), (1 << 31) - 1)


def _what(i):
    return f"input {i}" if isinstance(i, int) else i


def _constant_node(value, device, display, i):
    """A Python or NumPy value given as an operator's positional input, recorded as a
    `Constant` operator, as DALI does: 64-bit ints become INT32 and 64-bit floats FLOAT
    (Python numbers included); other NumPy types are kept."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{display}: {_what(i)} must be a DataNode or a constant convertible to a numeric tensor, "
                        f"got {type(value).__name__} {value!r}")
    if arr.dtype == np.int64:
        if arr.size and not (_INT32[0] <= arr.min() and arr.max() <= _INT32[1]):
            raise OverflowError(f"{display}: integer constants of {_what(i)} must fit in int32")
        arr = arr.astype(np.int32)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    from .types import from_numpy_type

    data = {"fdata" if arr.dtype.kind == "f" else "idata": arr.ravel().tolist()}
    return make_node("Constant", [], dict(data, shape=list(arr.shape), dtype=from_numpy_type(arr.dtype)), device=device)


def _array_argument(schema_name, arg_name, value, display):
    """A NumPy array (or a PyTorch tensor) of two or more dimensions given to a per-sample
    argument becomes a `Constant` argument input, as in DALI: `matrix=np.array(2x3)` is a
    2 x 3 matrix for every sample. Lower-dimensional arrays stay values (a 1-D array is the
    same list either way), and arrays for other arguments are left to the argument's own
    checks."""
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray) or value.ndim < 2:
        return value
    schema = SCHEMAS.get(schema_name)
    if schema is None:
        return value
    arg_name = dict(schema["arg_aliases"]).get(arg_name, arg_name)
    arg = next((a for a in schema["args"] if a["name"] == arg_name), None)
    if not (arg and arg["per_sample"]):
        return value
    return _constant_node(value, "cpu", display, f"argument '{arg_name}'")


def _takes_scope(schema_name):
    schema = SCHEMAS.get(schema_name)
    return schema is not None and any(a["name"] == "_scope" for a in schema["args"])


def _reads_features(schema_name):
    """Whether the operator takes DALI's `features` dictionary (readers.tfrecord), given its
    schema name or a legacy class name."""
    schema = SCHEMAS.get(schema_name) or next(
        (s for s in SCHEMAS.values() if any(legacy == schema_name for legacy, _ in s["legacy_names"])), None)
    return schema is not None and any(a["name"] == "_feature_names" for a in schema["args"])


def make_node(schema_name, inputs, kwargs, device=None, name=None, warn=True):
    """Records one operator in the current graph and returns its output node(s). The
    engine checks it at once (names, types, inputs, devices): see `_OpNode`."""
    if "features" in kwargs and _reads_features(schema_name):
        # readers.tfrecord: the dictionary becomes the engine's lists, the outputs a dictionary.
        from . import tfrecord

        kwargs, names = tfrecord.engine_args(kwargs)
        outs = make_node(schema_name, inputs, kwargs, device=device, name=name, warn=warn)
        return dict(zip(names, outs if isinstance(outs, list) else [outs]))
    display = SCHEMAS[schema_name]["fn_name"] if schema_name in SCHEMAS else schema_name
    if any(_is_input_set(x) for x in inputs):
        return _call_input_sets(schema_name, inputs, kwargs, device, name, warn, display)
    if _debug.active() is not None:  # debug mode: the operator runs now
        return _debug_node(schema_name, list(inputs), kwargs, device, name)
    if any(not isinstance(x, DataNode) for x in inputs):
        # DALI puts a constant where the operator runs: on the GPU beside GPU inputs, but on
        # the CPU for inputs the GPU backend reads on the host (a filter's kernel, a warp's
        # matrices).
        on_gpu = device == "gpu" or any(isinstance(x, DataNode) and x.device == "gpu" for x in inputs)
        host = set(SCHEMAS[schema_name].get("host_inputs", ())) if schema_name in SCHEMAS else set()
        inputs = [x if isinstance(x, DataNode) else _constant_node(x, "gpu" if on_gpu and i not in host else "cpu", display, i)
                  for i, x in enumerate(inputs)]
    from .types import ScalarConstant

    kwargs = _distributed.resolve_auto_shard(kwargs)  # shard_id="auto": the launcher's rank
    kwargs = {k: (v.value if isinstance(v, ScalarConstant) else _array_argument(schema_name, k, v, display))
              for k, v in kwargs.items()}
    args = {k: v for k, v in kwargs.items() if v is not None and not isinstance(v, DataNode)}
    arg_inputs = {k: v for k, v in kwargs.items() if isinstance(v, DataNode)}
    conditions = _conditionals.active_stack()
    inputs, arg_inputs = _to_branch(conditions, schema_name, inputs, arg_inputs)
    op = _OpNode(schema_name, device, name, list(inputs), arg_inputs, args, warn=warn)
    current = Pipeline.current()
    if current is not None:
        current._register(op)
    outs = op.outputs
    if conditions is not None:
        conditions.register(outs, has_node_inputs=bool(inputs or arg_inputs))
    return outs[0] if len(outs) == 1 else outs


def _is_input_set(x):
    """A Python list holding DataNodes as a positional input: DALI's "multiple input sets"."""
    return isinstance(x, list) and any(isinstance(e, DataNode) for e in x)


def _call_input_sets(schema_name, inputs, kwargs, device, name, warn, display):
    """DALI's multiple input sets: list inputs (of one length) are taken element by element,
    other inputs repeat, and the operator is recorded once per set. One set gives that
    instance's outputs as they are; several give, per output, the list over the sets (a
    flat list when the operator has one output)."""
    lengths = {len(x) for x in inputs if _is_input_set(x)}
    if len(lengths) != 1:
        raise ValueError(f"All argument lists for Multiple Input Sets used with operator `{display}` must have the same length")
    (count,) = lengths
    sets = [[x[k] if _is_input_set(x) else x for x in inputs] for k in range(count)]
    outs = [make_node(schema_name, s, kwargs, device=device, name=name if count == 1 else None, warn=warn) for s in sets]
    if count == 1:
        return outs[0]
    outs = [o if isinstance(o, list) else [o] for o in outs]
    if len(outs[0]) == 1:
        return [o[0] for o in outs]
    return [list(t) for t in zip(*outs)]


def _to_branch(conditions, schema_name, inputs, arg_inputs):
    """Inside an `if` branch an operator sees its samples' share of the DataNodes it reads;
    operators that size their output by the batch (batch_permutation) get the branch's
    batch through a hidden argument input, as in DALI. Other values pass as they are."""
    if conditions is None:
        return inputs, arg_inputs
    arg_inputs = dict(arg_inputs)
    if len(conditions.scopes) > 1 and _takes_scope(schema_name):
        arg_inputs["_scope"] = conditions.split_to_branch(conditions.top.predicate)
    split = lambda x: conditions.split_to_branch(x) if isinstance(x, DataNode) else x  # noqa: E731
    return [split(x) for x in inputs], {k: split(v) for k, v in arg_inputs.items()}


def _debug_node(schema_name, inputs, kwargs, device, name):
    """`make_node` in debug mode: the call runs at once (see `pipeline._debug`), on its
    branch's samples when the debug pipeline has conditionals."""
    conditions = _conditionals.active_stack()
    if conditions is not None:
        # Data from elsewhere has no place in the condition stack: which samples of it would
        # a branch see? (DALI's rule and message.)
        for i, x in enumerate(inputs):
            if not isinstance(x, DataNode):
                raise ValueError(
                    "Debug mode with conditional execution (when `enable_conditionals=True`) doesn't allow for "
                    "modification of operator outputs by libraries other than DALI or using the TensorLists extracted "
                    f"via `.get()` as inputs. Expected `DataNodeDebug` as an input, got {type(x)} at input {i}.")
    inputs, kwargs = _to_branch(conditions, schema_name, inputs, kwargs)
    outs = _debug.run_op(schema_name, inputs, kwargs, device, name)
    if conditions is not None:
        has_nodes = any(isinstance(x, DataNode) for x in list(inputs) + list(kwargs.values()))
        conditions.register(outs if isinstance(outs, list) else [outs], has_node_inputs=has_nodes)
    return outs


def _doc(schema):
    lines = [schema["doc"], "", f"Devices: {', '.join(schema['devices'])}.", "", "Keyword args:"]
    for a in schema["args"]:
        if a["name"].startswith("_"):  # set by the engine's graph passes, not by users
            continue
        default = "required" if a["required"] else ("optional" if a["default"] is None else f"default {a['default']!r}")
        per_sample = ", per-sample input allowed" if a["per_sample"] else ""
        lines.append(f"    {a['name']} ({a['type']}, {default}{per_sample}): {a['doc']}")
    return "\n".join(lines)


def _signature(schema):
    params = []
    if schema["max_inputs"] > 0:
        params.append(inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL))
    params.append(inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None))
    params.append(inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None))
    for a in schema["args"]:
        if a["name"] == "_feature_names":  # readers.tfrecord's `features` dictionary
            params.append(inspect.Parameter("features", inspect.Parameter.KEYWORD_ONLY))
        if a["name"].startswith("_"):
            continue
        default = inspect.Parameter.empty if a["required"] else a["default"]
        params.append(inspect.Parameter(a["name"], inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(params)


def _make_fn(schema):
    schema_name = schema["name"]

    def op_fn(*inputs, device=None, name=None, **kwargs):
        return make_node(schema_name, inputs, kwargs, device=device, name=name)

    op_fn.__name__ = schema["fn_name"].split(".")[-1]
    op_fn.__qualname__ = op_fn.__name__
    op_fn.__doc__ = _doc(schema)
    op_fn.__signature__ = _signature(schema)
    return op_fn


def _make_class(schema, class_name, class_path):
    """`class_path` is what the engine is told: the schema name, or a legacy class name
    (whose implied device the engine knows)."""

    def __init__(self, *, device=None, **kwargs):
        if class_path != schema["name"] and "__" in schema["name"]:
            import warnings

            current = schema["name"].replace("__", ".")
            warnings.warn(f"WARNING: `nvidia.dali.ops.{class_path}` is now deprecated. Use `nvidia.dali.ops.{current}` "
                          "instead.", DeprecationWarning, stacklevel=2)
        self._device = device
        self._name = kwargs.pop("name", None)
        kwargs = _distributed.resolve_auto_shard(kwargs)
        self._feature_names = None
        if "features" in kwargs and _reads_features(class_path):
            from . import tfrecord

            kwargs, self._feature_names = tfrecord.engine_args(kwargs)
        # As DALI: a wrong argument fails here, where the user wrote it (and an old one warns).
        _warn_deprecated(_core.check_args(class_path, [(k, v) for k, v in kwargs.items()
                                                       if v is not None and not isinstance(v, DataNode)]))
        self._kwargs = kwargs

    def __call__(self, *inputs, name=None, **arg_inputs):
        """Inputs and argument inputs; `name` here names the instance too (DALI's
        `self.input(name="Reader")`)."""
        kwargs = dict(self._kwargs)
        kwargs.update(arg_inputs)
        outs = make_node(class_path, inputs, kwargs, device=self._device, name=name or self._name, warn=False)
        if self._feature_names is not None:  # readers.tfrecord: a dictionary, as DALI's
            return dict(zip(self._feature_names, outs if isinstance(outs, list) else [outs]))
        return outs

    return type(class_name, (), {
        "__init__": __init__,
        "__call__": __call__,
        "__doc__": _doc(schema),
        "schema_name": schema["name"],
        "device": property(lambda self: self._device or "cpu"),
    })


def _submodule(parent, path):
    mod = parent
    for part in path:
        full = f"{mod.__name__}.{part}"
        child = getattr(mod, part, None)
        if child is None:
            child = _pytypes.ModuleType(full)
            setattr(mod, part, child)
            sys.modules[full] = child
        mod = child
    return mod


def _make_legacy_fn(schema, legacy):
    """DALI's old flat function for a legacy class name (`fn.file_reader`), with DALI's
    deprecation warning pointing at the current one."""
    current = _make_fn(schema)
    old_name = _snake(legacy)

    def op_fn(*inputs, device=None, name=None, **kwargs):
        import warnings

        warnings.warn(f"WARNING: `nvidia.dali.fn.{old_name}` is now deprecated. Use `nvidia.dali.fn.{schema['fn_name']}` "
                      "instead.", DeprecationWarning, stacklevel=2)
        return make_node(legacy, inputs, kwargs, device=device, name=name)

    op_fn.__name__ = op_fn.__qualname__ = old_name
    op_fn.__doc__ = f"Deprecated: use fn.{schema['fn_name']}.\n\n" + current.__doc__
    op_fn.__signature__ = current.__signature__
    return op_fn


def _snake(camel):
    """`FileReader` -> `file_reader`, by the engine's rule (with DALI's exceptions)."""
    return _core.snake_case(camel)


def populate_fn(module):
    """Adds one function per operator to `module` (sluice.fn), in DALI's submodules, and
    DALI's deprecated flat names of legacy classes (`fn.image_decoder`, `fn.file_reader`)."""
    for schema in SCHEMAS.values():
        if schema["name"].startswith("_") and "__" not in schema["name"]:
            continue  # engine-internal (`_ArithmeticGenericOp`); `_conditional.split` and the like are DALI's
        parts = schema["fn_name"].split(".")
        setattr(_submodule(module, parts[:-1]), parts[-1], _make_fn(schema))
        for legacy, implied_device in schema["legacy_names"]:
            if implied_device is None and "__" in schema["name"]:
                setattr(module, _snake(legacy), _make_legacy_fn(schema, legacy))


def populate_ops(module):
    """Adds one class per operator to `module` (sluice.ops), plus DALI's legacy names."""
    for schema in SCHEMAS.values():
        parts = schema["name"].split("__")
        setattr(_submodule(module, parts[:-1]), parts[-1], _make_class(schema, parts[-1], schema["name"]))
        for legacy, _ in schema["legacy_names"]:
            setattr(module, legacy, _make_class(schema, legacy, legacy))
