"""Readers over http(s):// and gs:// (Sluice only: DALI 2.4 reads neither), against real servers
in child processes (tests/storage_emulators.py): WsgiDAV (a WebDAV server, PyPI `wsgidav` on
`cheroot`) for http:// and, with a self-signed certificate, https://; gcp-storage-emulator
(PyPI) behind a thin XML-API adapter for gs://. Every case is compared sample by sample (bytes,
dtype, shape, labels, order, source_info) with the same files read from local disk, as
test_storage_s3.py does for s3://.

http(s)://HOST:PORT/path: object_store's HttpStore lists a "folder" with PROPFIND (Depth: 1),
reads objects with GET (a Range header for parts of one) and sizes with HEAD; the WebDAV server
serves a local folder, so the local copy and the http one are the very same files. https://
needs DALI_S3_NO_VERIFY_SSL=1 (or the storage option allow_invalid_certificates) for a
self-signed certificate; without it the read fails naming the URI.

gs://BUCKET/prefix: object_store's GCS client is pointed at an emulator by a service-account
file holding gcs_base_url and disable_oauth (storage option google_service_account, or env
GOOGLE_SERVICE_ACCOUNT) and needs allow_http for an http base URL. It speaks GCS's XML API;
gcp-storage-emulator lacks the parts of it object_store uses (XML listing and HEAD answer 501;
XML GETs lack ETag and Last-Modified, and answer 501 when the bucket name has a "-", which
object_store sends percent-encoded), which test_gcs_emulator_alone_lacks_the_xml_api checks and
the adapter (storage_emulators.py) fills by translating to the emulator's JSON API.

Azure: no Azure Blob emulator installs from PyPI (Azurite is an npm package), so az:// is not
tested here.

Each test has a time limit (SIGALRM, then a hard faulthandler exit) so that nothing can hang.
Stores are kept by Sluice per (scheme://host, storage_options) for the whole process, with the
environment read when a store is made: tests that change the environment (certificate checks,
retries, GOOGLE_*) use storage options no other test uses, so they get a store of their own.
"""

import shutil
import urllib.error
import urllib.request

import pytest

from storage_emulators import GCSEmulator, WebDAVServer, self_signed_cert
from test_storage_s3 import TINY, assert_same_samples, build, file_samples, read_both, to_uri
from test_storage_s3 import _time_limit  # noqa: F401  (the same per-test time limit, autouse)

# Data-set writers of the readers' own test modules (same suite).
import test_readers_tfrecord as tfrecord_t
import test_readers_webdataset as wds_t

BUCKET = "sluice-emu"




@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """No setting of the outer environment reaches these stores."""
    import os

    for k in list(os.environ):
        if k.startswith("GOOGLE_") or k in ("DALI_S3_NO_VERIFY_SSL", "SERVICE_ACCOUNT", "SLUICE_STORAGE_RETRIES"):
            monkeypatch.delenv(k)


@pytest.fixture(scope="module")
def sluice():
    import sluice

    return sluice


# --------------------------------------------------------------------------- data sets
def write_data(root, tiny_root):
    """Under `root`: tiny/ (conftest's tiny_root plus a file two levels deep, which listings
    ignore), tfrecord/ (3 files of 3, 5, 3 records and their .idx) and wds/ (3 tars of 4, 3, 5
    samples and their indexes). Returns {name: (local folder, paths, index paths)}."""
    shutil.copytree(tiny_root, root / "tiny")
    (root / "tiny" / "dir_1" / "deeper").mkdir()
    (root / "tiny" / "dir_1" / "deeper" / "x.jpg").write_bytes(b"two levels deep: not listed")
    tpaths, tidxs, _ = tfrecord_t.numbered(root / "tfrecord", [3, 5, 3])
    (root / "wds").mkdir()
    wpaths, widxs = wds_t.numbered_tars(root / "wds", [4, 3, 5])
    return {"tiny": (root / "tiny", None, None), "tfrecord": (root / "tfrecord", tpaths, tidxs),
            "wds": (root / "wds", [str(p) for p in wpaths], [str(p) for p in widxs])}


