"""`fn.water` and `fn.sphere` (cpu and gpu) against DALI 2.4's cpu operators.

DALI 2.4 registers both operators for cpu and gpu (dali/operators/image/remap/water.cc,
water.cu, sphere.cc, sphere.cu); its cpu operator is the reference.

- DALI's own tests ported, `nvidia.dali` replaced by `sluice`: operator_2/test_water.py
  (water against an OpenCV-style bilinear remap, eps 8, cpu and gpu; cpu against gpu with a
  coin-flip mask, eps 1), test_dali_cpu_only's and test_dali_variable_batch_size's default
  runs, and checkpointing/test_dali_stateless_operators' (a used pipeline equals a fresh one).
  The Caffe LMDB images DALI reads become generated images (no data set on disk), the
  `prime_size` resize becomes images of that size, `cv2.remap` a NumPy remap.
- Parity with DALI 2.4's cpu operator, bit for bit (NaNs as NaN): UINT8 and FLOAT, nearest
  and linear, default and other waves, `fill_value` converted as DALI's C++ assignment does
  (300 -> 44, -1.7 -> 255, NaN -> 0), points far outside or NaN (huge or NaN amplitudes,
  1x1 spheres), empty images, 0 to 16 channels, no layout (the output says HWC), `mask`
  argument inputs, variable batch sizes, several iterations.
- A NumPy reference written from DALI's formulas (libm's `sinf` / `cosf` through ctypes:
  NumPy's float32 sin is another approximation and differs from it on ~15% of arguments),
  equal to DALI, bit for bit, and to Sluice where DALI is not installed.
- Errors name the operator and the argument (and the sample), and the pipeline goes on.
- Sluice's departures from DALI (a constant `mask`, `mask` inputs of other types, masks
  of several or no values, more than 1024 channels) on Sluice alone.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import ctypes
import ctypes.util
import math

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, library_params, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NAN, INF = float("nan"), float("inf")
FREQ = 2.0 * math.pi / 128  # DALI's default freq_x / freq_y (kept as a float)

# (id, operator, arguments): the cases every parity test runs, nearest and linear.
CASES = [
    ("water_default", "water", {}),
    ("water_dali_test", "water", dict(ampl_x=2.0, ampl_y=3.0, freq_x=0.06, freq_y=0.08, phase_x=0.2, phase_y=0.5, fill_value=77.6)),
    ("water_wild", "water", dict(ampl_x=-7.3, ampl_y=13.1, freq_x=1.7, freq_y=-0.3, phase_x=100.2, phase_y=-3.5, fill_value=-3)),
    ("water_x_only", "water", dict(ampl_x=25.0, ampl_y=0.0, freq_x=0.3, fill_value=300.0)),
    ("sphere", "sphere", dict(fill_value=5.5)),
    ("sphere_default", "sphere", {}),
]

# Sizes DALI handles in its own ways: 1x1 (the sphere divides 0 by 0), rows and columns of
# one pixel, empty images, no channels, one to four channels.
SHAPES = [(37, 53, 3), (128, 96, 1), (5, 200, 4), (1, 1, 3), (1, 2, 3), (2, 1, 2), (3, 1, 2), (0, 5, 3), (5, 0, 3), (4, 4, 0), (64, 65, 3)]


def _const(v):
    """A source giving `v` every iteration (a callable of no argument: one with an argument
    would be given the iteration)."""
    return lambda: v


def _arrays(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _images(shapes, dtype=np.uint8, seed=0):
    """UINT8 over its whole range; FLOAT in [-20, 280) (outside the UINT8 range on purpose)."""
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return [rng.integers(0, 256, s).astype(np.uint8) for s in shapes]
    return [(rng.random(s) * 300 - 20).astype(np.float32) for s in shapes]


def _interp(lib, linear):
    return lib.types.INTERP_LINEAR if linear else lib.types.INTERP_NN


def _pipe(lib, data, builds, layout="HWC", masks=None, gpu=False):
    """A pipeline over `data` (a list of samples, or a list of batches fed in turn) with one
    output per `builds` entry: (operator name, kwargs, on_gpu). `masks`: one array per sample
    (or per sample of each batch), fed as the `mask` argument input of every entry."""
    pipe = lib.pipeline.Pipeline(batch_size=max(len(b) for b in data) if _batches(data) else len(data), num_threads=2, device_id=0 if gpu else None)
    with pipe:
        x = lib.fn.external_source(source=_feed(data), batch=True, layout=layout)
        extra = {} if masks is None else {"mask": lib.fn.external_source(source=_feed(masks), batch=True)}
        outs = [getattr(lib.fn, op)(x.gpu() if on_gpu else x, **kw, **extra) for op, kw, on_gpu in builds]
        pipe.set_outputs(*outs)
    pipe.build()
    return pipe


def _batches(data):
    """True for a list of batches (lists), False for one batch of arrays."""
    return len(data) > 0 and isinstance(data[0], list)


def _feed(data):
    if not _batches(data):
        return _const(data)
    it = iter(data)
    return lambda: next(it)


def _run(lib, data, op, layout="HWC", masks=None, iters=1, **kw):
    """`op(**kw)` of `data` on the cpu: the last iteration's samples and layout."""
    pipe = _pipe(lib, data, [(op, kw, False)], layout, masks)
    for _ in range(iters):
        (out,) = pipe.run()
    return _arrays(out), out.layout()


