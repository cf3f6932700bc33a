"""The noise operators: `fn.noise.gaussian`, `fn.noise.salt_and_pepper`, `fn.noise.shot`.

Randomness cannot be DALI's bits (DALI draws from mt19937_64 on the cpu, cuRAND on the gpu),
so parity with DALI 2.4 is in distribution:
- DALI's own tests (operator_1/test_noise_gaussian.py, test_noise_salt_and_pepper.py,
  test_noise_shot.py, with test_noise_utils.PSNR) ported with the import renamed: the noise
  against NumPy references (PSNR within 1 dB, salt/pepper proportions), gaussian noise
  against `x + fn.random.normal(x)` of the same seed (bit for bit here; DALI checks 0.1).
  Images come from the generated set (`small_images`) instead of DALI_extra.
- Moments, proportions, value sets, rounding and saturation checked with the same
  assertions on Sluice and on DALI (`library_params`), so what is asserted is DALI's
  behaviour: Gaussian mean/spread, the float/double arithmetic per type, salt and pepper
  values of every type (and C++'s conversion of `salt_val`), per-pixel noise with channels
  last, first or implied, the Poisson law of shot noise and its quantisation to `factor`.
- Determinism (same seed, same bits whatever num_threads; iterations and samples differ),
  type/shape/layout, checkpoints, errors naming operator, argument and sample.
- gpu against cpu (one pipeline, explicit seeds, so both draw the same numbers):
  salt_and_pepper and gaussian bit for bit (the normals' logarithm, sine and cosine are
  written out on both sides: `rng::box_muller`), shot differing on at most 1e-4 of the
  elements: the arithmetic is the same, only CUDA's log/exp may differ from glibc's in the
  last bit (none is expected in practice).

Sluice departs from DALI 2.4 on purpose for shot with factor=0 (the input, as documented;
DALI returns zeros), a negative stddev (an error; DALI takes |stddev|) and per_channel=False
on scalars (an error; DALI crashes).
"""

import math

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, library_params, require_gpu

dali = dali_or_none()
LIBS = library_params()

NP_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32]
SUPPORTED = "UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, FLOAT"


def _const(batch):
    """A source giving `batch` every iteration."""
    return lambda: batch


def _pipe(lib, build, data, layout="HWC", args=None, device="cpu", num_threads=3, seed=7, gpu_pipeline=False):
    """A pipeline over `data` (a list of samples) running `build(fn, x, arg_nodes)`; `args`
    maps names to one value per sample, fed as argument inputs."""
    args = args or {}
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=num_threads, device_id=0 if device == "gpu" or gpu_pipeline else None, seed=seed)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_const([np.float32(v) for v in vals]), batch=True) for k, vals in args.items()}
        if device == "gpu":
            x = x.gpu()
        out = build(lib.fn, x, nodes)
        pipe.set_outputs(*(out if isinstance(out, tuple) else (out,)))
    pipe.build()
    return pipe


