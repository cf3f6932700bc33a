"""`fn.external_source` / `ops.ExternalSource`, `Pipeline.feed_input` and `run(**inputs)`:
DALI's own cases (dali/test/python/test_external_source_impl.py, test_external_source_dali.py,
test_pipeline.py, test_pipeline_inputs.py), each run against Sluice and against DALI 2.4
(CPU-only) with the same assertions, so the behaviour checked is DALI's."""

import functools
import types as _pytypes
import warnings

import numpy as np
import pytest

import sluice

from conftest import library_params



def _lib(mod):
    return _pytypes.SimpleNamespace(name=mod.__name__, fn=mod.fn, ops=mod.ops, types=mod.types, Pipeline=mod.Pipeline,
                                    pipeline_def=mod.pipeline_def)


LIBS = [pytest.param(_lib(p.values[0]), id=p.id) for p in library_params()]


@pytest.fixture(params=LIBS)
def lib(request):
    return request.param


def _pipe(lib, batch_size, **kw):
    kw.setdefault("num_threads", 1)
    return lib.Pipeline(batch_size, device_id=None, **kw)


def run_to_end(pipe, max_runs=100):
    """Every batch until StopIteration, as lists of NumPy arrays per output."""
    out = []
    for _ in range(max_runs):
        try:
            res = pipe.run()
        except StopIteration:
            return out
        out.append([[np.array(t) for t in r] for r in res])
    raise AssertionError("no StopIteration")


class RandomBatches:
    """DALI's TestIterator: n random float64 batches (shapes random per sample), the same
    for every pass (re-iterable)."""

    def __init__(self, n, batch_size, dims=(2,), as_tensor=False):
        self.n, self.batch_size, self.dims, self.as_tensor = n, batch_size, dims, as_tensor

    def __iter__(self):
        for i in range(self.n):
            rng = np.random.default_rng(12345 * i + 4321)

            def gen(dim):
                if self.as_tensor:
                    return rng.random([self.batch_size] + rng.integers(1, 10, dim).tolist())
                return [rng.random(rng.integers(1, 10, dim).tolist()) for _ in range(self.batch_size)]

            batch = [gen(d) for d in self.dims]
            yield batch if len(self.dims) > 1 else batch[0]

    def __len__(self):
        return self.n


def _samples(b):
    return list(b) if isinstance(b, list) else [b[i] for i in range(b.shape[0])]


def _equal_batches(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# --------------------------------------------------------------------------- sources
@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("batch", [True, False])
def test_callback(lib, batch, as_tensor):
    data = RandomBatches(5, 4, as_tensor=as_tensor)
    it = iter(data)
    if batch:
        src = lambda: next(it)  # noqa: E731
    else:
        samples = (s for b in RandomBatches(5, 4, as_tensor=as_tensor) for s in _samples(b))
        src = lambda: next(samples)  # noqa: E731
    pipe = _pipe(lib, 4)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(src, batch=batch))
    out = run_to_end(pipe)
    assert len(out) == 5
    for (o,), b in zip(out, data):
        _equal_batches(o, _samples(b))


@pytest.mark.parametrize("batch", [True, False])
def test_callback_split(lib, batch):
    data = RandomBatches(5, 3, dims=(2, 3))
    if batch:
        it = iter(data)
        src = lambda: next(it)  # noqa: E731
    else:
        samples = (tuple(x) for b in data for x in zip(*b))
        src = lambda: next(samples)  # noqa: E731
    pipe = _pipe(lib, 3)
    with pipe:
        a, b = lib.fn.external_source(src, num_outputs=2, batch=batch)
        pipe.set_outputs(a, b)
    out = run_to_end(pipe)
    assert len(out) == 5
    for (oa, ob), (ra, rb) in zip(out, data):
        _equal_batches(oa, ra)
        _equal_batches(ob, rb)


def test_iterable_split(lib):
    data = RandomBatches(4, 2, dims=(4, 2, 3))
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(*lib.fn.external_source(data, num_outputs=3))
    out = run_to_end(pipe)
    assert len(out) == 4
    for got, want in zip(out, data):
        for g, w in zip(got, want):
            _equal_batches(g, w)


def test_collection(lib):
    batches = [[np.array([1.5, 2.5], dtype=np.float32)], [np.array([-1, 3.5, 4.5], dtype=np.float32)]]
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(batches))
    out = run_to_end(pipe)
    assert [o[0][0].tolist() for o in out] == [[1.5, 2.5], [-1, 3.5, 4.5]]


