"""fn.readers.caffe and fn.readers.caffe2 (CPU backend): LMDB environments of Caffe `Datum` /
Caffe2 `TensorProtos` records, written here with the `lmdb` package and a hand-written protobuf
encoder (no Caffe, no protobuf package), read back by one test body run against Sluice and
NVIDIA DALI 2.4 (CPU-only), so the behaviour checked is DALI's.

Ported from DALI's tests (DALI_extra's db/lmdb, db/c2lmdb and db/c2lmdb_no_label replaced by
small databases made here): reader/test_caffe.py (test_reader_path_vs_paths: one path, [path]
and [path, path]; test_caffe_reader_alias; test_caffe_sharding; test_caffe2_reader_alias with
label_type 0 and 4), test_dali_cpu_only.py (test_caffe_reader_cpu, test_caffe2_reader_cpu, and
the caffe reader -> decoders.image pipeline of test_separated_exec_setup), checkpointing/
test_dali_checkpointing.py (test_caffe_reader and test_caffe2_reader, all 8 cases each).
Added here, from DALI 2.4's behaviour: every Datum field (encoded / raw HWC / missing data or
label, protobuf decoding rules), LMDB key order over several databases, source_info, each
caffe2 label_type with INT32 and FLOAT labels, raw (BYTE) and encoded (STRING) images,
additional_inputs, bbox, image_available / label_available, shard / shuffle sequences,
reader_meta, legacy names, and errors (paths that are not LMDB environments, records that are
not valid protobufs or do not match the arguments).

Caffe2's MULTI_LABEL_SPARSE (1) and MULTI_LABEL_WEIGHTED_SPARSE (3) are checked in the one
record layout DALI 2.4 reads without failing (see test_caffe2_sparse_labels): DALI declares two
label outputs for them but fills one, so the record must carry a 4-int bbox proto that fills
the last output. DALI's pipeline is unusable after an error; that Sluice goes on with the next
batch is checked for Sluice only. Not ported / Sluice-only: records with fewer TensorProtos
than the arguments need, an empty caffe2 value (DALI 2.4 segfaults: checked for Sluice only),
negative dimensions (DALI 2.4 returns a negative shape), weights shorter than the sparse
indices (DALI reads past the end), keys that are not UTF-8 (DALI's source_info() raises).
"""

import io
import struct
import warnings

import numpy as np
import pytest

from conftest import library_params, SHARD_CASES, checkpoint_after, shard_reference, check_random_shuffle
from conftest import pb_varint as _varint, pb_tag as _tag, pb_len_field

lmdb = pytest.importorskip("lmdb")

LIBS = library_params()


def is_sluice(lib):
    return lib.__name__.startswith("sluice")


# --------------------------------------------------------------------------- protobuf encoder
def _vfield(field, value):
    return _tag(field, 0) + _varint(value)


_lfield = pb_len_field


# caffe.proto (package dali.caffe):
#   message Datum { optional int32 channels = 1; optional int32 height = 2; optional int32 width = 3;
#                   optional bytes data = 4; optional int32 label = 5; repeated float float_data = 6;
#                   optional bool encoded = 7 [default = false]; }
def datum(data=None, label=None, channels=None, height=None, width=None, encoded=None, float_data=()):
    """A serialized Caffe Datum; fields left None are not written."""
    out = b""
    if channels is not None:
        out += _vfield(1, channels)
    if height is not None:
        out += _vfield(2, height)
    if width is not None:
        out += _vfield(3, width)
    if data is not None:
        out += _lfield(4, data)
    if label is not None:
        out += _vfield(5, label)
    for f in float_data:  # unpacked, as proto2 writes a repeated float without [packed]
        out += _tag(6, 5) + struct.pack("<f", f)
    if encoded is not None:
        out += _vfield(7, int(encoded))
    return out


# caffe2.proto (package dali.caffe2):
#   message TensorProto { repeated int64 dims = 1; optional DataType data_type = 2 [default = FLOAT];
#     repeated float float_data = 3 [packed]; repeated int32 int32_data = 4 [packed];
#     optional bytes byte_data = 5; repeated bytes string_data = 6; optional string name = 7;
#     repeated double double_data = 9 [packed]; repeated int64 int64_data = 10 [packed];
#     optional Segment segment = 11; }   Segment { required int64 begin = 1; required int64 end = 2; }
#   DataType: UNDEFINED 0, FLOAT 1, INT32 2, BYTE 3, STRING 4, BOOL 5, UINT8 6, ..., INT64 10
#   message TensorProtos { repeated TensorProto protos = 1; }
FLOAT, INT32, BYTE, STRING, UINT8, INT64 = 1, 2, 3, 4, 6, 10


def tensor(data_type=None, dims=(), float_data=None, int32_data=None, byte_data=None, string_data=None,
           int64_data=None, packed=True, extra=b""):
    """A serialized caffe2 TensorProto; data_type None: not written (proto2 default FLOAT)."""
    out = b"".join(_vfield(1, d) for d in dims)
    if data_type is not None:
        out += _vfield(2, data_type)
    if float_data is not None:
        if packed:
            out += _lfield(3, b"".join(struct.pack("<f", v) for v in float_data))
        else:
            out += b"".join(_tag(3, 5) + struct.pack("<f", v) for v in float_data)
    if int32_data is not None:
        if packed:
            out += _lfield(4, b"".join(_varint(v) for v in int32_data))
        else:
            out += b"".join(_vfield(4, v) for v in int32_data)
    if byte_data is not None:
        out += _lfield(5, byte_data)
    for s in string_data or ():
        out += _lfield(6, s)
    if int64_data is not None:
        out += _lfield(10, b"".join(_varint(v) for v in int64_data))
    return out + extra


def tensor_protos(*tensors):
    return b"".join(_lfield(1, t) for t in tensors)


def encoded_image(data):
    return tensor(STRING, string_data=[data])


def int_label(v):
    return tensor(INT32, int32_data=[v])


BBOX = [3, 1, 4, 1]
BBOX_PROTO = tensor(INT32, int32_data=BBOX)


# --------------------------------------------------------------------------- LMDB and images
def write_db(path, items):
    """An LMDB environment (a directory holding data.mdb and lock.mdb) with `items` [(key, value)]
    put in the order given (LMDB keeps them sorted by key bytes)."""
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key, value)
    env.close()
    return str(path)


_JPEGS = {}


