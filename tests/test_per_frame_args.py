"""Per-frame argument inputs (`fn.per_frame`): an operator given a sequence (`F...` layout) and
an argument input whose layout starts with `F` applies value f to frame f.

Each case runs one operator on sequences of different lengths with per-frame values (some
samples giving one value for all their frames), and checks:
- the frames equal the operator run on each frame alone, as a batch of images with those
  values per sample (Sluice against itself: the executor's unfolding changes nothing);
- the output equals DALI 2.4's cpu operator on the same sequences and arguments;
- the output layout is the input's.
Then DALI's error cases (frame counts that do not match, per-frame values for an input without
frames), each leaving the pipeline usable, and the gpu backends equal to the cpu ones.

DALI's tests of per-frame arguments are spread over its operator tests (test_color_twist's,
test_brightness_contrast's, test_gaussian_blur's, test_laplacian's, test_warp's,
test_coord_transform's and test_affine_transforms' sequence cases, through
sequences_test_utils); this file covers the same operators and argument kinds."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()

FRAMES = [3, 1, 4, 2]


def _video(frames=FRAMES, h=9, w=11, c=3, seed=0, dtype=np.uint8):
    r = np.random.default_rng(seed)
    if dtype == np.float32:
        return [r.random((f, h, w, c), dtype=np.float32) * 100 for f in frames]
    return [r.integers(0, 256, (f, h, w, c)).astype(dtype) for f in frames]


def _per_frame(values):
    """Per-frame values: sample i has one row per frame (sample 1 gives one row for all)."""
    return [np.asarray(v, dtype=np.float32) for v in values]


def _values(shape, lo, hi, seed, frames=FRAMES, broadcast=(1,)):
    r = np.random.default_rng(seed)
    return _per_frame([r.uniform(lo, hi, (1 if i in broadcast else f,) + shape) for i, f in enumerate(frames)])


def _const(batch):
    """A source giving `batch` every iteration (a callable taking no argument: one with an
    argument would be handed the iteration)."""
    return lambda: batch


def _run(lib, data, op, frame_args, sample_args=None, layout="FHWC", device="cpu", **consts):
    """Runs `op` of `lib` on `data` with `frame_args` given per frame and `sample_args` per
    sample; returns the output's samples and layout."""
    fn_ = lib.fn
    pdef = lib.pipeline_def

    batch = len(data) if data is not None else len(next(iter(frame_args.values())))

    @pdef(batch_size=batch, num_threads=2, device_id=None if device == "cpu" else 0)
    def pipe():
        x = fn_.external_source(lambda: data, batch=True, layout=layout) if data is not None else None
        if x is not None and device == "gpu":
            x = x.gpu()
        kw = {k: fn_.per_frame(fn_.external_source(_const(v), batch=True)) for k, v in frame_args.items()}
        kw.update({k: fn_.external_source(_const(v), batch=True) for k, v in (sample_args or {}).items()})
        f = op(fn_)
        return f(x, device=device, **kw, **consts) if x is not None else f(device="cpu", **kw, **consts)

    p = pipe()
    if lib is not sluice:
        p.build()
    (out,) = p.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out.at(i)) for i in range(len(out))], out.layout()


def _frame_by_frame(data, op, frame_args, sample_args=None, layout="HWC", **consts):
    """The reference: every frame a sample of its own, with its values per sample."""
    frames = [fr for s in data for fr in s] if data is not None else None
    counts = [len(s) for s in data] if data is not None else [len(next(iter(frame_args.values()))[i]) for i in range(len(next(iter(frame_args.values()))))]

    def expand(values, per_frame):
        out = []
        for i, f in enumerate(counts):
            for j in range(f):
                out.append(values[i][j if per_frame and len(values[i]) > 1 else 0] if per_frame else values[i])
        return out

    flat_args = {k: expand(v, True) for k, v in frame_args.items()}
    flat_args.update({k: expand(v, False) for k, v in (sample_args or {}).items()})
    batch = len(frames) if frames is not None else sum(counts)

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None)
    def pipe():
        x = fn.external_source(lambda: frames, batch=True, layout=layout) if frames is not None else None
        kw = {k: fn.external_source(_const(v), batch=True) for k, v in flat_args.items()}
        f = op(fn)
        return f(x, **kw, **consts) if x is not None else f(**kw, **consts)

    (out,) = pipe().run()
    outs = [np.array(out.at(k)) for k in range(len(out))]
    res, k = [], 0
    for f in counts:
        res.append(np.stack(outs[k:k + f]) if f else None)
        k += f
    return res


