"""`fn.bbox_rotate` (cpu, as DALI) against DALI 2.4's cpu operator.

- Parity, bit for bit: angles from -720 to 1000 degrees (0, quarter and half turns, 45,
  near-90), `mode` expand / halfway / fixed, `keep_size`, `bbox_layout` xyXY / xyWH,
  normalized and pixel boxes, boxes partly or wholly off the image, of no area and inverted,
  `remove_threshold` from 0 to just below 1, `size` (constant, and per sample as int32 and float32),
  `shape_layout` (HW, HWC, WH, CHW), `angle` and `input_shape` per sample (`image.shape()`
  style int64 and other integer types), labels `(N)` and `(N, 1)`, empty samples.
- A float64 model of the operator (corners turned, enclosing box, expansion correction,
  clipping and removal) checked against both libraries, so the behaviour is pinned down
  where DALI is not installed.
- DALI's own tests (dali/test/python/operator_2/test_bbox_rotate.py), imports renamed:
  `test_bbox_rotate` (COCO boxes at 45 degrees for every ratio / ltrb / keep_size; DALI's
  hard-coded boxes come from a DALI_extra image, so here a generated COCO set and the model
  give the expected boxes), `test_cull_threshold` and `test_box_expansion_control` as
  DALI wrote them (with `fn.rotate` and OpenCV's bounding rectangle of the rotated image).
- Errors name the operator, the input or argument and the sample, and the pipeline goes
  on: boxes not `(N, 4)` (DALI only logs those and reads out of the sample), not float32,
  labels of the wrong count, shape or type, unknown `mode`, `bbox_layout`, `shape_layout`,
  `input_shape` too short or not integral, `size` with `keep_size`, a bad `size`,
  `remove_threshold` outside [0, 1) (DALI 2.4 refuses 1.0).
"""

import math

import numpy as np
import pytest

import sluice
from sluice import errors

from conftest import dali_or_none, library_params

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

ANGLES = [0.0, 15.0, 30.0, 45.0, 60.0, 89.9, 90.0, 135.0, 180.0, -30.0, 270.0, 300.0, 1000.5, -720.25]
# (H, W) of the images the boxes belong to, one per sample (cycled).
SHAPES = [(100, 200), (37, 64), (480, 640), (1, 1), (64, 64), (301, 199), (10, 7)]


def _const(v):
    return lambda: v


def _run(lib, boxes, labels=None, args=None, batch_size=None, **kw):
    """Every output of fn.bbox_rotate(boxes[, labels], **kw), per sample; `args` are
    per-sample argument inputs (lists of arrays)."""
    pipe = lib.pipeline.Pipeline(batch_size=batch_size or len(boxes), num_threads=2, device_id=None)
    with pipe:
        b = lib.fn.external_source(source=_const(boxes), batch=True)
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        if labels is None:
            outs = [lib.fn.bbox_rotate(b, **kw, **nodes)]
        else:
            lab = lib.fn.external_source(source=_const(labels), batch=True)
            outs = list(lib.fn.bbox_rotate(b, lab, **kw, **nodes))
        pipe.set_outputs(*outs)
    pipe.build()
    return [[np.array(o.at(i)) for i in range(len(o))] for o in pipe.run()]


def _same_bits(ours, ref):
    assert len(ours) == len(ref)
    for out_a, out_b in zip(ours, ref):
        assert len(out_a) == len(out_b)
        for i, (a, b) in enumerate(zip(out_a, out_b)):
            assert a.dtype == b.dtype and a.shape == b.shape, (i, a.dtype, b.dtype, a.shape, b.shape)
            if a.dtype == np.float32:
                np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=f"sample {i}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"sample {i}")


def _boxes(rng, n, hw, ltrb, normalized, odd=True):
    """`n` random boxes, some partly or wholly off the image; with `odd`, one of no area and
    one inverted (end before start) too."""
    lo = rng.uniform(-0.3, 1.0, (n, 2))
    ext = rng.uniform(0.01, 0.7, (n, 2))
    b = np.concatenate([lo, lo + ext if ltrb else ext], axis=1)
    if odd and n >= 3:
        b[0, 2:] = b[0, :2] if ltrb else 0.0  # no area
        b[1, 2:] = b[1, :2] - 0.1 if ltrb else -0.1  # inverted
    if not normalized:
        h, w = hw
        b = b * [w, h, w, h]
    return b.astype(np.float32)


