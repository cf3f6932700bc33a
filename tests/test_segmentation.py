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


# ---------------------------------------------------------------- random_object_bbox
# DALI's operator_2/test_random_object_bbox.py, ported: its generator of Gaussian blobs, its
# references by scipy.ndimage (face-connected components), its parameter sweeps as pytest
# parameters (fewer iterations), its errors.
from sluice import ops  # noqa: E402

scipy_ndimage = pytest.importorskip("scipy.ndimage")

ROB_DATA = [
    np.int32([[1, 0, 0, 0], [1, 2, 2, 1], [1, 1, 2, 0], [2, 0, 0, 1]]),
    np.int32([[0, 3, 3, 0], [1, 0, 1, 2], [0, 1, 1, 0], [0, 2, 0, 1], [0, 2, 2, 1]]),
]


def _count(outs):
    return 1 if isinstance(outs, sluice.pipeline.DataNode) else len(outs)


def test_random_object_bbox_num_outputs():
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        inp = fn.external_source(ROB_DATA, batch=False)
        assert len(fn.segmentation.random_object_bbox(inp)) == 2
        for label_out_param in [None, False, True]:
            for format, num_box_outputs in [("anchor_shape", 2), ("start_end", 2), ("box", 1)]:
                outs = fn.segmentation.random_object_bbox(inp, format=format, output_class=label_out_param)
                assert _count(outs) == (1 if label_out_param else 0) + num_box_outputs


@pytest.mark.parametrize("classes,weights,bg", [(None, None, None), (None, None, 1), ([1, 2, 3], None, None), (None, [1, 1, 1], None), (None, [1, 1, 1], 0), ([1, 2, 3], [1, 1, 1], None)])
def test_random_object_bbox_uses_foreground(classes, weights, bg):
    pipe = sluice.pipeline.Pipeline(10, 4, None, 12345)
    with pipe:
        inp = fn.external_source(ROB_DATA, batch=False, cycle="quiet")
        kw = {k: v for k, v in dict(classes=classes, class_weights=weights, background=bg).items() if v is not None}
        pipe.set_outputs(*fn.segmentation.random_object_bbox(inp, output_class=True, foreground_prob=1, **kw))
    pipe.build()
    outs = pipe.run()
    for i in range(len(outs[2])):
        assert int(np.array(outs[2].at(i))) != (bg or 0)


def _objects2boxes(objects, input_shape):
    if len(objects) == 0:
        return np.int32([[0] * len(input_shape) + list(input_shape)])
    return np.int32([[s.start for s in obj] + [s.stop for s in obj] for obj in objects])


def _box_extent(box):
    n = len(box) // 2
    return box[n:] - box[:n]


def _box_volume(box):
    return np.prod(_box_extent(box))


def _box_in_k_largest(boxes, box, k):
    if len(boxes) == 0:
        return False
    boxes = sorted(boxes, reverse=True, key=_box_volume)
    prev = _box_volume(boxes[0])
    for i in range(len(boxes)):
        vol = _box_volume(boxes[i])
        if i >= k and vol < prev:
            break
        prev = vol
        if np.array_equal(boxes[i], box):
            return True
    return False


def _all_boxes(array, background):
    labels = [v for v in np.unique(array) if v != background]
    objects = []
    for lbl in labels:
        cc, _ = scipy_ndimage.label(array == lbl)
        objects += [o for o in scipy_ndimage.find_objects(cc) if o is not None]
    return _objects2boxes(objects, array.shape)


def _class_boxes(array, label):
    cc, _ = scipy_ndimage.label(array == label)
    return _objects2boxes(scipy_ndimage.find_objects(cc), array.shape)


def _generate_data(rs, shape, num_classes, blobs_per_class):
    """DALI's generate_data: Gaussian blobs, each point the class of its strongest blob, or
    background below a threshold keeping 50-70% background."""
    ndim = len(shape)
    idx = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"), ndim)
    radii = np.array([shape])
    mean = rs.random([num_classes, blobs_per_class, ndim]) * radii
    sigma = (rs.random([num_classes, blobs_per_class, ndim]) * 0.8 + 0.2) * radii / 2
    mean = np.expand_dims(mean, list(range(2, ndim + 2)))
    isigma = 1 / np.expand_dims(sigma, list(range(2, ndim + 2)))
    pos = np.expand_dims(idx, [0, 1])
    g = np.exp(-np.sum(((pos - mean) * isigma) ** 2, axis=-1)).max(axis=1)
    maxfg = g.max(axis=0)
    lo, hi, volume = 0.0, 1.0, np.prod(shape)
    while hi - lo > 1e-2:
        threshold = (lo + hi) / 2
        frac = np.count_nonzero(maxfg < threshold) / volume
        if frac < 0.5:
            lo = threshold
        elif frac > 0.7:
            hi = threshold
        else:
            break
    label = np.argmax(g, axis=0) + 1
    label[maxfg < threshold] = 0
    return label


