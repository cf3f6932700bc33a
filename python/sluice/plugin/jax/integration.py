"""Sluice tensors as `jax.Array`s."""

import jax
import jax.dlpack


def _to_jax_array(tensor, copy):
    """A dense tensor (TensorCPU / TensorGPU) as a jax.Array through DLPack: on the GPU it
    lives on, or on JAX's first CPU device. `copy` gives JAX its own memory. As with any
    DLPack import into JAX, 64-bit types narrow to 32 bits unless `jax_enable_x64` is set."""
    arr = jax.dlpack.from_dlpack(tensor)
    return arr.copy() if copy else arr


def _jax_device(arr):
    devices = arr.devices()
    if len(devices) != 1:
        raise RuntimeError("The array must be associated with exactly one device")
    return next(iter(devices))
