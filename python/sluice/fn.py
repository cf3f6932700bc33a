"""Functional operator API (`fn.readers.file(...)`, `fn.decoders.image(...)`, ...),
generated from the engine's operator schemas."""

import sys as _sys

from .ops_gen import populate_fn as _populate

_populate(_sys.modules[__name__])

# external_source is a Python operator around the engine's queue (see external_source.py).
from .external_source import external_source  # noqa: E402
from .python_function import dl_tensor_python_function, python_function, torch_python_function  # noqa: E402

from .ops_gen import _submodule  # noqa: E402
from .plugin.numba.fn.experimental import numba_function as _numba_function  # noqa: E402

_submodule(_sys.modules[__name__], ["experimental"]).numba_function = _numba_function
