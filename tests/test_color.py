"""The colour family: `fn.brightness`, `fn.contrast`, `fn.brightness_contrast`, `fn.hsv`,
`fn.hue`, `fn.saturation`, `fn.color_twist`.

- Parity: equal to DALI 2.4's cpu operator, bit for bit, for every input and output type,
  HWC / FHWC / DHWC, constant and per-sample (argument input) arguments.
- DALI's own tests (operator_1/test_brightness_contrast.py, test_color_twist.py) ported with
  the import renamed: the equivalences, the NumPy references and their tolerances.
- Errors name the operator, the argument or the sample, and the pipeline goes on.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import math

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP = {types.UINT8: np.uint8, types.INT16: np.int16, types.INT32: np.int32, types.FLOAT: np.float32, types.FLOAT16: np.float16}
BC_TYPES = [types.UINT8, types.INT16, types.INT32, types.FLOAT]
TWIST_TYPES = BC_TYPES + [types.FLOAT16]


def _images(np_type, shape, n, seed):
    """Random images spanning the type's range (floats in [0, 1), integers over a wide span)."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(np_type, np.floating):
        return [rng.random(shape).astype(np_type) for _ in range(n)]
    lo, hi = {np.uint8: (0, 256), np.int16: (-2000, 32767), np.int32: (-100_000, 5_000_000)}[np_type]
    return [rng.integers(lo, hi, shape).astype(np_type) for _ in range(n)]


def _run(lib, build, images, layout, args=None, device="cpu", iters=1):
    """Runs `build(fn, x, arg_nodes)` over `images`; `args` maps argument names to one value
    per sample, fed as argument inputs."""
    args = args or {}
    names = list(args)
    pipe = lib.pipeline.Pipeline(batch_size=len(images), num_threads=3, device_id=None if device == "cpu" else 0, seed=7)
    with pipe:
        x = lib.fn.external_source(source=lambda: images, batch=True, layout=layout)
        nodes = {}
        for name in names:
            nodes[name] = lib.fn.external_source(source=_constant_source([np.float32(v) for v in args[name]]), batch=True)
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(build(lib.fn, x, nodes))
    pipe.build()
    for _ in range(iters):
        (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(images))], out.dtype, out.layout()


def _constant_source(batch):
    """A source giving `batch` every iteration (a callable of no argument: one with an
    argument would be given the iteration)."""
    return lambda: batch


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x.view(np.uint8) if x.dtype == np.float16 else x, y.view(np.uint8) if y.dtype == np.float16 else y)


def _bc_builds():
    return {
        "brightness": lambda fn, x, a, **k: fn.brightness(x, brightness=a["b"], brightness_shift=a["s"], **k),
        "contrast": lambda fn, x, a, **k: fn.contrast(x, contrast=a["c"], contrast_center=a["cc"], **k),
        "contrast_default_center": lambda fn, x, a, **k: fn.contrast(x, contrast=a["c"], **k),
        "brightness_contrast": lambda fn, x, a, **k: fn.brightness_contrast(x, brightness=a["b"], brightness_shift=a["s"], contrast=a["c"], contrast_center=a["cc"], **k),
        "brightness_contrast_constants": lambda fn, x, a, **k: fn.brightness_contrast(x, brightness=1.7, brightness_shift=-0.05, contrast=0.6, **k),
    }


def _bc_args(n, in_type, seed):
    rng = np.random.default_rng(seed)
    scale = 1.0 if in_type in (types.FLOAT, types.FLOAT16) else {types.UINT8: 255, types.INT16: 32767, types.INT32: 2**31 - 1}[in_type]
    return {"b": rng.uniform(0, 3, n), "s": rng.uniform(-0.5, 0.5, n), "c": rng.uniform(-1, 2, n), "cc": rng.uniform(0, 1, n) * scale}


