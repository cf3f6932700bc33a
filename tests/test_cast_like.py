"""`fn.cast_like`: `fn.cast` to the second input's type (DALI's test_cast.py `test_cast_like`
ported, with external sources for the data), on cpu and gpu."""

import itertools

import numpy as np
import pytest

import sluice
from sluice import fn

from conftest import require_gpu

TYPES = [np.uint8, np.int32, np.float32]


def _pipe(devices, dtype_in, dtype_out):
    pipe = sluice.pipeline.Pipeline(batch_size=2, num_threads=2, device_id=None if devices == ("cpu", "cpu") else 0)
    values = np.array([0.4, 1.5, 254.6, -3.5], np.float32)
    with pipe:
        data0 = fn.external_source(source=lambda: [values.astype(dtype_in)] * 2, batch=True)
        data1 = fn.external_source(source=lambda: [np.zeros(3, dtype_out)] * 2, batch=True)
        if devices[0] == "gpu":
            data0 = data0.gpu()
        if devices[1] == "gpu":
            data1 = data1.gpu()
        pipe.set_outputs(fn.cast_like(data0, data1), fn.cast(data0, dtype=_dali_type(dtype_out)))
    pipe.build()
    return pipe


def _dali_type(t):
    return {np.uint8: sluice.types.UINT8, np.int32: sluice.types.INT32, np.float32: sluice.types.FLOAT}[t]


@pytest.mark.parametrize("devices", [("cpu", "cpu"), ("gpu", "gpu")])
@pytest.mark.parametrize("dtype_in,dtype_out", list(itertools.product(TYPES, TYPES)))
def test_cast_like(devices, dtype_in, dtype_out):
    if devices != ("cpu", "cpu"):
        require_gpu()
    like, cast = _pipe(devices, dtype_in, dtype_out).run()
    assert like.dtype == _dali_type(dtype_out)
    like, cast = (like.as_cpu(), cast.as_cpu()) if devices[0] == "gpu" else (like, cast)
    for i in range(2):
        np.testing.assert_array_equal(np.array(like.at(i)), np.array(cast.at(i)))
        assert np.array(like.at(i)).dtype == dtype_out


def test_a_gpu_cast_like_of_a_cpu_type_source_asks_for_the_gpu():
    """DALI lets the second input of a gpu cast_like stay on the cpu; Sluice's gpu operators
    take cpu inputs only where they read them on the host, so it says to move it."""
    require_gpu()
    with pytest.raises(ValueError, match=r"(?s)cast_like.*input 1 is on the CPU.*gpu\(\)"):
        _pipe(("gpu", "cpu"), np.uint8, np.float32)


def test_cast_like_needs_two_inputs():
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pytest.raises(Exception, match=r"(?s)cast_like.*input"):
        with pipe:
            x = fn.external_source(source=lambda: [np.zeros(2, np.uint8)], batch=True)
            pipe.set_outputs(fn.cast_like(x))
