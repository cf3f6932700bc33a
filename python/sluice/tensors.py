"""Pipeline outputs on the host: TensorListCPU (a batch) and TensorCPU (one array). Both
are views of engine memory: NumPy, PyTorch and JAX read them without a copy through
`__array_interface__` and DLPack, and the memory lives as long as any view does."""

import numpy as np

from . import _core

from .types import DALIDataType


class TensorCPU:
    """One array on the host: a sample, or a dense batch from `TensorListCPU.as_tensor()`.
    `TensorCPU(array, layout="")` copies an array (anything NumPy takes, or DLPack), as DALI's
    `backend.TensorCPU`."""

    __slots__ = ("_batch", "_index", "_interface")

    def __init__(self, batch, index=None, layout=None):
        if not isinstance(batch, _core.TensorList):  # an array: a batch of one sample
            if isinstance(index, str):
                layout, index = index, None
            from .external_source import _as_array

            batch, index = _core.TensorList.from_host([_as_array(batch)], layout or None), 0
        self._batch = batch  # _core.TensorList; keeps the memory alive
        self._index = index  # sample index, or None for the whole dense batch
        self._interface = batch.batch_interface() if index is None else batch.sample_interface(index)

    @property
    def __array_interface__(self):
        return self._interface

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(_ArrayView(self))
        if dtype is not None:
            a = a.astype(dtype)
        return a.copy() if copy else a

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self._batch.dlpack(self._index)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def shape(self):
        """Shape of the array, as a list (a method, as in DALI)."""
        return list(self._interface["shape"])

    @property
    def dtype(self):
        return DALIDataType(self._batch.dtype_id())

    def layout(self):
        return self._batch.layout()

    def source_info(self):
        return "" if self._index is None else self._batch.source_info(self._index)

    def as_array(self):
        return np.asarray(self)

    def data_ptr(self):
        """Address of the first element."""
        return self._interface["data"][0]

    def as_cpu(self):
        return self

    def __repr__(self):
        return f"TensorCPU(shape={self.shape()}, dtype={self.dtype.name}, layout={self.layout()!r})"


class _ArrayView:
    """Hands NumPy the interface while holding the tensor (and so the batch) alive."""

    __slots__ = ("_t", "__array_interface__")

    def __init__(self, t):
        self._t = t
        self.__array_interface__ = t._interface


class TensorListCPU:
    """A batch on the host: one array per sample, each with its own shape.
    `TensorListCPU(data, layout="")` makes one from a list of arrays or TensorCPUs (copied), an
    array whose first dimension is the batch, or another TensorListCPU (shared, relabelled),
    as DALI's `backend.TensorListCPU`."""

    def __init__(self, data, layout=None):
        if isinstance(data, _core.TensorList):
            self._b = data if layout is None else data.with_layout(layout)
            return
        if isinstance(data, TensorListCPU):
            self._b = data._b if layout is None else data._b.with_layout(layout)
            return
        from .external_source import to_feed

        batch, layout = to_feed(list(data) if isinstance(data, tuple) else data, layout)
        self._b = batch if isinstance(batch, _core.TensorList) else _core.TensorList.from_host(batch, layout)

    def __len__(self):
        return len(self._b)

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise TypeError("TensorListCPU does not support slicing; index samples one by one")
        n = len(self._b)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample index {i} out of range for a batch of {n}")
        return TensorCPU(self._b, i)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def at(self, i):
        """Sample `i` as a NumPy array (a view, no copy)."""
        return np.asarray(self[i])

    def as_tensor(self):
        """The batch as one TensorCPU of shape (N, ...); all samples must share a shape."""
        return TensorCPU(self._b, None)

    def data_ptr(self):
        """Address of the first sample's first element (samples are contiguous)."""
        return self._b.batch_interface()["data"][0] if self._b.is_dense_tensor() else self._b.sample_interface(0)["data"][0]

    def as_array(self):
        """The batch as one NumPy array of shape (N, ...) (a view, no copy)."""
        return np.asarray(self.as_tensor())

    def __array__(self, dtype=None, copy=None):
        return self.as_tensor().__array__(dtype, copy)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self._b.dlpack(None)

    def __dlpack_device__(self):
        return (1, 0)

    def is_dense_tensor(self):
        return self._b.is_dense_tensor()

    def layout(self):
        return self._b.layout()

    def shape(self):
        """Per-sample shapes, as a list of tuples."""
        return [tuple(s) for s in self._b.shapes()]

    @property
    def dtype(self):
        return DALIDataType(self._b.dtype_id())

    def source_info(self, i=None):
        """Where sample `i` came from (its file), or the list for all samples."""
        if i is None:
            return [self._b.source_info(k) for k in range(len(self))]
        return self._b.source_info(i)

    def as_cpu(self):
        return self

    def as_reshaped_tensor(self, shape):
        return self.as_array().reshape(shape)

    def __repr__(self):
        return f"TensorListCPU(len={len(self)}, dtype={self.dtype.name}, layout={self.layout()!r})"


