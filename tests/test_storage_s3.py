"""Readers over object storage (s3://bucket/prefix): a local S3 server (moto, in a child
process) holding copies of small data sets, read through a fault-injecting proxy (also a child
process) and compared sample by sample (bytes, dtype, shape, labels, order, source_info) with
the same data set read from local disk, by one test body run against Sluice and NVIDIA DALI 2.4
(CPU-only) wherever DALI supports the case, so the behaviour checked is DALI's.

What DALI 2.4 does with S3 (measured against this server; issue 25's spec has the details):
readers.file (file_root listing, files=, a local file_list with an S3 file_root), readers.numpy
(the same), readers.webdataset (paths and index_paths), readers.tfrecord (path and index_path)
and readers.mxnet (path and index_path) read from S3. A file_list stored in S3 is refused
("Cannot open: <uri>"; Sluice reads it). readers.coco with an S3 file_root returns 1 MiB zero
buffers for the images (a DALI bug; so does readers.file for a batch made only of
pad_last_batch copies) and cannot open an annotations_file in S3, so coco is checked for Sluice
only. DALI does not retry a failed object read (a 503 or a cut response body fails the
pipeline, which is unusable afterwards) and its error messages do not name the URI; those
cases (and what happens after an error) are checked for Sluice only.

The environment of every test (AWS_ENDPOINT_URL -> the proxy, AWS_REGION, test credentials)
is set per test with monkeypatch. DALI's S3 client is a process-wide singleton that reads
AWS_ENDPOINT_URL once, at its first use, so every test of this module points at the same proxy
(module-scoped, faults cleared before each test). Each test has a time limit (SIGALRM, then a
hard faulthandler exit) so that nothing can hang.
"""

import concurrent.futures
import faulthandler
import hashlib
import os
import re
import shutil
import signal
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

from conftest import library_params
from storage_server import SECRET_ACCESS_KEY, FaultProxy, S3Server

# Data-set writers of the readers' own test modules (same suite).
import test_readers_coco as coco_t
import test_readers_mxnet as mxnet_t
import test_readers_tfrecord as tfrecord_t
import test_readers_webdataset as wds_t

LIBS = library_params()
SLUICE_ONLY = [p for p in LIBS if p.id == "sluice"]

BUCKET = "sluice-test"
TEST_TIMEOUT = 120  # seconds per test (soft: TimeoutError); +60 s: the process is killed

# requests of the proxy's log / fault matching: "METHOD /path?query" (path-style or virtual-host)
OBJECT_GET = r"^GET /[^?]*/dir_\d/f\d\d\.jpg"
LISTING = r"^GET [^ ]*\?(.*&)?(list-type=2|prefix=)"


def is_sluice(lib):
    return lib.__name__.startswith("sluice")


# --------------------------------------------------------------------------- time limits, server
@pytest.fixture(autouse=True)
def _time_limit():
    def on_alarm(signum, frame):
        raise TimeoutError(f"test ran for more than {TEST_TIMEOUT} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT)
    faulthandler.dump_traceback_later(TEST_TIMEOUT + 60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class Store:
    """The module's S3 server, the proxy in front of it and the local copies of what was
    uploaded."""

    def __init__(self, server, proxy, local):
        self.server, self.proxy, self.local = server, proxy, local

    def uri(self, prefix, rel=""):
        return f"s3://{BUCKET}/{prefix}" + (f"/{rel}" if rel else "")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with S3Server() as server, FaultProxy(server.endpoint, io_timeout=20) as proxy:
        server.create_bucket(BUCKET)
        yield Store(server, proxy, tmp_path_factory.mktemp("s3local"))


@pytest.fixture(autouse=True)
def s3_env(monkeypatch, store):
    for k, v in store.server.env(store.proxy.endpoint).items():
        monkeypatch.setenv(k, v)
    store.proxy.clear()
    yield store
    store.proxy.clear()


def upload(store, prefix, root):
    """Uploads the tree `root` under `prefix` (threads: moto answers one request at a time
    slowly enough for a thousand objects to matter)."""
    root = Path(root)
    client = store.server.client()
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda p: client.put_object(Bucket=BUCKET, Key=f"{prefix}/{p.relative_to(root).as_posix()}",
                                                Body=p.read_bytes()), files))
    return store.uri(prefix)


# --------------------------------------------------------------------------- data sets
TINY = [(f"dir_{label}/f{k:02d}.jpg", label) for label in range(3) for k in range(7)]  # sorted


@pytest.fixture(scope="module")
def tiny(store, tiny_root, tmp_path_factory):
    """conftest's tiny_root (3 labels x 7 files, a notes.txt the filters drop) plus a file two
    levels deep (ignored: one sub-folder level only), locally and under s3://BUCKET/tiny.
    Returns (local root, s3 URI)."""
    root = tmp_path_factory.mktemp("tiny") / "root"
    shutil.copytree(tiny_root, root)
    (root / "dir_1" / "deeper").mkdir()
    (root / "dir_1" / "deeper" / "x.jpg").write_bytes(b"two levels deep: not listed")
    return root, upload(store, "tiny", root)


@pytest.fixture(scope="module")
def thousand(store, tmp_path_factory):
    """1003 objects in 3 label folders: more than one ListObjectsV2 page (1000 keys)."""
    root = tmp_path_factory.mktemp("thousand") / "root"
    for j in range(1003):
        d = root / f"c{j % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"s{j:05d}.jpg").write_bytes(b"object %d" % j)
    return root, upload(store, "thousand", root)


@pytest.fixture(scope="module")
def npys(store, tmp_path_factory):
    """2-D .npy files (one dtype: DALI wants one per batch; various shapes) in two sub-folders,
    locally and in S3."""
    root = tmp_path_factory.mktemp("npys") / "root"
    rng = np.random.default_rng(5)
    shapes = {"a/x0.npy": (3, 1), "a/x1.npy": (2, 3), "a/x2.npy": (4, 2), "a/x3.npy": (1, 1), "b/y0.npy": (5, 2),
              "b/y1.npy": (2, 2), "b/y2.npy": (3, 4)}
    for rel, shape in shapes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        np.save(str(root / rel), (rng.random(shape) * 1000).astype(np.int16))
    (root / "b" / "readme.txt").write_text("not an array")
    return root, upload(store, "npys", root)


@pytest.fixture(scope="module")
def tars(store, tmp_path_factory):
    """3 webdataset archives (4, 3, 5 samples of jpg + cls) and their indexes."""
    root = tmp_path_factory.mktemp("wds")
    paths, idxs = wds_t.numbered_tars(root, [4, 3, 5])
    uri = upload(store, "wds", root)
    return root, uri, paths, idxs