def _assert_same(ours, theirs, what=""):
    """Same dtypes, shapes and bytes (FLOAT NaNs equal whatever their bits)."""
    assert len(ours) == len(theirs), what
    for i, (x, y) in enumerate(zip(ours, theirs)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what} sample {i}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        if x.dtype == np.float32:
            same = (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))
        else:
            same = x == y
        if not np.all(same):
            bad = np.argwhere(~same.reshape(-1))[:5].ravel()
            raise AssertionError(f"{what} sample {i}: elements {bad.tolist()} of {x.size} differ ({np.count_nonzero(~same)} in all): {x.reshape(-1)[bad]} != {y.reshape(-1)[bad]}")


def _parity(data, op, linear=False, layout="HWC", masks=None, **kw):
    """`op(**kw)` on Sluice and DALI (two iterations), `interp_type` linear or nearest as
    each library's own enum: the same bytes, and the layout HWC. Returns Sluice's."""
    ours, l1 = _run(sluice, data, op, layout, masks, 2, interp_type=_interp(sluice, linear), **kw)
    theirs, l2 = _run(dali, data, op, layout, masks, 2, interp_type=_interp(dali, linear), **kw)
    assert l1 == l2 == "HWC"
    _assert_same(ours, theirs, f"{op} {kw}")
    return ours


# ---------------------------------------------------------------- NumPy reference
# DALI's formulas (water.h, sphere.h, kernels/imgproc/sampler.h, displacement_filter_impl_cpu.h),
# every operation in float32 as its x86 build computes them.


def _libm():
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    for f in ("sinf", "cosf"):
        getattr(lib, f).restype = ctypes.c_float
        getattr(lib, f).argtypes = [ctypes.c_float]
    return lib


LIBM = _libm()
needs_libm = pytest.mark.skipif(LIBM is None, reason="needs the C library's sinf / cosf")
F = np.float32


def _water_points(h, w, ampl_x=10.0, ampl_y=10.0, freq_x=FREQ, freq_y=FREQ, phase_x=0.0, phase_y=0.0):
    """(x + ampl_x * sinf(freq_x * y + phase_x), y + ampl_y * cosf(freq_y * x + phase_y))."""
    ax, ay, fx, fy, px, py = (F(v) for v in (ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y))
    with np.errstate(all="ignore"):
        rows = np.array([ax * F(LIBM.sinf(float(fx * F(y) + px))) for y in range(h)], F)
        cols = np.array([ay * F(LIBM.cosf(float(fy * F(x) + py))) for x in range(w)], F)
        return np.arange(w, dtype=F)[None, :] + rows[:, None], np.arange(h, dtype=F)[:, None] + cols[None, :]


def _sphere_points(h, w):
    """mid + t * |t| / d, t = (x + 0.5, y + 0.5) - mid, d = (int)max(mid)."""
    mx, my = F(w) * F(0.5), F(h) * F(0.5)
    d = F(int(mx if mx > my else my))
    ys, xs = np.meshgrid(np.arange(h, dtype=F), np.arange(w, dtype=F), indexing="ij")
    with np.errstate(all="ignore"):
        ty = (ys + F(0.5)) - my
        tx = (xs + F(0.5)) - mx
        rad = np.sqrt(tx * tx + ty * ty) / d
        return mx + rad * tx, my + rad * ty


def _floor_int(v):
    """static_cast<int>(floor(v)) on x86: INT_MIN for NaN and values past the int range."""
    with np.errstate(all="ignore"):
        f = np.floor(v.astype(np.float64))
        ok = (f >= -(2.0**31)) & (f < 2.0**31)
        return np.where(ok, np.where(ok, f, 0).astype(np.int64), -(2**31))


def _fill_element(v, dtype):
    """`In fill = float_value` on x86: truncation through int32 for UINT8, low byte kept."""
    v = F(v)
    if dtype == np.float32:
        return v
    i = int(v) if -(2.0**31) <= v < 2.0**31 else -(2**31)
    return np.uint8(i & 0xFF)


