"""`fn.roi_random_crop` (cpu, as in DALI 2.4): DALI's test_roi_random_crop.py ported (its
random choice of constant or per-sample crop and ROI made a parameter, so every combination
runs), with its invariants checked on Sluice and on DALI 2.4 alike: the window contains the
ROI when it is larger, lies within it when smaller, and stays inside the input shape when one
is known. Sluice's random streams are its own, so the values differ from DALI's; the
distribution does not: starts are uniform over the allowed range (a chi-square bound, both
libraries). Also: the output (INT64, one start per dimension), broadcasting of one-value
arguments, errors (DALI's messages, and Sluice's naming operator, argument and sample, the
pipeline usable after a bad batch), and determinism across thread counts."""

import re

import numpy as np
import pytest

import sluice
from sluice import fn, types

from conftest import library_params

LIBS = library_params()


def _pipe(lib, batch_size, num_threads=4, seed=1234):
    return lib.pipeline.Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=seed)


def _samples(batch):
    return [np.array(batch.at(i)) for i in range(len(batch))]


def check_crop_start(crop_start, roi_start, roi_shape, crop_shape, in_shape=None):
    """DALI's invariant, one sample."""
    ndim = len(crop_start)
    roi_end = [roi_start[d] + roi_shape[d] for d in range(ndim)]
    crop_end = [crop_start[d] + crop_shape[d] for d in range(ndim)]
    for d in range(ndim):
        if in_shape is not None:
            assert crop_start[d] >= 0
            assert crop_end[d] <= in_shape[d]
        if crop_shape[d] >= roi_shape[d]:
            assert crop_start[d] <= roi_start[d]
            assert crop_end[d] >= roi_end[d]
        else:
            assert crop_start[d] >= roi_start[d]
            assert crop_end[d] <= roi_end[d]


