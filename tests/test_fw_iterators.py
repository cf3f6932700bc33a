"""The framework iterators' epoch bookkeeping, ported from DALI's test_fw_iterators.py: how
many batches an epoch has, which samples the last one holds under FILL / DROP / PARTIAL,
auto_reset, prepare_first_batch, sharded readers across epochs, and the errors.

Each case runs through a framework iterator over Sluice's base iterator and, as the
reference, over DALI's (`nvidia.dali.plugin.base_iterator`): a NumPy one (defined here, a
few lines, so the cases run where neither PyTorch nor JAX is installed) and PyTorch's
`DALIGenericIterator` where torch is installed (the GPU machine). DALI's COCO reader gave
the tests unique sample ids; `readers.file(labels=range(N))` gives the same here.
"""

import logging
import math
import os

import numpy as np
import pytest

import sluice
from conftest import dali_or_none

DALI = dali_or_none()
THIS_FILE = os.path.abspath(__file__)


def numpy_iterator(lib):
    """A framework iterator returning NumPy arrays, on `lib`'s base iterator."""
    if lib is sluice:
        from sluice.plugin.base_iterator import _DaliBaseIterator

        class NumpyIterator(_DaliBaseIterator):
            def __init__(self, pipelines, output_map, **kw):
                self.output_map = output_map
                super().__init__(pipelines, **kw)

            def _to_framework(self, i, outputs):
                return {name: np.array(o.as_tensor()) for name, o in zip(self.output_map, outputs)}

            def _first_samples(self, item, n):
                return {k: v[:n] for k, v in item.items()}

        return NumpyIterator

    from nvidia.dali.plugin.base_iterator import LastBatchPolicy, _DaliBaseIterator

    class DaliNumpyIterator(_DaliBaseIterator):
        """DALI's PyTorch iterator's __next__, with NumPy arrays."""

        def __init__(self, pipelines, output_map, **kw):
            self.output_map = output_map
            super().__init__(pipelines, **kw)
            self._first_batch = None
            if self._prepare_first_batch:
                try:
                    self._first_batch = DaliNumpyIterator.__next__(self)
                except StopIteration:
                    self._report_no_data_in_pipeline()
                self._ever_consumed = False

        def __next__(self):
            self._ever_consumed = True
            if self._first_batch is not None:
                b, self._first_batch = self._first_batch, None
                return b
            outs = self._get_outputs()
            batch = [{self.output_map[j]: np.array(o.as_tensor()) for j, o in enumerate(out)} for out in outs]
            self._schedule_runs()
            self._advance_and_check_drop_last()
            if self._reader_name:
                if_drop, left = self._remove_padded()
                if np.any(if_drop):
                    return [{k: v[:n] for k, v in b.items()} for b, n in zip(batch, left)]
            elif self._last_batch_policy == LastBatchPolicy.PARTIAL and self._size > 0 and self._counter > self._size:
                valid = self._num_gpus * self.batch_size - (self._counter - self._size)
                keep = math.ceil(valid / self.batch_size)
                last = valid % self.batch_size or self.batch_size
                return batch[:keep - 1] + [{k: v[:last] for k, v in batch[keep - 1].items()}]
            return batch

    return DaliNumpyIterator


CASES = [pytest.param((sluice, "numpy"), id="sluice-numpy")]
if DALI is not None:
    CASES.append(pytest.param((DALI, "numpy"), id="dali-numpy"))
CASES.append(pytest.param((sluice, "torch"), id="sluice-torch"))
CASES.append(pytest.param((sluice, "jax"), id="sluice-jax"))


def jax_iterator():
    """Sluice's JAX iterator, its batches split per pipeline as the other frameworks return
    them (JAX returns one array over all pipelines); it has no PARTIAL policy."""
    from sluice.plugin.base_iterator import LastBatchPolicy
    from sluice.plugin.jax import DALIGenericIterator

    class JaxListIterator(DALIGenericIterator):
        def __init__(self, pipelines, output_map, **kw):
            if kw.get("last_batch_policy") == LastBatchPolicy.PARTIAL:
                pytest.skip("JAX iterators have no PARTIAL policy")
            super().__init__(pipelines, output_map, **kw)

        def _next_batch(self):
            b = super()._next_batch()
            if len(self._pipes) == 1:
                return [b]
            return [{k: v[i] for k, v in b.items()} for i in range(len(self._pipes))]

    return JaxListIterator


