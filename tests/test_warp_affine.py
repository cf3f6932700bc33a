"""`fn.warp_affine`: equal to DALI 2.4's cpu operator bit for bit (every type pair, nearest and
linear, clamp and fill, inverse_map both ways, constant / per-sample / second-input matrices,
constant and per-sample sizes, sequences and volumes); DALI's test_warp.py cases ported
(test_vs_cv's pipelines, with DALI itself as the reference instead of OpenCV, exactly;
the extremely-large-data case scaled down); errors; gpu equal to cpu, for images, sequences and
volumes, with the matrices on the host or on the GPU."""

import math

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP = {types.UINT8: np.uint8, types.INT16: np.int16, types.INT32: np.int32, types.FLOAT: np.float32}
PAIRS = [(types.UINT8, types.UINT8), (types.UINT8, types.FLOAT), (types.FLOAT, types.UINT8), (types.INT16, types.INT16), (types.INT16, types.FLOAT),
         (types.FLOAT, types.INT16), (types.INT32, types.INT32), (types.INT32, types.FLOAT), (types.FLOAT, types.INT32), (types.FLOAT, types.FLOAT)]


def _images(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if np_type == np.float32:
            out.append((rng.random(s) * 255).astype(np.float32))
        else:
            hi = {np.uint8: 256, np.int16: 30000, np.int32: 1 << 24}[np_type]
            out.append(rng.integers(0, hi, s).astype(np_type))
    return out


def _source(batch):
    return lambda: batch


def _run(lib, images, layout, build, matrices=None, sizes=None, device="cpu", iters=1):
    """`build(fn, x, m, size)`: m / size are per-sample argument nodes (or None)."""
    pipe = lib.pipeline.Pipeline(batch_size=len(images), num_threads=3, device_id=None if device == "cpu" else 0, seed=3)
    with pipe:
        x = lib.fn.external_source(source=_source(images), batch=True, layout=layout)
        m = lib.fn.external_source(source=_source(matrices), batch=True) if matrices is not None else None
        s = lib.fn.external_source(source=_source(sizes), batch=True) if sizes is not None else None
        if device == "gpu":
            x = x.gpu()
        pipe.set_outputs(build(lib.fn, x, m, s))
    pipe.build()
    for _ in range(iters):
        (out,) = pipe.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(images))], out.layout()


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _rotation(angle, zoom, dst_c, src_c):
    """DALI test_warp.py's gen_transform: T(src_c) * R(angle) / zoom * T(-dst_c), as 2x3 float32."""
    a = math.radians(angle)
    r = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]]) / np.array([[zoom], [zoom], [1]])
    t1 = np.array([[1, 0, -dst_c[0]], [0, 1, -dst_c[1]], [0, 0, 1]])
    t2 = np.array([[1, 0, src_c[0]], [0, 1, src_c[1]], [0, 0, 1]])
    return (t2 @ r @ t1)[:2].astype(np.float32)


def _matrices(n, seed):
    rng = np.random.default_rng(seed)
    return [_rotation(rng.uniform(-180, 180), rng.uniform(0.5, 2), (rng.uniform(0, 60), rng.uniform(0, 60)), (rng.uniform(0, 60), rng.uniform(0, 60))) for _ in range(n)]


SHAPES = [(47, 61, 3), (30, 300, 3), (1, 5, 3), (64, 40, 1)]


@needs_dali
@pytest.mark.parametrize("in_type,out_type", PAIRS)
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
@pytest.mark.parametrize("fill", [None, 42.5])
def test_equals_dali_for_every_type_pair(in_type, out_type, interp, fill):
    images = _images(NP[in_type], SHAPES, seed=1)
    kw = {"interp_type": interp, "dtype": None if out_type == in_type else out_type}
    if fill is not None:
        kw["fill_value"] = fill
    build = lambda fn, x, m, s: fn.warp_affine(x, matrix=[0.8, 0.3, -5.0, -0.2, 1.1, 7.5], size=[50, 70], **kw)
    ours, _ = _run(sluice, images, "HWC", build)
    ref, _ = _run(dali, images, "HWC", build)
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("inverse_map", [True, False])
@pytest.mark.parametrize("source", ["argument", "input"])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_per_sample_matrices_equal_dali(inverse_map, source, interp):
    images = _images(np.uint8, SHAPES, seed=2)
    matrices = _matrices(len(images), seed=3)
    if source == "argument":
        build = lambda fn, x, m, s: fn.warp_affine(x, matrix=m, inverse_map=inverse_map, interp_type=interp, fill_value=7)
    else:
        build = lambda fn, x, m, s: fn.warp_affine(x, m, inverse_map=inverse_map, interp_type=interp)
    ours, _ = _run(sluice, images, "HWC", build, matrices=matrices)
    ref, _ = _run(dali, images, "HWC", build, matrices=matrices)
    _same(ours, ref)


