"""A segmentation training pipeline end to end, written as a DALI user writes it (the BraTS /
COCO examples' shape) and run with `nvidia.dali` replaced by `sluice`:

    readers.coco(pixelwise_masks=True, polygon_masks=...) -> decoders.image
    -> segmentation.random_object_bbox (the ROI of an object of a random class)
    -> roi_random_crop (a fixed-size window holding the ROI) -> slice image and mask alike
    -> flip both by one coin -> crop_mirror_normalize; and segmentation.select_masks on the
    reader's polygons.

Where nothing random is involved (foreground_prob=0: the ROI is the whole image, polygons
selected by fixed ids) the outputs equal DALI 2.4's bit for bit; where it is, the outputs keep
the invariants a training loop relies on (the window holds the object, image and mask stay
aligned, the same seed gives the same batches whatever the thread count).
"""

import numpy as np
import pytest

import sluice

from conftest import dali_or_none
from test_readers_coco import random_mask_data, write_coco

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

CROP = (12, 12)
BATCH = 8


@pytest.fixture(scope="module")
def coco_set(tmp_path_factory):
    # Images of 14 to 48 pixels a side (each at least the crop), with 4 classes of polygons
    # and RLE masks.
    images, annotations, cats = random_mask_data(11, 80, 48)
    images = [im for im in images if min(im["width"], im["height"]) >= 14]
    kept = {im["id"] for im in images}
    annotations = [a for a in annotations if a["image_id"] in kept]
    assert len(images) >= 2 * BATCH
    return write_coco(tmp_path_factory.mktemp("seg"), images, annotations, cats)


def segmentation_pipe(lib, root, ann, fg_prob, num_threads=2, seed=77):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=BATCH, num_threads=num_threads, device_id=None, seed=seed)
    def pipe():
        jpegs, boxes, labels, masks = fn.readers.coco(file_root=root, annotations_file=ann, pixelwise_masks=True, name="R")
        images = fn.decoders.image(jpegs, device="cpu")
        roi_start, roi_end, cls = fn.segmentation.random_object_bbox(masks, format="start_end", foreground_prob=fg_prob, k_largest=2, output_class=True)
        anchor = fn.cast(fn.roi_random_crop(masks, roi_start=roi_start, roi_end=roi_end, crop_shape=[CROP[0], CROP[1], 1]), dtype=types.INT32)
        mask_crop = fn.slice(masks, anchor, [CROP[0], CROP[1], 1], axes=(0, 1, 2))
        image_crop = fn.slice(images, anchor[0:2], CROP, axes=(0, 1))
        flip = fn.random.coin_flip(probability=0.5)
        mask_crop = fn.flip(mask_crop, horizontal=flip)
        normalized = fn.crop_mirror_normalize(image_crop, mirror=flip, mean=[120.0, 115.0, 100.0], std=[60.0, 58.0, 57.0], dtype=types.FLOAT, output_layout="HWC")
        whole = fn.slice(images, roi_start[0:2], (roi_end - roi_start)[0:2], axes=(0, 1))
        return images, masks, roi_start, roi_end, cls, anchor, mask_crop, normalized, flip, whole

    p = pipe()
    p.build()
    return p


def outputs(pipe, n):
    out = []
    for _ in range(n):
        res = pipe.run()
        out.append([[np.array(o.at(i)) for i in range(len(o))] for o in res])
    return out


