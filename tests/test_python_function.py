"""`fn.python_function` and its torch / DLPack forms, run against Sluice and DALI 2.4
(CPU-only) with the same assertions (DALI's test_python_function_operator.py cases that
need no GPU and no image files), plus errors and determinism of Sluice's own."""

import types as _pytypes

import numpy as np
import pytest

import sluice
from sluice.backend import TensorListGPU

from conftest import library_params


LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(fn=m.fn, ops=m.ops, types=m.types, Pipeline=m.Pipeline, pipeline_def=m.pipeline_def)


def _data(n=3):
    rng = np.random.default_rng(0)
    return [[rng.integers(0, 255, (rng.integers(2, 6), 4, 3), dtype=np.uint8) for _ in range(n)] for _ in range(4)]


def _run(lib, build, data, batch=3, **kw):
    pipe = lib.Pipeline(batch, 2, None, seed=5, **kw)
    with pipe:
        x = lib.fn.external_source(data, layout="HWC")
        outs = build(x)
        pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    res = []
    for _ in range(len(data)):
        res.append([[np.array(s) for s in o] for o in pipe.run()])
    return res


def test_per_sample(lib):
    data = _data()
    res = _run(lib, lambda x: lib.fn.python_function(x, function=lambda a: (a.astype(np.float32) * 0.5)[::-1].copy()), data)
    for (out,), batch in zip(res, data):
        for o, a in zip(out, batch):
            np.testing.assert_array_equal(o, (a.astype(np.float32) * 0.5)[::-1])


def test_multiple_outputs_and_inputs(lib):
    data = _data()

    def f(a, b):
        return a.astype(np.int32) + b, np.array(a.shape, np.int64), np.array(a.mean(), np.float64)

    res = _run(lib, lambda x: lib.fn.python_function(x, x, function=f, num_outputs=3), data)
    for (s, shapes, means), batch in zip(res, data):
        for o, sh, m, a in zip(s, shapes, means, batch):
            np.testing.assert_array_equal(o, a.astype(np.int32) + a)
            assert sh.tolist() == list(a.shape) and m.dtype == np.float64 and m == a.mean()


def test_batch_processing(lib):
    data = _data()
    seen = []

    def f(batch):
        seen.append(len(batch))
        return [np.array([len(batch), i], np.int16) for i in range(len(batch))]

    res = _run(lib, lambda x: lib.fn.python_function(x, function=f, batch_processing=True), data)
    assert set(seen) == {3}
    assert [o.tolist() for o in res[0][0]] == [[3, 0], [3, 1], [3, 2]]


def test_no_inputs(lib):
    pipe = lib.Pipeline(4, 1, None)
    with pipe:
        pipe.set_outputs(lib.fn.python_function(function=lambda: np.array([7, 8], np.int32)))
    assert pipe.run()[0].as_array().tolist() == [[7, 8]] * 4


def test_output_layouts(lib):
    data = _data()
    res_layouts = []
    pipe = lib.Pipeline(3, 1, None)
    with pipe:
        x = lib.fn.external_source(data, layout="HWC")
        a, b = lib.fn.python_function(x, function=lambda v: (v, v[..., 0]), num_outputs=2, output_layouts=["HWC", "HW"])
        c = lib.fn.python_function(x, function=lambda v: v)
        pipe.set_outputs(a, b, c)
    for t in pipe.run():
        res_layouts.append(t.layout())
    assert res_layouts == ["HWC", "HW", ""]


def test_ops_api(lib):
    class P(lib.Pipeline):
        def __init__(self):
            super().__init__(2, 1, None)
            self.src = lib.ops.ExternalSource(source=[[np.ones(3, np.float32)] * 2], cycle=True)
            self.f = lib.ops.PythonFunction(function=lambda a: a * 3, num_outputs=1)

        def define_graph(self):
            return self.f(self.src())

    assert P().run()[0].as_array().tolist() == [[3, 3, 3]] * 2


def test_dlpack_function(lib):
    def f(batch):
        return [(np.from_dlpack(_Cap(c)) * 2).__dlpack__() for c in batch]

    data = [[np.arange(4, dtype=np.float32)] * 2]
    pipe = lib.Pipeline(2, 1, None)
    with pipe:
        x = lib.fn.external_source(data, cycle=True)
        pipe.set_outputs(lib.fn.dl_tensor_python_function(x, function=f))
    assert pipe.run()[0].as_array().tolist() == [[0, 2, 4, 6]] * 2


class _Cap:
    def __init__(self, c):
        self.c = c

    def __dlpack__(self, **kw):
        return self.c

    def __dlpack_device__(self):
        return (1, 0)