def _arrays(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _run(lib, build, data, layout="HWC", args=None, device="cpu", iters=1, **kw):
    """Runs `iters` iterations; returns the last one's samples of the first output and its layout."""
    pipe = _pipe(lib, build, data, layout, args, device, **kw)
    for _ in range(iters):
        outs = pipe.run()
    return _arrays(outs[0]), outs[0].layout()


def _psnr(data, orig):
    """test_noise_utils.PSNR (on uint8 arrays, as DALI's tests call it)."""
    mse = (np.square(np.subtract(data, orig))).mean()
    return 10 * np.log10(255 * 255 / mse)


def _image_pipe(images_dir, batch_size, build, device="cpu", seed=None):
    """DALI's test pipelines: files read and decoded to RGB on the cpu (moved to the gpu for
    gpu cases), then `build(fn, images)`."""
    kw = {} if seed is None else {"seed": seed}
    pipe = Pipeline(batch_size=batch_size, num_threads=3, device_id=None if device == "cpu" else 0, **kw)
    with pipe:
        encoded, _ = fn.readers.file(file_root=str(images_dir))
        images = fn.decoders.image(encoded, device="cpu", output_type=types.RGB)
        pipe.set_outputs(*build(images))
    pipe.build()
    return pipe


# ---------------------------------------------------------------- DALI's tests, ported
@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("mean,stddev,variable_dist_params", [(10.0, 57.0, False), (0.0, 0.0, True)])
def test_operator_noise_gaussian_vs_add_normal_dist(small_images, batch_size, mean, stddev, variable_dist_params):
    """test_noise_gaussian.py (cpu): gaussian noise equals adding random.normal of the same
    seed; DALI checks within 0.1, Sluice's are equal bit for bit (the same draws)."""

    def build(images):
        in_data = fn.cast(images, dtype=types.FLOAT)
        mean_arg, stddev_arg = mean, stddev
        if variable_dist_params:
            mean_arg = fn.random.uniform(range=(-50.0, 50.0))
            stddev_arg = fn.random.uniform(range=(1.0, 10.0))
        seed = 12345
        out_data1 = fn.noise.gaussian(in_data, mean=mean_arg, stddev=stddev_arg, seed=seed)
        out_data2 = in_data + fn.random.normal(in_data, mean=mean_arg, stddev=stddev_arg, seed=seed)
        return out_data1, out_data2

    pipe = _image_pipe(small_images, batch_size, build)
    for _ in range(3):
        out0, out1 = pipe.run()
        for a, b in zip(_arrays(out0), _arrays(out1)):
            assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def salt_and_pepper_noise_ref(x, prob, salt_vs_pepper, per_channel, salt_val, pepper_val, rng):
    x = np.array(x, dtype=np.float32)
    salt_prob = prob * salt_vs_pepper
    pepper_prob = prob * (1.0 - salt_vs_pepper)
    nchannels = x.shape[-1]
    mask_sh = x.shape if per_channel else x.shape[:-1]
    mask = rng.choice([pepper_val, np.nan, salt_val], p=[pepper_prob, 1 - prob, salt_prob], size=mask_sh)
    if not per_channel:
        mask = np.stack([mask] * nchannels, axis=-1)
    y = np.where(np.isnan(mask), x, mask).astype(np.uint8)
    return y


def verify_salt_and_pepper(output, input, prob, salt_vs_pepper, per_channel, salt_val, pepper_val):
    assert output.shape == input.shape
    height, width, nchannels = output.shape
    npixels = height * width
    if per_channel:
        output = np.reshape(output, (npixels * nchannels, 1))
        input = np.reshape(input, (npixels * nchannels, 1))
    passthrough_mask = np.all(output == input, axis=-1)
    pepper_mask = np.all(output == pepper_val, axis=-1)
    salt_mask = np.all(output == salt_val, axis=-1)
    # Only the pixels that were neither salt nor pepper before the noise (DALI's comment).
    in_pixel_mask = np.logical_and(np.all(input != pepper_val, axis=-1), np.all(input != salt_val, axis=-1))
    salt_count = np.count_nonzero(np.logical_and(salt_mask, in_pixel_mask))
    pepper_count = np.count_nonzero(np.logical_and(pepper_mask, in_pixel_mask))
    pixel_count = np.count_nonzero(in_pixel_mask)
    assert (np.logical_or(passthrough_mask, np.logical_or(salt_mask, pepper_mask))).all()
    actual_noise_prob = (pepper_count + salt_count) / pixel_count
    actual_salt_vs_pepper = salt_count / (salt_count + pepper_count)
    np.testing.assert_allclose(actual_noise_prob, prob, atol=1e-2)
    np.testing.assert_allclose(actual_salt_vs_pepper, salt_vs_pepper, atol=1e-1)


def _snp_cases():
    """test_operator_noise_salt_and_pepper's grid, with its random choices made in turn."""
    svps, cases, k = [None, 1.0, 0.5, 0.0], [], 0
    for per_channel in [False, True]:
        for channel_first in [False, True]:
            for pepper_val, salt_val in [(None, None), (10, 50)]:
                for prob in [None, 0.021, 0.5]:
                    cases.append((per_channel, channel_first, pepper_val, salt_val, prob, svps[k % 4], [1, 3][(k // 4) % 2]))
                    k += 1
    return cases


def _check_salt_and_pepper(images_dir, device, per_channel, channel_first, pepper_val, salt_val, prob, salt_vs_pepper, batch_size):
    def build(images):
        in_data = images.gpu() if device == "gpu" else images
        if channel_first:
            in_data = fn.transpose(in_data, perm=[2, 0, 1])
        prob_arg = prob or fn.random.uniform(range=(0.05, 0.5))
        salt_vs_pepper_arg = salt_vs_pepper or fn.random.uniform(range=(0.25, 0.75))
        out_data = fn.noise.salt_and_pepper(in_data, per_channel=per_channel, prob=prob_arg, salt_vs_pepper=salt_vs_pepper_arg, salt_val=salt_val, pepper_val=pepper_val)
        return in_data, out_data, prob_arg, salt_vs_pepper_arg

    pipe = _image_pipe(images_dir, batch_size, build, device=device, seed=12345)
    salt = 255 if salt_val is None else salt_val
    pepper = 0 if pepper_val is None else pepper_val
    rng = np.random.default_rng(0)
    for _ in range(3):
        in_data, out_data, prob_arg, svp_arg = pipe.run()
        ins, outs = _arrays(in_data), _arrays(out_data)
        probs = [float(np.array(prob_arg.at(s))) for s in range(batch_size)] if prob is None else [prob] * batch_size
        svps = [float(np.array(svp_arg.at(s))) for s in range(batch_size)] if not salt_vs_pepper else [salt_vs_pepper] * batch_size
        for s in range(batch_size):
            sample_in, sample_out = ins[s], outs[s]
            if channel_first:  # back to channel-last before verifying
                sample_out = np.transpose(sample_out, axes=(1, 2, 0))
                sample_in = np.transpose(sample_in, axes=(1, 2, 0))
            sample_ref = salt_and_pepper_noise_ref(sample_in, probs[s], svps[s], per_channel, salt, pepper, rng)
            psnr_out = _psnr(sample_out, sample_in)
            psnr_ref = _psnr(sample_ref, sample_in)
            verify_salt_and_pepper(sample_out, sample_in, probs[s], svps[s], per_channel, salt, pepper)
            np.testing.assert_allclose(psnr_out, psnr_ref, atol=1)


@pytest.mark.parametrize("per_channel,channel_first,pepper_val,salt_val,prob,salt_vs_pepper,batch_size", _snp_cases())
def test_operator_noise_salt_and_pepper(small_images, per_channel, channel_first, pepper_val, salt_val, prob, salt_vs_pepper, batch_size):
    """test_noise_salt_and_pepper.py (cpu)."""
    _check_salt_and_pepper(small_images, "cpu", per_channel, channel_first, pepper_val, salt_val, prob, salt_vs_pepper, batch_size)


def shot_noise_ref(x, factor, rng):
    x = np.array(x, dtype=np.float32)
    return (np.clip(rng.poisson(x / factor) * factor, 0, 255)).astype(np.uint8)


def _check_shot(images_dir, device, factor, batch_size):
    def build(images):
        in_data = images.gpu() if device == "gpu" else images
        factor_arg = factor or fn.random.uniform(range=(0.1, 100.0))
        return in_data, fn.noise.shot(in_data, factor=factor_arg), factor_arg

    pipe = _image_pipe(images_dir, batch_size, build, device=device, seed=12345)
    rng = np.random.default_rng(0)
    for _ in range(3):
        in_data, out_data, factor_arg = pipe.run()
        ins, outs = _arrays(in_data), _arrays(out_data)
        for s in range(batch_size):
            f = float(np.array(factor_arg.at(s))) if factor is None else factor
            sample_ref = shot_noise_ref(ins[s], f, rng)
            np.testing.assert_allclose(_psnr(outs[s], ins[s]), _psnr(sample_ref, ins[s]), atol=1)


@pytest.mark.parametrize("factor,batch_size", [(None, 3), (0.2, 1), (4, 3), (21.25, 1), (85, 3)])
def test_operator_noise_shot(small_images, factor, batch_size):
    """test_noise_shot.py (cpu)."""
    _check_shot(small_images, "cpu", factor, batch_size)


# ---------------------------------------------------------------- distributions, on both libraries
SHAPE = (256, 256, 3)


@pytest.mark.parametrize("lib", LIBS)
def test_gaussian_moments_on_float_input(lib):
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.gaussian(x, mean=3.0, stddev=7.0), [np.full(SHAPE, 100.0, np.float32)])
    assert out.dtype == np.float32 and out.shape == SHAPE
    d = out.astype(np.float64) - 100.0
    assert abs(d.mean() - 3.0) < 0.1 and abs(d.std() - 7.0) < 0.1
    assert abs(np.mean(np.abs(d - 3.0) < 7.0) - 0.6827) < 0.01  # within one sigma
    assert abs(np.mean(np.abs(d - 3.0) < 14.0) - 0.9545) < 0.005  # within two


@pytest.mark.parametrize("lib", LIBS)
def test_gaussian_rounds_and_saturates_integers(lib):
    """UINT8 adds in float and converts with rounding half away from zero and saturation:
    P(out == 255) = P(n >= 4.5) for 250 + N(0, 10)."""
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.gaussian(x, stddev=10.0), [np.full(SHAPE, 250, np.uint8)])
    assert out.dtype == np.uint8
    p = 0.5 * math.erfc(4.5 / 10.0 / math.sqrt(2.0))
    assert abs(np.mean(out == 255) - p) < 0.005
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.gaussian(x, mean=2.5, stddev=0.0), [np.full((4, 4, 3), 10, np.uint8)])
    assert np.all(out == 13)  # 12.5 rounds away from zero


@pytest.mark.parametrize("lib", LIBS)
def test_gaussian_adds_in_double_for_64_bit_integers(lib):
    """INT64 near 2^40 (where a float's step is 2^17): N(0, 1) noise survives, rounded to
    integers (standard deviation sqrt(1 + 1/12))."""
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.gaussian(x), [np.full(SHAPE, 2**40, np.int64)])
    assert out.dtype == np.int64
    d = (out - 2**40).astype(np.float64)
    assert abs(d.mean()) < 0.015 and abs(d.std() - math.sqrt(1 + 1 / 12)) < 0.02


@pytest.mark.parametrize("lib", LIBS)
def test_gaussian_per_sample_arguments(lib):
    means, stddevs = [-20.0, 0.0, 5.0, 50.0], [0.0, 1.0, 4.0, 16.0]
    data = [np.full((128, 128, 3), 100.0, np.float32)] * 4
    outs, _ = _run(lib, lambda fn, x, a: fn.noise.gaussian(x, mean=a["m"], stddev=a["s"]), data, args={"m": means, "s": stddevs})
    for out, m, s in zip(outs, means, stddevs):
        d = out.astype(np.float64) - 100.0
        if s == 0.0:
            assert np.all(d == m)
        else:
            assert abs(d.mean() - m) < 5 * s / math.sqrt(d.size) + 1e-3 and abs(d.std() / s - 1) < 0.02


def _typed(np_type, shape, value):
    return np.full(shape, value, np_type)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("np_type", NP_TYPES)
def test_salt_and_pepper_default_values_are_the_type_limits(lib, np_type):
    v = 0.25 if np_type == np.float32 else 7
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.5), [_typed(np_type, (40, 40, 3), v)])
    assert out.dtype == np_type
    if np_type == np.float32:
        want = [-1.0, 0.25, 1.0]
    else:
        info = np.iinfo(np_type)
        want = sorted([info.min, 7, info.max])
    np.testing.assert_array_equal(np.unique(out), np.array(want, np_type))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("salt,pepper,want", [(300.0, -1.6, [44, 100, 255]), (-100.7, 255.9, [100, 156, 255]), (100.7, -5.0, [100, 251])])
