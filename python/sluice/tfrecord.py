"""`sluice.tfrecord`, as `nvidia.dali.tfrecord`: the feature types of `fn.readers.tfrecord`
(`FixedLenFeature`, `VarLenFeature`, TensorFlow's equivalents) and their element types."""

int64 = 0
string = 1
float32 = 2

_TYPE_NAMES = {int64: "int64", string: "string", float32: "float32"}


class Feature:
    """A TFRecord feature to read. Use `FixedLenFeature` and `VarLenFeature` to make one."""

    __slots__ = ("fixed", "shape", "dtype", "default_value")

    def __init__(self, fixed, shape, dtype, default_value):
        if dtype not in _TYPE_NAMES:
            raise TypeError(f"feature type must be sluice.tfrecord.int64, float32 or string, got {dtype!r}")
        self.fixed, self.shape, self.dtype, self.default_value = fixed, [int(e) for e in shape], dtype, default_value

    def __repr__(self):
        kind = "FixedLenFeature" if self.fixed else "VarLenFeature"
        return f"{kind}({self.shape}, {_TYPE_NAMES[self.dtype]}, {self.default_value!r})"


def _checked_default(dtype, value):
    """DALI's rule: the default value is given, and of the feature's type (a list of them
    for a shaped feature)."""
    want = {int64: int, float32: float, string: str}[dtype]
    values = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, want) and not isinstance(v, bool) for v in values):
        from .errors import ArgumentTypeError  # a RuntimeError too, as DALI raises

        raise ArgumentTypeError(f"Invalid type for default value: a {_TYPE_NAMES[dtype]} feature's default must be a "
                                f"{want.__name__}, got {value!r}")
    return value


def FixedLenFeature(shape, dtype, default_value, /):
    """Equivalent of TensorFlow's FixedLenFeature: every record holds `shape`'s number of
    values (for `string`: one value, whose bytes are the output); a record without the
    feature gives `default_value`."""
    if dtype not in _TYPE_NAMES:
        raise TypeError(f"feature type must be sluice.tfrecord.int64, float32 or string, got {dtype!r}")
    return Feature(True, list(shape) if isinstance(shape, (list, tuple)) else [shape], dtype,
                   _checked_default(dtype, default_value))


def VarLenFeature(*args):
    """Equivalent of TensorFlow's VarLenFeature: `VarLenFeature(dtype, default_value)`, a
    1-D output of the record's values; or `VarLenFeature(partial_shape, dtype, default_value)`,
    the values reshaped to `[n, *partial_shape]`. A record without the feature gives no values."""
    if len(args) == 2:
        dtype, default = args
        partial = []
    elif len(args) == 3:
        partial, dtype, default = args
    else:
        raise TypeError("VarLenFeature(dtype, default_value) or VarLenFeature(partial_shape, dtype, default_value)")
    if dtype not in _TYPE_NAMES:
        raise TypeError(f"feature type must be sluice.tfrecord.int64, float32 or string, got {dtype!r}")
    return Feature(False, list(partial), dtype, _checked_default(dtype, default))


def engine_args(kwargs):
    """The reader's `features` dictionary as the engine's `_feature_*` lists (names in the
    dictionary's order); `path` and `index_path` as lists. Returns (kwargs, names)."""
    kwargs = dict(kwargs)
    features = kwargs.pop("features", None)
    if not isinstance(features, dict):
        raise TypeError("readers.tfrecord: `features` must be a dictionary of feature names to "
                        "sluice.tfrecord.FixedLenFeature / VarLenFeature")
    for key in ("path", "index_path"):
        if isinstance(kwargs.get(key), str):
            kwargs[key] = [kwargs[key]]
    names = list(features)
    for name, f in features.items():
        if not isinstance(f, Feature):
            raise TypeError(f'Expected `sluice.tfrecord.Feature` for the "{name}", but got {type(f)}. Use '
                            "`sluice.tfrecord.FixedLenFeature` or `sluice.tfrecord.VarLenFeature` to define the "
                            "features to extract.")

    def default(f):
        if f.default_value is None:
            return ""
        v = f.default_value
        if f.dtype == string:
            return "v:" + (v.decode("latin1") if isinstance(v, bytes) else str(v))
        values = list(v) if isinstance(v, (list, tuple)) or hasattr(v, "tolist") and getattr(v, "ndim", 0) else [v]
        return "v:" + ",".join(repr(float(x)) if f.dtype == float32 else str(int(x)) for x in values)

    kwargs.update(
        _feature_names=names,
        _feature_kinds=["fixed" if f.fixed else "var" for f in features.values()],
        _feature_types=[_TYPE_NAMES[f.dtype] for f in features.values()],
        _feature_shapes=[",".join(str(e) for e in f.shape) for f in features.values()],
        _feature_defaults=[default(f) for f in features.values()],
    )
    return kwargs, names


__all__ = ["int64", "string", "float32", "Feature", "FixedLenFeature", "VarLenFeature"]
