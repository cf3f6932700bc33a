"""`fn.segmentation.select_masks` and `fn.segmentation.random_mask_pixel` (cpu, as DALI 2.4).

- select_masks: DALI's tests (operator_2/test_segmentation_select_masks.py, with its
  segmentation_test_utils generator) ported with `nvidia.dali` replaced by `sluice`, and the
  outputs equal to DALI 2.4's cpu operator on the same inputs, including polygons that share
  a mask id and `reindex_masks`; DALI's errors, by DALI's patterns.
- random_mask_pixel: DALI's test (operator_2/test_segmentation_random_mask_pixel.py) ported
  as written (foreground by threshold or value, a per-sample `foreground`, the anchor fed to
  `fn.slice`), plus uniformity over the foreground, the fallback without one, and the same
  draws whatever `num_threads`. The draws are Sluice's own, so values are not compared with
  DALI's.
"""

import random

import numpy as np
import pytest

import sluice
import sluice.math as smath
from sluice import fn, types

from conftest import dali_or_none

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def make_batch_select_masks(rng, batch_size, npolygons_range=(1, 10), nvertices_range=(3, 40), vertex_ndim=2, vertex_dtype=np.float32):
    """DALI's segmentation_test_utils.make_batch_select_masks, with a seeded generator."""
    polygons, vertices, selected = [], [], []
    for _ in range(batch_size):
        nmasks = rng.randint(*npolygons_range)
        selected.append(np.array(rng.sample(range(nmasks), rng.randint(1, nmasks)), dtype=np.int32))
        count = 0
        poly = np.zeros([nmasks, 3], dtype=np.int32)
        for m in range(nmasks):
            nv = rng.randint(*nvertices_range)
            poly[m] = (m, count, count + nv)
            count += nv
        polygons.append(poly)
        nrng = np.random.default_rng(rng.randint(0, 1 << 30))
        if np.issubdtype(vertex_dtype, np.integer):
            info = np.iinfo(vertex_dtype)
            vertices.append(nrng.integers(info.min, info.max, (count, vertex_ndim), dtype=vertex_dtype))
        else:
            vertices.append(nrng.random((count, vertex_ndim)).astype(vertex_dtype))
    return polygons, vertices, selected


def _select(lib, polygons, vertices, ids, **kw):
    pipe = lib.pipeline.Pipeline(batch_size=len(polygons), num_threads=2, device_id=None, seed=1234)
    with pipe:
        p, v, m = lib.fn.external_source(source=lambda: (polygons, vertices, ids), num_outputs=3)
        op, ov = lib.fn.segmentation.select_masks(m, p, v, **kw)
        pipe.set_outputs(op, ov)
    pipe.build()
    op, ov = pipe.run()
    return [np.array(op.at(i)) for i in range(len(op))], [np.array(ov.at(i)) for i in range(len(ov))]


def check_select_masks(batch_size, npolygons_range, nvertices_range, vertex_ndim, vertex_dtype, reindex_masks, seed):
    """DALI's check: output polygon m is mask_ids[m]'s, its vertices follow the previous ones."""
    rng = random.Random(seed)
    polygons, vertices, ids = make_batch_select_masks(rng, batch_size, npolygons_range, nvertices_range, vertex_ndim, vertex_dtype)
    out_p, out_v = _select(sluice, polygons, vertices, ids, reindex_masks=reindex_masks)
    for idx in range(batch_size):
        by_id = {p[0]: (p[1], p[2]) for p in polygons[idx]}
        index_map = {m: k for k, m in enumerate(ids[idx])}
        count = 0
        for m, mask_id in enumerate(ids[idx]):
            start, end = by_id[mask_id]
            expected_id = index_map[mask_id] if reindex_masks else mask_id
            oid, ostart, oend = out_p[idx][m]
            assert oid == expected_id and ostart == count and oend == count + end - start
            np.testing.assert_array_equal(out_v[idx][ostart:oend], vertices[idx][start:end])
            count += end - start
        assert out_v[idx].dtype == vertices[idx].dtype and out_v[idx].shape == (count, vertex_ndim)
    if dali is not None:
        ref_p, ref_v = _select(dali, polygons, vertices, ids, reindex_masks=reindex_masks)
        for a, b in zip(out_p + out_v, ref_p + ref_v):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("vertex_ndim", [2, 3, 6])
