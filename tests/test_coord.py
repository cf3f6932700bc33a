"""`fn.coord_transform` and `fn.coord_flip` (cpu).

- Parity: equal to DALI 2.4's cpu operators bit for bit: coord_transform over every input
  type, FLOAT or same-type output, point dimensions 1 to 6, `M`/`T`/`MT` as lists, scalars
  and per-sample argument inputs (2-D matrices, 1-D vectors, 0-D scalars), empty samples,
  batches of empty samples, 3-D and sequence-layout inputs, rounding and saturation;
  coord_flip over 1-3 dimensions, coordinate layouts, constant and per-sample flips and
  centres, empty samples.
- DALI's own tests (operator_1/test_coord_transform.py, test_coord_flip.py) ported with the
  imports renamed, cpu only, with their references and tolerances (coord_flip's check
  covers every column; DALI's looks at the last one only). coord_transform's
  `test_sequences` (per-frame matrices) is in test_per_frame_args.py.
- Errors name the operator and the argument.
"""

import numpy as np
import pytest

import sluice
from sluice import fn, ops, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

DTYPES = {np.uint8: types.UINT8, np.int16: types.INT16, np.uint16: types.UINT16, np.int32: types.INT32, np.float32: types.FLOAT}


def _source(batch):
    return lambda: batch


def _run(lib, build, feeds, layouts=None, device_id=None):
    """Runs `build(fn, types, nodes)` on `feeds` (names to one array per sample, each an
    external source); returns the output samples, their dtype and layout."""
    layouts = layouts or {}
    pipe = lib.pipeline.Pipeline(batch_size=len(next(iter(feeds.values()))), num_threads=2, device_id=device_id, seed=1234)
    with pipe:
        nodes = {k: lib.fn.external_source(source=_source(v), batch=True, layout=layouts.get(k)) for k, v in feeds.items()}
        pipe.set_outputs(build(lib.fn, lib.types, nodes))
    pipe.build()
    (out,) = pipe.run()
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))], out.layout()


