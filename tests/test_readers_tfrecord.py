"""fn.readers.tfrecord (CPU backend): TFRecord files of tf.train.Example records and their index
files, written here by hand (no TensorFlow), read back by one test body run against Sluice and
NVIDIA DALI 2.4 (CPU-only), so the behaviour checked is DALI's.

Ported from DALI's tests (renamed imports, DALI_extra's data sets replaced by small files made
here): reader/test_index.py (test_tfrecord: an index naming every other record,
test_tfrecord_odirect, test_tfrecord_pad_last_batch, test_wrong_feature_shape,
test_tfrecord_reader_alias, test_tfrecord_reader_alias2: features missing from the records,
test_tfrecord_reader_scalars, test_conditionals on the CPU, test_wrong_feature_type),
test_dali_cpu_only.py (test_tfrecord_reader_cpu), test_coco_tfrecord.py (VarLenFeature with a
partial shape), checkpointing/test_dali_checkpointing.py (test_tfrecord_reader, all 8 cases),
operator_1/test_get_property.py (source_info, read here with `source_info()`).
Added here, from DALI 2.4's behaviour: every feature kind / dtype / shape, packed and unpacked
encodings, several files, shard / shuffle sequences, shuffle_after_epoch (whole files),
index-file parsing, the index tool (DALI's `tfrecord2idx` script, `python -m
sluice.tools.tfrecord2idx`), and errors (damaged, truncated or missing files and indexes).

DALI does not check the records' CRCs: those assertions are Sluice-only (Sluice checks them).
DALI's pipeline is unusable after an error; that Sluice goes on with the next batch is checked
for Sluice only.
"""

import importlib
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import library_params, SHARD_CASES, checkpoint_after, shard_reference, check_random_shuffle
from conftest import pb_varint as _varint, pb_tag as _tag, pb_len_field as _len_field

LIBS = library_params()


# --------------------------------------------------------------------------- helpers
def is_sluice(lib):
    return lib.__name__.startswith("sluice")


def tfrec(lib):
    """`nvidia.dali.tfrecord` / `sluice.tfrecord` (imported: DALI does not import it itself)."""
    return importlib.import_module(lib.__name__ + ".tfrecord")


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    """TFRecord's masked CRC-32C: rotated right by 15 bits, plus 0xa282ead8."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# tf.train.Example, encoded by hand:
#   Example  { Features features = 1; }
#   Features { map<string, Feature> feature = 1; }  (entries: key = 1, value = 2)
#   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
#   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
#   Int64List { repeated int64 value = 1 [packed]; }
def _feature(kind, values, packed):
    if kind == "bytes":
        return _len_field(1, b"".join(_len_field(1, v) for v in values))
    if kind == "float":
        if packed:
            inner = _len_field(1, b"".join(struct.pack("<f", v) for v in values)) if values else b""
        else:
            inner = b"".join(_tag(1, 5) + struct.pack("<f", v) for v in values)
        return _len_field(2, inner)
    if kind == "int64":
        if packed:
            inner = _len_field(1, b"".join(_varint(int(v)) for v in values)) if values else b""
        else:
            inner = b"".join(_tag(1, 0) + _varint(int(v)) for v in values)
        return _len_field(3, inner)
    raise ValueError(kind)


def example(features):
    """A serialized tf.train.Example; `features`: {name: (kind, values[, packed])} with kind
    "bytes" / "float" / "int64"."""
    entries = b""
    for name, spec in features.items():
        kind, values = spec[0], list(spec[1])
        packed = spec[2] if len(spec) > 2 else True
        entries += _len_field(1, _len_field(1, name.encode()) + _len_field(2, _feature(kind, values, packed)))
    return _len_field(1, entries)


def record(data):
    """u64 length, u32 masked CRC of the length, data, u32 masked CRC of the data."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


def write_index(path, entries):
    Path(path).write_text("".join(f"{off} {size}\n" for off, size in entries))


def write_tfrecord(path, examples, index=True):
    """Writes the records; with `index`, PATH.idx as DALI's tfrecord2idx writes it. Returns
    [(offset, size)] of the records."""
    entries, blob = [], b""
    for ex in examples:
        r = record(ex)
        entries.append((len(blob), len(r)))
        blob += r
    Path(path).write_bytes(blob)
    if index:
        write_index(str(path) + ".idx", entries)
    return entries


def numbered(root, sizes, prefix="f"):
    """Files ROOT/f0.tfrecord.. (and .idx) of `sizes` records; record k (counted over all files)
    holds "v": int64 [k] and "s": bytes b"rec-k". Returns (paths, index_paths, offsets)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    paths, idxs, offsets, k = [], [], [], 0
    for fi, n in enumerate(sizes):
        p = root / f"{prefix}{fi}.tfrecord"
        ents = write_tfrecord(p, [example({"v": ("int64", [k + j]), "s": ("bytes", [b"rec-%d" % (k + j)])})
                                  for j in range(n)])
        offsets += [(str(p), off) for off, _ in ents]
        paths.append(str(p))
        idxs.append(str(p) + ".idx")
        k += n
    return paths, idxs, offsets


def reader_pipe(lib, features, batch_size=1, num_threads=2, pipe_seed=1234, pipe_kw=None, **reader_kw):
    """A built pipeline whose outputs are fn.readers.tfrecord(name="R", ...)'s, in the order of
    `features` (a function of the tfrecord module, or a dict)."""
    fn = lib.fn
    t = tfrec(lib)
    feats = features(t) if callable(features) else features

    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=pipe_seed,
                      **(pipe_kw or {}))
    def p():
        out = fn.readers.tfrecord(name="R", features=feats, **reader_kw)
        assert isinstance(out, dict)
        return tuple(out[k] for k in feats)

    pipe = p()
    pipe.build()
    return pipe


def V_FEATURE(t):
    return {"v": t.FixedLenFeature([], t.int64, -1)}


def VS_FEATURES(t):
    return {"v": t.FixedLenFeature([], t.int64, -1), "s": t.FixedLenFeature([], t.string, "")}


def read(pipe, n_batches):
    """[[(source_info, array) per output] per sample] over n_batches runs."""
    out = []
    for _ in range(n_batches):
        outs = pipe.run()
        for i in range(len(outs[0])):
            out.append([(o[i].source_info(), np.array(o.at(i))) for o in outs])
    return out


def values(pipe, n_batches):
    """The first output's first element of every sample."""
    return [int(s[0][1].flat[0]) for s in read(pipe, n_batches)]


