"""The affine transform generators: `fn.transforms.rotation`, `scale`, `shear`,
`translation`, `crop` and `combine` (cpu only, as in DALI).

- Parity: equal to DALI 2.4's cpu operators bit for bit (float32 bits compared; NaNs by
  position), for constant and per-sample (argument input) arguments, with and without an
  input transform, `reverse_order` both ways, 1-D to 6-D where the operator supports them,
  and edge values (zero or one-component axis, +-90 degree shears, zero crop extents, inf
  in the input).
- DALI's own tests (operator_1/test_affine_transforms.py) ported with the imports renamed:
  their float64 NumPy references and tolerances. Sequences (`test_sequences`,
  `test_combine_shape_mismatch`, `test_rotate_shape_mismatch`) are in test_per_frame_args.py.
- The deprecated `fn.transform_translation` / `ops.TransformTranslation` warn as in DALI.
- Errors name the operator and the argument (and the sample); the pipeline goes on.
"""

import re

import numpy as np
import pytest

import sluice
from sluice import fn, ops
from sluice.pipeline import Pipeline

from conftest import dali_or_none, library_params

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

BATCH = 4


def _source(batch):
    """A source giving `batch` every iteration."""
    return lambda: batch


def _run(lib, build, feeds=None, batch_size=BATCH, layouts=None, iters=1):
    """Runs `build(fn, nodes)`: `feeds` maps names to one array per sample, each fed by an
    external source (`nodes[name]`). Returns every output as a list of NumPy arrays."""
    feeds = feeds or {}
    layouts = layouts or {}
    if feeds:
        batch_size = len(next(iter(feeds.values())))
    pipe = lib.pipeline.Pipeline(batch_size=batch_size, num_threads=2, device_id=None, seed=1234)
    with pipe:
        nodes = {k: lib.fn.external_source(source=_source(v), batch=True, layout=layouts.get(k)) for k, v in feeds.items()}
        outs = build(lib.fn, nodes)
        pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    pipe.build()
    for _ in range(iters):
        res = pipe.run()
    return [[np.array(o.at(i)) for i in range(len(o))] for o in res]