def test_iterate_ndarray(lib):
    data = np.array([1, 2, 3, 4], dtype=np.float32)
    pipe = _pipe(lib, 4)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(data, batch=False))
    out = run_to_end(pipe)
    assert len(out) == 1 and [x.item() for x in out[0][0]] == [1, 2, 3, 4]
    assert all(x.shape == () for x in out[0][0])


def test_ndarray_source_is_batches_of_rows(lib):
    """A 2-D array as source: each row is a batch, each element a scalar sample."""
    data = np.arange(24, dtype=np.int16).reshape(3, 8)
    pipe = _pipe(lib, 8)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(data))
    out = run_to_end(pipe)
    assert len(out) == 3
    for (o,), row in zip(out, data):
        assert [x.item() for x in o] == row.tolist() and o[0].dtype == np.int16


def test_collection_cycling(lib):
    batches = [[np.array([1.5], dtype=np.float32)], [np.array([-1.0], dtype=np.float32)]]
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(batches, cycle=True))
    got = [pipe.run()[0].as_array()[0][0] for _ in range(6)]
    assert got == [1.5, -1, 1.5, -1, 1.5, -1]


def _gen_function():
    yield [np.array([1.5], dtype=np.float32)]
    yield [np.array([-1.0], dtype=np.float32)]


@pytest.mark.parametrize("kind", ["list", "genfunc"])
def test_collection_cycling_raise(lib, kind):
    source = [[np.array([1.5], dtype=np.float32)], [np.array([-1.0], dtype=np.float32)]] if kind == "list" else _gen_function
    pipe = _pipe(lib, 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source, cycle="raise"))
    for _ in range(3):
        assert [o[0][0].item() for o in run_to_end(pipe)] == [1.5, -1]
        pipe.reset()


def test_cycle_kinds(lib):
    """The table of DALI's behaviour per source kind and `cycle` (reset after each end)."""
    def seq(source, cycle, runs=8):
        pipe = _pipe(lib, 1)
        with pipe:
            pipe.set_outputs(lib.fn.external_source(source, cycle=cycle))
        got = []
        for _ in range(runs):
            try:
                got.append(int(pipe.run()[0].as_array()[0]))
            except StopIteration:
                got.append("S")
                pipe.reset()
        return got

    batches = [[np.array(i, dtype=np.int32)] for i in range(3)]

    def gen():
        for b in batches:
            yield b

    assert seq(batches, None) == [0, 1, 2, "S", "S", "S", "S", "S"]
    assert seq(gen, None) == [0, 1, 2, "S", "S", "S", "S", "S"]
    assert seq(batches, True) == [0, 1, 2, 0, 1, 2, 0, 1]
    assert seq(gen, "quiet") == [0, 1, 2, 0, 1, 2, 0, 1]
    assert seq(batches, "raise") == [0, 1, 2, "S", 0, 1, 2, "S"]
    assert seq(iter(batches), True) == [0, 1, 2, "S", "S", "S", "S", "S"]


def test_with_iteration_argument(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(lambda i: [np.array([i, i * 2], np.int32)] * 2))
    for i in range(10):
        assert pipe.run()[0].as_array()[1].tolist() == [i, 2 * i]


def test_sample_info(lib):
    bs = 3

    def src(info):
        assert info.idx_in_epoch == bs * info.iteration + info.idx_in_batch
        return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int64)

    pipe = _pipe(lib, bs)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(src, batch=False))
    for it in range(10):
        assert pipe.run()[0].as_array().tolist() == [[bs * it + i, i, it, 0] for i in range(bs)]


def test_generator_object(lib):
    def gen():
        for i in range(5):
            yield [np.full((2, 2), i, np.uint8)]

    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(gen()))
    assert [o[0][0][0, 0] for o in run_to_end(pipe)] == [0, 1, 2, 3, 4]


def test_gen_function_partial_cycle(lib):
    def gen(scale):
        for i in range(2):
            yield [np.array([i * scale], np.float32)]

    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(functools.partial(gen, 1.5), cycle=True))
    assert [pipe.run()[0].as_array()[0][0] for _ in range(5)] == [0, 1.5, 0, 1.5, 0]


def test_generator_cycle_error(lib):
    def gen():
        yield [np.zeros(1)]

    with _pipe(lib, 1):
        lib.fn.external_source(gen(), cycle=False)
        with pytest.raises(TypeError, match="Cannot cycle through a generator"):
            lib.fn.external_source(gen(), cycle=True)


