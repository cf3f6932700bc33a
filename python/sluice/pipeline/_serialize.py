"""Serialized pipelines (`pipe.serialize()`, `Pipeline.deserialize()`,
`pipe.deserialize_and_build()`): the graph as the engine receives it (every operator's
schema, device, name, inputs and arguments, the outputs) and the pipeline's parameters, as
versioned JSON text of our own. It is the definition, not the state (that is a checkpoint's
job). External sources keep their name, device and checks but not their Python `source`: a
deserialized pipeline is fed with `feed_input`, as in DALI. Python functions cannot be
serialized: their code lives in the process that defined them."""

import enum
import json

import numpy as np

FORMAT = "sluice.pipeline"
VERSION = 1

# The constructor arguments a serialized pipeline carries.
PARAMS = ("batch_size", "num_threads", "device_id", "seed", "prefetch_queue_depth", "exec_async", "exec_pipelined",
          "enable_checkpointing", "on_error", "max_bad_samples")


def _value(op, name, v):
    """An argument as JSON: enums as their numbers, NumPy scalars and arrays as Python."""
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_value(op, name, x) for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    raise TypeError(f"{op.name} ({op.schema}): argument '{name}' of type {type(v).__name__} cannot be serialized")


def dumps(pipe, ops, outputs):
    for op in ops:
        if op.schema == "PythonFunction":
            raise RuntimeError(f"{op.name}: a pipeline with a Python function (python_function and the like) cannot be "
                               "serialized: the function's code lives in this process")
    index = {op.id: k for k, op in enumerate(ops)}
    return json.dumps({
        "format": FORMAT,
        "version": VERSION,
        "params": {k: getattr(pipe, "_" + k) for k in PARAMS},
        "ops": [{
            "schema": op.schema,
            "device": op.device,
            "name": op.name,
            "inputs": [[index[n._op.id], n._index] for n in op.inputs],
            "arg_inputs": {k: [index[n._op.id], n._index] for k, n in op.arg_inputs.items()},
            "args": {k: _value(op, k, v) for k, v in op.args.items()},
        } for op in ops],
        "outputs": [[index[o._op.id], o._index] for o in outputs],
    }, sort_keys=True)


def read_versioned(data, fmt, version, kind, made_by, failure):
    """The fields of versioned JSON of ours (a serialized pipeline, a checkpoint) given as
    text or bytes; RuntimeError starting with `failure`, naming the `kind` and what makes
    it (`made_by`), for anything else or for another version."""
    try:
        text = data.decode() if isinstance(data, (bytes, bytearray)) else str(data)
        state = json.loads(text)
        if not isinstance(state, dict) or state.get("format") != fmt:
            raise ValueError(f"not a Sluice {kind}")
    except (ValueError, UnicodeDecodeError) as e:
        raise RuntimeError(f"{failure}: {e}. Give what `{made_by}` returned (or the file it wrote).") from None
    if state.get("version") != version:
        raise RuntimeError(f"The {kind} has format version {state.get('version')}; this Sluice reads version {version}.")
    return state


def loads(serialized):
    """The serialized pipeline's fields; RuntimeError for anything else."""
    return read_versioned(serialized, FORMAT, VERSION, "serialized pipeline", "pipe.serialize()",
                          "Failed to deserialize the pipeline")


def graph(pipe, state):
    """Records the serialized operators in `pipe` (checked by the engine as they are made,
    as when defined in Python) and sets its outputs."""
    from . import _OpNode

    ops = []
    for spec in state["ops"]:
        inputs = [ops[i].outputs[o] for i, o in spec["inputs"]]
        arg_inputs = {k: ops[i].outputs[o] for k, (i, o) in spec["arg_inputs"].items()}
        op = _OpNode(spec["schema"], spec["device"], spec["name"], inputs, arg_inputs, spec["args"], warn=False)
        pipe._register(op)
        ops.append(op)
    pipe._outputs = [ops[i].outputs[o] for i, o in state["outputs"]]
