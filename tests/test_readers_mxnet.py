"""fn.readers.mxnet (CPU backend): MXNet RecordIO files (.rec) and their index (.idx), written
here by hand (no MXNet), read back by one test body run against Sluice and NVIDIA DALI 2.4
(CPU-only), so the behaviour checked is DALI's.

Ported from DALI's tests (DALI_extra's db/recordio replaced by small files made here):
reader/test_index.py (test_recordio: an index naming every other record; test_mxnet_reader_alias),
test_dali_cpu_only.py (test_mxnet_reader_cpu), checkpointing/test_dali_checkpointing.py
(test_mxnet_reader, all 8 cases). Added here, from DALI 2.4's behaviour: scalar / vector labels,
multi-part records, several .rec files under one index of global offsets, index parsing (sorted
by offset, keys ignored, duplicates dropped), shard / shuffle sequences, reader_meta, and errors
(damaged records, files and indexes).

DALI's pipeline is unusable after an error; that Sluice goes on with the next batch is checked
for Sluice only. Not ported: shuffle_after_epoch (DALI 2.4 returns wrong records with it:
repeated samples within an epoch) and an index naming offsets past the last of several files
(DALI 2.4 segfaults).
"""

import struct

import numpy as np
import pytest

from conftest import library_params, SHARD_CASES, checkpoint_after, shard_reference, check_random_shuffle

LIBS = library_params()

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)


# --------------------------------------------------------------------------- RecordIO writer
def is_sluice(lib):
    return lib.__name__.startswith("sluice")


def ir_header(label, id_=0, id2=0):
    """MXNet's IRHeader {u32 flag, f32 label, u64 id, u64 id2}; a list label: flag = its length
    and the floats follow the header."""
    if isinstance(label, (list, tuple)):
        return struct.pack("<IfQQ", len(label), 0.0, id_, id2) + struct.pack("<%df" % len(label), *label)
    return struct.pack("<IfQQ", 0, float(label), id_, id2)


def frame(payload):
    """One logical record as MXNet's RecordIOWriter writes it: split where the magic number occurs
    at a 4-byte aligned position (the magic dropped), each part `magic, lrecord = cflag << 29 |
    length, bytes, zero padding to 4`; cflag 0 whole, 1 first, 2 middle, 3 last."""
    parts, start = [], 0
    for i in range(0, len(payload) >> 2 << 2, 4):
        if payload[i:i + 4] == MAGIC_BYTES:
            parts.append(payload[start:i])
            start = i + 4
    parts.append(payload[start:])
    out = b""
    for k, part in enumerate(parts):
        cflag = 0 if len(parts) == 1 else 1 if k == 0 else 3 if k == len(parts) - 1 else 2
        out += struct.pack("<II", MAGIC, cflag << 29 | len(part)) + part + b"\0" * (-len(part) % 4)
    return out


def write_rec(path, records, start=0):
    """records: [(label, data)]; returns (global offsets, global end) with the file starting at
    global offset `start` (several .rec files share one index of offsets into their
    concatenation)."""
    offs, buf = [], b""
    for label, data in records:
        offs.append(start + len(buf))
        buf += frame(ir_header(label) + data)
    with open(path, "wb") as f:
        f.write(buf)
    return offs, start + len(buf)


def write_idx(path, offsets, keys=None):
    keys = range(len(offsets)) if keys is None else keys
    with open(path, "w") as f:
        f.write("".join(f"{k}\t{o}\n" for k, o in zip(keys, offsets)))


def sample_data(k):
    return b"\xff\xd8\xff\xe0rec-%d" % k + b"." * (k % 4)


def sample_label(k):
    return [float(k), k + 0.5] if k % 3 == 0 else float(k)


def numbered(d, counts):
    """Records 0..N-1 over len(counts) files; record k: label k (a vector [k, k+0.5] for k % 3 ==
    0), data sample_data(k). Returns (paths, index, [(path, local offset)] per record)."""
    d.mkdir(parents=True, exist_ok=True)
    paths, offsets, where, k, start = [], [], [], 0, 0
    for f, n in enumerate(counts):
        path = str(d / f"f{f}.rec")
        offs, end = write_rec(path, [(sample_label(j), sample_data(j)) for j in range(k, k + n)], start)
        paths.append(path)
        offsets += offs
        where += [(path, o - start) for o in offs]
        k, start = k + n, end
    idx = str(d / "all.idx")
    write_idx(idx, offsets)
    return paths, idx, where


