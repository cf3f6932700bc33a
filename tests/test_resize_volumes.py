"""`fn.resize` on volumes: DHWC, CDHW and their sequences (FDHWC, FCDHW, CFDHW), as DALI 2.4
resizes them: `resize_z` / `resize_y` / `resize_x`, `size` of 3 extents (or one for all),
`resize_shorter` / `resize_longer`, `mode`, `max_size`, `roi_*` (absolute, relative, flipped),
negative sizes, every filter, every type pair; three separable passes in DALI's order.

The cpu operator equals DALI 2.4's cpu operator bit for bit (its pass order, its taps, its
two roundings of the last pass), but for one DALI defect kept out on purpose: DALI's vector
store turns INT16 results in (-0.5, 0] into -1, where Sluice gives 0. Frames and channels of
a volume are resized as a DHWC volume alone; the gpu backend equals the cpu's within 1 (its
sums run in another order). DALI's own
operator_2/test_resize.py checks 3-D output sizes with `ref_output_size` (ported below) and
values against PIL on DALI_extra's MRI volumes (not available here; DALI's cpu operator on
generated volumes stands in)."""

import math

import numpy as np
import pytest

import sluice
from sluice import types

from conftest import dali_or_none, require_gpu
from test_resize_sequences import _run  # the sequences' pipeline runner: (arrays, layout)

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

# DHWC volumes of various shapes and channel counts.
SHAPES = [(6, 10, 12, 1), (9, 7, 15, 3), (4, 16, 5, 2), (11, 13, 9, 1)]
TO_LAYOUT = {
    "DHWC": lambda a: a,
    "CDHW": lambda a: a.transpose(3, 0, 1, 2),
}
# Sequences: FDHWC and its channel-first forms, from F x DHWC.
SEQ_TO_LAYOUT = {
    "FDHWC": lambda a: a,
    "FCDHW": lambda a: a.transpose(0, 4, 1, 2, 3),
    "CFDHW": lambda a: a.transpose(4, 0, 1, 2, 3),
}
SEQ_FROM_LAYOUT = {
    "FDHWC": lambda a: a,
    "FCDHW": lambda a: a.transpose(0, 2, 3, 4, 1),
    "CFDHW": lambda a: a.transpose(1, 2, 3, 4, 0),
}

CASES = [
    dict(size=[5, 7, 9]),
    dict(size=[12, 20, 24]),
    dict(size=8),
    dict(resize_z=9),
    dict(resize_x=6, resize_y=5),
    dict(resize_shorter=8),
    dict(resize_longer=10, max_size=[6, 20, 20]),
    dict(size=[4, 0, 6], mode="not_larger"),
    dict(size=[4, 0, 6], mode="stretch"),
    dict(size=[20, 30, 10], mode="not_smaller", max_size=25),
    dict(size=[5, 7, 9], interp_type=types.INTERP_NN),
    dict(size=[13, 9, 20], interp_type=types.INTERP_NN),
    dict(size=[5, 14, 9], interp_type=types.INTERP_CUBIC),
    dict(size=[5, 7, 20], interp_type=types.INTERP_LANCZOS3),
    dict(size=[7, 5, 6], interp_type=types.INTERP_GAUSSIAN),
    dict(size=[3, 5, 4], antialias=False),
    dict(size=[5, 7, 9], min_filter=types.INTERP_NN, mag_filter=types.INTERP_LINEAR),
    dict(size=[8, 6, 7], roi_start=[1, 2, 1.5], roi_end=[5, 6.5, 4]),
    dict(size=[8, 6, 7], roi_start=[0.9, 0.1, 0.2], roi_end=[0.2, 0.8, 0.7], roi_relative=True),
    dict(resize_z=-7, resize_y=6, resize_x=-8),
    dict(size=[5.5, 6.25, 7.75]),
    dict(size=[5.5, 6.25, 7.75], subpixel_scale=False),
    dict(size=[5, 7, 9], dtype=types.FLOAT),
]


