"""`fn.random_crop_generator` against DALI 2.4's cpu operator.

- DALI's tests (operator_2/test_random_crop_generator.py) ported with `nvidia.dali` replaced
  by `sluice` (the generated JPEGs instead of DALI_extra): with one seed, the generator's
  window equals the one `decoders.image_random_crop` decodes, and a window of a window
  equals cropping twice.
- Invariants, as DALI's: INT32 anchor (y, x) and shape (h, w), the window inside the image,
  its area fraction in `random_area` and aspect ratio in `random_aspect_ratio` whenever a
  draw succeeds; HW and HWC shapes of every integer type.
- Distribution: over many samples the mean area fraction and mean log-aspect of Sluice's
  windows match DALI's (both libraries draw the same distribution from different streams).
- The same windows whatever `num_threads`; errors name the operator and the sample.
"""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types

from conftest import dali_or_none

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def test_random_crop_generator(small_images):
    batch_size, seed = 8, 1234

    @pipeline_def(batch_size=batch_size, num_threads=3, device_id=None)
    def pipe():
        encoded, _ = fn.readers.file(file_root=str(small_images))
        images = fn.decoders.image(encoded)
        shapes = fn.peek_image_shape(encoded)
        images_crop1 = fn.decoders.image_random_crop(encoded, seed=seed)
        crop_anchor, crop_shape = fn.random_crop_generator(shapes, seed=seed)
        images_crop2 = fn.slice(images, start=crop_anchor, shape=crop_shape, axes=[0, 1])
        return images_crop1, images_crop2

    p = pipe()
    p.build()
    for _ in range(2):
        out0, out1 = p.run()
        for i in range(batch_size):
            np.testing.assert_array_equal(np.array(out0[i]), np.array(out1[i]))


def test_random_crop_generator_subcrop(small_images):
    batch_size, seed0, seed1 = 8, 1234, 2345

    @pipeline_def(batch_size=batch_size, num_threads=3, device_id=None)
    def pipe():
        encoded, _ = fn.readers.file(file_root=str(small_images))
        shapes = fn.peek_image_shape(encoded)
        crop_anchor0_A, crop_shape0_A = fn.random_crop_generator(shapes, seed=seed0)
        rel_crop_anchor1_A, crop_shape1_A = fn.random_crop_generator(crop_shape0_A, seed=seed1)
        crop_anchor1_A = crop_anchor0_A + rel_crop_anchor1_A
        images_crop1_A = fn.decoders.image_slice(encoded, start=crop_anchor1_A, shape=crop_shape1_A, axes=[0, 1])
        images_crop0_B = fn.decoders.image_random_crop(encoded, seed=seed0)
        crop_anchor1_B, crop_shape1_B = fn.random_crop_generator(images_crop0_B.shape(), seed=seed1)
        images_crop1_B = fn.slice(images_crop0_B, start=crop_anchor1_B, shape=crop_shape1_B, axes=[0, 1])
        return images_crop1_A, images_crop1_B

    p = pipe()
    p.build()
    out0, out1 = p.run()
    for i in range(batch_size):
        np.testing.assert_array_equal(np.array(out0[i]), np.array(out1[i]))


SHAPES = [np.array(s) for s in [(480, 640, 3), (37, 1000), (1000, 37, 1), (1, 1), (3, 5, 3), (224, 224, 3), (5000, 20, 3), (64, 48)]]


def _windows(lib, shapes, batches=1, dtype=np.int32, num_threads=2, **kw):
    @lib.pipeline_def(batch_size=len(shapes), num_threads=num_threads, device_id=None, seed=77)
    def pipe():
        sh = lib.fn.external_source(lambda: [s.astype(dtype) for s in shapes])
        anchor, shape = lib.fn.random_crop_generator(sh, **kw)
        return anchor, shape

    p = pipe()
    p.build()
    out = []
    for _ in range(batches):
        a, s = p.run()
        out += [(np.array(a[i]), np.array(s[i])) for i in range(len(shapes))]
    return out