def _batch_generator(rs, batch_size, ndim, dtype):
    def gen():
        return [_generate_data(rs, list(rs.integers(5, 13, [ndim])), int(rs.integers(1, 10)), int(rs.integers(1, 10))).astype(dtype) for _ in range(batch_size)]

    return gen


def _convert_boxes(outs, format):
    if format == "box":
        return outs[0]
    if format == "start_end":
        return [np.concatenate([s, e]) for s, e in zip(outs[0], outs[1])]
    return [np.concatenate([a, a + s]) for a, s in zip(outs[0], outs[1])]


def _contains_box(boxes, box):
    return (boxes == box).all(axis=1).any()


INT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]
# (format, fg_prob, classes, weights, background, threshold, k_largest, ndim, dtype): a sweep
# over DALI's options ("DN" marks a per-sample argument input, as DALI's test draws them).
WITH_CLASS = [
    (None, None, None, None, None, None, None, 2, np.int32),
    ("anchor_shape", 0.7, None, [0.5, 1, 0.1, 0.2], None, 3, 1, 3, np.uint8),
    ("start_end", None, None, "DN", None, "DN", 2, 1, np.int16),
    ("box", "DN", [1], None, None, None, 5, 2, np.uint16),
    (None, 0.1, [2, 4, 5, 7], [1, 2, 3, 4], None, "list", None, 4, np.int8),
    ("anchor_shape", None, "DN", None, None, None, 2, 3, np.uint32),
    ("start_end", None, None, None, 0, 3, None, 2, np.int32),
    ("box", 0.7, [1], None, 0, None, 1, 1, np.uint8),
    (None, None, [2, 4, 5, 7], None, -1, "DN", 5, 3, np.int16),
    ("anchor_shape", None, [0], None, -1, None, None, 2, np.uint16),
    ("start_end", "DN", None, [1], 5, "list", 2, 2, np.int32),
    ("box", None, [2, 4, 7], [1, 2, 3], 5, None, None, 3, np.int16),
    (None, 0.7, None, None, "DN", 3, 1, 2, np.uint8),
    ("box", None, None, None, "DN", None, None, 4, np.int32),
]


