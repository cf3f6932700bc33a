"""fn.readers.numpy (CPU backend): .npy files written here with NumPy, read back by one test
body run against Sluice and NVIDIA DALI 2.4 (CPU-only), so the behaviour checked is DALI's.

Ported from DALI's dali/test/python/reader/test_numpy.py (the cases needing no GPU/GDS and no
DALI_extra): dtypes and shapes with C and Fortran order through file_root/file_filter, `files`
and `file_list`; header sizes up to 32 dims; O_DIRECT / header caching; pad_last_batch with
source_info; the legacy `fn.numpy_reader` alias; every ROI variant (checked against a NumPy
reference here rather than against fn.slice); ROI argument errors; unsupported dtypes and
inconsistent batches. Added here, from DALI's behaviour: discovery order and source_info,
shard / shuffle sequences, malformed files, missing files and build-time argument errors.
"""

import math
import os

import numpy as np
import pytest

from conftest import library_params, SHARD_CASES, shard_reference, check_random_shuffle

LIBS = library_params()

# Every dtype DALI's numpy reader supports, and the DALIDataType name of the batch it gives.
DTYPES = {
    np.bool_: "BOOL",
    np.int8: "INT8",
    np.int16: "INT16",
    np.int32: "INT32",
    np.int64: "INT64",
    np.uint8: "UINT8",
    np.uint16: "UINT16",
    np.uint32: "UINT32",
    np.uint64: "UINT64",
    np.float16: "FLOAT16",
    np.float32: "FLOAT",
    np.float64: "FLOAT64",
}

# DALI's test_shapes: 8 samples for each number of dimensions.
SHAPES = {
    0: [()] * 8,
    1: [(10,), (12,), (10,), (20,), (10,), (12,), (13,), (19,)],
    2: [(10, 10), (12, 10), (10, 12), (20, 15), (10, 11), (12, 11), (13, 11), (19, 10)],
    3: [(6, 2, 5), (5, 6, 2), (3, 3, 3), (10, 1, 8), (8, 8, 3), (2, 2, 3), (8, 4, 3), (1, 10, 1)],
    4: [(2, 6, 2, 5), (5, 1, 6, 2), (3, 2, 3, 3), (1, 10, 1, 8), (2, 8, 2, 3), (2, 3, 2, 3), (1, 8, 4, 3),
        (1, 3, 10, 1)],
}


# --------------------------------------------------------------------------- helpers
def is_sluice(lib):
    return lib.__name__.startswith("sluice")


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
    return np.asarray((rng.random(shape) * 20.0 - 10.0).astype(dtype))


def save(path, arr, fortran=False):
    """np.save `arr` in C or Fortran order; returns what np.load reads back."""
    arr = np.array(arr, order="F" if fortran else "C")
    np.save(str(path), arr)
    return np.load(str(path))


def npy_bytes(header, data=b"", version=1, align=64, magic=b"\x93NUMPY"):
    """A hand-made .npy file: magic, version, header length, header padded to `align`."""
    h = header.encode("latin1")
    len_size = 2 if version == 1 else 4
    total = len(magic) + 2 + len_size + len(h) + 1
    h += b" " * (-total % align) + b"\n"
    return magic + bytes([version, 0]) + len(h).to_bytes(len_size, "little") + h + data


def reader_pipe(lib, batch_size=1, num_threads=2, pipe_seed=1234, pipe_kw=None, **reader_kw):
    """A built pipeline whose only output is fn.readers.numpy(name="R", **reader_kw)."""
    fn = lib.fn
    reader_kw = {k: v for k, v in reader_kw.items() if v is not None}

    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=pipe_seed, **(pipe_kw or {}))
    def p():
        return fn.readers.numpy(name="R", **reader_kw)

    pipe = p()
    pipe.build()
    return pipe


def read(pipe, n_batches):
    """[(source_info, array)] over n_batches runs."""
    out = []
    for _ in range(n_batches):
        (o,) = pipe.run()
        for i in range(len(o)):
            out.append((o[i].source_info(), np.array(o.at(i))))
    return out


def o_direct_supported(path):
    """O_DIRECT is refused by some file systems (tmpfs): DALI fails there, so skip."""
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


def write_numbered(root, n, dtype=np.int16, shape=(2,)):
    """Files s_00.npy .. s_{n-1}.npy in `root`, file k holding the value k."""
    root.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        np.save(str(root / f"s_{k:02d}.npy"), np.full(shape, k, dtype))
    return root


def values(pipe, n_batches):
    return [int(a.flat[0]) for _, a in read(pipe, n_batches)]