def jpeg(k):
    """A small real JPEG (8 + k % 5 wide, 6 high, RGB), distinct per k."""
    if k not in _JPEGS:
        from PIL import Image

        rng = np.random.default_rng(1000 + k)
        a = rng.integers(0, 256, (6, 8 + k % 5, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="JPEG", quality=90)
        _JPEGS[k] = buf.getvalue()
    return _JPEGS[k]


def caffe_value(k):
    return datum(jpeg(k), label=k, encoded=True)


def caffe2_value(k):
    return tensor_protos(encoded_image(jpeg(k)), int_label(k))


def numbered(d, counts, value):
    """Records 0..N-1 over len(counts) databases DB0, DB1, ... (passed in that order): record k is
    value(k) under key b"rec%03d" % (its index in its database); the keys are put in reverse
    order. Returns (paths, [source_info of record k])."""
    d.mkdir(parents=True, exist_ok=True)
    paths, where, k = [], [], 0
    for i, n in enumerate(counts):
        items = [(b"rec%03d" % j, value(k + j)) for j in range(n)]
        paths.append(write_db(d / f"DB{i}", items[::-1]))
        where += [f"{paths[-1]} at key rec{j:03d}" for j in range(n)]
        k += n
    return paths, where


@pytest.fixture(scope="module")
def eleven(tmp_path_factory):
    """11 Caffe records (encoded JPEGs, label k) in two databases (6, 5)."""
    return numbered(tmp_path_factory.mktemp("caffe11"), [6, 5], caffe_value)


@pytest.fixture(scope="module")
def eleven2(tmp_path_factory):
    """11 Caffe2 records ([STRING JPEG, INT32 label k]) in two databases (4, 7)."""
    return numbered(tmp_path_factory.mktemp("caffe2_11"), [4, 7], caffe2_value)


# --------------------------------------------------------------------------- pipelines
def reader(lib, kind):
    return lib.fn.readers.caffe if kind == "caffe" else lib.fn.readers.caffe2


def reader_pipe(lib, kind="caffe", batch_size=1, num_threads=2, pipe_seed=1234, pipe_kw=None, **reader_kw):
    """A built pipeline returning every output of fn.readers.<kind>(name="R", ...)."""
    read_fn = reader(lib, kind)

    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=pipe_seed,
                      **(pipe_kw or {}))
    def p():
        out = read_fn(name="R", **reader_kw)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = p()
    pipe.build()
    return pipe


def read(pipe, n_batches):
    """[(source_info of the first output, array of each output...) per sample] over n_batches."""
    out = []
    for _ in range(n_batches):
        outs = pipe.run()
        for i in range(len(outs[0])):
            out.append((outs[0][i].source_info(),) + tuple(np.array(o.at(i)) for o in outs))
    return out


def labels(samples):
    return [int(s[2][0]) for s in samples]


def raises_reader_error(kind, *names, exc=RuntimeError):
    """pytest.raises for an error whose message names the reader (readers.caffe / readers.caffe2,
    any case: DALI writes fn.readers.caffe or ops.readers.Caffe) and every one of `names`
    (regular expressions), in any order."""
    name = r"readers\.[Cc]affe2" if kind == "caffe2" else r"readers\.[Cc]affe(?!2)"
    pattern = "(?s)" + "".join(f"(?=.*(?:{n}))" for n in (name,) + names)
    return pytest.raises(exc, match=pattern)


def one_record(lib, tmp_path, kind, value, key=b"k0", **kw):
    """The outputs of the single record `value` (a batch of one): [array per output]."""
    path = write_db(tmp_path / f"one_{len(list(tmp_path.iterdir()))}", [(key, value)])
    got = read(reader_pipe(lib, kind, path=path, **kw), 1)
    assert len(got) == 1
    return path, got[0][0], list(got[0][1:])


def run_one(lib, tmp_path, kind, value, **kw):
    """Builds and runs a pipeline over the single record `value` (for errors)."""
    path = write_db(tmp_path / f"bad_{len(list(tmp_path.iterdir()))}", [(b"k0", value)])
    p = reader_pipe(lib, kind, path=path, pipe_kw=dict(prefetch_queue_depth=1), **kw)
    for _ in range(2):
        p.run()


# =========================================================================== readers.caffe
@pytest.mark.parametrize("lib", LIBS)
def test_caffe_encoded_records_in_key_order(lib, eleven):
    """Image: UINT8 1-D, the Datum's `data` bytes; label: INT32 (1,). Records come in LMDB key
    order within a database, databases in the order of `path`, wrapping around after the last;
    source_info "<path> at key <key>" on the image, "" on the label; no layouts."""
    paths, where = eleven
    pipe = reader_pipe(lib, batch_size=4, path=paths)
    got = read(pipe, 6)  # 24 samples: 2 epochs and a bit
    for n, (src, img, lab) in enumerate(got):
        k = n % 11
        assert img.dtype == np.uint8 and img.shape == (len(jpeg(k)),) and bytes(img) == jpeg(k)
        assert lab.dtype == np.int32 and lab.shape == (1,) and int(lab[0]) == k
        assert src == where[k]
    outs = pipe.run()
    assert [o.layout() for o in outs] == ["", ""]
    assert outs[1][0].source_info() == ""
    assert pipe.epoch_size("R") == 11 and pipe.epoch_size() == {"R": 11}


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_key_order_is_bytewise(lib, tmp_path):
    """LMDB orders keys by their bytes (memcmp, a prefix first), whatever the order they were put
    in; the key's bytes, a NUL included, go into source_info."""
    keys = [b"~", b"aa", b"2", b"B", b"10", b"a\x00", b"1", b"\x01", b"a"]
    path = write_db(tmp_path / "db", [(k, datum(b"v" + k, label=i)) for i, k in enumerate(keys)])
    got = read(reader_pipe(lib, batch_size=len(keys), path=path), 1)
    want = sorted(keys)
    assert [bytes(s[1]) for s in got] == [b"v" + k for k in want]
    assert [s[0] for s in got] == [f"{path} at key {k.decode()}" for k in want]


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_datum_fields(lib, tmp_path):
    """Without `encoded: false` the image is `data` as 1-D bytes (channels / height / width
    ignored); a missing `data` is an empty image, a missing `label` an empty INT32 (0,) label;
    float_data is ignored; protobuf rules: the last of repeated optional fields wins, unknown
    fields (any wire type, groups included) and known fields of the wrong wire type are skipped,
    int32 varints keep their low 32 bits, negative labels are ten-byte varints."""
    raw = bytes(range(24))
    cases = [
        (datum(raw, label=3, encoded=True), raw, [3]),
        (datum(raw, label=4), raw, [4]),
        (datum(raw, label=-7, channels=2, height=3, width=4), raw, [-7]),
        (datum(raw, label=8, channels=5, height=5, width=5, encoded=True), raw, [8]),
        (datum(None, label=5, float_data=[1.0, 2.0]), b"", [5]),
        (datum(raw), raw, []),
        (b"", b"", []),
        (datum(b"ab", encoded=2), b"ab", []),
        (_vfield(5, 1) + _vfield(5, 9) + _lfield(4, b"aa") + _lfield(4, b"bbb"), b"bbb", [9]),
        (_vfield(5, 1) + _vfield(99, 9) + _lfield(100, b"zz") + _tag(50, 5) + b"abcd" + _tag(51, 1) + b"12345678"
         + _tag(9, 3) + _vfield(1, 1) + _tag(9, 4), b"", [1]),
        (_tag(5, 2) + _varint(2) + b"ab" + _lfield(4, b"x"), b"x", []),
        (_vfield(4, 7) + _vfield(5, 3), b"", [3]),
        (_vfield(5, 2 ** 32 + 5), b"", [5]),
        (_vfield(5, 2 ** 31), b"", [-2 ** 31]),
    ]
    for n, (value, data, label) in enumerate(cases):
        _, src, (img, lab) = one_record(lib, tmp_path, "caffe", value)
        assert img.dtype == np.uint8 and img.shape == (len(data),) and bytes(img) == data, n
        assert lab.dtype == np.int32 and lab.shape == (len(label),) and lab.tolist() == label, n
        assert src.endswith(" at key k0")


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_raw_datum(lib, tmp_path):
    """`encoded: false` (written explicitly): the image is `data` as UINT8 (height, width,
    channels), which must hold height * width * channels bytes; missing dimensions are 0."""
    raw = bytes(range(24))
    cases = [
        (datum(raw, label=1, channels=3, height=2, width=4, encoded=False), (2, 4, 3)),
        (datum(raw, label=2, channels=1, height=4, width=6, encoded=False), (4, 6, 1)),
        (datum(raw, label=3, height=1, width=1, channels=24, encoded=False), (1, 1, 24)),
        (datum(None, label=4, channels=0, height=4, width=6, encoded=False), (4, 6, 0)),
        (datum(None, label=5, encoded=False), (0, 0, 0)),
        (datum(b"", label=6, channels=3, height=0, width=6, encoded=False), (0, 6, 3)),
    ]
    for value, shape in cases:
        _, src, (img, lab) = one_record(lib, tmp_path, "caffe", value)
        assert img.dtype == np.uint8 and img.shape == shape
        assert bytes(img.tobytes()) == raw[:int(np.prod(shape))]
        assert lab.dtype == np.int32 and lab.shape == (1,)
    # several raw records in one batch, as written
    items = [(b"r%d" % k, datum(bytes([k]) * 24, label=k, channels=3, height=2, width=4, encoded=False))
             for k in range(3)]
    got = read(reader_pipe(lib, batch_size=3, path=write_db(tmp_path / "raw3", items)), 1)
    for k, (_, img, lab) in enumerate(got):
        assert img.shape == (2, 4, 3) and (img == k).all() and lab.tolist() == [k]