@needs_dali
@pytest.mark.parametrize("in_type", BC_TYPES)
@pytest.mark.parametrize("out_type", [None] + BC_TYPES)
@pytest.mark.parametrize("op", list(_bc_builds()))
def test_brightness_contrast_equals_dali(op, in_type, out_type):
    build = _bc_builds()[op]
    images = _images(NP[in_type], (19, 23, 3), 5, seed=1)
    args = _bc_args(5, in_type, seed=2)
    kw = {} if out_type is None else {"dtype": out_type}
    ours, t1, l1 = _run(sluice, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args)
    ref, t2, l2 = _run(dali, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args)
    assert int(t1) == int(t2) and l1 == l2
    _assert_same(ours, ref)


TWIST_BUILDS = {
    "hsv": lambda fn, x, a, **k: fn.hsv(x, hue=a["h"], saturation=a["s"], value=a["v"], **k),
    "hsv_constants": lambda fn, x, a, **k: fn.hsv(x, hue=100.0, saturation=0.3, **k),
    "hue": lambda fn, x, a, **k: fn.hue(x, hue=a["h"], **k),
    "saturation": lambda fn, x, a, **k: fn.saturation(x, saturation=a["s"], **k),
    "color_twist": lambda fn, x, a, **k: fn.color_twist(x, hue=a["h"], saturation=a["s"], brightness=a["b"], contrast=a["c"], **k),
    "color_twist_defaults": lambda fn, x, a, **k: fn.color_twist(x, **k),
}


def _twist_args(n, seed):
    rng = np.random.default_rng(seed)
    return {"h": rng.uniform(-400, 400, n), "s": rng.uniform(0, 2, n), "v": rng.uniform(0, 2, n), "b": rng.uniform(0, 2, n), "c": rng.uniform(0, 2, n)}


@needs_dali
@pytest.mark.parametrize("in_type", TWIST_TYPES)
@pytest.mark.parametrize("out_type", [None] + TWIST_TYPES)
@pytest.mark.parametrize("op", list(TWIST_BUILDS))
def test_color_twist_family_equals_dali(op, in_type, out_type):
    build = TWIST_BUILDS[op]
    images = _images(NP[in_type], (17, 21, 3), 5, seed=3)
    args = _twist_args(5, seed=4)
    kw = {} if out_type is None else {"dtype": out_type}
    ours, t1, l1 = _run(sluice, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args)
    ref, t2, l2 = _run(dali, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args)
    assert int(t1) == int(t2) and l1 == l2
    _assert_same(ours, ref)


@needs_dali
@pytest.mark.parametrize("layout,shape", [("FHWC", (3, 9, 11, 3)), ("DHWC", (4, 9, 11, 3)), (None, (2, 9, 11, 3)), (None, (9, 11, 3))])
@pytest.mark.parametrize("op", ["brightness_contrast", "color_twist", "hsv"])
def test_sequences_and_volumes_equal_dali(op, layout, shape):
    build = {**_bc_builds(), **TWIST_BUILDS}[op]
    images = _images(np.uint8, shape, 3, seed=5)
    args = {**_bc_args(3, types.UINT8, 6), **{k: v for k, v in _twist_args(3, 7).items() if k not in ("s", "c", "b")}, "s": np.full(3, 0.8)}
    ours, _, l1 = _run(sluice, build, images, layout, args)
    ref, _, l2 = _run(dali, build, images, layout, args)
    assert l1 == l2
    _assert_same(ours, ref)


# ---------------------------------------------------------------- DALI's tests, ported
def _max_range(dtype):
    return 1.0 if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).max


def _convert_sat(data, out_dtype):
    if np.issubdtype(out_dtype, np.floating):
        return data.astype(out_dtype)
    info = np.iinfo(out_dtype)
    return np.round(np.clip(data, info.min, info.max)).astype(out_dtype)


def _bricon_ref(x, brightness, brightness_shift, contrast, contrast_center, out_dtype):
    out = brightness_shift * _max_range(out_dtype) + brightness * (contrast_center + contrast * (x.astype(np.float64) - contrast_center))
    return _convert_sat(out, out_dtype)


