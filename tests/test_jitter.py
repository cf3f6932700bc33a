"""`fn.jitter` (cpu and gpu; DALI 2.4 has the gpu backend only, so there is no DALI
reference to run here: DALI's own test, operator_1/test_jitter.py, only checks that the
operator runs, in a pipeline of `fn.jitter(images, mask=coin_flip)`, ported below).

- The displacement of each pixel, read back from an image whose channels encode the
  coordinates: whole pixels in [-nDegree/2, nDegree - 1 - nDegree/2] along x and y, every
  value about equally frequent; clamped to [0, W] x [0, H] as DALI clamps, so the last
  column and row sometimes read `fill_value`; all channels of a pixel move together.
- `nDegree=1` is the identity; `mask=0` copies the sample.
- The same output whatever `num_threads`, a different one for another seed.
- gpu equal to cpu, bit for bit (the same Philox streams; on the GPU machine).
"""

import numpy as np
import pytest

from sluice import errors, fn, pipeline_def, types

from conftest import require_gpu


def coordinate_images(shapes):
    """UINT16 (as FLOAT) images whose channel 0 is x + 1, channel 1 is y + 1 (0 is the fill)."""
    out = []
    for h, w in shapes:
        y, x = np.mgrid[0:h, 0:w]
        out.append(np.stack([x + 1, y + 1, (x * 7 + y) % 5 + 1], -1).astype(np.float32))
    return out


def run_jitter(data, device="cpu", num_threads=2, seed=12, mask=None, **kw):
    @pipeline_def(batch_size=len(data), num_threads=num_threads, device_id=0 if device == "gpu" else None, seed=seed)
    def pipe():
        x = fn.external_source(lambda: data, layout="HWC")
        if device == "gpu":
            x = x.gpu()
        if mask is not None:
            kw["mask"] = fn.external_source(lambda: [np.int32(m) for m in mask])
        # The operator's own seed: the gpu pipeline's extra transfer node would otherwise key
        # its streams differently from the cpu pipeline's.
        return fn.jitter(x, seed=seed, **kw)

    p = pipe()
    p.build()
    (out,) = p.run()
    if device == "gpu":
        out = out.as_cpu()
    return [np.array(out[i]) for i in range(len(data))]


@pytest.mark.parametrize("n_degree", [2, 3, 4, 7])
def test_displacements_are_whole_pixels_in_range(n_degree):
    shapes = [(60, 80), (33, 17)]
    data = coordinate_images(shapes)
    half = n_degree // 2
    lo, hi = -half, n_degree - 1 - half
    for (h, w), out in zip(shapes, run_jitter(data, nDegree=n_degree)):
        y, x = np.mgrid[0:h, 0:w]
        inside = out[..., 0] > 0
        # Fill only where the clamped point is the column W or the row H.
        assert ((x[~inside] + hi >= w) | (y[~inside] + hi >= h)).all()
        assert (out[~inside] == 0).all()
        dx = out[..., 0][inside] - 1 - x[inside]
        dy = out[..., 1][inside] - 1 - y[inside]
        # Clamping to 0 can only raise a displacement, to W only lower it.
        assert dx.min() >= lo and dx.max() <= hi and dy.min() >= lo and dy.max() <= hi
        # Channels move together: channel 2 is the source pixel's own.
        sx, sy = out[..., 0][inside].astype(int) - 1, out[..., 1][inside].astype(int) - 1
        assert np.array_equal(out[..., 2][inside], (sx * 7 + sy) % 5 + 1)
        # Away from the borders each displacement is about equally frequent.
        core = (x >= half + 1) & (x < w - n_degree) & (y >= half + 1) & (y < h - n_degree)
        if core.sum() > 500:
            counts = np.bincount((out[..., 0][core] - 1 - x[core]).astype(int) - lo, minlength=n_degree)
            assert counts.min() > 0.6 * core.sum() / n_degree, counts


def test_right_and_bottom_borders_read_the_fill():
    data = coordinate_images([(40, 40)])
    out = run_jitter(data, nDegree=4, fill_value=-1.0)[0]
    assert (out[:, -1, 0] == -1).any() and (out[-1, :, 1] == -1).any()
    assert not (out[:, 0, 0] == -1).any() and not (out[0, :, 1] == -1).any()


def test_n_degree_one_is_the_identity_and_mask_zero_copies():
    rng = np.random.default_rng(1)
    data = [rng.integers(0, 256, (13, 9, 3), dtype=np.uint8), rng.integers(0, 256, (8, 21, 3), dtype=np.uint8)]
    for a, b in zip(run_jitter(data, nDegree=1), data):
        assert np.array_equal(a, b)
    out = run_jitter(data, nDegree=5, mask=[0, 1])
    assert np.array_equal(out[0], data[0]) and not np.array_equal(out[1], data[1])


def test_same_output_whatever_num_threads_and_another_for_another_seed():
    rng = np.random.default_rng(2)
    data = [rng.integers(0, 256, (31, 29, 3), dtype=np.uint8) for _ in range(5)]
    a = run_jitter(data, num_threads=1, nDegree=6)
    b = run_jitter(data, num_threads=4, nDegree=6)
    c = run_jitter(data, seed=13, nDegree=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_dali_pipeline_runs(small_images):
    """DALI's operator_1/test_jitter.py: decode, then jitter with a coin-flip mask."""

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=3)
    def pipe():
        encoded, _ = fn.readers.file(file_root=str(small_images))
        images = fn.decoders.image(encoded, output_type=types.RGB)
        return images, fn.jitter(images, mask=fn.random.coin_flip(dtype=types.INT32), nDegree=3)

    p = pipe()
    p.build()
    for _ in range(2):
        images, jittered = p.run()
        for i in range(4):
            assert np.array(images[i]).shape == np.array(jittered[i]).shape


@pytest.mark.parametrize("n_degree", [0, -3])
def test_bad_n_degree(n_degree):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.jitter(fn.external_source(lambda: [np.zeros((4, 4, 3), np.uint8)], layout="HWC"), nDegree=n_degree)

    with pytest.raises(errors.ArgumentError, match="jitter.*nDegree"):
        pipe().build()


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_equals_cpu(dtype):
    require_gpu()
    rng = np.random.default_rng(4)
    data = [rng.integers(0, 256, s).astype(dtype) for s in [(64, 48, 3), (1, 1, 3), (17, 300, 1)]]
    for kw in [dict(nDegree=2), dict(nDegree=9, fill_value=7.0), dict(nDegree=4, interp_type=types.INTERP_LINEAR)]:
        for a, b in zip(run_jitter(data, "cpu", **kw), run_jitter(data, "gpu", **kw)):
            assert np.array_equal(a, b)
