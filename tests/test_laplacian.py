"""`fn.laplacian`: equal to DALI 2.4's cpu operator bit for bit: every input type the engine
takes (UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT) to itself and to FLOAT; derivative
windows 3 to 31 and smoothing windows 1 to 31, one value or one per axis, constant or per
sample; `scale` and `normalized_kernel`; DALI's test_laplacian.py shapes and layouts (HW, HWC,
CWH, DHWC, DHW without a layout, FHWC, FCHW, FDHWC, FCDHW) and 1-D `W`; one-sized extents and
windows wider than the sample; rounding half away from zero and saturation. DALI 2.4's own
outputs (exact bits, recorded from DALI) check the operator where DALI is not installed.
DALI's test_laplacian.py cases are ported with DALI itself as the reference where they use
OpenCV (test_kernels also against exact windows, test_vs_scipy against scipy where installed);
its failure cases; gpu equal to cpu bit for bit.

Not covered: FLOAT16, INT64 and UINT64 inputs (DALI takes them; Sluice raises an error naming
the type). Per-frame arguments (DALI's test_per_frame) are in test_per_frame_args.py."""

import base64
import itertools
import math
import re

import numpy as np
import pytest

import sluice
from sluice import types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP = {types.UINT8: np.uint8, types.INT8: np.int8, types.UINT16: np.uint16, types.INT16: np.int16, types.UINT32: np.uint32, types.INT32: np.int32, types.FLOAT: np.float32}
INT_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32]
MAX_WINDOW = 31


def _data(np_type, shape, n, seed, amplitude=None):
    """`n` random samples of `shape` (or of the shapes listed)."""
    rng = np.random.default_rng(seed)
    shapes = shape if isinstance(shape, list) else [shape] * n
    if np_type == np.float32:
        a = np.float32(amplitude or 100)
        return [((rng.random(s, dtype=np.float32) * 2 - 1) * a).astype(np.float32) for s in shapes]
    info = np.iinfo(np_type)
    amp = amplitude or (1 << 20)
    lo, hi = max(info.min, -amp), min(info.max, amp)
    return [rng.integers(lo, hi, s, endpoint=True).astype(np_type) for s in shapes]


def _random_shapes(max_shape, n, rng):
    """DALI's RandomlyShapedDataIterator: every extent drawn from 1..max."""
    return [tuple(int(rng.integers(1, m + 1)) for m in max_shape) for _ in range(n)]


def _source(batch):
    return lambda: batch


def _run_many(lib, data, layout, build, args=None, device="cpu", iters=1):
    """Runs `build(fn, x, arg_nodes)` (a list of outputs); returns each output's samples and
    layouts."""
    args = args or {}
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=3, device_id=None if device == "cpu" else 0, seed=5)
    with pipe:
        x = lib.fn.external_source(source=_source(data), batch=True, layout=layout or None)
        nodes = {k: lib.fn.external_source(source=_source(v), batch=True) for k, v in args.items()}
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(*build(lib.fn, x, nodes))
    pipe.build()
    for _ in range(iters):
        outs = pipe.run()
    if device == "gpu":
        outs = [o.as_cpu() for o in outs]
    return [[np.array(o.at(i)) for i in range(len(data))] for o in outs], [o.layout() for o in outs]


def _run(lib, data, layout, build, args=None, device="cpu", iters=1):
    outs, layouts = _run_many(lib, data, layout, lambda fn, x, a: [build(fn, x, a)], args, device, iters)
    return outs[0], layouts[0]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _bits(a, b):
    """The same values and the same bits (signed zeros and NaNs included)."""
    _same(a, b)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()


def _equals_dali(data, layout, build, args=None):
    ours, l1 = _run(sluice, data, layout, build, args)
    ref, l2 = _run(dali, data, layout, build, args)
    assert l1 == l2
    _bits(ours, ref)
    return ours


def _axes(layout, ndim):
    if not layout:
        return ndim
    lead = len(layout) - len(layout.lstrip("FC"))
    return len(layout) - lead - (1 if layout.endswith("C") and len(layout) > lead else 0)


# DALI test_laplacian.py's shape/layout cases: (shape, layout, spatial axes)
CASES = [((20, 20, 30, 3), "DHWC", 3), ((20, 20, 30), "", 3), ((20, 30, 3), "HWC", 2), ((20, 30), "HW", 2), ((3, 30, 20), "CWH", 2),
         ((5, 20, 30, 3), "FHWC", 2), ((5, 10, 10, 7, 3), "FDHWC", 3), ((5, 3, 20, 30), "FCHW", 2), ((3, 5, 10, 10, 7), "FCDHW", 3)]

# Exact windows, for references independent of the operator (OpenCV's getDerivKernels(2, 0, n)).
def _smoothing(n):
    return np.array([math.comb(n - 1, k) for k in range(n)], np.float64)


def _deriv(n):
    return np.convolve(_smoothing(n - 2), [1.0, -2.0, 1.0])


