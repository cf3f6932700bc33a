"""DALI's module layout and constants: `sluice.data_node`, `pipeline.do_not_convert`,
`types.Constant` / `ScalarConstant` (as arguments, in arithmetic, as outputs),
`plugin.pytorch.feed_ndarray` and the PyTorch iterator over a pipeline its external source
ends; constants checked against DALI 2.4."""

import types as _pytypes

import numpy as np
import pytest

import sluice

from conftest import library_params


LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=m.Pipeline)


def test_imports_resolve_where_dali_has_them():
    from sluice.data_node import DataNode
    from sluice.pipeline import do_not_convert

    assert DataNode is sluice.DataNode

    @do_not_convert
    def f(x):
        return x + 1

    assert f(1) == 2 and do_not_convert()(f) is f


def test_scalar_constants(lib):
    c = lib.types.ScalarConstant(90)
    pipe = lib.Pipeline(2, 1, None)
    with pipe:
        x = lib.fn.external_source([[np.arange(12, dtype=np.uint8).reshape(3, 4, 1)] * 2], cycle=True, layout="HWC")
        rotated = lib.fn.rotate(x, angle=c)
        pipe.set_outputs(rotated, x + lib.types.ScalarConstant(3, lib.types.UINT8), c, lib.types.Constant(np.float32(2.5)))
    rot, plus, const, half = pipe.run()
    assert np.array(rot[0]).shape == (4, 3, 1)
    assert np.array(plus[0]).dtype == np.uint8 and np.array(plus[0]).ravel().tolist() == list(range(3, 15))
    assert const.as_array().tolist() == [90, 90] and const.as_array().dtype == np.int32
    assert half.as_array().tolist() == [2.5, 2.5] and half.as_array().dtype == np.float32


def test_array_constant(lib):
    pipe = lib.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(lib.types.Constant(np.array([[1, 2], [3, 4]], np.int16), layout="AB"))
    (out,) = pipe.run()
    assert out.layout() == "AB" and out.as_array().dtype == np.int16
    assert out.as_array().tolist() == [[[1, 2], [3, 4]]] * 2


def test_pytorch_iterator_until_the_source_ends():
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import DALIGenericIterator

    batches = [[np.full(3, i, np.float32)] * 2 for i in range(3)]
    pipe = sluice.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source(batches, cycle="raise"))  # a new pass each epoch
    it = DALIGenericIterator(pipe, ["x"])
    for _ in range(2):
        got = [d[0]["x"][:, 0].tolist() for d in it]
        assert got == [[0, 0], [1, 1], [2, 2]]
        it.reset()
    assert isinstance(torch.zeros(1), torch.Tensor)


def test_feed_ndarray_cpu():
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import feed_ndarray

    pipe = sluice.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(sluice.fn.external_source([[np.arange(6, dtype=np.float32).reshape(2, 3)] * 2]))
    (out,) = pipe.run()
    arr = torch.empty((2, 2, 3), dtype=torch.float32)
    feed_ndarray(out, arr)
    assert arr[1].tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(AssertionError, match="Shapes do not match: DALI tensor has size"):
        feed_ndarray(out, torch.empty((2, 6)))
    with pytest.raises(AssertionError, match="doesn't match the element type of the target PyTorch Tensor"):
        feed_ndarray(out, torch.empty((2, 2, 3), dtype=torch.int8))


def test_legacy_flat_functions_warn_and_work(lib, tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"abc")
    pipe = lib.Pipeline(1, 1, None)
    with pipe:
        with pytest.warns(DeprecationWarning, match="fn.file_reader` is now deprecated. Use `nvidia.dali.fn.readers.file`"):
            data, label = lib.fn.file_reader(files=[str(f)], labels=[4])
        pipe.set_outputs(data, label)
    data, label = pipe.run()
    assert np.array(data[0]).tobytes() == b"abc" and label.as_array().tolist() == [[4]]
    assert callable(lib.fn.image_decoder) and callable(lib.fn.image_decoder_random_crop)


@pytest.mark.parametrize("call,message", [
    (lambda fn, x: fn.experimental.equalize(x),
     "WARNING: `nvidia.dali.fn.experimental.equalize` is now deprecated. Use `nvidia.dali.fn.equalize` instead.\n"
     "This operator was moved out from the experimental phase, and is now a regular DALI operator. "
     "This is just a deprecated alias kept for backward compatibility."),
    (lambda fn, x: fn.experimental.filter(x, np.ones((3, 3), np.float32)),
     "WARNING: `nvidia.dali.fn.experimental.filter` is now deprecated. Use `nvidia.dali.fn.filter` instead.\n"
     "This operator was moved out from the experimental phase, and is now a regular DALI operator. "
     "This is just a deprecated alias kept for backward compatibility."),
    (lambda fn, x: fn.experimental.peek_image_shape(x),
     "WARNING: `nvidia.dali.fn.experimental.peek_image_shape` is now deprecated. Use `nvidia.dali.fn.peek_image_shape` instead.\n"
     "Experimental features of the decoders have been moved to the main module, this is\n"
     "just an alias maintained for backward compatibility."),
    (lambda fn, x: fn.experimental.inflate(x.gpu(), shape=[4]),
     "WARNING: `nvidia.dali.fn.experimental.inflate` is now deprecated. Use `nvidia.dali.fn.decoders.inflate` instead."),
])
def test_experimental_aliases_warn_in_dalis_words(lib, call, message):
    pipe = lib.Pipeline(1, 1, None)
    with pipe:
        x = lib.fn.external_source(lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True, layout="HWC")
        with pytest.warns(DeprecationWarning) as seen:
            out = call(lib.fn, x)
        pipe.set_outputs(out)
    assert [str(w.message) for w in seen if w.category is DeprecationWarning] == [message]


def test_pipeline_is_a_package_with_experimental():
    from sluice.pipeline import Pipeline
    from sluice.pipeline.experimental import pipeline_def as experimental_def

    assert Pipeline is sluice.Pipeline

    # The experimental decorator is pipeline_def, plus debug=True.
    @experimental_def(batch_size=2, num_threads=1, device_id=None)
    def plain():
        return sluice.fn.random.uniform()

    @experimental_def(batch_size=2, num_threads=1, device_id=None, debug=True)
    def debug():
        return sluice.fn.random.uniform()

    assert isinstance(plain(), Pipeline) and len(debug().run()[0]) == 2


def test_submodules_are_attributes_after_a_plain_import():
    """DALI programs write `dali.backend.TensorCPU(...)` after `import nvidia.dali as dali`
    alone: the package's submodules DALI's import brings along are attributes of Sluice's."""
    import subprocess
    import sys

    names = ["backend", "data_node", "types", "fn", "ops", "pipeline", "tensors", "math"]
    code = f"import sluice; print([n for n in {names!r} if not hasattr(sluice, n)])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
