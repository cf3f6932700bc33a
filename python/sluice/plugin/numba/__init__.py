"""`sluice.plugin.numba`: where DALI keeps `fn.experimental.numba_function` (also at
`sluice.fn.experimental.numba_function`). Importing it does not import Numba; calling the
function does."""

from . import fn  # noqa: F401
