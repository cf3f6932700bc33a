"""fn.readers.sequence (CPU): sequences of frames from a folder of streams (one sub-folder of
image files per stream), decoded to FHWC. Frames are written here with PIL; one test body runs
against Sluice and NVIDIA DALI 2.4 (CPU-only), so the behaviour checked is DALI's.

Ported from DALI's tests (DALI_extra's db/sequence/frames replaced by streams made here):
checkpointing/test_dali_checkpointing.py (test_sequence_reader, all 8 cases) and
test_dali_cpu_only.py's sequence reader case. Added here, from DALI 2.4's behaviour: which
files are frames (image extensions, case-insensitive; hidden names and top-level files left
out), the order (whole path strings sorted, so "a-b/" comes before "a/"), step and stride,
sequences never crossing streams, image_type, shards, padding, shuffling, reader_meta and the
errors. DALI's pipeline is unusable after a data error; that Sluice goes on with the next
batch is checked for Sluice only.
"""

import os

import numpy as np
import pytest
from PIL import Image

from conftest import library_params, SHARD_CASES, checkpoint_after, shard_reference

LIBS = library_params()


def is_sluice(lib):
    return lib.__name__.startswith("sluice")


def frame_pixels(stream, i, shape=(6, 8)):
    """Frame i of `stream`: a deterministic random RGB image."""
    seed = sum(map(ord, stream)) * 1000 + i
    return np.random.default_rng(seed).integers(0, 256, (*shape, 3), dtype=np.uint8)


def write_streams(root, streams, ext="png", shape=(6, 8)):
    """streams: {name: frame count}; frame i of stream s is frame_pixels(s, i) in `{i:03d}.ext`."""
    for s, n in streams.items():
        os.makedirs(root / s, exist_ok=True)
        for i in range(n):
            Image.fromarray(frame_pixels(s, i, shape)).save(root / s / f"{i:03d}.{ext}")


def expected_sequences(root, length, step=1, stride=1):
    """[[frame path, ...] per sequence] in DALI's order: `root/*/*` image files sorted as whole
    path strings, grouped by folder; sequences start every `step` frames, frames `stride`
    apart, whole sequences only."""
    exts = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm", ".jp2", ".webp")
    files = sorted(f"{root}/{d}/{f}" for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(f"{root}/{d}")
                   for f in os.listdir(f"{root}/{d}") if not f.startswith(".") and f.lower().endswith(exts))
    streams = {}
    for f in files:
        streams.setdefault(f.rsplit("/", 1)[0], []).append(f)
    out = []
    for frames in streams.values():
        for i in range(0, len(frames), step):
            if i + (length - 1) * stride >= len(frames):
                break
            out.append([frames[i + j * stride] for j in range(length)])
    return out


@pytest.fixture(scope="module")
def streams_root(tmp_path_factory):
    """Streams "b" (7 frames), "a" (5), "a-b" (3, sorted first: '-' < '/'), "c" (4, one .PNG),
    plus what is not a frame: a text file, a hidden file, a hidden folder, a file at the top."""
    root = tmp_path_factory.mktemp("seq") / "frames"
    write_streams(root, {"b": 7, "a": 5, "a-b": 3, "c": 4})
    os.rename(root / "c" / "002.png", root / "c" / "002.PNG")
    (root / "a" / "notes.txt").write_text("not a frame")
    Image.fromarray(frame_pixels("x", 0)).save(root / "a" / ".hidden.png")
    write_streams(root, {".cache": 4})
    Image.fromarray(frame_pixels("y", 0)).save(root / "top.png")
    return root


def reader_pipe(lib, batch_size=1, num_threads=2, pipe_kw=None, **reader_kw):
    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=1234, **(pipe_kw or {}))
    def p():
        return lib.fn.readers.sequence(name="R", **reader_kw)

    pipe = p()
    pipe.build()
    return pipe


def pixels_of(path):
    return np.array(Image.open(path).convert("RGB"))


def sequence_ids(pipe, n_batches, seqs):
    """The position in `seqs` of every sequence returned over n_batches runs (matched by pixels)."""
    by_pixels = {np.stack([pixels_of(f) for f in s]).tobytes(): k for k, s in enumerate(seqs)}
    out = []
    for _ in range(n_batches):
        (o,) = pipe.run()
        out += [by_pixels[np.array(o.at(i)).tobytes()] for i in range(len(o))]
    return out


