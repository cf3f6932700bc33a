"""`fn.bb_flip` (cpu and gpu) against DALI 2.4's cpu operator.

- Parity, bit for bit, with DALI 2.4's cpu operator on random boxes: `ltrb` and `xywh`,
  every combination of `horizontal` / `vertical` as constants and as per-sample argument
  inputs, boxes outside [0, 1], flat (4N,) samples, (N, 1, 4) samples, empty samples.
  `xywh` extents go through DALI's cpu round trip ((x + w) - x), so `w` may change in its
  last bit: the bits are compared.
- DALI's own cases: the C++ test's tables (bb_flip_test.cc: xywh and ltrb boxes, flipped
  horizontally, vertically or not, within 1e-6) and test_detection_pipeline.py's check
  (`horizontal_flip_ref`, ltrb=True) on random boxes; the legacy `ops.BbFlip` class.
- Errors: non-float boxes, samples that are not whole boxes (DALI's gpu refuses them; its
  cpu leaves the remainder unwritten), bad argument inputs: the message names the
  operator and the sample or argument; the pipeline goes on working.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def _const(v):
    return lambda: v


def _run(lib, data, args=None, gpu=False, **kw):
    """`fn.bb_flip` of `data` (a list of samples) with `kw`; `args` maps argument names to
    one array per sample, fed as argument inputs. Returns the output samples."""
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=2, device_id=0 if gpu else None)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True)
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        y = lib.fn.bb_flip(x.gpu() if gpu else x, **kw, **nodes)
        pipe.set_outputs(y)
    pipe.build()
    (out,) = pipe.run()
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _same_bits(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def _boxes(rng, n, ltrb, spread=1.0):
    """`n` random boxes; `spread` > 1 puts some outside [0, 1]."""
    lo = rng.uniform(0, 1, (n, 2)) * spread - (spread - 1) / 2
    ext = rng.uniform(0, 1, (n, 2)) * (1 - lo) * spread
    b = np.concatenate([lo, lo + ext if ltrb else ext], axis=1)
    return b.astype(np.float32)


def _batch(seed, ltrb, spread=1.0):
    rng = np.random.default_rng(seed)
    return [_boxes(rng, n, ltrb, spread) for n in (5, 0, 1, 37, 12, 3)]


FLAGS = [dict(), dict(horizontal=0), dict(vertical=1), dict(horizontal=1, vertical=1), dict(horizontal=0, vertical=0)]


@needs_dali
@pytest.mark.parametrize("ltrb", [False, True])
@pytest.mark.parametrize("flags", FLAGS)
def test_equals_dali_on_random_boxes(ltrb, flags):
    data = _batch(7, ltrb)
    _same_bits(_run(sluice, data, ltrb=ltrb, **flags), _run(dali, data, ltrb=ltrb, **flags))


@needs_dali
@pytest.mark.parametrize("ltrb", [False, True])
def test_equals_dali_outside_the_unit_square(ltrb):
    data = _batch(11, ltrb, spread=3.0)
    data[0][0] = [-0.5, 2.0, 1.5, -1.0]
    for flags in FLAGS:
        _same_bits(_run(sluice, data, ltrb=ltrb, **flags), _run(dali, data, ltrb=ltrb, **flags))


@needs_dali
@pytest.mark.parametrize("ltrb", [False, True])
def test_per_sample_flags_equal_dali(ltrb):
    data = _batch(3, ltrb)
    n = len(data)
    args = {
        "horizontal": [np.array(v, np.int32) for v in [1, 0, 1, 0, 1, 0][:n]],
        "vertical": [np.array(v, np.int32) for v in [0, 0, 1, 1, 1, 0][:n]],
    }
    _same_bits(_run(sluice, data, args, ltrb=ltrb), _run(dali, data, args, ltrb=ltrb))
    only_v = {"vertical": args["vertical"]}
    _same_bits(_run(sluice, data, only_v, ltrb=ltrb, horizontal=0), _run(dali, data, only_v, ltrb=ltrb, horizontal=0))


@needs_dali
def test_flat_and_3d_samples_equal_dali():
    rng = np.random.default_rng(5)
    flat = [_boxes(rng, n, True).reshape(-1) for n in (3, 0, 8)]
    _same_bits(_run(sluice, flat, ltrb=True, vertical=1), _run(dali, flat, ltrb=True, vertical=1))
    deep = [_boxes(rng, n, False).reshape(n, 1, 4) for n in (4, 2)]
    _same_bits(_run(sluice, deep, vertical=1), _run(dali, deep, vertical=1))


# bb_flip_test.cc: input, flipped horizontally, flipped vertically.
ROIS_WH = [
    [[.2, .2, .4, .3], [.4, .2, .4, .3], [.2, .5, .4, .3]],
    [[.0, .0, .5, .5], [.5, .0, .5, .5], [.0, .5, .5, .5]],
    [[.3, .2, .1, .1], [.6, .2, .1, .1], [.3, .7, .1, .1]],
    [[.0, .0, .2, .3], [.8, .0, .2, .3], [.0, .7, .2, .3]],
    [[.0, .0, .1, .1], [.9, .0, .1, .1], [.0, .9, .1, .1]],
    [[.5, .5, .1, .1], [.4, .5, .1, .1], [.5, .4, .1, .1]],
    [[.0, .6, .7, .4], [.3, .6, .7, .4], [.0, .0, .7, .4]],
    [[.6, .2, .3, .3], [.1, .2, .3, .3], [.6, .5, .3, .3]],
    [[.4, .3, .5, .5], [.1, .3, .5, .5], [.4, .2, .5, .5]],
    [[.25, .25, .5, .5], [.25, .25, .5, .5], [.25, .25, .5, .5]],
]
ROIS_LTRB = [
    [[.2, .2, .6, .5], [.4, .2, .8, .5], [.2, .5, .6, .8]],
    [[.0, .0, .5, .5], [.5, .0, 1., .5], [.0, .5, .5, 1.]],
    [[.3, .2, .4, .3], [.6, .2, .7, .3], [.3, .7, .4, .8]],
    [[.0, .0, .2, .3], [.8, .0, 1., .3], [.0, .7, .2, 1.]],
    [[.0, .0, .1, .1], [.9, .0, 1., .1], [.0, .9, .1, 1.]],
    [[.5, .5, .6, .6], [.4, .5, .5, .6], [.5, .4, .6, .5]],
    [[.0, .6, .7, .9], [.3, .6, 1., .9], [.0, .1, .7, .4]],
    [[.6, .2, .9, .5], [.1, .2, .4, .5], [.6, .5, .9, .8]],
    [[.4, .3, .9, .8], [.1, .3, .6, .8], [.4, .2, .9, .7]],
    [[.25, .25, .75, .75], [.25, .25, .75, .75], [.25, .25, .75, .75]],
    [[.5, .5, 1., 1.], [.0, .5, .5, 1.], [.5, .0, 1., .5]],
    [[.5, .5, 1.01, 1.01], [-0.01, .5, .5, 1.01], [.5, -0.01, 1.01, .5]],
    [[-0.01, -0.01, .5, .5], [.5, -0.01, 1.01, .5], [-0.01, .5, .5, 1.01]],
]


@pytest.mark.parametrize("ltrb", [False, True])
@pytest.mark.parametrize("horizontal,vertical", [(1, 0), (0, 1), (0, 0)])
def test_dali_cpp_tables(ltrb, horizontal, vertical):
    table = ROIS_LTRB if ltrb else ROIS_WH
    data = [np.array([row[0]], np.float32) for row in table]
    out = _run(sluice, data, ltrb=ltrb, horizontal=horizontal, vertical=vertical)
    ref = horizontal * 1 + vertical * 2
    for o, row in zip(out, table):
        assert np.abs(o[0] - np.array(row[ref], np.float32)).max() < 1e-6, (row, o)


def horizontal_flip_ref(boxes):
    """test_detection_pipeline.py's reference (boxes only)."""
    boxes = boxes.copy()
    boxes[:, 0], boxes[:, 2] = 1.0 - boxes[:, 2], 1.0 - boxes[:, 0]
    return boxes