@pytest.fixture(scope="module")
def tfrecords(store, tmp_path_factory):
    """3 TFRecord files (3, 5, 3 records) and their .idx files."""
    root = tmp_path_factory.mktemp("tfrecord")
    paths, idxs, _ = tfrecord_t.numbered(root, [3, 5, 3])
    uri = upload(store, "tfrecord", root)
    return root, uri, paths, idxs


@pytest.fixture(scope="module")
def recordio(store, tmp_path_factory):
    """3 MXNet RecordIO files (3, 5, 3 records) under one index."""
    root = tmp_path_factory.mktemp("mxnet")
    paths, idx, _ = mxnet_t.numbered(root, [3, 5, 3])
    uri = upload(store, "mxnet", root)
    return root, uri, paths, idx


@pytest.fixture(scope="module")
def coco(store, tmp_path_factory):
    """readers.coco's 11-image data set (some images in a sub-folder): images/ and
    instances.json."""
    root = tmp_path_factory.mktemp("coco")
    images, annotations = coco_t.eleven_json()
    coco_t.write_coco(root, images, annotations, coco_t.CATEGORIES)
    uri = upload(store, "coco", root)
    return root, uri


def to_uri(local_root, uri, paths):
    """Local paths under local_root -> the same objects' URIs."""
    return [uri + "/" + Path(p).relative_to(local_root).as_posix() for p in paths]


# --------------------------------------------------------------------------- pipelines
def build(lib, reader, batch_size=3, pipe_kw=None, **reader_kw):
    """A built pipeline returning every output of fn.readers.<reader>(name="R", ...) as a tuple
    (a dict of outputs in key order)."""

    @lib.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1234, **(pipe_kw or {}))
    def p():
        out = getattr(lib.fn.readers, reader)(name="R", **reader_kw)
        if isinstance(out, dict):
            return tuple(out[k] for k in sorted(out))
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    pipe = p()
    pipe.build()
    return pipe


def samples(pipe, n_batches):
    """[(source_info of the first output, ((bytes, dtype, shape) per output))] over n_batches."""
    out = []
    for _ in range(n_batches):
        outs = pipe.run()
        for i in range(len(outs[0])):
            arrays = tuple(np.array(o.at(i)) for o in outs)
            out.append((outs[0][i].source_info(), tuple((a.tobytes(), a.dtype.str, a.shape) for a in arrays)))
    return out


def batches_for(epoch_size, batch_size, epochs=2):
    return -(-epochs * epoch_size // batch_size) + 1


def read_both(lib, reader, s3_kw, local_kw, batch_size=3, epochs=2, pipe_kw=None, common=None):
    """(S3 samples, local samples) over `epochs` epochs (and a batch); checks the epoch sizes
    agree."""
    common = common or {}
    s3_pipe = build(lib, reader, batch_size, pipe_kw, **s3_kw, **common)
    local_pipe = build(lib, reader, batch_size, pipe_kw, **local_kw, **common)
    n = local_pipe.epoch_size("R")
    assert s3_pipe.epoch_size("R") == n
    k = batches_for(n, batch_size, epochs)
    return samples(s3_pipe, k), samples(local_pipe, k)


def assert_same_samples(got, want, source=lambda s: s):
    """Same samples in the same order; `source` maps a local source_info to the S3 one."""
    assert len(got) == len(want)
    for k, ((s1, d1), (s2, d2)) in enumerate(zip(got, want)):
        assert s1 == source(s2), k
        assert d1 == d2, (k, s1)


def file_samples(pipe, n_batches):
    """readers.file: [(source_info, label, bytes)]."""
    out = []
    for src, ((data, _, _), (label, ldt, lshape)) in samples(pipe, n_batches):
        assert ldt == "<i4" and lshape == (1,)
        out.append((src, int(np.frombuffer(label, np.int32)[0]), data))
    return out


# --------------------------------------------------------------------------- readers.file
@pytest.mark.parametrize("lib", LIBS)
def test_file_root_listing(lib, tiny):
    """file_root = s3://bucket/prefix: the objects one "folder" level below the prefix, one
    label per folder, the same samples, labels, bytes, order and source_info (the key relative
    to the prefix) as the folder on disk, over two epochs; a trailing '/' changes nothing."""
    root, uri = tiny
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=4)
    assert_same_samples(got, want)
    assert [(s, l) for s, l, _ in file_samples(build(lib, "file", 7, file_root=uri), 3)] == TINY
    got = file_samples(build(lib, "file", 7, file_root=uri + "/"), 3)
    assert [(s, l) for s, l, _ in got] == TINY
    assert all(d == (root / s).read_bytes() for s, _, d in got)


SHARD_CASES_FILE = [(2, 1, False, False), (3, 0, True, False), (4, 3, False, True), (5, 2, True, True)]


# (5, 2, padded): shard 2 of 5 holds 4 samples, padded to 6 with batches of 2, so one batch is
# only padding copies of the shard's last sample; DALI 2.4 returns a 1 MiB zero buffer for each
# of them when the sample comes from S3 (Sluice only).
@pytest.mark.parametrize("lib,num_shards,shard_id,pad_last_batch,stick_to_shard",
                         [pytest.param(p.values[0], *case, id="-".join(map(str, case)) + "-" + p.id)
                          for case in SHARD_CASES_FILE for p in LIBS
                          if p.id == "sluice" or case != (5, 2, True, True)])
def test_file_root_sharded(lib, tiny, num_shards, shard_id, pad_last_batch, stick_to_shard):
    root, uri = tiny
    kw = dict(num_shards=num_shards, shard_id=shard_id, pad_last_batch=pad_last_batch, stick_to_shard=stick_to_shard)
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=2, epochs=3, common=kw)
    assert_same_samples(got, want)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("shuffle", ["random_shuffle", "shuffle_after_epoch"])
def test_file_root_shuffled(lib, tiny, shuffle):
    root, uri = tiny
    kw = dict(random_shuffle=True, initial_fill=5, seed=77) if shuffle == "random_shuffle" else dict(shuffle_after_epoch=True)
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=4, common=kw)
    assert_same_samples(got, want)
    assert sorted(s for s, _ in got[:21]) != [s for s, _ in got[:21]]  # really shuffled