def _volumes(np_type, shapes, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [(rng.random(s) * 255).astype(np.float32) for s in shapes]
    if np_type == np.int16:
        return [rng.integers(-2000, 2000, s).astype(np.int16) for s in shapes]
    if np_type == np.uint16:
        return [rng.integers(0, 65536, s).astype(np.uint16) for s in shapes]
    return [rng.integers(0, 256, s).astype(np_type) for s in shapes]


def _near(ours, ref, tolerance=1):
    """Equal within `tolerance` on integers (on under 2% of the values) and 1e-3 relative on
    floats, with the same shapes and types."""
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        if np.issubdtype(a.dtype, np.integer):
            assert d.max() <= tolerance and (d > 0).mean() < 0.02, (d.max(), (d > 0).mean())
        else:
            assert d.max() <= 1e-3 * max(1.0, np.abs(b).max()), d.max()


def _same_as_dali(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype == np.int16:
            # DALI's `saturate_f_i32` subtracts 1 where the sign of the float and of its
            # rounded integer disagree, which also hits values rounding to 0 from below.
            differ = a != b
            assert np.all((a[differ] == 0) & (b[differ] == -1)), (a[differ], b[differ])
        else:
            np.testing.assert_array_equal(a, b)


def _resize(kw):
    return lambda fn, x, _: fn.resize(x, **kw)


@needs_dali
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("np_type", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["DHWC", "CDHW"])
def test_resize_equals_dali(case, np_type, layout):
    vols = [np.ascontiguousarray(TO_LAYOUT[layout](v)) for v in _volumes(np_type, SHAPES, seed=case)]
    ours, l1 = _run(sluice, vols, layout, _resize(CASES[case]))
    ref, l2 = _run(dali, vols, layout, _resize(CASES[case]))
    assert l1 == l2 == layout
    _same_as_dali(ours, ref)


@needs_dali
@pytest.mark.parametrize("case", [0, 3, 10, 13, 17])
def test_int16_equals_dali(case):
    vols = _volumes(np.int16, SHAPES, seed=40 + case)
    for kw in [CASES[case], dict(CASES[case], dtype=types.FLOAT)]:
        ours, _ = _run(sluice, vols, "DHWC", _resize(kw))
        ref, _ = _run(dali, vols, "DHWC", _resize(kw))
        _same_as_dali(ours, ref)


@needs_dali
@pytest.mark.parametrize("case", [0, 5, 10, 13, 14, 17, 19])
@pytest.mark.parametrize("layout", ["DHWC", "HWC"])
def test_uint16_equals_dali(case, layout):
    """UINT16 (medical volumes often are): images and volumes, bit for bit."""
    vols = _volumes(np.uint16, SHAPES, seed=60 + case)
    kw = CASES[case]
    if layout == "HWC":
        vols = [v[0] for v in vols]
        kw = {k: (v[1:] if isinstance(v, list) and len(v) == 3 else v) for k, v in kw.items() if k != "resize_z"}
    for kw in [kw, dict(kw, dtype=types.FLOAT)]:
        ours, _ = _run(sluice, vols, layout, _resize(kw))
        ref, _ = _run(dali, vols, layout, _resize(kw))
        _same_as_dali(ours, ref)


@pytest.mark.parametrize("case", [0, 13])
def test_int32_resizes_as_float_rounded(case):
    """INT32 (DALI refuses it): the FLOAT result, rounded half away from zero or half to even
    where DALI's vector store would round (never more than one apart)."""
    vols = _volumes(np.int32, SHAPES, seed=50 + case)
    ours, _ = _run(sluice, vols, "DHWC", _resize(CASES[case]))
    floats, _ = _run(sluice, vols, "DHWC", _resize(dict(CASES[case], dtype=types.FLOAT)))
    for o, f in zip(ours, floats):
        assert o.dtype == np.int32 and np.all(np.abs(o - f) <= 0.5)


@needs_dali
@pytest.mark.parametrize("layout", ["FDHWC", "FCDHW", "CFDHW"])
def test_sequences_of_volumes_equal_dali_and_each_volume_alone(layout):
    rng = np.random.default_rng(5)
    seqs = [rng.integers(0, 256, (f,) + s, dtype=np.uint8) for f, s in zip([2, 1, 3], SHAPES)]
    batch = [np.ascontiguousarray(SEQ_TO_LAYOUT[layout](s)) for s in seqs]
    build = _resize(dict(size=[5, 8, 6], interp_type=types.INTERP_CUBIC))
    ours, l1 = _run(sluice, batch, layout, build)
    ref, l2 = _run(dali, batch, layout, build)
    assert l1 == l2 == layout
    _same_as_dali(ours, ref)
    ours = [SEQ_FROM_LAYOUT[layout](o) for o in ours]
    for i, seq in enumerate(seqs):
        alone, _ = _run(sluice, list(seq), "DHWC", build)
        np.testing.assert_array_equal(ours[i], np.stack(alone))


@needs_dali
def test_per_sample_sizes_and_rois_equal_dali():
    vols = _volumes(np.uint8, SHAPES, seed=9)
    args = {
        "size": [np.array(s, np.float32) for s in [[5, 6, 7], [3, 20, 8], [4, 4, 4], [9, 2, 5]]],
        "roi_start": [np.array(s, np.float32) for s in [[0, 0, 0], [1, 2, 3], [3, 1, 0.5], [0.5, 0, 0]]],
        "roi_end": [np.array(s, np.float32) for s in [[6, 10, 12], [8, 5, 12], [0, 15, 4], [11, 13, 9]]],
    }
    build = lambda fn, x, n: fn.resize(x, size=n["size"], roi_start=n["roi_start"], roi_end=n["roi_end"])
    _same_as_dali(_run(sluice, vols, "DHWC", build, args)[0], _run(dali, vols, "DHWC", build, args)[0])
    args = {"resize_z": [np.float32(v) for v in [4, 9, 2, 6]]}
    build = lambda fn, x, n: fn.resize(x, resize_z=n["resize_z"])
    _same_as_dali(_run(sluice, vols, "DHWC", build, args)[0], _run(dali, vols, "DHWC", build, args)[0])


@needs_dali
@pytest.mark.parametrize("mirror", range(8))
def test_resize_crop_mirror_on_volumes_equals_dali(mirror):
    """DHWC volumes: the crop window in 3-D (crop=[D, H, W], crop_pos_z) and the flips of the
    three axes (4: depth), folded into one resampling, as DALI does."""
    vols = _volumes(np.uint8, SHAPES, seed=70 + mirror)
    for kw in [dict(size=[8, 9, 10], crop=[5, 6, 7]),
               dict(resize_shorter=9, crop_d=4, crop_h=5, crop_w=6, crop_pos_z=0.2, crop_pos_x=0.9, interp_type=types.INTERP_CUBIC)]:
        build = lambda fn, x, _: fn.resize_crop_mirror(x, mirror=mirror, **kw)
        ours, l1 = _run(sluice, vols, "DHWC", build)
        ref, l2 = _run(dali, vols, "DHWC", build)
        assert l1 == l2 == "DHWC"
        _same_as_dali(ours, ref)


def test_a_volume_of_one_slice_resizes_as_an_image():
    """The same sums; only which ties round half to even differs (DALI's last pass is another
    one), so within 1, on ties only."""
    vols = _volumes(np.uint8, [(1,) + s[1:] for s in SHAPES], seed=11)
    for kw in [dict(size=[1, 7, 9]), dict(size=[1, 20, 3], interp_type=types.INTERP_LANCZOS3)]:
        ours, _ = _run(sluice, vols, "DHWC", _resize(kw))
        images, _ = _run(sluice, [v[0] for v in vols], "HWC", _resize(dict(kw, size=kw["size"][1:])))
        floats, _ = _run(sluice, [v[0] for v in vols], "HWC", _resize(dict(kw, size=kw["size"][1:], dtype=types.FLOAT)))
        for o, img, f in zip(ours, images, floats):
            differ = o[0] != img
            assert np.all(np.abs(o[0][differ].astype(int) - img[differ]) == 1)
            assert np.all(f[differ] % 1 == 0.5), "only ties round differently"


def test_resize_z_alone_scales_the_other_axes_alike():
    vols = _volumes(np.uint8, SHAPES, seed=12)
    ours, _ = _run(sluice, vols, "DHWC", _resize(dict(resize_z=12)))
    for o, v in zip(ours, vols):
        scale = 12 / v.shape[0]
        assert o.shape == (12, round(v.shape[1] * scale), round(v.shape[2] * scale), v.shape[3])


# DALI's operator_2/test_resize.py: ref_output_size and test_ref_size, then Sluice's output
# shapes checked against it.
def _ref_output_size(mode, requested_size, roi_size, max_size=None):
    roi_size = list(roi_size)
    dim = len(roi_size)
    if max_size is None:
        max_size = [math.inf] * dim
    elif not isinstance(max_size, (list, tuple, np.ndarray)):
        max_size = [max_size] * dim
    if not isinstance(requested_size, (list, tuple, np.ndarray)):
        requested_size = [requested_size] * dim
    requested_size = [abs(x) if x else None for x in requested_size]
    roi_size = [abs(x) for x in roi_size]
    if not any(requested_size):
        return roi_size
    if mode == "stretch":
        return [min(m, o or i) for o, i, m in zip(requested_size, roi_size, max_size)]
    if mode == "not_smaller":
        max_scale = 0
        for o, i in zip(requested_size, roi_size):
            if o:
                max_scale = max(max_scale, abs(o / i))
        for i in range(len(roi_size)):
            max_scale = min(max_scale, max_size[i] / abs(roi_size[i]))
        return [x * max_scale for x in roi_size]
    if mode == "not_larger":
        min_scale = math.inf
        for o, i, m in zip(requested_size, roi_size, max_size):
            if not o:
                min_scale = min(min_scale, m / i)
                continue
            min_scale = min(min_scale, abs(min(m, o) / i))
        return [x * min_scale for x in roi_size]
    avg_scale, power = 1, 0
    for o, i in zip(requested_size, roi_size):
        if o:
            avg_scale *= abs(o / i)
            power += 1
    if power == len(requested_size):
        return [min(o, m) for o, m in zip(requested_size, max_size)]
    if power > 1:
        avg_scale = math.pow(avg_scale, 1 / power)
    return [min(m, o or avg_scale * i) for o, i, m in zip(requested_size, roi_size, max_size)]


def test_ref_size():
    assert _ref_output_size("not_smaller", [600, 600], [640, 480], 720) == [720, 540]
    assert _ref_output_size("not_larger", [600, 500], [640, 480], 720) == [600, 450]
    assert _ref_output_size("stretch", [600, 500], [640, 480], [1000, 300]) == [600, 300]
    assert _ref_output_size("default", [600, 0], [640, 480]) == [600, 450]
    assert _ref_output_size("default", [0, 600], [640, 480]) == [800, 600]
    assert _ref_output_size("default", [80, 0, 20], [10, 10, 10]) == [80, 40, 20]


@pytest.mark.parametrize("mode,size,max_size", [
    ("default", [20, 0, 30], None),
    ("default", [0, 0, 7], None),
    ("stretch", [0, 12, 0], [8, 8, 8]),
    ("not_larger", [10, 10, 10], None),
    ("not_smaller", [10, 10, 10], 40),
    ("not_smaller", [3, 0, 0], None),
])
def test_output_sizes_follow_dalis_reference(mode, size, max_size):
    vols = _volumes(np.uint8, SHAPES, seed=13)
    kw = dict(size=size, mode=mode, subpixel_scale=False)
    if max_size is not None:
        kw["max_size"] = max_size
    ours, _ = _run(sluice, vols, "DHWC", _resize(kw))
    for o, v in zip(ours, vols):
        ref = _ref_output_size(mode, size, list(v.shape[:3]), max_size)
        # DALI's check: within 1 of the unrounded reference.
        assert all(abs(a - b) <= 1 for a, b in zip(o.shape[:3], ref)), (o.shape, ref)


@pytest.mark.parametrize("build,layout,match", [
    (lambda fn, x: fn.resize(x, size=[5, 6]), "DHWC", r"(?si)resize.*size.*2 values; expected 1 or 3"),
    (lambda fn, x: fn.resize(x, size=[5, 6, 7]), "HWC", r"(?si)resize.*size.*3 values; expected 1 or 2"),
    (lambda fn, x: fn.resize(x, size=4, max_size=[5, 6]), "DHWC", r"(?si)resize.*max_size.*2 values; expected 1 or 3"),
    (lambda fn, x: fn.resize(x, size=4, roi_start=[1, 1], roi_end=[3, 3]), "DHWC", r"(?si)resize.*roi_start.*2 values"),
    (lambda fn, x: fn.resize(x, size=[1, 2, 3, 4]), "DHWC", r"(?si)resize.*size.*one per spatial axis"),
    (lambda fn, x: fn.random_resized_crop(x, size=[5, 6]), "DHWC", r"(?si)random_resized_crop.*volumes .*not supported"),
    (lambda fn, x: fn.resize(x, size=4), "DHWCX", r"(?si)resize.*unsupported layout 'DHWCX'"),
])
def test_bad_arguments_are_errors_naming_the_operator(build, layout, match):
    shape = (6, 10, 12, 1) if layout.startswith("DHWC") else (10, 12, 3)
    if layout == "DHWCX":
        shape = (6, 10, 12, 1, 1)
    x = np.zeros(shape, np.uint8)
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(build(sluice.fn, sluice.fn.external_source(source=lambda: [x], batch=True, layout=layout)))
    with pytest.raises(Exception, match=match):
        pipe.build()
        pipe.run()


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("np_type", [np.uint8, np.int16, np.uint16, np.float32])
@pytest.mark.parametrize("layout", ["DHWC", "CDHW"])
def test_gpu_equals_cpu(case, np_type, layout):
    require_gpu()
    vols = [np.ascontiguousarray(TO_LAYOUT[layout](v)) for v in _volumes(np_type, SHAPES, seed=case)]
    cpu, l1 = _run(sluice, vols, layout, _resize(CASES[case]))
    gpu, l2 = _run(sluice, vols, layout, _resize(CASES[case]), device="gpu")
    assert l1 == l2 == layout
    if np_type == np.float32 or "dtype" in CASES[case]:
        return _near(gpu, cpu)
    # The gpu rounds every tie half away from zero; the cpu rounds some half to even, as
    # DALI's cpu operator does. Ties aside, within 1 on a few values.
    floats, _ = _run(sluice, vols, layout, _resize(dict(CASES[case], dtype=types.FLOAT)))
    for g, c, f in zip(gpu, cpu, floats):
        d = np.abs(g.astype(np.float64) - c)
        tie = np.abs(np.abs(f - np.trunc(f)) - 0.5) < 1e-3
        assert d.max() <= 1 and ((d > 0) & ~tie).mean() < 0.02, (d.max(), ((d > 0) & ~tie).mean())


@pytest.mark.parametrize("layout", ["FDHWC", "FCDHW", "CFDHW"])
def test_gpu_sequences_of_volumes_equal_cpu(layout):
    require_gpu()
    rng = np.random.default_rng(6)
    batch = [np.ascontiguousarray(SEQ_TO_LAYOUT[layout](rng.integers(0, 256, (f,) + s, dtype=np.uint8)))
             for f, s in zip([2, 1, 3], SHAPES)]
    for kw in [dict(size=[5, 8, 6], interp_type=types.INTERP_CUBIC), dict(size=[7, 3, 9], interp_type=types.INTERP_NN)]:
        cpu, _ = _run(sluice, batch, layout, _resize(kw))
        gpu, _ = _run(sluice, batch, layout, _resize(kw), device="gpu")
        _near(gpu, cpu)


@pytest.mark.parametrize("mirror", [0, 5, 7])
def test_gpu_resize_crop_mirror_on_volumes_equals_cpu(mirror):
    require_gpu()
    vols = _volumes(np.uint8, SHAPES, seed=80 + mirror)
    build = lambda fn, x, _: fn.resize_crop_mirror(x, size=[8, 9, 10], crop=[5, 6, 7], mirror=mirror, dtype=types.FLOAT)
    cpu, _ = _run(sluice, vols, "DHWC", build)
    gpu, _ = _run(sluice, vols, "DHWC", build, device="gpu")
    _near(gpu, cpu)
