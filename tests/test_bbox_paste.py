"""`fn.bbox_paste` (cpu, as DALI) against DALI 2.4's cpu operator.

- Parity, bit for bit: `ltrb` and `xywh`, ratios from 1 to 100 (the offset pulled back so
  boxes stay inside), `paste_x` / `paste_y` from 0 to 1 and beyond, constants and per-sample
  argument inputs, (N, 4), flat and (N, 1, 4) samples, empty samples. DALI has no Python
  test of its own for the operator; its C++ test (bbox_paste_test.cc) checks the formula
  the parity cases cover, and its `xywh` corner case is ported below.
- Errors: non-float boxes, a sample that is not a multiple of 4 values (DALI refuses it
  too), a ratio below 1 (Sluice refuses it, naming the sample; DALI's documentation requires
  at least 1 but computes boxes off the canvas): operator, argument or sample named, the
  pipeline goes on.
"""

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import dali_or_none

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def _const(v):
    return lambda: v


def _run(lib, data, args=None, **kw):
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=2, device_id=None)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True)
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        pipe.set_outputs(lib.fn.bbox_paste(x, **kw, **nodes))
    pipe.build()
    (out,) = pipe.run()
    return [np.array(out.at(i)) for i in range(len(out))]


def _same_bits(ours, ref):
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def _batch(seed, ltrb):
    rng = np.random.default_rng(seed)
    out = []
    for n in (4, 0, 1, 25, 9):
        lo = rng.uniform(0, 1, (n, 2))
        ext = rng.uniform(0, 1, (n, 2)) * (1 - lo)
        out.append(np.concatenate([lo, lo + ext if ltrb else ext], axis=1).astype(np.float32))
    return out


@needs_dali
@pytest.mark.parametrize("ltrb", [False, True])
@pytest.mark.parametrize("ratio", [1.0, 1.25, 2.0, 3.0, 7.7, 100.0])
@pytest.mark.parametrize("paste", [(0.5, 0.5), (0.0, 1.0), (1.0, 0.0), (0.3, 0.9), (1.0, 1.0)])
def test_equals_dali(ltrb, ratio, paste):
    data = _batch(int(ratio * 10), ltrb)
    kw = dict(ltrb=ltrb, ratio=ratio, paste_x=paste[0], paste_y=paste[1])
    _same_bits(_run(sluice, data, **kw), _run(dali, data, **kw))


@needs_dali
@pytest.mark.parametrize("ltrb", [False, True])
def test_per_sample_arguments_equal_dali(ltrb):
    data = _batch(5, ltrb)
    n = len(data)
    f32 = lambda vs: [np.array(v, np.float32) for v in vs]  # noqa: E731
    args = {"ratio": f32([1.0, 2.5, 3.0, 1.1, 9.0][:n]), "paste_x": f32([0.0, 0.2, 1.0, 0.7, 0.5][:n]), "paste_y": f32([1.0, 0.0, 0.3, 1.0, 0.5][:n])}
    _same_bits(_run(sluice, data, args, ltrb=ltrb), _run(dali, data, args, ltrb=ltrb))
    only_ratio = {"ratio": args["ratio"]}
    _same_bits(_run(sluice, data, only_ratio, ltrb=ltrb, paste_x=0.25), _run(dali, data, only_ratio, ltrb=ltrb, paste_x=0.25))


@needs_dali
def test_any_shape_of_a_multiple_of_4_values_equals_dali():
    data = [b.reshape(-1) for b in _batch(1, True)]
    _same_bits(_run(sluice, data, ltrb=True, ratio=2), _run(dali, data, ltrb=True, ratio=2))
    data = [b.reshape(-1, 1, 4) for b in _batch(2, False)]
    _same_bits(_run(sluice, data, ratio=3, paste_x=0.1), _run(dali, data, ratio=3, paste_x=0.1))


