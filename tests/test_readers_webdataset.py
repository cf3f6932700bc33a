"""fn.readers.webdataset (CPU backend) and the index tool wds2idx: tar files (and index files)
written here with Python's tarfile, read back by one test body run against Sluice and NVIDIA
DALI 2.4 (CPU-only), so the behaviour checked is DALI's.

Ported from DALI's dali/test/python/reader/test_webdataset_{requirements,corner,big,
legacy_index_files}.py and the test_webdataset_reader case of checkpointing/
test_dali_checkpointing.py, with the DALI_extra archives (MNIST devel-*.tar, missing.tar,
scrambled.tar, dtypes.tar, single/wide/cross.tar, pax and case_insensitive copies) replaced by
tiny archives built here. DALI compares against fn.readers.file over the extracted members;
here the expected bytes are known up front. Added from DALI's behaviour: source_info, tar layout
corner cases (directories, links, hidden files, non-contiguous keys, extension matching), the
index written by wds2idx, sharding against a model, and errors (truncated tars, wrong indexes,
missing files).
"""

import contextlib
import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import library_params, SHARD_CASES, checkpoint_after, shard_reference

LIBS = library_params()


# --------------------------------------------------------------------------- helpers
def is_sluice(lib):
    return lib.__name__.startswith("sluice")


SPECIAL = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}


def write_tar(path, members, fmt=tarfile.GNU_FORMAT, pax_headers=None):
    """members: (name, bytes) for a regular file, or (name, kind[, linkname]) with kind one of
    "dir", "symlink", "hardlink", "fifo"."""
    with tarfile.open(path, "w", format=fmt) as t:
        for m in members:
            info = tarfile.TarInfo(m[0])
            if pax_headers:
                info.pax_headers = dict(pax_headers)
            if m[1] not in SPECIAL:
                info.size = len(m[1])
                t.addfile(info, io.BytesIO(m[1]))
            else:
                info.type = SPECIAL[m[1]]
                if len(m) > 2:
                    info.linkname = m[2]
                t.addfile(info)
    return str(path)


def split_name(name):
    """DALI's wds2idx split: key = name up to the first dot of the last path element, extension
    = the rest. (Without a dot: key = name minus its last character, extension = whole name --
    str.find returning -1; the reader itself takes the whole name as both.)"""
    dot = name.find(".", name.rfind("/") + 1)
    return name[:dot], name[dot + 1:]


def write_index(tar_path, idx_path, version="v1.2"):
    """An index in DALI's format, as DALI's tools/wds2idx.py writes it: a line `v1.2 <samples>`,
    then per sample (consecutive regular members with one key) `<ext> <data offset> <size>
    <member name>` for each member, space-separated (v1.1: without the name). Offsets are those
    of the member data in the tar (header offset + 512). Hidden members (key "" or ending in
    '/') are left out."""
    samples, last = [], None
    with tarfile.open(tar_path) as t:
        for m in t:
            if not m.isreg():
                continue
            key, ext = split_name(m.name)
            if not key or key.endswith("/"):
                continue
            comp = [ext, str(m.offset_data), str(m.size)] + ([m.name] if version == "v1.2" else [])
            if key != last:
                samples.append([])
                last = key
            samples[-1] += comp
    with open(idx_path, "w") as f:
        f.write(f"{version} {len(samples)}\n")
        for s in samples:
            f.write(" ".join(s) + "\n")
    return str(idx_path)


