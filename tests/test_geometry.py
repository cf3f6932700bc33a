"""fn.flip and fn.rotate (cpu) against NVIDIA DALI's CPU operators on decoded JPEGs.

Measured when written (DALI 2.4.0, 12 JPEGs x several angles): flip bit-exact; rotate bit-exact
for every case tried (multiples of 90, 30, 45.5, -17, -75.25 degrees, keep_size, size=, fill_value
given or not (border clamp), linear and nearest-neighbour). Asserted: flip, multiples of 90 and
nearest-neighbour exact; linear rotation max |diff| <= 1 on at most 0.1% of the values (slack for
floating-point contraction differences between builds)."""

import numpy as np
import pytest

from sluice import fn, pipeline_def, types

if not (hasattr(fn, "flip") and hasattr(fn, "rotate")):
    pytest.skip("fn.flip / fn.rotate not in this build yet", allow_module_level=True)

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402

B = 4
ITERS = 3  # 12 images


def _pipes(root, op, kw, output_type="RGB", dali_kw=None):
    """A Sluice and a DALI pipeline: decoded image -> op(**kw)."""

    @pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=4)
    def s():
        jpegs, _ = fn.readers.file(file_root=str(root))
        img = fn.decoders.image(jpegs, output_type=getattr(types, output_type))
        return img, getattr(fn, op)(img, **kw)

    @dali.pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=4)
    def d():
        jpegs, _ = dfn.readers.file(file_root=str(root))
        img = dfn.decoders.image(jpegs, device="cpu", output_type=getattr(dtypes, output_type))
        return img, getattr(dfn, op)(img, **dict(kw, **(dali_kw or {})))

    sp, dp = s(), d()
    dp.build()
    return sp, dp


def _compare(sp, dp, iters=ITERS):
    """[(max |diff|, fraction differing)] per sample; shapes must match."""
    res = []
    for _ in range(iters):
        (si, so), (di, do) = sp.run(), dp.run()
        for i in range(B):
            assert np.array_equal(si.at(i), np.array(di.at(i)))  # same inputs
            a, b = so.at(i), np.array(do.at(i))
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape)
            d = np.abs(a.astype(np.int32) - b.astype(np.int32))
            res.append((int(d.max()), float((d > 0).mean())))
    return res


@pytest.mark.parametrize("h,v", [(1, 0), (0, 1), (1, 1), (0, 0)])
def test_flip_constant_exact(small_images, h, v):
    sp, dp = _pipes(small_images, "flip", dict(horizontal=h, vertical=v))
    assert all(m == 0 for m, _ in _compare(sp, dp))
    img, out = sp.run()
    for i in range(B):
        want = img.at(i)
        if h:
            want = want[:, ::-1]
        if v:
            want = want[::-1]
        assert np.array_equal(out.at(i), want)
    assert out.layout() == "HWC"


def test_flip_per_sample_coin(small_images):
    @pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=8)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        h = fn.random.coin_flip()
        v = fn.random.coin_flip(probability=0.5)
        return img, h, v, fn.flip(img, horizontal=h, vertical=v)

    pipe = p()
    combos = set()
    for _ in range(4):
        img, h, v, out = pipe.run()
        for i in range(6):
            hh, vv = int(h.at(i)), int(v.at(i))
            combos.add((hh, vv))
            want = img.at(i)
            if hh:
                want = want[:, ::-1]
            if vv:
                want = want[::-1]
            assert np.array_equal(out.at(i), want), (i, hh, vv)
    assert len(combos) >= 3  # the per-sample arguments really vary


@pytest.mark.parametrize("angle", [90, 180, 270, -90])
def test_rotate_right_angles_exact(small_images, angle):
    sp, dp = _pipes(small_images, "rotate", dict(angle=angle, fill_value=0))
    assert all(m == 0 for m, _ in _compare(sp, dp, iters=1))
    img, out = sp.run()
    for i in range(B):
        assert np.array_equal(out.at(i), np.rot90(img.at(i), k=(angle // 90) % 4))  # counter-clockwise


@pytest.mark.parametrize("kw", [
    dict(angle=30.0, fill_value=0),
    dict(angle=45.5, fill_value=0),
    dict(angle=-17.0),  # no fill_value: border clamp
    dict(angle=-75.25),
    dict(angle=12.0, keep_size=True),
    dict(angle=30.0, keep_size=True, fill_value=0),
    dict(angle=30.0, size=(200, 300), fill_value=7),
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_rotate_linear_matches_dali(small_images, kw):
    res = _compare(*_pipes(small_images, "rotate", kw), iters=2)
    assert max(m for m, _ in res) <= 1, res
    assert max(f for _, f in res) <= 1e-3, res


@pytest.mark.parametrize("output_type", ["RGB", "GRAY"])
def test_rotate_nearest_exact(small_images, output_type):
    kw = dict(angle=33.0, interp_type=types.INTERP_NN, fill_value=0)
    sp, dp = _pipes(small_images, "rotate", kw, output_type, dali_kw=dict(interp_type=dtypes.INTERP_NN))
    # DALI gets its own enum; Sluice's equals it by value
    assert int(types.INTERP_NN) == int(dtypes.INTERP_NN)
    assert all(m == 0 for m, _ in _compare(sp, dp, iters=2))


def test_rotate_per_sample_angle_matches_dali(small_images):
    """angle=fn.random.uniform(...) per sample; DALI gets the same angles through external_source."""

    @pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=4)
    def s():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        angle = fn.random.uniform(range=(-45.0, 45.0))
        return img, angle, fn.rotate(img, angle=angle, fill_value=0)

    sp = s()
    batches = [sp.run() for _ in range(ITERS)]
    angles = [[np.array(b[1].at(i), dtype=np.float32) for i in range(B)] for b in batches]
    assert len({float(a) for batch in angles for a in batch}) == B * ITERS

    it = iter(angles)

    @dali.pipeline_def(batch_size=B, num_threads=2, device_id=None, seed=4)
    def d():
        jpegs, _ = dfn.readers.file(file_root=str(small_images))
        img = dfn.decoders.image(jpegs, device="cpu")
        return dfn.rotate(img, angle=dfn.external_source(source=lambda: next(it), batch=True), fill_value=0)

    dp = d()
    dp.build()
    for (img, angle, out) in batches:
        ref, = dp.run()
        for i in range(B):
            a, b = out.at(i), np.array(ref.at(i))
            assert a.shape == b.shape
            diff = np.abs(a.astype(np.int32) - b.astype(np.int32))
            assert diff.max() <= 1 and (diff > 0).mean() <= 1e-3
