"""Sluice tensors as `jax.Array`s."""

import jax
import jax.dlpack


def _to_jax_array(tensor, copy):
    """A dense tensor (TensorCPU / TensorGPU) as a jax.Array through DLPack: on the GPU it
    lives on, or on JAX's first CPU device. `copy` gives JAX its own memory. As with any
    DLPack import into JAX, 64-bit types narrow to 32 bits unless `jax_enable_x64` is set."""
    cai = getattr(tensor, "__cuda_array_interface__", None)
    if cai is not None and cai["data"][0] % _XLA_ALIGNMENT:
        # XLA refuses device memory that is not 16-byte aligned (a sample of a batch of
        # small uint8 samples may start anywhere): such a sample reaches JAX as a copy
        # through the host, never as a view.
        import numpy as np

        _, ordinal = tensor.__dlpack_device__()
        device = next((d for d in jax.devices() if d.platform == "gpu" and getattr(d, "local_hardware_id", d.id) == ordinal),
                      None)
        return jax.device_put(np.asarray(tensor.as_cpu()), device)
    arr = jax.dlpack.from_dlpack(tensor)
    return arr.copy() if copy else arr


_XLA_ALIGNMENT = 16


def _jax_device(arr):
    devices = arr.devices()
    if len(devices) != 1:
        raise RuntimeError("The array must be associated with exactly one device")
    return next(iter(devices))