@pytest.fixture(scope="module")
def served(tiny_root, tmp_path_factory):
    """The data sets in one local folder, which the WebDAV servers serve."""
    root = tmp_path_factory.mktemp("dav")
    return root, write_data(root, tiny_root)


@pytest.fixture(scope="module")
def dav(served):
    with WebDAVServer(served[0]) as server:
        yield server


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def davs(served, tls_cert):
    with WebDAVServer(served[0], tls=tls_cert) as server:
        yield server


class Remote:
    """A data set both local and behind a server: `base` is the URI of the served root, `sets`
    write_data's {name: (local folder, paths, index paths)}; uri(name) the URI of one."""

    def __init__(self, base, sets, options=None):
        self.base, self.sets, self.options = base, sets, options

    def uri(self, name):
        return f"{self.base}/{name}"

    def kw(self, **kw):
        return dict(kw, storage_options=self.options) if self.options else kw


@pytest.fixture(scope="module")
def http(dav, served):
    return Remote(dav.endpoint, served[1])


@pytest.fixture(scope="module")
def gcs(tiny_root, tmp_path_factory):
    """The emulator (and its adapter) holding the data sets under gs://BUCKET/; yields
    (emulator, Remote, tmp folder)."""
    root = tmp_path_factory.mktemp("gcs")
    (root / "data").mkdir()
    sets = write_data(root / "data", tiny_root)
    with GCSEmulator() as emu:
        emu.create_bucket(BUCKET)
        for name in sets:
            emu.upload_tree(BUCKET, name, root / "data" / name)
        sa = emu.service_account(root / "service-account.json")
        yield emu, Remote(f"gs://{BUCKET}", sets, {"google_service_account": sa, "allow_http": "true"}), root


# --------------------------------------------------------------------------- one body per reader
def check_file_root(sluice, remote):
    """file_root = the remote tiny/: the same samples, labels (one per first-level folder),
    bytes, order and source_info (the path relative to file_root) as the local folder, over
    two epochs; a trailing '/' changes nothing; sharded and shuffled the same too."""
    root, _, _ = remote.sets["tiny"]
    uri = remote.uri("tiny")
    got, want = read_both(sluice, "file", remote.kw(file_root=uri), dict(file_root=str(root)), batch_size=4)
    assert_same_samples(got, want)
    got = file_samples(build(sluice, "file", 7, **remote.kw(file_root=uri + "/")), 3)
    assert [(s, l) for s, l, _ in got] == TINY
    assert all(d == (root / s).read_bytes() for s, _, d in got)
    common = dict(num_shards=3, shard_id=1, random_shuffle=True, initial_fill=4, seed=9, pad_last_batch=True)
    got, want = read_both(sluice, "file", remote.kw(file_root=uri), dict(file_root=str(root)), batch_size=2, epochs=3,
                          common=common)
    assert_same_samples(got, want)


def check_files(sluice, remote):
    """files = [URIs] (duplicates, any order): source_info is the URI as given, the label the
    position in the list or `labels`; relative names under a remote file_root too."""
    root, _, _ = remote.sets["tiny"]
    uri = remote.uri("tiny")
    rels = ["dir_2/f03.jpg", "dir_0/f00.jpg", "dir_1/f06.jpg", "dir_2/f03.jpg"]
    files = [f"{uri}/{r}" for r in rels]
    got = file_samples(build(sluice, "file", 4, **remote.kw(files=files)), 2)
    assert got == [(f, k, (root / r).read_bytes()) for k, (f, r) in enumerate(zip(files, rels))] * 2
    got = file_samples(build(sluice, "file", 2, **remote.kw(files=files, labels=[5, 6, 7, 8])), 2)
    assert got == [(f, 5 + k, (root / r).read_bytes()) for k, (f, r) in enumerate(zip(files, rels))]
    got = file_samples(build(sluice, "file", 4, **remote.kw(file_root=uri, files=rels)), 1)
    assert got == [(r, k, (root / r).read_bytes()) for k, r in enumerate(rels)]