def test_salt_and_pepper_values_convert_as_cpp_does(lib, salt, pepper, want):
    """`salt_val`/`pepper_val` are floats converted to the type as C++'s static_cast does on
    x86: truncated toward zero, integers wrapped."""
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.5, salt_val=salt, pepper_val=pepper), [np.full((40, 40, 3), 100, np.uint8)])
    np.testing.assert_array_equal(np.unique(out), np.array(want, np.uint8))


@pytest.mark.parametrize("lib", LIBS)
def test_salt_and_pepper_per_sample_values(lib):
    data = [np.full((16, 16, 3), 100, np.int16)] * 3
    args = {"p": [1.0, 1.0, 0.0], "s": [1.0, 0.0, 1.0], "hi": [10.0, 20.0, 30.0], "lo": [-1.0, -2.0, -3.0]}
    outs, _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=a["p"], salt_vs_pepper=a["s"], salt_val=a["hi"], pepper_val=a["lo"]), data, args=args)
    assert np.all(outs[0] == 10) and np.all(outs[1] == -2) and np.all(outs[2] == 100)


def _distinct_channels(shape, channel_axis, seed=0):
    """Values in 1..254 (never salt or pepper), different in every channel of a pixel."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 200, shape).astype(np.uint8)
    c = shape[channel_axis]
    offs = np.arange(c, dtype=np.uint8) * (50 // max(1, c - 1) if c > 1 else 0)
    bshape = [1] * len(shape)
    bshape[channel_axis] = c
    return np.ascontiguousarray(a + offs.reshape(bshape))


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("layout,shape,channel_axis", [("HWC", (64, 80, 3), -1), ("CHW", (3, 64, 80), 0), (None, (64, 80, 3), -1), ("FHWC", (2, 32, 40, 3), -1), ("C", (4,), 0)])
def test_salt_and_pepper_per_pixel_in_every_channel_layout(lib, layout, shape, channel_axis):
    """per_channel=False: a pixel's channels are all kept, all salt or all pepper, in the
    proportions asked for; channels are the layout's C (first or last) or the last axis."""
    data = [_distinct_channels(shape, channel_axis, seed=k) for k in range(2)]
    outs, out_layout = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.3, salt_vs_pepper=0.7), data, layout=layout, iters=2)
    assert out_layout == (layout or "")
    salt = pepper = pixels = 0
    for x, y in zip(data, outs):
        x, y = np.moveaxis(x, channel_axis, -1), np.moveaxis(y, channel_axis, -1)
        kept, s, p = np.all(y == x, -1), np.all(y == 255, -1), np.all(y == 0, -1)
        assert np.all(kept | s | p)
        salt, pepper, pixels = salt + s.sum(), pepper + p.sum(), pixels + s.size
    if pixels > 1000:
        assert abs(salt / pixels - 0.21) < 0.03 and abs(pepper / pixels - 0.09) < 0.03