# --------------------------------------------------------------------------- frames and order
@pytest.mark.parametrize("length,step,stride", [(1, 1, 1), (3, 1, 1), (3, 2, 1), (2, 1, 3), (3, 3, 2), (5, 1, 1), (7, 4, 1)])
@pytest.mark.parametrize("lib", LIBS)
def test_sequences_are_the_frames_in_order(lib, streams_root, length, step, stride):
    """Every sequence, in order, is its frames decoded: UINT8 FHWC (F = sequence_length), source
    info empty; sequences never cross streams and wrap around after the last."""
    seqs = expected_sequences(streams_root, length, step, stride)
    pipe = reader_pipe(lib, batch_size=3, file_root=str(streams_root), sequence_length=length, step=step,
                       stride=stride)
    assert pipe.epoch_size("R") == len(seqs)
    k = 0
    for _ in range(-(-2 * len(seqs) // 3)):
        (o,) = pipe.run()
        assert o.layout() == "FHWC"
        for i in range(len(o)):
            x = np.array(o.at(i))
            assert x.dtype == np.uint8 and x.shape == (length, 6, 8, 3)
            want = np.stack([pixels_of(f) for f in seqs[k % len(seqs)]])
            np.testing.assert_array_equal(x, want)
            assert o[i].source_info() == ""
            k += 1


def test_dataset_listing(streams_root):
    """What counts: "a-b" sorts before "a"; the .PNG frame counts, nothing else added counts."""
    seqs = expected_sequences(streams_root, 1)
    names = [s[0][len(str(streams_root)) + 1:] for s in seqs]
    assert names[:3] == ["a-b/000.png", "a-b/001.png", "a-b/002.png"] and names[3] == "a/000.png"
    assert "c/002.PNG" in names and len(names) == 7 + 5 + 3 + 4


@pytest.mark.parametrize("image_type", ["RGB", "BGR", "GRAY"])
@pytest.mark.parametrize("ext", ["png", "jpg", "bmp"])
def test_image_types_and_formats_match_dali(tmp_path, image_type, ext):
    """Frames of each format, decoded in each image_type, equal DALI's. Within 1 for JPEG and for
    GRAY: DALI's sequence reader decodes with its legacy host decoder (OpenCV's fixed-point
    RGB-to-gray and chroma rounding), Sluice with the decoder of its decoders.image."""
    dali = [p.values[0] for p in LIBS if p.id == "dali"]
    if not dali:
        pytest.skip("DALI is not installed")
    import sluice

    write_streams(tmp_path, {"s0": 4, "s1": 3}, ext=ext, shape=(10, 14))
    outs = []
    for lib in (sluice, dali[0]):
        pipe = reader_pipe(lib, batch_size=4, file_root=str(tmp_path), sequence_length=2,
                           image_type=getattr(lib.types, image_type))
        outs.append([np.array(pipe.run()[0].at(i)) for i in range(4)])
    for a, b in zip(*outs):
        assert a.shape == b.shape == (2, 10, 14, 1 if image_type == "GRAY" else 3)
        tol = 1 if ext == "jpg" or image_type == "GRAY" else 0
        assert np.abs(a.astype(int) - b.astype(int)).max() <= tol


# --------------------------------------------------------------------------- shards and shuffling
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
@pytest.mark.parametrize("lib", LIBS)
def test_shard_sequence(lib, streams_root, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    seqs = expected_sequences(streams_root, 3)  # 11 sequences
    assert len(seqs) == 11
    pipe = reader_pipe(lib, batch_size=batch_size, file_root=str(streams_root), sequence_length=3,
                       num_shards=num_shards, shard_id=shard_id, stick_to_shard=stick_to_shard,
                       pad_last_batch=pad_last_batch)
    n_batches = 6
    want = shard_reference(11, num_shards, shard_id, batch_size, n_batches * batch_size, pad_last_batch, stick_to_shard)
    assert sequence_ids(pipe, n_batches, seqs) == want


@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle_permutes_every_epoch(lib, streams_root):
    seqs = expected_sequences(streams_root, 3)
    n = len(seqs)
    pipe = reader_pipe(lib, batch_size=n, file_root=str(streams_root), sequence_length=3, random_shuffle=True,
                       initial_fill=8)
    epochs = [sequence_ids(pipe, 1, seqs) for _ in range(3)]
    for e in epochs:
        assert sorted(e) == list(range(n))
    assert epochs[0] != list(range(n)) and epochs[0] != epochs[1]


@pytest.mark.parametrize("lib", LIBS)
def test_reader_meta(lib, streams_root):
    pipe = reader_pipe(lib, batch_size=2, file_root=str(streams_root), sequence_length=3, num_shards=3,
                       shard_id=1, pad_last_batch=True)
    meta = pipe.reader_meta("R")
    assert meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 12
    assert meta["number_of_shards"] == 3 and meta["shard_id"] == 1 and bool(meta["pad_last_batch"])


# DALI's test_sequence_reader cases: (epochs, batch, shard_id, num_shards, random_shuffle,
# stick_to_shard, pad_last_batch, iters_into_epoch).
CHECKPOINT_CASES = [
    (0, 1, 0, 3, False, False, False, None),
    (4, 2, 2, 3, True, True, True, 1),
    (3, 2, 1, 2, True, True, False, 1),
    (1, 3, 0, 3, True, False, True, 2),
    (2, 1, 2, 3, False, True, True, 1),
    (6, 1, 0, 3, False, True, False, 1),
    (5, 1, 2, 3, True, True, False, 3),
    (0, 2, 3, 6, True, True, True, None),
]


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq_ckpt")
    write_streams(root, {f"s{k}": 9 + k for k in range(5)}, shape=(4, 5))
    return root


@pytest.mark.parametrize("case", CHECKPOINT_CASES, ids=[str(i) for i in range(len(CHECKPOINT_CASES))])
@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing(lib, ckpt_root, case):
    """A pipeline restored from `checkpoint()` returns the batches the original returns next."""
    epochs, batch, shard_id, shards, shuffle, stick, pad, into = case

    @lib.pipeline_def(batch_size=batch, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return lib.fn.readers.sequence(name="Reader", file_root=str(ckpt_root), sequence_length=5,
                                       pad_last_batch=pad, random_shuffle=shuffle, shard_id=shard_id,
                                       num_shards=shards, stick_to_shard=stick)

    p, restored, iterations = checkpoint_after(pipe, batch, shards, epochs, into)
    for k in range(iterations):
        (x,), (y,) = p.run(), restored.run()
        for i in range(batch):
            np.testing.assert_array_equal(np.array(x.at(i)), np.array(y.at(i)), err_msg=f"iteration {k}")


# --------------------------------------------------------------------------- names and errors
@pytest.mark.parametrize("lib", LIBS)
def test_legacy_names(lib, streams_root):
    """fn.sequence_reader and ops.SequenceReader (deprecated) and ops.readers.Sequence give what
    fn.readers.sequence gives."""
    def run(make):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
        def p():
            return make(file_root=str(streams_root), sequence_length=2)

        pipe = p()
        pipe.build()
        return [np.array(pipe.run()[0].at(i)) for i in range(3)]

    ref = run(lib.fn.readers.sequence)
    assert ref[0].shape == (2, 6, 8, 3)
    with pytest.warns(DeprecationWarning, match="sequence_reader"):
        np.testing.assert_array_equal(run(lib.fn.sequence_reader), ref)
    with pytest.warns(DeprecationWarning, match="SequenceReader"):
        np.testing.assert_array_equal(run(lambda **kw: lib.ops.SequenceReader(**kw)()), ref)
    np.testing.assert_array_equal(run(lambda **kw: lib.ops.readers.Sequence(**kw)()), ref)


@pytest.mark.parametrize("kw,match", [
    (dict(file_root="/nonexistent/frames", sequence_length=2), r"/nonexistent/frames"),
    (dict(sequence_length=30), r"(?i)sequence|samples: 0|empty"),
    (dict(sequence_length=0), r"(?i)sequence length must be positive"),
    (dict(sequence_length=2, step=0), r"(?i)step must be positive"),
    (dict(sequence_length=2, stride=-1), r"(?i)stride must be positive"),
])
@pytest.mark.parametrize("lib", LIBS)
def test_bad_arguments(lib, streams_root, kw, match):
    """DALI 2.4 checks step and stride only after listing the sequences, which with step 0 never
    ends (it runs out of memory): those two are checked for Sluice only."""
    if not is_sluice(lib) and ("step" in kw or "stride" in kw):
        pytest.skip("DALI 2.4 lists sequences with step 0 until it runs out of memory")
    kw = dict(dict(file_root=str(streams_root)), **kw)
    with pytest.raises(RuntimeError, match=match):
        reader_pipe(lib, **kw).run()


@pytest.mark.parametrize("lib", LIBS)
def test_frames_of_different_sizes(lib, tmp_path):
    """Every frame of a sequence must have the first one's shape."""
    write_streams(tmp_path, {"s": 3})
    Image.fromarray(frame_pixels("s", 1, (7, 8))).save(tmp_path / "s" / "001.png")
    pipe = reader_pipe(lib, batch_size=1, file_root=str(tmp_path), sequence_length=3)
    with pytest.raises(RuntimeError, match=r"Expected all frames to have same shape. \(7, 8, 3\) != \( ?6, 8, 3\)"):
        pipe.run()


@pytest.mark.parametrize("lib", LIBS)
def test_a_damaged_frame_names_its_file(lib, tmp_path):
    """A frame that does not decode fails the pipeline; Sluice names the file (DALI 2.4 does not:
    "nvImageCodec failure") and then reads on."""
    write_streams(tmp_path, {"s": 2, "t": 2})
    (tmp_path / "s" / "001.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    pipe = reader_pipe(lib, batch_size=1, file_root=str(tmp_path), sequence_length=2)
    with pytest.raises(RuntimeError, match=r"s/001\.png" if is_sluice(lib) else "nvImageCodec"):
        pipe.run()
    if is_sluice(lib):
        (o,) = pipe.run()
        want = np.stack([frame_pixels("t", 0), frame_pixels("t", 1)])
        np.testing.assert_array_equal(np.array(o.at(0)), want)


@pytest.mark.parametrize("lib", LIBS)
def test_the_reader_itself_is_deprecated(lib, streams_root):
    """DALI deprecated readers.sequence (fn.external_source or the video readers replace it):
    using it warns, and it still works."""
    with pytest.warns(DeprecationWarning, match=r"readers\.sequence` is now deprecated"):
        pipe = reader_pipe(lib, batch_size=2, file_root=str(streams_root), sequence_length=2)
    (o,) = pipe.run()
    assert np.array(o.at(0)).shape == (2, 6, 8, 3)
