"""`fn.element_extract` against DALI 2.4's cpu operator: DALI's test_element_extract.py
cases (layouts FHW, FX, FHWC, repeated and several indices, UINT8 and INT32, samples of
different shapes), one output per `element_map` entry; errors naming the operator, the
argument and the sample, the pipeline still usable; gpu equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402

BATCH = 8


def _sequences(shape, dtype, seed):
    """Samples of `shape` with every extent but the frames' between half and all of it."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(BATCH):
        s = [shape[0]] + [int(r.integers(max(e // 2, 1), e + 1)) for e in shape[1:]]
        out.append(r.integers(0, 255, size=s).astype(dtype))
    return out


def _run(mod_fn, pdef, data, layout, element_map):
    @pdef(batch_size=len(data), num_threads=2, device_id=None)
    def p():
        x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
        e = mod_fn.element_extract(x, element_map=element_map)
        return tuple(e) if isinstance(e, (list, tuple)) else (e,)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


CASES = [(s, l, m, t) for s, l in [([4, 2, 2], "FHW"), ([6, 1], "FX"), ([8, 10, 10, 3], "FHWC")]
         for m in [[1, 3], [0], [2, 2], [0, 1, 2]] for t in [np.uint8, np.int32]] + [([4, 3, 3], "FXY", [0, 1, 2, 3, 3, 2, 1, 0], np.uint8)]


@pytest.mark.parametrize("shape, layout, element_map, dtype", CASES)
def test_element_extract_matches_dali(shape, layout, element_map, dtype):
    data = _sequences(shape, dtype, len(element_map))
    ours = _run(fn, pipeline_def, data, layout, element_map).run()
    ref = _run(dfn, dali.pipeline_def, data, layout, element_map).run()
    assert len(ours) == len(ref) == len(element_map)
    for k, idx in enumerate(element_map):
        assert ours[k].layout() == ref[k].layout() == layout[1:]
        for i in range(BATCH):
            a, b = np.array(ours[k].at(i)), np.array(ref[k].at(i))
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, data[i][idx])


def test_element_extract_without_layout():
    data = _sequences([5, 3, 2], np.float32, 1)
    (a, b) = _run(fn, pipeline_def, data, None, [4, 0]).run()
    assert a.layout() == ""
    np.testing.assert_array_equal(np.array(b.at(3)), data[3][0])


@pytest.mark.parametrize("shape, layout, element_map, error, message, dali_message", [
    ([4], "F", [1, 3], sluice.errors.ArgumentTypeError, r"element_extract: the input must be a sequence of at least 2 dimensions", "Input must have at least two dimensions"),
    ([6, 1], "XF", [1, 3], sluice.errors.ArgumentTypeError, r"element_extract: the input must be a sequence: its layout must start with 'F' \(frames\), got 'XF'", "Input layout must describe a sequence"),
    ([8, 10, 3], "HWC", [1, 3], sluice.errors.ArgumentTypeError, r"got 'HWC'", "Input layout must describe a sequence"),
    ([6, 1], "FX", [10], sluice.errors.ArgumentError, r"element_extract: argument 'element_map': sample 0: element_map\[0\] = 10 is out of bounds for a sequence of 6 frames", "Index `10` from `element_map` is out of bounds"),
    ([6, 1], "FX", [-5], sluice.errors.ArgumentError, r"element_extract: argument 'element_map': negative indices are not allowed, found -5", "Negative indices in `element_map` are not allowed"),
])
def test_bad_element_extract_names_operator_argument_and_sample(shape, layout, element_map, error, message, dali_message):
    data = [np.zeros(shape, np.uint8)] * 2
    pipe = _run(fn, pipeline_def, data, layout, element_map)
    for _ in range(2):  # the same error again: the pipeline stays usable
        with pytest.raises(error, match=message):
            pipe.run()
    with pytest.raises(RuntimeError, match=dali_message):
        _run(dfn, dali.pipeline_def, data, layout, element_map).run()


def test_out_of_bounds_names_the_sample():
    data = [np.zeros((6, 2), np.uint8), np.zeros((3, 2), np.uint8)]
    with pytest.raises(sluice.errors.ArgumentError, match=r"sample 1: element_map\[0\] = 4 is out of bounds for a sequence of 3 frames"):
        _run(fn, pipeline_def, data, "FX", [4]).run()


def test_gpu_element_extract_equals_cpu():
    require_gpu()
    data = _sequences([8, 10, 10, 3], np.int32, 5)

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: data, batch=True, layout="FHWC")
        return (*fn.element_extract(x, element_map=[7, 0, 3]), *fn.element_extract(x.gpu(), element_map=[7, 0, 3]))

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        for c, g in zip(outs[:3], outs[3:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout() == "HWC"
            g = g.as_cpu()
            for i in range(BATCH):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
