"""Where this process sits in a multi-process job, as launchers say it (torchrun and
torch.distributed's launchers: RANK / WORLD_SIZE / LOCAL_RANK; Slurm: SLURM_PROCID /
SLURM_NTASKS / SLURM_LOCALID; Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK), so a
pipeline per GPU gets its shard without hand-written rank arithmetic."""

import os

_LAUNCHERS = (
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
)


def launcher():
    """(rank, world size, local rank) from the first launcher whose variables are set, or
    None outside a launcher."""
    for rank, size, local in _LAUNCHERS:
        if rank in os.environ and size in os.environ:
            try:
                r, s = int(os.environ[rank]), int(os.environ[size])
                lr = int(os.environ.get(local, r))
            except ValueError:
                raise RuntimeError(f"the launcher's {rank}={os.environ[rank]!r} / {size}={os.environ[size]!r} are not "
                                   "integers") from None
            if not 0 <= r < s:
                raise RuntimeError(f"the launcher says {rank}={r} but {size}={s}")
            return r, s, lr
    return None


def shard():
    """`{"shard_id": rank, "num_shards": world size}` for a reader; one shard of one outside
    a launcher."""
    where = launcher()
    return {"shard_id": 0, "num_shards": 1} if where is None else {"shard_id": where[0], "num_shards": where[1]}


def local_device_id():
    """The GPU of this process: the launcher's local rank (0 outside a launcher)."""
    where = launcher()
    return 0 if where is None else where[2]


def resolve_auto_shard(kwargs):
    """A reader's `shard_id="auto"` (and `num_shards="auto"` or unset) from the launcher."""
    if kwargs.get("shard_id") != "auto" and kwargs.get("num_shards") != "auto":
        return kwargs
    s = shard()
    out = dict(kwargs)
    if out.get("shard_id") in ("auto", None):
        out["shard_id"] = s["shard_id"]
    if out.get("num_shards") in ("auto", None):
        out["num_shards"] = s["num_shards"]
    return out
