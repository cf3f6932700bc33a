"""The reductions: `fn.reductions.min`, `max`, `sum`, `mean`, `mean_square`, `rms`,
`std_dev`, `variance`.

- Parity: equal to DALI 2.4's cpu operator bit for bit (float results included: Sluice sums
  floats in DALI's tree order; any NaN equals any NaN, signed zeros must match) for every
  input type, axes case (none, empty, single, several, negative, `axis_names`, `keep_dims`),
  every `dtype` DALI's type maps allow (integer sums wrap as DALI's do), empty samples, 0-D
  samples, NaN / infinity / signed zeros, and `std_dev` / `variance` with a mean from
  `fn.reductions.mean` or a scalar, and `ddof`.
- DALI's own tests (operator_2/test_reduce.py) ported with the import renamed, cpu only:
  the NumPy references and their tolerances.
- Errors name the operator and the argument (or the sample), and the pipeline goes on.
- Results do not depend on the thread count.
- gpu equal to cpu bit for bit (so to DALI's cpu operator) over the parity cases above, and
  over summation trees deeper than the gpu kernel's common stack (on the GPU machine).
"""

import itertools

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]
SINGLE = ["min", "max", "sum", "mean", "mean_square", "rms"]


def _type_id(np_type):
    return int(types.from_numpy_type(np_type))


def _data(np_type, shapes, seed):
    """Random samples spanning the type's whole range (so integer sums wrap and UINT16 squares
    overflow an int, as in DALI); floats of both signs over six orders of magnitude."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        if np_type == np.float32:
            x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)
            out.append(x.astype(np.float32))
        else:
            info = np.iinfo(np_type)
            out.append(rng.integers(info.min, info.max, shape, dtype=np_type, endpoint=True))
    return out


def _run(lib, build, samples, layout=None, num_threads=3, iters=1):
    """Runs `build(fn, types, x)` (a list of outputs) over the batch `samples`; returns per
    output (samples as NumPy arrays, dtype id, layout)."""
    pipe = lib.pipeline.Pipeline(batch_size=len(samples), num_threads=num_threads, device_id=None, seed=3)
    with pipe:
        x = lib.fn.external_source(source=lambda: samples, batch=True, layout=layout)
        pipe.set_outputs(*build(lib.fn, lib.types, x))
    pipe.build()
    for _ in range(iters):
        outs = pipe.run()
    return [([np.array(o.at(i)) for i in range(len(samples))], int(o.dtype), o.layout()) for o in outs]


def _bits(a):
    """The bytes of `a`, with every NaN the same NaN."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), a.dtype.type(np.nan), a).astype(a.dtype)
    return a.tobytes()


def _assert_same(ours, ref, names=None, ref_name="DALI"):
    assert len(ours) == len(ref)
    for k, ((a, ta, la), (b, tb, lb)) in enumerate(zip(ours, ref)):
        what = names[k] if names else f"output {k}"
        assert ta == tb, f"{what}: type {ta} vs {tb}"
        assert la == lb, f"{what}: layout {la!r} vs {lb!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert x.dtype == y.dtype and x.shape == y.shape, f"{what} sample {i}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
            assert _bits(x) == _bits(y), f"{what} sample {i}:\n{x}\nvs {ref_name}\n{y}"


def _compare(build, samples, layout=None, names=None):
    ours = _run(sluice, build, samples, layout)
    ref = _run(dali, build, samples, layout)
    _assert_same(ours, ref, names)
    return ours


# ---------------------------------------------------------------- parity with DALI
AXES_CASES = [
    {},
    {"axes": []},
    {"axes": 0},
    {"axes": [1]},
    {"axes": [2]},
    {"axes": [0, 1]},
    {"axes": [0, 2]},
    {"axes": [2, 1]},
    {"axes": [0, 1, 2]},
    {"axes": [-1]},
    {"axes": [-3, -1]},
    {"axis_names": "HW"},
    {"axis_names": "C"},
    {"axis_names": ""},
    {"keep_dims": True},
    {"axes": [0, 2], "keep_dims": True},
    {"axis_names": "W", "keep_dims": True},
    {"axes": [], "keep_dims": True},
]

# Sizes that take every path of DALI's summation tree: runs above and below 32 elements, a
# reduced outer axis over a long kept inner one (8 outputs side by side), an empty sample.
PARITY_SHAPES = [(5, 7, 3), (40, 45, 3), (1, 9, 2), (6, 4, 67), (70, 3, 1), (0, 4, 3)]


def _all_reductions(kw):
    def build(fn, types, x):
        outs = [getattr(fn.reductions, name)(x, **kw) for name in SINGLE]
        mean = fn.reductions.mean(x, **kw)
        outs += [fn.reductions.variance(x, mean, **kw), fn.reductions.std_dev(x, mean, **kw), fn.reductions.variance(x, mean, ddof=1, **kw)]
        return outs

    return build


ALL_NAMES = SINGLE + ["variance", "std_dev", "variance(ddof=1)"]


@needs_dali
@pytest.mark.parametrize("kw", AXES_CASES, ids=[repr(k) for k in AXES_CASES])
@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
def test_reductions_equal_dali(np_type, kw):
    samples = _data(np_type, PARITY_SHAPES, seed=1)
    _compare(_all_reductions(kw), samples, "HWC", ALL_NAMES)


@needs_dali
@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1], "keep_dims": True}, {"axes": []}], ids=repr)
def test_reductions_without_a_layout_equal_dali(kw):
    samples = _data(np.float32, [(33, 17), (2, 100), (64, 1)], seed=2)
    _compare(_all_reductions(kw), samples, None, ALL_NAMES)


def _allowed_dtypes(name, np_type):
    """DALI's type maps (sum.h, mean.h, mean_square.h, root_mean_square.h)."""
    t = _type_id(np_type)
    unsigned = np.issubdtype(np_type, np.unsignedinteger)
    wide = _type_id(np.uint64 if unsigned else np.int64)
    if np_type == np.float32:
        return [t]
    if name == "sum":
        return [wide] if np.dtype(np_type).itemsize == 8 else [t, wide, _type_id(np.float32)]
    if name == "mean_square":
        return [wide, _type_id(np.float32)]
    return [t, _type_id(np.float32)]  # mean, rms