@pytest.mark.parametrize("case", ["too_few", "too_many", "no_data"])
@pytest.mark.parametrize("lib", LIBS)
def test_caffe_raw_datum_size_mismatch(lib, tmp_path, case):
    """A raw Datum whose data is not height * width * channels bytes fails when run."""
    value = {
        "too_few": datum(bytes(23), channels=3, height=2, width=4, encoded=False),
        "too_many": datum(bytes(25), channels=3, height=2, width=4, encoded=False),
        "no_data": datum(None, channels=1, height=1, width=1, encoded=False),
    }[case]
    with raises_reader_error("caffe", r"(?i:doesn't match its dimensions|does not match)"):
        run_one(lib, tmp_path, "caffe", value)
    # without the image output the dimensions are not checked
    _, _, outs = one_record(lib, tmp_path, "caffe", value, image_available=False)
    assert len(outs) == 1 and outs[0].dtype == np.int32 and outs[0].shape == (0,)


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_image_and_label_available(lib, eleven):
    """image_available / label_available drop that output; both False: no outputs."""
    paths, where = eleven
    got = read(reader_pipe(lib, batch_size=3, path=paths, image_available=False), 1)
    for k, (src, lab) in enumerate(got):
        assert lab.dtype == np.int32 and lab.tolist() == [k] and src == ""
    got = read(reader_pipe(lib, batch_size=3, path=paths, label_available=False), 1)
    for k, (src, img) in enumerate(got):
        assert bytes(img) == jpeg(k) and src == where[k]
    seen = []

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        out = lib.fn.readers.caffe(path=paths, image_available=False, label_available=False)
        seen.append(out)
        return lib.fn.zeros(shape=[1])

    p().build()
    assert list(seen[0]) == []


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_decodes(lib, eleven):
    """The images are what decoders.image reads (DALI's test_separated_exec_setup / test_caffe.py use
    the reader's output as a decoder's input)."""
    paths, _ = eleven
    fn = lib.fn

    @lib.pipeline_def(batch_size=5, num_threads=2, device_id=None)
    def p():
        enc, lab = fn.readers.caffe(path=paths, shard_id=0, num_shards=1)
        return fn.decoders.image(enc, output_type=lib.types.RGB), lab

    pipe = p()
    pipe.build()
    imgs, labs = pipe.run()
    for i in range(5):
        k = int(np.array(labs.at(i))[0])
        assert np.array(imgs.at(i)).shape == (6, 8 + k % 5, 3)