@pytest.fixture(params=CASES)
def fw(request):
    """(lib, make_iterator, to_numpy) for one library and framework."""
    lib, framework = request.param
    if framework == "torch":
        pytest.importorskip("torch")
        from sluice.plugin.pytorch import DALIGenericIterator

        return lib, DALIGenericIterator, lambda t: t.numpy()
    if framework == "jax":
        pytest.importorskip("jax")
        return lib, jax_iterator(), np.asarray
    return lib, numpy_iterator(lib), np.asarray


def _policies(lib):
    if lib is sluice:
        from sluice.plugin.base_iterator import LastBatchPolicy
    else:
        from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    return LastBatchPolicy


# --------------------------------------------------------------------------- helpers as DALI's
class SourceIterator:
    """DALI's TestIterator: `n` batches of [0..9] per epoch; `total` batches at most over all
    epochs (-1: no limit)."""

    def __init__(self, n, batch_size, total=-1):
        self.n, self.batch_size, self.total, self.i = n, batch_size, total, 0

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        if self.i < self.n and self.total != 0:
            self.i += 1
            self.total -= 1
            return [np.arange(10, dtype=np.uint8)] * self.batch_size
        self.i = 0
        raise StopIteration

    @property
    def size(self):
        return self.n * self.batch_size


def source_pipeline(lib, batch_size, source):
    pipe = lib.Pipeline(batch_size=batch_size, num_threads=4, device_id=None, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=source))
    return pipe


def reader_pipelines(lib, batch_size, shards, pipelines, pad=False, stick=False, n=11, shuffle=False):
    """`pipelines` pipelines, shards 0.. of `shards`, of a file reader whose labels are the
    sample indices 0..n-1 (DALI's tests use COCO image ids)."""
    out = []
    for shard in range(pipelines):
        pipe = lib.Pipeline(batch_size=batch_size, num_threads=1, device_id=None, prefetch_queue_depth=1, seed=5)
        with pipe:
            _, labels = lib.fn.readers.file(files=[THIS_FILE] * n, labels=list(range(n)), shard_id=shard,
                                            num_shards=shards, pad_last_batch=pad, stick_to_shard=stick,
                                            random_shuffle=shuffle, name="Reader")
            pipe.set_outputs(labels)
        out.append(pipe)
    return out


# --------------------------------------------------------------------------- stop iteration
def stop_iteration_cases():
    for epochs in (1, 3, 6):
        for iter_num in (1, 2, 9):
            for total in (-1, iter_num - 1, 2 * iter_num - 1):
                if total == 0 or total > epochs * iter_num:
                    continue
                for bs in (1, 10, 100):
                    for auto_reset in (True, False):
                        for infinite in (False, True):
                            yield pytest.param(bs, epochs, iter_num, total, auto_reset, infinite,
                                               id=f"bs{bs}-e{epochs}-n{iter_num}-t{total}-ar{int(auto_reset)}-inf{int(infinite)}")


@pytest.mark.parametrize("bs,epochs,iter_num,total,auto_reset,infinite", list(stop_iteration_cases()))
def test_stop_iteration(fw, bs, epochs, iter_num, total, auto_reset, infinite):
    lib, make, _ = fw
    source = SourceIterator(iter_num, bs, total)
    pipe = source_pipeline(lib, bs, source)
    loader = make([pipe], ["data"], size=-1 if infinite else source.size, auto_reset=auto_reset)
    count = 0
    for _ in range(epochs):
        for _ in loader:
            count += 1
        if not auto_reset:
            loader.reset()
    assert count == (iter_num * epochs if total < 0 else min(total, iter_num * epochs))


