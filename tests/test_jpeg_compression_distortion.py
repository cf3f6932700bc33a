"""`fn.jpeg_compression_distortion` (cpu and gpu) against DALI 2.4's cpu operator and OpenCV.

- DALI's tests (operator_1/test_jpeg_compression_distortion.py) ported with `nvidia.dali`
  replaced by `sluice` (generated images instead of DALI_extra's TIFFs): the OpenCV
  `imencode`/`imdecode` reference (mean difference below 5, DALI's bound), constant and
  per-sample random `quality`, HWC and FHWC; a slice of a distorted sequence equals the
  distorted slice.
- Parity with DALI 2.4's cpu operator on the same images and qualities, bit for bit: both
  run libjpeg-turbo's baseline 4:2:0 coder (accurate DCT, fancy upsampling).
- Errors name the operator and the sample; the pipeline goes on.
- DALI's gpu cases run on Sluice's gpu backend (the same OpenCV bound), and the gpu equals
  the cpu bit for bit (libjpeg-turbo's integer arithmetic without the entropy coding).
"""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

SEQUENCE_LENGTH = 4


def _smooth_images(rng, n, h=61, w=83):
    """Photographic-ish content (gradients, edges, noise) so that quality matters."""
    y, x = np.mgrid[0:h, 0:w]
    out = []
    for _ in range(n):
        base = np.stack([128 + 100 * np.sin(x / rng.uniform(5, 15) + c) * np.cos(y / rng.uniform(5, 15)) for c in range(3)], -1)
        base += rng.normal(0, 8, base.shape)
        base[h // 3: h // 2, w // 4: w // 2] = rng.integers(0, 256, 3)
        out.append(np.clip(base, 0, 255).astype(np.uint8))
    return out


def _compare_to_cv_distortion(in_img, out_img, q):
    cv2 = pytest.importorskip("cv2")
    bgr = cv2.cvtColor(in_img, cv2.COLOR_RGB2BGR)
    _, encoded_img = cv2.imencode(".jpg", bgr, params=[int(cv2.IMWRITE_JPEG_QUALITY), q])
    decoded_img = cv2.cvtColor(cv2.imdecode(encoded_img, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    diff = cv2.absdiff(out_img, decoded_img)
    assert np.average(diff) < 5, f"Absolute difference with the reference is too big: {np.average(diff)}"


def _images_iter(rng, layout):
    if layout == "FHWC":
        return lambda: _stack(rng)
    return lambda: _smooth_images(rng, 1)[0]


def _stack(rng):
    frames = _smooth_images(rng, SEQUENCE_LENGTH)
    return np.stack(frames)


@pytest.mark.parametrize("batch_size", [1, 15])
@pytest.mark.parametrize("quality", [2, None, 50])
@pytest.mark.parametrize("layout", ["HWC", "FHWC"])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_jpeg_compression_distortion(batch_size, quality, layout, device):
    if device == "gpu":
        require_gpu()
    rng = np.random.default_rng(batch_size)
    source = _images_iter(rng, layout)

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0 if device == "gpu" else None, seed=3)
    def jpeg_distortion_pipe():
        in_tensors = fn.external_source(source=source, layout=layout, batch=False)
        inputs = in_tensors.gpu() if device == "gpu" else in_tensors
        q = quality if quality is not None else fn.random.uniform(range=[1, 99], dtype=types.INT32)
        return fn.jpeg_compression_distortion(inputs, quality=q), in_tensors, q

    pipe = jpeg_distortion_pipe()
    pipe.build()
    for _ in range(2):
        out, inp, q = pipe.run()
        out = out.as_cpu() if device == "gpu" else out
        assert out.layout() == layout
        for i in range(batch_size):
            o, x = np.array(out[i]), np.array(inp[i])
            qi = quality if quality is not None else int(np.array(q[i]))
            for j in range(x.shape[0] if layout == "FHWC" else 1):
                _compare_to_cv_distortion(x[j] if layout == "FHWC" else x, o[j] if layout == "FHWC" else o, qi)


@pytest.mark.parametrize("quality", [2, None, 50])
def test_jpeg_compression_distortion_sequence(quality):
    rng = np.random.default_rng(7)
    batch_size = 3

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=5)
    def jpeg_distortion_pipe():
        inputs = fn.external_source(source=lambda: _stack(rng), layout="FHWC", batch=False)
        q = quality if quality is not None else fn.random.uniform(range=[1, 99], dtype=types.INT32)
        tmp = fn.jpeg_compression_distortion(inputs, quality=q)
        outs = []
        for i in range(SEQUENCE_LENGTH):
            outs.append(fn.slice(tmp, axes=(0,), start=(i,), end=(i + 1,)))
            outs.append(fn.jpeg_compression_distortion(fn.slice(inputs, axes=(0,), start=(i,), end=(i + 1,)), quality=q))
        return tuple(outs)

    pipe = jpeg_distortion_pipe()
    pipe.build()
    for _ in range(2):
        out = pipe.run()
        assert len(out) == 2 * SEQUENCE_LENGTH
        for i in range(0, len(out), 2):
            for s in range(batch_size):
                np.testing.assert_array_equal(np.array(out[i][s]), np.array(out[i + 1][s]))


def _distort(lib, data, quality, layout="HWC"):
    @lib.pipeline_def(batch_size=len(data), num_threads=2, device_id=None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout=layout)
        q = lib.fn.external_source(lambda: [np.int32(v) for v in quality]) if isinstance(quality, list) else quality
        return lib.fn.jpeg_compression_distortion(x, quality=q)

    p = pipe()
    p.build()
    return [np.array(o) for o in p.run()[0]]


@needs_dali
@pytest.mark.parametrize("quality", [1, 10, 50, 95, 100, [0, 37, 250, -3]])
def test_equals_dali(quality):
    rng = np.random.default_rng(11)
    data = _smooth_images(rng, 4) + [rng.integers(0, 256, (17, 9, 3), dtype=np.uint8)]
    data = data[:4]
    ours, theirs = _distort(sluice, data, quality), _distort(dali, data, quality)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("layout", ["HWC", "FHWC"])
def test_gpu_equals_cpu(layout):
    require_gpu()
    rng = np.random.default_rng(23)
    if layout == "HWC":
        sizes = [(61, 83), (1, 1), (2, 7), (16, 16), (17, 33), (480, 640), (5, 3), (0, 4)]
        data = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes[:4]] + _smooth_images(rng, 1, 17, 33) + _smooth_images(rng, 1, 480, 640) + [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes[6:]]
    else:
        data = [_stack(rng), np.zeros((0, 8, 8, 3), np.uint8), np.stack(_smooth_images(rng, 2, 9, 13))]
    quality = [int(v) for v in rng.integers(-5, 110, len(data))]

    def run(device):
        @pipeline_def(batch_size=len(data), num_threads=2, device_id=0 if device == "gpu" else None)
        def pipe():
            x = fn.external_source(lambda: data, layout=layout)
            q = fn.external_source(lambda: [np.int32(v) for v in quality])
            x = x.gpu() if device == "gpu" else x
            return fn.jpeg_compression_distortion(x, quality=q), fn.jpeg_compression_distortion(x, quality=7)

        p = pipe()
        p.build()
        outs = p.run()
        return [[np.array(o.as_cpu()[i] if device == "gpu" else o[i]) for i in range(len(data))] for o in outs]

    for got, want in zip(run("gpu"), run("cpu")):
        for a, b in zip(got, want):
            assert a.shape == b.shape and np.array_equal(a, b)


