"""Shards from the launcher: a reader's `shard_id="auto"` (and the PyTorch plugin's
`distributed_shard()` / `local_device_id()`, which return the same) takes this process's
rank and the job's size from torchrun's, Slurm's or Open MPI's variables, so one pipeline
per GPU needs no rank arithmetic (DALI issue #1175)."""

import numpy as np
import pytest

import sluice
from sluice import _distributed


def _labels(root, **shard):
    pipe = sluice.Pipeline(3, 1, None)
    with pipe:
        _, label = sluice.fn.readers.file(file_root=root, **shard)
        pipe.set_outputs(label)
    return [pipe.run()[0].as_array().ravel().tolist() for _ in range(4)]


@pytest.fixture
def root(tmp_path):
    for k in range(20):
        d = tmp_path / f"c{k % 4}"
        d.mkdir(exist_ok=True)
        (d / f"{k:02d}.jpg").write_bytes(bytes([k]))
    return str(tmp_path)


def _clear(monkeypatch):
    for names in _distributed._LAUNCHERS:
        for n in names:
            monkeypatch.delenv(n, raising=False)


def test_auto_shard_under_torchrun(monkeypatch, root):
    _clear(monkeypatch)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert _distributed.shard() == {"shard_id": 2, "num_shards": 3} and _distributed.local_device_id() == 0
    assert _labels(root, shard_id="auto") == _labels(root, shard_id=2, num_shards=3)
    reader = sluice.ops.readers.File(file_root=root, shard_id="auto")  # the ops API too
    pipe = sluice.Pipeline(3, 1, None)
    with pipe:
        pipe.set_outputs(reader()[1])
    assert pipe.reader_meta()[next(iter(pipe.reader_meta()))]["shard_id"] == 2


def test_auto_shard_under_slurm_and_outside_a_launcher(monkeypatch, root):
    _clear(monkeypatch)
    assert _distributed.shard() == {"shard_id": 0, "num_shards": 1}
    assert _labels(root, shard_id="auto") == _labels(root)
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    assert _distributed.shard() == {"shard_id": 1, "num_shards": 2} and _distributed.local_device_id() == 1
    assert _labels(root, shard_id="auto") == _labels(root, shard_id=1, num_shards=2)


def test_a_launcher_that_makes_no_sense_is_an_error(monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="RANK=3 but WORLD_SIZE=2"):
        _distributed.shard()
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(RuntimeError, match="not integers"):
        _distributed.shard()


def test_pytorch_plugin_helpers(monkeypatch):
    pytest.importorskip("torch")
    from sluice.plugin.pytorch import distributed_shard, local_device_id

    _clear(monkeypatch)
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed_shard() == {"shard_id": 5, "num_shards": 8} and local_device_id() == 1
    assert np.int64(local_device_id()) == 1


def test_device_id_auto_is_the_local_rank(monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert sluice.Pipeline(batch_size=2, num_threads=1, device_id="auto").device_id == 1
    _clear(monkeypatch)
    assert sluice.Pipeline(batch_size=2, num_threads=1, device_id="auto").device_id == 0