# ROI reference (DALI's NamedSliceAttr + out_of_bounds_policy, on the array in C order)
def _llround(x):
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def roi_ref(arr, roi_start=None, rel_roi_start=None, roi_end=None, rel_roi_end=None, roi_shape=None,
            rel_roi_shape=None, roi_axes=None, out_of_bounds_policy=None, fill_value=None):
    nd = arr.ndim
    axes = [a + nd if a < 0 else a for a in (roi_axes or range(nd))]

    def vec(v):
        if v is None:
            return None
        v = np.atleast_1d(np.asarray(v)).tolist()
        if not v:
            return None  # an empty list is as if not given
        return v * len(axes) if len(v) == 1 else v  # one value applies to every axis

    start, rel_start, end, rel_end, shape, rel_shape = map(
        vec, (roi_start, rel_roi_start, roi_end, rel_roi_end, roi_shape, rel_roi_shape))
    f32 = np.float32
    anchor, out_shape = [0] * nd, list(arr.shape)
    for i, ax in enumerate(axes):
        ext = arr.shape[ax]
        # relative coordinates are float32 and multiplied by the extent in float32
        if start is not None:
            a = float(start[i])
        elif rel_start is not None:
            a = float(f32(rel_start[i]) * f32(ext))
        else:
            a = 0.0
        if end is not None:
            e = float(end[i])
        elif rel_end is not None:
            e = float(f32(rel_end[i]) * f32(ext))
        elif shape is not None:
            e = a + shape[i]
        elif rel_start is not None and rel_shape is not None:
            e = (float(f32(rel_start[i])) + float(f32(rel_shape[i]))) * ext  # summed in double first
        elif rel_shape is not None:
            e = a + float(f32(rel_shape[i]) * f32(ext))
        else:
            e = float(ext)
        anchor[ax] = _llround(a)
        out_shape[ax] = _llround(e) - anchor[ax]
    if out_of_bounds_policy == "trim_to_shape":
        for d in range(nd):
            lo = min(max(anchor[d], 0), arr.shape[d])
            hi = min(max(anchor[d] + out_shape[d], 0), arr.shape[d])
            anchor[d], out_shape[d] = lo, hi - lo
    elif out_of_bounds_policy != "pad":
        for d in range(nd):
            assert 0 <= anchor[d] <= arr.shape[d] and 0 <= anchor[d] + out_shape[d] <= arr.shape[d]
    fill = 0.0 if fill_value is None else float(fill_value)
    if arr.dtype.kind in "iu":  # rounded and saturated to the type
        info = np.iinfo(arr.dtype)
        fill = min(max(_llround(fill), info.min), info.max)
    out = np.full(out_shape, fill, dtype=arr.dtype)
    src = tuple(slice(min(max(anchor[d], 0), arr.shape[d]), min(max(anchor[d] + out_shape[d], 0), arr.shape[d]))
                for d in range(nd))
    if all(s.stop > s.start for s in src):
        out[tuple(slice(s.start - anchor[d], s.stop - anchor[d]) for d, s in enumerate(src))] = arr[src]
    return out


# --------------------------------------------------------------------------- dtypes, shapes, order
TYPE_SHAPE_CASES = [(dt, nd) for dt in DTYPES for nd in range(5)]


