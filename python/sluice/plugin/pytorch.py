"""PyTorch iterators with DALI's API: `DALIGenericIterator`, `DALIClassificationIterator`,
`LastBatchPolicy`. Batches reach PyTorch without a copy: GPU outputs through DLPack on
PyTorch's current stream (which waits for Sluice's work; Sluice recycles the memory only
after what PyTorch queued on it), CPU outputs as views of Sluice's host memory."""

import math
from enum import Enum

import torch

from ..tensors import TensorListCPU, TensorListGPU


class LastBatchPolicy(Enum):
    """What to do with the last, incomplete batch of an epoch."""

    FILL = 0     # return a full batch: the reader fills it (padding or next-epoch samples)
    DROP = 1     # skip it
    PARTIAL = 2  # return only the samples that belong to the epoch


def _to_torch(tl):
    if isinstance(tl, TensorListGPU):
        return torch.from_dlpack(tl.as_tensor())
    if isinstance(tl, TensorListCPU):
        return torch.from_dlpack(tl.as_tensor())
    raise TypeError(f"unexpected pipeline output {type(tl).__name__}")


class DALIGenericIterator:
    """Iterates over one or more pipelines (one per GPU/shard), yielding a list with one
    `{output name: torch.Tensor}` dict per pipeline.

    Epoch length comes from `reader_name` (the reader's `name=`) or from `size` (samples per
    shard). Pipelines must produce dense outputs (same shape per sample), as in DALI.
    """

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, auto_reset=False,
                 fill_last_batch=None, dynamic_shape=False, last_batch_padded=False,
                 last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        self._pipes = pipelines if isinstance(pipelines, (list, tuple)) else [pipelines]
        if not self._pipes:
            raise ValueError("DALIGenericIterator needs at least one pipeline")
        if len(set(output_map)) != len(output_map):
            raise ValueError(f"output_map has duplicate names: {output_map}")
        if size > 0 and reader_name is not None:
            raise ValueError("give either size or reader_name, not both")
        if fill_last_batch is not None:  # DALI's deprecated flag
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
        self._output_map = list(output_map)
        self._policy = last_batch_policy
        self._last_batch_padded = last_batch_padded
        self._auto_reset = auto_reset in (True, "yes")
        self._batch_size = self._pipes[0].batch_size
        for p in self._pipes:
            p.build()
        if reader_name is not None:
            meta = self._pipes[0].reader_meta(reader_name)
            n, shards, shard = meta["epoch_size"], meta["number_of_shards"], meta["shard_id"]
            # Samples of this pipeline's shard, as the reader splits them.
            self._shard_size = math.floor((shard + 1) * n / shards) - math.floor(shard * n / shards)
            self._size_all = n
        elif size > 0:
            self._shard_size = size
            self._size_all = size * len(self._pipes)
        else:
            # Neither: the epoch ends when a pipeline's external source does (StopIteration).
            self._shard_size = None
            self._size_all = -1
        # As in DALI, the caller says whether the reader pads its last batch.
        self._pad_last_batch = last_batch_padded
        self._counter = 0
        self._pending = None
        self._ended = False
        self._checkpointing = self._restore_checkpointed_state()
        self._ever_consumed = False
        # Before the first batch is prepared: the state the user has seen nothing of.
        self._initial_checkpoints = self._checkpoints() if self._checkpointing else None
        if prepare_first_batch:
            try:
                self._pending = self._fetch()
            except StopIteration:
                self._ended = True

    def _restore_checkpointed_state(self):
        """Whether the pipelines checkpoint; for pipelines restored from a checkpoint, this
        iterator's counters as the checkpoint has them (DALI's warnings where it cannot)."""
        enabled = {p._enable_checkpointing for p in self._pipes}
        if len(enabled) > 1:
            raise ValueError("All wrapped pipelines must have the same value for `enable_checkpointing`.")
        if not enabled.pop():
            return False
        restored = [p.is_restored_from_checkpoint for p in self._pipes]
        if any(restored):
            import json
            import logging

            if not all(restored):
                logging.warning("Some, but not all of the pipelines used were restored from checkpoint. This iterator "
                                "might produce unexpected results.")
            data = [p._iterator_data for p in self._pipes if p.is_restored_from_checkpoint]
            if any(d != data[0] for d in data):
                logging.warning("The provided pipelines had different iterator data in the checkpoints they were "
                                "restored from. This iterator might produce unexpected results.")
            if not data[0]:
                logging.warning("Iterator data was not saved in the checkpoint. This iterator might produce unexpected "
                                "results.")
            else:
                try:
                    state = json.loads(data[0])
                except ValueError:
                    raise ValueError("Iterator checkpoint data is not a valid JSON string. Please make sure that the "
                                     "checkpoint was created with the same version of Sluice.") from None
                self._counter, self._ended = state["_counter"], state["_ended"]
        return True

    def _checkpoints(self):
        import json

        state = json.dumps({"_counter": self._counter, "_ended": self._ended, "_size": self._size_all})
        return [p._get_checkpoint(iterator_data=state) for p in self._pipes]

    def checkpoints(self):
        """One checkpoint per pipeline (bytes), holding this iterator's position too: build
        the pipelines with `checkpoint=` them and a new iterator with the same arguments to
        go on from here."""
        if not self._checkpointing:
            raise ValueError("Cannot access checkpoints with checkpointing disabled")
        return self._checkpoints() if self._ever_consumed else list(self._initial_checkpoints)

    def state_dict(self):
        """torchdata-style state: {"checkpoints": [bytes per pipeline]}."""
        return {"checkpoints": self.checkpoints()}

    def load_state_dict(self, state):
        """Goes on from `state` (what `state_dict()` gave, here or in another process): each
        pipeline is rebuilt from its checkpoint, and this iterator takes the position saved
        with them."""
        cpts = state["checkpoints"]
        if len(cpts) != len(self._pipes):
            raise ValueError(f"the state holds {len(cpts)} checkpoints; this iterator has {len(self._pipes)} pipelines")
        for p, c in zip(self._pipes, cpts):
            p._rebuild_from_checkpoint(c)
        self._pending = None
        self._counter, self._ended = 0, False
        self._restore_checkpointed_state()
        self._ever_consumed = False
        self._initial_checkpoints = self._checkpoints()

    def _fetch(self):
        outs = []
        for p in self._pipes:
            res = p.run()
            if len(res) != len(self._output_map):
                raise ValueError(f"the pipeline has {len(res)} outputs but output_map names {len(self._output_map)}")
            outs.append({name: _to_torch(t) for name, t in zip(self._output_map, res)})
        return outs

    def __len__(self):
        if self._shard_size is None:
            raise TypeError("the epoch's length is not known: the pipelines end it (StopIteration)")
        per_epoch = self._shard_size / self._batch_size
        return math.floor(per_epoch) if self._policy == LastBatchPolicy.DROP else math.ceil(per_epoch)

    def __iter__(self):
        return self

    def __next__(self):
        self._ever_consumed = True
        if self._shard_size is None:
            return self._next_until_stop()
        remaining = self._shard_size - self._counter
        if 0 < remaining < self._batch_size and self._policy == LastBatchPolicy.DROP:
            # Like DALI: pull the incomplete batch out of the pipeline and drop it, so the
            # next epoch starts where the reader really is.
            if self._pending is None:
                self._fetch()
            self._pending = None
            self._counter = self._shard_size
            remaining = 0
        if remaining <= 0:
            if self._auto_reset:
                self.reset()
            raise StopIteration
        batch = self._pending if self._pending is not None else self._fetch()
        self._pending = None
        self._counter += self._batch_size
        if self._policy == LastBatchPolicy.PARTIAL and remaining < self._batch_size:
            batch = [{k: v[:remaining] for k, v in d.items()} for d in batch]
        return batch

    next = __next__

    def _next_until_stop(self):
        batch, self._pending = self._pending, None
        if batch is None and not self._ended:
            try:
                batch = self._fetch()
            except StopIteration:
                self._ended = True
        if batch is None:
            if self._auto_reset:
                self.reset()
            raise StopIteration
        return batch

    def reset(self):
        """Starts the next epoch (ignored before the current one ends, as in DALI). Readers
        never rewind: with FILL and no padding the last batch already held samples of the next
        epoch, so the count carries over; with pad_last_batch the reader starts the new epoch
        on a batch boundary."""
        if self._shard_size is None:
            if self._ended:
                for p in self._pipes:
                    p.reset()
                self._ended = False
            return
        if self._counter < self._shard_size:
            return
        if self._policy == LastBatchPolicy.FILL and not self._pad_last_batch:
            self._counter -= self._shard_size
        else:
            self._counter = 0

    @property
    def size(self):
        return self._size_all