def _assert_same(ours, ref):
    """Same shapes and float32 bits (-0.0 included); NaNs at the same places."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        nan = np.isnan(a)
        np.testing.assert_array_equal(nan, np.isnan(b))
        np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan], err_msg=f"\n{a}\n{b}")


def _per_sample(shape, lo, hi, seed):
    rng = np.random.default_rng(seed)
    return [np.array(rng.uniform(lo, hi, shape), np.float32) for _ in range(BATCH)]


def _transforms(ndim, seed, lo=-2.0, hi=2.0):
    """Random (ndim, ndim+1) input transforms, one per sample."""
    return _per_sample((ndim, ndim + 1), lo, hi, seed)


# ---------------------------------------------------------------- parity with DALI
# (operator, name, ndim of an input transform, constant arguments, per-sample arguments)
CASES = [
    # rotation
    ("rotation", "2d", 2, {"angle": 30.0}, {}),
    ("rotation", "2d_center", 2, {"angle": -47.3, "center": [1.0, 0.5]}, {}),
    ("rotation", "2d_scalar_center", 2, {"angle": 90.0, "center": 2.0}, {}),
    ("rotation", "2d_special_angles", 2, {}, {"angle": [np.array(a, np.float32) for a in (0.0, 90.0, 180.0, -270.0)]}),
    ("rotation", "2d_ps_angle", 2, {}, {"angle": _per_sample((), -400, 400, 1)}),
    ("rotation", "2d_ps_angle_center", 2, {}, {"angle": _per_sample((), -400, 400, 2), "center": _per_sample((2,), -10, 10, 3)}),
    ("rotation", "2d_ps_center_scalar", 2, {"angle": 12.5}, {"center": _per_sample((), -10, 10, 4)}),
    ("rotation", "3d", 3, {"angle": 40.0, "axis": [0.4, 0.3, 0.1]}, {}),
    ("rotation", "3d_center", 3, {"angle": 40.0, "axis": [0.4, 0.3, 0.1], "center": [1.0, -0.4, 10.0]}, {}),
    ("rotation", "3d_one_axis_component", 3, {"angle": 33.0, "axis": [0.0, -2.5, 0.0], "center": 1.5}, {}),
    ("rotation", "3d_zero_angle", 3, {"angle": 0.0, "axis": [1.0, 1.0, 0.0]}, {}),
    ("rotation", "3d_zero_axis", 3, {"angle": 30.0, "axis": [0.0, 0.0, 0.0]}, {}),
    ("rotation", "3d_nan_axis", 3, {"angle": 30.0, "axis": [float("nan"), 0.0, 0.0]}, {}),
    ("rotation", "3d_ps_axis", 3, {}, {"angle": _per_sample((), -180, 180, 5), "axis": _per_sample((3,), -1, 1, 6)}),
    ("rotation", "3d_ps_axis_scalar", 3, {"angle": -75.0}, {"axis": _per_sample((), -1, 1, 7)}),
    ("rotation", "3d_ps_center", 3, {"angle": 61.0, "axis": [0.0, 0.0, 1.0]}, {"center": _per_sample((3,), -10, 10, 8)}),
    # scale
    ("scale", "2d_dali", 2, {"scale": [0.0, 1.0]}, {}),
    ("scale", "3d_dali", 3, {"scale": [2.0, 1.0, 3.0]}, {}),
    ("scale", "2d_center", 2, {"scale": [2.0, 1.0], "center": [1.0, 0.5]}, {}),
    ("scale", "one_value_ndim", 2, {"scale": [2.0], "center": [1.0, 0.5], "ndim": 2}, {}),
    ("scale", "scalar_no_ndim", 1, {"scale": -1.75}, {}),
    ("scale", "scalar_ndim3_center", 3, {"scale": 2.0, "ndim": 3, "center": 1.0}, {}),
    ("scale", "input_wins_over_ndim", 2, {"scale": 2.5, "ndim": 3}, {}),
    ("scale", "6d", 6, {"scale": [1.5, -2.0, 0.25, 3.0, 1.0, 0.7], "center": [1.0, 2.0, 3.0, -4.0, 5.0, 0.1]}, {}),
    ("scale", "ps_scale", 2, {}, {"scale": _per_sample((2,), -3, 3, 9)}),
    ("scale", "ps_scale_center", 3, {}, {"scale": _per_sample((3,), -3, 3, 10), "center": _per_sample((3,), -50, 50, 11)}),
    ("scale", "ps_scalar_scale", 2, {"ndim": 2, "center": [-50.0, 100.0]}, {"scale": _per_sample((), -3, 3, 12)}),
    # shear
    ("shear", "2d", 2, {"shear": [1.0, 2.0]}, {}),
    ("shear", "2d_center", 2, {"shear": [1.0, 2.0], "center": [0.4, 0.5]}, {}),
    ("shear", "3d", 3, {"shear": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}, {}),
    ("shear", "3d_center", 3, {"shear": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "center": [0.4, 0.5, 0.6]}, {}),
    ("shear", "angles_2d", 2, {"angles": [30.0, 10.0]}, {}),
    ("shear", "angles_2d_center", 2, {"angles": [30.0, 10.0], "center": [0.4, 0.5]}, {}),
    ("shear", "angles_3d", 3, {"angles": [40.0, 30.0, 10.0, 35.0, 25.0, 15.0]}, {}),
    ("shear", "angles_3d_center", 3, {"angles": [40.0, 30.0, 10.0, 35.0, 25.0, 15.0], "center": [0.4, 0.5, 0.6]}, {}),
    ("shear", "angles_90", 2, {"angles": [90.0, -90.0]}, {}),
    ("shear", "ps_shear_vector", 2, {}, {"shear": _per_sample((2,), -2, 2, 13)}),
    ("shear", "ps_shear_2x1", 2, {"center": 3.0}, {"shear": _per_sample((2, 1), -2, 2, 14)}),
    ("shear", "ps_shear_3x2", 3, {}, {"shear": _per_sample((3, 2), -2, 2, 15), "center": _per_sample((3,), -10, 10, 16)}),
    ("shear", "ps_angles_2x1", 2, {}, {"angles": _per_sample((2, 1), -89, 89, 17)}),
    ("shear", "ps_angles_3x2", 3, {"center": [1.0, 2.0, 3.0]}, {"angles": _per_sample((3, 2), -80, 80, 18)}),
    # translation
    ("translation", "1d", 1, {"offset": [3.0]}, {}),
    ("translation", "2d", 2, {"offset": [0.0, 1.0]}, {}),
    ("translation", "3d", 3, {"offset": [2.0, 1.0, 3.0]}, {}),
    ("translation", "6d", 6, {"offset": [2.0, -1.0, 3.5, 0.25, 7.0, -8.0]}, {}),
    ("translation", "ps_2d", 2, {}, {"offset": _per_sample((2,), -100, 200, 19)}),
    ("translation", "ps_5d", 5, {}, {"offset": _per_sample((5,), -100, 200, 20)}),
    ("translation", "ps_scalar", 1, {}, {"offset": _per_sample((), -100, 200, 21)}),
    # crop (DALI's cases, their start/end swapped, with and without `absolute`)
    ("crop", "defaults", 1, {}, {}),
    ("crop", "2d_all", 2, {"from_start": [0.1, 0.2], "from_end": [1.0, 1.2], "to_start": [0.3, 0.2], "to_end": [0.5, 0.6]}, {}),
    ("crop", "2d_all_swapped", 2, {"from_start": [1.0, 1.2], "from_end": [0.1, 0.2], "to_start": [0.5, 0.6], "to_end": [0.3, 0.2]}, {}),
    ("crop", "2d_all_swapped_absolute", 2, {"from_start": [1.0, 1.2], "from_end": [0.1, 0.2], "to_start": [0.5, 0.6], "to_end": [0.3, 0.2], "absolute": True}, {}),
    ("crop", "2d_from", 2, {"from_start": [0.1, 0.2], "from_end": [0.4, 0.9]}, {}),
    ("crop", "2d_from_start_only", 2, {"from_start": [0.2, 0.2]}, {}),
    ("crop", "2d_from_end_only_absolute", 2, {"from_end": [0.4, 0.9], "to_start": 1.0, "absolute": True}, {}),
    ("crop", "3d_all", 3, {"from_start": [0.1, 0.2, 0.3], "from_end": [1.0, 1.2, 1.3], "to_start": [0.3, 0.2, 0.1], "to_end": [0.5, 0.6, 0.7]}, {}),
    ("crop", "3d_from_swapped_absolute", 3, {"from_start": [1.0, 1.2, 1.3], "from_end": [0.1, 0.2, 0.3], "absolute": True}, {}),
    ("crop", "6d", 6, {"from_end": [2.0, 4.0, 8.0, 3.0, 5.0, 7.0], "to_start": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}, {}),
    ("crop", "zero_extent", 1, {"from_start": [1.0], "from_end": [1.0]}, {}),
    ("crop", "ps_from_start", 2, {"from_end": [4.0, 4.0]}, {"from_start": _per_sample((2,), -1, 1, 22)}),
    ("crop", "ps_one_value", 2, {"from_end": [4.0, 5.0]}, {"from_start": _per_sample((1,), -1, 1, 23)}),
    ("crop", "ps_all_absolute", 3, {"absolute": True}, {k: _per_sample((3,), -5, 5, 24 + j) for j, k in enumerate(["from_start", "from_end", "to_start", "to_end"])}),
]

MODES = ["no_input", "input", "input_reversed"]


def _case_build(op, consts, per_sample, mode):
    def build(fn, nodes):
        kwargs = dict(consts)
        kwargs.update({k: nodes[k] for k in per_sample})
        f = getattr(fn.transforms, op)
        if mode == "no_input":
            return f(**kwargs)
        return f(nodes["T0"], reverse_order=mode == "input_reversed", **kwargs)

    return build


@needs_dali
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,name,ndim,consts,per_sample", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_transforms_equal_dali(op, name, ndim, consts, per_sample, mode):
    feeds = dict(per_sample)
    if mode != "no_input":
        feeds["T0"] = _transforms(ndim, seed=100 + ndim)
    build = _case_build(op, consts, per_sample, mode)
    (ours,) = _run(sluice, build, feeds)
    (ref,) = _run(dali, build, feeds)
    _assert_same(ours, ref)


@needs_dali
@pytest.mark.parametrize("ndim", [1, 2, 3, 6])
@pytest.mark.parametrize("num", [2, 3, 10])
@pytest.mark.parametrize("reverse", [False, True])
def test_combine_equals_dali(ndim, num, reverse):
    feeds = {f"t{k}": _transforms(ndim, seed=200 + k) for k in range(num)}
    build = lambda fn, nodes: fn.transforms.combine(*(nodes[f"t{k}"] for k in range(num)), reverse_order=reverse)  # noqa: E731
    (ours,) = _run(sluice, build, feeds)
    (ref,) = _run(dali, build, feeds)
    _assert_same(ours, ref)


@needs_dali
def test_chained_transforms_equal_dali():
    """Transforms feeding each other and combine: the products' roundings add up the same."""

    def build(fn, nodes):
        t = fn.transforms.translation(offset=nodes["off"])
        r = fn.transforms.rotation(t, angle=nodes["angle"], center=[3.0, -1.0])
        s = fn.transforms.shear(r, angles=[10.0, -20.0], reverse_order=True)
        c = fn.transforms.crop(s, from_start=[0.0, 0.0], from_end=[640.0, 480.0], to_start=[-1.0, -1.0], to_end=[1.0, 1.0])
        return c, fn.transforms.combine(t, r, s, c), fn.transforms.combine(c, s, r, t, reverse_order=True)

    feeds = {"off": _per_sample((2,), -100, 100, 30), "angle": _per_sample((), -180, 180, 31)}
    ours = _run(sluice, build, feeds)
    ref = _run(dali, build, feeds)
    for a, b in zip(ours, ref):
        _assert_same(a, b)


