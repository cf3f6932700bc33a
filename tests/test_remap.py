"""`fn.experimental.remap` (GPU-only in DALI 2.4, through NPP; Sluice has cpu and gpu): the
reference is the one DALI's test_remap.py uses, `cv2.remap` with a constant 0 border, which
Sluice's arithmetic (OpenCV 5.0's) equals bit for bit; DALI's cases ported (their maps, nearest,
pixel_origin="center"; random images instead of DALI_EXTRA's JPEGs). Without cv2 the same cases
run against a NumPy model: nearest exactly, linear within one unit (the model has no fused
multiply-add). Also: the corner origin, sequences with shared and per-frame maps, errors, gpu
equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import types

from conftest import require_gpu

NP_TYPES = [np.uint8, np.uint16, np.int16, np.float32]


def _images(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if np_type == np.float32:
            out.append((rng.random(s) * 300 - 20).astype(np.float32))
        else:
            info = np.iinfo(np_type)
            out.append(rng.integers(info.min, int(info.max) + 1, s).astype(np_type))
    return out


def update_map(mode, shape, nimages=1, seed=0):
    """DALI's update_map: maps for 'identity', 'xflip', 'yflip', 'xyflip', 'random' (shape: H, W)."""
    rng = np.random.default_rng(seed)
    mapsx, mapsy = [], []
    for _ in range(nimages):
        map_x = np.tile(np.arange(shape[1]), [shape[0], 1])
        map_y = np.tile(np.arange(shape[0])[:, np.newaxis], [1, shape[1]])
        if mode == "xflip":
            map_x = shape[1] - map_x
        elif mode == "yflip":
            map_y = shape[0] - map_y
        elif mode == "xyflip":
            map_x, map_y = shape[1] - map_x, shape[0] - map_y
        elif mode == "random":
            map_x = rng.uniform(low=0, high=map_x.shape[1], size=shape)
            map_y = rng.uniform(low=0, high=map_y.shape[0], size=shape)
        mapsx.append(map_x.astype(np.float32))
        mapsy.append(map_y.astype(np.float32))
    return mapsx, mapsy


def _source(batch):
    return lambda: batch


def _remap(images, mapx, mapy, layout="HWC", device="cpu", iters=1, **kw):
    pipe = sluice.pipeline.Pipeline(batch_size=len(images), num_threads=3, device_id=None if device == "cpu" else 0)
    with pipe:
        x = sluice.fn.external_source(source=_source(images), batch=True, layout=layout)
        mx = sluice.fn.external_source(source=_source(mapx), batch=True)
        my = sluice.fn.external_source(source=_source(mapy), batch=True)
        if device == "gpu":
            x, mx, my = x.gpu(), mx.gpu(), my.gpu()
        pipe.set_outputs(sluice.fn.experimental.remap(x, mx, my, device=device, **kw))
    pipe.build()
    for _ in range(iters):
        (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(images))]


def _numpy_remap(img, mapx, mapy, linear):
    """OpenCV's remap with a constant 0 border, in NumPy: nearest rounds half to even; linear
    interpolates the four taps around the point (f32, without OpenCV's fused multiply-adds)."""
    h, w, c = img.shape
    out_type = img.dtype
    f = img.astype(np.float32)

    def tap(ix, iy):
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        v = f[np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]
        return np.where(inside[..., None], v, np.float32(0))

    with np.errstate(invalid="ignore"):
        if not linear:
            v = tap(np.rint(mapx).astype(np.int64), np.rint(mapy).astype(np.int64))
        else:
            x0, y0 = np.floor(mapx), np.floor(mapy)
            a, b = (mapx - x0).astype(np.float32)[..., None], (mapy - y0).astype(np.float32)[..., None]
            x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
            p00, p01, p10, p11 = tap(x0, y0), tap(x0 + 1, y0), tap(x0, y0 + 1), tap(x0 + 1, y0 + 1)
            v0, v1 = p00 + a * (p01 - p00), p10 + a * (p11 - p10)
            v = v0 + b * (v1 - v0)
    if out_type == np.float32:
        return v.astype(np.float32)
    info = np.iinfo(out_type)
    return np.clip(np.rint(v), info.min, info.max).astype(out_type)


