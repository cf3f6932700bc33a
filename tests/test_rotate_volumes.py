"""`fn.rotate` on volumes (DHWC, FDHWC): rotated by `angle` degrees about `axis` (x, y, z: the
W, H and D directions), equal to DALI 2.4's cpu operator bit for bit (output size with its
parity rule, uint8 / int16 / float inputs and outputs, nearest and linear, fill or border,
keep_size, constant and per-sample `size`, per-sample and per-frame angles and axes); the gpu
backend equal to the cpu; errors naming the operator, the argument and the sample.

DALI's own cases (operator_2/test_rotate.py, test_3d_sequence) run in test_sequence_suites.py."""

import numpy as np
import pytest

import sluice
from sluice import types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

SHAPES = [(5, 6, 7, 3), (4, 9, 2, 1), (1, 1, 1, 2), (8, 3, 5, 3)]
NP = {types.UINT8: np.uint8, types.INT16: np.int16, types.FLOAT: np.float32}


def _volumes(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [(rng.random(s) * 255).astype(np.float32) for s in shapes]
    hi = {np.uint8: 256, np.int16: 30000}[np_type]
    return [rng.integers(0, hi, s).astype(np_type) for s in shapes]


def _constant(batch):
    return lambda: batch


def _run(lib, volumes, layout, build, args=None, device="cpu", iters=1):
    """`build(fn, x, args)`; `args`: {name: per-sample list of arrays}, given as argument inputs."""
    pipe = lib.pipeline.Pipeline(batch_size=len(volumes), num_threads=3, device_id=None if device == "cpu" else 0, seed=3)
    with pipe:
        x = lib.fn.external_source(source=lambda: volumes, batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_constant(v), batch=True) for k, v in (args or {}).items()}
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(build(lib.fn, x, nodes))
    pipe.build()
    for _ in range(iters):
        (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(volumes))], out.layout()


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
        np.testing.assert_array_equal(x, y)


CASES = [
    dict(angle=45.0, axis=[1, 0, 0]),
    dict(angle=30.0, axis=[1, 1, 0.5]),
    dict(angle=-75.5, axis=[0, 0, -2]),
    dict(angle=90.0, axis=[0, 1, 0]),
    dict(angle=200.0, axis=[0.3, -0.2, 0.9], fill_value=17.0),
    dict(angle=12.0, axis=[1, 2, 3], keep_size=True),
    dict(angle=33.0, axis=[0, 1, 1], size=[6, 5.4, 9]),
    dict(angle=0.0, axis=[1, 1, 1]),
]


@needs_dali
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_volumes_equal_dali(case, interp):
    volumes = _volumes(np.uint8, SHAPES, seed=case)
    build = lambda fn, x, _: fn.rotate(x, interp_type=interp, **CASES[case])
    ours, l1 = _run(sluice, volumes, "DHWC", build)
    ref, l2 = _run(dali, volumes, "DHWC", build)
    assert l1 == l2 == "DHWC"
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, types.FLOAT), (types.INT16, types.INT16), (types.FLOAT, types.FLOAT), (types.FLOAT, types.UINT8)])
def test_types_equal_dali(in_type, out_type):
    volumes = _volumes(NP[in_type], SHAPES, seed=11)
    for fill in [None, 3.5]:
        kw = {} if fill is None else {"fill_value": fill}
        build = lambda fn, x, _: fn.rotate(x, angle=27.0, axis=[0.5, 1, 0], dtype=out_type, **kw)
        _same(_run(sluice, volumes, "DHWC", build)[0], _run(dali, volumes, "DHWC", build)[0])


@needs_dali
def test_per_sample_angles_axes_and_sizes_equal_dali():
    volumes = _volumes(np.uint8, SHAPES, seed=12)
    args = {
        "angle": [np.float32(a) for a in [10.0, -95.0, 45.0, 180.0]],
        "axis": [np.array(a, np.float32) for a in [[1, 0, 0], [0.2, 0.7, 0.1], [0, 0, 1], [1, 1, 1]]],
        "size": [np.array(s, np.float32) for s in [[4, 5, 6], [7, 3, 2], [1, 2, 3], [9, 9, 9]]],
    }
    for names in [("angle", "axis"), ("angle", "axis", "size")]:
        build = lambda fn, x, n: fn.rotate(x, **{k: n[k] for k in names})
        sub = {k: args[k] for k in names}
        _same(_run(sluice, volumes, "DHWC", build, sub)[0], _run(dali, volumes, "DHWC", build, sub)[0])