@needs_dali
def test_inf_in_the_input_propagates_as_in_dali():
    """0 * inf in the homogeneous row's products gives NaN, as DALI's full square product does."""
    t0 = [np.array([[np.inf, 0, 0], [0, 1, 0]], np.float32)]
    build = lambda fn, nodes: fn.transforms.translation(nodes["T0"], offset=[1.0, 1.0])  # noqa: E731
    (ours,) = _run(sluice, build, {"T0": t0})
    (ref,) = _run(dali, build, {"T0": t0})
    _assert_same(ours, ref)
    assert ours[0][0, 0] == np.inf and np.isnan(ours[0][1, 0])


@pytest.mark.parametrize("lib", library_params())
def test_known_values(lib):
    """Values DALI 2.4 gives (the same assertions hold for DALI)."""
    build = lambda fn, nodes: (  # noqa: E731
        fn.transforms.rotation(angle=90.0, center=2.0),
        fn.transforms.rotation(angle=0.0, axis=[1.0, 1.0, 0.0]),
        fn.transforms.scale(scale=2.0),
        fn.transforms.scale(scale=2.0, ndim=3, center=1.0),
        fn.transforms.translation(offset=3.0),
        fn.transforms.crop(),
        fn.transforms.crop(from_start=[1.0], from_end=[1.0]),
        fn.transforms.shear(angles=[90.0, -90.0]),
    )
    rot, ident, s1, s3, t1, crop, crop0, sh = (o[0] for o in _run(lib, build, batch_size=2))
    np.testing.assert_array_equal(rot, np.array([[-4.3711388e-08, -1, 4], [1, -4.3711388e-08, 1.1920929e-07]], np.float32))
    np.testing.assert_array_equal(ident, np.eye(3, 4, dtype=np.float32))
    np.testing.assert_array_equal(s1, [[2, 0]])
    np.testing.assert_array_equal(s3, [[2, 0, 0, -1], [0, 2, 0, -1], [0, 0, 2, -1]])
    np.testing.assert_array_equal(t1, [[1, 3]])
    np.testing.assert_array_equal(crop, [[1, 0]])
    np.testing.assert_array_equal(crop0, [[np.inf, -np.inf]])
    # deg2rad(90) rounds above pi/2: tanf of it is large and negative.
    np.testing.assert_array_equal(sh, [[1, -22877334, 0], [22877334, 1, 0]])
    for o in (rot, ident, s1, s3, t1, crop, crop0, sh):
        assert o.dtype == np.float32


