"""GPU operators on batches of more than 65,535 samples: CUDA grids have at most 65,535 rows,
and the per-sample kernels give each sample a row, so such batches run in several launches
(`gpu_params::per_sample_launches`). Batches that large come from operators run frame by frame
on long sequences (per-frame arguments), or from batches of many small samples. Each case
compares the gpu backend with the cpu backend on the same batch."""

import numpy as np
import pytest

from sluice import fn, types
from sluice.pipeline import Pipeline

from conftest import require_gpu

N = 70_000  # past 65,535 grid rows


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(1).integers(0, 256, (N, 4, 5, 3), dtype=np.uint8)


def _run(batch, build, device, layout="HWC"):
    pipe = Pipeline(batch_size=len(batch), num_threads=4, device_id=None if device == "cpu" else 0, seed=7, prefetch_queue_depth=1)
    with pipe:
        x = fn.external_source(source=lambda: batch, batch=True, layout=layout)
        if device == "gpu":
            x = x.gpu()
        outs = build(x)
        pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    pipe.build()
    res = pipe.run()
    return [o.as_cpu() if device == "gpu" else o for o in res]


CASES = {
    "arithmetic": lambda x: x * 2 + 1,
    "cast": lambda x: fn.cast(x, dtype=types.FLOAT),
    "flip": lambda x: fn.flip(x, horizontal=1),
    "transpose": lambda x: fn.transpose(x, perm=[2, 0, 1]),
    "crop_mirror_normalize": lambda x: fn.crop_mirror_normalize(x, crop=[3, 3], mean=[1.0, 2.0, 3.0], std=[2.0, 2.0, 2.0], mirror=1),
    "slice": lambda x: fn.slice(x, [1, 1], [2, 3], axes=[0, 1]),
    "resize": lambda x: fn.resize(x, size=[6, 7]),
    "normalize": lambda x: fn.normalize(fn.cast(x, dtype=types.FLOAT), axes=[0, 1]),
    "warp_affine": lambda x: fn.warp_affine(x, matrix=[0.9, 0.1, 0.2, -0.1, 1.1, 0.3], fill_value=0),
    "rotate": lambda x: fn.rotate(x, angle=30.0, fill_value=0),
    "gaussian_blur": lambda x: fn.gaussian_blur(x, window_size=3),
    "laplacian": lambda x: fn.laplacian(x, window_size=3),
    "brightness_contrast": lambda x: fn.brightness_contrast(x, brightness=1.2, contrast=0.8),
    "color_space_conversion": lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.YCbCr),
    "erase": lambda x: fn.erase(x, anchor=[1, 1], shape=[2, 2], axis_names="HW", fill_value=9),
    "lookup_table": lambda x: fn.lookup_table(x, keys=[1, 2, 3], values=[7, 8, 9], default_value=0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_batches_past_the_grid_row_limit_equal_cpu(images, name):
    require_gpu()
    build = CASES[name]
    (cpu,) = _run(images, build, "cpu")
    (gpu,) = _run(images, build, "gpu")
    assert len(gpu) == len(cpu) == N
    a, b = np.stack([np.asarray(cpu.at(i)) for i in range(N)]), np.stack([np.asarray(gpu.at(i)) for i in range(N)])
    assert a.dtype == b.dtype and a.shape == b.shape
    if name in ("resize", "normalize"):
        np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), atol=1.0 if name == "resize" else 1e-4)
    else:
        np.testing.assert_array_equal(b, a)
    # The last samples (in the second launch) are written, not left as the allocation found them.
    assert not np.array_equal(b[-3:], np.zeros_like(b[-3:])) or not a[-3:].any()


def test_gpu_per_frame_arguments_on_a_long_sequence():
    """One sequence of 70,000 frames with a per-frame argument: the operator runs on its
    frames, a batch of 70,000 samples."""
    require_gpu()
    seq = [np.random.default_rng(2).integers(0, 256, (N, 3, 4, 3), dtype=np.uint8)]
    angles = np.linspace(-40, 40, N, dtype=np.float32)
    gains = np.linspace(0.5, 1.5, N, dtype=np.float32)

    def build(x):
        a = fn.external_source(source=lambda: [angles], batch=True, layout="F")
        g = fn.external_source(source=lambda: [gains], batch=True, layout="F")
        return (fn.rotate(x, angle=fn.per_frame(a), fill_value=0, keep_size=True),
                fn.brightness(x, brightness=fn.per_frame(g)))

    cpu = _run(seq, build, "cpu", layout="FHWC")
    gpu = _run(seq, build, "gpu", layout="FHWC")
    for c, g in zip(cpu, gpu):
        np.testing.assert_array_equal(np.asarray(g.at(0)), np.asarray(c.at(0)))


def test_gpu_box_encoder_past_the_grid_row_limit_equals_cpu():
    """box_encoder's kernel gives each sample a block of its own (one grid row): 70,000
    samples take two launches."""
    require_gpu()
    rng = np.random.default_rng(3)
    lo = rng.uniform(0.0, 0.5, (N, 2, 2)).astype(np.float32)
    boxes = np.concatenate([lo, lo + rng.uniform(0.1, 0.5, (N, 2, 2)).astype(np.float32)], axis=2)
    labels = rng.integers(1, 5, (N, 2), dtype=np.int32)
    anchors = [0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0, 1.0, 0.2, 0.2, 0.7, 0.7]

    def run(device):
        pipe = Pipeline(batch_size=N, num_threads=4, device_id=None if device == "cpu" else 0, prefetch_queue_depth=1)
        with pipe:
            b = fn.external_source(source=lambda: list(boxes), batch=True)
            lab = fn.external_source(source=lambda: list(labels), batch=True)
            if device == "gpu":
                b, lab = b.gpu(), lab.gpu()
            out = fn.box_encoder(b, lab, anchors=anchors, criteria=0.4, offset=True, scale=2.0, stds=[0.1, 0.1, 0.2, 0.2])
            pipe.set_outputs(*out)
        pipe.build()
        outs = [t.as_cpu() if device == "gpu" else t for t in pipe.run()]
        return [np.stack([np.asarray(t.at(i)) for i in range(N)]) for t in outs]

    (cpu_boxes, cpu_labels), (gpu_boxes, gpu_labels) = run("cpu"), run("gpu")
    assert gpu_boxes.shape == (N, 5, 4) and gpu_labels.shape == (N, 5)
    np.testing.assert_array_equal(gpu_labels, cpu_labels)
    # offset=True takes logarithms: the gpu's logf is within a few ulp of the cpu's.
    np.testing.assert_allclose(gpu_boxes, cpu_boxes, rtol=1e-5, atol=1e-5)
    assert (gpu_labels[-100:] != 0).any()
