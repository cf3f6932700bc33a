"""`fn.transpose` without `perm` reverses the axes (DALI 2.4's default), on cpu and gpu,
with the layout reversed too (or `output_layout`): equal to DALI 2.4."""

import numpy as np
import pytest

import sluice

from conftest import dali_or_none, require_gpu

dali = dali_or_none()


def _run(lib, data, layout, device="cpu", **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=1, device_id=0 if device == "gpu" else None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout=layout)
        return lib.fn.transpose(x.gpu() if device == "gpu" else x, **kw)

    p = pipe()
    p.build()
    (out,) = p.run()
    out = out.as_cpu() if device == "gpu" else out
    return [np.array(out[i]) for i in range(len(data))], out.layout()


CASES = [((3, 5), "HW", {}), ((2, 3, 4), "HWC", {}), ((2, 3, 4, 5), "FHWC", {}), ((2, 3, 4), "HWC", dict(transpose_layout=False)), ((4, 6), "", dict(output_layout="AB"))]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("shape,layout,kw", CASES)
def test_default_perm_reverses_axes(shape, layout, kw, device):
    if device == "gpu":
        require_gpu()
    rng = np.random.default_rng(len(shape))
    data = [rng.integers(0, 255, shape, dtype=np.uint8), rng.integers(0, 255, tuple(s + 1 for s in shape), dtype=np.uint8)]
    outs, out_layout = _run(sluice, data, layout, device, **kw)
    for o, d in zip(outs, data):
        np.testing.assert_array_equal(o, np.transpose(d))
    if kw.get("output_layout"):
        assert out_layout == kw["output_layout"]
    elif kw.get("transpose_layout") is False:
        assert out_layout == layout
    else:
        assert out_layout == layout[::-1]
    if dali is not None and device == "cpu":
        want, want_layout = _run(dali, data, layout, **kw)
        assert out_layout == want_layout
        for o, w in zip(outs, want):
            np.testing.assert_array_equal(o, w)
