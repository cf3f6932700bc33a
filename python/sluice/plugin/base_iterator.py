"""What every framework iterator shares (DALI's `plugin.base_iterator`): how long an epoch is,
which samples of the last batch are real, when to stop and how to start the next epoch,
for one or several pipelines (one per GPU or shard). The framework plugins (pytorch, jax)
only turn a pipeline's outputs into their tensors.

The counting follows DALI 2.4's, quirks included, because programs depend on it (the number
of batches in an epoch, which samples a FILL batch repeats): checked case by case against
DALI's own base iterator in tests/test_fw_iterators.py. In short, per epoch and pipeline:

* with `reader_name`, the reader's shard size is the truth. FILL without padding lets batches
  run into the next epoch (or shard) and remembers how far each shard was read ahead, so the
  next epoch is shorter by that much; FILL with padding and PARTIAL start every epoch afresh;
  DROP ends the epoch before a batch that would cross its end.
* with `size` (samples per epoch over all pipelines) the same, on a plain count.
* with neither, the pipelines end the epoch (an external source's StopIteration).
"""

import json
import logging
import math
import warnings
from enum import Enum, unique

import numpy as np


@unique
class LastBatchPolicy(Enum):
    """What to do with the last batch of an epoch when the shard does not fill it.

    * FILL: return it whole; the tail is the shard's last sample repeated (reader with
      `pad_last_batch=True`) or the start of the next epoch.
    * DROP: skip it.
    * PARTIAL: return only the samples of this epoch.
    """

    FILL = 0
    DROP = 1
    PARTIAL = 2