class _Random:
    """DALI's RandomDataIterator: random batches of one shape."""

    def __init__(self, batch_size, shape, dtype, seed=0):
        self.rng, self.batch_size, self.shape, self.dtype = np.random.default_rng(seed), batch_size, shape, dtype

    def __iter__(self):
        return self

    def __next__(self):
        if np.issubdtype(self.dtype, np.floating):
            return [self.rng.random(self.shape).astype(self.dtype) for _ in range(self.batch_size)]
        info = np.iinfo(self.dtype)
        hi = min(info.max, 255 if self.dtype == np.uint8 else 30000)
        return [self.rng.integers(0, hi, self.shape).astype(self.dtype) for _ in range(self.batch_size)]


@pytest.mark.parametrize("in_type", [types.FLOAT, types.INT16, types.UINT8])
@pytest.mark.parametrize("out_type", [types.FLOAT, types.INT16, types.UINT8])
@pytest.mark.parametrize("has_3_dims,const_center", [(False, False), (True, True)])
def test_dali_brightness_contrast_vs_ref(in_type, out_type, has_3_dims, const_center):
    """test_brightness_contrast.py's check_vs_ref: random arguments from fn.random.uniform,
    the output against DALI's NumPy formula (eps 1 for integers, 1e-4 for floats)."""
    batch_size = 8
    shape = (128, 32, 3) if not has_3_dims else (3, 128, 32, 3)
    in_np, out_np = NP[in_type], NP[out_type]
    center_const = 0.4 * _max_range(in_np) if const_center else None
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        b = fn.random.uniform(range=[0.0, 5.0], seed=123)
        s = fn.random.uniform(range=[-1.0, 1.0], seed=123)
        c = fn.random.uniform(range=[-1.0, 1.0], seed=123)
        cc = center_const if const_center else fn.random.uniform(range=[0.0, 1.0], seed=123)
        x = fn.external_source(source=_Random(batch_size, shape, in_np), layout="FHWC" if has_3_dims else "HWC")
        out = fn.brightness_contrast(x, brightness=b, brightness_shift=s, contrast=c, contrast_center=cc, dtype=out_type)
        pipe.set_outputs(out, x, b, s, c, *([] if const_center else [cc]))
    pipe.build()
    for _ in range(3):
        out, x, b, s, c, *rest = pipe.run()
        for i in range(batch_size):
            center = center_const if const_center else float(np.array(rest[0].at(i)))
            bi, si, ci, xi = float(np.array(b.at(i))), float(np.array(s.at(i))), float(np.array(c.at(i))), np.array(x.at(i))
            ref = _bricon_ref(xi, bi, si, ci, center, out_np)
            got = np.array(out.at(i))
            assert got.dtype == out_np
            # DALI's eps: 1 for integers; for floats 1e-4 plus f32 rounding of the terms summed.
            terms = abs(si) * _max_range(out_np) + abs(bi) * (abs(center) * (1 + abs(ci)) + abs(ci) * float(np.max(np.abs(xi))))
            eps = 1e-4 + 1e-6 * terms if np.issubdtype(out_np, np.floating) else 1
            assert np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))) <= eps


@pytest.mark.parametrize("op", ["brightness", "contrast"])
@pytest.mark.parametrize("in_type", [types.FLOAT, types.INT16, types.UINT8])
@pytest.mark.parametrize("out_type", [types.FLOAT, types.INT16, types.UINT8])
def test_dali_brightness_contrast_equivalence(op, in_type, out_type):
    """test_brightness_contrast.py's check_equivalence: fn.brightness / fn.contrast equal
    fn.brightness_contrast given the same arguments."""
    batch_size = 8
    images = next(_Random(batch_size, (64, 32, 3), NP[in_type], seed=9))
    args = _bc_args(batch_size, in_type, seed=10)
    if op == "brightness":
        one = lambda fn, x, a: fn.brightness(x, brightness=a["b"], brightness_shift=a["s"], dtype=out_type)
        both = lambda fn, x, a: fn.brightness_contrast(x, brightness=a["b"], brightness_shift=a["s"], dtype=out_type)
    else:
        one = lambda fn, x, a: fn.contrast(x, contrast=a["c"], contrast_center=a["cc"], dtype=out_type)
        both = lambda fn, x, a: fn.brightness_contrast(x, contrast=a["c"], contrast_center=a["cc"], dtype=out_type)
    a, _, _ = _run(sluice, one, images, "HWC", args)
    b, _, _ = _run(sluice, both, images, "HWC", args)
    _assert_same(a, b)


