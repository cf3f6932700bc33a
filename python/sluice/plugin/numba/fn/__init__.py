"""`sluice.plugin.numba.fn`: see `experimental`."""

from . import experimental  # noqa: F401