def _assert_same(ours, ref):
    """Same types, shapes and values; floats compared by their bits (-0.0 is not 0.0), NaNs
    by position."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if a.dtype == np.float32:
            nan = np.isnan(a)
            np.testing.assert_array_equal(nan, np.isnan(b))
            a, b = a.view(np.uint32)[~nan], b.view(np.uint32)[~nan]
        np.testing.assert_array_equal(a, b)


def _points(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [rng.uniform(-300, 300, s).astype(np.float32) for s in shapes]
    lo, hi = {np.uint8: (0, 256), np.int16: (-32768, 32768), np.uint16: (0, 65536), np.int32: (-10**7, 10**7)}[np_type]
    return [rng.integers(lo, hi, s).astype(np_type) for s in shapes]


# ---------------------------------------------------------------- coord_transform parity
def _ps(shape, n, seed, lo=-3.0, hi=3.0):
    rng = np.random.default_rng(seed)
    return [np.array(rng.uniform(lo, hi, shape), np.float32) for _ in range(n)]


def _ct_case(kind, n, m, batch, seed):
    """(constant arguments, per-sample arguments) for one way of giving M and T."""
    rng = np.random.default_rng(seed)
    M = rng.uniform(-3, 3, (m, n)).astype(np.float32)
    T = rng.uniform(-100, 100, m).astype(np.float32)
    MT = np.concatenate([M, T[:, None]], 1)
    return {
        "none": ({}, {}),
        "M_T_lists": ({"M": M.ravel().tolist(), "T": T.tolist()}, {}),
        "M_T_scalars": ({"M": 2.5, "T": -1.5}, {}),
        "T_only": ({"T": T.tolist()}, {}),
        "MT_list": ({"MT": MT.ravel().tolist()}, {}),
        "MT_scalar": ({"MT": 0.75}, {}),
        "M_T_inputs": ({}, {"M": _ps((m, n), batch, seed + 1), "T": _ps((m,), batch, seed + 2, -100, 100)}),
        "M_T_scalar_inputs": ({}, {"M": _ps((), batch, seed + 3), "T": _ps((), batch, seed + 4, -100, 100)}),
        "M_input_T_list": ({"T": T.tolist()}, {"M": _ps((m, n), batch, seed + 5)}),
        "M_list_T_input": ({"M": M.ravel().tolist()}, {"T": _ps((m,), batch, seed + 6, -100, 100)}),
        "MT_input": ({}, {"MT": _ps((m, n + 1), batch, seed + 7)}),
    }[kind]


CT_KINDS = ["none", "M_T_lists", "M_T_scalars", "T_only", "MT_list", "MT_scalar", "M_T_inputs", "M_T_scalar_inputs", "M_input_T_list", "M_list_T_input", "MT_input"]
# (n, m): input and output point dimensions; kinds without a matrix keep n.
CT_DIMS = [(1, 1), (2, 3), (3, 2), (3, 3), (6, 6), (4, 1), (1, 5)]


def _ct_build(consts, per_sample, dtype):
    def build(fn, types, nodes):
        kw = dict(consts)
        kw.update({k: nodes[k] for k in per_sample})
        if dtype is not None:
            kw["dtype"] = dtype
        return fn.coord_transform(nodes["X"], **kw)

    return build


@needs_dali
@pytest.mark.parametrize("same_type", [False, True])
@pytest.mark.parametrize("np_type", list(DTYPES), ids=lambda t: t.__name__)
@pytest.mark.parametrize("kind", CT_KINDS)
def test_coord_transform_equals_dali(kind, np_type, same_type):
    if same_type and np_type == np.float32:
        pytest.skip("FLOAT is the default output type")
    for j, (n, m) in enumerate(CT_DIMS):
        if kind in ("none", "M_T_scalars", "MT_scalar", "T_only", "M_T_scalar_inputs") and m != n:
            continue
        shapes = [(17, n), (0, n), (1, n), (40, n)]
        consts, per_sample = _ct_case(kind, n, m, len(shapes), seed=10 * j)
        feeds = {"X": _points(np_type, shapes, seed=j), **per_sample}
        build = _ct_build(consts, per_sample, DTYPES[np_type] if same_type else None)
        ours, l1 = _run(sluice, build, feeds, {"X": "NX"})
        ref, l2 = _run(dali, build, feeds, {"X": "NX"})
        assert l1 == l2 == "NX"
        _assert_same(ours, ref)


@needs_dali
@pytest.mark.parametrize(
    "name,np_type,dtype,data,kw",
    [
        ("u8_rounding", np.uint8, "same", [np.array([[1, 3], [5, 255]], np.uint8)], {"M": [0.5], "T": [0.0]}),
        ("i16_rounding", np.int16, "same", [np.array([[1, 3], [5, 7]], np.int16), np.array([[-1, -3]], np.int16)], {"M": [-0.5], "T": [0.0]}),
        ("u8_saturation", np.uint8, "same", [np.array([[1, 200], [255, 100]], np.uint8)], {"M": [2.0], "T": [-300.0]}),
        ("u16_saturation", np.uint16, "same", [np.array([[1, 60000], [65535, 100]], np.uint16)], {"M": [1.5, 0.0, 0.0, -1.0], "T": [0.5, 0.5]}),
        ("i32_large", np.int32, "same", [np.array([[2147483647, -2147483648], [16777217, 1]], np.int32)], {"M": [1.0], "T": [0.0]}),
        ("i32_to_float", np.int32, None, [np.array([[2147483647, -2147483648], [16777217, 1]], np.int32)], {"M": [1.0, 2.0, 3.0, 4.0]}),
        ("negative_zero_identity", np.float32, None, [np.array([[-0.0, 1.0], [2.0, -0.0]], np.float32), np.array([[-0.0], [1.0]], np.float32).reshape(1, 2)], {}),
        ("inf_nan", np.float32, None, [np.array([[np.inf, 1.0], [np.nan, 2.0], [-np.inf, np.inf]], np.float32)], {"M": [1.0, 0.0, 0.0, 1.0, 2.0, -1.0], "T": [1.0, 2.0, 3.0]}),
        ("many_points", np.float32, None, [np.random.default_rng(3).uniform(-1e4, 1e4, (5000, 3)).astype(np.float32)], {"MT": np.random.default_rng(4).uniform(-5, 5, 12).tolist()}),
    ],
)
def test_coord_transform_edges_equal_dali(name, np_type, dtype, data, kw):
    build = lambda fn, types, n: fn.coord_transform(n["X"], **kw, **({"dtype": DTYPES[np_type]} if dtype == "same" else {}))  # noqa: E731
    ours, _ = _run(sluice, build, {"X": data})
    ref, _ = _run(dali, build, {"X": data})
    _assert_same(ours, ref)


@needs_dali
@pytest.mark.parametrize("layout", ["ABC", "FNX"])
def test_coord_transform_nd_inputs_equal_dali(layout):
    """Every dimension but the last counts points; a sequence (F...) input with arguments that
    are not per frame is the same computation, and keeps its layout."""
    data = _points(np.float32, [(3, 5, 2), (2, 0, 2), (1, 4, 2)], seed=5)
    build = lambda fn, types, n: fn.coord_transform(n["X"], M=[1.0, 2.0, -3.0, 0.5, 0.25, 4.0], T=[1.0, -2.0, 3.0])  # noqa: E731
    ours, l1 = _run(sluice, build, {"X": data}, {"X": layout})
    ref, l2 = _run(dali, build, {"X": data}, {"X": layout})
    assert l1 == l2 == layout
    _assert_same(ours, ref)


@needs_dali
def test_coord_transform_all_empty_batch_equals_dali():
    """DALI checks nothing but `dtype` then, and gives samples of 0 components (float64 input
    included)."""
    data = [np.zeros((0, 3)), np.zeros((0, 3))]
    build = lambda fn, types, n: fn.coord_transform(n["X"], M=(1, 2, 3, 4, 5, 6), T=(1, 2))  # noqa: E731
    ours, l1 = _run(sluice, build, {"X": data}, {"X": "AB"})
    ref, l2 = _run(dali, build, {"X": data}, {"X": "AB"})
    assert l1 == l2 == "AB"
    _assert_same(ours, ref)
    assert ours[0].shape == (0, 0) and ours[0].dtype == np.float32


# ---------------------------------------------------------------- coord_flip parity
FLIP_CASES = [
    ("x", 1), ("xy", 2), ("yx", 2), ("xyz", 3), ("zxy", 3), ("yzx", 3), ("", 1), ("", 2), ("", 3), ("zyx", 2), ("xyz", 2),
]


@needs_dali
@pytest.mark.parametrize("per_sample", [False, True])
@pytest.mark.parametrize("layout,ndim", FLIP_CASES)
def test_coord_flip_equals_dali(layout, ndim, per_sample):
    rng = np.random.default_rng(ndim * 10 + len(layout))
    data = [rng.uniform(-1e3, 1e3, (k, ndim)).astype(np.float32) for k in (7, 0, 1, 13)]
    data[0][0, 0] = -0.0
    if per_sample:
        feeds = {"X": data}
        for axis in "xyz":
            feeds["flip_" + axis] = [np.array(v, np.int32) for v in rng.integers(0, 3, len(data))]
            feeds["center_" + axis] = [np.array(v, np.float32) for v in rng.uniform(-100, 100, len(data))]
        build = lambda fn, types, n: fn.coord_flip(n["X"], layout=layout, **{k: v for k, v in n.items() if k != "X"})  # noqa: E731
    else:
        feeds = {"X": data}
        kw = {"flip_x": 1, "flip_y": 1, "flip_z": 0, "center_x": 0.1, "center_y": -7.3, "center_z": 3.3}
        build = lambda fn, types, n: fn.coord_flip(n["X"], layout=layout, **kw)  # noqa: E731
    ours, _ = _run(sluice, build, feeds)
    ref, _ = _run(dali, build, feeds)
    _assert_same(ours, ref)


@needs_dali
def test_coord_flip_defaults_and_special_values_equal_dali():
    data = [np.array([[0.3], [1e-8], [3e38], [np.inf], [-0.0]], np.float32), np.ones((2, 1), np.float32)]
    for kw in ({}, {"center_x": 0.1}, {"flip_x": 0}, {"flip_x": 2, "center_x": -1e38}):
        build = lambda fn, types, n: fn.coord_flip(n["X"], **kw)  # noqa: E731
        ours, l1 = _run(sluice, build, {"X": data})
        ref, l2 = _run(dali, build, {"X": data})
        assert l1 == l2 == ""
        _assert_same(ours, ref)


@needs_dali
def test_coord_flip_zero_dimensional_points_equal_dali():
    data = [np.ones((3, 0), np.float32), np.ones((0, 0), np.float32)]
    build = lambda fn, types, n: fn.coord_flip(n["X"])  # noqa: E731
    ours, _ = _run(sluice, build, {"X": data})
    ref, _ = _run(dali, build, {"X": data})
    _assert_same(ours, ref)


# ---------------------------------------------------------------- DALI's tests, ported
def make_param(kind, shape):
    if kind == "input":
        return fn.random.uniform(range=(0, 1), shape=shape)
    elif kind == "scalar input":
        return fn.reshape(fn.random.uniform(range=(0, 1)), shape=[])
    elif kind == "vector":
        return np.random.rand(*shape).astype(np.float32)
    elif kind == "scalar":
        return np.random.rand()
    return None


def make_data_batch(batch_size, in_dim, type):
    np.random.seed(1234)
    batch = []
    lo, hi = 0, 1
    if np.issubdtype(type, np.integer):
        info = np.iinfo(type)
        # clip range to +/- 1000000 to prevent excessively large epsilons
        lo = max(info.min / 2, -1000000)
        hi = min(info.max / 2, 1000000)
    for _ in range(batch_size):
        batch.append((np.random.rand(np.random.randint(0, 10000), in_dim) * (hi - lo) + lo).astype(type))
    return batch


def check_batch(out, ref, batch_size, eps, max_allowed_error, expected_layout):
    """DALI's test_utils.check_batch, as far as this test uses it: layout, shapes, and per
    sample the maximum absolute error (the mean one when no maximum is given)."""
    assert out.layout() == expected_layout
    for i in range(batch_size):
        a, b = np.array(out.at(i)).astype(np.float64), np.asarray(ref[i], np.float64)
        assert a.shape == b.shape
        if a.size:
            err = np.abs(a - b)
            if max_allowed_error is not None:
                assert err.max() <= max_allowed_error, (err.max(), max_allowed_error)
            else:
                assert err.mean() <= eps, (err.mean(), eps)


def _run_test(batch_size, out_dim, in_dim, in_dtype, out_dtype, M_kind, T_kind):
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        X = fn.external_source(source=lambda: make_data_batch(batch_size, in_dim, in_dtype), device="cpu", layout="NX")
        M = T = MT = None
        if T_kind == "fused":
            MT = make_param(M_kind, [out_dim, in_dim + 1])
        else:
            M = make_param(M_kind, [out_dim, in_dim])
            T = make_param(T_kind, [out_dim])
        Y = fn.coord_transform(
            X,
            MT=MT.flatten().tolist() if isinstance(MT, np.ndarray) else MT,
            M=M.flatten().tolist() if isinstance(M, np.ndarray) else M,
            T=T.flatten().tolist() if isinstance(T, np.ndarray) else T,
            dtype=DTYPES[out_dtype],
        )
        M = 1 if M is None else M
        T = 0 if T is None else T
        MT = 0 if MT is None else MT
        M, T, MT = (x if isinstance(x, sluice.DataNode) else types.Constant(x, dtype=types.FLOAT) for x in (M, T, MT))
        pipe.set_outputs(X, Y, M, T, MT)
    for _ in range(3):
        outputs = pipe.run()
        ref = []
        scale = 1
        for idx in range(batch_size):
            X = np.array(outputs[0].at(idx))
            if T_kind == "fused":
                MT = np.array(outputs[4].at(idx))
                if MT.size == 1:
                    M, T = MT, 0
                else:
                    M, T = MT[:, :-1], MT[:, -1]
            else:
                M, T = np.array(outputs[2].at(idx)), np.array(outputs[3].at(idx))
            if M.size == 1:
                Y = X.astype(np.float32) * M + T
            else:
                Y = np.matmul(X.astype(np.float32), M.transpose()) + T
            if np.issubdtype(out_dtype, np.integer):
                info = np.iinfo(out_dtype)
                Y = Y.clip(info.min, info.max)
            ref.append(Y)
            scale = max(scale, np.max(np.abs(Y)) - np.min(np.abs(Y))) if Y.size > 0 else 1
        avg = eps = 1e-6 * scale
        if out_dtype != np.float32:  # headroom for rounding
            avg += 0.33
            eps += 0.5
        check_batch(outputs[1], ref, batch_size, avg, eps, expected_layout="NX")


KINDS = [None, "vector", "scalar", "input", "scalar input"]
GRID = (
    [(bs, 3, 3, np.float32, np.float32, mk, tk) for mk in KINDS for tk in KINDS for bs in (1, 3)]
    + [(bs, 3, 3, it, ot, "input", "input") for it in DTYPES for ot in sorted({it, np.float32}, key=lambda t: t.__name__) for bs in (1, 8)]
    + [(2, od, idim, np.float32, np.float32, mk, "vector") for mk in ["input", "vector", None] for idim in range(1, 7) for od in (range(1, 7) if mk else [idim])]
    + [(2, od, idim, np.float32, np.float32, mk, "fused") for mk in ["vector", "input", "scalar"] for idim in range(1, 7) for od in (range(1, 7) if mk != "scalar" else [idim])]
)


@pytest.mark.parametrize("batch_size,out_dim,in_dim,in_dtype,out_dtype,M_kind,T_kind", GRID)
def test_dali_coord_transform(batch_size, out_dim, in_dim, in_dtype, out_dtype, M_kind, T_kind):
    _run_test(batch_size, out_dim, in_dim, in_dtype, out_dtype, M_kind, T_kind)


def test_dali_empty_input():
    pipe = Pipeline(batch_size=2, num_threads=4, device_id=None, seed=1234)
    with pipe:
        X = fn.external_source(source=[[np.zeros([0, 3]), np.zeros([0, 3])]], device="cpu", layout="AB")
        Y = fn.coord_transform(X, M=(1, 2, 3, 4, 5, 6), T=(1, 2))
        pipe.set_outputs(Y)
    o = pipe.run()
    assert o[0].layout() == "AB"
    assert len(o[0]) == 2
    for i in range(len(o[0])):
        assert np.array(o[0].at(i)).size == 0


class RandomDataIterator:
    """DALI's test_utils.RandomDataIterator for float32: batches of values in [-0.5, 0.5)."""

    def __init__(self, batch_size, shape, dtype=np.float32, seed=0):
        self.batch_size, self.shape, self.dtype = batch_size, shape, dtype
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        return self

    def __next__(self):
        return [(self.rng.random(self.shape) - 0.5).astype(self.dtype) for _ in range(self.batch_size)]