# =========================================================================== readers.caffe2
@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_encoded_records_in_key_order(lib, eleven2):
    """Image: UINT8 1-D, string_data[0] of proto 0 (data_type STRING); label (label_type 0):
    INT32 (1,) from proto 1; order and source_info as for readers.caffe."""
    paths, where = eleven2
    pipe = reader_pipe(lib, "caffe2", batch_size=4, path=paths)
    got = read(pipe, 6)
    for n, (src, img, lab) in enumerate(got):
        k = n % 11
        assert img.dtype == np.uint8 and img.shape == (len(jpeg(k)),) and bytes(img) == jpeg(k)
        assert lab.dtype == np.int32 and lab.shape == (1,) and int(lab[0]) == k
        assert src == where[k]
    outs = pipe.run()
    assert [o.layout() for o in outs] == ["", ""]
    assert outs[1][0].source_info() == ""
    assert pipe.epoch_size("R") == 11


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_images(lib, tmp_path):
    """STRING: string_data[0] as 1-D bytes (more strings ignored); BYTE: byte_data as UINT8
    (dims[0], dims[1], dims[2]), or (dims[0], dims[1], 1) for two dims; `name`, `segment` and
    unknown fields are ignored."""
    cases = [
        (tensor(STRING, string_data=[b"\xff\xd8abc"]), b"\xff\xd8abc", (5,)),
        (tensor(STRING, string_data=[b"ab", b"cd"]), b"ab", (2,)),
        (tensor(STRING, string_data=[b""]), b"", (0,)),
        (tensor(BYTE, dims=[2, 3, 2], byte_data=bytes(range(12))), bytes(range(12)), (2, 3, 2)),
        (tensor(BYTE, dims=[2, 3], byte_data=bytes(range(6))), bytes(range(6)), (2, 3, 1)),
        (tensor(BYTE, dims=[0, 3, 3], byte_data=b""), b"", (0, 3, 3)),
        (tensor(STRING, string_data=[b"xyz"], extra=_lfield(7, b"name") + _vfield(30, 1)
                + _lfield(11, _vfield(1, 0) + _vfield(2, 3))), b"xyz", (3,)),
    ]
    for img_proto, data, shape in cases:
        _, src, (img, lab) = one_record(lib, tmp_path, "caffe2", tensor_protos(img_proto, int_label(3)))
        assert img.dtype == np.uint8 and img.shape == shape and img.tobytes() == data
        assert lab.tolist() == [3] and src.endswith(" at key k0")


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_single_label(lib, tmp_path):
    """label_type 0: proto 1 holds one value; data_type INT32 -> INT32 (1,) from int32_data,
    FLOAT (the proto2 default when data_type is not written) -> FLOAT (1,) from float_data;
    packed and unpacked encodings read alike."""
    cases = [
        (tensor(INT32, int32_data=[7]), np.int32, [7]),
        (tensor(INT32, int32_data=[-5]), np.int32, [-5]),
        (tensor(INT32, int32_data=[7], packed=False), np.int32, [7]),
        (tensor(FLOAT, float_data=[7.5]), np.float32, [7.5]),
        (tensor(None, float_data=[2.5]), np.float32, [2.5]),
        (tensor(FLOAT, float_data=[1.25], packed=False), np.float32, [1.25]),
    ]
    for label_proto, dtype, want in cases:
        _, _, (img, lab) = one_record(lib, tmp_path, "caffe2", tensor_protos(encoded_image(b"img"), label_proto))
        assert bytes(img) == b"img"
        assert lab.dtype == dtype and lab.shape == (1,) and lab.tolist() == want


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_dense_label(lib, tmp_path):
    """label_type 2 (MULTI_LABEL_DENSE): proto 1's values as a vector of their length (not
    num_labels), INT32 or FLOAT."""
    cases = [
        (tensor(INT32, int32_data=[1, 2, 3]), np.int32, [1, 2, 3]),
        (tensor(FLOAT, float_data=[0.5, 1.5]), np.float32, [0.5, 1.5]),
        (tensor(FLOAT, float_data=[]), np.float32, []),
    ]
    for label_proto, dtype, want in cases:
        _, _, (img, lab) = one_record(lib, tmp_path, "caffe2", tensor_protos(encoded_image(b"i"), label_proto),
                                      label_type=2, num_labels=7)
        assert lab.dtype == dtype and lab.shape == (len(want),) and lab.tolist() == want


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_sparse_labels(lib, tmp_path):
    """label_type 1 (MULTI_LABEL_SPARSE): proto 1 holds active indices (int32_data, or
    float_data truncated to int); the label is (num_labels,) of proto 1's type with 1 at
    them. DALI 2.4 declares an extra output for it, skips proto 2 and reads additional inputs
    from proto 3 on; the output after the label is filled by the bbox rule (a 4-int INT32 proto
    that is the last one), so a readable record is [image, indices, (skipped), additional...,
    bbox] with bbox=False.

    label_type 3 (MULTI_LABEL_WEIGHTED_SPARSE): indices in proto 1, float_data weights in proto
    2; the label is FLOAT (num_labels,) holding each index's weight. DALI 2.4 reads additional
    inputs from proto 2 on (the weights again) and then the last proto as bbox, so a readable
    record is [image, indices, weights, bbox] with additional_inputs=1, bbox=False: outputs
    image, label, weights, bbox."""
    img = encoded_image(b"i")
    for indices, dtype in [(tensor(INT32, int32_data=[1, 3]), np.int32),
                           (tensor(FLOAT, float_data=[1.0, 3.7]), np.float32)]:
        value = tensor_protos(img, indices, tensor(FLOAT, float_data=[5.0]), BBOX_PROTO)
        _, _, outs = one_record(lib, tmp_path, "caffe2", value, label_type=1, num_labels=5)
        assert len(outs) == 3
        assert outs[1].dtype == dtype and outs[1].tolist() == [0, 1, 0, 1, 0]
        assert outs[2].dtype == np.int32 and outs[2].tolist() == BBOX
    value = tensor_protos(img, tensor(INT32, int32_data=[]), tensor(FLOAT), BBOX_PROTO)
    _, _, outs = one_record(lib, tmp_path, "caffe2", value, label_type=1, num_labels=3)
    assert outs[1].tolist() == [0, 0, 0]
    _, _, outs = one_record(lib, tmp_path, "caffe2",
                            tensor_protos(img, tensor(INT32, int32_data=[0]), tensor(FLOAT, float_data=[5.0]),
                                          tensor(INT64, int64_data=[9]), BBOX_PROTO),
                            label_type=1, num_labels=2, additional_inputs=1)
    assert [o.tolist() for o in outs[1:]] == [[1, 0], [9], BBOX] and outs[2].dtype == np.int64

    for indices in [tensor(INT32, int32_data=[1, 3]), tensor(FLOAT, float_data=[1.0, 3.5])]:
        _, _, outs = one_record(lib, tmp_path, "caffe2",
                                tensor_protos(img, indices, tensor(FLOAT, float_data=[0.25, 0.75]), BBOX_PROTO),
                                label_type=3, num_labels=5, additional_inputs=1)
        assert len(outs) == 4
        assert outs[1].dtype == np.float32 and outs[1].tolist() == [0, 0.25, 0, 0.75, 0]
        assert outs[2].dtype == np.float32 and outs[2].tolist() == [0.25, 0.75]
        assert outs[3].dtype == np.int32 and outs[3].tolist() == BBOX
    # a weights proto typed INT32 with 4 int32 values is itself taken as the bbox (weights: float_data)
    _, _, outs = one_record(lib, tmp_path, "caffe2",
                            tensor_protos(img, tensor(INT32, int32_data=[2]),
                                          tensor(INT32, int32_data=[5, 6, 7, 8], float_data=[0.5])),
                            label_type=3, num_labels=3)
    assert [o.tolist() for o in outs[1:]] == [[0, 0, 0.5], [5, 6, 7, 8]]


