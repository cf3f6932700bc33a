"""Checkpoints (`enable_checkpointing=True`, `pipe.checkpoint()`, `Pipeline(checkpoint=...)`):
the bytes users keep, and what is in them.

Sluice's state between iterations is small: every random stream is keyed by the pipeline
seed and the iteration, and a reader's position is the number of samples it returned. So a
checkpoint holds the seed, the iterations returned, each reader's samples, and the Python
side's counters (DALI's `pipeline_data`: the iteration of the epoch and the epoch, which
external-source callbacks are called with) and a framework iterator's own state. It is JSON
(versioned), readable, and independent of `num_threads`, `prefetch_queue_depth` and the
executor mode. Batches prepared ahead of the consumer do not count: a restored pipeline's
first batch is the one the original would have returned next."""

import json

FORMAT = "sluice.checkpoint"
VERSION = 1

NOT_ENABLED_SAVE = ("Cannot save the checkpoint. The `enable_checkpointing` was not specified when creating the "
                    "pipeline")
NOT_ENABLED_RESTORE = ("Cannot restore checkpoint. The `enable_checkpointing` was not specified when creating the "
                       "pipeline")


def encode(seed, iteration, readers, pipeline_data, iterator_data="", excluded=()):
    return json.dumps({
        "format": FORMAT,
        "version": VERSION,
        "seed": seed,
        "iteration": iteration,
        "readers": [[name, samples] for name, samples in readers],
        "pipeline_data": pipeline_data,
        "iterator_data": iterator_data,
        # Samples on_error="skip" excluded, by reader: they stay excluded after a restore.
        "excluded": [[name, list(samples)] for name, samples in excluded],
    }, sort_keys=True).encode()


def decode(checkpoint):
    """The checkpoint's fields; RuntimeError for anything that is not a Sluice checkpoint."""
    from ._serialize import read_versioned

    return read_versioned(checkpoint, FORMAT, VERSION, "checkpoint", "pipe.checkpoint()", "Failed to deserialize checkpoint")
