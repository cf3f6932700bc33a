"""Shared fixtures for the Python test-suite.

Data sets are generated here, in temporary folders, from the vendored generator
tests/data_gen/make_dataset.py (deterministic for a given --count/--seed), so the suite runs
on a clean clone with nothing else on disk.
"""

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
MAKE_DATASET = HERE / "data_gen" / "make_dataset.py"

MIXED_COUNT = 120  # files from make_dataset.py --profile mixed

# `make py-test` tests the installed wheel and says so with SLUICE_TEST_INSTALLED=1: a sluice
# imported from the checkout's python/ instead (an editable install, a stray sys.path entry)
# would hide a file missing from the wheel, so the run stops before any test.
if os.environ.get("SLUICE_TEST_INSTALLED") == "1":
    import sluice

    if Path(sluice.__file__).resolve().is_relative_to(HERE.parent / "python"):
        raise RuntimeError(f"SLUICE_TEST_INSTALLED=1 but sluice was imported from the checkout: {sluice.__file__}")


# --------------------------------------------------------------------------- DALI side by side
def dali_or_none():
    """NVIDIA DALI 2.4 with the modules parity tests use, or None where it is not installed."""
    try:
        import nvidia.dali as dali
        import nvidia.dali.backend  # noqa: F401
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.ops  # noqa: F401
        import nvidia.dali.types  # noqa: F401
    except ImportError:
        return None
    return dali


def library_params():
    """pytest params running one test body against Sluice and, where it is installed, DALI
    (CPU-only): the same assertions hold for both, so the behaviour checked is DALI's."""
    import sluice

    dali = dali_or_none()
    return [pytest.param(sluice, id="sluice")] + ([pytest.param(dali, id="dali")] if dali is not None else [])


# --------------------------------------------------------------------------- GPU helper
def cuda_device_count():
    """Number of CUDA devices visible through the driver API (0 if no driver / no device)."""
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        if cuda.cuInit(0) != 0:
            return 0
        n = ctypes.c_int(0)
        if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return 0
        return n.value
    return 0


def require_gpu():
    """Call at the top of a GPU test.

    Skips the test when no CUDA device is present -- unless the environment variable
    SLUICE_REQUIRE_GPU=1 is set (GPU CI), in which case a missing GPU FAILS the test so that
    GPU coverage can never silently disappear.
    """
    if cuda_device_count() > 0:
        return
    if os.environ.get("SLUICE_REQUIRE_GPU") == "1":
        pytest.fail("SLUICE_REQUIRE_GPU=1 but no CUDA device is visible", pytrace=False)
    pytest.skip("needs a CUDA device (set SLUICE_REQUIRE_GPU=1 to make this a failure)")


@pytest.fixture
def gpu():
    """Fixture form of require_gpu()."""
    require_gpu()


# --------------------------------------------------------------------------- data sets
def _make_dataset(root, count, profile, seed=0, classes=10):
    subprocess.run(
        [sys.executable, str(MAKE_DATASET), str(root), "--count", str(count), "--profile", profile,
         "--jobs", "2", "--seed", str(seed), "--classes", str(classes)],
        check=True, capture_output=True,
    )


def _extra_images(root):
    """Formats the 120-file mixed set does not contain: TIFF (RGB, LZW RGB, grayscale), grayscale
    PNG and RGBA PNG, made with Pillow from photos that scikit-image ships."""
    from PIL import Image
    import skimage.data as skd

    rgb = Image.fromarray(skd.chelsea()).resize((301, 227))
    gray = Image.fromarray(skd.camera()).resize((257, 263))
    rgb.save(root / "class_000" / "extra_rgb.tiff")
    rgb.transpose(Image.FLIP_TOP_BOTTOM).save(root / "class_001" / "extra_lzw.tiff", compression="tiff_lzw")
    gray.save(root / "class_002" / "extra_gray.tiff")
    gray.save(root / "class_003" / "extra_gray.png")
    rgba = rgb.convert("RGBA")
    a = np.asarray(rgba).copy()
    a[..., 3] = np.linspace(0, 255, a.shape[1], dtype=np.uint8)[None, :]
    Image.fromarray(a).save(root / "class_004" / "extra_rgba.png")


@pytest.fixture(scope="session")
def mixed_root(tmp_path_factory):
    """ROOT/class_XXX/*.{jpg,png,bmp,tiff}: 120 mixed-profile files plus 5 extra PNG/TIFF."""
    root = tmp_path_factory.mktemp("mixed")
    _make_dataset(root, MIXED_COUNT, "mixed")
    _extra_images(root)
    return root


