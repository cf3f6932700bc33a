"""RandAugment (https://arxiv.org/abs/1909.13719): `n` augmentations picked uniformly at
random per sample, all at magnitude bin `m` (as `nvidia.dali.auto_aug.rand_augment`)."""

import warnings
from typing import List, Optional

from .. import fn, types
from . import augmentations as a
from .core import _Augmentation, signed_bin
from .core._args import forbid_unused_kwargs as _forbid_unused_kwargs
from .core._utils import get_translations as _get_translations, pretty_select as _pretty_select


def rand_augment(data, n: int, m: int, num_magnitude_bins: int = 31, shape=None, fill_value: Optional[int] = 128,
                 interp_type=None, max_translate_abs: Optional[int] = None, max_translate_rel: Optional[float] = None,
                 seed: Optional[int] = None, monotonic_mag: bool = True, excluded: Optional[List[str]] = None):
    """Applies RandAugment to a batch of uint8 images (HWC) or videos (FHWC). The pipeline
    needs `enable_conditionals=True`.

    Args:
        n: augmentations applied to each sample, one after another.
        m: the magnitude bin, in `[0, num_magnitude_bins - 1]`.
        shape, fill_value, interp_type, max_translate_abs, max_translate_rel, seed: as in
            `auto_augment.auto_augment` (translations default to 100 pixels, or 100/224 of
            the size with `shape`).
        monotonic_mag: the suite whose strength grows with the magnitude (default), or the
            original one (`get_rand_augment_non_monotonic_suite`).
        excluded: names of augmentations to leave out of the suite.
    """
    suite = get_rand_augment_suite if monotonic_mag else get_rand_augment_non_monotonic_suite
    augmentations = suite(shape is not None, max_translate_abs, max_translate_rel)
    selected = _exclude(augmentations, excluded, "RandAugment")
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    return apply_rand_augment(selected, data, n, m, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def _exclude(augmentations, excluded, suite_name):
    names = [aug.name for aug in augmentations]
    for name in excluded or []:
        if name not in names:
            raise Exception(
                f"The `{name}` was specified in `excluded`, but the {suite_name} suite does not contain "
                f"augmentation with this name. The augmentations in the suite are: {', '.join(names)}.")
    return [aug for aug in augmentations if aug.name not in (excluded or [])]


def apply_rand_augment(augmentations: List[_Augmentation], data, n: int, m: int, num_magnitude_bins: int = 31,
                       seed: Optional[int] = None, **kwargs):
    """RandAugment over any list of augmentations: each sample goes through `n` of them,
    each picked uniformly at random (repeats allowed), at magnitude bin `m`. `kwargs` go to
    the augmentations whose signatures name them."""
    if not isinstance(n, int) or n < 0:
        raise Exception(f"The number of operations to apply `n` must be a non-negative integer, got {n}.")
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
    if not isinstance(m, int) or not 0 <= m < num_magnitude_bins:
        raise Exception(f"The magnitude bin `m` must be an integer from `[0, {num_magnitude_bins - 1}]` range. "
                        f"Got {m}.")
    if n == 0:
        warnings.warn("The `apply_rand_augment` was called with `n=0`, no augmentation will be applied.", Warning)
        return data
    if len(augmentations) == 0:
        raise Exception("The `augmentations` list cannot be empty, unless n=0. "
                        "Got empty list in `apply_rand_augment` call.")
    # One draw per sample (and level, for n > 1), for the whole batch before any split.
    shape = () if n == 1 else (n,)
    op_idx = fn.random.uniform(values=list(range(len(augmentations))), seed=seed, shape=shape, dtype=types.INT32)
    signed = any(aug.randomly_negate for aug in augmentations)
    mag_bin = signed_bin(m, seed=seed, shape=shape) if signed else m
    _forbid_unused_kwargs(augmentations, kwargs, "apply_rand_augment")
    for level in range(n):
        op_kwargs = dict(data=data, magnitude_bin=mag_bin if not signed or n == 1 else mag_bin[level],
                         num_magnitude_bins=num_magnitude_bins, **kwargs)
        data = _pretty_select(augmentations, op_idx if n == 1 else op_idx[level], op_kwargs,
                              auto_aug_name="apply_rand_augment", ref_suite_name="get_rand_augment_suite")
    return data


def _translations(use_shape, max_translate_abs, max_translate_rel):
    return _get_translations(use_shape, 100, 100 / 224, max_translate_abs, max_translate_rel)


def get_rand_augment_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                           max_translate_rel: Optional[float] = None) -> List[_Augmentation]:
    """RandAugment's augmentations, with magnitudes whose strength grows with the bin."""
    return _translations(use_shape, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
        # A lower threshold solarizes more: the strength grows as the threshold falls.
        a.solarize.augmentation((256, 0)),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


def get_rand_augment_non_monotonic_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                                         max_translate_rel: Optional[float] = None) -> List[_Augmentation]:
    """RandAugment's augmentations with the original paper's ranges, where some (brightness,
    contrast, color, sharpness: factors 0.1 to 1.9) are weakest mid-range."""
    return _translations(use_shape, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0.1, 1.9), False, None),
        a.contrast.augmentation((0.1, 1.9), False, None),
        a.color.augmentation((0.1, 1.9), False, None),
        a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((0, 256), False, None),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]
