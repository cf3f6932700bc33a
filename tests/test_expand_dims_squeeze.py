"""`fn.expand_dims`, `fn.squeeze` and `fn.reinterpret` (cpu and gpu; the output shares the
input's memory): DALI's tests ported (operator_1/test_expand_dims.py,
operator_2/test_squeeze.py, operator_2/test_reshape.py's reinterpret cases) with
`nvidia.dali` replaced by `sluice`, the same cases compared with DALI 2.4's outputs, and gpu
equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def get_data(shapes):
    return [np.arange(int(np.prod(s)), dtype=np.uint8).reshape(s) for s in shapes]


def _run(lib, shapes, layout, make, device="cpu"):
    @lib.pipeline_def(batch_size=len(shapes), num_threads=1, device_id=0 if device == "gpu" else None)
    def pipe():
        data = lib.fn.external_source(lambda: get_data(shapes), layout=layout, batch=True, device="cpu")
        return make(lib.fn, data.gpu() if device == "gpu" else data)

    p = pipe()
    p.build()
    (out,) = p.run()
    out = out.as_cpu() if device == "gpu" else out
    return [np.array(out[i]) for i in range(len(shapes))], out.layout()


EXPAND = [
    ([0, 2], "AB", "XYZ", [(10, 20, 30)], [(1, 10, 1, 20, 30)], "AXBYZ"),
    ([0, 3], None, "XYZ", [(10, 20, 30)], [(1, 10, 20, 1, 30)], ""),
    ([3], None, "XYZ", [(10, 20, 30), (100, 200, 3)], [(10, 20, 30, 1), (100, 200, 3, 1)], ""),
    ([4, 3], None, "XYZ", [(10, 20, 30), (100, 20, 30)], [(10, 20, 30, 1, 1), (100, 20, 30, 1, 1)], ""),
    ([0, 1, 3, 5, 7], "ABCDE", "XYZ", [(11, 22, 33)], [(1, 1, 11, 1, 22, 1, 33, 1)], "ABXCYDZE"),
    ([], "", "HW", [(10, 20)], [(10, 20)], "HW"),
    ([0, 1], "", "", [()], [(1, 1)], ""),
    ([0], "", "HW", [(10, 20)], [(1, 10, 20)], ""),
    ([4, 3], "AB", "XYZ", [(10, 20, 30)], [(10, 20, 30, 1, 1)], "XYZBA"),
    ([0], "X", "", [()], [(1,)], "X"),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("axes,new_axis_names,layout,shapes,expected_shapes,expected_layout", EXPAND)
def test_expand_dims(axes, new_axis_names, layout, shapes, expected_shapes, expected_layout, device):
    if device == "gpu":
        require_gpu()
    outs, out_layout = _run(sluice, shapes, layout, lambda fn, x: fn.expand_dims(x, axes=axes, new_axis_names=new_axis_names), device)
    assert out_layout == expected_layout
    for o, s, want in zip(outs, shapes, expected_shapes):
        assert o.shape == want
        np.testing.assert_array_equal(o.reshape(-1), get_data([s])[0].reshape(-1))


@pytest.mark.parametrize("axes,new_axis_names,layout,shapes,err", [
    ([4], None, None, [(10, 20, 30)], r"Data has not enough dimensions to add new axes at specified indices."),
    ([0, -1], None, None, [(10, 20, 30)], r"Axis value can't be negative"),
    ([2, 0, 2], "AB", "XYZ", [(10, 20, 30)], r"Specified [\d]+ new dimensions, but layout contains only [\d]+ new dimension names"),
    ([2], "C", None, [(10, 20, 30)], r"Specifying ``new_axis_names`` requires an input with a proper layout."),
])
def test_expand_dims_throw_error(axes, new_axis_names, layout, shapes, err):
    with pytest.raises(RuntimeError, match=err):
        _run(sluice, shapes, layout, lambda fn, x: fn.expand_dims(x, axes=axes, new_axis_names=new_axis_names))


SQUEEZE = [
    ([1], None, "XYZ", [(300, 1, 200), (10, 1, 10)], [(300, 200), (10, 10)], "XZ"),
    ([1, 2], None, "XYZ", [(300, 1, 1), (10, 1, 1)], [(300,), (10,)], "X"),
    ([0, 2], None, "XYZ", [(1, 300, 1), (1, 10, 1)], [(300,), (10,)], "Y"),
    ([0, 2], None, "ABCD", [(1, 1, 1, 1), (1, 1, 1, 1)], [(1, 1), (1, 1)], "BD"),
    (None, "Z", "XYZ", [(300, 1, 1), (10, 1, 1)], [(300, 1), (10, 1)], "XY"),
    (None, "ZY", "XYZ", [(300, 1, 1), (10, 1, 1)], [(300,), (10,)], "X"),
    ([0], None, "X", [(1,)], [()], ""),
    ([1], None, "XYZ", [(100, 0, 0)], [(100, 0)], "XZ"),
    (None, "Z", "XYZ", [(100, 0, 0)], [(100, 0)], "XY"),
    (None, "X", "XYZ", [(100, 0, 0)], [(0, 0)], "YZ"),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("axes,axis_names,layout,shapes,expected_shapes,expected_layout", SQUEEZE)
def test_squeeze(axes, axis_names, layout, shapes, expected_shapes, expected_layout, device):
    if device == "gpu":
        require_gpu()
    outs, out_layout = _run(sluice, shapes, layout, lambda fn, x: fn.squeeze(x, axes=axes, axis_names=axis_names), device)
    assert out_layout == expected_layout
    for o, want in zip(outs, expected_shapes):
        assert o.shape == want


@pytest.mark.parametrize("axes,axis_names,layout,shapes,err", [
    ([1], None, None, [(300, 1, 200), (10, 10, 10)], "Requested a shape with 100 elements but the original shape has 1000 elements."),
    (None, "C", "XYZ", [(2, 3, 4), (4, 2, 3)], "Axis 'C' is not present in the input layout"),
    (None, "Z", "XYZ", [(1, 1, 10)], "Requested a shape with 1 elements but the original shape has 10 elements."),
    ([2], "Z", "XYZ", [[1, 1, 10]], "Provided both ``axes`` and ``axis_names`` arguments"),
    ([2, 1], None, "XYZ", [(100, 0, 0)], "Requested a shape with 100 elements but the original shape has 0 elements."),
    ([1, 1], None, "XYZ", [(300, 1, 200), (10, 1, 10)], "Specified at least twice same dimension to remove."),
])
def test_squeeze_throw_error(axes, axis_names, layout, shapes, err):
    with pytest.raises(RuntimeError, match=err):
        _run(sluice, shapes, layout, lambda fn, x: fn.squeeze(x, axes=axes, axis_names=axis_names))


@needs_dali
@pytest.mark.parametrize("case", range(len(EXPAND) + len(SQUEEZE)))
def test_equal_dali(case):
    if case < len(EXPAND):
        axes, names, layout, shapes, _, _ = EXPAND[case]
        make = lambda fn, x: fn.expand_dims(x, axes=axes, new_axis_names=names)  # noqa: E731
    else:
        axes, names, layout, shapes, _, _ = SQUEEZE[case - len(EXPAND)]
        make = lambda fn, x: fn.squeeze(x, axes=axes, axis_names=names)  # noqa: E731
    ours, l1 = _run(sluice, shapes, layout, make)
    theirs, l2 = _run(dali, shapes, layout, make)
    assert l1 == l2
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- reinterpret
def _reinterpret(lib, data, in_layout="", device="cpu", **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=1, device_id=0 if device == "gpu" else None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout=in_layout, batch=True)
        x = x.gpu() if device == "gpu" else x
        return lib.fn.reinterpret(x, **kw)

    p = pipe()
    p.build()
    (out,) = p.run()
    out = out.as_cpu() if device == "gpu" else out
    return [np.array(out[i]) for i in range(len(data))], out.layout()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_reinterpret_default_shape(device):
    """DALI's test: UINT8 (N, 4*k) samples as INT32 (N, k)."""
    if device == "gpu":
        require_gpu()
    rng = np.random.default_rng(1)
    data = [rng.integers(0, 255, (int(rng.integers(1, 20)), 4 * int(rng.integers(1, 10))), dtype=np.uint8) for _ in range(5)]
    outs, _ = _reinterpret(sluice, data, device=device, dtype=types.INT32)
    for o, d in zip(outs, data):
        assert o.dtype == np.int32
        np.testing.assert_array_equal(o, d.view(np.int32))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_reinterpret_wildcard_shape(device):
    """DALI's test: 160 bytes as INT32 (20, 2), and with one extent inferred."""
    if device == "gpu":
        require_gpu()
    rng = np.random.default_rng(2)
    data = [rng.integers(0, 255, (4, 40), dtype=np.uint8) for _ in range(3)]
    for shape in [(20, 2), (-1, 2), (20, -1)]:
        outs, _ = _reinterpret(sluice, data, device=device, shape=shape, dtype=types.INT32)
        for o, d in zip(outs, data):
            np.testing.assert_array_equal(o, d.reshape(-1).view(np.int32).reshape(20, 2))