def _cv2_remap(img, mapx, mapy, linear):
    import cv2

    out = cv2.remap(img, mapx, mapy, cv2.INTER_LINEAR if linear else cv2.INTER_NEAREST, cv2.BORDER_CONSTANT, 0)
    return out.reshape(img.shape)


def _check(ours, img, mapx, mapy, linear, reference):
    want = reference(img, mapx, mapy, linear)
    assert ours.shape == want.shape and ours.dtype == want.dtype
    if reference is _cv2_remap or not linear:
        np.testing.assert_array_equal(ours, want)
    elif ours.dtype == np.float32:
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-3)
    else:
        assert np.abs(ours.astype(np.int64) - want.astype(np.int64)).max() <= 1


@pytest.fixture(params=["cv2", "numpy"])
def reference(request):
    if request.param == "cv2":
        pytest.importorskip("cv2")
        return _cv2_remap
    return _numpy_remap


@pytest.mark.parametrize("map_mode", ["identity", "xflip", "yflip", "xyflip", "random"])
def test_dali_remap_cases(map_mode, reference):
    """test_remap.py's RemapTest.test_remap: nearest, pixel_origin="center", against cv2.remap
    (DALI allows 1% of the pixels to differ; Sluice's are equal)."""
    shape = (120, 160)
    images = _images(np.uint8, [shape + (3,)] * 4, seed=1)
    mapx, mapy = update_map(map_mode, shape, nimages=4, seed=2)
    out = _remap(images, mapx, mapy, interp=types.INTERP_NN, pixel_origin="center")
    for o, img, mx, my in zip(out, images, mapx, mapy):
        _check(o, img, mx, my, False, reference)


@pytest.mark.parametrize("np_type", NP_TYPES)
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_every_type_against_the_reference(np_type, channels, interp, reference):
    if reference is _numpy_remap and np_type == np.int16 and interp == types.INTERP_LINEAR:
        pytest.skip("INT16 linear interpolates at 1/32 pixel steps (OpenCV's older path): checked against cv2 only")
    # Widths on and off OpenCV's 16-pixel vector step; points around and past the image, on
    # pixel centres and on halves.
    rng = np.random.default_rng(3)
    for h, w in [(37, 61), (16, 32), (5, 3)]:
        images = _images(np_type, [(h, w, channels)] * 2, seed=w)
        gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
        mapx = [rng.uniform(-2, w + 2, (h, w)).astype(np.float32), (gx * 0.5 + 0.25).astype(np.float32)]
        mapy = [rng.uniform(-2, h + 2, (h, w)).astype(np.float32), (gy + 0.5).astype(np.float32)]
        out = _remap(images, mapx, mapy, interp=interp, pixel_origin="center")
        for o, img, mx, my in zip(out, images, mapx, mapy):
            _check(o, img, mx, my, interp == types.INTERP_LINEAR, reference)


@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_corner_origin_is_the_maps_less_half_a_pixel(interp, reference):
    """pixel_origin="corner" (the default) subtracts 0.5 from the maps (in f32), as DALI does."""
    h, w = 24, 40
    images = _images(np.uint8, [(h, w, 3)] * 2, seed=4)
    mapx, mapy = update_map("random", (h, w), nimages=2, seed=5)
    out = _remap(images, mapx, mapy, interp=interp)
    for o, img, mx, my in zip(out, images, mapx, mapy):
        _check(o, img, mx - np.float32(0.5), my - np.float32(0.5), interp == types.INTERP_LINEAR, reference)


