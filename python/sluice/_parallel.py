"""Parallel `external_source` (`parallel=True`): the sources run in `py_num_workers`
worker processes (`py_start_method` "fork" or "spawn"), which write their arrays into
shared memory; the pipeline's process reads them there and feeds them (one copy, no
pickling of array data). Work is handed out ahead of the pipeline (the source's
`prefetch_queue_depth` iterations), so the workers compute while the pipeline runs.

- Per-sample sources (`batch=False`, a callable taking `SampleInfo`): each iteration's
  samples are split into one contiguous share per worker.
- Batch sources (a callable taking `BatchInfo` or the iteration): one batch per task, the
  iterations spread over the workers.
- Iterables and generator functions (batch mode): one worker iterates, in order.

A source that raises gives an error naming the source, the sample and the exception with
its traceback; a worker that dies is reported (its exit code), never waited for forever.
`SLUICE_TRACE_WORKERS=1` prints each worker's busy share when it stops (stderr).
"""

import atexit
import ctypes
import itertools
import multiprocessing
import os
import pickle
import queue
import sys
import time
import threading
import traceback
from multiprocessing import shared_memory

import numpy as np

from . import types as _types
from .external_source import _host_array

# How long to wait for a worker before checking that every worker is alive.
_POLL_S = 0.5


