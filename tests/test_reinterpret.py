"""`fn.reinterpret` against DALI 2.4's cpu operator: a new element type with no shape (the
innermost extent rescaled), with `shape`, `rel_shape`, `src_dims` and `layout`; DALI's
test_reshape.py reinterpret cases; errors naming the operator, argument and sample, the
pipeline still usable; no copy; gpu equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402


def _run(mod_fn, pdef, data, build, layout=""):
    @pdef(batch_size=len(data), num_threads=1, device_id=None)
    def p():
        x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
        return build(mod_fn, dtypes if mod_fn is dfn else types, x)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


rng = np.random.default_rng(31337)
U8 = [rng.integers(0, 255, (3, 8), dtype=np.uint8), rng.integers(0, 255, (5, 4), dtype=np.uint8)]
I32 = [rng.integers(-1000, 1000, (3, 4), dtype=np.int32), rng.integers(-1000, 1000, (2, 6), dtype=np.int32)]

CASES = {
    "dtype_only": (U8, lambda f, t, x: f.reinterpret(x, dtype=t.INT32)),
    "dtype_only_to_smaller": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.UINT8)),
    "same_size_type": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.FLOAT)),
    "shape_wildcard": (U8, lambda f, t, x: f.reinterpret(x, dtype=t.INT16, shape=[-1])),
    "shape_wildcard_2d": (U8, lambda f, t, x: f.reinterpret(x, dtype=t.UINT16, shape=[2, -1])),
    "rel_shape": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.UINT8, rel_shape=[1, -1])),
    "src_dims": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.UINT8, src_dims=[1, 0])),
    "src_dims_adds_a_dim": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.INT16, src_dims=[0, -1, 1])),
    "layout_and_dtype": (I32, lambda f, t, x: f.reinterpret(x, dtype=t.UINT8, layout="AB")),
    "layout_only": (I32, lambda f, t, x: f.reinterpret(x, layout="AB")),
    "shape_only": (I32, lambda f, t, x: f.reinterpret(x, shape=[-1])),
    "keeps_the_layout": (I32, lambda f, t, x: f.reinterpret(f.reshape(x, layout="HW"), dtype=t.INT16)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reinterpret_matches_dali(case):
    data, build = CASES[case]
    (a,), (b,) = _run(fn, pipeline_def, data, build).run(), _run(dfn, dali.pipeline_def, data, build).run()
    assert a.layout() == b.layout()
    for i in range(len(data)):
        x, y = np.array(a.at(i)), np.array(b.at(i))
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_array_equal(x, y)


def test_dali_reinterpret_default_shape():
    """DALI's test_reinterpret_default_shape: uint8 samples with rows of a multiple of 4
    bytes seen as int32 equal numpy's view."""
    r = np.random.default_rng(1)
    data = []
    for _ in range(4):
        h, w = r.integers(4, 20, size=2)
        data.append(r.integers(0, 255, (h, w & -4), dtype=np.uint8))
    (out,) = _run(fn, pipeline_def, data, lambda f, t, x: f.reinterpret(x, dtype=t.INT32)).run()
    for i, d in enumerate(data):
        np.testing.assert_array_equal(np.array(out.at(i)), d.view(np.int32))


def test_dali_reinterpret_wildcard_shape():
    """DALI's test_reinterpret_wildcard_shape: 10x16 uint8 as int32 of shape (20, 2)."""
    data = [np.random.default_rng(i).integers(0, 255, (10, 16), dtype=np.uint8) for i in range(4)]
    (out,) = _run(fn, pipeline_def, data, lambda f, t, x: f.reinterpret(x, shape=(20, 2), dtype=t.INT32)).run()
    for i, d in enumerate(data):
        np.testing.assert_array_equal(np.array(out.at(i)), d.view(np.int32).reshape(20, 2))


def test_reinterpret_shares_the_input_buffer():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[4, 6], seed=5)
        return x, fn.reinterpret(x, dtype=types.INT32)

    x, y = p().run()
    assert np.array(y.at(0)).dtype == np.int32
    np.testing.assert_array_equal(np.array(y.at(1)), np.array(x.at(1)).view(np.int32))
    assert y.at(0).__array_interface__["data"][0] == x.at(0).__array_interface__["data"][0]


def test_gpu_reinterpret_equals_cpu():
    require_gpu()

    @pipeline_def(batch_size=2, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: U8, batch=True, layout="HW")
        return (fn.reinterpret(x, dtype=types.INT32), fn.reinterpret(x, dtype=types.INT16, shape=[-1]),
                fn.reinterpret(x.gpu(), dtype=types.INT32), fn.reinterpret(x.gpu(), dtype=types.INT16, shape=[-1]))

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        for c, g in zip(outs[:2], outs[2:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout()
            g = g.as_cpu()
            for i in range(2):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
