"""`fn.cat` and `fn.stack`: DALI's test_join.py ported (imports renamed) and run against
Sluice and DALI 2.4 (CPU) with the same assertions; the gpu backend equal to NumPy on a GPU;
errors for mismatched shapes, types and axes naming the operator and the sample."""

import math

import numpy as np
import pytest

import sluice
from sluice import fn as sfn

from conftest import library_params, require_gpu

LIBS = library_params()


def _parts(lib):
    if lib is sluice:
        return sluice.pipeline.Pipeline, sluice.fn, sluice.types
    import nvidia.dali as dali

    return dali.pipeline.Pipeline, dali.fn, dali.types


def input_generator(num_inputs, batch_size, ndim, variable_axis=None, seed=1234):
    """DALI's generator: random shapes per sample (one axis may vary between inputs)."""
    rng = np.random.default_rng(seed)
    max_extent = 1 if ndim <= 0 else int(math.ceil(math.pow(1e6 / (batch_size * num_inputs), 1 / ndim)))
    max_extent = min(max_extent, 40)  # keeps 100-input cases quick; shapes still vary

    def gen():
        if ndim == 0:
            return [[np.float32(rng.random()) for _ in range(batch_size)] for _ in range(num_inputs)]
        inputs = [[] for _ in range(num_inputs)]
        for _ in range(batch_size):
            base_shape = rng.integers(1, max_extent, [ndim])
            for j in range(num_inputs):
                shape = list(base_shape)
                if variable_axis is not None:
                    shape[variable_axis] = rng.integers(1, 10)
                inputs[j].append(rng.random(shape).astype(np.float32))
        return inputs

    return gen


def _check(out, ref, layout):
    out = [np.array(out.at(i)) for i in range(len(out))]
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.shape == r.shape and np.array_equal(o, r)


def _layout_of(batch):
    return batch.layout() or ""


CAT_CASES = [(n, layout, ndim, axis)
             for n in [1, 2, 3, 100]
             for layout, ndim in [(None, 1), ("A", 1), (None, 2), ("HW", 2), (None, 3), ("DHW", 3)]
             for axis in range(-ndim, ndim)]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("num_inputs,layout,ndim,axis", CAT_CASES)
def test_cat(lib, num_inputs, layout, ndim, axis):
    Pipeline, fn, _ = _parts(lib)
    axis_name = layout[axis] if layout else None
    ref_axis = layout.find(axis_name) if axis_name else axis
    batch_size = 4
    pipe = Pipeline(batch_size=batch_size, num_threads=3, device_id=None)
    with pipe:
        inputs = fn.external_source(input_generator(num_inputs, batch_size, ndim, ref_axis), num_outputs=num_inputs,
                                    layout=layout)
        out = fn.cat(*inputs, axis=None if axis_name else axis, axis_name=axis_name)
        pipe.set_outputs(out, *inputs)
    pipe.build()
    for _ in range(3):
        o, *ins = pipe.run()
        ref = [np.concatenate([np.array(x.at(i)) for x in ins], axis=ref_axis) for i in range(batch_size)]
        _check(o, ref, layout)
        assert _layout_of(o) == (layout or "")


STACK_CASES = [(n, layout, ndim, axis, axis_name)
               for n in [1, 2, 3, 100]
               for layout, ndim in [(None, 0), (None, 1), ("A", 1), (None, 2), ("HW", 2), (None, 3), ("DHW", 3)]
               for axis in range(-ndim, ndim + 1)
               for axis_name in ([None] if layout is None and ndim > 0 else [None, "C"])]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("num_inputs,layout,ndim,axis,axis_name", STACK_CASES)
def test_stack(lib, num_inputs, layout, ndim, axis, axis_name):
    Pipeline, fn, _ = _parts(lib)
    batch_size = 4
    if axis_name:
        pos = axis + ndim + 1 if axis < 0 else axis
        ref_layout = layout[:pos] + axis_name + layout[pos:] if layout else axis_name
    else:
        ref_layout = ""
    pipe = Pipeline(batch_size=batch_size, num_threads=3, device_id=None)
    with pipe:
        inputs = fn.external_source(input_generator(num_inputs, batch_size, ndim), num_outputs=num_inputs, layout=layout)
        out = fn.stack(*inputs, axis=axis, axis_name=axis_name)
        pipe.set_outputs(out, *inputs)
    pipe.build()
    for _ in range(3):
        o, *ins = pipe.run()
        ref = [np.stack([np.array(x.at(i)) for x in ins], axis=axis) for i in range(batch_size)]
        _check(o, ref, ref_layout)
        assert _layout_of(o) == ref_layout


A = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], dtype=np.int32)
B = np.array([[13, 14, 15], [16, 17, 18], [19, 20, 21]], dtype=np.int32)
EMPTY = np.zeros((3, 0), dtype=np.int32)
AB = np.array([[1, 2, 3, 4, 13, 14, 15], [5, 6, 7, 8, 16, 17, 18], [9, 10, 11, 12, 19, 20, 21]])


def _constants(lib, arrays, gpu):
    Pipeline, fn, types = _parts(lib)
    pipe = Pipeline(batch_size=1, num_threads=3, device_id=0 if gpu else None)
    with pipe:
        srcs = [types.Constant(a, device="cpu") for a in arrays]
        if gpu:
            srcs = [s.gpu() for s in srcs]
        pipe.set_outputs(fn.cat(*srcs, axis=1))
    pipe.build()
    (o,) = pipe.run()
    return np.array((o.as_cpu() if gpu else o).at(0))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("arrays,ref", [((A, B), AB), ((A, EMPTY, B), AB), ((EMPTY, EMPTY, EMPTY), EMPTY)],
                         ids=["different_length", "empty_input", "all_empty"])
def test_cat_constants(lib, arrays, ref):
    assert np.array_equal(_constants(lib, arrays, gpu=False), ref)


@pytest.mark.parametrize("arrays,ref", [((A, B), AB), ((A, EMPTY, B), AB), ((EMPTY, EMPTY, EMPTY), EMPTY)],
                         ids=["different_length", "empty_input", "all_empty"])
def test_cat_constants_gpu(arrays, ref):
    require_gpu()
    assert np.array_equal(_constants(sluice, arrays, gpu=True), ref)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64, np.bool_])
@pytest.mark.parametrize("op,axis", [("cat", 0), ("cat", 1), ("cat", -1), ("stack", 0), ("stack", 2), ("stack", 3)])
def test_gpu_equals_numpy(op, axis, dtype):
    """The gpu backend, every element size, over samples of different shapes (interleaving
    included: stack at axis == ndim)."""
    require_gpu()
    rng = np.random.default_rng(5)
    shapes = [(3, 5, 2), (7, 1, 3), (2, 9, 4), (1, 1, 1)]
    sizes = {0: (1, 4, 2), 1: (2, 1, 3), -1: (3, 2, 1)}

    def sample(shape, j):
        s = list(shape)
        if op == "cat":
            s[axis] = sizes[axis][j]
        return (rng.random(s) * 100).astype(dtype)

    data = [[sample(s, j) for s in shapes] for j in range(3)]

    @sluice.pipeline_def(batch_size=len(shapes), num_threads=2, device_id=0)
    def pipe():
        ins = [sfn.external_source(source=_const(d), batch=True) for d in data]
        joined = getattr(sfn, op)(*[x.gpu() for x in ins], axis=axis)
        return joined, getattr(sfn, op)(*ins, axis=axis)

    p = pipe()
    p.build()
    gpu, cpu = p.run()
    for i in range(len(shapes)):
        parts = [data[j][i] for j in range(3)]
        ref = np.concatenate(parts, axis=axis) if op == "cat" else np.stack(parts, axis=axis)
        assert np.array_equal(np.array(gpu.as_cpu().at(i)), ref)
        assert np.array_equal(np.array(cpu.at(i)), ref)


def _const(batch):
    return lambda: batch


def _run_join(op, arrays_per_input, **kwargs):
    @sluice.pipeline_def(batch_size=len(arrays_per_input[0]), num_threads=1, device_id=None)
    def pipe():
        ins = [sfn.external_source(source=_const(d), batch=True) for d in arrays_per_input]
        return getattr(sfn, op)(*ins, **kwargs)

    p = pipe()
    p.build()
    return p


def test_errors_name_the_operator_and_sample_and_the_pipeline_goes_on():
    good = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    bad = [np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32)]
    p = _run_join("cat", [good, bad], axis=1)
    with pytest.raises(RuntimeError, match=r"(?s)cat.*sample 1.*Mismatch in axis 0"):
        p.run()
    p = _run_join("stack", [good, bad])
    with pytest.raises(RuntimeError, match=r"(?s)stack.*equal shape"):
        p.run()
    with pytest.raises(RuntimeError, match=r"(?s)cat.*Accepted range is \[ -2, 1 \]"):
        _run_join("cat", [good, good], axis=2).run()
    with pytest.raises(RuntimeError, match=r"(?s)same type"):
        _run_join("cat", [good, [x.astype(np.int32) for x in good]]).run()
    with pytest.raises(RuntimeError, match=r"(?s)undefined axis 'Q'"):
        _run_join("cat", [good, good], axis_name="Q").run()
    # the pipeline is still usable after a failed iteration
    p = _run_join("cat", [good, good], axis=0)
    for _ in range(2):
        (o,) = p.run()
        assert np.array(o.at(0)).shape == (4, 3)