@pytest.mark.parametrize("lib", LIBS)
def test_salt_and_pepper_per_channel_corrupts_channels_independently(lib):
    data = [_distinct_channels((64, 80, 3), -1)]
    (y,), _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.3, salt_vs_pepper=0.7, per_channel=True), data)
    x = data[0]
    kept, s, p = y == x, y == 255, y == 0
    assert np.all(kept | s | p)
    assert abs(s.mean() - 0.21) < 0.02 and abs(p.mean() - 0.09) < 0.02
    assert np.any(kept.any(-1) & ~kept.all(-1))  # pixels partly corrupted


@pytest.mark.parametrize("lib", LIBS)
def test_salt_and_pepper_extreme_probabilities(lib):
    x = np.full((32, 32, 3), 9, np.int16)
    for prob, svp, want in [(0.0, 0.5, 9), (1.0, 1.0, 32767), (1.0, 0.0, -32768)]:
        (y,), _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=prob, salt_vs_pepper=svp), [x])
        assert np.all(y == want)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("value,factor", [(50.0, 2.0), (50.0, 0.5), (37.5, 1.0), (1e7, 1.0)])
def test_shot_noise_mean_and_variance(lib, value, factor):
    """out / factor ~ Poisson(in / factor): mean in, variance factor * in, multiples of factor."""
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.shot(x, factor=factor), [np.full(SHAPE, value, np.float32)])
    o = out.astype(np.float64)
    n = o.size
    var = factor * value
    assert abs(o.mean() - value) < 5 * math.sqrt(var / n)
    assert abs(o.var() / var - 1) < 5 * math.sqrt(2 / n) + 1e-3
    q = o / factor
    assert np.all(np.abs(q - np.round(q)) < 1e-6 * np.maximum(1, q))