def test_stop_iteration_fail_multi(fw):
    lib, make, _ = fw
    pipes = [source_pipeline(lib, 2, SourceIterator(3, 2)) for _ in range(2)]
    with pytest.raises(AssertionError, match="Negative size is supported only for a single pipeline"):
        make(pipes, ["data"], size=-1)


def test_stop_iteration_fail_single(fw):
    lib, make, _ = fw
    with pytest.raises(AssertionError, match="Size cannot be 0"):
        make([source_pipeline(lib, 2, SourceIterator(3, 2))], ["data"], size=0)


# --------------------------------------------------------------------------- the first batch
def test_iterator_wrapper_first_iteration(fw):
    """Preparing the first batch in the constructor does not call a subclass's __next__."""
    lib, make, _ = fw

    class Wrapper(make):
        def __init__(self, *a, **kw):
            self._allow_next = False
            super().__init__(*a, **kw)

        def __next__(self):
            assert self._allow_next, "__next__ called from the constructor"
            return super().__next__()

    pipe = lib.Pipeline(batch_size=16, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(lib.fn.random.uniform(range=(-1, 1), shape=(2, 2, 2), seed=1234))
    with pytest.warns(Warning, match="Please set `reader_name`"):
        it = Wrapper([pipe], ["data"], size=100)
    it._allow_next = True
    for _ in range(3):
        next(it)


def _four_batches(bs=4):
    rng = np.random.default_rng(12)
    return [[rng.integers(0, 255, (2, 3, 4), dtype=np.uint8) for _ in range(bs)] for _ in range(4)]


def _callback(dataset):
    state = {"i": 0}

    def source():
        if state["i"] == len(dataset):
            state["i"] = 0
            raise StopIteration
        state["i"] += 1
        return dataset[state["i"] - 1]

    return source, state


@pytest.mark.parametrize("prepare_first_batch", [True, False])
def test_external_source_autoreset(fw, prepare_first_batch):
    lib, make, to_np = fw
    dataset = _four_batches()
    source, state = _callback(dataset)
    pipe = lib.Pipeline(batch_size=4, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=source))
    it = make([pipe], ["data"], auto_reset=True, prepare_first_batch=prepare_first_batch)
    if not prepare_first_batch:
        assert state["i"] == 0  # nothing ran yet
    counter = 0
    for _ in range(3):
        for j, batch in enumerate(it):
            assert (to_np(batch[0]["data"]) == np.stack(dataset[j])).all()
            counter += 1
    assert counter == 12


@pytest.mark.parametrize("size,ok", [(-1, True), (5, False)])
def test_external_source_variable_size(fw, size, ok):
    """A batch size of 1 from a pipeline of max 1, the epoch's end from the source: with a
    size given, the source's StopIteration does not reset the iterator, so later epochs are
    missing (DALI's `_fail` case: its final count fails)."""
    lib, make, to_np = fw
    rng = np.random.default_rng(3)
    dataset = [[rng.integers(0, 255, (2, 3, 4), dtype=np.uint8)] for _ in range(4)]
    source, _ = _callback(dataset)
    pipe = lib.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=source))
    kw = {} if size < 0 else {"size": size}
    with pytest.warns(Warning) if size > 0 else _nothing():
        it = make([pipe], ["data"], auto_reset=True, **kw)
    counter = 0
    for _ in range(3):
        for j, batch in enumerate(it):
            assert (to_np(batch[0]["data"]) == np.stack(dataset[j])).all()
            counter += 1
    assert (counter == 12) == ok


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --------------------------------------------------------------------------- policies
@pytest.mark.parametrize("auto_reset", ["yes", "no"])
@pytest.mark.parametrize("name", ["FILL", "DROP", "PARTIAL"])
def test_autoreset_iter(fw, auto_reset, name):
    """`for _ in range(len(it)): next(it)` twice, never seeing StopIteration: the epoch
    lengths and last batches of each policy (DROP takes the dropped batch out on reset)."""
    lib, make, to_np = fw
    pipe = lib.Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    with pipe:
        _, labels = lib.fn.readers.file(files=[THIS_FILE] * 11, labels=list(range(11)), stick_to_shard=True,
                                        pad_last_batch=True, name="reader")
        pipe.set_outputs(labels)
    pol = getattr(_policies(lib), name)
    loader = make([pipe], ["data"], reader_name="reader", auto_reset=auto_reset, last_batch_policy=pol)
    assert len(loader) == {"FILL": 6, "DROP": 5, "PARTIAL": 6}[name]
    for _ in range(2):
        it = iter(loader)
        got = []
        for _ in range(len(it)):
            got.append(to_np(next(it)[0]["data"]).ravel().tolist())
        expect = [[2 * i, 2 * i + 1] for i in range(5)] + {"FILL": [[10, 10]], "DROP": [], "PARTIAL": [[10]]}[name]
        assert got == expect