@needs_dali
@pytest.mark.parametrize("kw", [{}, {"axes": [1]}, {"axes": [0, 2], "keep_dims": True}, {"axes": []}], ids=repr)
@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
def test_every_dtype_equals_dali(np_type, kw):
    """Every output type DALI allows: the accumulator is the output type, so UINT8 sums wrap
    mod 256 and an integer mean is the wrapped sum times 1/N, truncated."""
    cases = [(name, d) for name in ["sum", "mean", "mean_square", "rms"] for d in _allowed_dtypes(name, np_type)]
    samples = _data(np_type, [(9, 30, 3), (40, 45, 2), (1, 1, 1)], seed=3)

    def build(fn, types, x):
        return [getattr(fn.reductions, name)(x, dtype=types.DALIDataType(d), **kw) for name, d in cases]

    _compare(build, samples, "HWC", [f"{n} dtype={types.DALIDataType(d).name}" for n, d in cases])


@needs_dali
def test_small_integer_sums_wrap_as_dali():
    samples = [np.full((3, 100), 200, np.uint8), np.array([[200, 1, 2]], np.uint8)]

    def build(fn, types, x):
        return [fn.reductions.sum(x, dtype=types.UINT8), fn.reductions.sum(x, dtype=types.UINT8, axes=0), fn.reductions.mean(x, dtype=types.UINT8)]

    ours = _compare(build, samples)
    assert [int(v) for v in ours[0][0]] == [60000 % 256, 203]
    assert [int(v) for v in ours[2][0]] == [0, 67]  # 96 / 300 and 203 / 3, truncated


@needs_dali
def test_uint16_squares_overflow_an_int_as_in_dali():
    """DALI squares UINT16 elements as C++ `int`s: 65535^2 wraps to -131071."""
    samples = [np.full((3, 100), 65535, np.uint16), np.array([65535, 3, 40000], np.uint16).reshape(1, 3)]

    def build(fn, types, x):
        return [fn.reductions.mean_square(x), fn.reductions.mean_square(x, dtype=types.UINT64), fn.reductions.mean_square(x, dtype=types.UINT64, axes=[]),
                fn.reductions.rms(x, axes=1)]

    ours = _compare(build, samples)
    assert float(ours[0][0][0]) == -131071.0


@needs_dali
@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1]}, {"axes": []}], ids=repr)
def test_empty_samples_equal_dali(kw):
    """The min / max of nothing are the type's limits, the sum 0, the mean NaN (as an integer
    type: what x86 makes of NaN)."""
    for np_type in NP_TYPES:
        samples = [np.zeros(s, np_type) for s in [(0, 3), (2, 0), (0, 0), (1, 1)]]
        if np_type == np.float32:
            dtypes = []
        else:
            dtypes = [("mean", _type_id(np_type)), ("rms", _type_id(np_type))]

        def build(fn, types, x):
            outs = _all_reductions(kw)(fn, types, x)
            return outs + [getattr(fn.reductions, n)(x, dtype=types.DALIDataType(d), **kw) for n, d in dtypes]

        _compare(build, samples, "HW", ALL_NAMES + [f"{n} dtype={d}" for n, d in dtypes])


@needs_dali
def test_scalar_samples_equal_dali():
    samples = [np.array(v, np.float32) for v in [3.0, -2.0, 0.0, -0.0]]

    def build(fn, types, x):
        return [getattr(fn.reductions, n)(x) for n in SINGLE] + [
            fn.reductions.sum(x, axes=[]),
            fn.reductions.variance(x, 1.0),
            fn.reductions.variance(x, 1.0, ddof=1),
            fn.reductions.std_dev(x, 1.0),
        ]

    _compare(build, samples)


@needs_dali
@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1]}, {"axes": []}], ids=repr)
def test_nan_infinity_and_signed_zeros_equal_dali(kw):
    """NaN is never the min / max; min of infinities is FLT_MAX (DALI's neutral element); the
    first of equal values wins (-0.0 vs 0.0); NaN and infinities propagate through sums."""
    inf, nan = np.inf, np.nan
    samples = [
        np.array([[nan, 1.0, -inf, 5.0], [0.0, -0.0, inf, inf]], np.float32),
        np.array([[-0.0, 0.0, -0.0, 0.0], [nan, nan, nan, nan]], np.float32),
        np.array([[3.4e38, 3.4e38, -3.4e38, 1.0], [-inf, -inf, 2.0, -0.0]], np.float32),
    ]
    _compare(_all_reductions(kw), samples, None, ALL_NAMES)


@needs_dali
@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
@pytest.mark.parametrize("ddof", [0, 1, 3])
def test_std_dev_and_variance_with_a_given_mean_equal_dali(np_type, ddof):
    """The mean from `fn.reductions.mean` with `keep_dims` (same values, another shape), a
    scalar constant for a full reduction, and `ddof` (N - ddof <= 0 gives inf / NaN)."""
    samples = _data(np_type, [(5, 7, 3), (40, 45, 3), (2, 2, 1)], seed=4)

    def build(fn, types, x):
        m_kept = fn.reductions.mean(x, axes=[0, 1], keep_dims=True)
        return [
            fn.reductions.variance(x, m_kept, axes=[0, 1], ddof=ddof),
            fn.reductions.std_dev(x, m_kept, axes=[0, 1], ddof=ddof),
            fn.reductions.variance(x, 0.25, ddof=ddof),
            fn.reductions.std_dev(x, -3.5, ddof=ddof),
            fn.reductions.std_dev(x, fn.reductions.mean(x, axis_names="C"), axis_names="C", ddof=ddof),
        ]

    _compare(build, samples, "HWC")


@needs_dali
def test_long_reductions_equal_dali():
    """Tens of thousands of elements per output: many levels of DALI's tree."""
    samples = _data(np.float32, [(300, 200), (1, 70000), (257, 255)], seed=5)
    _compare(_all_reductions({}), samples, None, ALL_NAMES)
    _compare(_all_reductions({"axes": [0]}), samples, None, ALL_NAMES)
    _compare(_all_reductions({"axes": [1]}), samples, None, ALL_NAMES)