_RGB2YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_YIQ2RGB = np.linalg.inv(_RGB2YIQ)


def _ref_color_twist(img, H, S, brightness, contrast, out_dtype):
    angle = math.radians(H)
    s, c = math.sin(angle), math.cos(angle)
    hmat = np.array([[1, 0, 0], [0, c * S, s * S], [0, -s * S, c * S]])
    m = np.matmul(_YIQ2RGB, np.matmul(hmat, _RGB2YIQ))
    pixels = img.reshape(-1, img.shape[-1]).astype(np.float64) @ m.T
    grey = 0.5 if np.issubdtype(img.dtype, np.floating) else 128
    pixels = ((pixels - grey) * contrast + grey) * brightness
    return _convert_sat(pixels.reshape(img.shape), out_dtype)


@pytest.mark.parametrize("in_type", [types.FLOAT, types.INT16, types.UINT8])
@pytest.mark.parametrize("out_type", [types.FLOAT, types.INT16, types.UINT8])
@pytest.mark.parametrize("has_3_dims", [False, True])
def test_dali_color_twist_vs_ref(in_type, out_type, has_3_dims):
    """test_color_twist.py's check_ref: random hue, saturation, brightness and contrast; the
    output against the exact YIQ formula (rel 1/512, abs 1 for integers; 1e-3 for floats)."""
    batch_size = 8
    shape = (128, 32, 3) if not has_3_dims else (3, 128, 32, 3)
    in_np, out_np = NP[in_type], NP[out_type]
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=2139)
    with pipe:
        imgs = fn.external_source(source=_Random(batch_size, shape, in_np), layout="FHWC" if has_3_dims else "HWC")
        if np.issubdtype(in_np, np.floating) and not np.issubdtype(out_np, np.floating):
            imgs = imgs * 255
        H = fn.random.uniform(range=[-20, 20])
        S = fn.random.uniform(range=[0, 2])
        B = fn.random.uniform(range=[0, 2])
        C = fn.random.uniform(range=[0, 2])
        out = fn.color_twist(imgs, hue=H, saturation=S, brightness=B, contrast=C, dtype=out_type if out_type != in_type else None)
        pipe.set_outputs(imgs, out, H, S, B, C)
    pipe.build()
    rel, abs_ = (1e-3, 1e-3) if np.issubdtype(out_np, np.floating) else (1 / 512, 1)
    for _ in range(2):
        imgs, out, H, S, B, C = pipe.run()
        for i in range(batch_size):
            ref = _ref_color_twist(np.array(imgs.at(i)), *(float(np.array(t.at(i))) for t in (H, S, B, C)), out_np)
            assert np.allclose(np.array(out.at(i)), ref, rel, abs_)


@pytest.mark.parametrize("dtype", [types.FLOAT, types.INT32, types.INT16, types.UINT8])
def test_dali_color_twist_default_dtype(dtype):
    """test_color_twist.py's test_color_twist_default_dtype (cpu; gpu below)."""
    pipe = Pipeline(batch_size=1, num_threads=3, device_id=None)
    with pipe:
        data = types.Constant(255, shape=(10, 10, 3), dtype=dtype, device="cpu")
        pipe.set_outputs(fn.hue(data))
    pipe.build()
    (out,) = pipe.run()
    assert out.dtype == dtype


def test_hsv_defaults_to_uint8_output():
    """DALI's `hsv` gives UINT8 unless `dtype` is set, whatever the input type."""
    images = _images(np.float32, (4, 4, 3), 2, seed=1)
    out, t, _ = _run(sluice, lambda fn, x, a: fn.hsv(x, hue=10.0), images, "HWC")
    assert t == types.UINT8 and out[0].dtype == np.uint8


# ---------------------------------------------------------------- errors
def _error_pipe(build, batches, layout="HWC"):
    it = iter(batches)
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        pipe.set_outputs(build(x))
    pipe.build()
    return pipe