@pytest.mark.parametrize("lib", LIBS)
def test_file_and_dir_filters(lib, tiny):
    root, uri = tiny
    kw = dict(file_filters=["F0[0-3].JPG", "*.txt"], case_sensitive_filter=False, dir_filters=["dir_[02]"])
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=3, common=kw)
    assert_same_samples(got, want)
    assert {s for s, _ in got} == {"dir_0/f00.jpg", "dir_0/f01.jpg", "dir_0/f02.jpg", "dir_0/f03.jpg", "dir_0/notes.txt",
                                   "dir_2/f00.jpg", "dir_2/f01.jpg", "dir_2/f02.jpg", "dir_2/f03.jpg"}


@pytest.mark.parametrize("lib", LIBS)
def test_files_uris(lib, tiny):
    """files = [s3 URIs] (duplicates, any order): source_info is the URI as given; the label the
    position in the list, or `labels`."""
    root, uri = tiny
    rels = ["dir_2/f03.jpg", "dir_0/f00.jpg", "dir_1/f06.jpg", "dir_2/f03.jpg"]
    files = [f"{uri}/{r}" for r in rels]
    got = file_samples(build(lib, "file", 4, files=files), 2)
    assert got == [(f, k, (root / r).read_bytes()) for k, (f, r) in enumerate(zip(files, rels))] * 2
    got = file_samples(build(lib, "file", 2, files=files, labels=[5, 6, 7, 8]), 2)
    assert got == [(f, 5 + k, (root / r).read_bytes()) for k, (f, r) in enumerate(zip(files, rels))]
    # relative to an S3 file_root: source_info is the relative name
    got = file_samples(build(lib, "file", 4, file_root=uri, files=rels), 1)
    assert got == [(r, k, (root / r).read_bytes()) for k, r in enumerate(rels)]


@pytest.mark.parametrize("lib", LIBS)
def test_files_uris_sharded_and_shuffled(lib, tiny):
    root, uri = tiny
    rels = [s for s, _ in TINY]
    common = dict(num_shards=3, shard_id=1, random_shuffle=True, initial_fill=4, seed=3)
    got, want = read_both(lib, "file", dict(files=[f"{uri}/{r}" for r in rels]), dict(files=[str(root / r) for r in rels]),
                          batch_size=3, common=common)
    assert_same_samples(got, want, source=lambda s: uri + "/" + Path(s).relative_to(root).as_posix())


@pytest.mark.parametrize("lib", LIBS)
def test_local_file_list_with_s3_file_root(lib, tiny, tmp_path):
    """A local file_list names objects relative to an S3 file_root."""
    root, uri = tiny
    chosen = [("dir_2/f03.jpg", 5), ("dir_0/f00.jpg", 0), ("dir_1/f06.jpg", 17), ("dir_2/f03.jpg", 2)]
    fl = tmp_path / "list.txt"
    fl.write_text("".join(f"{p} {l}\n" for p, l in chosen))
    got = file_samples(build(lib, "file", 2, file_root=uri, file_list=str(fl)), 4)
    assert got == [(p, l, (root / p).read_bytes()) for p, l in chosen] * 2
    # the lines may be whole URIs where file_root is ""
    fl.write_text("".join(f"{uri}/{p} {l}\n" for p, l in chosen))
    got = file_samples(build(lib, "file", 4, file_root="", file_list=str(fl)), 1)
    assert got == [(f"{uri}/{p}", l, (root / p).read_bytes()) for p, l in chosen]


@pytest.mark.parametrize("lib", LIBS)
def test_file_list_stored_in_s3(lib, tiny, store):
    """DALI 2.4 opens file_list with std::ifstream: one in S3 is an error at build naming it
    ("Cannot open: <uri>"). Sluice reads it like a local one (an extension)."""
    root, uri = tiny
    chosen = [("dir_2/f03.jpg", 5), ("dir_0/f00.jpg", 0), ("dir_1/f06.jpg", 17)]
    list_uri = store.server.put(BUCKET, "lists/tiny.txt", "".join(f"{p} {l}\n" for p, l in chosen))
    if not is_sluice(lib):
        with pytest.raises(RuntimeError, match=re.escape(f"Cannot open: {list_uri}")):
            build(lib, "file", 1, file_root=uri, file_list=list_uri)
        return
    got = file_samples(build(lib, "file", 3, file_root=uri, file_list=list_uri), 2)
    assert got == [(p, l, (root / p).read_bytes()) for p, l in chosen] * 2


@pytest.mark.parametrize("lib", LIBS)
def test_listing_of_more_than_1000_objects(lib, thousand):
    """A listing longer than a ListObjectsV2 page (1000 keys) is read to its end."""
    root, uri = thousand
    got = file_samples(build(lib, "file", 1003, file_root=uri), 1)
    want = sorted((f"c{j % 3}/s{j:05d}.jpg", j % 3) for j in range(1003))
    assert [(s, l) for s, l, _ in got] == want
    assert all(d == (root / s).read_bytes() for s, _, d in got[::97])


@pytest.mark.parametrize("lib", LIBS)
def test_listing_order(lib, store, tmp_path):
    """A prefix lists as the same folder on disk would in Sluice: folder names sorted, then each
    folder's files, so the same seed gives the same batches from s3:// as from disk. DALI lists
    in key order (ListObjectsV2's, byte-wise over the whole key) with labels in order of first
    appearance: with folders "a", "a-b", "a.b" ('-' and '.' sort before '/') the two differ.
    Keys with ' ', '+', '%41' and non-ASCII are read as they are by both."""
    names = ["B/w.jpg", "a/x.jpg", "a/sp ace.jpg", "a/plus+.jpg", "a/pct%41.jpg", "a/\u00fc.jpg", "a-b/y.jpg", "a.b/z.jpg"]
    for n in names:
        store.server.put(BUCKET, "order/" + n, n.encode())
    got = file_samples(build(lib, "file", len(names), file_root=store.uri("order")), 1)
    if is_sluice(lib):
        disk = tmp_path / "order"
        for n in names:
            (disk / n).parent.mkdir(parents=True, exist_ok=True)
            (disk / n).write_bytes(n.encode())
        assert got == file_samples(build(lib, "file", len(names), file_root=str(disk)), 1)
        order = sorted(names, key=lambda n: (n.split("/")[0].encode(), n.encode()))
        labels = {"B": 0, "a": 1, "a-b": 2, "a.b": 3}
    else:
        order = sorted(names, key=lambda n: n.encode())
        labels = {"B": 0, "a-b": 1, "a.b": 2, "a": 3}
    assert got == [(n, labels[n.split("/")[0]], n.encode()) for n in order]