def test_torch_function():
    # Sluice only: DALI 2.4's torch_python_function fails in CPU-only pipelines
    # (AttributeError inside its plugin, seen on the GPU machine with torch 2.11).
    torch = pytest.importorskip("torch")
    data = [[np.arange(4, dtype=np.float32)] * 2]
    pipe = sluice.Pipeline(2, 1, None)
    with pipe:
        x = sluice.fn.external_source(data, cycle=True)
        pipe.set_outputs(sluice.fn.torch_python_function(x, function=lambda b: [t * 2 for t in b]))
    assert pipe.run()[0].as_array().tolist() == [[0, 2, 4, 6]] * 2


def test_needs_a_current_pipeline(lib):
    with pytest.raises(Exception):
        lib.fn.python_function(function=lambda: np.zeros(1))


# --------------------------------------------------------------------------- Sluice's own
def test_an_exception_names_the_operator_and_the_pipeline_goes_on():
    calls = []

    def f(a):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("bad sample")
        return a

    pipe = sluice.Pipeline(1, 1, None, prefetch_queue_depth=1)
    with pipe:
        x = sluice.fn.external_source([[np.zeros(2, np.float32)]] * 3)
        pipe.set_outputs(sluice.fn.python_function(x, function=f))
    pipe.run()
    with pytest.raises(sluice.errors.DataError, match="(?s)python_function.*ValueError: bad sample"):
        pipe.run()
    assert pipe.run()[0].as_array().tolist() == [[0, 0]]


def test_asynchronous_pipeline_deleted_while_function_runs():
    import time

    pipe = sluice.Pipeline(2, 2, None, prefetch_queue_depth=3)
    with pipe:
        pipe.set_outputs(sluice.fn.python_function(function=lambda: (time.sleep(0.01), np.zeros(1))[1]))
    pipe.run()
    del pipe  # must not deadlock: the executor's thread wants the interpreter lock


def test_results_do_not_depend_on_threads():
    def run(threads):
        pipe = sluice.Pipeline(4, threads, None, seed=9)
        with pipe:
            u = sluice.fn.random.uniform(range=[0, 1], shape=[3])
            pipe.set_outputs(sluice.fn.python_function(u, function=lambda a: np.sort(a)[::-1].copy()))
        return [pipe.run()[0].as_array() for _ in range(3)]

    for a, b in zip(run(1), run(2)):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- device="gpu"
# DALI's test_gpu_python_function_operator.py compares a gpu python_function (CuPy arrays)
# with a cpu one (NumPy) on the same data; the torch and DLPack forms likewise. These need a
# GPU (they fail, not skip, under SLUICE_REQUIRE_GPU=1).

def _float_batches(n=4, batch=5):
    rng = np.random.default_rng(7)
    return [[rng.random((int(rng.integers(2, 5)), 3), dtype=np.float32) for _ in range(batch)] for _ in range(n)]


def _gpu_vs_cpu(make_gpu, make_cpu, num_outputs=1, batch=5, **kw):
    data = _float_batches(batch=batch)

    def run(device, make):
        pipe = sluice.Pipeline(batch, 2, 0, seed=3, **kw)
        with pipe:
            x = sluice.fn.external_source(data, layout="AB")
            x = x.gpu() if device == "gpu" else x
            outs = make(x, device)
            pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
        got = []
        for _ in data:
            outs = pipe.run()
            if device == "gpu":
                assert all(isinstance(o, TensorListGPU) for o in outs)
                outs = [o.as_cpu() for o in outs]
            got.append([[np.array(s) for s in o] for o in outs])
        return got

    gpu, cpu = run("gpu", make_gpu), run("cpu", make_cpu)
    assert len(gpu) == len(cpu)
    for g, c in zip(gpu, cpu):
        assert len(g) == len(c) == num_outputs
        for go, co in zip(g, c):
            for gs, cs in zip(go, co):
                np.testing.assert_allclose(gs, cs, rtol=1e-6)


def _arrays_arithmetic(a, b):
    return a + b, a - b / 2.0


def test_gpu_python_function_gets_cupy_arrays_per_sample():
    from conftest import require_gpu

    require_gpu()
    cupy = pytest.importorskip("cupy")
    seen = []

    def arith(a, b):
        seen.append(type(a))
        return _arrays_arithmetic(a, b)

    def make(x, device):
        fn = arith if device == "gpu" else _arrays_arithmetic
        return sluice.fn.python_function(x, x, function=fn, num_outputs=2, device=device)

    _gpu_vs_cpu(make, make, num_outputs=2)
    assert seen and all(t is cupy.ndarray for t in seen)


