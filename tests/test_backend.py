"""`sluice.backend`: TensorCPU / TensorListCPU made from NumPy arrays, lists and other
tensors, as DALI's `backend` (cases from dali/test/python/test_backend_impl.py), run against
Sluice and DALI 2.4 with the same assertions."""

import numpy as np
import pytest

import sluice.backend as sb

from conftest import library_params

LIBS = [pytest.param(p.values[0].backend, id=p.id) for p in library_params()]


@pytest.fixture(params=LIBS)
def b(request):
    return request.param


def test_create_tensor(b):
    arr = np.random.default_rng(0).random((3, 4), dtype=np.float32)
    t = b.TensorCPU(arr, "AB")
    assert t.layout() == "AB" and list(t.shape()) == [3, 4]
    np.testing.assert_array_equal(np.array(t), arr)


def test_create_tensorlist_from_array(b):
    arr = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    tl = b.TensorListCPU(arr, "HW")
    assert len(tl) == 2 and tl.layout() == "HW" and tl.is_dense_tensor()
    np.testing.assert_array_equal(tl.as_tensor(), arr)
    np.testing.assert_array_equal(np.array(tl[1]), arr[1])
    assert [list(s) for s in tl.shape()] == [[3, 4], [3, 4]]


def test_create_tensorlist_from_list(b):
    arrs = [np.full((i + 1, 2), i, np.uint8) for i in range(3)]
    tl = b.TensorListCPU(arrs)
    assert len(tl) == 3 and not tl.is_dense_tensor()
    for i, a in enumerate(arrs):
        np.testing.assert_array_equal(tl.at(i), a)


def test_tensorlist_from_list_of_tensors(b):
    ts = [b.TensorCPU(np.full((2, 2), i, np.float32), "XY") for i in range(3)]
    tl = b.TensorListCPU(ts)
    assert tl.layout() == "XY"
    np.testing.assert_array_equal(tl.as_tensor(), np.stack([np.full((2, 2), i, np.float32) for i in range(3)]))


def test_tensorlist_from_tensors_of_different_types_fails(b):
    with pytest.raises((RuntimeError, TypeError)):
        b.TensorListCPU([b.TensorCPU(np.zeros(2, np.float32)), b.TensorCPU(np.zeros(2, np.int32))])


def test_the_memory_is_a_copy():
    # Sluice copies the array (DALI's TensorListCPU wraps the NumPy memory instead).
    arr = np.zeros((2, 2), np.float32)
    tl = sb.TensorListCPU(arr)
    arr[:] = 5
    assert tl.as_array().sum() == 0


def test_data_ptr(b):
    tl = b.TensorListCPU(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert tl.data_ptr() == tl.as_tensor().data_ptr() and tl.data_ptr() != 0