# --------------------------------------------------------------------------- readers.numpy
@pytest.mark.parametrize("lib", LIBS)
def test_numpy_file_root(lib, npys):
    """.npy files in sub-folders of an S3 prefix: the same arrays (dtype, shape, values), order
    and source_info as on disk; file_filter applies."""
    root, uri = npys
    got, want = read_both(lib, "numpy", dict(file_root=uri), dict(file_root=str(root)), batch_size=2)
    assert_same_samples(got, want)
    assert [s for s, _ in got[:7]] == ["a/x0.npy", "a/x1.npy", "a/x2.npy", "a/x3.npy", "b/y0.npy", "b/y1.npy", "b/y2.npy"]
    got, want = read_both(lib, "numpy", dict(file_root=uri), dict(file_root=str(root)), batch_size=2,
                          common=dict(file_filter="*[02].npy"))
    assert_same_samples(got, want)
    assert [s for s, _ in got[:4]] == ["a/x0.npy", "a/x2.npy", "b/y0.npy", "b/y2.npy"]


@pytest.mark.parametrize("lib", LIBS)
def test_numpy_files_and_file_list(lib, npys, tmp_path):
    root, uri = npys
    rels = ["b/y1.npy", "a/x2.npy", "b/y1.npy", "a/x3.npy"]
    got, want = read_both(lib, "numpy", dict(files=[f"{uri}/{r}" for r in rels]), dict(files=[str(root / r) for r in rels]),
                          batch_size=3)
    assert_same_samples(got, want, source=lambda s: uri + "/" + Path(s).relative_to(root).as_posix())
    fl = tmp_path / "list.txt"
    fl.write_text("".join(r + "\n" for r in rels))
    got, want = read_both(lib, "numpy", dict(file_root=uri, file_list=str(fl)), dict(file_root=str(root), file_list=str(fl)),
                          batch_size=3)
    assert_same_samples(got, want)
    assert [s for s, _ in got[:4]] == rels


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kw", [dict(num_shards=3, shard_id=2, pad_last_batch=True),
                                dict(random_shuffle=True, initial_fill=3, seed=9),
                                dict(shuffle_after_epoch=True),
                                dict(dont_use_mmap=True, roi_axes=[0], roi_start=[1], roi_end=[3], out_of_bounds_policy="pad")],
                         ids=["sharded", "shuffled", "shuffle_after_epoch", "roi"])
def test_numpy_sharded_shuffled_roi(lib, npys, kw):
    root, uri = npys
    if "roi_start" in kw:
        rels = ["a/x0.npy", "a/x1.npy", "a/x2.npy", "b/y0.npy", "b/y1.npy"]
        s3_kw, local_kw = dict(files=[f"{uri}/{r}" for r in rels]), dict(files=[str(root / r) for r in rels])
        source = lambda s: uri + "/" + Path(s).relative_to(root).as_posix()  # noqa: E731
    else:
        s3_kw, local_kw, source = dict(file_root=uri), dict(file_root=str(root)), (lambda s: s)
    got, want = read_both(lib, "numpy", s3_kw, local_kw, batch_size=2, epochs=3, common=kw)
    assert_same_samples(got, want, source)


# --------------------------------------------------------------------------- readers.webdataset
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("index", ["none", "local", "s3"])
def test_webdataset(lib, tars, index):
    """Archives in S3, without an index (the tar is scanned through ranged reads), with local
    indexes or with indexes in S3: the same samples as the local archives; source_info is
    "<uri>:<member data offset>:<member name>"."""
    root, uri, paths, idxs = tars
    s3_paths = to_uri(root, uri, paths)
    s3_kw, local_kw = dict(paths=s3_paths), dict(paths=paths)
    if index != "none":
        s3_kw["index_paths"] = idxs if index == "local" else to_uri(root, uri, idxs)
        local_kw["index_paths"] = idxs
    got, want = read_both(lib, "webdataset", s3_kw, local_kw, batch_size=5, common=dict(ext=["jpg", "cls"]))
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))
    assert got[0][0] == f"{uri}/part-0.tar:512:000000.jpg"
    assert [d[0][0] for _, d in got[:12]] == [b"jpg:%d" % g for g in range(12)]


@pytest.mark.parametrize("lib", LIBS)
def test_webdataset_sharded_and_shuffled(lib, tars):
    root, uri, paths, idxs = tars
    common = dict(ext=["jpg", "cls"], num_shards=2, shard_id=1, random_shuffle=True, initial_fill=4, seed=11,
                  pad_last_batch=True)
    got, want = read_both(lib, "webdataset", dict(paths=to_uri(root, uri, paths), index_paths=to_uri(root, uri, idxs)),
                          dict(paths=paths, index_paths=idxs), batch_size=4, epochs=3, common=common)
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))


# --------------------------------------------------------------------------- readers.tfrecord / mxnet
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("index", ["local", "s3"])
def test_tfrecord(lib, tfrecords, index):
    """TFRecord files in S3 with local or S3 indexes: the same records; source_info is
    "<uri> at index <offset>"."""
    root, uri, paths, idxs = tfrecords
    t = tfrecord_t.tfrec(lib)
    feats = {"v": t.FixedLenFeature([], t.int64, -1), "s": t.FixedLenFeature([], t.string, "")}
    s3_kw = dict(path=to_uri(root, uri, paths), index_path=idxs if index == "local" else to_uri(root, uri, idxs))
    got, want = read_both(lib, "tfrecord", s3_kw, dict(path=paths, index_path=idxs), batch_size=4,
                          common=dict(features=feats))
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))
    assert got[0][0] == f"{uri}/f0.tfrecord at index 0"


@pytest.mark.parametrize("lib", LIBS)
def test_tfrecord_sharded_and_shuffled(lib, tfrecords):
    root, uri, paths, idxs = tfrecords
    t = tfrecord_t.tfrec(lib)
    common = dict(features={"v": t.FixedLenFeature([], t.int64, -1)}, num_shards=3, shard_id=1, random_shuffle=True,
                  initial_fill=3, seed=5)
    got, want = read_both(lib, "tfrecord", dict(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs)),
                          dict(path=paths, index_path=idxs), batch_size=2, epochs=3, common=common)
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("index", ["local", "s3"])
def test_mxnet(lib, recordio, index):
    """RecordIO files in S3 with a local or an S3 index: the same records and labels;
    source_info is "<uri> at index <offset in the file>"."""
    root, uri, paths, idx = recordio
    s3_kw = dict(path=to_uri(root, uri, paths), index_path=idx if index == "local" else to_uri(root, uri, [idx])[0])
    got, want = read_both(lib, "mxnet", s3_kw, dict(path=paths, index_path=idx), batch_size=4)
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))
    assert got[0][0] == f"{uri}/f0.rec at index 0"


