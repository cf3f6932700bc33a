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


# --------------------------------------------------------------------------- GPU
# DALI's backend.TensorGPU / TensorListGPU made from other libraries' GPU arrays (CUDA array
# interface or DLPack). Sluice copies them (the result owns its memory). Needs a GPU.

def test_gpu_tensors_from_cuda_arrays_and_dlpack():
    from conftest import require_gpu

    require_gpu()
    torch = pytest.importorskip("torch")
    dense = torch.arange(2 * 3 * 4, dtype=torch.float32, device="cuda").reshape(2, 3, 4)
    tl = sb.TensorListGPU(dense, "HW")
    assert len(tl) == 2 and tl.layout() == "HW" and tl.is_dense_tensor() and tl.device_id() == 0
    dense.add_(100)  # a copy: later writes to the source do not show
    np.testing.assert_array_equal(tl.as_cpu().as_array(), np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    # a list of samples of different shapes, one of them given as a bare DLPack capsule
    from torch.utils import dlpack as tdl

    samples = [torch.full((i + 1, 2), i, dtype=torch.int32, device="cuda") for i in range(3)]
    tl = sb.TensorListGPU([samples[0], tdl.to_dlpack(samples[1]), samples[2]])
    assert [tuple(s) for s in tl.shape()] == [(1, 2), (2, 2), (3, 2)]
    assert [np.array(s.as_cpu()).tolist() for s in tl] == [[[i, i]] * (i + 1) for i in range(3)]
    # a TensorGPU from a CUDA array, then a TensorListGPU of TensorGPUs
    t = sb.TensorGPU(torch.ones((4, 5), dtype=torch.uint8, device="cuda"), "HW")
    assert t.shape() == [4, 5] and t.layout() == "HW"
    np.testing.assert_array_equal(np.array(t.as_cpu()), np.ones((4, 5), np.uint8))
    tl2 = sb.TensorListGPU([t, t], "HW")
    assert len(tl2) == 2 and tl2.as_cpu().as_array().sum() == 40
    # relabelling shares; a layout of the wrong rank is refused
    assert sb.TensorListGPU(tl2, "AB").layout() == "AB"
    with pytest.raises(RuntimeError, match="layout"):
        sb.TensorListGPU(dense, "HWC")
    # a TensorListGPU made here feeds a GPU pipeline
    import sluice

    pipe = sluice.Pipeline(2, 2, 0)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x", device="gpu") + 1)
    pipe.feed_input("x", sb.TensorListGPU(torch.zeros((2, 3), dtype=torch.float32, device="cuda")))
    np.testing.assert_array_equal(pipe.run()[0].as_cpu().as_array(), np.ones((2, 3), np.float32))


def test_gpu_tensors_refuse_host_data():
    with pytest.raises(TypeError, match="needs data in GPU memory.*TensorListCPU"):
        sb.TensorListGPU(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="needs data in GPU memory.*TensorCPU"):
        sb.TensorGPU(np.zeros(3, np.float32))
