"""`fn.experimental.dilate` / `fn.experimental.erode`: DALI 2.4's test_morphology.py ported.
DALI has them on the gpu only (CV-CUDA) and checks them against OpenCV; here the cpu backend
is checked against a NumPy definition (always) and against OpenCV (where cv2 is installed,
DALI's exact cases), and the gpu backend must equal the cpu bit for bit."""

import numpy as np
import pytest

import sluice
from sluice import fn

from conftest import require_gpu

SEED = 134
BORDERS = ["constant", "replicate", "reflect", "reflect_101", "wrap"]
NP_PAD = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}


# ------------------------------------------------------------------ the NumPy definition
def _identity(dtype, dilate):
    if np.issubdtype(dtype, np.floating):
        return -np.inf if dilate else np.inf
    info = np.iinfo(dtype)
    return info.min if dilate else info.max


def _morph_plane(img, ksize, anchor, border_mode, dilate):
    """One H x W (x C) image: max/min over the (w, h) window placed at (x - ax, y - ay)."""
    kw, kh = (int(v) for v in ksize)
    ax, ay = (int(v) for v in anchor)
    ax = kw // 2 if ax < 0 else ax
    ay = kh // 2 if ay < 0 else ay
    pads = [(ay, kh - 1 - ay), (ax, kw - 1 - ax)] + [(0, 0)] * (img.ndim - 2)
    if border_mode == "constant":
        padded = np.pad(img.astype(np.float64), pads, mode="constant", constant_values=_identity(img.dtype, dilate))
    else:  # NumPy extends periodically past one image size too; a one-pixel axis repeats
        padded = np.pad(img, pads, mode=NP_PAD[border_mode])
    win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(0, 1))
    out = win.max(axis=(-2, -1)) if dilate else win.min(axis=(-2, -1))
    return out.astype(img.dtype)


def np_morph(img, ksize, anchor, layout, border_mode, morph_type, iterations=1):
    """DALI's ref_func with the NumPy definition (iterations: the operation repeated)."""
    dilate = morph_type == "dilate"
    x = img
    for _ in range(iterations):
        if layout in ("HW", "HWC"):
            x = _morph_plane(x, ksize, anchor, border_mode, dilate)
        elif layout == "FHWC":
            x = np.stack([_morph_plane(f, ksize, anchor, border_mode, dilate) for f in x])
        elif layout == "CHW":
            x = np.stack([_morph_plane(c, ksize, anchor, border_mode, dilate) for c in x])
        else:  # FCHW
            x = np.stack([np.stack([_morph_plane(c, ksize, anchor, border_mode, dilate) for c in f]) for f in x])
    return x