@pytest.mark.parametrize("label_type", [1, 3])
@pytest.mark.parametrize("index", [7, 5, -1])
@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_sparse_index_out_of_range(lib, tmp_path, label_type, index):
    value = tensor_protos(encoded_image(b"i"), tensor(INT32, int32_data=[0, index]),
                          tensor(FLOAT, float_data=[0.5, 0.5]), BBOX_PROTO)
    kw = dict(additional_inputs=1) if label_type == 3 else {}
    with raises_reader_error("caffe2", rf"(?i:out of (bounds|range)).*{index}", r"num_labels.*5|5.*num_labels"):
        run_one(lib, tmp_path, "caffe2", value, label_type=label_type, num_labels=5, **kw)


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_no_label_and_no_image(lib, tmp_path, eleven2):
    """label_type 4 (NO_LABEL): the image alone (DALI's test_caffe2_reader_alias with
    c2lmdb_no_label); image_available=False: the protos start with the label."""
    path = write_db(tmp_path / "nolabel", [(b"k%d" % k, tensor_protos(encoded_image(jpeg(k)))) for k in range(3)])
    got = read(reader_pipe(lib, "caffe2", batch_size=3, path=path, label_type=4), 1)
    assert [(len(s), bytes(s[1])) for s in got] == [(2, jpeg(k)) for k in range(3)]
    path = write_db(tmp_path / "noimage", [(b"k%d" % k, tensor_protos(tensor(FLOAT, float_data=[k, -k]), BBOX_PROTO))
                                           for k in range(3)])
    got = read(reader_pipe(lib, "caffe2", batch_size=3, path=path, image_available=False, label_type=2, bbox=True), 1)
    for k, (src, lab, box) in enumerate(got):
        assert src == "" and lab.dtype == np.float32 and lab.tolist() == [k, -k] and box.tolist() == BBOX
    path = write_db(tmp_path / "neither", [(b"k", tensor_protos(tensor(INT64, int64_data=[2 ** 40])))])
    got = read(reader_pipe(lib, "caffe2", path=path, image_available=False, label_type=4, additional_inputs=1), 1)
    assert len(got[0]) == 2 and got[0][1].dtype == np.int64 and got[0][1].tolist() == [2 ** 40]


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_additional_inputs_and_bbox(lib, tmp_path):
    """additional_inputs: the protos after the label, each an output of its data_type's values
    (FLOAT float_data, INT32 int32_data, INT64 int64_data; FLOAT when data_type is not written);
    bbox: the proto after them, INT32 with 4 values, an INT32 (4,) output. Protos past these are
    ignored when bbox=False."""
    img = encoded_image(b"i")
    value = tensor_protos(img, int_label(3), tensor(FLOAT, float_data=[1.5, 2.5]), tensor(INT32, int32_data=[4, 5, 6]),
                          tensor(INT64, int64_data=[2 ** 40, -1]), tensor(None, float_data=[0.5]), tensor(INT32))
    _, _, outs = one_record(lib, tmp_path, "caffe2", value, additional_inputs=5)
    assert [o.dtype for o in outs] == [np.uint8, np.int32, np.float32, np.int32, np.int64, np.float32, np.int32]
    assert [o.tolist() for o in outs[1:]] == [[3], [1.5, 2.5], [4, 5, 6], [2 ** 40, -1], [0.5], []]

    _, _, outs = one_record(lib, tmp_path, "caffe2", tensor_protos(img, int_label(3), BBOX_PROTO), bbox=True)
    assert len(outs) == 3 and outs[2].dtype == np.int32 and outs[2].tolist() == BBOX
    value = tensor_protos(img, int_label(3), tensor(FLOAT, float_data=[9.0]), BBOX_PROTO)
    _, _, outs = one_record(lib, tmp_path, "caffe2", value, bbox=True, additional_inputs=1)
    assert [o.tolist() for o in outs[1:]] == [[3], [9.0], BBOX]
    _, _, outs = one_record(lib, tmp_path, "caffe2", tensor_protos(img, int_label(3), BBOX_PROTO, BBOX_PROTO))
    assert len(outs) == 2 and outs[1].tolist() == [3]
    _, _, outs = one_record(lib, tmp_path, "caffe2", tensor_protos(img, BBOX_PROTO), label_type=4, bbox=True)
    assert len(outs) == 2 and outs[1].tolist() == BBOX


# errors in caffe2 records: (protos, reader arguments, regular expression). DALI 2.4's messages are
# mostly its failed assertion's text; the alternative after | is for Sluice's own words.
CAFFE2_ERRORS = {
    "single_label_two_values": (lambda i: [i, tensor(INT32, int32_data=[7, 8])], {},
                                r"== 1|(?i:one value|single.label)"),
    "single_label_no_values": (lambda i: [i, tensor(INT32, int32_data=[])], {}, r"== 1|(?i:one value|single.label)"),
    "single_label_int_in_float_proto": (lambda i: [i, tensor(FLOAT, int32_data=[5])], {},
                                        r"== 1|(?i:one value|single.label)"),
    "label_int64": (lambda i: [i, tensor(INT64, int64_data=[7])], {}, r"(?i:unsupported label data type)"),
    "label_string": (lambda i: [i, tensor(STRING, string_data=[b"x"])], {}, r"(?i:unsupported label data type)"),
    "label_type_5": (lambda i: [i, int_label(1)], dict(label_type=5), r"(?i:unsupported label type|label_type)"),
    "additional_byte": (lambda i: [i, int_label(1), tensor(BYTE, byte_data=b"xx")], dict(additional_inputs=1),
                        r"(?i:unsupported data type in additional proto)"),
    "bbox_float": (lambda i: [i, int_label(1), tensor(FLOAT, float_data=[1, 2, 3, 4])], dict(bbox=True), r"(?i:bbox)"),
    "bbox_three_values": (lambda i: [i, int_label(1), tensor(INT32, int32_data=[1, 2, 3])], dict(bbox=True),
                          r"(?i:bbox)"),
    "bbox_proto_without_bbox": (lambda i: [i, int_label(1), BBOX_PROTO], {},
                                r"(?i:index 2 out of range|bbox|output)"),
    "no_label_extra_proto": (lambda i: [i, int_label(1)], dict(label_type=4), r"(?i:bbox)"),
    "bbox_missing": (lambda i: [i, int_label(1)], dict(bbox=True), r"new_type must be valid type|(?i:bbox)"),
    "bbox_not_last": (lambda i: [i, int_label(1), BBOX_PROTO, BBOX_PROTO], dict(bbox=True),
                      r"new_type must be valid type|(?i:bbox)"),
    "sparse_without_bbox_proto": (lambda i: [i, tensor(INT32, int32_data=[1])], dict(label_type=1, num_labels=3),
                                  r"new_type must be valid type|(?i:output|bbox)"),
    "weighted_sparse_float_weights_only": (
        lambda i: [i, tensor(INT32, int32_data=[1]), tensor(FLOAT, float_data=[0.5])],
        dict(label_type=3, num_labels=3), r"(?i:bbox)"),
    "image_float": (lambda i: [tensor(FLOAT, float_data=[1.0]), int_label(1)], {},
                    r"new_type must be valid type|(?i:image)"),
    "image_uint8": (lambda i: [tensor(UINT8, dims=[1, 2], byte_data=b"ab"), int_label(1)], {},
                    r"new_type must be valid type|(?i:image)"),
    "raw_image_short": (lambda i: [tensor(BYTE, dims=[2, 3, 2], byte_data=bytes(5)), int_label(1)], {},
                        r"(?i:image data size mismatch).*5.*12"),
    "raw_image_long": (lambda i: [tensor(BYTE, dims=[1, 2, 1], byte_data=b"abc"), int_label(1)], {},
                       r"(?i:image data size mismatch).*3.*2"),
    "raw_image_no_bytes": (lambda i: [tensor(BYTE, dims=[1, 2, 1]), int_label(1)], {},
                           r"(?i:image data size mismatch).*0.*2"),
}


