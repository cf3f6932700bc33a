"""AutoAugment (https://arxiv.org/abs/1805.09501): its four published policies and
`apply_auto_augment` for any `Policy` (as `nvidia.dali.auto_aug.auto_augment`)."""

from typing import List, Optional, Tuple, Union

import numpy as np

from .. import fn, types
from . import augmentations as a
from .core import Policy, _Augmentation, signed_bin
from .core._args import forbid_unused_kwargs as _forbid_unused_kwargs
from .core._utils import get_translations as _get_translations, pretty_select as _pretty_select


def auto_augment(data, policy_name: str = "image_net", shape=None, fill_value: Optional[int] = 128, interp_type=None,
                 max_translate_abs: Optional[int] = None, max_translate_rel: Optional[float] = None,
                 seed: Optional[int] = None):
    """Applies one of AutoAugment's policies to a batch of uint8 images (HWC) or videos
    (FHWC). The pipeline needs `enable_conditionals=True`.

    Args:
        policy_name: `image_net` (default), `reduced_image_net`, `svhn` or `reduced_cifar10`.
        shape: the (H, W) of each image or frame (a DataNode or a tuple); with it,
            translations reach `max_translate_rel` (default 1) of the size, without it
            `max_translate_abs` pixels (default 250). Either may be a (height, width) pair.
        fill_value: the value of pixels warped in from outside (translations, shears,
            rotations); `None` repeats the border.
        interp_type: `types.INTERP_LINEAR` (default) or `types.INTERP_NN` for the warps.
        seed: the seed of the choice of sub-policies, stages and signs.
    """
    policies = {
        "image_net": get_image_net_policy,
        "reduced_image_net": get_reduced_image_net_policy,
        "svhn": get_svhn_policy,
        "reduced_cifar10": get_reduced_cifar10_policy,
    }
    if not isinstance(policy_name, str) or policy_name not in policies:
        names = ", ".join(f"`{name}`" for name in policies)
        raise Exception(f"The `policy_name` must be a string that takes one of the values: {names}")
    if policy_name == "reduced_image_net":
        for value, arg in ((shape, "shape"), (max_translate_abs, "max_translate_abs"),
                           (max_translate_rel, "max_translate_rel")):
            if value is not None:
                raise Exception(
                    f"The policy `{policy_name}` does not contain any augmentations that rely on the image shape. "
                    f"The `{arg}` argument must not be specified in that case.")
        policy = get_reduced_image_net_policy()
    else:
        policy = policies[policy_name](use_shape=shape is not None, max_translate_abs=max_translate_abs,
                                       max_translate_rel=max_translate_rel)
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    return apply_auto_augment(policy, data, seed, **kwargs)


def auto_augment_image_net(data, shape=None, fill_value: Optional[int] = 128, interp_type=None,
                           max_translate_abs: Optional[int] = None, max_translate_rel: Optional[float] = None,
                           seed: Optional[int] = None):
    """`auto_augment` with the `image_net` policy."""
    return auto_augment(data, "image_net", shape, fill_value, interp_type, max_translate_abs, max_translate_rel, seed)


