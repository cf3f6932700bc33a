"""`sluice.pipeline.experimental`: where DALI keeps its experimental `pipeline_def`. Sluice's
`pipeline_def` is the same decorator (debug mode arrives with issue 17)."""

from . import pipeline_def

__all__ = ["pipeline_def"]
