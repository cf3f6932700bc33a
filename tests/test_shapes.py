"""`fn.shapes` and `DataNode.shape()` against DALI 2.4's cpu operator: every output type
DALI allows, 0-D to 4-D samples (HWC images, FHWC sequences, zero extents) in batches of
varying shapes, the default INT64, source info, the deprecated `type` alias, the error for
other types; the gpu backend equal to the cpu one.

DALI has no test_shapes.py. Its own uses of the operator are ported: test_pad.py's
`check_pad_to_square` (a shape cut into a per-sample pad size), and the single-input checks of
test_dali_cpu_only.py and test_dali_variable_batch_size.py (several runs, a batch size that
changes between them)."""

import importlib
import itertools
import types as _pytypes
import warnings

import numpy as np
import pytest

import sluice

from conftest import dali_or_none, library_params, require_gpu

_dali = dali_or_none()

LIBS = library_params()

# The types DALI 2.4's Shapes writes, and the others with the name its message gives them.
OUTPUT_TYPES = ["INT32", "UINT32", "INT64", "UINT64", "FLOAT", "FLOAT64"]
REFUSED_TYPES = {"UINT8": "uint8", "INT8": "int8", "UINT16": "uint16", "INT16": "int16", "FLOAT16": "float16",
                 "BOOL": "bool"}

# name -> (samples of one batch, layout)
INPUTS = {
    "scalars": ([np.array(1.5, np.float32), np.array(-2.0, np.float32), np.array(0.0, np.float32)], None),
    "vectors": ([np.arange(5, dtype=np.int16), np.zeros(0, np.int16), np.arange(2, dtype=np.int16)], None),
    "hwc_images": ([np.zeros((4, 6, 3), np.uint8), np.zeros((2, 5, 3), np.uint8), np.zeros((7, 1, 3), np.uint8)],
                   "HWC"),
    "fhwc_sequences": ([np.zeros((2, 3, 4, 3), np.uint8), np.zeros((1, 5, 2, 3), np.uint8),
                        np.zeros((3, 1, 1, 3), np.uint8)], "FHWC"),
    "zero_extents": ([np.zeros((0, 3), np.float64), np.zeros((2, 0), np.float64), np.zeros((0, 0), np.float64)], None),
    "bool_masks": ([np.ones((3, 2), np.bool_), np.ones((1, 9), np.bool_), np.ones((4, 4), np.bool_)], None),
}


def _lib(m):
    math = importlib.import_module(m.__name__ + ".math")
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=m.Pipeline, math=math)


@pytest.fixture(params=LIBS)
def lib(request):
    return _lib(request.param)


def _contents(t):
    """Layout and (type, shape, values) of every sample: what must equal DALI's."""
    samples = [np.array(t[i]) for i in range(len(t))]
    return t.layout(), [(s.dtype, s.shape, s.tolist()) for s in samples]