def test_detection_pipeline_flip_check():
    data = _batch(21, True)
    for o, b in zip(_run(sluice, data, ltrb=True), data):
        assert np.allclose(o, horizontal_flip_ref(b))


def test_legacy_ops_class():
    data = _batch(2, True)
    pipe = sluice.pipeline.Pipeline(batch_size=len(data), num_threads=1, device_id=None)
    flip = sluice.ops.BbFlip(device="cpu", ltrb=True)
    with pipe:
        pipe.set_outputs(flip(sluice.fn.external_source(source=_const(data), batch=True)))
    pipe.build()
    (out,) = pipe.run()
    _same_bits([np.array(out.at(i)) for i in range(len(out))], _run(sluice, data, ltrb=True))


def _error_pipe(batches, dtype=None):
    """A pipeline fed `batches` in turn."""
    it = iter(batches)
    pipe = sluice.pipeline.Pipeline(batch_size=len(batches[0]), num_threads=1, device_id=None)
    with pipe:
        x = sluice.fn.external_source(source=lambda: next(it), batch=True)
        pipe.set_outputs(sluice.fn.bb_flip(x))
    pipe.build()
    return pipe


@pytest.mark.parametrize(
    "bad,words",
    [
        ([np.zeros((1, 4), np.float32), np.zeros((2, 5), np.float32)], ["sample 1", "(N, 4)", "[2, 5]"]),
        ([np.zeros((1, 4), np.float32), np.zeros((2, 3), np.float32)], ["sample 1", "[2, 3]"]),
        ([np.zeros((6,), np.float32), np.zeros((4,), np.float32)], ["sample 0", "[6]"]),
    ],
)
def test_bad_box_shapes_name_the_sample_and_the_pipeline_goes_on(bad, words):
    good = [np.array([[0.1, 0.2, 0.3, 0.4]], np.float32).reshape((1,) * (bad[0].ndim - 1) + (4,))] * 2
    pipe = _error_pipe([bad, good])
    with pytest.raises(errors.DataError) as e:
        pipe.run()
    for w in ["bb_flip", "bboxes"] + words:
        assert w in str(e.value), (w, str(e.value))
    (out,) = pipe.run()
    assert np.allclose(np.array(out.at(0)).reshape(4), [0.6, 0.2, 0.3, 0.4])


