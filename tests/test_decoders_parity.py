"""decoders.image (cpu) against NVIDIA DALI's CPU decoder on the whole mixed data set
(baseline / progressive / 4:4:4 / 4:2:2 / grayscale / restart-marker / EXIF-oriented JPEGs,
PNG, BMP, TIFF), for every output_type and for dtype=FLOAT.

Tolerances below are the ones measured when this file was written (DALI 2.4.0):
  RGB, BGR         every file bit-exact (JPEG, PNG, BMP, TIFF)
  GRAY             JPEG bit-exact; PNG/BMP/TIFF max |diff| 1 (RGB->gray rounding; up to ~50% of
                   pixels of an RGB PNG differ by 1)
  YCbCr            max |diff| 1 on at most ~0.03% of the values (about half of the colour JPEGs
                   exact, grayscale JPEGs all exact); asserted: max 1, fraction <= 0.1%
  ANY_DATA         bit-exact except grayscale JPEGs, where DALI 2.4's CPU decoder is itself wrong (it
                   writes 3 interleaved channels into the 1-channel output and overruns into the next
                   sample); there Sluice is checked against DALI's GRAY output and Pillow instead
  FLOAT            bit-exact to DALI; equals uint8 / 255 within 1e-7
"""

import functools
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import all_files
from sluice import fn, pipeline_def, types

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402

BATCH = 8


def _kind(path):
    im = Image.open(path)
    if im.format != "JPEG":
        return im.format.lower(), im.mode, None
    return "jpeg", im.mode, im.getexif().get(0x0112)


@pytest.fixture(scope="module")
def catalog(mixed_root):
    """{relative path: (format, PIL mode, EXIF orientation)} for every file of the data set."""
    return {p: _kind(mixed_root / p) for p in all_files(mixed_root)}


