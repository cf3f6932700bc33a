"""`fn.ssd_random_crop` (DALI's legacy SSDRandomCrop, cpu only, deprecated in favour of
`random_bbox_crop`): invariants checked on Sluice and on DALI 2.4 (`lib`) alike.

- The output image is an exact window of the input (found through pixels that spell their
  own position); the boxes are the input boxes whose centre is in the window, mapped into
  it and clamped to [0, 1], in input order, with their labels; the window's aspect ratio
  and scale follow SSD's rules; a "whole image" sample gives the inputs back unchanged.
- The random numbers differ from DALI's (see the module doc of
  crates/sluice/src/ops/bbox/ssd_random_crop.rs), so DALI is compared in distribution: the
  frequency of "whole image" outputs and of the window's IoU with the box, against a
  small Python model of DALI's search (random_crop.cc) and, where installed, DALI itself.
- Same seed, same outputs, whatever the thread count; a restored checkpoint continues
  exactly. DALI's own uses ported: test_dali_cpu_only, test_dali_variable_batch_size,
  checkpointing (with HWC images and one label per box: DALI's feeds 2-D images and one
  label for 7 boxes, which Sluice refuses), test_detection_pipeline's `ops.SSDRandomCrop`.
- Bad inputs (boxes not (N, 4), a label count that is not the box count, images that are
  not HWC uint8, `num_attempts` < 1) are errors naming `ssd_random_crop` and the sample.
"""

import functools
import random
import warnings

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import dali_or_none

dali = dali_or_none()
LIBS = [pytest.param(sluice, id="sluice"), pytest.param(dali, id="dali", marks=pytest.mark.skipif(dali is None, reason="needs DALI 2.4"))]

MIN_IOUS = [-1.0, 0.1, 0.3, 0.5, 0.7, 0.9]
H, W = 200, 240  # < 256: a pixel's first two channels are its row and column


def _image(h=H, w=W):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([y, x, (y * 7 + x * 13) % 256], axis=-1).astype(np.uint8)


def _boxes(rng, n):
    lo = rng.uniform(0, 0.8, (n, 2))
    hi = np.minimum(lo + rng.uniform(0.05, 0.4, (n, 2)), 1.0)
    return np.concatenate([lo, hi], axis=1).astype(np.float32)


def _const(v):
    # A callable with no parameters: DALI passes the iteration to one that takes any.
    return lambda: v