# ---------------------------------------------------------------- DALI's recorded outputs
# (layout, kwargs, input type, shape, input bytes, output type, output bytes), base64 of the
# little-endian arrays DALI 2.4's cpu operator read and wrote.
GOLDEN = [
    ('HWC', {}, np.uint8, (6, 7, 3),
     '/Nt85T+BMr+WTylod+dv9UUWP9DJy3VtzQbbdZimASWIkNXoJyV9rqNjgcRcnBxorH5HEWq/NFM595DhdiCI+LtdsrU86o41uEMD5hqQCGTtgG2uAkdSASREd+QSW2A+zl/lhzH5O6IsFVHfkqSghJMQuDeXpcM/g9ABNC6+',
     np.uint8, 'AAD/AP9E/wDc////AACcAP//AAAAAAA8AP8AGgAA//8AGAAA//8K/wDE/wD///8KAAD//9oAMAD/AAAAAP//AAAAAAAuAAD/AP//AP///wAA/wD////g///i/wD///w4AGQARv8AVAD/AAAAAAAAAAD/AP8AAAD/DAD//xj/'),
    ('HWC', {'window_size': 5, 'normalized_kernel': True}, np.uint8, (6, 7, 3),
     '9bftT8iK5u3VQP7Ns5aaOTF86zBOib6Xyc4ys3oWeLzRS9w/kuYe7YFOeTGmfPlcO/k4Qbbe+3han9jxJoDLvTTRcdaweSO8oCaODUXk6RN1EJLIjirKEk9S6qzQH47cR/h2pTG6Zyyiojr5MO14V4uyICpnnQSdZzMDUyTd',
     np.uint8, 'AAAAAAAAAAAACwAALgABATU/AGA0AAIAAAA4AAAxEgAACgAVAAAyAAAUAA4ABgA1GwA7Fw8AAAACAAAAFQAAADwAAAUAAAwAEjMAAB0AAB8AGiEABkMAAgcDAAAAHA0AHAAQABoSBzgAHCEAGwAYBwAJKAAAEwA3ABovETkI'),
    ('HW', {'window_size': [3, 5], 'smoothing_size': 1, 'scale': [0.5, 0.25]}, np.int16, (9, 8),
     '/gLY/ScATf4BALT/DAOj/bwA3/+i/df+FgJ1/9UA5gB7/tYCeQPi/n/8GQDTAeT8q/15AkwAAP8JA7sDEv/sAesBBALv/FsB5AL5/KIDmwLOAMf/2/13AXT+/QGw/GD8r/5KA4n/G/yjA48CqgI1APD8BP8p/EoCpAMjARX+dwKsAC8B1QEiAZn95P9QA3IB',
     np.int16, 'UvwkAif+xwDhAuP+Bv1MBHP+NgASBioAvfqmAOsBpfs4A1n9gPhUASQJZADL/CAG2QMW/+//LAP7+iv5pgS7/tP68v7hBPL9jfxkCA/6uvkF/kwDRAH5/DgEPvznBtcHnQBQ+kn+Lgkk/M389/pkAFoCCgSXBjn7t/m1AEwGsv3Y/NL9+/jcAIgI8gFX+T4A'),
    ('DHW', {'window_size': 3, 'normalized_kernel': True}, np.float32, (4, 5, 6),
     'kj4XQL9EhkFh8r9ACVeVQr1GCMKeTx7CyQLmQYvsFsH0GfXBBve4wvFoxz0ovOLBIvJbQg0/VsLtaq1BV/a6v2QVA8KOwYJCR++UQu/8WME0gwzB4zrOwpAfQUJmJqrAf2pyQvtHl8H7MvRBF9LOQRS65EERwZXBQe/rwUq+VMLYeU5Bkyccwprx4kEgZbnCleiMQoWZ6EG2O8tAsFsSwsCtGcLyHabBA94MQpGiTUEr7bdBd91BQputCUIXBzFCsKmaPb5rRMJNM5FCUFqIQknfpcKi1wrB7bPtQg7WhULHuF1CpiLgwvOdesF8WQ7C+tMkwFiJ9r+A11lCSiK+wbcvA8FY7jDCeDCQwtg5okEN0GFCS8mVvBplkEIryZ3BcereQZfCyMITaJlBbICxQt7OCcIWHc1BSzWmQQemasH5YUZBqAsSwVrpDcJCeyS/3wZowdsioUBtu9/CRDGgwTGoWUIPxAdCTMp0QrrhLMC0d1FCNwulQq6ztcE6n4zAG5gVQx4Ys8EJU7vCPtqeQiDWEkEV0ZLCCOV5wlhankFohorCJzMdwsBVkMLzZa1AQ9rcv9u+s8Ie4ZlCZ0pGwm8BqMHa4tJClLkcwZo818F2l+bB1BUlQriD6cEhTcnC',
     np.float32, 'FNsPQiIij0LC+pPCnsedwg6JwsKNSKZCBufewqSGMkLpmXVCMs0sQ0orgkL70zVCR6a/wtUSBkNsLQXBYGQUQk0b+cHodyTD0lycwmjcQEM0WItBUJIAQ1B0oUCnE0fCXg1hw5yziUISzXLCV1/IQimw88KsZZzCs9NMQqcWsUKbqgHCKO12QtC5A8ILoChDWAMgw75MDcLhMMXB2wT4Qi2c6kHfMIhCwB4Nw1SNY0IVP/nCknwBw5T2K8I08/HCKaGPwppDn0I3yCjDvQwKwmOz7kJEyqFCL654w/1KkMJH1QfDnqvEQtgGZkILkURCDUmyQrCkVUJYG+/CogaqQQCmOcLaPcFCwFqTQGDG3kG20pnCBVKDwm4SssKEHmTBiLB0QchTHkOc4wDCzD0Ew7DmskH63pzCoHg/wh4ty0KPgTbCvo8Cwr4AikKeWKbCBsnwwvKqhkLBJA1DKbqgQulhhsJo5/zC0L01wyTfUkHYK93B2DSQwk7DnkE2sS9DltNowxBgKEEpf+5Clgh7wmKPosEkvrVCGthXwjxC60L1FdRCs8SQQpJZK0MQTRZBVJiwwRYgakIj8cvCFTu9QQw8x0IOvwjDNimOwXxhwkLQTttAOG0Lwog1CUIxMGxC'),
    ('HW', {'window_size': 7, 'dtype': types.FLOAT}, np.uint8, (6, 7),
     'R0JyN1uDycSsThLRghoIOSLc9bU7Q1CXNk004MYIEWfl7VsjCNlI/RNo',
     np.float32, 'AMD6xgDwVMYAULhGAMDURgAAL8UAgIDEAMB0RgCwlMYAEK/FAAiCRgAAxkUAyKXGAHDCxQBwhkYAQJ5FAOAhRgDIM0YA8EHGAFj/xgDwCcYAsHJGAOAuRgDsg0YA/I5GAECaxADYkMYAoL/FABACRgBA9kUAGH5GAJSZRgBAacUA2MDGABD4xQBwMUYAABRGADCFRgBwekYAcG7GAIAUxwDwGcYAkI9G'),
]