@pytest.mark.parametrize("lib", LIBS)
def test_shot_noise_follows_the_poisson_law(lib):
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.shot(x, factor=1.0), [np.full(SHAPE, 3.0, np.float32)])
    counts = np.bincount(out.astype(np.int64).ravel(), minlength=20)[:20] / out.size
    pmf = np.array([math.exp(-3.0) * 3.0**k / math.factorial(k) for k in range(20)])
    np.testing.assert_allclose(counts, pmf, atol=5 * np.sqrt(pmf / out.size).max())


@pytest.mark.parametrize("lib", LIBS)
def test_shot_noise_default_factor_is_12(lib):
    """DALI 2.4's operator uses 12 when `factor` is not given (its schema says 20)."""
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.shot(x), [np.full(SHAPE, 100.0, np.float32)])
    o = out.astype(np.float64)
    assert abs(o.var() / 1200 - 1) < 0.03
    assert np.all(o % 12 == 0)


@pytest.mark.parametrize("lib", LIBS)
def test_shot_noise_on_integers_saturates_and_clamps_negative_means(lib):
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.shot(x, factor=10.0), [np.full(SHAPE, 250, np.uint8)])
    assert out.dtype == np.uint8 and np.all((out % 10 == 0) | (out == 255)) and np.any(out == 255)
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.shot(x, factor=2.0), [np.full((16, 16, 3), -5, np.int16)])
    assert np.all(out == 0)


@pytest.mark.parametrize("lib", LIBS)
def test_shot_noise_per_sample_factors(lib):
    factors = [0.5, 4.0, 30.0]
    data = [np.full((128, 128, 3), 60.0, np.float32)] * 3
    outs, _ = _run(lib, lambda fn, x, a: fn.noise.shot(x, factor=a["f"]), data, args={"f": factors})
    for o, f in zip(outs, factors):
        o = o.astype(np.float64)
        assert abs(o.var() / (60.0 * f) - 1) < 0.05


def test_shot_noise_large_means():
    """The normal approximation from a mean of 1e10 (Sluice's; DALI's uint32 draws overflow there)."""
    (out,), _ = _run(sluice, lambda fn, x, a: fn.noise.shot(x, factor=1.0), [np.full(SHAPE, 3e12, np.float32)])
    o = out.astype(np.float64)
    assert abs(o.mean() / 3e12 - 1) < 1e-5 and abs(o.var() / 3e12 - 1) < 0.03
    (out,), _ = _run(sluice, lambda fn, x, a: fn.noise.shot(x, factor=1.0), [np.array([np.inf, 0.0, -np.inf], np.float32)], layout=None)
    np.testing.assert_array_equal(out, [np.inf, 0.0, 0.0])


def test_shot_zero_factor_returns_the_input():
    """As DALI documents ("a factor of 0 makes this an identity operation"); DALI 2.4's
    operator returns zeros."""
    x = (np.arange(300, dtype=np.int32) - 100).reshape(10, 10, 3)
    (out,), _ = _run(sluice, lambda fn, x, a: fn.noise.shot(x, factor=0.0), [x])
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoints_restore_the_noise(lib):
    @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, enable_checkpointing=True, seed=4)
    def pipe():
        x = lib.fn.random.uniform(range=[0.0, 255.0], shape=[12, 10, 3])
        return lib.fn.noise.gaussian(x, stddev=5.0), lib.fn.noise.salt_and_pepper(x), lib.fn.noise.shot(x, factor=3.0)

    p = pipe()
    p.build()
    for _ in range(3):
        p.run()
    restored = pipe(checkpoint=p.checkpoint())
    restored.build()
    for _ in range(3):
        for a, b in zip(p.run(), restored.run()):
            for s, t in zip(_arrays(a), _arrays(b)):
                np.testing.assert_array_equal(s, t)