def _quiet(lib):
    """ssd_random_crop warns that it is deprecated (both libraries): not what these tests check."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    return lib


def _run(lib, images, boxes, labels, batches=1, seed=7, num_threads=1, layout="HWC", **kw):
    """Outputs of `batches` iterations: [iteration][output][sample] as numpy arrays, and the
    three output batches of the last iteration. The images are fed with `layout`."""
    feed = (images, boxes, labels)
    pipe = lib.pipeline.Pipeline(batch_size=len(images), num_threads=num_threads, device_id=None, seed=seed)
    with warnings.catch_warnings():
        _quiet(lib)
        with pipe:
            ins = [lib.fn.external_source(source=_const(v), batch=True, **({"layout": layout} if k == 0 and layout else {})) for k, v in enumerate(feed)]
            pipe.set_outputs(*lib.fn.ssd_random_crop(*ins, **kw))
        pipe.build()
        got, last = [], None
        for _ in range(batches):
            last = pipe.run()
            got.append([[np.array(o.at(i)) for i in range(len(o))] for o in last])
    return got, last


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _window(img, out):
    """The relative window (l, t, r, b) of output image `out` in `img`, checked to be an exact
    window, and its size in pixels; `None` for an empty output."""
    oh, ow = out.shape[:2]
    if oh == 0 or ow == 0:
        return None, (oh, ow)
    y, x = int(out[0, 0, 0]), int(out[0, 0, 1])
    np.testing.assert_array_equal(out, img[y:y + oh, x:x + ow])
    h, w = img.shape[:2]
    return (x / w, y / h, (x + ow) / w, (y + oh) / h), (oh, ow)


def _check_sample(img, boxes, labels, out_img, out_boxes, out_labels):
    """Checks one sample's outputs; True when it is the whole image given back."""
    assert out_img.dtype == np.uint8 and out_boxes.dtype == np.float32 and out_labels.dtype == np.int32
    assert out_boxes.ndim == 2 and out_boxes.shape[1] == 4 and len(out_labels) == len(out_boxes)
    if out_img.shape == img.shape and np.array_equal(out_boxes, boxes):
        np.testing.assert_array_equal(out_img, img)
        np.testing.assert_array_equal(out_labels, labels)
        return True
    win, (oh, ow) = _window(img, out_img)
    h, w = img.shape[:2]
    # SSD's window: 0.3 to 1 of each side, width / height (relative) in [0.5, 2]. Each edge
    # is rounded to a pixel, so the true size is within a pixel of the output's.
    assert 0.3 * w - 1 <= ow <= w and 0.3 * h - 1 <= oh <= h, (oh, ow)
    assert ((ow - 1) / w) / ((oh + 1) / h) <= 2 and ((ow + 1) / w) / ((oh - 1) / h) >= 0.5, (oh, ow)
    assert len(out_boxes) > 0, "a window keeps at least one box"
    assert np.all(out_boxes >= 0) and np.all(out_boxes <= 1)
    l, t, r, b = win
    idx = out_labels.reshape(-1) - 100
    assert np.all(np.diff(idx) > 0), "boxes keep their input order, each once"
    centres = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2], axis=1)
    # The true window is within half a pixel of the pixel window: centres a pixel inside it
    # are kept, centres a pixel outside are not.
    px, py = 1.0 / w, 1.0 / h
    surely_in = (centres[:, 0] > l + px) & (centres[:, 0] < r - px) & (centres[:, 1] > t + py) & (centres[:, 1] < b - py)
    surely_out = (centres[:, 0] < l - px) | (centres[:, 0] > r + px) | (centres[:, 1] < t - py) | (centres[:, 1] > b + py)
    assert set(np.flatnonzero(surely_in)) <= set(idx), (idx, np.flatnonzero(surely_in))
    assert not (set(np.flatnonzero(surely_out)) & set(idx)), (idx, np.flatnonzero(surely_out))
    expected = np.stack([(boxes[idx, 0] - l) / (r - l), (boxes[idx, 1] - t) / (b - t), (boxes[idx, 2] - l) / (r - l), (boxes[idx, 3] - t) / (b - t)], axis=1)
    atol = np.array([2 / ow, 2 / oh, 2 / ow, 2 / oh]) + 1e-5
    assert np.all(np.abs(out_boxes - np.clip(expected, 0, 1)) <= atol), (out_boxes, np.clip(expected, 0, 1))
    return False


@pytest.mark.parametrize("lib", LIBS)
def test_the_image_is_a_window_and_the_boxes_are_those_centred_in_it(lib):
    rng = np.random.default_rng(1)
    bs = 24
    img = _image()
    boxes = [_boxes(rng, n) for n in rng.integers(1, 9, bs)]
    labels = [(100 + np.arange(len(b))).astype(np.int32) for b in boxes]
    got, last = _run(lib, [img] * bs, boxes, labels, batches=4, num_attempts=5)
    assert last[0].layout() == "HWC"
    outcomes = [_check_sample(img, boxes[i], labels[i], *(it[k][i] for k in range(3))) for it in got for i in range(bs)]
    assert any(outcomes) and not all(outcomes), outcomes


@pytest.mark.parametrize("lib", LIBS)
def test_a_sample_without_boxes_comes_back_whole(lib):
    img = _image(30, 40)
    empty = np.zeros((0, 4), np.float32)
    got, _ = _run(lib, [img] * 3, [empty] * 3, [np.zeros((0,), np.int32)] * 3, batches=2)
    for it in got:
        for i in range(3):
            np.testing.assert_array_equal(it[0][i], img)
            assert it[1][i].shape == (0, 4) and it[2][i].shape == (0,)