def test_sequences_take_per_frame_or_shared_maps():
    frames, h, w = 3, 10, 12
    video = _images(np.uint8, [(frames, h, w, 3)], seed=6)
    mx, my = update_map("random", (h, w), nimages=frames, seed=7)
    per_frame = _remap(video, [np.stack(mx)], [np.stack(my)], layout="FHWC", interp=types.INTERP_NN, pixel_origin="center")[0]
    shared = _remap(video, [mx[0]], [my[0]], layout="FHWC", interp=types.INTERP_NN, pixel_origin="center")[0]
    for f in range(frames):
        np.testing.assert_array_equal(per_frame[f], _numpy_remap(video[0][f], mx[f], my[f], False))
        np.testing.assert_array_equal(shared[f], _numpy_remap(video[0][f], mx[0], my[0], False))


def test_errors_name_the_operator_the_input_and_the_sample():
    images = _images(np.uint8, [(4, 5, 3)] * 2, seed=8)
    good = [np.zeros((4, 5), np.float32)] * 2
    bad = [np.zeros((4, 5), np.float32), np.zeros((4, 6), np.float32)]
    with pytest.raises(ValueError, match=r"(?s)remap.*mapx.*sample 1.*do not match"):
        _remap(images, bad, bad)
    with pytest.raises(ValueError, match=r"(?s)remap.*mapy.*sample 1.*maps shapes do not match"):
        _remap(images, good, bad)
    with pytest.raises(RuntimeError, match=r"(?s)remap.*sample 0.*1 and 3 channels"):
        _remap(_images(np.uint8, [(4, 5, 4)], seed=9), good[:1], good[:1])
    with pytest.raises(RuntimeError, match=r"(?s)remap.*maps must be FLOAT"):
        _remap(images, [np.zeros((4, 5), np.float64)] * 2, good)
    with pytest.raises(RuntimeError, match=r"(?s)remap.*CHW.*HWC, FHWC"):
        _remap(_images(np.uint8, [(3, 4, 5)], seed=10), good[:1], good[:1], layout="CHW")
    with pytest.raises(ValueError, match=r"(?s)remap.*pixel_origin"):
        _remap(images, good, good, pixel_origin="middle")
    with pytest.raises(ValueError, match=r"(?s)remap.*interp.*INTERP_CUBIC is not supported"):
        _remap(images, good, good, interp=types.INTERP_CUBIC)
    # The pipeline goes on working after an error.
    assert _remap(images, good, good)[0].shape == (4, 5, 3)


@pytest.mark.parametrize("np_type", NP_TYPES)
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_gpu_equals_cpu(np_type, interp):
    require_gpu()
    shapes = [(37, 61, 3), (16, 300, 1), (5, 3, 3)]
    images = _images(np_type, shapes, seed=11)
    rng = np.random.default_rng(12)
    mapx = [rng.uniform(-2, s[1] + 2, s[:2]).astype(np.float32) for s in shapes]
    mapy = [rng.uniform(-2, s[0] + 2, s[:2]).astype(np.float32) for s in shapes]
    mapx[1][0, :7] = [np.nan, np.inf, -np.inf, 1e10, -1e10, 2.5, -0.5]
    for origin in ["corner", "center"]:
        cpu = _remap(images, mapx, mapy, interp=interp, pixel_origin=origin)
        gpu = _remap(images, mapx, mapy, device="gpu", iters=2, interp=interp, pixel_origin=origin)
        for c, g in zip(cpu, gpu):
            np.testing.assert_array_equal(c, g)


def test_gpu_sequences_equal_cpu():
    require_gpu()
    video = _images(np.float32, [(3, 10, 12, 3), (2, 10, 12, 3)], seed=13)
    mx, my = update_map("random", (10, 12), nimages=3, seed=14)
    # Per-frame maps, then one map for every frame.
    for maps_x, maps_y in [([np.stack(mx), np.stack(mx[:2])], [np.stack(my), np.stack(my[:2])]), ([mx[0], mx[1]], [my[0], my[1]])]:
        cpu = _remap(video, maps_x, maps_y, layout="FHWC")
        gpu = _remap(video, maps_x, maps_y, layout="FHWC", device="gpu")
        for c, g in zip(cpu, gpu):
            np.testing.assert_array_equal(c, g)