def reader_pipe(lib, batch_size=1, num_threads=2, pipe_seed=1234, pipe_kw=None, **reader_kw):
    """A built pipeline returning fn.readers.mxnet(name="R", ...)'s (data, label)."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=pipe_seed,
                      **(pipe_kw or {}))
    def p():
        data, label = fn.readers.mxnet(name="R", **reader_kw)
        return data, label

    pipe = p()
    pipe.build()
    return pipe


def read(pipe, n_batches):
    """[(source_info, data bytes, label list) per sample] over n_batches runs."""
    out = []
    for _ in range(n_batches):
        data, label = pipe.run()
        for i in range(len(data)):
            out.append((data[i].source_info(), bytes(np.array(data.at(i))), np.array(label.at(i)).tolist()))
    return out


def values(pipe, n_batches):
    return [int(s[2][0]) for s in read(pipe, n_batches)]


# --------------------------------------------------------------------------- data and labels
@pytest.mark.parametrize("dont_use_mmap", [False, True])
@pytest.mark.parametrize("lib", LIBS)
def test_data_labels_and_multipart_records(lib, tmp_path, dont_use_mmap):
    """data: UINT8 1-D, the payload after the header and the labels, padding excluded; label:
    FLOAT (1,) from the header (flag 0) or (flag,) from the floats after it. A record whose
    payload holds the magic number at 4-aligned positions (written in parts, cflag 1/2/3) reads
    back whole, the magic numbers restored. source_info: "<path> at index <offset>" on the data,
    "" on the label."""
    records = [
        (1.5, b"\xff\xd8abc"),
        ([1.0, 2.0, 3.0], b"\xff\xd8abcd"),
        (7.0, b"x" * 8 + MAGIC_BYTES + b"yyy"),  # two parts
        ([4.0], MAGIC_BYTES + b"zz\0\0" + MAGIC_BYTES + b"q" * 5),  # three parts
        (-2.25, b""),
        ([], b"\x00\x01"),  # flag 0 is a scalar label: [] writes flag 0, label 0.0
        ([0.5, -1.0], bytes(range(256)) * 3),
    ]
    path = tmp_path / "a.rec"
    offs, _ = write_rec(path, records)
    data = path.read_bytes()
    assert data.count(MAGIC_BYTES) == len(records) + 3  # the parts are there
    write_idx(tmp_path / "a.idx", offs)
    n = len(records)
    pipe = reader_pipe(lib, batch_size=n, path=str(path), index_path=str(tmp_path / "a.idx"),
                       dont_use_mmap=dont_use_mmap)
    for _ in range(2):
        d, lab = pipe.run()
        for i, (label, payload) in enumerate(records):
            x, y = np.array(d.at(i)), np.array(lab.at(i))
            assert x.dtype == np.uint8 and x.ndim == 1 and bytes(x) == payload
            want = [0.0] if label == [] else (label if isinstance(label, list) else [label])
            assert y.dtype == np.float32 and y.shape == (len(want),) and y.tolist() == want
            assert d[i].source_info() == f"{path} at index {offs[i]}"
            assert lab[i].source_info() == ""
    assert pipe.epoch_size("R") == n


@pytest.fixture(scope="module")
def eleven(tmp_path_factory):
    """11 records in 3 files (3, 5, 3) under one index of global offsets."""
    return numbered(tmp_path_factory.mktemp("eleven"), [3, 5, 3])


@pytest.mark.parametrize("lib", LIBS)
def test_several_files_order_and_source_info(lib, eleven):
    """Without shuffling: the records in the order of their offsets over the concatenated files,
    wrapping around after the last; source_info names the file and the offset in it."""
    paths, idx, where = eleven
    pipe = reader_pipe(lib, batch_size=4, path=paths, index_path=idx)
    got = read(pipe, 6)  # 24 samples: 2 epochs and a bit
    for k, (src, data, label) in enumerate(got):
        j = k % 11
        assert data == sample_data(j)
        assert label == (sample_label(j) if isinstance(sample_label(j), list) else [sample_label(j)])
        assert src == "%s at index %d" % where[j]
    assert pipe.epoch_size("R") == 11 and pipe.epoch_size() == {"R": 11}


@pytest.mark.parametrize("lib", LIBS)
def test_relative_path_and_single_strings(lib, eleven, monkeypatch, tmp_path):
    """path / index_path as plain strings, relative: source_info keeps the path as given."""
    paths, _, where = eleven
    monkeypatch.chdir(paths[1].rsplit("/", 1)[0])
    offs = [o for _, o in where[3:8]]  # f1.rec's own offsets (it starts at 0)
    write_idx(tmp_path / "f1.idx", offs)
    pipe = reader_pipe(lib, batch_size=6, path="f1.rec", index_path=str(tmp_path / "f1.idx"))
    got = read(pipe, 1)
    assert [s[2][0] for s in got] == [3, 4, 5, 6, 7, 3]
    assert [s[0] for s in got] == [f"f1.rec at index {o}" for o in offs + offs[:1]]


@pytest.mark.parametrize("lib", LIBS)
def test_index_order_keys_and_duplicates(lib, eleven, tmp_path):
    """The index's keys are ignored and its offsets sorted: lines in any order, any keys, and
    repeated offsets (dropped) give the same records in offset order."""
    paths, idx, where = eleven
    lines = [line.split() for line in open(idx).read().splitlines()]
    offsets = [int(o) for _, o in lines]
    variants = {
        "reversed": (offsets[::-1], None),
        "keys": (offsets, [1000 - k for k in range(11)]),
        "duplicates": (offsets + offsets[2:5], None),
    }
    for name, (offs, keys) in variants.items():
        write_idx(tmp_path / f"{name}.idx", offs, keys)
        pipe = reader_pipe(lib, batch_size=11, path=paths, index_path=str(tmp_path / f"{name}.idx"))
        assert pipe.epoch_size("R") == 11, name
        got = read(pipe, 2)
        assert [s[2][0] for s in got] == list(range(11)) * 2, name
        assert [s[0] for s in got] == ["%s at index %d" % w for w in where] * 2, name
    (tmp_path / "ws.idx").write_text("  ".join(f"{k} {o}" for k, o in enumerate(offsets)) + "\n\n")
    pipe = reader_pipe(lib, batch_size=11, path=paths, index_path=str(tmp_path / "ws.idx"))
    assert values(pipe, 1) == list(range(11))


@pytest.mark.parametrize("lib", LIBS)
def test_index_naming_every_other_record(lib, eleven, tmp_path):
    """DALI's test_recordio: an index naming every other record reads those alone (a record's
    span runs to the next listed offset; the reader uses the first record in it)."""
    paths, idx, _ = eleven
    lines = open(idx).read().splitlines()
    (tmp_path / "half.idx").write_text("".join(line + "\n" for line in lines[::2]))
    pipe = reader_pipe(lib, batch_size=1, path=paths, index_path=str(tmp_path / "half.idx"))
    ref = reader_pipe(lib, batch_size=1, path=paths, index_path=idx)
    assert pipe.epoch_size("R") == 6
    for _ in range(pipe.epoch_size("R")):
        a, b = read(pipe, 1), read(ref, 1)
        assert a[0][1:] == b[0][1:] and a[0][0] == b[0][0]
        read(ref, 1)  # skip the record left out


# --------------------------------------------------------------------------- shards, shuffling


@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", SHARD_CASES)
@pytest.mark.parametrize("lib", LIBS)
def test_shard_sequence(lib, eleven, num_shards, shard_id, batch_size, stick_to_shard, pad_last_batch):
    paths, idx, where = eleven
    pipe = reader_pipe(lib, batch_size=batch_size, path=paths, index_path=idx, num_shards=num_shards,
                       shard_id=shard_id, stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
    n_batches = 9
    got = read(pipe, n_batches)
    want = shard_reference(11, num_shards, shard_id, batch_size, n_batches * batch_size, pad_last_batch,
                           stick_to_shard)
    assert [int(s[2][0]) for s in got] == want
    assert [s[0] for s in got] == ["%s at index %d" % where[k] for k in want]


@pytest.mark.parametrize("lib", LIBS)
def test_epoch_size_and_reader_meta(lib, eleven):
    paths, idx, _ = eleven
    pipe = reader_pipe(lib, batch_size=2, path=paths, index_path=idx, num_shards=4, shard_id=1,
                       pad_last_batch=True)
    assert pipe.epoch_size("R") == 12 and pipe.epoch_size() == {"R": 12}
    meta = pipe.reader_meta("R")
    assert meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 12
    assert meta["number_of_shards"] == 4 and meta["shard_id"] == 1
    assert bool(meta["pad_last_batch"]) and not bool(meta["stick_to_shard"])
    pipe = reader_pipe(lib, batch_size=2, path=paths, index_path=idx, num_shards=3, shard_id=2,
                       stick_to_shard=True)
    meta = pipe.reader_meta()["R"]
    assert pipe.epoch_size("R") == 11 and meta["epoch_size"] == 11 and meta["epoch_size_padded"] == 11
    assert not bool(meta["pad_last_batch"]) and bool(meta["stick_to_shard"])


@pytest.mark.parametrize("lib", LIBS)
def test_random_shuffle(lib, eleven):
    """random_shuffle: each epoch is a permutation of all records; the order follows the seed."""
    paths, idx, where = eleven

    def order(pipe_seed, **kw):
        pipe = reader_pipe(lib, batch_size=3, pipe_seed=pipe_seed, path=paths, index_path=idx,
                           random_shuffle=True, **kw)
        got = read(pipe, 15)  # 45 samples: 4 epochs and a bit
        for _, data, label in got:  # data, label and source_info stay together
            assert data == sample_data(int(label[0]))
        return [int(s[2][0]) for s in got]

    check_random_shuffle(order, list(range(11)))


@pytest.mark.parametrize("options", [dict(), dict(dont_use_mmap=True), dict(read_ahead=True),
                                     dict(dont_use_mmap=True, read_ahead=True), dict(lazy_init=True),
                                     dict(shard_id=0, num_shards=1)])
@pytest.mark.parametrize("lib", LIBS)
def test_read_options_give_the_same_data(lib, eleven, options):
    """DALI's test_mxnet_reader_cpu, and options that change how, not what, is read."""
    paths, idx, where = eleven
    pipe = reader_pipe(lib, batch_size=4, num_threads=3, path=paths, index_path=idx, **options)
    got = read(pipe, 7)
    for k, (src, data, label) in enumerate(got):
        assert data == sample_data(k % 11) and int(label[0]) == k % 11
        assert src == "%s at index %d" % where[k % 11]


