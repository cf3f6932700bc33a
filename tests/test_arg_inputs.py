"""Per-sample argument inputs (a DataNode given for an argument) against NVIDIA DALI 2.4 CPU.

RNG streams differ between Sluice and DALI, so Sluice draws the per-sample values
(fn.random.uniform), returns them with the result, and DALI receives the same values through
fn.external_source. Bad per-sample values must raise an error naming the operator, the
argument and the sample, and the pipeline must keep working afterwards."""

import numpy as np
import pytest

from sluice import fn, pipeline_def, types

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402

B = 4
ITERS = 3  # 12 images


def _sluice_batches(root, make_args, op):
    """Runs `op(img, **args)` in Sluice with args = make_args() (per-sample DataNodes);
    returns, per iteration, ({arg: [per-sample numpy values]}, output batch)."""
    names = []

    @pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=7)
    def s():
        jpegs, _ = fn.readers.file(file_root=str(root))
        img = fn.decoders.image(jpegs)
        args = make_args()
        names[:] = list(args)
        return (op(img, **args), *args.values())

    p = s()
    out = []
    for _ in range(ITERS):
        res, *vals = p.run()
        out.append(({k: [np.array(v.at(i)) for i in range(B)] for k, v in zip(names, vals)}, res))
    return out


def _next_of(it):
    return lambda: next(it)


def _dali_outputs(root, batches, op):
    """DALI's `op(img, **args)` with every arg fed per sample from `batches`."""
    names = list(batches[0][0])
    feeds = {k: iter([b[0][k] for b in batches]) for k in names}

    @dali.pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=7)
    def d():
        jpegs, _ = dfn.readers.file(file_root=str(root))
        img = dfn.decoders.image(jpegs, device="cpu")
        args = {k: dfn.external_source(source=_next_of(feeds[k]), batch=True) for k in names}
        return op(img, **args)

    p = d()
    p.build()
    return [p.run()[0] for _ in batches]


def _compare(root, make_args, sl_op, dali_op, tol=0.0):
    """Sluice and DALI outputs agree (shape, type, values within `tol`) on every sample."""
    batches = _sluice_batches(root, make_args, sl_op)
    refs = _dali_outputs(root, batches, dali_op)
    for (args, res), ref in zip(batches, refs):
        for i in range(B):
            a, b = res.at(i), np.array(ref.at(i))
            what = (i, {k: v[i] for k, v in args.items()})
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, *what)
            if a.size:
                assert np.abs(a.astype(np.float64) - b.astype(np.float64)).max() <= tol, what
    return batches


def _varies(batches, name):
    """The per-sample values of `name` really differ between samples."""
    vals = {tuple(np.ravel(v)) for args, _ in batches for v in args[name]}
    assert len(vals) >= B * ITERS // 2, vals


def test_resize_size_per_sample(small_images):
    b = _compare(
        small_images,
        lambda: {"size": fn.random.uniform(range=[16.0, 80.0], shape=[2])},
        lambda img, **a: fn.resize(img, **a),
        lambda img, **a: dfn.resize(img, **a),
        tol=1,
    )
    _varies(b, "size")


def test_resize_roi_per_sample(small_images):
    b = _compare(
        small_images,
        lambda: {"roi_start": fn.random.uniform(range=[0.0, 40.0], shape=[2]),
                 "roi_end": fn.random.uniform(range=[60.0, 120.0], shape=[2])},
        lambda img, **a: fn.resize(img, size=[32, 48], **a),
        lambda img, **a: dfn.resize(img, size=[32, 48], **a),
        tol=1,
    )
    _varies(b, "roi_start")


def test_cmn_mean_std_per_sample(small_images):
    b = _compare(
        small_images,
        lambda: {"mean": fn.random.uniform(range=[0.0, 255.0], shape=[3]),
                 "std": fn.random.uniform(range=[1.0, 100.0], shape=[3])},
        lambda img, **a: fn.crop_mirror_normalize(img, crop=[64, 64], scale=2.0, shift=1.0, **a),
        lambda img, **a: dfn.crop_mirror_normalize(img, crop=[64, 64], scale=2.0, shift=1.0, **a),
        tol=1e-5,  # per-sample constants: DALI's float rounding differs by an ulp at times
    )
    _varies(b, "mean")


