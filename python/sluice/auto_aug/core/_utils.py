"""What the suites share: translations by pixels or by a fraction of the image, and `select`
with a helpful error when a translation needs the image shape."""

from typing import List, Optional

from .. import augmentations as a
from ._args import MissingArgException
from ._augmentation import Augmentation
from ._select import select


def max_translate_hw(max_translate):
    """`(height, width)` limits from one number or a pair."""
    if isinstance(max_translate, (tuple, list)):
        height, width = max_translate
        return height, width
    return max_translate, max_translate


def parse_validate_offset(use_shape, max_translate_abs=None, max_translate_rel=None, default_translate_abs=250,
                          default_translate_rel=1.0):
    # A DataNode given here (e.g. shapes) would otherwise fail with a vague error later.
    if not isinstance(use_shape, bool):
        raise Exception(f"The `use_shape` is a flag that should be set to either True or False, got {use_shape}.")
    if use_shape:
        if max_translate_abs is not None:
            raise Exception("The argument `max_translate_abs` cannot be used with image shapes. "
                            "You may use `max_translate_rel` instead.")
        return max_translate_hw(default_translate_rel if max_translate_rel is None else max_translate_rel)
    if max_translate_rel is not None:
        raise Exception("The argument `max_translate_rel` cannot be used without image shapes. "
                        "You may use `max_translate_abs` instead.")
    return max_translate_hw(default_translate_abs if max_translate_abs is None else max_translate_abs)


def get_translations(use_shape: bool, default_translate_abs: int, default_translate_rel: float,
                     max_translate_abs: Optional[int] = None, max_translate_rel: Optional[float] = None):
    """`[translate_x, translate_y]` reaching `max_translate_*`: relative to the image shape
    (`use_shape`) or in pixels."""
    max_h, max_w = parse_validate_offset(use_shape, max_translate_abs, max_translate_rel, default_translate_abs,
                                         default_translate_rel)
    x, y = (a.translate_x, a.translate_y) if use_shape else (a.translate_x_no_shape, a.translate_y_no_shape)
    return [x.augmentation((0, max_w), True), y.augmentation((0, max_h), True)]


def pretty_select(augmentations: List[Augmentation], aug_ids, op_kwargs, auto_aug_name: str, ref_suite_name: str):
    """`select`, explaining what to do when a translation by a fraction of the image was
    not given the image shape."""
    try:
        return select(augmentations, aug_ids, **op_kwargs)
    except MissingArgException as e:
        if e.missing_args != ["shape"] or e.augmentation.op not in (a.translate_x.op, a.translate_y.op):
            raise
        raise Exception(
            f"The augmentation `{e.augmentation.name}` requires `shape` argument that describes image shape (in HWC "
            f"layout). Please provide it as `shape` argument to `{auto_aug_name}` call. You can get the image shape "
            f"from encoded images with `fn.peek_image_shape`. Alternatively, you can use "
            f"`translate_x_no_shape`/`translate_y_no_shape` that does not rely on image shape, but uses offset from "
            f"fixed range: for reference see `{ref_suite_name}` and its `use_shape` argument. ") from None