@pytest.mark.parametrize("case", list(CAFFE2_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_record_errors(lib, tmp_path, case):
    """A record that does not match the arguments fails the pipeline when run."""
    make, kw, match = CAFFE2_ERRORS[case]
    with raises_reader_error("caffe2", match):
        run_one(lib, tmp_path, "caffe2", tensor_protos(*make(encoded_image(b"i"))), **kw)


@pytest.mark.parametrize("case", ["empty_value", "image_only", "sparse_additional_missing", "no_weights"])
@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_too_few_protos(lib, tmp_path, case):
    """Sluice-only: a record with fewer TensorProtos than the arguments read (DALI 2.4 reads past
    the end of the list and crashes the process) is an error naming the record."""
    if not is_sluice(lib):
        pytest.skip("DALI 2.4 segfaults on it")
    value, kw = {
        "empty_value": (b"", {}),
        "image_only": (tensor_protos(encoded_image(b"i")), {}),
        "sparse_additional_missing": (tensor_protos(encoded_image(b"i"), int_label(1), tensor(FLOAT)),
                                      dict(label_type=1, num_labels=3, additional_inputs=1)),
        "no_weights": (tensor_protos(encoded_image(b"i"), int_label(1)), dict(label_type=3, num_labels=3)),
    }[case]
    with raises_reader_error("caffe2", r"at key k0"):
        run_one(lib, tmp_path, "caffe2", value, **kw)


# =========================================================================== both readers
@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
@pytest.mark.parametrize("lib", LIBS)
def test_shard_sequence(lib, eleven, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    paths, where = eleven
    pipe = reader_pipe(lib, batch_size=batch_size, path=paths, num_shards=num_shards, shard_id=shard_id,
                       stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
    n_batches = 9
    got = read(pipe, n_batches)
    want = shard_reference(11, num_shards, shard_id, batch_size, n_batches * batch_size, pad_last_batch,
                           stick_to_shard)
    assert labels(got) == want
    assert [s[0] for s in got] == [where[k] for k in want]


@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", [(3, 1, 2), (4, 3, 3)])
@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_shard_sequence(lib, eleven2, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    paths, where = eleven2
    pipe = reader_pipe(lib, "caffe2", batch_size=batch_size, path=paths, num_shards=num_shards, shard_id=shard_id,
                       stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
    got = read(pipe, 9)
    want = shard_reference(11, num_shards, shard_id, batch_size, 9 * batch_size, pad_last_batch, stick_to_shard)
    assert labels(got) == want and [s[0] for s in got] == [where[k] for k in want]


@pytest.mark.parametrize("lib", LIBS)
def test_caffe_sharding(lib, eleven):
    """DALI's test_caffe_sharding (pad_last_batch): the shards do not overlap and add up to the
    data set; without stick_to_shard every shard goes through all of it."""
    paths, _ = eleven

    def get_data(shard_id, num_shards, stick_to_shard):
        p = reader_pipe(lib, batch_size=1, num_threads=1, pipe_seed=123, path=paths, pad_last_batch=True,
                        random_shuffle=False, shard_id=shard_id, stick_to_shard=stick_to_shard, num_shards=num_shards)
        size = p.reader_meta()["R"]["epoch_size_padded"]
        return {bytes(s[1]) for s in read(p, size)}

    dataset = get_data(0, 1, False)
    assert len(dataset) == 11
    shards = [get_data(i, 3, True) for i in range(3)]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert not shards[i] & shards[j]
    assert set().union(*shards) == dataset
    for i in range(3):
        assert get_data(i, 3, False) == dataset


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_epoch_size_and_reader_meta(lib, kind, eleven, eleven2):
    paths, _ = eleven if kind == "caffe" else eleven2
    pipe = reader_pipe(lib, kind, batch_size=2, path=paths, num_shards=4, shard_id=1, pad_last_batch=True)
    assert pipe.epoch_size("R") == 12 and pipe.epoch_size() == {"R": 12}
    meta = pipe.reader_meta("R")
    assert meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 12
    assert meta["number_of_shards"] == 4 and meta["shard_id"] == 1
    assert bool(meta["pad_last_batch"]) and not bool(meta["stick_to_shard"])
    pipe = reader_pipe(lib, kind, batch_size=2, path=paths, num_shards=3, shard_id=2, stick_to_shard=True)
    meta = pipe.reader_meta()["R"]
    assert pipe.epoch_size("R") == 11 and meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 11
    assert not bool(meta["pad_last_batch"]) and bool(meta["stick_to_shard"])


@pytest.mark.parametrize("lib", LIBS)
def test_empty_databases_count_for_nothing(lib, eleven, tmp_path):
    """An empty LMDB among others adds no records; the same path twice reads it twice."""
    paths, where = eleven
    empty = write_db(tmp_path / "empty", [])
    pipe = reader_pipe(lib, batch_size=11, path=[empty, paths[0], empty, paths[1], empty])
    assert pipe.epoch_size("R") == 11
    got = read(pipe, 2)
    assert labels(got) == list(range(11)) * 2 and [s[0] for s in got] == where * 2
    pipe = reader_pipe(lib, batch_size=5, path=[paths[1], paths[1], paths[0]])
    assert pipe.epoch_size("R") == 16
    assert labels(read(pipe, 4)) == [6, 7, 8, 9, 10] * 2 + [0, 1, 2, 3, 4, 5] + [6, 7, 8, 9]


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle(lib, kind, eleven, eleven2):
    """random_shuffle: each epoch is a permutation of all records; the order follows the seed;
    an image stays with its label and source_info."""
    paths, where = eleven if kind == "caffe" else eleven2

    def order(pipe_seed, **kw):
        pipe = reader_pipe(lib, kind, batch_size=3, pipe_seed=pipe_seed, path=paths, random_shuffle=True, **kw)
        got = read(pipe, 15)  # 45 samples: 4 epochs and a bit
        for src, img, lab in got:
            assert bytes(img) == jpeg(int(lab[0])) and src == where[int(lab[0])]
        return labels(got)

    check_random_shuffle(order, list(range(11)))


@pytest.mark.parametrize("options", [dict(), dict(dont_use_mmap=True), dict(read_ahead=True), dict(lazy_init=True),
                                     dict(shard_id=0, num_shards=1), dict(num_threads=1), dict(prefetch_queue_depth=3),
                                     dict(skip_cached_images=False, tensor_init_bytes=16)])
@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_read_options_give_the_same_data(lib, kind, eleven, eleven2, options):
    """DALI's test_caffe_reader_cpu / test_caffe2_reader_cpu, and options that change how, not
    what, is read."""
    paths, where = eleven if kind == "caffe" else eleven2
    options = dict(options)
    pipe = reader_pipe(lib, kind, batch_size=4, num_threads=options.pop("num_threads", 3), path=paths, **options)
    got = read(pipe, 7)
    for n, (src, img, lab) in enumerate(got):
        assert bytes(img) == jpeg(n % 11) and lab.tolist() == [n % 11] and src == where[n % 11]


@pytest.mark.parametrize("batch_size,num_threads", [(1, 1), (1, 2), (16, 1), (16, 2), (31, 2)])
@pytest.mark.parametrize("lib", LIBS)
def test_reader_path_vs_paths(lib, eleven, batch_size, num_threads):
    """DALI's test_reader_path_vs_paths: path as a string, [path] and [path, path] give the same
    sequence (batch 1, one thread, against other batch sizes and thread counts)."""
    paths, _ = eleven
    ref = read(reader_pipe(lib, batch_size=1, num_threads=1, path=paths[0]), 40)
    for path in [[paths[0]], [paths[0], paths[0]]]:
        pipe = reader_pipe(lib, batch_size=batch_size, num_threads=num_threads, path=path)
        got = read(pipe, -(-40 // batch_size))[:40]
        for (s1, i1, l1), (s2, i2, l2) in zip(ref, got):
            np.testing.assert_array_equal(i1, i2)
            np.testing.assert_array_equal(l1, l2)
            assert s1 == s2


@pytest.mark.parametrize("lib", LIBS)
def test_relative_path(lib, eleven, monkeypatch):
    """A relative path: source_info keeps it as given."""
    paths, _ = eleven
    monkeypatch.chdir(paths[1].rsplit("/", 1)[0])
    got = read(reader_pipe(lib, batch_size=6, path="DB1"), 1)
    assert labels(got) == [6, 7, 8, 9, 10, 6]
    assert [s[0] for s in got] == [f"DB1 at key rec{j:03d}" for j in [0, 1, 2, 3, 4, 0]]


@pytest.mark.parametrize("lib", LIBS)
def test_no_lock_file_needed(lib, eleven, tmp_path):
    """The environment is opened read-only without locking: a directory holding data.mdb alone
    reads the same, and no lock.mdb is created."""
    paths, where = eleven
    d = tmp_path / "nolock"
    d.mkdir()
    (d / "data.mdb").write_bytes(open(paths[0] + "/data.mdb", "rb").read())
    got = read(reader_pipe(lib, batch_size=6, path=str(d)), 1)
    assert labels(got) == list(range(6))
    assert [s[0] for s in got] == [w.replace(paths[0], str(d)) for w in where[:6]]
    assert sorted(p.name for p in d.iterdir()) == ["data.mdb"]


@pytest.mark.parametrize("lib", LIBS)
def test_large_values_and_many_records(lib, tmp_path):
    """Values bigger than a page (LMDB overflow pages) and enough records for a B-tree of more
    than one level read back whole and in order."""
    items = [(b"big%02d" % k, datum(bytes([k]) * (5000 + 3000 * k), label=k)) for k in range(4)]
    items += [(b"n%05d" % k, datum(b"%d" % k, label=100 + k)) for k in range(2000)]
    path = write_db(tmp_path / "db", items[::-1])
    env = lmdb.open(path, readonly=True, lock=False)
    assert env.stat()["depth"] >= 2 and env.stat()["overflow_pages"] > 0
    env.close()
    pipe = reader_pipe(lib, batch_size=501, path=path)
    assert pipe.epoch_size("R") == 2004
    got = read(pipe, 4)
    for k in range(4):
        assert bytes(got[k][1]) == bytes([k]) * (5000 + 3000 * k) and got[k][2].tolist() == [k]
    assert [bytes(s[1]) for s in got[4:2004]] == [b"%d" % k for k in range(2000)]
    assert labels(got[4:2004]) == [100 + k for k in range(2000)]


@pytest.mark.parametrize("lib", LIBS)
def test_legacy_aliases(lib, eleven, eleven2, tmp_path):
    """DALI's test_caffe_reader_alias / test_caffe2_reader_alias: fn.caffe_reader,
    fn.caffe2_reader, ops.CaffeReader and ops.Caffe2Reader (deprecated) and ops.readers.Caffe /
    Caffe2 give what fn.readers.caffe / caffe2 give (caffe2: label_type 0 and 4)."""
    paths, _ = eleven
    paths2, _ = eleven2
    nolabel = write_db(tmp_path / "nolabel", [(b"k%d" % k, tensor_protos(encoded_image(jpeg(k)))) for k in range(5)])

    def run(make, **kw):
        @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None)
        def p():
            out = make(**kw)
            return tuple(out) if isinstance(out, (list, tuple)) else out

        pipe = p()
        pipe.build()
        return [tuple(bytes(a.tobytes()) for a in s[1:]) for s in read(pipe, 4)]

    for new, legacy, legacy_ops, ops_new, kw in [
        (lib.fn.readers.caffe, "caffe_reader", "CaffeReader", lib.ops.readers.Caffe, dict(path=paths)),
        (lib.fn.readers.caffe2, "caffe2_reader", "Caffe2Reader", lib.ops.readers.Caffe2, dict(path=paths2)),
        (lib.fn.readers.caffe2, "caffe2_reader", "Caffe2Reader", lib.ops.readers.Caffe2,
         dict(path=nolabel, label_type=4)),
    ]:
        ref = run(new, **kw)
        assert ref[0][0] == jpeg(0) and len(ref) == 16
        with pytest.warns(DeprecationWarning, match=legacy):
            assert run(getattr(lib.fn, legacy), **kw) == ref
        with pytest.warns(DeprecationWarning, match=legacy_ops):
            assert run(lambda **k: getattr(lib.ops, legacy_ops)(**k)(), **kw) == ref
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            assert run(lambda **k: ops_new(**k)(), **kw) == ref


# --------------------------------------------------------------------------- checkpointing
# DALI's test_caffe_reader and test_caffe2_reader: (num_epochs, batch_size, shard_id, num_shards,
# random_shuffle, stick_to_shard, pad_last_batch, iters_into_epoch), initial_fill 1024; DALI_extra's
# db/lmdb and db/c2lmdb are replaced by 45 records in 3 databases.
CHECKPOINT_CASES = {
    "caffe": [
        (1, 3, 0, 1, True, True, True, 1),
        (5, 5, 1, 3, True, True, False, 2),
        (6, 7, 2, 3, True, False, True, 3),
        (5, 3, 0, 1, True, False, False, 1),
        (7, 5, 2, 3, False, True, True, None),
        (4, 1, 1, 2, False, True, False, 2),
        (0, 3, 3, 4, False, False, True, None),
        (1, 4, 2, 3, False, False, False, 3),
    ],
    "caffe2": [
        (1, 2, 0, 2, True, True, True, 1),
        (4, 4, 1, 2, True, True, False, 2),
        (5, 6, 0, 2, True, False, True, None),
        (6, 2, 1, 3, True, False, False, 1),
        (3, 4, 3, 4, False, True, True, 2),
        (8, 1, 2, 3, False, True, False, None),
        (0, 2, 4, 5, False, False, True, None),
        (3, 3, 1, 3, False, False, False, 2),
    ],
}


@pytest.fixture(scope="module")
def forty_five(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    return {"caffe": numbered(d / "caffe", [15, 16, 14], caffe_value)[0],
            "caffe2": numbered(d / "caffe2", [14, 16, 15], caffe2_value)[0]}


@pytest.mark.parametrize("kind,case", [(k, c) for k in CHECKPOINT_CASES for c in CHECKPOINT_CASES[k]],
                         ids=[f"{k}-{i}" for k in CHECKPOINT_CASES for i in range(len(CHECKPOINT_CASES[k]))])
@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing(lib, forty_five, kind, case):
    """A pipeline restored from `checkpoint()` returns the batches the original returns next."""
    epochs, batch, shard_id, shards, shuffle, stick, pad, into = case
    read_fn = reader(lib, kind)

    @lib.pipeline_def(batch_size=batch, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return tuple(read_fn(name="Reader", path=forty_five[kind], pad_last_batch=pad, random_shuffle=shuffle,
                             shard_id=shard_id, num_shards=shards, stick_to_shard=stick, initial_fill=1024))

    p, restored, iterations = checkpoint_after(pipe, batch, shards, epochs, into)
    for k in range(iterations):
        xs, ys = p.run(), restored.run()
        for x, y in zip(xs, ys):
            assert len(x) == len(y) == batch
            for i in range(batch):
                np.testing.assert_array_equal(np.array(x.at(i)), np.array(y.at(i)), err_msg=f"iteration {k}")
                assert x[i].source_info() == y[i].source_info()


# --------------------------------------------------------------------------- path errors
def _not_lmdb(d):
    d.mkdir(parents=True, exist_ok=True)
    (d / "plain").mkdir()
    (d / "plain" / "notes.txt").write_text("not a database")
    (d / "emptydir").mkdir()
    (d / "afile").write_text("hello")
    (d / "garbage").mkdir()
    (d / "garbage" / "data.mdb").write_bytes(b"\0" * 10000)
    (d / "text").mkdir()
    (d / "text" / "data.mdb").write_bytes(b"not an lmdb file\n" * 1000)
    good = write_db(d / "good", [(b"a", datum(b"x", label=1))])
    return good


PATH_ERRORS = {
    "missing": (lambda d, good: str(d / "nope"), [r"nope", r"(?i:no such file)"]),
    "dir_without_data_mdb": (lambda d, good: str(d / "plain"), [r"plain", r"(?i:no such file|data\.mdb)"]),
    "empty_dir": (lambda d, good: str(d / "emptydir"), [r"emptydir", r"(?i:no such file|data\.mdb)"]),
    "a_file": (lambda d, good: str(d / "afile"), [r"afile", r"(?i:not a directory)"]),
    "the_data_mdb_file": (lambda d, good: good + "/data.mdb", [r"data\.mdb", r"(?i:not a directory)"]),
    "zeros_as_data_mdb": (lambda d, good: str(d / "garbage"), [r"garbage", r"(?i:invalid argument|not an lmdb)"]),
    "text_as_data_mdb": (lambda d, good: str(d / "text"), [r"text", r"(?i:invalid argument|not an lmdb)"]),
    "second_path_missing": (lambda d, good: [good, str(d / "nope2")], [r"nope2", r"(?i:no such file)"]),
}


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("case", list(PATH_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_path_errors(lib, tmp_path, case, kind):
    """A path that is not an LMDB environment (a directory holding data.mdb): an error naming
    the path and what is wrong, when the pipeline is built (lazy_init too, in DALI)."""
    good = _not_lmdb(tmp_path / "data")
    make, names = PATH_ERRORS[case]
    with raises_reader_error(kind, *names):
        reader_pipe(lib, kind, path=make(tmp_path / "data", good), pipe_kw=dict(prefetch_queue_depth=1))
    with raises_reader_error(kind, *names):
        p = reader_pipe(lib, kind, path=make(tmp_path / "data", good), lazy_init=True)
        p.run()


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_no_records(lib, tmp_path, kind):
    """Empty databases only (or an empty path list): an error when the pipeline is built (DALI:
    its failed assertion `index < offsets_.back()`)."""
    empty = write_db(tmp_path / "empty", [])
    for path in [empty, [empty, empty], []]:
        with raises_reader_error(kind, r"offsets_\.back\(\)|(?i:empty|no (records|entries|samples|data))"):
            reader_pipe(lib, kind, path=path)


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_path_is_required(lib, kind):
    with pytest.raises((TypeError, RuntimeError), match="path"):
        reader_pipe(lib, kind)


# --------------------------------------------------------------------------- record errors
NOT_A_DATUM = {
    "truncated_varint": _vfield(5, 1) + b"\x28\xff",
    "truncated_bytes": _vfield(5, 1) + _tag(4, 2) + _varint(10) + b"abc",
    "wire_type_7": _vfield(5, 1) + b"\x2f\x01",
    "wire_type_6": b"\x2e",
    "field_number_0": b"\x00\x01",
    "all_ff": b"\xff" * 10,
    "text": b"not a datum",
    "open_group": _tag(9, 3) + _vfield(1, 1),
    "stray_end_group": _tag(9, 4),
}


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("case", list(NOT_A_DATUM))
@pytest.mark.parametrize("lib", LIBS)
def test_value_is_not_a_protobuf(lib, tmp_path, case, kind):
    """A value that is not a valid protobuf: "Error while parsing Caffe file: <source_info> (raw
    data length: N bytes)." (Caffe2 file for caffe2), when run."""
    value = NOT_A_DATUM[case]
    if kind == "caffe2":
        value = _lfield(1, value) if case in ("truncated_bytes",) else value
    what = "Caffe2" if kind == "caffe2" else "Caffe"
    with raises_reader_error(kind, rf"(?i:error while parsing {what} file)", r"bad_\d+ at key k0",
                             rf"{len(value)} bytes"):
        run_one(lib, tmp_path, kind, value)


@pytest.mark.parametrize("lib", LIBS)
def test_caffe2_segment_missing_required_field(lib, tmp_path):
    """A TensorProto.Segment without its required `end` makes the record unparsable (proto2)."""
    value = tensor_protos(tensor(STRING, string_data=[b"i"], extra=_lfield(11, _vfield(1, 0))), int_label(1))
    with raises_reader_error("caffe2", r"(?i:error while parsing caffe2 file)", r"at key k0"):
        run_one(lib, tmp_path, "caffe2", value)


def _with_bad_record(tmp_path, kind):
    """Records k0..k2 good (label 0..2), k3 not a protobuf, k4 good (label 4)."""
    good = caffe_value if kind == "caffe" else caffe2_value
    items = [(b"k%d" % k, good(k)) for k in range(5)]
    items[3] = (b"k3", b"\xff" * 7)
    return write_db(tmp_path / "db", items)


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_good_records_before_the_bad_one(lib, tmp_path, kind):
    """The records before the damaged one are read as usual (batch of 1, no prefetching ahead)."""
    path = _with_bad_record(tmp_path, kind)
    p = reader_pipe(lib, kind, path=path, pipe_kw=dict(prefetch_queue_depth=1))
    assert labels(read(p, 3)) == [0, 1, 2]
    with raises_reader_error(kind, r"db at key k3", r"7 bytes"):
        p.run()


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
@pytest.mark.parametrize("lib", LIBS)
def test_sluice_goes_on_after_a_bad_record(lib, tmp_path, kind):
    """DALI's pipeline is unusable after the error; Sluice's goes on with the next batch."""
    path = _with_bad_record(tmp_path, kind)
    p = reader_pipe(lib, kind, path=path, pipe_kw=dict(prefetch_queue_depth=1))
    assert labels(read(p, 3)) == [0, 1, 2]
    with raises_reader_error(kind, r"db at key k3"):
        p.run()
    if is_sluice(lib):
        assert labels(read(p, 3)) == [4, 0, 1]