@pytest.mark.parametrize("lib", LIBS)
def test_mxnet_sharded_and_shuffled(lib, recordio):
    root, uri, paths, idx = recordio
    common = dict(num_shards=2, shard_id=0, random_shuffle=True, initial_fill=3, seed=21, stick_to_shard=True)
    got, want = read_both(lib, "mxnet", dict(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, [idx])[0]),
                          dict(path=paths, index_path=idx), batch_size=3, epochs=3, common=common)
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))


# --------------------------------------------------------------------------- readers.coco (Sluice)
@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("annotations", ["local", "s3"])
def test_coco(lib, coco, annotations):
    """Images under an S3 file_root, the annotations file local or in S3: every output the same
    as from disk (DALI 2.4 returns 1 MiB zero buffers for images in S3 and cannot open an
    annotations file there)."""
    root, uri = coco
    ann = str(root / "instances.json") if annotations == "local" else uri + "/instances.json"
    common = dict(image_ids=True, polygon_masks=True, ratio=True)
    got, want = read_both(lib, "coco", dict(file_root=uri + "/images", annotations_file=ann),
                          dict(file_root=str(root / "images"), annotations_file=str(root / "instances.json")),
                          batch_size=4, common=common)
    assert_same_samples(got, want)
    got, want = read_both(lib, "coco", dict(file_root=uri + "/images", annotations_file=ann),
                          dict(file_root=str(root / "images"), annotations_file=str(root / "instances.json")),
                          batch_size=3, common=dict(num_shards=2, shard_id=1, random_shuffle=True, initial_fill=3, seed=2))
    assert_same_samples(got, want)


# --------------------------------------------------------------------------- a slow or faulty store
@pytest.mark.parametrize("lib", LIBS)
def test_latency(lib, tiny, store):
    """50 ms before every request: still the same samples."""
    root, uri = tiny
    store.proxy.set_latency(50)
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=7)
    assert_same_samples(got, want)
    assert len(store.proxy.log()) >= 22  # the listing and every object went through the proxy


@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("kind,match", [("503", None), ("503", OBJECT_GET), ("503", LISTING),
                                        ("cut", None), ("cut", OBJECT_GET), ("cut", LISTING)],
                         ids=["503-first", "503-objects", "503-listing", "cut-first", "cut-objects", "cut-listing"])
def test_transient_faults_are_retried(lib, tiny, store, kind, match):
    """503 SlowDown answers, or responses cut in the middle of their body, for the first 2
    requests (of any kind, of object reads, of listings): retried, the same samples. (DALI 2.4
    retries listings but fails on a faulty object read.)"""
    root, uri = tiny
    store.proxy.fail_next(kind, 2, match)
    got, want = read_both(lib, "file", dict(file_root=uri), dict(file_root=str(root)), batch_size=4)
    assert_same_samples(got, want)
    assert len(store.proxy.injected(kind)) == 2 and store.proxy.faults_left() == 0


@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("kind", ["503", "cut"])
def test_transient_faults_with_files_and_other_readers(lib, tiny, tfrecords, tars, store, kind):
    """The same for objects named by `files` (a size request may come first), for TFRecord and
    for webdataset archives read without an index."""
    root, uri = tiny
    rels = [s for s, _ in TINY[::2]]
    store.proxy.fail_next(kind, 2)
    got, want = read_both(lib, "file", dict(files=[f"{uri}/{r}" for r in rels]), dict(files=[str(root / r) for r in rels]),
                          batch_size=4)
    assert_same_samples(got, want, source=lambda s: uri + "/" + Path(s).relative_to(root).as_posix())
    assert len(store.proxy.injected(kind)) == 2

    troot, turi, paths, idxs = tfrecords
    t = tfrecord_t.tfrec(lib)
    store.proxy.fail_next(kind, 2)
    got, want = read_both(lib, "tfrecord", dict(path=to_uri(troot, turi, paths), index_path=to_uri(troot, turi, idxs)),
                          dict(path=paths, index_path=idxs), batch_size=4,
                          common=dict(features={"v": t.FixedLenFeature([], t.int64, -1)}))
    assert_same_samples(got, want, source=lambda s: s.replace(str(troot), turi))
    assert len(store.proxy.injected(kind)) == 4

    wroot, wuri, wpaths, _ = tars
    store.proxy.fail_next(kind, 2)
    got, want = read_both(lib, "webdataset", dict(paths=to_uri(wroot, wuri, wpaths)), dict(paths=wpaths), batch_size=5,
                          common=dict(ext=["jpg", "cls"]))
    assert_same_samples(got, want, source=lambda s: s.replace(str(wroot), wuri))
    assert len(store.proxy.injected(kind)) == 6


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_persistent_faults_fail_the_batch_naming_the_uri(lib, tiny, store):
    """An object that answers 503 to every request: the retries end (no hang), the batch holding
    it fails naming its URI, and once the store answers again the next batch goes on."""
    root, uri = tiny
    store.proxy.fail_next("503", 10_000, match=r"^(GET|HEAD) /[^?]*/dir_2/f05\.jpg")
    pipe = build(lib, "file", 3, pipe_kw=dict(prefetch_queue_depth=1, exec_async=False, exec_pipelined=False),
                 file_root=uri)
    assert [(s, l) for s, l, _ in file_samples(pipe, 6)] == TINY[:18]
    with pytest.raises(RuntimeError, match=re.escape(f"{uri}/dir_2/f05.jpg")):
        pipe.run()
    store.proxy.clear()
    assert [(s, l) for s, l, _ in file_samples(pipe, 1)] == TINY[:3]  # the next epoch


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", ["bucket", "prefix"])
def test_missing_bucket_or_prefix(lib, store, case):
    """A file_root whose bucket does not exist, or a prefix with no object under it: an error
    before the first batch, naming the URI (DALI: "NoSuchBucket: The specified bucket does not
    exist" / "No files found.", without the URI)."""
    uri = "s3://no-such-bucket-sluice/data" if case == "bucket" else store.uri("no/such/prefix")
    with pytest.raises(RuntimeError) as info:
        build(lib, "file", 2, file_root=uri)
    msg = str(info.value)
    if is_sluice(lib):
        assert uri in msg, msg
    else:
        assert ("NoSuchBucket: The specified bucket does not exist" if case == "bucket" else "No files found.") in msg
    with pytest.raises(RuntimeError) as info:
        build(lib, "numpy", 2, file_root=uri)
    if is_sluice(lib):
        assert uri in str(info.value), str(info.value)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("reader", ["file", "numpy", "tfrecord", "mxnet", "webdataset"])