# ---------------------------------------------------------------- DALI's search, in distribution
@functools.lru_cache(maxsize=None)
def _reference_outcomes(box, num_attempts, n, seed):
    """DALI's search (random_crop.cc) in Python: for `n` samples with one box, None for the
    whole image, else the window's IoU with the box."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        result = None
        while True:
            pick = r.randrange(7)
            if pick == 6:
                break
            for _ in range(num_attempts):
                w, h = r.uniform(0.3, 1.0), r.uniform(0.3, 1.0)
                if not 0.5 <= w / h <= 2.0:
                    continue
                left, top = r.uniform(0, 1 - w), r.uniform(0, 1 - h)
                win = (left, top, left + w, top + h)
                cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
                if _iou(box, win) >= MIN_IOUS[pick] and win[0] <= cx <= win[2] and win[1] <= cy <= win[3]:
                    result = _iou(box, win)
                    break
            if result is not None:
                break
        out.append(result)
    return out


IOU_BUCKETS = [0.1, 0.3, 0.5, 0.7, 0.9]


def _summary(outcomes):
    """Fraction of whole images, and of windows per IoU bucket (< 0.1, 0.1-0.3, ... >= 0.9)."""
    ious = np.array([o for o in outcomes if o is not None])
    whole = 1 - len(ious) / len(outcomes)
    buckets = np.bincount(np.searchsorted(IOU_BUCKETS, ious, side="right"), minlength=len(IOU_BUCKETS) + 1) / len(outcomes)
    return whole, buckets


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("num_attempts", [1, 10])
def test_whole_images_and_window_ious_are_distributed_as_in_dali(lib, num_attempts):
    """One box per sample: how often the whole image comes out (1/7 of the picks, more when
    the picked IoU is out of reach in `num_attempts`) and how the window's IoU with the box
    spreads over SSD's thresholds, against the model of DALI's search; 2048 samples each
    (binomial deviation below 0.012), 0.05 allowed."""
    box = np.array([0.25, 0.3, 0.7, 0.8], np.float32)
    bs, iters = 128, 16
    img = _image(100, 100)
    got, _ = _run(lib, [img] * bs, [box[None]] * bs, [np.array([100], np.int32)] * bs, batches=iters, seed=11, num_attempts=num_attempts)
    outcomes = []
    for it in got:
        for i in range(bs):
            if _check_sample(img, box[None], np.array([100], np.int32), it[0][i], it[1][i], it[2][i]):
                outcomes.append(None)
            else:
                win, _ = _window(img, it[0][i])
                outcomes.append(_iou(box, win))
    whole, buckets = _summary(outcomes)
    ref_whole, ref_buckets = _summary(_reference_outcomes(tuple(box.tolist()), num_attempts, 20000, seed=3))
    assert abs(whole - ref_whole) < 0.05, (whole, ref_whole)
    np.testing.assert_allclose(buckets, ref_buckets, atol=0.05)


# ---------------------------------------------------------------- shapes, types, layouts
@pytest.mark.parametrize("lib", LIBS)
def test_output_types_and_layouts(lib):
    rng = np.random.default_rng(2)
    img = _image(40, 50)
    boxes = [_boxes(rng, 5) for _ in range(8)]
    labels = [np.arange(5, dtype=np.int32) + 100 for _ in range(8)]
    _, last = _run(lib, [img] * 8, boxes, labels)
    assert last[0].layout() == "HWC"
    assert [np.array(o.at(0)).dtype for o in last] == [np.uint8, np.float32, np.int32]
    assert [np.array(o.at(0)).ndim for o in last] == [3, 2, 1]


def test_labels_with_a_column_keep_it():
    """(N, 1) labels give (K, 1) labels (DALI: (K) for a cropped sample, (N, 1) for a whole one)."""
    rng = np.random.default_rng(3)
    img = _image(40, 50)
    boxes = [_boxes(rng, 4) for _ in range(16)]
    labels = [(np.arange(4, dtype=np.int32) + 100)[:, None] for _ in range(16)]
    got, _ = _run(sluice, [img] * 16, boxes, labels, batches=2)
    for it in got:
        for i in range(16):
            assert it[2][i].shape == (len(it[1][i]), 1)
            _check_sample(img, boxes[i], labels[i], it[0][i], it[1][i], it[2][i])


# ---------------------------------------------------------------- reproducibility
def test_same_seed_same_outputs_whatever_the_thread_count():
    rng = np.random.default_rng(4)
    img = _image(60, 80)
    boxes = [_boxes(rng, n) for n in (3, 1, 6, 2, 5, 4)]
    labels = [np.arange(len(b), dtype=np.int32) + 100 for b in boxes]
    a, _ = _run(sluice, [img] * 6, boxes, labels, batches=3, seed=42, num_threads=1, num_attempts=3)
    b, _ = _run(sluice, [img] * 6, boxes, labels, batches=3, seed=42, num_threads=3, num_attempts=3)
    c, _ = _run(sluice, [img] * 6, boxes, labels, batches=3, seed=43, num_threads=1, num_attempts=3)
    flat = lambda g: [s for it in g for o in it for s in o]  # noqa: E731
    for x, y in zip(flat(a), flat(b)):
        np.testing.assert_array_equal(x, y)
    assert any(x.shape != z.shape or not np.array_equal(x, z) for x, z in zip(flat(a), flat(c)))
    assert any(a[0][0][i].shape != a[1][0][i].shape for i in range(6)), "iterations draw anew"


@pytest.mark.parametrize("lib", LIBS)
def test_checkpoint_restores_the_random_state(lib):
    """DALI's checkpointing/test_dali_checkpointing.py::test_ssd_random_crop, with HWC images,
    boxes in [0, 1] (so that windows happen) and one label per box."""

    @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None, enable_checkpointing=True, seed=5)
    def pipe():
        data = lib.fn.random.uniform(shape=(100, 100, 3), range=[0, 255], dtype=lib.types.DALIDataType.UINT8)
        bbox = lib.fn.random.uniform(shape=(7, 4), range=[0, 1], dtype=lib.types.DALIDataType.FLOAT)
        labels = lib.fn.random.uniform(shape=(7,), range=[0, 100], dtype=lib.types.DALIDataType.INT32)
        return tuple(lib.fn.ssd_random_crop(data, bbox, labels, device="cpu"))

    with warnings.catch_warnings():
        _quiet(lib)
        p = pipe()
        p.build()
        for _ in range(3):
            p.run()
        restored = pipe(checkpoint=p.checkpoint())
        restored.build()
        for k in range(4):
            for x, y in zip(p.run(), restored.run()):
                for i in range(len(x)):
                    np.testing.assert_array_equal(np.array(x.at(i)), np.array(y.at(i)), err_msg=f"iteration {k} after the checkpoint")


# ---------------------------------------------------------------- DALI's own uses
@pytest.mark.parametrize("lib", LIBS)
def test_dali_cpu_only_case(lib):
    """test_dali_cpu_only.py::test_ssd_random_crop_cpu: 200 boxes of bytes / 255 (many of
    them inverted) with 200 labels, images 10x20x3."""
    bs = 2
    pipe = lib.pipeline.Pipeline(batch_size=bs, num_threads=4, device_id=None)
    np_rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        _quiet(lib)
        with pipe:
            data = lib.fn.external_source(source=lambda: [np_rng.integers(0, 255, (10, 20, 3), dtype=np.uint8) for _ in range(bs)])
            boxes = lib.fn.external_source(source=lambda: [(np_rng.integers(0, 255, (200, 4), dtype=np.uint8) / 255).astype(np.float32) for _ in range(bs)])
            labels = lib.fn.external_source(source=lambda: [np_rng.integers(0, 255, (200,), dtype=np.int32) for _ in range(bs)])
            processed, _, _ = lib.fn.ssd_random_crop(data, boxes, labels)
            pipe.set_outputs(processed)
        pipe.build()
        for _ in range(3):
            pipe.run()


@pytest.mark.parametrize("lib", LIBS)
def test_dali_variable_batch_size_case(lib):
    """test_dali_variable_batch_size.py::test_ssd_random_crop_op: 13 batches of 5 to 31
    samples, 1 to 20 boxes each (uniform coordinates, often inverted), images 50x20x3."""
    r = random.Random(6)
    np_rng = np.random.default_rng(6)

    def batch(bs):
        n = r.randint(1, 20)
        return (
            [np_rng.integers(0, 255, (50, 20, 3), dtype=np.uint8) for _ in range(bs)],
            [np_rng.random((n, 4)).astype(np.float32) for _ in range(bs)],
            [np_rng.integers(0, 255, (n,), dtype=np.int32) for _ in range(bs)],
        )

    epoch = [batch(r.randint(5, 31)) for _ in range(13)]
    feed = iter(epoch)
    pipe = lib.pipeline.Pipeline(batch_size=max(len(b[0]) for b in epoch), num_threads=4, device_id=None)
    with warnings.catch_warnings():
        _quiet(lib)
        with pipe:
            data, boxes, labels = lib.fn.external_source(source=lambda: next(feed), num_outputs=3)
            pipe.set_outputs(*lib.fn.ssd_random_crop(data, boxes, labels))
        pipe.build()
        for b in epoch:
            outs = pipe.run()
            assert [len(o) for o in outs] == [len(b[0])] * 3


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("api", ["fn", "ops"])
def test_both_apis_warn_that_it_is_deprecated(lib, api):
    """`fn.ssd_random_crop` and test_detection_pipeline.py's `ops.SSDRandomCrop(device="cpu",
    num_attempts=1, seed=...)`; like every deprecated DALI operator it warns, naming its
    replacement (DALI names `ops.SSDRandomCrop` for the ops API, Sluice `fn.ssd_random_crop`)."""
    rng = np.random.default_rng(7)
    img = _image(40, 50)
    boxes = [_boxes(rng, 3) for _ in range(4)]
    labels = [np.arange(3, dtype=np.int32) + 100 for _ in range(4)]
    pipe = lib.pipeline.Pipeline(batch_size=4, num_threads=1, device_id=None, seed=9)
    named = r"fn\.ssd_random_crop" if api == "fn" or lib is sluice else r"ops\.SSDRandomCrop"
    with pytest.warns(DeprecationWarning, match=named + r"` is now deprecated\. Use `nvidia\.dali\.fn\.random_bbox_crop` instead\."):
        with pipe:
            ins = [lib.fn.external_source(source=_const(v), batch=True) for v in ([img] * 4, boxes, labels)]
            if api == "fn":
                outs = lib.fn.ssd_random_crop(*ins, num_attempts=1, seed=9)
            else:
                outs = lib.ops.SSDRandomCrop(device="cpu", num_attempts=1, seed=9)(*ins)
            pipe.set_outputs(*outs)
        pipe.build()
    outs = pipe.run()
    for i in range(4):
        _check_sample(img, boxes[i], labels[i], *(np.array(o.at(i)) for o in outs))