def o_direct_supported(path):
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


# --------------------------------------------------------------------------- features
def _kinds_examples():
    exs = []
    for i in range(5):
        exs.append(example({
            "str": ("bytes", [b"hello-%d" % i, b"second value"]),  # only the first value is read
            "str1": ("bytes", [b"x" * i]),
            "i0": ("int64", [i - 2]),
            "i3": ("int64", [i, -i, 1 << 40], i % 2 == 0),  # packed and unpacked encodings
            "i23": ("int64", [10 * i + k for k in range(6)]),
            "f0": ("float", [i + 0.5], i % 2 == 1),
            "f22": ("float", [i, 0.25, -1.5, 1e30], i % 2 == 0),
            "vi": ("int64", list(range(i)), i % 2 == 0),
            "vf": ("float", [0.5 * k for k in range(2 * i)]),
            "vf12": ("float", [1.0, 2.0, 3.0, 4.0][: 2 * (i % 3)]),
            "vi_flat": ("int64", [7] * i),
        }))
    return exs


KIND_FEATURES = {
    "str": lambda t: t.FixedLenFeature((), t.string, ""),
    "str1": lambda t: t.FixedLenFeature([1], t.string, ""),
    "i0": lambda t: t.FixedLenFeature([], t.int64, -1),
    "i3": lambda t: t.FixedLenFeature([3], t.int64, -1),
    "i23": lambda t: t.FixedLenFeature([2, 3], t.int64, -1),
    "f0": lambda t: t.FixedLenFeature((), t.float32, -1.0),
    "f22": lambda t: t.FixedLenFeature([2, 2], t.float32, 0.0),
    "vi": lambda t: t.VarLenFeature(t.int64, 0),
    "vf": lambda t: t.VarLenFeature([2], t.float32, 0.0),
    "vf12": lambda t: t.VarLenFeature([1, 2], t.float32, 0.0),
    "vi_flat": lambda t: t.VarLenFeature([], t.int64, 0),  # an empty partial shape: 1-D
}


def _kinds_expected(i):
    return {
        "str": np.frombuffer(b"hello-%d" % i, np.uint8),
        "str1": np.frombuffer(b"x" * i, np.uint8),
        "i0": np.array(i - 2, np.int64),
        "i3": np.array([i, -i, 1 << 40], np.int64),
        "i23": np.arange(10 * i, 10 * i + 6, dtype=np.int64).reshape(2, 3),
        "f0": np.array(i + 0.5, np.float32),
        "f22": np.array([i, 0.25, -1.5, 1e30], np.float32).reshape(2, 2),
        "vi": np.arange(i, dtype=np.int64),
        "vf": np.array([0.5 * k for k in range(2 * i)], np.float32).reshape(i, 2),
        "vf12": np.array([1.0, 2.0, 3.0, 4.0][: 2 * (i % 3)], np.float32).reshape(i % 3, 1, 2),
        "vi_flat": np.full(i, 7, np.int64),
    }


DALI_TYPE_OF = {np.uint8: "UINT8", np.int64: "INT64", np.float32: "FLOAT"}