@pytest.mark.parametrize("lib", LIBS)
def test_legacy_aliases(lib, eleven):
    """DALI's test_mxnet_reader_alias: fn.mxnet_reader and ops.MXNetReader (deprecated) and
    ops.readers.MXNet give what fn.readers.mxnet gives."""
    paths, idx, _ = eleven

    def run(make):
        @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None)
        def p():
            data, label = make(path=paths, index_path=idx)
            return data, label

        pipe = p()
        pipe.build()
        return [(d, tuple(lab)) for _, d, lab in read(pipe, 4)]

    ref = run(lib.fn.readers.mxnet)
    assert ref[0] == (sample_data(0), (0.0, 0.5)) and ref[12] == (sample_data(1), (1.0,))
    with pytest.warns(DeprecationWarning, match="mxnet_reader"):
        assert run(lib.fn.mxnet_reader) == ref
    with pytest.warns(DeprecationWarning, match="MXNetReader"):
        assert run(lambda **kw: lib.ops.MXNetReader(**kw)()) == ref
    assert run(lambda **kw: lib.ops.readers.MXNet(**kw)()) == ref


# --------------------------------------------------------------------------- checkpointing
# DALI's test_mxnet_reader: (num_epochs, batch_size, shard_id, num_shards, random_shuffle,
# stick_to_shard, pad_last_batch, iters_into_epoch); DALI_extra's db/recordio is replaced by
# 45 small records in 3 files.
CHECKPOINT_CASES = [
    (0, 1, 0, 1, True, True, True, None),
    (0, 3, 0, 2, True, True, False, 1),
    (4, 5, 1, 3, True, False, True, 2),
    (1, 7, 2, 4, True, False, False, None),
    (11, 2, 2, 10, False, True, True, 1),
    (2, 4, 1, 6, False, True, False, 2),
    (5, 6, 2, 3, False, False, True, None),
    (3, 8, 4, 5, False, False, False, 1),
]


