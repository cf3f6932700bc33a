"""Which keyword arguments an augmentation takes.

An augmentation is a plain function `op(data, parameter, **extra)`. The suites pass every
extra keyword (`shape`, `fill_value`, `interp_type`, ...) to every augmentation; each one gets
the keywords its signature names, so one call site serves augmentations with different needs.
"""

import inspect

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POSITIONAL = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY)


class MissingArgException(Exception):
    """An augmentation needs a keyword (e.g. `shape`) that the call did not give."""

    def __init__(self, message, augmentation, missing_args):
        super().__init__(message)
        self.augmentation = augmentation
        self.missing_args = missing_args


class UnusedArgException(Exception):
    """A keyword given to a suite that none of its augmentations takes (most likely a typo)."""

    def __init__(self, message, unused_args):
        super().__init__(message)
        self.unused_args = unused_args


def _extra_params(fun, skip_positional):
    """`fun`'s parameters that can be given by name, past the first `skip_positional`
    positional ones (the data and the magnitude parameter)."""
    params = []
    for i, param in enumerate(inspect.signature(fun).parameters.values()):
        if i < skip_positional and param.kind in _POSITIONAL:
            continue
        if param.kind in _NAMED:
            params.append(param)
    return params


def filter_extra_accepted_kwargs(fun, kwargs, skip_positional=0):
    """The part of `kwargs` that `fun` accepts by name."""
    names = {p.name for p in _extra_params(fun, skip_positional)}
    return {k: v for k, v in kwargs.items() if k in names}


def get_required_kwargs(fun, skip_positional=0):
    """Names of `fun`'s named parameters without a default."""
    return [p.name for p in _extra_params(fun, skip_positional) if p.default is inspect.Parameter.empty]


def get_num_positional_args(fun):
    return sum(1 for p in inspect.signature(fun).parameters.values() if p.kind in _POSITIONAL)


def get_missing_kwargs(fun, kwargs, skip_positional=0):
    return [name for name in get_required_kwargs(fun, skip_positional) if name not in kwargs]


def filter_unused_args(augmentations, kwargs):
    used = set()
    for aug in augmentations:
        used.update(filter_extra_accepted_kwargs(aug.op, kwargs, 2))
    return [name for name in kwargs if name not in used]


def forbid_unused_kwargs(augmentations, kwargs, call_name):
    unused = filter_unused_args(augmentations, kwargs)
    if not unused:
        return
    subject, verb = ("kwarg", "is") if len(unused) == 1 else ("kwargs", "are")
    raise UnusedArgException(
        f"The {call_name} got unexpected {subject}. The {subject} `{', '.join(unused)}` {verb} "
        f"not used by any of the augmentations.",
        unused_args=unused,
    )
