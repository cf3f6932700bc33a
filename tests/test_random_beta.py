"""`fn.random.beta`: DALI's arguments, types and shapes; the distribution checked against
its moments and, by a two-sample Kolmogorov-Smirnov statistic, against DALI 2.4's own
samples (the generators differ, the distributions must not); per-sample arguments;
determinism; errors."""

import numpy as np
import pytest

import sluice
from sluice import fn, types

from conftest import dali_or_none

dali = dali_or_none()


def _samples(lib, alpha, beta, n=20000, **kw):
    pipe = lib.pipeline.Pipeline(batch_size=4, num_threads=2, device_id=None, seed=11)
    with pipe:
        pipe.set_outputs(lib.fn.random.beta(alpha=alpha, beta=beta, shape=[n // 4], **kw))
    pipe.build()
    (out,) = pipe.run()
    return np.concatenate([np.array(out.at(i)) for i in range(4)]), out.dtype


def _ks(a, b):
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    return np.max(np.abs(np.searchsorted(a, grid, side="right") / len(a) - np.searchsorted(b, grid, side="right") / len(b)))


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 0.5), (2.0, 5.0), (0.1, 3.0), (30.0, 40.0)])
def test_moments_and_range(alpha, beta):
    x, dtype = _samples(sluice, alpha, beta)
    assert dtype == types.FLOAT and x.dtype == np.float32
    assert (x >= 0).all() and (x <= 1).all()
    mean = alpha / (alpha + beta)
    var = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / len(x)) + 1e-3
    assert abs(x.var() - var) < 0.1 * var + 1e-4


@pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 0.5), (2.0, 5.0), (0.3, 0.7)])
def test_same_distribution_as_dali(alpha, beta):
    ours, _ = _samples(sluice, alpha, beta)
    ref, _ = _samples(dali, alpha, beta)
    # 1% significance for two samples of 20000: D < 1.63 * sqrt(2 / 20000) = 0.0163
    assert _ks(ours, ref) < 0.0163


def test_float64_shape_like_and_per_sample_arguments():
    pipe = sluice.pipeline.Pipeline(batch_size=3, num_threads=2, device_id=None, seed=3)
    with pipe:
        like = fn.external_source(source=lambda: [np.zeros((k + 1, 2), np.uint8) for k in range(3)], batch=True)
        a = fn.external_source(source=lambda: [np.float32(v) for v in (0.5, 2.0, 9.0)], batch=True)
        pipe.set_outputs(fn.random.beta(like, alpha=a, beta=2.0, dtype=types.FLOAT64), fn.random.beta())
    pipe.build()
    out, scalar = pipe.run()
    assert out.dtype == types.FLOAT64 and [np.array(out.at(k)).shape for k in range(3)] == [(1, 2), (2, 2), (3, 2)]
    assert np.array(scalar.at(0)).shape == ()


def test_same_seed_same_values_whatever_the_threads():
    def run(threads):
        pipe = sluice.pipeline.Pipeline(batch_size=8, num_threads=threads, device_id=None, seed=42)
        with pipe:
            pipe.set_outputs(fn.random.beta(alpha=0.7, beta=1.3, shape=[100]))
        pipe.build()
        return [np.array(pipe.run()[0].at(i)) for i in range(8)]

    for a, b in zip(run(1), run(3)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kw,match", [({"alpha": 0.0}, r"alpha.*positive"), ({"beta": -1.0}, r"beta.*positive"), ({"dtype": types.UINT8}, r"dtype")])
def test_errors(kw, match):
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pytest.raises(ValueError, match=r"(?s)random\.beta.*" + match):
        with pipe:
            pipe.set_outputs(fn.random.beta(**kw))
        pipe.build()
        pipe.run()