# ---------------------------------------------------------------- determinism, types, shapes
BUILDS = {
    "gaussian": lambda fn, x, a: fn.noise.gaussian(x, mean=1.0, stddev=20.0),
    "salt_and_pepper": lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.2, per_channel=True),
    "salt_and_pepper_per_pixel": lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.2),
    "shot": lambda fn, x, a: fn.noise.shot(x, factor=3.0),
}


def _images(n, shape=(300, 400, 3), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape).astype(np.uint8) for _ in range(n)]


def _iterations(build, data, n=2, **kw):
    pipe = _pipe(sluice, build, data, **kw)
    return [_arrays(pipe.run()[0]) for _ in range(n)]


@pytest.mark.parametrize("op", list(BUILDS))
def test_same_seed_same_bits_whatever_the_thread_count(op):
    data = _images(3)  # 360000 elements a sample: several chunks
    a = _iterations(BUILDS[op], data, num_threads=1)
    b = _iterations(BUILDS[op], data, num_threads=4)
    for x, y in zip(a, b):
        for s, t in zip(x, y):
            np.testing.assert_array_equal(s, t)


@pytest.mark.parametrize("op", list(BUILDS))
def test_iterations_samples_and_seeds_draw_anew(op):
    same = _images(1)
    data = same * 3
    (it0, it1) = _iterations(BUILDS[op], data)
    assert not np.array_equal(it0[0], it1[0])
    assert not np.array_equal(it0[0], it0[1]) and not np.array_equal(it0[1], it0[2])
    other = _iterations(BUILDS[op], data, n=1, seed=8)[0]
    assert not np.array_equal(other[0], it0[0])
    # An explicit seed fixes the stream whatever the pipeline's seed.
    seeded = lambda fn, x, a: {"gaussian": fn.noise.gaussian, "shot": fn.noise.shot}.get(op, fn.noise.salt_and_pepper)(x, seed=42)
    a = _iterations(seeded, data, n=1, seed=1)[0]
    b = _iterations(seeded, data, n=1, seed=2)[0]
    np.testing.assert_array_equal(a[0], b[0])


@pytest.mark.parametrize("op", list(BUILDS))
@pytest.mark.parametrize("np_type", NP_TYPES)
def test_output_type_shape_and_layout_are_the_inputs(op, np_type):
    rng = np.random.default_rng(1)
    shapes = [(5, 7, 3), (0, 4, 3), (1, 1, 3), (33, 2, 3)]
    data = [(rng.random(s) * 100).astype(np_type) for s in shapes]
    outs, layout = _run(sluice, BUILDS[op], data)
    assert layout == "HWC"
    for x, y in zip(data, outs):
        assert y.dtype == x.dtype and y.shape == x.shape


@pytest.mark.parametrize("op", ["gaussian", "salt_and_pepper", "shot"])
def test_stddev_zero_prob_zero_and_neutral_arguments_copy(op):
    data = _images(2, (20, 30, 3))
    build = {
        "gaussian": lambda fn, x, a: fn.noise.gaussian(x, stddev=0.0),
        "salt_and_pepper": lambda fn, x, a: fn.noise.salt_and_pepper(x, prob=0.0),
        "shot": lambda fn, x, a: fn.noise.shot(x, factor=0.0),
    }[op]
    outs, _ = _run(sluice, build, data)
    for x, y in zip(data, outs):
        np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------- errors
def _feed(it):
    """A source of no argument giving the next list of values of `it`, as float32 scalars."""
    return lambda: [np.float32(v) for v in next(it)]


def _error_pipe(build, batches, layout="HWC", args=None):
    """A pipeline fed `batches` in turn (and per-sample `args`, one list per batch)."""
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        nodes = {k: fn.external_source(source=_feed(i), batch=True) for k, i in arg_its.items()}
        pipe.set_outputs(build(x, nodes))
    pipe.build()
    return pipe


@pytest.mark.parametrize("op", ["gaussian", "salt_and_pepper", "shot"])
@pytest.mark.parametrize("np_type,name", [(np.float16, "FLOAT16"), (np.float64, "FLOAT64"), (np.bool_, "BOOL")])
def test_unsupported_types_name_the_type(op, np_type, name):
    build = {"gaussian": fn.noise.gaussian, "salt_and_pepper": fn.noise.salt_and_pepper, "shot": fn.noise.shot}[op]
    with pytest.raises(RuntimeError, match=rf"(?s)noise\.{op}.*{name}.*supported: {SUPPORTED}"):
        _error_pipe(lambda x, a: build(x), [[np.zeros((4, 4, 3), np_type)]]).run()