def test_epoch_idx(lib):
    """BatchInfo / SampleInfo over 3 epochs of 4 iterations, reset between them."""
    bs, iters = 2, 4
    log = []

    def batch_cb(info):
        if info.iteration >= iters:
            raise StopIteration
        log.append((info.iteration, info.epoch_idx))
        return [np.array([info.iteration], np.int32)] * bs

    pipe = _pipe(lib, bs)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(batch_cb, batch_info=True))
    for epoch in range(3):
        assert [o[0][0][0] for o in run_to_end(pipe)] == list(range(iters))
        pipe.reset()
    assert log == [(i, e) for e in range(3) for i in range(iters)]


def test_batch_info_default_is_an_int(lib):
    seen = []
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(lambda x: seen.append(x) or [np.zeros(1)]))
    pipe.run()
    assert isinstance(seen[0], int)


def test_prefetch_calls(lib):
    """The first run calls the source prefetch_queue_depth times, later runs once; a
    source with K batches gives K runs, then StopIteration."""
    calls = []

    def cb(i):
        calls.append(i)
        if i >= 3:
            raise StopIteration
        return [np.array([i], np.int32)]

    pipe = _pipe(lib, 1, prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(cb))
    assert calls == []
    assert pipe.run()[0].as_array()[0][0] == 0 and calls == [0, 1]
    assert pipe.run()[0].as_array()[0][0] == 1 and calls == [0, 1, 2]
    assert pipe.run()[0].as_array()[0][0] == 2 and calls == [0, 1, 2, 3]
    with pytest.raises(StopIteration):
        pipe.run()
    assert calls == [0, 1, 2, 3]
    pipe.reset()
    assert pipe.run()[0].as_array()[0][0] == 0 and calls[-2:] == [0, 1]


def test_variable_batch_size(lib):
    sizes = [1, 3, 2]
    it = iter(sizes)
    pipe = _pipe(lib, 3)
    with pipe:
        x = lib.fn.external_source(lambda: [np.zeros(2, np.float32)] * next(it))
        pipe.set_outputs(x, lib.fn.random.uniform(range=[0, 1]))
    for n in sizes:
        a, u = pipe.run()
        assert len(a) == n and len(u) == n


def test_partially_utilized_warning(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        a, b, c = lib.fn.external_source(lambda: ([np.zeros(1)] * 2,) * 3, num_outputs=3)
        pipe.set_outputs(b)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pipe.build()
    assert any("produces 3 outputs, but the outputs at the indices 0, 2 are not used" in str(x.message) for x in w)
    assert len(pipe.run()[0]) == 2


def test_non_utilized_source_is_never_called(lib):
    called = []
    pipe = _pipe(lib, 2)
    with pipe:
        lib.fn.external_source(lambda: called.append(1))
        pipe.set_outputs(lib.fn.random.uniform(range=[0, 1]))
    pipe.run()
    pipe.run()
    assert called == []


def test_decorated_source_arg_count(lib):
    def wrap(f):
        @functools.wraps(f)
        def g(*args, **kwargs):
            return f(*args, **kwargs)
        return g

    @wrap
    def with_info(info):
        return np.array([info.idx_in_batch], np.int32)

    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(with_info, batch=False))
    assert pipe.run()[0].as_array().tolist() == [[0], [1]]


@pytest.mark.parametrize("src,msg", [
    (lambda *a: None, "var-positional argument `*a`"),
    (lambda x, *a: None, "var-positional argument `*a`"),
    (lambda **k: None, "var-keyword argument `**k`"),
    (lambda x, **k: None, "var-keyword argument `**k`"),
    (lambda x, *, y: None, "keyword-only argument `y`"),
    (lambda x, y: None, "more than one positional argument"),
])
def test_disallowed_signatures(lib, src, msg):
    with _pipe(lib, 1):
        with pytest.raises(TypeError, match="0 or 1 positional arguments") as e:
            lib.fn.external_source(src)
    assert msg in str(e.value)


@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(source=lambda: None, cycle=False), ValueError, "`cycle` can only be specified if `source` is iterable"),
    (dict(cycle="yes", source=[1]), ValueError, "Invalid value 'yes' for the argument `cycle`"),
    (dict(source=5), TypeError, "must be callable, iterable or a parameterless generator function"),
    (dict(num_outputs=2), ValueError, "``num_outputs`` is only valid when using ``source``"),
    (dict(source=[1], prefetch_queue_depth=2), ValueError, "valid only for parallel external sources"),
    (dict(source=[1], bytes_per_sample_hint=2), ValueError, "valid only for parallel external sources"),
])
def test_argument_errors(lib, kwargs, exc, msg):
    with _pipe(lib, 1):
        with pytest.raises(exc, match=msg.replace("(", r"\(").replace("*", r"\*")):
            lib.fn.external_source(**kwargs)