# ---------------------------------------------------------------- errors
GOOD_BOXES = np.array([[0.1, 0.1, 0.5, 0.5], [0.4, 0.2, 0.9, 0.7]], np.float32)
GOOD_LABELS = np.array([1, 2], np.int32)


def _error_pipe(batches):
    """A pipeline fed `batches` in turn, each (images, boxes, labels) of two samples."""
    it = iter(batches)
    pipe = sluice.pipeline.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with warnings.catch_warnings():
        _quiet(sluice)
        with pipe:
            ins = sluice.fn.external_source(source=lambda: next(it), num_outputs=3)
            pipe.set_outputs(*sluice.fn.ssd_random_crop(*ins))
    pipe.build()
    return pipe


def _good():
    return ([_image(20, 30)] * 2, [GOOD_BOXES] * 2, [GOOD_LABELS] * 2)


@pytest.mark.parametrize(
    "sample1,words",
    [
        ((_image(20, 30), np.zeros((2, 5), np.float32), GOOD_LABELS), ["bboxes", "(N, 4)", "[2, 5]"]),
        ((_image(20, 30), GOOD_BOXES, np.array([1, 2, 3], np.int32)), ["labels", "one label per box", "[3]"]),
        ((_image(20, 30), GOOD_BOXES, np.array([1], np.int32)), ["labels", "one label per box", "[1]"]),
    ],
)
def test_bad_data_names_the_operator_and_sample_and_the_pipeline_goes_on(sample1, words):
    good = _good()
    bad = tuple([g[0], s] for g, s in zip(good, sample1))
    pipe = _error_pipe([bad, good])
    with pytest.raises(errors.DataError) as e:
        pipe.run()
    for w in ["ssd_random_crop", "sample 1"] + words:
        assert w in str(e.value), (w, str(e.value))
    pipe.run()


