"""The building blocks of automatic augmentations: `@augmentation`, `signed_bin`, `select`
and `Policy` (as `nvidia.dali.auto_aug.core`)."""

from ._augmentation import Augmentation as _Augmentation, signed_bin
from ._select import select
from .decorator import augmentation
from .policy import Policy

__all__ = ("signed_bin", "augmentation", "select", "Policy", "_Augmentation")