class CoordFlipPipeline(Pipeline):
    def __init__(self, device, batch_size, iterator, layout, center_x=None, center_y=None, center_z=None, num_threads=1, device_id=None):
        super().__init__(batch_size, num_threads, device_id)
        self.device = device
        self.iterator = iterator
        self.coord_flip = ops.CoordFlip(device=self.device, layout=layout, center_x=center_x, center_y=center_y, center_z=center_z)
        self.flip_x = ops.random.CoinFlip(probability=0.5)
        self.flip_y = ops.random.CoinFlip(probability=0.5)
        self.flip_z = ops.random.CoinFlip(probability=0.5) if len(layout) == 3 else None

    def define_graph(self):
        inputs = fn.external_source(lambda: next(self.iterator))
        inputs = 0.5 + inputs  # Make it fit the range [0.0, 1.0]
        out = inputs.gpu() if self.device == "gpu" else inputs
        flip_x = self.flip_x()
        flip_y = self.flip_y()
        flip_z = self.flip_z() if self.flip_z is not None else None
        out = self.coord_flip(out, flip_x=flip_x, flip_y=flip_y, flip_z=flip_z)
        outputs = [inputs, out, flip_x, flip_y]
        if flip_z is not None:
            outputs.append(flip_z)
        return outputs


@pytest.mark.parametrize("center_x,center_y,center_z", [(0.5, 0.5, 0.5), (0.0, 1.0, -0.5)])
@pytest.mark.parametrize("layout,shape", [("x", (10, 1)), ("xy", (10, 2)), ("xyz", (10, 3)), ("xy", (0, 2))])
@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_dali_operator_coord_flip(batch_size, layout, shape, center_x, center_y, center_z, device):
    if device == "gpu":
        require_gpu()
    device_id = 0 if device == "gpu" else None
    pipe = CoordFlipPipeline(device, batch_size, iter(RandomDataIterator(batch_size, shape=shape)), layout, center_x, center_y, center_z, device_id=device_id)
    for _ in range(30):
        outputs = tuple(out.as_cpu() for out in pipe.run())
        for sample in range(batch_size):
            in_coords = np.array(outputs[0].at(sample))
            out_coords = np.array(outputs[1].at(sample))
            if in_coords.shape == () or in_coords.shape[0] == 0:
                assert out_coords.shape == () or out_coords.shape[0] == 0
                continue
            flip_dim = [np.array(outputs[2].at(sample)), np.array(outputs[3].at(sample))]
            ndim = in_coords.shape[1]
            if ndim == 3:
                flip_dim.append(np.array(outputs[4].at(sample)))
            center_dim = [center_x, center_y, center_z][:ndim]
            expected_out_coords = np.copy(in_coords)
            for d in range(ndim):
                if flip_dim[d]:
                    expected_out_coords[:, d] = 2 * center_dim[d] - in_coords[:, d]
            np.testing.assert_allclose(out_coords, expected_out_coords)  # every column (DALI checks the last)


