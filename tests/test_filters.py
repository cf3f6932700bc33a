"""`fn.gaussian_blur`: equal to DALI 2.4's cpu operator bit for bit (every input type, FLOAT
outputs, DALI's test_gaussian_blur.py shapes and layouts: HW, HWC, DHW, DHWC, CHW-like,
FHWC, FCHW, CFDHW, FDHWC; sigma and window_size alone or together, per axis and per sample;
one-sized extents); DALI's failure cases; gpu equal to cpu bit for bit."""

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP = {types.UINT8: np.uint8, types.INT8: np.int8, types.UINT16: np.uint16, types.INT16: np.int16, types.UINT32: np.uint32, types.INT32: np.int32, types.FLOAT: np.float32}


def _data(np_type, shape, n, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [rng.random(shape).astype(np.float32) * 100 for _ in range(n)]
    info = np.iinfo(np_type)
    lo, hi = max(info.min, -(1 << 20)), min(info.max, 1 << 20)
    return [rng.integers(lo, hi, shape, endpoint=True).astype(np_type) for _ in range(n)]


def _source(batch):
    return lambda: batch


def _run(lib, data, layout, build, args=None, device="cpu", iters=1):
    args = args or {}
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=3, device_id=None if device == "cpu" else 0, seed=5)
    with pipe:
        x = lib.fn.external_source(source=_source(data), batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_source(v), batch=True) for k, v in args.items()}
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(build(lib.fn, x, nodes))
    pipe.build()
    for _ in range(iters):
        (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(data))], out.layout()


