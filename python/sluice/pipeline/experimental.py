"""`sluice.pipeline.experimental`: where DALI keeps its experimental `pipeline_def`, which
adds `debug=True` (see `_debug`: every operator runs at once, its output inspectable)."""

import functools

from . import _PIPELINE_KWARGS
from . import pipeline_def as _pipeline_def


def pipeline_def(fn=None, *, debug=False, **pipeline_kwargs):
    """`pipeline_def`, plus `debug=True`: the function runs every iteration with each
    operator executed at once (`DataNodeDebug.get()` gives its batch). `debug` (like the
    other pipeline arguments) may also be given when the pipeline is made, as in DALI.
    With `enable_conditionals=True` a debug pipeline's `if` on a DataNode runs each branch
    at once on its share of the samples."""

    def decorator(func):
        compiled = _pipeline_def(func, **pipeline_kwargs)

        @functools.wraps(func)
        def create_pipeline(*args, **kwargs):
            if not kwargs.pop("debug", debug):
                return compiled(*args, **kwargs)
            from ._debug import DebugPipeline

            ctor = dict(pipeline_kwargs)
            for k in list(kwargs):
                if k in _PIPELINE_KWARGS or k == "enable_conditionals":
                    ctor[k] = kwargs.pop(k)
            return DebugPipeline(func, args, kwargs, **ctor)

        create_pipeline._is_pipeline_def = True
        return create_pipeline

    return decorator(fn) if fn is not None else decorator


__all__ = ["pipeline_def"]