# ---------------------------------------------------------------- gpu equal to cpu
@pytest.mark.parametrize("np_type", list(DTYPES), ids=lambda t: t.__name__)
@pytest.mark.parametrize("kind", ["M_T_lists", "MT_scalar", "M_T_inputs", "M_T_scalar_inputs", "MT_input"])
def test_coord_transform_gpu_equals_cpu(kind, np_type):
    require_gpu()
    for same_type in [False, True]:
        for j, (n, m) in enumerate(CT_DIMS):
            if kind in ("MT_scalar", "M_T_scalar_inputs") and m != n:
                continue
            shapes = [(17, n), (0, n), (1, n), (4000, n)]
            consts, per_sample = _ct_case(kind, n, m, len(shapes), seed=10 * j)
            feeds = {"X": _points(np_type, shapes, seed=j), **per_sample}
            dtype = DTYPES[np_type] if same_type else None
            build = _ct_build(consts, per_sample, dtype)

            def on_gpu(fn, types, nodes):
                return build(fn, types, {**nodes, "X": nodes["X"].gpu()})

            cpu, _ = _run(sluice, build, feeds, {"X": "NX"})
            gpu, layout = _run(sluice, on_gpu, feeds, {"X": "NX"}, device_id=0)
            assert layout == "NX"
            _assert_same(gpu, cpu)