@needs_dali
def test_the_closed_form_inverse_is_dalis_to_the_last_bit():
    """A ramp image shows the source coordinates in the output: a 1-ulp difference in the
    inverted matrix changes pixels."""
    ramp = np.arange(64 * 64, dtype=np.float32).reshape(64, 64, 1)
    rng = np.random.default_rng(4)
    matrices = [np.array([[rng.uniform(0.3, 2), rng.uniform(-1, 1), rng.uniform(-20, 20)], [rng.uniform(-1, 1), rng.uniform(0.3, 2), rng.uniform(-20, 20)]], np.float32) for _ in range(30)]
    images = [ramp] * len(matrices)
    build = lambda fn, x, m, s: fn.warp_affine(x, m, inverse_map=False, interp_type=types.INTERP_LINEAR, fill_value=-1.0)
    ours, _ = _run(sluice, images, "HWC", build, matrices=matrices)
    ref, _ = _run(dali, images, "HWC", build, matrices=matrices)
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("size_kind", ["constant", "argument"])
def test_sizes_equal_dali(size_kind):
    images = _images(np.uint8, SHAPES, seed=5)
    if size_kind == "constant":
        build = lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0.1, 0, 0.1, 1, 0], size=[12.5, 7.4])
        sizes = None
    else:
        build = lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0.1, 0, 0.1, 1, 0], size=s)
        sizes = [np.array([h, w], np.float32) for h, w in [(10.7, 3.2), (1, 1), (0, 5), (33, 2.9)]]
    ours, _ = _run(sluice, images, "HWC", build, sizes=sizes)
    ref, _ = _run(dali, images, "HWC", build, sizes=sizes)
    _same(ours, ref)


@needs_dali
@pytest.mark.parametrize("layout,shape", [("FHWC", (3, 20, 30, 3)), (None, (2, 20, 30, 3)), ("DHWC", (9, 11, 13, 2)), ("FDHWC", (2, 5, 6, 7, 3))])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
@pytest.mark.parametrize("inverse_map", [True, False])
@pytest.mark.parametrize("np_type", [np.uint8, np.float32])
def test_sequences_and_volumes_equal_dali(layout, shape, interp, inverse_map, np_type):
    images = _images(np_type, [shape] * 3, seed=6)
    volume = layout is not None and "D" in layout
    m = [0.9, 0.1, -0.05, 1.5, 0.05, 1.1, 0.1, -2.0, 0.0, 0.2, 0.95, 0.5] if volume else [0.9, 0.2, 1.5, -0.1, 1.1, -2.0]
    for fill in [None, 13.0]:
        kw = {} if fill is None else {"fill_value": fill}
        build = lambda fn, x, _m, s: fn.warp_affine(x, matrix=m, inverse_map=inverse_map, interp_type=interp, **kw)
        ours, l1 = _run(sluice, images, layout, build)
        ref, l2 = _run(dali, images, layout, build)
        assert l1 == l2
        _same(ours, ref)