@pytest.mark.parametrize("case", range(len(GOLDEN)))
def test_dalis_recorded_outputs(case):
    layout, kw, in_type, shape, x, out_type, y = GOLDEN[case]
    data = [np.frombuffer(base64.b64decode(x), in_type).reshape(shape).copy()]
    want = [np.frombuffer(base64.b64decode(y), out_type).reshape(shape)]
    got, l = _run(sluice, data, layout, lambda fn, x, a: fn.laplacian(x, **kw))
    assert l == layout
    _bits(got, want)


def test_integer_outputs_round_half_away_from_zero():
    """DALI: 1-D `[0, 1, 0, 5, 0, 3, 0, 0]` as int16, scale 0.5 and 0.25 (ties away from 0)."""
    data = [np.array([0, 1, 0, 5, 0, 3, 0, 0], np.int16)]
    for scale, want in [(0.5, [1, -1, 3, -5, 4, -3, 2, 0]), (0.25, [1, -1, 2, -3, 2, -2, 1, 0])]:
        out, _ = _run(sluice, data, "W", lambda fn, x, a: fn.laplacian(x, scale=scale))
        _same(out, [np.array(want, np.int16)])


# ---------------------------------------------------------------- parity with DALI's cpu operator
KWARGS = [
    lambda axes: {},
    lambda axes: {"window_size": 5},
    lambda axes: {"window_size": [7, 3, 5][:axes], "smoothing_size": [1, 3, 9][:axes]},
    lambda axes: {"window_size": 9, "normalized_kernel": True},
    lambda axes: {"window_size": [3, 5, 3][:axes], "smoothing_size": 1, "scale": [1 / 16, 4.0, 0.5][:axes]},
]


@needs_dali
@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, None), (types.UINT8, types.FLOAT), (types.FLOAT, None), (types.INT16, None)])
@pytest.mark.parametrize("kwargs", range(len(KWARGS)))
def test_shapes_and_layouts_equal_dali(shape, layout, axes, in_type, out_type, kwargs):
    data = _data(NP[in_type], shape, 2, seed=1)
    kw = KWARGS[kwargs](axes)
    if out_type is not None:
        kw["dtype"] = out_type
    _equals_dali(data, layout, lambda fn, x, a: fn.laplacian(x, **kw))


@needs_dali
@pytest.mark.parametrize("np_type", INT_TYPES + [np.float32])
@pytest.mark.parametrize("to_float", [False, True])
@pytest.mark.parametrize("layout,shape", [("W", (57,)), ("HWC", (19, 23, 3)), ("DHW", (7, 9, 11)), ("CHW", (2, 13, 10))])
def test_every_input_type_equals_dali(np_type, to_float, layout, shape):
    # Full-range 32-bit integers too: their conversion to f32 rounds.
    amplitude = 1 << 31 if np_type in (np.uint32, np.int32) else None
    data = _data(np_type, shape, 3, seed=2, amplitude=amplitude)
    dtype = types.FLOAT if to_float else None
    axes = _axes(layout, len(shape))
    for kw in [{}, {"window_size": 5, "smoothing_size": 3, "scale": 0.25}, {"window_size": [7, 3, 5][:axes], "normalized_kernel": True}]:
        _equals_dali(data, layout, lambda fn, x, a: fn.laplacian(x, dtype=dtype, **kw))