def test_results_do_not_depend_on_the_thread_count():
    samples = _data(np.float32, [(40, 45, 3), (6, 4, 67), (70, 3, 1), (9, 9, 9)] * 3, seed=6)
    for kw in [{}, {"axes": [0]}, {"axes": [0, 2]}]:
        one = _run(sluice, _all_reductions(kw), samples, "HWC", num_threads=1)
        four = _run(sluice, _all_reductions(kw), samples, "HWC", num_threads=4, iters=2)
        _assert_same(one, four, ALL_NAMES)


def test_a_one_element_mean_is_used_for_every_output_element():
    """Sluice takes a mean of one value for all output elements (DALI reads past it)."""
    samples = _data(np.float32, [(5, 7, 3), (4, 2, 3)], seed=7)
    out = _run(sluice, lambda fn, types, x: [fn.reductions.variance(x, 0.5, axes=[0, 1]), fn.reductions.std_dev(x, 0.5, axes=2, ddof=1)], samples, "HWC")
    for x, v, s in zip(samples, out[0][0], out[1][0]):
        d = x.astype(np.float64) - 0.5
        np.testing.assert_allclose(v, np.mean(d * d, axis=(0, 1)), rtol=1e-5)
        np.testing.assert_allclose(s, np.sqrt(np.sum(d * d, axis=2) / 2), rtol=1e-5)


def test_output_types_shapes_and_layouts():
    x = [np.arange(24, dtype=np.uint8).reshape(2, 3, 4)]
    out = _run(sluice, lambda fn, types, x: [fn.reductions.sum(x), fn.reductions.min(x, axes=[0, 2]), fn.reductions.mean(x, axis_names="W", keep_dims=True),
                                             fn.reductions.sum(x, axes=[])], x, "HWC")
    (s, ts, ls), (m, tm, lm), (a, ta, la), (e, te, le) = out
    assert (ts, s[0].shape, ls, int(s[0])) == (_type_id(np.uint64), (), "", 276)
    assert (tm, m[0].shape, lm) == (_type_id(np.uint8), (3,), "W")
    np.testing.assert_array_equal(m[0], [0, 4, 8])
    assert (ta, a[0].shape, la) == (_type_id(np.float32), (2, 1, 4), "HWC")
    assert (te, e[0].shape, le) == (_type_id(np.uint64), (2, 3, 4), "HWC")


# ---------------------------------------------------------------- errors
def _error_pipe(build, batches, layout="HWC"):
    it = iter(batches)
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        pipe.set_outputs(*build(x))
    pipe.build()
    return pipe


GOOD = [np.zeros((2, 3, 4), np.float32)]


def test_axes_out_of_range_and_repeated_name_the_operator_and_the_argument():
    with pytest.raises(ValueError, match=r"(?s)reductions\.sum.*axes.*Axis index out of range: 5 not in range \[-3,2\]"):
        _error_pipe(lambda x: [fn.reductions.sum(x, axes=[5])], [GOOD]).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.max.*axes.*Axis index out of range: -4 not in range \[-3,2\]"):
        _error_pipe(lambda x: [fn.reductions.max(x, axes=-4)], [GOOD]).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.mean.*axes.*Duplicate axis index 2"):
        _error_pipe(lambda x: [fn.reductions.mean(x, axes=[2, -1])], [GOOD]).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.rms.*axis_names.*Axis 'Q' is not present in the input layout"):
        _error_pipe(lambda x: [fn.reductions.rms(x, axis_names="WQ")], [GOOD]).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.rms.*axis_names.*not present"):
        _error_pipe(lambda x: [fn.reductions.rms(x, axis_names="H")], [GOOD], layout=None).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.min.*axis_names.*Duplicate"):
        _error_pipe(lambda x: [fn.reductions.min(x, axis_names="HH")], [GOOD]).run()


def test_axes_and_axis_names_are_exclusive():
    with pytest.raises(ValueError, match=r"(?s)reductions\.sum.*axis_names.*mutually exclusive"):
        _error_pipe(lambda x: [fn.reductions.sum(x, axes=[0], axis_names="H")], [GOOD]).run()


def test_unsupported_input_types_name_the_type():
    # (An external source keeps its type across iterations in Sluice, so the pipeline going
    # on after a bad batch is checked with other errors.)
    for bad, name in [(np.float16, "float16"), (np.float64, "double"), (np.bool_, "bool")]:
        pipe = _error_pipe(lambda x: [fn.reductions.sum(x, axes=1)], [[np.zeros((2, 3), bad)]], layout=None)
        with pytest.raises(RuntimeError, match=rf"(?s)reductions\.sum.*sample 0.*Unsupported input type: {name}"):
            pipe.run()


def test_output_types_outside_dalis_type_maps_are_refused():
    with pytest.raises(ValueError, match=r"(?s)reductions\.sum.*dtype.*Unsupported types: uint8, uint16"):
        _error_pipe(lambda x: [fn.reductions.sum(x, dtype=types.UINT16)], [[np.zeros((2, 3), np.uint8)]], layout=None).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.sum.*dtype.*Unsupported types: int64, float"):
        _error_pipe(lambda x: [fn.reductions.sum(x, dtype=types.FLOAT)], [[np.zeros((2, 3), np.int64)]], layout=None).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.mean_square.*dtype.*Unsupported types: uint8, int64"):
        _error_pipe(lambda x: [fn.reductions.mean_square(x, dtype=types.INT64)], [[np.zeros((2, 3), np.uint8)]], layout=None).run()
    with pytest.raises(ValueError, match=r"(?s)reductions\.rms.*dtype.*FLOAT64"):
        _error_pipe(lambda x: [fn.reductions.rms(x, dtype=types.FLOAT64)], [[np.zeros((2, 3), np.uint8)]], layout=None).run()
    with pytest.raises(TypeError, match=r"(?s)reductions\.min.*dtype"):
        _error_pipe(lambda x: [fn.reductions.min(x, dtype=types.INT32)], [GOOD])


