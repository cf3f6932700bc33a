"""`fn.per_frame` against DALI 2.4's cpu operator: DALI's test_per_frame.py cases (a new
"F**" layout for inputs without one, `replace`, checking an existing F layout), the data
untouched and not copied; errors naming the operator, the pipeline still usable; gpu equal
to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402


def _batch(ndim, seed=42, batch=7):
    r = np.random.default_rng(seed)
    return [r.random(r.integers(low=0, high=50, size=ndim)) for _ in range(batch)]


def _run(mod_fn, pdef, data, layout=None, **kwargs):
    @pdef(batch_size=len(data), num_threads=2, device_id=None)
    def p():
        x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
        return mod_fn.per_frame(x, **kwargs)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("layout, replace, expected", [
    (None, False, "F{}"),        # test_set_layout
    ("XYZ", True, "F{rest}"),    # test_replace_layout
    ("FYZ", False, "F{rest}"),   # test_verify_layout
])
def test_per_frame_matches_dali(ndim, layout, replace, expected):
    data = _batch(ndim)
    layout = layout[:ndim] if layout else None
    (a,) = _run(fn, pipeline_def, data, layout, replace=replace).run()
    (b,) = _run(dfn, dali.pipeline_def, data, layout, replace=replace).run()
    want = "F" + "*" * (ndim - 1) if layout is None else "F" + layout[1:]
    assert a.layout() == b.layout() == want
    for i, d in enumerate(data):
        np.testing.assert_array_equal(np.array(a.at(i)), d)
        np.testing.assert_array_equal(np.array(b.at(i)), d)


def test_per_frame_shares_the_input_buffer():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[4, 6], seed=5)
        return x, fn.per_frame(x)

    x, y = p().run()
    assert y.layout() == "F*"
    assert y.at(0).__array_interface__["data"][0] == x.at(0).__array_interface__["data"][0]


def test_zero_dim_not_allowed():
    pipe = _run(fn, pipeline_def, _batch(0))
    for _ in range(2):  # the same error again: the pipeline stays usable
        with pytest.raises(sluice.errors.ArgumentTypeError, match="per_frame: cannot mark a zero-dimensional input as a sequence"):
            pipe.run()
    with pytest.raises(RuntimeError, match="Cannot mark zero-dimensional input as a sequence"):
        _run(dfn, dali.pipeline_def, _batch(0)).run()


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_not_a_sequence_layout(ndim):
    layout = "XYZ"[:ndim]
    pipe = _run(fn, pipeline_def, _batch(ndim), layout)
    for _ in range(2):
        with pytest.raises(sluice.errors.ArgumentError, match=f"per_frame: argument 'replace': per-frame argument input must be a sequence: the input layout should start with 'F', got '{layout}'"):
            pipe.run()
    with pytest.raises(RuntimeError, match="Per-frame argument input must be a sequence. The input layout should start with 'F'"):
        _run(dfn, dali.pipeline_def, _batch(ndim), layout).run()


def test_gpu_per_frame_equals_cpu():
    require_gpu()
    data = _batch(3)

    @pipeline_def(batch_size=len(data), num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: data, batch=True)
        return fn.per_frame(x), fn.per_frame(x.gpu())

    pipe = p()
    for _ in range(2):
        c, g = pipe.run()
        assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout() == "F**"
        g = g.as_cpu()
        for i in range(len(data)):
            np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))


def test_dali_pass_through():
    """DALI's test_pass_through: per_frame of a random GPU output keeps its values."""
    require_gpu()

    @pipeline_def(batch_size=1, num_threads=4, device_id=0)
    def p():
        rng = fn.external_source(lambda info: np.array([info.iteration, info.iteration + 1], dtype=np.float32), batch=False)
        return fn.per_frame(fn.random.uniform(range=rng, device="gpu", shape=(1, 1, 1), seed=42))

    pipe = p()
    for i in range(5):
        (out,) = pipe.run()
        [sample] = [np.array(s) for s in out.as_cpu()]
        assert i <= sample[0] < i + 1