def apply_auto_augment(policy: Policy, data, seed: Optional[int] = None, **kwargs):
    """Runs `policy` AutoAugment's way: each sample takes a sub-policy uniformly at random,
    then each of its stages with the stage's probability. `kwargs` go to the augmentations
    whose signatures name them (`shape`, `fill_value`, `interp_type` for the default ones);
    one no augmentation takes is an error."""
    if len(policy.sub_policies) == 0:
        raise Exception(f"Cannot run empty policy. Got {policy} in `apply_auto_augment` call.")
    stages = max(len(sub_policy) for sub_policy in policy.sub_policies)
    # Drawn for the whole batch before any split: one draw per sample and stage.
    should_run = fn.random.uniform(range=[0, 1], shape=(stages,), dtype=types.FLOAT, seed=seed)
    sub_policy_id = fn.random.uniform(values=list(range(len(policy.sub_policies))), seed=seed, dtype=types.INT32)
    probabilities, magnitude_bins, aug_ids, stage_augments = _policy_tables(policy)
    run_probabilities = types.Constant(probabilities)[sub_policy_id]
    magnitude_bins = types.Constant(magnitude_bins)[sub_policy_id]
    aug_ids = types.Constant(aug_ids)[sub_policy_id]
    if any(aug.randomly_negate for aug in policy.augmentations.values()):
        magnitude_bins = signed_bin(magnitude_bins, seed=seed, shape=(stages,))
    _forbid_unused_kwargs(policy.augmentations.values(), kwargs, "apply_auto_augment")
    for stage in range(stages):
        if should_run[stage] < run_probabilities[stage]:
            op_kwargs = dict(data=data, magnitude_bin=magnitude_bins[stage],
                             num_magnitude_bins=policy.num_magnitude_bins, **kwargs)
            data = _pretty_select(stage_augments[stage], aug_ids[stage], op_kwargs,
                                  auto_aug_name="apply_auto_augment", ref_suite_name="get_image_net_policy")
    return data


def _sub_policy_to_augmentation_matrix_map(policy: Policy) -> Tuple[np.ndarray, List[List[_Augmentation]]]:
    """`(matrix, augments)`: `augments[stage]` lists the distinct augmentations used at that
    stage, ending with the identity (for sub-policies shorter than the longest), and
    `matrix[sub_policy, stage]` indexes it. The per-stage lists keep each `select` as small
    as the stage allows."""
    subs = policy.sub_policies
    stages = max(len(sub) for sub in subs)
    augments = []
    for stage in range(stages):
        augs = []
        for sub in subs:
            if stage < len(sub) and sub[stage][0] not in augs:
                augs.append(sub[stage][0])
        augments.append(augs + [a.identity])
    matrix = np.array([[len(augs) - 1 for augs in augments]] * len(subs), dtype=np.int32)
    for i, sub in enumerate(subs):
        for stage, (aug, _, _) in enumerate(sub):
            matrix[i, stage] = augments[stage].index(aug)
    return matrix, augments


def _policy_tables(policy: Policy):
    """Per sub-policy and stage: the probability of running (0 past a sub-policy's end), the
    magnitude bin (0 where the augmentation takes none: never read), and the augmentation
    (see `_sub_policy_to_augmentation_matrix_map`)."""
    subs = policy.sub_policies
    stages = max(len(sub) for sub in subs)
    probabilities = np.zeros((len(subs), stages), dtype=np.float32)
    magnitude_bins = np.zeros((len(subs), stages), dtype=np.int32)
    for i, sub in enumerate(subs):
        for stage, (_, p, mag) in enumerate(sub):
            probabilities[i, stage] = p
            magnitude_bins[i, stage] = 0 if mag is None else mag
    return (probabilities, magnitude_bins) + _sub_policy_to_augmentation_matrix_map(policy)


def _translations(use_shape, max_translate_abs, max_translate_rel):
    return _get_translations(use_shape, 250, 1.0, max_translate_abs, max_translate_rel)


