"""PyTorch iterators with DALI's API: `DALIGenericIterator`, `DALIClassificationIterator`,
`LastBatchPolicy`. Batches reach PyTorch without a copy: GPU outputs through DLPack on
PyTorch's current stream (which waits for Sluice's work; Sluice recycles the memory only
after what PyTorch queued on it), CPU outputs as views of Sluice's host memory."""

import contextlib

import torch

from ..tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU
from ..types import DALIDataType
from .base_iterator import LastBatchPolicy, _DaliBaseIterator

to_torch_type = {
    DALIDataType.FLOAT: torch.float32,
    DALIDataType.FLOAT64: torch.float64,
    DALIDataType.FLOAT16: torch.float16,
    DALIDataType.UINT8: torch.uint8,
    DALIDataType.INT8: torch.int8,
    DALIDataType.BOOL: torch.bool,
    DALIDataType.INT16: torch.int16,
    DALIDataType.INT32: torch.int32,
    DALIDataType.INT64: torch.int64,
}


def _to_torch(t):
    """A dense TensorList (or a Tensor) as a torch.Tensor without a copy: GPU data through
    DLPack on PyTorch's current stream, host data as a view of Sluice's memory."""
    if isinstance(t, (TensorListCPU, TensorListGPU)):
        t = t.as_tensor()
    if not isinstance(t, (TensorCPU, TensorGPU)):
        raise RuntimeError(f"Internal error: unexpected type {type(t)}.\nExpected TensorCPU or TensorGPU")
    return torch.from_dlpack(t)


class DALIGenericIterator(_DaliBaseIterator):
    """Iterates over one or more pipelines (one per GPU or shard), returning a list with one
    `{output name: torch.Tensor}` dict per pipeline. Outputs must be dense (the same shape in
    every sample); they reach PyTorch without a copy.

    The epoch's length comes from `reader_name` (the reader's `name=`), from `size` (samples
    per epoch), or else from the pipelines (an external source ending the epoch). See
    `LastBatchPolicy` for the last batch. `dynamic_shape` is accepted and ignored, as in DALI.
    """

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        assert len(set(output_map)) == len(output_map), "output_map names should be distinct"
        self.output_map = list(output_map)
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch, last_batch_padded,
                         last_batch_policy, prepare_first_batch=prepare_first_batch)

    def _to_framework(self, pipeline_index, outputs):
        if len(outputs) != len(self.output_map):
            raise ValueError(f"the pipeline has {len(outputs)} outputs but output_map names {len(self.output_map)}")
        return {name: _to_torch(t) for name, t in zip(self.output_map, outputs)}

    def _first_samples(self, item, n):
        return {k: v[0:n] for k, v in item.items()}


class DALIClassificationIterator(DALIGenericIterator):
    """`DALIGenericIterator` with `output_map=["data", "label"]`."""

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False, fill_last_batch=None,
                 dynamic_shape=False, last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL,
                 prepare_first_batch=True):
        super().__init__(pipelines, ["data", "label"], size, reader_name=reader_name, auto_reset=auto_reset,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)


class DALIRaggedIterator(_DaliBaseIterator):
    """Like `DALIGenericIterator`, for outputs whose samples differ in shape: each output is
    DENSE_TAG (one tensor, the samples must agree), SPARSE_LIST_TAG (a list with one tensor
    per sample) or SPARSE_COO_TAG (a sparse COO tensor [batch, longest sample] of 1-D
    samples), by `output_types` (default: all dense)."""

    DENSE_TAG = "dense"
    SPARSE_LIST_TAG = "sparse_list"
    SPARSE_COO_TAG = "sparse_coo"

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, output_types=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        assert len(set(output_map)) == len(output_map), "output_map names should be distinct"
        tags = {self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG}
        assert output_types is None or set(output_types) <= tags, \
            "Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed"
        self.output_map = list(output_map)
        self._outputs_types = list(output_types) if output_types is not None else None
        super().__init__(pipelines, size, reader_name, auto_reset, fill_last_batch, last_batch_padded,
                         last_batch_policy, prepare_first_batch=prepare_first_batch)

    def _to_framework(self, pipeline_index, outputs):
        if len(outputs) != len(self.output_map):
            raise ValueError(f"the pipeline has {len(outputs)} outputs but output_map names {len(self.output_map)}")
        out = {}
        for j, (name, tl) in enumerate(zip(self.output_map, outputs)):
            tag = self.DENSE_TAG if self._outputs_types is None else self._outputs_types[j]
            if tag == self.DENSE_TAG:
                out[name] = _to_torch(tl)
                continue
            samples = [torch.from_dlpack(tl[i]) for i in range(len(tl))]
            if tag == self.SPARSE_LIST_TAG:
                out[name] = samples
            else:
                out[name] = _sparse_coo(samples)
        return out

    def _first_samples(self, item, n):
        return {k: v[0:n] for k, v in item.items()}


def _sparse_coo(samples):
    """1-D samples as a sparse [batch, longest] COO tensor: (sample, position) -> value.
    Its size is the smallest that holds every value, as in DALI."""
    values = torch.cat([s.reshape(-1) for s in samples]) if samples else torch.empty(0)
    rows = torch.cat([torch.full((s.numel(),), i, dtype=torch.int64) for i, s in enumerate(samples)])
    cols = torch.cat([torch.arange(s.numel(), dtype=torch.int64) for s in samples])
    indices = torch.stack([rows, cols]).to(values.device)
    return torch.sparse_coo_tensor(indices, values)


GenericIterator = DALIGenericIterator
ClassificationIterator = DALIClassificationIterator


def distributed_shard():
    """The reader arguments of this process's shard under torchrun (or Slurm, Open MPI):
    `fn.readers.file(..., **distributed_shard())`; one shard of one outside a launcher. The
    same as `shard_id="auto"`."""
    from .. import _distributed

    return _distributed.shard()


def local_device_id():
    """This process's GPU under a launcher (LOCAL_RANK), for `device_id=`; 0 outside one."""
    from .. import _distributed

    return _distributed.local_device_id()


def feed_ndarray(dali_tensor, arr, cuda_stream=None):
    """Copies a Sluice tensor (TensorCPU / TensorGPU, or a dense TensorList) into the
    PyTorch tensor `arr`, which must have its shape and type and live on the same side (DALI's
    `plugin.pytorch.feed_ndarray`). A GPU copy is queued on `cuda_stream` (default: PyTorch's
    current stream), ordered after Sluice's work through DLPack. Returns `arr`."""
    src = dali_tensor.as_tensor() if hasattr(dali_tensor, "as_tensor") else dali_tensor
    dtype = to_torch_type.get(src.dtype)
    assert dtype == arr.dtype, ("The element type of DALI Tensor/TensorList doesn't match the element type of the "
                                f"target PyTorch Tensor: {dtype} vs {arr.dtype}")
    assert list(src.shape()) == list(arr.size()), \
        f"Shapes do not match: DALI tensor has size {list(src.shape())}, but PyTorch Tensor has size {list(arr.size())}"
    if isinstance(src, TensorGPU) != arr.is_cuda:
        raise TypeError("feed_ndarray: the tensor and arr must both be on the CPU or both on the GPU")
    on_stream = contextlib.nullcontext()
    if arr.is_cuda and cuda_stream is not None:
        s = cuda_stream if isinstance(cuda_stream, torch.cuda.Stream) else torch.cuda.ExternalStream(
            getattr(cuda_stream, "cuda_stream", cuda_stream))
        on_stream = torch.cuda.stream(s)
    with on_stream:
        arr.copy_(torch.from_dlpack(src))
    return arr