def test_bad_means_name_the_input_and_the_sample():
    with pytest.raises(TypeError, match=r"(?s)reductions\.variance.*mean.*FLOAT.*INT32"):
        _error_pipe(lambda x: [fn.reductions.variance(x, 1)], [GOOD]).run()
    batches = [[np.zeros((2, 3), np.float32), np.zeros((4, 3), np.float32)]]

    def build(x):
        # the means have 2 and 4 values where the reduction gives 3 and 3
        m = fn.reductions.mean(x, axes=1)
        return [fn.reductions.std_dev(x, m, axes=0)]

    with pytest.raises(RuntimeError, match=r"(?s)reductions\.std_dev.*sample 0.*mean"):
        _error_pipe(build, batches, layout=None).run()


# ---------------------------------------------------------------- DALI's test_reduce.py, ported (cpu)
class Batch:
    def __init__(self, data_type):
        self._data_type = data_type
        self._index = 0

    def __call__(self):
        batch = self._data[self._index]
        self._index = (self._index + 1) % self.batch_size()
        return batch

    def batch_size(self):
        return len(self._data[0])

    def num_iter(self):
        return 2 * len(self._data)

    def reset(self):
        self._index = 0


class Batch1D(Batch):
    def __init__(self, data_type):
        super().__init__(data_type)
        self._data = [
            [np.array([1, 2, 3, 4], dtype=self._data_type), np.array([33, 2, 10, 10], dtype=self._data_type)],
            [np.array([10, 20, 30, 20], dtype=self._data_type), np.array([33, 2, 15, 19], dtype=self._data_type)],
        ]

    def valid_axes(self):
        return [None, (), 0]


class Batch2D(Batch):
    def __init__(self, data_type):
        super().__init__(data_type)
        self._data = [
            [np.array([[1, 0, 2], [3, 1, 4]], dtype=self._data_type), np.array([[5, 0, 6], [7, 0, 8]], dtype=self._data_type)],
            [np.array([[13, 23, 22], [23, 21, 14]], dtype=self._data_type), np.array([[23, 3, 6], [7, 0, 20]], dtype=self._data_type)],
        ]

    def valid_axes(self):
        return [None, (), 0, 1, (0, 1)]


class Batch3D(Batch):
    def __init__(self, data_type):
        super().__init__(data_type)
        self._data = [
            [
                np.array([[[1, 0, 1], [2, 3, 1]], [[0, 4, 1], [0, 4, 1]]], dtype=self._data_type),
                np.array([[[5, 0, 1], [6, 7, 1]], [[0, 8, 1], [0, 4, 1]]], dtype=self._data_type),
            ],
            [
                np.array([[[9, 0, 3], [3, 3, 3]], [[7, 0, 3], [0, 6, 8]]], dtype=self._data_type),
                np.array([[[7, 2, 3], [7, 8, 2]], [[3, 9, 2], [2, 6, 2]]], dtype=self._data_type),
            ],
        ]

    def valid_axes(self):
        return [None, (), 0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2)]


class Batch3DOverflow(Batch3D):
    def __init__(self, data_type):
        super().__init__(data_type)
        for batch in self._data:
            for sample in batch:
                # NumPy 1's wrapping `sample *= 100000` (NumPy 2 refuses the out-of-range scalar)
                sample *= np.array(100000).astype(sample.dtype)


class Batch3DNegativeAxes(Batch3D):
    def valid_axes(self):
        return [-3, -2, -1, (-3, 1), (0, -1), (-2, 2), (-3, -2, -1)]


def get_expected_layout(in_layout, axes, keep_dims):
    in_layout = in_layout or ""
    if keep_dims or not in_layout:
        return in_layout
    if axes is None:
        return ""
    if isinstance(axes, int):
        axes = [axes]
    ndim = len(in_layout)
    axes = [(axis + ndim) % ndim for axis in axes]
    return "".join(c for i, c in enumerate(in_layout) if i not in axes)


def check_layout(tensor, in_layout, axes, keep_dims):
    expected_layout = get_expected_layout(in_layout, axes, keep_dims)
    assert tensor.layout() == expected_layout, f"Layout mismatch. Got: `{tensor.layout()}`, expected `{expected_layout}` (axes: {axes})"


def run_dali(reduce_fn, batch_fn, keep_dims, axes, output_type, add_mean_input=False, ddof=0, layout=None):
    batch_size = batch_fn.batch_size()

    def get_batch():
        return batch_fn()

    result_cpu = []
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None)
    args = {"keep_dims": keep_dims, "axes": axes}
    if output_type is not None:
        args["dtype"] = types.from_numpy_type(output_type)
    with pipe:
        input = fn.external_source(source=get_batch, layout=layout)
        if not add_mean_input:
            reduced_cpu = reduce_fn(input, **args)
        else:
            mean = fn.reductions.mean(input, **args)
            args["ddof"] = ddof
            reduced_cpu = reduce_fn(input, mean, **args)
        pipe.set_outputs(reduced_cpu)
    for _ in range(batch_fn.num_iter()):
        output = pipe.run()
        check_layout(output[0], layout, axes, keep_dims)
        result_cpu.append(output[0].as_array())
    return result_cpu


def run_numpy(reduce_fn, batch_fn, keep_dims, axes, output_type, ddof=None):
    result = []
    args = {"keepdims": keep_dims, "axis": axes}
    if output_type is not None:
        args["dtype"] = output_type
    if ddof is not None:
        args["ddof"] = ddof
    for _ in range(batch_fn.num_iter()):
        batch = batch_fn()
        result.append([reduce_fn(sample, **args) for sample in batch])
    return result


def compare(dali_res, np_res):
    for dali_sample, np_sample in zip(dali_res, np_res):
        assert dali_sample.shape == np_sample.shape
        if dali_res[0].dtype == np.float32:
            assert np.allclose(dali_sample, np_sample)
        else:
            assert np.array_equal(dali_sample, np_sample), f"{dali_sample} vs {np_sample}"


def np_mean_square(input, keepdims=False, axis=None, dtype=None):
    return np.mean(np.square(input), keepdims=keepdims, axis=axis, dtype=dtype)


def np_root_mean_square(input, keepdims=False, axis=None, dtype=None):
    return np.sqrt(np_mean_square(input, keepdims=keepdims, axis=axis, dtype=dtype))