def test_output_layout_and_batch():
    """One matrix per sample, float32, layout "**" (DALI 2.4's)."""
    pipe = Pipeline(batch_size=3, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.transforms.rotation(angle=10.0), fn.transforms.rotation(angle=fn.random.uniform(range=(0, 90))))
    const, per_sample = pipe.run()
    assert const.layout() == per_sample.layout() == "**" and len(const) == 3 and len(per_sample) == 3
    assert np.array(const.at(2)).shape == (2, 3) and np.array(const.at(2)).dtype == np.float32


# ---------------------------------------------------------------- DALI's tests, ported
def check_results_sample(T1, mat_ref, T0=None, reverse=False, atol=1e-6):
    ndim = mat_ref.shape[0] - 1
    T1 = np.array(T1)
    if T0 is not None:
        T0 = np.array(T0)
        mat_T0 = np.identity(ndim + 1)
        mat_T0[:ndim, :] = T0
        mat_T1 = np.dot(mat_T0, mat_ref) if reverse else np.dot(mat_ref, mat_T0)
        ref_T1 = mat_T1[:ndim, :]
    else:
        ref_T1 = mat_ref[:ndim, :]
    assert np.allclose(T1, ref_T1, atol=atol)


def check_results(T1, batch_size, mat_ref, T0=None, reverse=False, atol=1e-6):
    for idx in range(batch_size):
        check_results_sample(T1.at(idx), mat_ref, T0.at(idx) if T0 is not None else None, reverse, atol)


def translate_affine_mat(offset):
    ndim = len(offset)
    affine_mat = np.identity(ndim + 1)
    affine_mat[:ndim, -1] = offset
    return affine_mat


def _modes():
    return [(False, False), (True, False), (True, True)]


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize("offset", [(0.0, 1.0), (2.0, 1.0, 3.0)])
def test_dali_transform_translation_op(offset, has_input, reverse_order, batch_size=3):
    ndim = len(offset)
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        if has_input:
            T0 = fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))
            T1 = fn.transforms.translation(T0, device="cpu", offset=offset, reverse_order=reverse_order)
            pipe.set_outputs(T1, T0)
        else:
            T1 = fn.transforms.translation(device="cpu", offset=offset)
            pipe.set_outputs(T1)
    outs = pipe.run()
    check_results(outs[0], batch_size, translate_affine_mat(offset=offset), outs[1] if has_input else None, reverse_order)


def scale_affine_mat(scale, center=None, ndim=None):
    if ndim is None:
        ndim = len(scale)
    else:
        assert ndim == len(scale) or 1 == len(scale)
    assert center is None or len(center) == ndim
    s_mat = np.identity(ndim + 1)
    for d in range(ndim):
        s_mat[d, d] = scale[0] if len(scale) == 1 else scale[d]
    if center is not None:
        neg_offset = [-x for x in center]
        return np.dot(translate_affine_mat(center), np.dot(s_mat, translate_affine_mat(neg_offset)))
    return s_mat


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize("scale,center,ndim", [((0.0, 1.0), None, None), ((2.0, 1.0, 3.0), None, None), ((2.0, 1.0), (1.0, 0.5), None), ((2.0,), (1.0, 0.5), 2)])
def test_dali_transform_scale_op(scale, center, ndim, has_input, reverse_order, batch_size=3):
    if ndim is None:
        ndim = len(scale)
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        if has_input:
            T0 = fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))
            T1 = fn.transforms.scale(T0, device="cpu", scale=scale, center=center, ndim=ndim, reverse_order=reverse_order)
            pipe.set_outputs(T1, T0)
        else:
            T1 = fn.transforms.scale(device="cpu", scale=scale, center=center, ndim=ndim)
            pipe.set_outputs(T1)
    outs = pipe.run()
    check_results(outs[0], batch_size, scale_affine_mat(scale=scale, center=center, ndim=ndim), outs[1] if has_input else None, reverse_order)