def test_missing_object(lib, store, tiny, tfrecords, recordio, tars, reader):
    """An object named by files / path / paths that does not exist: an error by the first batch
    naming it (DALI: "S3 Object not found. bucket=<bucket> object=<key>")."""
    missing = store.uri("tiny", "dir_0/missing.jpg")
    if reader in ("file", "numpy"):
        kw = dict(files=[missing])
    elif reader == "tfrecord":
        t = tfrecord_t.tfrec(lib)
        root, uri, paths, idxs = tfrecords
        kw = dict(path=[missing], index_path=to_uri(root, uri, idxs[:1]), features={"v": t.FixedLenFeature([], t.int64, -1)})
    elif reader == "mxnet":
        root, uri, paths, idx = recordio
        kw = dict(path=[missing], index_path=idx)
    else:
        kw = dict(paths=[missing], ext=["jpg"])
    with pytest.raises(RuntimeError) as info:
        build(lib, reader, 1, **kw).run()
    msg = str(info.value)
    if is_sluice(lib):
        assert missing in msg, msg
    else:
        assert f"S3 Object not found. bucket={BUCKET} object=tiny/dir_0/missing.jpg" in msg, msg


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_object_deleted_after_build(lib, store, tiny):
    """An object listed at build and deleted before it is read: that batch fails naming the
    URI, the next batch goes on. (DALI fails with "Failed to flush response stream", without
    the URI, and its pipeline is unusable afterwards.)"""
    root, _ = tiny
    uri = upload(store, "tiny-del", root)
    pipe = build(lib, "file", 3, pipe_kw=dict(prefetch_queue_depth=1, exec_async=False, exec_pipelined=False),
                 file_root=uri)
    store.server.delete(BUCKET, "tiny-del/dir_2/f05.jpg")  # sample 19, in the last batch (18..20)
    got = file_samples(pipe, 6)
    assert [(s, l) for s, l, _ in got] == TINY[:18]
    assert all(d == (root / s).read_bytes() for s, _, d in got)
    with pytest.raises(RuntimeError, match=re.escape(f"{uri}/dir_2/f05.jpg")):
        pipe.run()
    assert [(s, l) for s, l, _ in file_samples(pipe, 1)] == TINY[:3]  # the next epoch


@pytest.mark.parametrize("lib", LIBS)
def test_credentials_never_in_error_messages(lib, store, tiny):
    """The secret access key (a recognizable test value) appears in no error message or
    traceback: missing bucket, prefix or object, persistent 503s, a file_list in S3."""
    assert SECRET_ACCESS_KEY in store.server.env()["AWS_SECRET_ACCESS_KEY"]
    _, uri = tiny
    cases = [
        lambda: build(lib, "file", 1, file_root="s3://no-such-bucket-sluice/data"),
        lambda: build(lib, "file", 1, file_root=store.uri("no/such/prefix")),
        lambda: build(lib, "file", 1, files=[store.uri("tiny", "nope.jpg")]).run(),
        lambda: build(lib, "file", 1, file_root=uri, file_list=store.uri("lists", "nope.txt")),
        lambda: (store.proxy.fail_next("503", 10_000), build(lib, "file", 3, file_root=uri).run()),
    ]
    for k, case in enumerate(cases):
        with pytest.raises(Exception) as info:
            case()
        store.proxy.clear()
        text = "".join(traceback.format_exception(info.type, info.value, info.tb)) + repr(info.value)
        assert SECRET_ACCESS_KEY not in text, k


# --------------------------------------------------------------------------- storage_options
def test_storage_options_configure_the_store(store, tiny, monkeypatch):
    """Sluice's `storage_options` (a dictionary, object_store's keys): the endpoint, region,
    credentials and allow_http given to the reader instead of the environment; an unknown key is
    an error naming it (and never a value)."""
    import sluice

    root, uri = tiny
    want = file_samples(build(sluice, "file", 7, file_root=str(root)), 3)
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(k, raising=False)
    env = store.server.env()
    options = {"endpoint": store.server.endpoint, "region": env["AWS_REGION"], "access_key_id": env["AWS_ACCESS_KEY_ID"],
               "secret_access_key": env["AWS_SECRET_ACCESS_KEY"], "allow_http": True}
    got = file_samples(build(sluice, "file", 7, file_root=uri, storage_options=options), 3)
    assert got == want
    with pytest.raises(RuntimeError, match="unknown storage option 'no_such_key'") as e:
        build(sluice, "file", 7, file_root=uri, storage_options=dict(options, no_such_key="s3cr3t-value"))
    assert "s3cr3t-value" not in str(e.value) and env["AWS_SECRET_ACCESS_KEY"] not in str(e.value)


def test_aws_profile_from_the_shared_files(store, tiny, monkeypatch, tmp_path):
    """Without AWS_* variables, the profile AWS_PROFILE names is read from the files the AWS
    tools write: credentials from AWS_SHARED_CREDENTIALS_FILE, region and endpoint_url from
    AWS_CONFIG_FILE (its `profile NAME` section), as the AWS SDKs (and so DALI) do."""
    import sluice

    root, uri = tiny
    want = file_samples(build(sluice, "file", 7, file_root=str(root)), 2)
    env = store.server.env()
    for k in list(env):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = wrong\n\n[bench]\n"
        f"aws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\naws_secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n")
    (tmp_path / "config").write_text(f"[profile bench]\nregion = {env['AWS_REGION']}\nendpoint_url = {store.server.endpoint}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", "bench")
    # A storage option of its own keys a new client (clients are kept per bucket and options).
    got = file_samples(build(sluice, "file", 7, file_root=uri, storage_options={"virtual_hosted_style_request": False}), 2)
    assert got == want


def test_sequence_frames_from_s3(store, tmp_path):
    """readers.sequence (Sluice only: DALI globs file_root and does not read S3): frame streams
    under a prefix give the sequences the same folders on disk give."""
    import sluice
    from test_readers_sequence import write_streams

    root = tmp_path / "frames"
    write_streams(root, {"s0": 5, "s1": 4, "s1-b": 3})
    uri = upload(store, "frames", root)
    got, want = read_both(sluice, "sequence", dict(file_root=uri), dict(file_root=str(root)), batch_size=2,
                          common=dict(sequence_length=2, step=1))
    assert_same_samples(got, want)
    assert len(want) >= 10


