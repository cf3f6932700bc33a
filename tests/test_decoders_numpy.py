"""`fn.decoders.numpy` (cpu, as DALI 2.4): DALI's decoder/test_numpy.py ported with
`nvidia.dali` replaced by `sluice`, outputs equal to DALI 2.4's on the same bytes (C and
Fortran order, every type, casts), and DALI's errors, after which the pipeline goes on."""

import io

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def
from sluice.types import DALIDataType

from conftest import dali_or_none

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def npy_bytes(a):
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=False)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def box_source(data):
    for sample in data:
        yield (npy_bytes(sample),)


def _pipe(data, batch_size=1, lib=sluice, **kw):
    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        encoded = lib.fn.external_source(source=box_source(data), num_outputs=1, batch=False, ndim=1, dtype=lib.types.DALIDataType.UINT8)
        return lib.fn.decoders.numpy(encoded, **kw)

    p = pipe()
    p.build()
    return p


def test_normal_decoding():
    data = [np.random.normal(size=(2, s)).astype(np.float32) for s in range(8)]
    p = _pipe(data)
    for i in range(8):
        assert np.all(np.asarray(p.run()[0][0]) == data[i])


def test_fortran_decoding():
    data = [np.array(np.random.normal(size=(2, s)), order="F") for s in range(8)]
    p = _pipe(data)
    for i in range(8):
        out = np.asarray(p.run()[0][0])
        assert out.shape == data[i].shape and np.array_equal(out, data[i])


def test_variable_shape():
    data = [np.random.normal(size=(2, s)).astype(np.float32) for s in range(8)]
    (out,) = _pipe(data, batch_size=8).run()
    for i in range(8):
        assert np.array_equal(np.asarray(out[i]), data[i])


def test_casting_decoding():
    data = [np.random.normal(loc=0, scale=255, size=(2, s)).astype(np.int32) for s in range(8)]
    p = _pipe(data, dtype=DALIDataType.FLOAT)
    for i in range(8):
        out = np.asarray(p.run()[0][0])
        assert out.dtype == np.float32 and np.array_equal(out, data[i].astype(np.float32))


@pytest.mark.parametrize("batch_size", [1, 2])
def test_raise_different_dims(batch_size):
    data = [np.empty(shape, dtype=np.float32) for shape in [(2, 3), (2, 3), (2, 3, 4), (2, 3)]]
    p = _pipe(data, batch_size=batch_size)
    with pytest.raises(RuntimeError, match="All samples in the dataset must have the same number of dimensions"):
        for _ in range(len(data) // batch_size):
            p.run()


def test_raise_bad_numpy_magic():
    def bad_source():
        yield (np.zeros(100, dtype=np.uint8),)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.decoders.numpy(fn.external_source(source=bad_source(), num_outputs=1, batch=False, ndim=1, dtype=DALIDataType.UINT8)[0])

    with pytest.raises(RuntimeError, match="Got bad magic string for numpy header") as e:
        p = pipe()
        p.build()
        p.run()
    assert "decoders.numpy" in str(e.value)


@pytest.mark.parametrize("batch_size", [1, 2])
def test_raise_different_dtype_without_arg(batch_size):
    data = [np.empty((2, 3), dtype=dtype) for dtype in [np.float32, np.float32, np.int32, np.float32]]
    p = _pipe(data, batch_size=batch_size)
    with pytest.raises(RuntimeError, match="All samples in the dataset must have the same data type"):
        for _ in range(len(data) // batch_size):
            p.run()


def test_different_dtype_with_cast():
    data = [np.full((2, 3), 5, dtype=np.float32), np.full((2, 3), 5, dtype=np.int32)]
    a, b = _pipe(data, batch_size=2, dtype=DALIDataType.FLOAT).run()[0]
    assert np.array_equal(np.array(a), np.array(b))


@pytest.mark.parametrize("truncate", [True, False])
def test_malformed_data(truncate):
    raw = npy_bytes(np.empty(100, dtype=np.uint8))
    raw = raw[:-100] if truncate else np.concatenate((raw, np.zeros(100, dtype=np.uint8)))

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.decoders.numpy(fn.external_source(source=lambda: (raw,), num_outputs=1, batch=False, ndim=1, dtype=DALIDataType.UINT8)[0])

    with pytest.raises(RuntimeError, match="Expected data numpy size "):
        p = pipe()
        p.build()
        p.run()


def test_error_then_pipeline_goes_on():
    calls = [0]
    good = np.arange(6, dtype=np.int16).reshape(2, 3)

    def source():
        calls[0] += 1
        return (np.zeros(3, np.uint8) if calls[0] == 1 else npy_bytes(good),)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.decoders.numpy(fn.external_source(source=source, num_outputs=1, batch=False)[0])

    p = pipe()
    with pytest.raises(RuntimeError, match="bad magic"):
        p.build()
        p.run()
    np.testing.assert_array_equal(np.asarray(p.run()[0][0]), good)


TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float16, np.float32, np.float64, np.bool_]


@needs_dali
@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("cast", [None, DALIDataType.FLOAT, DALIDataType.INT16, DALIDataType.UINT8])
def test_equals_dali(dtype, order, cast):
    rng = np.random.default_rng(5)
    shapes = [(3, 4, 5), (1, 7, 2), (0, 3, 1), (6, 1, 9)]
    data = [np.array(rng.normal(0, 300, s).astype(dtype), order=order) for s in shapes]
    kw = {} if cast is None else {"dtype": cast}
    ours = _pipe(data, batch_size=len(data), **kw).run()[0]
    # DALI 2.4's cpu decoder needs CUDA for Fortran-order files (its transpose buffer), so
    # those are compared with DALI's result for the same arrays stored in C order.
    theirs = _pipe([np.ascontiguousarray(d) for d in data], batch_size=len(data), lib=dali, **kw).run()[0]
    for i in range(len(data)):
        a, b = np.asarray(ours[i]), np.asarray(theirs[i])
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