@pytest.mark.parametrize("layout", ["x", "yx", "zxy"])
def test_coord_flip_gpu_equals_cpu(layout):
    require_gpu()
    ndim = len(layout)
    rng = np.random.default_rng(ndim)
    shapes = [(33, ndim), (0, ndim), (5000, ndim)]
    feeds = {
        "X": [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes],
        "fy": [np.array(v, np.int32) for v in (1, 0, 1)],
        "cy": [np.array(v, np.float32) for v in (0.3, -2.0, 7.5)],
    }

    def build(gpu):
        def b(fn, types, nodes):
            x = nodes["X"].gpu() if gpu else nodes["X"]
            return fn.coord_flip(x, layout=layout, flip_y=nodes["fy"], center_y=nodes["cy"], flip_z=1, center_x=0.75)

        return b

    cpu, _ = _run(sluice, build(False), feeds)
    gpu, _ = _run(sluice, build(True), feeds, device_id=0)
    _assert_same(gpu, cpu)


# ---------------------------------------------------------------- errors
X2 = [np.arange(6, dtype=np.float32).reshape(3, 2)]


def _fails(build, data, match, layout=None):
    with pytest.raises(ValueError, match=match):
        _run(sluice, build, {"X": data} if not isinstance(data, dict) else data, {"X": layout} if layout else None)