def _rotvec_matrix(rotvec):
    """scipy's `Rotation.from_rotvec(v).as_matrix()` (Rodrigues' formula), for the 3-D reference."""
    angle = np.linalg.norm(rotvec)
    if angle == 0:
        return np.identity(3)
    k = rotvec / angle
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.identity(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


def rotate_affine_mat(angle, axis=None, center=None):
    assert axis is None or len(axis) == 3
    ndim = 3 if axis is not None else 2
    assert center is None or len(center) == ndim
    angle_rad = angle * np.pi / 180.0
    if ndim == 2:
        c, s = np.cos(angle_rad), np.sin(angle_rad)
        r_mat = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    else:
        norm_axis = np.asarray(axis) / np.linalg.norm(axis)
        r_mat = np.identity(ndim + 1)
        r_mat[:ndim, :ndim] = _rotvec_matrix(angle_rad * norm_axis)
    if center is not None:
        neg_offset = [-x for x in center]
        return np.dot(translate_affine_mat(center), np.dot(r_mat, translate_affine_mat(neg_offset)))
    return r_mat


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize(
    "angle,axis,center",
    [
        (None, None, None),
        (30.0, None, None),
        (None, None, (1.0, 0.5)),
        (30.0, None, (1.0, 0.5)),
        (40.0, (0.4, 0.3, 0.1), None),
        (40.0, (0.4, 0.3, 0.1), (1.0, -0.4, 10.0)),
        (None, (0.4, 0.3, 0.1), (1.0, -0.4, 10.0)),
    ],
)
def test_dali_transform_rotation_op(angle, axis, center, has_input, reverse_order, batch_size=3):
    ndim = 3 if axis is not None else 2
    random_angle = angle is None
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=12345)
    with pipe:
        if random_angle:
            angle = fn.random.uniform(range=(-90, 90))
        if has_input:
            T0 = fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))
            T1 = fn.transforms.rotation(T0, device="cpu", angle=angle, axis=axis, center=center, reverse_order=reverse_order)
            outputs = [T1, T0]
        else:
            T1 = fn.transforms.rotation(device="cpu", angle=angle, axis=axis, center=center)
            outputs = [T1]
        if random_angle:
            outputs.append(angle)
        pipe.set_outputs(*outputs)
    outs = pipe.run()
    out_T0 = outs[1] if has_input else None
    out_angle = outs[-1] if random_angle else None
    for idx in range(batch_size):
        T0 = out_T0.at(idx) if has_input else None
        a = float(np.array(out_angle.at(idx))) if random_angle else angle
        check_results_sample(outs[0].at(idx), rotate_affine_mat(angle=a, axis=axis, center=center), T0, reverse_order, atol=2e-6)


def shear_affine_mat(shear=None, angles=None, center=None):
    assert shear is not None or angles is not None
    if isinstance(shear, (list, tuple)):
        shear = np.float32(shear)
    if isinstance(angles, (list, tuple)):
        angles = np.float32(angles)
    if shear is None:
        shear = np.tan(angles * np.pi / 180.0)
    assert shear.size == 2 or shear.size == 6
    ndim = 3 if shear.size == 6 else 2
    assert center is None or len(center) == ndim
    if ndim == 2:
        sxy, syx = np.float32(shear).flatten()
        s_mat = np.array([[1.0, sxy, 0.0], [syx, 1.0, 0.0], [0.0, 0.0, 1.0]])
    else:
        sxy, sxz, syx, syz, szx, szy = np.float32(shear).flatten()
        s_mat = np.array([[1, sxy, sxz, 0], [syx, 1, syz, 0], [szx, szy, 1, 0], [0, 0, 0, 1]])
    if center is not None:
        neg_offset = [-x for x in center]
        return np.dot(translate_affine_mat(center), np.dot(s_mat, translate_affine_mat(neg_offset)))
    return s_mat


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize(
    "shear,angles,center",
    [
        ((1.0, 2.0), None, None),
        ((1.0, 2.0), None, (0.4, 0.5)),
        ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0), None, None),
        ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0), None, (0.4, 0.5, 0.6)),
        (None, (30.0, 10.0), None),
        (None, (30.0, 10.0), (0.4, 0.5)),
        (None, (40.0, 30.0, 10.0, 35.0, 25.0, 15.0), None),
        (None, (40.0, 30.0, 10.0, 35.0, 25.0, 15.0), (0.4, 0.5, 0.6)),
    ],
)
def test_dali_transform_shear_op(shear, angles, center, has_input, reverse_order, batch_size=3):
    ndim = 3 if len(shear or angles) == 6 else 2
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        if has_input:
            T0 = fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))
            T1 = fn.transforms.shear(T0, device="cpu", shear=shear, angles=angles, center=center, reverse_order=reverse_order)
            pipe.set_outputs(T1, T0)
        else:
            T1 = fn.transforms.shear(device="cpu", shear=shear, angles=angles, center=center)
            pipe.set_outputs(T1)
    outs = pipe.run()
    check_results(outs[0], batch_size, shear_affine_mat(shear=shear, angles=angles, center=center), outs[1] if has_input else None, reverse_order, atol=1e-6)


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize("use_center", [False, True])
@pytest.mark.parametrize("use_angles", [False, True])
@pytest.mark.parametrize("ndim", [2, 3])
def test_dali_transform_shear_op_runtime_args(ndim, use_angles, use_center, has_input, reverse_order, batch_size=4):
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        inputs = [fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))] if has_input else []
        params = []
        angles_arg = shear_arg = center_arg = None
        if use_angles:
            angles_arg = fn.random.uniform(range=(-80, 80), shape=[ndim, ndim - 1])
            params.append(angles_arg)
        else:
            shear_arg = fn.random.uniform(range=(-2, 2), shape=[ndim, ndim - 1])
            params.append(shear_arg)
        if use_center:
            center_arg = fn.random.uniform(range=(-10, 10), shape=[ndim])
            params.append(center_arg)
        T1 = fn.transforms.shear(*inputs, device="cpu", shear=shear_arg, angles=angles_arg, center=center_arg, reverse_order=reverse_order)
        pipe.set_outputs(T1, *inputs, *params)
    for _ in range(3):
        outs = pipe.run()
        T0 = outs[1] if has_input else None
        shear_param = outs[2 if has_input else 1]
        center_param = outs[3 if has_input else 2] if use_center else None
        for idx in range(batch_size):
            p = np.array(shear_param.at(idx))
            angles, shear = (p, None) if use_angles else (None, p)
            center = np.array(center_param.at(idx)) if use_center else None
            ref_mat = shear_affine_mat(shear=shear, angles=angles, center=center)
            check_results_sample(outs[0].at(idx), ref_mat, T0.at(idx) if T0 is not None else None, reverse_order, atol=1e-6)


