"""`fn.expand_dims` against DALI 2.4's cpu operator: DALI's own test_expand_dims.py cases
(shapes and layouts), compared with DALI's output where DALI accepts them; errors naming
the operator and argument with the pipeline still usable; no copy; gpu equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402


def _data(shapes):
    return [np.arange(int(np.prod(s)), dtype=np.uint8).reshape(s) for s in shapes]


def _run(mod_fn, pdef, shapes, layout, **kwargs):
    @pdef(batch_size=len(shapes), num_threads=1, device_id=None)
    def p():
        x = mod_fn.external_source(lambda: _data(shapes), layout=layout, batch=True, device="cpu")
        return mod_fn.expand_dims(x, **kwargs)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


# DALI's test_expand_dims cases: axes, new_axis_names, layout, shapes, expected shapes, layout.
CASES = [
    ([0, 2], "AB", "XYZ", [(10, 20, 30)], [(1, 10, 1, 20, 30)], "AXBYZ"),
    ([0, 3], None, "XYZ", [(10, 20, 30)], [(1, 10, 20, 1, 30)], ""),
    ([3], None, "XYZ", [(10, 20, 30), (100, 200, 30)], [(10, 20, 30, 1), (100, 200, 30, 1)], ""),
    ([4, 3], None, "XYZ", [(10, 20, 30), (100, 200, 30)], [(10, 20, 30, 1, 1), (100, 200, 30, 1, 1)], ""),
    ([0, 1, 3, 5, 7], "ABCDE", "XYZ", [(11, 22, 33)], [(1, 1, 11, 1, 22, 1, 33, 1)], "ABXCYDZE"),
    ([], "", "HW", [(10, 20)], [(10, 20)], "HW"),
    ([0, 1], "", "", [()], [(1, 1)], ""),
    ([0], "", "HW", [(10, 20)], [(1, 10, 20)], ""),
    ([4, 3], "AB", "XYZ", [(10, 20, 30)], [(10, 20, 30, 1, 1)], "XYZBA"),
    ([0], "X", "", [()], [(1,)], "X"),
]


@pytest.mark.parametrize("axes, names, layout, shapes, expected, expected_layout", CASES)
def test_expand_dims_matches_dali(axes, names, layout, shapes, expected, expected_layout):
    kwargs = dict(axes=axes) if names is None else dict(axes=axes, new_axis_names=names)
    ours = _run(fn, pipeline_def, shapes, layout, **kwargs)
    ref = _run(dfn, dali.pipeline_def, shapes, layout, **kwargs)
    for _ in range(2):
        (a,), (b,) = ours.run(), ref.run()
        assert a.layout() == b.layout() == expected_layout
        for i, s in enumerate(shapes):
            x, y = np.array(a.at(i)), np.array(b.at(i))
            assert x.shape == y.shape == expected[i]
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def test_expand_dims_shares_the_input_buffer():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[4, 6], seed=5)
        return x, fn.expand_dims(x, axes=[1])

    x, y = p().run()
    assert np.array(y.at(0)).shape == (4, 1, 6)
    assert y.at(0).__array_interface__["data"][0] == x.at(0).__array_interface__["data"][0]


def test_gpu_expand_dims_equals_cpu():
    require_gpu()

    @pipeline_def(batch_size=3, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: _data([(2, 3), (4, 5), (1, 1)]), layout="HW", batch=True)
        return fn.expand_dims(x, axes=[0, 3], new_axis_names="FC"), fn.expand_dims(x.gpu(), axes=[0, 3], new_axis_names="FC")

    pipe = p()
    for _ in range(2):
        c, g = pipe.run()
        assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout() == "FHWC"
        g = g.as_cpu()
        for i in range(3):
            np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