def _batch(seed, ltrb, normalized, samples, n=9):
    rng = np.random.default_rng(seed)
    shapes = [SHAPES[i % len(SHAPES)] for i in range(samples)]
    counts = [n, 0, 1] + [n] * samples
    return [_boxes(rng, counts[i], shapes[i], ltrb, normalized) for i in range(samples)], shapes


# --------------------------------------------------------------------------- a float64 model
def rotated_canvas(h, w, angle):
    """fn.rotate's canvas (H, W): DALI's RotatedCanvasSize and its parity rule."""
    a = float(np.float32(angle) * np.float32(math.pi / 180))
    c, s = abs(math.cos(a)), abs(math.sin(a))
    wo = math.ceil(c * w + s * h - 1e-2)
    ho = math.ceil(c * h + s * w - 1e-2)
    pw, ph = (w % 2, h % 2) if s <= c else (h % 2, w % 2)
    return ho + ((ho % 2) ^ ph), wo + ((wo % 2) ^ pw)


def model(boxes, angle, hw, ltrb=True, normalized=True, mode="expand", keep_size=False, size=None, threshold=0.1):
    """The operator in float64: (boxes kept, their indices)."""
    b = boxes.astype(np.float64).reshape(-1, 4).copy()
    if not ltrb:
        b[:, 2:] += b[:, :2]
    h, w = hw
    if keep_size:
        oh, ow = h, w
    elif size is not None:
        oh, ow = math.floor(size[0]), math.floor(size[1])
    else:
        oh, ow = rotated_canvas(h, w, angle)
    if normalized:
        b *= [w, h, w, h]
    xs = b[:, [0, 2, 0, 2]] - w / 2
    ys = b[:, [1, 1, 3, 3]] - h / 2
    a = math.radians(angle)
    xr = xs * math.cos(a) + ys * math.sin(a)
    yr = -xs * math.sin(a) + ys * math.cos(a)
    out = np.stack([xr.min(1) + ow / 2, yr.min(1) + oh / 2, xr.max(1) + ow / 2, yr.max(1) + oh / 2], axis=1)
    if mode != "expand":
        old_w, old_h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
        new_w, new_h = out[:, 2] - out[:, 0], out[:, 3] - out[:, 1]
        flip = (old_w < old_h) ^ (new_w < new_h)
        dw = np.where(flip, new_w - old_h, new_w - old_w) / 2
        dh = np.where(flip, new_h - old_w, new_h - old_h) / 2
        if mode == "halfway":
            dw, dh = dw / 2, dh / 2
        out += np.stack([dw, dh, -dw, -dh], axis=1)
    area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
    out = np.clip(out, 0, [ow, oh, ow, oh])
    with np.errstate(invalid="ignore", divide="ignore"):
        keep = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1]) / area >= threshold
    out = out[keep]
    if not ltrb:
        out[:, 2:] -= out[:, :2]
    if normalized:
        out /= [ow, oh, ow, oh]
    return out, np.flatnonzero(keep)


# --------------------------------------------------------------------------- parity with DALI
@needs_dali
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("ltrb", [True, False])
@pytest.mark.parametrize("keep_size", [False, True])
@pytest.mark.parametrize("mode", ["expand", "halfway", "fixed"])
def test_per_sample_angles_and_shapes_equal_dali(mode, keep_size, ltrb, normalized):
    boxes, shapes = _batch(len(mode) * 7 + keep_size * 3 + ltrb * 2 + normalized, ltrb, normalized, len(ANGLES))
    args = {
        "angle": [np.array(a, np.float32) for a in ANGLES],
        "input_shape": [np.array([h, w, 3], np.int64) for h, w in shapes],
    }
    kw = dict(mode=mode, keep_size=keep_size, bbox_layout="xyXY" if ltrb else "xyWH", bbox_normalized=normalized)
    _same_bits(_run(sluice, boxes, args=args, **kw), _run(dali, boxes, args=args, **kw))


@needs_dali
@pytest.mark.parametrize("angle", ANGLES)
@pytest.mark.parametrize("mode", ["expand", "fixed"])
def test_constant_angle_equals_dali(angle, mode):
    boxes, _ = _batch(int(abs(angle)) + len(mode), True, True, 4)
    for shape in ([480, 640], [37, 64, 3]):
        kw = dict(angle=angle, input_shape=shape, mode=mode)
        _same_bits(_run(sluice, boxes, **kw), _run(dali, boxes, **kw))