def test_boxes_not_two_dimensional_are_refused_by_dali_too():
    flat = np.zeros((8,), np.float32)
    with pytest.raises(errors.ArgumentTypeError, match=r"ssd_random_crop.*bboxes"):
        _run(sluice, [_image(20, 30)], [flat], [np.zeros((2,), np.int32)])
    if dali is not None:
        with pytest.raises(RuntimeError, match="bounding box"):
            _run(dali, [_image(20, 30)], [flat], [np.zeros((2,), np.int32)])


@pytest.mark.parametrize(
    "images,words",
    [
        ([np.zeros((20, 30), np.uint8)] * 2, ["images", "HWC", "2 dimensions"]),
        ([np.zeros((20, 30, 3), np.float32)] * 2, ["images", "UINT8", "FLOAT"]),
    ],
)
def test_images_must_be_hwc_uint8(images, words):
    # Fed without a layout: "HWC" cannot describe 2-D images (external_source refuses it).
    with pytest.raises(errors.ArgumentTypeError) as e:
        _run(sluice, images, [GOOD_BOXES] * 2, [GOOD_LABELS] * 2, layout=None)
    for w in ["ssd_random_crop"] + words:
        assert w in str(e.value), (w, str(e.value))


def test_channel_first_layout_is_refused():
    pipe = sluice.pipeline.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with warnings.catch_warnings():
        _quiet(sluice)
        with pipe:
            img = sluice.fn.external_source(source=lambda: [np.zeros((3, 20, 30), np.uint8)], batch=True, layout="CHW")
            b = sluice.fn.external_source(source=lambda: [GOOD_BOXES], batch=True)
            lab = sluice.fn.external_source(source=lambda: [GOOD_LABELS], batch=True)
            pipe.set_outputs(*sluice.fn.ssd_random_crop(img, b, lab))
    pipe.build()
    with pytest.raises(errors.ArgumentTypeError, match=r"ssd_random_crop.*HWC.*CHW"):
        pipe.run()


def test_labels_must_be_int32():
    with pytest.raises(errors.ArgumentTypeError, match=r"ssd_random_crop.*labels.*INT32"):
        _run(sluice, [_image(20, 30)], [GOOD_BOXES], [GOOD_LABELS.astype(np.int64)])


def test_num_attempts_below_one_is_refused():
    with pytest.raises(errors.ArgumentError, match=r"ssd_random_crop.*num_attempts"):
        _run(sluice, [_image(20, 30)], [GOOD_BOXES], [GOOD_LABELS], num_attempts=0)