# DALI's grid: (roi_start_min, roi_start_max, roi_extent_min, roi_extent_max, crop_extent_min, crop_extent_max)
DALI_RANGES = [(20, 50, 10, 20, 30, 40), (20, 50, 100, 140, 30, 40), (0, 1, 10, 20, 80, 100)]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("ranges", DALI_RANGES)
@pytest.mark.parametrize("const_crop,const_roi", [(True, True), (False, False), (True, False), (False, True)])
def test_roi_random_crop(lib, ndim, ranges, const_crop, const_roi):
    """DALI's check_roi_random_crop: six variants (roi_shape / roi_end; unbounded, shape of
    the input, `in_shape`) on a variable batch size, 3 iterations."""
    roi_min_start, roi_max_start, roi_min_extent, roi_max_extent, crop_min_extent, crop_max_extent = ranges
    max_batch_size, in_shape_min, in_shape_max, niter = 16, 250, 300, 3
    rng = np.random.default_rng(4321)

    def data_gen_f():
        bs = int(rng.integers(1, max_batch_size))
        # Only the shape matters; uint8, not DALI's float32: a quarter of the bytes to copy
        # (3-D samples of up to 300^3).
        return [np.zeros(rng.integers(in_shape_min, in_shape_max, size=ndim), dtype=np.uint8) for _ in range(bs)]

    pipe = _pipe(lib, max_batch_size)
    with pipe:
        shape_like_in = lib.fn.external_source(data_gen_f, device="cpu")
        in_shape = shape_like_in.shape(dtype=lib.types.INT32)
        if const_crop:
            crop_shape = [(crop_min_extent + crop_max_extent) // 2] * ndim
        else:
            crop_shape = lib.fn.random.uniform(range=(crop_min_extent, crop_max_extent + 1), shape=(ndim,), dtype=lib.types.INT32)
        if const_roi:
            roi_shape = [(roi_min_extent + roi_max_extent) // 2] * ndim
            roi_start = [(roi_min_start + roi_max_start) // 2] * ndim
            roi_end = [roi_start[d] + roi_shape[d] for d in range(ndim)]
        else:
            roi_shape = lib.fn.random.uniform(range=(roi_min_extent, roi_max_extent + 1), shape=(ndim,), dtype=lib.types.INT32)
            roi_start = lib.fn.random.uniform(range=(roi_min_start, roi_max_start + 1), shape=(ndim,), dtype=lib.types.INT32)
            roi_end = roi_start + roi_shape
        crop = lib.fn.roi_random_crop
        outs = [
            crop(crop_shape=crop_shape, roi_start=roi_start, roi_shape=roi_shape),
            crop(crop_shape=crop_shape, roi_start=roi_start, roi_end=roi_end),
            crop(shape_like_in, crop_shape=crop_shape, roi_start=roi_start, roi_shape=roi_shape),
            crop(shape_like_in, crop_shape=crop_shape, roi_start=roi_start, roi_end=roi_end),
            crop(in_shape=in_shape, crop_shape=crop_shape, roi_start=roi_start, roi_shape=roi_shape),
            crop(in_shape=in_shape, crop_shape=crop_shape, roi_start=roi_start, roi_end=roi_end),
        ]
        # Constants are not pipeline outputs: only the DataNodes go out, constants are known.
        nodes = {"roi_start": roi_start, "roi_shape": roi_shape, "crop_shape": crop_shape}
        nodes = {k: v for k, v in nodes.items() if not isinstance(v, list)}
        pipe.set_outputs(in_shape, *nodes.values(), *outs)
    pipe.build()
    for _ in range(niter):
        got = pipe.run()
        in_shapes = _samples(got[0])
        per_sample = dict(zip(nodes, (_samples(b) for b in got[1:1 + len(nodes)])))
        results = [_samples(b) for b in got[1 + len(nodes):]]
        assert len(in_shapes) >= 1
        for r, b in zip(results, got[1 + len(nodes):]):
            assert b.dtype == lib.types.INT64 and len(r) == len(in_shapes)
        for s in range(len(in_shapes)):
            value = {"roi_start": roi_start, "roi_shape": roi_shape, "crop_shape": crop_shape}
            value.update({k: v[s] for k, v in per_sample.items()})
            rs, rsh, cs = (np.asarray(value[k]).tolist() for k in ("roi_start", "roi_shape", "crop_shape"))
            for idx in range(0, 2):
                assert results[idx][s].shape == (ndim,)
                check_crop_start(results[idx][s].tolist(), rs, rsh, cs)
            for idx in range(2, 6):
                check_crop_start(results[idx][s].tolist(), rs, rsh, cs, in_shapes[s].tolist())


# (positional data, in_shape, crop_shape, roi_start, roi_shape, roi_end, DALI's message, the argument Sluice names)
_IN, _CROP, _START, _SHAPE = np.array([4, 4]), np.array([2, 2]), np.array([1, 1]), np.array([1, 1])
ERROR_CASES = [
    # DALI's test_roi_random_crop_error_incompatible_args
    (np.zeros(_IN), _IN, _CROP, _START, _SHAPE, None, "``in_shape`` argument is incompatible with providing an input.", "in_shape"),
    (np.zeros(_IN), None, _CROP, _START, _SHAPE, np.array([2, 2]), "Either ROI end or ROI shape should be defined, but not both", "roi_shape"),
    # DALI's test_roi_random_crop_error_wrong_args
    (None, np.array([-4, 4]), _CROP, _START, _SHAPE, None, "Input shape can't be negative.", "in_shape"),
    (None, _IN, np.array([1, -1]), _START, _SHAPE, None, "Crop shape can't be negative", "crop_shape"),
    (None, _IN, _CROP, np.array([-1, -1]), _SHAPE, None, "ROI can't be out of bounds.", "roi_start"),
    (None, _IN, _CROP, _START, np.array([4, 4]), None, "ROI can't be out of bounds.", "roi_shape"),
    (None, _IN, _CROP, _START, None, np.array([5, 5]), "ROI can't be out of bounds.", "roi_end"),
    (None, _IN, np.array([10, 10]), _START, _SHAPE, None, "Cropping shape can't be bigger than the input shape.", "crop_shape"),
    # not in DALI's test: neither roi_end nor roi_shape (DALI's message is the same)
    (None, _IN, _CROP, _START, None, None, "Either ROI end or ROI shape should be defined", "roi_end"),
    # the ROI in the data's shape: out of bounds at the far edge
    (np.zeros(_IN), None, _CROP, np.array([3, 3]), np.array([2, 2]), None, "ROI can't be out of bounds.", "roi_shape"),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("data,in_shape,crop_shape,roi_start,roi_shape,roi_end,ref_msg,arg", ERROR_CASES)
def test_roi_random_crop_errors(lib, data, in_shape, crop_shape, roi_start, roi_shape, roi_end, ref_msg, arg):
    """DALI's check_roi_random_crop_error: both libraries raise a RuntimeError with DALI's
    phrase; Sluice's also names the operator and the argument."""
    pattern = re.escape(ref_msg).replace(r"\.", ".")
    if lib is sluice:
        pattern = rf"(?s)roi_random_crop: argument '{arg}'.*" + pattern
    with pytest.raises(RuntimeError, match=pattern):
        pipe = _pipe(lib, 3)
        with pipe:
            inputs = [] if data is None else [data]
            out = lib.fn.roi_random_crop(*inputs, in_shape=in_shape, crop_shape=crop_shape, roi_start=roi_start, roi_shape=roi_shape, roi_end=roi_end)
            pipe.set_outputs(out)
        pipe.build()
        for _ in range(3):
            pipe.run()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kw,own_match", [
    # one value per dimension of crop_shape (or one for all)
    (dict(crop_shape=[2, 2], roi_start=[0, 0, 0], roi_shape=[1, 1]), r"'roi_start'.*sample 0 has 3 values; expected 2"),
    (dict(crop_shape=[2, 2], roi_start=[0, 0], roi_shape=[1, 1], in_shape=[8, 8, 8]), r"'in_shape'.*sample 0 has 3 values; expected 2"),
])
def test_wrong_lengths(lib, kw, own_match):
    with pytest.raises(RuntimeError, match=("(?s)roi_random_crop.*" + own_match) if lib is sluice else None):
        pipe = _pipe(lib, 2)
        with pipe:
            pipe.set_outputs(lib.fn.roi_random_crop(**kw))
        pipe.build()
        pipe.run()


@pytest.mark.parametrize("lib", LIBS)
def test_per_sample_crop_shapes_must_agree_in_length(lib):
    """Every sample's start has as many values as its crop: one output shape (DALI: 'Expected
    uniform shape')."""
    match = r"(?s)roi_random_crop: argument 'crop_shape'.*sample 1 has 1 values, earlier samples 2" if lib is sluice else "uniform"
    with pytest.raises(RuntimeError, match=match):
        pipe = _pipe(lib, 2)
        with pipe:
            crop = lib.fn.external_source(lambda: [np.array([2, 2], np.int32), np.array([2], np.int32)])
            pipe.set_outputs(lib.fn.roi_random_crop(crop_shape=crop, roi_start=0, roi_shape=1))
        pipe.build()
        pipe.run()


def test_sluice_only_errors():
    """Where DALI reads past the input's shape (fewer dimensions than the crop) or fails on
    the argument's type (a fractional float), Sluice names the argument."""
    cases = [
        (lambda: fn.roi_random_crop(np.zeros((20,), np.float32), crop_shape=[4, 4], roi_start=[0, 0], roi_shape=[2, 2]),
         r"'crop_shape'.*sample 0: 2 dimensions, but the input sample has shape \[20\]"),
        (lambda: fn.roi_random_crop(crop_shape=[4, 4], roi_shape=[2, 2],
                                    roi_start=fn.external_source(lambda: [np.array([0.5, 1.0], np.float32)] * 2)),
         r"'roi_start'.*sample 0: values must be integers"),
    ]
    for make, match in cases:
        with pytest.raises(ValueError, match="(?s)roi_random_crop: argument " + match):
            pipe = _pipe(sluice, 2)
            with pipe:
                pipe.set_outputs(make())
            pipe.build()
            pipe.run()


def test_pipeline_usable_after_a_bad_batch():
    """A batch whose in_shape is smaller than the crop fails, naming operator, argument and
    sample; the next good batch runs."""
    batches = [[np.array([30, 30], np.int32)] * 2, [np.array([30, 30], np.int32), np.array([30, 3], np.int32)]]
    calls = iter(range(10**6))

    pipe = _pipe(sluice, 2, num_threads=2)
    with pipe:
        in_shape = fn.external_source(lambda: batches[next(calls) % 2])
        pipe.set_outputs(fn.roi_random_crop(in_shape=in_shape, crop_shape=[10, 10], roi_start=[2, 2], roi_shape=[1, 1]))
    pipe.build()
    errors = oks = 0
    for _ in range(6):
        try:
            (out,) = pipe.run()
        except ValueError as e:
            assert re.search(r"(?s)roi_random_crop: argument 'crop_shape'.*sample 1: Cropping shape can't be bigger than the input shape", str(e)), str(e)
            errors += 1
        else:
            for s in _samples(out):
                check_crop_start(s.tolist(), [2, 2], [1, 1], [10, 10], [30, 30])
            oks += 1
    assert errors and oks, (errors, oks)


@pytest.mark.parametrize("lib", LIBS)
def test_output_broadcast_and_layouts(lib):
    """INT64, one start per dimension; a one-value roi_start / roi_shape / in_shape stands for
    every dimension; the input's leading dimensions bound a crop of fewer dimensions (HWC
    data, HW crop); an empty crop gives an empty start."""
    pipe = _pipe(lib, 3)
    with pipe:
        data = lib.fn.external_source(lambda: [np.zeros((20, 30, 3), np.uint8)] * 3, layout="HWC")
        pipe.set_outputs(
            lib.fn.roi_random_crop(crop_shape=[10, 10], roi_start=0, roi_shape=5, in_shape=20),
            lib.fn.roi_random_crop(data, crop_shape=[20, 10], roi_start=[0, 10], roi_end=[20, 15]),
            lib.fn.roi_random_crop(crop_shape=[], roi_start=[], roi_shape=[]),
            lib.fn.roi_random_crop(crop_shape=[8], roi_start=[5], roi_end=[9]),
        )
    pipe.build()
    for _ in range(3):
        bcast, hwc, empty, one = pipe.run()
        for out, shape in ((bcast, (2,)), (hwc, (2,)), (empty, (0,)), (one, (1,))):
            assert out.dtype == lib.types.INT64 and out.layout() == ""
            assert all(s.shape == shape and s.dtype == np.int64 for s in _samples(out))
        for s in _samples(bcast):
            check_crop_start(s.tolist(), [0, 0], [5, 5], [10, 10], [20, 20])
        for s in _samples(hwc):
            check_crop_start(s.tolist(), [0, 10], [20, 5], [20, 10], [20, 30])
            assert s[0] == 0  # the window spans the whole height
        for s in _samples(one):
            check_crop_start(s.tolist(), [5], [4], [8])


def _chi2_ok(counts):
    """Chi-square of `counts` against equal expected counts, below mean + 5 standard
    deviations of the chi-square distribution (df + 5 sqrt(2 df)): a false alarm far below
    1 in 10^4, no SciPy."""
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() / counts.size
    stat = ((counts - expected) ** 2 / expected).sum()
    df = counts.size - 1
    return stat < df + 5 * np.sqrt(2 * df), stat


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("case", [
    # (crop_shape, roi_start, roi_shape, in_shape or None, the allowed starts per dimension)
    ([5, 8], [10, 10], [20, 4], [100, 100], [range(10, 26), range(6, 11)]),  # within the ROI / containing it
    ([10], [2], [4], [30], [range(0, 3)]),                                    # containing it, clamped at 0
    ([8], [2], [3], None, [range(-3, 3)]),                                    # unbounded: negative starts
    ([7], [20], [4], [25], [range(17, 19)]),                                  # clamped at the far edge
])
def test_starts_are_uniform(lib, case):
    """Every allowed start occurs, no other, and the joint counts pass a chi-square bound."""
    crop_shape, roi_start, roi_shape, in_shape, allowed = case
    batch_size, iters = 64, 60
    pipe = _pipe(lib, batch_size, num_threads=2, seed=77)
    with pipe:
        kw = {} if in_shape is None else {"in_shape": in_shape}
        pipe.set_outputs(lib.fn.roi_random_crop(crop_shape=crop_shape, roi_start=roi_start, roi_shape=roi_shape, **kw))
    pipe.build()
    starts = np.concatenate([np.stack(_samples(pipe.run()[0])) for _ in range(iters)])
    dims = [len(r) for r in allowed]
    counts = np.zeros(dims, np.int64)
    for s in starts:
        for d, r in enumerate(allowed):
            assert int(s[d]) in r, (s, allowed)
        counts[tuple(int(s[d]) - allowed[d][0] for d in range(len(dims)))] += 1
    assert (counts > 0).all(), counts
    ok, stat = _chi2_ok(counts.ravel())
    assert ok, (stat, counts)


def test_same_seed_same_crops_whatever_the_threads():
    def run(threads, seed=42):
        pipe = _pipe(sluice, 8, num_threads=threads, seed=seed)
        with pipe:
            roi_start = fn.random.uniform(range=(0, 40), shape=(3,), dtype=types.INT32)
            crop = fn.random.uniform(range=(5, 60), shape=(3,), dtype=types.INT32)
            pipe.set_outputs(
                fn.roi_random_crop(crop_shape=crop, roi_start=roi_start, roi_shape=[20, 20, 20], in_shape=[100, 100, 100]),
                fn.roi_random_crop(crop_shape=[7, 9], roi_start=[3, 4], roi_end=[30, 12]),
            )
        pipe.build()
        return [[s.tolist() for b in pipe.run() for s in _samples(b)] for _ in range(3)]

    one = run(1)
    assert one == run(4) == run(2)
    assert one != run(1, seed=43)