def reader_pipe(lib, paths, ext, batch_size=1, pipe_kw=None, build=True, **kw):
    """A pipeline returning the reader's outputs (always a tuple)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]

    @lib.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, **(pipe_kw or {}))
    def pipe():
        out = lib.fn.readers.webdataset(paths=[str(p) for p in paths], ext=ext, name="Reader", **kw)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    p = pipe()
    if build:
        p.build()
    return p


def samples(p, n_batches):
    """[[(bytes, dtype name, shape, source_info) per output] per sample] over n_batches runs."""
    res = []
    for _ in range(n_batches):
        outs = p.run()
        for i in range(len(outs[0])):
            row = []
            for o in outs:
                a = np.array(o.at(i))
                row.append((a.tobytes(), a.dtype.name, a.shape, o[i].source_info()))
            res.append(row)
    return res


def data(p, n_batches):
    """Only the bytes: [tuple(bytes per output) per sample]."""
    return [tuple(c[0] for c in row) for row in samples(p, n_batches)]


@contextlib.contextmanager
def raises_naming(lib, name, dali_phrase=None):
    """pytest.raises(RuntimeError) whose message names `name` (a regex: file / sample / component);
    for DALI the message also holds `dali_phrase` (DALI's wording, which Sluice need not copy)."""
    with pytest.raises(RuntimeError, match=name) as info:
        yield info
    if dali_phrase is not None and not is_sluice(lib):
        assert re.search(dali_phrase, str(info.value)), str(info.value)


def build_and_run(make, runs=2):
    p = make()
    p.build()
    for _ in range(runs):
        p.run()


def offsets(tar_path):
    with tarfile.open(tar_path) as t:
        return {m.name: m.offset_data for m in t if m.isreg()}


def numbered_tars(tmp_path, sizes, exts=("jpg", "cls"), with_index=True):
    """Tars holding sum(sizes) samples numbered 0.. in order; component `ext` of sample g holds
    b"<ext>:<g>". Returns (tar paths, index paths)."""
    tars, idxs, g = [], [], 0
    for t, n in enumerate(sizes):
        members = []
        for _ in range(n):
            members += [(f"{g:06d}.{e}", f"{e}:{g}".encode()) for e in exts]
            g += 1
        tars.append(write_tar(tmp_path / f"part-{t}.tar", members))
        if with_index:
            idxs.append(write_index(tars[-1], tmp_path / f"part-{t}.idx"))
    return tars, idxs


def numbers(p, n_batches):
    """Sample numbers read from the first output (b"jpg:<g>")."""
    return [int(row[0].split(b":")[1]) for row in data(p, n_batches)]


# --------------------------------------------------------------------------- basic reading
@pytest.fixture
def mixed_tar(tmp_path):
    """Samples with several components, a directory member and a missing component."""
    return write_tar(tmp_path / "mixed.tar", [
        ("imgs", "dir"),
        ("imgs/000.jpg", b"jpeg-0"), ("imgs/000.cls", b"0"), ("imgs/000.json", b'{"k": 0}'),
        ("imgs/001.png", b"png-1!"), ("imgs/001.cls", b"1"), ("imgs/001.json", b'{"k": 1}'),
        ("imgs/002.jpg", b"jpeg-two"), ("imgs/002.json", b'{"k": 2}'),
    ])


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_components_and_extension_sets(lib, tmp_path, mixed_tar, indexed):
    """Each output takes the member whose extension is in its set ("jpg;png"); a missing one is
    an empty UINT8 tensor with no source_info ("empty", the default); source_info is
    "<path as given>:<data offset>:<member name>"."""
    kw = dict(index_paths=[write_index(mixed_tar, tmp_path / "mixed.idx")]) if indexed else {}
    p = reader_pipe(lib, mixed_tar, ["jpg;png", "cls", "json"], batch_size=3, **kw)
    off = offsets(mixed_tar)
    got = samples(p, 2)
    want = [("imgs/000.jpg", "imgs/000.cls", "imgs/000.json"), ("imgs/001.png", "imgs/001.cls", "imgs/001.json"),
            ("imgs/002.jpg", None, "imgs/002.json")]
    contents = dict((n, d) for n, d in [
        ("imgs/000.jpg", b"jpeg-0"), ("imgs/000.cls", b"0"), ("imgs/000.json", b'{"k": 0}'),
        ("imgs/001.png", b"png-1!"), ("imgs/001.cls", b"1"), ("imgs/001.json", b'{"k": 1}'),
        ("imgs/002.jpg", b"jpeg-two"), ("imgs/002.json", b'{"k": 2}')])
    for k, row in enumerate(got):
        for name, (raw, dtype, shape, info) in zip(want[k % 3], row):
            assert dtype == "uint8"
            if name is None:
                assert (raw, shape, info) == (b"", (0,), "")
            else:
                assert raw == contents[name] and shape == (len(raw),)
                assert info == f"{mixed_tar}:{off[name]}:{name}"
    assert p.epoch_size("Reader") == 3
    meta = p.reader_meta("Reader")
    assert meta["epoch_size"] == 3 and meta["epoch_size_padded"] == 3
    assert meta["number_of_shards"] == 1 and meta["shard_id"] == 0


@pytest.mark.parametrize("lib", LIBS)
def test_different_components(lib, tmp_path):
    """DALI's test_different_components (scrambled.tar): "txt;cls" takes whichever the sample has."""
    members = []
    for g in range(9):
        members += [(f"{g:03d}.jpg", b"J%d" % g), (f"{g:03d}.{'txt' if g % 2 else 'cls'}", b"L%d" % g)]
    tar = write_tar(tmp_path / "scrambled.tar", members)
    p = reader_pipe(lib, tar, ["jpg", "txt;cls"], batch_size=4, index_paths=[write_index(tar, tmp_path / "s.idx")])
    assert data(p, 3)[:9] == [(b"J%d" % g, b"L%d" % g) for g in range(9)]


@pytest.mark.parametrize("lib", LIBS)
def test_extension_matching(lib, tmp_path):
    """Extensions are everything after the first dot of the file name (may hold dots); when
    several members of a sample match one output, the first in archive order wins (not the
    order within the set); one member may feed several outputs."""
    tar = write_tar(tmp_path / "ext.tar", [
        ("000.a.b", b"AB"), ("000.b", b"B"), ("000.jpg", b"J"),
        ("001.png", b"P"), ("001.jpg", b"J1"),
    ])
    p = reader_pipe(lib, tar, ["a.b", "b", "a", "jpg;png", "jpg"])
    assert data(p, 2) == [(b"AB", b"B", b"", b"J", b"J"), (b"", b"", b"", b"P", b"J1")]
    p = reader_pipe(lib, tar, ["b;a.b"])
    assert data(p, 1) == [(b"AB",)]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_case_sensitive_extensions(lib, tmp_path, indexed):
    """DALI's test_case_{in,}sensitive_{container,arg}_format."""
    tar = write_tar(tmp_path / "case.tar", [("000.JPG", b"J0"), ("000.Cls", b"C0"), ("001.jpg", b"J1"), ("001.cls", b"C1")])
    kw = dict(index_paths=[write_index(tar, tmp_path / "case.idx")]) if indexed else {}
    p = reader_pipe(lib, tar, ["Jpg", "cls"], case_sensitive_extensions=False, **kw)
    assert data(p, 2) == [(b"J0", b"C0"), (b"J1", b"C1")]
    p = reader_pipe(lib, tar, ["jpg", "cls"], **kw)  # case sensitive by default
    assert data(p, 2) == [(b"", b""), (b"J1", b"C1")]
    with raises_naming(lib, r"case\.(tar|idx)", "Underful sample detected at"):
        build_and_run(lambda: reader_pipe(lib, tar, ["Jpg", "cls"], build=False, missing_component_behavior="error", **kw))


@pytest.mark.parametrize("lib", LIBS)
def test_tar_layout(lib, tmp_path):
    """Only regular members count: directories, symlinks, hard links and fifos are skipped; a
    member whose name starts with a dot is skipped; members of one key form a sample only while
    consecutive (a key seen again later starts a new sample); paths inside the tar are part of
    the key."""
    tar = write_tar(tmp_path / "layout.tar", [
        ("a", "dir"), ("a/000.jpg", b"J0"), ("a/000.cls", b"C0"),
        ("link.jpg", "symlink", "a/000.jpg"), ("hard.jpg", "hardlink", "a/000.jpg"),
        ("fifo.jpg", "fifo"), (".hidden.jpg", b"H"),
        ("b/000.jpg", b"J0b"), ("001.jpg", b"J1"), ("a/000.txt", b"T"), ("001.cls", b"C1"),
    ])
    want = [(b"J0", b"C0", b""), (b"J0b", b"", b""), (b"J1", b"", b""), (b"", b"", b"T"), (b"", b"C1", b"")]
    for kw in ({}, dict(index_paths=[write_index(tar, tmp_path / "layout.idx")])):
        p = reader_pipe(lib, tar, ["jpg", "cls", "txt"], **kw)
        assert data(p, 5) == want
        assert p.epoch_size("Reader") == 5


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_tar_formats(lib, tmp_path, fmt):
    """DALI's test_pax_format: pax extended headers (here one per member) are skipped; offsets
    are those of the member data, after them. GNU tars hold a long name in a member of its own."""
    members = [("000.jpg", b"J0"), ("000.cls", b"C0"), ("001.jpg", b"J1"), ("001.cls", b"C1")]
    if fmt == tarfile.GNU_FORMAT:
        members.append(("d" * 60 + "/" + "e" * 60 + ".jpg", b"LONG"))
    tar = write_tar(tmp_path / "f.tar", members, fmt=fmt,
                    pax_headers={"comment": "x"} if fmt == tarfile.PAX_FORMAT else None)
    p = reader_pipe(lib, tar, ["jpg", "cls"])
    got = samples(p, len(members) // 2 + 1)
    off = offsets(tar)
    assert [tuple(c[0] for c in row) for row in got][:2] == [(b"J0", b"C0"), (b"J1", b"C1")]
    assert got[0][0][3] == f"{tar}:{off['000.jpg']}:000.jpg"
    if fmt == tarfile.GNU_FORMAT:
        name = members[-1][0]
        assert got[2][0][0] == b"LONG" and got[2][0][3] == f"{tar}:{off[name]}:{name}"


@pytest.mark.parametrize("lib", LIBS)
def test_single_and_wide_sample(lib, tmp_path):
    """DALI's test_single_sample, test_single_sample_and_junk and test_wide_sample."""
    single = write_tar(tmp_path / "single.tar", [("sample.txt", b"only one")])
    junk = write_tar(tmp_path / "junk.tar", [("d", "dir"), ("sample.txt", b"only one"),
                                              ("l.txt", "symlink", "sample.txt")])
    for tar, mcb in ((single, "skip"), (junk, "")):
        p = reader_pipe(lib, tar, ["txt"], index_paths=[write_index(tar, tmp_path / "x.idx")],
                        missing_component_behavior=mcb)
        assert data(p, 10) == [(b"only one",)] * 10
        assert p.epoch_size("Reader") == 1
    exts = [str(k) for k in range(60)]
    wide = write_tar(tmp_path / "wide.tar", [(f"s.{e}", e.encode() * 3) for e in exts])
    p = reader_pipe(lib, wide, exts, index_paths=[write_index(wide, tmp_path / "w.idx")])
    assert data(p, 3) == [tuple(e.encode() * 3 for e in exts)] * 3


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("option", ["lazy_init", "read_ahead", "dont_use_mmap", "skip_cached_images"])
def test_reading_options(lib, tmp_path, option):
    """DALI's test_lazy_init / test_read_ahead and the dont_use_mmap / skip_cached_images axes of
    test_cross_check: the same samples either way."""
    tars, idxs = numbered_tars(tmp_path, [5, 3])
    p = reader_pipe(lib, tars, ["jpg", "cls"], batch_size=3, index_paths=idxs, **{option: True})
    assert data(p, 6) == [(b"jpg:%d" % (g % 8), b"cls:%d" % (g % 8)) for g in range(18)]


# --------------------------------------------------------------------------- missing components
@pytest.fixture
def missing_tar(tmp_path):
    """DALI's missing.tar in small: samples 0..5 have jpg+cls, 6..9 only jpg."""
    members = []
    for g in range(10):
        members.append((f"{g:03d}.jpg", b"J%d" % g))
        if g < 6:
            members.append((f"{g:03d}.cls", b"C%d" % g))
    return write_tar(tmp_path / "missing.tar", members)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_missing_component_empty(lib, tmp_path, missing_tar, indexed):
    kw = dict(index_paths=[write_index(missing_tar, tmp_path / "missing.idx")]) if indexed else {}
    for mcb in ({}, dict(missing_component_behavior="empty"), dict(missing_component_behavior="")):
        p = reader_pipe(lib, missing_tar, ["jpg", "cls"], batch_size=5, **kw, **mcb)
        got = samples(p, 2)
        assert [tuple(c[0] for c in row) for row in got] == [(b"J%d" % g, b"C%d" % g if g < 6 else b"") for g in range(10)]
        assert all(row[1][1:] == ("uint8", (0,), "") for row in got[6:])
        assert p.epoch_size("Reader") == 10


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_missing_component_skip(lib, tmp_path, missing_tar, indexed):
    """DALI's test_skip_sample: incomplete samples are left out of the data set (and the epoch
    size); the value is case-insensitive."""
    kw = dict(index_paths=[write_index(missing_tar, tmp_path / "missing.idx")]) if indexed else {}
    for value in ("skip", "Skip"):
        p = reader_pipe(lib, missing_tar, ["jpg", "cls"], batch_size=4, missing_component_behavior=value, **kw)
        assert p.epoch_size("Reader") == 6
        assert data(p, 3) == [(b"J%d" % (g % 6), b"C%d" % (g % 6)) for g in range(12)]
    # a component missing from every sample leaves no sample at all
    with pytest.raises(RuntimeError, match=r"(?i)samples"):
        build_and_run(lambda: reader_pipe(lib, missing_tar, ["jpg", "txt"], build=False,
                                          missing_component_behavior="skip", **kw))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_missing_component_error(lib, tmp_path, missing_tar, indexed):
    """DALI's test_raise_error_on_missing: the build fails naming the archive (or the index file
    and its line)."""
    kw = dict(index_paths=[write_index(missing_tar, tmp_path / "missing.idx")]) if indexed else {}
    with raises_naming(lib, r"missing\.(tar|idx)", "Underful sample detected at"):
        build_and_run(lambda: reader_pipe(lib, missing_tar, ["jpg", "cls"], build=False,
                                          missing_component_behavior="error", **kw))
    # complete samples are fine
    p = reader_pipe(lib, missing_tar, ["jpg"], missing_component_behavior="error", **kw)
    assert data(p, 2) == [(b"J0",), (b"J1",)]


@pytest.mark.parametrize("lib", LIBS)
def test_missing_component_behavior_invalid(lib, missing_tar):
    with pytest.raises(RuntimeError, match="missing_component_behavior"):
        build_and_run(lambda: reader_pipe(lib, missing_tar, ["jpg", "cls"], build=False,
                                          missing_component_behavior="SomethingInvalid"))


# --------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("lib", LIBS)
def test_dtypes(lib, tmp_path):
    """DALI's test_dtypes: raw bytes reinterpreted as the dtype, shape (size // itemsize,)."""
    types = lib.types
    members = []
    for g in range(10):
        members += [(f"{g:03d}.float16", np.full(10, g, np.float16).tobytes()),
                    (f"{g:03d}.int32", np.full(10, g, np.int32).tobytes()),
                    (f"{g:03d}.float64", np.full(10, g, np.float64).tobytes())]
    tar = write_tar(tmp_path / "dtypes.tar", members)
    p = reader_pipe(lib, tar, ["float16", "int32", "float64"], batch_size=4,
                    index_paths=[write_index(tar, tmp_path / "dtypes.idx")],
                    dtypes=[types.FLOAT16, types.INT32, types.FLOAT64])
    for b in range(3):
        outs = p.run()
        for i in range(4):
            g = (4 * b + i) % 10
            for o, dt in zip(outs, (np.float16, np.int32, np.float64)):
                a = np.array(o.at(i))
                assert a.dtype == dt and a.shape == (10,)
                np.testing.assert_array_equal(a, np.full(10, g, dt))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_dtype_errors(lib, tmp_path, indexed):
    """DALI's test_mmap_dtype_incompatibility and the dtype part of test_argument_errors."""
    types = lib.types
    tar = write_tar(tmp_path / "odd.tar", [("000.bin", b"12345"), ("000.cls", b"7")])
    kw = dict(index_paths=[write_index(tar, tmp_path / "odd.idx")]) if indexed else {}
    with raises_naming(lib, r"odd\.(tar|idx)", "component size and dtype incompatible"):
        build_and_run(lambda: reader_pipe(lib, tar, ["bin", "cls"], build=False, dtypes=[types.INT16, types.UINT8], **kw))
    with pytest.raises(RuntimeError, match="Unsupported output dtype|dtypes"):
        build_and_run(lambda: reader_pipe(lib, tar, ["bin", "cls"], build=False, dtypes=[types.STRING, types.STRING], **kw))
    with pytest.raises(RuntimeError, match="Number of extensions does not match the number of provided types|dtypes"):
        build_and_run(lambda: reader_pipe(lib, tar, ["bin", "cls"], build=False, dtypes=[types.INT8], **kw))
    p = reader_pipe(lib, tar, ["bin", "cls"], dtypes=[types.INT8, types.UINT8], **kw)
    raw, dtype, shape, _ = samples(p, 1)[0][0]
    assert (raw, dtype, shape) == (b"12345", "int8", (5,))


# --------------------------------------------------------------------------- several archives, order
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("indexed", [False, True])
def test_several_archives_in_order(lib, tmp_path, indexed):
    """DALI's test_wds_sharding / test_index_generation (one shard): the samples of all archives,
    archive after archive, each in archive order; then the next epoch from the start."""
    tars, idxs = numbered_tars(tmp_path, [4, 3, 5], with_index=indexed)
    p = reader_pipe(lib, tars, ["jpg", "cls"], batch_size=5, missing_component_behavior="error",
                    **(dict(index_paths=idxs) if indexed else {}))
    assert p.epoch_size("Reader") == 12
    assert data(p, 6) == [(b"jpg:%d" % (g % 12), b"cls:%d" % (g % 12)) for g in range(30)]
    infos = [row[0][3] for row in samples(reader_pipe(lib, tars, ["jpg"], batch_size=12, **(dict(index_paths=idxs) if indexed else {})), 1)]
    assert [s.rsplit(":", 2)[0] for s in infos] == [tars[0]] * 4 + [tars[1]] * 3 + [tars[2]] * 5
    assert [s.rsplit(":", 1)[1] for s in infos] == [f"{g:06d}.jpg" for g in range(12)]


@pytest.mark.parametrize("lib", LIBS)
def test_index_matches_no_index(lib, tmp_path, mixed_tar):
    """Reading through an index (v1.2 or the legacy v1.1 without names) gives the same samples as
    reading the tar itself; v1.1 source_info ends with an empty member name."""
    ext = ["jpg;png", "cls", "json"]
    plain = samples(reader_pipe(lib, mixed_tar, ext, batch_size=3), 1)
    v12 = samples(reader_pipe(lib, mixed_tar, ext, batch_size=3, index_paths=[write_index(mixed_tar, tmp_path / "a.idx")]), 1)
    v11 = samples(reader_pipe(lib, mixed_tar, ext, batch_size=3,
                              index_paths=[write_index(mixed_tar, tmp_path / "b.idx", version="v1.1")]), 1)
    assert plain == v12
    assert [[c[:3] for c in row] for row in v11] == [[c[:3] for c in row] for row in plain]
    assert all(c[3] == "" or c[3].endswith(":") for row in v11 for c in row)


@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle(lib, tmp_path):
    """random_shuffle: each epoch holds every sample once; the order follows the seed."""
    tars, idxs = numbered_tars(tmp_path, [4, 7])

    def order(seed):
        return numbers(reader_pipe(lib, tars, ["jpg", "cls"], batch_size=3, index_paths=idxs, random_shuffle=True,
                                   pipe_kw=dict(seed=seed)), 15)

    a = order(3)
    for e in range(4):
        assert sorted(a[11 * e: 11 * (e + 1)]) == list(range(11))
    assert a == order(3)
    assert a[:11] != list(range(11))
    assert a != order(4)


# --------------------------------------------------------------------------- sharding


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
def test_sharding(lib, tmp_path, num_shards, shard_id, batch_size, pad_last_batch, stick_to_shard):
    """DALI's test_sharding / test_wds_sharding / test_cross_check: 11 samples over 3 archives."""
    tars, idxs = numbered_tars(tmp_path, [4, 2, 5])
    p = reader_pipe(lib, tars, ["jpg", "cls"], batch_size=batch_size, index_paths=idxs, num_shards=num_shards,
                    shard_id=shard_id, pad_last_batch=pad_last_batch, stick_to_shard=stick_to_shard)
    runs = 4 * -(-11 // batch_size)
    assert numbers(p, runs) == shard_reference(11, num_shards, shard_id, batch_size, runs * batch_size,
                                               pad_last_batch, stick_to_shard)
    meta = p.reader_meta("Reader")
    padded = -(-11 // num_shards) * num_shards if pad_last_batch else 11
    assert meta == {"epoch_size": 11, "epoch_size_padded": padded, "number_of_shards": num_shards,
                    "shard_id": shard_id, "pad_last_batch": int(pad_last_batch), "stick_to_shard": int(stick_to_shard)}
    assert p.epoch_size("Reader") == padded  # DALI: Pipeline.epoch_size gives epoch_size_padded


# --------------------------------------------------------------------------- checkpointing
# DALI's test_webdataset_reader cases: (num_epochs, batch_size, shard_id, num_shards,
# random_shuffle, stick_to_shard, pad_last_batch, iters_into_epoch). DALI reads 3000 MNIST
# samples; here 3 archives of 20, so batch sizes 16..128 became 3, 5, 2, 7 and case 3's 4 became
# 1 (the case needs >= iters_into_epoch iterations per epoch).
CKPT_CASES = [
    (10, 1, 1, 8, False, False, False, 3),
    (3, 2, 0, 1, False, False, True, 4),
    (3, 1, 4, 7, False, True, False, 5),
    (0, 8, 2, 6, False, True, True, None),
    (12, 3, 0, 5, True, False, False, 3),
    (8, 5, 1, 3, True, False, True, 4),
    (6, 2, 4, 6, True, True, False, 5),
    (10, 7, 3, 4, True, True, True, None),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", CKPT_CASES, ids=[str(i) for i in range(len(CKPT_CASES))])
def test_checkpointing(lib, tmp_path, case):
    epochs, batch, shard_id, shards, shuffle, stick, pad, into = case
    tars, idxs = numbered_tars(tmp_path, [20, 20, 20])

    def pipe(**pkw):
        return reader_pipe(lib, tars, ["jpg", "cls"], batch_size=batch, build=False, index_paths=idxs,
                           pipe_kw=dict(enable_checkpointing=True, **pkw), pad_last_batch=pad,
                           random_shuffle=shuffle, shard_id=shard_id, num_shards=shards, stick_to_shard=stick,
                           initial_fill=1024)

    p, restored, iterations = checkpoint_after(pipe, batch, shards, epochs, into)
    for k in range(iterations):
        assert data(p, 1) == data(restored, 1), f"iteration {k} after the checkpoint"


# --------------------------------------------------------------------------- the index tool
def wds2idx_cmd(lib):
    if is_sluice(lib):
        return [sys.executable, "-m", "sluice.tools.wds2idx"]
    return [sys.executable, "-m", "wds2idx"]  # DALI's wheel installs tools/wds2idx.py as a module


@pytest.mark.parametrize("lib", LIBS)
def test_wds2idx_tool(lib, tmp_path):
    """`wds2idx ARCHIVE [INDEX]` writes the index write_index() writes (INDEX defaults to the
    archive path up to its first dot after the last '/', plus ".idx"), and the reader reads
    through it (DALI's generate_temp_index_file)."""
    members = [("d", "dir"), ("d/000.jpg", b"J0"), ("d/000.cls", b"C0"), (".hidden.jpg", b"H"),
               ("d/.hid.jpg", b"DH"), ("l.jpg", "symlink", "d/000.jpg"), ("001.jpg", b"J1" * 300),
               ("001.a.b", b"AB"), ("002.cls", b"C2"), ("001.cls", b"C1")]
    tar = write_tar(tmp_path / "data.tar", members)
    (tmp_path / "out").mkdir()
    r = subprocess.run(wds2idx_cmd(lib) + [tar, str(tmp_path / "out" / "x.idx")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = write_index(tar, tmp_path / "mine.idx")
    assert (tmp_path / "out" / "x.idx").read_text() == Path(want).read_text()
    assert Path(want).read_text().splitlines()[0] == "v1.2 4"
    r = subprocess.run(wds2idx_cmd(lib) + [tar], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "data.idx").read_text() == Path(want).read_text()
    p = reader_pipe(lib, tar, ["jpg", "cls"], index_paths=[str(tmp_path / "data.idx")])
    assert data(p, 4) == [(b"J0", b"C0"), (b"J1" * 300, b""), (b"", b"C2"), (b"", b"C1")]
    # an archive without regular files: the tool fails
    empty = write_tar(tmp_path / "empty.tar", [("d", "dir")])
    r = subprocess.run(wds2idx_cmd(lib) + [empty, str(tmp_path / "e.idx")], capture_output=True, text=True)
    assert r.returncode != 0 and "empty" in r.stderr


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("lib", LIBS)
def test_argument_errors(lib, tmp_path):
    """DALI's test_argument_errors (argument part)."""
    tars, idxs = numbered_tars(tmp_path, [2, 2, 2])
    with pytest.raises(RuntimeError, match="The number of index files, if any, must match the number of archives|index_paths"):
        build_and_run(lambda: reader_pipe(lib, tars, ["jpg", "cls"], build=False, index_paths=idxs[:1]))
    with pytest.raises(RuntimeError, match="No webdataset archives provided|paths"):
        build_and_run(lambda: reader_pipe(lib, [], ["jpg"], build=False))
    # an empty index_paths list means "no index files"
    p = reader_pipe(lib, tars, ["jpg", "cls"], index_paths=[])
    assert data(p, 1) == [(b"jpg:0", b"cls:0")]


INDEX_ERRORS = [
    (b"", "no version signature found"),
    (b"v0.1", r"Unsupported version of the index file \(v0\.1\)"),
    (b"v1.1", "no sample count found"),
    (b"v1.1 -1", "sample count must be positive"),
    (b"v1.1 1\n", "no extensions provided for the sample"),
    (b"v1.2 3\njpg 512 2 000.jpg\n", "no extensions provided for the sample"),  # fewer lines than samples
    (b"v1.1 1\njpg", "Could not find all necessary component parameters"),
    (b"v1.2 1\njpg 512 2", "Could not find all necessary component parameters"),
    (b"v1.1 1\njpg 1 0", "tar offset is not a multiple of tar block size"),
    (b"v1.1 1\njpg 51200 1", "offset is outside of the archive file"),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("contents,message", INDEX_ERRORS, ids=[str(i) for i in range(len(INDEX_ERRORS))])
def test_index_errors(lib, tmp_path, contents, message):
    """DALI's test_index_errors: each names the index file (DALI: 'Malformed index file at
    "<path>" line <n> - <message>'; line 0 is the header)."""
    tar = write_tar(tmp_path / "t.tar", [("000.jpg", b"J0"), ("001.jpg", b"J1")])
    idx = tmp_path / "bad.idx"
    idx.write_bytes(contents)
    with raises_naming(lib, r"bad\.idx", message):
        build_and_run(lambda: reader_pipe(lib, tar, "jpg", build=False, index_paths=[str(idx)]))


@pytest.mark.parametrize("lib", LIBS)
def test_index_quirks(lib, tmp_path):
    """Lines after the announced sample count are ignored; the index is trusted: an offset that is
    a multiple of 512 inside the archive is read as given (here a header block)."""
    tar = write_tar(tmp_path / "t.tar", [("000.jpg", b"J0"), ("001.jpg", b"J1")])
    idx = tmp_path / "i.idx"
    idx.write_text("v1.2 1\njpg 512 2 000.jpg\njpg 1536 2 001.jpg\n")
    assert data(reader_pipe(lib, tar, ["jpg"], index_paths=[str(idx)]), 2) == [(b"J0",), (b"J0",)]
    idx.write_text("v1.2 1\njpg 1024 7 000.jpg\n")
    assert data(reader_pipe(lib, tar, ["jpg"], index_paths=[str(idx)]), 1) == [(b"001.jpg",)]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("where", ["cut_header", "cut_data", "no_eof_blocks"])
def test_truncated_tar(lib, tmp_path, where):
    """A tar cut inside a header block, or inside a member's data, fails (DALI: at build when it
    parses the tar itself: "Corrupted tar file" / "Invalid seek", naming no file); a tar cut at
    a member boundary without the end-of-archive blocks is fine."""
    full = write_tar(tmp_path / "full.tar", [("000.jpg", b"J0" * 10), ("000.cls", b"C0"), ("001.jpg", b"J1" * 300),
                                              ("001.cls", b"C1")])
    raw = Path(full).read_bytes()
    off = offsets(full)
    cut = tmp_path / f"{where}.tar"
    if where == "no_eof_blocks":
        cut.write_bytes(raw[:off["001.cls"] + 512])
        assert data(reader_pipe(lib, cut, ["jpg", "cls"]), 2) == [(b"J0" * 10, b"C0"), (b"J1" * 300, b"C1")]
        return
    cut.write_bytes(raw[:off["001.jpg"] - 512 + 100] if where == "cut_header" else raw[:off["001.jpg"] + 100])
    with pytest.raises(RuntimeError, match=rf"Corrupted tar file|Invalid seek|{where}\.tar"):
        build_and_run(lambda: reader_pipe(lib, cut, ["jpg", "cls"], build=False), runs=2)


@pytest.mark.parametrize("lib", LIBS)
def test_truncated_tar_with_index(lib, tmp_path):
    """With an index made before the tar was cut: a member past the end fails with the index file
    and line ("offset is outside of the archive file"); a member cut short fails naming the
    archive. (DALI only with dont_use_mmap=True: with mmap, reading a member cut short crashes the
    process.)"""
    full = write_tar(tmp_path / "full.tar", [("000.jpg", b"J0"), ("001.jpg", b"J1" * 300), ("002.jpg", b"J2")])
    idx = write_index(full, tmp_path / "full.idx")
    raw = Path(full).read_bytes()
    off = offsets(full)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(raw[:off["001.jpg"] + 100])
    with pytest.raises(RuntimeError, match=r"full\.idx|cut\.tar"):
        build_and_run(lambda: reader_pipe(lib, cut, ["jpg"], build=False, index_paths=[idx],
                                          dont_use_mmap=True, pipe_kw=dict(prefetch_queue_depth=1)), runs=3)
    with pytest.raises(RuntimeError, match=r"(?s)full\.idx.*line 3|cut\.tar"):
        p = reader_pipe(lib, cut, ["jpg"], index_paths=[idx], pipe_kw=dict(prefetch_queue_depth=1))
        assert data(p, 1) == [(b"J0",)]
        for _ in range(2):
            p.run()


@pytest.mark.parametrize("lib", LIBS)
def test_missing_files(lib, tmp_path):
    tar = write_tar(tmp_path / "t.tar", [("000.jpg", b"J0")])
    with pytest.raises(RuntimeError, match=r"nope\.tar"):
        build_and_run(lambda: reader_pipe(lib, [tar, str(tmp_path / "nope.tar")], ["jpg"], build=False))
    with pytest.raises(RuntimeError, match=r"nope\.idx"):
        build_and_run(lambda: reader_pipe(lib, tar, ["jpg"], build=False, index_paths=[str(tmp_path / "nope.idx")]))


@pytest.mark.parametrize("lib", LIBS)
def test_bad_sample_in_the_middle(lib, tmp_path):
    """A sample whose index entry points outside the archive fails naming the index file (DALI:
    at run(), "offset is outside of the archive file"; it reads ahead, so the error may come a
    batch early, and its pipeline is unusable afterwards). Sluice may catch that at build; for a
    bad batch at run() its archive is cut after the build (DALI would crash on that: it maps the
    file): Sluice fails the batch that holds the sample and goes on with the next one."""
    tar = write_tar(tmp_path / "t.tar", [("000.jpg", b"J0"), ("001.jpg", b"J1"), ("002.jpg", b"J2")])
    idx = tmp_path / "bad.idx"
    idx.write_text("v1.2 3\njpg 512 2 000.jpg\njpg 102400 2 001.jpg\njpg 2560 2 002.jpg\n")

    def pipe():
        return reader_pipe(lib, tar, ["jpg"], index_paths=[str(idx)], pipe_kw=dict(prefetch_queue_depth=1))

    with pytest.raises(RuntimeError, match=r"bad\.idx"):
        p = pipe()
        for _ in range(3):
            p.run()
    if is_sluice(lib):
        # sample 1 is the archive's last member; cut it short once the pipeline is built. A
        # synchronous executor runs nothing ahead of run(), so only batch 0 can have been read
        # before the cut (an asynchronous one may already hold batch 1: no error to see).
        tar = write_tar(tmp_path / "t2.tar", [("000.jpg", b"J0"), ("002.jpg", b"J2"), ("001.jpg", b"J1" * 300)])
        off = offsets(tar)
        idx = write_index(tar, tmp_path / "t2.idx")
        lines = Path(idx).read_text().splitlines()
        Path(idx).write_text("\n".join([lines[0], lines[1], lines[3], lines[2]]) + "\n")
        p = reader_pipe(lib, tar, ["jpg"], index_paths=[idx],
                        pipe_kw=dict(prefetch_queue_depth=1, exec_async=False, exec_pipelined=False))
        os.truncate(tar, off["001.jpg"] + 10)
        assert data(p, 1) == [(b"J0",)]
        with pytest.raises(RuntimeError, match=r"t2\.(tar|idx)|001\.jpg"):
            p.run()
        assert data(p, 1) == [(b"J2",)]
        assert data(p, 1) == [(b"J0",)]  # the next epoch


# What DALI does when it parses a tar itself (no index): quirks of its tar scan. Sluice does not
# reproduce them; each test asserts what Sluice does instead.
@pytest.mark.parametrize("lib", LIBS)
def test_quirk_archive_without_members(lib, tmp_path):
    """An archive without regular members is one sample with every output empty (the scan always
    closes a last sample)."""
    empty = write_tar(tmp_path / "empty.tar", [("d", "dir")])
    if is_sluice(lib):  # Sluice lists no sample for an archive without members
        with pytest.raises(RuntimeError, match=r"no samples"):
            build_and_run(lambda: reader_pipe(lib, empty, ["jpg"], build=False))
        tars, _ = numbered_tars(tmp_path, [2], with_index=False)
        p = reader_pipe(lib, [empty] + tars, ["jpg", "cls"])
        assert p.epoch_size("Reader") == 2 and data(p, 2) == [(b"jpg:0", b"cls:0"), (b"jpg:1", b"cls:1")]
        return
    p = reader_pipe(lib, empty, ["jpg"])
    assert p.epoch_size("Reader") == 1 and data(p, 2) == [(b"",), (b"",)]
    tars, _ = numbered_tars(tmp_path, [2], with_index=False)
    p = reader_pipe(lib, [empty] + tars, ["jpg", "cls"])
    assert p.epoch_size("Reader") == 3 and data(p, 3) == [(b"", b""), (b"jpg:0", b"cls:0"), (b"jpg:1", b"cls:1")]


@pytest.mark.parametrize("lib", LIBS)
def test_quirk_hidden_first_member(lib, tmp_path):
    """A hidden first member adds an empty sample in front (a hidden member later adds none)."""
    lead = write_tar(tmp_path / "lead.tar", [(".x.jpg", b"H"), ("000.jpg", b"J0"), ("001.jpg", b"J1")])
    p = reader_pipe(lib, lead, ["jpg"])
    if is_sluice(lib):  # hidden members are left out, first or not
        assert p.epoch_size("Reader") == 2 and data(p, 2) == [(b"J0",), (b"J1",)]
        return
    assert p.epoch_size("Reader") == 3 and data(p, 3) == [(b"",), (b"J0",), (b"J1",)]


@pytest.mark.parametrize("lib", LIBS)
def test_quirk_names(lib, tmp_path):
    """A name without a dot in its last element is its own extension (the whole path); "dir/.x.jpg"
    is NOT hidden (key "dir/", extension "h.jpg"; wds2idx drops it)."""
    odd = write_tar(tmp_path / "odd.tar", [("a/noext", b"N"), ("x/.h.jpg", b"H")])
    p = reader_pipe(lib, odd, ["a/noext", "h.jpg"])
    if is_sluice(lib):  # a name without a dot has no extension; x/.h.jpg is hidden, as wds2idx treats it
        assert p.epoch_size("Reader") == 1 and data(p, 1) == [(b"", b"")]
        return
    assert data(p, 2) == [(b"N", b""), (b"", b"H")]


@pytest.mark.parametrize("lib", LIBS)
def test_quirk_one_member_two_outputs(lib, tmp_path):
    """One member may feed two outputs, but the completeness check counts members, not outputs:
    with missing_component_behavior="skip" such a sample is dropped (here every sample, so the
    reader has none and the build fails)."""
    dup = write_tar(tmp_path / "dup.tar", [("000.jpg", b"J0"), ("001.jpg", b"J1"), ("001.cls", b"C1")])
    assert data(reader_pipe(lib, dup, ["jpg", "jpg"]), 2) == [(b"J0", b"J0"), (b"J1", b"J1")]
    if is_sluice(lib):  # Sluice counts outputs: every output has its component, nothing is skipped
        p = reader_pipe(lib, dup, ["jpg", "jpg"], missing_component_behavior="skip")
        assert data(p, 2) == [(b"J0", b"J0"), (b"J1", b"J1")]
        return
    with pytest.raises(RuntimeError, match=r"(?i)samples"):
        build_and_run(lambda: reader_pipe(lib, dup, ["jpg", "jpg"], build=False, missing_component_behavior="skip"))
