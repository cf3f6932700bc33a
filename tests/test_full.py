"""`fn.full`, `full_like`, `zeros`, `zeros_like`, `ones`, `ones_like` against DALI 2.4's cpu
operators: shapes (constant and per sample), types, layouts, NumPy broadcasting, rounding
into integer types; errors naming the operator and the sample."""

import types as _pytypes

import numpy as np
import pytest

import sluice

from conftest import dali_or_none, library_params

_dali = dali_or_none()

LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=m.Pipeline)


def _outputs(lib, build, batch=2):
    pipe = lib.Pipeline(batch, 1, None)
    with pipe:
        x = lib.fn.external_source(lambda: [np.zeros((2, 3), np.uint8), np.zeros((1, 2), np.uint8)], layout="HW")
        fv = lib.fn.external_source(lambda: [np.array([1.5, 2.5, 3.5], np.float32), np.array([-1, 0.5, 9], np.float32)])
        pipe.set_outputs(*build(lib.fn, lib.types, x, fv))
    return [(t.layout(), np.dtype(np.array(t[0]).dtype), [np.array(s).tolist() for s in t]) for t in pipe.run()]


CASES = {
    "full_scalar": lambda fn, T, x, fv: [fn.full(np.float32(3.5))],
    "full_broadcast": lambda fn, T, x, fv: [fn.full(fv, shape=[2, 3])],
    "full_column": lambda fn, T, x, fv: [fn.full(np.array([[1], [2]], np.int16), shape=[2, 4], layout="AB")],
    "full_no_shape": lambda fn, T, x, fv: [fn.full(fv)],
    "full_like_rounds": lambda fn, T, x, fv: [fn.full_like(x, np.float32(7.5)), fn.full_like(x, np.float32(-3.0))],
    "zeros": lambda fn, T, x, fv: [fn.zeros(shape=[2]), fn.zeros(), fn.zeros(shape=[1, 2], dtype=T.FLOAT64)],
    "ones": lambda fn, T, x, fv: [fn.ones(shape=[3], dtype=T.UINT8, layout="X")],
    "likes": lambda fn, T, x, fv: [fn.zeros_like(x), fn.ones_like(x, dtype=T.FLOAT)],
    "per_sample_shape": lambda fn, T, x, fv: [fn.ones(shape=fn.shapes(x))] if hasattr(fn, "shapes") else
    [fn.ones(shape=fn.external_source(lambda: [np.array([2, 3], np.int32), np.array([1, 2], np.int32)]))],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_against_dali(case):
    if _dali is None:
        pytest.skip("DALI is not installed")
    build = CASES[case]
    if case == "per_sample_shape":
        build = lambda fn, T, x, fv: [fn.ones(shape=fn.external_source(  # noqa: E731
            lambda: [np.array([2, 3], np.int32), np.array([1, 2], np.int32)]))]
    ours = _outputs(_pytypes.SimpleNamespace(fn=sluice.fn, types=sluice.types, Pipeline=sluice.Pipeline), build)
    theirs = _outputs(_pytypes.SimpleNamespace(fn=_dali.fn, types=_dali.types, Pipeline=_dali.Pipeline), build)
    assert ours == theirs


def test_values():
    out = _outputs(_pytypes.SimpleNamespace(fn=sluice.fn, types=sluice.types, Pipeline=sluice.Pipeline),
                   lambda fn, T, x, fv: [fn.full(fv, shape=[2, 3]), fn.full_like(x, np.float32(300.0))])
    assert out[0][2][1] == [[-1, 0.5, 9]] * 2
    assert out[1][1] == np.uint8 and out[1][2][1] == [[255, 255]]  # saturated


def test_broadcast_error_names_the_sample():
    pipe = sluice.Pipeline(1, 1, None)
    with pipe:
        pipe.set_outputs(sluice.fn.full(np.zeros(2, np.float32), shape=[2, 3]))
    with pytest.raises(sluice.errors.DataError, match="sample 0.*cannot be broadcast"):
        pipe.run()
