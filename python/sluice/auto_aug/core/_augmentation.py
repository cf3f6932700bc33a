"""`Augmentation`: a transformation with a magnitude range, and `signed_bin`.

An augmentation is called with a magnitude *bin* instead of its parameter. The parameter of
every bin (`mag_to_param(magnitude)` for each magnitude of the range, both signs where the
magnitude may be negated) is computed once, in NumPy, when the pipeline is defined, and kept
as a constant table; the pipeline only looks the table up by each sample's bin. So a random
magnitude costs one gather per batch, and `mag_to_param` may be any Python.
"""

import warnings
from typing import Callable, Optional, Tuple, Union

import numpy as np

from ... import fn, types
from ...pipeline import DataNode as _DataNode
from ._args import (
    MissingArgException,
    filter_extra_accepted_kwargs,
    get_missing_kwargs,
    get_num_positional_args,
)


class _UndefinedParam:
    """Default of `Augmentation.augmentation`'s keywords: "keep the current value", which
    `None` cannot mean because `None` is a value the keywords take."""


class _SignedMagnitudeBin:
    """A magnitude bin together with a random sign per sample (0: as is, 1: negated).

    The sign is drawn once, before a suite splits the batch among its augmentations, so each
    branch does not draw its own. `signed_magnitude_idx = 2 * bin + sign` indexes the table
    of signed parameters `[p(m0), p(-m0), p(m1), p(-m1), ...]`.
    """

    def __init__(self, magnitude_bin, random_sign, signed_magnitude_idx):
        self._magnitude_bin = magnitude_bin
        self._random_sign = random_sign
        self._signed_magnitude_idx = signed_magnitude_idx

    def __getitem__(self, idx: int):
        """The bin of stage `idx` when one sample goes through several augmentations in a
        row (the signs were drawn with `shape=(stages,)`)."""
        magnitude_bin = self._magnitude_bin if isinstance(self._magnitude_bin, int) else self._magnitude_bin[idx]
        return type(self)(magnitude_bin, self._random_sign[idx], self._signed_magnitude_idx[idx])

    @classmethod
    def create_from_bin(cls, magnitude_bin, random_sign=None, seed=None, shape=None):
        if not isinstance(magnitude_bin, (int, _DataNode)):
            raise Exception(
                f"The `magnitude_bin` must be an int or _DataNode (output of DALI op or `types.Constant`) "
                f"representing batch of ints from `[0..num_magnitude_bins-1]` range. Got {magnitude_bin} instead.")
        if random_sign is not None and (seed is not None or shape is not None):
            raise Exception("The `random_sign` cannot be specified together with neither `seed` nor `shape`.")
        if random_sign is None:
            random_sign = fn.random.uniform(values=[0, 1], dtype=types.INT32, seed=seed, shape=shape)
        # Computed here, at the top of the pipeline, not inside whichever branch reads it
        # first: a node made inside a branch would only exist for that branch's samples.
        return cls(magnitude_bin, random_sign, 2 * magnitude_bin + random_sign)

    @staticmethod
    def _remap_to_signed_magnitudes(magnitudes):
        signed = np.empty(2 * len(magnitudes), dtype=np.asarray(magnitudes).dtype)
        signed[0::2] = magnitudes
        signed[1::2] = -np.asarray(magnitudes)
        return signed

    @property
    def bin(self):
        return self._magnitude_bin

    @property
    def random_sign(self):
        return self._random_sign

    @property
    def signed_magnitude_idx(self):
        return self._signed_magnitude_idx


def signed_bin(
    magnitude_bin: Union[int, _DataNode],
    random_sign: Optional[_DataNode] = None,
    seed: Optional[int] = None,
    shape: Optional[Tuple] = None,
) -> _SignedMagnitudeBin:
    """`magnitude_bin` with a random sign per sample, for augmentations declared with
    `randomly_negate=True`. Call it before splitting the batch among augmentations, so the
    sign is drawn once for the batch rather than once per branch.

    Args:
        magnitude_bin: an int, or a batch of ints in `[0, num_magnitude_bins - 1]`.
        random_sign: a batch of 0 / 1 ints (1 negates); drawn with `seed` and `shape` when
            not given.
    """
    return _SignedMagnitudeBin.create_from_bin(magnitude_bin, random_sign, seed, shape)