class _Slots:
    """A worker's shared-memory blocks, reused once the pipeline's process read them."""

    def __init__(self):
        self.blocks = {}  # slot -> SharedMemory
        self.free = []
        self.next = itertools.count()

    def take(self, nbytes):
        for i, slot in enumerate(self.free):
            if self.blocks[slot].size >= nbytes:
                return self.free.pop(i)
        if self.free:  # all too small: replace the largest
            slot = max(self.free, key=lambda k: self.blocks[k].size)
            self.free.remove(slot)
            old = self.blocks.pop(slot)
            old.close()
            old.unlink()
        else:
            slot = next(self.next)
        # A quarter more, in whole MiB: batches vary in size, and a new block costs page
        # faults on first touch (a reused one does not).
        size = -(-(nbytes + nbytes // 4) // (1 << 20)) * (1 << 20)
        self.blocks[slot] = shared_memory.SharedMemory(create=True, size=size)
        return slot

    def close(self):
        for b in self.blocks.values():
            b.close()
            try:
                b.unlink()
            except FileNotFoundError:
                pass


def _write(slots, outputs):
    """Writes `outputs` (per output, a list of samples) into one shared block; returns the
    slot, the block's name and, per output, [(offset, shape, dtype)] per sample."""
    arrays = [[_host_array(s) for s in out] for out in outputs]
    nbytes = sum(a.nbytes + 64 for out in arrays for a in out)
    slot = slots.take(nbytes)
    block = slots.blocks[slot]
    metas, pos = [], 0
    for out in arrays:
        meta = []
        for a in out:
            pos = (pos + 63) // 64 * 64
            np.ndarray(a.shape, a.dtype, buffer=block.buf, offset=pos)[...] = a
            meta.append((pos, a.shape, a.dtype.str))
            pos += a.nbytes
        metas.append(meta)
    return slot, block.name, metas


def _worker(worker_id, sources, tasks, results):
    """A worker process: runs tasks until told to stop. `sources` are the group callbacks
    (pickled for spawn)."""
    if isinstance(sources, bytes):
        sources = pickle.loads(sources)
    slots = _Slots()
    iterators = {}
    trace = os.environ.get("SLUICE_TRACE_WORKERS", "0") != "0"
    started, busy, source_s, tasks_done = time.perf_counter(), 0.0, 0.0, 0
    try:
        while True:
            msg = tasks.get()
            if msg[0] == "stop":
                if trace:
                    wall = time.perf_counter() - started
                    print(f"[sluice worker {worker_id}] {tasks_done} tasks, busy {busy / wall:.0%} of {wall:.1f} s "
                          f"(source {source_s / wall:.0%})", file=sys.stderr, flush=True)
                return
            if msg[0] == "free":
                slots.free.append(msg[1])
                continue
            _, task_id, group, mode, args, num_outputs = msg
            t0 = time.perf_counter()
            cb = sources[group]
            where = "the batch"
            try:
                if mode == "samples":
                    per_sample = []
                    for a in args:
                        where = f"sample {a[1]} (idx_in_epoch {a[0]})"
                        per_sample.append(cb(_types.SampleInfo(*a)))
                    where = "the batch"
                    outs = [per_sample] if num_outputs is None else [[s[k] for s in per_sample] for k in range(num_outputs)]
                else:
                    if mode == "iterate":
                        it = iterators.get(group)
                        if it is None or args == "restart":
                            it = iterators[group] = cb()
                        data = next(it)
                    elif mode == "batch_info":
                        data = cb(_types.BatchInfo(*args))
                    else:
                        data = cb(args)
                    outs = [data] if num_outputs is None else list(data)
                    if num_outputs is not None and len(outs) != num_outputs:
                        raise TypeError(f"the source must return {num_outputs} batches (num_outputs), got {len(outs)}")
                t1 = time.perf_counter()
                slot, name, metas = _write(slots, outs)
                results.put(("ok", task_id, worker_id, slot, name, metas))
                source_s += t1 - t0
            except StopIteration:
                results.put(("end", task_id, worker_id))
            except BaseException as e:  # noqa: BLE001 - reported to the pipeline's process
                text = "".join(traceback.format_exception(e)).rstrip()
                results.put(("error", task_id, worker_id, f"{where}: {text}"))
            busy += time.perf_counter() - t0
            tasks_done += 1
    finally:
        slots.close()


def _attach(name):
    """Opens a worker's block without handing it to this process's resource tracker (the
    worker owns it: a tracker here would unlink it, and warn, when this process exits)."""
    try:
        return shared_memory.SharedMemory(name=name, track=False)  # Python >= 3.13
    except TypeError:
        block = shared_memory.SharedMemory(name=name)
        try:
            from multiprocessing import resource_tracker

            resource_tracker.unregister(block._name, "shared_memory")
        except Exception:
            pass
        return block


class WorkerPool:
    """The worker processes of one pipeline, serving its parallel sources."""

    def __init__(self, groups, num_workers, start_method, pickler=None):
        if num_workers < 1:
            raise RuntimeError(f"py_num_workers must be at least 1 for parallel external sources, got {num_workers}")
        if start_method not in ("fork", "spawn"):
            raise ValueError(f"py_start_method must be 'fork' or 'spawn', got {start_method!r}")
        ctx = multiprocessing.get_context(start_method)
        sources = [g.worker_callable() for g in groups]
        if start_method == "spawn":
            dumps = getattr(pickler, "dumps", pickle.dumps) if pickler is not None else pickle.dumps
            try:
                sources = dumps(sources)
            except Exception as e:
                raise TypeError(f"py_start_method='spawn' needs the parallel sources to be picklable: {e}") from e
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(num_workers)]
        self.procs = [ctx.Process(target=_worker, args=(i, sources, self.tasks[i], self.results), daemon=True,
                                  name=f"sluice-es-worker-{i}") for i in range(num_workers)]
        for p in self.procs:
            p.start()
        # Workers unlink their shared memory when told to stop: tell them at exit too.
        atexit.register(self.close)
        self.ids = itertools.count()
        self.done = {}  # task id -> message
        self.blocks = {}  # (worker, shm name) -> SharedMemory attached here
        self.closed = False

    def submit(self, worker, group, mode, args, num_outputs):
        task_id = next(self.ids)
        self.tasks[worker].put(("task", task_id, group, mode, args, num_outputs))
        return task_id

    def wait(self, task_id, what):
        """The message of `task_id`; raises if a worker died meanwhile."""
        while task_id not in self.done:
            try:
                msg = self.results.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [(i, p.exitcode) for i, p in enumerate(self.procs) if not p.is_alive()]
                if dead:
                    i, code = dead[0]
                    raise RuntimeError(f"{what}: the external source worker process {i} died (exit code {code}); "
                                       "the pipeline cannot continue")
                continue
            self.done[msg[1]] = msg
        return self.done.pop(task_id)

    def read(self, msg):
        """The samples of an "ok" message, per output: (address, shape, type string) in
        shared memory, valid until `release`."""
        _, _, worker, slot, name, metas = msg
        key = (worker, name)
        if key not in self.blocks:
            block = _attach(name)
            self.blocks[key] = (block, ctypes.addressof(ctypes.c_char.from_buffer(block.buf)))
        base = self.blocks[key][1]
        return [[(base + off, shape, dt) for off, shape, dt in meta] for meta in metas]

    def release(self, msg):
        if msg[0] == "ok":
            self.tasks[msg[2]].put(("free", msg[3]))

    def discard(self, task_id):
        """Frees a task's result whenever it comes (an epoch ended before it was used)."""
        msg = self.wait(task_id, "discarding")
        self.release(msg)

    def close(self):
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        for t in self.tasks:
            try:
                t.put(("stop",))
            except Exception:
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self.blocks.clear()  # (the mappings go with the blocks: closing them while a
        # ctypes view exists would fail, and the process is done with them)