@pytest.mark.parametrize("format,fg_prob,classes,weights,background,threshold,k_largest,ndim,dtype", WITH_CLASS)
def test_random_object_bbox_with_class(format, fg_prob, classes, weights, background, threshold, k_largest, ndim, dtype):
    rs = np.random.default_rng(hash((str(format), ndim, str(classes))) % (1 << 31))
    batch = 4
    pipe = sluice.pipeline.Pipeline(batch, 4, device_id=None, seed=4321)
    with pipe:
        inp = fn.external_source(_batch_generator(rs, batch, ndim, dtype))
        if background == "DN":
            background = fn.random.uniform(range=(-5, 10), dtype=types.INT32, seed=12321)
        if classes == "DN":
            bgv = 0 if background is None else background

            def get_classes():
                tmp = [c for c in np.flatnonzero(rs.random([10]) > 0.5) if c != bgv]
                return np.int32(tmp)

            classes = fn.external_source(get_classes, batch=False)
        if weights == "DN":
            weights = fn.external_source(lambda: rs.random(int(rs.integers(1, 10))).astype(np.float32), batch=False)
        if threshold == "DN":
            threshold = fn.random.uniform(range=(1, 5), shape=[ndim], dtype=types.INT32, seed=13231)
        elif threshold == "list":
            threshold = list(range(1, 1 + ndim))
        if fg_prob == "DN":
            fg_prob = fn.random.uniform(range=(0, 1), seed=1515)
        background_out = 0 if background is None else background
        if isinstance(background, sluice.pipeline.DataNode) or (background is not None and background >= 0):
            inp = fn.cast(inp + (background_out + 1), dtype=types.to_dali_type(np.dtype(dtype)) if hasattr(types, "to_dali_type") else {np.int8: types.INT8, np.uint8: types.UINT8, np.int16: types.INT16, np.uint16: types.UINT16, np.int32: types.INT32, np.uint32: types.UINT32}[dtype])
        kw = {k: v for k, v in dict(format=format, foreground_prob=fg_prob, classes=classes, class_weights=weights, background=background, threshold=threshold, k_largest=k_largest).items() if v is not None}
        op = ops.segmentation.RandomObjectBBox(seed=1234, **kw)
        outs1 = op(inp, cache_objects=True)
        outs2 = op(inp, output_class=True)
        outs1 = outs1 if isinstance(outs1, list) else [outs1]
        classes_out = np.int32([]) if classes is None else np.int32(classes) if isinstance(classes, list) else classes
        threshold_out = np.int32([]) if threshold is None else np.int32(threshold) if isinstance(threshold, (list, int)) else threshold
        pipe.set_outputs(inp, classes_out, background_out, threshold_out, *outs1, *outs2)
    pipe.build()
    format = format or "anchor_shape"
    for _ in range(10):
        inp, classes_o, background_o, threshold_o, *outs = pipe.run()
        nout = (len(outs) - 1) // 2
        outs1, outs2 = outs[:nout], outs[nout:]
        for a, b in zip(outs1, outs2):
            for i in range(len(a)):
                np.testing.assert_array_equal(np.array(a.at(i)), np.array(b.at(i)))
        boxes = _convert_boxes(tuple([np.array(o.at(i)) for i in range(len(o))] for o in outs1), format)
        labels = [int(np.array(outs2[-1].at(i))) for i in range(len(outs2[-1]))]
        for i in range(len(inp)):
            x = np.array(inp.at(i))
            class_labels = np.array(classes_o.at(i))
            if background is not None or classes is None:
                bg = int(np.array(background_o.at(i)))
            else:
                bg = 0 if 0 not in class_labels else int(np.min(class_labels)) - 1
            label = labels[i]
            if classes is not None:
                assert label == bg or label in list(class_labels)
            is_fg = label != bg
            cls_boxes = _class_boxes(x, label if is_fg else None)
            if is_fg:
                ref = cls_boxes
                if threshold is not None:
                    thr = np.array(threshold_o.at(i))
                    assert np.all(_box_extent(boxes[i]) >= thr)
                    ref = [b for b in cls_boxes if np.all(_box_extent(b) >= thr)]
                if k_largest is not None:
                    assert _box_in_k_largest(ref, boxes[i], k_largest)
            assert _contains_box(cls_boxes, boxes[i])


@pytest.mark.parametrize("format,background,threshold,k_largest,ndim,dtype", [
    (None, None, None, None, 2, np.int32), ("anchor_shape", 0, 3, 1, 3, np.uint8), ("start_end", -1, "list", 2, 1, np.int16),
    ("box", 5, "DN", 5, 2, np.uint16), ("box", "DN", None, None, 4, np.int8), (None, "DN", 3, 2, 3, np.uint32),
])
def test_random_object_bbox_ignore_class(format, background, threshold, k_largest, ndim, dtype):
    rs = np.random.default_rng(ndim * 7 + len(str(format)))
    batch = 5
    pipe = sluice.pipeline.Pipeline(batch, 4, device_id=None, seed=4321)
    with pipe:
        inp = fn.external_source(_batch_generator(rs, batch, ndim, dtype))
        if background == "DN":
            background = fn.random.uniform(range=(-5, 10), dtype=types.INT32, seed=12321)
        if threshold == "DN":
            threshold = fn.random.uniform(range=(1, 5), shape=[ndim], dtype=types.INT32, seed=13231)
        elif threshold == "list":
            threshold = list(range(1, 1 + ndim))
        kw = {k: v for k, v in dict(format=format, background=background, threshold=threshold, k_largest=k_largest).items() if v is not None}
        outs = fn.segmentation.random_object_bbox(inp, ignore_class=True, seed=1234, **kw)
        outs = outs if isinstance(outs, list) else [outs]
        threshold_out = np.int32([]) if threshold is None else np.int32(threshold) if isinstance(threshold, (list, int)) else threshold
        pipe.set_outputs(inp, 0 if background is None else background, threshold_out, *outs)
    pipe.build()
    format = format or "anchor_shape"
    for _ in range(10):
        inp, background_o, threshold_o, *outs = pipe.run()
        boxes = _convert_boxes(tuple([np.array(o.at(i)) for i in range(len(o))] for o in outs), format)
        for i in range(len(inp)):
            x = np.array(inp.at(i))
            ref = _all_boxes(x, int(np.array(background_o.at(i))))
            if threshold is not None:
                thr = np.array(threshold_o.at(i))
                ref = [b for b in ref if np.all(_box_extent(b) >= thr)]
                if len(ref) == 0:
                    ref = np.int32([[0] * x.ndim + list(x.shape)])
            if k_largest is not None:
                assert _box_in_k_largest(ref, boxes[i], k_largest)
            else:
                assert _contains_box(np.array(ref), boxes[i])