def get_image_net_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                         max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's ImageNet policy. `use_shape`: translations relative to the image
    shape (up to `max_translate_rel`, default 1) rather than in pixels (up to
    `max_translate_abs`, default 250)."""
    _, translate_y = _translations(use_shape, max_translate_abs, max_translate_rel)
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    color = a.color.augmentation((0.1, 1.9), False, None)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    solarize_add = a.solarize_add.augmentation((0, 110), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ImageNetPolicy", num_magnitude_bins=11, sub_policies=[
        [(equalize, 0.8, None), (shear_y, 0.8, 4)],
        [(color, 0.4, 9), (equalize, 0.6, None)],
        [(color, 0.4, 1), (rotate, 0.6, 8)],
        [(solarize, 0.8, 3), (equalize, 0.4, None)],
        [(solarize, 0.4, 2), (solarize, 0.6, 2)],
        [(color, 0.2, 0), (equalize, 0.8, None)],
        [(equalize, 0.4, None), (solarize_add, 0.8, 3)],
        [(shear_x, 0.2, 9), (rotate, 0.6, 8)],
        [(color, 0.6, 1), (equalize, 1.0, None)],
        [(invert, 0.4, None), (rotate, 0.6, 0)],
        [(equalize, 1.0, None), (shear_y, 0.6, 3)],
        [(color, 0.4, 7), (equalize, 0.6, None)],
        [(posterize, 0.4, 6), (auto_contrast, 0.4, None)],
        [(solarize, 0.6, 8), (color, 0.6, 9)],
        [(solarize, 0.2, 4), (rotate, 0.8, 9)],
        [(rotate, 1.0, 7), (translate_y, 0.8, 9)],
        [(solarize, 0.8, 4)],
        [(shear_y, 0.8, 0), (color, 0.6, 4)],
        [(color, 1.0, 0), (rotate, 0.6, 2)],
        [(equalize, 0.8, None)],
        [(equalize, 1.0, None), (auto_contrast, 0.6, None)],
        [(shear_y, 0.4, 7), (solarize_add, 0.6, 7)],
        [(posterize, 0.8, 2), (solarize, 0.6, 10)],
        [(solarize, 0.6, 8), (equalize, 0.6, None)],
        [(color, 0.8, 6), (rotate, 0.4, 5)],
    ])


def get_reduced_cifar10_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                               max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's reduced CIFAR-10 policy (translations as in `get_image_net_policy`)."""
    translate_x, translate_y = _translations(use_shape, max_translate_abs, max_translate_rel)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    brightness = a.brightness.augmentation((0.1, 1.9), False, None)
    color = a.color.augmentation((0.1, 1.9), False, None)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    sharpness = a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ReducedCifar10Policy", num_magnitude_bins=11, sub_policies=[
        [(invert, 0.1, None), (contrast, 0.2, 6)],
        [(rotate, 0.7, 2), (translate_x, 0.3, 9)],
        [(sharpness, 0.8, 1), (sharpness, 0.9, 3)],
        [(shear_y, 0.5, 8), (translate_y, 0.7, 9)],
        [(auto_contrast, 0.5, None), (equalize, 0.9, None)],
        [(shear_y, 0.2, 7), (posterize, 0.3, 7)],
        [(color, 0.4, 3), (brightness, 0.6, 7)],
        [(sharpness, 0.3, 9), (brightness, 0.7, 9)],
        [(equalize, 0.6, None), (equalize, 0.5, None)],
        [(contrast, 0.6, 7), (sharpness, 0.6, 5)],
        [(color, 0.7, 7), (translate_x, 0.5, 8)],
        [(equalize, 0.3, None), (auto_contrast, 0.4, None)],
        [(translate_y, 0.4, 3), (sharpness, 0.2, 6)],
        [(brightness, 0.9, 6), (color, 0.2, 8)],
        [(solarize, 0.5, 2)],
        [(equalize, 0.2, None), (auto_contrast, 0.6, None)],
        [(equalize, 0.2, None), (equalize, 0.6, None)],
        [(color, 0.9, 9), (equalize, 0.6, None)],
        [(auto_contrast, 0.8, None), (solarize, 0.2, 8)],
        [(brightness, 0.1, 3), (color, 0.7, 0)],
        [(solarize, 0.4, 5), (auto_contrast, 0.9, None)],
        [(translate_y, 0.9, 9), (translate_y, 0.7, 9)],
        [(auto_contrast, 0.9, None), (solarize, 0.8, 3)],
        [(equalize, 0.8, None), (invert, 0.1, None)],
        [(translate_y, 0.7, 9), (auto_contrast, 0.9, None)],
    ])


