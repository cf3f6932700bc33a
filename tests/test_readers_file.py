"""readers.file from Python: label sources (file_root, file_list, files=/labels=), bytes,
sharding, padding and shuffling."""

from pathlib import Path

import numpy as np
import pytest

from sluice import fn, pipeline_def

from conftest import library_params

ALL = [(f"dir_{label}/f{k:02d}.jpg", label) for label in range(3) for k in range(7)]  # tiny_root, sorted


def read(pipe, n_batches):
    """[(source_info, label, bytes)] over n_batches runs."""
    out = []
    for _ in range(n_batches):
        jpegs, labels = pipe.run()
        for i in range(len(jpegs)):
            lab = labels.at(i)
            assert lab.dtype == np.int32 and lab.shape == (1,)
            out.append((jpegs.source_info(i), int(lab[0]), jpegs.at(i).tobytes()))
    return out


def reader_pipe(batch_size=4, pipe_seed=1, **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=pipe_seed)
    def p():
        return fn.readers.file(name="R", **reader_args)

    return p()


def test_file_root_labels_and_bytes(tiny_root):
    pipe = reader_pipe(batch_size=7, file_root=str(tiny_root))
    assert pipe.epoch_size("R") == 21  # notes.txt is filtered out
    got = read(pipe, 3)
    assert [(s, l) for s, l, _ in got] == ALL
    for src, _, data in got:
        assert data == (tiny_root / src).read_bytes()
    jpegs, _ = pipe.run()
    assert jpegs.at(0).dtype == np.uint8 and jpegs.at(0).ndim == 1
    # the next epoch starts over
    assert jpegs.source_info(0) == ALL[0][0]


def test_file_list(tiny_root, tmp_path):
    chosen = [("dir_2/f03.jpg", 5), ("dir_0/f00.jpg", 0), ("dir_1/f06.jpg", 17), ("dir_2/f03.jpg", 2)]
    fl = tmp_path / "list.txt"
    fl.write_text("".join(f"{p} {l}\n" for p, l in chosen) + "\n")  # trailing blank line is fine
    pipe = reader_pipe(batch_size=2, file_root=str(tiny_root), file_list=str(fl))
    assert pipe.epoch_size("R") == 4
    got = read(pipe, 2)
    assert [(s, l) for s, l, _ in got] == chosen  # file order and labels kept
    assert all(d == (tiny_root / s).read_bytes() for s, _, d in got)


def test_files_and_labels(tiny_root):
    files = [str(tiny_root / p) for p in ("dir_1/f01.jpg", "dir_0/f05.jpg", "dir_2/f02.jpg")]
    pipe = reader_pipe(batch_size=3, files=files, labels=[7, 8, 9])
    got = read(pipe, 1)
    assert [(s, l) for s, l, _ in got] == list(zip(files, [7, 8, 9]))
    assert [d for _, _, d in got] == [Path(f).read_bytes() for f in files]
    # without labels: the label is the index of the file
    got = read(reader_pipe(batch_size=3, files=files), 1)
    assert [l for _, l, _ in got] == [0, 1, 2]