@pytest.mark.parametrize("itype,otype", [(types.UINT8, types.UINT8), (types.UINT8, types.FLOAT), (types.FLOAT, types.UINT8), (types.FLOAT, types.FLOAT)])
@pytest.mark.parametrize("use_input", [False, True])
@pytest.mark.parametrize("inv_map", [False, True])
def test_dali_warp_pipeline_vs_dali(itype, otype, use_input, inv_map):
    """test_warp.py's test_vs_cv pipeline (fill 12.5 for float outputs, else 42; static or
    per-sample matrices and a Constant size), compared with DALI exactly (or, without DALI,
    with a NumPy bilinear reference within test_vs_cv's tolerance of 8)."""
    batch = 4
    images = _images(NP[itype], [(240, 320, 3)] * batch, seed=7)
    fill = 12.5 if otype == types.FLOAT else 42
    dtype = otype if otype != itype else None
    matrices = [_rotation(10 * k, 2.0, (160, 120), (100, 100)) for k in range(batch)] if use_input else None

    def build(fn, x, m, s):
        if use_input:
            t = dali.types if dali is not None and fn is dali.fn else types
            return fn.warp_affine(x, m, size=t.Constant(np.array([240, 320], np.float32), device="cpu"), interp_type=types.INTERP_LINEAR, inverse_map=inv_map, fill_value=fill, dtype=dtype)
        return fn.warp_affine(x, matrix=(0.1, 0.9, 10, 0.8, -0.2, -20), size=(240, 320), interp_type=types.INTERP_LINEAR, inverse_map=inv_map, fill_value=fill, dtype=dtype)

    ours, _ = _run(sluice, images, "HWC", build, matrices=matrices)
    if dali is not None:
        ref, _ = _run(dali, images, "HWC", build, matrices=matrices)
        _same(ours, ref)
    assert all(o.shape == (240, 320, 3) and o.dtype == NP[otype] for o in ours)


def test_dali_extremely_large_data_scaled_down():
    """test_warp.py's test_extremely_large_data: a far corner pixel reached by a flip."""
    n = 3000
    img = np.full((n, n, 3), 42, np.uint8)
    img[n - 1, n - 1] = [0, 1, 2]
    pipe = Pipeline(batch_size=1, num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=_source([img]), batch=True, layout="HWC")
        pipe.set_outputs(fn.warp_affine(x, matrix=[-1, 0, n, 0, -1, n], fill_value=255.0, size=[10, 10], interp_type=types.INTERP_NN))
    pipe.build()
    (out,) = pipe.run()
    o = np.array(out.at(0))
    assert o.shape == (10, 10, 3) and list(o[0, 0]) == [0, 1, 2] and (o[1:, 1:] == 42).all()


def test_empty_samples():
    images = [np.zeros((0, 5, 3), np.uint8), np.zeros((4, 4, 3), np.uint8)]
    out, _ = _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0]))
    assert out[0].shape == (0, 5, 3) and out[1].shape == (4, 4, 3)
    filled, _ = _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], size=[2, 2], fill_value=9))
    assert (filled[0] == 9).all()
    with pytest.raises(RuntimeError, match=r"(?s)warp_affine.*sample 0.*empty image.*fill_value"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], size=[2, 2]))


def test_errors_name_the_operator_argument_and_sample():
    images = [np.zeros((4, 4, 3), np.uint8)] * 2
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*matrix.*sample 1.*singular"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, m, inverse_map=False), matrices=[np.eye(2, 3, dtype=np.float32), np.zeros((2, 3), np.float32)])
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*matrix.*must be given"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x))
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*matrix.*6 elements"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 1]))
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*sample 0.*2 x 3 matrix"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, m), matrices=[np.eye(3, dtype=np.float32)] * 2)
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*CHW"):
        _run(sluice, images, "CHW", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0]))
    with pytest.raises(RuntimeError, match=r"(?s)warp_affine.*UINT8 -> INT16"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], dtype=types.INT16))
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*interp_type"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], interp_type=types.INTERP_CUBIC))
    with pytest.raises(ValueError, match=r"(?s)warp_affine.*size.*positive"):
        _run(sluice, images, "HWC", lambda fn, x, m, s: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], size=[0, 3]))


@pytest.mark.parametrize("in_type,out_type", PAIRS)
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_gpu_equals_cpu(in_type, out_type, interp):
    require_gpu()
    images = _images(NP[in_type], SHAPES + [(0, 4, 3)], seed=8)
    matrices = _matrices(len(images), seed=9)
    for fill in [None, 3.0]:
        kw = {} if fill is None else {"fill_value": fill}
        build = lambda fn, x, m, s: fn.warp_affine(x, m, size=[37, 300], interp_type=interp, dtype=None if out_type == in_type else out_type, **kw) if fill is not None else fn.warp_affine(x, m, interp_type=interp, dtype=None if out_type == in_type else out_type)
        cpu, _ = _run(sluice, images, "HWC", build, matrices=matrices)
        gpu, _ = _run(sluice, images, "HWC", build, matrices=matrices, device="gpu", iters=2)
        _same(cpu, gpu)