reduce_fns = {
    "sum": (fn.reductions.sum, np.sum),
    "min": (fn.reductions.min, np.min),
    "max": (fn.reductions.max, np.max),
    "mean": (fn.reductions.mean, np.mean),
    "mean_square": (fn.reductions.mean_square, np_mean_square),
    "rms": (fn.reductions.rms, np_root_mean_square),
    "std_dev": (fn.reductions.std_dev, np.std),
    "variance": (fn.reductions.variance, np.var),
}


def run_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type=None, layout=None):
    batch_fn = batch_gen(input_type)
    dali_reduce_fn, numpy_reduce_fn = reduce_fns[reduction_name]
    for axes in batch_fn.valid_axes():
        dali_res_cpu = run_dali(dali_reduce_fn, batch_fn, keep_dims=keep_dims, axes=axes, output_type=output_type, layout=layout)
        batch_fn.reset()
        np_res = run_numpy(numpy_reduce_fn, batch_fn, keep_dims=keep_dims, axes=axes, output_type=output_type)
        for iteration in range(batch_fn.num_iter()):
            compare(dali_res_cpu[iteration], np_res[iteration])


def _dali_cases(gen):
    """DALI's nose generator tests as pytest parameters."""
    return [pytest.param(*case[1:], id="-".join(getattr(a, "__name__", str(a)) for a in case[1:])) for case in gen()]


def _test_reduce_cases():
    reductions = ["sum", "min", "max"]
    batch_gens = [Batch1D, Batch2D, Batch3D]
    all_types = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]
    rng = np.random.default_rng(1000)
    for keep_dims in [False, True]:
        for reduction_name in reductions:
            for ndim, batch_gen in enumerate(batch_gens, start=1):
                type_id = rng.choice(all_types)
                layout = rng.choice([None, "XYZ"[:ndim]])
                yield run_reduce, keep_dims, reduction_name, batch_gen, type_id, None, layout


@pytest.mark.parametrize("keep_dims,reduction_name,batch_gen,input_type,output_type,layout", _dali_cases(_test_reduce_cases))
def test_dali_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type, layout):
    run_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type, layout)


@pytest.mark.parametrize("layout", ["FGH", None])
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("reduction_name", ["sum", "max"])
def test_dali_reduce_negative_axes(layout, keep_dims, reduction_name):
    run_reduce(keep_dims, reduction_name, Batch3DNegativeAxes, np.uint8, None, layout)


def test_dali_reduce_invalid_axes():
    class Batch3DInvalidAxes(Batch3D):
        def valid_axes(self):
            return [-100, (100, 0)]

    batch_fn = Batch3DInvalidAxes(np.uint8)
    dali_reduce_fn, _ = reduce_fns["sum"]
    for axes in batch_fn.valid_axes():
        # DALI raises IndexError; Sluice's ArgumentError is a ValueError (and a RuntimeError).
        with pytest.raises(RuntimeError, match="Axis index out of range"):
            run_dali(dali_reduce_fn, batch_fn, keep_dims=False, axes=axes, output_type=np.uint8)


def _promotion_cases():
    rng = np.random.default_rng(1041)
    for keep_dims in [False, True]:
        for reduction_name in ["rms", "mean_square"]:
            for type_id in [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32]:
                layout = rng.choice([None, "ABC"])
                yield run_reduce, keep_dims, reduction_name, Batch3D, type_id, None, layout


@pytest.mark.parametrize("keep_dims,reduction_name,batch_gen,input_type,output_type,layout", _dali_cases(_promotion_cases))
def test_dali_reduce_with_promotion(keep_dims, reduction_name, batch_gen, input_type, output_type, layout):
    run_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type, layout)


def _overflow_cases():
    rng = np.random.default_rng(1042)
    for keep_dims in [False, True]:
        for reduction_name in ["sum", "mean"]:
            for type_id in [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32]:
                layout = rng.choice([None, "ABC"])
                yield run_reduce, keep_dims, reduction_name, Batch3DOverflow, type_id, None, layout


@pytest.mark.parametrize("keep_dims,reduction_name,batch_gen,input_type,output_type,layout", _dali_cases(_overflow_cases))
def test_dali_reduce_with_promotion_with_overflow(keep_dims, reduction_name, batch_gen, input_type, output_type, layout):
    run_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type, layout)


def _sum_output_type_cases():
    type_maps = [
        (np.uint8, [np.uint64, np.float32]),
        (np.int8, [np.int64, np.float32]),
        (np.uint16, [np.uint64, np.float32]),
        (np.int16, [np.int64, np.float32]),
        (np.uint32, [np.uint64, np.float32]),
        (np.int32, [np.int32, np.int64, np.float32]),
    ]
    rng = np.random.default_rng(1043)
    for input_type, outputs in type_maps:
        keep_dims = bool(rng.choice([False, True]))  # DALI draws this from the global np.random
        for output_type in outputs:
            layout = rng.choice([None, "RGB"])
            yield run_reduce, keep_dims, "sum", Batch3DOverflow, input_type, output_type, layout


@pytest.mark.parametrize("keep_dims,reduction_name,batch_gen,input_type,output_type,layout", _dali_cases(_sum_output_type_cases))
def test_dali_sum_with_output_type(keep_dims, reduction_name, batch_gen, input_type, output_type, layout):
    run_reduce(keep_dims, reduction_name, batch_gen, input_type, output_type, layout)


def run_reduce_with_mean_input(keep_dims, reduction_name, batch_gen, input_type, output_type=None, layout=None):
    batch_fn = batch_gen(input_type)
    dali_reduce_fn, numpy_reduce_fn = reduce_fns[reduction_name]
    for axes in batch_fn.valid_axes():
        if axes == ():
            valid_ddofs = [0]
        elif axes is None:
            valid_ddofs = [0, 1, 2, 3]
        else:
            valid_ddofs = [0, 1]
        for ddof in valid_ddofs:
            dali_res_cpu = run_dali(dali_reduce_fn, batch_fn, keep_dims=keep_dims, axes=axes, output_type=output_type, add_mean_input=True, ddof=ddof, layout=layout)
            batch_fn.reset()
            np_res = run_numpy(numpy_reduce_fn, batch_fn, keep_dims=keep_dims, axes=axes, output_type=output_type, ddof=ddof)
            for iteration in range(batch_fn.num_iter()):
                compare(dali_res_cpu[iteration], np_res[iteration])