# ------------------------------------------------------------------ DALI's data and pipelines
def _random_batch(bs, layout, dtype, channels, lo=64, hi=128, seed=SEED):
    """test_utils.RandomlyShapedDataIterator's shapes: each extent in [lo, hi], C fixed, F in [8, 32]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(bs):
        shape = []
        for d in layout:
            if d == "C":
                shape.append(channels)
            elif d == "F":
                shape.append(int(rng.integers(8, 33)) if hi >= 64 else 2)
            else:
                shape.append(int(rng.integers(lo, hi + 1)))
        if dtype == np.float32:
            out.append(rng.random(shape, dtype=np.float32))
        else:
            out.append(rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype))
    return out


def _ksizes(bs, lo, hi, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(lo, hi, size=2, dtype=np.int32) for _ in range(bs)]


def _anchors(bs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(bs):
        if rng.choice([True, False]):
            out.append(np.array([-1, -1], dtype=np.int32))
        else:
            out.append(rng.integers(0, 3, size=2, dtype=np.int32))
    return out


def _run(data, layout, morph_type, device="cpu", ksizes=None, anchors=None, **kw):
    pipe = sluice.pipeline.Pipeline(batch_size=len(data), num_threads=3, device_id=None if device == "cpu" else 0, seed=5)
    with pipe:
        x = fn.external_source(source=lambda: data, batch=True, layout=layout)
        if device == "gpu":
            x = x.gpu()
        if ksizes is not None:
            kw["mask_size"] = fn.external_source(source=lambda: ksizes, batch=True)
        if anchors is not None:
            kw["anchor"] = fn.external_source(source=lambda: anchors, batch=True)
        op = fn.experimental.dilate if morph_type == "dilate" else fn.experimental.erode
        pipe.set_outputs(op(x, **kw))
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


# DALI's cases: (morph_type, batch, layout, dtype, channels, max_ksize, border_mode). The
# batches are smaller than DALI's 32 (the NumPy reference is slow); the shapes are DALI's.
DALI_CASES = [
    ("dilate", 6, "HWC", np.uint8, 3, 9, "constant"),
    ("dilate", 6, "CHW", np.float32, 1, 4, "constant"),
    ("dilate", 6, "HWC", np.uint16, 1, 5, "reflect"),
    ("dilate", 2, "FHWC", np.float32, 3, 5, "reflect_101"),
    ("dilate", 2, "FCHW", np.uint8, 4, 9, "replicate"),
    ("erode", 6, "HWC", np.uint8, 3, 9, "constant"),
    ("erode", 6, "CHW", np.float32, 1, 4, "constant"),
    ("erode", 6, "HWC", np.uint16, 1, 5, "reflect"),
    ("erode", 2, "FHWC", np.float32, 3, 5, "reflect_101"),
    ("erode", 2, "FCHW", np.uint8, 4, 9, "replicate"),
]


def _dali_case(bs, layout, dtype, channels, max_ksize, seed=SEED):
    hi = 128 if layout[0] != "F" else 40  # sequences: fewer pixels per frame for NumPy's sake
    data = _random_batch(bs, layout, dtype, channels, lo=min(64, hi), hi=hi, seed=seed)
    return data, _ksizes(bs, 3, max_ksize, seed), _anchors(bs, seed)


@pytest.mark.parametrize("morph_type,bs,layout,dtype,channels,max_ksize,border_mode", DALI_CASES)
def test_cpu_equals_the_numpy_definition(morph_type, bs, layout, dtype, channels, max_ksize, border_mode):
    data, ks, anchors = _dali_case(bs, layout, dtype, channels, max_ksize)
    got = _run(data, layout, morph_type, ksizes=ks, anchors=anchors, border_mode=border_mode)
    want = [np_morph(d, k, a, layout, border_mode, morph_type) for d, k, a in zip(data, ks, anchors)]
    _same(got, want)


@pytest.mark.parametrize("morph_type,bs,layout,dtype,channels,max_ksize,border_mode", DALI_CASES)
def test_cpu_equals_opencv(morph_type, bs, layout, dtype, channels, max_ksize, border_mode):
    """DALI's test_dilate_vs_ocv: cv2.dilate / cv2.erode with a rectangular element."""
    cv2 = pytest.importorskip("cv2")
    cv_border = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
                 "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}[border_mode]
    morph = cv2.dilate if morph_type == "dilate" else cv2.erode

    def ref(img, ksize, anchor):
        element = cv2.getStructuringElement(cv2.MORPH_RECT, tuple(int(v) for v in ksize))
        anchor = tuple(int(v) for v in anchor)
        dst = np.zeros_like(img)

        def one(src, out):
            morph(src, element, anchor=anchor, borderType=cv_border, dst=out)

        frames = img if layout[0] == "F" else [img]
        outs = dst if layout[0] == "F" else [dst]
        for f, o in zip(frames, outs):
            if layout[-1] == "C":
                one(f, o)
            else:
                for c in range(f.shape[0]):
                    one(f[c], o[c])
        return dst

    data, ks, anchors = _dali_case(bs, layout, dtype, channels, max_ksize)
    got = _run(data, layout, morph_type, ksizes=ks, anchors=anchors, border_mode=border_mode)
    _same(got, [ref(d, k, a) for d, k, a in zip(data, ks, anchors)])


