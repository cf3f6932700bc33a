"""Conditional execution beyond DALI's own test cases (tests/test_conditionals.py): branches
that receive no samples, every operator family inside branches, the hidden split/merge
operators called directly, GPU data in branches (split and merge on the GPU), and results
that do not depend on the number of threads."""

import numpy as np
import pytest

import sluice
from sluice.backend import TensorListGPU
from sluice import fn, types


def _images(batch=6, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (int(rng.integers(8, 16)), int(rng.integers(8, 16)), 3), dtype=np.uint8) for _ in range(batch)]


def _pipe(build, batch=6, threads=2, device_id=None, **kw):
    @sluice.pipeline_def(batch_size=batch, num_threads=threads, device_id=device_id, seed=11, enable_conditionals=True, **kw)
    def p():
        return build()

    return p()


@pytest.mark.parametrize("taken", ["none", "all", "some"])
def test_operators_in_a_branch_that_gets_no_samples_or_all(taken):
    images = _images()
    choose = {"none": lambda i: False, "all": lambda i: True, "some": lambda i: i % 3 == 0}[taken]

    def build():
        img = fn.external_source(lambda info: images[info.idx_in_batch], batch=False, layout="HWC")
        pred = fn.external_source(lambda info: np.array(choose(info.idx_in_batch)), batch=False)
        if pred:
            x = fn.crop(img, crop=(4, 4))
            x = fn.resize(x, size=(6, 6))
            x = fn.flip(x, horizontal=1)
            x = fn.cast(x, dtype=types.FLOAT)
            x = fn.normalize(x, mean=1.0, stddev=2.0)
            x = fn.python_function(x, function=lambda a: a * 0 + 7)
            x = fn.reshape(x, shape=[-1])
            y = fn.random.normal(mean=fn.cast(pred, dtype=types.FLOAT) * 0, stddev=0.1, shape=[4])  # on the branch's samples
        else:
            x = fn.reshape(fn.cast(fn.resize(img, size=(6, 6)), dtype=types.FLOAT), shape=[-1])
            y = fn.random.normal(mean=fn.cast(pred, dtype=types.FLOAT) + 100, stddev=0.1, shape=[4])
        return x, y

    x, y = _pipe(build).run()
    for i in range(6):
        a = np.array(x[i])
        assert a.shape == (108,)
        if choose(i):
            assert (a == 7).all()
            assert (np.abs(np.array(y[i])) < 1).all()
        else:
            assert (np.abs(np.array(y[i]) - 100) < 1).all()


def test_random_values_in_branches_do_not_depend_on_threads():
    def build():
        i = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False)
        coin = fn.random.coin_flip(probability=0.5)
        f = fn.cast(i, dtype=types.FLOAT)
        if coin:
            v = fn.random.normal(mean=f, shape=[3])  # an argument input: runs on the branch's samples
        else:
            v = fn.random.normal(mean=f * 0 - 10, stddev=0.5, shape=[3])
        return v, coin

    runs = []
    for threads in (1, 3):
        p = _pipe(build, batch=8, threads=threads)
        runs.append([[np.array(s) for s in o] for _ in range(3) for o in p.run()])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(np.stack(a), np.stack(b))


def test_split_and_merge_called_directly():
    @sluice.pipeline_def(batch_size=5, num_threads=1, device_id=None)
    def p():
        i = fn.external_source(lambda info: np.int32(info.idx_in_batch * 10), batch=False)
        pred = fn.external_source(lambda info: np.array(info.idx_in_batch % 2 == 1), batch=False)
        t, f = fn._conditional.split(i, predicate=pred)
        return t, f, fn._conditional.merge(t + 1, f - 1, predicate=pred), fn._conditional.not_(pred)

    t, f, m, n = p().run()
    assert [int(x) for x in t.as_array()] == [10, 30]
    assert [int(x) for x in f.as_array()] == [0, 20, 40]
    assert [int(x) for x in m.as_array()] == [-1, 11, 19, 31, 39]
    assert n.as_array().tolist() == [True, False, True, False, True]