def _same(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


# DALI test_gaussian_blur.py's shape/layout cases: (shape, layout, spatial axes)
CASES = [((20, 20, 30, 3), "DHWC", 3), ((20, 20, 30), "", 3), ((20, 30, 3), "HWC", 2), ((20, 30), "HW", 2), ((3, 30, 20), "CWH", 2),
         ((5, 20, 30, 3), "FHWC", 2), ((5, 10, 10, 7, 3), "FDHWC", 3), ((5, 3, 20, 30), "FCHW", 2), ((3, 5, 10, 10, 7), "CFDHW", 3)]


@needs_dali
@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, None), (types.FLOAT, types.FLOAT), (types.UINT8, types.FLOAT)])
@pytest.mark.parametrize("sigma,window", [(1.0, 3), (1.0, 5), (1.0, None), (None, 11), ([1.0, 2.0, 3.0], [7, 5, 9]), (None, [3, 5, 9])])
def test_generic_gaussian_blur_equals_dali(shape, layout, axes, in_type, out_type, sigma, window):
    data = _data(NP[in_type], shape, 2, seed=1)
    kw = {"dtype": out_type} if out_type is not None else {}
    if sigma is not None:
        kw["sigma"] = sigma[:axes] if isinstance(sigma, list) else sigma
    if window is not None:
        kw["window_size"] = window[:axes] if isinstance(window, list) else window
    build = lambda fn, x, a: fn.gaussian_blur(x, **kw)
    ours, l1 = _run(sluice, data, layout or None, build)
    ref, l2 = _run(dali, data, layout or None, build)
    assert l1 == l2
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("np_type", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("to_float", [False, True])
def test_every_input_type_equals_dali(np_type, to_float):
    data = _data(np_type, (31, 17, 3), 3, seed=2)
    build = lambda fn, x, a: fn.gaussian_blur(x, sigma=[1.3, 0.7], dtype=types.FLOAT if to_float else None)
    ours, _ = _run(sluice, data, "HWC", build)
    ref, _ = _run(dali, data, "HWC", build)
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("sigma_dim,window_dim", [(None, 1), (1, None), (2, None), (None, 2), (1, 2), (2, 1)])
def test_per_sample_arguments_equal_dali(sigma_dim, window_dim):
    """test_per_sample_gaussian_blur: sigma ~ U[0.5, 3] and odd windows per sample."""
    rng = np.random.default_rng(3)
    n = 4
    data = _data(np.uint8, (40, 33, 3), n, seed=4)
    args = {}
    if sigma_dim is not None:
        args["sigma"] = [rng.uniform(0.5, 3, [sigma_dim]).astype(np.float32) for _ in range(n)]
    if window_dim is not None:
        args["window_size"] = [(2 * rng.integers(5, 10, [window_dim]) + 1).astype(np.int32) for _ in range(n)]
    build = lambda fn, x, a: fn.gaussian_blur(x, **a)
    ours, _ = _run(sluice, data, "HWC", build, args)
    ref, _ = _run(dali, data, "HWC", build, args)
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("shape,layout", [((1, 10, 6), "DHW"), ((10, 1, 3), "HWC"), ((1, 10, 3), "HWC"), ((1, 10), "HW"), ((10, 1), "HW"), ((3, 3), "HW")])
def test_one_sized_extents_and_windows_wider_than_the_image_equal_dali(shape, layout):
    data = _data(np.float32, shape, 2, seed=5)
    for kw in [{"sigma": 2.0, "window_size": 5}, {"window_size": 31}]:
        build = lambda fn, x, a: fn.gaussian_blur(x, **kw)
        ours, _ = _run(sluice, data, layout, build)
        ref, _ = _run(dali, data, layout, build)
        _same(ours, ref)


def test_empty_extents_give_empty_outputs():
    data = [np.zeros((0, 5, 3), np.uint8), np.full((4, 4, 3), 7, np.uint8)]
    out, _ = _run(sluice, data, "HWC", lambda fn, x, a: fn.gaussian_blur(x, sigma=1.0))
    assert out[0].shape == (0, 5, 3) and (out[1] == 7).all()


@pytest.mark.parametrize("kw,layout,match", [
    ({}, "HWC", r"sigma.*window_size.*both be 0.*sample 0, axis 0"),
    ({"sigma": -1.0}, "HWC", r"sigma.*non-negative.*sample 0"),
    ({"window_size": -11}, "HWC", r"window_size.*non-negative"),
    ({"window_size": 4}, "HWC", r"window_size.*odd length, got 4"),
    ({"sigma": [1.0, 2.0, 3.0]}, "HWC", r"sigma.*3 values; expected 1 or 2"),
    ({"sigma": 1.0}, "DHCW", r"channel-first or channel-last"),
    ({"sigma": 1.0}, "HFWC", r"should begin with 'F' or 'C'"),
    ({"sigma": 1.0, "dtype": types.INT16}, "HWC", r"dtype.*input type.*or FLOAT"),
])
def test_dali_failure_cases(kw, layout, match):
    """test_fail_gaussian_blur: DALI's error cases, as ValueErrors naming the argument."""
    shape = (2, 3, 4, 5, 3)[: len(layout)] if layout else (4, 4, 3)
    data = [np.zeros(shape, np.uint8)]
    with pytest.raises(ValueError, match=r"(?s)gaussian_blur.*" + match):
        _run(sluice, data, layout, lambda fn, x, a: fn.gaussian_blur(x, **kw))


def test_unsupported_type_names_the_sample():
    with pytest.raises(RuntimeError, match=r"(?s)gaussian_blur.*sample 0.*FLOAT64"):
        _run(sluice, [np.zeros((4, 4), np.float64)], "HW", lambda fn, x, a: fn.gaussian_blur(x, sigma=1.0))


@pytest.mark.parametrize("shape,layout,axes", CASES)
@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, None), (types.FLOAT, None), (types.INT16, types.FLOAT), (types.UINT32, None)])
def test_gpu_equals_cpu(shape, layout, axes, in_type, out_type):
    require_gpu()
    data = _data(NP[in_type], shape, 3, seed=6)
    rng = np.random.default_rng(7)
    args = {"sigma": [rng.uniform(0.5, 3, [axes]).astype(np.float32) for _ in range(3)]}
    build = lambda fn, x, a: fn.gaussian_blur(x, sigma=a["sigma"], dtype=out_type)
    cpu, _ = _run(sluice, data, layout or None, build, args)
    gpu, _ = _run(sluice, data, layout or None, build, args, device="gpu", iters=2)
    _same(cpu, gpu)


