"""Sluice: GPU-accelerated data loading and preprocessing with NVIDIA DALI's Python API.

    from sluice import pipeline_def, Pipeline, fn, ops, types
"""

from . import _core
from . import errors
from .pipeline import DataNode, Pipeline, pipeline_def
from . import types
from . import fn
from . import ops
from . import math
from . import tfrecord
# Attributes of the package after a plain `import nvidia.dali`, as programs use them
# (`dali.backend.TensorCPU`).
from . import backend, data_node
from .tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

__version__ = _core.__version__

__all__ = ["errors", "DataNode", "Pipeline", "pipeline_def", "fn", "ops", "types", "TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
