"""`external_source(parallel=True)`: sources run in worker processes, data comes back
through shared memory. DALI's behaviour (test_external_source_parallel*.py), checked
against DALI 2.4 CPU-only where it runs here, and Sluice's own errors."""

import os
import types as _pytypes

import numpy as np
import pytest

import sluice

from conftest import library_params


LIBS = library_params()
EPOCH = 10  # samples per epoch of the per-sample sources


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    # DALI's forked workers can hang when forked from a process that has run many pipelines
    # (this test session); spawned ones start clean. Sluice's are forked, its default.
    method = "fork" if m is sluice else "spawn"
    pipeline = lambda *a, **kw: m.Pipeline(*a, **dict(kw, py_start_method=method))  # noqa: E731
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=pipeline, pipeline_def=m.pipeline_def)


def sample_source(info):
    """Module level, so spawned workers can import it."""
    if info.idx_in_epoch >= EPOCH:
        raise StopIteration
    return np.full((2, 3), info.idx_in_epoch * 10 + info.epoch_idx, np.int32)


def batch_source(info):
    if info.iteration >= 3:
        raise StopIteration
    return [np.full(4, info.iteration * 100 + info.epoch_idx + k, np.float32) for k in range(2)]


def _epochs(pipe, n):
    out = []
    for _ in range(n):
        epoch = []
        while True:
            try:
                epoch.append([np.array(t).tolist() for t in pipe.run()[0]])
            except StopIteration:
                break
        out.append(epoch)
        pipe.reset()
    return out


@pytest.mark.parametrize("workers", [1, 3])
def test_per_sample_source(lib, workers):
    pipe = lib.Pipeline(4, 1, None, py_num_workers=workers)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(sample_source, batch=False, parallel=True))
    epochs = _epochs(pipe, 2)
    for e, epoch in enumerate(epochs):
        # 10 samples, batch 4: two whole batches; the partial third is dropped, as DALI does
        assert len(epoch) == 2
        flat = [s for b in epoch for s in b]
        assert flat == [np.full((2, 3), i * 10 + e).tolist() for i in range(8)]


def test_batch_source_with_batch_info(lib):
    pipe = lib.Pipeline(2, 1, None, py_num_workers=2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(batch_source, batch=True, batch_info=True, parallel=True,
                                                prefetch_queue_depth=2))
    epochs = _epochs(pipe, 2)
    for e, epoch in enumerate(epochs):
        assert [[s[0] for s in b] for b in epoch] == [[it * 100 + e + k for k in range(2)] for it in range(3)]


def test_iterable_source(lib):
    batches = [[np.full(3, i, np.int16)] * 2 for i in range(4)]
    pipe = lib.Pipeline(2, 1, None, py_num_workers=2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(batches, parallel=True, batch=True))
    got = [[s[0] for s in b] for b in _epochs(pipe, 1)[0]]
    assert got == [[i, i] for i in range(4)]


def test_spawned_workers():
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=2, py_start_method="spawn")
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(sample_source, batch=False, parallel=True))
    assert len(_epochs(pipe, 1)[0]) == 2


def test_matches_serial_source():
    def run(parallel):
        pipe = sluice.Pipeline(3, 2, None, py_num_workers=2, seed=4)
        with pipe:
            x = sluice.fn.external_source(sample_source, batch=False, parallel=parallel)
            pipe.set_outputs(x + sluice.fn.random.uniform(range=[0, 1], shape=[2, 3], dtype=sluice.types.INT32))
        return _epochs(pipe, 2)

    assert run(True) == run(False)


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(source=lambda: 1, parallel=True, batch=False), TypeError, "must accept exactly one argument"),
    (dict(source=[1, 2], parallel=True, batch=False), TypeError, "must be run in a batch mode"),
    (dict(source=sample_source, parallel=True, batch=False, no_copy=False), ValueError, "``no_copy`` cannot be specified to False"),
    (dict(source=sample_source, parallel=True, batch=False, prefetch_queue_depth=0), ValueError, "must be a positive integer"),
])
def test_argument_errors(lib, kwargs, exc, msg):
    with lib.Pipeline(2, 1, None, py_num_workers=1):  # (nothing runs: no workers start)
        with pytest.raises(exc, match=msg.replace("(", r"\(")):
            lib.fn.external_source(**kwargs)


def failing_source(info):
    if info.idx_in_epoch == 5:
        raise ValueError("cannot read sample 5")
    return np.zeros(2, np.uint8)


def test_a_source_that_raises_names_the_sample():
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(failing_source, batch=False, parallel=True))
    pipe.run()
    with pytest.raises(RuntimeError, match="(?s)idx_in_epoch 5.*ValueError: cannot read sample 5"):
        pipe.run()
    assert len(pipe.run()[0]) == 4  # the next iteration runs


def dying_source(info):
    if info.idx_in_epoch == 6:
        os._exit(3)
    return np.zeros(2, np.uint8)


def test_a_worker_that_dies_is_reported_not_waited_for():
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(dying_source, batch=False, parallel=True))
    with pytest.raises(RuntimeError, match="worker process .* died \\(exit code 3\\)"):
        for _ in range(3):
            pipe.run()


class _ParentOnlyFinalizer:
    """Garbage (a reference cycle) whose finalizer kills any process but the one that made
    it, as the finalizer of an object waiting for its process's threads (another pipeline's,
    DALI's) would hang it."""

    def __init__(self):
        self.cycle = self
        self.pid = os.getpid()

    def __del__(self):
        if os.getpid() != self.pid:
            os._exit(7)