@pytest.mark.parametrize("fg,expected_bg", [([1, 2, 3], 0), ([0, 1, 2], -1), ([-1, 1], 0), ([0, -5], -6), ([-0x80000000, 0x7FFFFFFF], 0), ([-0x80000000, 0x7FFFFFFF, 0, 0x7FFFFFFE], 0x7FFFFFFD)])
def test_random_object_bbox_auto_bg(fg, expected_bg):
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None, seed=1234)
    with pipe:
        data = fn.external_source(lambda: [np.uint32([0, 1, 2, 3])])
        box, label = fn.segmentation.random_object_bbox(data, foreground_prob=1e-9, format="box", output_class=1, classes=fg)
        pipe.set_outputs(box, label)
    pipe.build()
    _, labels = pipe.run()
    assert int(np.array(labels.at(0))) == expected_bg


def _err_args(**kwargs):
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None, seed=1234)
    with pipe:
        inp = fn.external_source(ROB_DATA, batch=False)
        pipe.set_outputs(*fn.segmentation.random_object_bbox(inp, **kwargs))
    pipe.build()
    pipe.run()


def test_random_object_bbox_errors():
    with pytest.raises(RuntimeError, match="Class label 0 coincides with background label"):
        _err_args(classes=[0, 1, 2, 3], background=0)
    msg = r"If both ``classes`` and ``class_weights`` are provided, their shapes must match. Got:\s+classes.shape = \{4\}\s+weights.shape = \{3\}"
    with pytest.raises(RuntimeError, match=msg):
        _err_args(classes=[0, 1, 2, 3], class_weights=np.float32([1, 2, 3]))
    with pytest.raises(RuntimeError, match=msg):
        _err_args(classes=np.int32([0, 1, 2, 3]), class_weights=[3, 2, 1])
    with pytest.raises(RuntimeError, match=r"Class-related arguments .* cannot be used when ``ignore_class`` is True"):
        _err_args(classes=[0, 1, 2, 3], ignore_class=True)
    for k in (-1, 0):
        with pytest.raises(RuntimeError, match=f"``k_largest`` must be at least 1; got {k}"):
            _err_args(k_largest=k)
    with pytest.raises(RuntimeError, match="Argument \"threshold\" expected shape 2 but got 5 values, which can't be interpreted as the expected shape."):
        _err_args(threshold=[1, 2, 3, 4, 5])


@needs_dali
def test_random_object_bbox_whole_input_and_fixed_boxes_equal_dali():
    # With one blob per class and a class picked by weights 0/1, the result is deterministic.
    x = np.zeros((7, 9), np.int32)
    x[1:3, 2:6] = 4
    x[4:7, 0:2] = 9
    outs = []
    for lib in (sluice, dali):
        pipe = lib.pipeline.Pipeline(batch_size=2, num_threads=1, device_id=None, seed=1)
        with pipe:
            inp = lib.fn.external_source(lambda: [x, x])
            a = lib.fn.segmentation.random_object_bbox(inp, classes=[4, 9], class_weights=[0.0, 1.0], format="start_end", output_class=True)
            b = lib.fn.segmentation.random_object_bbox(inp, foreground_prob=0.0, format="box")
            pipe.set_outputs(*a, b)
        pipe.build()
        outs.append([[np.array(o.at(i)) for i in range(2)] for o in pipe.run()])
    for ours, theirs in zip(*outs):
        for p, q in zip(ours, theirs):
            assert p.dtype == q.dtype and p.shape == q.shape
            np.testing.assert_array_equal(p, q)
