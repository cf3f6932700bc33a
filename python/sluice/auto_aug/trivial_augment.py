"""TrivialAugment Wide (https://arxiv.org/abs/2103.10158): one augmentation per sample,
picked uniformly at random, at a random magnitude bin (as
`nvidia.dali.auto_aug.trivial_augment`)."""

from typing import List, Optional

from .. import fn, types
from . import augmentations as a
from .core import _Augmentation, signed_bin
from .core._args import forbid_unused_kwargs as _forbid_unused_kwargs
from .core._utils import get_translations as _get_translations, pretty_select as _pretty_select
from .rand_augment import _exclude


def trivial_augment_wide(data, num_magnitude_bins: int = 31, shape=None, fill_value: Optional[int] = 128,
                         interp_type=None, max_translate_abs: Optional[int] = None,
                         max_translate_rel: Optional[float] = None, seed: Optional[int] = None,
                         excluded: Optional[List[str]] = None):
    """Applies TrivialAugment Wide to a batch of uint8 images (HWC) or videos (FHWC). The
    pipeline needs `enable_conditionals=True`. Arguments as in `rand_augment.rand_augment`
    (translations default to 32 pixels, or the whole size with `shape`)."""
    augmentations = get_trivial_augment_wide_suite(use_shape=shape is not None, max_translate_abs=max_translate_abs,
                                                   max_translate_rel=max_translate_rel)
    selected = _exclude(augmentations, excluded, "TrivialAugmentWide")
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    return apply_trivial_augment(selected, data, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def apply_trivial_augment(augmentations: List[_Augmentation], data, num_magnitude_bins: int = 31,
                          seed: Optional[int] = None, **kwargs):
    """TrivialAugment over any list of augmentations: one per sample, picked uniformly at
    random, at a magnitude bin drawn uniformly from `num_magnitude_bins`."""
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
    if len(augmentations) == 0:
        raise Exception("The `augmentations` list cannot be empty. Got empty list in `apply_trivial_augment` call.")
    magnitude_bin = fn.random.uniform(values=list(range(num_magnitude_bins)), dtype=types.INT32, seed=seed)
    if any(aug.randomly_negate for aug in augmentations):
        magnitude_bin = signed_bin(magnitude_bin, seed=seed)
    _forbid_unused_kwargs(augmentations, kwargs, "apply_trivial_augment")
    op_kwargs = dict(data=data, magnitude_bin=magnitude_bin, num_magnitude_bins=num_magnitude_bins, **kwargs)
    op_idx = fn.random.uniform(values=list(range(len(augmentations))), seed=seed, dtype=types.INT32)
    return _pretty_select(augmentations, op_idx, op_kwargs, auto_aug_name="apply_trivial_augment",
                          ref_suite_name="get_trivial_augment_wide_suite")


def get_trivial_augment_wide_suite(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                                   max_translate_rel: Optional[float] = None) -> List[_Augmentation]:
    """TrivialAugment Wide's augmentations and ranges."""
    return _get_translations(use_shape, 32, 1.0, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.99), True),
        a.shear_y.augmentation((0, 0.99), True),
        a.rotate.augmentation((0, 135), True),
        a.brightness.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.contrast.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.color.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.sharpness.augmentation((0.01, 0.99), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 2), False, a.poster_mask_uint8),
        # A lower threshold solarizes more: the strength grows as the threshold falls.
        a.solarize.augmentation((256, 0)),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]