@pytest.fixture(scope="module")
def forty_five(tmp_path_factory):
    return numbered(tmp_path_factory.mktemp("ckpt"), [15, 16, 14])


@pytest.mark.parametrize("case", CHECKPOINT_CASES, ids=[str(i) for i in range(len(CHECKPOINT_CASES))])
@pytest.mark.parametrize("lib", LIBS)
def test_checkpointing(lib, forty_five, case):
    """A pipeline restored from `checkpoint()` returns the batches the original returns next."""
    epochs, batch, shard_id, shards, shuffle, stick, pad, into = case
    paths, idx, _ = forty_five
    fn = lib.fn

    @lib.pipeline_def(batch_size=batch, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        data, label = fn.readers.mxnet(name="Reader", path=paths, index_path=idx, pad_last_batch=pad,
                                       random_shuffle=shuffle, shard_id=shard_id, num_shards=shards,
                                       stick_to_shard=stick)
        return data, label

    p, restored, iterations = checkpoint_after(pipe, batch, shards, epochs, into)
    for k in range(iterations):
        xs, ys = p.run(), restored.run()
        for x, y in zip(xs, ys):
            assert len(x) == len(y) == batch
            for i in range(batch):
                np.testing.assert_array_equal(np.array(x.at(i)), np.array(y.at(i)), err_msg=f"iteration {k}")
                assert x[i].source_info() == y[i].source_info()


# --------------------------------------------------------------------------- errors
def _damaged(tmp_path, how):
    """3 good records in d.rec (+ d.idx), then damaged `how`; returns (path, index)."""
    path = tmp_path / "d.rec"
    offs, end = write_rec(path, [(k, b"rec-%d" % k + b"." * (k % 4)) for k in range(3)])
    data = path.read_bytes()
    idx = tmp_path / "d.idx"

    def append(extra):
        path.write_bytes(data + extra)
        write_idx(idx, offs + [end])

    write_idx(idx, offs)
    if how == "bad_magic":
        b = bytearray(data)
        b[offs[1]] ^= 0xFF
        path.write_bytes(bytes(b))
    elif how == "offset_inside_record":
        write_idx(idx, [offs[0], offs[1] + 4, offs[2]])
    elif how == "truncated":  # the last record cut short
        path.write_bytes(data[:-6])
    elif how == "truncated_header":
        path.write_bytes(data[:offs[2] + 10])
    elif how == "offset_past_end":
        write_idx(idx, offs + [end + 100])
    elif how == "labels_past_record":  # flag 50: 200 bytes of labels, 4 bytes there
        append(struct.pack("<II", MAGIC, 28) + struct.pack("<IfQQ", 50, 0, 0, 0) + b"abcd")
    elif how == "length_below_header":
        append(struct.pack("<II", MAGIC, 8) + b"12345678")
    elif how == "bad_part_magic":
        fr = frame(ir_header(9) + b"abcd" + MAGIC_BYTES + b"xyz")
        i = fr.index(MAGIC_BYTES, 8)
        append(fr[:i] + b"\0\0\0\0" + fr[i + 4:])
    elif how == "missing_last_part":  # cflag 1 and nothing after it
        append(struct.pack("<II", MAGIC, 1 << 29 | 28) + ir_header(9) + b"abcd")
    elif how == "truncated_part":
        append(frame(ir_header(9) + b"abcd" + MAGIC_BYTES + b"xyz")[:-8])
    else:
        raise ValueError(how)
    return str(path), str(idx)


# DALI 2.4 names the file ("Invalid RecordIO file: <path> at index <offset> (...)") except for
# a wrong magic number at the record's start ("Invalid RecordIO: wrong magic number") and data
# missing past the end of the last file ("Incomplete or corrupted record files").
DATA_ERRORS = {
    "bad_magic": r"d\.rec|(?i:magic)",
    "offset_inside_record": r"d\.rec|(?i:magic)",
    "truncated": r"d\.rec",
    "truncated_header": r"d\.rec",
    "offset_past_end": r"d\.rec|(?i:incomplete or corrupted)",
    "labels_past_record": r"d\.rec",
    "length_below_header": r"d\.rec",
    "bad_part_magic": r"d\.rec",
    "missing_last_part": r"d\.rec",
    "truncated_part": r"d\.rec",
}


@pytest.mark.parametrize("dont_use_mmap", [False, True])
@pytest.mark.parametrize("how", list(DATA_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_damaged_file_or_index(lib, tmp_path, how, dont_use_mmap):
    """A record that can't be read or parsed fails the pipeline when run."""
    path, idx = _damaged(tmp_path, how)
    with pytest.raises(RuntimeError, match=DATA_ERRORS[how]):
        p = reader_pipe(lib, batch_size=1, path=path, index_path=idx, dont_use_mmap=dont_use_mmap,
                        pipe_kw=dict(prefetch_queue_depth=1))
        for _ in range(5):
            p.run()


@pytest.mark.parametrize("lib", LIBS)
def test_good_records_before_the_bad_one(lib, tmp_path):
    """The records before the damaged one are read as usual (batch of 1, no prefetching ahead)."""
    path, idx = _damaged(tmp_path, "labels_past_record")
    p = reader_pipe(lib, batch_size=1, path=path, index_path=idx, pipe_kw=dict(prefetch_queue_depth=1))
    assert values(p, 3) == [0, 1, 2]
    with pytest.raises(RuntimeError, match=r"d\.rec at index \d+"):
        p.run()


@pytest.mark.parametrize("lib", LIBS)
def test_sluice_goes_on_after_a_bad_record(lib, tmp_path):
    """DALI's pipeline is unusable after the error; Sluice's goes on with the next batch."""
    path, idx = _damaged(tmp_path, "bad_part_magic")
    p = reader_pipe(lib, batch_size=1, path=path, index_path=idx, pipe_kw=dict(prefetch_queue_depth=1))
    assert values(p, 3) == [0, 1, 2]
    with pytest.raises(RuntimeError, match=r"d\.rec"):
        p.run()
    if is_sluice(lib):
        assert values(p, 2) == [0, 1]  # the next epoch


def _files(d):
    d.mkdir(parents=True, exist_ok=True)
    paths, idx, _ = numbered(d, [2, 2])
    (d / "empty.idx").write_text("")
    (d / "garbage.idx").write_text("not an index\n")
    return paths, idx


FILE_ERRORS = {
    "missing_file": (lambda d, p, i: dict(path=str(d / "nope.rec"), index_path=i), r"nope\.rec"),
    "missing_second_file": (lambda d, p, i: dict(path=[p[0], str(d / "nope2.rec")], index_path=i),
                            r"nope2\.rec"),
    "missing_index": (lambda d, p, i: dict(path=p, index_path=str(d / "nope.idx")), r"nope\.idx"),
    "empty_index": (lambda d, p, i: dict(path=p, index_path=str(d / "empty.idx")), r"empty\.idx"),
    "garbage_index": (lambda d, p, i: dict(path=p, index_path=str(d / "garbage.idx")), r"garbage\.idx"),
    "two_index_files": (lambda d, p, i: dict(path=p, index_path=[i, i]), r"(?i:single index file|index file)"),
}


@pytest.mark.parametrize("case", list(FILE_ERRORS))
@pytest.mark.parametrize("lib", LIBS)
def test_file_and_argument_errors(lib, tmp_path, case):
    """Missing files and bad indexes: an error (when the pipeline is built or run) naming the
    file (DALI: when built)."""
    paths, idx = _files(tmp_path / "data")
    make, match = FILE_ERRORS[case]
    with pytest.raises(RuntimeError, match=match):
        p = reader_pipe(lib, batch_size=2, **make(tmp_path / "data", paths, idx),
                        pipe_kw=dict(prefetch_queue_depth=1))
        for _ in range(3):
            p.run()


@pytest.mark.parametrize("lib", LIBS)
def test_path_and_index_path_are_required(lib, tmp_path):
    paths, idx = _files(tmp_path)
    with pytest.raises((TypeError, RuntimeError), match="index_path"):
        reader_pipe(lib, path=paths)
    with pytest.raises((TypeError, RuntimeError), match="path"):
        reader_pipe(lib, index_path=idx)
