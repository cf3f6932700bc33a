"""`DALIGenericIterator` for JAX and the `data_iterator` decorator (DALI 2.4's API)."""

import functools

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ...pipeline import pipeline_def
from ..base_iterator import LastBatchPolicy, _DaliBaseIterator
from .integration import _jax_device, _to_jax_array


def default_num_threads_value():
    """`num_threads` the decorator gives pipelines that do not set it."""
    return 4


class DALIGenericIterator(_DaliBaseIterator):
    """JAX iterator over one or more pipelines. Each `next()` returns a dict
    `{output name: jax.Array}` with the whole batch.

    Parameters
    ----------
    pipelines : Pipeline or list of Pipeline
        One pipeline, or one per device.
    output_map : list of str
        Names of the pipelines' outputs, in order.
    size : int, default = -1
        Samples in an epoch (over all pipelines); -1 with `reader_name` or when the
        pipeline's external source ends the epoch.
    reader_name : str, default = None
        Name of the reader whose shard sets the epoch's length (preferred over `size`).
    auto_reset : str or bool, default = False
        True / "yes": the iterator resets itself after an epoch; False / "no" / None: call
        `reset()`.
    last_batch_padded : bool, default = False
        Whether the last batch is padded (with `size`; a reader says it itself).
    last_batch_policy : LastBatchPolicy, default = FILL
        FILL or DROP; PARTIAL is not supported (JAX arrays have static shapes).
    prepare_first_batch : bool, default = True
        Run the pipelines at construction so the first batch is ready.
    sharding : jax.sharding.Sharding, default = None
        Assemble the pipelines' batches into one global array laid out by this sharding
        (batch axis split over the devices); each pipeline's output must be on its device.
    pmap_compatible : bool, default = None
        With several pipelines (or True), return arrays of shape (pipelines, batch, ...)
        split over the pipelines' devices, as `jax.pmap` expects.
    """

    def __init__(self, pipelines, output_map, size=-1, reader_name=None, auto_reset=False,
                 last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True,
                 sharding=None, pmap_compatible=None):
        if len(set(output_map)) != len(output_map):
            raise AssertionError("output_map names should be distinct")
        if sharding is not None and not isinstance(sharding, jax.sharding.Sharding):
            raise AssertionError("`sharding` should be an instance of `jax.sharding.Sharding`")
        assert last_batch_policy != LastBatchPolicy.PARTIAL, "JAX iterator does not support partial last batch policy."
        self.output_map = list(output_map)
        self._sharding = sharding
        self._pmap_compatible = pmap_compatible
        super().__init__(pipelines, size, reader_name, auto_reset, None, last_batch_padded, last_batch_policy,
                         prepare_first_batch=prepare_first_batch)

    def _next_batch(self):
        outputs = self._get_outputs()
        batch = {}
        for k, name in enumerate(self.output_map):
            shards = [_to_jax_array(outs[k].as_tensor(), copy=False) for outs in outputs]
            if len(shards) == 1 and self._sharding is None and not self._pmap_compatible:
                batch[name] = shards[0]
                continue
            if any(s.shape != shards[0].shape for s in shards):
                raise AssertionError("Shards shapes have to be the same.")
            batch[name] = self._with_sharding(shards) if self._sharding is not None else self._per_device(shards)
        self._schedule_runs()
        self._advance_and_check_drop_last()
        return batch

    def _with_sharding(self, shards):
        """One global array (devices * batch, ...) laid out by the user's sharding; JAX places
        each shard by its own device."""
        s = self._sharding
        n = s.mesh.size if isinstance(s, NamedSharding) else len(s.device_set)
        shape = (n * shards[0].shape[0],) + tuple(shards[0].shape[1:])
        return jax.make_array_from_single_device_arrays(shape, s, shards)

    def _per_device(self, shards):
        """(pipelines, batch, ...): split over the pipelines' devices, or stacked where they
        share one (CPU pipelines)."""
        devices = [_jax_device(s) for s in shards]
        if len(set(devices)) == 1:
            return jnp.stack(shards)
        if len(set(devices)) != len(devices):
            raise AssertionError("JAX iterator requires shards to be placed on different devices or all on the same "
                                 "device.")
        sharding = NamedSharding(Mesh(devices, ("device",)), PartitionSpec("device"))
        shape = (len(shards),) + tuple(shards[0].shape)
        return jax.make_array_from_single_device_arrays(shape, sharding, [jnp.expand_dims(s, 0) for s in shards])


def _data_iterator_impl(iterator_type, pipeline_fn=None, output_map=[], size=-1, reader_name=None,
                        auto_reset=False, last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL,
                        prepare_first_batch=True, sharding=None, devices=None, pmap_compatible=None):
    if sharding is not None and devices is not None:
        raise ValueError("Only one of `sharding` and `devices` arguments can be provided.")
    iterator_args = dict(output_map=output_map, size=size, reader_name=reader_name, auto_reset=auto_reset,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)

    def decorator(func):
        @functools.wraps(func)
        def create_iterator(*args, checkpoints=None, **kwargs):
            make = pipeline_def(func)
            kwargs.setdefault("num_threads", default_num_threads_value())
            if sharding is None and devices is None:
                kwargs.setdefault("device_id", 0)
                pipe = make(*args, checkpoint=checkpoints[0] if checkpoints else None, **kwargs)
                return iterator_type(pipe, **iterator_args, pmap_compatible=pmap_compatible)
            # One pipeline per device, each a shard of the data; the batch size given is
            # the global one.
            kwargs["batch_size"] = kwargs["batch_size"] // jax.device_count()
            if devices is not None and jax.local_device_count() != jax.device_count():
                raise RuntimeError("Iterator compatible with pmapped JAX functions does not support running in "
                                   "multiprocess mode. Use `sharding` argument instead.")
            use = devices if devices is not None else jax.local_devices()
            num_shards = len(devices) if devices is not None else jax.device_count()
            if checkpoints is not None and len(checkpoints) != len(use):
                raise RuntimeError(f"The number of checkpoints provided ({len(checkpoints)}) should match the number "
                                   f"of devices to use ({len(use)}).")
            pipes = [make(*args, **kwargs, device_id=i, shard_id=dev.id, num_shards=num_shards,
                          checkpoint=checkpoints[i] if checkpoints else None) for i, dev in enumerate(use)]
            if sharding is not None:
                return iterator_type(pipes, **iterator_args, sharding=sharding, pmap_compatible=pmap_compatible)
            return iterator_type(pipes, **iterator_args, pmap_compatible=True if pmap_compatible is None
                                 else pmap_compatible)

        return create_iterator

    return decorator(pipeline_fn) if pipeline_fn is not None else decorator


def data_iterator(pipeline_fn=None, output_map=[], size=-1, reader_name=None, auto_reset=False,
                  last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True,
                  sharding=None, devices=None, pmap_compatible=None):
    """Turns a pipeline function into a factory of JAX iterators: `@data_iterator(output_map=
    [...], reader_name=...)`, then `it = fn(batch_size=..., **pipeline_args)` (`checkpoints=`
    resumes). With `sharding` or `devices`, one pipeline per device, each called with
    `device_id` (local index), `shard_id` (the JAX device's id) and `num_shards`, and
    `batch_size` split over the devices. The other arguments are DALIGenericIterator's."""
    return _data_iterator_impl(DALIGenericIterator, pipeline_fn, output_map, size, reader_name, auto_reset,
                               last_batch_padded, last_batch_policy, prepare_first_batch, sharding, devices,
                               pmap_compatible)

