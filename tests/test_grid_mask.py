"""`fn.grid_mask` (cpu and gpu) against DALI 2.4's cpu operator.

- DALI's own tests (operator_1/test_gridmask.py) ported: its pipelines (files read and
  decoded to RGB, constant and random per-sample `tile`/`ratio`/`angle`) and its NumPy check
  of the squares (OpenCV's bitwise_and written in NumPy), with `nvidia.dali` replaced by
  `sluice` (nose params -> pytest.parametrize) and images from the generated set
  (`small_images`) instead of DALI_extra; every output also compared, bit for bit, with
  DALI's cpu operator run on the same decoded images with the same arguments.
- Parity, bit for bit, with DALI 2.4's cpu operator: every type it takes (UINT8, INT16,
  INT32, FLOAT), layout HWC and no layout, 1 to 5 channels, empty samples, tiles from 1 to
  2^31 - 1, ratios outside [0, 1] and NaN, angles large, negative, NaN and infinite, shifts,
  pixels where f64 sin/cos or fused multiply-adds would give the other verdict, FLOAT
  specials (masked negatives are -0.0, masked infinities x86's default NaN, NaNs quieted),
  per-sample argument inputs (each alone, all together, shape (1,)); a random sweep.
  A few of DALI's outputs are recorded here, so the operator is checked without DALI too.
- Errors name the operator and the argument (and the sample), the pipeline goes on; where
  DALI raises too (rather than crash), it is checked to raise.
- Sluice's departures on Sluice alone: layouts other than HWC are errors (DALI reads any
  3-D input as HWC and crashes on others), argument inputs of any numeric type.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import math
from functools import partial

import numpy as np
import pytest

import sluice
from sluice import errors, fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NAN, INF = float("nan"), float("inf")
NP_TYPES = [np.uint8, np.int16, np.int32, np.float32]
SUPPORTED = "UINT8, INT16, INT32, FLOAT"


def _const(v):
    """A source giving `v` every iteration (a callable of no argument: one with an argument
    would be given the iteration)."""
    return lambda: v


def _next_of(it):
    """A source of no argument giving the next item of `it`."""
    return lambda: next(it)


def _arrays(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _pipe(lib, data, layout, builds, args=None, gpu=False):
    """A pipeline over `data` (a list of samples) with one output per `builds` entry:
    `fn.grid_mask` of the input (on the gpu for entries marked so) with the entry's
    arguments. `args` maps argument names to one array per sample, fed as argument inputs
    to every entry. `builds`: a list of (kwargs, on_gpu)."""
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=2, device_id=0 if gpu else None)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        outs = [lib.fn.grid_mask(x.gpu() if on_gpu else x, **kw, **nodes) for kw, on_gpu in builds]
        pipe.set_outputs(*outs)
    pipe.build()
    return pipe


def _run_many(lib, data, layout, kws, args=None):
    """Each of `kws` applied to `data` on the cpu: the samples and the layouts."""
    outs = _pipe(lib, data, layout, [(kw, False) for kw in kws], args).run()
    return [_arrays(o) for o in outs], [o.layout() for o in outs]


def _run(lib, data, layout="HWC", args=None, **kw):
    (out,), (out_layout,) = _run_many(lib, data, layout, [kw], args)
    return out, out_layout


def _assert_same(ours, theirs, what=""):
    """Same dtypes, shapes and bytes (NaNs compared as bits)."""
    assert len(ours) == len(theirs)
    for i, (x, y) in enumerate(zip(ours, theirs)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what} sample {i}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        if x.tobytes() != y.tobytes():
            bad = np.argwhere(x.view(np.uint8).reshape(-1) != y.view(np.uint8).reshape(-1))[:5].ravel() // x.itemsize
            raise AssertionError(f"{what} sample {i}: elements {bad.tolist()} differ: {x.reshape(-1)[bad]} != {y.reshape(-1)[bad]}")


# FLOAT values every kernel path must carry: quiet and signaling NaNs with payloads and
# signs, infinities, zeros of both signs, denormals, ordinary negatives and positives.
FLOAT_SPECIALS = np.array([0x7FC12345, 0x7F800001, 0xFF812345, 0x7F800000, 0xFF800000, 0x80000000, 0, 1, 0x80000001,
                           0xBFC00000, 0x3FC00000], np.uint32).view(np.float32)


def _samples(shapes, dtype=np.uint8, seed=0):
    """Random samples of `shapes`: integers over the type's range without 0 (so zeroed
    elements show), FLOAT of both signs with the specials sprinkled in."""
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if dtype == np.float32:
            x = (rng.standard_normal(s) * 100).astype(np.float32)
            flat = x.reshape(-1)
            flat[::7] = np.resize(FLOAT_SPECIALS, flat[::7].shape)
        else:
            info = np.iinfo(dtype)
            x = rng.integers(1, info.max, s, endpoint=True).astype(dtype)
            if info.min < 0:
                x[rng.random(s) < 0.5] *= -1
        out.append(x)
    return out


def _parity(data, layout="HWC", args=None, **kw):
    """`fn.grid_mask(**kw)` on Sluice and DALI: the same bytes and layout. Returns Sluice's."""
    ours, l1 = _run(sluice, data, layout, args, **kw)
    theirs, l2 = _run(dali, data, layout, args, **kw)
    assert l1 == l2 == (layout or "")
    _assert_same(ours, theirs, f"{kw} {sorted(args or {})}")
    return ours