def _round_sat_u8(v):
    """ConvertSat<uint8>(float): half away from zero, saturated, NaN -> 0."""
    v = v.astype(np.float64)
    with np.errstate(all="ignore"):
        r = np.sign(v) * np.floor(np.abs(v) + 0.5)
        return np.where(np.isnan(r), 0, np.clip(r, 0, 255)).astype(np.uint8)


def _sample(img, sx, sy, linear, fill):
    """DALI's Sampler2D with a constant border at points (sx, sy)."""
    h, w, c = img.shape
    out_shape = (sx.shape[0], sx.shape[1], c)
    if sx.size == 0 or c == 0:
        return np.zeros(out_shape, img.dtype)
    fv = _fill_element(fill, img.dtype)

    def taps(ix, iy):
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        v = img[np.where(inside, iy, 0), np.where(inside, ix, 0)] if img.size else np.zeros(out_shape, img.dtype)
        return np.where(inside[..., None], v, fv).astype(img.dtype)

    if not linear:
        return taps(_floor_int(sx), _floor_int(sy))
    with np.errstate(all="ignore"):
        x, y = sx - F(0.5), sy - F(0.5)
        x0, y0 = _floor_int(x), _floor_int(y)
        x1, y1 = x0 + 1, y0 + 1
        qx = (x - x0.astype(F))[..., None]
        px = F(1) - qx
        qy = (y - y0.astype(F))[..., None]
        s00, s01, s10, s11 = (taps(a, b).astype(F) for a, b in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)))
        s0 = s00 * px + s01 * qx
        s1 = s10 * px + s11 * qx
        v = s0 + (s1 - s0) * qy
    return v.astype(F) if img.dtype == np.float32 else _round_sat_u8(v)


def _reference(img, op, interp_type=0, fill_value=0.0, mask=1, **kw):
    if not mask:
        return img.copy()
    h, w = img.shape[:2]
    sx, sy = _water_points(h, w, **kw) if op == "water" else _sphere_points(h, w)
    return _sample(img, sx, sy, interp_type == 1, fill_value)


# ---------------------------------------------------------------- DALI's tests, ported
# operator_2/test_water.py with `nvidia.dali` -> `lib`, its test_utils helpers alongside.


def check_batch(batch1, batch2, batch_size, eps=1e-07, expected_layout=None):
    """test_utils.check_batch: batch sizes, layouts, shapes, and each sample's mean absolute
    error within `eps`."""
    batch1, batch2 = (b.as_cpu() if hasattr(b, "as_cpu") else b for b in (batch1, batch2))
    for batch in (batch1, batch2):
        assert len(batch) == batch_size
        if expected_layout is not None and hasattr(batch, "layout"):
            assert batch.layout() == expected_layout
    left_all = _arrays(batch1) if hasattr(batch1, "at") else batch1
    right_all = _arrays(batch2) if hasattr(batch2, "at") else batch2
    for left, right in zip(left_all, right_all):
        assert left.shape == right.shape
        if left.size:
            err = np.mean(np.abs(left.astype(np.float64) - right.astype(np.float64)))
            assert err <= eps, f"mean error {err} > {eps}"


def compare_pipelines(pipe1, pipe2, batch_size, N_iterations, eps=1e-07):
    """test_utils.compare_pipelines."""
    for _ in range(N_iterations):
        out1, out2 = pipe1.run(), pipe2.run()
        assert len(out1) == len(out2)
        for a, b in zip(out1, out2):
            check_batch(a, b, batch_size, eps)