def test_coord_transform_argument_errors():
    C = r"(?s)coord_transform.*"
    ct = lambda **kw: lambda fn, types, n: fn.coord_transform(n["X"], **{k: (n[v] if isinstance(v, str) else v) for k, v in kw.items()})  # noqa: E731
    _fails(ct(M=[1.0, 0, 0, 1], MT=[1.0, 0, 0, 0, 1, 0]), X2, C + "MT.*cannot be used together")
    _fails(ct(M=[1.0, 2, 3]), X2, C + "M.*Cannot form a matrix with 3 elements and 2 columns")
    _fails(ct(M=[]), X2, C + "M.*must not be an empty list")
    _fails(ct(M=[1.0, 0, 0, 1], T=[1.0, 2, 3]), X2, C + r"T.*single value or a list of 2 elements\. 3 given")
    _fails(ct(M="m"), {"X": X2, "m": [np.eye(3, dtype=np.float32)]}, C + "M.*3 x 3 matrices.*2 columns")
    _fails(ct(M="m"), {"X": X2, "m": [np.ones(4, np.float32)]}, C + "M.*2D matrices.*scalars")
    _fails(ct(M="m"), {"X": X2, "m": [np.ones((0, 2), np.float32)]}, C + "M.*0 rows")
    _fails(ct(T="t"), {"X": X2, "t": [np.ones(3, np.float32)]}, C + "T.*Expected 2-D translation vectors, got 3-D")
    _fails(ct(T="t"), {"X": X2, "t": [np.ones((1, 2), np.float32)]}, C + "T.*1D tensors or a list of scalars")
    _fails(ct(M=[1.0] * 14), X2, C + "M.*Unsupported output point dimensionality: 7")
    ragged = {"X": X2 * 2, "m": [np.eye(2, dtype=np.float32), np.eye(2, 3, dtype=np.float32)]}
    _fails(ct(M="m"), ragged, C + "M.*same shape.*sample 1")