def test_merge_of_branches_with_different_types_names_both():
    def build():
        i = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False)
        if i > 2:
            o = fn.cast(i, dtype=types.FLOAT)
        else:
            o = i
        return o

    p = _pipe(build)
    with pytest.raises(RuntimeError, match="Found distinct types: float and int32"):
        p.run()


def test_gpu_data_in_branches():
    from conftest import require_gpu

    require_gpu()
    images = _images(batch=8, seed=3)

    def build(device):
        def inner():
            img = fn.external_source(lambda info: images[info.idx_in_batch], batch=False, layout="HWC")
            i = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False)
            img = img.gpu() if device == "gpu" else img
            if i % 3 == 0:
                out = fn.flip(img, horizontal=1)
            elif i == 4:
                out = fn.resize(img, size=(5, 7))
            else:
                out = img
            if i > 100:  # no sample takes this branch: an empty GPU half
                out = fn.flip(out, vertical=1)
            if i == 7:
                moved = fn.cast(i, dtype=types.FLOAT).gpu() if device == "gpu" else fn.cast(i, dtype=types.FLOAT)
            else:
                moved = fn.cast(i * 0, dtype=types.FLOAT).gpu() if device == "gpu" else fn.cast(i * 0, dtype=types.FLOAT)
            return out, moved
        return inner

    got = {}
    for device in ("cpu", "gpu"):
        p = _pipe(build(device), batch=8, device_id=0)
        outs = p.run()
        if device == "gpu":
            assert all(isinstance(o, TensorListGPU) for o in outs)
            outs = [o.as_cpu() for o in outs]
        got[device] = [[np.array(s) for s in o] for o in outs]
    for a, b in zip(got["cpu"], got["gpu"]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert got["gpu"][0][4].shape == (5, 7, 3)  # sample 4 took the resize branch
    assert float(got["gpu"][1][7]) == 7.0


def test_permute_batch_on_the_gpu():
    from conftest import require_gpu

    require_gpu()
    images = _images(batch=6, seed=5)

    @sluice.pipeline_def(batch_size=6, num_threads=2, device_id=0, seed=4)
    def p():
        img = fn.external_source(lambda info: images[info.idx_in_batch], batch=False, layout="HWC")
        perm = fn.batch_permutation()
        return fn.permute_batch(img.gpu(), indices=perm), fn.permute_batch(img, indices=perm), perm

    g, c, perm = p().run()
    assert isinstance(g, TensorListGPU) and g.layout() == "HWC"
    for x, y, k in zip(g.as_cpu(), c, perm):
        np.testing.assert_array_equal(np.array(x), np.array(y))
        np.testing.assert_array_equal(np.array(y), images[int(np.array(k))])


def test_views_reach_python_functions_and_dense_exports():
    """A split's halves and permute_batch's output share their input's memory on the GPU (no
    copy): a GPU python_function in a branch still gets whole arrays, and a permuted batch
    with repeated samples exports as one dense tensor."""
    from conftest import require_gpu

    require_gpu()
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(9)
    images = [rng.integers(0, 100, (6, 5, 3), dtype=np.uint8) for _ in range(8)]
    seen = []

    def double(a):
        seen.append(type(a))
        return a * 2

    @sluice.pipeline_def(batch_size=8, num_threads=2, device_id=0, seed=4, enable_conditionals=True)
    def p():
        img = fn.external_source(lambda info: images[info.idx_in_batch], batch=False, layout="HWC")
        i = fn.external_source(lambda info: np.int32(info.idx_in_batch), batch=False)
        g = img.gpu()
        if i % 3 == 1:
            out = fn.python_function(g, function=double, device="gpu", output_layouts="HWC")
        else:
            out = g
        return out, fn.permute_batch(g, indices=[3, 3, 0, 7, 1, 1, 6, 2])

    out, perm = p().run()
    assert seen and all(t is cupy.ndarray for t in seen)
    for k, x in enumerate(out.as_cpu()):
        np.testing.assert_array_equal(np.array(x), images[k] * 2 if k % 3 == 1 else images[k])
    dense = cupy.asarray(perm.as_tensor())
    np.testing.assert_array_equal(cupy.asnumpy(dense), np.stack([images[k] for k in [3, 3, 0, 7, 1, 1, 6, 2]]))
