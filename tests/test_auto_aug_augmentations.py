"""The augmentations of `sluice.auto_aug.augmentations`, each on its own at fixed magnitude
bins (sample i of the batch takes bin i), images (HWC) and videos (FHWC):

- Parity with DALI 2.4's `nvidia.dali.auto_aug.augmentations` on the same inputs and bins:
  equal bit for bit, but `sharpness`, whose `fn.filter` DALI computes with host-dependent FMA
  (within 1; see tests/test_filters.py).
- DALI's auto_aug/test_augmentations.py ported with the import renamed: each augmentation
  against its PIL reference (Pillow's ImageOps / ImageEnhance / Image.transform, the
  implementations AutoAugment and RandAugment were published with), with DALI's tolerances
  (mean and max absolute error), and the translation helper's argument handling.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import itertools

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from sluice import fn, pipeline_def
from sluice.auto_aug import augmentations as a
from sluice.auto_aug.core._utils import get_translations as _get_translations

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")
BATCH = 12


@pytest.fixture(scope="module")
def images(small_images):
    """The test JPEGs decoded by Pillow, shrunk to at most 160 px (quick, and sizes vary)."""
    out = []
    for p in sorted(small_images.rglob("*.jpg"))[:BATCH]:
        img = Image.open(p).convert("RGB")
        img.thumbnail((160, 160))
        out.append(np.asarray(img))
    assert len(out) == BATCH
    return out


@pytest.fixture(scope="module")
def videos(images):
    """Four videos of three frames each, in four sizes; the batch repeats them."""
    vids = []
    for v in range(4):
        size = (112 + 16 * v, 96 + 8 * v)
        vids.append(np.stack([np.asarray(Image.fromarray(images[(v + k) % BATCH]).resize(size)) for k in range(3)]))
    return [vids[i % 4] for i in range(BATCH)]


def _run(lib_fn, pipeline_def_, aug, samples, layout, dev="cpu", use_shape=False):
    """`aug` on `samples` with sample i at magnitude bin i of BATCH; the outputs as arrays."""
    video = layout == "FHWC"

    @pipeline_def_(batch_size=len(samples), num_threads=2, device_id=0 if dev == "gpu" else None, seed=42)
    def pipe():
        data = lib_fn.external_source(source=lambda: samples, layout=layout)
        mag_bin = lib_fn.external_source(lambda info: np.array(info.idx_in_batch, dtype=np.int32), batch=False)
        extra = {"shape": data.shape()[int(video):]} if use_shape else {}
        if dev == "gpu":
            data = data.gpu()
        return aug(data, num_magnitude_bins=len(samples), magnitude_bin=mag_bin, **extra)

    (out,) = pipe().run()
    out = out.as_cpu() if dev == "gpu" else out
    return [np.array(s) for s in out]


def _sluice(aug, samples, layout, **kw):
    return _run(fn, pipeline_def, aug, samples, layout, **kw)


def _dali(name, overrides, samples, layout, **kw):
    from nvidia.dali.auto_aug import augmentations as da

    aug = getattr(da, name)
    if overrides:
        overrides = dict(overrides)
        if callable(overrides.get("mag_to_param")):  # the same callback, from DALI's module
            overrides["mag_to_param"] = getattr(da, overrides["mag_to_param"].__name__)
        aug = aug.augmentation(**overrides)
    return _run(dali.fn, dali.pipeline_def, aug, samples, layout, **kw)


# name, overrides of the suite's setup (signed ranges instead of random negation), use_shape
CASES = [
    ("shear_x", dict(mag_range=(-0.3, 0.3), randomly_negate=False), False),
    ("shear_y", dict(mag_range=(-0.3, 0.3), randomly_negate=False), False),
    ("translate_x_no_shape", dict(mag_range=(-250, 250), randomly_negate=False), False),
    ("translate_y_no_shape", dict(mag_range=(-250, 250), randomly_negate=False), False),
    ("translate_x", dict(mag_range=(-1, 1), randomly_negate=False), True),
    ("translate_y", dict(mag_range=(-1, 1), randomly_negate=False), True),
    ("rotate", dict(mag_range=(-30, 30), randomly_negate=False), False),
    ("brightness", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None), False),
    ("contrast", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None), False),
    ("color", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None), False),
    ("sharpness", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=a.sharpness_kernel_shifted), False),
    ("posterize", dict(mag_range=(1, 8)), False),
    ("solarize", {}, False),
    ("solarize_add", {}, False),
    ("invert", {}, False),
    ("equalize", {}, False),
    ("auto_contrast", {}, False),
    ("identity", {}, False),
]


def _aug(name, overrides):
    aug = getattr(a, name)
    return aug.augmentation(**overrides) if overrides else aug


@needs_dali
@pytest.mark.parametrize("modality", ["image", "video"])
@pytest.mark.parametrize("name,overrides,use_shape", CASES, ids=[c[0] for c in CASES])
def test_equals_dali(images, videos, name, overrides, use_shape, modality):
    samples, layout = (images, "HWC") if modality == "image" else (videos, "FHWC")
    ours = _sluice(_aug(name, overrides), samples, layout, use_shape=use_shape)
    theirs = _dali(name, overrides, samples, layout, use_shape=use_shape)
    for i, (x, y) in enumerate(zip(ours, theirs)):
        assert x.shape == y.shape and x.dtype == y.dtype == np.uint8, i
        diff = np.abs(x.astype(int) - y.astype(int)).max()
        assert diff <= (1 if name == "sharpness" else 0), f"sample {i}: max difference {diff}"


@pytest.mark.parametrize("modality", ["image", "video"])
@pytest.mark.parametrize("name,overrides,use_shape", CASES, ids=[c[0] for c in CASES])
def test_gpu_equals_cpu(images, videos, name, overrides, use_shape, modality):
    require_gpu()
    samples, layout = (images, "HWC") if modality == "image" else (videos, "FHWC")
    aug = _aug(name, overrides)
    if name in ("posterize", "solarize", "solarize_add"):
        aug = aug.augmentation(param_device="auto")  # the parameter where the data is
    cpu = _sluice(aug, samples, layout, use_shape=use_shape)
    gpu = _sluice(aug, samples, layout, dev="gpu", use_shape=use_shape)
    for i, (x, y) in enumerate(zip(cpu, gpu)):
        assert x.shape == y.shape and np.array_equal(x, y), f"sample {i}"


# --------------------------------------------------------------------------- PIL references
def _pil(op):
    def inner(sample, *param):
        squeeze = sample.shape[2] == 1
        out = np.array(op(Image.fromarray(sample[..., 0] if squeeze else sample), *param))
        return out[..., None] if squeeze else out

    return inner


def _check(out, ref, eps, max_allowed_error):
    """DALI's check_batch: each sample's largest absolute error within `max_allowed_error`,
    or, when that is None, its mean absolute error within `eps`."""
    for i, (x, y) in enumerate(zip(out, ref)):
        assert x.shape == y.shape, (i, x.shape, y.shape)
        err = np.abs(x.astype(np.float64) - y.astype(np.float64))
        if max_allowed_error is not None:
            assert err.max() <= max_allowed_error, f"sample {i}: max error {err.max()}"
        else:
            assert err.mean() <= eps, f"sample {i}: mean error {err.mean()}"


def _compare_with_pil(aug, ref_op, samples, layout, params=None, eps=1e-7, max_allowed_error=1e-6, post=None,
                      use_shape=False, dev="cpu"):
    if dev == "gpu":
        require_gpu()
    out = _sluice(aug, samples, layout, dev=dev, use_shape=use_shape)
    params = [()] * len(samples) if params is None else [(p,) for p in params]
    per_frame = (lambda f, s, *p: np.stack([f(fr, *p) for fr in s])) if layout == "FHWC" else (lambda f, s, *p: f(s, *p))
    ref = [per_frame(ref_op, s, *p) for s, p in zip(samples, params)]
    if post is not None:
        out = [per_frame(post, s) for s in out]
        ref = [per_frame(post, s) for s in ref]
    _check(out, ref, eps, max_allowed_error)


def _affine(coeffs):
    def ref(img, magnitude):
        return img.transform(img.size, Image.AFFINE, coeffs(img, magnitude), Image.BILINEAR, fillcolor=(128,) * 3)

    return ref


def _rotate_with_fill(img, magnitude):
    rot = img.convert("RGBA").rotate(magnitude, resample=Image.BILINEAR)
    return Image.composite(rot, Image.new("RGBA", img.size, (128,) * 3), rot).convert(img.mode)


def _solarize_add_ref(image, magnitude):
    lut = [min(255, i + magnitude) if i < 128 else i for i in range(256)]
    return ImageOps._lut(image, lut)


# name, overrides, PIL reference, params ("mags": the magnitudes, "params": mag_to_param of
# them, "rounded": rounded magnitudes, None: none), eps, max_allowed_error, use_shape, post
PIL_CASES = [
    ("shear_x", dict(mag_range=(-0.3, 0.3), randomly_negate=False), _affine(lambda i, m: (1, -m, 0, 0, 1, 0)),
     "mags", 1, None, False, None),
    ("shear_y", dict(mag_range=(-0.3, 0.3), randomly_negate=False), _affine(lambda i, m: (1, 0, 0, -m, 1, 0)),
     "mags", 1, None, False, None),
    ("translate_x_no_shape", dict(mag_range=(-250, 250), randomly_negate=False),
     _affine(lambda i, m: (1, 0, -m, 0, 1, 0)), "mags", 1, None, False, None),
    ("translate_x", dict(mag_range=(-1, 1), randomly_negate=False),
     _affine(lambda i, m: (1, 0, -m * i.width, 0, 1, 0)), "mags", 1, None, True, None),
    ("translate_y_no_shape", dict(mag_range=(-250, 250), randomly_negate=False),
     _affine(lambda i, m: (1, 0, 0, 0, 1, -m)), "mags", 1, None, False, None),
    ("translate_y", dict(mag_range=(-1, 1), randomly_negate=False),
     _affine(lambda i, m: (1, 0, 0, 0, 1, -m * i.height)), "mags", 1, None, True, None),
    ("rotate", dict(mag_range=(-30, 30), randomly_negate=False), _rotate_with_fill, "mags", 1, None, False, None),
    ("brightness", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None),
     lambda img, m: ImageEnhance.Brightness(img).enhance(m), "mags", 1e-7, 1, False, None),
    ("contrast", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None),
     lambda img, m: ImageEnhance.Contrast(img).enhance(m), "mags", 1e-7, 1, False, None),
    ("color", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=None),
     lambda img, m: ImageEnhance.Color(img).enhance(m), "mags", 1e-7, 2, False, None),
    # PIL filters valid positions only and pastes the result on the input: compare the inside.
    ("sharpness", dict(mag_range=(0.1, 1.9), randomly_negate=False, mag_to_param=a.sharpness_kernel_shifted),
     lambda img, m: ImageEnhance.Sharpness(img).enhance(m), "mags", 1e-7, 1, False, lambda s: s[1:-1, 1:-1, :]),
    ("posterize", dict(mag_range=(1, 8)), ImageOps.posterize, "rounded", 1e-7, 1, False, None),
    ("solarize", {}, ImageOps.solarize, "params", 1e-7, 1, False, None),
    ("solarize_add", {}, _solarize_add_ref, "params", 1e-7, 1, False, None),
    ("invert", {}, ImageOps.invert, None, 1e-7, 1, False, None),
    # PIL's equalisation turns the cumulative histogram into its table differently from
    # OpenCV's (it leaves the last occupied bin out of the total, OpenCV the first): pixels
    # may differ much. DALI's test allows a mean of 7 on its photos; the generated test
    # images have spikes at 0 or 255 (flat or clipped areas), where the two part most, so
    # 20 here. The exact check is test_equals_dali.
    ("equalize", {}, ImageOps.equalize, None, 20, None, False, None),
    ("auto_contrast", {}, ImageOps.autocontrast, None, 1e-7, 1, False, None),
]


@pytest.mark.parametrize("dev", ["cpu", "gpu"])
@pytest.mark.parametrize("modality", ["image", "video"])
@pytest.mark.parametrize("case", PIL_CASES, ids=[c[0] for c in PIL_CASES])
def test_against_pil(images, videos, case, modality, dev):
    name, overrides, ref, params, eps, max_err, use_shape, post = case
    samples, layout = (images, "HWC") if modality == "image" else (videos, "FHWC")
    aug = _aug(name, overrides)
    if name in ("posterize", "solarize", "solarize_add"):
        aug = aug.augmentation(param_device=dev)
    mags = aug._get_magnitudes(len(samples)) if params else None
    values = {None: None, "mags": mags, "rounded": np.round(mags).astype(np.int32) if params else None,
              "params": aug._map_mags_to_params(mags) if params else None}[params]
    if values is not None:
        values = [v.item() if hasattr(v, "item") else v for v in values]
    _compare_with_pil(aug, _pil(ref), samples, layout, params=values, eps=eps, max_allowed_error=max_err, post=post,
                      use_shape=use_shape, dev=dev)


@pytest.mark.parametrize("dev", ["cpu", "gpu"])
@pytest.mark.parametrize("modality", ["image", "video"])
def test_auto_contrast_mono_channels(modality, dev):
    """Flat channels (one value) are left as they are, as PIL's autocontrast leaves them."""
    def shaped(shape, frames=5):
        return shape if modality == "image" else (frames,) + shape

    rng = np.random.default_rng(seed=42)
    imgs = [
        np.full(shaped((51, 75, 1)), 0, dtype=np.uint8),
        np.full(shaped((40, 64, 3)), 255, dtype=np.uint8),
        np.stack([np.full(shaped((30, 30), 3), v, dtype=np.uint8) for v in (254, 159, 1)], axis=-1),
        np.stack([np.uint8(rng.uniform(50, 160, shaped((40, 40), 4))), np.full(shaped((40, 40), 4), 159, np.uint8),
                  np.uint8(rng.uniform(0, 255, shaped((40, 40), 4)))], axis=-1),
    ]
    _compare_with_pil(a.auto_contrast, _pil(ImageOps.autocontrast), imgs, "HWC" if modality == "image" else "FHWC",
                      max_allowed_error=1, dev=dev)