def _decoded_images(batch_size, niter, prime_size, seed=0):
    """Stand-ins for the decoded Caffe images: smooth colour fields with noise, of assorted
    sizes, a new batch per iteration (43 x 101 for DALI's `prime_size` resize)."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(niter + 1):
        batch = []
        for _ in range(batch_size):
            h, w = (43, 101) if prime_size else (int(rng.integers(60, 160)), int(rng.integers(60, 200)))
            yy, xx = np.mgrid[0:h, 0:w]
            base = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (w + h)], axis=-1)
            batch.append(np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8))
        batches.append(batch)
    return batches


def WaterPipeline(lib, device, batch_size, phase_y, phase_x, freq_x, freq_y, ampl_x, ampl_y, num_threads=3, device_id=None,
                  dtype=None, prime_size=False, do_mask=False, images=None):
    """DALI's WaterPipeline for `lib` (its device_id: 0 only where a gpu is used)."""
    ops, types_ = lib.ops, lib.types
    dtype = types_.UINT8 if dtype is None else dtype

    class WaterPipeline(lib.pipeline.Pipeline):
        def __init__(self):
            super().__init__(batch_size, num_threads, 0 if device == "gpu" else device_id)
            self.device = device
            self.dtype = dtype
            self.do_mask = do_mask
            self.images = iter(images)
            self.input = ops.ExternalSource()
            self.water = ops.Water(device=self.device, ampl_x=ampl_x, ampl_y=ampl_y, phase_x=phase_x, phase_y=phase_y,
                                   freq_x=freq_x, freq_y=freq_y, interp_type=types_.INTERP_LINEAR)

        def define_graph(self):
            self.data = self.input()
            images = self.data
            if self.device == "gpu":
                images = images.gpu()
            mask = lib.fn.random.coin_flip(seed=42) if self.do_mask else None
            images = lib.fn.cast(images, dtype=self.dtype)
            if mask is None:
                return self.water(images)
            return self.water(images, mask=mask)

        def iter_setup(self):
            self.feed_input(self.data, next(self.images), layout="HWC")

    return WaterPipeline()


def python_water(img, phase_y, phase_x, freq_x, freq_y, ampl_x, ampl_y):
    """DALI's reference, with `_remap_linear` for cv2.remap(..., cv2.INTER_LINEAR)."""
    nh, nw = img.shape[:2]
    img_x = np.zeros((nh, nw), np.float32)
    img_y = np.zeros((nh, nw), np.float32)
    x_idx = np.arange(0, nw, 1, np.float32)
    y_idx = np.arange(0, nh, 1, np.float32)
    x_wave = ampl_y * np.cos(freq_y * x_idx + phase_y)
    y_wave = ampl_x * np.sin(freq_x * y_idx + phase_x)
    for x in range(nw):
        img_x[:, x] = y_wave + x - 0.5

    for y in range(nh):
        img_y[y, :] = x_wave + y - 0.5

    return _remap_linear(img, img_x, img_y)


def _remap_linear(img, map_x, map_y):
    """cv2.remap with INTER_LINEAR and the default constant border of 0: pixel centres at
    integer coordinates, the four neighbours weighted in float (OpenCV quantizes the weights
    to 1/32, hence the test's eps), rounded back for UINT8."""
    h, w = img.shape[:2]
    x0 = np.floor(map_x).astype(np.int64)
    y0 = np.floor(map_y).astype(np.int64)
    fx = (map_x - x0)[..., None]
    fy = (map_y - y0)[..., None]

    def tap(x, y):
        inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
        return np.where(inside[..., None], img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)], 0).astype(np.float64)

    v = (tap(x0, y0) * (1 - fx) + tap(x0 + 1, y0) * fx) * (1 - fy) + (tap(x0, y0 + 1) * (1 - fx) + tap(x0 + 1, y0 + 1) * fx) * fy
    return np.clip(np.round(v), 0, 255).astype(np.uint8) if img.dtype == np.uint8 else v.astype(img.dtype)


def WaterPythonPipeline(batch_size, function, num_threads=1, device_id=None, dtype=types.UINT8, images=None):
    """DALI's WaterPythonPipeline (Sluice's python_function)."""

    class WaterPythonPipeline(Pipeline):
        def __init__(self):
            super().__init__(batch_size, num_threads, device_id, exec_async=False, exec_pipelined=False)
            self.dtype = dtype
            self.images = iter(images)
            self.input = sluice.ops.ExternalSource()
            self.water = sluice.ops.PythonFunction(function=function, output_layouts="HWC")

        def define_graph(self):
            self.data = self.input()
            images = fn.cast(self.data, dtype=self.dtype)
            return self.water(images)

        def iter_setup(self):
            self.feed_input(self.data, next(self.images), layout="HWC")

    return WaterPythonPipeline()


WAVE = dict(phase_y=0.5, phase_x=0.2, freq_x=0.06, freq_y=0.08, ampl_x=2.0, ampl_y=3.0)


def check_water_cpu_vs_gpu(batch_size, niter, dtype, do_mask):
    images = _decoded_images(batch_size, niter, False, seed=batch_size)
    compare_pipelines(
        WaterPipeline(sluice, "cpu", batch_size, dtype=dtype, do_mask=do_mask, images=images, **WAVE),
        WaterPipeline(sluice, "gpu", batch_size, dtype=dtype, do_mask=do_mask, images=images, **WAVE),
        batch_size=batch_size,
        N_iterations=niter,
        eps=1,
    )


@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("do_mask", [False, True])
@pytest.mark.parametrize("dtype", [types.UINT8, types.FLOAT], ids=["uint8", "float"])
def test_water_cpu_vs_gpu(batch_size, do_mask, dtype):
    require_gpu()
    check_water_cpu_vs_gpu(batch_size, 3, dtype, do_mask)