# --------------------------------------------------------------------------- feed_input
@pytest.mark.parametrize("use_fn", [True, False])
@pytest.mark.parametrize("by_name", [True, False])
def test_iter_setup(lib, use_fn, by_name):
    data1, data2 = RandomBatches(5, 4, dims=(2,)), RandomBatches(5, 4, dims=(3,))

    class P(lib.Pipeline):
        def __init__(self):
            super().__init__(4, 1, None)
            self.it1, self.it2 = iter(data1), iter(data2)

        def define_graph(self):
            if use_fn:
                self.a = lib.fn.external_source(name="src1")
                self.b = lib.fn.external_source(name="src2")
            else:
                self.a = lib.ops.ExternalSource()(name="src1")
                self.b = lib.ops.ExternalSource()(name="src2")
            return self.a, self.b

        def iter_setup(self):
            a, b = next(self.it1), next(self.it2)
            self.feed_input("src1" if by_name else self.a, a)
            self.feed_input("src2" if by_name else self.b, b)

    pipe = P()
    out = run_to_end(pipe)
    assert len(out) == 5
    for (oa, ob), ra, rb in zip(out, data1, data2):
        _equal_batches(oa, ra)
        _equal_batches(ob, rb)


def test_iter_setup_stop_and_reset(lib):
    class P(lib.Pipeline):
        def __init__(self):
            super().__init__(1, 1, None)
            self.n = 0

        def define_graph(self):
            self.x = lib.ops.ExternalSource()()
            return self.x

        def iter_setup(self):
            if self.n >= 5:
                self.n = 0
                raise StopIteration
            self.feed_input(self.x, [np.array([self.n], np.int32)])
            self.n += 1

    pipe = P()
    for _ in range(2):
        assert [o[0][0][0] for o in run_to_end(pipe)] == [0, 1, 2, 3, 4]
        pipe.reset()


def test_feed_queue(lib):
    for depth in (1, 2):
        pipe = _pipe(lib, 1, prefetch_queue_depth=depth)
        with pipe:
            pipe.set_outputs(lib.fn.external_source(name="x"))
        for i in range(3):
            pipe.feed_input("x", [np.array([i], np.uint8)])
        assert [pipe.run()[0].as_array()[0][0] for _ in range(3)] == [0, 1, 2]


NUMPY_TYPES = [np.bool_, np.int_, np.intc, np.intp, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
               np.uint32, np.uint64, np.float16, np.float32, np.float64, np.short, np.longlong, np.ushort, np.ulonglong]


def test_python_formats(lib):
    """Every NumPy type keeps its size and byte order (DALI's test: a pipeline per type,
    fed from iter_setup; a 2-D array is a batch of its rows)."""
    for t in NUMPY_TYPES:
        data = np.arange(4).reshape(2, 2).astype(t)

        class P(lib.Pipeline):
            def define_graph(self):
                self.data = lib.ops.ExternalSource()()
                return self.data

            def iter_setup(self):
                self.feed_input(self.data, data)

        out = P(2, 1, None).run()[0].as_array()
        assert out.dtype.itemsize == np.dtype(t).itemsize and out.dtype.str == np.dtype(t).str
        np.testing.assert_array_equal(out, data)


def test_feed_a_pipeline_output(lib):
    """A batch from one pipeline fed to another (DALI's test_feed_input): layout kept."""
    data = [[np.random.default_rng(i).random((i + 1, 2), dtype=np.float32) for i in range(3)]]
    src = _pipe(lib, 3)
    with src:
        src.set_outputs(lib.fn.external_source(data, cycle=True, layout="XY"))
    dst = _pipe(lib, 3, exec_async=False, exec_pipelined=False)
    with dst:
        dst.set_outputs(lib.fn.external_source(name="ext"))
    batch = src.run()[0]
    dst.feed_input("ext", batch)
    (out,) = dst.run()
    assert out.layout() == "XY"
    for g, w in zip(out, data[0]):
        np.testing.assert_array_equal(np.array(g), w)


