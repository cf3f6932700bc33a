"""Builds `fn.*` functions and `ops.*` classes from the engine's operator schemas, so an
operator added in Rust appears here with no Python edit."""

import enum
import inspect
import sys
import types as _pytypes

import numpy as np

from . import _core
from .pipeline import DataNode, Pipeline, _OpNode

SCHEMAS = {s["name"]: s for s in _core.schemas()}
_BY_LEGACY = {}
for _s in SCHEMAS.values():
    for _legacy, _dev in _s["legacy_names"]:
        _BY_LEGACY[_legacy] = (_s, _dev)

# Arguments the Python layer handles itself for every operator.
_FRAMEWORK_ARGS = {"device", "name"}


def _arg_value(v):
    """Python/NumPy values -> plain bool/int/float/str/list the engine accepts. Enums (ours,
    or DALI's own pybind enums such as `nvidia.dali.types.INTERP_NN`) become their ids."""
    if isinstance(v, enum.Enum):
        return int(v.value)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_arg_value(x) for x in v]
    if not isinstance(v, (bool, int, float, str)) and hasattr(v, "__int__") and hasattr(v, "name"):
        return int(v)
    return v


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# What each schema type accepts at call time (the engine re-checks at build).
_TYPE_CHECKS = {
    "bool": lambda v: isinstance(v, bool) or v in (0, 1),
    "int": lambda v: isinstance(v, int),
    "float": _is_number,
    "str": lambda v: isinstance(v, str),
    "list of int": lambda v: isinstance(v, int) or (isinstance(v, list) and all(isinstance(x, int) for x in v)),
    "list of float": lambda v: _is_number(v) or (isinstance(v, list) and all(_is_number(x) for x in v)),
    "list of str": lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "DALIDataType": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "DALIImageType": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "DALIInterpType": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def _choice_constant(display, a):
    """random.choice's input `a` given as a Python constant. DALI turns it into a constant
    input (a scalar n means range(n), a list its elements); Sluice passes it as a hidden
    argument instead, so the engine needs no constant operator."""
    v = _arg_value(a)
    if isinstance(v, int) and not isinstance(v, bool):
        return {"__a": v}
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if not all(-2**31 <= x < 2**31 for x in v):
            raise OverflowError(f"{display}: integer constants of `a` must fit in int32")
        return {"__a_ints": v}  # INT32 output, as DALI types an int list
    if isinstance(v, list) and v and all(_is_number(x) for x in v):
        return {"__a_floats": [float(x) for x in v]}  # FLOAT output
    raise TypeError(f"{display}: input `a` must be a DataNode, an int or a non-empty 1-D list of numbers, got {type(a).__name__} {a!r}")


# Operators whose first input may be a Python constant (as DALI accepts), and how it maps to
# arguments. Other operators keep requiring DataNode inputs.
_CONSTANT_FIRST_INPUT = {"random__Choice": _choice_constant}


def make_node(schema_name, inputs, kwargs, device=None, name=None):
    """Creates one operator instance in the current graph and returns its output node(s)."""
    schema = SCHEMAS[schema_name]
    display = schema["fn_name"]
    if inputs and not isinstance(inputs[0], DataNode) and schema_name in _CONSTANT_FIRST_INPUT:
        kwargs = dict(kwargs, **_CONSTANT_FIRST_INPUT[schema_name](display, inputs[0]))
        inputs = inputs[1:]
    known = {a["name"]: a for a in schema["args"]}
    aliases = dict(schema["arg_aliases"])
    for i, x in enumerate(inputs):
        if not isinstance(x, DataNode):
            raise TypeError(f"{display}: input {i} must be a DataNode, got {type(x).__name__}")
    if not schema["min_inputs"] <= len(inputs) <= schema["max_inputs"]:
        lo, hi = schema["min_inputs"], schema["max_inputs"]
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise TypeError(f"{display}: expects {want} input(s), got {len(inputs)}")
    if device is not None and device not in ("cpu", "mixed", "gpu"):
        raise ValueError(f"{display}: device must be 'cpu', 'mixed' or 'gpu', got {device!r}")
    args, arg_inputs = {}, {}
    for k, v in kwargs.items():
        canonical = aliases.get(k, k)
        if canonical not in known:
            raise TypeError(f"{display}: unknown argument '{k}'")
        if isinstance(v, DataNode):
            if not known[canonical]["per_sample"]:
                raise TypeError(f"{display}: argument '{k}' does not accept a DataNode (per-sample input); pass a constant")
            arg_inputs[canonical] = v
        elif v is not None:
            value = _arg_value(v)
            want = known[canonical]["type"]
            if not _TYPE_CHECKS[want](value):
                raise TypeError(f"{display}: argument '{k}' must be {want}, got {type(v).__name__} {v!r}")
            args[canonical] = value
    if device is None:
        device = "gpu" if any(x.device != "cpu" for x in inputs) else None
    out_device = "cpu" if device in (None, "cpu") else "gpu"
    op = _OpNode(schema_name, device, name, list(inputs), arg_inputs, args, schema["num_outputs"], out_device)
    current = Pipeline.current()
    if current is not None:
        current._register(op)
    outs = op.outputs
    return outs[0] if len(outs) == 1 else outs


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


def _make_class(schema, class_name, implied_device=None):
    schema_name = schema["name"]

    def __init__(self, *, device=None, **kwargs):
        self._device = device or implied_device
        self._name = kwargs.pop("name", None)
        display = schema["fn_name"]
        known = {a["name"] for a in schema["args"]} | set(dict(schema["arg_aliases"]))
        for k in kwargs:
            if k not in known:
                raise TypeError(f"{display}: unknown argument '{k}'")
        self._kwargs = kwargs

    def __call__(self, *inputs, **arg_inputs):
        kwargs = dict(self._kwargs)
        kwargs.update(arg_inputs)
        return make_node(schema_name, inputs, kwargs, device=self._device, name=self._name)

    return type(class_name, (), {
        "__init__": __init__,
        "__call__": __call__,
        "__doc__": _doc(schema),
        "schema_name": schema_name,
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


def populate_fn(module):
    """Adds one function per operator to `module` (sluice.fn), in DALI's submodules."""
    for schema in SCHEMAS.values():
        if schema["name"].startswith("_"):
            continue
        parts = schema["fn_name"].split(".")
        setattr(_submodule(module, parts[:-1]), parts[-1], _make_fn(schema))


def populate_ops(module):
    """Adds one class per operator to `module` (sluice.ops), plus DALI's legacy names."""
    for schema in SCHEMAS.values():
        parts = schema["name"].split("__")
        setattr(_submodule(module, parts[:-1]), parts[-1], _make_class(schema, parts[-1]))
        for legacy, dev in schema["legacy_names"]:
            setattr(module, legacy, _make_class(schema, legacy, dev))