def _dali_grid_mask(images, args=None, **kw):
    """DALI's cpu grid_mask of `images` (HWC arrays)."""
    return _run(dali, images, "HWC", args, **kw)[0]


# ---------------------------------------------------------------- DALI's tests, ported
# dali/test/python/operator_1/test_gridmask.py with `nvidia.dali` -> `sluice`; DALI's
# `Pipeline(batch_size, 4, 0)` takes device_id=None on the cpu here (no GPU needed).


def get_pipeline(images_dir, device, batch_size, tile, ratio, angle):
    pipe = Pipeline(batch_size, 4, 0 if device == "gpu" else None)
    with pipe:
        input, _ = fn.readers.file(file_root=str(images_dir))
        decoded = fn.decoders.image(input, device="cpu", output_type=types.RGB)
        decoded = decoded.gpu() if device == "gpu" else decoded
        grided = fn.grid_mask(decoded, device=device, tile=tile, ratio=ratio, angle=angle)
        pipe.set_outputs(grided, decoded)
    return pipe


def get_random_pipeline(images_dir, device, batch_size):
    pipe = Pipeline(batch_size, 4, 0 if device == "gpu" else None)
    with pipe:
        input, _ = fn.readers.file(file_root=str(images_dir))
        decoded = fn.decoders.image(input, device="cpu", output_type=types.RGB)
        decoded = decoded.gpu() if device == "gpu" else decoded
        tile = fn.cast(fn.random.uniform(range=(50, 200)), dtype=types.INT32)
        ratio = fn.random.uniform(range=(0.3, 0.7))
        angle = fn.random.uniform(range=(-math.pi, math.pi))
        grided = fn.grid_mask(decoded, device=device, tile=tile, ratio=ratio, angle=angle)
        pipe.set_outputs(grided, decoded, tile, ratio, angle)
    return pipe


def get_mask(w, h, tile, ratio, angle, d):
    ca = math.cos(angle)
    sa = math.sin(angle)
    b = tile * ratio

    i = np.tile(np.arange(w), (h, 1))
    j = np.transpose(np.tile(np.arange(h), (w, 1)))
    x = i * ca - j * sa
    y = i * sa + j * ca
    m = np.logical_or(((x + d) % tile > b + 2 * d), ((y + d) % tile > b + 2 * d))
    return m


def bitwise_and(a, mask):
    """cv2.bitwise_and(a, a, mask=mask): `a` where the mask is non-zero, else 0."""
    return np.where(mask[..., None] != 0, a, 0).astype(a.dtype)


def check(result, input, tile, ratio, angle):
    result = np.uint8(result)
    input = np.uint8(input)
    w = result.shape[1]
    h = result.shape[0]
    eps = 0.1

    # inside of squares should be black
    mask = np.uint8(1 - get_mask(w, h, tile, ratio, angle, -eps))
    result2 = bitwise_and(result, mask)
    assert not np.any(result2)

    # outside of squares should be same as input
    mask = np.uint8(get_mask(w, h, tile, ratio, angle, eps))
    result2 = bitwise_and(result, mask)
    input2 = bitwise_and(input, mask)
    assert np.all(result2 == input2)