class _DaliBaseIterator:
    """The epoch bookkeeping of the framework iterators. A framework iterator implements
    `_to_framework(pipeline_index, outputs)` (one pipeline's outputs, a tuple of TensorLists,
    to what `next()` returns for it) and `_first_samples(item, n)` (that item cut to its first
    n samples), sets its own fields, then calls this constructor, which may run the
    pipelines to have the first batch ready (`prepare_first_batch`)."""

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False, fill_last_batch=None,
                 last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        assert pipelines is not None, "Number of provided pipelines has to be at least 1"
        self._pipes = pipelines if isinstance(pipelines, list) else [pipelines]
        self._num_gpus = len(self._pipes)
        self.batch_size = self._pipes[0].max_batch_size
        assert all(p.max_batch_size == self.batch_size for p in self._pipes), \
            "All pipelines should have the same batch size set"
        self._size = int(size)
        self._auto_reset = _auto_reset_value(auto_reset)
        self._prepare_first_batch = prepare_first_batch
        if fill_last_batch is not None:
            warnings.warn("Please do not use `fill_last_batch` and use `last_batch_policy` instead.",
                          Warning, stacklevel=2)
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
        elif type(last_batch_policy) is not LastBatchPolicy:
            raise ValueError(f"Wrong type for `last_batch_policy`. Expected {LastBatchPolicy}, "
                             f"got {type(last_batch_policy)}")
        self._last_batch_policy = last_batch_policy
        self._last_batch_padded = last_batch_padded
        assert self._size != 0, "Size cannot be 0"
        assert self._size > 0 or (self._size < 0 and (len(self._pipes) == 1 or reader_name)), \
            "Negative size is supported only for a single pipeline"
        assert not reader_name or self._size < 0, "When reader_name is provided, size should not be set"
        assert not reader_name or not last_batch_padded, \
            "When reader_name is provided, last_batch_padded should not be set"
        if self._size < 0 and not reader_name:
            # The pipelines end the epoch: nothing to drop or cut, as in DALI.
            self._last_batch_policy = LastBatchPolicy.FILL
            self._last_batch_padded = False
        if self._size > 0 and not reader_name:
            warnings.warn("Please set `reader_name` and don't set last_batch_padded and size manually whenever "
                          "possible. This may lead, in some situations, to missing some samples or returning "
                          "duplicated ones. Check the Sharding section of the documentation for more details.",
                          Warning, stacklevel=2)
        self._counter = 0
        # PARTIAL throws each epoch's padding away: have the readers leave it out, so the
        # pipelines do no work on it (Sluice's own; the samples returned are the same).
        self._short_last_batches = False
        if reader_name and self._last_batch_policy == LastBatchPolicy.PARTIAL:
            self._short_last_batches = any([p._leave_out_padding(reader_name) for p in self._pipes])
        for p in self._pipes:
            p.build()
        self._reader_name = reader_name
        if reader_name:
            self._read_reader_meta()
        self._ever_scheduled = False
        self._ever_consumed = False
        self._first_batch = None
        self._enable_checkpointing = self._pipes[0]._enable_checkpointing
        if any(p._enable_checkpointing != self._enable_checkpointing for p in self._pipes):
            raise ValueError("All wrapped pipelines must have the same value for `enable_checkpointing`.")
        if self._enable_checkpointing:
            self._restore_from_pipelines()
            # Before the first batch is prepared: the state the user has seen nothing of.
            self._initial_checkpoints = [p._get_checkpoint(iterator_data=self._save_state()) for p in self._pipes]
        if prepare_first_batch:
            try:
                self._first_batch = self._next_batch()
            except StopIteration:
                self._report_no_data_in_pipeline()
            # Preparing the first batch is not consuming it.
            self._ever_consumed = False

    # --- the reader's shards ------------------------------------------------------------

    def _read_reader_meta(self):
        metas = [p.reader_meta(self._reader_name) for p in self._pipes]

        def same(key, what):
            assert all(m[key] == metas[0][key] for m in metas), what

        same("epoch_size", "Reader Operator should have the same size value in all the pipelines.")
        same("number_of_shards", "Reader Operator should have the same `num_shards` argument set in all the pipelines.")
        same("pad_last_batch", "Reader Operator should have the same `pad_last_batch` argument set in all the pipelines.")
        same("stick_to_shard", "Reader Operator should have the same `stick_to_shard` argument set in all the pipelines.")
        m = metas[0]
        n, shards, bs = m["epoch_size"], m["number_of_shards"], self.batch_size
        self._size_no_pad = n
        self._shards_num = shards
        self._last_batch_padded = bool(m["pad_last_batch"])
        self._is_stick_to_shard = bool(m["stick_to_shard"])
        self._shards_id = np.array([mm["shard_id"] for mm in metas], dtype=np.int64)
        if self._last_batch_policy == LastBatchPolicy.DROP:
            self._size = n // shards
        elif self._last_batch_padded:
            self._size = m["epoch_size_padded"] // shards
        else:
            self._size = math.ceil(math.ceil(n / shards) / bs) * bs
        # One entry per shard of the dataset (not per pipeline): FILL without padding reads
        # ahead into the shard a pipeline moves to next, and that is counted here.
        self._counter_per_gpu = np.zeros(shards, dtype=np.int64)
        k = np.arange(shards, dtype=np.int64)
        self._shard_sizes_per_gpu = ((k + 1) * n // shards - k * n // shards).astype(np.int64)
        self._shard_sizes_per_gpu_initial = self._shard_sizes_per_gpu.copy()

    # --- one batch ------------------------------------------------------------------------

    def _next_batch(self):
        """The next batch as `next()` returns it: every pipeline's outputs in the framework's
        types, the samples past the epoch's end cut off (PARTIAL)."""
        outputs = self._get_outputs()
        batch = [self._to_framework(i, out) for i, out in enumerate(outputs)]
        self._schedule_runs()
        self._advance_and_check_drop_last()
        return self._cut_to_epoch(batch)

    def __next__(self):
        self._ever_consumed = True
        if self._first_batch is not None:
            batch, self._first_batch = self._first_batch, None
            return batch
        return self._next_batch()

    def next(self):
        self._ever_consumed = True
        return self.__next__()

    def _to_framework(self, pipeline_index, outputs):
        raise NotImplementedError

    def _first_samples(self, item, n):
        raise NotImplementedError

    def _get_outputs(self):
        if not self._ever_scheduled:
            self._schedule_runs(release_outputs=False)
        if self._size > 0 and self._counter >= self._size:
            self._end_iteration()
        try:
            outputs = [p.share_outputs() for p in self._pipes]
        except StopIteration:
            # A pipeline ended the epoch (an external source ran out). With a known size
            # DALI does not reset here, and neither do we.
            if self._size < 0 and self._auto_reset == "yes":
                self.reset()
            raise
        self._check_batch_size(outputs)
        return outputs

    def _check_batch_size(self, outputs):
        if not self._reader_name and self._size == -1 or self._short_last_batches:
            return
        for outs in outputs:
            for o in outs:
                if len(o) != self.batch_size:
                    raise AssertionError("Variable batch size is not supported by the iterator when reader_name is "
                                         "provided or iterator size is set explicitly")

    def _schedule_runs(self, release_outputs=True):
        self._ever_scheduled = True
        for p in self._pipes:
            if release_outputs:
                p.release_outputs()
            p.schedule_run()

    def _advance_and_check_drop_last(self, dry_run=False, end_iteration=True):
        """Counts the batch just fetched; with DROP, whether it crosses the epoch's end (then
        the epoch ends here, unless `end_iteration` is False)."""
        drop = self._last_batch_policy == LastBatchPolicy.DROP
        if self._reader_name:
            counter = self._counter + self.batch_size
            should_end = drop and bool(np.any(self._counter_per_gpu + counter > self._shard_sizes_per_gpu))
        else:
            counter = self._counter + self._num_gpus * self.batch_size
            should_end = drop and counter > self._size
        if not dry_run:
            self._counter = counter
            if should_end and end_iteration:
                self._end_iteration()
        return should_end

    def _cut_to_epoch(self, batch):
        """PARTIAL: each pipeline's batch cut to the samples of this epoch."""
        if self._last_batch_policy != LastBatchPolicy.PARTIAL:
            return batch
        if self._reader_name:
            left = self.batch_size - (self._counter - self._shard_sizes_per_gpu_initial[self._shards_id])
            if np.any(left < self.batch_size):
                return [self._first_samples(b, int(n)) for b, n in zip(batch, left)]
            return batch
        if self._size > 0 and self._counter > self._size:
            # The first `valid` samples in pipeline order are this epoch's; the pipelines
            # after them are left out of the list (DALI's behaviour without a reader).
            valid = self._num_gpus * self.batch_size - (self._counter - self._size)
            keep = math.ceil(valid / self.batch_size)
            last = valid % self.batch_size or self.batch_size
            return batch[:keep - 1] + [self._first_samples(batch[keep - 1], last)]
        return batch

    def _end_iteration(self):
        if self._auto_reset == "yes":
            self.reset()
        raise StopIteration

    def _report_no_data_in_pipeline(self):
        # A pipeline restored from a checkpoint taken at the end of an epoch has nothing
        # left to give before its reset: not an error.
        if all(not p.is_restored_from_checkpoint or p._first_iter for p in self._pipes):
            raise RuntimeError("It seems that there is no data in the pipeline. This may happen if "
                               "`last_batch_policy` is set to PARTIAL and the requested batch size is greater than "
                               "the shard size.")

    # --- epochs ---------------------------------------------------------------------------

    def reset(self):
        """Starts the next epoch, once this one has ended (before that: a warning, and
        nothing changes)."""
        if self._last_batch_policy == LastBatchPolicy.DROP:
            # `for _ in range(len(it)): next(it)` never reaches the dropped batch: take it
            # out of the pipelines now, so the next epoch starts at its beginning.
            should_end = self._advance_and_check_drop_last(dry_run=True)
            already_ended = self._size > 0 and self._counter >= self._size
            if should_end and not already_ended:
                self._get_outputs()
                self._schedule_runs()
                self._advance_and_check_drop_last(end_iteration=False)
        if not (self._counter >= self._size or self._size < 0):
            logging.warning("DALI iterator does not support resetting while epoch is not finished. Ignoring...")
            return
        fill_unpadded = self._last_batch_policy == LastBatchPolicy.FILL and not self._last_batch_padded
        if fill_unpadded and self._reader_name:
            self._carry_read_ahead()
        elif fill_unpadded:
            self._counter = self._counter % self._size
        else:
            self._counter = 0
        if self._reader_name and not self._is_stick_to_shard:
            self._shards_id = (self._shards_id + 1) % self._shards_num
        if fill_unpadded and self._reader_name:
            self._resize_epoch()
        for p in self._pipes:
            p.reset()
            if p.empty():
                p.schedule_run()

    def _carry_read_ahead(self):
        """FILL without padding, with a reader: how far each shard was read ahead into the
        next epoch is kept, and the next epoch's count starts from the smallest."""
        self._counter -= int(self._counter_per_gpu.min())
        self._counter_per_gpu = self._counter_per_gpu + self._counter - self._shard_sizes_per_gpu
        self._counter = int(self._counter_per_gpu.min())

    def _resize_epoch(self):
        """The next epoch's length after a FILL reset: what the most-behind shard still has
        to read, in whole batches (a whole epoch when it was all read ahead)."""
        bs = self.batch_size
        if not self._is_stick_to_shard:
            self._shard_sizes_per_gpu = np.roll(self._shard_sizes_per_gpu, 1)
        self._size = math.ceil(int((self._shard_sizes_per_gpu - self._counter_per_gpu).max()) / bs) * bs
        if self._size == 0:
            self._counter_per_gpu = np.zeros(self._shards_num, dtype=np.int64)
            self._counter = 0
            self._shard_sizes_per_gpu = np.roll(self._shard_sizes_per_gpu, 1)
            self._size = math.ceil(int(self._shard_sizes_per_gpu.max()) / bs) * bs

    def __iter__(self):
        # A `for` loop over an iterator whose epoch ended starts the next one, auto_reset or not.
        if self._counter != 0 and self._ever_consumed:
            self.reset()
        return self

    @property
    def size(self):
        return self._size

    def __len__(self):
        per_step = self.batch_size if self._reader_name else self._num_gpus * self.batch_size
        if self._last_batch_policy == LastBatchPolicy.DROP:
            return self._size // per_step
        return -(-self._size // per_step)

    # --- checkpoints ----------------------------------------------------------------------

    _CHECKPOINTED = ("_counter", "_counter_per_gpu", "_shard_sizes_per_gpu", "_shards_id", "_size")

    def _save_state(self):
        state = {}
        for k in self._CHECKPOINTED:
            if hasattr(self, k):
                v = getattr(self, k)
                state[k] = v.tolist() if isinstance(v, np.ndarray) else int(v)
        return json.dumps(state)

    def _restore_state(self, data):
        if not data:
            logging.warning("Iterator data was not saved in the checkpoint. This iterator might produce unexpected "
                            "results.")
            return
        try:
            state = json.loads(data)
        except ValueError:
            raise ValueError("Iterator checkpoint data is not a valid JSON string. Please make sure that the "
                             "checkpoint was created with the same version of Sluice.") from None
        for k, v in state.items():
            setattr(self, k, np.array(v, dtype=np.int64) if isinstance(v, list) else v)

    def _restore_from_pipelines(self):
        restored = [p.is_restored_from_checkpoint for p in self._pipes]
        if not any(restored):
            return
        if not all(restored):
            logging.warning("Some, but not all of the pipelines used were restored from checkpoint. This iterator "
                            "might produce unexpected results.")
        data = [p._iterator_data for p, r in zip(self._pipes, restored) if r]
        if any(d != data[0] for d in data):
            logging.warning("The provided pipelines had different iterator data in the checkpoints they were "
                            "restored from. This iterator might produce unexpected results.")
        self._restore_state(data[0])

    def checkpoints(self):
        """One checkpoint per pipeline, holding this iterator's position too: build the
        pipelines with `checkpoint=` them and a new iterator with the same arguments to go
        on from here."""
        if not self._enable_checkpointing:
            raise ValueError("Cannot access checkpoints with checkpointing disabled")
        if not self._ever_consumed:
            return list(self._initial_checkpoints)
        return [p._get_checkpoint(iterator_data=self._save_state()) for p in self._pipes]

    def state_dict(self):
        """torchdata-style state: {"checkpoints": [one per pipeline]}."""
        return {"checkpoints": self.checkpoints()}

    def load_state_dict(self, state):
        """Goes on from `state` (what `state_dict()` gave, here or in another process): each
        pipeline is rebuilt from its checkpoint, and this iterator takes the position saved
        with them, as a new iterator over pipelines built with `checkpoint=` would."""
        cpts = state["checkpoints"]
        if len(cpts) != len(self._pipes):
            raise ValueError(f"the state holds {len(cpts)} checkpoints; this iterator has {len(self._pipes)} pipelines")
        for p, c in zip(self._pipes, cpts):
            p._rebuild_from_checkpoint(c)
        self._first_batch = None
        self._ever_scheduled = False
        self._restore_from_pipelines()
        self._ever_consumed = False
        self._initial_checkpoints = [p._get_checkpoint(iterator_data=self._save_state()) for p in self._pipes]
        if self._prepare_first_batch:
            try:
                self._first_batch = self._next_batch()
            except StopIteration:
                self._report_no_data_in_pipeline()
            self._ever_consumed = False


def _auto_reset_value(auto_reset):
    if auto_reset is False or auto_reset is None or auto_reset == "no":
        return "no"
    if auto_reset is True or auto_reset == "yes":
        return "yes"
    raise ValueError(f"Unsupported value for `auto_reset` {auto_reset}")