def all_files(root):
    """Every regular file under root, relative to root, sorted."""
    root = Path(root)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    """A small reader-only data set: 3 labels x 7 files of distinct, known bytes (not images)."""
    root = tmp_path_factory.mktemp("tiny")
    for label in range(3):
        d = root / f"dir_{label}"
        d.mkdir()
        for k in range(7):
            (d / f"f{k:02d}.jpg").write_bytes(f"label={label} k={k} ".encode() * (k + 1))
    # files that must be ignored by the default file_filters
    (root / "dir_0" / "notes.txt").write_text("not a sample")
    return root


@pytest.fixture(scope="session")
def small_images(mixed_root, tmp_path_factory):
    """A copy of 12 decodable JPEGs from the mixed set, in one label folder."""
    root = tmp_path_factory.mktemp("small")
    (root / "a").mkdir()
    jpgs = [p for p in all_files(mixed_root) if p.endswith(".jpg")][:12]
    for p in jpgs:
        shutil.copy(mixed_root / p, root / "a" / Path(p).name)
    return root


# --------------------------------------------------------------------------- readers
# (num_shards, shard_id, batch_size) cases of the readers' shard-sequence tests.
SHARD_CASES = [(1, 0, 3), (2, 1, 4), (3, 0, 5), (3, 2, 2), (4, 2, 3), (5, 4, 2), (11, 3, 2)]


def shard_reference(n, num_shards, shard_id, batch_size, count, pad_last_batch, stick_to_shard):
    """The first `count` sample indices a DALI reader returns for `n` samples (in the reader's
    order: the sorted file list, all records of all files): shard s of S holds
    floor(n*s/S)..floor(n*(s+1)/S); without stick_to_shard the reader goes on into the next
    shard (wrapping around the data set); pad_last_batch repeats the shard's last sample to
    ceil(n/S) samples and then to a whole batch, every epoch, moving to the next shard each
    epoch unless stick_to_shard."""
    bounds = [n * k // num_shards for k in range(num_shards + 1)]
    if not pad_last_batch:
        if stick_to_shard:
            cycle = list(range(bounds[shard_id], bounds[shard_id + 1]))
        else:
            cycle = list(range(bounds[shard_id], n)) + list(range(bounds[shard_id]))
        return [cycle[k % len(cycle)] for k in range(count)]
    epoch_len = -(-(-(-n // num_shards)) // batch_size) * batch_size
    out, epoch = [], 0
    while len(out) < count:
        s = shard_id if stick_to_shard else (shard_id + epoch) % num_shards
        shard = list(range(bounds[s], bounds[s + 1]))
        out += shard + [shard[-1]] * (epoch_len - len(shard))
        epoch += 1
    return out[:count]


# --------------------------------------------------------------------------- protobuf writer
# The wire format, for tests that write protobuf records by hand (TFRecord's Example, Caffe's
# Datum, Caffe2's TensorProtos): no protobuf package.
def pb_varint(n):
    n &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def pb_tag(field, wire):
    return pb_varint(field << 3 | wire)


def pb_len_field(field, payload):
    return pb_tag(field, 2) + pb_varint(len(payload)) + payload


def check_random_shuffle(order, epoch):
    """DALI's `random_shuffle` contract for a reader whose epoch, in reading order, is `epoch`
    (sample keys): `order(pipe_seed, **reader_kw)` returns the keys of at least 4 epochs read
    with `random_shuffle=True`. Every epoch is a permutation of the data set, the same for the
    same seed and another for another seed, not the reading order, with a small `initial_fill`
    too; the reader's `seed` wins over the pipeline's."""
    n, want = len(epoch), sorted(epoch)
    a = order(3)
    for e in range(4):
        assert sorted(a[n * e: n * (e + 1)]) == want
    assert a == order(3)
    assert a[:n] != list(epoch)
    assert a != order(4)
    b = order(3, initial_fill=2)
    for e in range(4):
        assert sorted(b[n * e: n * (e + 1)]) == want
    assert order(1, seed=77) == order(2, seed=77)


def checkpoint_after(make_pipe, batch_size, num_shards, epochs, iters_into_epoch):
    """DALI's check_reader_checkpointing, up to the comparison: runs the pipeline `make_pipe()`
    makes (a reader named "Reader") for `epochs` epochs, the last cut after `iters_into_epoch`
    iterations when given, then restores a second one from its checkpoint. Returns both and
    the number of iterations to compare ((num_shards + 1) epochs)."""
    p = make_pipe()
    p.build()
    meta = p.reader_meta()["Reader"]
    assert meta["epoch_size"] // num_shards > 2, "trivial case: at least 2 samples per shard"
    per_epoch = -(-(meta["epoch_size_padded"] // num_shards) // batch_size)
    assert per_epoch >= (iters_into_epoch or 0), "not enough iterations in an epoch"
    for epoch in range(epochs):
        for i in range(per_epoch):
            p.run()
            if iters_into_epoch is not None and epoch == epochs - 1 and i == iters_into_epoch - 1:
                break
    restored = make_pipe(checkpoint=p.checkpoint())
    restored.build()
    return p, restored, (num_shards + 1) * per_epoch