@pytest.mark.parametrize("lib", LIBS)
def test_feature_kinds_dtypes_and_shapes(lib, tmp_path):
    """int64 -> INT64, float32 -> FLOAT, string -> UINT8 (the bytes of the list's first value);
    FixedLen shape [] is a scalar, [n] / [n, m] as given; VarLen is 1-D, or [count, *partial_shape]."""
    p = tmp_path / "kinds.tfrecord"
    write_tfrecord(p, _kinds_examples())
    feats = lambda t: {k: f(t) for k, f in KIND_FEATURES.items()}  # noqa: E731
    pipe = reader_pipe(lib, feats, batch_size=5, path=str(p), index_path=str(p) + ".idx")
    outs = pipe.run()
    for k, o in zip(KIND_FEATURES, outs):
        want0 = _kinds_expected(0)[k]
        assert o.dtype == getattr(lib.types, DALI_TYPE_OF[want0.dtype.type]), k
        for i in range(5):
            got, want = np.array(o.at(i)), _kinds_expected(i)[k]
            assert got.dtype == want.dtype and got.shape == want.shape, (k, i, got.shape, want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{k} sample {i}")


@pytest.mark.parametrize("lib", LIBS)
def test_scalars(lib, tmp_path):
    """DALI's test_tfrecord_reader_scalars: FixedLenFeature(()) of int64 gives 0-d int64 samples."""
    p = tmp_path / "h.tfrecord"
    write_tfrecord(p, [example({"image/height": ("int64", [100 + k])}) for k in range(4)])
    pipe = reader_pipe(lib, lambda t: {"image/height": t.FixedLenFeature((), t.int64, -1)}, batch_size=4,
                       path=str(p), index_path=str(p) + ".idx")
    (o,) = pipe.run()
    for i in range(4):
        a = np.array(o.at(i))
        assert a.dtype == np.int64 and a.shape == () and int(a) == 100 + i


@pytest.mark.parametrize("lib", LIBS)
def test_output_dict_follows_the_features_order(lib, tmp_path):
    """The reader returns a dict keyed by feature name, in the order of `features` (not sorted),
    each output its own feature whatever the order of the record's map entries."""
    p = tmp_path / "o.tfrecord"
    write_tfrecord(p, [example({"a": ("float", [0.5 + k]), "m": ("bytes", [b"m%d" % k]), "z": ("int64", [k])})
                       for k in range(3)])
    fn = lib.fn
    t = tfrec(lib)
    feats = {"z": t.FixedLenFeature([], t.int64, 0), "a": t.FixedLenFeature([], t.float32, 0.0),
             "m": t.FixedLenFeature([], t.string, "")}
    keys = []

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        out = fn.readers.tfrecord(path=str(p), index_path=str(p) + ".idx", features=feats)
        keys.extend(out)
        return tuple(out.values())

    pp = pipe()
    pp.build()
    z, a, m = pp.run()
    assert keys == ["z", "a", "m"]
    assert [int(np.array(z.at(i))) for i in range(3)] == [0, 1, 2]
    assert [float(np.array(a.at(i))) for i in range(3)] == [0.5, 1.5, 2.5]
    assert [bytes(np.array(m.at(i))) for i in range(3)] == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize("lib", LIBS)
def test_features_missing_from_the_record(lib, tmp_path):
    """DALI's test_tfrecord_reader_alias2: a feature the record does not hold is not an error and
    does not give its default value: the sample is an empty 0-d tensor of the feature's type,
    whatever its kind and shape (the value is unspecified). Present features are unaffected."""
    p = tmp_path / "m.tfrecord"
    write_tfrecord(p, [example({"image/encoded": ("bytes", [b"jpeg%d" % k]), "image/class/label": ("int64", [k])})
                       for k in range(3)])
    feats = lambda t: {  # noqa: E731
        "image/encoded": t.FixedLenFeature((), t.string, ""),
        "image/class/label": t.FixedLenFeature([1], t.int64, -1),
        "does/not/exists": t.VarLenFeature(t.int64, -1),
        "does/not/exists/as/well": t.FixedLenFeature([1], t.float32, 0.0),
        "missing/2d": t.FixedLenFeature([2, 3], t.int64, 5),
        "missing/partial": t.VarLenFeature([2], t.float32, 1.0),
        "missing/string": t.FixedLenFeature((), t.string, "default"),
    }
    pipe = reader_pipe(lib, feats, batch_size=3, path=str(p), index_path=str(p) + ".idx")
    enc, lab, vi, ff, f2d, vp, ms = pipe.run()
    for i in range(3):
        assert bytes(np.array(enc.at(i))) == b"jpeg%d" % i
        assert np.array(lab.at(i)).tolist() == [i]
        if is_sluice(lib):
            # Sluice gives what TensorFlow gives (DALI: uninitialised memory): a fixed-length
            # feature's default in its shape, a variable-length feature no values.
            expect = ((vi, np.int64, []), (ff, np.float32, [0.0]), (f2d, np.int64, [[5] * 3] * 2),
                      (vp, np.float32, np.zeros((0, 2)).tolist()), (ms, np.uint8, list(b"default")))
            for o, dt, want in expect:
                a = np.array(o.at(i))
                assert a.dtype == dt and a.tolist() == want
            continue
        for o, dt in ((vi, np.int64), (ff, np.float32), (f2d, np.int64), (vp, np.float32), (ms, np.uint8)):
            a = np.array(o.at(i))
            assert a.shape == () and a.dtype == dt


@pytest.mark.parametrize("lib", LIBS)
def test_missing_and_present_in_one_batch(lib, tmp_path):
    """The 0-d sample of a missing feature can't share a batch with 1-D samples of the same
    feature: the batch fails ("Samples must have the same dimensionality"). One at a time, they read."""
    p = tmp_path / "mix.tfrecord"
    write_tfrecord(p, [example({"a": ("int64", [1, 2])}), example({"b": ("int64", [3])})])
    feats = lambda t: {"a": t.VarLenFeature(t.int64, 0)}  # noqa: E731
    pipe = reader_pipe(lib, feats, batch_size=1, path=str(p), index_path=str(p) + ".idx")
    if is_sluice(lib):  # no values, in a batch with the others (DALI: a 0-d sample of garbage)
        assert [a.shape for ((_, a),) in read(pipe, 2)] == [(2,), (0,)]
        (a,) = reader_pipe(lib, feats, batch_size=2, path=str(p), index_path=str(p) + ".idx").run()
        assert [np.array(a.at(i)).tolist() for i in range(2)] == [[1, 2], []]
        return
    assert [a.shape for ((_, a),) in read(pipe, 2)] == [(2,), ()]
    with pytest.raises(RuntimeError, match=r"(?i)dimension"):
        reader_pipe(lib, feats, batch_size=2, path=str(p), index_path=str(p) + ".idx").run()


@pytest.mark.parametrize("lib", LIBS)
def test_fixed_len_with_fewer_values(lib, tmp_path):
    """A FixedLen feature holding fewer values than its shape keeps the shape: the values fill
    its beginning (the rest is unspecified: DALI does not use the default value)."""
    p = tmp_path / "few.tfrecord"
    write_tfrecord(p, [example({"a": ("int64", [1, 2]), "f": ("float", [])})])
    pipe = reader_pipe(lib, lambda t: {"a": t.FixedLenFeature([4], t.int64, 7),
                                       "f": t.FixedLenFeature([2], t.float32, 1.0)},
                       path=str(p), index_path=str(p) + ".idx")
    if is_sluice(lib):  # an error naming the feature, not a tail of uninitialised memory
        with pytest.raises(RuntimeError, match=r"feature 'a': 2 values for a fixed-length feature of shape \[4\]"):
            pipe.run()
        return
    a, f = pipe.run()
    a, f = np.array(a.at(0)), np.array(f.at(0))
    assert a.shape == (4,) and a.dtype == np.int64 and a[:2].tolist() == [1, 2]
    assert f.shape == (2,) and f.dtype == np.float32


@pytest.mark.parametrize("lib", LIBS)
def test_value_type_other_than_declared(lib, tmp_path):
    """The feature's list of the declared type is read; a record holding another list gives no
    values: an empty VarLen sample, a FixedLen sample of the declared shape."""
    p = tmp_path / "t.tfrecord"
    write_tfrecord(p, [example({"a": ("int64", [1, 2]), "s": ("bytes", [b"xy"])})])
    pipe = reader_pipe(lib, lambda t: {"a": t.VarLenFeature(t.float32, 0.0), "s": t.VarLenFeature(t.int64, 0)},
                       path=str(p), index_path=str(p) + ".idx")
    a, s = (np.array(o.at(0)) for o in pipe.run())
    assert a.shape == (0,) and a.dtype == np.float32
    assert s.shape == (0,) and s.dtype == np.int64
    pipe = reader_pipe(lib, lambda t: {"a": t.FixedLenFeature([2], t.float32, 0.0)}, path=str(p),
                       index_path=str(p) + ".idx")
    if is_sluice(lib):  # no float values for a fixed shape of 2: an error (DALI: uninitialised memory)
        with pytest.raises(RuntimeError, match=r"feature 'a': 0 values"):
            pipe.run()
        return
    (a,) = pipe.run()
    assert np.array(a.at(0)).shape == (2,) and np.array(a.at(0)).dtype == np.float32


# DALI's messages do not name the feature: either DALI's wording or the feature's name.
FEATURE_ERRORS = {
    # DALI's test_wrong_feature_shape: more values than the FixedLen shape holds
    "too_many_for_scalar": (lambda t: {"obj/bbox": t.FixedLenFeature([], t.int64, -1)}, r"(?i)too small|obj/bbox"),
    "too_many_for_shape": (lambda t: {"obj/bbox": t.FixedLenFeature([2], t.int64, -1)}, r"(?i)too small|obj/bbox"),
    "zero_shape": (lambda t: {"obj/bbox": t.FixedLenFeature([0], t.int64, -1)}, r"(?i)too small|obj/bbox"),
    "partial_shape": (lambda t: {"obj/bbox": t.VarLenFeature([2], t.int64, 0)}, r"(?i)partial shape|obj/bbox"),
    "var_len_string": (lambda t: {"obj/name": t.VarLenFeature(t.string, "")}, r"(?i)tensors of strings|obj/name"),
    "string_shape_2": (lambda t: {"obj/name": t.FixedLenFeature([2], t.string, "")},
                       r"(?i)tensors of strings|obj/name"),
}


@pytest.mark.parametrize("case", list(FEATURE_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_feature_errors(lib, tmp_path, case):
    """Records that do not fit the declared feature fail the run (DALI: when the batch is parsed)."""
    p = tmp_path / "e.tfrecord"
    write_tfrecord(p, [example({"obj/bbox": ("int64", [1, 2, 3]), "obj/name": ("bytes", [b"xy"])})])
    feats, match = FEATURE_ERRORS[case]
    with pytest.raises(RuntimeError, match=match):
        reader_pipe(lib, feats, path=str(p), index_path=str(p) + ".idx").run()


@pytest.mark.parametrize("lib", LIBS)
def test_feature_constructors(lib, tmp_path):
    """tfrecord.int64 / string / float32 are 0 / 1 / 2; FixedLenFeature(shape, dtype, default)
    and VarLenFeature([partial_shape,] dtype, default) take positional arguments, the default
    required and of the feature's type; `features` values must be Features (DALI's
    test_wrong_feature_type) and there must be at least one."""
    t = tfrec(lib)
    assert (t.int64, t.string, t.float32) == (0, 1, 2)
    for f in (t.FixedLenFeature([], t.int64, 0), t.FixedLenFeature((2, 3), t.float32, 0.0),
              t.FixedLenFeature([], t.string, "x"), t.VarLenFeature(t.int64, 0), t.VarLenFeature([4], t.float32, 0.0)):
        assert isinstance(f, t.Feature)
    with pytest.raises(TypeError):
        t.FixedLenFeature([], t.int64)
    with pytest.raises(TypeError):
        t.VarLenFeature(t.int64)
    for args in (([], t.int64, 1.0), ([], t.float32, 1), ([], t.string, b"x")):
        with pytest.raises(RuntimeError, match=r"(?i)invalid type for default value"):
            t.FixedLenFeature(*args)
    with pytest.raises(RuntimeError, match=r"(?i)invalid type for default value"):
        t.VarLenFeature(t.int64, "0")

    p = tmp_path / "w.tfrecord"
    write_tfrecord(p, [example({"a": ("int64", [1])})])
    with pytest.raises(TypeError, match=r'Expected `[a-z.]+\.tfrecord\.Feature` for the "image/encoded", but got '
                                        r"<class 'int'>"):
        reader_pipe(lib, {"image/encoded": 10}, path=str(p), index_path=str(p) + ".idx").run()
    with pytest.raises(RuntimeError):
        reader_pipe(lib, {}, path=str(p), index_path=str(p) + ".idx").run()


# --------------------------------------------------------------------------- files, indexes, order
@pytest.fixture(scope="module")
def eleven(tmp_path_factory):
    """11 records in 3 files (3, 5, 3), record k holding v = k."""
    return numbered(tmp_path_factory.mktemp("eleven"), [3, 5, 3])


@pytest.mark.parametrize("lib", LIBS)
def test_several_files_order_and_source_info(lib, eleven):
    """Without shuffling: the files in the given order, each file's records in index order,
    wrapping around after the last; source_info is "<path as given> at index <offset>"."""
    paths, idxs, offsets = eleven
    pipe = reader_pipe(lib, VS_FEATURES, batch_size=4, path=paths, index_path=idxs)
    got = read(pipe, 6)  # 24 samples: 2 epochs and a bit
    for k, ((src_v, v), (src_s, s)) in enumerate(got):
        path, off = offsets[k % 11]
        assert int(v) == k % 11 and bytes(s) == b"rec-%d" % (k % 11)
        assert src_v == src_s == f"{path} at index {off}"
    assert pipe.epoch_size("R") == 11


@pytest.mark.parametrize("lib", LIBS)
def test_relative_path_in_source_info(lib, eleven, monkeypatch):
    """A single path (a str, not a list) and relative paths: source_info keeps the path as given."""
    paths, _, offsets = eleven
    monkeypatch.chdir(Path(paths[1]).parent)
    pipe = reader_pipe(lib, V_FEATURE, batch_size=5, path="f1.tfrecord", index_path="f1.tfrecord.idx")
    got = read(pipe, 1)
    assert [int(s[0][1]) for s in got] == [3, 4, 5, 6, 7]
    assert [s[0][0] for s in got] == [f"f1.tfrecord at index {off}" for _, off in offsets[3:8]]


@pytest.mark.parametrize("lib", LIBS)
def test_index_selects_the_records(lib, tmp_path):
    """DALI's test_tfrecord: the index, not the file, lists the samples: an index naming every
    other record reads those alone (epoch_size counts them); in its order, repeats included.
    Offsets and sizes are whitespace-separated numbers (tabs and several pairs a line too)."""
    paths, _, _ = numbered(tmp_path, [6])
    ents = [tuple(map(int, line.split())) for line in Path(paths[0] + ".idx").read_text().splitlines()]
    write_index(tmp_path / "half.idx", ents[::2])
    pipe = reader_pipe(lib, V_FEATURE, batch_size=2, path=paths, index_path=str(tmp_path / "half.idx"))
    assert pipe.epoch_size("R") == 3
    assert values(pipe, 3) == [0, 2, 4, 0, 2, 4]

    write_index(tmp_path / "perm.idx", [ents[3], ents[1], ents[3], ents[0]])
    pipe = reader_pipe(lib, V_FEATURE, batch_size=4, path=paths, index_path=str(tmp_path / "perm.idx"))
    assert pipe.epoch_size("R") == 4 and values(pipe, 1) == [3, 1, 3, 0]

    (tmp_path / "ws.idx").write_text("  ".join(f"{o}\t{s}" for o, s in ents) + "\n\n")
    pipe = reader_pipe(lib, V_FEATURE, batch_size=6, path=paths, index_path=str(tmp_path / "ws.idx"))
    assert values(pipe, 1) == list(range(6))


@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
@pytest.mark.parametrize("lib", LIBS)
def test_shard_sequence(lib, eleven, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    paths, idxs, offsets = eleven
    pipe = reader_pipe(lib, V_FEATURE, batch_size=batch_size, path=paths, index_path=idxs, num_shards=num_shards,
                       shard_id=shard_id, stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
    n_batches = 9
    got = read(pipe, n_batches)
    want = shard_reference(11, num_shards, shard_id, batch_size, n_batches * batch_size, pad_last_batch,
                           stick_to_shard)
    assert [int(s[0][1]) for s in got] == want
    assert [s[0][0] for s in got] == ["%s at index %d" % offsets[k] for k in want]


@pytest.mark.parametrize("lib", LIBS)
def test_epoch_size_and_reader_meta(lib, eleven):
    paths, idxs, _ = eleven
    pipe = reader_pipe(lib, V_FEATURE, batch_size=2, path=paths, index_path=idxs, num_shards=3, shard_id=1,
                       pad_last_batch=True)
    assert pipe.epoch_size("R") == 12 and pipe.epoch_size() == {"R": 12}
    meta = pipe.reader_meta("R")
    assert meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 12
    assert meta["number_of_shards"] == 3 and meta["shard_id"] == 1
    assert bool(meta["pad_last_batch"]) and not bool(meta["stick_to_shard"])
    pipe = reader_pipe(lib, V_FEATURE, batch_size=2, path=paths, index_path=idxs, num_shards=3, shard_id=2,
                       stick_to_shard=True)
    meta = pipe.reader_meta()["R"]
    assert pipe.epoch_size("R") == 11 and meta["epoch_size_padded"] == 11
    assert not bool(meta["pad_last_batch"]) and bool(meta["stick_to_shard"])


@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle(lib, eleven):
    """random_shuffle: each epoch is a permutation of all records; the order follows the seed."""
    paths, idxs, _ = eleven

    def order(pipe_seed, **kw):
        pipe = reader_pipe(lib, V_FEATURE, batch_size=3, pipe_seed=pipe_seed, path=paths, index_path=idxs,
                           random_shuffle=True, **kw)
        return values(pipe, 15)  # 45 samples: 4 epochs and a bit

    check_random_shuffle(order, list(range(11)))


@pytest.mark.parametrize("lib", LIBS)
def test_shuffle_after_epoch_shuffles_whole_files(lib, tmp_path):
    """shuffle_after_epoch (DALI 2.4): every epoch, the first included, visits the files in a new
    order, each file's records in their order; the order depends on shuffle_after_epoch_seed
    (a fixed default), not on the seeds; shards split each epoch's sequence as they split the
    unshuffled one. Not with stick_to_shard."""
    sizes = [2, 3, 1, 4, 2, 3]
    paths, idxs, _ = numbered(tmp_path, sizes)
    starts = [sum(sizes[:f]) for f in range(len(sizes))]
    runs = {tuple(range(s, s + n)) for s, n in zip(starts, sizes)}
    n = sum(sizes)

    def order(batches=10, bs=3, **kw):
        return values(reader_pipe(lib, V_FEATURE, batch_size=bs, path=paths, index_path=idxs, shuffle_after_epoch=True,
                                  **kw), batches)

    a = order()
    epochs = [a[n * e: n * (e + 1)] for e in range(2)]
    for ep in epochs:
        assert sorted(ep) == list(range(n))
        k, found = 0, set()
        while k < n:  # the epoch is a concatenation of whole files
            run = next(r for r in runs if r[0] == ep[k])
            assert tuple(ep[k: k + len(run)]) == run
            found.add(run)
            k += len(run)
        assert found == runs
    assert epochs[0] != list(range(n)) or epochs[1] != list(range(n))
    assert epochs[0] != epochs[1]
    assert a == order(pipe_seed=99) == order(seed=5)
    b = order(shuffle_after_epoch_seed=1)
    assert b == order(shuffle_after_epoch_seed=1) and b != a

    bounds = [n * s // 3 for s in range(4)]
    for s in range(3):
        got = order(batches=5, bs=2, num_shards=3, shard_id=s)  # 2 epochs of 5 samples
        assert got == epochs[0][bounds[s]:bounds[s + 1]] + epochs[1][bounds[s]:bounds[s + 1]]
    with pytest.raises(RuntimeError, match="shuffle_after_epoch"):
        order(stick_to_shard=True, num_shards=2)


@pytest.mark.parametrize("description", [(1, 2, 1), (3, 1, 2)], ids=["1rec-bs2-1shard", "3rec-bs1-2shards"])
@pytest.mark.parametrize("dont_use_mmap,use_o_direct", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("lib", LIBS)
def test_pad_last_batch(lib, tmp_path, description, dont_use_mmap, use_o_direct):
    """DALI's test_tfrecord_pad_last_batch: an index of the first N records, read with each
    mmap / O_DIRECT setting, gives what the default settings give; a short batch is padded with
    the shard's last sample."""
    num_samples, batch_size, num_shards = description
    paths, idxs, _ = numbered(tmp_path, [3, 2])
    if use_o_direct and not o_direct_supported(paths[0]):
        pytest.skip("O_DIRECT not supported on this file system")
    lines = Path(idxs[0]).read_text().splitlines(keepends=True)
    (tmp_path / "n.idx").write_text("".join(lines[:num_samples]))
    feats = lambda t: {"v": t.FixedLenFeature([1], t.int64, -1)}  # noqa: E731

    def pipe(**kw):
        return reader_pipe(lib, feats, batch_size=batch_size, num_threads=4, path=paths[0],
                           index_path=str(tmp_path / "n.idx"), num_shards=num_shards, **kw)

    p = pipe(dont_use_mmap=dont_use_mmap, use_o_direct=use_o_direct, pad_last_batch=True)
    ref = pipe(pad_last_batch=True)
    iters = (p.epoch_size("R") + batch_size) // batch_size
    shard_len = -(-num_samples // num_shards)
    for _ in range(iters):
        got, want = read(p, 1), read(ref, 1)
        assert [(s, a.tolist()) for (s, a), in got] == [(s, a.tolist()) for (s, a), in want]
    p = pipe(dont_use_mmap=dont_use_mmap, use_o_direct=use_o_direct, pad_last_batch=True)
    first_shard = list(range(shard_len))
    want = (first_shard + [first_shard[-1]] * batch_size)[:batch_size]
    assert values(p, 1) == want


READ_OPTIONS = [
    dict(dont_use_mmap=True),
    dict(dont_use_mmap=True, use_o_direct=True),
    dict(read_ahead=True),
    dict(lazy_init=True),
    dict(prefetch_queue_depth=3),
    dict(initial_fill=4),
    dict(tensor_init_bytes=16, bytes_per_sample_hint=[64]),
]


@pytest.mark.parametrize("options", READ_OPTIONS, ids=[",".join(o) for o in READ_OPTIONS])
@pytest.mark.parametrize("lib", LIBS)
def test_read_options_give_the_same_data(lib, eleven, options):
    """DALI's test_tfrecord_odirect (and test_tfrecord_reader_cpu): options that change how, not
    what, is read."""
    paths, idxs, offsets = eleven
    if options.get("use_o_direct") and not o_direct_supported(paths[0]):
        pytest.skip("O_DIRECT not supported on this file system")
    feats = lambda t: {"s": t.FixedLenFeature((), t.string, ""), "v": t.FixedLenFeature([1], t.int64, -1)}  # noqa: E731
    pipe = reader_pipe(lib, feats, batch_size=4, num_threads=3, path=paths, index_path=idxs, shard_id=0,
                       num_shards=1, **options)
    got = read(pipe, 7)  # 28 samples: 2 epochs and a bit
    for k, ((src, s), (_, v)) in enumerate(got):
        assert bytes(s) == b"rec-%d" % (k % 11) and v.tolist() == [k % 11]
        assert src == "%s at index %d" % offsets[k % 11]


@pytest.mark.parametrize("lib", LIBS)
def test_legacy_aliases(lib, eleven):
    """DALI's test_tfrecord_reader_alias: fn.tfrecord_reader, ops.TFRecordReader and
    ops.readers.TFRecord give what fn.readers.tfrecord gives, as a dict keyed by feature name."""
    paths, idxs, _ = eleven
    t = tfrec(lib)
    feats = {"s": t.FixedLenFeature((), t.string, ""), "v": t.FixedLenFeature([1], t.int64, -1)}

    def run(make):
        @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None)
        def p():
            out = make(path=paths, index_path=idxs, features=feats)
            assert list(out) == ["s", "v"]
            return out["s"], out["v"]

        pipe = p()
        pipe.build()
        res = []
        for _ in range(4):
            e, v = pipe.run()
            res += [(np.array(e.at(i)).tolist(), np.array(v.at(i)).tolist()) for i in range(4)]
        return res

    ref = run(lib.fn.readers.tfrecord)
    assert ref[0] == (list(b"rec-0"), [0]) and ref[12] == (list(b"rec-1"), [1])
    with pytest.warns(DeprecationWarning, match="tfrecord_reader"):
        assert run(lib.fn.tfrecord_reader) == ref
    with pytest.warns(DeprecationWarning, match="TFRecordReader"):
        assert run(lambda **kw: lib.ops.TFRecordReader(**kw)()) == ref
    assert run(lambda **kw: lib.ops.readers.TFRecord(**kw)()) == ref


@pytest.mark.parametrize("lib", LIBS)
def test_conditionals(lib, eleven):
    """DALI's test_conditionals on the CPU: the reader's outputs are the same in a pipeline with
    conditionals enabled."""
    paths, idxs, _ = eleven

    def outputs(**kw):
        fn = lib.fn
        t = tfrec(lib)

        @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None, **kw)
        def p():
            inputs = fn.readers.tfrecord(path=paths, index_path=idxs, random_shuffle=True, shard_id=0, num_shards=1,
                                         initial_fill=100, seed=42,
                                         features={"s": t.FixedLenFeature((), t.string, ""),
                                                   "v": t.FixedLenFeature([1], t.int64, -1),
                                                   "none": t.VarLenFeature(t.float32, 0.0)})
            return inputs["s"], inputs["v"] - 1

        pipe = p()
        pipe.build()
        return [[np.array(o.at(i)).tolist() for o in pipe.run() for i in range(4)] for _ in range(5)]

    assert outputs() == outputs(enable_conditionals=True)


# --------------------------------------------------------------------------- checkpointing
# DALI's test_tfrecord_reader: (num_epochs, batch_size, shard_id, num_shards, random_shuffle,
# stick_to_shard, pad_last_batch, iters_into_epoch); DALI_extra's db/tfrecord/train is replaced
# by 45 small records in 3 files.
CHECKPOINT_CASES = [
    (0, 1, 0, 1, True, True, True, None),
    (0, 2, 0, 2, True, True, False, 1),
    (6, 3, 1, 3, True, False, True, 2),
    (3, 4, 2, 4, True, False, False, None),
    (10, 5, 2, 10, False, True, True, 1),
    (4, 6, 1, 6, False, True, False, 2),
    (10, 7, 2, 3, False, False, True, None),
    (2, 8, 4, 5, False, False, False, 1),
]


@pytest.fixture(scope="module")
def forty_five(tmp_path_factory):
    return numbered(tmp_path_factory.mktemp("ckpt"), [15, 16, 14])


@pytest.mark.parametrize("case", CHECKPOINT_CASES, ids=[str(i) for i in range(len(CHECKPOINT_CASES))])
@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing(lib, forty_five, case):
    """A pipeline restored from `checkpoint()` returns the batches the original returns next."""
    epochs, batch, shard_id, shards, shuffle, stick, pad, into = case
    paths, idxs, _ = forty_five
    fn = lib.fn
    t = tfrec(lib)

    @lib.pipeline_def(batch_size=batch, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return fn.readers.tfrecord(name="Reader", path=paths, index_path=idxs,
                                   features={"s": t.FixedLenFeature((), t.string, ""),
                                             "v": t.FixedLenFeature([1], t.int64, -1)},
                                   pad_last_batch=pad, random_shuffle=shuffle, shard_id=shard_id, num_shards=shards,
                                   stick_to_shard=stick)["s"]

    p, restored, iterations = checkpoint_after(pipe, batch, shards, epochs, into)
    for k in range(iterations):
        (x,), (y,) = p.run(), restored.run()
        assert len(x) == len(y) == batch
        for i in range(batch):
            np.testing.assert_array_equal(np.array(x.at(i)), np.array(y.at(i)), err_msg=f"iteration {k}")


# --------------------------------------------------------------------------- the index tool
@pytest.mark.parametrize("lib", LIBS)
def test_index_tool(lib, tmp_path):
    """The index tool (`tfrecord2idx FILE INDEX`, DALI's script in the environment's bin/;
    `python -m sluice.tools.tfrecord2idx FILE INDEX` for Sluice) writes "offset size" lines, one
    per record, and the reader reads the file through that index."""
    exs = [example({"v": ("int64", [k]), "s": ("bytes", [b"y" * (k * 40)])}) for k in range(7)]
    ents = write_tfrecord(tmp_path / "t.tfrecord", exs, index=False)
    out = tmp_path / "t.idx"
    if is_sluice(lib):
        cmd = [sys.executable, "-m", "sluice.tools.tfrecord2idx", str(tmp_path / "t.tfrecord"), str(out)]
    else:
        script = Path(sys.executable).parent / "tfrecord2idx"
        if not script.exists():
            pytest.skip("DALI's tfrecord2idx script is not installed next to this Python")
        cmd = [sys.executable, str(script), str(tmp_path / "t.tfrecord"), str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    assert out.read_text() == "".join(f"{o} {s}\n" for o, s in ents)
    pipe = reader_pipe(lib, VS_FEATURES, batch_size=7, path=str(tmp_path / "t.tfrecord"), index_path=str(out))
    got = read(pipe, 1)
    assert [int(v) for (_, v), _ in got] == list(range(7))
    assert [len(s) for _, (_, s) in got] == [40 * k for k in range(7)]


# --------------------------------------------------------------------------- errors
def _damaged(tmp_path, how):
    """3 records in d.tfrecord (+ d.tfrecord.idx), damaged `how`; returns (path, index)."""
    path = tmp_path / "d.tfrecord"
    exs = [example({"v": ("int64", [k])}) for k in range(3)]
    ents = write_tfrecord(path, exs)
    data = path.read_bytes()
    idx = str(path) + ".idx"
    if how == "truncated":  # the last record cut short; the index gives its whole size
        path.write_bytes(data[:-5])
    elif how == "truncated_tool_index":  # the index a tool reading the cut file writes
        path.write_bytes(data[:-5])
        write_index(idx, ents[:-1] + [(ents[-1][0], ents[-1][1] - 5)])
    elif how == "size_past_end":
        write_index(idx, ents + [(ents[-1][0], 200)])
    elif how == "offset_past_end":
        write_index(idx, ents + [(len(data) + 100, 20)])
    elif how == "garbage":  # framing right, the data not a tf.train.Example
        bad = record(b"\xff\xff\xff\xff")
        path.write_bytes(data + bad)
        write_index(idx, ents + [(len(data), len(bad))])
    elif how == "short_index_size":
        write_index(idx, [(o, 12) for o, _ in ents])
    elif how == "wrong_offset":
        write_index(idx, [(ents[1][0] + 3, ents[1][1])])
    return str(path), idx


DATA_ERRORS = {
    "truncated": r"d\.tfrecord",
    "truncated_tool_index": r"d\.tfrecord",
    "size_past_end": r"d\.tfrecord",
    "offset_past_end": r"d\.tfrecord|(?i:seek)",  # DALI: "Invalid seek", without the file
    "garbage": r"d\.tfrecord",
    "short_index_size": r"d\.tfrecord",
    "wrong_offset": r"d\.tfrecord",
}


@pytest.mark.parametrize("dont_use_mmap", [False, True])
@pytest.mark.parametrize("how", list(DATA_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_damaged_file_or_index(lib, tmp_path, how, dont_use_mmap):
    """A record that can't be read or parsed fails the pipeline (when built or run), naming the
    file. DALI reads ahead, so the error may come a batch early."""
    path, idx = _damaged(tmp_path, how)
    with pytest.raises(RuntimeError, match=DATA_ERRORS[how]):
        p = reader_pipe(lib, V_FEATURE, batch_size=1, path=path, index_path=idx, dont_use_mmap=dont_use_mmap,
                        pipe_kw=dict(prefetch_queue_depth=1))
        for _ in range(5):
            p.run()


@pytest.mark.parametrize("where", ["length", "data"])
@pytest.mark.parametrize("lib", LIBS)
def test_bad_crc(lib, tmp_path, where):
    """DALI does not check the records' CRCs: a record whose length or data CRC is wrong reads as
    usual. Sluice checks them and fails naming the file."""
    path = tmp_path / "c.tfrecord"
    ents = write_tfrecord(path, [example({"v": ("int64", [k])}) for k in range(3)])
    b = bytearray(path.read_bytes())
    off, size = ents[1]
    b[off + 9 if where == "length" else off + size - 1] ^= 0xFF
    path.write_bytes(bytes(b))

    def pipe():
        return reader_pipe(lib, V_FEATURE, batch_size=1, path=str(path), index_path=str(path) + ".idx",
                           pipe_kw=dict(prefetch_queue_depth=1))

    if is_sluice(lib):
        with pytest.raises(RuntimeError, match=r"c\.tfrecord"):
            values(pipe(), 3)
        p = pipe()
        assert values(p, 1) == [0]
        with pytest.raises(RuntimeError, match=r"(?s)c\.tfrecord.*(?i:crc)|(?i:crc).*c\.tfrecord"):
            p.run()
        assert values(p, 2) == [2, 0]  # the pipeline goes on
    else:
        assert values(pipe(), 4) == [0, 1, 2, 0]


@pytest.mark.parametrize("lib", LIBS)
def test_sluice_goes_on_after_a_bad_record(lib, tmp_path):
    """A record that can't be parsed fails the run that holds it (naming the file). DALI's
    pipeline is unusable afterwards; Sluice's goes on with the next batch."""
    path, idx = _damaged(tmp_path, "garbage")

    def pipe():
        return reader_pipe(lib, V_FEATURE, batch_size=1, path=path, index_path=idx,
                           pipe_kw=dict(prefetch_queue_depth=1))

    p = pipe()
    with pytest.raises(RuntimeError, match=r"d\.tfrecord"):
        for _ in range(5):
            p.run()
    if is_sluice(lib):
        p = pipe()
        assert values(p, 3) == [0, 1, 2]
        with pytest.raises(RuntimeError, match=r"d\.tfrecord"):
            p.run()
        assert values(p, 2) == [0, 1]  # the next epoch


FILE_ERRORS = {
    "missing_file": (lambda d, e: dict(path=str(d / "nope.tfrecord"), index_path=e[1][0]), r"nope\.tfrecord"),
    "missing_second_file": (lambda d, e: dict(path=[e[0][0], str(d / "nope2.tfrecord")], index_path=e[1][:2]),
                            r"nope2\.tfrecord"),
    "missing_index": (lambda d, e: dict(path=e[0][0], index_path=str(d / "nope.idx")), r"nope\.idx"),
    "empty_index": (lambda d, e: dict(path=e[0][0], index_path=str(d / "empty.idx")), r"(?i)empty|no records"),
    "index_count": (lambda d, e: dict(path=e[0], index_path=e[1][:2]), r"(?i)index files"),
    "o_direct_with_mmap": (lambda d, e: dict(path=e[0], index_path=e[1], use_o_direct=True), "use_o_direct"),
    "skip_cached_images": (lambda d, e: dict(path=e[0], index_path=e[1], skip_cached_images=True),
                           "skip_cached_images"),
}


@pytest.mark.parametrize("case", list(FILE_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_file_and_argument_errors(lib, tmp_path, case):
    """Missing files and indexes, and refused arguments: an error (when the pipeline is defined,
    built or run) naming the file or argument."""
    ents = numbered(tmp_path / "data", [2, 2, 2])
    (tmp_path / "empty.idx").write_text("")
    make, match = FILE_ERRORS[case]
    with pytest.raises(RuntimeError, match=match):
        p = reader_pipe(lib, V_FEATURE, batch_size=2, **make(tmp_path, ents), pipe_kw=dict(prefetch_queue_depth=1))
        for _ in range(4):
            p.run()


@pytest.mark.parametrize("lib", LIBS)
def test_path_and_index_path_are_required(lib, tmp_path):
    """DALI: a TypeError of the Python wrapper ("missing 1 required positional argument")."""
    ents = numbered(tmp_path, [2])
    with pytest.raises((TypeError, RuntimeError), match="index_path"):
        reader_pipe(lib, V_FEATURE, path=ents[0])
    with pytest.raises((TypeError, RuntimeError), match="path"):
        reader_pipe(lib, V_FEATURE, index_path=ents[1])
