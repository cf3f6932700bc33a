"""`global_shuffle=True` (Sluice's, every reader; DALI has none, see its issue #665): every epoch
is read in a fresh permutation of the whole dataset, each shard reading its slice, so the
shards together read one global order whatever their number, and a job resized from 8 to 16
GPUs sees the same order. Keyed by the reader's own `seed` (not the pipeline's), so ranks
whose pipelines are seeded differently still agree."""

import numpy as np
import pytest

import sluice
from sluice import fn

N = 23


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gs")
    names = []
    for k in range(N):
        (root / f"{k:02d}.bin").write_bytes(b"%d" % k)
        names.append(str(root / f"{k:02d}.bin"))
    return names


def pipe(files, batch_size, pipe_seed=1, checkpoint=None, **kw):
    @sluice.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=pipe_seed,
                         enable_checkpointing=True)
    def p():
        data, _ = fn.readers.file(files=files, name="R", global_shuffle=True, **kw)
        return data

    p = p(checkpoint=checkpoint) if checkpoint is not None else p()
    p.build()
    return p


def samples(p, n_batches):
    out = []
    for _ in range(n_batches):
        (d,) = p.run()
        out += [int(bytes(np.array(d.at(i)))) for i in range(len(d))]
    return out


def test_every_epoch_is_a_fresh_permutation(files):
    got = samples(pipe(files, N), 3)
    epochs = [got[k * N:(k + 1) * N] for k in range(3)]
    for e in epochs:
        assert sorted(e) == list(range(N))
    assert epochs[0] != list(range(N)) and epochs[0] != epochs[1] != epochs[2]


@pytest.mark.parametrize("num_shards", [2, 3, 4, 8])
def test_shards_read_slices_of_one_order_for_any_number_of_shards(files, num_shards):
    whole = samples(pipe(files, N), 3)
    for epoch in range(3):
        joined = []
        for s in range(num_shards):
            size = N * (s + 1) // num_shards - N * s // num_shards
            # Pipelines seeded differently per rank, as training scripts often do.
            p = pipe(files, 1, pipe_seed=100 + s, shard_id=s, num_shards=num_shards)
            joined += samples(p, size * (epoch + 1))[size * epoch:]
        assert joined == whole[epoch * N:(epoch + 1) * N], f"{num_shards} shards, epoch {epoch}"


def test_the_readers_seed_keys_the_order(files):
    a = samples(pipe(files, N), 1)
    assert samples(pipe(files, N, pipe_seed=99), 1) == a
    assert samples(pipe(files, N, seed=5), 1) != a
    assert samples(pipe(files, N, seed=5), 1) == samples(pipe(files, N, seed=5, pipe_seed=7), 1)


def test_padding_and_checkpoints(files):
    """With pad_last_batch every shard's epoch is whole batches; a pipeline restored from a
    checkpoint reads on exactly."""
    p = pipe(files, 4, shard_id=0, num_shards=3, pad_last_batch=True)
    first = samples(p, 5)
    ckpt = p.checkpoint()
    after = samples(p, 6)
    restored = pipe(files, 4, checkpoint=ckpt, shard_id=0, num_shards=3, pad_last_batch=True)
    assert samples(restored, 6) == after
    epoch = first[:8]
    assert epoch[7] == epoch[6] and len(set(epoch[:7])) == 7  # 7 real samples, then padding


@pytest.mark.parametrize("other", [dict(random_shuffle=True), dict(stick_to_shard=True), dict(shuffle_after_epoch=True)])
def test_not_with_other_orders(files, other):
    with pytest.raises(RuntimeError, match="global_shuffle.*cannot be used together with " + list(other)[0]):
        pipe(files, 2, **other)


def test_other_readers_take_it(files, tmp_path):
    """Every reader has it: numpy files read in the permutation the file reader reads its
    files in (same dataset size, same key)."""
    paths = []
    for k in range(N):
        np.save(tmp_path / f"{k:02d}.npy", np.array([k], dtype=np.int32))
        paths.append(f"{k:02d}.npy")

    @sluice.pipeline_def(batch_size=N, num_threads=2, device_id=None)
    def p():
        return fn.readers.numpy(file_root=str(tmp_path), files=paths, global_shuffle=True)

    q = p()
    q.build()
    (d,) = q.run()
    got = [int(np.array(d.at(i))[0]) for i in range(N)]
    assert got == samples(pipe(files, N), 1) and got != list(range(N))