def test_bad_argument_values_name_operator_argument_and_sample_and_the_pipeline_goes_on():
    good = [np.zeros((4, 4, 3), np.uint8)] * 3
    cases = [
        (lambda x, a: fn.noise.gaussian(x, stddev=a["v"]), [[1.0, -1.0, 1.0], [1.0, 1.0, 1.0]], r"(?s)noise\.gaussian.*stddev.*>= 0.*sample 1"),
        (lambda x, a: fn.noise.gaussian(x, mean=a["v"]), [[0.0, 0.0, float("nan")], [0.0, 0.0, 0.0]], r"(?s)noise\.gaussian.*mean.*finite.*sample 2"),
        (lambda x, a: fn.noise.salt_and_pepper(x, prob=a["v"]), [[1.5, 0.1, 0.1], [0.1, 0.1, 0.1]], r"(?s)noise\.salt_and_pepper.*prob.*\[0, 1\].*sample 0"),
        (lambda x, a: fn.noise.salt_and_pepper(x, salt_vs_pepper=a["v"]), [[0.5, 0.5, -0.1], [0.5, 0.5, 0.5]], r"(?s)noise\.salt_and_pepper.*salt_vs_pepper.*\[0, 1\].*sample 2"),
        (lambda x, a: fn.noise.shot(x, factor=a["v"]), [[1.0, float("inf"), 1.0], [1.0, 1.0, 1.0]], r"(?s)noise\.shot.*factor.*finite.*sample 1"),
    ]
    for build, values, pattern in cases:
        pipe = _error_pipe(build, [good, good], args={"v": values})
        with pytest.raises(ValueError, match=pattern):
            pipe.run()
        (out,) = pipe.run()
        assert np.array(out.at(2)).shape == (4, 4, 3)
    with pytest.raises(ValueError, match=r"(?s)noise\.gaussian.*stddev.*>= 0.*sample 0"):
        _error_pipe(lambda x, a: fn.noise.gaussian(x, stddev=-2.0), [good]).run()
    with pytest.raises(ValueError, match=r"(?s)noise\.salt_and_pepper.*prob.*\[0, 1\]"):
        _error_pipe(lambda x, a: fn.noise.salt_and_pepper(x, prob=1.01), [good]).run()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("layout,shape", [("HW", (4, 4)), ("HCW", (4, 3, 4))])
def test_per_pixel_noise_needs_channels_first_or_last(lib, layout, shape):
    pipe = _pipe(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x), [np.zeros(shape, np.uint8)], layout=layout)
    with pytest.raises(RuntimeError, match=rf"(?s)'C' should be the first or the last dimension in the layout.*{layout}"):
        pipe.run()
    # per_channel=True treats every element alike, whatever the layout.
    (out,), _ = _run(lib, lambda fn, x, a: fn.noise.salt_and_pepper(x, per_channel=True), [np.zeros(shape, np.uint8)], layout=layout)
    assert out.shape == shape


def test_per_pixel_noise_on_scalars_is_an_error():
    """DALI 2.4 crashes here (its channel dimension is -1)."""
    with pytest.raises(RuntimeError, match=r"(?s)noise\.salt_and_pepper.*'C' should be the first or the last.*0 dimensions"):
        _error_pipe(lambda x, a: fn.noise.salt_and_pepper(x), [[np.array(5, np.uint8)]], layout=None).run()


# ---------------------------------------------------------------- gpu
def _cpu_and_gpu(build, data, layout="HWC", args=None, iters=2):
    """Runs `build(fn, x, args, seed)` on the cpu and on the gpu in one pipeline with the same
    explicit seed (so both draw the same numbers); returns both outputs of the last iteration."""
    def both(fn, x, a):
        return build(fn, x, a, 77), build(fn, x.gpu(), a, 77)

    pipe = _pipe(sluice, both, data, layout, args, gpu_pipeline=True)
    for _ in range(iters):
        cpu, gpu = pipe.run()
    return _arrays(cpu), _arrays(gpu)


def _gpu_images(np_type, shape, n, seed):
    rng = np.random.default_rng(seed)
    if np_type == np.float32:
        return [(rng.random(shape) * 255).astype(np.float32) for _ in range(n)]
    info = np.iinfo(np_type)
    lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
    return [rng.integers(lo, hi, shape, endpoint=True).astype(np_type) for _ in range(n)]