@needs_dali
@pytest.mark.parametrize("threshold", [0.0, 0.1, 0.5, 0.999, 0.99999994])
@pytest.mark.parametrize("label_shape", ["N", "N1"])
def test_removal_with_labels_equals_dali(threshold, label_shape):
    boxes, shapes = _batch(int(threshold * 100), True, True, 6, n=20)
    labels = [np.arange(len(b), dtype=np.int32) * 3 + 1 for b in boxes]
    if label_shape == "N1":
        labels = [lab.reshape(-1, 1) for lab in labels]
    for keep_size in (True, False):
        kw = dict(angle=37.0, input_shape=[120, 90], keep_size=keep_size, remove_threshold=threshold)
        ours, ref = _run(sluice, boxes, labels, **kw), _run(dali, boxes, labels, **kw)
        _same_bits(ours, ref)
        assert all(lab.ndim == (2 if label_shape == "N1" else 1) for lab in ours[1])
    # Removal did happen somewhere (and keep_size removes more than the grown canvas).
    assert sum(len(b) for b in ours[0]) < sum(len(b) for b in boxes)


@needs_dali
@pytest.mark.parametrize("normalized", [True, False])
def test_size_equals_dali(normalized):
    boxes, _ = _batch(77, False, normalized, 4)
    kw = dict(angle=-20.0, input_shape=[100, 200], bbox_layout="xyWH", bbox_normalized=normalized)
    _same_bits(_run(sluice, boxes, size=[150.7, 300.2], **kw), _run(dali, boxes, size=[150.7, 300.2], **kw))
    sizes = [[150, 300], [40, 50], [1000, 10], [201, 99]]
    for dtype in (np.int32, np.float32, np.int64, np.uint32):
        # Float sizes are floored, integer ones taken as they are.
        args = {"size": [(np.array(s, np.float64) + (0.75 if dtype == np.float32 else 0)).astype(dtype) for s in sizes]}
        _same_bits(_run(sluice, boxes, args=args, **kw), _run(dali, boxes, args=args, **kw))


@needs_dali
@pytest.mark.parametrize("layout,shape", [("HW", [100, 200]), ("HWC", [100, 200, 3]), ("WH", [200, 100]), ("CHW", [3, 100, 200]), ("WHC", [200, 100, 1])])
def test_shape_layouts_equal_dali(layout, shape):
    boxes, _ = _batch(5, True, False, 3)
    kw = dict(angle=75.0, input_shape=shape, shape_layout=layout, bbox_normalized=False, mode="halfway")
    ours = _run(sluice, boxes, **kw)
    _same_bits(ours, _run(dali, boxes, **kw))
    # Every layout names the same 100 x 200 image.
    _same_bits(ours, _run(sluice, boxes, angle=75.0, input_shape=[100, 200], bbox_normalized=False, mode="halfway"))


@needs_dali
def test_input_shape_types_equal_dali():
    boxes, shapes = _batch(9, True, True, 5)
    for dtype in (np.int64, np.int32, np.uint8, np.uint16, np.int16):
        args = {"input_shape": [np.array([min(h, 255), min(w, 255)], dtype) for h, w in shapes]}
        _same_bits(_run(sluice, boxes, args=args, angle=10.0), _run(dali, boxes, args=args, angle=10.0))


@needs_dali
def test_image_shape_node_equals_dali():
    """DALI's documented use: input_shape=image.shape(), then fn.rotate with the same angle."""
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SHAPES[:5]]
    boxes, _ = _batch(4, True, True, 5)
    labels = [np.arange(len(b), dtype=np.int32) for b in boxes]
    angles = [np.array(a, np.float32) for a in (10.0, -45.0, 90.0, 123.0, 200.0)]

    def run(lib):
        pipe = lib.pipeline.Pipeline(batch_size=5, num_threads=2, device_id=None)
        with pipe:
            image = lib.fn.external_source(source=_const(images), batch=True, layout="HWC")
            b = lib.fn.external_source(source=_const(boxes), batch=True)
            lab = lib.fn.external_source(source=_const(labels), batch=True)
            angle = lib.fn.external_source(source=_const(angles), batch=True)
            b, lab = lib.fn.bbox_rotate(b, lab, angle=angle, input_shape=image.shape())
            rotated = lib.fn.rotate(image, angle=angle)
            pipe.set_outputs(b, lab, rotated.shape())
        pipe.build()
        return [[np.array(o.at(i)) for i in range(len(o))] for o in pipe.run()]

    ours, ref = run(sluice), run(dali)
    _same_bits(ours, ref)
    # The boxes' canvas is fn.rotate's: a whole-image box would fill the rotated image.
    for (h, w), s, a in zip(SHAPES, ours[2], angles):
        assert tuple(s[:2]) == rotated_canvas(h, w, float(a))


