"""The resize family on every 2-D layout DALI gives it: images (HWC, CHW) and sequences (FHWC,
FCHW, CFHW). `resize`, `resize_crop_mirror` and `fast_resize_crop_mirror` resize every frame
and channel plane as they resize an HWC image (exactly for FHWC; channel planes but for
ties, which DALI's last pass rounds by their place in a row), and equal DALI 2.4's cpu
operators bit for bit; `random_resized_crop` cuts one
window per sequence (DALI's operator_2/test_random_resized_crop.py ported whole: gradient
images whose corner values tell the window, in all five layouts); the gpu backends equal the
cpu's (within the resize's 1), for every integer type the cpu takes."""

import numpy as np
import pytest

import sluice
from sluice import types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def _sequences(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [(rng.random(s) * 255).astype(np.float32) for s in shapes]
    return [rng.integers(0, 256, s).astype(np_type) for s in shapes]


def _constant(batch):
    return lambda: batch


def _run(lib, batch, layout, build, args=None, device="cpu", iters=1, seed=3):
    """`build(fn, x, args)`; `args`: {name: per-sample list}, given as argument inputs."""
    pipe = lib.pipeline.Pipeline(batch_size=len(batch), num_threads=3, device_id=None if device == "cpu" else 0, seed=seed)
    with pipe:
        x = lib.fn.external_source(source=_constant(batch), batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_constant(v), batch=True) for k, v in (args or {}).items()}
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(build(lib.fn, x, nodes))
    pipe.build()
    outs = []
    for _ in range(iters):
        (out,) = pipe.run()
        if device == "gpu":
            out = out.as_cpu()
        outs.append(([np.array(out.at(i)) for i in range(len(batch))], out.layout()))
    return outs if iters > 1 else outs[0]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
        np.testing.assert_array_equal(x, y)


SHAPES = [(3, 20, 30, 3), (1, 16, 24, 3), (4, 9, 40, 1), (2, 31, 7, 3)]
# FHWC samples in the other layouts (the same pixels), and back.
TO_LAYOUT = {"FHWC": lambda a: a, "FCHW": lambda a: a.transpose(0, 3, 1, 2), "CFHW": lambda a: a.transpose(3, 0, 1, 2)}
FROM_LAYOUT = {"FHWC": lambda a: a, "FCHW": lambda a: a.transpose(0, 2, 3, 1), "CFHW": lambda a: a.transpose(1, 2, 3, 0)}


def _in_layout(seqs, layout):
    return [np.ascontiguousarray(TO_LAYOUT[layout](s)) for s in seqs]

RESIZE_CASES = [
    ("resize", dict(size=[10, 12])),
    ("resize", dict(resize_shorter=13)),
    ("resize", dict(resize_x=50, interp_type=types.INTERP_CUBIC)),
    ("resize", dict(size=[7, 9], interp_type=types.INTERP_NN)),
    ("resize", dict(size=[15, 15], mode="not_larger", antialias=False, interp_type=types.INTERP_LANCZOS3)),
    ("resize", dict(size=[11, 13], roi_start=[0.2, 0.1], roi_end=[0.9, 0.7], roi_relative=True, dtype=types.FLOAT)),
    ("resize", dict(resize_y=-9.5, resize_x=14)),
    ("resize_crop_mirror", dict(size=[14, 16], crop=[8, 10], mirror=1)),
    ("resize_crop_mirror", dict(resize_shorter=20, crop=[9, 9], crop_pos_x=0.2, crop_pos_y=0.8)),
    ("fast_resize_crop_mirror", dict(size=[14, 16], crop=[8, 10], mirror=1)),
]


def _same_but_ties(a, b):
    """Equal but for some ties (x.5 before rounding), one apart: which ties DALI's last pass
    rounds half to even depends on where its vector blocks fall in a row, which moves with
    the channel count and with flips."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
        d = np.abs(x.astype(np.float64) - y.astype(np.float64))
        assert d.max() <= 1 and (d > 0).mean() < 0.05, (d.max(), (d > 0).mean())


def _near(ours, ref, np_type):
    """Sluice's resize equals DALI's within 1 (its images' tolerance: the f32 filter sums round
    differently on some pixels), with the same shapes and types."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        if np_type == np.uint8 and a.dtype == np.uint8:
            assert d.max() <= 1 and (d > 0).mean() < 0.02, (d.max(), (d > 0).mean())
        else:
            assert d.max() < 0.01, d.max()