def test_wrong_channel_count_is_an_error_naming_the_sample_and_the_pipeline_goes_on():
    good = [np.zeros((4, 4, 3), np.uint8)] * 2
    bad = [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)]
    pipe = _error_pipe(lambda x: fn.color_twist(x, hue=30.0), [bad, good])
    with pytest.raises(RuntimeError, match=r"(?s)color_twist.*sample 1.*3 channels"):
        pipe.run()
    (out,) = pipe.run()
    assert np.array(out.at(1)).shape == (4, 4, 3)


def test_layouts_other_than_channel_last_are_refused():
    with pytest.raises(ValueError, match=r"(?s)brightness.*CHW.*HWC, FHWC, DHWC"):
        _error_pipe(lambda x: fn.brightness(x, brightness=2.0), [[np.zeros((3, 4, 4), np.uint8)]], layout="CHW").run()
    with pytest.raises(ValueError, match=r"(?s)hsv.*2 dimensions"):
        _error_pipe(lambda x: fn.hsv(x, hue=1.0), [[np.zeros((4, 4), np.uint8)]], layout=None).run()


def test_unsupported_types_name_the_type():
    with pytest.raises(RuntimeError, match=r"(?s)brightness.*UINT16.*supported: UINT8, INT16, INT32, FLOAT"):
        _error_pipe(lambda x: fn.brightness(x, brightness=2.0), [[np.zeros((4, 4, 3), np.uint16)]]).run()
    with pytest.raises(ValueError, match=r"(?s)brightness.*dtype.*FLOAT16"):
        _error_pipe(lambda x: fn.brightness(x, brightness=2.0, dtype=types.FLOAT16), [[np.zeros((4, 4, 3), np.uint8)]]).run()


def test_bad_argument_values_name_argument_and_sample():
    images = [np.zeros((4, 4, 3), np.uint8)] * 3
    with pytest.raises(ValueError, match=r"(?s)saturation.*saturation.*negative.*sample 2"):
        _run(sluice, lambda fn, x, a: fn.saturation(x, saturation=a["s"]), images, "HWC", {"s": [1.0, 0.5, -0.5]})
    with pytest.raises(ValueError, match=r"(?s)brightness.*brightness.*finite.*sample 1"):
        _run(sluice, lambda fn, x, a: fn.brightness(x, brightness=a["b"]), images, "HWC", {"b": [1.0, float("nan"), 1.0]})
    with pytest.raises(ValueError, match=r"(?s)hue.*hue.*one value per sample"):
        pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
        with pipe:
            x = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True, layout="HWC")
            h = fn.external_source(source=lambda: [np.zeros(2, np.float32)], batch=True)
            pipe.set_outputs(fn.hue(x, hue=h))
        pipe.build()
        pipe.run()


# ---------------------------------------------------------------- gpu
GPU_CASES = [(op, t_in, t_out) for op in ["brightness_contrast", "contrast_default_center"] for t_in in BC_TYPES for t_out in [None] + BC_TYPES] + [
    (op, t_in, t_out) for op in ["color_twist", "hsv", "hue"] for t_in in TWIST_TYPES for t_out in [None] + TWIST_TYPES
]


@pytest.mark.parametrize("op,in_type,out_type", GPU_CASES)
def test_gpu_equals_cpu(op, in_type, out_type):
    require_gpu()
    build = {**_bc_builds(), **TWIST_BUILDS}[op]
    images = _images(NP[in_type], (33, 47, 3), 6, seed=11)
    args = {**_bc_args(6, in_type, 13), **_twist_args(6, 14)}
    kw = {} if out_type is None else {"dtype": out_type}
    cpu, t1, _ = _run(sluice, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args)
    gpu, t2, _ = _run(sluice, lambda fn, x, a: build(fn, x, a, **kw), images, "HWC", args, device="gpu", iters=2)
    assert t1 == t2
    _assert_same(cpu, gpu)