@needs_dali
def test_empty_samples_equal_dali():
    boxes = [np.zeros((0, 4), np.float32), np.array([[0.2, 0.2, 0.4, 0.5]], np.float32)]
    labels = [np.zeros((0, 1), np.int32), np.array([[4]], np.int32)]
    _same_bits(_run(sluice, boxes, labels, angle=33.0, input_shape=[10, 20]), _run(dali, boxes, labels, angle=33.0, input_shape=[10, 20]))


# --------------------------------------------------------------------------- the model, both libraries
@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("mode", ["expand", "halfway", "fixed"])
@pytest.mark.parametrize("keep_size", [False, True])
def test_matches_float64_model(lib, mode, keep_size):
    rng = np.random.default_rng(len(mode) + keep_size)
    hw = (120, 90)
    # At 45 and 135 degrees a turned box is square: whether its aspect ratio flipped (which
    # `halfway` and `fixed` ask) is up to f32 rounding, which the parity tests cover.
    angles = ANGLES if mode == "expand" else [a for a in ANGLES if a not in (45.0, 135.0)]
    boxes = [_boxes(rng, 12, hw, True, True, odd=False) for _ in angles]
    labels = [np.arange(12, dtype=np.int32) + 100 for _ in angles]
    args = {"angle": [np.array(a, np.float32) for a in angles]}
    out_b, out_l = _run(lib, boxes, labels, args=args, input_shape=list(hw), mode=mode, keep_size=keep_size)
    for b, got, lab, angle in zip(boxes, out_b, out_l, angles):
        want, kept = model(b, angle, hw, mode=mode, keep_size=keep_size)
        assert got.shape == want.shape, (angle, got, want)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(lab, kept + 100)


@pytest.mark.parametrize("lib", library_params())
def test_pixel_xywh_and_size_match_model(lib):
    rng = np.random.default_rng(11)
    hw = (80, 150)
    boxes = [_boxes(rng, 10, hw, False, False, odd=False) for _ in range(4)]
    for angle, size in [(25.0, None), (-140.0, [200.9, 120.2]), (90.0, [150.0, 80.0])]:
        kw = dict(angle=angle, input_shape=list(hw), bbox_layout="xyWH", bbox_normalized=False, remove_threshold=0.3)
        if size:
            kw["size"] = size
        (outs,) = _run(lib, boxes, **kw)
        for b, got in zip(boxes, outs):
            want, _ = model(b, angle, hw, ltrb=False, normalized=False, size=size, threshold=0.3)
            assert got.shape == want.shape, (angle, got, want)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("lib", library_params())
def test_boxes_of_no_area_are_always_removed(lib):
    """A box of no area keeps NaN of itself (0 / 0): removed even with remove_threshold=0."""
    b = [np.array([[0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.3, 0.1], [0.1, 0.1, 0.3, 0.4]], np.float32)]
    lab = [np.array([1, 2, 3], np.int32)]
    for keep_size in (False, True):
        out_b, out_l = _run(lib, b, lab, angle=0.0, input_shape=[10, 10], keep_size=keep_size, remove_threshold=0.0)
        assert out_b[0].shape == (1, 4)
        np.testing.assert_array_equal(out_l[0], [3])


@pytest.mark.parametrize("lib", library_params())
def test_angle_zero_keeps_pixel_boxes_exactly(lib):
    b = [np.array([[10, 20, 30, 60], [0, 0, 200, 100], [150, 90, 40, 9]], np.float32)]
    (out,) = _run(lib, b, angle=0.0, input_shape=[100, 200], bbox_normalized=False, bbox_layout="xyWH")
    np.testing.assert_array_equal(out[0], b[0])


