"""`sluice.backend`: where DALI keeps its tensor classes. `TensorCPU` and `TensorListCPU`
are constructible from NumPy arrays, lists of arrays and DLPack, as DALI's."""

from .tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