@pytest.mark.parametrize("as_tensors", [False, True])
def test_callback_layout_overrides(lib, as_tensors):
    data = [[np.ones((2, 3), np.float32) * i for i in range(2)]]
    src = _pipe(lib, 2)
    with src:
        src.set_outputs(lib.fn.external_source(data, cycle=True, layout="XY"))
    batch = src.run()[0]
    given = [batch[i] for i in range(len(batch))] if as_tensors else batch
    dst = _pipe(lib, 2)
    with dst:
        dst.set_outputs(lib.fn.external_source(lambda: given, layout="AB"))
    assert dst.run()[0].layout() == "AB"


def test_fail_missing_output(lib):
    pipe = _pipe(lib, 1)
    with pipe:
        used = lib.fn.external_source(name="used")
        lib.fn.external_source(name="unused")
        pipe.set_outputs(used)
    with pytest.raises(KeyError, match="Could not find an input operator with name"):
        pipe.feed_input("unused", [np.zeros(1)])


def test_feed_input_on_a_source(lib):
    pipe = _pipe(lib, 8)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=np.zeros((8, 8)), name="input"))
    with pytest.raises(RuntimeError, match="Cannot use `feed_input` on the external source 'input' with a `source`"):
        pipe.feed_input("input", np.zeros((8, 8)))


def test_scalar_samples(lib):
    pipe = _pipe(lib, 2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x"))
    for i in range(4):
        pipe.feed_input("x", [np.uint8(i), np.uint8(i + 1)])
        out = pipe.run()[0]
        assert np.array(out[0]).shape == () and out.as_array().tolist() == [i, i + 1]


def test_run_with_inputs(lib):
    pipe = _pipe(lib, 4, prefetch_queue_depth=1)
    with pipe:
        a = lib.fn.external_source(name="a")
        b = lib.fn.external_source(name="b")
        pipe.set_outputs(a + b)
    rng = np.random.default_rng(0)
    for n in (4, 2, 3):
        x, y = rng.integers(0, 9, (n, 3)).astype(np.int32), rng.integers(0, 9, (n, 3)).astype(np.int32)
        (out,) = pipe.run(a=x, b=y)
        np.testing.assert_array_equal(out.as_array(), x + y)


def test_run_with_inputs_needs_depth_1(lib):
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="a"))
    with pytest.raises(RuntimeError, match="`prefetch_queue_depth` in Pipeline constructor shall be set to 1"):
        pipe.run(a=np.zeros((1, 1)))


def test_blocking(lib):
    # Two threads, as DALI's test: DALI 2.4 with one thread hangs on a blocking source.
    pipe = _pipe(lib, 1, prefetch_queue_depth=10, num_threads=2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x", blocking=True, dtype=lib.types.INT32))
    pipe.feed_input("x", [np.array([0], np.int32)])
    for i in range(4):
        assert pipe.run()[0].as_array()[0][0] == i
        pipe.feed_input("x", [np.array([i + 1], np.int32)])
    for _ in range(10):  # DALI's destructor would wait for the iterations it scheduled
        pipe.feed_input("x", [np.array([0], np.int32)])


def test_blocking_destructor(lib):
    pipe = _pipe(lib, 1, prefetch_queue_depth=5, num_threads=2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x", blocking=True))
    pipe.feed_input("x", [np.zeros(1)])
    pipe.run()
    del pipe  # a producer waiting for data must not hang the destructor


# --------------------------------------------------------------------------- checks
def _run_error(lib, data, **es_args):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=data, **es_args))
    with pytest.raises(RuntimeError) as e:
        for _ in range(len(data)):
            pipe.run()
    return str(e.value).lower()


def test_dtype_arg(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        a, b = lib.fn.external_source(lambda: ([np.zeros((2, 2), np.uint8)] * 2, [np.zeros(1, np.float32)] * 2),
                                      num_outputs=2, dtype=[lib.types.UINT8, lib.types.FLOAT])
        pipe.set_outputs(a, b)
    a, b = pipe.run()
    assert a.as_array().dtype == np.uint8 and b.as_array().dtype == np.float32


def test_incorrect_dtype_arg(lib):
    msg = _run_error(lib, [[np.ones((2, 2), np.float32)] * 2], dtype=lib.types.UINT8)
    assert "expected data of type uint8 and got: float" in msg


def test_changing_dtype(lib):
    msg = _run_error(lib, [[np.ones((2, 2), np.float32)] * 2, [np.ones((2, 2), np.uint8)] * 2])
    assert "type" in msg and "changed" in msg and "previous iteration" in msg


def test_ndim_and_layout_args(lib):
    pipe = _pipe(lib, 2)
    data = [[np.ones((4, 4, 3), np.uint8)] * 2]
    with pipe:
        pipe.set_outputs(lib.fn.external_source(data, ndim=3), lib.fn.external_source(data, layout="HWC"))
    a, b = pipe.run()
    assert b.layout() == "HWC" and a.as_array().shape == (2, 4, 4, 3)


def test_ndim_layout_mismatch(lib):
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(layout="HWC", ndim=2))
    with pytest.raises(RuntimeError, match="(?i)number of dimensions in the( provided)? layout does not match the ndim argument"):
        pipe.run()