def test_wrong_last_batch_policy_type(fw):
    lib, make, _ = fw
    pipes = reader_pipelines(lib, 2, 1, 1)
    with pytest.raises(ValueError, match="Wrong type for `last_batch_policy`."):
        make(pipes, ["data"], reader_name="Reader", last_batch_policy="FILL")


@pytest.mark.parametrize("value", [0, 1, "True"])
def test_auto_reset_values(fw, value):
    lib, make, _ = fw
    with pytest.raises(ValueError, match="Unsupported value for `auto_reset`"):
        make(reader_pipelines(lib, 2, 1, 1), ["data"], reader_name="Reader", auto_reset=value)


def test_argument_errors(fw):
    lib, make, _ = fw
    pipes = reader_pipelines(lib, 2, 1, 1)
    with pytest.raises(AssertionError, match="When reader_name is provided, size should not be set"):
        make(pipes, ["data"], reader_name="Reader", size=11)
    with pytest.raises(AssertionError, match="When reader_name is provided, last_batch_padded should not be set"):
        make(pipes, ["data"], reader_name="Reader", last_batch_padded=True)
    mixed = [lib.Pipeline(batch_size=bs, num_threads=1, device_id=None) for bs in (2, 3)]
    with pytest.raises(AssertionError, match="All pipelines should have the same batch size set"):
        make(mixed, ["data"], size=10)


def test_no_data_for_drop(fw):
    """DROP with a batch larger than the shard: nothing to return, a clear error."""
    lib, make, _ = fw
    pipes = reader_pipelines(lib, 8, 3, 1)
    with pytest.raises(RuntimeError, match="It seems that there is no data in the pipeline"):
        make(pipes, ["data"], reader_name="Reader", last_batch_policy=_policies(lib).DROP)


def test_reset_mid_epoch_warns_and_is_ignored(fw, caplog):
    lib, make, to_np = fw
    pipes = reader_pipelines(lib, 2, 1, 1)
    it = make(pipes, ["data"], reader_name="Reader")
    first = to_np(next(it)[0]["data"]).ravel().tolist()
    with caplog.at_level(logging.WARNING):
        it.reset()
    assert "does not support resetting while epoch is not finished" in caplog.text
    assert first == [0, 1]
    assert to_np(next(it)[0]["data"]).ravel().tolist() == [2, 3]


# --------------------------------------------------------------------------- last batch, one shard
def _gather(it, to_np):
    ids = []
    for b in it:
        ids.extend(to_np(b[0]["data"]).ravel().tolist())
    return ids


@pytest.mark.parametrize("pad", [False, True])
def test_last_batch_fill(fw, pad):
    """FILL with a size: more samples than the epoch has, each one at least once; the tail is
    the last sample repeated (pad_last_batch) or the next epoch's first ones."""
    lib, make, to_np = fw
    n, bs = 37, 10
    pipes = reader_pipelines(lib, bs, 1, 1, pad=pad, n=n, shuffle=True)
    with pytest.warns(Warning, match="Please set `reader_name`"):
        it = make(pipes, ["data"], size=pipes[0].epoch_size("Reader"))
    ids = _gather(it, to_np)
    assert len(ids) > n and set(ids) == set(range(n))
    remainder = math.ceil(n / bs) * bs - n
    tail = ids[-remainder - 1:]
    assert (len(set(tail)) == 1) == pad
    if pad:  # padded epochs all start afresh: the next one is as long and as complete
        it.reset()
        again = _gather(it, to_np)
        assert len(again) == len(ids) and set(again) == set(range(n))


