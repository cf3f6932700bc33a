"""`select`: each sample through the augmentation its index names."""

from typing import List

from ._augmentation import Augmentation


def select(ops: List[Augmentation], selected_op_idx, *op_args, **op_kwargs):
    """`ops[selected_op_idx](*op_args, **op_kwargs)` per sample: the batch is split (with
    conditionals, so the pipeline must have `enable_conditionals=True`) by halving the list
    of ops, so each op runs once, on the samples that chose it, after log2(len(ops)) splits.
    Other DataNodes in `op_kwargs` are split along with the data."""

    def pick(lo, hi):
        if lo == hi:
            return ops[lo](*op_args, **op_kwargs)
        mid = (lo + hi) // 2
        if selected_op_idx <= mid:
            return pick(lo, mid)
        else:
            return pick(mid + 1, hi)

    return pick(0, len(ops) - 1)