def _mean_input_cases():
    all_types = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]
    rng = np.random.default_rng(1044)
    for keep_dims in [False, True]:
        for reduction_name in ["std_dev", "variance"]:
            for ndim, batch_gen in enumerate([Batch1D, Batch2D, Batch3D], start=1):
                type_id = rng.choice(all_types)  # DALI draws this from the global np.random
                layout = rng.choice([None, "CDE"[:ndim]])
                yield run_reduce_with_mean_input, keep_dims, reduction_name, batch_gen, type_id, None, layout


@pytest.mark.parametrize("keep_dims,reduction_name,batch_gen,input_type,output_type,layout", _dali_cases(_mean_input_cases))
def test_dali_reduce_with_mean_input(keep_dims, reduction_name, batch_gen, input_type, output_type, layout):
    run_reduce_with_mean_input(keep_dims, reduction_name, batch_gen, input_type, output_type, layout)


def run_and_compare_with_layout(batch_gen, pipe):
    for _ in range(batch_gen.num_iter()):
        output = pipe.run()
        assert output[0].layout() == output[1].layout(), f"{output[0].layout()} vs {output[1].layout()}"
        assert np.array_equal(output[0].as_array(), output[1].as_array())


def run_reduce_with_layout(batch_size, get_batch, reduction, axes, axis_names, batch_fn):
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None)
    with pipe:
        input = fn.external_source(source=get_batch, layout="ABC")
        reduced = reduction(input, keep_dims=False, axes=axes)
        reduced_by_name = reduction(input, keep_dims=False, axis_names=axis_names)
        pipe.set_outputs(reduced, reduced_by_name)
    run_and_compare_with_layout(batch_fn, pipe)


def run_reduce_with_layout_with_mean_input(batch_size, get_batch, reduction, axes, axis_names, batch_fn):
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None)
    with pipe:
        input = fn.external_source(source=get_batch, layout="ABC")
        mean = fn.reductions.mean(input, axes=axes)
        reduced = reduction(input, mean, keep_dims=False, axes=axes)
        reduced_by_name = reduction(input, mean, keep_dims=False, axis_names=axis_names)
        pipe.set_outputs(reduced, reduced_by_name)
    run_and_compare_with_layout(batch_fn, pipe)


AXES_AND_NAMES = [((), ""), (0, "A"), (1, "B"), (2, "C"), ((0, 1), "AB"), ((0, 2), "AC"), ((1, 2), "BC"), ((0, 1, 2), "ABC")]


@pytest.mark.parametrize("axes,axis_names", AXES_AND_NAMES)
@pytest.mark.parametrize("name", ["max", "min", "mean", "mean_square", "sum", "rms", "std_dev", "variance"])
def test_dali_reduce_axis_names(name, axes, axis_names):
    batch_fn = Batch3D(np.float32)

    def get_batch():
        return batch_fn()

    reduction = getattr(fn.reductions, name)
    if name in ("std_dev", "variance"):
        run_reduce_with_layout_with_mean_input(batch_fn.batch_size(), get_batch, reduction, axes, axis_names, batch_fn)
    else:
        run_reduce_with_layout(batch_fn.batch_size(), get_batch, reduction, axes, axis_names, batch_fn)


_random_buf = None


def fast_large_random_batches(rng, rank, batch_size, num_batches, max_vol=300_000):
    """DALI's generator (its max_vol of 10M elements per sample cut to 300k to keep the suite
    quick): random shapes, the data slices of one random buffer."""
    global _random_buf
    max_extent = min(65536, int(np.floor(max_vol ** (1 / rank))))
    if _random_buf is None:
        _random_buf = np.random.default_rng(0).uniform(low=0, high=1, size=max_vol).astype(np.float32)
    data = []
    for _ in range(num_batches):
        batch = []
        for _ in range(batch_size):
            size = rng.integers(1, max_extent, size=rank)
            vol = int(np.prod(size))
            offset = int(rng.integers(0, (_random_buf.size - vol) + 1))
            batch.append(_random_buf[offset : offset + vol].reshape(size))
        data.append(batch)
    return data


def _rank_axes(max_rank):
    rng = np.random.default_rng(12344)
    for rank in range(1, max_rank + 1):
        for axis_mask in range(1, 2**rank):
            layout = rng.choice([None, "DALI"[:rank]])
            axes = tuple(i for i in range(rank) if axis_mask & (1 << i))
            yield pytest.param(rank, axes, layout, id=f"{rank}-{axes}-{layout}")


def _run_large(data, build, in_layout, lib=sluice):
    pipe = lib.pipeline.Pipeline(batch_size=len(data[0]), num_threads=4, device_id=None)
    with pipe:
        input = lib.fn.external_source(data, cycle=True, layout=in_layout)
        pipe.set_outputs(build(lib.fn, input))
    outs = []
    for _ in data:
        (out,) = pipe.run()
        outs.append([np.array(out.at(i)) for i in range(len(out))] + [out.layout()])
    return outs


@pytest.mark.parametrize("rank,axes,in_layout", list(_rank_axes(3)))
def test_dali_reduce_large_data(rank, axes, in_layout):
    data = fast_large_random_batches(np.random.default_rng(rank * 31 + len(axes)), rank, 16, 2)
    outs = _run_large(data, lambda fn, x: fn.reductions.sum(x, axes=axes), in_layout)
    for batch, out in zip(data, outs):
        assert out[-1] == get_expected_layout(in_layout, axes, False)
        for i, sample in enumerate(batch):
            ref = np.sum(sample.astype(np.float64), axis=axes)
            assert np.allclose(out[i], ref, 1e-5, 1e-5)
    if dali is not None:  # and DALI's bits
        ref = _run_large(data, lambda fn, x: fn.reductions.sum(x, axes=axes), in_layout, lib=dali)
        for o, r in zip(outs, ref):
            assert all(_bits(a) == _bits(b) for a, b in zip(o[:-1], r[:-1]))