# --------------------------------------------------------------------------- DALI's tests, ported
@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    """Two JPEGs with a few boxes each (DALI's test reads DALI_extra's COCO set)."""
    from test_readers_coco import write_coco

    d = tmp_path_factory.mktemp("bbox_rotate_coco")
    images = [dict(id=1, file_name="a.jpg", width=640, height=427), dict(id=2, file_name="b.jpg", width=333, height=500)]
    annotations = [
        dict(id=1, image_id=1, category_id=3, bbox=[210.5, 105.25, 120.0, 210.0], area=1.0, iscrowd=0),
        dict(id=2, image_id=1, category_id=5, bbox=[10.0, 300.0, 600.0, 100.0], area=1.0, iscrowd=0),
        dict(id=3, image_id=2, category_id=3, bbox=[100.0, 50.0, 80.0, 400.0], area=1.0, iscrowd=0),
    ]
    return write_coco(d, images, annotations, [dict(id=3), dict(id=5)])


def coco_rotate_pipeline(lib, root, ann, angle=45.0, keep_size=False, ltrb=True, ratio=False):
    @lib.pipeline_def(num_threads=1, batch_size=1, device_id=None)
    def pipe():
        image_enc, boxes, labels = lib.fn.readers.coco(file_root=root, annotations_file=ann, ltrb=ltrb, ratio=ratio)
        im_shape = lib.fn.peek_image_shape(image_enc)
        boxes_rot, labels_rot = lib.fn.bbox_rotate(
            boxes,
            labels,
            angle=angle,
            input_shape=im_shape,
            bbox_layout="xyXY" if ltrb else "xyWH",
            keep_size=keep_size,
            bbox_normalized=ratio,
        )
        return im_shape, boxes, boxes_rot, labels_rot

    return pipe()


@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("ratio", [True, False])
@pytest.mark.parametrize("ltrb", [True, False])
@pytest.mark.parametrize("keep_size", [True, False])
def test_bbox_rotate(lib, coco, ratio, ltrb, keep_size):
    """DALI's test_bbox_rotate: COCO boxes turned by 45 degrees, brought back to xyXY pixels
    on the rotated canvas, are where they should be (DALI: hard-coded boxes of its image;
    here the model's)."""
    angle = 45.0
    pipeline = coco_rotate_pipeline(lib, *coco, angle=angle, ratio=ratio, ltrb=ltrb, keep_size=keep_size)
    pipeline.build()
    for _ in range(2):
        outs = pipeline.run()
        im_hwc, boxes, boxes_rot, _ = map(lambda x: np.array(x.at(0)), outs)
        hw = (int(im_hwc[0]), int(im_hwc[1]))
        want, _ = model(boxes, angle, hw, ltrb=ltrb, normalized=ratio, keep_size=keep_size)
        canvas = hw if keep_size else rotated_canvas(*hw, angle)
        if ratio:
            boxes_rot = boxes_rot * np.tile(np.array(canvas[::-1])[None], 2)
            want = want * np.tile(np.array(canvas[::-1])[None], 2)
        if not ltrb:
            boxes_rot[..., 2:] += boxes_rot[..., :2]
            want[..., 2:] += want[..., :2]
        assert len(boxes_rot) > 0
        np.testing.assert_allclose(boxes_rot, want, rtol=1e-4, atol=1e-2)


@needs_dali
@pytest.mark.parametrize("ratio", [True, False])
@pytest.mark.parametrize("ltrb", [True, False])
@pytest.mark.parametrize("keep_size", [True, False])
def test_bbox_rotate_coco_equals_dali(coco, ratio, ltrb, keep_size):
    outs = []
    for lib in (sluice, dali):
        p = coco_rotate_pipeline(lib, *coco, ratio=ratio, ltrb=ltrb, keep_size=keep_size)
        p.build()
        outs.append([[np.array(o.at(0)) for o in p.run()] for _ in range(2)])
    for ours, ref in zip(*outs):
        _same_bits([[a] for a in ours], [[b] for b in ref])


def draw_box(im: np.ndarray, boxes: np.ndarray):
    """Overlay xyXY image-coordinates boxes as masks on image"""
    from PIL import Image, ImageDraw

    impil = Image.fromarray(im)
    imdraw = ImageDraw.Draw(impil)
    for box in boxes:
        imdraw.rectangle(box.tolist(), fill=1)
    return np.array(impil)


