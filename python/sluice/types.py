"""Data types, image types, interpolation types and layouts, numbered as DALI numbers them
so that `from sluice import types` is a drop-in for `from nvidia.dali import types`."""

from enum import IntEnum

import numpy as np


class DALIDataType(IntEnum):
    """Element type of a tensor."""

    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11
    STRING = 12


class DALIImageType(IntEnum):
    """Color space of decoded images (the decoders' `output_type`)."""

    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(IntEnum):
    """Interpolation used by resampling operators."""

    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


class TensorLayout(str):
    """A layout string such as "HWC"; one letter per dimension."""


class SampleInfo:
    """What a per-sample `external_source` callback is told: the sample's index in the
    epoch and in its batch, the iteration (in the epoch) and the epoch."""

    def __init__(self, idx_in_epoch, idx_in_batch, iteration, epoch_idx):
        self.idx_in_epoch = idx_in_epoch
        self.idx_in_batch = idx_in_batch
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    @property
    def iter_idx(self):
        """The iteration, as DALI's documents name it (`iteration` in DALI 2.4)."""
        return self.iteration

    def __repr__(self):
        return (f"SampleInfo(idx_in_epoch={self.idx_in_epoch}, idx_in_batch={self.idx_in_batch}, "
                f"iteration={self.iteration}, epoch_idx={self.epoch_idx})")


class BatchInfo:
    """What a batch `external_source` callback is told with `batch_info=True`: the
    iteration (in the epoch) and the epoch."""

    def __init__(self, iteration, epoch_idx):
        self.iteration = iteration
        self.epoch_idx = epoch_idx

    def __repr__(self):
        return f"BatchInfo(iteration={self.iteration}, epoch_idx={self.epoch_idx})"


class ScalarConstant:
    """A scalar constant with a type (DALI's `types.ScalarConstant`): usable as an
    operator argument, in arithmetic with DataNodes, and as a pipeline output."""

    def __init__(self, value, dtype=None):
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            raise TypeError(f"ScalarConstant needs a bool, int or float, got {type(value).__name__}")
        if dtype is None:
            dtype = DALIDataType.BOOL if isinstance(value, bool) else (
                DALIDataType.INT32 if isinstance(value, int) else DALIDataType.FLOAT)
        self.dtype = DALIDataType(dtype)
        self.value = bool(value) if self.dtype == DALIDataType.BOOL else (
            float(value) if self.dtype in (DALIDataType.FLOAT, DALIDataType.FLOAT64, DALIDataType.FLOAT16) else int(value))

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)

    def __repr__(self):
        return f"{self.value}:{self.dtype.name}"


def Constant(value, dtype=None, shape=None, layout=None, device=None, **kwargs):
    """DALI's `types.Constant`: a scalar becomes a `ScalarConstant` (unless a shape, layout
    or device is given); anything else a `fn.constant` node holding the array."""
    if shape is None and layout is None and device is None and not kwargs and (
            isinstance(value, (bool, int, float)) or (isinstance(value, np.generic))):
        return ScalarConstant(value, dtype)
    from .ops_gen import make_node

    arr = np.asarray(value)
    if dtype is not None:
        arr = arr.astype(to_numpy_type(dtype))
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    data = {"fdata" if arr.dtype.kind == "f" else "idata": arr.ravel().tolist()}
    args = dict(kwargs, shape=list(arr.shape) if shape is None else list(np.atleast_1d(shape)),
                dtype=from_numpy_type(arr.dtype), layout=layout)
    return make_node("Constant", [], dict(data, **args), device=device)


# Module-level names, as DALI exports them.
globals().update({m.name: m for m in DALIDataType})
globals().update({m.name: m for m in DALIImageType})
globals().update({m.name: m for m in DALIInterpType})
NHWC = "HWC"
NCHW = "CHW"
NFHWC = "FHWC"
NFCHW = "FCHW"
SAME = ""
CPU_ONLY_DEVICE_ID = None

_TO_NUMPY = {
    DALIDataType.UINT8: np.uint8,
    DALIDataType.UINT16: np.uint16,
    DALIDataType.UINT32: np.uint32,
    DALIDataType.UINT64: np.uint64,
    DALIDataType.INT8: np.int8,
    DALIDataType.INT16: np.int16,
    DALIDataType.INT32: np.int32,
    DALIDataType.INT64: np.int64,
    DALIDataType.FLOAT16: np.float16,
    DALIDataType.FLOAT: np.float32,
    DALIDataType.FLOAT64: np.float64,
    DALIDataType.BOOL: np.bool_,
}


def to_numpy_type(dtype):
    """NumPy type of a DALIDataType."""
    return _TO_NUMPY[DALIDataType(dtype)]


def from_numpy_type(np_type):
    """DALIDataType of a NumPy dtype."""
    np_type = np.dtype(np_type).type
    for k, v in _TO_NUMPY.items():
        if v == np_type:
            return k
    raise TypeError(f"no DALI data type for NumPy type {np_type}")
