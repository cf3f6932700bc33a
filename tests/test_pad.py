"""`fn.pad` (cpu and gpu) against DALI 2.4's cpu operator: padding to the batch's largest
extent or to `shape` (-1: the batch's), `align`, `axes` / `axis_names`, a per-sample
`fill_value` converted as C's static_cast (integers wrap); the gpu backend (the window copy
of `ops/crop/window_copy.rs`) equals the cpu's, bit for bit, on the GPU machine."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

CASES = [
    dict(),
    dict(fill_value=300.7),
    dict(axes=(0,), align=4, fill_value=-2),
    dict(axis_names="W", shape=(9,)),
    dict(shape=(-1, 12, 3), fill_value=7),
    dict(axes=(1, 0), align=(2, 3)),
]


def _data(rng, dtype):
    return [rng.integers(0, 200, s).astype(dtype) for s in [(5, 7, 3), (2, 11, 3), (6, 1, 3)]]


def _pad(lib, data, device="cpu", per_sample_fill=None, **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=2, device_id=0 if device == "gpu" else None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout="HWC")
        if per_sample_fill is not None:
            kw["fill_value"] = lib.fn.external_source(lambda: [np.float32(v) for v in per_sample_fill])
        return lib.fn.pad(x.gpu() if device == "gpu" else x, **kw)

    p = pipe()
    p.build()
    out = p.run()[0]
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out[i]) for i in range(len(data))]


@needs_dali
@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_equals_dali(kw, dtype):
    data = _data(np.random.default_rng(1), dtype)
    for a, b in zip(_pad(sluice, data, **kw), _pad(dali, data, **kw)):
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


@needs_dali
def test_per_sample_fill_equals_dali():
    data = _data(np.random.default_rng(2), np.uint8)
    fills = [1.5, 260.0, -3.0]
    for a, b in zip(_pad(sluice, data, per_sample_fill=fills), _pad(dali, data, per_sample_fill=fills)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_equals_cpu(kw, dtype):
    require_gpu()
    data = _data(np.random.default_rng(3), dtype)
    for a, b in zip(_pad(sluice, data, "cpu", **kw), _pad(sluice, data, "gpu", **kw)):
        assert a.shape == b.shape and np.array_equal(a, b)
    fills = [1.5, 260.0, -3.0]
    for a, b in zip(_pad(sluice, data, "cpu", per_sample_fill=fills), _pad(sluice, data, "gpu", per_sample_fill=fills)):
        assert np.array_equal(a, b)
