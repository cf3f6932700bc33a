"""`fn.box_encoder` (cpu) against DALI 2.4's cpu operator: SSD's matching (each box's best
anchor forced, anchors above `criteria` take their best box, DALI's tie rules), centre-size
rows or normalised offsets (`offset`, `scale`, `means`, `stds`), bit for bit on random boxes
and on SSD300's 8732 default boxes; DALI's argument errors.

The gpu backend against the cpu's (on the GPU machine; SLUICE_REQUIRE_GPU=1 makes a missing
GPU a failure): labels and rows bit for bit, except the `offset=True` widths and heights,
which go through `logf` (CUDA's and glibc's are each within 1 ulp): within 4 ulp of the
logarithm, scaled by `1/std`, plus 2 ulp of the result (`_offset_tolerance`)."""

import itertools

import numpy as np
import pytest

import sluice

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")


def ssd300_anchors():
    """SSD300's default boxes (MLPerf's DefaultBoxes for COCO), ltrb, clipped to [0, 1]."""
    fig, feat, steps = 300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    boxes = []
    for idx, sfeat in enumerate(feat):
        sk1, sk2 = scales[idx] / fig, scales[idx + 1] / fig
        sk3 = np.sqrt(sk1 * sk2)
        all_sizes = [(sk1, sk1), (sk3, sk3)]
        for a in ratios[idx]:
            w, h = sk1 * np.sqrt(a), sk1 / np.sqrt(a)
            all_sizes += [(w, h), (h, w)]
        fk = fig / steps[idx]
        for w, h in all_sizes:
            for i, j in itertools.product(range(sfeat), repeat=2):
                cx, cy = (j + 0.5) / fk, (i + 0.5) / fk
                boxes.append((cx, cy, w, h))
    b = np.clip(np.array(boxes), 0, 1)
    ltrb = np.stack([b[:, 0] - 0.5 * b[:, 2], b[:, 1] - 0.5 * b[:, 3], b[:, 0] + 0.5 * b[:, 2], b[:, 1] + 0.5 * b[:, 3]], 1)
    return ltrb.astype(np.float32).ravel().tolist()


def random_boxes(rng, n):
    lo = rng.uniform(0, 0.8, (n, 2))
    hi = lo + rng.uniform(0.02, 0.5, (n, 2))
    return np.concatenate([lo, np.minimum(hi, 1)], 1).astype(np.float32)


def _encode(lib, boxes, labels, gpu=False, **kw):
    pipe = lib.pipeline.Pipeline(batch_size=len(boxes), num_threads=2, device_id=0 if gpu else None)
    with pipe:
        b, l = lib.fn.external_source(source=lambda: (boxes, labels), num_outputs=2)
        if gpu:
            b, l = b.gpu(), l.gpu()
        pipe.set_outputs(*lib.fn.box_encoder(b, l, **kw))
    pipe.build()
    eb, el = (o.as_cpu() if hasattr(o, "as_cpu") else o for o in pipe.run())
    return [np.array(eb.at(i)) for i in range(len(boxes))], [np.array(el.at(i)) for i in range(len(boxes))]


def _batch(seed, counts):
    rng = np.random.default_rng(seed)
    boxes = [random_boxes(rng, n) for n in counts]
    labels = [rng.integers(1, 81, n).astype(np.int32) for n in counts]
    return boxes, labels


GRID = np.float32([[x / 8, y / 8, (x + 2) / 8, (y + 2) / 8] for y in range(7) for x in range(7)]).ravel().tolist()


ARG_SETS = [
    dict(), dict(criteria=0.3), dict(offset=True), dict(offset=True, scale=300.0),
    dict(offset=True, means=[0.1, -0.2, 0.0, 0.3], stds=[0.1, 0.1, 0.2, 0.2], criteria=0.5),
    dict(criteria=0.0), dict(criteria=1.0, offset=True),
]


@needs_dali
@pytest.mark.parametrize("anchors", ["grid", "ssd300"])
@pytest.mark.parametrize("kw", ARG_SETS)
def test_equals_dali(anchors, kw):
    boxes, labels = _batch(7, [5, 0, 1, 12, 3])
    kw = dict(kw, anchors=GRID if anchors == "grid" else ssd300_anchors())
    ours = _encode(sluice, boxes, labels, **kw)
    theirs = _encode(dali, boxes, labels, **kw)
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@needs_dali
def test_ties_equal_dali():
    # Boxes equal to anchors and to each other: DALI keeps the last among equals.
    a = np.float32([[0, 0, 0.5, 0.5], [0.5, 0, 1, 0.5], [0, 0.5, 0.5, 1], [0, 0, 0.5, 0.5]])
    boxes = [np.float32([[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0.25, 0, 0.75, 0.5]])]
    labels = [np.int32([1, 2, 3])]
    ours = _encode(sluice, boxes, labels, anchors=a.ravel().tolist())
    theirs = _encode(dali, boxes, labels, anchors=a.ravel().tolist())
    for x, y in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        np.testing.assert_array_equal(x, y)


def _offset_tolerance(want, mean, std):
    """How far a gpu `offset=True` width or height, `(ln(r) - mean) / std`, may be from the
    cpu's `want`: 4 ulp of the logarithm over `std`, plus 2 ulp of the result (as
    box_encoder_gpu.rs's `offset_tolerance`)."""
    want, mean, std = np.float32(want), np.float32(mean), np.float32(std)
    log = np.abs(want * std) + np.abs(mean)
    return 4 * np.spacing(log) / np.abs(std) + 2 * np.spacing(np.abs(want))