@pytest.mark.parametrize("num_shards", [2, 3, 4, 5])
def test_shards_cover_dataset_exactly_once(tiny_root, num_shards):
    shards = []
    for shard_id in range(num_shards):
        pipe = reader_pipe(batch_size=1, file_root=str(tiny_root), num_shards=num_shards, shard_id=shard_id)
        meta = pipe.reader_meta("R")
        assert meta["shard_id"] == shard_id and meta["number_of_shards"] == num_shards
        # DALI's shard bounds: [floor(n*id/N), floor(n*(id+1)/N))
        size = 21 * (shard_id + 1) // num_shards - 21 * shard_id // num_shards
        shards.append([s for s, _, _ in read(pipe, size)])
        # contiguous and in order
        assert shards[-1] == [p for p, _ in ALL[21 * shard_id // num_shards: 21 * (shard_id + 1) // num_shards]]
    flat = [s for sh in shards for s in sh]
    assert sorted(flat) == sorted(p for p, _ in ALL) and len(set(flat)) == 21


def test_pad_last_batch_repeats_last_sample(tiny_root):
    # shard 1 of 2 holds samples 10..20 (11 samples); batch of 4 -> 3 batches, the last one padded with
    # the shard's last sample; with stick_to_shard the next epoch starts at the shard's beginning
    pipe = reader_pipe(batch_size=4, file_root=str(tiny_root), num_shards=2, shard_id=1, pad_last_batch=True,
                       stick_to_shard=True)
    got = [s for s, _, _ in read(pipe, 5)]
    shard = [p for p, _ in ALL[10:21]]
    assert got[:11] == shard
    assert got[11] == shard[-1]
    assert got[12:20] == shard[:8]


def test_no_pad_last_batch_wraps_into_next_epoch(tiny_root):
    pipe = reader_pipe(batch_size=4, file_root=str(tiny_root), num_shards=2, shard_id=1, pad_last_batch=False,
                       stick_to_shard=True)
    got = [s for s, _, _ in read(pipe, 3)]
    shard = [p for p, _ in ALL[10:21]]
    assert got[:11] == shard and got[11] == shard[0]


@pytest.mark.parametrize("pad_last_batch", [False, True])
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards,shard_id,batch_size", [(2, 1, 4), (3, 0, 5), (4, 2, 3)])
def test_shard_sequence_matches_dali(tiny_root, pad_last_batch, stick_to_shard, num_shards, shard_id, batch_size):
    """Over several epochs (shard rotation without stick_to_shard, padding) the sample sequence is DALI's."""
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dfn

    kw = dict(file_root=str(tiny_root), num_shards=num_shards, shard_id=shard_id, pad_last_batch=pad_last_batch,
              stick_to_shard=stick_to_shard)

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    def d():
        jpegs, labels = dfn.readers.file(**kw)
        return jpegs, labels

    dp = d()
    dp.build()
    want = []
    for _ in range(12):
        jpegs, labels = dp.run()
        want += [(jpegs[i].source_info(), int(np.array(labels[i])[0])) for i in range(batch_size)]
    got = [(s, l) for s, l, _ in read(reader_pipe(batch_size=batch_size, **kw), 12)]
    assert got == want


def shuffled_order(tiny_root, seed, epochs=2, **kw):
    pipe = reader_pipe(batch_size=3, pipe_seed=seed, file_root=str(tiny_root), **kw)
    return [s for s, _, _ in read(pipe, 7 * epochs)]


def test_random_shuffle_deterministic_per_seed(tiny_root):
    a = shuffled_order(tiny_root, 3, random_shuffle=True, initial_fill=8)
    assert a == shuffled_order(tiny_root, 3, random_shuffle=True, initial_fill=8)
    assert a != shuffled_order(tiny_root, 4, random_shuffle=True, initial_fill=8)
    assert a[:21] != [p for p, _ in ALL]
    # still a stream over the data set: every file appears, the counts over 2 epochs are 2 each
    assert sorted(set(a)) == sorted(p for p, _ in ALL)


def test_reader_seed_argument_overrides_pipeline_seed(tiny_root):
    def order(pipe_seed):
        pipe = reader_pipe(batch_size=3, pipe_seed=pipe_seed, file_root=str(tiny_root), random_shuffle=True,
                           initial_fill=8, seed=77)
        return [s for s, _, _ in read(pipe, 7)]

    assert order(3) == order(4)


def test_shuffle_after_epoch(tiny_root):
    a = shuffled_order(tiny_root, 3, epochs=3, shuffle_after_epoch=True)
    e1, e2, e3 = a[:21], a[21:42], a[42:63]
    for e in (e1, e2, e3):
        assert sorted(e) == sorted(p for p, _ in ALL)  # each epoch is a permutation
    assert e1 != e2 != e3
    assert a == shuffled_order(tiny_root, 3, epochs=3, shuffle_after_epoch=True)


def test_large_batches_read_on_several_threads(tmp_path):
    """Batches over 8 MB are copied by several threads: the bytes are the files', in order;
    a file gone since listing fails its batch naming the first such sample."""
    rng = np.random.default_rng(5)
    contents = [rng.integers(0, 256, int(rng.integers(300_000, 900_000)), dtype=np.uint8).tobytes() for _ in range(24)]
    files = []
    for i, c in enumerate(contents):
        f = tmp_path / f"{i:02}.bin"
        f.write_bytes(c)
        files.append(str(f))
    pipe = reader_pipe(batch_size=24, files=files)
    pipe.build()
    for _ in range(3):
        got = read(pipe, 1)
        assert [b for _, _, b in got] == contents
    import sluice

    (tmp_path / "17.bin").unlink()
    (tmp_path / "21.bin").unlink()
    pipe2 = reader_pipe(batch_size=24, files=files, prefetch_queue_depth=1)
    with pytest.raises(sluice.errors.DataError, match=r"(?s)sample 17.*17\.bin|17\.bin.*sample 17"):
        pipe2.run()


@pytest.mark.parametrize("lib", library_params())
def test_lazy_init_lists_the_files_at_first_use(lib, tiny_root, tmp_path):
    """lazy_init=True: the pipeline builds without listing the folder; the run lists it, and a
    folder that is missing is that run's error. Without lazy_init, build fails at once."""
    root = tmp_path / "later"

    def make(folder, **kw):
        @lib.pipeline_def(batch_size=7, num_threads=2, device_id=None, seed=1)
        def p():
            return tuple(lib.fn.readers.file(file_root=str(folder), name="R", **kw))

        return p()

    with pytest.raises(RuntimeError, match="later"):
        make(root).build()
    pipe = make(root, lazy_init=True)
    pipe.build()
    with pytest.raises(RuntimeError, match="later"):
        pipe.run()
    pipe = make(tiny_root, lazy_init=True)
    pipe.build()
    jpegs, labels = pipe.run()
    assert [jpegs[i].source_info() for i in range(7)] == [name for name, _ in ALL[:7]]
    assert pipe.epoch_size("R") == 21
