"""`random.uniform`, `random.normal`, `random.coin_flip` and `random.beta`: output shapes as
DALI 2.4 gives them, and the gpu backends.

- `shape` per sample (an argument input), or the shape of a `shape_like` input, else a
  scalar; both at once is DALI's error. The shapes equal DALI's cpu operators'.
- The values come from Sluice's counter-based streams (not DALI's generators): the same
  whatever `num_threads`, and on the gpu (computed on the host and uploaded) equal to the
  cpu's bit for bit.
"""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

SHAPES = [np.array([2, 3], np.int32), np.array([4, 1], np.int32), np.array([0, 5], np.int32)]
LIKE = [np.zeros((2, 5), np.float32), np.zeros((1, 1), np.float32), np.zeros((3, 0), np.float32)]


def _gens(lib, how):
    kw = {}

    @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=5)
    def pipe():
        args = ()
        if how == "shape":
            kw["shape"] = lib.fn.external_source(lambda: SHAPES)
        elif how == "like":
            args = (lib.fn.external_source(lambda: LIKE),)
        return (lib.fn.random.uniform(*args, **kw), lib.fn.random.normal(*args, **kw),
                lib.fn.random.coin_flip(*args, **kw), lib.fn.random.beta(*args, **kw))

    p = pipe()
    p.build()
    return [[np.array(o[i]) for i in range(3)] for o in p.run()]


@needs_dali
@pytest.mark.parametrize("how", ["shape", "like", "scalar"])
def test_output_shapes_equal_dali(how):
    ours, theirs = _gens(sluice, how), _gens(dali, how)
    for op, (a, b) in enumerate(zip(ours, theirs)):
        assert [x.shape for x in a] == [x.shape for x in b], op
        assert [x.dtype for x in a] == [x.dtype for x in b], op


def test_values_follow_their_distributions():
    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=9)
    def pipe():
        sh = fn.external_source(lambda: [np.array([20000, 1], np.int32), np.array([100, 100], np.int32)])
        return (fn.random.uniform(shape=sh, range=[2, 4]), fn.random.normal(shape=sh, mean=1, stddev=2),
                fn.random.coin_flip(shape=sh, probability=0.25))

    p = pipe()
    p.build()
    u, n, c = p.run()
    for i in range(2):
        x = np.array(u[i])
        assert x.min() >= 2 and x.max() < 4 and abs(x.mean() - 3) < 0.03
        y = np.array(n[i])
        assert abs(y.mean() - 1) < 0.06 and abs(y.std() - 2) < 0.06
        z = np.array(c[i])
        assert set(np.unique(z)) <= {0, 1} and abs(z.mean() - 0.25) < 0.02


def test_shape_and_shape_like_exclude_each_other():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.random.uniform(fn.external_source(lambda: [np.zeros(3)]), shape=[2])

    p = pipe()
    p.build()
    with pytest.raises(errors.ArgumentError, match='uniform.*Providing argument "shape" is incompatible with providing a shape-like input'):
        p.run()


def test_per_sample_shapes_need_one_number_of_dimensions():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        sh = fn.external_source(lambda: [np.array([2, 3], np.int32), np.array([4], np.int32)])
        return fn.random.normal(shape=sh)

    p = pipe()
    p.build()
    with pytest.raises(errors.ArgumentError, match="normal.*shape.*sample 1 has 1 extents, earlier samples 2"):
        p.run()


def test_same_values_whatever_num_threads():
    def run(threads):
        @pipeline_def(batch_size=3, num_threads=threads, device_id=None, seed=3)
        def pipe():
            sh = fn.external_source(lambda: SHAPES)
            return fn.random.uniform(shape=sh), fn.random.normal(shape=sh), fn.random.coin_flip(shape=sh)

        p = pipe()
        p.build()
        return [[np.array(o[i]) for i in range(3)] for o in p.run()]

    for a, b in zip(run(1), run(4)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("op,kw", [("uniform", dict(range=[-3, 7])), ("uniform", dict(values=[1, 5, 9], dtype=types.INT32)),
                                   ("normal", dict(mean=2.0, stddev=0.5)), ("coin_flip", dict(probability=0.7, dtype=types.UINT8))])
def test_gpu_equals_cpu(op, kw):
    require_gpu()

    def run(device):
        @pipeline_def(batch_size=3, num_threads=2, device_id=0, seed=8)
        def pipe():
            sh = fn.external_source(lambda: SHAPES)
            like = fn.external_source(lambda: LIKE, device=device)
            gen = getattr(fn.random, op)
            return gen(shape=sh, device=device, **kw), gen(like, device=device, **kw)

        p = pipe()
        p.build()
        outs = p.run()
        return [[np.array((o.as_cpu() if device == "gpu" else o)[i]) for i in range(3)] for o in outs]

    for a, b in zip(run("cpu"), run("gpu")):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and np.array_equal(x, y)