CASES = {
    "brightness_contrast": (lambda f: f.brightness_contrast, lambda: {"brightness": _values((), 0.5, 1.5, 1), "contrast": _values((), 0.5, 1.5, 2)}, {"contrast_center": [np.float32(100), np.float32(50), np.float32(128), np.float32(10)]}, {}),
    "brightness": (lambda f: f.brightness, lambda: {"brightness": _values((), 0.5, 1.5, 3), "brightness_shift": _values((), -0.1, 0.1, 4)}, None, {}),
    "contrast": (lambda f: f.contrast, lambda: {"contrast": _values((), 0.2, 2.0, 5)}, None, {}),
    "hsv": (lambda f: f.hsv, lambda: {"hue": _values((), -90, 90, 6), "saturation": _values((), 0.2, 1.8, 7), "value": _values((), 0.5, 1.5, 8)}, None, {}),
    "hue": (lambda f: f.hue, lambda: {"hue": _values((), -180, 180, 9)}, None, {}),
    "saturation": (lambda f: f.saturation, lambda: {"saturation": _values((), 0.0, 2.0, 10)}, None, {}),
    "color_twist": (lambda f: f.color_twist, lambda: {"hue": _values((), -45, 45, 11), "saturation": _values((), 0.5, 1.5, 12), "brightness": _values((), 0.7, 1.3, 13), "contrast": _values((), 0.7, 1.3, 14)}, None, {}),
    "gaussian_blur": (lambda f: f.gaussian_blur, lambda: {"sigma": _values((2,), 0.5, 3.0, 15)}, None, {}),
    "gaussian_blur_window": (lambda f: f.gaussian_blur, lambda: {"window_size": [np.array([[3], [5], [7]], np.int32), np.array([[9]], np.int32), np.array([[1], [3], [5], [7]], np.int32), np.array([[5], [3]], np.int32)]}, None, {}),
    "laplacian": (lambda f: f.laplacian, lambda: {"window_size": [np.array([[3], [5], [7]], np.int32), np.array([[5]], np.int32), np.array([[9], [3], [5], [3]], np.int32), np.array([[7], [3]], np.int32)], "scale": _values((1,), 0.1, 1.0, 16)}, None, {"dtype": types.FLOAT}),
    "warp_affine": (lambda f: f.warp_affine, lambda: {"matrix": _values((2, 3), -0.3, 0.3, 17) }, None, {"fill_value": 7}),
    "warp_affine_size": (lambda f: f.warp_affine, lambda: {"matrix": _per_frame([np.tile([[1.1, 0.1, -2], [0.05, 0.9, 1]], (n, 1, 1)) * (1 + 0.05 * np.arange(n))[:, None, None] for n in (3, 1, 4, 2)])}, None, {"size": [7, 13], "interp_type": types.INTERP_LINEAR}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_per_frame_values_apply_frame_by_frame(case):
    op, frame_args, sample_args, consts = CASES[case]
    data = _video(seed=len(case))
    args = frame_args()
    out, layout = _run(sluice, data, op, args, sample_args, **consts)
    assert layout == "FHWC"
    ref = _frame_by_frame(data, op, args, sample_args, **consts)
    for i, (o, r) in enumerate(zip(out, ref)):
        assert o.shape[0] == FRAMES[i]
        np.testing.assert_array_equal(o, r, err_msg=f"{case}: sample {i}")


@pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")
@pytest.mark.parametrize("case", sorted(CASES))
def test_per_frame_values_match_dali(case):
    op, frame_args, sample_args, consts = CASES[case]
    data = _video(seed=len(case))
    args = frame_args()
    out, layout = _run(sluice, data, op, args, sample_args, **consts)
    want, want_layout = _run(dali, data, op, args, sample_args, **consts)
    assert layout == want_layout
    for i, (o, w) in enumerate(zip(out, want)):
        assert o.shape == w.shape, (case, i)
        if o.dtype == np.float32:
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-3, err_msg=f"{case}: sample {i}")
        else:
            np.testing.assert_array_equal(o, w, err_msg=f"{case}: sample {i}")


TRANSFORMS = {
    "rotation": (lambda f: f.transforms.rotation, {"angle": _values((), -180, 180, 20)}, {"center": [np.float32([1, 2])] * 4}),
    "scale": (lambda f: f.transforms.scale, {"scale": _values((2,), 0.5, 2, 21)}, None),
    "translation": (lambda f: f.transforms.translation, {"offset": _values((2,), -5, 5, 22)}, None),
    "shear": (lambda f: f.transforms.shear, {"angles": _values((2,), -30, 30, 23), "center": _values((2,), 0, 10, 24)}, None),
    "crop": (lambda f: f.transforms.crop, {"from_start": _values((2,), 0, 0.4, 25), "to_end": _values((2,), 0.6, 1, 26)}, None),
}


@pytest.mark.parametrize("case", sorted(TRANSFORMS))
def test_transforms_take_their_frames_from_the_argument(case):
    """transforms.* have no input: the per-frame argument says how many frames each sample
    has, and the output is a sequence of matrices (DALI's test_affine_transforms sequences)."""
    op, frame_args, sample_args = TRANSFORMS[case]
    out, layout = _run(sluice, None, op, frame_args, sample_args)
    ref = _frame_by_frame(None, op, frame_args, sample_args)
    counts = [len(v) for v in next(iter(frame_args.values()))]
    for i, (o, r) in enumerate(zip(out, ref)):
        assert o.shape == (counts[i], 2, 3), (case, i, o.shape)
        np.testing.assert_array_equal(o, r)
    if dali is not None:
        want, want_layout = _run(dali, None, op, frame_args, sample_args)
        assert layout == want_layout
        for o, w in zip(out, want):
            np.testing.assert_allclose(o, w, rtol=1e-6, atol=1e-5)


def test_coord_transform_takes_a_matrix_per_frame():
    """coord_transform on sequences of points (`F` + points) with M and T per frame."""
    r = np.random.default_rng(30)
    pts = [r.uniform(-10, 10, (f, 5, 2)).astype(np.float32) for f in FRAMES]
    M = _values((2, 2), -1, 1, 31)
    T = _values((2,), -3, 3, 32)
    op = lambda f: f.coord_transform  # noqa: E731
    out, layout = _run(sluice, pts, op, {"M": M, "T": T}, layout="F**")
    assert layout == "F**"
    for i, o in enumerate(out):
        for j in range(FRAMES[i]):
            m, t = M[i][j if len(M[i]) > 1 else 0], T[i][j if len(T[i]) > 1 else 0]
            np.testing.assert_allclose(o[j], pts[i][j] @ m.T + t, rtol=1e-5, atol=1e-5)
    if dali is not None:
        want, want_layout = _run(dali, pts, op, {"M": M, "T": T}, layout="F**")
        assert want_layout == layout
        for o, w in zip(out, want):
            np.testing.assert_allclose(o, w, rtol=1e-6, atol=1e-5)


def _library_params():
    return [pytest.param(sluice, id="sluice")] + ([pytest.param(dali, id="dali")] if dali is not None else [])


@pytest.mark.parametrize("lib", _library_params())
def test_frame_counts_that_do_not_match_are_an_error(lib):
    data = _video([3, 2])
    bad = _per_frame([np.ones(2), np.ones(2)])
    with pytest.raises(RuntimeError, match=r"The sample 0 of tensor argument `brightness` contains 2 per-frame parameters, but there are 3 frames"):
        _run(lib, data, lambda f: f.brightness, {"brightness": bad})


def test_per_frame_values_on_an_input_without_frames_are_per_sample():
    """An input without frames (HWC) takes a per-frame argument of one frame as its sample's
    value, as DALI does (it unfolds nothing)."""
    r = np.random.default_rng(3)
    images = [r.integers(0, 255, (4, 5, 3)).astype(np.uint8) for _ in range(2)]
    values = _per_frame([[0.5], [1.5]])
    out, layout = _run(sluice, images, lambda f: f.brightness, {"brightness": values}, layout="HWC")
    assert layout == "HWC"
    per_sample, _ = _run(sluice, images, lambda f: f.brightness, {}, {"brightness": [v[0] for v in values]}, layout="HWC")
    assert not np.array_equal(out[0], images[0])
    for o, r in zip(out, per_sample):
        np.testing.assert_array_equal(o, r)
    if dali is not None:
        want, _ = _run(dali, images, lambda f: f.brightness, {"brightness": values}, layout="HWC")
        for o, w in zip(out, want):
            np.testing.assert_array_equal(o, w)


def test_the_pipeline_goes_on_after_a_bad_batch():
    """One batch with too few per-frame values fails, naming the operator; the next runs."""
    feeds = iter([[np.ones(2, np.float32)], [np.full(3, 2, np.float32)]])
    data = _video([3])

    @pipeline_def(batch_size=1, num_threads=2, device_id=None)
    def pipe():
        x = fn.external_source(lambda: data, batch=True, layout="FHWC")
        b = fn.external_source(lambda: next(feeds), batch=True)
        return fn.brightness(x, brightness=fn.per_frame(b))

    p = pipe()
    with pytest.raises(RuntimeError, match=r"brightness.*per-frame parameters"):
        p.run()
    (out,) = p.run()
    np.testing.assert_array_equal(np.array(out.at(0)), np.minimum(data[0].astype(np.int32) * 2, 255).astype(np.uint8))


@pytest.mark.parametrize("case", ["brightness_contrast", "hsv", "color_twist", "gaussian_blur", "laplacian", "warp_affine"])
def test_gpu_equals_cpu(case):
    require_gpu()
    op, frame_args, sample_args, consts = CASES[case]
    data = _video(seed=len(case))
    args = frame_args()
    cpu, _ = _run(sluice, data, op, args, sample_args, **consts)
    gpu, layout = _run(sluice, data, op, args, sample_args, device="gpu", **consts)
    assert layout == "FHWC"
    for c, g in zip(cpu, gpu):
        if c.dtype == np.float32:
            np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-3)
        else:
            np.testing.assert_array_equal(g, c)