@pytest.mark.parametrize("dtype,ndim", TYPE_SHAPE_CASES, ids=[f"{np.dtype(d).name}-{n}d" for d, n in TYPE_SHAPE_CASES])
@pytest.mark.parametrize("lib", LIBS)
def test_types_and_shapes(lib, tmp_path, dtype, ndim):
    """DALI's test_types_and_shapes: every supported dtype, 0-4 dims, C / Fortran / mixed order,
    files found by file_filter, given by `files` or by `file_list`, several batch sizes."""
    idx = TYPE_SHAPE_CASES.index((dtype, ndim))
    order = ["C", "F", "mixed"][idx % 3]
    file_arg = ["file_filter", "files", "file_list"][(idx // 3) % 3]
    batch_size = [1, 3, 4, 8, 16][idx % 5]
    num_threads = 1 + idx % 3
    rng = np.random.default_rng(1902 + idx)
    names = [f"test_{i:02d}.npy" for i in range(8)]
    arrays = []
    for i, (name, shape) in enumerate(zip(names, SHAPES[ndim])):
        fortran = order == "F" or (order == "mixed" and i % 2 == 1)
        arrays.append(save(tmp_path / name, random_array(rng, shape, dtype), fortran))
    (tmp_path / "notes.txt").write_text("not a numpy file")

    kw = dict(file_root=str(tmp_path))
    if file_arg == "files":
        kw["files"] = names
        want_src = names
    elif file_arg == "file_list":
        (tmp_path / "input.lst").write_text("\n".join(names))
        kw["file_list"] = str(tmp_path / "input.lst")
        want_src = names
    else:
        kw["file_filter"] = "*.npy"
        want_src = [f"./{n}" for n in names]  # files in file_root itself are listed as "./name"

    pipe = reader_pipe(lib, batch_size=batch_size, num_threads=num_threads, **kw)
    n_batches = -(-9 // batch_size)  # past the end of the epoch: it starts over
    for k in range(n_batches):
        (o,) = pipe.run()
        assert len(o) == batch_size
        assert o.dtype == getattr(lib.types, DTYPES[dtype])
        assert o.layout() == ""
        for i in range(batch_size):
            j = (k * batch_size + i) % 8
            got = np.array(o.at(i))
            assert got.dtype == np.dtype(dtype) and got.shape == arrays[j].shape
            np.testing.assert_array_equal(got, arrays[j])
            assert o[i].source_info() == want_src[j]


@pytest.mark.parametrize("use_o_direct", [False, True])
@pytest.mark.parametrize("lib", LIBS)
def test_header_parse(lib, tmp_path, use_o_direct):
    """DALI's test_header_parse: 0 to 32 dims make headers of several lengths (the 21/22 dims
    pair crosses the 128/192 byte boundary)."""
    paths = []
    for ndim in range(33):
        paths.append(str(tmp_path / f"numpy_ndim_{ndim}.npy"))
        np.save(paths[-1], np.full((1,) * ndim, 1.0, dtype=np.float32))
    if use_o_direct and not o_direct_supported(paths[0]):
        pytest.skip("O_DIRECT not supported on this file system")
    kw = dict(use_o_direct=True, dont_use_mmap=True) if use_o_direct else {}
    pipe = reader_pipe(lib, batch_size=1, files=paths, **kw)
    for ndim in range(33):
        (o,) = pipe.run()
        assert o.shape() == [(1,) * ndim]
        got = np.array(o.at(0))
        assert got.shape == (1,) * ndim and got.dtype == np.float32 and got.all()


@pytest.mark.parametrize("lib", LIBS)
def test_fortran_order_is_read_in_c_order(lib, tmp_path):
    """A Fortran-order file comes out as the same logical array, in C order (shape not reversed);
    no ROI, so more than 6 dims is fine."""
    rng = np.random.default_rng(3)
    shapes = [(2, 3), (2, 3, 4), (2, 1, 3, 2), (2, 3, 2, 2, 2, 2, 3)]
    for k, shape in enumerate(shapes):
        arr = np.asfortranarray(random_array(rng, shape, np.int16))
        np.save(str(tmp_path / f"f{k}.npy"), arr)
        assert b"'fortran_order': True" in (tmp_path / f"f{k}.npy").read_bytes()[:128]
        pipe = reader_pipe(lib, files=[str(tmp_path / f"f{k}.npy")])
        (o,) = pipe.run()
        got = np.array(o.at(0))
        assert o.shape() == [shape] and got.shape == shape
        np.testing.assert_array_equal(got, arr)


@pytest.mark.parametrize("lib", LIBS)
def test_scalars_and_empty_arrays(lib, tmp_path):
    save(tmp_path / "a.npy", np.float32(3.5))
    save(tmp_path / "b.npy", np.float32(-1.0))
    pipe = reader_pipe(lib, batch_size=2, file_root=str(tmp_path))
    (o,) = pipe.run()
    assert o.shape() == [(), ()] and [float(np.array(o.at(i))) for i in range(2)] == [3.5, -1.0]

    save(tmp_path / "e0.npy", np.zeros((3, 0), np.float32))
    save(tmp_path / "e1.npy", np.zeros((2, 5), np.float32) + 2)
    save(tmp_path / "e2.npy", np.zeros((0, 4), np.float32), fortran=True)
    pipe = reader_pipe(lib, batch_size=3, file_root=str(tmp_path), file_filter="e*.npy", dont_use_mmap=True)
    (o,) = pipe.run()
    assert o.shape() == [(3, 0), (2, 5), (0, 4)]
    assert (np.array(o.at(1)) == 2).all()


# --------------------------------------------------------------------------- which files, in which order
@pytest.mark.parametrize("lib", LIBS)
def test_file_root_discovery(lib, tmp_path):
    """file_root: the files of the folder itself ("./name"), then those of each sub-folder
    ("sub/name", sub-folders sorted), one level deep only; names sorted byte-wise (upper case
    first); the filter is a case-sensitive glob on the file name, hidden files included."""
    root = tmp_path / "root"
    for sub in ("", "sub", "asub", "sub/deeper", "empty"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    content = {"b.npy": 1, "a.npy": 2, ".hidden.npy": 3, "Z.npy": 4, "sub/c.npy": 5, "asub/z.npy": 6,
               "sub/deeper/e.npy": 7, "UP.NPY": 8, "x.npz": 9}
    for rel, v in content.items():
        with open(root / rel, "wb") as f:
            np.save(f, np.full((2,), v, np.int32))
    (root / "readme.txt").write_text("hello")

    def listing(**kw):
        pipe = reader_pipe(lib, file_root=str(root), **kw)
        n = pipe.epoch_size("R")
        got = read(pipe, n)
        for src, arr in got:
            assert arr.tolist() == [content[src[2:] if src.startswith("./") else src]] * 2
        return [s for s, _ in got]

    assert listing() == ["./.hidden.npy", "./Z.npy", "./a.npy", "./b.npy", "asub/z.npy", "sub/c.npy"]
    assert listing(file_filter="[ab]*.npy") == ["./a.npy", "./b.npy"]
    assert listing(file_filter="*.NPY") == ["./UP.NPY"]
    assert listing(file_filter="?.np?") == ["./Z.npy", "./a.npy", "./b.npy", "./x.npz", "asub/z.npy", "sub/c.npy"]


@pytest.mark.parametrize("lib", LIBS)
def test_files_argument(lib, tmp_path):
    """`files`: read in the order given, duplicates kept, relative to file_root (an absolute
    path ignores it), file_filter ignored; source_info is the path as given."""
    root = write_numbered(tmp_path / "root", 4)
    (root / "sub").mkdir()
    np.save(str(root / "sub" / "t.npy"), np.full((2,), 7, np.int16))
    files = ["s_02.npy", "sub/t.npy", "s_00.npy", "s_02.npy", str(root / "s_03.npy")]
    pipe = reader_pipe(lib, batch_size=5, files=files, file_root=str(root), file_filter="nothing*")
    assert pipe.epoch_size("R") == 5
    got = read(pipe, 1)
    assert [s for s, _ in got] == files
    assert [int(a[0]) for _, a in got] == [2, 7, 0, 2, 3]

    abs_files = [str(root / "s_01.npy"), str(root / "s_00.npy")]
    for kw in (dict(), dict(file_root=str(tmp_path / "does_not_exist"))):
        got = read(reader_pipe(lib, batch_size=2, files=abs_files, **kw), 1)
        assert [s for s, _ in got] == abs_files and [int(a[0]) for _, a in got] == [1, 0]


@pytest.mark.parametrize("lib", LIBS)
def test_file_list(lib, tmp_path):
    """file_list: one path per line, in order, blank lines skipped; relative to the list's folder,
    or to file_root when given; source_info is the line."""
    root = write_numbered(tmp_path / "root", 4)
    (root / "sub").mkdir()
    np.save(str(root / "sub" / "s_00.npy"), np.full((2,), 10, np.int16))
    lst = root / "list.txt"
    lst.write_text("s_03.npy\n\ns_01.npy\nsub/s_00.npy\ns_03.npy\n")
    pipe = reader_pipe(lib, batch_size=4, file_list=str(lst))
    assert pipe.epoch_size("R") == 4
    got = read(pipe, 1)
    assert [s for s, _ in got] == ["s_03.npy", "s_01.npy", "sub/s_00.npy", "s_03.npy"]
    assert [int(a[0]) for _, a in got] == [3, 1, 10, 3]

    # with file_root, names are relative to it, not to the list's folder
    other = tmp_path / "lists"
    other.mkdir()
    (other / "l.txt").write_text("s_00.npy\n" + str(root / "s_02.npy") + "\n")
    got = read(reader_pipe(lib, batch_size=2, file_list=str(other / "l.txt"), file_root=str(root / "sub")), 1)
    assert [int(a[0]) for _, a in got] == [10, 2]
    assert [s for s, _ in got] == ["s_00.npy", str(root / "s_02.npy")]


@pytest.mark.parametrize("lib", LIBS)
def test_file_list_line_is_the_whole_path(lib, tmp_path):
    """Unlike readers.file, a numpy file_list has no labels: "name 3" is a file called "name 3"."""
    root = write_numbered(tmp_path, 2)
    (tmp_path / "l.txt").write_text("s_00.npy 3\n")
    with pytest.raises(RuntimeError, match=r"s_00\.npy 3"):
        read(reader_pipe(lib, file_list=str(tmp_path / "l.txt")), 2)
    os.rename(root / "s_01.npy", root / "s_01.npy 5")
    (tmp_path / "l2.txt").write_text("s_01.npy 5\n")
    got = read(reader_pipe(lib, file_list=str(tmp_path / "l2.txt")), 1)
    assert got[0][0] == "s_01.npy 5" and got[0][1].tolist() == [1, 1]


# --------------------------------------------------------------------------- epochs, shards, shuffling
@pytest.fixture(scope="module")
def eleven(tmp_path_factory):
    return write_numbered(tmp_path_factory.mktemp("eleven"), 11)


@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
@pytest.mark.parametrize("lib", LIBS)
def test_shard_sequence(lib, eleven, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    pipe = reader_pipe(lib, batch_size=batch_size, file_root=str(eleven), num_shards=num_shards, shard_id=shard_id,
                       stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
    n_batches = 9
    got = read(pipe, n_batches)
    want = shard_reference(11, num_shards, shard_id, batch_size, n_batches * batch_size, pad_last_batch,
                           stick_to_shard)
    assert [int(a[0]) for _, a in got] == want
    assert [s for s, _ in got] == [f"./s_{k:02d}.npy" for k in want]


@pytest.mark.parametrize("lib", LIBS)
def test_epoch_size_and_reader_meta(lib, eleven):
    """epoch_size(name) is the padded size: ceil(11 / 3) * 3 with pad_last_batch (not rounded to batches)."""
    pipe = reader_pipe(lib, batch_size=2, file_root=str(eleven), num_shards=3, shard_id=1, pad_last_batch=True)
    assert pipe.epoch_size("R") == 12 and pipe.epoch_size() == {"R": 12}
    meta = pipe.reader_meta("R")
    assert meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 12
    assert meta["number_of_shards"] == 3 and meta["shard_id"] == 1
    assert bool(meta["pad_last_batch"]) and not bool(meta["stick_to_shard"])
    pipe = reader_pipe(lib, batch_size=2, file_root=str(eleven), num_shards=3, shard_id=2)
    meta = pipe.reader_meta("R")
    assert pipe.epoch_size("R") == 11 and meta["epoch_size_padded"] == 11 and not bool(meta["pad_last_batch"])


@pytest.mark.parametrize("description", [(1, 2, 1), (3, 1, 2)], ids=["1files-bs2-1shard", "3files-bs1-2shards"])
@pytest.mark.parametrize("dont_use_mmap,use_o_direct", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("lib", LIBS)
def test_pad_last_sample(lib, tmp_path, description, dont_use_mmap, use_o_direct):
    """DALI's test_pad_last_sample: a short shard is padded with its last sample (same data,
    same source_info) over two iterations."""
    num_samples, batch_size, num_shards = description
    rng = np.random.default_rng(7)
    filenames, arrays = [], []
    for index in range(num_samples):
        filenames.append(str(tmp_path / f"test_{index:02d}.npy"))
        arrays.append(save(filenames[-1], random_array(rng, (5, 2, 8), np.float32)))
    if use_o_direct and not o_direct_supported(filenames[0]):
        pytest.skip("O_DIRECT not supported on this file system")
    ref_names = filenames + [filenames[-1]] * (batch_size - num_samples)
    ref_arrays = arrays + [arrays[-1]] * (batch_size - num_samples)
    pipe = reader_pipe(lib, batch_size=batch_size, num_threads=4, files=filenames, file_root=str(tmp_path),
                       pad_last_batch=True, num_shards=num_shards, dont_use_mmap=dont_use_mmap,
                       use_o_direct=use_o_direct)
    for _ in range(2):
        (o,) = pipe.run()
        for i in range(batch_size):
            assert o[i].source_info() == ref_names[i]
            np.testing.assert_array_equal(np.array(o.at(i)), ref_arrays[i])


@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle(lib, eleven):
    """random_shuffle: each epoch is a permutation of the data set; the order follows the seed."""
    def order(pipe_seed, **kw):
        pipe = reader_pipe(lib, batch_size=3, pipe_seed=pipe_seed, file_root=str(eleven), random_shuffle=True, **kw)
        return values(pipe, 15)  # 45 samples: 4 epochs and a bit

    check_random_shuffle(order, list(range(11)))


@pytest.mark.parametrize("lib", LIBS)
def test_shuffle_after_epoch(lib, eleven):
    """shuffle_after_epoch: the whole data set is permuted every epoch, the same way on every
    shard, so within an epoch the shards still split the data set between them."""
    a = values(reader_pipe(lib, batch_size=3, file_root=str(eleven), shuffle_after_epoch=True), 15)
    epochs = [a[11 * e: 11 * (e + 1)] for e in range(4)]
    for e in epochs:
        assert sorted(e) == list(range(11))
    assert epochs[0] != list(range(11)) and epochs[0] != epochs[1]
    assert a == values(reader_pipe(lib, batch_size=3, file_root=str(eleven), shuffle_after_epoch=True), 15)
    c = values(reader_pipe(lib, batch_size=3, file_root=str(eleven), shuffle_after_epoch=True,
                           shuffle_after_epoch_seed=1), 15)
    assert c != a and all(sorted(c[11 * e: 11 * (e + 1)]) == list(range(11)) for e in range(4))

    # 3 shards of 3, 4, 4 samples, padded to 4 each; batch 2 -> 2 batches per epoch and shard
    shards = [values(reader_pipe(lib, batch_size=2, file_root=str(eleven), shuffle_after_epoch=True, num_shards=3,
                                 shard_id=s, pad_last_batch=True), 6) for s in range(3)]
    for e in range(3):
        seen = [v for s in range(3) for v in shards[s][4 * e: 4 * (e + 1)]]
        assert sorted(set(seen)) == list(range(11))
        assert shards[0][4 * e + 3] == shards[0][4 * e + 2]  # the short shard's padding


# --------------------------------------------------------------------------- reading options
READ_OPTIONS = [
    dict(dont_use_mmap=True),
    dict(dont_use_mmap=True, use_o_direct=True),
    dict(cache_header_information=True),
    dict(read_ahead=True),
    dict(lazy_init=True),
    dict(prefetch_queue_depth=3),
    dict(initial_fill=4),
    dict(skip_cached_images=True),
    dict(register_buffers=False),
    dict(tensor_init_bytes=16, bytes_per_sample_hint=[64]),
]


@pytest.mark.parametrize("options", READ_OPTIONS, ids=[",".join(o) for o in READ_OPTIONS])
@pytest.mark.parametrize("lib", LIBS)
def test_read_options_give_the_same_data(lib, tmp_path, options):
    """DALI's test_o_direct / test_cache_headers: options that change how, not what, is read."""
    rng = np.random.default_rng(11)
    arrays = [save(tmp_path / f"t_{k}.npy", random_array(rng, SHAPES[3][k], np.float16), fortran=k % 2 == 1)
              for k in range(5)]
    if options.get("use_o_direct") and not o_direct_supported(tmp_path / "t_0.npy"):
        pytest.skip("O_DIRECT not supported on this file system")
    pipe = reader_pipe(lib, batch_size=3, num_threads=3, file_root=str(tmp_path), **options)
    got = read(pipe, 4)  # 12 samples: the second epoch goes through the cached headers
    for k, (src, arr) in enumerate(got):
        assert src == f"./t_{k % 5}.npy"
        np.testing.assert_array_equal(arr, arrays[k % 5])


@pytest.mark.parametrize("lib", LIBS)
def test_legacy_numpy_reader_alias(lib, tmp_path):
    """DALI's test_numpy_reader_alias: fn.numpy_reader is readers.numpy, with a deprecation warning."""
    rng = np.random.default_rng(5)
    for index in range(20):
        save(tmp_path / f"test_{index:02d}.npy", random_array(rng, (5, 2, 8), np.float32))
    (tmp_path / "other.npy").write_bytes(b"filtered out")
    kw = dict(file_root=str(tmp_path), file_filter="test_*.npy", seed=1234, random_shuffle=True, initial_fill=8)
    pipe = lib.Pipeline(batch_size=8, num_threads=2, device_id=None)
    with pipe:
        new = lib.fn.readers.numpy(**kw)
        with pytest.warns(DeprecationWarning, match="numpy_reader"):
            old = lib.fn.numpy_reader(**kw)
        pipe.set_outputs(new, old)
    pipe.build()
    for _ in range(5):
        a, b = pipe.run()
        for i in range(8):
            assert a[i].source_info() == b[i].source_info()
            np.testing.assert_array_equal(np.array(a.at(i)), np.array(b.at(i)))


# --------------------------------------------------------------------------- regions of interest
ROI_SHAPES = SHAPES[2]

# (roi_start, rel_roi_start, roi_end, rel_roi_end, roi_shape, rel_roi_shape, roi_axes, out_of_bounds_policy,
#  fill_value): DALI's roi_args (static ones), then more
ROI_CASES = [
    ([1, 2], None, None, None, None, None, None, None, None),
    (None, [0.1, 0.2], None, None, None, None, None, None, 10.0),
    (None, None, [8, 7], None, None, None, None, None, None),
    (None, None, None, [0.5, 0.9], None, None, None, None, None),
    (None, None, None, None, [4, 5], None, None, None, 10.0),
    (None, None, None, None, None, [0.4, 0.8], None, None, None),
    (1, None, 9, None, None, None, [0], None, None),
    (1, None, 9, None, None, None, [1], None, 10.0),
    ([1, 2], None, [8, 9], None, None, None, [0, 1], None, None),
    ([1, 2], None, None, [0.5, 0.4], None, None, [0, 1], None, None),
    (None, [0.1, 0.2], [8, 9], None, None, None, [0, 1], None, None),
    ([1, 2], None, [20, 9], None, None, None, [0, 1], "pad", None),
    ([1, 2], None, [20, 9], None, None, None, [0, 1], "pad", 10.0),
    ([-10, 2], None, [8, 9], None, None, None, [0, 1], "pad", 10.0),
    ([1, 2], None, [20, 9], None, None, None, [0, 1], "trim_to_shape", None),
    ([-10, 2], None, [8, 9], None, None, None, [0, 1], "trim_to_shape", 10.0),
    # axes in another order, negative axes, start + relative shape, one value for all axes
    ([2, 1], None, [9, 8], None, None, None, [1, 0], None, None),
    ([3], None, None, None, None, None, [-1], None, None),
    (None, [0.25], None, None, None, [0.5], [1], None, None),
    (None, [0.05, 0.15], None, None, None, [0.45, 0.55], None, None, None),
    (None, [0.1, 0.1], None, None, None, [0.7, 0.7], None, None, None),
    ([1, 1], None, None, None, None, [0.45, 0.45], None, None, None),
    ([1], None, None, None, None, None, None, None, None),
    (None, [0.5, 0.5], None, [0.5, 0.75], None, None, None, None, None),
    (None, None, None, None, [0, 3], None, None, None, None),
    ([10, 0], None, None, None, None, None, None, None, None),
    # the fill value is rounded and saturated to uint8; trim_to_shape ignores it
    ([-3, -3], None, None, None, [20, 20], None, None, "pad", -5.0),
    ([-3, -3], None, None, None, [20, 20], None, None, "pad", 300.0),
    ([-3, -3], None, None, None, [20, 20], None, None, "pad", 7.5),
    ([-3, -3], None, None, None, [20, 20], None, None, "trim_to_shape", 7.5),
    ([25, 0], None, None, None, [3, 3], None, None, "trim_to_shape", None),
    ([25, 0], None, None, None, [3, 3], None, None, "pad", 1.0),
]
ROI_KEYS = ("roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape", "roi_axes",
            "out_of_bounds_policy", "fill_value")


def roi_files(tmp_path, order, dtype=np.uint8, seed=4242):
    rng = np.random.default_rng(seed)
    arrays = []
    for index, sh in enumerate(ROI_SHAPES):
        fortran = order == "F" or (order == "mixed" and rng.random() < 0.5)
        arr = (rng.random(sh) * 250).astype(dtype)
        arrays.append(save(tmp_path / f"test_{index:02d}.npy", arr, fortran))
    return arrays


@pytest.mark.parametrize("order", ["C", "F", "mixed"])
@pytest.mark.parametrize("case", range(len(ROI_CASES)))
@pytest.mark.parametrize("lib", LIBS)
def test_roi(lib, tmp_path, case, order):
    """DALI's test_numpy_reader_roi: the region is given in the array's (C-order) axes whatever
    the file's order; coordinates are rounded half away from zero."""
    arrays = roi_files(tmp_path, order, seed=4242 + case)
    roi = {k: v for k, v in zip(ROI_KEYS, ROI_CASES[case]) if v is not None}
    pipe = reader_pipe(lib, batch_size=8, num_threads=3, file_root=str(tmp_path), **roi)
    (o,) = pipe.run()
    for i in range(8):
        want = roi_ref(arrays[i], **roi)
        got = np.array(o.at(i))
        assert got.shape == want.shape, (i, arrays[i].shape)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lib", LIBS)
def test_roi_float_3d(lib, tmp_path):
    rng = np.random.default_rng(9)
    arrays = [save(tmp_path / f"t{k}.npy", random_array(rng, sh, np.float32), fortran=k % 2 == 0)
              for k, sh in enumerate([(4, 5, 6), (6, 3, 2), (2, 7, 3)])]
    roi = dict(roi_start=[-1, 1], roi_shape=[4, 3], roi_axes=[2, 0], out_of_bounds_policy="pad", fill_value=-1.5)
    (o,) = reader_pipe(lib, batch_size=3, file_root=str(tmp_path), **roi).run()
    for i in range(3):
        np.testing.assert_array_equal(np.array(o.at(i)), roi_ref(arrays[i], **roi))


ROI_PER_SAMPLE = ["abs_2d", "abs_axis1", "rel_axis1"]


@pytest.mark.parametrize("variant", ROI_PER_SAMPLE)
@pytest.mark.parametrize("order", ["C", "mixed"])
@pytest.mark.parametrize("lib", LIBS)
def test_roi_per_sample_arguments(lib, tmp_path, variant, order):
    """DALI's roi_args given as fn.random.uniform outputs: one region per sample."""
    fn, types = lib.fn, lib.types
    arrays = roi_files(tmp_path, order)

    @lib.pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=21)
    def p():
        if variant == "abs_2d":
            start = fn.random.uniform(range=(0, 2), shape=(2,), dtype=types.INT32)
            end = fn.random.uniform(range=(7, 10), shape=(2,), dtype=types.INT32)
            kw = dict(roi_start=start, roi_end=end, roi_axes=(0, 1))
        elif variant == "abs_axis1":
            start = fn.random.uniform(range=(0, 2), shape=(1,), dtype=types.INT32)
            end = fn.random.uniform(range=(7, 10), shape=(1,), dtype=types.INT32)
            kw = dict(roi_start=start, roi_end=end, roi_axes=(1,))
        else:
            start = fn.random.uniform(range=(0.0, 0.2), shape=(1,))
            end = fn.random.uniform(range=(0.8, 1.0), shape=(1,))
            kw = dict(rel_roi_start=start, rel_roi_end=end, roi_axes=(1,))
        return fn.readers.numpy(file_root=str(tmp_path), **kw), start, end

    pipe = p()
    pipe.build()
    for _ in range(2):
        data, start, end = pipe.run()
        for i in range(8):
            s, e = np.array(start.at(i)), np.array(end.at(i))
            if variant == "rel_axis1":
                want = roi_ref(arrays[i], rel_roi_start=s, rel_roi_end=e, roi_axes=[1])
            else:
                want = roi_ref(arrays[i], roi_start=s, roi_end=e, roi_axes=[0, 1] if variant == "abs_2d" else [1])
            np.testing.assert_array_equal(np.array(data.at(i)), want)


@pytest.mark.parametrize("order", ["C", "F", "mixed"])
@pytest.mark.parametrize("lib", LIBS)
def test_roi_empty_axes_and_empty_range(lib, tmp_path, order):
    """DALI's test_numpy_reader_roi_empty_axes / _empty_range: empty ROI lists mean "the whole
    array"; start == end gives an empty extent."""
    arrays = roi_files(tmp_path, order)
    (o,) = reader_pipe(lib, batch_size=8, file_root=str(tmp_path), roi_start=[], roi_end=[], roi_axes=[]).run()
    for i in range(8):
        np.testing.assert_array_equal(np.array(o.at(i)), arrays[i])
    (o,) = reader_pipe(lib, batch_size=8, file_root=str(tmp_path), roi_start=[1], roi_end=[1], roi_axes=[1]).run()
    assert o.shape() == [(a.shape[0], 0) for a in arrays]


ROI_ERRORS = [
    (dict(roi_start=[1, 2], rel_roi_start=[0.1, 0.2]), "roi_start"),
    (dict(roi_end=[8, 7], rel_roi_end=[0.4, 0.5]), "roi_end"),
    (dict(roi_end=[8, 7], roi_shape=[8, 7]), "roi_end|roi_shape"),
    (dict(roi_end=[8, 7], rel_roi_shape=[0.4, 0.5]), "roi_end|rel_roi_shape"),
    (dict(rel_roi_end=[0.5, 0.4], roi_shape=[8, 7]), "rel_roi_end|roi_shape"),
    (dict(roi_start=[-1, 2]), "(?i)bounds"),
    (dict(roi_end=[100, 8]), "(?i)bounds"),
    (dict(roi_shape=[100, 8]), "(?i)bounds"),
    (dict(roi_start=[5, 5], roi_end=[3, 3]), "(?i)start"),
    (dict(roi_start=[5, 5], roi_end=[3, 3], out_of_bounds_policy="pad"), "(?i)start"),
    (dict(roi_start=[11, 0], out_of_bounds_policy="trim_to_shape"), "(?i)start"),
    (dict(roi_shape=[-1, 2]), "(?i)shape"),
    (dict(roi_start=[1, 2, 3]), "roi_start"),
    (dict(roi_start=[1], roi_axes=[2]), "(?i)axis"),
    (dict(roi_start=[1, 1], roi_axes=[0, 0]), "(?i)axis|axes"),
    (dict(roi_start=[1, 1], out_of_bounds_policy="bogus"), "bogus|out_of_bounds_policy"),
]


@pytest.mark.parametrize("case", range(len(ROI_ERRORS)))
@pytest.mark.parametrize("lib", LIBS)
def test_roi_errors(lib, tmp_path, case):
    """DALI's test_numpy_reader_roi_error, and more: mutually exclusive arguments, a region out of
    bounds with the default policy "error", end before start (whatever the policy), a wrong count
    of coordinates, bad axes."""
    roi_files(tmp_path, "C")
    kw, match = ROI_ERRORS[case]
    with pytest.raises(RuntimeError, match=match):
        reader_pipe(lib, batch_size=8, file_root=str(tmp_path), **kw).run()


# --------------------------------------------------------------------------- errors
UNSUPPORTED = ["complex64", "complex128", "longdouble", ">i4", ">f8", "<U3", "S3", "M8[s]",
               "structured"]


@pytest.mark.parametrize("dtype", UNSUPPORTED)
@pytest.mark.parametrize("lib", LIBS)
def test_unsupported_types(lib, tmp_path, dtype):
    """DALI's test_unsupported_types (complex, long double), plus big-endian data, strings,
    datetimes and structured arrays: an error naming the file."""
    if dtype == "longdouble" and np.dtype(np.longdouble).itemsize == 8:
        pytest.skip("long double is double here")
    if dtype == "structured":
        arr = np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")])
    else:
        arr = np.zeros((2, 3), dtype=np.dtype(dtype))
    np.save(str(tmp_path / "bad_type.npy"), arr)
    with pytest.raises(RuntimeError, match=r"bad_type\.npy"):
        read(reader_pipe(lib, files=[str(tmp_path / "bad_type.npy")]), 2)


GOOD_HEADER = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
DATA = np.arange(6, dtype=np.float32).tobytes()
BAD_FILES = {
    "not_numpy": b"hello world, this is a text file " * 4,
    "empty": b"",
    "short": b"\x93NUM",
    "truncated_header": npy_bytes(GOOD_HEADER, DATA)[:40],
    "truncated_data": npy_bytes(GOOD_HEADER, DATA[:10]),
    "no_data": npy_bytes(GOOD_HEADER),
    "no_brace": npy_bytes(GOOD_HEADER[1:], DATA),
    "bad_fortran_order": npy_bytes(GOOD_HEADER.replace("False", "0"), DATA),
    "no_byte_order": npy_bytes(GOOD_HEADER.replace("<f4", "f4"), DATA),
    "negative_dim": npy_bytes(GOOD_HEADER.replace("(2, 3)", "(-2, 3)"), DATA),
    "one_dim_no_comma": npy_bytes(GOOD_HEADER.replace("(2, 3)", "(6)"), DATA),
}


@pytest.mark.parametrize("dont_use_mmap", [False, True])
@pytest.mark.parametrize("bad", list(BAD_FILES))
@pytest.mark.parametrize("lib", LIBS)
def test_bad_file(lib, tmp_path, bad, dont_use_mmap):
    (tmp_path / f"{bad}.npy").write_bytes(BAD_FILES[bad])
    with pytest.raises(RuntimeError, match=rf"{bad}\.npy"):
        read(reader_pipe(lib, files=[f"{bad}.npy"], file_root=str(tmp_path), dont_use_mmap=dont_use_mmap), 2)


@pytest.mark.parametrize("lib", LIBS)
def test_headers_numpy_accepts(lib, tmp_path):
    """Headers written by hand: other spacing, a trailing comma in the shape, '|' and '='
    byte orders, padding to 16 bytes (old NumPy), data after the array."""
    headers = [
        "{ 'descr' :'<f4' ,'fortran_order':False,'shape':( 2 ,3 ) }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3,), }",
        "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }",
    ]
    names = []
    for k, h in enumerate(headers):
        names.append(f"h{k}.npy")
        (tmp_path / names[-1]).write_bytes(npy_bytes(h, DATA))
    names.append("h16.npy")
    (tmp_path / names[-1]).write_bytes(npy_bytes(GOOD_HEADER, DATA, align=16))
    names.append("tail.npy")
    (tmp_path / names[-1]).write_bytes(npy_bytes(GOOD_HEADER, DATA + b"junk after the data"))
    got = read(reader_pipe(lib, batch_size=len(names), files=names, file_root=str(tmp_path)), 1)
    for _, arr in got:
        np.testing.assert_array_equal(arr, np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("victim", ["missing", "garbage", "truncated"])
@pytest.mark.parametrize("lib", LIBS)
def test_broken_file_in_the_middle(lib, tmp_path, victim):
    """A file that can't be read fails the run with its name. DALI reads ahead, so the error may
    come a batch early, and its pipeline is unusable afterwards; Sluice fails the batch that
    holds the file and goes on with the next one."""
    write_numbered(tmp_path, 3)
    if victim == "missing":
        os.remove(tmp_path / "s_01.npy")
    elif victim == "garbage":
        (tmp_path / "s_01.npy").write_bytes(b"garbage garbage garbage")
    else:
        (tmp_path / "s_01.npy").write_bytes(npy_bytes("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
                                                      b"\x01"))
    files = ["s_00.npy", "s_01.npy", "s_02.npy"]

    def pipe():
        return reader_pipe(lib, files=files, file_root=str(tmp_path), pipe_kw=dict(prefetch_queue_depth=1))

    p = pipe()
    with pytest.raises(RuntimeError, match=r"s_01\.npy"):
        for _ in range(3):
            p.run()
    if is_sluice(lib):
        p = pipe()
        assert values(p, 1) == [0]
        with pytest.raises(RuntimeError, match=r"s_01\.npy"):
            p.run()
        assert values(p, 1) == [2]
        assert values(p, 1) == [0]  # the next epoch


@pytest.mark.parametrize("which", ["dtype", "ndim"])
@pytest.mark.parametrize("lib", LIBS)
def test_inconsistent_batch(lib, tmp_path, which):
    """DALI's test_type_mismatch / test_dim_mismatch: the samples of a batch must share dtype and
    number of dimensions; the error names both files. Across batches anything goes."""
    save(tmp_path / "a_int.npy", np.zeros((2, 3), np.int32))
    other = "b_float.npy" if which == "dtype" else "b_3d.npy"
    save(tmp_path / other, np.zeros((2, 3), np.float32) if which == "dtype" else np.zeros((2, 3, 1), np.int32))
    files = ["a_int.npy", other]
    with pytest.raises(RuntimeError, match=rf"(?s)a_int\.npy.*{other}|{other}.*a_int\.npy"):
        read(reader_pipe(lib, batch_size=2, files=files, file_root=str(tmp_path)), 1)
    got = read(reader_pipe(lib, batch_size=1, files=files, file_root=str(tmp_path)), 2)
    assert [a.dtype for _, a in got] == [np.int32, np.float32 if which == "dtype" else np.int32]
    if is_sluice(lib):
        p = reader_pipe(lib, batch_size=2, files=files + files, file_root=str(tmp_path), pipe_kw=dict(
            prefetch_queue_depth=1))
        with pytest.raises(RuntimeError, match=other):
            p.run()
        with pytest.raises(RuntimeError, match=other):
            p.run()
        p2 = reader_pipe(lib, batch_size=2, files=["a_int.npy", other, "a_int.npy", "a_int.npy"],
                         file_root=str(tmp_path), pipe_kw=dict(prefetch_queue_depth=1))
        with pytest.raises(RuntimeError, match=other):
            p2.run()
        assert [s for s, _ in read(p2, 1)] == ["a_int.npy", "a_int.npy"]


ARG_ERRORS = [
    (lambda d: dict(files=["a.npy"], file_list=str(d / "l.txt")), "file_list"),
    (lambda d: dict(), "file_root"),
    (lambda d: dict(files=[]), "files"),
    (lambda d: dict(file_root=str(d), file_filter="*.xyz"), "(?i)no files"),
    (lambda d: dict(file_root=str(d / "nonexistent_dir")), "nonexistent_dir"),
    (lambda d: dict(file_list=str(d / "nonexistent.txt")), r"nonexistent\.txt"),
    (lambda d: dict(file_root=str(d), num_shards=4), "(?i)shards"),
    (lambda d: dict(file_root=str(d), num_shards=2, shard_id=2), "shard_id"),
    (lambda d: dict(file_root=str(d), shuffle_after_epoch=True, random_shuffle=True), "shuffle_after_epoch"),
    (lambda d: dict(file_root=str(d), shuffle_after_epoch=True, stick_to_shard=True), "shuffle_after_epoch"),
    (lambda d: dict(file_root=str(d), use_o_direct=True), "use_o_direct"),
    (lambda d: dict(file_root=str(d), out_of_bounds_policy="bogus"), "bogus|out_of_bounds_policy"),
]


@pytest.mark.parametrize("case", range(len(ARG_ERRORS)))
@pytest.mark.parametrize("lib", LIBS)
def test_argument_errors(lib, tmp_path, case):
    """Raised when the pipeline is defined or built (DALI: at build), naming the argument."""
    write_numbered(tmp_path, 3)
    (tmp_path / "l.txt").write_text("s_00.npy\n")
    make, match = ARG_ERRORS[case]
    with pytest.raises(RuntimeError, match=match):
        reader_pipe(lib, **make(tmp_path)).run()
