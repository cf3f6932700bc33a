"""Sluice's exceptions. The classes are made by the engine from its one error taxonomy
(`sluice::error::ErrorKind`): every one is a `SluiceError`, which is a `RuntimeError` as
DALI's errors are, and each also derives from the built-in class Python code expects
(`ArgumentError` is a `ValueError`, `UnknownArgumentError` a `KeyError` and a `TypeError`,
`ArgumentTypeError` a `TypeError` and a `ValueError`, ...), so code written for DALI and
idiomatic code both catch them. A data source that runs dry raises `StopIteration`."""

from . import _core

SluiceError = _core.SluiceError
__all__ = sorted(name for name, value in vars(_core).items()
                 if isinstance(value, type) and issubclass(value, SluiceError))
globals().update({name: getattr(_core, name) for name in __all__})