@pytest.mark.parametrize("use_shape,offset_fraction,extent",
                         list(itertools.product((True, False), (0, 1), ("height", "width", "both", "none"))))
def test_translation_helper(use_shape, offset_fraction, extent):
    default_abs, default_rel = 123, 0.123
    height, width = 300, 700
    params = {}
    if extent != "none":
        base, name = ([1.0, 1.0], "max_translate_rel") if use_shape else ([height, width], "max_translate_abs")
        params[name] = {"both": [base[0] * offset_fraction, base[1] * offset_fraction],
                        "height": [base[0] * offset_fraction, 0], "width": [0, base[1] * offset_fraction]}[extent]
    translate_x, translate_y = _get_translations(use_shape, default_abs, default_rel, **params)
    if use_shape:
        assert translate_x.op is a.translate_x.op and translate_y.op is a.translate_y.op
    else:
        assert translate_x.op is a.translate_x_no_shape.op and translate_y.op is a.translate_y_no_shape.op
    if extent == "none":
        exp_h = exp_w = default_rel if use_shape else default_abs
    elif use_shape:
        exp_h = exp_w = offset_fraction
    else:
        exp_h, exp_w = height * offset_fraction, width * offset_fraction
    exp_w = 0 if extent == "height" else exp_w
    exp_h = 0 if extent == "width" else exp_h
    assert translate_x.mag_range == (0, exp_w)
    assert translate_y.mag_range == (0, exp_h)


def test_translation_helper_errors():
    with pytest.raises(Exception, match="`max_translate_abs` cannot be used with image shapes"):
        _get_translations(True, 1, 1, max_translate_abs=5)
    with pytest.raises(Exception, match="`max_translate_rel` cannot be used without image shapes"):
        _get_translations(False, 1, 1, max_translate_rel=0.5)
    with pytest.raises(Exception, match="The `use_shape` is a flag"):
        _get_translations("yes", 1, 1)