@pytest.mark.parametrize("rank,axes,in_layout", list(_rank_axes(4)))
def test_dali_std_dev_large_data(rank, axes, in_layout):
    data = fast_large_random_batches(np.random.default_rng(rank * 37 + len(axes)), rank, 16, 2)

    def build(fn, x):
        return fn.reductions.std_dev(x, fn.reductions.mean(x, axes=axes), axes=axes, ddof=0)

    outs = _run_large(data, build, in_layout)
    for batch, out in zip(data, outs):
        assert out[-1] == get_expected_layout(in_layout, axes, False)
        for i, sample in enumerate(batch):
            ref = np.std(sample.astype(np.float64), axis=axes, ddof=0)
            assert np.allclose(out[i], ref, 1e-5, 1e-5)
    if dali is not None:
        ref = _run_large(data, build, in_layout, lib=dali)
        for o, r in zip(outs, ref):
            assert all(_bits(a) == _bits(b) for a, b in zip(o[:-1], r[:-1]))


@pytest.mark.parametrize("rank,axes,in_layout", list(_rank_axes(3)))
def test_dali_reduce_empty_data(rank, axes, in_layout):
    rng = np.random.default_rng(rank * 41 + len(axes))
    data = []
    for _ in range(2):
        batch = []
        for _ in range(16):
            shape = rng.integers(1, 10, size=rank)
            for a in axes:
                shape[a] = 0
            batch.append(np.empty(shape, dtype=np.float32))
        data.append(batch)
    outs = _run_large(data, lambda fn, x: fn.reductions.sum(x, axes=axes), in_layout)
    for batch, out in zip(data, outs):
        assert out[-1] == get_expected_layout(in_layout, axes, False)
        for i, sample in enumerate(batch):
            assert np.allclose(out[i], np.sum(sample.astype(np.float64), axis=axes), 1e-5, 1e-5)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_dali_sum_degenerate_data(axes):
    """A bugfix test of DALI's: outputs are written for inputs with no elements (after a batch
    with elements, so stale values would show)."""
    batches = [[np.ones((5, 3), np.int32), np.ones((3, 4), np.int32)], [np.ones((0, 2), np.int32), np.ones((0, 5), np.int32)]]
    pipe = _error_pipe(lambda x: [fn.reductions.sum(x, axes=axes)], batches, layout=None)
    for batch in batches:
        (o,) = pipe.run()
        for i, sample in enumerate(batch):
            assert np.array_equal(np.array(o.at(i)), np.sum(sample, axis=axes))


# ---------------------------------------------------------------- gpu
def _cpu_and_gpu(build, batches, layout=None):
    """Feeds `batches` in turn to one pipeline running `build(fn, types, x)` on the cpu and on
    `x.gpu()`; returns per iteration the cpu's and the gpu's outputs, as `_run` gives them."""
    it = itertools.cycle(batches)
    pipe = Pipeline(batch_size=max(len(b) for b in batches), num_threads=3, device_id=0, seed=3)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        cpu = build(fn, types, x)
        gpu = build(fn, types, x.gpu())
        pipe.set_outputs(*cpu, *gpu)
    pipe.build()
    results = []
    for batch in batches:
        outs = [o.as_cpu() for o in pipe.run()]
        res = [([np.array(o.at(i)) for i in range(len(batch))], int(o.dtype), o.layout()) for o in outs]
        results.append((res[: len(cpu)], res[len(cpu) :]))
    return results


def _assert_gpu_equals_cpu(build, samples, layout=None, names=None, iters=2):
    """The gpu outputs equal the cpu's bit for bit, for `samples` fed `iters` times (later
    batches run on what the first one left: compiled kernels, descriptor buffers)."""
    for cpu, gpu in _cpu_and_gpu(build, [samples] * iters, layout):
        _assert_same(gpu, cpu, names, ref_name="cpu")


@pytest.mark.parametrize("kw", AXES_CASES, ids=[repr(k) for k in AXES_CASES])
@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
def test_gpu_reductions_equal_cpu(np_type, kw):
    require_gpu()
    samples = _data(np_type, PARITY_SHAPES, seed=1)
    _assert_gpu_equals_cpu(_all_reductions(kw), samples, "HWC", ALL_NAMES)


@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1], "keep_dims": True}, {"axes": []}], ids=repr)
def test_gpu_reductions_without_a_layout_equal_cpu(kw):
    require_gpu()
    samples = _data(np.float32, [(33, 17), (2, 100), (64, 1)], seed=2)
    _assert_gpu_equals_cpu(_all_reductions(kw), samples, None, ALL_NAMES)


@pytest.mark.parametrize("kw", [{}, {"axes": [1]}, {"axes": [0, 2], "keep_dims": True}, {"axes": []}], ids=repr)
@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
def test_gpu_every_dtype_equals_cpu(np_type, kw):
    require_gpu()
    cases = [(name, d) for name in ["sum", "mean", "mean_square", "rms"] for d in _allowed_dtypes(name, np_type)]
    samples = _data(np_type, [(9, 30, 3), (40, 45, 2), (1, 1, 1)], seed=3)

    def build(fn, types, x):
        return [getattr(fn.reductions, name)(x, dtype=types.DALIDataType(d), **kw) for name, d in cases]

    _assert_gpu_equals_cpu(build, samples, "HWC", [f"{n} dtype={types.DALIDataType(d).name}" for n, d in cases])


def test_gpu_small_integer_sums_and_uint16_squares_wrap_as_on_the_cpu():
    require_gpu()
    u8 = [np.full((3, 100), 200, np.uint8), np.array([[200, 1, 2]], np.uint8)]

    def build_u8(fn, types, x):
        return [fn.reductions.sum(x, dtype=types.UINT8), fn.reductions.sum(x, dtype=types.UINT8, axes=0), fn.reductions.mean(x, dtype=types.UINT8)]

    _assert_gpu_equals_cpu(build_u8, u8)
    u16 = [np.full((3, 100), 65535, np.uint16), np.array([65535, 3, 40000], np.uint16).reshape(1, 3)]

    def build_u16(fn, types, x):
        return [fn.reductions.mean_square(x), fn.reductions.mean_square(x, dtype=types.UINT64), fn.reductions.mean_square(x, dtype=types.UINT64, axes=[]),
                fn.reductions.rms(x, axes=1)]

    _assert_gpu_equals_cpu(build_u16, u16)