CHAINS = {
    # Detection pipelines' pair; a matrix then a scale, a scale then a matrix, two scales.
    "hsv>bc": lambda fn, x, a, mid, out: fn.brightness_contrast(fn.hsv(x, hue=a["h"], saturation=a["s"], value=a["v"], **mid), brightness=a["b"], contrast=a["c"], **out),
    "bc>twist": lambda fn, x, a, mid, out: fn.color_twist(fn.brightness_contrast(x, brightness=a["b"], brightness_shift=a["s"], **mid), hue=a["h"], saturation=a["v"], **out),
    "brightness>contrast": lambda fn, x, a, mid, out: fn.contrast(fn.brightness(x, brightness=a["b"], **mid), contrast=a["c"], **out),
    # Both name `hue`: not fused (the fused node reads argument inputs by name).
    "hue>twist": lambda fn, x, a, mid, out: fn.color_twist(fn.hue(x, hue=a["h"], **mid), hue=a["v"], **out),
}


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("in_type,mid_type,out_type", [
    (types.UINT8, None, None), (types.UINT8, types.FLOAT, types.UINT8), (types.FLOAT, types.FLOAT, types.FLOAT),
    (types.UINT8, types.UINT8, types.FLOAT),
    # No fused kernel for these types: the fused node runs its two operators in turn.
    (types.INT16, types.INT16, types.INT32),
])
@pytest.mark.parametrize("layout", ["HWC", "FHWC"])
def test_gpu_color_chains_are_fused_and_equal_cpu(chain, in_type, mid_type, out_type, layout):
    """Two colour operators in a row on the GPU run as one node (`<a>+<b>` in the statistics)
    with the bits of the cpu operators run one after the other."""
    require_gpu()
    build = CHAINS[chain]
    shape = (33, 47, 3) if layout == "HWC" else (2, 17, 21, 3)
    images = _images(NP[in_type], shape, 6, seed=21) + [np.zeros((0,) + shape[1:], NP[in_type])]
    args = {**_bc_args(7, in_type, 22), **_twist_args(7, 23)}
    mid = {} if mid_type is None else {"dtype": mid_type}
    out = {} if out_type is None else {"dtype": out_type}
    got = {}
    for device in ("cpu", "gpu"):
        pipe = sluice.pipeline.Pipeline(batch_size=len(images), num_threads=3, device_id=None if device == "cpu" else 0, seed=7)
        with pipe:
            x = fn.external_source(source=lambda: images, batch=True, layout=layout)
            nodes = {k: fn.external_source(source=_constant_source([np.float32(v) for v in vals]), batch=True) for k, vals in args.items()}
            pipe.set_outputs(build(fn, x.gpu() if device == "gpu" else x, nodes, mid, out))
        pipe.build()
        for _ in range(2):
            (o,) = pipe.run()
        got[device] = [np.array(s) for s in (o.as_cpu() if device == "gpu" else o)]
        fused = [n for n in pipe.executor_statistics() if "+" in n]
        assert len(fused) == (device == "gpu" and chain != "hue>twist"), (device, fused)
    _assert_same(got["cpu"], got["gpu"])


@pytest.mark.parametrize("op", ["brightness_contrast", "hsv"])
def test_gpu_sequences_equal_cpu(op):
    require_gpu()
    build = {**_bc_builds(), **TWIST_BUILDS}[op]
    images = _images(np.uint8, (3, 20, 30, 3), 4, seed=15) + [np.zeros((0, 20, 30, 3), np.uint8)]
    args = {**_bc_args(5, types.UINT8, 16), **_twist_args(5, 17)}
    cpu, _, l1 = _run(sluice, build, images, "FHWC", args)
    gpu, _, l2 = _run(sluice, build, images, "FHWC", args, device="gpu")
    assert l1 == l2 == "FHWC"
    _assert_same(cpu, gpu)


@pytest.mark.parametrize("dtype", [types.FLOAT, types.INT32, types.INT16, types.UINT8])
def test_dali_color_twist_default_dtype_gpu(dtype):
    require_gpu()
    pipe = Pipeline(batch_size=1, num_threads=3, device_id=0)
    with pipe:
        data = types.Constant(255, shape=(10, 10, 3), dtype=dtype, device="gpu")
        pipe.set_outputs(fn.hue(data))
    pipe.build()
    (out,) = pipe.run()
    assert out.dtype == dtype


