"""`fn.resize_crop_mirror` and `fn.fast_resize_crop_mirror` (cpu and gpu).

- DALI's test (operator_2/test_resize_crop_mirror.py, `test_vs_separate_ops`) ported with
  `nvidia.dali` replaced by `sluice` (the generated JPEGs instead of DALI_extra's LMDB): the
  fused operator equals `resize` -> `crop` -> `flip` within DALI's tolerance (1 per pixel),
  with per-sample sizes, crops, positions and flips, sizing modes and relative ROIs.
- Parity with DALI 2.4's cpu operator on the same images and arguments (within 1).
- `fast_resize_crop_mirror` is `resize_crop_mirror` with `antialias=False` by default.
- The gpu backend equals the cpu's up to the resize's +-1 (float accumulation order; as
  `test_gpu_pipeline.py`'s resize cases).
- DALI's `test_video_rcm` is not ported: Sluice's `resize` family takes HWC images only.
"""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def rcm_pipe(root, device, mode, roi_start=None, roi_end=None):
    @pipeline_def(num_threads=4, batch_size=8, device_id=0 if device == "gpu" else None, seed=1234)
    def pipe():
        roi_relative = True if roi_start or roi_end else None
        files, labels = fn.readers.file(file_root=str(root), random_shuffle=True)
        images = fn.decoders.image(files, device="mixed" if device == "gpu" else "cpu")
        flip_x = fn.random.coin_flip(dtype=types.INT32)
        flip_y = fn.random.coin_flip(dtype=types.INT32)
        flip = flip_x | (flip_y * 2)
        if mode == "not_larger":  # avoid invalid crops
            size = fn.random.uniform(range=(800, 1000), shape=(2,), dtype=types.FLOAT)
        else:
            size = fn.random.uniform(range=(224, 480), shape=(2,), dtype=types.FLOAT)
        crop_w = fn.random.uniform(range=(100, 224), dtype=types.FLOAT)
        crop_h = fn.random.uniform(range=(100, 224), dtype=types.FLOAT)
        crop_x = fn.random.uniform(range=(0, 1))
        crop_y = fn.random.uniform(range=(0, 1))
        out = fn.resize_crop_mirror(images, size=size, mode=mode, roi_start=roi_start, roi_end=roi_end,
                                    roi_relative=roi_relative, crop_w=crop_w, crop_h=crop_h, crop_pos_x=crop_x,
                                    crop_pos_y=crop_y, mirror=flip)
        resized = fn.resize(images, size=size, mode=mode, roi_start=roi_start, roi_end=roi_end, roi_relative=roi_relative)
        cropped = fn.crop(resized, crop_w=crop_w, crop_h=crop_h, crop_pos_x=crop_x, crop_pos_y=crop_y)
        flipped = fn.flip(cropped, horizontal=flip_x, vertical=flip_y)
        return out, flipped

    return pipe()


def _host(batch):
    batch = batch.as_cpu() if hasattr(batch, "as_cpu") else batch
    return [np.array(batch[i]) for i in range(len(batch))]


@pytest.mark.parametrize("dev,mode,roi_start,roi_end", [
    ("cpu", "not_larger", None, None),
    ("cpu", None, (0.7, 0.2), (0.1, 0.8)),
    ("cpu", "stretch", (0.3, 0.8), (0.9, 0.1)),
    ("gpu", "not_smaller", None, None),
    ("gpu", "stretch", (0.3, 0.8), (0.9, 0.1)),
])
def test_vs_separate_ops(small_images, dev, mode, roi_start, roi_end):
    if dev == "gpu":
        require_gpu()
    pipe = rcm_pipe(small_images, dev, mode, roi_start, roi_end)
    pipe.build()
    for _ in range(5):
        rcm, separate = pipe.run()
        for a, b in zip(_host(rcm), _host(separate)):
            assert a.shape == b.shape
            diff = np.abs(a.astype(np.int32) - b.astype(np.int32))
            # DALI's check_batch(eps=1e-3, max_allowed_error=1)
            assert diff.max() <= 1 and diff.mean() < 0.2, (diff.max(), diff.mean())


def _rcm(lib, data, **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=2, device_id=None)
    def pipe():
        return lib.fn.resize_crop_mirror(lib.fn.external_source(lambda: data, layout="HWC"), **kw)

    p = pipe()
    p.build()
    return [np.array(o) for o in p.run()[0]]


CASES = [
    dict(resize_x=300, resize_y=200, crop=(100, 120), mirror=1),
    dict(resize_shorter=150, crop=(64, 64), crop_pos_x=0.2, crop_pos_y=0.9, mirror=2),
    dict(size=(90, 70), crop=(120, 100), mirror=3),  # the window leaves the resized image
    dict(size=(400, 400), crop_h=33, crop_w=57, antialias=False, mirror=0, rounding="truncate", crop_pos_x=0.33),
    dict(resize_x=64, roi_start=(0.1, 0.2), roi_end=(0.8, 0.9), roi_relative=True, crop=(40, 50), mirror=1,
         interp_type=types.INTERP_CUBIC),
]


@needs_dali
@pytest.mark.parametrize("kw", CASES)
def test_equals_dali(kw):
    rng = np.random.default_rng(3)
    data = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(240, 320, 3), (181, 97, 3), (64, 64, 1)]]
    dkw = {k: (getattr(dali.types, v.name) if isinstance(v, types.DALIInterpType) else v) for k, v in kw.items()}
    for a, b in zip(_rcm(sluice, data, **kw), _rcm(dali, data, **dkw)):
        assert a.shape == b.shape
        assert np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 1


def test_fast_resize_crop_mirror_does_not_antialias_by_default():
    rng = np.random.default_rng(4)
    data = [rng.integers(0, 256, (200, 300, 3), dtype=np.uint8)]
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(lambda: data, layout="HWC")
        kw = dict(size=(50, 60), crop=(40, 40), mirror=1)
        # Deprecated in DALI 2.4, which warns in these words.
        with pytest.warns(DeprecationWarning, match=r"^WARNING: `nvidia.dali.fn.fast_resize_crop_mirror` is now deprecated. "
                          r"Use `nvidia.dali.fn.resize_crop_mirror` instead.$"):
            fast = fn.fast_resize_crop_mirror(x, **kw)
        return (fast, fn.resize_crop_mirror(x, antialias=False, **kw), fn.resize_crop_mirror(x, **kw))

    p = pipe()
    p.build()
    fast, plain, antialiased = (np.array(o[0]) for o in p.run())
    assert np.array_equal(fast, plain)
    assert not np.array_equal(fast, antialiased)


@pytest.mark.parametrize("kw", CASES)
def test_gpu_equals_cpu(kw):
    require_gpu()
    rng = np.random.default_rng(5)
    data = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(240, 320, 3), (181, 97, 3), (64, 64, 3)]]

    def run(device):
        @pipeline_def(batch_size=len(data), num_threads=2, device_id=0)
        def pipe():
            x = fn.external_source(lambda: data, layout="HWC")
            return fn.resize_crop_mirror(x.gpu() if device == "gpu" else x, **kw)

        p = pipe()
        p.build()
        return _host(p.run()[0])

    for a, b in zip(run("cpu"), run("gpu")):
        d = np.abs(a.astype(int) - b.astype(int))
        assert a.shape == b.shape and d.max() <= 1 and d.mean() < 0.05, (d.max(), d.mean())
