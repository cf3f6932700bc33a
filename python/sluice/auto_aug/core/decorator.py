"""The `@augmentation` decorator."""

from typing import Callable, Optional, Tuple, Type, Union

import numpy as np

from ._augmentation import Augmentation


def augmentation(
    function: Optional[Callable] = None,
    *,
    mag_range: Optional[Union[Tuple[float, float], np.ndarray]] = None,
    randomly_negate: Optional[bool] = None,
    mag_to_param: Optional[Callable[[float], np.ndarray]] = None,
    param_device: Optional[str] = None,
    name: Optional[str] = None,
    augmentation_cls: Optional[Type[Augmentation]] = None,
):
    """Turns `function(data, parameter, **extra)`, written with Sluice operators, into an
    augmentation the suites (auto_augment, rand_augment, trivial_augment) can use. The
    decorated augmentation is called with `magnitude_bin` and `num_magnitude_bins` instead of
    the parameter, which it computes as `mag_to_param(magnitudes[bin] * (-1) ** sign)`.

    Args:
        mag_range: `(low, high)`, the ends of `linspace(low, high, num_magnitude_bins)`, or
            an array of the magnitudes themselves. Without it the parameter is `None`.
        randomly_negate: negate the magnitude at random, per sample.
        mag_to_param: magnitude -> parameter, in NumPy (no pipeline operators): the
            parameters of all magnitudes are computed once and kept as a constant. Every
            magnitude must give the same shape and type.
        param_device: "cpu" (default), "gpu", or "auto" (the device of the data).
        name: the augmentation's name (default: the function's).
    """

    def decorate(fun):
        return (augmentation_cls or Augmentation)(
            fun, mag_range=mag_range, mag_to_param=mag_to_param, randomly_negate=randomly_negate,
            param_device=param_device, name=name)

    if function is None:
        return decorate
    if not callable(function):
        raise Exception(
            f"The `@augmentation` decorator was used to decorate the object that is not callable: {function}.")
    if isinstance(function, Augmentation):
        raise Exception(
            f"The `@augmentation` was applied to already decorated Augmentation. Please call "
            f"`{function.name}.augmentation` method to modify the augmentation setup or apply the decorator "
            f"to the underlying `{function.name}.op` directly.\nError in augmentation: {function}.")
    return decorate(function)