def test_partial_padded_returns_the_epoch_exactly(fw):
    lib, make, to_np = fw
    n, bs = 37, 10
    pipes = reader_pipelines(lib, bs, 1, 1, pad=True, n=n)
    with pytest.warns(Warning, match="Please set `reader_name`"):
        it = make(pipes, ["data"], size=n, last_batch_policy=_policies(lib).PARTIAL, last_batch_padded=True)
    for _ in range(2):
        ids = _gather(it, to_np)
        assert sorted(ids) == list(range(n))
        it.reset()


# --------------------------------------------------------------------------- sharded readers
def check_epoch_results(epoch_lists, ids, shards, n, bs, pad, stick, policy_name, state):
    """DALI's check_iterator_results: per pipeline, the samples of one epoch."""
    sets = [set(ids_) for ids_ in epoch_lists]
    rounded = math.ceil(math.ceil(n / shards) / bs) * bs

    def shard_size(i):
        return int((i + 1) * n / shards) - int(i * n / shards)

    if pad and len(epoch_lists) == shards:
        assert not set.intersection(*sets)
    if policy_name == "DROP":
        for lst, s, i in zip(epoch_lists, sets, ids):
            assert len(lst) <= shard_size(i) and len(s) <= shard_size(i)
    elif policy_name == "PARTIAL":
        if pad:
            assert len(set.union(*sets)) == sum(len(lst) for lst in epoch_lists)
        for lst, s, i in zip(epoch_lists, sets, ids):
            assert len(lst) == len(s) == shard_size(i)
    else:
        state["sample"] -= min(state["per_shard"])
        state["per_shard"] = [v + state["sample"] for v in state["per_shard"]]
        mod = 0 if stick else state["epoch"]
        for k in range(shards):
            state["per_shard"][k] -= shard_size((k + mod) % shards)
        if pad:
            assert len(set.union(*sets)) == sum(shard_size(i) for i in ids)
        for lst, s, i in zip(epoch_lists, sets, ids):
            assert len(lst) == (rounded if pad else state["sample"])
            if not stick:
                assert (len(lst) == len(s)) if not pad else (len(s) == shard_size(i))
            else:
                assert len(s) == min(shard_size(i), state["sample"])
        state["sample"] = 0 if pad else min(state["per_shard"])
    if not stick:
        ids[:] = [(i + 1) % shards for i in ids]
    state["epoch"] += 1


def reader_name_cases():
    for shards in (3, 5):
        for bs in (3, 7):
            for stick in (False, True):
                for pad in (False, True):
                    for name in ("FILL", "DROP", "PARTIAL"):
                        for pipes in (1, shards):
                            yield pytest.param(shards, pipes, bs, stick, pad, name,
                                               id=f"S{shards}-p{pipes}-bs{bs}-stick{int(stick)}-pad{int(pad)}-{name}")


@pytest.mark.parametrize("shards,pipes,bs,stick,pad,name", list(reader_name_cases()))
def test_pass_reader_name(fw, shards, pipes, bs, stick, pad, name):
    """Sharded readers over 2*S epochs: every epoch has the length len() announced, and the
    samples each pipeline returns are those of its shard, as DALI's checks say."""
    lib, make, to_np = fw
    n = 43
    data = reader_pipelines(lib, bs, shards, pipes, pad=pad, stick=stick, n=n)
    pol = getattr(_policies(lib), name)
    if bs > n // shards and name == "DROP":
        with pytest.raises(RuntimeError, match="It seems that there is no data in the pipeline"):
            make(data, ["data"], reader_name="Reader", last_batch_policy=pol)
        return
    it = make(data, ["data"], reader_name="Reader", last_batch_policy=pol)
    ids = list(range(pipes))
    state = {"sample": 0, "per_shard": [0] * shards, "epoch": 0}
    for _ in range(2 * shards):
        announced = len(it)
        lists = [[] for _ in range(pipes)]
        count = 0
        for batch in iter(it):
            count += 1
            for k in range(pipes):
                lists[k].extend(to_np(batch[k]["data"]).ravel().tolist())
        assert count == announced, f"the iterator reported the length of {announced} but provided {count} iterations"
        it.reset()
        state["sample"] += count * bs if name == "FILL" else 0
        check_epoch_results(lists, ids, shards, n, bs, pad, stick, name, state)