# ---------------------------------------------------------------- fn.filter
FILTER_TYPES = [np.uint8, np.uint16, np.int16, np.float32]


def _kernels(shapes, seed):
    """DALI's filter_enumerated: 1..n normalised, with some random signs."""
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        k = np.arange(1, int(np.prod(s)) + 1, dtype=np.float32).reshape(s)
        k = k / k.sum() * rng.choice([-1.0, 1.0], size=s).astype(np.float32)
        out.append(k.astype(np.float32))
    return out


def _filter_run(lib, data, layout, kernels, device="cpu", fills=None, anchors=None, **kw):
    def build(fn, x, a):
        extra = [a["fill"]] if fills is not None else []
        akw = {"anchor": a["anchor"]} if anchors is not None else {}
        return fn.filter(x, a["k"], *extra, **akw, **kw)

    args = {"k": kernels}
    if fills is not None:
        args["fill"] = fills
    if anchors is not None:
        args["anchor"] = anchors
    return _run(lib, data, layout, build, args, device=device)


def _close(ours, ref, integer):
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        if integer:
            assert np.max(np.abs(a.astype(np.int64) - b.astype(np.int64)), initial=0) <= 1
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, float(np.max(np.abs(b), initial=0))))


@needs_dali
@pytest.mark.parametrize("np_type", FILTER_TYPES)
@pytest.mark.parametrize("border", ["101", "1001", "clamp", "wrap", "constant"])
@pytest.mark.parametrize("mode", ["same", "valid"])
def test_filter_equals_dali_within_its_fma_and_fft_rounding(np_type, border, mode):
    data = _data(np_type, (23, 37, 3), 3, seed=11)
    kernels = _kernels([(3, 3), (1, 7), (5, 2)], seed=12)
    ours, _ = _filter_run(sluice, data, "HWC", kernels, border=border, mode=mode)
    ref, _ = _filter_run(dali, data, "HWC", kernels, border=border, mode=mode)
    _close(ours, ref, np_type != np.float32)


@needs_dali
@pytest.mark.parametrize("np_type", [np.uint8, np.uint16, np.int16])
@pytest.mark.parametrize("layout,shape", [("HW", (30, 41)), ("HWC", (30, 41, 3)), ("CHW", (2, 30, 41)), ("FHWC", (2, 12, 9, 3)), ("FCHW", (2, 3, 12, 9))])
def test_filter_to_float_is_dalis_bit_for_bit(np_type, layout, shape):
    """Integer inputs to FLOAT with fewer than 50 taps: DALI's OpenCV neither fuses nor uses
    an FFT there, so the sums are the same to the bit."""
    data = _data(np_type, shape, 3, seed=13)
    kernels = _kernels([(3, 3), (7, 7), (2, 5)], seed=14)
    anchors = [np.array(a, np.int32) for a in [(0, 2), (-1, -1), (1, 4)]]
    ours, l1 = _filter_run(sluice, data, layout, kernels, anchors=anchors, dtype=types.FLOAT)
    ref, l2 = _filter_run(dali, data, layout, kernels, anchors=anchors, dtype=types.FLOAT)
    assert l1 == l2
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("np_type", FILTER_TYPES)
def test_filter_constant_border_with_fill_values_equals_dali(np_type):
    data = _data(np_type, (19, 21, 3), 3, seed=15)
    kernels = _kernels([(3, 3), (5, 5), (1, 3)], seed=16)
    fills = [np.array(v, np_type) for v in (7, 100, 0)]
    ours, _ = _filter_run(sluice, data, "HWC", kernels, fills=fills, border="constant")
    ref, _ = _filter_run(dali, data, "HWC", kernels, fills=fills, border="constant")
    _close(ours, ref, np_type != np.float32)