@needs_dali
def test_odd_sizes_and_sequences_equal_dali():
    rng = np.random.default_rng(12)
    data = [rng.integers(0, 256, s, dtype=np.uint8) for s in [(1, 1, 3), (17, 9, 3), (8, 16, 3), (3, 200, 3)]]
    for a, b in zip(_distort(sluice, data, 30), _distort(dali, data, 30)):
        assert np.array_equal(a, b)
    seqs = [np.stack(_smooth_images(rng, 3, 20, 30)), np.stack(_smooth_images(rng, 2, 20, 30))]
    for a, b in zip(_distort(sluice, seqs, 20, "FHWC"), _distort(dali, seqs, 20, "FHWC")):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_quality_lowers_fidelity():
    rng = np.random.default_rng(13)
    data = _smooth_images(rng, 1)
    err = {q: np.abs(_distort(sluice, data, q)[0].astype(int) - data[0]).mean() for q in (5, 50, 95)}
    assert err[5] > err[50] > err[95]


def test_bad_inputs_name_the_sample():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.jpeg_compression_distortion(fn.external_source(lambda: [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)], layout="HWC"))

    p = pipe()
    p.build()
    with pytest.raises(errors.DataError, match="jpeg_compression_distortion.*sample 1.*3 channels"):
        p.run()
    with pytest.raises(errors.DataError):
        p.run()

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def floats():
        return fn.jpeg_compression_distortion(fn.external_source(lambda: [np.zeros((4, 4, 3), np.float32)], layout="HWC"))

    p = floats()
    p.build()
    with pytest.raises(errors.DataError, match="unsupported input type"):
        p.run()