@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("threshold", [0.4, 0.6])
def test_cull_threshold(lib, threshold):
    """Test box is removed below 0.6 threshold and kept above 0.4 threshold"""
    cv2 = pytest.importorskip("cv2")
    angle = 45.0
    keep_size = True

    im = np.zeros((128, 128), dtype=np.uint8)
    boxes = np.array(((0, 0, 36, 36),), dtype=np.float32)
    im = draw_box(im, boxes)

    def datasource():
        # Add batch and channel dim for dataloader (fn.rotate needs HWC)
        yield im[None, ..., None], boxes[None]

    @lib.pipeline_def(num_threads=1, batch_size=1, device_id=None)
    def datapipe():
        im_, box_ = lib.fn.external_source(
            datasource,
            num_outputs=2,
            layout=["HWC", ""],
            dtype=[lib.types.DALIDataType.UINT8, lib.types.DALIDataType.FLOAT],
        )
        box_ = lib.fn.bbox_rotate(
            box_,
            angle=angle,
            input_shape=im_.shape(),
            keep_size=keep_size,
            remove_threshold=threshold,
            bbox_layout="xyXY",
            bbox_normalized=False,
        )
        im_ = lib.fn.rotate(im_, angle=angle, keep_size=keep_size, fill_value=0)
        return im_, box_

    pipe = datapipe()
    pipe.build()
    outs = pipe.run()
    im_rot, box_out = map(lambda x: np.array(x.at(0)), outs)

    # 45 deg scales h and w by sqrt2
    old_box_area = np.prod(boxes[..., 2:]) * (np.sqrt(2) ** 2)
    # Get actual box with bounding rect of rotated image
    box_rot = cv2.boundingRect(np.ascontiguousarray(im_rot[..., 0]))
    clip_box_area = box_rot[-1] * box_rot[-2]
    # Check the threshold change
    box_area_change = clip_box_area / old_box_area
    should_keep = box_area_change > threshold

    if threshold == 0.4:
        assert should_keep
    elif threshold == 0.6:
        assert not should_keep
    else:
        raise RuntimeError("unexpected threshold used")

    if should_keep:
        assert box_out.shape[0] > 0
    else:
        assert box_out.shape[0] == 0


@pytest.mark.parametrize("lib", library_params())
@pytest.mark.parametrize("expansion", ["expand", "halfway", "fixed"])
@pytest.mark.parametrize("angle", [45.0, 90.0])
def test_box_expansion_control(lib, expansion: str, angle: float):
    """Tests the bounding box expansion controls, ensuring aspect ratio flipping is recognised"""
    keep_size = True

    im = np.zeros((128, 128), dtype=np.uint8)
    boxes = np.array(((32, 48, 96, 80),), dtype=np.float32)
    im = draw_box(im, boxes)

    def datasource():
        # Add batch and channel dim for dataloader (fn.rotate needs HWC)
        yield im[None, ..., None], boxes[None]

    @lib.pipeline_def(num_threads=1, batch_size=1, device_id=None)
    def datapipe():
        im_, box_ = lib.fn.external_source(
            datasource,
            num_outputs=2,
            layout=["HWC", ""],
            dtype=[lib.types.DALIDataType.UINT8, lib.types.DALIDataType.FLOAT],
        )
        box_ = lib.fn.bbox_rotate(
            box_,
            angle=angle,
            input_shape=im_.shape(),
            keep_size=keep_size,
            bbox_layout="xyXY",
            bbox_normalized=False,
            mode=expansion,
        )
        return box_

    pipe = datapipe()
    pipe.build()
    box_out = np.array(pipe.run()[0].at(0))
    out_box_wh = box_out[..., 2:] - box_out[..., :2]
    in_box_wh = boxes[..., 2:] - boxes[..., :2]

    flipped_aspect = 45 < angle < 135 or 225 < angle < 315

    rad = np.deg2rad(angle)
    expansion_mat = np.abs(np.array([[np.cos(rad), np.sin(rad)], [np.sin(rad), np.cos(rad)]]))
    exp_box_wh = in_box_wh @ expansion_mat
    if expansion == "expand":
        np.testing.assert_allclose(out_box_wh, exp_box_wh)
    elif expansion == "halfway":
        if flipped_aspect:  # Flip wh when aspect ratio changes
            in_box_wh = in_box_wh[..., ::-1]
        diff = exp_box_wh - in_box_wh
        exp_box_wh -= diff / 2
        np.testing.assert_allclose(out_box_wh, exp_box_wh, rtol=1e-4, atol=1e-3)
    elif expansion == "fixed":
        if flipped_aspect:  # Flip wh when aspect ratio changes
            in_box_wh = in_box_wh[..., ::-1]
        np.testing.assert_allclose(out_box_wh, in_box_wh, rtol=1e-4, atol=1e-3)