def run_test(images_dir, batch_size, device, tile, ratio, angle):
    pipe = get_pipeline(images_dir, device, batch_size, tile, ratio, angle)
    results, inputs = pipe.run()
    if device == "gpu":
        results, inputs = results.as_cpu(), inputs.as_cpu()
    for i in range(batch_size):
        check(results[i], inputs[i], tile, ratio, angle)
    if dali is not None:
        # DALI's cpu operator on the same decoded images: the same bytes.
        theirs = _dali_grid_mask(_arrays(inputs), tile=tile, ratio=ratio, angle=angle)
        _assert_same(_arrays(results), theirs, f"{device} vs dali")


devices = ["cpu", "gpu"]
args = [
    (40, 0.5, 0),
    (100, 0.1, math.pi / 2),
    (200, 0.7, math.pi / 3),
    (150, 1 / 3, math.pi / 4),
    (50, 0.532, 1),
    (51, 0.38158387, 2.6810782),
    (123, 0.456, 0.789),
]


@pytest.mark.parametrize("device", devices)
@pytest.mark.parametrize("args", args, ids=[f"{t}-{r:.3f}-{a:.3f}" for t, r, a in args])
def test_gridmask_vs_cv(small_images, device, args):
    if device == "gpu":
        require_gpu()
    batch_size = 4
    tile, ratio, angle = args
    run_test(small_images, batch_size, device, tile, ratio, angle)


def run_random_test(images_dir, batch_size, device):
    pipe = get_random_pipeline(images_dir, device, batch_size)
    for _ in range(16):
        results, inputs, tiles, ratios, angles = pipe.run()
        if device == "gpu":
            results, inputs = results.as_cpu(), inputs.as_cpu()
        for i in range(batch_size):
            tile = np.int32(tiles[i])
            ratio = np.float32(ratios[i])
            angle = np.float32(angles[i])
            check(results[i], inputs[i], tile, ratio, angle)
        if dali is not None:
            # The arguments Sluice drew, given to DALI's cpu operator as argument inputs.
            drawn = {"tile": [np.array(t, np.int32) for t in _arrays(tiles)], "ratio": [np.array(r, np.float32) for r in _arrays(ratios)],
                     "angle": [np.array(a, np.float32) for a in _arrays(angles)]}
            _assert_same(_arrays(results), _dali_grid_mask(_arrays(inputs), drawn), f"{device} vs dali")


@pytest.mark.parametrize("device", devices)
def test_gridmask_vs_cv_random(small_images, device):
    if device == "gpu":
        require_gpu()
    batch_size = 4
    run_random_test(small_images, batch_size, device)


# ---------------------------------------------------------------- parity with DALI's cpu operator
HWC = [(60, 80, 3), (33, 47, 3), (101, 67, 3)]
CHANNELS = [(40, 50, 1), (41, 37, 2), (30, 33, 4), (29, 31, 5)]
EMPTY = [(0, 4, 3), (5, 0, 3), (4, 4, 0), (7, 9, 3)]
SQUARE = [(256, 256, 1)]


def _f32(bits):
    """The Python float of f32 bits (exactly what DALI stores for the argument)."""
    return float(np.array([bits], np.uint32).view(np.float32)[0])