@needs_dali
@pytest.mark.parametrize("np_type", INT_TYPES)
@pytest.mark.parametrize("kw", [{"scale": 0.5, "smoothing_size": 1}, {"scale": 0.25, "smoothing_size": 1}, {"scale": [0.125, 0.5]},
                                {"scale": 1 / 3, "window_size": 5, "smoothing_size": 3}, {"scale": 100.0}, {"scale": -7.5, "smoothing_size": 1}])
def test_rounding_and_saturation_equal_dali(np_type, kw):
    """Small values and fractional scales: many ties (half away from zero); negative results
    of unsigned types, and large scales, saturate."""
    data = _data(np_type, (17, 19), 3, seed=3, amplitude=6)
    _equals_dali(data, "HW", lambda fn, x, a: fn.laplacian(x, **kw))


@needs_dali
@pytest.mark.parametrize("layout,shape", [("HWC", (35, 33, 3)), ("DHW", (14, 17, 19)), ("W", (61,))])
@pytest.mark.parametrize("in_type,out_type", [(np.uint8, types.FLOAT), (np.float32, None), (np.int32, None), (np.int16, types.FLOAT)])
@pytest.mark.parametrize("mode", ["normalized", "smoothing", "scale"])
def test_every_window_size_equals_dali(layout, shape, in_type, out_type, mode):
    """Per-sample windows of every size 3..31 (one batch of 15), per axis, with smoothing
    windows of 1..31 per sample; windows wider than the sample reflect again and again."""
    axes = _axes(layout, len(shape))
    rng = np.random.default_rng(4)
    sizes = np.arange(3, MAX_WINDOW + 1, 2)
    n = len(sizes)
    data = _data(in_type, shape, n, seed=5)
    args = {"window_size": [np.array([sizes[(i + 5 * a) % n] for a in range(axes)], np.int32) for i in range(n)]}
    kw = {"dtype": out_type} if out_type is not None else {}
    if mode != "scale":
        kw["normalized_kernel"] = True
    if mode != "normalized":
        args["smoothing_size"] = [(2 * rng.integers(0, 16, [axes]) + 1).astype(np.int32) for _ in range(n)]
    if mode == "scale":
        args["scale"] = [(2.0 ** -rng.integers(0, 40, [axes])).astype(np.float32) for _ in range(n)]
    _equals_dali(data, layout, lambda fn, x, a: fn.laplacian(x, **a, **kw), args)


