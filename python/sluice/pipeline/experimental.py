"""`sluice.pipeline.experimental`: where DALI keeps its experimental `pipeline_def`, which
adds `debug=True` (see `_debug`: every operator runs at once, its output inspectable)."""

import functools

from . import _PIPELINE_KWARGS
from . import pipeline_def as _pipeline_def


def pipeline_def(fn=None, *, debug=False, **pipeline_kwargs):
    """`pipeline_def`, plus `debug=True`: the function runs every iteration with each
    operator executed at once (`DataNodeDebug.get()` gives its batch)."""

    def decorator(func):
        if not debug:
            return _pipeline_def(func, **pipeline_kwargs)
        if pipeline_kwargs.get("enable_conditionals"):
            raise NotImplementedError("debug mode with enable_conditionals=True is not supported yet by Sluice")

        @functools.wraps(func)
        def create_pipeline(*args, **kwargs):
            from ._debug import DebugPipeline

            ctor = dict(pipeline_kwargs)
            for k in list(kwargs):
                if k in _PIPELINE_KWARGS:
                    ctor[k] = kwargs.pop(k)
            return DebugPipeline(func, args, kwargs, **ctor)

        return create_pipeline

    return decorator(fn) if fn is not None else decorator


__all__ = ["pipeline_def"]