def check_water_vs_cv(device, batch_size, niter, dtype, prime_size):
    def python_func(img):
        return python_water(img, **WAVE)

    images = _decoded_images(batch_size, niter, prime_size, seed=7 + batch_size)
    compare_pipelines(
        WaterPipeline(sluice, device, batch_size, dtype=dtype, prime_size=prime_size, images=images, **WAVE),
        WaterPythonPipeline(batch_size, python_func, dtype=dtype, images=images),
        batch_size=batch_size,
        N_iterations=niter,
        eps=8,
    )
    if dali is not None and device == "cpu":
        # The same pipeline on DALI's cpu operator: the same bytes.
        ours = WaterPipeline(sluice, "cpu", batch_size, dtype=dtype, images=images, **WAVE)
        theirs = WaterPipeline(dali, "cpu", batch_size, dtype=types_of(dali, dtype), images=images, **WAVE)
        for _ in range(niter):
            (a,), (b,) = ours.run(), theirs.run()
            _assert_same(_arrays(a), _arrays(b), "WaterPipeline")


def types_of(lib, dtype):
    """The `lib` twin of a Sluice DALIDataType."""
    return getattr(lib.types, "UINT8" if dtype == types.UINT8 else "FLOAT")


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("dtype", [types.UINT8, types.FLOAT], ids=["uint8", "float"])
@pytest.mark.parametrize("prime_size", [False, True])
def test_water_vs_cv(device, batch_size, dtype, prime_size):
    if device == "gpu":
        require_gpu()
    check_water_vs_cv(device, batch_size, 3, dtype, prime_size)


# test_dali_cpu_only.py (check_single_input) and checkpointing/test_dali_stateless_operators.py


@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_cpu_only_default_arguments(lib, op):
    """check_single_input(fn.water / fn.sphere): three iterations on random HWC batches."""
    rng = np.random.default_rng(1)
    batch = [rng.integers(0, 255, (int(rng.integers(20, 60)), int(rng.integers(20, 60)), 3), dtype=np.uint8) for _ in range(13)]
    pipe = lib.pipeline.Pipeline(batch_size=13, num_threads=4, device_id=None)
    with pipe:
        data = lib.fn.external_source(source=_const(batch), layout="HWC", batch=True)
        pipe.set_outputs(getattr(lib.fn, op)(data))
    pipe.build()
    for _ in range(3):
        (out,) = pipe.run()
    assert [o.shape for o in _arrays(out)] == [b.shape for b in batch]


def _stateless(lib, op, device):
    rng = np.random.default_rng(1234)
    batch = [rng.integers(255, size=(40, 60, 3), dtype=np.uint8) for _ in range(8)]

    @lib.pipeline_def(batch_size=8, num_threads=4, device_id=0 if device == "gpu" else None, enable_checkpointing=True)
    def pipe():
        data = lib.fn.external_source(source=_const(batch), layout="HWC", batch=True)
        return getattr(lib.fn, op)(data.gpu() if device == "gpu" else data, device=device)

    used = pipe()
    for _ in range(10):
        used.run()
    compare_pipelines(used, pipe(), 8, 10)


@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_stateless(lib, op):
    """test_water_stateless / test_sphere_stateless (cpu): a used pipeline equals a fresh one."""
    _stateless(lib, op, "cpu")


@pytest.mark.parametrize("op", ["water", "sphere"])
def test_stateless_gpu(op):
    require_gpu()
    _stateless(sluice, op, "gpu")


