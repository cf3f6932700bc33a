"""`fn.one_hot` against DALI 2.4's cpu operator: DALI's test_one_hot.py cases (3-D inputs
with every axis, scalars, legacy one-element "scalars", layouts with and without
`axis_name`), output and input types, classes out of range and negative (no error, as
DALI), on/off values cast to the output type; errors naming the operator and argument,
the pipeline still usable; gpu equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402

NUM_CLASSES = 20
rng = np.random.default_rng(42)


def _both(data, layout, **kwargs):
    """Runs one_hot of `data` (a list of arrays) in Sluice and DALI; returns both outputs."""
    outs = []
    for mod_fn, mod_types, pdef in ((fn, types, pipeline_def), (dfn, dtypes, dali.pipeline_def)):
        kw = {k: (getattr(mod_types, v) if k == "dtype" else v) for k, v in kwargs.items()}

        @pdef(batch_size=len(data), num_threads=2, device_id=None)
        def p():
            x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
            return mod_fn.one_hot(x, **kw)

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run()[0])
    return outs


def _check(data, layout=None, **kwargs):
    a, b = _both(data, layout, **kwargs)
    assert a.layout() == b.layout(), (a.layout(), b.layout())
    for i in range(len(data)):
        x, y = np.array(a.at(i)), np.array(b.at(i))
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_array_equal(x, y)
    return a


def _tensors3d():
    return [rng.integers(0, NUM_CLASSES, size=rng.integers(2, 8, size=3), dtype=np.int32) for _ in range(10)]


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, 3])
@pytest.mark.parametrize("layout, axis_name", [("ABC", "O"), (None, None), ("ABC", None)])
def test_one_hot_3d_matches_dali(axis, layout, axis_name):
    kw = dict(num_classes=NUM_CLASSES, axis=axis, dtype="INT32")
    if axis_name:
        kw["axis_name"] = axis_name
    _check(_tensors3d(), layout, **kw)


def test_one_hot_scalars_match_dali():
    data = [np.array(v, dtype=np.int32) for v in rng.integers(0, NUM_CLASSES, size=10)]
    out = _check(data, None, num_classes=NUM_CLASSES, axis_name="O", dtype="INT32")
    assert out.layout() == "O"


@pytest.mark.parametrize("nested", [1, 2, 3, 4])
@pytest.mark.parametrize("axis_name", ["O", None])
def test_one_hot_legacy_scalars_match_dali(nested, axis_name):
    """Without `axis`, one-element samples of any dimensions are scalars: the output is 1-D."""
    data = [np.array([v], dtype=np.int32).reshape((1,) * nested) for v in rng.integers(0, NUM_CLASSES, size=10)]
    kw = dict(num_classes=NUM_CLASSES, dtype="INT32")
    if axis_name:
        kw["axis_name"] = axis_name
    out = _check(data, "ABCD"[:nested], **kw)
    assert np.array(out.at(0)).shape == (NUM_CLASSES,)


def test_one_element_samples_with_an_axis_keep_their_dimensions():
    data = [np.array([[v]], dtype=np.int32) for v in range(4)]
    out = _check(data, None, num_classes=5, axis=-1)
    assert np.array(out.at(0)).shape == (1, 1, 5)


@pytest.mark.parametrize("in_type", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("out_type", ["UINT8", "INT8", "INT16", "UINT32", "INT64", "FLOAT", "FLOAT64"])
def test_types_match_dali(in_type, out_type):
    vals = [0, 1, 2, 3, 4, 5, 9]
    if np.issubdtype(in_type, np.signedinteger) or np.issubdtype(in_type, np.floating):
        vals += [-1, -3]
    if np.issubdtype(in_type, np.floating):
        vals += [2.7, 0.5, 3.999]  # truncated: classes 2, 0, 3 (-0.5 would also be 0 in DALI)
    data = [np.array(vals, dtype=in_type).reshape(-1, 1), np.array(vals[::-1], dtype=in_type).reshape(1, -1)]
    _check(data, None, num_classes=5, dtype=out_type, on_value=7.9, off_value=-2.5, axis=1)


def test_negative_classes_and_classes_past_num_classes_mark_nothing():
    data = [np.array([-1, 0, 5, 99, -7, 4], dtype=np.int32)]
    out = _check(data, None, num_classes=5)
    np.testing.assert_array_equal(np.array(out.at(0)).sum(axis=1), [0, 1, 0, 0, 0, 1])


@pytest.mark.parametrize("kwargs, layout, message, dali_message", [
    (dict(num_classes=3, axis=4), None, r"'axis': 4 is outside the allowed range \[-1, 3\]", "Provided axis is outside of allowed range"),
    (dict(num_classes=3, axis=-2), None, r"'axis': -2 is outside the allowed range", "Provided axis is outside of allowed range"),
    (dict(num_classes=3, axis_name="AB"), "XYZ", r"'axis_name': must be a single character, got \"AB\"", "Unsupported axis_name value"),
    (dict(num_classes=3, axis_name="O"), None, r"'axis_name': naming the new axis needs an input layout of 3 dimension\(s\)", "Input layout mismatch"),
    (dict(num_classes=3, dtype="FLOAT16"), None, r"'dtype': unsupported output type FLOAT16", "Unsupported output type"),
    (dict(num_classes=-1), None, r"'num_classes': must not be negative", None),
])
def test_bad_one_hot_names_operator_and_argument(kwargs, layout, message, dali_message):
    data = [np.zeros((2, 3, 4), np.int32)]

    def build(mod_fn, mod_types, pdef):
        kw = {k: (getattr(mod_types, v) if k == "dtype" else v) for k, v in kwargs.items()}

        @pdef(batch_size=1, num_threads=1, device_id=None)
        def p():
            return mod_fn.one_hot(mod_fn.external_source(lambda: data, batch=True, layout=layout), **kw)

        return p()

    pipe = build(fn, types, pipeline_def)
    for _ in range(2):  # the same error again: the pipeline stays usable
        with pytest.raises(sluice.errors.ArgumentError, match="one_hot: argument " + message):
            pipe.run()
    if dali_message:
        with pytest.raises(RuntimeError, match=dali_message):
            p = build(dfn, dtypes, dali.pipeline_def)
            p.build()
            p.run()


@pytest.mark.parametrize("in_type", [np.float16, np.bool_])
def test_unsupported_input_types_are_refused_naming_the_type(in_type):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def p():
        return fn.one_hot(fn.external_source(lambda: [np.zeros(3, in_type)], batch=True), num_classes=3)

    pipe = p()
    for _ in range(2):
        with pytest.raises(sluice.errors.ArgumentTypeError, match="one_hot: .*unsupported input type (FLOAT16|BOOL)"):
            pipe.run()


def test_gpu_one_hot_equals_cpu():
    require_gpu()
    data = _tensors3d()
    floats = [np.array([0.2, -0.5, 2.7, 19.99, 20.0, -3.0, np.nan], np.float32)]

    @pipeline_def(batch_size=10, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: data, batch=True, layout="ABC")
        f = fn.external_source(lambda: floats * 10, batch=True)
        kws = [dict(num_classes=NUM_CLASSES, axis=1, axis_name="O"), dict(num_classes=NUM_CLASSES, dtype=types.UINT8, on_value=255),
               dict(num_classes=7, axis=0, dtype=types.INT64, off_value=-1)]
        cpu = [fn.one_hot(x, **kw) for kw in kws] + [fn.one_hot(f, num_classes=NUM_CLASSES, dtype=types.FLOAT64)]
        gpu = [fn.one_hot(x.gpu(), **kw) for kw in kws] + [fn.one_hot(f.gpu(), num_classes=NUM_CLASSES, dtype=types.FLOAT64)]
        return (*cpu, *gpu)

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        n = len(outs) // 2
        for c, g in zip(outs[:n], outs[n:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout()
            g = g.as_cpu()
            for i in range(10):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