@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1]}, {"axes": []}], ids=repr)
def test_gpu_empty_samples_equal_cpu(kw):
    require_gpu()
    for np_type in NP_TYPES:
        samples = [np.zeros(s, np_type) for s in [(0, 3), (2, 0), (0, 0), (1, 1)]]
        dtypes = [] if np_type == np.float32 else [("mean", _type_id(np_type)), ("rms", _type_id(np_type))]

        def build(fn, types, x):
            outs = _all_reductions(kw)(fn, types, x)
            return outs + [getattr(fn.reductions, n)(x, dtype=types.DALIDataType(d), **kw) for n, d in dtypes]

        _assert_gpu_equals_cpu(build, samples, "HW", ALL_NAMES + [f"{n} dtype={d}" for n, d in dtypes])


def test_gpu_scalar_samples_equal_cpu():
    require_gpu()
    samples = [np.array(v, np.float32) for v in [3.0, -2.0, 0.0, -0.0]]

    def build(fn, types, x):
        return [getattr(fn.reductions, n)(x) for n in SINGLE] + [
            fn.reductions.sum(x, axes=[]),
            fn.reductions.variance(x, 1.0),
            fn.reductions.variance(x, 1.0, ddof=1),
            fn.reductions.std_dev(x, 1.0),
        ]

    _assert_gpu_equals_cpu(build, samples)


@pytest.mark.parametrize("kw", [{}, {"axes": [0]}, {"axes": [1]}, {"axes": []}], ids=repr)
def test_gpu_nan_infinity_and_signed_zeros_equal_cpu(kw):
    require_gpu()
    inf, nan = np.inf, np.nan
    samples = [
        np.array([[nan, 1.0, -inf, 5.0], [0.0, -0.0, inf, inf]], np.float32),
        np.array([[-0.0, 0.0, -0.0, 0.0], [nan, nan, nan, nan]], np.float32),
        np.array([[3.4e38, 3.4e38, -3.4e38, 1.0], [-inf, -inf, 2.0, -0.0]], np.float32),
    ]
    _assert_gpu_equals_cpu(_all_reductions(kw), samples, None, ALL_NAMES)


@pytest.mark.parametrize("np_type", NP_TYPES, ids=[t.__name__ for t in NP_TYPES])
@pytest.mark.parametrize("ddof", [0, 1, 3])
def test_gpu_std_dev_and_variance_with_a_given_mean_equal_cpu(np_type, ddof):
    """The mean as a gpu batch of another shape, a constant (made on the gpu) broadcast to
    every output element, and `ddof`."""
    require_gpu()
    samples = _data(np_type, [(5, 7, 3), (40, 45, 3), (2, 2, 1)], seed=4)

    def build(fn, types, x):
        m_kept = fn.reductions.mean(x, axes=[0, 1], keep_dims=True)
        return [
            fn.reductions.variance(x, m_kept, axes=[0, 1], ddof=ddof),
            fn.reductions.std_dev(x, m_kept, axes=[0, 1], ddof=ddof),
            fn.reductions.variance(x, 0.25, ddof=ddof),
            fn.reductions.std_dev(x, -3.5, ddof=ddof),
            fn.reductions.std_dev(x, fn.reductions.mean(x, axis_names="C"), axis_names="C", ddof=ddof),
            fn.reductions.variance(x, 0.5, axes=[0, 1], ddof=ddof),
        ]

    _assert_gpu_equals_cpu(build, samples, "HWC")


def test_gpu_long_reductions_equal_cpu():
    """Tens of thousands of elements per output: many levels of DALI's tree."""
    require_gpu()
    samples = _data(np.float32, [(300, 200), (1, 70000), (257, 255)], seed=5)
    for kw in [{}, {"axes": [0]}, {"axes": [1]}]:
        _assert_gpu_equals_cpu(_all_reductions(kw), samples, None, ALL_NAMES)


def test_gpu_summation_trees_deeper_than_the_common_stack_equal_cpu():
    """16 reduced groups between kept axes of extent 1 (31 dimensions): the tree walk holds
    34 frames, more than the common kernels' 32, so the deep kernels run."""
    require_gpu()
    shape, axes = [], []
    for j, e in enumerate([3] * 9 + [1] * 6 + [64]):
        if j:
            shape.append(2 if j == 1 else 1)
        axes.append(len(shape))
        shape.append(e)
    for np_type in [np.float32, np.uint8, np.int32]:
        samples = _data(np_type, [tuple(shape), tuple(shape)], seed=8)

        def build(fn, types, x):
            mean = fn.reductions.mean(x, axes=axes)
            return [fn.reductions.sum(x, axes=axes, dtype=types.FLOAT), mean, fn.reductions.rms(x, axes=axes),
                    fn.reductions.std_dev(x, mean, axes=axes), fn.reductions.variance(x, mean, axes=axes, ddof=1)]

        _assert_gpu_equals_cpu(build, samples)


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_gpu_batches_with_and_without_elements_equal_cpu(axes):
    """DALI's degenerate-data case on the gpu: a batch with elements, then one without (so
    stale outputs would show), then others."""
    require_gpu()
    batches = [
        [np.ones((5, 3), np.int32), np.ones((3, 4), np.int32)],
        [np.ones((0, 2), np.int32), np.ones((0, 5), np.int32)],
        [np.arange(12, dtype=np.int32).reshape(3, 4), np.full((1, 1), 7, np.int32)],
        [np.zeros((2, 2), np.int32), np.ones((0, 1), np.int32)],
    ]

    def build(fn, types, x):
        return [fn.reductions.sum(x, axes=axes), fn.reductions.mean(x, axes=axes), fn.reductions.max(x, axes=axes)]

    for cpu, gpu in _cpu_and_gpu(build, batches):
        _assert_same(gpu, cpu, ["sum", "mean", "max"], ref_name="cpu")


def test_a_gpu_reduction_takes_its_mean_on_the_gpu():
    """As DALI's: both inputs of a gpu std_dev / variance are gpu data (the engine says so when
    the operator is created; no GPU needed)."""
    x = fn.random.uniform(range=(0, 1), shape=[4, 5])
    with pytest.raises(sluice.errors.GraphError, match=r"reductions\.variance \(device='gpu'\): input 1 is on the CPU"):
        fn.reductions.variance(x.gpu(), fn.reductions.mean(x))