def _variable_batches(seed=0):
    """test_dali_variable_batch_size's generate_data(31, 13, image_like_shape_generator),
    fewer iterations: batches of 15, 7 and 31 images of assorted sizes."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(0, 255, (int(rng.integers(20, 80)), int(rng.integers(20, 80)), 3), dtype=np.uint8) for _ in range(bs)] for bs in (15, 7, 31, 7)]


@pytest.mark.parametrize("op", ["water", "sphere"])
def test_variable_batch_size(op):
    """image_data_helper(fn.water / fn.sphere): each iteration of a pipeline of varying batch
    sizes equals a fresh pipeline's run on that batch (and DALI's, bit for bit)."""
    batches = _variable_batches()
    pipe = _pipe(sluice, batches, [(op, {}, False)])
    for batch in batches:
        (out,) = pipe.run()
        fresh, _ = _run(sluice, batch, op)
        _assert_same(_arrays(out), fresh, f"batch of {len(batch)}")
    if dali is not None:
        ours = _pipe(sluice, batches, [(op, {}, False)])
        theirs = _pipe(dali, batches, [(op, {}, False)])
        for _ in batches:
            (a,), (b,) = ours.run(), theirs.run()
            _assert_same(_arrays(a), _arrays(b))


# ---------------------------------------------------------------- parity with DALI
@needs_dali
@pytest.mark.parametrize("linear", [False, True], ids=["nn", "linear"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float"])
@pytest.mark.parametrize("op,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equals_dali(op, kw, dtype, linear):
    _parity(_images(SHAPES, dtype, seed=3), op, linear, **kw)


@needs_dali
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float"])
@pytest.mark.parametrize("fill", [300.0, -1.7, NAN, 1e10, 255.9, -0.5, 77.6, INF], ids=str)
def test_fill_values_convert_as_dali(dtype, fill):
    data = _images([(9, 9, 3), (17, 5, 1)], dtype, seed=4)
    for linear in (False, True):
        _parity(data, "water", linear, ampl_x=20.0, fill_value=fill)
        _parity(data, "sphere", linear, fill_value=fill)


@needs_dali
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float"])
@pytest.mark.parametrize("kw", [dict(ampl_x=1e10), dict(ampl_x=-1e10), dict(ampl_y=3e9), dict(ampl_x=INF), dict(ampl_y=NAN), dict(freq_y=INF), dict(freq_x=NAN),
                                dict(phase_x=1e30), dict(freq_x=1e5, freq_y=-2e4)], ids=str)
def test_points_far_outside_or_nan_equal_dali(dtype, kw):
    """x86's floor_int gives INT_MIN for NaN and out-of-range points: outside, the fill for
    nearest, and whatever the NaN weights make of the blend for linear."""
    data = _images([(7, 8, 3), (12, 30, 2)], dtype, seed=5)
    for linear in (False, True):
        _parity(data, "water", linear, fill_value=9.0, **kw)


@needs_dali
def test_no_layout_many_channels_and_large_images_equal_dali():
    # (Not past 1024 channels: DALI's cpu operator writes past its fill array there.)
    data = _images([(300, 301, 3), (2, 3, 16), (480, 640, 1)], np.uint8, seed=6)
    for linear in (False, True):
        _parity(data, "water", linear, layout=None, **CASES[1][2])
        _parity(data, "sphere", linear, layout=None, fill_value=1.0)
    data = _images([(300, 301, 3), (33, 1, 4)], np.float32, seed=7)
    _parity(data, "water", True, layout=None)
    _parity(data, "sphere", True, layout=None)


@needs_dali
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_mask_argument_input_equals_dali(op):
    data = _images([(20, 30, 3), (31, 17, 3), (8, 8, 1), (25, 25, 4)], np.uint8, seed=8)
    masks = [np.array(v, np.int32) for v in (0, 1, 7, -1)]
    for linear in (False, True):
        out = _parity(data, op, linear, masks=masks, fill_value=200.0)
        np.testing.assert_array_equal(out[0], data[0])
    # Masks changing with the iterations.
    batches = [data, data[::-1], data]
    mask_batches = [[np.array(v, np.int32) for v in m] for m in ((0, 1, 0, 1), (1, 1, 0, 0), (1, 0, 1, 0))]
    ours = _pipe(sluice, batches, [(op, dict(interp_type=types.INTERP_LINEAR), False)], masks=mask_batches)
    theirs = _pipe(dali, batches, [(op, dict(interp_type=dali.types.INTERP_LINEAR), False)], masks=mask_batches)
    for _ in batches:
        (a,), (b,) = ours.run(), theirs.run()
        _assert_same(_arrays(a), _arrays(b))


@needs_dali
@needs_libm
@pytest.mark.parametrize("op,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_numpy_reference_is_dalis(op, kw):
    """The formulas above are DALI's cpu operator, bit for bit, so the reference test below
    checks DALI's behaviour where DALI is not installed."""
    for dtype in (np.uint8, np.float32):
        data = _images(SHAPES, dtype, seed=9)
        for linear in (0, 1):
            theirs, _ = _run(dali, data, op, interp_type=_interp(dali, linear), **kw)
            _assert_same([_reference(x, op, linear, **kw) for x in data], theirs, f"{op} {kw}")