@pytest.mark.parametrize("np_type", NP_TYPES)
@pytest.mark.parametrize("per_channel,layout", [(True, "HWC"), (False, "HWC"), (False, "CHW")])
def test_gpu_salt_and_pepper_equals_cpu(np_type, per_channel, layout):
    require_gpu()
    shape = (300, 400, 3) if layout == "HWC" else (3, 300, 400)
    data = _gpu_images(np_type, shape, 3, seed=1) + [np.zeros((0, 5, 3) if layout == "HWC" else (3, 0, 5), np_type)]
    args = {"p": [0.1, 0.5, 0.9, 0.3], "s": [0.5, 0.2, 1.0, 0.5]}
    cpu, gpu = _cpu_and_gpu(lambda fn, x, a, seed: fn.noise.salt_and_pepper(x, prob=a["p"], salt_vs_pepper=a["s"], per_channel=per_channel, salt_val=3.0, seed=seed), data, layout, args)
    for c, g in zip(cpu, gpu):
        assert c.dtype == g.dtype and c.shape == g.shape
        np.testing.assert_array_equal(c, g)


@pytest.mark.parametrize("np_type", NP_TYPES)
def test_gpu_gaussian_matches_cpu(np_type):
    require_gpu()
    data = _gpu_images(np_type, (300, 400, 3), 3, seed=2) + [np.zeros((0, 5, 3), np_type)]
    args = {"m": [0.0, -3.5, 1e3, 2.0], "s": [1.0, 30.0, 0.0, 7.0]}
    cpu, gpu = _cpu_and_gpu(lambda fn, x, a, seed: fn.noise.gaussian(x, mean=a["m"], stddev=a["s"], seed=seed), data, "HWC", args)
    for c, g in zip(cpu, gpu):
        assert c.dtype == g.dtype and c.shape == g.shape
        np.testing.assert_array_equal(g, c)


@pytest.mark.parametrize("np_type", NP_TYPES)
def test_gpu_shot_matches_cpu(np_type):
    """Equal but on at most 1e-4 of the elements (where CUDA's log/exp could flip a
    rejection test)."""
    require_gpu()
    data = _gpu_images(np_type, (300, 400, 3), 3, seed=3) + [np.zeros((0, 5, 3), np_type)]
    args = {"f": [0.3, 7.0, 0.0, 1e-3]}  # small and large means, identity
    cpu, gpu = _cpu_and_gpu(lambda fn, x, a, seed: fn.noise.shot(x, factor=a["f"], seed=seed), data, "HWC", args)
    for c, g in zip(cpu, gpu):
        assert c.dtype == g.dtype and c.shape == g.shape
        if c.size:
            assert np.mean(c != g) <= 1e-4
    np.testing.assert_array_equal(gpu[2], data[2])


@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("mean,stddev,variable_dist_params", [(10.0, 57.0, False), (0.0, 0.0, True)])
def test_gpu_operator_noise_gaussian_vs_add_normal_dist(small_images, batch_size, mean, stddev, variable_dist_params):
    """test_noise_gaussian.py's gpu cases: random.normal has no gpu backend in Sluice, so the
    gpu noise is compared with the cpu's `x + random.normal(x)` (DALI: within 0.1)."""
    require_gpu()

    def build(images):
        in_data = fn.cast(images, dtype=types.FLOAT)
        mean_arg, stddev_arg = mean, stddev
        if variable_dist_params:
            mean_arg = fn.random.uniform(range=(-50.0, 50.0))
            stddev_arg = fn.random.uniform(range=(1.0, 10.0))
        out_data1 = fn.noise.gaussian(in_data.gpu(), mean=mean_arg, stddev=stddev_arg, seed=12345)
        out_data2 = in_data + fn.random.normal(in_data, mean=mean_arg, stddev=stddev_arg, seed=12345)
        return out_data1, out_data2

    pipe = _image_pipe(small_images, batch_size, build, device="gpu")
    for _ in range(3):
        out0, out1 = pipe.run()
        for c, g in zip(_arrays(out1), _arrays(out0)):
            # x + normal rounds the normal to FLOAT first; the noise adds it in double.
            assert c.dtype == g.dtype and c.shape == g.shape
            np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-5 * 57.0)
        for a, b in zip(_arrays(out0), _arrays(out1)):
            np.testing.assert_allclose(a, b, atol=0.1)  # DALI's check_batch eps


@pytest.mark.parametrize("per_channel,channel_first,pepper_val,salt_val,prob,salt_vs_pepper,batch_size", _snp_cases()[::3])
def test_gpu_operator_noise_salt_and_pepper(small_images, per_channel, channel_first, pepper_val, salt_val, prob, salt_vs_pepper, batch_size):
    """test_noise_salt_and_pepper.py's gpu cases (every third of the grid)."""
    require_gpu()
    _check_salt_and_pepper(small_images, "gpu", per_channel, channel_first, pepper_val, salt_val, prob, salt_vs_pepper, batch_size)


@pytest.mark.parametrize("factor,batch_size", [(None, 3), (0.2, 1), (4, 3), (21.25, 1), (85, 3)])
def test_gpu_operator_noise_shot(small_images, factor, batch_size):
    """test_noise_shot.py's gpu cases."""
    require_gpu()
    _check_shot(small_images, "gpu", factor, batch_size)