class DALIClassificationIterator(DALIGenericIterator):
    """`DALIGenericIterator` with `output_map=["data", "label"]`."""

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False, fill_last_batch=None,
                 dynamic_shape=False, last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL,
                 prepare_first_batch=True):
        super().__init__(pipelines, ["data", "label"], size=size, reader_name=reader_name,
                         auto_reset=auto_reset, fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)


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
    import contextlib

    src = dali_tensor.as_tensor() if hasattr(dali_tensor, "as_tensor") else dali_tensor
    on_stream = contextlib.nullcontext()
    if arr.is_cuda and cuda_stream is not None:
        s = cuda_stream if isinstance(cuda_stream, torch.cuda.Stream) else torch.cuda.ExternalStream(
            getattr(cuda_stream, "cuda_stream", cuda_stream))
        on_stream = torch.cuda.stream(s)
    with on_stream:
        t = torch.from_dlpack(src)
        if tuple(t.shape) != tuple(arr.shape):
            raise ValueError(f"feed_ndarray: shapes differ: the tensor is {tuple(t.shape)}, arr {tuple(arr.shape)}")
        if t.dtype != arr.dtype:
            raise TypeError(f"feed_ndarray: types differ: the tensor is {t.dtype}, arr {arr.dtype}")
        if t.is_cuda != arr.is_cuda:
            raise TypeError("feed_ndarray: the tensor and arr must both be on the CPU or both on the GPU")
        arr.copy_(t)
    return arr
