"""Crop-window decoders and slice/random_resized_crop against DALI's CPU operators on the
mixed data set (same files, same fixed windows): exact equality."""

import numpy as np
import pytest

from sluice import fn as sfn, pipeline_def as spipeline_def, types as stypes

from conftest import all_files

dali = pytest.importorskip("nvidia.dali")
from nvidia.dali import fn as dfn, pipeline_def as dpipeline_def  # noqa: E402

BATCH = 8


def _jpegs(root):
    return [str(root / p) for p in all_files(root) if p.endswith(".jpg")][:24]


def _run_both(build, files):
    outs = []
    for fn, pdef in ((sfn, spipeline_def), (dfn, dpipeline_def)):
        @pdef(batch_size=BATCH, num_threads=2, device_id=None, seed=3)
        def p():
            data, _ = fn.readers.file(files=files)
            return build(fn, data)

        pipe = p()
        pipe.build()
        got = []
        for _ in range(len(files) // BATCH):
            (x,) = pipe.run()
            got += [np.array(x.at(i)) for i in range(len(x))]
        outs.append(got)
    return outs


@pytest.mark.parametrize("window", [dict(crop=(100, 120), crop_pos_x=0.3, crop_pos_y=0.7),
                                    dict(crop=(33, 250), crop_pos_x=1.0, crop_pos_y=0.0),
                                    dict(crop_h=201, crop_w=77)])
def test_image_crop_equals_dali(mixed_root, window):
    files = _jpegs(mixed_root)
    ours, theirs = _run_both(lambda fn, d: fn.decoders.image_crop(d, **window), files)
    for f, a, b in zip(files, ours, theirs):
        assert a.shape == b.shape, f
        np.testing.assert_array_equal(a, b, err_msg=f)


@pytest.mark.parametrize("anchor,shape,extra", [(0.15, 0.5, {}),
                                                (20.0, 50.0, dict(normalized_anchor=False, normalized_shape=False))])
def test_image_slice_equals_dali(mixed_root, anchor, shape, extra):
    files = _jpegs(mixed_root)

    def build(fn, d):
        # Constant anchor/shape inputs ([v, v] per sample) from a one-value random.uniform,
        # which both libraries have.
        a = fn.random.uniform(values=[anchor], shape=(2,))
        sh = fn.random.uniform(values=[shape], shape=(2,))
        return fn.decoders.image_slice(d, a, sh, **extra)

    ours, theirs = _run_both(build, files)
    for f, a, b in zip(files, ours, theirs):
        assert a.shape == b.shape, f
        np.testing.assert_array_equal(a, b, err_msg=f)


def test_slice_of_decoded_images_equals_dali_with_fixed_windows(mixed_root):
    files = _jpegs(mixed_root)

    def build(fn, d):
        img = fn.decoders.image(d)
        return fn.crop(img, crop=(64, 48), crop_pos_x=0.25, crop_pos_y=0.75, dtype=stypes.FLOAT if fn is sfn else dali.types.FLOAT)

    ours, theirs = _run_both(build, files)
    for f, a, b in zip(files, ours, theirs):
        np.testing.assert_array_equal(a, b, err_msg=f)