@pytest.mark.parametrize("vertex_dtype", [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("reindex_masks", [False, True])
def test_select_masks(batch_size, vertex_ndim, vertex_dtype, reindex_masks):
    check_select_masks(batch_size, (1, 10), (3, 40), vertex_ndim, vertex_dtype, reindex_masks, seed=batch_size * 100 + vertex_ndim)


@needs_dali
@pytest.mark.parametrize("reindex_masks", [False, True])
def test_select_masks_shared_ids_and_empty_equal_dali(reindex_masks):
    # Polygons sharing a mask id (the last one is selected), an empty polygon, ids in any order.
    polygons = [np.array([[3, 0, 2], [5, 2, 5], [3, 5, 9], [7, 9, 9]], np.int32), np.zeros((0, 3), np.int32)]
    vertices = [np.arange(9 * 2, dtype=np.float32).reshape(9, 2), np.zeros((4, 2), np.float32)]
    ids = [np.array([7, 3, 5], np.int32), np.zeros((0,), np.int32)]
    ours = _select(sluice, polygons, vertices, ids, reindex_masks=reindex_masks)
    theirs = _select(dali, polygons, vertices, ids, reindex_masks=reindex_masks)
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "polygons,vertices,ids,match",
    [
        ([[0, 0, 2], [1, 3, 5], [2, 6, 8]], 9, [10, 11], r"Selected mask_id .* is not present in the input\."),
        ([[0, 0, 2, -1], [1, 3, 5, -1], [2, 6, 8, -1]], 9, [0], r"``polygons`` is expected to contain 2D tensors with 3 columns: ``mask_id, start_idx, end_idx``\. Got \d* columns\."),
        ([[0, 0, 20]], 3, [0], r"Vertex index range for mask id .* is out of bounds\. Expected to be within the range of available vertices .*\."),
        ([[0, 2, 1]], 3, [0], r"Vertex start index can't be after end index"),
        ([[0, 0, 2], [1, 0, 2]], 3, [1, 1], r"mask_ids should not have duplicated values\. Got 1 repeated\."),
    ],
)
def test_select_masks_errors(polygons, vertices, ids, match):
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=2, device_id=None)
    calls = [0]

    def source():
        calls[0] += 1
        if calls[0] == 1:
            return [np.array(polygons, np.int32)], [np.random.rand(vertices, 2).astype(np.float32)], [np.array(ids, np.int32)]
        return [np.array([[0, 0, 2]], np.int32)], [np.ones((3, 2), np.float32)], [np.array([0], np.int32)]

    with pipe:
        p, v, m = fn.external_source(source=source, num_outputs=3)
        pipe.set_outputs(*fn.segmentation.select_masks(m, p, v))
    with pytest.raises(RuntimeError, match=match) as e:
        pipe.build()
        pipe.run()
    assert "select_masks" in str(e.value)
    op, ov = pipe.run()
    np.testing.assert_array_equal(np.array(op.at(0)), [[0, 0, 2]])


def test_select_masks_input_types_are_checked():
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=2, device_id=None)
    with pipe:
        p, v, m = fn.external_source(source=lambda: ([np.array([[0, 0, 2]], np.int64)], [np.ones((3, 2), np.float32)], [np.array([0], np.int32)]), num_outputs=3)
        pipe.set_outputs(*fn.segmentation.select_masks(m, p, v))
    with pytest.raises(TypeError, match="``polygons`` input is expected to be int32"):
        pipe.build()
        pipe.run()


# ---------------------------------------------------------------- random_mask_pixel
def check_random_mask_pixel(ndim=2, batch_size=3, min_extent=20, max_extent=50):
    """DALI's test, as written (sluice in place of nvidia.dali)."""
    pipe = sluice.pipeline.Pipeline(batch_size=batch_size, num_threads=4, device_id=None, seed=1234)
    with pipe:
        in_shape_dims = [fn.cast(fn.random.uniform(range=(min_extent, max_extent + 1)), dtype=types.INT32) for _ in range(ndim)]
        in_shape = fn.stack(*in_shape_dims)
        in_mask = fn.cast(fn.random.uniform(range=(0, 2), shape=in_shape), dtype=types.INT32)
        fg_pixel1 = fn.segmentation.random_mask_pixel(in_mask, foreground=1)
        fg_pixel2 = fn.segmentation.random_mask_pixel(in_mask, foreground=1, threshold=0.99)
        fg_pixel3 = fn.segmentation.random_mask_pixel(in_mask, foreground=1, value=2)
        rnd_pixel = fn.segmentation.random_mask_pixel(in_mask, foreground=0)
        coin_flip = fn.random.coin_flip(probability=0.7)
        fg_biased = fn.segmentation.random_mask_pixel(in_mask, foreground=coin_flip)
        crop_shape = in_shape - 2
        anchor = fn.cast(fg_pixel1, dtype=types.INT32) - crop_shape // 2
        anchor = smath.min(smath.max(0, anchor), in_shape - crop_shape)
        out_mask = fn.slice(in_mask, anchor, crop_shape, axes=tuple(range(ndim)))
    pipe.set_outputs(in_mask, fg_pixel1, fg_pixel2, fg_pixel3, rnd_pixel, coin_flip, fg_biased, anchor, crop_shape, out_mask)
    for _ in range(3):
        outputs = pipe.run()
        for idx in range(batch_size):
            in_mask = np.array(outputs[0].at(idx))
            fg_pixel1, fg_pixel2, fg_pixel3, rnd_pixel, coin_flip, fg_biased, anchor, crop_shape = (np.array(outputs[k].at(idx)).tolist() for k in range(1, 9))
            out_mask = np.array(outputs[9].at(idx))
            assert in_mask[tuple(fg_pixel1)] > 0
            assert in_mask[tuple(fg_pixel2)] > 0.99
            # No pixel equals 2: DALI's test expects the fallback to a uniform pixel.
            assert all(0 <= p < s for p, s in zip(fg_pixel3, in_mask.shape))
            assert all(0 <= p < s for p, s in zip(rnd_pixel, in_mask.shape))
            assert in_mask[tuple(fg_biased)] > 0 or not coin_flip
            for d in range(ndim):
                assert 0 <= anchor[d] and anchor[d] + crop_shape[d] <= in_mask.shape[d]
            assert out_mask.shape == tuple(crop_shape)