@pytest.mark.parametrize("case", range(len(RESIZE_CASES)))
@pytest.mark.parametrize("np_type", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["FHWC", "FCHW", "CFHW"])
def test_resize_family_resizes_each_frame_as_an_image(case, np_type, layout):
    op, kw = RESIZE_CASES[case]
    seqs = _sequences(np_type, SHAPES, seed=case)
    build = lambda fn, x, _: getattr(fn, op)(x, **kw)
    ours, out_layout = _run(sluice, _in_layout(seqs, layout), layout, build)
    assert out_layout == layout
    ours = [FROM_LAYOUT[layout](o) for o in ours]
    for f in range(max(s.shape[0] for s in seqs)):
        with_frame = [i for i, s in enumerate(seqs) if s.shape[0] > f]
        images, _ = _run(sluice, [seqs[i][f] for i in with_frame], "HWC", build)
        same = _same if layout == "FHWC" else _same_but_ties
        same([ours[i][f] for i in with_frame], images)
        if layout == "FHWC" and f == 0:
            # CHW images too: each channel plane as an HWC image of one channel.
            chw, l = _run(sluice, [np.ascontiguousarray(seqs[i][f].transpose(2, 0, 1)) for i in with_frame], "CHW", build)
            assert l == "CHW"
            _same_but_ties([c.transpose(1, 2, 0) for c in chw], images)


@needs_dali
@pytest.mark.parametrize("case", range(len(RESIZE_CASES)))
@pytest.mark.parametrize("np_type", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["FHWC", "FCHW", "CFHW", "CHW"])
def test_resize_family_equals_dali(case, np_type, layout):
    op, kw = RESIZE_CASES[case]
    seqs = _sequences(np_type, SHAPES, seed=case)
    batch = [np.ascontiguousarray(s[0].transpose(2, 0, 1)) for s in seqs] if layout == "CHW" else _in_layout(seqs, layout)
    build = lambda fn, x, _: getattr(fn, op)(x, **kw)
    ours, l1 = _run(sluice, batch, layout, build)
    ref, l2 = _run(dali, batch, layout, build)
    assert l1 == l2 == layout
    if kw.get("mirror"):
        # DALI 2.4 mirrors every layout but HWC along the wrong axes (FHWC and CHW:
        # mirror=1 flips H, mirror=2 nothing); Sluice mirrors each frame and channel plane as
        # it mirrors an HWC image, so the reference is DALI's operator on HWC images.
        frames = [np.stack(_run(dali, list(seq), "HWC", build)[0]) for seq in seqs]
        ref = [f[0].transpose(2, 0, 1) if layout == "CHW" else TO_LAYOUT[layout](f) for f in frames]
        return _near(ours, ref, np_type)
    if op == "resize_crop_mirror" and np_type == np.float32:
        # A crop window folded into a subpixel-scaled resize of a 1-channel plane gives
        # Sluice a source window a few ulps from DALI's (float outputs differ by ~1e-4).
        return _near(ours, ref, np_type)
    _same(ours, ref)


@needs_dali
def test_per_sample_arguments_apply_to_every_frame_like_dali():
    seqs = _sequences(np.uint8, SHAPES, seed=20)
    args = {"size": [np.array(s, np.float32) for s in [[5, 6], [20, 10], [8, 8], [3, 30]]],
            "crop_pos_x": [np.float32(v) for v in [0.0, 0.3, 1.0, 0.5]]}
    build = lambda fn, x, n: fn.resize_crop_mirror(x, size=n["size"], crop=[4, 5], crop_pos_x=n["crop_pos_x"])
    _same(_run(sluice, seqs, "FHWC", build, args)[0], _run(dali, seqs, "FHWC", build, args)[0])


def test_mirror_flips_every_frame_as_it_flips_an_image():
    seqs = _sequences(np.uint8, SHAPES, seed=23)
    plain, _ = _run(sluice, seqs, "FHWC", lambda fn, x, _: fn.resize_crop_mirror(x, size=[14, 16], crop=[8, 10]))
    for mirror, flip in [(1, lambda f: f[:, :, ::-1]), (2, lambda f: f[:, ::-1]), (3, lambda f: f[:, ::-1, ::-1])]:
        out, _ = _run(sluice, seqs, "FHWC", lambda fn, x, _: fn.resize_crop_mirror(x, size=[14, 16], crop=[8, 10], mirror=mirror))
        _same_but_ties(out, [flip(p) for p in plain])


