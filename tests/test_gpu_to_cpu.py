"""GPU -> CPU transitions: `DataNode.cpu()` on GPU data, as DALI's dynamic executor allows
(`exec_dynamic`, DALI's default since 2.0 for asynchronous pipelined pipelines).

Ported from DALI's test_pipeline.py (test_gpu2cpu, test_gpu2cpu_arg_input, test_gpu2cpu2mixed,
test_shapes_gpu, test_gpu2cpu_old_exec_error, test_gpu2cpu_conditionals) and
operator_1/test_get_property.py (test_get_property_gpu2cpu), imports renamed; DALI_extra's
JPEG folder is the generated `small_images` set. The build-time checks need no GPU (nothing
runs); the rest run on the GPU machine.
"""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types
from sluice.tensors import TensorListCPU, TensorListGPU

from conftest import require_gpu


def _arrays(batch):
    batch = batch.as_cpu() if isinstance(batch, TensorListGPU) else batch
    return [np.array(batch[i]) for i in range(len(batch))]


def _same(a, b):
    xs, ys = _arrays(a), _arrays(b)
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------- no GPU needed
def test_exec_dynamic_defaults_as_dali():
    """DALI 2.x: dynamic unless the pipeline is synchronous, not pipelined, or has a queue
    depth per stage; an explicit value wins."""
    assert sluice.Pipeline(batch_size=1, device_id=None).exec_dynamic
    assert not sluice.Pipeline(batch_size=1, device_id=None, exec_async=False, exec_pipelined=False).exec_dynamic
    assert not sluice.Pipeline(batch_size=1, device_id=None, exec_pipelined=False).exec_dynamic
    assert not sluice.Pipeline(batch_size=1, device_id=None,
                               prefetch_queue_depth={"cpu_size": 2, "gpu_size": 2}).exec_dynamic
    assert not sluice.Pipeline(batch_size=1, device_id=None, exec_dynamic=False).exec_dynamic
    assert sluice.Pipeline(batch_size=1, device_id=None, exec_async=False, exec_dynamic=True).exec_dynamic
    assert sluice.Pipeline(batch_size=1, device_id=None, exec_async=False, exec_pipelined=False,
                           experimental_exec_dynamic=True).exec_dynamic


def test_gpu2cpu_old_exec_error():
    """DALI's test_gpu2cpu_old_exec_error: `.cpu()` of GPU data in a pipeline without the
    dynamic executor is refused where it is written; recorded outside any pipeline, at
    build."""

    @pipeline_def(batch_size=2, num_threads=1, device_id=0, exec_async=False, exec_pipelined=False,
                  exec_dynamic=False)
    def pdef(to_cpu):
        x = fn.external_source(source=lambda: [np.zeros((2, 3), np.uint8)] * 2, batch=True)
        return to_cpu(x.gpu())

    with pytest.raises(RuntimeError, match="doesn't support transition from GPU to CPU") as e:
        pdef(lambda gpu: gpu.cpu())
    assert isinstance(e.value, sluice.errors.GraphError)
    assert "exec_dynamic=True" in str(e.value)
    for to_cpu in (lambda gpu: gpu.shape(), lambda gpu: gpu.source_info(), lambda gpu: gpu.property("layout")):
        with pytest.raises(RuntimeError, match="doesn't support transition from GPU to CPU"):
            pdef(to_cpu)

    # Recorded with no pipeline current: the pipeline's build refuses it.
    x = fn.external_source(source=lambda: [np.zeros((2, 3), np.uint8)] * 2, batch=True)
    back = x.gpu().cpu()
    assert back.device == "cpu"
    pipe = sluice.Pipeline(batch_size=2, num_threads=1, device_id=0, exec_async=False, exec_pipelined=False)
    pipe.set_outputs(back)
    with pytest.raises(RuntimeError, match="doesn't support transition from GPU to CPU"):
        pipe.build()


