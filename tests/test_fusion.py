"""The CPU graph fuses resize -> crop_mirror_normalize into one pass (only the pixels inside
the crop window are resampled). Its output must equal the unfused pipeline bit for bit. The
unfused reference is the same pipeline with the resized images also returned as an output:
a resize that is a pipeline output cannot be fused. Statistics name a fused node
`<resize>+<cmn>`, which tells the two apart."""

import numpy as np
import pytest

from sluice import fn, pipeline_def, types

BATCH = 6
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def _run(build, root, keep_resized, iterations=2):
    """Runs `build(jpegs) -> (resized, out)`; returns the `out` samples and the stats names."""

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=11)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(root))
        resized, out = build(jpegs)
        return (out, resized) if keep_resized else out

    pipe = p()
    pipe.build()
    got = []
    for _ in range(iterations):
        x = pipe.run()[0]
        got += [np.array(x.at(i)) for i in range(len(x))]
    return got, list(pipe.executor_statistics())


def _fused(names):
    return [n for n in names if "+" in n]


def _assert_same_bits(a_samples, b_samples):
    assert len(a_samples) == len(b_samples)
    for i, (a, b) in enumerate(zip(a_samples, b_samples)):
        assert a.shape == b.shape and a.dtype == b.dtype, i
        # Compare the bits (so -0.0 vs 0.0 or NaN payloads would count as differences).
        ua, ub = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
        assert np.array_equal(ua, ub), f"sample {i}: {np.count_nonzero(ua != ub)} elements differ"


def _check(build, root, fused=True):
    ours, names = _run(build, root, keep_resized=False)
    ref, ref_names = _run(build, root, keep_resized=True)
    assert not _fused(ref_names), ref_names
    assert bool(_fused(names)) == fused, names
    _assert_same_bits(ours, ref)
    return ours


def _train(layout, dtype, mirror):
    def build(jpegs):
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0], seed=5)
        resized = fn.resize(images, resize_x=224, resize_y=224)
        m = fn.random.coin_flip(probability=0.5, seed=9) if mirror == "coin" else mirror
        out = fn.crop_mirror_normalize(resized, dtype=dtype, output_layout=layout, crop=(224, 224), mean=MEAN, std=STD, mirror=m)
        return resized, out
    return build


def _val(layout, dtype, mirror, **crop_args):
    def build(jpegs):
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        resized = fn.resize(images, resize_shorter=256)
        out = fn.crop_mirror_normalize(resized, dtype=dtype, output_layout=layout, crop=(224, 224), mean=MEAN, std=STD,
                                       mirror=mirror, **crop_args)
        return resized, out
    return build


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("dtype", [types.FLOAT, types.FLOAT16, types.UINT8])
@pytest.mark.parametrize("mirror", [0, 1, "coin"])
def test_fused_train_pipeline_equals_unfused(small_images, layout, dtype, mirror):
    out = _check(_train(layout, dtype, mirror), small_images)
    assert out[0].shape == ((3, 224, 224) if layout == "CHW" else (224, 224, 3))


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("dtype", [types.FLOAT, types.FLOAT16, types.UINT8])
@pytest.mark.parametrize("mirror", [0, 1])
def test_fused_val_pipeline_equals_unfused(small_images, layout, dtype, mirror):
    _check(_val(layout, dtype, mirror), small_images)


def test_fused_with_per_sample_window_and_sizes(small_images):
    """Argument inputs of both operators (resize sizes, crop position, mirror) reach the fused node."""

    def build(jpegs):
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        resized = fn.resize(images, resize_shorter=fn.random.uniform(range=(160.0, 300.0), seed=3),
                            interp_type=types.INTERP_CUBIC)
        out = fn.crop_mirror_normalize(resized, crop=(150, 130), crop_pos_x=fn.random.uniform(range=(0.0, 1.0), seed=4),
                                       crop_pos_y=fn.random.uniform(range=(0.0, 1.0), seed=6),
                                       mirror=fn.random.coin_flip(seed=8), mean=[10.0, 20.0, 30.0], std=[3.0], scale=1.5, shift=2.0)
        return resized, out

    _check(build, small_images)


def _val_with(resize_args, cmn_args):
    def build(jpegs):
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        resized = fn.resize(images, **resize_args)
        out = fn.crop_mirror_normalize(resized, mean=MEAN, std=STD, **cmn_args)
        return resized, out
    return build


@pytest.mark.parametrize("resize_args,cmn_args", [
    # The window leaves the resized image: padding, which the fused kernel does not do.
    (dict(resize_shorter=200), dict(crop=(224, 224), out_of_bounds_policy="pad", fill_values=[7.0])),
    # Nearest neighbour on both axes, float resize output, a padded channel: all unfused paths.
    (dict(resize_shorter=256, interp_type=types.INTERP_NN), dict(crop=(224, 224))),
    (dict(resize_shorter=256, dtype=types.FLOAT), dict(crop=(224, 224))),
    (dict(resize_shorter=256), dict(crop=(224, 224), pad_output=True, output_layout="HWC")),
])
def test_fused_node_falls_back_where_the_fused_kernel_does_not_apply(small_images, resize_args, cmn_args):
    _check(_val_with(resize_args, cmn_args), small_images)


def test_no_fusion_when_the_resize_has_another_consumer(small_images):
    def build(jpegs):
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        resized = fn.resize(images, resize_shorter=256)
        out = fn.crop_mirror_normalize(resized, crop=(224, 224)) + fn.crop_mirror_normalize(resized, crop=(224, 224))
        return resized, out

    _, names = _run(build, small_images, keep_resized=False)
    assert not _fused(names), names


def test_errors_name_the_users_operator(small_images):
    """Both pipelines are fused; each error names the operator whose argument is wrong."""
    with pytest.raises(RuntimeError) as e:
        _run(_val_with(dict(resize_shorter=100), dict(crop=(224, 224))), small_images, keep_resized=False)
    assert "crop_mirror_normalize" in str(e.value) and "does not fit" in str(e.value)
    with pytest.raises(ValueError) as e:
        _run(_val_with(dict(resize_shorter=fn.random.uniform(values=[float("inf")])), dict(crop=(224, 224))), small_images,
             keep_resized=False)
    assert "resize" in str(e.value) and "crop_mirror_normalize" not in str(e.value)