@pytest.mark.skipif(DALI is None, reason="DALI is the reference")
@pytest.mark.parametrize("shards,pipes,bs,stick,pad,name",
                         [c for c in reader_name_cases() if c.values[0] == 3])
def test_reader_name_batches_equal_dali(shards, pipes, bs, stick, pad, name):
    """Batch by batch, epoch after epoch, Sluice's iterator returns what DALI's does."""
    def run(lib):
        data = reader_pipelines(lib, bs, shards, pipes, pad=pad, stick=stick, n=23)
        it = numpy_iterator(lib)(data, ["data"], reader_name="Reader",
                                 last_batch_policy=getattr(_policies(lib), name))
        epochs = []
        for _ in range(2 * shards):
            epochs.append((len(it), [[b[k]["data"].ravel().tolist() for k in range(len(b))] for b in it]))
            it.reset()
        return epochs

    if bs > 23 // shards and name == "DROP":
        return
    assert run(sluice) == run(DALI)


@pytest.mark.skipif(DALI is None, reason="DALI is the reference")
@pytest.mark.parametrize("name", ["FILL", "DROP", "PARTIAL"])
@pytest.mark.parametrize("padded", [False, True])
def test_size_batches_equal_dali(name, padded):
    """Without a reader name (size given), two pipelines: the legacy counting, quirks
    included (PARTIAL may return fewer pipelines' batches than there are pipelines)."""
    def run(lib):
        data = reader_pipelines(lib, 4, 2, 2, pad=padded, n=11)
        with pytest.warns(Warning):
            it = numpy_iterator(lib)(data, ["data"], size=11, last_batch_padded=padded,
                                     last_batch_policy=getattr(_policies(lib), name))
        epochs = []
        for _ in range(3):
            epochs.append((len(it), [[b[k]["data"].ravel().tolist() for k in range(len(b))] for b in it]))
            it.reset()
        return epochs

    assert run(sluice) == run(DALI)


# --------------------------------------------------------------------------- PyTorch only
def test_pytorch_ragged_iterator():
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import DALIRaggedIterator

    samples = [np.arange(k, dtype=np.int32) for k in (3, 1, 4, 0)]
    ids = [np.array([k], np.int64) for k in range(4)]
    pipe = sluice.Pipeline(batch_size=4, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(lambda: samples), sluice.fn.external_source(lambda: ids),
                         sluice.fn.external_source(lambda: samples))
    T = DALIRaggedIterator
    it = T(pipe, ["coo", "ids", "list"], size=8, output_types=[T.SPARSE_COO_TAG, T.DENSE_TAG, T.SPARSE_LIST_TAG])
    b = next(it)[0]
    assert b["coo"].is_sparse and not b["ids"].is_sparse
    assert b["coo"].to_dense().tolist() == [[0, 1, 2, 0], [0, 0, 0, 0], [0, 1, 2, 3]]  # the empty last row: gone
    assert [t.tolist() for t in b["list"]] == [s.tolist() for s in samples]
    assert b["ids"].tolist() == [[0], [1], [2], [3]]
    with pytest.raises(AssertionError, match="Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed"):
        T(pipe, ["a"], size=8, output_types=["sparse"])