@needs_dali
@pytest.mark.parametrize("kw", [
    dict(dtype=types.INT32), dict(dtype=types.UINT16, layout="AB"), dict(dtype=types.INT16, shape=[-1]),
    dict(dtype=types.FLOAT, rel_shape=[0.5, -1]), dict(dtype=types.UINT8), dict(shape=[6, -1]), dict(dtype=types.INT64, shape=[3]),
])
def test_reinterpret_equals_dali(kw):
    rng = np.random.default_rng(3)
    data = [rng.integers(0, 255, (6, 8), dtype=np.uint8), rng.integers(0, 255, (2, 12), dtype=np.uint8)]
    data = [d.view(np.uint16) for d in data]  # UINT16 (6, 4) and (2, 6)
    dali_kw = {k: (getattr(dali.types, v.name) if k == "dtype" else v) for k, v in kw.items()}
    try:
        want, wl = _reinterpret(dali, data, in_layout="XY", **dali_kw)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            _reinterpret(sluice, data, in_layout="XY", **kw)
        return
    got, gl = _reinterpret(sluice, data, in_layout="XY", **kw)
    assert gl == wl
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_reinterpret_errors():
    data = [np.zeros((3, 3), np.uint8)]
    with pytest.raises(ValueError, match="not divisible by the size of INT32"):
        _reinterpret(sluice, data, dtype=types.INT32)
    with pytest.raises(ValueError, match="9 bytes do not make whole"):
        _reinterpret(sluice, data, dtype=types.INT32, shape=[-1])