def test_dali_cpp_formula():
    """bbox_paste_test.cc's idea: (x, y) -> (x / r + px (r - 1) / r, ...), (w, h) -> (w, h) / r."""
    b = np.array([[0.2, 0.4, 0.5, 0.25]], np.float32)
    (out,) = _run(sluice, [b], ratio=2.0, paste_x=0.0, paste_y=1.0)
    assert np.allclose(out, [[0.1, 0.2 + 0.5, 0.25, 0.125]])
    (out,) = _run(sluice, [b], ltrb=True, ratio=4.0, paste_x=1.0, paste_y=0.0)
    assert np.allclose(out, [[0.05 + 0.75, 0.1, 0.125 + 0.75, 0.0625]], atol=1e-6)
    # Boxes inside [0, 1] stay inside whatever the ratio and paste position.
    full = np.array([[0.0, 0.0, 1.0, 1.0]], np.float32)
    for r in (1.0, 1.0001, 3.3, 17.0):
        for p in (0.0, 0.5, 1.0):
            (out,) = _run(sluice, [full], ltrb=True, ratio=r, paste_x=p, paste_y=p)
            assert out.min() >= 0.0 and out.max() <= 1.0, (r, p, out)


def _error_pipe(batches, args=None, **kw):
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = sluice.pipeline.Pipeline(batch_size=len(batches[0]), num_threads=1, device_id=None)
    with pipe:
        x = sluice.fn.external_source(source=lambda: next(it), batch=True)
        nodes = {k: sluice.fn.external_source(source=(lambda i: lambda: next(i))(i), batch=True) for k, i in arg_its.items()}
        pipe.set_outputs(sluice.fn.bbox_paste(x, **kw, **nodes))
    pipe.build()
    return pipe


def test_not_a_multiple_of_4_names_the_sample_and_the_pipeline_goes_on():
    good = [np.zeros((1, 5), np.float32), np.zeros((1, 5), np.float32)]
    bad = [np.zeros((1, 5), np.float32), np.zeros((3, 5), np.float32)]
    pipe = _error_pipe([[np.zeros(8, np.float32), np.zeros(6, np.float32)], [np.zeros(8, np.float32)] * 2], ratio=2)
    with pytest.raises(errors.DataError, match=r"(?s)bbox_paste.*sample 1.*bboxes.*multiple of 4"):
        pipe.run()
    (out,) = pipe.run()
    assert np.allclose(np.array(out.at(0)), [0.25, 0.25, 0, 0, 0.25, 0.25, 0, 0])
    if dali is not None:
        with pytest.raises(RuntimeError):
            _run(dali, [np.zeros(6, np.float32)], ratio=2)
    del good, bad


def test_ratio_below_one_names_argument_and_sample():
    data = [np.zeros((1, 4), np.float32)] * 3
    f32 = lambda vs: [np.array(v, np.float32) for v in vs]  # noqa: E731
    pipe = _error_pipe([data, data], {"ratio": [f32([2, 2, 0.5]), f32([2, 2, 2])]})
    with pytest.raises(errors.ArgumentError, match=r"(?s)bbox_paste.*'ratio'.*sample 2"):
        pipe.run()
    pipe.run()
    with pytest.raises(errors.ArgumentError, match=r"(?s)bbox_paste.*'ratio'.*sample 0"):
        _run(sluice, data, ratio=0.0)


def test_ratio_is_required_and_boxes_must_be_float():
    with pytest.raises(errors.SluiceError, match="ratio"):
        _run(sluice, [np.zeros((1, 4), np.float32)])
    with pytest.raises(errors.ArgumentTypeError, match=r"bbox_paste.*FLOAT"):
        _run(sluice, [np.zeros((1, 4), np.float64)], ratio=2)


def test_legacy_ops_class():
    data = _batch(3, False)
    pipe = sluice.pipeline.Pipeline(batch_size=len(data), num_threads=1, device_id=None)
    op = sluice.ops.BBoxPaste(device="cpu", ratio=2.0, paste_x=0.1)
    with pipe:
        pipe.set_outputs(op(sluice.fn.external_source(source=_const(data), batch=True)))
    pipe.build()
    (out,) = pipe.run()
    _same_bits([np.array(out.at(i)) for i in range(len(out))], _run(sluice, data, ratio=2.0, paste_x=0.1))