def test_non_float_boxes_are_refused():
    # Raised by the iteration, not the pipeline: the next one raises the same again.
    pipe = _error_pipe([[np.zeros((1, 4), np.float64)] * 2] * 2)
    for _ in range(2):
        with pytest.raises(errors.ArgumentTypeError, match=r"bb_flip.*FLOAT"):
            pipe.run()


def test_bad_argument_input_names_argument_and_sample():
    data = [np.zeros((1, 4), np.float32)] * 2
    with pytest.raises(errors.ArgumentError) as e:
        _run(sluice, data, {"horizontal": [np.array([1], np.int32), np.array([1, 0], np.int32)]})
    for w in ["bb_flip", "horizontal", "sample 1"]:
        assert w in str(e.value)


def test_unknown_argument():
    with pytest.raises(errors.UnknownArgumentError):
        _run(sluice, [np.zeros((1, 4), np.float32)], horizontl=1)


@pytest.mark.parametrize("ltrb", [False, True])
def test_gpu_equals_cpu(ltrb):
    require_gpu()
    data = _batch(9, ltrb, spread=2.0)
    args = {"vertical": [np.array(v % 2, np.int32) for v in range(len(data))]}
    for kw in [dict(), dict(horizontal=0), dict(horizontal=1)]:
        _same_bits(_run(sluice, data, args, gpu=True, ltrb=ltrb, **kw), _run(sluice, data, args, ltrb=ltrb, **kw))
    flat = [b.reshape(-1) for b in data]
    _same_bits(_run(sluice, flat, gpu=True, ltrb=ltrb), _run(sluice, flat, ltrb=ltrb))