def test_crop_window_per_sample(small_images):
    b = _compare(
        small_images,
        lambda: {"crop": fn.random.uniform(range=[8.0, 100.0], shape=[2])},
        lambda img, **a: fn.crop(img, **a),
        lambda img, **a: dfn.crop(img, **a),
    )
    _varies(b, "crop")


@pytest.mark.parametrize("arg,lo,hi", [("shape", -1, 700), ("align", 1, 9)])
def test_pad_shape_align_per_sample(small_images, arg, lo, hi):
    def make():
        v = fn.random.uniform(range=[lo, hi], shape=[2])
        return {arg: fn.cast(v, dtype=types.INT32)}

    b = _compare(
        small_images,
        make,
        lambda img, **a: fn.pad(img, axes=[0, 1], fill_value=7, **a),
        lambda img, **a: dfn.pad(img, axes=[0, 1], fill_value=7, **a),
    )
    _varies(b, arg)


def test_uniform_range_per_sample():
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=3)
    def p():
        lo = fn.random.uniform(range=[-100.0, 100.0], shape=[1])
        rng = fn.pad(lo, axes=[0], shape=[2], fill_value=lo[0] + 0.5)  # [lo, lo + 0.5]
        return rng, fn.random.uniform(range=rng, shape=[50])

    pipe = p()
    for _ in range(2):
        rng, out = pipe.run()
        los = [float(np.array(rng.at(i))[0]) for i in range(8)]
        assert len(set(los)) == 8
        for i in range(8):
            lo, hi = np.array(rng.at(i))
            v = np.array(out.at(i))
            assert v.shape == (50,) and lo <= v.min() and v.max() <= hi


def test_choice_p_per_sample():
    """p = [q, 1 - q] with q a per-sample coin flip: the choice is then certain."""

    @pipeline_def(batch_size=16, num_threads=2, device_id=None, seed=5)
    def p():
        q = fn.random.coin_flip(shape=[1], dtype=types.FLOAT)
        prob = fn.pad(q, axes=[0], shape=[2], fill_value=1.0 - q[0])
        return q, fn.random.choice([10, 20], p=prob)

    pipe = p()
    for _ in range(2):
        q, out = pipe.run()
        qs = [float(np.array(q.at(i))[0]) for i in range(16)]
        assert 0 < sum(qs) < 16  # both outcomes occur
        assert [int(np.array(out.at(i))) for i in range(16)] == [10 if x else 20 for x in qs]


@pytest.mark.parametrize("a,kw", [(5, {}), ([1, 2, 3], {}), ([1.5, 2.5], {}), (5, {"shape": [4]}), (np.int64(4), {})])
def test_choice_positional_constant_like_dali(a, kw):
    @pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=1)
    def s():
        return fn.random.choice(a, **kw)

    @dali.pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=1)
    def d():
        return dfn.random.choice(a, **kw)

    dp = d()
    dp.build()
    out, = s().run()
    ref, = dp.run()
    allowed = set(range(int(a))) if np.isscalar(a) else set(a)
    for i in range(6):
        x, y = np.array(out.at(i)), np.array(ref.at(i))
        assert x.shape == y.shape and x.dtype == y.dtype
        assert set(np.ravel(x).tolist()) <= allowed


@pytest.mark.parametrize("value", [np.arange(12, dtype=np.uint8).reshape(2, 2, 3), np.int64(7), [1.5, 2.5], True,
                                   np.array([[1, 2]], np.int16), np.float16(2), [[1, 2], [3, 4]]])
def test_positional_constants_become_constant_inputs_like_dali(value):
    """DALI turns a Python or NumPy value given as an input into a constant node: 64-bit
    ints and floats become INT32 and FLOAT, other NumPy types stay as they are."""
    expected = np.asarray(value)
    expected = expected.astype({np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32}.get(expected.dtype, expected.dtype))

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def s():
        # a cast to the constant's own type hands it on unchanged
        return fn.cast(value, dtype=types.FLOAT), fn.cast(value, dtype=types.from_numpy_type(expected.dtype))

    out, raw = s().run()
    for i in range(3):
        np.testing.assert_array_equal(np.array(raw.at(i)), expected)
        assert np.array(raw.at(i)).dtype == expected.dtype
        np.testing.assert_array_equal(np.array(out.at(i)), expected.astype(np.float32))