def get_svhn_policy(use_shape: bool = False, max_translate_abs: Optional[int] = None,
                    max_translate_rel: Optional[float] = None) -> Policy:
    """AutoAugment's SVHN policy (translations as in `get_image_net_policy`)."""
    translate_x, translate_y = _translations(use_shape, max_translate_abs, max_translate_rel)
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="SvhnPolicy", num_magnitude_bins=11, sub_policies=[
        [(shear_x, 0.9, 4), (invert, 0.2, None)],
        [(shear_y, 0.9, 8), (invert, 0.7, None)],
        [(equalize, 0.6, None), (solarize, 0.6, 6)],
        [(invert, 0.9, None), (equalize, 0.6, None)],
        [(equalize, 0.6, None), (rotate, 0.9, 3)],
        [(shear_x, 0.9, 4), (auto_contrast, 0.8, None)],
        [(shear_y, 0.9, 8), (invert, 0.4, None)],
        [(shear_y, 0.9, 5), (solarize, 0.2, 6)],
        [(invert, 0.9, None), (auto_contrast, 0.8, None)],
        [(equalize, 0.6, None), (rotate, 0.9, 3)],
        [(shear_x, 0.9, 4), (solarize, 0.3, 3)],
        [(shear_y, 0.8, 8), (invert, 0.7, None)],
        [(equalize, 0.9, None), (translate_y, 0.6, 6)],
        [(invert, 0.9, None), (equalize, 0.6, None)],
        [(contrast, 0.3, 3), (rotate, 0.8, 4)],
        [(invert, 0.8, None)],
        [(shear_y, 0.7, 6), (solarize, 0.4, 8)],
        [(invert, 0.6, None), (rotate, 0.8, 4)],
        [(shear_y, 0.3, 7), (translate_x, 0.9, 3)],
        [(shear_x, 0.1, 6), (invert, 0.6, None)],
        [(solarize, 0.7, 2), (translate_y, 0.6, 7)],
        [(shear_y, 0.8, 4), (invert, 0.8, None)],
        [(shear_x, 0.7, 9), (translate_y, 0.8, 3)],
        [(shear_y, 0.8, 5), (auto_contrast, 0.7, None)],
        [(shear_x, 0.7, 2), (invert, 0.1, None)],
    ])


def get_reduced_image_net_policy() -> Policy:
    """AutoAugment's reduced ImageNet policy (no translations)."""
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    color = a.color.augmentation((0.1, 1.9), False, None)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    sharpness = a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ReducedImageNetPolicy", num_magnitude_bins=11, sub_policies=[
        [(posterize, 0.4, 8), (rotate, 0.6, 9)],
        [(solarize, 0.6, 5), (auto_contrast, 0.6, None)],
        [(equalize, 0.8, None), (equalize, 0.6, None)],
        [(posterize, 0.6, 7), (posterize, 0.6, 6)],
        [(equalize, 0.4, None), (solarize, 0.2, 4)],
        [(equalize, 0.4, None), (rotate, 0.8, 8)],
        [(solarize, 0.6, 3), (equalize, 0.6, None)],
        [(posterize, 0.8, 5), (equalize, 1.0, None)],
        [(rotate, 0.2, 3), (solarize, 0.6, 8)],
        [(equalize, 0.6, None), (posterize, 0.4, 6)],
        [(rotate, 0.8, 8), (color, 0.4, 0)],
        [(rotate, 0.4, 9), (equalize, 0.6, None)],
        [(equalize, 0.8, None)],
        [(invert, 0.6, None), (equalize, 1.0, None)],
        [(color, 0.6, 4), (contrast, 1.0, 8)],
        [(rotate, 0.8, 8), (color, 1.0, 2)],
        [(color, 0.8, 8), (solarize, 0.8, 7)],
        [(sharpness, 0.4, 7), (invert, 0.6, None)],
        [(shear_x, 0.6, 5), (equalize, 1.0, None)],
        [(color, 0.4, 0), (equalize, 0.6, None)],
        [(equalize, 0.4, None), (solarize, 0.2, 4)],
        [(solarize, 0.6, 5), (auto_contrast, 0.6, None)],
        [(invert, 0.6, None), (equalize, 1.0, None)],
        [(color, 0.6, 4), (contrast, 1.0, 8)],
        [(equalize, 0.8, None), (equalize, 0.6, None)],
    ])
