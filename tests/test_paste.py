"""`fn.paste` (cpu and gpu) against DALI 2.4's cpu operator and DALI's own test's reference.

- DALI's tests (operator_1/test_paste.py) ported with `nvidia.dali` replaced by `sluice`
  (nose params -> pytest.parametrize, `device_id=None` on the cpu, the generated JPEGs
  (`small_images`) instead of DALI_extra, "mixed" decoding on the gpu): the OpenCV
  `copyMakeBorder` reference, bad ratios and anchors, 4-D input, `min_canvas_size`.
- Parity, bit for bit, with DALI 2.4's cpu operator: per-sample `ratio`, `paste_x`,
  `paste_y` and `min_canvas_size` (argument inputs), f32 truncation of the canvas and of the
  position, one fill value or one per channel, fill values past UINT8 (C's wrap), inputs
  without a layout.
- Sluice's departures, on Sluice alone: any element type is pasted (DALI 2.4 asserts on
  anything but UINT8: DALI's test_paste_dtypes), and an image whose channels differ from
  `n_channels` is an error naming the sample (DALI's heap breaks).
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def opencv_paste(image, ratio, paste_x, paste_y, fill_value):
    """DALI's test reference (OpenCV copyMakeBorder), with the same truncations."""
    cv2 = pytest.importorskip("cv2")
    h, w = image.shape[:2]
    paste_h = int(h * ratio)
    paste_w = int(w * ratio)
    top_pad = int(paste_y * (paste_h - h))
    left_pad = int(paste_x * (paste_w - w))
    if not isinstance(fill_value, (list, tuple)):
        fill_value = [fill_value] * 3
    return cv2.copyMakeBorder(image, top_pad, paste_h - h - top_pad, left_pad, paste_w - w - left_pad,
                              borderType=cv2.BORDER_CONSTANT, value=fill_value)


def numpy_paste(image, canvas_hw, at_yx, fill):
    out = np.empty((*canvas_hw, image.shape[2]), image.dtype)
    out[...] = np.asarray(fill, np.int64).astype(image.dtype)
    y, x = at_yx
    out[y:y + image.shape[0], x:x + image.shape[1]] = image
    return out


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("fill_value", [111, [128, 73, 39]])
@pytest.mark.parametrize("ratio", [1.5, 2])
@pytest.mark.parametrize("paste_x", [0.5, 0.6])
@pytest.mark.parametrize("paste_y", [0.4, 0.6])
def test_paste_op(small_images, device, fill_value, ratio, paste_x, paste_y):
    if device == "gpu":
        require_gpu()

    @pipeline_def(batch_size=2, num_threads=1, device_id=0 if device == "gpu" else None)
    def paste_pipeline():
        images, _ = fn.readers.file(file_root=str(small_images))
        images = fn.decoders.image(images, device="mixed" if device == "gpu" else "cpu")
        pasted = fn.paste(images, ratio=ratio, paste_x=paste_x, paste_y=paste_y, fill_value=fill_value)
        return images, pasted

    pipe = paste_pipeline()
    pipe.build()
    for orig, pasted in zip(*pipe.run()):
        expect = opencv_paste(np.array(orig.as_cpu()), ratio, paste_x, paste_y, fill_value)
        assert np.array_equal(np.array(pasted.as_cpu()), expect)


def _one_image_pipe(data, device="cpu", **kw):
    @pipeline_def(batch_size=len(data), num_threads=2, device_id=0 if device == "gpu" else None)
    def pipe():
        x = fn.external_source(lambda: data, layout="HWC")
        if device == "gpu":
            x = x.gpu()
        return fn.paste(x, **kw)

    return pipe()


@pytest.mark.parametrize("ratio", [0.5, 0.999])
def test_paste_op_invalid_ratio(ratio):
    pipe = _one_image_pipe([np.zeros((4, 5, 3), np.uint8)], ratio=ratio, fill_value=0)
    pipe.build()
    with pytest.raises(errors.ArgumentError, match="paste.*ratio.*sample 0.*ratio of less than 1 is not supported"):
        pipe.run()
    # The pipeline goes on.
    with pytest.raises(errors.ArgumentError):
        pipe.run()


@pytest.mark.parametrize("paste_val", [-0.1, 1.1])
@pytest.mark.parametrize("paste_axis", ["paste_x", "paste_y"])
def test_paste_op_invalid_anchor(paste_val, paste_axis):
    pipe = _one_image_pipe([np.zeros((4, 5, 3), np.uint8)], ratio=2.0, fill_value=0, **{paste_axis: paste_val})
    pipe.build()
    with pytest.raises(errors.ArgumentError, match=f"{paste_axis}.*must be in range"):
        pipe.run()


def test_paste_op_invalid_dimension():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(lambda: [np.empty((5, 6, 7, 8), np.uint8)])
        return fn.paste(data, ratio=2, fill_value=0)

    p = pipe()
    p.build()
    with pytest.raises(errors.DataError, match="paste.*HWC"):
        p.run()


@pytest.mark.parametrize("min_canvas_size", [-1.0, 0.0, 420.0])
def test_min_canvas_size(small_images, min_canvas_size):
    ratio = 1.1

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def paste_pipeline():
        images, _ = fn.readers.file(file_root=str(small_images))
        images = fn.decoders.image(images, device="cpu")
        return images, fn.paste(images, ratio=ratio, fill_value=0, min_canvas_size=min_canvas_size)

    pipe = paste_pipeline()
    pipe.build()
    if min_canvas_size < 0:
        with pytest.raises(errors.ArgumentError, match="min_canvas_size of less than 0 is not supported"):
            pipe.run()
        return
    coverage = set() if min_canvas_size != 0 else {0, 1}
    for orig, pasted in zip(*pipe.run()):
        for dim in [0, 1]:
            scaled_orig = int(orig.shape()[dim] * ratio)
            if scaled_orig < min_canvas_size:
                assert pasted.shape()[dim] == min_canvas_size
                coverage.add(0)
            else:
                assert pasted.shape()[dim] == scaled_orig
                coverage.add(1)
    assert coverage == {0, 1}, "Didn't cover all cases of min_canvas_size"