def check_tfrecord(sluice, remote):
    """path and index_path as URIs: the same records as from disk; source_info "<uri> at index
    <offset>"; sharded and shuffled the same too."""
    root, paths, idxs = remote.sets["tfrecord"]
    uri = remote.uri("tfrecord")
    t = tfrecord_t.tfrec(sluice)
    features = {"v": t.FixedLenFeature([], t.int64, -1), "s": t.FixedLenFeature([], t.string, "")}
    for common, batch_size in [(dict(features=features), 4),
                               (dict(features=features, num_shards=3, shard_id=1, random_shuffle=True, initial_fill=3,
                                     seed=5), 2)]:
        got, want = read_both(sluice, "tfrecord", remote.kw(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs)),
                              dict(path=paths, index_path=idxs), batch_size=batch_size, epochs=3, common=common)
        assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))
    got, _ = read_both(sluice, "tfrecord", remote.kw(path=to_uri(root, uri, paths), index_path=to_uri(root, uri, idxs)),
                       dict(path=paths, index_path=idxs), batch_size=4, common=dict(features=features))
    assert got[0][0] == f"{uri}/f0.tfrecord at index 0"


def check_webdataset(sluice, remote):
    """paths (and index_paths) as URIs: the same samples as from disk, with and without
    indexes; source_info maps the local path to the URI."""
    root, paths, idxs = remote.sets["wds"]
    uri = remote.uri("wds")
    for with_index in (False, True):
        kw, local = dict(paths=to_uri(root, uri, paths)), dict(paths=paths)
        if with_index:
            kw["index_paths"], local["index_paths"] = to_uri(root, uri, idxs), idxs
        got, want = read_both(sluice, "webdataset", remote.kw(**kw), local, batch_size=5, epochs=2,
                              common=dict(ext=["jpg", "cls"]))
        assert_same_samples(got, want, source=lambda s: s.replace(str(root), uri))
        assert len(want) >= 12


def check_missing(sluice, remote, reader):
    """An object named by files / path / paths that does not exist: an error by the first batch
    naming it; a file_root with nothing under it: an error at build naming it."""
    missing = remote.uri("tiny") + "/dir_0/missing.jpg"
    if reader == "file":
        kw = dict(files=[missing])
    elif reader == "tfrecord":
        t = tfrecord_t.tfrec(sluice)
        root, _, idxs = remote.sets["tfrecord"]
        kw = dict(path=[missing], index_path=to_uri(root, remote.uri("tfrecord"), idxs[:1]),
                  features={"v": t.FixedLenFeature([], t.int64, -1)})
    elif reader == "webdataset":
        kw = dict(paths=[missing], ext=["jpg"])
    else:
        prefix = remote.uri("no/such/prefix")
        with pytest.raises(RuntimeError) as info:
            build(sluice, "file", 2, **remote.kw(file_root=prefix))
        assert prefix in str(info.value), str(info.value)
        return
    with pytest.raises(RuntimeError) as info:
        build(sluice, reader, 1, **remote.kw(**kw)).run()
    assert missing in str(info.value), str(info.value)


READERS = [check_file_root, check_files, check_tfrecord, check_webdataset]
IDS = ["file_root", "files", "tfrecord", "webdataset"]


# --------------------------------------------------------------------------- http:// (WebDAV)
@pytest.mark.parametrize("check", READERS, ids=IDS)
def test_http(sluice, http, check):
    check(sluice, http)


@pytest.mark.parametrize("reader", ["file", "tfrecord", "webdataset", "file_root"])
def test_http_missing(sluice, http, reader):
    check_missing(sluice, http, reader)


