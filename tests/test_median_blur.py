"""`fn.experimental.median_blur`: DALI 2.4's test_median_blur.py ported. DALI has it on the
gpu only (CV-CUDA) and checks it against cv2.medianBlur; here the cpu backend is checked
against a NumPy definition (always) and against OpenCV (where cv2 is installed, DALI's exact
cases), and the gpu backend must equal the cpu bit for bit."""

import numpy as np
import pytest

import sluice
from sluice import fn

from conftest import require_gpu

SEED = 1313


def _median_plane(img, ksize):
    """One H x W (x C) image: the middle value of each (w, h) window, edges replicated."""
    kw, kh = (int(v) for v in ksize)
    pads = [(kh // 2, kh // 2), (kw // 2, kw // 2)] + [(0, 0)] * (img.ndim - 2)
    padded = np.pad(img, pads, mode="edge")
    win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(0, 1))
    win = win.reshape(win.shape[:-2] + (kh * kw,))
    return np.partition(win, (kh * kw) // 2, axis=-1)[..., (kh * kw) // 2]


def np_median(img, ksize, layout):
    if layout in ("HW", "HWC"):
        return _median_plane(img, ksize)
    if layout in ("FHWC", "CHW"):
        return np.stack([_median_plane(f, ksize) for f in img])
    return np.stack([np.stack([_median_plane(c, ksize) for c in f]) for f in img])  # FCHW


def _random_batch(bs, layout, dtype, channels, lo=64, hi=256, seed=SEED, frames=(8, 32)):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(bs):
        shape = []
        for d in layout:
            if d == "C":
                shape.append(channels)
            elif d == "F":
                shape.append(int(rng.integers(frames[0], frames[1] + 1)))
            else:
                shape.append(int(rng.integers(lo, hi + 1)))
        if dtype == np.float32:
            out.append((rng.random(shape, dtype=np.float32) * 200 - 100).astype(np.float32))
        else:
            out.append(rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype))
    return out


def _ksizes(bs, lo, hi, seed):
    """DALI's ksize_src: odd sizes from lo to hi, one per sample."""
    rng = np.random.default_rng(seed)
    return [rng.integers(lo // 2, hi // 2 + 1, size=1, dtype=np.int32) * 2 + 1 for _ in range(bs)]


def _run(data, layout, device="cpu", window_sizes=None, **kw):
    pipe = sluice.pipeline.Pipeline(batch_size=len(data), num_threads=3, device_id=None if device == "cpu" else 0, seed=5)
    with pipe:
        x = fn.external_source(source=lambda: data, batch=True, layout=layout)
        if device == "gpu":
            x = x.gpu()
        if window_sizes is not None:
            k = fn.external_source(source=lambda: window_sizes, batch=True)
            kw["window_size"] = fn.cat(k, k)
        pipe.set_outputs(fn.experimental.median_blur(x, **kw))
    pipe.build()
    (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    assert out.layout() == (layout or "")
    return [np.array(out.at(i)) for i in range(len(data))]


def _same(got, want, what=""):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what} sample {i}"
        np.testing.assert_array_equal(a, b, err_msg=f"{what} sample {i}")


# DALI's test_median_blur_vs_ocv cases: (batch, layout, dtype, channels, max_ksize); batches
# and sequence frames fewer than DALI's (the NumPy reference is slow), shapes DALI's.
DALI_CASES = [
    (8, "HWC", np.uint8, 3, 9),
    (8, "CHW", np.float32, 4, 5),
    (8, "HWC", np.uint16, 1, 5),
    (2, "FHWC", np.float32, 3, 5),
    (2, "FCHW", np.uint8, 1, 9),
]
# test_median_blur_const_ksize_vs_ocv: (batch, layout, dtype, channels, window_size)
CONST_CASES = [
    (8, "HWC", np.uint8, 3, (7, 7)),
    (8, "CHW", np.float32, 4, 3),
    (2, "FCHW", np.uint8, 1, (9, 9)),
]


def _case_data(bs, layout, dtype, channels, seed=SEED):
    return _random_batch(bs, layout, dtype, channels, frames=(2, 4), seed=seed)


@pytest.mark.parametrize("bs,layout,dtype,channels,max_ksize", DALI_CASES)
def test_cpu_equals_the_numpy_definition(bs, layout, dtype, channels, max_ksize):
    data = _case_data(bs, layout, dtype, channels)
    ks = _ksizes(bs, 3, max_ksize, SEED)
    got = _run(data, layout, window_sizes=ks)
    _same(got, [np_median(d, (k[0], k[0]), layout) for d, k in zip(data, ks)])


@pytest.mark.parametrize("bs,layout,dtype,channels,ksize", CONST_CASES)
def test_constant_window_equals_the_numpy_definition(bs, layout, dtype, channels, ksize):
    data = _case_data(bs, layout, dtype, channels)
    got = _run(data, layout, window_size=ksize)
    k = ksize if isinstance(ksize, tuple) else (ksize, ksize)
    _same(got, [np_median(d, k, layout) for d in data])


def _cv2_ref(cv2, img, ksize, layout):
    """DALI's ref_func: cv2.medianBlur per image (per channel plane for CHW)."""
    dst = np.zeros_like(img)
    frames = img if layout[0] == "F" else [img]
    outs = dst if layout[0] == "F" else [dst]
    for f, o in zip(frames, outs):
        if layout[-1] == "C":
            cv2.medianBlur(f, ksize=ksize, dst=o)
        else:
            for c in range(f.shape[0]):
                cv2.medianBlur(f[c], ksize, dst=o[c])
    return dst


@pytest.mark.parametrize("bs,layout,dtype,channels,max_ksize", DALI_CASES)
def test_cpu_equals_opencv(bs, layout, dtype, channels, max_ksize):
    cv2 = pytest.importorskip("cv2")
    data = _case_data(bs, layout, dtype, channels)
    ks = _ksizes(bs, 3, max_ksize, SEED)
    got = _run(data, layout, window_sizes=ks)
    _same(got, [_cv2_ref(cv2, d, int(k[0]), layout) for d, k in zip(data, ks)])


@pytest.mark.parametrize("bs,layout,dtype,channels,ksize", CONST_CASES)
def test_constant_window_equals_opencv(bs, layout, dtype, channels, ksize):
    cv2 = pytest.importorskip("cv2")
    data = _case_data(bs, layout, dtype, channels)
    got = _run(data, layout, window_size=ksize)
    k = ksize[0] if isinstance(ksize, tuple) else ksize
    _same(got, [_cv2_ref(cv2, d, k, layout) for d in data])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_rectangular_large_and_unit_windows(dtype):
    data = _random_batch(3, "HWC", dtype, 3, lo=1, hi=40, seed=2)
    for win in [(1, 1), (3, 1), (1, 7), (5, 3), (3, 9), (11, 11), (17, 15), (1, 101)]:
        got = _run(data, "HWC", window_size=list(win))
        _same(got, [np_median(d, win, "HWC") for d in data], f"{win}")


def test_default_window_is_3x3_and_edges_replicate():
    img = np.array([[0, 0, 9, 0], [0, 9, 9, 0], [9, 0, 0, 0]], np.uint8)
    (out,) = _run([img], "HW")
    np.testing.assert_array_equal(out, np_median(img, (3, 3), "HW"))
    # (2, 0): rows 1, 2, 2 x columns 0, 0, 1 -> 0 0 9 9 9 0 9 9 0: five 9s
    assert out[2, 0] == 9 and out[0, 0] == 0


def test_floats_sort_as_total_order_with_nans_on_top():
    img = np.array([[np.nan, np.nan, 1.0, -0.0, 0.0, -np.inf, np.nan]], np.float32)
    (out,) = _run([img], "HW", window_size=[3, 1])
    # windows (edges replicated): [n n n] [n n 1] [n 1 -0] [1 -0 0] [-0 0 -inf] [0 -inf n] [-inf n n]
    assert np.isnan(out[0, 0]) and np.isnan(out[0, 1])
    assert out[0, 2] == 1.0 and out[0, 3] == 0.0 and not np.signbit(out[0, 3])
    assert out[0, 4] == 0.0 and np.signbit(out[0, 4])
    assert out[0, 5] == 0.0 and not np.signbit(out[0, 5]) and np.isnan(out[0, 6])


def test_no_layout_and_empty_samples():
    rng = np.random.default_rng(4)
    data = [rng.integers(0, 255, (9, 7, 3), endpoint=True).astype(np.uint8), np.zeros((0, 4, 3), np.uint8)]
    got = _run(data, None, window_size=5)
    _same(got[:1], [np_median(data[0], (5, 5), "HWC")])
    assert got[1].shape == (0, 4, 3)


@pytest.mark.parametrize("kw,layout,match", [
    ({"window_size": 4}, "HWC", r"window_size.*odd and positive"),
    ({"window_size": [3, 2]}, "HWC", r"window_size.*odd and positive"),
    ({"window_size": 0}, "HWC", r"window_size.*odd and positive"),
    ({"window_size": [-3, 3]}, "HWC", r"window_size.*odd and positive"),
    ({"window_size": [3, 3, 3]}, "HWC", r"window_size.*3 values"),
    ({}, "DHW", r"unsupported layout"),
    ({}, "CWH", r"unsupported layout"),
])
def test_errors_name_the_operator_and_argument(kw, layout, match):
    shape = (6, 6, 3) if layout == "HWC" else (3, 6, 6)
    with pytest.raises(ValueError, match=r"(?s)median_blur.*" + match):
        _run([np.zeros(shape, np.uint8)], layout, **kw)


def test_per_sample_errors_name_the_sample():
    with pytest.raises(ValueError, match=r"(?s)median_blur.*window_size.*sample 1"):
        _run([np.zeros((6, 6), np.uint8)] * 2, "HW", window_sizes=[np.array([3], np.int32), np.array([2], np.int32)])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float64])
def test_unsupported_types_are_refused(dtype):
    with pytest.raises(RuntimeError, match=r"(?s)median_blur.*unsupported input type"):
        _run([np.zeros((4, 4), dtype)], "HW")


# ------------------------------------------------------------------ gpu == cpu
@pytest.mark.parametrize("bs,layout,dtype,channels,max_ksize", DALI_CASES)
def test_gpu_equals_cpu_on_dalis_cases(bs, layout, dtype, channels, max_ksize):
    require_gpu()
    data = _random_batch(bs, layout, dtype, channels, seed=21)
    ks = _ksizes(bs, 3, max_ksize, 22)
    _same(_run(data, layout, device="gpu", window_sizes=ks), _run(data, layout, window_sizes=ks))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_gpu_equals_cpu_on_large_windows_and_specials(dtype):
    require_gpu()
    data = _random_batch(4, "HWC", dtype, 3, lo=1, hi=60, seed=23)
    if dtype == np.float32:
        data[0].flat[::7] = np.nan
        data[0].flat[1::11] = -np.inf
        data[1].flat[::5] = -0.0
    for win in [(1, 1), (5, 3), (9, 9), (11, 9), (15, 15), (3, 41)]:
        cpu = _run(data, "HWC", window_size=list(win))
        gpu = _run(data, "HWC", device="gpu", window_size=list(win))
        for a, b in zip(gpu, cpu):
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"), err_msg=f"{win}")