# ------------------------------------------------ DALI's test_affine_transforms.py sequences


def _mts(frames, seed):
    r = np.random.default_rng(seed)
    return [r.uniform(-20, 20, (f, 2, 3)).astype(np.float32) for f in frames]


@pytest.mark.parametrize("lib", _library_params())
def test_transforms_of_sequences_of_matrices(lib):
    """A sequence of input matrices (`F` layout) with or without per-frame arguments: each
    frame's matrix composed with its frame's transform (test_sequences' input cases)."""
    mts = _mts(FRAMES, 40)
    angles = _values((), -180, 180, 41, broadcast=())
    offsets = _values((2,), -5, 5, 42)

    @lib.pipeline_def(batch_size=len(FRAMES), num_threads=2, device_id=None)
    def pipe():
        m = lib.fn.per_frame(lib.fn.external_source(_const(mts), batch=True))
        a = lib.fn.per_frame(lib.fn.external_source(_const(angles), batch=True))
        o = lib.fn.per_frame(lib.fn.external_source(_const(offsets), batch=True))
        return lib.fn.transforms.rotation(m, angle=a), lib.fn.transforms.translation(m, offset=[1.0, 2.0]), lib.fn.transforms.combine(m, lib.fn.transforms.translation(offset=o))

    p = pipe()
    if lib is not sluice:
        p.build()
    rot, tr, comb = p.run()
    for i, f in enumerate(FRAMES):
        for out in (rot, tr, comb):
            assert out.layout() == "F**"
            assert np.array(out.at(i)).shape == (f, 2, 3)
        for j in range(f):
            m = np.vstack([mts[i][j], [0, 0, 1]]).astype(np.float64)
            t = np.radians(angles[i][j])
            r = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
            np.testing.assert_allclose(np.array(rot.at(i))[j], (r @ m)[:2], rtol=1e-5, atol=1e-3)
            np.testing.assert_allclose(np.array(tr.at(i))[j], (np.array([[1, 0, 1], [0, 1, 2], [0, 0, 1]]) @ m)[:2], rtol=1e-5, atol=1e-4)
            off = offsets[i][j if len(offsets[i]) > 1 else 0]
            np.testing.assert_allclose(np.array(comb.at(i))[j], (np.array([[1, 0, off[0]], [0, 1, off[1]], [0, 0, 1]]) @ m)[:2], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("lib", _library_params())
def test_combine_shape_mismatch(lib):
    """DALI's test_combine_shape_mismatch: two sequences of matrices with different frames."""
    batch_size, num_frames = 8, 50
    r = np.random.default_rng(42)
    a = [np.float32(r.uniform(-100, 250, (num_frames, 2, 3))) for _ in range(batch_size)]
    b = [np.float32(r.uniform(-100, 250, (num_frames, 2, 3)))[i:] for i in range(batch_size)]

    @lib.pipeline_def(batch_size=batch_size, num_threads=4, device_id=None)
    def pipe():
        x = lib.fn.external_source(_const(a), batch=True)
        y = lib.fn.external_source(_const(b), batch=True)
        return lib.fn.transforms.combine(lib.fn.per_frame(x), lib.fn.per_frame(y))

    p = pipe()
    with pytest.raises(RuntimeError, match=r"The input 0 and the input 1 have different number of frames for sample 1"):
        if lib is not sluice:
            p.build()
        p.run()


@pytest.mark.parametrize("lib", _library_params())
def test_rotate_shape_mismatch(lib):
    """DALI's test_rotate_shape_mismatch: per-frame angles and centers of other lengths than the
    input's frames, or than each other (the first per-frame argument is the reference)."""
    batch_size, num_frames = 8, 50
    r = np.random.default_rng(42)
    mts = [np.float32(r.uniform(-100, 250, (num_frames, 2, 3))) for _ in range(batch_size)]
    angles = [np.arange(num_frames - i, dtype=np.float32) for i in range(batch_size)]
    centers = [np.arange(num_frames + i, dtype=np.float32) for i in range(batch_size)]

    def build(with_input):
        @lib.pipeline_def(batch_size=batch_size, num_threads=4, device_id=None)
        def pipe():
            a = lib.fn.per_frame(lib.fn.external_source(_const(angles), batch=True))
            if with_input:
                m = lib.fn.per_frame(lib.fn.external_source(_const(mts), batch=True))
                return lib.fn.transforms.rotation(m, angle=a)
            c = lib.fn.per_frame(lib.fn.external_source(_const(centers), batch=True))
            return lib.fn.transforms.rotation(angle=a, center=c)

        p = pipe()
        if lib is not sluice:
            p.build()
        return p

    with pytest.raises(RuntimeError, match=r"The sample 1 of tensor argument `angle` contains 49 per-frame parameters, but there are 50 frames in the corresponding sample of input 0\."):
        build(True).run()
    with pytest.raises(RuntimeError, match=r"The sample 1 of tensor argument `center` contains 51 per-frame parameters, but there are 49 frames in the corresponding sample of argument `angle`"):
        build(False).run()


ROTATE_ANGLES = _values((), -60, 60, 50)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_rotate_turns_each_frame_onto_the_sequence_canvas(device):
    """fn.rotate with a per-frame angle: every frame of a sequence lands on one canvas (the
    largest any frame needs, its parity by a majority of the frames, as DALI's InferSize),
    each turned by its own angle: equal to rotating that frame alone onto that canvas (`size`),
    and to DALI 2.4."""
    if device == "gpu":
        require_gpu()
    data = _video(seed=51, h=13, w=20)
    op = lambda f: f.rotate  # noqa: E731
    out, layout = _run(sluice, data, op, {"angle": ROTATE_ANGLES}, device=device, fill_value=0)
    assert layout == "FHWC"
    for i, o in enumerate(out):
        size = [int(x) for x in o.shape[1:3]]
        angles = ROTATE_ANGLES[i]
        frames = [data[i][j] for j in range(len(data[i]))]
        ref = _frame_by_frame([np.stack(frames)], op, {"angle": [angles]}, None, size=size, fill_value=0)[0]
        np.testing.assert_array_equal(o, ref, err_msg=f"sample {i}")
    if dali is not None and device == "cpu":
        want, want_layout = _run(dali, data, op, {"angle": ROTATE_ANGLES}, fill_value=0)
        assert want_layout == layout
        for i, (o, w) in enumerate(zip(out, want)):
            assert o.shape == w.shape, i
            np.testing.assert_array_equal(o, w, err_msg=f"sample {i}")