def _images(rng, shapes):
    return [rng.integers(0, 256, s, dtype=np.uint8) for s in shapes]


def _per_sample_pipe(lib, data, ratios, xs, ys, mins, layout="HWC", **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=2, device_id=None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout=layout)
        arg = lambda v: lib.fn.external_source(lambda: [np.float32(e) for e in v])  # noqa: E731
        return lib.fn.paste(x, ratio=arg(ratios), paste_x=arg(xs), paste_y=arg(ys), min_canvas_size=arg(mins), **kw)

    p = pipe()
    p.build()
    return [np.array(o) for o in p.run()[0]]


@needs_dali
@pytest.mark.parametrize("fill_value", [0, 300, [255, -1, 7], [17, 18, 19]])
@pytest.mark.parametrize("layout", ["HWC", ""])
def test_per_sample_arguments_equal_dali(fill_value, layout):
    rng = np.random.default_rng(7)
    data = _images(rng, [(5, 7, 3), (13, 4, 3), (1, 1, 3), (9, 9, 3), (6, 11, 3)])
    # f32 truncations: 1.7 * 5 = 8.5 -> 8, 0.3 * (8 - 5) = 0.9 -> 0; ratio 1 keeps the size.
    ratios = [1.7, 1.0, 3.0, 2.5, 1.01]
    xs, ys = [0.3, 1.0, 0.5, 0.0, 0.77], [0.9, 0.0, 0.5, 1.0, 0.33]
    mins = [0.0, 20.7, 2.0, 0.0, 12.0]
    ours = _per_sample_pipe(sluice, data, ratios, xs, ys, mins, layout, fill_value=fill_value)
    theirs = _per_sample_pipe(dali, data, ratios, xs, ys, mins, layout, fill_value=fill_value)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype, i
        assert np.array_equal(a, b), i


def test_output_equals_numpy_and_layout_is_hwc():
    rng = np.random.default_rng(3)
    data = _images(rng, [(4, 6, 3), (7, 3, 3)])
    ours = _per_sample_pipe(sluice, data, [2.0, 1.5], [0.25, 1.0], [1.0, 0.5], [0.0, 0.0], layout="", fill_value=[1, 2, 3])
    assert np.array_equal(ours[0], numpy_paste(data[0], (8, 12), (4, 1), [1, 2, 3]))
    assert np.array_equal(ours[1], numpy_paste(data[1], (10, 4), (1, 1), [1, 2, 3]))

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.paste(fn.external_source(lambda: [data[0]]), ratio=2, fill_value=0)

    p = pipe()
    p.build()
    assert p.run()[0].layout() == "HWC"


@pytest.mark.parametrize("dtype", [types.UINT8, types.INT32, types.FLOAT, types.INT16])
def test_paste_dtypes(small_images, dtype):
    """DALI 2.4 refuses anything but UINT8; Sluice pastes every type (the cast of the
    UINT8 paste)."""

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def paste_pipeline():
        images, _ = fn.readers.file(file_root=str(small_images))
        images = fn.decoders.image(images, device="cpu")
        return fn.cast(fn.paste(images, ratio=1.1, fill_value=10), dtype=dtype), fn.paste(fn.cast(images, dtype=dtype), ratio=1.1, fill_value=10)

    pipe = paste_pipeline()
    pipe.build()
    for a, b in zip(*pipe.run()):
        assert np.array(a).dtype == np.array(b).dtype
        assert np.array_equal(np.array(a), np.array(b))


def test_channels_must_match_n_channels():
    pipe = _one_image_pipe([np.zeros((4, 5, 3), np.uint8), np.zeros((4, 5, 1), np.uint8)], ratio=2.0, fill_value=7)
    pipe.build()
    with pytest.raises(errors.DataError, match="paste.*sample 1.*1 channels, but n_channels is 3"):
        pipe.run()
    one = _one_image_pipe([np.full((2, 2, 1), 9, np.uint8)], ratio=2.0, fill_value=7, n_channels=1)
    one.build()
    (out,) = one.run()
    assert np.array_equal(np.array(out[0])[..., 0], [[7, 7, 7, 7], [7, 9, 9, 7], [7, 9, 9, 7], [7, 7, 7, 7]])


def test_fill_value_length_is_checked():
    with pytest.raises(errors.ArgumentError, match="fill_value.*single value or 3 values"):
        _one_image_pipe([np.zeros((4, 5, 3), np.uint8)], ratio=2.0, fill_value=[1, 2]).build()


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_equals_cpu(dtype):
    require_gpu()
    rng = np.random.default_rng(11)
    data = [a.astype(dtype) for a in _images(rng, [(5, 7, 3), (13, 4, 3), (1, 1, 3), (64, 48, 3)])]
    kw = dict(ratio=2.3, paste_x=0.7, paste_y=0.2, fill_value=[9, 250, 3], min_canvas_size=20)
    cpu = _one_image_pipe(data, "cpu", **kw)
    gpu = _one_image_pipe(data, "gpu", **kw)
    cpu.build()
    gpu.build()
    for a, b in zip(cpu.run()[0], gpu.run()[0].as_cpu()):
        assert np.array_equal(np.array(a), np.array(b))