def _from_gpu_object(data, layout, device_id, stream, what):
    """A `_core.TensorListGpu` copied from another library's GPU data: an object with
    `__cuda_array_interface__` or `__dlpack__` (or a bare DLPack capsule), or a list of
    them; the samples of a batch are the object's first dimension."""
    from .external_source import _bare_capsules, gpu_regions

    data = _bare_capsules(data)
    got = gpu_regions(data, stream)
    if got is None:
        raise TypeError(f"{what} needs data in GPU memory (an object with __cuda_array_interface__ or __dlpack__ on a "
                        f"CUDA device, or a list of such), got {type(data).__name__}; use {what[:-3]}CPU for host data")
    regions, producer, _keep = got  # _keep holds DLPack capsules until the copy is done
    device_id = None if device_id is None or device_id < 0 else device_id
    return _core.TensorListGpu.from_device(regions, producer, layout or None, device_id)


class TensorGPU:
    """One array on the GPU: a sample, or a dense batch from `TensorListGPU.as_tensor()`.
    Hands its memory to PyTorch / CuPy / JAX without a copy (DLPack, CUDA array interface).
    `TensorGPU(gpu_array, layout="", device_id=-1)` copies another library's GPU array
    (CUDA array interface or DLPack), as DALI's `backend.TensorGPU`."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch, index=None, layout=None, device_id=-1, stream=None):
        if not isinstance(batch, _core.TensorListGpu):  # a GPU array: a batch of one sample
            if isinstance(index, str):
                layout, index = index, None
            batch, index = _from_gpu_object([batch], layout, device_id, stream, "TensorGPU"), 0
        self._batch = batch  # _core.TensorListGpu; keeps the device memory alive
        self._index = index

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # `stream` is the consumer's stream: it is made to wait for our work, and our memory
        # is recycled only after what it queues. -1 means "do not synchronize".
        if stream == -1:
            stream = None
        return self._batch.dlpack(self._index, stream)

    def __dlpack_device__(self):
        return (2, self._batch.device_id())  # kDLCUDA

    @property
    def __cuda_array_interface__(self):
        return self._batch.cuda_interface(self._index)

    def shape(self):
        if self._index is None:
            shapes = self._batch.shapes()
            return [len(shapes)] + (list(shapes[0]) if shapes else [])
        return self._batch.shape(self._index)

    @property
    def dtype(self):
        return DALIDataType(self._batch.dtype_id())

    def layout(self):
        return self._batch.layout()

    def source_info(self):
        return "" if self._index is None else self._batch.source_info(self._index)

    def as_cpu(self):
        """A host copy (TensorCPU)."""
        return TensorCPU(self._batch.as_cpu(), self._index)

    def __repr__(self):
        return f"TensorGPU(shape={self.shape()}, dtype={self.dtype.name}, layout={self.layout()!r})"


class TensorListGPU:
    """A batch on the GPU: one array per sample, each with its own shape.
    `TensorListGPU(data, layout="", device_id=-1)` copies another library's GPU data: an
    array whose first dimension is the batch, or a list of GPU arrays or TensorGPUs; another
    TensorListGPU is shared (relabelled with `layout`). As DALI's `backend.TensorListGPU`."""

    def __init__(self, data, layout=None, device_id=-1, contiguous=True, stream=None):
        if isinstance(data, TensorListGPU):
            data = data._b
        if isinstance(data, _core.TensorListGpu):
            self._b = data if layout is None else data.with_layout(layout)
            return
        self._b = _from_gpu_object(data, layout, device_id, stream, "TensorListGPU")

    def __len__(self):
        return len(self._b)

    def __getitem__(self, i):
        n = len(self._b)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample index {i} out of range for a batch of {n}")
        return TensorGPU(self._b, i)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def as_tensor(self):
        """The batch as one TensorGPU of shape (N, ...); all samples must share a shape."""
        if not self._b.is_dense_tensor():
            raise RuntimeError("the batch is not a dense tensor: samples have different shapes; "
                               "index samples one by one or make them one shape (resize / crop)")
        return TensorGPU(self._b, None)

    def as_cpu(self):
        """A host copy of the batch (TensorListCPU); waits for the GPU work."""
        return TensorListCPU(self._b.as_cpu())

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self.as_tensor().__dlpack__(stream)

    def __dlpack_device__(self):
        return (2, self._b.device_id())

    @property
    def __cuda_array_interface__(self):
        return self.as_tensor().__cuda_array_interface__

    def is_dense_tensor(self):
        return self._b.is_dense_tensor()

    def layout(self):
        return self._b.layout()

    def shape(self):
        return [tuple(s) for s in self._b.shapes()]

    @property
    def dtype(self):
        return DALIDataType(self._b.dtype_id())

    def device_id(self):
        return self._b.device_id()

    def source_info(self, i=None):
        if i is None:
            return [self._b.source_info(k) for k in range(len(self))]
        return self._b.source_info(i)

    def __repr__(self):
        return f"TensorListGPU(len={len(self)}, dtype={self.dtype.name}, layout={self.layout()!r})"