def get_ndim(from_start, from_end, to_start, to_end):
    sizes = [len(a) for a in [from_start, from_end, to_start, to_end] if a is not None]
    ndim = max(sizes) if len(sizes) > 0 else 1
    for sz in sizes:
        assert sz == ndim or sz == 1
    return ndim


def expand_dims(from_start, from_end, to_start, to_end):
    ndim = get_ndim(from_start, from_end, to_start, to_end)

    def expand(arg, default_arg):
        if arg is None:
            return [default_arg] * ndim
        if len(arg) == 1:
            return [arg[0]] * ndim
        return arg

    return [expand(from_start, 0.0), expand(from_end, 1.0), expand(to_start, 0.0), expand(to_end, 1.0)]


def crop_affine_mat(from_start, from_end, to_start, to_end, absolute=False):
    from_start, from_end, to_start, to_end = (np.array(x) for x in expand_dims(from_start, from_end, to_start, to_end))
    if absolute:
        from_start, from_end = np.minimum(from_start, from_end), np.maximum(from_start, from_end)
        to_start, to_end = np.minimum(to_start, to_end), np.maximum(to_start, to_end)
    scale = (to_end - to_start) / (from_end - from_start)
    return np.dot(translate_affine_mat(to_start), np.dot(scale_affine_mat(scale), translate_affine_mat(-from_start)))


CROP_CASES = [
    (None, None, None, None),
    ((0.1, 0.2), (1.0, 1.2), (0.3, 0.2), (0.5, 0.6)),
    ((0.1, 0.2), (0.4, 0.9), None, None),
    ((0.2, 0.2), None, None, None),
    (None, (0.4, 0.9), None, None),
    ((0.1, 0.2, 0.3), (1.0, 1.2, 1.3), (0.3, 0.2, 0.1), (0.5, 0.6, 0.7)),
    ((0.1, 0.2, 0.3), (1.0, 1.2, 1.3), None, None),
]
# DALI's grid: each case as given (absolute=False), then with start and end swapped, absolute both ways.
CROP_GRID = [(c, False) for c in CROP_CASES] + [((c[1], c[0], c[3], c[2]), a) for c in CROP_CASES for a in (False, True)]


@pytest.mark.parametrize("has_input,reverse_order", _modes())
@pytest.mark.parametrize("args,absolute", CROP_GRID)
def test_dali_transform_crop_op(args, absolute, has_input, reverse_order, batch_size=3):
    from_start, from_end, to_start, to_end = args
    ndim = get_ndim(from_start, from_end, to_start, to_end)
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        kw = dict(from_start=from_start, from_end=from_end, to_start=to_start, to_end=to_end, absolute=absolute)
        if has_input:
            T0 = fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1))
            T1 = fn.transforms.crop(T0, device="cpu", reverse_order=reverse_order, **kw)
            pipe.set_outputs(T1, T0)
        else:
            T1 = fn.transforms.crop(device="cpu", **kw)
            pipe.set_outputs(T1)
    outs = pipe.run()
    T1 = outs[0]
    check_results(T1, batch_size, crop_affine_mat(from_start, from_end, to_start, to_end, absolute=absolute), outs[1] if has_input else None, reverse_order, atol=1e-6)
    if not has_input:
        from_start, from_end, to_start, to_end = expand_dims(from_start, from_end, to_start, to_end)
        if absolute:
            from_start, from_end = np.minimum(from_start, from_end), np.maximum(from_start, from_end)
            to_start, to_end = np.minimum(to_start, to_end), np.maximum(to_start, to_end)
        for idx in range(batch_size):
            MT = np.array(T1.at(idx))
            M, T = MT[:ndim, :ndim], MT[:, ndim]
            assert np.allclose(np.dot(M, from_start) + T, to_start, atol=1e-6)
            assert np.allclose(np.dot(M, from_end) + T, to_end, atol=1e-6)


@pytest.mark.parametrize("reverse_order", [False, True])
@pytest.mark.parametrize("ndim", [2, 3, 6])
@pytest.mark.parametrize("num_transforms", [2, 3, 10])
def test_dali_combine_transforms(num_transforms, ndim, reverse_order, batch_size=3):
    """As in DALI, `reverse_order` only changes the reference: the inputs are equal (one seed)."""
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None)
    with pipe:
        transforms = [fn.random.uniform(range=(-1, 1), shape=(ndim, ndim + 1), seed=1234) for _ in range(num_transforms)]
        T = fn.transforms.combine(*transforms)
    pipe.set_outputs(T, *transforms)
    outs = pipe.run()
    for idx in range(batch_size):
        mats = [np.identity(ndim + 1) for _ in range(len(outs) - 1)]
        for in_idx in range(len(mats)):
            mats[in_idx][:ndim, :] = np.array(outs[1 + in_idx].at(idx))
        if not reverse_order:
            mats.reverse()
        ref_mat = np.identity(ndim + 1)
        for mat in mats:
            ref_mat = np.dot(mat, ref_mat)
        # DALI's atol=1e-6 (with allclose's rtol=1e-5); products of ten 7x7 f32 matrices of our
        # random values drift further from the f64 reference, so the bound grows with them.
        rtol = 1e-5 if num_transforms * ndim < 60 else 1e-4
        assert np.allclose(np.array(outs[0].at(idx)), ref_mat[:ndim, :], rtol=rtol, atol=1e-6)