def test_cpu_operators_take_gpu_data_through_cpu_only():
    """`.cpu()` is the way back: any other cpu operator given GPU data (but `shapes` and
    `get_property`, which read metadata), or a GPU argument input, is refused, naming it."""
    pipe = sluice.Pipeline(batch_size=1, num_threads=1, device_id=0)
    with pipe:
        x = fn.external_source(source=lambda: [np.zeros((2, 3), np.float32)], batch=True)
        g = x.gpu()
        with pytest.raises(sluice.errors.GraphError, match=r"cast \(device='cpu'\): input 0 is on the GPU; bring it back with `\.cpu\(\)`"):
            fn.cast(g, dtype=types.INT32, device="cpu")
        with pytest.raises(sluice.errors.GraphError, match=r"argument input 'shape' must be a CPU DataNode; it is on the GPU \(`\.cpu\(\)` brings it back\)"):
            fn.zeros(shape=fn.cast(g, dtype=types.INT32), dtype=types.INT32)
        assert g.cpu().device == "cpu"
        assert g.shape().device == "cpu" and g.shape(device="gpu").device == "gpu"
        assert g.source_info().device == "cpu" and g.property("layout", device="gpu").device == "gpu"
        assert fn.shapes(g, device="cpu").device == "cpu"
        assert fn.get_property(g, key="layout", device="cpu").device == "cpu"
        assert x.cpu() is x


def test_cpu_only_pipeline_still_refuses_gpu():
    pipe = sluice.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: [np.zeros((2, 3), np.uint8)], batch=True)
        pipe.set_outputs(x.gpu().cpu())
    with pytest.raises(sluice.errors.GraphError, match=r"CPU-only \(device_id=None\)"):
        pipe.build()


# --------------------------------------------------------------------------- on the GPU
def test_gpu2cpu(small_images):
    """DALI's test_gpu2cpu: the decoded GPU batch and its copy back to the CPU."""
    require_gpu()
    bs = 8

    @pipeline_def(batch_size=bs, num_threads=4, device_id=0, exec_dynamic=True)
    def pdef():
        enc, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(enc, device="mixed")
        return img, img.cpu()

    pipe = pdef()
    for _ in range(4):
        gpu, cpu = pipe.run()
        assert isinstance(gpu, TensorListGPU)
        assert isinstance(cpu, TensorListCPU)
        assert cpu.layout() == "HWC"
        _same(cpu, gpu)


def test_gpu2cpu_arg_input():
    """DALI's test_gpu2cpu_arg_input: GPU data, brought back, as an argument input."""
    require_gpu()

    @pipeline_def(batch_size=1, num_threads=4, device_id=0, exec_dynamic=True)
    def pdef():
        data = types.Constant([42], device="gpu")
        return fn.zeros(shape=data.cpu(), dtype=types.INT32)

    pipe = pdef()
    (o,) = pipe.run()
    assert o[0].shape() == [42]


def test_gpu2cpu2mixed(small_images):
    """DALI's test_gpu2cpu2mixed: encoded files through the GPU and back, then decoded."""
    require_gpu()
    bs = 8

    @pipeline_def(batch_size=bs, num_threads=4, device_id=0, exec_dynamic=True)
    def pdef():
        enc, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(enc, device="mixed", hw_decoder_load=0)
        enc2 = (enc.gpu() + np.uint8(0)).cpu()
        img2 = fn.decoders.image(enc2, device="mixed", hw_decoder_load=0)
        return img, img2

    pipe = pdef()
    for _ in range(4):
        gpu, gpu2 = pipe.run()
        assert isinstance(gpu, TensorListGPU) and isinstance(gpu2, TensorListGPU)
        _same(gpu, gpu2)


