"""`sluice.data_node`: where DALI keeps `DataNode`."""

from .pipeline import DataNode

__all__ = ["DataNode"]