def test_dali_combine_transforms_correct_order():
    batch_size = 3
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=None)
    with pipe:
        import sluice.fn.transforms as T

        t1 = T.translation(offset=(1, 2))
        t2 = T.rotation(angle=30.0)
        t12 = T.rotation(T.translation(offset=(1, 2)), angle=30.0)
        t21 = T.translation(T.rotation(angle=30.0), offset=(1, 2))
        pipe.set_outputs(T.combine(t1, t2), t12, T.combine(t1, t2, reverse_order=True), t21)
    outs = pipe.run()
    for idx in range(batch_size):
        assert np.allclose(np.array(outs[0].at(idx)), np.array(outs[1].at(idx)), atol=1e-6)
        assert np.allclose(np.array(outs[2].at(idx)), np.array(outs[3].at(idx)), atol=1e-6)


def test_dali_transform_translation_deprecation():
    fmt = "WARNING: `nvidia.dali.{}` is now deprecated. Use `nvidia.dali.fn.transforms.translation` instead."
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        with pytest.warns(DeprecationWarning, match=re.escape(fmt.format("fn.transform_translation"))):
            a = fn.transform_translation(offset=(0, 0))
        # DALI suggests fn.transforms.translation here too; Sluice's legacy classes name the ops class.
        with pytest.warns(DeprecationWarning, match=re.escape("WARNING: `nvidia.dali.ops.TransformTranslation` is now deprecated.")):
            b = ops.TransformTranslation(offset=(0, 0))()
        pipe.set_outputs(a, b)
    for out in pipe.run():
        np.testing.assert_array_equal(np.array(out.at(0)), np.eye(2, 3, dtype=np.float32))


# ---------------------------------------------------------------- errors
def _fails(build, feeds=None, match="", exc=ValueError, batch_size=2):
    with pytest.raises(exc, match=match):
        _run(sluice, build, feeds, batch_size=batch_size)


T2 = [np.arange(6, dtype=np.float32).reshape(2, 3)] * 2


def test_missing_required_arguments_name_them():
    with pytest.raises(ValueError, match=r"transforms\.rotation.*angle"):
        _run(sluice, lambda fn, n: fn.transforms.rotation())
    with pytest.raises(ValueError, match=r"transforms\.scale.*scale"):
        _run(sluice, lambda fn, n: fn.transforms.scale())
    with pytest.raises(ValueError, match=r"transforms\.translation.*offset"):
        _run(sluice, lambda fn, n: fn.transforms.translation())


def test_argument_lengths_and_dimensions():
    R = r"(?s)transforms\.rotation.*"
    _fails(lambda fn, n: fn.transforms.rotation(angle=30.0, axis=[0.0, 1.0]), match=R + "axis.*expected 3 values.*got 2")
    _fails(lambda fn, n: fn.transforms.rotation(angle=30.0, center=[1.0, 2.0, 3.0]), match=R + "center.*expected 2 values.*got 3")
    _fails(lambda fn, n: fn.transforms.rotation(n["T"], angle=30.0, axis=[0.0, 0.0, 1.0]), {"T": T2}, match=R + "axis.*input describes a 2D transform but other arguments suggest a 3D")
    S = r"(?s)transforms\.scale.*scale.*"
    _fails(lambda fn, n: fn.transforms.scale(scale=[1.0, 2, 3, 4, 5, 6, 7]), match=S + "Unsupported number of dimensions 7")
    _fails(lambda fn, n: fn.transforms.scale(scale=[]), match=S + "empty")
    _fails(lambda fn, n: fn.transforms.scale(n["T"], scale=[1.0, 2.0, 3.0]), {"T": T2}, match=S + "2D transform.*3D")
    _fails(lambda fn, n: fn.transforms.scale(scale=[1.0, 2.0], center=[1.0, 2.0, 3.0]), match=r"(?s)transforms\.scale.*center.*got 3")
    _fails(lambda fn, n: fn.transforms.scale(scale=2.0, ndim=7), match=r"(?s)transforms\.scale.*ndim.*Unsupported number of dimensions 7")
    O = r"(?s)transforms\.translation.*offset.*"
    _fails(lambda fn, n: fn.transforms.translation(offset=[]), match=O + "Unsupported number of dimensions 0")
    _fails(lambda fn, n: fn.transforms.translation(n["T"], offset=3.0), {"T": T2}, match=O + "2D transform.*1D")
    C = r"(?s)transforms\.crop.*"
    _fails(lambda fn, n: fn.transforms.crop(from_start=[0.0, 1.0], to_end=[1.0, 2.0, 3.0]), match=C + "from_start.*same number of dimensions")
    _fails(lambda fn, n: fn.transforms.crop(n["T"]), {"T": T2}, match=C + "2D transform.*1D")


