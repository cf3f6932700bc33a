"""`Policy`: AutoAugment's sub-policies, validated."""

import warnings
from typing import Optional, Sequence, Tuple

from ._augmentation import Augmentation

SubPolicy = Sequence[Tuple[Augmentation, float, Optional[int]]]


class Policy:
    def __init__(self, name: str, num_magnitude_bins: int, sub_policies: Sequence[SubPolicy]):
        """An augmentation policy as AutoAugment (https://arxiv.org/abs/1805.09501) defines
        one: each sample takes one of `sub_policies` at random and goes through its stages in
        order; stage `(augmentation, probability, magnitude_bin)` is applied with
        `probability`, at that magnitude bin of `num_magnitude_bins` (`None` for
        augmentations without magnitudes). Run it with `auto_augment.apply_auto_augment`.
        """
        self.name = name
        self.num_magnitude_bins = num_magnitude_bins
        if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
            raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
        if not isinstance(sub_policies, (list, tuple)):
            raise Exception(
                f"The `sub_policies` must be a list or tuple of sub policies, got {type(sub_policies)}.")
        for sub_policy in sub_policies:
            if not isinstance(sub_policy, (list, tuple)):
                raise Exception(f"Each sub policy must be a list or tuple, got {sub_policy}.")
            for stage in sub_policy:
                self._check_stage(stage)
        self.sub_policies = _sub_policy_with_unique_names(sub_policies)

    def _check_stage(self, stage):
        if not isinstance(stage, (list, tuple)) or len(stage) != 3:
            raise Exception(
                f"Each operation in sub policy must be specified as a triple: "
                f"(augmentation, probability, magnitude). Got {stage}.")
        aug, p, mag = stage
        if not isinstance(aug, Augmentation):
            raise Exception(
                f"Each augmentation in sub policies must be an instance of Augmentation. Got `{aug}`. "
                f"Did you forget to use `@augmentation` decorator?")
        if not isinstance(p, (float, int)) or not 0 <= p <= 1:
            raise Exception(
                f"Probability of applying the augmentation must be a number from `[0, 1]` range. "
                f"Got `{p}` for augmentation `{aug.name}`.")
        if p == 0:
            warnings.warn(
                f"The augmentation `{aug.name}` in policy `{self.name}` is used with probability 0 in one of "
                f"the sub-policies.")
        if mag is None:
            if aug.mag_range is not None:
                raise Exception(
                    f"The augmentation `{aug.name}` has `mag_range` specified, so the magnitude bin is required. "
                    f"However, got `None` in the policy `{self.name}`.")
            return
        if aug.mag_range is None:
            warnings.warn(
                f"The magnitude bin `{mag}` for augmentation `{aug.name}` in policy `{self.name}` will be "
                f"ignored. The augmentation does not accept magnitudes (as it has no `mag_range` specified). "
                f"You can specify `None` instead of `{mag}` to silence this warning.")
        if not isinstance(mag, int) or not 0 <= mag < self.num_magnitude_bins:
            raise Exception(
                f"Magnitude of the augmentation must be an integer from `[0, {self.num_magnitude_bins - 1}]` "
                f"range. Got `{mag}` for augmentation `{aug.name}`.")

    @property
    def augmentations(self):
        """The policy's augmentations by name, sorted by name."""
        augs = {aug for sub_policy in self.sub_policies for aug, _, _ in sub_policy}
        return {aug.name: aug for aug in sorted(augs, key=lambda aug: aug.name)}

    def __repr__(self):
        subs = ",\n\t".join(repr([(aug.name, p, mag) for aug, p, mag in sub]) for sub in self.sub_policies)
        augs = ",\n\t".join(f"'{name}': {aug!r}" for name, aug in self.augmentations.items())
        return (f"Policy(name={self.name!r}, num_magnitude_bins={self.num_magnitude_bins!r}, "
                f"sub_policies=[{subs and chr(10) + chr(9)}{subs}], augmentations={{{augs and chr(10) + chr(9)}{augs}}})")


def _sub_policy_with_unique_names(sub_policies):
    """The sub-policies with distinct augmentations given distinct names (`0__name`,
    `1__name`, ... in order of first use) where two share a name, so a policy prints
    unambiguously; as tuples."""
    in_order = []
    for sub_policy in sub_policies:
        for aug, _, _ in sub_policy:
            if aug not in in_order:
                in_order.append(aug)
    if len({aug.name for aug in in_order}) == len(in_order):
        return tuple(tuple(sub_policy) for sub_policy in sub_policies)
    digits = len(str(len(in_order) - 1))
    renamed = {aug: aug.augmentation(name=f"{str(i).zfill(digits)}__{aug.name}") for i, aug in enumerate(in_order)}
    return tuple(tuple((renamed[aug], p, mag) for aug, p, mag in sub_policy) for sub_policy in sub_policies)
