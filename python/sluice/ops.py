"""Legacy object API (`ops.FileReader(...)`, `ops.decoders.Image(...)`, ...), generated from
the engine's operator schemas."""

import sys as _sys

from .ops_gen import populate_ops as _populate

_populate(_sys.modules[__name__])

from .external_source import ExternalSource  # noqa: E402
from .python_function import DLTensorPythonFunction, PythonFunction, TorchPythonFunction  # noqa: E402