# id, sample shapes, arguments
CASES = [
    ("defaults", HWC, dict()),
    ("upright", HWC, dict(tile=8, ratio=0.5)),
    ("rotated", HWC, dict(tile=20, ratio=0.4, angle=0.3)),
    ("shifted", HWC, dict(tile=30, ratio=0.4, angle=0.3, shift_x=7.5, shift_y=-13.25)),
    ("negative_angle_and_shift", HWC, dict(tile=23, ratio=0.7, angle=-2.5, shift_x=-100.0, shift_y=3.0)),
    ("channels_1_2_4_5", CHANNELS, dict(tile=9, ratio=0.3, angle=1.2)),
    ("empty_samples", EMPTY, dict(tile=3, angle=0.1)),
    ("tile_1", HWC, dict(tile=1, ratio=0.5, angle=0.2)),
    ("tile_2", HWC, dict(tile=2, ratio=0.5)),
    ("tile_larger_than_image", HWC, dict(tile=1000, ratio=0.05, angle=0.5)),
    ("tile_int32_max", HWC, dict(tile=2**31 - 1, ratio=1e-9, angle=0.5, shift_x=-5.0)),
    ("ratio_0", HWC, dict(ratio=0.0, tile=10)),
    ("ratio_1", HWC, dict(ratio=1.0, tile=10, angle=0.3)),
    ("ratio_above_1", HWC, dict(ratio=1.5, tile=10)),
    ("ratio_negative", HWC, dict(ratio=-0.2, tile=10)),
    ("ratio_nan", HWC, dict(ratio=NAN, tile=10)),
    ("angle_large", HWC, dict(angle=1e6, tile=17)),
    ("angle_huge", HWC, dict(angle=3.0e38, tile=17)),
    ("angle_nan", HWC, dict(angle=NAN, tile=10)),
    ("angle_inf", HWC, dict(angle=INF, tile=10)),
    ("shift_inf", HWC, dict(shift_x=INF, tile=10)),
    ("shift_huge", HWC, dict(shift_y=1e30, tile=7, angle=0.2)),
    ("shift_fraction", HWC, dict(shift_x=0.5, shift_y=0.25, tile=4)),
    # Pixels where computing cos/sin in f64, or fusing multiply-adds, flips the verdict
    # (the same cases as the Rust unit test, grid_coordinates_round_as_dalis_cpu_kernel).
    ("rounding_1", SQUARE, dict(tile=20, ratio=_f32(0x3EF351D0), angle=_f32(0xC05854C5), shift_x=_f32(0xC19D8BA4), shift_y=_f32(0x42113E79))),
    ("rounding_2", SQUARE, dict(tile=38, ratio=_f32(0x3E5DC138), angle=_f32(0x40B74B15), shift_x=_f32(0x41F60FFA), shift_y=_f32(0x4190F3EF))),
    ("rounding_3", SQUARE, dict(tile=9, ratio=_f32(0x3F2CCDC5), angle=_f32(0xC0A7CE54), shift_x=_f32(0x41B9B368), shift_y=_f32(0xC0C4E34A))),
] + [(f"dali_args_{t}_{r:.3f}_{a:.3f}", HWC, dict(tile=t, ratio=r, angle=a)) for t, r, a in args]