def test_pytorch_output_map_must_be_distinct():
    pytest.importorskip("torch")
    from sluice.plugin.pytorch import DALIGenericIterator

    with pytest.raises(AssertionError, match="output_map names should be distinct"):
        DALIGenericIterator(reader_pipelines(sluice, 2, 1, 1), ["a", "a"], reader_name="Reader")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int8", "bool", "int16", "int32", "int64"])
def test_pytorch_feed_ndarray_types(dtype):
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import feed_ndarray

    rng = np.random.default_rng(0)
    arr = (rng.random((2, 3, 4)) * 100).astype(dtype)
    t = sluice.backend.TensorCPU(arr, "HWC")
    out = torch.empty(arr.shape, dtype=getattr(torch, dtype))
    feed_ndarray(t, out)
    assert (out.numpy() == arr).all()


def test_pytorch_feed_ndarray_wrong_type():
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import feed_ndarray

    @sluice.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return sluice.types.Constant(np.array([1], np.float64))

    p = pipe()
    (out,) = p.run()
    with pytest.raises(AssertionError, match="The element type of DALI Tensor/TensorList doesn't match"):
        feed_ndarray(out, torch.zeros((1, 1), dtype=torch.int8))


# --------------------------------------------------------------------------- Sluice's own
def test_partial_leaves_the_padding_out_of_the_pipeline():
    """PARTIAL with a padding reader: the reader leaves the padding out, so the epoch's last
    batch runs on its real samples only (operators without inputs sized to match), and the
    iterator returns what DALI's does; a checkpoint taken mid-way resumes the same batches."""
    sizes = []

    class Spy(numpy_iterator(sluice)):
        def _to_framework(self, i, outputs):
            sizes.append([len(o) for o in outputs])
            return super()._to_framework(i, outputs)

    def make(cpt=None):
        pipe = sluice.Pipeline(batch_size=4, num_threads=1, device_id=None, seed=3, enable_checkpointing=True,
                               checkpoint=cpt)
        with pipe:
            _, labels = sluice.fn.readers.file(files=[THIS_FILE] * 11, labels=list(range(11)), pad_last_batch=True,
                                               random_shuffle=True, initial_fill=5, name="Reader")
            pipe.set_outputs(labels, sluice.fn.random.coin_flip())
        return Spy([pipe], ["label", "flip"], reader_name="Reader",
                   last_batch_policy=sluice.plugin.base_iterator.LastBatchPolicy.PARTIAL)

    it = make()
    epochs = []
    for _ in range(3):
        epochs.append([b[0]["label"].ravel().tolist() for b in it])
        it.reset()
    assert sizes[:3] == [[4, 4], [4, 4], [3, 3]]
    for e in epochs:
        assert [len(b) for b in e] == [4, 4, 3] and sorted(sum(e, [])) == list(range(11))
    # From a checkpoint after the 4th batch (in the second epoch): the same batches follow.
    it = make()
    next(it), next(it), next(it)
    it.reset()
    next(it)
    resumed = make(it.checkpoints()[0])
    rest = [b[0]["label"].ravel().tolist() for b in resumed]
    assert rest == epochs[1][1:]


def test_partial_batch_of_padding_only_keeps_its_sample_shape(fw):
    """Over 3 shards, 11 samples pad to 4 a shard; shard 0 holds 3, so with batch 3 its
    second batch is padding only: PARTIAL returns it empty in its sample shape ([0, 1]
    labels), as DALI does (a training step must still run on it under DDP)."""
    lib, make_it, to_np = fw
    pipe = lib.Pipeline(batch_size=3, num_threads=1, device_id=None, seed=1)
    with pipe:
        _, labels = lib.fn.readers.file(files=[THIS_FILE] * 11, labels=list(range(11)), pad_last_batch=True,
                                        shard_id=0, num_shards=3, stick_to_shard=True, name="Reader")
        pipe.set_outputs(labels)
    it = make_it([pipe], ["label"], reader_name="Reader", last_batch_policy=lib.plugin.base_iterator.LastBatchPolicy.PARTIAL)
    for _ in range(2):
        shapes = [to_np(b[0]["label"]).shape for b in it]
        assert shapes == [(3, 1), (0, 1)]
        it.reset()