@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.int64, np.uint8])
def test_windows_fit_and_respect_the_ranges(dtype):
    shapes = [s for s in SHAPES if dtype != np.uint8 or s.max() < 256]
    area, aspect = (0.08, 1.0), (0.75, 4 / 3)
    for (anchor, shape), sh in zip(_windows(sluice, shapes, batches=20, dtype=dtype), shapes * 20):
        assert anchor.dtype == np.int32 and shape.dtype == np.int32 and anchor.shape == (2,) and shape.shape == (2,)
        h, w = sh[:2]
        assert (anchor >= 0).all() and (shape >= 1).all()
        assert anchor[0] + shape[0] <= h and anchor[1] + shape[1] <= w
        # A window drawn inside the ranges (not the fallback of thin images) keeps to them.
        if min(h, w) >= 8 and max(h, w) / min(h, w) < 4:
            frac = shape[0] * shape[1] / (h * w)
            assert area[0] * 0.9 <= frac <= area[1] + 1e-6, (sh, shape)


def _stats(windows, shapes):
    fracs, aspects = [], []
    for (anchor, shape), sh in zip(windows, shapes):
        fracs.append(shape[0] * shape[1] / (sh[0] * sh[1]))
        aspects.append(np.log(shape[1] / shape[0]))
    return np.mean(fracs), np.mean(aspects), np.std(fracs)


@needs_dali
@pytest.mark.parametrize("kw", [{}, {"random_area": [0.3, 0.6], "random_aspect_ratio": [0.5, 2.0]}, {"random_area": [0.5, 1.0], "num_attempts": 3}])
def test_distribution_matches_dali(kw):
    shapes = [np.array((480, 640, 3))] * 16
    ours = _stats(_windows(sluice, shapes, batches=40, **kw), shapes * 40)
    theirs = _stats(_windows(dali, shapes, batches=40, **kw), shapes * 40)
    # 640 windows each: the means agree within a few standard errors.
    se = max(ours[2], theirs[2]) / np.sqrt(640)
    assert abs(ours[0] - theirs[0]) < 5 * se, (ours, theirs)
    assert abs(ours[1] - theirs[1]) < 0.05, (ours, theirs)


def test_same_windows_whatever_num_threads():
    a = _windows(sluice, SHAPES, batches=3, num_threads=1)
    b = _windows(sluice, SHAPES, batches=3, num_threads=4)
    for (x0, s0), (x1, s1) in zip(a, b):
        assert np.array_equal(x0, x1) and np.array_equal(s0, s1)


def test_bad_shapes_are_errors_naming_the_sample():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        sh = fn.external_source(lambda: [np.array([4, 5], np.int32), np.array([4, 5, 3, 1], np.int32)])
        return fn.random_crop_generator(sh)

    p = pipe()
    p.build()
    with pytest.raises(errors.DataError, match="random_crop_generator.*sample 1.*Expected a 1D tensor with 2 or 3 values"):
        p.run()
    with pytest.raises(errors.DataError):
        p.run()  # the pipeline goes on

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def floats():
        return fn.random_crop_generator(fn.external_source(lambda: [np.array([4.0, 5.0], np.float32)]))

    p = floats()
    p.build()
    with pytest.raises(errors.ArgumentError, match="Only integer types are supported. Got: float"):
        p.run()


@pytest.mark.parametrize("arg,value", [("random_area", [0.5, 0.1]), ("random_aspect_ratio", [0.0, 1.0]), ("num_attempts", 0)])
def test_bad_arguments(arg, value):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.random_crop_generator(fn.external_source(lambda: [np.array([4, 5], np.int32)]), **{arg: value})

    with pytest.raises(errors.ArgumentError, match=f"random_crop_generator.*{arg}"):
        pipe().build()
