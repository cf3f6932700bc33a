"""examples/train_ddp.py under `torchrun --nproc_per_node N`, CPU-only (device_id=None, the
gloo backend, a small model): one pipeline per process, each reading the shard the launcher
gives it (`shard_id="auto"`), through the PyTorch iterator with `reader_name`.

Each file of the data set carries its own label, so the labels a rank was given are the
samples it saw. The tests check what data-parallel training relies on: the ranks' shards are
disjoint and together cover the data set once per epoch (with `pad_last_batch` as DALI
defines it: the shard's last sample repeated, then left out by the iterator), and every rank
steps the same number of times per epoch (else DistributedDataParallel waits forever). And
where DALI is installed, that Sluice gives every rank the very samples DALI gives it."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_ddp.py")
NUM_FILES = 37      # uneven over 2 and 3 ranks, and not a multiple of the batch
BATCH = 4
EPOCHS = 3


@pytest.fixture(scope="module")
def file_list(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("ddp_data")
    rng = np.random.default_rng(7)
    lines = []
    for i in range(NUM_FILES):
        Image.fromarray(rng.integers(0, 256, (24 + i % 5, 30, 3), dtype=np.uint8)).save(root / f"{i:03d}.jpg")
        lines.append(f"{i:03d}.jpg {i}\n")
    (root / "list.txt").write_text("".join(lines))
    return str(root / "list.txt")


def run_ddp(file_list, out, lib, ranks, *flags):
    """Runs the example under torchrun; returns each rank's record (batches and labels per epoch)."""
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    cmd = [torchrun, "--standalone", f"--nproc_per_node={ranks}", SCRIPT, "--file-list", file_list, "--cpu",
           "--lib", lib, "--batch", str(BATCH), "--threads", "1", "--image-size", "16", "--epochs", str(EPOCHS),
           "--warmup", "0", "--record", str(out), *flags]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"torchrun failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


def check_epochs(records, flags):
    """What holds whatever the library: equal step counts, disjoint shards, exact cover."""
    ranks = len(records)
    policy = flags[flags.index("--last-batch-policy") + 1] if "--last-batch-policy" in flags else "PARTIAL"
    padded = "--pad-last-batch" in flags
    for e in range(EPOCHS):
        counts = {r["rank"]: r["batches"][e] for r in records}
        assert len(set(counts.values())) == 1, f"epoch {e}: ranks step different numbers of times: {counts}"
        per_rank = [r["epochs"][e] for r in records]
        if policy == "FILL":
            assert all(len(s) == counts[0] * BATCH for s in per_rank)
        else:
            assert all(len(s) <= counts[0] * BATCH for s in per_rank)
        if policy == "DROP":
            # Every rank the same whole batches (without padding, a reader goes on where its
            # last epoch stopped, so ranks may meet on a sample, as in DALI).
            assert all(len(s) == (NUM_FILES // ranks // BATCH) * BATCH for s in per_rank)
        elif policy == "PARTIAL" and padded:
            # The padding is left out: each sample exactly once over all ranks.
            flat = sorted(x for s in per_rank for x in s)
            assert flat == list(range(NUM_FILES)), f"epoch {e}: not an exact cover: {Counter(flat)}"
            for a in range(ranks):
                for b in range(a + 1, ranks):
                    assert not set(per_rank[a]) & set(per_rank[b]), f"epoch {e}: ranks {a} and {b} share samples"
        elif policy == "FILL" and padded:
            # Full batches, filled with the shard's last sample: every sample at least once.
            assert set(x for s in per_rank for x in s) == set(range(NUM_FILES))


CASES = [
    pytest.param(2, ("--pad-last-batch",), id="2-pad-partial"),
    pytest.param(3, ("--pad-last-batch", "--shuffle"), id="3-pad-partial-shuffled"),
    pytest.param(2, ("--pad-last-batch", "--last-batch-policy", "FILL"), id="2-pad-fill"),
    pytest.param(2, ("--last-batch-policy", "DROP", "--shuffle"), id="2-drop-shuffled"),
    pytest.param(2, ("--last-batch-policy", "PARTIAL"), id="2-nopad-partial"),
    pytest.param(3, ("--last-batch-policy", "FILL"), id="3-nopad-fill"),
]


# Sluice's records per case: test_ddp_shards_match_dali compares the run test_ddp_shards
# checked instead of launching torchrun again (each launch is seconds of CI).
SLUICE_RUNS = {}


def sluice_run(tmp_path, file_list, ranks, flags):
    if (ranks, flags) not in SLUICE_RUNS:
        SLUICE_RUNS[(ranks, flags)] = run_ddp(file_list, tmp_path / "sluice", "sluice", ranks, *flags)
    return SLUICE_RUNS[(ranks, flags)]


@pytest.mark.parametrize("ranks,flags", CASES)
def test_ddp_shards(tmp_path, file_list, ranks, flags):
    records = sluice_run(tmp_path, file_list, ranks, flags)
    assert [r["rank"] for r in records] == list(range(ranks))
    check_epochs(records, flags)


@pytest.mark.parametrize("ranks,flags", CASES)
def test_ddp_shards_match_dali(tmp_path, file_list, ranks, flags):
    pytest.importorskip("nvidia.dali")
    ours = sluice_run(tmp_path, file_list, ranks, flags)
    theirs = run_ddp(file_list, tmp_path / "dali", "dali", ranks, *flags)
    check_epochs(theirs, flags)     # the checks above hold for DALI too: they read its rules right
    shuffled = "--shuffle" in flags
    for o, t in zip(ours, theirs):
        assert o["batches"] == t["batches"]
        for e in range(EPOCHS):
            # Shuffled, the order within a shard is each library's own random stream; the
            # samples a rank is given in an epoch are the same.
            mine, dalis = o["epochs"][e], t["epochs"][e]
            if shuffled and "DROP" in flags:
                # Which samples fall in the dropped remainder is up to the order.
                assert len(mine) == len(dalis), f"rank {o['rank']} epoch {e}"
            elif shuffled:
                assert Counter(mine) == Counter(dalis), f"rank {o['rank']} epoch {e}"
            else:
                assert mine == dalis, f"rank {o['rank']} epoch {e}"