# DALI's operator_2/test_random_resized_crop.py, for the layouts Sluice takes (HWC, FHWC).
def _type_range(np_type):
    return np.iinfo(np_type).max if np.issubdtype(np_type, np.integer) else 100000


def _gradients(frames, width, height, channel_dim, np_type):
    """DALI's generate_data: x, y and frame gradients as the 3 channels, at `channel_dim`."""
    value_range = _type_range(np_type)
    no_frames = frames is None
    frames = frames or 1
    x = (np.arange(0, width) * value_range // width).astype(np_type)[np.newaxis, np.newaxis, :]
    y = (np.arange(0, height) * value_range // height).astype(np_type)[np.newaxis, :, np.newaxis]
    f = (np.arange(0, frames) * value_range // frames).astype(np_type)[:, np.newaxis, np.newaxis]
    seq = np.stack([np.broadcast_to(v, (frames, height, width)) for v in (x, y, f)], axis=channel_dim)
    if no_frames:
        seq = seq[:, 0] if channel_dim == 0 else seq[0]
    return seq


def _close(a, b):
    if isinstance(a, float):
        return np.isclose(a, b)
    return abs(a - b) <= 1


def _check_frame(image, frame_index, total_frames, roi, w, h, aspect_range, area_range, value_range):
    """`image`: HWC (the caller moves channel-first frames' channels last)."""
    as_number = float if np.issubdtype(image.dtype, np.floating) else int
    corners = [[as_number(v) for v in image[y, x]] for y, x in [(0, 0), (0, -1), (-1, 0), (-1, -1)]]
    (x0, y0, f0), (x1, y1, f1), (x2, y2, f2), (x3, y3, f3) = corners
    assert _close(x0, x2) and _close(x1, x3) and _close(y0, y1) and _close(y2, y3)
    assert _close(f0, f1) and _close(f0, f2) and _close(f0, f3)
    assert int(np.round(f0)) == frame_index * value_range // total_frames
    out_h, out_w = image.shape[:2]
    xeps, yeps = np.ceil(2 + 2 * w / out_w), np.ceil(2 + 2 * h / out_h)
    window = (x0, y0, x3, y3)
    if frame_index == 0:
        roi_w_max = min((x3 - x0) * w / value_range + xeps, w)
        roi_w_min = max((x3 - x0) * w / value_range - xeps, 1)
        roi_h_max = min((y3 - y0) * h / value_range + yeps, h)
        roi_h_min = max((y3 - y0) * h / value_range - xeps, 1)
        assert roi_w_max / roi_h_min >= aspect_range[0] and roi_w_min / roi_h_max <= aspect_range[1]
        assert roi_w_max * roi_h_max / (w * h) >= area_range[0] and roi_w_min * roi_h_min / (w * h) <= area_range[1]
        return window
    assert window == roi, "every frame of a sequence has its first frame's window"
    return roi


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("layout,max_frames", [("FHWC", 8), ("FCHW", 1), ("CFHW", 1), ("HWC", None), ("CHW", None)])
@pytest.mark.parametrize("aspect,area", [((0.5, 2), (0.1, 0.8)), ((1, 2), (0.4, 1.0)), ((0.5, 1), (0.1, 0.5))])
@pytest.mark.parametrize("in_type,out_type", [(types.UINT8, None), (types.INT16, types.FLOAT), (types.FLOAT, None)])
def test_random_resized_crop_dali_cases(device, layout, max_frames, aspect, area, in_type, out_type):
    if device == "gpu":
        require_gpu()
    np_type = {types.UINT8: np.uint8, types.INT16: np.int16, types.FLOAT: np.float32}[in_type]
    channel_dim = layout.find("C")
    channel_dim = -1 if channel_dim == len(layout) - 1 else channel_dim
    rng = np.random.default_rng(12345)
    batch = []
    for _ in range(4):
        frames = None if max_frames is None else int(rng.integers(1, max_frames + 1))
        sz = int(rng.integers(100, 2000 / (max_frames or 1)))
        w, h = (int(v) for v in rng.integers(sz, 2 * sz, 2))
        batch.append(_gradients(frames, w, h, channel_dim, np_type))
    # Every sample as frames of HWC images, to read the corners.
    as_fhwc = {"FHWC": lambda a: a, "HWC": lambda a: a[np.newaxis], "CHW": lambda a: a.transpose(1, 2, 0)[np.newaxis],
               "FCHW": lambda a: a.transpose(0, 2, 3, 1), "CFHW": lambda a: a.transpose(1, 2, 3, 0)}[layout]
    build = lambda fn, x, _: fn.random_resized_crop(x, random_aspect_ratio=aspect, random_area=area, size=(100, 100), interp_type=types.INTERP_LINEAR,
                                                    antialias=False, seed=12321, dtype=out_type)
    value_range = _type_range(np_type)
    for outs, out_layout in _run(sluice, batch, layout, build, device=device, iters=3):
        assert out_layout == layout
        for out, sample in zip(outs, batch):
            seq, hw = as_fhwc(out), as_fhwc(sample).shape[1:3]
            roi = None
            for f in range(seq.shape[0]):
                roi = _check_frame(seq[f], f, seq.shape[0], roi, hw[1], hw[0], aspect, area, value_range)


def test_random_resized_crop_gives_a_sequence_its_images_window():
    """A sequence's frames get the window the same operator cuts from an image (the first
    frame alone) at the same sample index."""
    seqs = _sequences(np.uint8, [(3, 40, 50, 3), (2, 33, 61, 3)], seed=21)
    build = lambda fn, x, _: fn.random_resized_crop(x, size=[16, 20], seed=5)
    sequences, _ = _run(sluice, seqs, "FHWC", build)
    for f in range(2):
        images, _ = _run(sluice, [s[f] for s in seqs], "HWC", build)
        for seq, image in zip(sequences, images):
            np.testing.assert_array_equal(seq[f], image)


def _gpu_near_cpu(gpu, cpu):
    """The gpu resize uses the cpu's taps in f32, but the cpu may pass the axes in the other
    order: equal within 1, on few values."""
    assert len(gpu) == len(cpu)
    for a, b in zip(gpu, cpu):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        assert d.max() <= 1 and d.mean() < 0.05, (d.max(), d.mean())


@pytest.mark.parametrize("case", range(len(RESIZE_CASES)))
@pytest.mark.parametrize("layout", ["FHWC", "FCHW", "CFHW", "CHW"])
def test_gpu_resize_family_equals_cpu(case, layout):
    require_gpu()
    op, kw = RESIZE_CASES[case]
    seqs = _sequences(np.uint8, SHAPES, seed=case)
    batch = [np.ascontiguousarray(s[0].transpose(2, 0, 1)) for s in seqs] if layout == "CHW" else _in_layout(seqs, layout)
    build = lambda fn, x, _: getattr(fn, op)(x, **kw)
    cpu, _ = _run(sluice, batch, layout, build)
    gpu, out_layout = _run(sluice, batch, layout, build, device="gpu")
    assert out_layout == layout
    _gpu_near_cpu(gpu, cpu)


@pytest.mark.parametrize("np_type", [np.int16, np.int32])
@pytest.mark.parametrize("dtype", [None, types.FLOAT])
def test_gpu_resize_of_16_and_32_bit_integers_equals_cpu(np_type, dtype):
    require_gpu()
    rng = np.random.default_rng(24)
    images = [rng.integers(-30000, 30000, s).astype(np_type) for s in [(20, 30, 3), (9, 40, 1), (31, 7, 4)]]
    build = lambda fn, x, _: fn.resize(x, size=[13, 17], dtype=dtype)
    cpu, _ = _run(sluice, images, "HWC", build)
    gpu, _ = _run(sluice, images, "HWC", build, device="gpu")
    _gpu_near_cpu(gpu, cpu)


@pytest.mark.parametrize("layout", ["FHWC", "FCHW", "CFHW"])
def test_gpu_random_resized_crop_on_sequences_equals_cpu(layout):
    require_gpu()
    seqs = _in_layout(_sequences(np.uint8, SHAPES, seed=22), layout)
    build = lambda fn, x, _: fn.random_resized_crop(x, size=[16, 20], seed=5)
    for (cpu, _), (gpu, _) in zip(_run(sluice, seqs, layout, build, iters=2), _run(sluice, seqs, layout, build, device="gpu", iters=2)):
        _gpu_near_cpu(gpu, cpu)