def test_http_requests(sluice, http, dav, served):
    """What the store asks the server: PROPFIND Depth 1 for a listing, GET for whole objects,
    HEAD for a size and GET with a Range for records of a TFRecord file."""
    dav.clear()
    build(sluice, "file", 3, file_root=http.uri("tiny")).run()
    log = dav.log()
    assert ("PROPFIND", "/tiny", "1") in {e[:3] for e in log}, log
    assert any(m == "GET" and p.startswith("/tiny/dir_0/f0") and s == 200 for m, p, _, _, s in log), log
    # None: not answered yet, or the client went away (read-ahead requests cancelled as the
    # pipeline is dropped); never an error status.
    assert all(s in (200, 207, None) for *_, s in log), log

    dav.clear()
    root, paths, idxs = http.sets["tfrecord"]
    t = tfrecord_t.tfrec(sluice)
    build(sluice, "tfrecord", 2, path=to_uri(root, http.uri("tfrecord"), paths),
          index_path=to_uri(root, http.uri("tfrecord"), idxs), features={"v": t.FixedLenFeature([], t.int64, -1)}).run()
    log = dav.log()
    assert any(m == "HEAD" and p == "/tfrecord/f0.tfrecord" for m, p, *_ in log), log
    assert any(m == "GET" and p == "/tfrecord/f0.tfrecord" and r.startswith("bytes=") and s == 206
               for m, p, _, r, s in log), log


# --------------------------------------------------------------------------- https:// (self-signed)
@pytest.mark.parametrize("check", READERS, ids=IDS)
def test_https_no_verify_env(sluice, davs, served, monkeypatch, check):
    """DALI_S3_NO_VERIFY_SSL=1 (DALI's variable; Sluice applies it to every scheme): a server
    with a self-signed certificate is read like the http one."""
    monkeypatch.setenv("DALI_S3_NO_VERIFY_SSL", "1")
    check(sluice, Remote(davs.endpoint, served[1]))


def test_https_allow_invalid_certificates_option(sluice, davs, served):
    """The storage option allow_invalid_certificates does the same for one reader."""
    check_files(sluice, Remote(davs.endpoint, served[1], {"allow_invalid_certificates": "true"}))


def test_https_certificate_checked_by_default(sluice, davs, monkeypatch):
    """Without either, the certificate is checked: the read fails (no retry loop: 0 store
    retries here) naming the URI."""
    monkeypatch.setenv("SLUICE_STORAGE_RETRIES", "0")
    uri = davs.uri("tiny/dir_0/f00.jpg")
    with pytest.raises(RuntimeError) as info:
        build(sluice, "file", 1, files=[uri], storage_options={"connect_timeout": "9s"}).run()
    assert uri in str(info.value), str(info.value)
    with pytest.raises(RuntimeError) as info:
        build(sluice, "file", 1, file_root=davs.uri("tiny"), storage_options={"connect_timeout": "9s"})
    assert davs.uri("tiny") in str(info.value), str(info.value)


# --------------------------------------------------------------------------- gs:// (emulator + adapter)
def test_gcs_emulator_alone_lacks_the_xml_api(gcs):
    """Why the adapter exists: the emulator itself answers 501 to the XML listing and to HEAD,
    and its XML GET has neither ETag nor Last-Modified (object_store's GCS client requires both).
    If this fails, the emulator has grown these and the adapter may be dropped."""
    emu, _, _ = gcs
    base = emu.emulator_endpoint
    obj = f"{base}/{BUCKET}/tiny%2Fdir_0%2Ff00.jpg"

    def status(req):
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.headers

    assert status(f"{base}/{BUCKET}?list-type=2&prefix=tiny%2F&delimiter=%2F")[0] == 501
    assert status(urllib.request.Request(obj, method="HEAD"))[0] == 501
    code, headers = status(obj)
    assert code == 200 and headers.get("ETag") is None and headers.get("Last-Modified") is None
    # object_store percent-encodes every non-alphanumeric byte of the bucket name ("-" -> %2D);
    # the emulator routes on the undecoded path, whose bucket part must match [-.\w]+.
    assert "-" in BUCKET
    assert status(obj.replace(BUCKET, BUCKET.replace("-", "%2D")))[0] == 501