# ---------------------------------------------------------------- color_space_conversion
SPACES = {"RGB": types.RGB, "BGR": types.BGR, "GRAY": types.GRAY, "YCbCr": types.YCbCr}
CONVERSIONS = [(a, b) for a in SPACES for b in SPACES if a != b]


def _space_images(space, shape, n, seed):
    c = 1 if space == "GRAY" else 3
    return [np.ascontiguousarray(x) for x in _images(np.uint8, shape[:-1] + (c,), n, seed)]


def _convert(lib, images, layout, src, dst, device="cpu"):
    return _run(lib, lambda fn, x, a: fn.color_space_conversion(x, image_type=SPACES[src], output_type=SPACES[dst]), images, layout, device=device)


@needs_dali
@pytest.mark.parametrize("src,dst", CONVERSIONS)
@pytest.mark.parametrize("layout,shape", [("HWC", (31, 45, 3)), ("FHWC", (2, 8, 9, 3)), ("FDHWC", (2, 3, 4, 5, 3))])
def test_color_space_conversion_equals_dali(src, dst, layout, shape):
    images = _space_images(src, shape, 4, seed=21)
    # every 8-bit value in every channel: the whole formula tables
    images[0] = np.ascontiguousarray(np.broadcast_to(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), (16, 16, images[0].shape[-1]))) if layout == "HWC" else images[0]
    ours, t1, l1 = _convert(sluice, images, layout, src, dst)
    ref, t2, l2 = _convert(dali, images, layout, src, dst)
    assert l1 == l2 == layout and int(t1) == int(t2)
    _assert_same(ours, ref)


def test_color_space_conversion_to_the_same_space_copies():
    images = _space_images("RGB", (5, 6, 3), 2, seed=22)
    out, _, _ = _convert(sluice, images, "HWC", "RGB", "RGB")
    _assert_same(out, images)


def test_color_space_conversion_errors_name_the_sample():
    with pytest.raises(RuntimeError, match=r"(?s)color_space_conversion.*sample 1.*3 channel"):
        _convert(sluice, [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 1), np.uint8)], "HWC", "RGB", "GRAY")
    with pytest.raises(RuntimeError, match=r"(?s)color_space_conversion.*FLOAT.*UINT8"):
        _convert(sluice, [np.zeros((4, 4, 3), np.float32)], "HWC", "RGB", "BGR")
    with pytest.raises(ValueError, match=r"(?s)color_space_conversion.*image_type.*RGB, BGR, GRAY or YCbCr"):
        _run(sluice, lambda fn, x, a: fn.color_space_conversion(x, image_type=types.ANY_DATA, output_type=types.RGB), [np.zeros((4, 4, 3), np.uint8)], "HWC")


@pytest.mark.parametrize("src,dst", CONVERSIONS)
def test_gpu_color_space_conversion_equals_cpu(src, dst):
    require_gpu()
    images = _space_images(src, (37, 29, 3), 5, seed=23)
    cpu, _, _ = _convert(sluice, images, "HWC", src, dst)
    gpu, _, _ = _convert(sluice, images, "HWC", src, dst, device="gpu")
    _assert_same(cpu, gpu)


# ---------------------------------------------------------------- equalize
def _equalize_plane(plane):
    """OpenCV's equalizeHist in NumPy (the reference DALI's tests use, via cv2)."""
    hist = np.bincount(plane.ravel(), minlength=256)
    first = int(np.flatnonzero(hist)[0])
    if hist[first] == plane.size:
        return plane.copy()
    scale = np.float32(255.0) / np.float32(plane.size - hist[first])
    cum = np.cumsum(hist).astype(np.int64) - hist[first]
    lut = np.clip(np.rint(cum.astype(np.float32) * scale), 0, 255).astype(np.uint8)
    lut[first] = 0
    return lut[plane]