@pytest.mark.parametrize("morph_type", ["dilate", "erode"])
@pytest.mark.parametrize("border_mode", BORDERS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_every_border_and_type_with_constant_arguments(morph_type, border_mode, dtype):
    data = _random_batch(3, "HWC", dtype, 3, lo=5, hi=30, seed=3) + [_random_batch(1, "HWC", dtype, 2, lo=1, hi=3, seed=4)[0]]
    for kw in [{}, {"mask_size": [5, 2], "anchor": [4, 0]}, {"mask_size": 4}, {"mask_size": [1, 7], "anchor": [0, 6]}, {"mask_size": [40, 3]}]:
        got = _run(data, "HWC", morph_type, border_mode=border_mode, **kw)
        ks = kw.get("mask_size", [3, 3])
        ks = [ks, ks] if np.isscalar(ks) else ks
        want = [np_morph(d, ks, kw.get("anchor", [-1, -1]), "HWC", border_mode, morph_type) for d in data]
        _same(got, want, f"{kw}")


@pytest.mark.parametrize("morph_type", ["dilate", "erode"])
@pytest.mark.parametrize("border_mode", BORDERS)
def test_iterations_repeat_the_operation(morph_type, border_mode):
    data = _random_batch(3, "HW", np.uint8, 1, lo=6, hi=20, seed=8)
    for iterations in [2, 3]:
        got = _run(data, "HW", morph_type, border_mode=border_mode, iterations=iterations, mask_size=[3, 4], anchor=[0, 3])
        _same(got, [np_morph(d, [3, 4], [0, 3], "HW", border_mode, morph_type, iterations) for d in data], f"x{iterations}")


def test_iterations_with_a_constant_border_grow_the_mask_as_dalis_doc_says():
    data = _random_batch(2, "HWC", np.uint8, 3, lo=10, hi=30, seed=9)
    three = _run(data, "HWC", "dilate", iterations=3, mask_size=[3, 5])
    once = _run(data, "HWC", "dilate", mask_size=[3 + 2 * 2, 5 + 2 * 4])
    _same(three, once)


def test_defaults_are_a_centred_3x3_mask_and_a_border_that_never_wins():
    img = np.zeros((5, 6), np.uint8)
    img[0, 0] = 9
    img[4, 3] = 7
    (out,) = _run([img], "HW", "dilate")
    want = np.zeros((5, 6), np.uint8)
    want[0:2, 0:2] = 9
    want[3:5, 2:5] = 7
    np.testing.assert_array_equal(out, want)
    (out,) = _run([np.full((4, 4), 200, np.uint8)], "HW", "erode")
    np.testing.assert_array_equal(out, np.full((4, 4), 200, np.uint8))  # the border is not 0


def test_float_values_order_as_total_order_and_nans_win():
    img = np.array([[-1.0, -0.0, 0.0, np.inf], [-np.inf, 5.0, np.nan, 1e-40]], np.float32)
    (d,) = _run([img], "HW", "dilate", mask_size=[2, 1], anchor=[0, 0], border_mode="replicate")
    (e,) = _run([img], "HW", "erode", mask_size=[2, 1], anchor=[0, 0], border_mode="replicate")
    np.testing.assert_array_equal(d[0], np.array([-0.0, 0.0, np.inf, np.inf], np.float32))
    assert np.signbit(d[0, 0]) and not np.signbit(d[0, 1])
    np.testing.assert_array_equal(e[0], np.array([-1.0, -0.0, 0.0, np.inf], np.float32))
    assert np.signbit(e[0, 1]) and not np.signbit(e[0, 2])
    assert d[1, 0] == 5.0 and np.isnan(d[1, 1]) and np.isnan(d[1, 2]) and d[1, 3] == np.float32(1e-40)
    assert e[1, 0] == -np.inf and np.isnan(e[1, 1]) and np.isnan(e[1, 2])
    # A zero image stays zero (CV-CUDA's float dilate would lift it to FLT_MIN).
    (z,) = _run([np.zeros((4, 4), np.float32)], "HW", "dilate")
    assert (z.view(np.uint32) == 0).all()


def test_no_layout_reads_hw_hwc_fhwc_by_dimensions():
    rng = np.random.default_rng(1)
    for shape, layout in [((9, 7), "HW"), ((9, 7, 3), "HWC"), ((2, 9, 7, 3), "FHWC")]:
        data = [rng.integers(0, 255, shape, endpoint=True).astype(np.uint8)]
        got = _run(data, None, "erode", mask_size=[4, 3], border_mode="wrap")
        _same(got, [np_morph(data[0], [4, 3], [-1, -1], layout, "wrap", "erode")])


def test_empty_samples_give_empty_outputs():
    data = [np.zeros((0, 5, 3), np.uint8), np.zeros((4, 0, 3), np.uint8), np.ones((3, 3, 3), np.uint8)]
    got = _run(data, "HWC", "dilate", mask_size=5)
    assert [g.shape for g in got] == [(0, 5, 3), (4, 0, 3), (3, 3, 3)]


@pytest.mark.parametrize("kw,layout,match", [
    ({"mask_size": 0}, "HWC", r"mask_size.*positive"),
    ({"mask_size": [3, -2]}, "HWC", r"mask_size.*positive"),
    ({"mask_size": [3, 3, 3]}, "HWC", r"mask_size.*3 values"),
    ({"anchor": [3, 0]}, "HWC", r"anchor.*within the mask"),
    ({"mask_size": [5, 2], "anchor": [0, 2]}, "HWC", r"anchor.*within the mask"),
    ({"border_mode": "clamp"}, "HWC", r"border_mode.*Unknown border mode"),
    ({"iterations": 0}, "HWC", r"iterations must be >= 1"),
    ({}, "DHW", r"unsupported layout"),
    ({}, "HWCF", r"unsupported layout"),
])
def test_errors_name_the_operator_and_argument(kw, layout, match):
    shape = {"HWC": (6, 6, 3), "DHW": (2, 6, 6), "HWCF": (6, 6, 3, 2)}[layout]
    with pytest.raises(ValueError, match=r"(?s)dilate.*" + match):
        _run([np.zeros(shape, np.uint8)], layout, "dilate", **kw)


def test_per_sample_errors_name_the_sample():
    data = [np.zeros((6, 6), np.uint8)] * 2
    with pytest.raises(ValueError, match=r"(?s)erode.*anchor.*sample 1"):
        _run(data, "HW", "erode", ksizes=[np.array([3, 3], np.int32)] * 2, anchors=[np.array([0, 0], np.int32), np.array([0, 5], np.int32)])


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float64])
def test_unsupported_types_are_refused(dtype):
    with pytest.raises(RuntimeError, match=r"(?s)dilate.*unsupported input type"):
        _run([np.zeros((4, 4), dtype)], "HW", "dilate")