# --------------------------------------------------------------------------- read-ahead
def wait_for(condition, timeout=10.0, what="the condition"):
    """Polls `condition()` until it is true (returns its value) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def object_gets(store):
    """The object keys the proxy forwarded GETs for, in order (no listings)."""
    return [t.split("?")[0] for m, t, _, _ in store.proxy.log() if m == "GET" and re.match(OBJECT_GET, f"{m} {t}")]


def settled(read, pause=0.5):
    """read() once it gives the same answer twice `pause` seconds apart."""
    last = read()
    while True:
        time.sleep(pause)
        now = read()
        if now == last:
            return now
        last = now


SYNC = dict(prefetch_queue_depth=1, exec_async=False, exec_pipelined=False)


@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("depth", [1, 2])
def test_read_ahead_starts_the_next_batches_once(lib, tiny, store, depth):
    """With the reader's prefetch_queue_depth d, the loader holds d batches ready and starts
    the requests of the d batches after the one it reads: before the first run() the objects of
    the first 2d batches are requested (each once) and no more; after r runs, those of
    r + 2d batches. The samples are those read from disk."""
    root, uri = tiny
    store.proxy.set_latency(20)
    pipe = build(lib, "file", 3, pipe_kw=SYNC, file_root=uri, prefetch_queue_depth=depth)
    want = [f"/{BUCKET}/tiny/{s}" for s, _ in TINY]
    wait_for(lambda: len(object_gets(store)) >= 6 * depth, what=f"{6 * depth} object GETs")
    # Each object once (requests in flight together arrive in any order).
    assert sorted(settled(lambda: object_gets(store))) == want[:6 * depth]
    got = file_samples(pipe, 2)
    assert [(s, l) for s, l, _ in got] == TINY[:6]
    assert all(d == (root / s).read_bytes() for s, _, d in got)
    wait_for(lambda: len(object_gets(store)) >= 3 * (2 + 2 * depth))
    assert sorted(settled(lambda: object_gets(store))) == want[:3 * (2 + 2 * depth)]


def gets_with_ranges(store, prefix):
    """[(key, first byte, last byte)] of the ranged GETs the proxy forwarded under prefix."""
    out = []
    for m, t, status, rng in store.proxy.log():
        if m == "GET" and t.startswith(f"/{BUCKET}/{prefix}/") and rng:
            a, b = re.fullmatch(r"bytes=(\d+)-(\d+)", rng).groups()
            out.append((t.split("?")[0], int(a), int(b)))
    return out


@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("reader", ["webdataset", "tfrecord", "mxnet"])
def test_read_ahead_of_ranges_is_taken_by_the_read(lib, tars, tfrecords, recordio, store, reader):
    """Readers that read ranges (records of a container) read ahead the very requests their
    read makes (coalesced the same way): within an epoch no byte of an object is requested
    twice, and what is read equals the files on disk."""
    if reader == "webdataset":
        root, uri, paths, idxs = tars
        s3_kw, local_kw, common = dict(paths=to_uri(root, uri, paths), index_paths=to_uri(root, uri, idxs)), dict(paths=paths, index_paths=idxs), dict(ext=["jpg", "cls"])
        prefix = "wds"
    elif reader == "tfrecord":
        t = tfrecord_t.tfrec(lib)
        root, uri, paths, idxs = tfrecords
        s3_kw, local_kw = dict(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs)), dict(path=paths, index_path=idxs)
        common, prefix = dict(features={"v": t.FixedLenFeature([], t.int64, -1)}), "tfrecord"
    else:
        root, uri, paths, idx = recordio
        s3_kw, local_kw, common, prefix = dict(path=to_uri(root, uri, paths), index_path=idx), dict(path=paths, index_path=idx), {}, "mxnet"
    store.proxy.set_latency(10)
    # 11-12 samples, batches of 2, depth 2: 1 run leaves the first 5 batches requested.
    pipe = build(lib, reader, 2, pipe_kw=SYNC, prefetch_queue_depth=2, **s3_kw, **common)
    store.proxy.clear()
    pipe.run()
    gets = settled(lambda: gets_with_ranges(store, prefix))
    assert gets
    for i, (key, a, b) in enumerate(gets):
        for key2, a2, b2 in gets[i + 1:]:
            assert key != key2 or b < a2 or b2 < a, f"bytes of {key} requested twice: {a}-{b} and {a2}-{b2}"
    got, want = read_both(lib, reader, s3_kw, local_kw, batch_size=2, common=dict(prefetch_queue_depth=3, **common))
    assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))


# --------------------------------------------------------------------------- the local cache
def cache_entries(folder):
    """The cache's entry files under `folder` (not its temporary files or its lock)."""
    return [p for p in Path(folder).rglob("*") if p.parent.name != "tmp" and p.name != "lock" and p.is_file()]


