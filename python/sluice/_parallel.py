"""Parallel `external_source` (`parallel=True`): the sources run in `py_num_workers`
worker processes (`py_start_method` "fork" or "spawn"), which write their arrays into
shared memory (no pickling of array data). The engine maps those blocks itself: an
iteration that one task computed is fed in place, without a copy, and its block goes back
to its worker when the last batch over it is dropped; an iteration split over several
workers is gathered into one batch with a copy. Work is handed out ahead of the pipeline
(the source's `prefetch_queue_depth` iterations), to whichever worker is free, so the
workers compute while the pipeline runs.

- Per-sample sources (`batch=False`, a callable taking `SampleInfo`): each iteration's
  samples are split into one contiguous share per worker.
- Batch sources (a callable taking `BatchInfo` or the iteration): one batch per task, at
  least one per worker ahead.
- Iterables and generator functions (batch mode): one worker iterates, in order.

A source that raises gives an error naming the source, the sample and the exception with
its traceback; a worker that dies is reported (its exit code), never waited for forever.
`SLUICE_TRACE_WORKERS=1` prints each worker's busy share when it stops (stderr).
"""

import atexit
import collections
import gc
import itertools
import multiprocessing
import os
import pickle
import queue
import sys
import threading
import time
import traceback
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from . import pickling
from . import types as _types
from .external_source import _host_array

# How long to wait for a worker before checking that every worker is alive.
_POLL_S = 0.5
# Tasks queued on each worker at a time: one running, one ready to start.
_DEPTH = 2
# Where each output's samples start in a block: the engine's alignment for batches.
_ALIGN = 64