def test_coord_transform_input_errors():
    C = r"(?s)coord_transform.*"
    build = lambda fn, types, n: fn.coord_transform(n["X"])  # noqa: E731
    _fails(build, [np.ones(3, np.float32)], C + "at least 2 dimensions")
    _fails(lambda fn, types, n: fn.coord_transform(n["X"], dtype=types.INT16), X2, C + "dtype.*same as input type.*FLOAT.*INT16")
    _fails(build, [x.astype(np.int8) for x in X2], C + "Unsupported input type: INT8")
    _fails(build, [x.astype(np.float64) for x in X2], C + "Unsupported input type: FLOAT64")
    _fails(build, [np.ones((2, 7), np.float32)], C + "Unsupported input point dimensionality: 7")
    _fails(build, [X2[0], np.ones((2, 3), np.float32)], C + "point dimensions must be the same.*sample 1")


def test_coord_flip_errors():
    F = r"(?s)coord_flip.*"
    flip = lambda **kw: lambda fn, types, n: fn.coord_flip(n["X"], **kw)  # noqa: E731
    _fails(flip(), [np.ones((2, 2), np.uint8)], F + "float.*UINT8")
    _fails(flip(), [np.ones((2, 2, 2), np.float32)], F + "2-D")
    _fails(flip(), [np.ones((2, 2), np.float32), np.ones((2, 3), np.float32)], F + "same number of dimensions.*sample 1")
    _fails(flip(), [np.ones((2, 4), np.float32)], F + "Unexpected number of dimensions 4")
    _fails(flip(layout="y", flip_y=1), [np.ones((2, 1), np.float32)], F + 'layout.*Dimension "x" not found')
    _fails(flip(layout="XY"), [np.ones((2, 2), np.float32)], F + 'layout.*Dimension "x" not found')
    _fails(flip(layout="xz"), [np.ones((2, 2), np.float32)], F + 'layout.*Dimension "y" not found')
    _fails(flip(layout="xyq"), [np.ones((2, 3), np.float32)], F + 'layout.*Dimension "z" not found')
    with pytest.raises(ValueError, match=F + "center_x.*one value per sample"):
        _run(sluice, lambda fn, types, n: fn.coord_flip(n["X"], center_x=n["c"]), {"X": X2, "c": [np.ones(2, np.float32)]})