def _array_argument_pipeline(lib, matrix_of):
    """warp_affine and coord_transform given their matrices as arrays: DALI makes a constant
    argument input of an array of 2 or more dimensions (a 2 x 3 matrix for every sample)."""
    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def p():
        img = lib.types.Constant(np.arange(7 * 9 * 3, dtype=np.uint8).reshape(7, 9, 3), device="cpu")
        points = lib.types.Constant(np.arange(10, dtype=np.float32).reshape(5, 2), device="cpu")
        m = matrix_of(np.array([[0.9, 0.1, 3.0], [-0.1, 0.9, 2.0]], np.float32))
        return (lib.fn.warp_affine(img, matrix=m, fill_value=0),
                lib.fn.coord_transform(points, M=matrix_of(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)),
                                       T=matrix_of(np.array([0.5, -1.0], np.float32))))

    return p()


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_array_arguments_are_constant_argument_inputs_like_dali(kind):
    if kind == "torch":
        torch = pytest.importorskip("torch")
        matrix_of = torch.from_numpy
    else:
        matrix_of = lambda a: a  # noqa: E731
    import sluice

    ours = _array_argument_pipeline(sluice, matrix_of).run()
    theirs = _array_argument_pipeline(dali, matrix_of).run()
    for o, t in zip(ours, theirs):
        for i in range(3):
            np.testing.assert_array_equal(np.array(o.at(i)), np.array(t.at(i)))
    # the 2 x 3 array is the same matrix as its 6 values in a list
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def flat():
        img = types.Constant(np.arange(7 * 9 * 3, dtype=np.uint8).reshape(7, 9, 3), device="cpu")
        return fn.warp_affine(img, matrix=[0.9, 0.1, 3.0, -0.1, 0.9, 2.0], fill_value=0)

    np.testing.assert_array_equal(np.array(flat().run()[0].at(0)), np.array(ours[0].at(0)))


def test_positional_constant_that_is_not_numeric_is_a_type_error():
    with pytest.raises(TypeError, match="random.choice: input 0 must be a DataNode or a constant"):
        fn.random.choice("abc")


def _run_until_both(pipe, check_ok, pattern, iters=16):
    """Runs `pipe`: every batch either raises an error matching `pattern` or passes
    `check_ok`; both must happen (so the pipeline recovers after a bad batch)."""
    errors = oks = 0
    for _ in range(iters):
        try:
            outs = pipe.run()
        except Exception as e:  # noqa: BLE001 -- the message is what is checked
            assert pattern.search(str(e)), str(e)
            errors += 1
        else:
            check_ok(outs)
            oks += 1
    assert errors and oks, (errors, oks)


def test_resize_size_wrong_length_is_clear_and_recoverable(small_images):
    """size vectors of 1, 2 or 3 values per sample (fn.pad with a per-sample shape): batches
    with a 3-value sample fail with a clear error, the others resize."""
    import re

    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=11)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        n = fn.cast(fn.random.uniform(range=[0.6, 3.4], shape=[1]), dtype=types.INT32)  # rounds to 1..3
        size = fn.pad(fn.random.uniform(range=[20.0, 40.0], shape=[1]), axes=[0], shape=n, fill_value=30.0)
        return size, fn.resize(img, size=size)

    def ok(outs):
        size, out = outs
        for i in range(2):
            s = np.array(size.at(i))
            want = (round(float(s[0])), round(float(s[-1])))
            assert out.at(i).shape[:2] == want

    pat = re.compile(r"resize.*'size'.*sample \d+ has 3 values; expected 1 or 2", re.S)
    _run_until_both(p(), ok, pat)


def test_pad_negative_shape_is_clear_and_recoverable(small_images):
    import re

    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=3)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        shape = fn.cast(fn.random.uniform(range=[-40.0, 200.0], shape=[2]), dtype=types.INT32)
        return shape, fn.pad(img, axes=[0, 1], shape=shape)

    def ok(outs):
        shape, out = outs
        for i in range(2):
            assert (np.array(shape.at(i)) >= -1).all()

    pat = re.compile(r"pad.*'shape'.*-1 or >= 0; sample \d+ has -\d+", re.S)
    _run_until_both(p(), ok, pat, iters=24)


def test_cmn_mean_wrong_length(small_images):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        return fn.crop_mirror_normalize(img, mean=fn.random.uniform(range=[0.0, 1.0], shape=[2]))

    pipe = p()
    for _ in range(2):  # the error repeats, nothing hangs or crashes
        with pytest.raises(Exception, match=r"crop_mirror_normalize.*'mean'.*sample 0 has 2 values; expected 1 or 3"):
            pipe.run()
