"""The augmentations of AutoAugment (ImageNet policy), RandAugment and TrivialAugmentWide,
written with Sluice operators (as `nvidia.dali.auto_aug.augmentations`).

Each is an `Augmentation` (see `core.augmentation`): called with `magnitude_bin` and
`num_magnitude_bins`, it computes its parameter from the magnitude. The ranges below are
examples; the suites set their own, e.g. `shear_x.augmentation(mag_range=(0, 0.5))`.
Samples are uint8 images (HWC) or videos (FHWC), as the suites expect.
"""

import numpy as np

from .. import fn, types
from .core import augmentation


def warp_x_param(magnitude):
    return [magnitude, 0]


def warp_y_param(magnitude):
    return [0, magnitude]


def _warp(data, matrix, fill_value, interp_type):
    # The transforms map source to destination; warp_affine inverts them (inverse_map=False).
    return fn.warp_affine(data, matrix=matrix, fill_value=fill_value, interp_type=interp_type, inverse_map=False)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_x_param)
def shear_x(data, shear, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_y_param)
def shear_y(data, shear, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_x_param)
def translate_x(data, rel_offset, shape, fill_value=128, interp_type=None):
    """Shifts by a fraction of the width; `shape` is the (H, W, ...) shape of the image or
    frame, a DataNode (e.g. `fn.peek_image_shape`) or a tuple."""
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[1]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_x_param, name="translate_x")
def translate_x_no_shape(data, offset, fill_value=128, interp_type=None):
    """Shifts by a number of pixels."""
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_y_param)
def translate_y(data, rel_offset, shape, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[0]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_y_param, name="translate_y")
def translate_y_no_shape(data, offset, fill_value=128, interp_type=None):
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0, 30), randomly_negate=True)
def rotate(data, angle, fill_value=128, interp_type=None, rotate_keep_size=True):
    return fn.rotate(data, angle=angle, fill_value=fill_value, interp_type=interp_type, keep_size=rotate_keep_size)


def shift_enhance_range(magnitude):
    """PIL's enhancements (brightness, contrast, color, sharpness) take factors in [0, 2]
    with 1 the identity, so a magnitude m in [0, 1], randomly negated, becomes 1 + m."""
    return 1 + magnitude


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def brightness(data, parameter):
    return fn.brightness(data, brightness=parameter)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def contrast(data, parameter):
    """PIL's contrast: away from (or towards) the image's mean luma. Written as arithmetic
    rather than `fn.contrast(contrast_center=...)`: on the GPU the centre is a GPU tensor,
    which a named argument cannot take. HWC or FHWC."""
    channel_means = fn.reductions.mean(data, axis_names="HW", keep_dims=True)
    luma_weights = types.Constant(np.array([0.299, 0.587, 0.114], dtype=np.float32))
    center = fn.reductions.sum(channel_means * luma_weights, axis_names="C", keep_dims=True)
    return fn.cast_like(center + (data - center) * parameter, data)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def color(data, parameter):
    return fn.saturation(data, saturation=parameter)


def sharpness_kernel(magnitude):
    """PIL's sharpness as one 3x3 kernel: the identity plus `magnitude` times (identity -
    PIL's SMOOTH kernel), for magnitudes in [-1, 1]."""
    smooth = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=np.float32) / 13
    identity = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=np.float32)
    return (1 + magnitude) * identity - magnitude * smooth


def sharpness_kernel_shifted(magnitude):
    """`sharpness_kernel` for PIL's factors in [0, 2]."""
    return sharpness_kernel(magnitude - 1)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=sharpness_kernel)
def sharpness(data, kernel):
    """PIL's ImageEnhance.Sharpness, except for the 1-pixel frame, which PIL copies from the
    input (it filters valid positions only) and this filters with reflected borders.
    The kernel is read on the host by both backends, so it stays on the cpu."""
    return fn.filter(data, kernel)


def poster_mask_uint8(magnitude):
    """The mask keeping the top `magnitude` bits of each uint8 (1 to 8: 0 would blank the
    image, so it keeps one bit, as the RandAugment paper's implementation does)."""
    bits = int(np.clip(np.round(magnitude), 1, 8))
    return np.array(0xFF & ~((1 << (8 - bits)) - 1), dtype=np.uint8)


@augmentation(mag_range=(0, 4), mag_to_param=poster_mask_uint8, param_device="auto")
def posterize(data, mask):
    return data & mask


@augmentation(mag_range=(256, 0), param_device="auto")
def solarize(data, threshold):
    """Inverts the values at or above `threshold`: x ^ 255 is 255 - x for uint8."""
    return data ^ ((data >= threshold) * types.Constant(255, dtype=types.UINT8))


def solarize_add_shift(shift):
    if shift >= 128:
        raise Exception("The solarize_add augmentation accepts shifts from 0 to 128")
    return np.uint8(shift)


@augmentation(mag_range=(0, 110), param_device="auto", mag_to_param=solarize_add_shift)
def solarize_add(data, shift):
    """Adds `shift` to the values below 128 (which stay below 256: no wrap)."""
    return data + (data < types.Constant(128, dtype=types.UINT8)) * shift


@augmentation
def invert(data, _):
    return types.Constant(255, dtype=types.UINT8) - data


@augmentation
def equalize(data, _):
    """OpenCV's histogram equalisation (PIL's look-up table differs slightly)."""
    return fn.equalize(data)


@augmentation
def auto_contrast(data, _):
    """Stretches each channel to [0, 255] (HWC or FHWC); a flat channel is left as it is."""
    lo = fn.reductions.min(data, axis_names="HW", keep_dims=True)
    hi = fn.reductions.max(data, axis_names="HW", keep_dims=True)
    stretch = hi > lo
    # 255 / (hi - lo) where the channel spans a range, else 1 (and nothing subtracted).
    scale = 255 / ((hi - lo) * stretch + (stretch ^ True) * types.Constant(255, dtype=types.UINT8))
    return fn.cast_like((data - lo * stretch) * scale, data)


@augmentation
def identity(data, _):
    return data