@needs_dali
@pytest.mark.parametrize("layout", ["HWC", None])
@pytest.mark.parametrize("shapes,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equals_dali(shapes, kw, layout):
    data = _samples(shapes)
    out = _parity(data, layout, **kw)
    if kw == dict(tile=8, ratio=0.5):
        # Something was zeroed, something kept (the comparison is not between two copies).
        assert np.all(out[0][:4, :4] == 0) and np.array_equal(out[0][4:8, :4], data[0][4:8, :4])


@needs_dali
@pytest.mark.parametrize("np_type", NP_TYPES, ids=lambda t: t.__name__)
def test_every_type_equals_dali(np_type):
    data = _samples([(37, 53, 3), (20, 19, 1), (0, 5, 3), (45, 12, 4)], np_type, seed=3)
    kws = [dict(), dict(tile=5), dict(tile=7, ratio=0.35, angle=-0.8, shift_x=2.5), dict(tile=3, ratio=0.0), dict(tile=3, ratio=1.0),
           dict(tile=11, ratio=0.6, angle=2.0, shift_y=-4.0)]
    for layout in ["HWC", None]:
        ours, l1 = _run_many(sluice, data, layout, kws)
        theirs, l2 = _run_many(dali, data, layout, kws)
        assert l1 == l2 == [layout or ""] * len(kws)
        for kw, a, b in zip(kws, ours, theirs):
            _assert_same(a, b, f"{np_type.__name__} {layout} {kw}")


@needs_dali
def test_float_specials_equal_dali():
    """Masked FLOAT values are `x * 0.0f` on x86 (-0.0 for negatives, the default NaN
    0xffc00000 for infinities), kept ones `x * 1.0f` (signaling NaNs quieted)."""
    x = np.tile(FLOAT_SPECIALS, 9)[: 3 * 33].reshape(3, 33, 1)
    for kw in [dict(tile=1000, ratio=0.5), dict(tile=1000, ratio=0.0), dict(tile=4, ratio=0.5), dict(tile=3, angle=0.4)]:
        out = _parity([x, np.ascontiguousarray(x[:, ::-1])], "HWC", **kw)
        if kw == dict(tile=1000, ratio=0.5):  # all masked
            bits = out[0].view(np.uint32).reshape(-1)[: len(FLOAT_SPECIALS)]
            assert [hex(b) for b in bits] == ["0x7fc12345", "0x7fc00001", "0xffc12345", "0xffc00000", "0xffc00000", "0x80000000",
                                              "0x0", "0x0", "0x80000000", "0x80000000", "0x0"]


@needs_dali
def test_per_sample_argument_inputs_equal_dali():
    data = _samples([(60, 80, 3), (33, 47, 3), (20, 25, 1), (0, 3, 3), (41, 43, 4)], seed=4)
    n = len(data)
    i32 = lambda vs: [np.array(v, np.int32) for v in vs]  # noqa: E731
    f32 = lambda vs: [np.array(v, np.float32) for v in vs]  # noqa: E731
    per_sample = {
        "tile": i32([10, 3, 1, 7, 64]),
        "ratio": f32([0.5, 0.25, 0.8, 0.5, 0.6]),
        "angle": f32([0.0, -1.3, 2.5, 0.1, 7.0]),
        "shift_x": f32([0.0, 3.5, -20.0, 1.0, 100.25]),
        "shift_y": f32([5.0, -2.25, 0.0, 1.0, -0.5]),
    }
    _parity(data, "HWC", per_sample)
    # Each one alone next to constants for the others.
    constants = dict(tile=12, ratio=0.45, angle=0.6, shift_x=1.5, shift_y=-2.5)
    for name, values in per_sample.items():
        kw = {k: v for k, v in constants.items() if k != name}
        _parity(data, "HWC", {name: values}, **kw)
    # Values of shape (1,), as DALI also takes them.
    _parity(data, None, {"tile": [v.reshape(1) for v in per_sample["tile"]], "angle": [v.reshape(1) for v in per_sample["angle"]]})
    assert n == 5


@needs_dali
def test_random_arguments_equal_dali():
    """Random types, shapes, channel counts and arguments, constant or per sample."""
    rng = np.random.default_rng(2024)
    for trial in range(30):
        np_type = NP_TYPES[trial % len(NP_TYPES)]
        n = int(rng.integers(1, 5))
        shapes = [(int(rng.integers(0, 90)), int(rng.integers(0, 90)), int(rng.integers(1, 6))) for _ in range(n)]
        data = _samples(shapes, np_type, seed=trial)
        tile = [int(rng.choice([1, 2, 3, 7, 100, 2**31 - 1])) if rng.random() < 0.2 else int(rng.integers(1, 60)) for _ in range(n)]
        ratio = [float(np.float32(rng.uniform(-0.2, 1.2))) for _ in range(n)]
        angle = [float(np.float32(rng.uniform(-10, 10))) for _ in range(n)]
        sx = [float(np.float32(rng.uniform(-300, 300))) for _ in range(n)]
        sy = [float(np.float32(rng.uniform(-300, 300))) for _ in range(n)]
        values = {"tile": tile, "ratio": ratio, "angle": angle, "shift_x": sx, "shift_y": sy}
        args, kw = {}, {}
        for name, vs in values.items():
            if rng.random() < 0.5:
                args[name] = [np.array(v, np.int32 if name == "tile" else np.float32) for v in vs]
            else:
                kw[name] = vs[0]
        _parity(data, "HWC" if rng.random() < 0.7 else None, args, **kw)


# DALI 2.4's outputs, recorded: masks of a 5x9 image ('1': kept) and single pixels.
RECORDED_MASKS = [
    (dict(tile=4, ratio=0.5), ["001100110", "001100110", "111111111", "111111111", "001100110"]),
    (dict(tile=4, ratio=0.5, shift_x=1.0, shift_y=2.0), ["111111111", "111111111", "100110011", "100110011", "111111111"]),
]
RECORDED_PIXELS = [("rounding_1", (96, 141), False), ("rounding_2", (115, 151), False), ("rounding_3", (216, 207), True)]


def test_recorded_dali_outputs():
    """Checked where DALI is not installed, too."""
    for kw, rows in RECORDED_MASKS:
        (out,), _ = _run(sluice, [np.ones((5, 9, 2), np.uint8)], **kw)
        assert ["".join("1" if v else "0" for v in row) for row in out[..., 0]] == rows, kw
        assert np.array_equal(out[..., 0], out[..., 1])
    cases = {c[0]: c[2] for c in CASES}
    for name, (y, x), kept in RECORDED_PIXELS:
        (out,), _ = _run(sluice, [np.ones((256, 256, 1), np.uint8)], **cases[name])
        assert bool(out[y, x, 0]) == kept, name


# ---------------------------------------------------------------- errors
def _error_pipe(batches, layout="HWC", args=None, **kw):
    """A pipeline fed `batches` in turn (and `args`: per argument, one list of per-sample
    arrays per batch)."""
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        nodes = {k: fn.external_source(source=_next_of(i), batch=True) for k, i in arg_its.items()}
        pipe.set_outputs(fn.grid_mask(x, **kw, **nodes))
    pipe.build()
    return pipe


LAYOUT_MSG = r"(?s)grid_mask.*input 0: {}; grid_mask takes images with layout HWC"
# id, sample shapes, dtype, layout, arguments, error class, pattern, DALI raises too (False:
# DALI runs and reads the input as HWC, or crashes)
ERRORS = [
    ("chw", [(3, 8, 9)], np.uint8, "CHW", dict(), errors.ArgumentTypeError, LAYOUT_MSG.format('layout "CHW"') + r".*transpose", False),
    ("other_3d_layout", [(8, 9, 3)], np.uint8, "XYC", dict(), errors.ArgumentTypeError, LAYOUT_MSG.format('layout "XYC"'), False),
    ("two_dims", [(8, 9)], np.uint8, "HW", dict(), errors.ArgumentTypeError, LAYOUT_MSG.format('layout "HW"'), False),
    ("two_dims_no_layout", [(8, 9)], np.uint8, None, dict(), errors.ArgumentTypeError, LAYOUT_MSG.format("2 dimensions without a layout"), False),
    ("sequence", [(2, 8, 9, 3)], np.uint8, "FHWC", dict(), errors.ArgumentTypeError, LAYOUT_MSG.format('layout "FHWC"'), False),
    ("bool", [(4, 5, 3)], np.bool_, "HWC", dict(), errors.DataError, rf"(?s)grid_mask.*unsupported input type BOOL; supported: {SUPPORTED}", True),
    ("int8", [(4, 5, 3)], np.int8, "HWC", dict(), errors.DataError, r"(?s)grid_mask.*unsupported input type INT8", True),
    ("uint16", [(4, 5, 3)], np.uint16, "HWC", dict(), errors.DataError, r"(?s)grid_mask.*unsupported input type UINT16", True),
    ("int64", [(4, 5, 3)], np.int64, "HWC", dict(), errors.DataError, r"(?s)grid_mask.*unsupported input type INT64", True),
    ("float16", [(4, 5, 3)], np.float16, "HWC", dict(), errors.DataError, r"(?s)grid_mask.*unsupported input type FLOAT16", True),
    ("float64", [(4, 5, 3)], np.float64, "HWC", dict(), errors.DataError, r"(?s)grid_mask.*unsupported input type FLOAT64", True),
    ("tile_zero", [(4, 5, 3)], np.uint8, "HWC", dict(tile=0), errors.ArgumentError, r"(?s)grid_mask.*'tile'.*sample 0: Tile argument must be positive; got 0", True),
    ("tile_negative", [(4, 5, 3)] * 2, np.uint8, "HWC", dict(tile=-3), errors.ArgumentError, r"(?s)grid_mask.*'tile'.*must be positive; got -3", True),
]


@pytest.mark.parametrize("shapes,np_type,layout,kw,cls,pattern,dali_raises", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_operator_and_argument(shapes, np_type, layout, kw, cls, pattern, dali_raises):
    data = [np.zeros(s, np_type) for s in shapes]
    pipe = None
    with pytest.raises(cls, match=pattern):
        pipe = _error_pipe([data, data], layout, **kw)
        pipe.run()
    if pipe is not None:
        # Raised by the iteration, not the pipeline: the next one raises the same again.
        with pytest.raises(cls, match=pattern):
            pipe.run()
    if dali is not None and dali_raises:
        with pytest.raises(RuntimeError):
            _run(dali, data, layout, **kw)


def test_bad_per_sample_values_name_the_sample_and_the_pipeline_goes_on():
    good = [np.full((6, 7, 3), 9, np.uint8)] * 3
    i32 = lambda vs: [np.array(v, np.int32) for v in vs]  # noqa: E731
    f32 = lambda vs: [np.array(v, np.float32) for v in vs]  # noqa: E731
    one = lambda vs: [np.array([v], np.float32) for v in vs]  # noqa: E731
    # (argument inputs: a bad batch then a good one; constants; error class; pattern)
    cases = [
        ({"tile": [i32([4, 4, 0]), i32([4, 4, 4])]}, {}, errors.ArgumentError, r"(?s)grid_mask.*'tile'.*sample 2: Tile argument must be positive; got 0"),
        ({"tile": [i32([4, -1, 4]), i32([4, 4, 4])]}, {}, errors.ArgumentError, r"(?s)grid_mask.*'tile'.*sample 1: Tile argument must be positive"),
        ({"tile": [f32([4, 4.5, 4]), f32([4, 4, 4])]}, {}, errors.ArgumentError, r"(?s)grid_mask.*'tile'.*sample 1: must be a whole number"),
        ({"tile": [f32([4, 4, 3e9]), f32([4, 4, 4])]}, {}, errors.ArgumentError, r"(?s)grid_mask.*'tile'.*sample 2: must be a whole number from 1 to 2\^31 - 1"),
        ({"ratio": [one([0.5, 0.5]) + [np.array([0.1, 0.2], np.float32)], one([0.5] * 3)]}, dict(tile=4), errors.ArgumentError,
         r"(?s)grid_mask.*'ratio'.*sample 2"),
    ]
    for args, kw, cls, pattern in cases:
        pipe = _error_pipe([good, good], "HWC", args, **kw)
        with pytest.raises(cls, match=pattern):
            pipe.run()
        # The next iteration (good values) runs: tile 4, ratio 0.5 zeroes rows and columns
        # 0 and 1 of every 4.
        (out,) = pipe.run()
        got = _arrays(out)
        assert got[0].shape == (6, 7, 3) and np.all(got[0][:2, :2] == 0) and np.all(got[0][2:4] == 9)


# ---------------------------------------------------------------- where Sluice departs from DALI
def test_chw_is_refused_where_dali_reads_it_as_hwc():
    """DALI draws the grid over a CHW image's channel and row axes (the same in every column);
    Sluice refuses the layout and names the way to HWC."""
    chw = [np.full((3, 8, 9), 5, np.uint8)]
    with pytest.raises(errors.ArgumentTypeError, match=r'layout "CHW".*transpose'):
        _run(sluice, chw, "CHW", tile=2)
    if dali is not None:
        out, _ = _run(dali, chw, "CHW", tile=2)
        assert np.all(out[0][0, 0] == 0) and np.all(out[0][0, 1] == 5)  # rows of (C, H) planes, whole columns
    # Transposed to HWC, the grid is where it belongs.
    hwc, _ = _run(sluice, [np.ascontiguousarray(np.moveaxis(chw[0], 0, -1))], "HWC", tile=2)
    assert np.all(hwc[0][0, 0] == 0) and np.all(hwc[0][0, 1] == 5) and np.all(hwc[0][1, 0] == 5)


def test_argument_inputs_of_any_numeric_type():
    """DALI wants INT32 `tile` and FLOAT for the others; Sluice reads any numeric type
    (integral values for `tile`, FLOAT64 rounded to float)."""
    data = _samples(HWC)
    as_types = lambda t, f: {"tile": [np.array(v, t) for v in (10, 3, 7)], "ratio": [np.array(v, f) for v in (0.25, 0.5, 0.75)],  # noqa: E731
                             "angle": [np.array(v, f) for v in (0.5, -1.0, 2.0)]}
    a, _ = _run(sluice, data, "HWC", as_types(np.int32, np.float32))
    for t, f in [(np.int64, np.float64), (np.uint8, np.float32), (np.float32, np.float32), (np.float64, np.float64), (np.int16, np.float64)]:
        b, _ = _run(sluice, data, "HWC", as_types(t, f))
        _assert_same(a, b, f"{t.__name__} {f.__name__}")


# ---------------------------------------------------------------- gpu
def _gpu_vs_cpu(data, layout="HWC", args=None, kws=None, iters=2):
    """Every entry of `kws` on the cpu and on the gpu of one pipeline: the same bytes."""
    pipe = _pipe(sluice, data, layout, [(kw, g) for kw in kws for g in (False, True)], args, gpu=True)
    for _ in range(iters):
        outs = pipe.run()
    for k, kw in enumerate(kws):
        cpu, gpu = outs[2 * k], outs[2 * k + 1]
        assert cpu.layout() == gpu.layout() == (layout or "")
        _assert_same(_arrays(cpu), _arrays(gpu), f"{kw}")


@pytest.mark.parametrize("shapes,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gpu_equals_cpu(shapes, kw):
    require_gpu()
    _gpu_vs_cpu(_samples(shapes), "HWC", kws=[kw])


@pytest.mark.parametrize("np_type", NP_TYPES, ids=lambda t: t.__name__)
def test_gpu_every_type_equals_cpu(np_type):
    require_gpu()
    data = _samples([(37, 53, 3), (20, 19, 1), (0, 5, 3), (45, 12, 4), (9, 70, 5)], np_type, seed=5)
    kws = [dict(), dict(tile=5), dict(tile=7, ratio=0.35, angle=-0.8, shift_x=2.5), dict(tile=3, ratio=0.0), dict(tile=1000, ratio=0.5),
           dict(tile=11, ratio=0.6, angle=2.0, shift_y=-4.0)]
    for layout in ["HWC", None]:
        _gpu_vs_cpu(data, layout, kws=kws)
    if np_type == np.float32:
        x = np.tile(FLOAT_SPECIALS, 9)[: 3 * 33].reshape(3, 33, 1)
        _gpu_vs_cpu([x, np.ascontiguousarray(x[:, ::-1])], "HWC", kws=[dict(tile=1000, ratio=0.5), dict(tile=1000, ratio=0.0), dict(tile=3, angle=0.4)])


def test_gpu_per_sample_arguments_and_large_images_equal_cpu():
    require_gpu()
    i32 = partial(np.array, dtype=np.int32)
    f32 = partial(np.array, dtype=np.float32)
    data = _samples([(1080, 1920, 3), (17, 11, 3), (720, 1280, 3), (9, 9, 1)], seed=8)
    args = {
        "tile": [i32(100), i32(3), i32(57), i32(1)],
        "ratio": [f32(0.5), f32(0.3), f32(0.61), f32(0.9)],
        "angle": [f32(0.7), f32(-2.0), f32(3.0), f32(0.0)],
        "shift_x": [f32(13.5), f32(0.0), f32(-700.0), f32(0.5)],
        "shift_y": [f32(-2.0), f32(1.0), f32(33.3), f32(0.0)],
    }
    _gpu_vs_cpu(data, "HWC", args, kws=[{}], iters=3)
    _gpu_vs_cpu(data, "HWC", {"tile": args["tile"], "angle": args["angle"]}, kws=[dict(ratio=0.4), dict(ratio=0.4, shift_x=5.0)], iters=2)
    rng = np.random.default_rng(9)
    floats = [(rng.standard_normal((480, 640, 3)) * 50).astype(np.float32), (rng.standard_normal((31, 17, 3)) * 50).astype(np.float32)]
    _gpu_vs_cpu(floats, "HWC", kws=[dict(tile=40, angle=0.4, ratio=0.55), dict(tile=7, ratio=0.5, shift_x=-3.0)])
