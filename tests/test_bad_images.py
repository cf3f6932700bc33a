"""Damaged images of every format the CPU decoder reads, swept: every truncation of a small image,
and a few hundred scattered byte corruptions (fixed seeds). Each either decodes (an image of
sane shape; for truncations, only when what is missing is a trailer no pixel depends on, and
then the very pixels of the whole file: never a silently damaged image) or fails with a clear exception naming the operator,
the sample and the iteration; the pipeline goes on after either (issue 22's bad-input corpus;
the fuzz targets go further)."""

import io

import numpy as np
import pytest
from PIL import Image

from conftest import require_gpu
from sluice import fn, pipeline_def, types

RNG = np.random.default_rng(0)
PICTURE = (RNG.random((13, 17, 3)) * 255).astype(np.uint8)

# (id, PIL format, save arguments, mode)
FORMATS = [
    ("jpeg", "JPEG", {}, "RGB"),
    ("jpeg-progressive", "JPEG", {"progressive": True}, "RGB"),
    ("jpeg-gray", "JPEG", {}, "L"),
    ("png", "PNG", {}, "RGB"),
    ("png-palette", "PNG", {}, "P"),
    ("bmp", "BMP", {}, "RGB"),
    ("tiff", "TIFF", {}, "RGB"),
    ("webp-lossless", "WEBP", {"lossless": True}, "RGB"),
    ("webp-lossy", "WEBP", {"quality": 80}, "RGB"),
    ("ppm", "PPM", {}, "RGB"),
    ("pgm", "PPM", {}, "L"),
]

# Most bytes at the end a file may lose and still decode whole (PNG's IEND chunk is 12).
TRAILER = 12


def encoded(fmt, kw, mode):
    img = Image.fromarray(PICTURE).convert(mode)
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


@pytest.fixture(scope="module", params=["cpu", "mixed"])
def decoder(request):
    """A synchronous pipeline decoding whatever bytes `feed[0]` holds, one sample a batch, on
    the CPU or with the mixed (GPU) decoder."""
    device = request.param
    if device == "mixed":
        require_gpu()
    feed = [b""]

    @pipeline_def(batch_size=1, num_threads=2, device_id=None if device == "cpu" else 0, seed=1,
                  prefetch_queue_depth=1, exec_async=False, exec_pipelined=False)
    def p():
        data = fn.external_source(source=lambda: [np.frombuffer(feed[0], np.uint8)], batch=True, dtype=types.UINT8)
        return fn.decoders.image(data, device=device, output_type=types.RGB)

    pipe = p()
    pipe.build()

    def decode(data):
        feed[0] = data
        out = pipe.run()[0]
        return np.array((out if device == "cpu" else out.as_cpu())[0])

    return decode


def check_failure(decode, data):
    """Decodes `data`: the image, or None after checking the exception names the operator,
    the sample and the iteration."""
    try:
        return decode(data)
    except RuntimeError as e:
        msg = str(e)
        assert "decoders.image" in msg and "sample 0" in msg and "iteration" in msg, msg
        return None


@pytest.mark.parametrize("name,fmt,kw,mode", FORMATS, ids=[f[0] for f in FORMATS])
def test_every_truncation_fails_or_lost_only_a_trailer(decoder, name, fmt, kw, mode):
    data = encoded(fmt, kw, mode)
    whole = decoder(data)
    assert whole.shape == (13, 17, 3)
    decoded_at = []
    for n in range(1, len(data)):
        img = check_failure(decoder, data[:n])
        if img is not None:
            decoded_at.append(n)
            assert np.array_equal(img, whole), f"{name} cut to {n} of {len(data)} bytes decoded to other pixels"
    # Only the last few bytes (JPEG's EOI marker, PNG's IEND chunk, a lossy WebP's final
    # padding) can go without a pixel changing.
    assert all(n >= len(data) - TRAILER for n in decoded_at), (name, len(data), decoded_at)
    assert np.array_equal(decoder(data), whole)  # and the pipeline goes on


@pytest.mark.parametrize("name,fmt,kw,mode", FORMATS, ids=[f[0] for f in FORMATS])
def test_scattered_corruption_fails_or_decodes_sanely(decoder, name, fmt, kw, mode):
    data = encoded(fmt, kw, mode)
    whole = decoder(data)
    failed = 0
    for seed in range(300):
        r = np.random.default_rng(seed)
        damaged = bytearray(data)
        for k in r.integers(0, len(damaged), size=1 + seed % 8):
            damaged[k] = int(r.integers(0, 256))
        img = check_failure(decoder, bytes(damaged))
        if img is None:
            failed += 1
        else:
            # A byte of a header may change the declared size; never past the decoder's limits.
            assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3, (name, seed, img.shape)
    assert failed > 0, name  # the sweep reached the parsers, not only pixel bytes
    assert np.array_equal(decoder(data), whole)


def test_declared_size_beyond_the_limits_is_refused(decoder):
    """A PNG whose header declares 100000 x 100000 pixels (the chunk's CRC fixed up): refused
    before any allocation, naming the limit."""
    import struct
    import zlib

    data = bytearray(encoded("PNG", {}, "RGB"))
    ihdr = data.index(b"IHDR")
    data[ihdr + 4:ihdr + 12] = struct.pack(">II", 100000, 100000)
    data[ihdr + 17:ihdr + 21] = struct.pack(">I", zlib.crc32(bytes(data[ihdr:ihdr + 17])))
    with pytest.raises(RuntimeError, match="too large.*65535"):
        decoder(bytes(data))
    assert decoder(encoded("PNG", {}, "RGB")).shape == (13, 17, 3)