def _gpu_equals_cpu(boxes, labels, **kw):
    ours = _encode(sluice, boxes, labels, gpu=True, **kw)
    ref = _encode(sluice, boxes, labels, **kw)
    means = np.float32(kw.get("means", [0, 0, 0, 0]))
    stds = np.float32(kw.get("stds", [1, 1, 1, 1]))
    for i, (a, b) in enumerate(zip(ours[1], ref[1])):
        assert a.dtype == b.dtype == np.int32 and a.shape == b.shape
        np.testing.assert_array_equal(a, b, err_msg=f"labels of sample {i}")
    for i, (a, b) in enumerate(zip(ours[0], ref[0])):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        exact = [0, 1] if kw.get("offset") else [0, 1, 2, 3]
        np.testing.assert_array_equal(a[:, exact], b[:, exact], err_msg=f"rows of sample {i}")
        for d in sorted({2, 3} - set(exact)):
            tol = _offset_tolerance(b[:, d], means[d], stds[d])
            same = (a[:, d] == b[:, d]) | (np.isnan(a[:, d]) & np.isnan(b[:, d]))
            with np.errstate(invalid="ignore"):  # inf - inf where both are -inf (empty boxes)
                bad = ~(same | (np.abs(a[:, d] - b[:, d]) <= tol))
            assert not bad.any(), f"sample {i}, column {d}: gpu {a[bad, d]}, cpu {b[bad, d]}, tolerance {tol[bad]}"


@pytest.mark.parametrize("anchors", ["grid", "ssd300"])
@pytest.mark.parametrize("kw", ARG_SETS)
def test_gpu_equals_cpu(anchors, kw):
    require_gpu()
    kw = dict(kw, anchors=GRID if anchors == "grid" else ssd300_anchors())
    _gpu_equals_cpu(*_batch(7, [5, 0, 1, 12, 3]), **kw)
    # More boxes than the kernel's 256 threads, and samples of none.
    _gpu_equals_cpu(*_batch(8, [300, 0, 40]), **kw)


def test_gpu_ties_and_degenerate_boxes_equal_cpu():
    require_gpu()
    a = np.float32([[0, 0, 0.5, 0.5], [0.5, 0, 1, 0.5], [0, 0.5, 0.5, 1], [0, 0, 0.5, 0.5]])
    boxes = [np.float32([[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [0.25, 0, 0.75, 0.5]])]
    for kw in ARG_SETS:
        _gpu_equals_cpu(boxes, [np.int32([1, 2, 3])], anchors=a.ravel().tolist(), **kw)
    # NaN corners (in the first box and later), inverted and empty boxes, infinite ones.
    nan, inf = np.nan, np.inf
    boxes = [np.float32([[nan, 0, 0.5, 0.5], [0, 0, 0.3, 0.3], [0.2, 0.2, 0.6, 0.6]]),
             np.float32([[0.6, 0.6, 0.2, 0.2], [0.3, 0.3, 0.3, 0.5], [-inf, -inf, inf, inf], [0.1, nan, 0.4, 0.4]])]
    labels = [np.int32([1, 2, 3]), np.int32([4, 5, 6, 7])]
    for kw in ARG_SETS:
        _gpu_equals_cpu(boxes, labels, anchors=GRID, **kw)


def test_gpu_bad_inputs_name_the_sample():
    require_gpu()
    with pytest.raises(RuntimeError, match="2 labels for 1 boxes") as e:
        _encode(sluice, [np.float32([[0, 0, 0.5, 0.5]])], [np.int32([1, 2])], gpu=True, anchors=GRID)
    assert "box_encoder" in str(e.value) and "sample 0" in str(e.value)


def test_matching_rules():
    """Without DALI: unmatched anchors keep their own centre-size row and label 0; a box's
    best anchor takes it whatever the criteria."""
    anchors = np.float32([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]])
    boxes = [np.float32([[0.0, 0.0, 0.1, 0.1]])]  # IoU 0.04 with anchor 0, below 0.5
    eb, el = _encode(sluice, boxes, [np.int32([7])], anchors=anchors.ravel().tolist())
    np.testing.assert_array_equal(el[0], [7, 0])
    np.testing.assert_allclose(eb[0], [[0.05, 0.05, 0.1, 0.1], [0.75, 0.75, 0.5, 0.5]], rtol=1e-6)


@pytest.mark.parametrize("kw,match", [
    (dict(anchors=[0.0, 0.0, 1.0]), "Anchors size must be divisible by 4"),
    (dict(anchors=GRID, criteria=1.5), "Expected criteria <= 1"),
    (dict(anchors=GRID, criteria=-0.1), "Expected criteria >= 0"),
    (dict(anchors=GRID, stds=[1.0, 0.0, 1.0, 1.0]), "stds values must be != 0"),
    (dict(anchors=GRID, means=[0.0, 0.0]), "means size must be a list of 4 values"),
])
def test_argument_errors(kw, match):
    boxes, labels = _batch(1, [2])
    with pytest.raises(ValueError, match=match):
        _encode(sluice, boxes, labels, **kw)


def test_bad_inputs_name_the_sample_and_the_pipeline_goes_on():
    calls = [0]

    def source():
        calls[0] += 1
        if calls[0] == 1:
            return [np.float32([[0, 0, 0.5, 0.5]])], [np.int32([1, 2])]
        return [np.float32([[0, 0, 0.5, 0.5]])], [np.int32([1])]

    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        b, l = sluice.fn.external_source(source=source, num_outputs=2)
        pipe.set_outputs(*sluice.fn.box_encoder(b, l, anchors=GRID))
    with pytest.raises(RuntimeError, match="2 labels for 1 boxes") as e:
        pipe.build()
        pipe.run()
    assert "box_encoder" in str(e.value)
    eb, el = pipe.run()
    assert np.array(eb.at(0)).shape == (49, 4)