@needs_dali
def test_filter_large_kernels_equal_dali_within_tolerance():
    """27 x 27 and 51 x 3 kernels (DALI's test_filter.py shapes) take DALI's FFT path."""
    data = _data(np.float32, (60, 70), 2, seed=17)
    kernels = _kernels([(27, 27), (51, 3)], seed=18)
    ours, _ = _filter_run(sluice, data, "HW", kernels)
    ref, _ = _filter_run(dali, data, "HW", kernels)
    _close(ours, ref, False)


def test_experimental_filter_is_the_same_operator():
    data = _data(np.uint8, (9, 9, 3), 2, seed=19)
    kernels = _kernels([(3, 3)] * 2, seed=20)
    a, _ = _filter_run(sluice, data, "HWC", kernels)
    b, _ = _run(sluice, data, "HWC", lambda fn, x, args: fn.experimental.filter(x, args["k"]), {"k": kernels})
    _same(a, b)


def test_filter_errors_name_the_operator():
    data = [np.zeros((8, 8, 3), np.uint8)]
    k = [np.ones((3, 3), np.float32)]
    with pytest.raises(ValueError, match=r"(?s)filter.*border.*foo"):
        _filter_run(sluice, data, "HWC", k, border="foo")
    with pytest.raises(ValueError, match=r"(?s)filter.*mode.*full"):
        _filter_run(sluice, data, "HWC", k, mode="full")
    with pytest.raises(ValueError, match=r"(?s)filter.*anchor.*within the filter.*sample 0"):
        _filter_run(sluice, data, "HWC", k, anchors=[np.array([3, 0], np.int32)])
    with pytest.raises(ValueError, match=r"(?s)filter.*dtype"):
        _filter_run(sluice, data, "HWC", k, dtype=types.INT16)
    with pytest.raises(ValueError, match=r"(?s)filter.*layout"):
        _filter_run(sluice, [np.zeros((8, 3, 8), np.uint8)], "HCW", k)
    with pytest.raises(RuntimeError, match=r"(?s)filter.*bigger than the sample"):
        _filter_run(sluice, data, "HWC", [np.ones((9, 3), np.float32)], mode="valid")
    with pytest.raises(ValueError, match=r"(?s)filter.*input 1.*2-D"):
        _filter_run(sluice, data, "HWC", [np.ones(3, np.float32)])


@pytest.mark.parametrize("np_type", FILTER_TYPES + [np.int8])
@pytest.mark.parametrize("border", ["101", "1001", "clamp", "wrap", "constant"])
@pytest.mark.parametrize("mode", ["same", "valid"])
def test_gpu_filter_equals_cpu(np_type, border, mode):
    require_gpu()
    data = _data(np_type, (23, 37, 3), 3, seed=21)
    kernels = _kernels([(3, 3), (1, 7), (9, 9)], seed=22)
    fills = [np.array(v, np_type) for v in (5, 9, 1)] if border == "constant" else None
    for dtype in [None, types.FLOAT]:
        cpu, _ = _filter_run(sluice, data, "HWC", kernels, fills=fills, border=border, mode=mode, dtype=dtype)
        gpu, _ = _filter_run(sluice, data, "HWC", kernels, device="gpu", fills=fills, border=border, mode=mode, dtype=dtype)
        _same(cpu, gpu)


def test_gpu_filter_with_a_numpy_kernel_keeps_the_constant_on_the_cpu():
    """A NumPy kernel becomes a Constant where the gpu operator reads it: on the host."""
    require_gpu()
    data = _data(np.uint8, (20, 30, 3), 2, seed=23)
    k = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32)
    cpu, _ = _run(sluice, data, "HWC", lambda fn, x, a: fn.filter(x, k))
    gpu, _ = _run(sluice, data, "HWC", lambda fn, x, a: fn.filter(x, k), device="gpu")
    _same(cpu, gpu)