def test_shear_arguments():
    H = r"(?s)transforms\.shear.*"
    for kw in ({}, {"shear": [1.0, 2.0], "angles": [1.0, 2.0]}):
        _fails(lambda fn, n: fn.transforms.shear(**kw), match=H + "shear.*One and only one.*shear.*angles")
    _fails(lambda fn, n: fn.transforms.shear(shear=[1.0, 2.0, 3.0]), match=H + r"shear.*D\*\(D-1\).*Got 3 elements")
    _fails(lambda fn, n: fn.transforms.shear(shear=[1.0]), match=H + "Got 1 elements")
    _fails(lambda fn, n: fn.transforms.shear(shear=list(range(12))), match=H + "Unsupported number of dimensions 4")
    _fails(lambda fn, n: fn.transforms.shear(angles=[91.0, 0.0]), match=H + r"angles.*range \[-90, 90\].*91")
    _fails(lambda fn, n: fn.transforms.shear(angles=[float("nan"), 0.0]), match=H + "angles.*range.*(?i:nan)")
    _fails(lambda fn, n: fn.transforms.shear(shear=n["s"]), {"s": [np.arange(6, dtype=np.float32)] * 2}, match=H + r"shear.*D x \(D-1\).*\[6\]")
    _fails(lambda fn, n: fn.transforms.shear(shear=n["s"]), {"s": [np.zeros((2, 2), np.float32)] * 2}, match=H + r"\[2, 2\]")
    good, bad = [np.array([10.0, 20.0], np.float32)] * 2, [np.array([10.0, 20.0], np.float32), np.array([10.0, -95.0], np.float32)]
    _fails(lambda fn, n: fn.transforms.shear(angles=n["a"]), {"a": bad}, match=H + r"angles.*-95.*sample 1")
    (out,) = _run(sluice, lambda fn, n: fn.transforms.shear(angles=n["a"]), {"a": good})
    assert out[0].shape == (2, 3)


def test_per_sample_argument_shapes():
    _fails(lambda fn, n: fn.transforms.rotation(angle=n["a"]), {"a": [np.array([30.0], np.float32)] * 2}, match=r"(?s)transforms\.rotation.*angle.*scalar \(0-D\)")
    _fails(lambda fn, n: fn.transforms.rotation(angle=10.0, center=n["c"]), {"c": [np.ones(3, np.float32)] * 2}, match=r"(?s)transforms\.rotation.*center.*2 values per sample")
    _fails(lambda fn, n: fn.transforms.rotation(angle=10.0, center=n["c"]), {"c": [np.ones(1, np.float32)] * 2}, match=r"(?s)transforms\.rotation.*center")
    ragged = [np.array([2.0, 3.0], np.float32), np.array([4.0], np.float32)]
    _fails(lambda fn, n: fn.transforms.scale(scale=n["s"]), {"s": ragged}, match=r"(?s)transforms\.scale.*scale.*same shape.*sample 1")
    _fails(lambda fn, n: fn.transforms.translation(offset=n["o"]), {"o": [np.ones((1, 2), np.float32)] * 2}, match=r"(?s)transforms\.translation.*offset.*1-D")


def test_bad_inputs():
    tr = lambda fn, n: fn.transforms.translation(n["T"], offset=[1.0, 2.0])  # noqa: E731
    _fails(tr, {"T": [x.astype(np.float64) for x in T2]}, match=r"(?s)transforms\.translation.*FLOAT.*FLOAT64")
    _fails(tr, {"T": [np.zeros((2, 2), np.float32)] * 2}, match=r"(?s)transforms\.translation.*\(ndim, ndim\+1\).*\[2, 2\]")
    _fails(tr, {"T": [np.zeros((1, 2, 3), np.float32)] * 2}, match=r"(?s)transforms\.translation.*\(ndim, ndim\+1\)")
    _fails(tr, {"T": [np.zeros((2, 3), np.float32), np.zeros((1, 2), np.float32)]}, match=r"(?s)transforms\.translation.*same shape.*sample 1")
    _fails(lambda fn, n: fn.transforms.scale(n["T"], scale=2.0), {"T": [np.zeros((0, 1), np.float32)] * 2}, match=r"(?s)transforms\.scale.*Unsupported number of dimensions 0")


def test_combine_errors():
    B = r"(?s)transforms\.combine.*"
    with pytest.raises(ValueError, match=B + "2 to 99"):
        _run(sluice, lambda fn, n: fn.transforms.combine(n["a"]), {"a": T2})
    _fails(lambda fn, n: fn.transforms.combine(n["a"], n["b"]), {"a": T2, "b": [np.zeros((3, 4), np.float32)] * 2}, match=B + "same shape")
    _fails(lambda fn, n: fn.transforms.combine(n["a"], n["b"]), {"a": [np.zeros((2, 2), np.float32)] * 2, "b": [np.zeros((2, 2), np.float32)] * 2}, match=B + r"\(ndim, ndim\+1\)")
    _fails(lambda fn, n: fn.transforms.combine(n["a"], n["b"]), {"a": [np.zeros((7, 8), np.float32)] * 2, "b": [np.zeros((7, 8), np.float32)] * 2}, match=B + "Unsupported number of dimensions 7")
    _fails(lambda fn, n: fn.transforms.combine(n["a"], n["b"]), {"a": T2, "b": [x.astype(np.float64) for x in T2]}, match=B + "input 1.*FLOAT64")
    ragged = [np.zeros((2, 3), np.float32), np.zeros((3, 4), np.float32)]
    _fails(lambda fn, n: fn.transforms.combine(n["a"], n["b"]), {"a": ragged, "b": ragged}, match=B + "same shape.*sample 1")


def test_an_error_in_one_batch_leaves_the_pipeline_working():
    batches = iter([[np.array([10.0, 5.0], np.float32), np.array([10.0, 95.0], np.float32)], [np.array([10.0, 20.0], np.float32)] * 2])
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        a = fn.external_source(source=lambda: next(batches), batch=True)
        pipe.set_outputs(fn.transforms.shear(angles=a))
    pipe.build()
    with pytest.raises(ValueError, match=r"(?s)transforms\.shear.*angles.*95.*sample 1"):
        pipe.run()
    (out,) = pipe.run()
    assert np.array(out.at(1)).shape == (2, 3)