@pytest.mark.parametrize("ndim", [2, 3])
def test_random_mask_pixel(ndim):
    check_random_mask_pixel(ndim)


def _pixels(masks, threads=2, seed=7, iters=1, **kw):
    pipe = sluice.pipeline.Pipeline(batch_size=len(masks), num_threads=threads, device_id=None, seed=seed)
    with pipe:
        m = fn.external_source(source=lambda: masks)
        pipe.set_outputs(fn.segmentation.random_mask_pixel(m, **kw))
    pipe.build()
    out = []
    for _ in range(iters):
        (o,) = pipe.run()
        out.append([np.array(o.at(i)) for i in range(len(o))])
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32, np.float64, np.bool_])
def test_random_mask_pixel_types_and_value(dtype):
    rng = np.random.default_rng(3)
    mask = (rng.random((13, 17)) < 0.2).astype(dtype)
    if dtype != np.bool_:
        mask[3, 4] = 5
    fg = _pixels([mask] * 4, iters=5, foreground=1, value=1)
    for batch in fg:
        for p in batch:
            assert p.dtype == np.int64 and p.shape == (2,) and mask[tuple(p)] == 1
    if dtype != np.bool_:
        for batch in _pixels([mask] * 4, iters=3, foreground=1, threshold=4.5):
            for p in batch:
                assert tuple(p) == (3, 4)


def test_random_mask_pixel_is_uniform_over_the_foreground():
    mask = np.zeros((6, 7), np.uint8)
    fg = [(0, 0), (2, 3), (5, 6), (4, 1)]
    for p in fg:
        mask[p] = 1
    counts = {p: 0 for p in fg}
    for batch in _pixels([mask] * 50, iters=20, foreground=1):
        for p in batch:
            counts[tuple(p)] += 1
    # 1000 draws over 4 pixels: each near 250 (5 sigma is about 68).
    assert all(180 < c < 320 for c in counts.values()), counts


def test_random_mask_pixel_without_foreground_falls_back_to_any_pixel():
    mask = np.zeros((5, 9), np.int32)
    seen = set()
    for batch in _pixels([mask] * 40, iters=5, foreground=1):
        seen.update(tuple(p) for p in batch)
    assert len(seen) > 30 and all(0 <= y < 5 and 0 <= x < 9 for y, x in seen)


def test_random_mask_pixel_same_draws_whatever_the_threads():
    rng = np.random.default_rng(9)
    masks = [(rng.random((31, 40)) < 0.3).astype(np.int32) for _ in range(8)]
    a = _pixels(masks, threads=1, iters=3, foreground=1)
    b = _pixels(masks, threads=4, iters=3, foreground=1)
    for x, y in zip(a, b):
        for p, q in zip(x, y):
            np.testing.assert_array_equal(p, q)


def test_random_mask_pixel_errors():
    with pytest.raises(ValueError, match="can not be provided together"):
        _pixels([np.ones((3, 3), np.uint8)], foreground=1, value=1, threshold=0.5)
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=2, device_id=None)
    calls = [0]

    def masks():
        calls[0] += 1
        return [np.zeros((0, 4), np.uint8) if calls[0] == 1 else np.ones((2, 2), np.uint8)]

    with pipe:
        pipe.set_outputs(fn.segmentation.random_mask_pixel(fn.external_source(source=masks), foreground=1))
    with pytest.raises(RuntimeError, match="empty mask") as e:
        pipe.build()
        pipe.run()
    assert "random_mask_pixel" in str(e.value)
    (o,) = pipe.run()
    assert np.array(o.at(0)).shape == (2,)