# ------------------------------------------------------------------ gpu == cpu
@pytest.mark.parametrize("morph_type,bs,layout,dtype,channels,max_ksize,border_mode", DALI_CASES)
def test_gpu_equals_cpu_on_dalis_cases(morph_type, bs, layout, dtype, channels, max_ksize, border_mode):
    require_gpu()
    data, ks, anchors = _dali_case(bs, layout, dtype, channels, max_ksize, seed=11)
    cpu = _run(data, layout, morph_type, ksizes=ks, anchors=anchors, border_mode=border_mode)
    gpu = _run(data, layout, morph_type, device="gpu", ksizes=ks, anchors=anchors, border_mode=border_mode)
    _same(gpu, cpu)


@pytest.mark.parametrize("morph_type", ["dilate", "erode"])
@pytest.mark.parametrize("border_mode", BORDERS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_gpu_equals_cpu_with_iterations_large_masks_and_specials(morph_type, border_mode, dtype):
    require_gpu()
    data = _random_batch(4, "HWC", dtype, 3, lo=1, hi=70, seed=12)
    if dtype == np.float32:
        data[0].flat[::7] = np.nan
        data[0].flat[1::11] = -np.inf
        data[1].flat[::5] = -0.0
    for kw in [{"iterations": 3, "mask_size": [2, 5]}, {"mask_size": [31, 17], "anchor": [30, 0]}, {"mask_size": 1}]:
        cpu = _run(data, "HWC", morph_type, border_mode=border_mode, **kw)
        gpu = _run(data, "HWC", morph_type, device="gpu", border_mode=border_mode, **kw)
        for a, b in zip(gpu, cpu):
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"), err_msg=f"{kw}")


def test_the_pipeline_goes_on_after_a_bad_sample():
    """A bad per-sample anchor fails its iteration only; the next one runs."""
    anchors = iter([[np.array([0, 9], np.int32)], [np.array([0, 2], np.int32)]])
    img = np.arange(30, dtype=np.uint8).reshape(5, 6)
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False)
    with pipe:
        x = fn.external_source(source=lambda: [img], batch=True, layout="HW")
        a = fn.external_source(source=lambda: next(anchors), batch=True)
        pipe.set_outputs(fn.experimental.erode(x, anchor=a))
    pipe.build()
    with pytest.raises(ValueError, match=r"(?s)erode.*anchor.*sample 0"):
        pipe.run()
    (out,) = pipe.run()
    np.testing.assert_array_equal(np.array(out.at(0)), np_morph(img, [3, 3], [0, 2], "HW", "constant", "erode"))