def cache_bytes(folder):
    """Bytes of the cache's entries (one deleted by a trim while counted counts 0)."""
    total = 0
    for p in cache_entries(folder):
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_cache_dir_serves_later_readers(lib, tiny, store, tmp_path):
    """With cache_dir, what one reader fetched is read from local disk by the next reader
    (another pipeline, in any order, over several epochs): no object is requested again, and
    the samples are the same."""
    root, uri = tiny
    cache = tmp_path / "cache"
    first_pipe = build(lib, "file", 7, pipe_kw=SYNC, file_root=uri, cache_dir=str(cache))
    first = file_samples(first_pipe, 3)
    # The epoch's objects once each (the read-ahead may already be at the next epoch's, which
    # the cache may or may not hold yet: writing it is not on the request's path).
    assert sorted(object_gets(store)[:21]) == [f"/{BUCKET}/tiny/{s}" for s, _ in TINY]
    wait_for(lambda: len(cache_entries(cache)) >= 21, what="the cache filled")
    store.proxy.clear()
    again = file_samples(build(lib, "file", 7, file_root=uri, cache_dir=str(cache), random_shuffle=True), 6)
    assert object_gets(store) == []
    assert sorted(again) == sorted(first * 2)
    assert all(d == (root / s).read_bytes() for s, _, d in again)


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_cache_dir_from_the_environment_and_ranges(lib, tfrecords, store, tmp_path, monkeypatch):
    """SLUICE_STORAGE_CACHE_DIR turns the cache on without touching the pipeline; ranges
    (TFRecord records) are kept and served too."""
    t = tfrecord_t.tfrec(lib)
    root, uri, paths, idxs = tfrecords
    monkeypatch.setenv("SLUICE_STORAGE_CACHE_DIR", str(tmp_path / "cache"))
    kw = dict(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs), features={"v": t.FixedLenFeature([], t.int64, -1)})
    # Both pipelines synchronous, kept alive: the second asks for exactly what the first did
    # (its read-ahead included), and the first's requests all finish.
    first_pipe = build(lib, "tfrecord", 4, pipe_kw=SYNC, **kw)
    first = samples(first_pipe, 3)
    wait_for(lambda: cache_bytes(tmp_path / "cache") > 0, what="the cache filled")
    settled(lambda: cache_bytes(tmp_path / "cache"))
    store.proxy.clear()
    again = samples(build(lib, "tfrecord", 4, pipe_kw=SYNC, **kw), 3)
    assert again == first
    assert gets_with_ranges(store, "tfrecord") == []


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_cache_dir_stays_within_its_limit(lib, thousand, store, tmp_path):
    """cache_dir_limit bounds the folder (least recently used entries go): after reading 1003
    objects into a cache that holds about a third of them, it is within its limit (plus the
    1/8 it may overshoot between trims), and the samples are right."""
    root, uri = thousand
    total = sum(p.stat().st_size for p in root.rglob("*.jpg"))
    limit = total // 3 + 64 * 1003 // 3  # entries carry their key: ~64 bytes each here
    cache = tmp_path / "cache"
    pipe = build(lib, "file", 100, file_root=uri, cache_dir=str(cache), cache_dir_limit=limit)
    got = file_samples(pipe, 11)
    assert sorted(d for _, _, d in got[:1003]) == sorted(p.read_bytes() for p in root.rglob("*.jpg"))
    size = settled(lambda: cache_bytes(cache))
    assert 0 < size <= limit * 9 // 8, (size, limit)


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_cache_dir_shared_by_processes(lib, tiny, store, tmp_path):
    """Two processes filling one cache folder at once both read the right bytes, and a third
    then reads everything from the folder."""
    import subprocess
    import sys

    root, uri = tiny
    cache = tmp_path / "cache"
    script = tmp_path / "read.py"
    script.write_text(f"""
import hashlib, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import sluice
from test_storage_s3 import build, file_samples
out = file_samples(build(sluice, "file", 7, file_root={uri!r}, cache_dir={str(cache)!r}, random_shuffle=True, seed=int(sys.argv[1])), 3)
print(hashlib.sha256(repr(sorted((s, l, d) for s, l, d in out)).encode()).hexdigest())
""")
    want = hashlib.sha256(repr(sorted((s, l, (root / s).read_bytes()) for s, l in TINY)).encode()).hexdigest()
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, str(script), str(seed)], stdout=subprocess.PIPE, env=env, text=True) for seed in (1, 2)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == [want, want]
    wait_for(lambda: len(cache_entries(cache)) >= 21, what="the cache filled")
    store.proxy.clear()
    third = subprocess.run([sys.executable, str(script), "3"], stdout=subprocess.PIPE, env=env, text=True, timeout=60)
    assert third.stdout.strip() == want
    assert object_gets(store) == []


@pytest.mark.parametrize("lib", SLUICE_ONLY)
def test_cache_dir_bad_arguments(lib, tiny, tmp_path):
    """A negative limit, or a cache folder that cannot be made: an error naming the argument."""
    _, uri = tiny
    with pytest.raises(ValueError, match="cache_dir_limit"):
        build(lib, "file", 2, file_root=uri, cache_dir=str(tmp_path / "c"), cache_dir_limit=-1)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(Exception, match="cache_dir"):
        build(lib, "file", 2, file_root=uri, cache_dir=str(tmp_path / "file" / "c"))


# --------------------------------------------------------------------------- checkpoints
def reader_case(reader, lib, tiny, npys, tfrecords, recordio, tars):
    """(s3 kwargs, local kwargs, kwargs of both, local source_info -> S3 source_info) of one
    reader over the module's data sets."""
    same = lambda s: s  # noqa: E731  (file_root listings: relative names either way)
    if reader == "file":
        root, uri = tiny
        return dict(file_root=uri), dict(file_root=str(root)), {}, same
    if reader == "numpy":
        root, uri = npys
        return dict(file_root=uri), dict(file_root=str(root)), {}, same
    if reader == "tfrecord":
        t = tfrecord_t.tfrec(lib)
        root, uri, paths, idxs = tfrecords
        return (dict(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs)), dict(path=paths, index_path=idxs),
                dict(features={"v": t.FixedLenFeature([], t.int64, -1)}), lambda s: s.replace(str(root), uri))
    if reader == "mxnet":
        root, uri, paths, idx = recordio
        return dict(path=to_uri(root, uri, paths), index_path=idx), dict(path=paths, index_path=idx), {}, lambda s: s.replace(str(root), uri)
    root, uri, paths, idxs = tars
    return (dict(paths=to_uri(root, uri, paths), index_paths=to_uri(root, uri, idxs)), dict(paths=paths, index_paths=idxs),
            dict(ext=["jpg", "cls"]), lambda s: s.replace(str(root), uri))


@pytest.mark.parametrize("lib", SLUICE_ONLY)
@pytest.mark.parametrize("reader", ["file", "numpy", "tfrecord", "mxnet", "webdataset"])
@pytest.mark.parametrize("order", ["shuffled", "sharded"])
def test_checkpoints_are_those_of_the_same_files_on_disk(lib, tiny, npys, tfrecords, recordio, tars, reader, order):
    """A reader over S3 checkpointed a batch into its second epoch resumes where it was; and a
    checkpoint taken reading the same files from disk resumes the S3 reader too, at the same
    sample: the position and the shuffle state are the data set's, not the store's."""
    s3_kw, local_kw, common, to_s3 = reader_case(reader, lib, tiny, npys, tfrecords, recordio, tars)
    common = dict(common, **(dict(random_shuffle=True, initial_fill=4, seed=77) if order == "shuffled"
                             else dict(num_shards=2, shard_id=1, pad_last_batch=True)))
    pipe_kw = dict(enable_checkpointing=True)

    def make(kw, checkpoint=None):
        return build(lib, reader, 2, dict(pipe_kw, checkpoint=checkpoint) if checkpoint else pipe_kw, **kw, **common)

    s3_pipe, disk_pipe = make(s3_kw), make(local_kw)
    per_epoch = -(-s3_pipe.epoch_size("R") // (2 if order == "sharded" else 1) // 2)
    samples(s3_pipe, per_epoch + 1)
    samples(disk_pipe, per_epoch + 1)
    s3_cp, disk_cp = s3_pipe.checkpoint(), disk_pipe.checkpoint()
    n = per_epoch + 2
    want = samples(disk_pipe, n)
    for restored in (make(s3_kw, s3_cp), make(s3_kw, disk_cp)):
        got = samples(restored, n)
        assert [s for s, _ in got] == [to_s3(s) for s, _ in want]
        assert [d for _, d in got] == [d for _, d in want]
    assert samples(s3_pipe, n) == samples(make(s3_kw, s3_cp), n)