# --------------------------------------------------------------------------- errors
def _error_pipe(batches, labels=None, args=None, **kw):
    """A built pipeline fed `batches` (and `labels`, argument inputs `args`) in turn."""
    it = iter(batches)
    lab_it = iter(labels) if labels is not None else None
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = sluice.pipeline.Pipeline(batch_size=len(batches[0]), num_threads=1, device_id=None)
    with pipe:
        x = sluice.fn.external_source(source=lambda: next(it), batch=True)
        nodes = {k: sluice.fn.external_source(source=(lambda i: lambda: next(i))(i), batch=True) for k, i in arg_its.items()}
        if lab_it is None:
            pipe.set_outputs(sluice.fn.bbox_rotate(x, **kw, **nodes))
        else:
            lab = sluice.fn.external_source(source=lambda: next(lab_it), batch=True)
            pipe.set_outputs(*sluice.fn.bbox_rotate(x, lab, **kw, **nodes))
    pipe.build()
    return pipe


GOOD = np.array([[0.1, 0.2, 0.4, 0.5]], np.float32)


def test_boxes_not_n_by_4_name_the_sample_and_the_pipeline_goes_on():
    """DALI only logs these (and reads N boxes, out of the sample for a flat list)."""
    bad = [[GOOD, np.zeros((1, 5), np.float32)], [GOOD, GOOD]]
    pipe = _error_pipe(bad, angle=30.0, input_shape=[100, 200])
    with pytest.raises(errors.DataError, match=r"(?s)bbox_rotate.*sample 1.*bboxes.*\[N,4\]"):
        pipe.run()
    (out,) = pipe.run()
    assert np.array(out.at(1)).shape == (1, 4)
    flat = [[GOOD.reshape(-1), GOOD.reshape(-1)]]
    with pytest.raises(errors.DataError, match=r"(?s)bbox_rotate.*sample 0.*bboxes"):
        _error_pipe(flat, angle=30.0, input_shape=[100, 200]).run()


def test_boxes_must_be_float32():
    with pytest.raises(errors.ArgumentTypeError, match=r"bbox_rotate.*bboxes.*float32"):
        _run(sluice, [GOOD.astype(np.float64)], angle=1.0, input_shape=[10, 10])
    if dali is not None:
        with pytest.raises(RuntimeError, match="float32"):
            _run(dali, [GOOD.astype(np.float64)], angle=1.0, input_shape=[10, 10])


def test_labels_errors_name_input_and_sample():
    boxes = [GOOD, np.concatenate([GOOD, GOOD])]
    # The next iteration's good labels keep the bad ones' number of dimensions (an external
    # source refuses a change of it between iterations).
    for labels, good, pattern in [
        ([np.array([1], np.int32), np.array([1], np.int32)], [np.array([7], np.int32), np.array([8, 9], np.int32)],
         r"(?s)bbox_rotate.*sample 1.*labels.*must match number of boxes.*1 and 2"),
        ([np.array([[1, 2]], np.int32), np.array([[1, 2], [3, 4]], np.int32)], [np.array([[7]], np.int32), np.array([[8], [9]], np.int32)],
         r"(?s)bbox_rotate.*sample 0.*labels.*\[N\] or \[N, 1\]"),
    ]:
        pipe = _error_pipe([boxes, boxes], [labels, good], angle=10.0, input_shape=[10, 10])
        with pytest.raises(errors.DataError, match=pattern):
            pipe.run()
        _, lab = pipe.run()
        np.testing.assert_array_equal(np.array(lab.at(1)), good[1])
        if dali is not None:
            with pytest.raises(RuntimeError):
                _run(dali, boxes, labels, angle=10.0, input_shape=[10, 10])
    with pytest.raises(errors.ArgumentTypeError, match=r"bbox_rotate.*labels.*int32"):
        _run(sluice, boxes, [np.array([1]), np.array([1, 2])], angle=1.0, input_shape=[10, 10])