@needs_dali
def test_sequences_of_volumes_with_per_frame_rotations_equal_dali():
    rng = np.random.default_rng(13)
    seqs = [rng.integers(0, 256, s).astype(np.uint8) for s in [(3, 5, 6, 7, 3), (2, 4, 9, 2, 1)]]
    angles = [np.array([10.0, 50.0, -30.0], np.float32), np.array([90.0, 45.0], np.float32)]
    axes = [np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32), np.array([[0, 0, 1], [1, 0.5, 0.25]], np.float32)]
    for per_frame_axis in [False, True]:
        def build(fn, x, n):
            axis = fn.per_frame(n["axis"]) if per_frame_axis else [0.0, 0.0, 1.0]
            return fn.rotate(x, angle=fn.per_frame(n["angle"]), axis=axis)
        args = {"angle": angles, "axis": axes}
        ours, l1 = _run(sluice, seqs, "FDHWC", build, args)
        ref, l2 = _run(dali, seqs, "FDHWC", build, args)
        assert l1 == l2 == "FDHWC"
        _same(ours, ref)


def test_errors_name_the_operator_argument_and_sample():
    volumes = _volumes(np.uint8, SHAPES[:2], seed=14)
    with pytest.raises(ValueError, match=r"(?s)rotate.*axis.*required"):
        _run(sluice, volumes, "DHWC", lambda fn, x, _: fn.rotate(x, angle=30.0))
    with pytest.raises(ValueError, match=r"(?s)rotate.*axis.*3D vector"):
        _run(sluice, volumes, "DHWC", lambda fn, x, _: fn.rotate(x, angle=30.0, axis=[1, 0]))
    with pytest.raises(ValueError, match=r"(?s)rotate.*axis.*non-zero"):
        _run(sluice, volumes, "DHWC", lambda fn, x, _: fn.rotate(x, angle=30.0, axis=[0, 0, 0]))
    axes = [np.array([1, 0, 0], np.float32), np.zeros(3, np.float32)]
    with pytest.raises(ValueError, match=r"(?s)rotate.*axis.*sample 1"):
        _run(sluice, volumes, "DHWC", lambda fn, x, n: fn.rotate(x, angle=30.0, axis=n["axis"]), {"axis": axes})
    with pytest.raises(ValueError, match=r"(?s)rotate.*size.*\[D, H, W\]"):
        _run(sluice, volumes, "DHWC", lambda fn, x, _: fn.rotate(x, angle=30.0, axis=[1, 0, 0], size=[3, 4]))
    images = [np.zeros((4, 5, 3), np.uint8)]
    with pytest.raises(ValueError, match=r"(?s)rotate.*size.*\[H, W\]"):
        _run(sluice, images, "HWC", lambda fn, x, _: fn.rotate(x, angle=30.0, size=[3, 4, 5]))
    # The pipeline stays usable after an error.
    out, _ = _run(sluice, volumes, "DHWC", lambda fn, x, _: fn.rotate(x, angle=90.0, axis=[0, 0, 1]))
    assert [o.shape for o in out] == [(5, 7, 6, 3), (4, 2, 9, 1)]


@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, types.UINT8), (types.UINT8, types.FLOAT), (types.FLOAT, types.UINT8), (types.INT16, types.FLOAT)])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_gpu_equals_cpu(in_type, out_type, interp):
    require_gpu()
    volumes = _volumes(NP[in_type], SHAPES, seed=15)
    for case in CASES:
        build = lambda fn, x, _: fn.rotate(x, interp_type=interp, dtype=out_type, **case)
        cpu, _ = _run(sluice, volumes, "DHWC", build)
        gpu, _ = _run(sluice, volumes, "DHWC", build, device="gpu", iters=2)
        _same(cpu, gpu)


def test_gpu_sequences_with_per_frame_rotations_equal_cpu():
    require_gpu()
    rng = np.random.default_rng(16)
    seqs = [rng.integers(0, 256, s).astype(np.uint8) for s in [(3, 5, 6, 7, 3), (2, 4, 9, 2, 1)]]
    args = {"angle": [np.array([10.0, 50.0, -30.0], np.float32), np.array([90.0, 45.0], np.float32)],
            "axis": [np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0]], np.float32), np.array([[0, 0, 1], [1, 0.5, 0.25]], np.float32)]}
    build = lambda fn, x, n: fn.rotate(x, angle=fn.per_frame(n["angle"]), axis=fn.per_frame(n["axis"]), fill_value=7)
    cpu, _ = _run(sluice, seqs, "FDHWC", build, args)
    gpu, _ = _run(sluice, seqs, "FDHWC", build, args, device="gpu")
    _same(cpu, gpu)