class Augmentation:
    """A transformation usable by the automatic augmentation suites. Made by the
    `@augmentation` decorator, not directly."""

    def __init__(
        self,
        op: Callable[..., _DataNode],
        mag_range: Optional[Union[Tuple[float, float], np.ndarray]] = None,
        randomly_negate: Optional[bool] = None,
        mag_to_param: Optional[Callable[[float], np.ndarray]] = None,
        param_device: Optional[str] = None,
        name: Optional[str] = None,
    ):
        self._op = op
        self._mag_range = mag_range
        self._randomly_negate = randomly_negate
        self._mag_to_param = mag_to_param
        self._param_device = param_device
        self._name = name
        if get_num_positional_args(op) <= 1:
            raise Exception(
                f"The {op} accepts {get_num_positional_args(op)} positional argument(s), but the functions "
                f"decorated with `@augmentation` must accept at least two positional arguments: the samples "
                f"and parameters.\nError in: {self}.")

    def __repr__(self):
        params = [f"{k}={v!r}" for k, v in self._get_config().items() if v is not None]
        return f"Augmentation({', '.join([repr(self.op)] + params)})"

    def __call__(self, data: _DataNode, *, magnitude_bin=None, num_magnitude_bins: Optional[int] = None, **kwargs):
        """`self.op(data, param, **accepted_kwargs)` with `param` the parameter of
        `magnitude_bin`: `mag_to_param(magnitudes[bin] * (-1) ** sign)`, where `magnitudes`
        is `linspace(*mag_range, num_magnitude_bins)` (or `mag_range` itself when it is an
        array). Keywords the op's signature does not name are ignored."""
        param = self._get_param(magnitude_bin, num_magnitude_bins, self._infer_param_device(data))
        missing = get_missing_kwargs(self.op, kwargs, 2)
        if missing:
            raise MissingArgException(
                f"The augmentation `{self.name}` requires following named argument(s) which were "
                f"not provided to the call: {', '.join(missing)}. Please make sure to pass the "
                f"required arguments when calling the augmentation.",
                augmentation=self, missing_args=missing)
        return self.op(data, param, **filter_extra_accepted_kwargs(self.op, kwargs, 2))

    @property
    def op(self):
        return self._op

    @property
    def mag_range(self):
        return self._mag_range

    @property
    def mag_to_param(self):
        return self._mag_to_param or np.array

    @property
    def randomly_negate(self):
        return bool(self._randomly_negate)

    @property
    def param_device(self):
        return self._param_device or "cpu"

    @property
    def name(self):
        return self._name or self.op.__name__

    def augmentation(self, mag_range=_UndefinedParam, randomly_negate=_UndefinedParam, mag_to_param=_UndefinedParam,
                     param_device=_UndefinedParam, name=_UndefinedParam, augmentation_cls=None):
        """A copy of this augmentation (same op) with the given settings changed."""
        config = self._get_config()
        changes = dict(mag_range=mag_range, randomly_negate=randomly_negate, mag_to_param=mag_to_param,
                       param_device=param_device, name=name)
        config.update({k: v for k, v in changes.items() if v is not _UndefinedParam})
        return (augmentation_cls or type(self))(self.op, **config)

    def _get_config(self):
        return {
            "mag_range": self._mag_range,
            "mag_to_param": self._mag_to_param,
            "randomly_negate": self._randomly_negate,
            "param_device": self._param_device,
            "name": self._name,
        }

    def _infer_param_device(self, data):
        if self.param_device != "auto":
            return self.param_device
        return getattr(data, "device", None) or "cpu"

    def _has_custom_magnitudes(self):
        return isinstance(self.mag_range, np.ndarray)

    def _map_mag_to_param(self, magnitude):
        param = self.mag_to_param(magnitude)
        if _contains_data_node(param):
            raise Exception(
                f"The `mag_to_param` callback of `{self.name}` augmentation returned `DataNode`, i.e. an output "
                f"of a pipelined operator, which is not supported there: the `mag_to_param` callback must "
                f"return parameter that is `np.ndarray` or something convertible to `np.ndarray`, so that the "
                f"parameters of all magnitudes are computed once and reused across iterations. Move the "
                f"operators into the decorated augmentation instead.\n\nError in augmentation: {self}.")
        return np.array(param)

    def _map_mags_to_params(self, magnitudes):
        params = [self._map_mag_to_param(m) for m in magnitudes]
        for param, mag in zip(params[1:], magnitudes[1:]):
            if param.shape != params[0].shape or param.dtype != params[0].dtype:
                raise Exception(
                    f"The `mag_to_param` callback of `{self.name}` augmentation must return the arrays of the "
                    f"same type and shape for different magnitudes. Got param of shape {params[0].shape} and "
                    f"{params[0].dtype} type for magnitude {magnitudes[0]}, but for magnitude {mag} the returned "
                    f"array has shape {param.shape} and type {param.dtype}.\n\nError in augmentation: {self}.")
        return np.array(params)

    def _get_magnitudes(self, num_magnitude_bins):
        mag_range = self.mag_range
        if mag_range is None:
            return None
        if self._has_custom_magnitudes():
            if num_magnitude_bins is not None and len(mag_range) != num_magnitude_bins:
                raise Exception(
                    f"The augmentation `{self.name}` has nd.array of length {len(mag_range)} specified as the "
                    f"`mag_range`. However, the `num_magnitude_bins` passed to the call is {num_magnitude_bins}.")
            return mag_range
        if num_magnitude_bins is None:
            raise Exception(
                f"The `num_magnitude_bins` argument is missing in the call of the `{self.name}` augmentation. "
                f"Please specify the `num_magnitude_bins` along with the samples and magnitude_bin."
                f"\nError in augmentation: {self}.")
        if not hasattr(mag_range, "__len__") or len(mag_range) != 2:
            raise Exception(
                f"The `mag_range` must be a tuple of (low, high) ends of magnitude range or nd.array of "
                f"explicitly defined magnitudes. Got `{self.mag_range}` for augmentation `{self.name}`.")
        lo, hi = mag_range
        return np.linspace(lo, hi, num_magnitude_bins, dtype=np.float32)

    def _lookup(self, params, index, param_device):
        """Row `index` of the parameter table, per sample. For a gpu parameter the table is
        looked up on the cpu, where the indices are, and the picked rows copied up."""
        picked = types.Constant(params)[index]
        return picked.gpu() if param_device == "gpu" else picked

    def _get_param(self, magnitude_bin, num_magnitude_bins, param_device):
        magnitudes = self._get_magnitudes(num_magnitude_bins)
        if magnitudes is None:
            return None
        if magnitude_bin is None:
            raise Exception(
                f"The augmentation `{self.name}` has `mag_range` specified, so when called, it requires "
                f"`magnitude_bin` parameter to select the magnitude from the `mag_range`."
                f"\nError in augmentation: {self}.")
        if self.randomly_negate:
            if not isinstance(magnitude_bin, _SignedMagnitudeBin):
                magnitude_bin = signed_bin(magnitude_bin)
                warnings.warn(
                    f"The augmentation `{self.name}` was declared with `random_negate=True`, but unsigned "
                    f"`magnitude_bin` was passed to the augmentation call. The augmentation will randomly negate "
                    f"the magnitudes manually. However, for better performance, if you conditionally split batch "
                    f"between multiple augmentations, it is better to call "
                    f"`signed_magnitude_bin = signed_bin(magnitude_bin)` before the split and pass the signed "
                    f"bins instead.", Warning)
            if isinstance(magnitude_bin.bin, int):
                # One magnitude for the whole batch: a two-row table, picked by the sign.
                magnitudes, index = [magnitudes[magnitude_bin.bin]], magnitude_bin.random_sign
            else:
                index = magnitude_bin.signed_magnitude_idx
            params = self._map_mags_to_params(_SignedMagnitudeBin._remap_to_signed_magnitudes(magnitudes))
            return self._lookup(params, index, param_device)
        # Not negated: a sign that came with the bin (for the suite's other augmentations) is
        # not used here.
        bin_idx = magnitude_bin.bin if isinstance(magnitude_bin, _SignedMagnitudeBin) else magnitude_bin
        if isinstance(bin_idx, int):
            return types.Constant(self._map_mag_to_param(magnitudes[bin_idx]), device=param_device)
        return self._lookup(self._map_mags_to_params(magnitudes), bin_idx, param_device)


def _contains_data_node(obj):
    if isinstance(obj, (tuple, list)):
        return any(_contains_data_node(el) for el in obj)
    return isinstance(obj, _DataNode)