def _decode(impl, root, output_type, dtype, files=None):
    """{path relative to root: decoded array} for every file, read in order, no shuffle."""
    root = Path(root)
    src = dict(files=[str(root / f) for f in files]) if files else dict(file_root=str(root))
    n = len(files) if files else len(all_files(root))
    if impl == "sluice":
        @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=1)
        def p():
            jpegs, _ = fn.readers.file(**src)
            return fn.decoders.image(jpegs, output_type=getattr(types, output_type), dtype=getattr(types, dtype))
    else:
        @dali.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=1)
        def p():
            jpegs, _ = dfn.readers.file(**src)
            return dfn.decoders.image(jpegs, device="cpu", output_type=getattr(dtypes, output_type),
                                      dtype=getattr(dtypes, dtype))
    pipe = p()
    pipe.build()
    out = {}
    for _ in range(-(-n // BATCH)):
        images, = pipe.run()
        for i in range(len(images)):
            info = images[i].source_info()
            key = str(Path(info).relative_to(root)) if Path(info).is_absolute() else info
            out.setdefault(key, np.array(images.at(i)).copy())
    assert len(out) == n
    return out


@functools.lru_cache(maxsize=None)
def decoded(impl, root, output_type, dtype="UINT8", files=None):
    return _decode(impl, root, output_type, dtype, files)


def compare(a, b):
    """(max |a-b|, fraction of differing values); shapes must match."""
    assert a.shape == b.shape and a.dtype == b.dtype
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return d.max(), float((d > 0).mean())


def test_dataset_covers_the_formats(catalog):
    kinds = list(catalog.values())
    assert sum(k[0] == "jpeg" for k in kinds) >= 100
    assert sum(k[0] == "jpeg" and k[1] == "L" for k in kinds) >= 2  # grayscale JPEG
    assert sum(k[0] == "jpeg" and k[2] in (6, 8) for k in kinds) >= 2  # EXIF rotations
    assert sum(k[0] == "jpeg" and k[2] == 3 for k in kinds) >= 1
    for fmt in ("png", "bmp", "tiff"):
        assert sum(k[0] == fmt for k in kinds) >= 1, fmt


def test_rgb_bit_exact(mixed_root, catalog):
    ours, ref = decoded("sluice", mixed_root, "RGB"), decoded("dali", mixed_root, "RGB")
    assert sorted(ours) == sorted(catalog)
    exact = [p for p in catalog if compare(ours[p], ref[p])[0] == 0]
    differ = {p: compare(ours[p], ref[p]) for p in catalog if p not in exact}
    assert not differ, f"{len(exact)}/{len(catalog)} exact; differing: {differ}"
    for p in catalog:
        assert ours[p].dtype == np.uint8 and ours[p].ndim == 3 and ours[p].shape[2] == 3


def test_exif_orientation_applied(mixed_root, catalog):
    ours = decoded("sluice", mixed_root, "RGB")
    rotated = [p for p, k in catalog.items() if k[2] in (5, 6, 7, 8)]
    assert rotated
    for p in rotated:
        w, h = Image.open(mixed_root / p).size
        assert ours[p].shape[:2] == (w, h), p  # transposed relative to the stored frame
    for p in [p for p, k in catalog.items() if k[2] == 3]:
        raw = np.asarray(Image.open(mixed_root / p).convert("RGB"))
        assert ours[p].shape == raw.shape
        # a 180-degree turn: compare with Pillow's decode turned around (IDCTs may differ slightly)
        assert np.abs(ours[p].astype(int) - raw[::-1, ::-1].astype(int)).mean() < 2


def test_bgr_bit_exact(mixed_root, catalog):
    ours, ref = decoded("sluice", mixed_root, "BGR"), decoded("dali", mixed_root, "BGR")
    rgb = decoded("sluice", mixed_root, "RGB")
    for p in catalog:
        assert compare(ours[p], ref[p])[0] == 0, p
        assert np.array_equal(ours[p], rgb[p][..., ::-1]), p


def test_gray(mixed_root, catalog):
    ours, ref = decoded("sluice", mixed_root, "GRAY"), decoded("dali", mixed_root, "GRAY")
    jpeg_exact = 0
    for p, k in catalog.items():
        assert ours[p].shape[2] == 1, p
        m, frac = compare(ours[p], ref[p])
        if k[0] == "jpeg":
            assert m == 0, f"{p}: JPEG GRAY must be bit-exact, max diff {m} on {frac:.2%}"
            jpeg_exact += 1
        else:
            assert m <= 1, f"{p}: max diff {m}"
    assert jpeg_exact == sum(k[0] == "jpeg" for k in catalog.values())


def test_ycbcr(mixed_root, catalog):
    ours, ref = decoded("sluice", mixed_root, "YCbCr"), decoded("dali", mixed_root, "YCbCr")
    for p, k in catalog.items():
        m, frac = compare(ours[p], ref[p])
        assert ours[p].shape[2] == 3, p
        assert m <= 1, f"{p}: max diff {m}"
        assert frac <= 1e-3, f"{p}: {frac:.4%} of values differ"
        if k[0] == "jpeg" and k[1] == "L":
            assert m == 0, p
            assert (ours[p][..., 1:] == 128).all(), p  # no chroma
    # limited range: Y in [16, 235], Cb/Cr in [16, 240]
    for p in catalog:
        assert ours[p][..., 0].min() >= 16 and ours[p][..., 0].max() <= 235, p
        assert ours[p][..., 1:].min() >= 16 and ours[p][..., 1:].max() <= 240, p


def test_any_data(mixed_root, catalog):
    gray_jpegs = tuple(p for p, k in catalog.items() if k[0] == "jpeg" and k[1] == "L")
    others = tuple(p for p in catalog if p not in gray_jpegs)
    ours = decoded("sluice", mixed_root, "ANY_DATA")
    ref = decoded("dali", mixed_root, "ANY_DATA", files=others)  # DALI is wrong on grayscale JPEG
    for p in others:
        assert compare(ours[p], ref[p])[0] == 0, p
    dali_gray = decoded("dali", mixed_root, "GRAY")
    for p in gray_jpegs:
        assert ours[p].shape[2] == 1
        assert np.array_equal(ours[p], dali_gray[p]), p
        pil = np.asarray(Image.open(mixed_root / p))
        assert np.abs(ours[p][..., 0].astype(int) - pil.astype(int)).max() <= 2, p
    # channels as stored: RGBA PNG keeps alpha, grayscale PNG/TIFF one channel
    for p, k in catalog.items():
        want = {"L": 1, "RGB": 3, "RGBA": 4}[k[1]]
        assert ours[p].shape[2] == want, (p, k)


def test_float_is_uint8_over_255(mixed_root, catalog):
    ours = decoded("sluice", mixed_root, "RGB", "FLOAT")
    ref = decoded("dali", mixed_root, "RGB", "FLOAT")
    u8 = decoded("sluice", mixed_root, "RGB")
    for p in catalog:
        assert ours[p].dtype == np.float32
        assert np.array_equal(ours[p], ref[p]), p
        assert np.abs(ours[p].astype(np.float64) - u8[p] / 255.0).max() <= 1e-7, p