@pytest.mark.parametrize(
    "kw,arg",
    [
        (dict(mode="bad"), "mode"),
        (dict(bbox_layout="XYxy"), "bbox_layout"),
        (dict(bbox_layout="ltrb"), "bbox_layout"),
        (dict(shape_layout="AB"), "shape_layout"),
        (dict(remove_threshold=1.5), "remove_threshold"),
        (dict(remove_threshold=-0.1), "remove_threshold"),
        # DALI 2.4's range is [0, 1), though its documentation describes 1.
        (dict(remove_threshold=1.0), "remove_threshold"),
        (dict(size=[]), "size"),
        (dict(size=[10.0, 20.0, 30.0]), "size"),
        (dict(size=[10.0, 20.0], keep_size=True), "size"),
    ],
)
def test_bad_arguments_name_operator_and_argument(kw, arg):
    args = dict(angle=10.0, input_shape=[10, 20])
    args.update(kw)
    with pytest.raises(errors.ArgumentError, match=rf"(?s)bbox_rotate.*'{arg}'"):
        _run(sluice, [GOOD], **args)
    if dali is not None:
        with pytest.raises(RuntimeError):
            _run(dali, [GOOD], **args)


def test_required_arguments():
    with pytest.raises(errors.SluiceError, match="angle"):
        _run(sluice, [GOOD], input_shape=[10, 10])
    with pytest.raises(errors.SluiceError, match="input_shape"):
        _run(sluice, [GOOD], angle=1.0)


def test_per_sample_argument_errors_name_the_sample():
    boxes = [GOOD, GOOD]
    cases = [
        ({"input_shape": [np.array([10, 20], np.int64), np.array([10], np.int64)]}, {"angle": 1.0}, r"(?s)bbox_rotate.*'input_shape'.*sample 1.*shape_layout"),
        ({"input_shape": [np.array([10, 20], np.float32)] * 2}, {"angle": 1.0}, r"(?s)bbox_rotate.*'input_shape'.*sample 0.*integral"),
        ({"angle": [np.array([1.0], np.float32), np.array([1.0, 2.0], np.float32)]}, {"input_shape": [10, 20]}, r"(?s)bbox_rotate.*'angle'.*sample 1"),
        ({"size": [np.array([10, 20], np.int32), np.array([1, 2, 3], np.int32)]}, {"angle": 1.0, "input_shape": [10, 20]}, r"(?s)bbox_rotate.*'size'.*sample 1"),
        ({"size": [np.array([10, 20], np.float64)] * 2}, {"angle": 1.0, "input_shape": [10, 20]}, r"(?s)bbox_rotate.*'size'.*sample 0.*int32, int64, uint32 or float"),
    ]
    for args, kw, pattern in cases:
        with pytest.raises(errors.ArgumentError, match=pattern):
            _run(sluice, boxes, args=args, **kw)
        if dali is not None:
            with pytest.raises(RuntimeError):
                _run(dali, boxes, args=args, **kw)
    with pytest.raises(errors.ArgumentError, match=r"(?s)bbox_rotate.*'input_shape'.*sample 0"):
        _run(sluice, boxes, angle=1.0, input_shape=[10])
    # Sluice refuses negative extents (DALI computes a meaningless canvas).
    with pytest.raises(errors.ArgumentError, match=r"(?s)bbox_rotate.*'input_shape'.*sample 0.*negative"):
        _run(sluice, boxes, angle=1.0, input_shape=[-10, 20])


def test_legacy_ops_class():
    boxes, _ = _batch(3, True, True, 3)
    pipe = sluice.pipeline.Pipeline(batch_size=len(boxes), num_threads=1, device_id=None)
    op = sluice.ops.BBoxRotate(device="cpu", angle=20.0, input_shape=[50, 60], mode="halfway")
    with pipe:
        pipe.set_outputs(op(sluice.fn.external_source(source=_const(boxes), batch=True)))
    pipe.build()
    (out,) = pipe.run()
    _same_bits([[np.array(out.at(i)) for i in range(len(out))]], _run(sluice, boxes, angle=20.0, input_shape=[50, 60], mode="halfway"))


def test_doc_is_dalis():
    doc = sluice.fn.bbox_rotate.__doc__
    assert "Transforms bounding boxes so that the boxes remain in the same place in the image after" in doc
    assert "remove_threshold" in doc and "keep_size" in doc