def test_ndim_data_mismatch(lib):
    msg = _run_error(lib, [[np.ones((2, 2), np.float32)] * 2], ndim=3)
    assert "expected data with 3 dimensions and got 2 dimensions" in msg


def test_ndim_changing(lib):
    msg = _run_error(lib, [[np.ones((2, 2, 2), np.uint8)] * 2, [np.ones((2, 2), np.uint8)] * 2])
    assert "number of dimensions" in msg and "changed" in msg


def test_layout_data_mismatch(lib):
    pipe = _pipe(lib, 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x", layout="H"))
    pipe.feed_input("x", [np.zeros(1)], layout="W")
    with pytest.raises(RuntimeError, match='(?i)expected data with layout:? "H" and got:? "W"'):
        pipe.run()


def test_layout_with_other_ndim_is_an_error_and_the_pipeline_goes_on(lib):
    # 2-D data under a 3-letter layout: DALI's message (Sluice panicked before).
    pipe = _pipe(lib, 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x"))
    with pytest.raises(RuntimeError, match="The layout 'HWC' cannot describe 2-dimensional data"):
        pipe.feed_input("x", [np.zeros((4, 5), np.uint8)], layout="HWC")
        pipe.run()
    pipe.feed_input("x", [np.ones((4, 5, 1), np.uint8)], layout="HWC")
    out = pipe.run()[0]
    assert out.layout() == "HWC" and np.array(out.at(0)).sum() == 20


def test_layout_changing(lib):
    pipe = _pipe(lib, 1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x"))
    pipe.feed_input("x", [np.zeros(1)], layout="W")
    pipe.feed_input("x", [np.zeros(1)], layout="H")
    assert pipe.run()[0].layout() == "W"
    with pytest.raises(RuntimeError, match="(?i)layout of the data .*changed"):
        pipe.run()


def test_layout_set_as_arg(lib):
    pipe = _pipe(lib, 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x", layout="H"))
    pipe.feed_input("x", [np.zeros(1)])
    assert pipe.run()[0].layout() == "H"


def test_batch_too_big(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(lambda: [np.zeros(1)] * 3))
    with pytest.raises(RuntimeError):
        pipe.run()


def test_batch_size_clash(lib):
    pipe = _pipe(lib, 3, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x"), lib.fn.external_source(name="y"))
    pipe.feed_input("x", [np.zeros(1)] * 2)
    pipe.feed_input("y", [np.zeros(1)] * 1)
    with pytest.raises(RuntimeError, match="(?i)batch size clash"):
        pipe.run()


def test_mixed_ndim_in_batch(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(name="x"))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        pipe.feed_input("x", [np.zeros((1, 1)), np.zeros(1)])


# --------------------------------------------------------------------------- Sluice's own
def test_no_data_is_an_error_and_the_pipeline_stays_usable():
    pipe = _pipe(_lib(sluice), 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    with pytest.raises(sluice.errors.InputError, match="no data was fed") as e:
        pipe.run()
    assert isinstance(e.value, IndexError) and isinstance(e.value, RuntimeError) and "'x'" in str(e.value)
    pipe.feed_input("x", [np.array([7], np.int32)])
    assert pipe.run()[0].as_array()[0][0] == 7


def test_no_data_async_does_not_hang():
    pipe = _pipe(_lib(sluice), 1, prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    pipe.feed_input("x", [np.array([1], np.int32)])
    assert pipe.run()[0].as_array()[0][0] == 1
    with pytest.raises(sluice.errors.InputError):
        pipe.run()
    pipe.feed_input("x", [np.array([2], np.int32)])
    assert pipe.run()[0].as_array()[0][0] == 2


def test_error_names_the_source_and_pipeline_recovers():
    calls = iter([[np.zeros(2, np.float32)], [np.zeros(2, np.uint8)], [np.ones(2, np.float32)]])
    pipe = _pipe(_lib(sluice), 1, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(lambda: next(calls), name="feed", dtype=sluice.types.FLOAT))
    pipe.run()
    with pytest.raises(sluice.errors.DataError, match="'feed'.*iteration 1.*expected data of type FLOAT and got: UINT8"):
        pipe.run()
    np.testing.assert_array_equal(pipe.run()[0].as_array(), [[1, 1]])


def test_fed_arrays_are_copied():
    pipe = _pipe(_lib(sluice), 2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    pipe.feed_input("x", a)
    a[:] = -1
    np.testing.assert_array_equal(pipe.run()[0].as_array(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_non_contiguous_and_torch_like_inputs_are_accepted():
    pipe = _pipe(_lib(sluice), 2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)[:, :, ::2]
    pipe.feed_input("x", a)
    np.testing.assert_array_equal(pipe.run()[0].as_array(), a)


def test_same_results_for_any_thread_count():
    def run(threads):
        rng = np.random.default_rng(3)
        data = [[rng.random((5, 5), dtype=np.float32) for _ in range(4)] for _ in range(3)]
        pipe = sluice.Pipeline(4, threads, None, seed=7)
        with pipe:
            x = sluice.fn.external_source(data)
            pipe.set_outputs(x * sluice.fn.random.uniform(range=[0, 1], shape=[5, 5]))
        return [o[0] for o in run_to_end(pipe)]

    a, b = run(1), run(2)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)


# --------------------------------------------------------------------------- GPU
def test_gpu_external_source_uploads_host_data():
    from conftest import require_gpu

    require_gpu()
    pipe = sluice.Pipeline(2, 2, 0, prefetch_queue_depth=1)
    with pipe:
        x = sluice.fn.external_source(name="x", device="gpu", layout="HW")
        y = sluice.fn.external_source([[np.ones((2, 2), np.float32)] * 2], cycle=True, device="gpu")
        z = sluice.fn.python_function(sluice.fn.external_source(name="z"), function=lambda a: a + 1).gpu()
        pipe.set_outputs(x, y * 2, z)
    for k in range(3):
        a = np.arange(8, dtype=np.float32).reshape(2, 2, 2) + k
        pipe.feed_input("x", a)
        pipe.feed_input("z", a)
        out, dbl, plus = pipe.run()
        assert out.layout() == "HW"
        np.testing.assert_array_equal(out.as_cpu().as_array(), a)
        np.testing.assert_array_equal(dbl.as_cpu().as_array(), np.full((2, 2, 2), 2, np.float32))
        np.testing.assert_array_equal(plus.as_cpu().as_array(), a + 1)


# --------------------------------------------------------------------------- repeat_last
# Sluice only: DALI 2.4's CPU-only pipelines reject feed_input on a repeat_last source
# ("Resetting order to an empty one is not supported"); these follow DALI's GPU tests.
def test_repeat_last():
    pipe = _pipe(_lib(sluice), 3, prefetch_queue_depth=1)
    with pipe:
        x = sluice.fn.external_source(name="x", repeat_last=True)
        pipe.set_outputs(x, sluice.fn.random.uniform(range=[0, 1]))
    pipe.feed_input("x", [np.array([1], np.int32)] * 2)
    for _ in range(3):
        out, u = pipe.run()
        assert out.as_array().tolist() == [[1], [1]] and len(u) == 2  # the batch size repeats too
    pipe.feed_input("x", [np.array([2], np.int32)] * 3)
    out, u = pipe.run()
    assert out.as_array().tolist() == [[2], [2], [2]] and len(u) == 3
    assert pipe.run()[0].as_array().tolist() == [[2], [2], [2]]


def test_repeat_last_with_a_source_is_an_error():
    with sluice.Pipeline(1, 1, None):
        with pytest.raises(ValueError, match="repeat_last"):
            sluice.fn.external_source(source=[[np.zeros(1)]], repeat_last=True)


def test_repeat_last_synchronous_and_before_any_feed():
    pipe = sluice.Pipeline(2, 1, None, exec_async=False, exec_pipelined=False)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x", repeat_last=True))
    with pytest.raises(sluice.errors.InputError):
        pipe.run()
    pipe.feed_input("x", [np.array([3], np.int32)])
    assert [pipe.run()[0].as_array().tolist() for _ in range(2)] == [[[3]], [[3]]]


class _FakeCudaArray:
    """Has a CUDA array interface (no memory behind it): enough to be taken for GPU data."""

    __cuda_array_interface__ = {"shape": (2, 3), "typestr": "<f4", "data": (1 << 40, False), "version": 3, "strides": None}


def test_gpu_data_to_a_cpu_source_is_an_error():
    pipe = _pipe(_lib(sluice), 2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    with pytest.raises(sluice.errors.ArgumentTypeError, match="GPU data fed to the cpu external source 'x'"):
        pipe.feed_input("x", _FakeCudaArray())
    pipe.feed_input("x", np.zeros((2, 3), np.float32))  # still usable
    assert pipe.run()[0].as_array().shape == (2, 3)


def test_gpu_data_feeds_a_gpu_source():
    from conftest import require_gpu

    require_gpu()
    torch = pytest.importorskip("torch")
    pipe = sluice.Pipeline(3, 2, 0, prefetch_queue_depth=1)
    with pipe:
        x = sluice.fn.external_source(name="x", device="gpu", layout="AB")
        pipe.set_outputs(x * 2)
    for k in range(3):
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):  # produced on a side stream: the copy must wait for it
            t = torch.arange(3 * 4 * 5, dtype=torch.float32, device="cuda").reshape(3, 4, 5) + k
            pipe.feed_input("x", t, cuda_stream=side)
        t.add_(1000)  # after feed_input returns, the caller may overwrite its memory
        (out,) = pipe.run()
        expect = (np.arange(60, dtype=np.float32).reshape(3, 4, 5) + k) * 2
        np.testing.assert_array_equal(out.as_cpu().as_array(), expect)
    # a list of samples of different shapes, and a Sluice GPU batch from another pipeline
    samples = [torch.full((i + 1, 2), float(i), device="cuda") for i in range(3)]
    pipe.feed_input("x", samples)
    (out,) = pipe.run()
    assert [np.array(s).tolist() for s in out.as_cpu()] == [[[2 * i] * 2] * (i + 1) for i in range(3)]
    src = sluice.Pipeline(3, 2, 0)
    with src:
        src.set_outputs(sluice.fn.external_source([[np.full((2, 2), 5, np.float32)] * 3], cycle=True, device="gpu"))
    pipe.feed_input("x", src.run()[0])
    np.testing.assert_array_equal(pipe.run()[0].as_cpu().as_array(), np.full((3, 2, 2), 10, np.float32))


class _DLPackOnly:
    """Data known only through DLPack, as JAX arrays are (no array interfaces)."""

    def __init__(self, inner):
        self._inner = inner

    def __dlpack__(self, stream=None, **kw):
        return self._inner.__dlpack__(stream=stream) if stream is not None else self._inner.__dlpack__()

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()


def test_host_data_known_only_through_dlpack():
    pipe = _pipe(_lib(sluice), 2, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x"))
    a = np.arange(12, dtype=np.int16).reshape(2, 2, 3)
    pipe.feed_input("x", _DLPackOnly(a))
    np.testing.assert_array_equal(pipe.run()[0].as_array(), a)
    pipe.feed_input("x", [_DLPackOnly(a[0]), _DLPackOnly(a[1, :1])])
    assert [np.array(s).tolist() for s in pipe.run()[0]] == [a[0].tolist(), a[1, :1].tolist()]


def test_gpu_data_known_only_through_dlpack_feeds_a_gpu_source():
    from conftest import require_gpu

    require_gpu()
    torch = pytest.importorskip("torch")
    pipe = sluice.Pipeline(2, 2, 0, prefetch_queue_depth=1)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(name="x", device="gpu") + 1)
    for k in range(2):
        t = torch.arange(2 * 3 * 4, dtype=torch.int32, device="cuda").reshape(2, 3, 4) * (k + 1)
        pipe.feed_input("x", _DLPackOnly(t))
        t.zero_()  # fed means copied: the producer may reuse its memory
        np.testing.assert_array_equal(pipe.run()[0].as_cpu().as_array(),
                                      np.arange(24, dtype=np.int32).reshape(2, 3, 4) * (k + 1) + 1)
    samples = [torch.full((i + 1, 2), i, device="cuda", dtype=torch.int32) for i in range(2)]  # 2-D, as above
    pipe.feed_input("x", [_DLPackOnly(s) for s in samples])
    assert [np.array(s).tolist() for s in pipe.run()[0].as_cpu()] == [[[1, 1]], [[2, 2]] * 2]
    with pytest.raises(TypeError, match="not C-contiguous"):
        pipe.feed_input("x", _DLPackOnly(torch.zeros((2, 3, 4), device="cuda", dtype=torch.int32).transpose(1, 2)))
    pipe.feed_input("x", _DLPackOnly(torch.ones((2, 1, 1), device="cuda", dtype=torch.int32)))  # still usable
    np.testing.assert_array_equal(pipe.run()[0].as_cpu().as_array(), np.full((2, 1, 1), 2, np.int32))
