"""Automatic augmentations (as `nvidia.dali.auto_aug`): AutoAugment, RandAugment and
TrivialAugment Wide with their published suites (`auto_augment`, `rand_augment`,
`trivial_augment`), the augmentations they use (`augmentations`), and the tools to build
your own (`core`: `@augmentation`, `Policy`, `select`, `signed_bin`). They branch per sample
with conditionals: the pipeline needs `enable_conditionals=True`."""

from . import augmentations, auto_augment, core, rand_augment, trivial_augment

__all__ = ["augmentations", "auto_augment", "core", "rand_augment", "trivial_augment"]