def test_forked_workers_never_run_the_parents_finalizers():
    import gc

    # Keep the garbage uncollected until the workers fork, as a busy process may; the
    # children collect as usual.
    os.register_at_fork(after_in_child=gc.enable)
    gc.disable()
    try:
        for _ in range(50):
            _ParentOnlyFinalizer()
        pipe = sluice.Pipeline(4, 1, None, py_num_workers=2, py_start_method="fork", prefetch_queue_depth=1)
        with pipe:
            pipe.set_outputs(sluice.fn.external_source(lambda info: np.zeros(3, np.int32) + info.iteration, batch=False,
                                                       parallel=True))
        pipe.build()
    finally:
        gc.enable()
    for _ in range(3):
        gc.collect()  # in the workers too, as they allocate: they must not inherit the garbage
        assert len(pipe.run()[0]) == 4


def test_no_workers_runs_the_source_here():
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=0)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(sample_source, batch=False, parallel=True))
    assert len(_epochs(pipe, 1)[0]) == 2


def test_a_build_that_fails_stops_the_workers():
    pipe = sluice.Pipeline(2, 1, None, py_num_workers=2)
    with pipe:
        x = sluice.fn.external_source(sample_source, batch=False, parallel=True)
        pipe.set_outputs(x.gpu())  # a GPU output in a CPU-only pipeline: the build fails
    with pytest.raises(sluice.errors.GraphError):
        pipe.build()
    assert pipe._pool is None


def growing_source(info):
    """Samples that grow with the iteration, so workers replace their shared blocks."""
    if info.iteration >= 6:
        raise StopIteration
    side = 64 << info.iteration
    return np.full((side, side), info.idx_in_epoch % 251, np.uint8)


def pair_source(info):
    if info.idx_in_epoch >= EPOCH:
        raise StopIteration
    i = info.idx_in_epoch
    return np.full(3, i, np.int16), np.full((2, 2), -i, np.float32)


@pytest.mark.parametrize("workers", [1, 2])
def test_outputs_held_by_the_user_keep_their_data(workers):
    """One worker's iteration is fed in place: its shared block is lent to the batch and
    must not be written again while any output over it lives, even after the pipeline is
    gone. Several workers' shares are gathered into one batch (a copy)."""
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=workers, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(sample_source, batch=False, parallel=True, prefetch_queue_depth=1))
    held = []
    for _ in range(2):  # two epochs: blocks cycle back to the workers between them
        while True:
            try:
                held.append(pipe.run()[0])
            except StopIteration:
                break
        pipe.reset()
    del pipe
    import gc

    gc.collect()
    got = [np.array(t).ravel()[0] for batch in held for t in batch]
    want = [i * 10 + e for e in range(2) for i in range(8)]  # the third batch reaches index 10: StopIteration
    assert got == want


def test_blocks_replaced_for_larger_samples_stay_correct():
    pipe = sluice.Pipeline(3, 1, None, py_num_workers=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(growing_source, batch=False, parallel=True))
    for epoch in range(2):
        for it in range(6):
            (out,) = pipe.run()
            side = 64 << it
            for k in range(3):
                a = np.array(out[k])
                assert a.shape == (side, side)
                assert (a == (it * 3 + k) % 251).all()
        with pytest.raises(StopIteration):
            pipe.run()
        pipe.reset()


@pytest.mark.parametrize("workers", [1, 2])
def test_multiple_outputs_in_place_and_one_pruned(workers):
    pipe = sluice.Pipeline(5, 1, None, py_num_workers=workers)
    with pipe:
        a, b = sluice.fn.external_source(pair_source, num_outputs=2, batch=False, parallel=True)
        pipe.set_outputs(a, b * 2)
    a, b = pipe.run()
    assert [np.array(t).tolist() for t in a] == [[i] * 3 for i in range(5)]
    assert [np.array(t).tolist() for t in b] == [[[-2.0 * i] * 2] * 2 for i in range(5)]
    pipe2 = sluice.Pipeline(5, 1, None, py_num_workers=workers)
    with pipe2:
        a, _ = sluice.fn.external_source(pair_source, num_outputs=2, batch=False, parallel=True)
        pipe2.set_outputs(a + 1)
    for it in range(2):
        (a,) = pipe2.run()
        assert [np.array(t).tolist() for t in a] == [[it * 5 + i + 1] * 3 for i in range(5)]


def stuck_source(info):
    if info.idx_in_epoch == 5:
        import time

        time.sleep(3600)  # a read that never returns
    return np.zeros(2, np.uint8)


def test_a_worker_stuck_past_the_timeout_is_stopped_and_reported(monkeypatch):
    monkeypatch.setenv("SLUICE_WORKER_TIMEOUT", "1")
    pipe = sluice.Pipeline(4, 1, None, py_num_workers=2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(stuck_source, batch=False, parallel=True))
    pipe.run()
    import time

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker process \d ran samples 4\.\.5 \(idx_in_epoch\) of iteration 1 "
                                           r"for more than 1 s \(SLUICE_WORKER_TIMEOUT\)"):
        pipe.run()
    assert time.monotonic() - t0 < 30
    with pytest.raises(RuntimeError, match="cannot continue"):
        pipe.run()