def test_random_objects_keep_image_and_mask_aligned(coco_set):
    root, ann = coco_set
    pipe = segmentation_pipe(sluice, root, ann, fg_prob=1.0)
    for batch in outputs(pipe, 4):
        images, masks, starts, ends, classes, anchors, mask_crops, normalized, flips, _ = batch
        for i in range(BATCH):
            image, mask, start, end, cls, anchor = images[i], masks[i], starts[i], ends[i], int(classes[i]), anchors[i]
            assert mask.shape[:2] == image.shape[:2] and mask.shape[2] == 1
            present = set(np.unique(mask).tolist()) - {0}
            if present:
                # The box bounds pixels of the class drawn, and the window holds the box.
                assert cls in present
                assert (mask[start[0]:end[0], start[1]:end[1], 0] == cls).any()
                # The window holds the box, or lies inside it when the box is larger.
                for d, c in enumerate([CROP[0], CROP[1], 1]):
                    if end[d] - start[d] <= c:
                        assert anchor[d] <= start[d] and anchor[d] + c >= end[d]
                    else:
                        assert start[d] <= anchor[d] and anchor[d] + c <= end[d]
            else:
                assert cls == 0 and list(start) == [0, 0, 0] and list(end) == list(mask.shape)
            # The mask and the image are cut and flipped alike.
            want_mask = mask[anchor[0]:anchor[0] + CROP[0], anchor[1]:anchor[1] + CROP[1]]
            want_image = image[anchor[0]:anchor[0] + CROP[0], anchor[1]:anchor[1] + CROP[1]].astype(np.float32)
            if flips[i]:
                want_mask, want_image = want_mask[:, ::-1], want_image[:, ::-1]
            np.testing.assert_array_equal(mask_crops[i], want_mask)
            want_norm = (want_image - np.float32([120.0, 115.0, 100.0])) / np.float32([60.0, 58.0, 57.0])
            np.testing.assert_allclose(normalized[i], want_norm, rtol=1e-6, atol=1e-6)


def test_same_batches_whatever_the_threads(coco_set):
    root, ann = coco_set
    a = outputs(segmentation_pipe(sluice, root, ann, fg_prob=0.7, num_threads=1), 3)
    b = outputs(segmentation_pipe(sluice, root, ann, fg_prob=0.7, num_threads=4), 3)
    for x, y in zip(a, b):
        for ox, oy in zip(x, y):
            for sx, sy in zip(ox, oy):
                np.testing.assert_array_equal(sx, sy)


@needs_dali
def test_whole_image_roi_equals_dali(coco_set):
    """foreground_prob=0: the ROI is the whole input in both libraries, so the reader, the
    decoder, the box, the class (the background) and the slice by the box are compared bit
    for bit with DALI 2.4."""
    root, ann = coco_set
    ours = outputs(segmentation_pipe(sluice, root, ann, fg_prob=0.0), 3)
    theirs = outputs(segmentation_pipe(dali, root, ann, fg_prob=0.0), 3)
    deterministic = [0, 1, 2, 3, 4, 9]  # images, masks, roi start, roi end, class, whole-ROI slice
    for x, y in zip(ours, theirs):
        for k in deterministic:
            for sx, sy in zip(x[k], y[k]):
                assert sx.dtype == sy.dtype and sx.shape == sy.shape, k
                np.testing.assert_array_equal(sx, sy)


@pytest.fixture(scope="module")
def polygon_set(tmp_path_factory):
    images, annotations, cats = random_mask_data(12, 40, 48, kinds=("poly",))
    return write_coco(tmp_path_factory.mktemp("polys"), images, annotations, cats)


@needs_dali
def test_polygon_selection_equals_dali(polygon_set):
    """readers.coco(polygon_masks=True, skip_empty=True) -> segmentation.select_masks of the
    first mask id (every kept image has one): equal to DALI 2.4."""
    root, ann = polygon_set

    def run(lib):
        fn = lib.fn

        @lib.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
        def pipe():
            _, boxes, labels, polygons, vertices = fn.readers.coco(file_root=root, annotations_file=ann, polygon_masks=True, skip_empty=True)
            ids = fn.external_source(lambda: [np.int32([0])] * BATCH, batch=True)
            sel_polys, sel_verts = fn.segmentation.select_masks(ids, polygons, vertices, reindex_masks=True)
            return polygons, vertices, sel_polys, sel_verts

        p = pipe()
        p.build()
        return outputs(p, 2)

    ours, theirs = run(sluice), run(dali)
    for x, y in zip(ours, theirs):
        for ox, oy in zip(x, y):
            for sx, sy in zip(ox, oy):
                assert sx.dtype == sy.dtype and sx.shape == sy.shape
                np.testing.assert_array_equal(sx, sy)