def _run(lib, batches, layout, build, runs=1):
    """`build(lib, x)` over an external source giving `batches` in turn (batch sizes may
    differ, up to the first's); the contents of every output of every run."""
    counter = itertools.count()
    pipe = lib.Pipeline(batch_size=max(len(b) for b in batches), num_threads=1, device_id=None)
    with pipe:
        x = lib.fn.external_source(source=lambda: batches[next(counter) % len(batches)], batch=True, layout=layout)
        outs = build(lib, x)
        pipe.set_outputs(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    return [[_contents(t) for t in pipe.run()] for _ in range(runs)]


def _against_dali(batches, layout, build, runs=1):
    if _dali is None:
        pytest.skip("DALI is not installed")
    ours = _run(_lib(sluice), batches, layout, build, runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # DALI 2.4 deprecates fn.shapes itself
        theirs = _run(_lib(_dali), batches, layout, build, runs)
    assert ours == theirs
    return ours


@pytest.mark.parametrize("dtype", OUTPUT_TYPES)
@pytest.mark.parametrize("inputs", sorted(INPUTS))
def test_shapes_match_dali(inputs, dtype):
    samples, layout = INPUTS[inputs]
    (outs,) = _against_dali([samples], layout, lambda lib, x: lib.fn.shapes(x, dtype=getattr(lib.types, dtype)))
    out_layout, out = outs[0]
    assert out_layout == ""
    expected = np.dtype({"INT32": np.int32, "UINT32": np.uint32, "INT64": np.int64, "UINT64": np.uint64,
                         "FLOAT": np.float32, "FLOAT64": np.float64}[dtype])
    for s, (t, shape, values) in zip(samples, out):
        assert t == expected and shape == (s.ndim,) and values == list(s.shape)


@pytest.mark.parametrize("inputs", sorted(INPUTS))
def test_data_node_shape_matches_dali(inputs):
    samples, layout = INPUTS[inputs]
    (outs,) = _against_dali([samples], layout, lambda lib, x: [
        lib.fn.shapes(x), x.shape(), x.shape(dtype=lib.types.INT32), x.shape(dtype=lib.types.FLOAT)])
    for _, out in outs[:2]:  # INT64 unless asked
        assert [t for t, _, _ in out] == [np.dtype(np.int64)] * len(samples)
        assert [values for _, _, values in out] == [list(s.shape) for s in samples]


def test_shapes_of_an_operator_output_match_dali():
    """Shapes after operators that change them, and the shape as a per-sample argument."""
    samples, layout = INPUTS["hwc_images"]
    _against_dali([samples], layout, lambda lib, x: [
        lib.fn.transpose(x, perm=[2, 0, 1]).shape(),
        lib.fn.reshape(x, shape=[-1]).shape(dtype=lib.types.UINT32),
        lib.fn.cast(x, dtype=lib.types.FLOAT)[1:, 0].shape(),
        lib.fn.zeros(shape=x.shape(dtype=lib.types.INT32), dtype=lib.types.UINT8),
    ])


def test_varying_shapes_and_batch_sizes_over_several_runs_match_dali():
    rng = np.random.default_rng(7)
    batches = [[rng.random(tuple(rng.integers(0, 6, size=3)), dtype=np.float32) for _ in range(n)]
               for n in (3, 1, 2, 3)]
    runs = _against_dali(batches, "HWC", lambda lib, x: [x.shape(), x.shape(dtype=lib.types.FLOAT64)], runs=4)
    for batch, outs in zip(batches, runs):
        assert [values for _, _, values in outs[0][1]] == [list(s.shape) for s in batch]


def test_shapes_keep_the_source_info(lib, tmp_path):
    (tmp_path / "a").mkdir()
    for name, size in (("x.jpg", 3), ("y.jpg", 7)):
        (tmp_path / "a" / name).write_bytes(b"z" * size)
    pipe = lib.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        data, _ = lib.fn.readers.file(file_root=str(tmp_path))
        pipe.set_outputs(data, data.shape())
    data, shapes = pipe.run()
    assert [np.array(shapes[i]).tolist() for i in range(2)] == [[3], [7]]
    assert [shapes[i].source_info() for i in range(2)] == [data[i].source_info() for i in range(2)]
    assert all(shapes[i].source_info() for i in range(2))


def test_pad_to_square(lib):
    """DALI's test_pad.py `check_pad_to_square` on the cpu: each sample padded to a square of
    its longer side, read from its shape. The sides are cut with subscripts where DALI's test
    slices (`fn.slice(shape, 0, 1, axes=[0])`), and the data comes from an external source
    where DALI's draws a random shape."""
    rng = np.random.default_rng(1234)
    batches = [[rng.random(tuple(rng.integers(10, 20, size=2)), dtype=np.float32) for _ in range(3)] for _ in range(3)]
    counter = itertools.count()
    pipe = lib.Pipeline(batch_size=3, num_threads=3, device_id=None, seed=1234)
    with pipe:
        in_data = lib.fn.external_source(source=lambda: batches[next(counter) % 3], batch=True, layout="HW")
        shape = in_data.shape(dtype=lib.types.INT32)
        side = lib.math.max(shape[0:1], shape[1:2])
        out_data = lib.fn.pad(in_data, axis_names="HW", shape=lib.fn.cat(side, side, axis=0))
        pipe.set_outputs(in_data, out_data)
    for _ in range(3):
        ins, outs = pipe.run()
        for i in range(3):
            x, y = np.array(ins[i]), np.array(outs[i])
            assert y.shape == (max(x.shape),) * 2
            np.testing.assert_equal(y[: x.shape[0], : x.shape[1]], x)
            np.testing.assert_equal(y[x.shape[0]:, :], 0)
            np.testing.assert_equal(y[:, x.shape[1]:], 0)


def test_the_old_argument_name_warns_and_works(lib):
    samples, layout = INPUTS["hwc_images"]
    alias = r"The argument `type` is a deprecated alias for `dtype`\. Use `dtype` instead\."
    with pytest.warns(DeprecationWarning, match=alias):
        (outs,) = _run(lib, [samples], layout, lambda lib, x: lib.fn.shapes(x, type=lib.types.FLOAT))
    assert outs[0][1][0] == (np.dtype(np.float32), (3,), [4.0, 6.0, 3.0])


def test_both_argument_names_are_refused(lib):
    samples, layout = INPUTS["hwc_images"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match=r"unexpected 'type' deprecated argument when 'dtype' was already provided"):
            _run(lib, [samples], layout, lambda lib, x: lib.fn.shapes(x, dtype=lib.types.INT32, type=lib.types.INT32))


@pytest.mark.parametrize("dtype", sorted(REFUSED_TYPES))
def test_other_output_types_are_refused(lib, dtype):
    samples, layout = INPUTS["hwc_images"]
    message = (r"one of the following:\s*int32, uint32, int64, uint64, float or double;\s*requested: "
               + REFUSED_TYPES[dtype] + r"\b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(RuntimeError, match=message) as e:
            _run(lib, [samples], layout, lambda lib, x: lib.fn.shapes(x, dtype=getattr(lib.types, dtype)))
    if lib.fn is sluice.fn:
        assert isinstance(e.value, sluice.errors.ArgumentError)
        assert str(e.value).startswith("shapes: argument 'dtype': "), str(e.value)


def test_the_shape_of_a_gpu_node_on_the_cpu():
    """DALI hands a gpu node's shapes back to the cpu with the dynamic executor (its default)
    and refuses without it; so does Sluice (the shapes are taken on the GPU and only they come
    back). Nothing runs: no GPU is needed."""
    pipe = sluice.Pipeline(batch_size=1, num_threads=1, device_id=0)
    with pipe:
        x = sluice.fn.external_source(source=lambda: [np.zeros((2, 3), np.uint8)], batch=True)
        assert x.gpu().shape().device == "cpu"
        with pytest.raises(ValueError, match=r"device must be \"cpu\" or \"gpu\", got 'mixed'"):
            x.shape(device="mixed")
        assert x.gpu().shape(device="gpu").device == "gpu"
        assert x.shape(device="gpu").device == "gpu"
        assert x.shape().device == "cpu"
    pipe = sluice.Pipeline(batch_size=1, num_threads=1, device_id=0, exec_dynamic=False)
    with pipe:
        x = sluice.fn.external_source(source=lambda: [np.zeros((2, 3), np.uint8)], batch=True)
        with pytest.raises(RuntimeError, match="doesn't support transition from GPU to CPU"):
            x.gpu().shape()


def test_gpu_shapes_equal_cpu():
    require_gpu()
    rng = np.random.default_rng(3)
    # More runs than the gpu backend's staging slots, with shapes and batch sizes changing.
    batches = [[rng.random(tuple(rng.integers(0, 9, size=4)), dtype=np.float32) for _ in range(n)]
               for n in (4, 2, 4, 1, 3, 4, 2)]
    scalars = [np.array(float(k), np.float32) for k in range(4)]
    counter, scalar_counter = itertools.count(), itertools.count()
    pipe = sluice.Pipeline(batch_size=4, num_threads=2, device_id=0)
    with pipe:
        x = sluice.fn.external_source(source=lambda: batches[next(counter) % len(batches)], batch=True, layout="FHWC")
        s = sluice.fn.external_source(source=lambda: scalars[: len(batches[next(scalar_counter) % len(batches)])],
                                      batch=True)
        xg, sg = x.gpu(), s.gpu()
        gpu = [sluice.fn.shapes(xg, dtype=getattr(sluice.types, d)) for d in OUTPUT_TYPES]
        gpu += [xg.shape(device="gpu"), x.shape(device="gpu"), sg.shape(device="gpu"),
                sluice.fn.shapes(sg, dtype=sluice.types.FLOAT)]
        cpu = [sluice.fn.shapes(x, dtype=getattr(sluice.types, d)) for d in OUTPUT_TYPES]
        cpu += [x.shape(), x.shape(), s.shape(), sluice.fn.shapes(s, dtype=sluice.types.FLOAT)]
        pipe.set_outputs(*gpu, *cpu)
    for it in range(len(batches) + 2):
        outs = pipe.run()
        gpu_outs, cpu_outs = outs[: len(gpu)], outs[len(gpu):]
        for k, (g, c) in enumerate(zip(gpu_outs, cpu_outs)):
            assert isinstance(g, sluice.tensors.TensorListGPU), k
            g = g.as_cpu()
            assert g.dtype == c.dtype and g.layout() == c.layout() == "" and len(g) == len(c), (it, k)
            for i in range(len(c)):
                a, b = np.array(g[i]), np.array(c[i])
                assert a.dtype == b.dtype and a.shape == b.shape, (it, k, i)
                np.testing.assert_array_equal(a, b)
        expected = [list(b.shape) for b in batches[it % len(batches)]]
        assert [np.array(cpu_outs[2][i]).tolist() for i in range(len(expected))] == expected


# --------------------------------------------------------------------------- peek_image_shape
def _peek(lib, files, **kw):
    @lib.pipeline_def(batch_size=len(files), num_threads=2, device_id=None)
    def pipe():
        data = lib.fn.external_source(source=lambda: [np.fromfile(f, dtype=np.uint8) for f in files])
        return lib.fn.peek_image_shape(data, **kw)

    (out,) = pipe().run()
    return [np.array(s) for s in out]


def _image_files(mixed_root):
    from conftest import all_files

    return [str(mixed_root / p) for p in all_files(mixed_root)]


@pytest.mark.skipif(_dali is None, reason="needs DALI 2.4 (CPU) as the reference")
@pytest.mark.parametrize("kw", [{}, {"dtype": "INT32"}, {"dtype": "FLOAT"}, {"image_type": "GRAY"},
                                {"adjust_orientation": False}, {"image_type": "ANY_DATA", "dtype": "UINT64"}])
def test_peek_image_shape_equals_dali(mixed_root, kw):
    """Every file of the mixed set (JPEG, PNG, BMP, TIFF, WebP, PNM; grey, RGBA, EXIF
    orientations): the [H, W, C] DALI 2.4 gives, in the type it gives."""
    files = _image_files(mixed_root)
    args = {k: (getattr(sluice.types, v) if isinstance(v, str) else v) for k, v in kw.items()}
    dargs = {k: (getattr(_dali.types, v) if isinstance(v, str) else v) for k, v in kw.items()}
    for chunk in range(0, len(files), 25):
        part = files[chunk:chunk + 25]
        ours, theirs = _peek(sluice, part, **args), _peek(_dali, part, **dargs)
        for f, x, y in zip(part, ours, theirs):
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), (f, x, y)


def test_peek_image_shape_is_what_the_decoder_gives(mixed_root):
    files = _image_files(mixed_root)[:20]

    @sluice.pipeline_def(batch_size=len(files), num_threads=2, device_id=None)
    def pipe():
        data = sluice.fn.external_source(source=lambda: [np.fromfile(f, dtype=np.uint8) for f in files])
        return sluice.fn.peek_image_shape(data), sluice.fn.decoders.image(data).shape()

    peeked, decoded = pipe().run()
    for i in range(len(files)):
        assert np.array(peeked[i]).tolist() == np.array(decoded[i]).tolist(), files[i]


def test_peek_image_shape_errors(mixed_root, tmp_path):
    good = _image_files(mixed_root)[0]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(Exception, match="peek_image_shape.*dtype.*requested: uint8"):
        _peek(sluice, [good], dtype=sluice.types.UINT8)

    files = [good, str(bad)]

    @sluice.pipeline_def(batch_size=2, num_threads=2, device_id=None)
    def pipe():
        data, _ = sluice.fn.readers.file(files=files, labels=[0, 1])
        return sluice.fn.peek_image_shape(data)

    p = pipe()
    with pytest.raises(Exception, match=r"peek_image_shape.*sample 1.*bad\.jpg"):
        p.run()
    # The pipeline stays usable: the next batch (the same two files) fails the same way.
    with pytest.raises(Exception, match=r"bad\.jpg"):
        p.run()
    with pytest.raises(Exception, match="encoded bytes"):
        @sluice.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def wrong_input():
            return sluice.fn.peek_image_shape(sluice.types.Constant(np.zeros((2, 2), np.uint8)))

        wrong_input().run()