# ---------------------------------------------------------------- the NumPy reference
@needs_libm
@pytest.mark.parametrize("op,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equals_the_numpy_reference(op, kw):
    for dtype in (np.uint8, np.float32):
        data = _images(SHAPES, dtype, seed=10)
        for linear in (0, 1):
            ours, _ = _run(sluice, data, op, interp_type=_interp(sluice, linear), **kw)
            _assert_same(ours, [_reference(x, op, linear, **kw) for x in data], f"{op} {kw}")
    masks = [np.array(v, np.int32) for v in (1, 0, 1)]
    data = _images([(10, 12, 3), (10, 12, 3), (3, 3, 3)], np.uint8, seed=11)
    ours, _ = _run(sluice, data, op, masks=masks, **kw)
    _assert_same(ours, [_reference(x, op, mask=m, **kw) for x, m in zip(data, masks)])


# ---------------------------------------------------------------- errors
def _error_pipe(op, batches, layout="HWC", masks=None, **kw):
    """A Sluice pipeline of `op` fed `batches` in turn (and `masks`: one batch per batch)."""
    return _pipe(sluice, batches, [(op, kw, False)], layout, masks)


# id, operator, sample shape, dtype, layout, arguments, pattern
ERRORS = [
    ("chw", "water", (3, 5, 6), np.uint8, "CHW", {}, r'(?s)water.*layout "CHW" does not match any of the allowed layouts: HWC'),
    ("hw", "sphere", (5, 6), np.uint8, "HW", {}, r'(?s)sphere.*layout "HW" does not match any of the allowed layouts: HWC'),
    ("two_dims_without_layout", "water", (5, 6), np.uint8, None, {}, r"(?s)water.*2 dimensions without a layout does not match.*HWC"),
    ("sequence", "water", (2, 5, 6, 3), np.uint8, "FHWC", {}, r'(?s)water.*layout "FHWC" does not match'),
    ("hwx", "sphere", (5, 6, 3), np.uint8, "HWX", {}, r'(?s)sphere.*layout "HWX" does not match'),
    ("int16", "water", (5, 6, 3), np.int16, "HWC", {}, r"(?s)water.*unsupported input type INT16; supported: UINT8, FLOAT"),
    ("int8", "sphere", (5, 6, 3), np.int8, "HWC", {}, r"(?s)sphere.*unsupported input type INT8"),
    ("float16", "water", (5, 6, 3), np.float16, "HWC", {}, r"(?s)water.*unsupported input type FLOAT16"),
    ("float64", "water", (5, 6, 3), np.float64, "HWC", {}, r"(?s)water.*unsupported input type FLOAT64"),
]


@pytest.mark.parametrize("op,shape,np_type,layout,kw,pattern", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_operator(op, shape, np_type, layout, kw, pattern):
    data = [np.zeros(shape, np_type)] * 2
    pipe = None
    with pytest.raises(RuntimeError, match=pattern):
        pipe = _error_pipe(op, [data] * 4, layout, **kw)
        pipe.run()
    if pipe is not None:
        # Raised by the iteration, not the pipeline: the next one raises the same again.
        with pytest.raises(RuntimeError, match=pattern):
            pipe.run()
    if dali is not None:
        # DALI raises ValueError for layouts, RuntimeError for types.
        with pytest.raises((RuntimeError, ValueError)):
            _run(dali, data, op, layout, **kw)


@pytest.mark.parametrize("lib", library_params())
def test_bad_arguments_are_refused_as_dali_does(lib):
    data = _images([(5, 6, 3)])
    # Only nearest and linear.
    with pytest.raises(RuntimeError, match=r"(?s)water.*interp_type"):
        _run(lib, data, "water", interp_type=lib.types.INTERP_CUBIC)
    with pytest.raises(RuntimeError, match=r"(?s)sphere.*interp_type"):
        _run(lib, data, "sphere", interp_type=lib.types.INTERP_LANCZOS3)
    # The sphere has no wave.
    pipe = lib.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True, layout="HWC")
        with pytest.raises(KeyError, match="ampl_x"):
            lib.fn.sphere(x, ampl_x=3.0)
        # The wave's arguments and the fill value are constants.
        a = lib.fn.external_source(source=_const([np.array(1.0, np.float32)]), batch=True)
        for name in ("ampl_x", "freq_y", "phase_x", "fill_value"):
            with pytest.raises((TypeError, ValueError), match=name):
                lib.fn.water(x, **{name: a})


def test_bad_masks_name_the_sample_and_the_pipeline_goes_on():
    """DALI reads the first value of a longer mask and crashes on an empty one."""
    good = _images([(6, 7, 3)] * 3, seed=12)
    # 1-D masks throughout: an external source keeps its number of dimensions.
    ok = [np.array([1], np.int32)] * 3
    for bad, pattern in [
        ([np.array([1], np.int32), np.array([1, 0], np.int32), np.array([1], np.int32)], r"(?s)water.*'mask'.*one value per sample; sample 1 has shape \[2\]"),
        ([np.array([1], np.int32), np.array([1], np.int32), np.array([], np.int32)], r"(?s)water.*'mask'.*sample 2 has shape \[0\]"),
    ]:
        pipe = _error_pipe("water", [good] * 4, masks=[ok, bad, ok, ok])
        (first,) = pipe.run()
        with pytest.raises(ValueError, match=pattern):
            pipe.run()
        (after,) = pipe.run()
        _assert_same(_arrays(after), _arrays(first))


# ---------------------------------------------------------------- where Sluice departs from DALI
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_a_constant_mask_of_zero_leaves_the_images(op):
    """DALI reads `mask` only from an argument input: a constant 0 transforms every image."""
    data = _images([(20, 30, 3), (9, 9, 1)], seed=13)
    ours, _ = _run(sluice, data, op, mask=0)
    _assert_same(ours, data)
    applied, _ = _run(sluice, data, op, mask=1)
    default, _ = _run(sluice, data, op)
    _assert_same(applied, default)
    assert not np.array_equal(applied[0], data[0])
    if dali is not None:
        theirs, _ = _run(dali, data, op, mask=0)
        _assert_same(theirs, default)


@needs_libm
def test_more_than_1024_channels():
    """DALI's cpu operator keeps the fill values in an array of 1024 and writes past it."""
    data = _images([(2, 3, 1100), (3, 2, 1030)], np.uint8, seed=15)
    for op in ("water", "sphere"):
        for linear in (0, 1):
            ours, _ = _run(sluice, data, op, interp_type=_interp(sluice, linear), fill_value=3.0)
            _assert_same(ours, [_reference(x, op, linear, fill_value=3.0) for x in data], op)


def test_masks_of_any_numeric_type():
    """DALI wants INT32 masks (it fails on any other type); non-zero applies the filter."""
    data = _images([(20, 30, 3), (9, 9, 1), (5, 5, 3)], seed=14)
    want, _ = _run(sluice, data, "water", masks=[np.array(v, np.int32) for v in (0, 1, 1)])
    for t, values in ((np.bool_, (0, 1, 1)), (np.uint8, (0, 3, 255)), (np.float32, (0.0, 0.5, -2.0)), (np.int64, (0, 1, -1))):
        got, _ = _run(sluice, data, "water", masks=[np.array(v, t) for v in values])
        _assert_same(got, want, str(t))


# ---------------------------------------------------------------- gpu
def _gpu_vs_cpu(data, op_kws, layout="HWC", masks=None, iters=2):
    """Every (op, kwargs) on the cpu and on the gpu of one pipeline: the same bytes."""
    pipe = _pipe(sluice, data, [(op, kw, g) for op, kw in op_kws for g in (False, True)], layout, masks, gpu=True)
    for _ in range(iters):
        outs = pipe.run()
    for k, (op, kw) in enumerate(op_kws):
        cpu, gpu = outs[2 * k], outs[2 * k + 1]
        assert cpu.layout() == gpu.layout() == "HWC"
        _assert_same(_arrays(cpu), _arrays(gpu), f"{op} {kw}")


@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float"])
@pytest.mark.parametrize("op,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gpu_equals_cpu(op, kw, dtype):
    require_gpu()
    data = _images(SHAPES, dtype, seed=15)
    _gpu_vs_cpu(data, [(op, dict(kw, interp_type=types.INTERP_NN)), (op, dict(kw, interp_type=types.INTERP_LINEAR))])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float"])
def test_gpu_fills_extremes_masks_and_large_images_equal_cpu(dtype):
    require_gpu()
    linear = dict(interp_type=types.INTERP_LINEAR)
    data = _images([(9, 9, 3), (17, 5, 1), (1, 1, 3)], dtype, seed=16)
    _gpu_vs_cpu(data, [(op, dict(fill_value=f, ampl_x=20.0) if op == "water" else dict(fill_value=f)) for op in ("water", "sphere") for f in (300.0, -1.7, NAN, 77.6)])
    _gpu_vs_cpu(data, [("water", dict(kw, fill_value=9.0, **i)) for kw in (dict(ampl_x=1e10), dict(ampl_y=NAN), dict(freq_y=INF)) for i in ({}, linear)])
    # Masks, over iterations; images up to 1080p; no layout; many channels.
    big = _images([(1080, 1920, 3), (17, 11, 3), (720, 1280, 3), (2, 3, 1100)], dtype, seed=17)
    masks = [np.array(v, np.int32) for v in (1, 0, 1, 1)]
    _gpu_vs_cpu(big, [("water", dict(WAVE, **linear)), ("sphere", linear), ("water", {}), ("sphere", {})], layout=None, masks=masks, iters=3)
