"""`fn.slice` with positional anchor and shape inputs, against DALI 2.4's cpu operator.

- Integer anchors and shapes (INT32, INT64) are in elements whatever `normalized_anchor` /
  `normalized_shape` say; float ones are fractions of the extent unless those are False.
- Both normalized: the end is `(anchor + shape) * extent`, rounded once, as DALI computes it.
- Anchor and shape of different types, or of a type other than INT32 / INT64 / FLOAT, are
  refused with DALI's message; the pipeline goes on.
"""

import numpy as np
import pytest

import sluice

from conftest import dali_or_none

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

DATA = [np.arange(7 * 6, dtype=np.int16).reshape(7, 6), np.arange(5 * 9, dtype=np.int16).reshape(5, 9)]


def _slice(lib, anchors, shapes, **kw):
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = lib.fn.external_source(lambda: DATA)
        a = lib.fn.external_source(lambda: anchors)
        s = lib.fn.external_source(lambda: shapes)
        return lib.fn.slice(x, a, s, **kw)

    (out,) = pipe().run()
    return [np.array(o) for o in out]


CASES = [
    ("int32 absolute", [np.array([1, 2], np.int32), np.array([0, 1], np.int32)],
     [np.array([3, 2], np.int32), np.array([4, 3], np.int32)], {}),
    ("int64 ignores normalized", [np.array([2], np.int64), np.array([1], np.int64)],
     [np.array([3], np.int64), np.array([2], np.int64)], {"axes": [0], "normalized_anchor": True}),
    ("float normalized", [np.array([0.15, 0.3], np.float32), np.array([0.5, 0.1], np.float32)],
     [np.array([0.5, 0.35], np.float32), np.array([0.45, 0.75], np.float32)], {}),
    ("float absolute anchor", [np.array([1.4, 2.5], np.float32), np.array([0.5, 3.49], np.float32)],
     [np.array([0.5, 0.3], np.float32), np.array([0.4, 0.2], np.float32)], {"normalized_anchor": False}),
    ("float absolute shape", [np.array([0.2, 0.1], np.float32), np.array([0.25, 0.5], np.float32)],
     [np.array([2.5, 3.0], np.float32), np.array([1.5, 2.0], np.float32)], {"normalized_shape": False}),
    ("float absolute both", [np.array([1.5, 0.5], np.float32), np.array([2.5, 1.5], np.float32)],
     [np.array([2.0, 3.5], np.float32), np.array([2.0, 1.0], np.float32)],
     {"normalized_anchor": False, "normalized_shape": False}),
]


@needs_dali
@pytest.mark.parametrize("name,anchors,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_positional_slice_equals_dali(name, anchors, shapes, kw):
    ours, theirs = _slice(sluice, anchors, shapes, **kw), _slice(dali, anchors, shapes, **kw)
    for x, y in zip(ours, theirs):
        assert x.shape == y.shape and np.array_equal(x, y), (x, y)


def test_integer_anchors_are_elements():
    out = _slice(sluice, [np.array([2], np.int32), np.array([1], np.int32)], [np.array([3], np.int32),
                                                                                np.array([2], np.int32)], axes=[0])
    np.testing.assert_array_equal(out[0], DATA[0][2:5])
    np.testing.assert_array_equal(out[1], DATA[1][1:3])


def test_anchor_and_shape_types_must_agree():
    with pytest.raises(Exception, match="slice.*Anchor and shape should have the same type. Got: int32 and int64"):
        _slice(sluice, [np.array([1], np.int32)] * 2, [np.array([1], np.int64)] * 2, axes=[0])
    with pytest.raises(Exception, match="slice.*Unsupported type of anchor and shape arguments: int16"):
        _slice(sluice, [np.array([1], np.int16)] * 2, [np.array([1], np.int16)] * 2, axes=[0])