@pytest.mark.parametrize("num_dims", [1, 2, 3])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("smoothing", [True, False])
def test_kernels(num_dims, normalize, smoothing):
    """DALI's test_kernels: the response to an impulse (one batch of 15, windows 3..31 per
    sample) is the sum of the outer products of the windows (exact here, where DALI's test
    asks OpenCV); within DALI's 1e-5 after scaling, and DALI's bits."""
    data, args, scales = [], {"window_size": [], "smoothing_size": []}, []
    for win in range(3, MAX_WINDOW + 2, 2):
        a = np.zeros((win + 2,) * num_dims, np.float32)
        a[((win + 2) // 2,) * num_dims] = 1
        data.append(a)
        args["window_size"].append(np.array(win, np.int32))
        args["smoothing_size"].append(np.array(win if smoothing else 1, np.int32))
        exponent = num_dims * win - 2 - num_dims if smoothing else win - 3
        scales.append(2.0 ** -exponent)
    layout = "DHW"[-num_dims:]
    build = lambda fn, x, a: fn.laplacian(x, window_size=a["window_size"], smoothing_size=a["smoothing_size"], dtype=types.FLOAT, normalized_kernel=normalize)
    ours, _ = _run(sluice, data, layout, build, args)
    if dali is not None:
        ref, _ = _run(dali, data, layout, build, args)
        _bits(ours, ref)
    for win, scale, out in zip(range(3, MAX_WINDOW + 2, 2), scales, ours):
        s = _smoothing(win) if smoothing else np.eye(1, win, win // 2)[0]
        want = 0
        for d in range(num_dims):
            k = np.array([1.0])
            for a in range(num_dims):
                k = np.multiply.outer(k, _deriv(win) if a == d else s)
            want = want + k.reshape((win,) * num_dims)
        got = out[(slice(1, -1),) * num_dims].astype(np.float64)
        if not normalize:
            got = got * scale
        np.testing.assert_allclose(got, want * scale, rtol=0, atol=1e-5)


def _test_images(n, channels, seed):
    """Image-like uint8 samples (smooth areas and edges), for DALI's OpenCV comparisons."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = (int(v) for v in rng.integers(40, 90, 2))
        y, x = np.mgrid[0:h, 0:w]
        base = 127 + 80 * np.sin(x / rng.uniform(3, 12))[..., None] * np.cos(y / rng.uniform(3, 12))[..., None]
        img = base + rng.normal(0, 20, (h, w, channels)) + 60 * ((x // 9 + y // 7) % 2)[..., None]
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


OPEN_CV_CASES = [(w, t, o) for w in range(1, 13, 2) for t, o in [(np.uint8, None)]] + \
    [(w, t, o) for w in [1] + list(range(3, MAX_WINDOW + 2, 4)) for t, o in [(np.uint8, types.FLOAT), (np.float32, None)]]


@needs_dali
@pytest.mark.parametrize("window_size,in_type,out_type", OPEN_CV_CASES)
@pytest.mark.parametrize("normalize,grayscale", [(True, False), (False, True)])
def test_vs_open_cv_cases_equal_dali(window_size, in_type, out_type, normalize, grayscale):
    """DALI's (slow_)test_vs_open_cv: `window_size=1` is OpenCV's ksize 1 (window 3, no
    smoothing); images of 1 or 3 channels; DALI is the reference (bits) instead of OpenCV."""
    data = [img.astype(in_type) for img in _test_images(4, 1 if grayscale else 3, seed=6)]
    win, smooth = (3, 1) if window_size == 1 else (window_size, None)
    _equals_dali(data, "HWC", lambda fn, x, a: fn.laplacian(x, window_size=win, smoothing_size=smooth, normalized_kernel=normalize, dtype=out_type))


@pytest.mark.parametrize("num_dims", [1, 2, 3])
@pytest.mark.parametrize("in_type,out_type", [(np.int16, None), (np.int16, np.float32), (np.int32, None), (np.int32, np.float32), (np.float32, None)])
def test_vs_scipy(num_dims, in_type, out_type):
    """DALI's test_vs_scipy: window 3 without smoothing is scipy's `laplace` (mode "mirror"):
    exact for integers, within 1e-6 for floats in [0, 1). (INT64 inputs are not supported.)"""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(7)
    shapes = _random_shapes((30,) * num_dims, 6, rng)
    if in_type == np.float32:
        data = [rng.random(s, dtype=np.float32) for s in shapes]
    else:
        data = [rng.integers(-1000, 1000, s, endpoint=True).astype(in_type) for s in shapes]
    dtype = types.FLOAT if out_type == np.float32 else None
    ours, _ = _run(sluice, data, "DHW"[-num_dims:], lambda fn, x, a: fn.laplacian(x, window_size=3, smoothing_size=1, dtype=dtype))
    for x, got in zip(data, ours):
        want = ndimage.laplace(x, output=out_type, mode="mirror")
        assert got.dtype == want.dtype and got.shape == want.shape
        if in_type == np.float32:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        else:
            np.testing.assert_array_equal(got, want)


def _per_sample_args(rng, n, axes, window_dim, smoothing_dim, normalize):
    """DALI's laplacian_per_sample_pipeline, drawn with numpy: odd windows 3..31 (a scalar or
    one per axis per sample), odd smoothing windows 1..31, and the scale 2^-exponent that
    normalises them (or normalized_kernel)."""
    args, kw = {}, {}
    if window_dim is None:
        window, w_exponent = [np.int32(3)] * n, [0] * n
    else:
        window = [(rng.integers(1, MAX_WINDOW // 2, [axes] * window_dim, endpoint=False) * 2 + 1).astype(np.int32) for _ in range(n)]
        args["window_size"] = window
        w_exponent = [w - 3 for w in window]
    if smoothing_dim is None:
        s_exponent = [(w - 1) * (axes - 1) for w in window]
    else:
        smoothing = [(rng.integers(0, MAX_WINDOW // 2, [axes] * smoothing_dim, endpoint=False) * 2 + 1).astype(np.int32) for _ in range(n)]
        args["smoothing_size"] = smoothing
        if smoothing_dim == 1:
            s_exponent = [s.sum() - s - axes + 1 for s in smoothing]
        else:
            s_exponent = [(s - 1) * (axes - 1) for s in smoothing]
    if normalize:
        kw["normalized_kernel"] = True
    else:
        args["scale"] = [np.asarray(2.0 ** -(np.asarray(w) + np.asarray(s)).astype(np.float64), np.float32) for w, s in zip(w_exponent, s_exponent)]
    return args, kw


@needs_dali
@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("in_type,out_type", [(np.uint8, None), (np.uint8, types.FLOAT), (np.int16, types.FLOAT), (np.float32, None)])
@pytest.mark.parametrize("window_dim,smoothing_dim,normalize", [(1, 1, False), (1, 1, True), (0, None, False), (None, 1, True), (1, 0, False), (None, None, False)])
def test_per_sample_arguments_equal_dali(shape, layout, axes, in_type, out_type, window_dim, smoothing_dim, normalize):
    """DALI's (slow_)test_per_sample_laplacian: randomly shaped samples, per-sample windows,
    smoothing windows and scales as argument inputs."""
    rng = np.random.default_rng(8)
    n = 5
    data = _data(in_type, _random_shapes(shape, n, rng), n, seed=9)
    args, kw = _per_sample_args(rng, n, axes, window_dim, smoothing_dim, normalize)
    if out_type is not None:
        kw["dtype"] = out_type
    _equals_dali(data, layout, lambda fn, x, a: fn.laplacian(x, **a, **kw), args)


def _window_sizes(window_size, smoothing_size, axes):
    """DALI's get_window_sizes: `sizes[d][a]`."""
    spread = lambda v, default: [default] * axes if v is None else (list(v) if isinstance(v, list) else [v] * axes)
    w = spread(window_size, 3)
    if smoothing_size is None:
        return [[w[d]] * axes for d in range(axes)]
    s = spread(smoothing_size, None)
    return [[w[d] if d == a else s[a] for a in range(axes)] for d in range(axes)]


def _window_scales(window_size, smoothing_size, axes):
    """DALI's window_scales: the normalising factors (one per axis, or one when equal) times
    1/16 and 4."""
    scales = [2.0 ** (-sum(s) + axes + 2) for s in _window_sizes(window_size, smoothing_size, axes)]
    cases = [scales] + ([[scales[0]]] if all(scales[0] == s for s in scales) else [])
    return [[v * f for v in case] for case in cases for f in [1 / 16, 4.0]]


WINDOW_SIZE_CASES = {1: [None, 3, 5, 9, 21], 2: [None, [3, 3], 11, [9, 5], [3, 17]], 3: [None, [3, 5, 7], [3, 3, 3], 11, [23, 7, 11]]}
SMOOTHING_SIZE_CASES = {1: [None, 1, 3, 11, 21], 2: [None, [1, 3], 1, 11, [9, 5]], 3: [None, [3, 5, 7], 1, 11, [9, 7, 1]]}


@needs_dali
@pytest.mark.parametrize("shape,layout", [((64,), "W"), ((20, 30), "HW"), ((5, 3, 20, 30), "FCHW"), ((20, 20, 30, 3), "DHWC"), ((3, 5, 10, 10, 7), "FCDHW")])
@pytest.mark.parametrize("in_type,out_type", [(np.uint8, None), (np.int32, types.FLOAT), (np.float32, None)])
def test_fixed_params_equal_dali(shape, layout, in_type, out_type):
    """DALI's slow_test_fixed_params_laplacian: its window and smoothing tables, normalised
    or with its scale cases (one pipeline, one output per case)."""
    axes = _axes(layout, len(shape))
    calls = []
    for w in WINDOW_SIZE_CASES[axes]:
        for s in SMOOTHING_SIZE_CASES[axes]:
            kw = {k: v for k, v in [("window_size", w), ("smoothing_size", s)] if v is not None}
            if out_type is not None:
                kw["dtype"] = out_type
            calls.append(dict(kw, normalized_kernel=True))
            calls += [dict(kw, scale=scale) for scale in _window_scales(w, s, axes)]
    rng = np.random.default_rng(10)
    data = _data(in_type, _random_shapes(shape, 3, rng), 3, seed=11)
    build = lambda fn, x, a: [fn.laplacian(x, **kw) for kw in calls]
    ours, l1 = _run_many(sluice, data, layout, build)
    ref, l2 = _run_many(dali, data, layout, build)
    assert l1 == l2
    for kw, a, b in zip(calls, ours, ref):
        try:
            _bits(a, b)
        except AssertionError as e:
            raise AssertionError(f"{kw}: {e}") from None


@needs_dali
@pytest.mark.parametrize("shape,layout", [((1, 10, 6), "DHW"), ((10, 1, 3), "HWC"), ((1, 10, 3), "HWC"), ((1, 10), "HW"), ((10, 1), "HW"), ((3, 3), "HW"),
                                          ((2, 2, 2), "DHW"), ((1,), "W"), ((2,), "W"), ((1, 1), "HW")])
def test_one_sized_extents_and_windows_wider_than_the_sample_equal_dali(shape, layout):
    axes = _axes(layout, len(shape))
    for np_type in [np.float32, np.int16]:
        data = _data(np_type, shape, 2, seed=12)
        for kw in [{}, {"window_size": 31}, {"window_size": 5, "smoothing_size": 31, "normalized_kernel": True}, {"window_size": [31, 3, 9][:axes], "smoothing_size": 1}]:
            _equals_dali(data, layout, lambda fn, x, a: fn.laplacian(x, **kw))


def test_empty_extents_give_empty_outputs():
    data = [np.zeros((0, 5, 3), np.uint8), np.full((4, 4, 3), 7, np.uint8), np.zeros((3, 0, 1), np.uint8)]
    out, _ = _run(sluice, data, "HWC", lambda fn, x, a: fn.laplacian(x))
    assert out[0].shape == (0, 5, 3) and out[2].shape == (3, 0, 1)
    assert (out[1] == 0).all()


# ---------------------------------------------------------------- errors
ERRORS = [
    ({"window_size": 4}, "HWC", r"window_size.*odd integer between 3 and 31, got 4 for sample 0"),
    ({"window_size": 1}, "HWC", r"window_size.*odd integer between 3 and 31, got 1 for sample 0"),
    ({"window_size": -3}, "HWC", r"window_size.*odd integer between 3 and 31, got -3 for sample 0"),
    ({"window_size": 10}, "HWC", r"window_size.*got 10 for sample 0"),
    ({"window_size": 32}, "HWC", r"window_size.*got 32 for sample 0"),
    ({"window_size": 33}, "HWC", r"window_size.*got 33 for sample 0"),
    ({"window_size": [3, 6]}, "HWC", r"window_size.*got 6 for sample 0"),
    ({"smoothing_size": 0}, "HWC", r"smoothing_size.*odd integer between 1 and 31, got 0 for sample 0"),
    ({"smoothing_size": 2}, "HWC", r"smoothing_size.*got 2 for sample 0"),
    ({"smoothing_size": -1}, "HWC", r"smoothing_size.*got -1 for sample 0"),
    ({"smoothing_size": 32}, "HWC", r"smoothing_size.*got 32 for sample 0"),
    ({"window_size": 3, "smoothing_size": [3, 6]}, "HWC", r"smoothing_size.*got 6 for sample 0"),
    ({"normalized_kernel": True, "scale": 2.0}, "HWC", r"scale.*cannot be specified when `normalized_kernel` is set to True"),
    ({"normalized_kernel": True, "scale": 1.0}, "HWC", r"scale.*normalized_kernel"),
    # DALI checks the window sizes first.
    ({"normalized_kernel": True, "scale": 1.0, "window_size": 4}, "HWC", r"window_size.*got 4"),
    ({"window_size": [3, 7, 3]}, "HWC", r"window_size.*3 values; expected 1 or 2"),
    ({"window_size": [7, 7, 7, 7, 7]}, "HWC", r"window_size.*5 values; expected 1 or 2"),
    ({"smoothing_size": [3, 3, 3]}, "HWC", r"smoothing_size.*3 values; expected 1 or 2"),
    ({"scale": [3.0, 7.0, 3.0]}, "HWC", r"scale.*3 values; expected 1 or 2"),
    ({"scale": [7.0] * 5}, "HWC", r"scale.*5 values; expected 1 or 2"),
    ({"window_size": [3, 5]}, "W", r"window_size.*2 values; expected 1"),
    ({"dtype": types.UINT16}, "HWC", r"dtype.*input type.*or FLOAT"),
    ({"dtype": types.INT32}, "HWC", r"dtype.*input type.*or FLOAT"),
    ({}, "DHCW", r"channel-first or channel-last"),
    ({}, "HFWC", r"should begin with 'F' or 'C'"),
    ({}, "FWXYZC", r"too many dimensions"),
    ({}, "CF", r"no spatial axes"),
]


def _error_data(layout):
    shape = {"HWC": (10, 10, 3), "W": (10,)}.get(layout, (5, 3, 6, 3, 7, 3)[: len(layout)])
    return [np.zeros(shape, np.uint8)] * 2


@pytest.mark.parametrize("kw,layout,match", ERRORS)
def test_dali_failure_cases(kw, layout, match):
    """test_fail_laplacian (and DALI's messages for the bounds): ValueErrors naming the
    operator, the argument and the sample."""
    with pytest.raises(ValueError, match=r"(?s)laplacian.*" + match):
        _run(sluice, _error_data(layout), layout, lambda fn, x, a: fn.laplacian(x, **kw))


TENSOR_ERRORS = [
    ({"window_size": [np.array(3, np.int32), np.array(4, np.int32)]}, {}, r"window_size.*got 4 for sample 1"),
    ({"window_size": [np.array(33, np.int32)] * 2}, {}, r"window_size.*got 33 for sample 0"),
    ({"smoothing_size": [np.array(3, np.int32), np.array(6, np.int32)]}, {}, r"smoothing_size.*got 6 for sample 1"),
    ({"smoothing_size": [np.array(-1, np.int32)] * 2}, {"window_size": 3}, r"smoothing_size.*got -1 for sample 0"),
    ({"smoothing_size": [np.array(32, np.int32)] * 2}, {}, r"smoothing_size.*got 32 for sample 0"),
    ({"window_size": [np.array([3, 7, 3], np.int32)] * 2}, {}, r"window_size.*sample 0 has 3 values; expected 1 or 2"),
    ({"window_size": [np.array([7] * 5, np.int32)] * 2}, {}, r"window_size.*sample 0 has 5 values; expected 1 or 2"),
    ({"scale": [np.array([3, 7, 3], np.float32)] * 2}, {}, r"scale.*sample 0 has 3 values; expected 1 or 2"),
    ({"scale": [np.array(1.0, np.float32)] * 2}, {"normalized_kernel": True}, r"scale.*normalized_kernel"),
    ({"window_size": [np.array([[3, 3]], np.int32)] * 2}, {}, r"window_size.*1-D list per sample"),
]


@pytest.mark.parametrize("args,kw,match", TENSOR_ERRORS)
def test_per_sample_argument_failures(args, kw, match):
    with pytest.raises(ValueError, match=r"(?s)laplacian.*" + match):
        _run(sluice, _error_data("HWC"), "HWC", lambda fn, x, a: fn.laplacian(x, **a, **kw), args)


@pytest.mark.parametrize("np_type,name", [(np.float64, "FLOAT64"), (np.float16, "FLOAT16"), (np.int64, "INT64"), (np.uint64, "UINT64"), (np.bool_, "BOOL")])
def test_unsupported_types_name_the_sample(np_type, name):
    with pytest.raises(RuntimeError, match=r"(?s)laplacian.*sample 0.*" + name):
        _run(sluice, [np.zeros((4, 4), np_type)], "HW", lambda fn, x, a: fn.laplacian(x))


def test_the_pipeline_goes_on_after_a_bad_batch():
    """Per-sample windows, bad in every other batch: those batches raise, the others run."""
    data = _data(np.uint8, (10, 10, 3), 2, seed=18)
    windows = itertools.cycle([[np.array(5, np.int32), np.array(4, np.int32)], [np.array(5, np.int32), np.array(7, np.int32)]])
    pipe = sluice.pipeline.Pipeline(batch_size=2, num_threads=2, device_id=None, seed=5)
    with pipe:
        x = sluice.fn.external_source(source=_source(data), batch=True, layout="HWC")
        w = sluice.fn.external_source(source=lambda: next(windows), batch=True)
        pipe.set_outputs(sluice.fn.laplacian(x, window_size=w))
    pipe.build()
    errors = oks = 0
    for _ in range(6):
        try:
            (out,) = pipe.run()
        except ValueError as e:
            assert re.search(r"(?s)laplacian.*window_size.*got 4 for sample 1", str(e)), str(e)
            errors += 1
        else:
            assert np.array(out.at(0)).shape == (10, 10, 3)
            oks += 1
    assert errors and oks, (errors, oks)


# ---------------------------------------------------------------- gpu
GPU_TYPES = [(types.UINT8, None), (types.FLOAT, None), (types.INT16, types.FLOAT), (types.UINT32, None), (types.INT8, None), (types.UINT16, types.FLOAT)]


@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("in_type,out_type", GPU_TYPES)
def test_gpu_equals_cpu(shape, layout, axes, in_type, out_type):
    """Per-sample windows and smoothing windows: samples whose one-point windows skip
    different passes in one batch."""
    require_gpu()
    n = 3
    data = _data(NP[in_type], shape, n, seed=13)
    rng = np.random.default_rng(14)
    args = {
        "window_size": [(2 * rng.integers(1, 8, [axes]) + 1).astype(np.int32) for _ in range(n)],
        "smoothing_size": [np.array(v[:axes], np.int32) for v in ([1, 1, 1], [3, 1, 5], [7, 9, 3])],
        "scale": [(2.0 ** -rng.integers(0, 12, [axes])).astype(np.float32) for _ in range(n)],
    }
    build = lambda fn, x, a: fn.laplacian(x, **a, dtype=out_type)
    cpu, _ = _run(sluice, data, layout, build, args)
    gpu, _ = _run(sluice, data, layout, build, args, device="gpu", iters=2)
    _bits(cpu, gpu)


@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("kwargs", range(len(KWARGS)))
def test_gpu_constant_arguments_equal_cpu(shape, layout, axes, kwargs):
    require_gpu()
    for in_type, out_type in GPU_TYPES[:3]:
        data = _data(NP[in_type], shape, 2, seed=15)
        kw = dict(KWARGS[kwargs](axes), dtype=out_type)
        build = lambda fn, x, a: fn.laplacian(x, **kw)
        cpu, _ = _run(sluice, data, layout, build)
        gpu, _ = _run(sluice, data, layout, build, device="gpu")
        _bits(cpu, gpu)


@pytest.mark.parametrize("np_type", INT_TYPES + [np.float32])
def test_gpu_every_window_size_and_type_equals_cpu(np_type):
    require_gpu()
    sizes = np.arange(3, MAX_WINDOW + 1, 2)
    n = len(sizes)
    rng = np.random.default_rng(16)
    for layout, shape in [("W", (61,)), ("HWC", (35, 33, 3)), ("DHW", (14, 17, 19))]:
        axes = _axes(layout, len(shape))
        data = _data(np_type, shape, n, seed=17)
        args = {"window_size": [np.array([sizes[(i + 5 * a) % n] for a in range(axes)], np.int32) for i in range(n)],
                "smoothing_size": [(2 * rng.integers(0, 16, [axes]) + 1).astype(np.int32) for _ in range(n)]}
        for dtype in [None, types.FLOAT]:
            build = lambda fn, x, a: fn.laplacian(x, **a, normalized_kernel=True, dtype=dtype)
            cpu, _ = _run(sluice, data, layout, build, args)
            gpu, _ = _run(sluice, data, layout, build, args, device="gpu")
            _bits(cpu, gpu)


def test_gpu_one_sized_and_empty_samples_equal_cpu():
    require_gpu()
    data = [np.zeros((0, 5, 3), np.float32), np.arange(30, dtype=np.float32).reshape(1, 10, 3), np.full((4, 4, 3), 7, np.float32),
            np.arange(6, dtype=np.float32).reshape(2, 1, 3), np.zeros((3, 0, 3), np.float32)]
    for kw in [{}, {"window_size": 31}, {"window_size": 5, "smoothing_size": 1}]:
        build = lambda fn, x, a: fn.laplacian(x, **kw)
        cpu, _ = _run(sluice, data, "HWC", build)
        gpu, _ = _run(sluice, data, "HWC", build, device="gpu")
        _bits(cpu, gpu)


def test_gpu_errors_are_the_cpus():
    require_gpu()
    for kw, layout, match in ERRORS:
        with pytest.raises(ValueError, match=r"(?s)laplacian.*" + match):
            _run(sluice, _error_data(layout), layout, lambda fn, x, a: fn.laplacian(x, **kw), device="gpu")
