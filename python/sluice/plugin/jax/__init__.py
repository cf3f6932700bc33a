"""JAX iterators with DALI's API (`nvidia.dali.plugin.jax`): `DALIGenericIterator` and the
`data_iterator` decorator. Batches become `jax.Array`s through DLPack, without a copy; the
batches of several pipelines (one per device) become one array, sharded over the devices.
`clu` users get the peekable variant from `sluice.plugin.jax.clu`."""

import jax

assert tuple(int(p) for p in jax.__version__.split(".")[:2]) >= (0, 6), "DALI JAX support requires JAX 0.6.0 or above"

from . import integration, iterator  # noqa: E402
from .iterator import DALIGenericIterator, data_iterator  # noqa: E402

__all__ = ["DALIGenericIterator", "data_iterator"]