class _Slots:
    """A worker's shared-memory blocks, reused once the pipeline gave them back."""

    def __init__(self):
        self.blocks = {}  # slot -> SharedMemory
        self.free = []
        self.next = itertools.count()
        self.retired = []  # names of blocks replaced since the last task (the pipeline unmaps them)

    def take(self, nbytes):
        for i, slot in enumerate(self.free):
            if self.blocks[slot].size >= nbytes:
                return self.free.pop(i)
        if self.free:  # all too small: replace the largest
            slot = max(self.free, key=lambda k: self.blocks[k].size)
            self.free.remove(slot)
            old = self.blocks.pop(slot)
            self.retired.append(old.name)
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
    """Writes `outputs` (per output, a list of samples) into one shared block, each output's
    samples back to back from an aligned start (so the pipeline can use them in place);
    returns the slot, the block's name and, per output, [(offset, shape, dtype)] per sample."""
    arrays = [[_host_array(s) for s in out] for out in outputs]
    nbytes = sum(_ALIGN + sum(a.nbytes for a in out) for out in arrays)
    slot = slots.take(nbytes)
    block = slots.blocks[slot]
    metas, pos = [], 0
    for out in arrays:
        pos = -(-pos // _ALIGN) * _ALIGN
        meta = []
        for a in out:
            np.ndarray(a.shape, a.dtype, buffer=block.buf, offset=pos)[...] = a
            meta.append((pos, a.shape, a.dtype.str))
            pos += a.nbytes
        metas.append(meta)
    return slot, block.name, metas


def _start(procs, start_method):
    """Starts the worker processes. A forked worker inherits the parent's garbage: objects
    whose finalizers wait for the parent's threads (another pipeline's, DALI's) would hang
    it when its collector ran them. So the garbage is collected here, in the parent, and what
    is left is frozen for the fork: the children never collect what they inherit."""
    if start_method != "fork":
        for p in procs:
            p.start()
        return
    gc.collect()
    gc.freeze()
    # A worker registers its shared memory with multiprocessing's resource tracker. Forked
    # while another thread of ours was inside the tracker, it would inherit the tracker's
    # lock held and hang on its first block (seen in the test suite). So the tracker is
    # started here, and the fork happens under its lock, which the child replaces.
    tracker = resource_tracker._resource_tracker
    tracker.ensure_running()
    try:
        with tracker._lock:
            for p in procs:
                p.start()
    finally:
        gc.unfreeze()


def _fresh_tracker_lock():
    """In a forked worker: the tracker lock `_start` held across the fork, new and free."""
    tracker = resource_tracker._resource_tracker
    tracker._lock = type(tracker._lock)()


def _worker(worker_id, sources, tasks, results):
    """A worker process: runs tasks until told to stop. `sources` are the group callbacks
    (pickled for spawn)."""
    if isinstance(sources, bytes):
        sources = pickle.loads(sources)
    else:  # forked (see _start)
        _fresh_tracker_lock()
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
                results.put(("ok", task_id, worker_id, slot, name, metas, slots.retired))
                slots.retired = []
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


def _describe(task):
    _, _, _, mode, args, _ = task
    if mode == "samples":
        return f"samples {args[0][0]}..{args[-1][0]} (idx_in_epoch) of iteration {args[0][2]}"
    if mode == "iterate":
        return "the next batch of its iterable"
    return f"iteration {args[0] if mode == 'batch_info' else args}"


class WorkerPool:
    """The worker processes of one pipeline, serving its parallel sources.

    Tasks are handed out as workers free up, not by a fixed plan: a dispatcher thread here
    collects results and gives the worker that delivered the next waiting task, keeping
    `_DEPTH` tasks queued on each worker so none waits for a round trip. A slow sample (a
    large JPEG) then delays only its own iteration while the other workers go on with the
    next ones. Tasks of iterating sources (a generator's state lives in one worker) are
    pinned to their worker."""

    def __init__(self, groups, num_workers, start_method, pickler=None):
        if num_workers < 1:
            raise RuntimeError(f"py_num_workers must be at least 1 for parallel external sources, got {num_workers}")
        if start_method not in ("fork", "spawn"):
            raise ValueError(f"py_start_method must be 'fork' or 'spawn', got {start_method!r}")
        ctx = multiprocessing.get_context(start_method)
        sources = [g.worker_callable() for g in groups]
        if start_method == "spawn":
            # Sources without an importable name (lambdas, local functions) go by value.
            dumps = getattr(pickler, "dumps", pickle.dumps) if pickler is not None else pickling.dumps
            try:
                sources = dumps(sources)
            except Exception as e:
                raise TypeError(f"py_start_method='spawn' needs the parallel sources to be picklable: {e}") from e
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(num_workers)]
        self.procs = [ctx.Process(target=_worker, args=(i, sources, self.tasks[i], self.results), daemon=True,
                                  name=f"sluice-es-worker-{i}") for i in range(num_workers)]
        _start(self.procs, start_method)
        # Workers unlink their shared memory when told to stop: tell them at exit too.
        atexit.register(self.close)
        self.ids = itertools.count()
        self.lock = threading.Condition()
        self.waiting = collections.deque()  # (task id, pinned worker or None, message), in submission order
        self.sent = [{} for _ in range(num_workers)]  # per worker: task id -> message, sent and not answered, oldest first
        self.started = {}  # task id -> (worker, when it started, message), for the timeout
        timeout = os.environ.get("SLUICE_WORKER_TIMEOUT")
        self.timeout = float(timeout) if timeout else None
        self.done = {}  # task id -> message
        self.discarded = set()  # tasks whose results are freed as they come
        self.failure = None  # why the workers cannot go on (a worker died)
        self.lent = {}  # token (task id) -> message of a chunk the pipeline uses
        self.retired = []  # blocks workers replaced, not yet unmapped by the pipeline
        self.closed = False
        self.collector = threading.Thread(target=self._collect, name="sluice-es-collector", daemon=True)
        self.collector.start()

    def submit(self, group, mode, args, num_outputs, pinned=None):
        """Queues a task; `pinned`: the worker that must run it (None: the first free)."""
        with self.lock:
            task_id = next(self.ids)
            self.waiting.append((task_id, pinned, ("task", task_id, group, mode, args, num_outputs)))
            self._dispatch()
        return task_id

    def _dispatch(self):
        """Sends waiting tasks, oldest first, to workers with room (lock held)."""
        blocked = set()  # workers a pinned task is waiting for: later tasks must not pass it
        kept = collections.deque()
        while self.waiting:
            task = self.waiting.popleft()
            _, pinned, msg = task
            if pinned is not None:
                w = pinned if pinned not in blocked and len(self.sent[pinned]) < _DEPTH else None
                if w is None:
                    blocked.add(pinned)
            else:
                free = [k for k in range(len(self.procs)) if k not in blocked and len(self.sent[k]) < _DEPTH]
                w = min(free, key=lambda k: len(self.sent[k])) if free else None
            if w is None:
                kept.append(task)
                continue
            self.tasks[w].put(msg)
            self.sent[w][msg[1]] = msg
            if len(self.sent[w]) == 1:
                self._started_on(w)
        self.waiting = kept

    def _started_on(self, w):
        """Notes that worker `w` is starting the oldest task sent to it (lock held)."""
        msg = next(iter(self.sent[w].values()), None)
        if msg is not None:
            self.started[msg[1]] = (w, time.monotonic(), msg)

    def _collect(self):
        """The dispatcher thread: files each result and refills the worker that sent it."""
        while not self.closed:
            try:
                msg = self.results.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [(i, p.exitcode) for i, p in enumerate(self.procs) if not p.is_alive()]
                if dead and not self.closed:
                    with self.lock:
                        i, code = dead[0]
                        self.failure = f"the external source worker process {i} died (exit code {code})"
                        self.lock.notify_all()
                    return
                continue
            except (EOFError, OSError, ValueError):  # the queue closed under us: shutting down
                return
            with self.lock:
                w = msg[2]
                del self.sent[w][msg[1]]
                self.started.pop(msg[1], None)
                self._started_on(w)
                if msg[0] == "ok":
                    self.retired.extend(msg[6])
                if msg[1] in self.discarded:
                    self.discarded.remove(msg[1])
                    self.release(msg)
                else:
                    self.done[msg[1]] = msg
                self._dispatch()
                self.lock.notify_all()

    def wait(self, task_id, what):
        """The message of `task_id`; raises if a worker died meanwhile, or ran the task for
        longer than `SLUICE_WORKER_TIMEOUT` seconds (then it is stopped: a source stuck in a
        read must not hang the training run)."""
        with self.lock:
            while task_id not in self.done:
                if self.failure is not None:
                    raise RuntimeError(f"{what}: {self.failure}; the pipeline cannot continue")
                started = self.started.get(task_id)
                if self.timeout is not None and started is not None and time.monotonic() - started[1] > self.timeout:
                    w, _, task = started
                    self.failure = (f"the external source worker process {w} ran {_describe(task)} for more than "
                                    f"{self.timeout:g} s (SLUICE_WORKER_TIMEOUT) and was stopped")
                    self.procs[w].terminate()
                    continue
                self.lock.wait(_POLL_S)
            return self.done.pop(task_id)

    def lend(self, msgs):
        """The shared-memory chunks of an iteration's "ok" messages, for
        `feed_shared`: (block name, token, per output [(offset, shape, type)]). Each block
        stays the pipeline's until its token comes back (`give_back`)."""
        with self.lock:
            for m in msgs:
                self.lent[m[1]] = m
        return [(m[4], m[1], m[5]) for m in msgs]

    def give_back(self, tokens):
        """Returns the blocks of chunks nothing uses any more to their workers."""
        with self.lock:
            msgs = [self.lent.pop(t) for t in tokens]
        for m in msgs:
            self.release(m)

    def take_retired(self):
        """Names of blocks workers replaced since the last call (to unmap here)."""
        with self.lock:
            names, self.retired = self.retired, []
        return names

    def release(self, msg):
        if msg[0] == "ok":
            self.tasks[msg[2]].put(("free", msg[3]))

    def discard(self, task_id):
        """Frees a task's result whenever it comes (an epoch ended before it was used)."""
        with self.lock:
            msg = self.done.pop(task_id, None)
            if msg is None:
                self.discarded.add(task_id)
                return
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