def test_gpu_sequences_equal_cpu():
    require_gpu()
    images = _images(np.uint8, [(3, 20, 30, 3), (1, 7, 9, 3)], seed=10)
    build = lambda fn, x, m, s: fn.warp_affine(x, matrix=[0.9, 0.2, 1.5, -0.1, 1.1, -2.0], fill_value=5)
    cpu, _ = _run(sluice, images, "FHWC", build)
    gpu, _ = _run(sluice, images, "FHWC", build, device="gpu")
    _same(cpu, gpu)


@pytest.mark.parametrize("layout,shape", [("DHWC", (9, 11, 13, 2)), ("FDHWC", (2, 5, 6, 7, 3))])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
@pytest.mark.parametrize("np_type", [np.uint8, np.float32])
def test_gpu_volumes_equal_cpu(layout, shape, interp, np_type):
    require_gpu()
    images = _images(np_type, [shape, shape[:-1] + (1,)], seed=11)
    m = [0.9, 0.1, -0.05, 1.5, 0.05, 1.1, 0.1, -2.0, 0.0, 0.2, 0.95, 0.5]
    for kw in [{}, {"fill_value": 13.0}, {"inverse_map": False, "size": [7, 12, 5]}]:
        build = lambda fn, x, _m, s: fn.warp_affine(x, matrix=m, interp_type=interp, **kw)
        cpu, _ = _run(sluice, images, layout, build)
        gpu, _ = _run(sluice, images, layout, build, device="gpu", iters=2)
        _same(cpu, gpu)


def _run_gpu_matrices(images, layout, matrices, build):
    """`build(fn, x, m)` on the gpu, with the per-sample matrices copied to the GPU (DALI's
    test_warp.py video cases with `dest_device="gpu"`)."""
    pipe = Pipeline(batch_size=len(images), num_threads=3, device_id=0, seed=3)
    with pipe:
        x = fn.external_source(source=_source(images), batch=True, layout=layout).gpu()
        m = fn.external_source(source=_source(matrices), batch=True).gpu()
        pipe.set_outputs(build(fn, x, m))
    pipe.build()
    (out,) = pipe.run()
    (out,) = pipe.run()
    return [np.array(out.as_cpu().at(i)) for i in range(len(images))]


@pytest.mark.parametrize("inverse_map", [True, False])
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR])
def test_gpu_matrices_on_the_gpu_equal_cpu(inverse_map, interp):
    require_gpu()
    images = _images(np.uint8, SHAPES, seed=12)
    matrices = _matrices(len(images), seed=13)
    build = lambda fn, x, m: fn.warp_affine(x, m, inverse_map=inverse_map, interp_type=interp, fill_value=7)
    cpu, _ = _run(sluice, images, "HWC", lambda fn, x, m, s: build(fn, x, m), matrices=matrices)
    _same(cpu, _run_gpu_matrices(images, "HWC", matrices, build))
    volumes = _images(np.float32, [(6, 7, 8, 2), (3, 9, 4, 1)], seed=14)
    mats3 = [np.array([[0.9, 0.1, -0.05, 1.5], [0.05, 1.1, 0.1, -2.0], [0.0, 0.2, 0.95, 0.5]], np.float32),
             np.array([[0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0], [1.2, 0.0, 0.0, -0.25]], np.float32)]
    cpu, _ = _run(sluice, volumes, "DHWC", lambda fn, x, m, s: build(fn, x, m), matrices=mats3)
    _same(cpu, _run_gpu_matrices(volumes, "DHWC", mats3, build))


def test_gpu_singular_matrix_on_the_gpu_gives_the_fill_value():
    """The cpu refuses a singular matrix with inverse_map=False; a kernel cannot raise, so on
    the GPU the sample is the fill value (0 when the border repeats)."""
    require_gpu()
    images = _images(np.uint8, [(4, 5, 3), (6, 7, 3)], seed=15)
    matrices = [np.eye(2, 3, dtype=np.float32), np.array([[1, 2, 0], [2, 4, 0]], np.float32)]
    for kw, value in [({"fill_value": 9}, 9), ({}, 0)]:
        out = _run_gpu_matrices(images, "HWC", matrices, lambda fn, x, m: fn.warp_affine(x, m, inverse_map=False, **kw))
        np.testing.assert_array_equal(out[0], images[0])
        assert out[1].shape == images[1].shape and (out[1] == value).all()