def _equalize_ref(img, layout):
    if layout == "HW":
        return _equalize_plane(img)
    if layout == "CHW":
        return np.stack([_equalize_plane(c) for c in img])
    return np.stack([_equalize_plane(img[..., c]) for c in range(img.shape[-1])], axis=-1)


def _equalize(lib, images, layout, device="cpu"):
    return _run(lib, lambda fn, x, a: fn.experimental.equalize(x), images, layout, device=device)


def _equalize_inputs():
    """DALI's test_multichannel sizes and channel counts (smaller), plus flat and two-valued planes."""
    rng = np.random.default_rng(424242)
    sizes, channels = [(20, 30), (70, 50), (102, 20), (20, 102), (64, 64)], [1, 2, 3, 4, 5, 13]
    images = [np.uint8(rng.uniform(0, 255, (*sizes[k % 5], channels[k % 6]))) for k in range(30)]
    images.append(np.full((8, 8, 3), 77, np.uint8))
    images.append(np.where(rng.random((9, 9, 3)) < 0.5, 10, 200).astype(np.uint8))
    images.append((rng.normal(100, 10, (40, 40, 3)).clip(0, 255)).astype(np.uint8))
    return images


@needs_dali
def test_equalize_equals_dali_and_opencv():
    images = _equalize_inputs()
    ours, _, l1 = _equalize(sluice, images, "HWC")
    ref, _, l2 = _equalize(dali, images, "HWC")
    assert l1 == l2 == "HWC"
    _assert_same(ours, ref)
    _assert_same(ours, [_equalize_ref(x, "HWC") for x in images])


@needs_dali
@pytest.mark.parametrize("layout", ["HW", "FHW", "FHWC"])
def test_equalize_grey_and_sequences_equal_dali(layout):
    rng = np.random.default_rng(5)
    shape = {"HW": (33, 17), "FHW": (3, 33, 17), "FHWC": (3, 33, 17, 3)}[layout]
    images = [np.uint8(rng.normal(90 + 20 * k, 15 + 5 * k, shape).clip(0, 255)) for k in range(4)]
    ours, _, _ = _equalize(sluice, images, layout)
    ref, _, _ = _equalize(dali, images, layout)
    _assert_same(ours, ref)


@needs_dali
@pytest.mark.parametrize("layout", ["CHW", "FCHW"])
def test_equalize_channel_first_equalizes_each_channel_plane(layout):
    rng = np.random.default_rng(6)
    shape = (3, 21, 34) if layout == "CHW" else (2, 3, 21, 34)
    images = [np.uint8(rng.normal(100, 20 + 10 * k, shape).clip(0, 255)) for k in range(3)]
    ours, _, got_layout = _equalize(sluice, images, layout)
    ref, _, _ = _equalize(dali, images, layout)
    assert got_layout == layout
    _assert_same(ours, ref)
    if layout == "CHW":
        _assert_same(ours, [_equalize_ref(x, "CHW") for x in images])


def test_equalize_refuses_other_types_and_layouts():
    with pytest.raises(RuntimeError, match=r"(?s)equalize.*FLOAT.*UINT8"):
        _equalize(sluice, [np.zeros((4, 4, 3), np.float32)], "HWC")
    with pytest.raises(ValueError, match=r"(?s)equalize.*DHWC"):
        _equalize(sluice, [np.zeros((2, 4, 4, 3), np.uint8)], "DHWC")


@pytest.mark.parametrize("layout", ["HWC", "CHW", "HW", "FHWC"])
def test_gpu_equalize_equals_cpu(layout):
    require_gpu()
    rng = np.random.default_rng(7)
    if layout == "HWC":
        images = _equalize_inputs() + [np.zeros((0, 5, 3), np.uint8)]
    else:
        shape = {"CHW": (3, 21, 34), "HW": (300, 200), "FHWC": (4, 30, 20, 3)}[layout]
        images = [np.uint8(rng.normal(100, 20 + 10 * k, shape).clip(0, 255)) for k in range(5)]
    cpu, _, _ = _equalize(sluice, images, layout)
    gpu, _, _ = _equalize(sluice, images, layout, device="gpu")
    _assert_same(cpu, gpu)