def test_gpu_python_function_cupy_kernel_runs_on_the_pipeline_stream():
    from conftest import require_gpu

    require_gpu()
    cupy = pytest.importorskip("cupy")
    square_diff = cupy.ElementwiseKernel("T x, T y", "T z", "z = x*x - y*y", "square_diff")
    streams = []

    def kernel(a, b):
        streams.append(cupy.cuda.get_current_stream().ptr)
        return square_diff(a * 3, b)

    _gpu_vs_cpu(lambda x, d: sluice.fn.python_function(x, x, function=kernel, device=d),
                lambda x, d: sluice.fn.python_function(x, x, function=lambda a, b: (a * 3) ** 2 - b * b, device=d))
    assert streams and all(s not in (0, 1, 2) for s in streams), "the function must run on the pipeline's stream"


def test_gpu_python_function_batch_processing_and_builtin():
    from conftest import require_gpu

    require_gpu()
    cupy = pytest.importorskip("cupy")

    def batch_fn(xs):
        assert isinstance(xs, list) and all(isinstance(x, cupy.ndarray) for x in xs)
        return [cupy.logaddexp(x, x[::-1].copy()) for x in xs]

    _gpu_vs_cpu(lambda x, d: sluice.fn.python_function(x, function=batch_fn, batch_processing=True, device=d),
                lambda x, d: sluice.fn.python_function(x, function=lambda a: np.logaddexp(a, a[::-1]), device=d))


def test_gpu_torch_python_function():
    from conftest import require_gpu

    require_gpu()
    torch = pytest.importorskip("torch")

    def gpu_fn(xs):
        assert all(isinstance(x, torch.Tensor) and x.is_cuda for x in xs)
        return [torch.sigmoid(x) * 2 for x in xs]

    def cpu_fn(xs):
        return [torch.sigmoid(x) * 2 for x in xs]

    _gpu_vs_cpu(lambda x, d: sluice.fn.torch_python_function(x, function=gpu_fn if d == "gpu" else cpu_fn, device=d),
                lambda x, d: sluice.fn.torch_python_function(x, function=cpu_fn, device=d))


def test_gpu_dl_tensor_python_function():
    from conftest import require_gpu

    require_gpu()
    torch = pytest.importorskip("torch")
    from torch.utils import dlpack as tdl

    def fn(xs):
        ts = [torch.from_dlpack(c) for c in xs]
        assert all(t.is_cuda for t in ts)
        return [tdl.to_dlpack(t * t + 1) for t in ts]

    def cpu_fn(xs):
        return [tdl.to_dlpack(torch.from_dlpack(c) ** 2 + 1) for c in xs]

    _gpu_vs_cpu(lambda x, d: sluice.fn.dl_tensor_python_function(x, function=fn, device=d),
                lambda x, d: sluice.fn.dl_tensor_python_function(x, function=cpu_fn, device=d))


def test_gpu_python_function_returning_host_data_is_an_error_and_the_pipeline_goes_on():
    from conftest import require_gpu

    require_gpu()
    pytest.importorskip("cupy")
    calls = []

    def fn(a):
        calls.append(1)
        return a.get() if len(calls) == 1 else a * 2  # host data (NumPy) the first time

    pipe = sluice.Pipeline(2, 2, 0, exec_async=False, exec_pipelined=False)
    with pipe:
        x = sluice.fn.external_source([[np.ones((2, 2), np.float32)] * 2], cycle=True)
        pipe.set_outputs(sluice.fn.python_function(x.gpu(), function=fn, device="gpu"))
    with pytest.raises(RuntimeError, match="(?s)python_function.*must return GPU data"):
        pipe.run()
    (out,) = pipe.run()
    np.testing.assert_array_equal(out.as_cpu().as_array(), np.full((2, 2, 2), 2, np.float32))


def test_gpu_python_function_needs_a_gpu_pipeline_and_a_known_device():
    pipe = sluice.Pipeline(2, 2, None)
    with pipe:
        x = sluice.fn.external_source([[np.ones(2, np.float32)] * 2], cycle=True)
        with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu'"):
            sluice.fn.python_function(x, function=lambda a: a, device="tpu")
        out = sluice.fn.dl_tensor_python_function(x.gpu(), function=lambda xs: xs, device="gpu")
        pipe.set_outputs(out)
    with pytest.raises(RuntimeError, match="GPU"):
        pipe.build()


def test_gpu_python_function_without_cupy_says_what_is_missing():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the missing-CuPy error cannot happen")
    except ImportError:
        pass
    pipe = sluice.Pipeline(2, 2, 0)
    with pipe:
        x = sluice.fn.external_source([[np.ones(2, np.float32)] * 2], cycle=True, device="gpu")
        with pytest.raises(ImportError, match="CuPy is not installed"):
            sluice.fn.python_function(x, function=lambda a: a, device="gpu")