def test_shapes_gpu(small_images):
    """DALI's test_shapes_gpu: shapes of GPU data, on the CPU, five ways."""
    require_gpu()
    bs = 8

    @pipeline_def(batch_size=bs, num_threads=4, device_id=0, exec_dynamic=True)
    def pdef():
        enc, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(enc, device="mixed")
        peek = fn.peek_image_shape(enc)
        shapes_of_gpu = fn.shapes(img, device="cpu")
        shapes_of_cpu = fn.shapes(img.cpu())
        return peek, shapes_of_gpu, shapes_of_cpu, img.shape(), img.cpu().shape()

    pipe = pdef()
    for _ in range(4):
        peek, *others = pipe.run()
        assert isinstance(peek, TensorListCPU)
        for o in others:
            assert isinstance(o, TensorListCPU)
            for a, b in zip(_arrays(o), _arrays(peek)):
                np.testing.assert_array_equal(a, b.astype(a.dtype))


def test_gpu2cpu_conditionals(small_images):
    """DALI's test_gpu2cpu_conditionals: `.cpu()` inside both branches of an `if`."""
    require_gpu()
    bs = 4

    @pipeline_def(batch_size=bs, num_threads=4, device_id=0, exec_dynamic=True, enable_conditionals=True)
    def def_test():
        enc, label = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(enc, device="mixed")
        # return inverted image for even samples
        if (label[0] & 1) == 0:
            out = img ^ np.uint8(255)
            out_cpu = out.cpu()
        else:
            out = img
            out_cpu = out.cpu()
        return out, out_cpu

    @pipeline_def(batch_size=bs, num_threads=4, device_id=0, exec_async=False, exec_pipelined=False)
    def def_ref():
        enc, label = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(enc, device="mixed")
        even = (label[0] & 1) == 0
        mask = fn.cast(even * 255, dtype=types.UINT8)
        return img ^ mask

    test_pipe, ref_pipe = def_test(), def_ref()
    for _ in range(3):
        gpu, cpu = test_pipe.run()
        assert isinstance(gpu, TensorListGPU) and isinstance(cpu, TensorListCPU)
        (ref,) = ref_pipe.run()
        _same(cpu, ref)
        _same(gpu, ref)


def test_get_property_gpu2cpu():
    """operator_1/test_get_property.py's test_get_property_gpu2cpu."""
    require_gpu()

    @pipeline_def(batch_size=2, device_id=0, num_threads=1, exec_dynamic=True)
    def test_pipe():
        data = types.Constant(np.array([[[42]]]), device="gpu", layout="abc")
        return fn.get_property(data, key="layout", device="cpu")

    pipe = test_pipe()
    (out,) = pipe.run()
    for i in range(2):
        assert np.array(out[i]).tobytes().decode() == "abc"


def test_gpu_results_back_on_cpu_operators():
    """Operators after the way back see the GPU's results: a GPU sum, back on the CPU,
    feeds a cpu operator and a cpu argument input; source info survives the trip; each
    iteration sees its own batch (nothing stale from the stream)."""
    require_gpu()
    batches = [[np.full((3, 4), 10 * it + k, np.float32) for k in range(3)] for it in range(5)]
    it = iter(range(100))

    @pipeline_def(batch_size=3, num_threads=2, device_id=0, prefetch_queue_depth=2)
    def pdef():
        x = fn.external_source(source=lambda: batches[next(it) % len(batches)], batch=True, layout="HW")
        y = (x.gpu() * 2 + 1).cpu()
        rows = fn.cast(fn.reductions.max(y) * 0 + 2, dtype=types.INT32)
        z = fn.cast(y, dtype=types.INT32)
        return y, z, fn.zeros(shape=fn.stack(rows, rows), dtype=types.UINT8), y.source_info()

    pipe = pdef()
    for n in range(5):
        y, z, zeros, info = pipe.run()
        assert isinstance(y, TensorListCPU) and isinstance(z, TensorListCPU)
        assert y.layout() == "HW"
        for k in range(3):
            np.testing.assert_array_equal(np.array(y[k]), np.full((3, 4), 2 * (10 * n + k) + 1, np.float32))
            np.testing.assert_array_equal(np.array(z[k]), np.full((3, 4), 2 * (10 * n + k) + 1, np.int32))
            assert np.array(zeros[k]).shape == (2, 2)
            assert np.array(info[k]).dtype == np.uint8