def test_gcs_emulator_alone_fails_naming_the_uri(sluice, gcs, monkeypatch):
    """Pointed at the emulator itself, Sluice fails (quickly: 0 store retries) with errors naming
    the URI and what the server did."""
    emu, remote, tmp = gcs
    monkeypatch.setenv("SLUICE_STORAGE_RETRIES", "0")
    options = {"google_service_account": emu.service_account(tmp / "raw.json", raw=True), "allow_http": "true"}
    uri = remote.uri("tiny")
    with pytest.raises(RuntimeError) as info:
        build(sluice, "file", 1, file_root=uri, storage_options=options)
    assert uri in str(info.value) and "501" in str(info.value), str(info.value)
    with pytest.raises(RuntimeError) as info:
        build(sluice, "file", 1, files=[uri + "/dir_0/f00.jpg"], storage_options=options).run()
    assert uri + "/dir_0/f00.jpg" in str(info.value) and "501" in str(info.value), str(info.value)


@pytest.mark.parametrize("check", READERS, ids=IDS)
def test_gcs(sluice, gcs, check):
    check(sluice, gcs[1])


@pytest.mark.parametrize("reader", ["file", "tfrecord", "webdataset", "file_root"])
def test_gcs_missing(sluice, gcs, reader):
    check_missing(sluice, gcs[1], reader)


def test_gcs_missing_bucket(sluice, gcs):
    uri = "gs://no-such-bucket-sluice/tiny"
    with pytest.raises(RuntimeError) as info:
        build(sluice, "file", 1, file_root=uri, storage_options=gcs[1].options)
    assert uri in str(info.value), str(info.value)


def test_gcs_requests(sluice, gcs):
    """What the GCS client asks (through the adapter): an XML ListObjectsV2 with delimiter '/'
    for a listing, GETs of percent-encoded names, HEAD for sizes and ranged GETs for records."""
    emu, remote, _ = gcs
    bucket = "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in BUCKET)  # sluice%2Demu
    emu.clear()
    build(sluice, "file", 3, **remote.kw(file_root=remote.uri("tiny"))).run()
    log = emu.log()
    assert (("GET", f"/{bucket}?list-type=2&delimiter=%2F&prefix=tiny%2F") in {e[:2] for e in log}), log
    assert (("GET", f"/{bucket}?list-type=2&delimiter=%2F&prefix=tiny%2Fdir_0%2F") in {e[:2] for e in log}), log
    assert any(m == "GET" and t.startswith(f"/{bucket}/tiny%2Fdir%5F0%2Ff0") and s == 200 for m, t, _, s in log), log
    # None: the client went away mid-answer (read-ahead requests cancelled as the pipeline
    # is dropped); never an error status.
    assert all(s in (200, None) for *_, s in log), log

    emu.clear()
    root, paths, idxs = remote.sets["tfrecord"]
    t = tfrecord_t.tfrec(sluice)
    build(sluice, "tfrecord", 2, **remote.kw(path=to_uri(root, remote.uri("tfrecord"), paths),
                                             index_path=to_uri(root, remote.uri("tfrecord"), idxs),
                                             features={"v": t.FixedLenFeature([], t.int64, -1)})).run()
    log = emu.log()
    assert any(m == "HEAD" for m, *_ in log), log
    assert any(m == "GET" and r.startswith("bytes=") and s == 206 for m, _, r, s in log), log


def test_gcs_service_account_from_the_environment(sluice, gcs, monkeypatch):
    """GOOGLE_SERVICE_ACCOUNT (env) names the service-account file instead of the storage
    option; allow_http still given as a storage option."""
    emu, remote, _ = gcs
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT", remote.options["google_service_account"])
    check_files(sluice, Remote(remote.base, remote.sets, {"allow_http": "true"}))


def test_gcs_configured_by_the_environment_alone(sluice, gcs, monkeypatch):
    """GOOGLE_SERVICE_ACCOUNT and GOOGLE_ALLOW_HTTP=true in the environment, no storage options:
    object_store's documented environment configuration is enough."""
    emu, remote, _ = gcs
    monkeypatch.setenv("GOOGLE_SERVICE_ACCOUNT", remote.options["google_service_account"])
    monkeypatch.setenv("GOOGLE_ALLOW_HTTP", "true")
    check_files(sluice, Remote(remote.base, remote.sets))
