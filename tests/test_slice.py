"""`fn.slice` (cpu and gpu), against DALI 2.4's cpu operator and DALI's own test cases.

Positional anchor and shape inputs:

- Integer anchors and shapes (INT32, INT64) are in elements whatever `normalized_anchor` /
  `normalized_shape` say; float ones are fractions of the extent unless those are False.
- Both normalized: the end is `(anchor + shape) * extent`, rounded once, as DALI computes it.
- Anchor and shape of different types, or of a type other than INT32 / INT64 / FLOAT, are
  refused with DALI's message; the pipeline goes on.

Named arguments (`start`/`rel_start` with `end`/`rel_end`/`shape`/`rel_shape`), ported from
DALI's operator_1/test_slice.py (`nvidia.dali` replaced by `sluice`, generated data instead of
DALI_extra): every combination gives the positional result; defaults (no start: 0, no end:
the extent); mutually exclusive arguments; no-op slices of UINT8/UINT16/FLOAT; per-sample,
negative and empty `axes`; axes out of range; scalar arguments; empty inputs. Where DALI is
installed, per-sample named arguments and the out-of-bounds policies equal DALI's cpu
operator. The gpu backend equals the cpu's (on the GPU machine), as does `fn.crop`'s.

Not ported: DALI's `test_gpu_args` and `test_wrong_arg_backend` (anchor and shape given on
the GPU: Sluice reads them on the host and asks for CPU inputs at graph time).
"""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

DATA = [np.arange(7 * 6, dtype=np.int16).reshape(7, 6), np.arange(5 * 9, dtype=np.int16).reshape(5, 9)]


def _slice(lib, anchors, shapes, **kw):
    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = lib.fn.external_source(lambda: DATA)
        a = lib.fn.external_source(lambda: anchors)
        s = lib.fn.external_source(lambda: shapes)
        return lib.fn.slice(x, a, s, **kw)

    (out,) = pipe().run()
    return [np.array(o) for o in out]


CASES = [
    ("int32 absolute", [np.array([1, 2], np.int32), np.array([0, 1], np.int32)],
     [np.array([3, 2], np.int32), np.array([4, 3], np.int32)], {}),
    ("int64 ignores normalized", [np.array([2], np.int64), np.array([1], np.int64)],
     [np.array([3], np.int64), np.array([2], np.int64)], {"axes": [0], "normalized_anchor": True}),
    ("float normalized", [np.array([0.15, 0.3], np.float32), np.array([0.5, 0.1], np.float32)],
     [np.array([0.5, 0.35], np.float32), np.array([0.45, 0.75], np.float32)], {}),
    ("float absolute anchor", [np.array([1.4, 2.5], np.float32), np.array([0.5, 3.49], np.float32)],
     [np.array([0.5, 0.3], np.float32), np.array([0.4, 0.2], np.float32)], {"normalized_anchor": False}),
    ("float absolute shape", [np.array([0.2, 0.1], np.float32), np.array([0.25, 0.5], np.float32)],
     [np.array([2.5, 3.0], np.float32), np.array([1.5, 2.0], np.float32)], {"normalized_shape": False}),
    ("float absolute both", [np.array([1.5, 0.5], np.float32), np.array([2.5, 1.5], np.float32)],
     [np.array([2.0, 3.5], np.float32), np.array([2.0, 1.0], np.float32)],
     {"normalized_anchor": False, "normalized_shape": False}),
]


@needs_dali
@pytest.mark.parametrize("name,anchors,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_positional_slice_equals_dali(name, anchors, shapes, kw):
    ours, theirs = _slice(sluice, anchors, shapes, **kw), _slice(dali, anchors, shapes, **kw)
    for x, y in zip(ours, theirs):
        assert x.shape == y.shape and np.array_equal(x, y), (x, y)


def test_integer_anchors_are_elements():
    out = _slice(sluice, [np.array([2], np.int32), np.array([1], np.int32)], [np.array([3], np.int32),
                                                                                np.array([2], np.int32)], axes=[0])
    np.testing.assert_array_equal(out[0], DATA[0][2:5])
    np.testing.assert_array_equal(out[1], DATA[1][1:3])


def test_anchor_and_shape_types_must_agree():
    with pytest.raises(Exception, match="slice.*Anchor and shape should have the same type. Got: int32 and int64"):
        _slice(sluice, [np.array([1], np.int32)] * 2, [np.array([1], np.int64)] * 2, axes=[0])
    with pytest.raises(Exception, match="slice.*Unsupported type of anchor and shape arguments: int16"):
        _slice(sluice, [np.array([1], np.int16)] * 2, [np.array([1], np.int16)] * 2, axes=[0])


# --------------------------------------------------------------------------- named arguments
DEVICES = ["cpu", "gpu"]


def _device_id(device):
    if device == "gpu":
        require_gpu()
        return 0
    return None


def _hwc_source(batch_size, shape=(5, 4, 3), seed=0):
    rng = np.random.default_rng(seed)
    return lambda: [rng.integers(0, 255, size=shape, dtype=np.uint8) for _ in range(batch_size)]


def _outputs(pipe, n=3):
    pipe.build()
    for _ in range(n):
        yield [[np.array(o.as_cpu() if hasattr(o, "as_cpu") else o) for o in out] for out in pipe.run()]


def _cpu(batch):
    return batch.as_cpu() if hasattr(batch, "as_cpu") else batch


@pytest.mark.parametrize("device", DEVICES)
def test_slice_named_args(device):
    batch_size = 3
    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=_device_id(device))
    with pipe:
        data = fn.external_source(source=_hwc_source(batch_size), layout="HWC")
        if device == "gpu":
            data = data.gpu()
        in_shape_list, start_list, shape_list = [5, 4], [1, 2], [3, 1]
        in_shape, start, shape = np.array(in_shape_list), np.array(start_list), np.array(shape_list)
        end_list = [start_list[i] + shape_list[i] for i in range(2)]
        end = start + shape
        rel_start_list = [start_list[i] / in_shape_list[i] for i in range(2)]
        rel_start = start / in_shape
        rel_shape_list = [shape_list[i] / in_shape_list[i] for i in range(2)]
        rel_shape = shape / in_shape
        rel_end_list = [end_list[i] / in_shape_list[i] for i in range(2)]
        rel_end = end / in_shape
        outs = [fn.slice(data, start, shape, axes=(0, 1)), fn.slice(data, rel_start, rel_shape, axes=(0, 1))]
        for start_arg in [start, start_list]:
            for shape_arg in [shape, shape_list]:
                outs += [fn.slice(data, start=start_arg, shape=shape_arg, axes=(0, 1))]
            for end_arg in [end, end_list]:
                outs += [fn.slice(data, start=start_arg, end=end_arg, axes=(0, 1))]
        for rel_start_arg in [rel_start, rel_start_list]:
            for rel_shape_arg in [rel_shape, rel_shape_list]:
                outs += [fn.slice(data, rel_start=rel_start_arg, rel_shape=rel_shape_arg, axes=(0, 1))]
            for rel_end_arg in [rel_end, rel_end_list]:
                outs += [fn.slice(data, rel_start=rel_start_arg, rel_end=rel_end_arg, axes=(0, 1))]
            for shape_arg in [shape, shape_list]:
                outs += [fn.slice(data, rel_start=rel_start_arg, shape=shape_arg, axes=(0, 1))]
        pipe.set_outputs(*outs)
    for outs in _outputs(pipe):
        assert outs[0][0].shape == (3, 1, 3)
        for out in outs[1:]:
            for sample in range(batch_size):
                np.testing.assert_equal(outs[0][sample], out[sample])


@pytest.mark.parametrize("device", DEVICES)
def test_slice_named_default_start_or_end_args(device):
    batch_size = 3
    pipe = Pipeline(batch_size=batch_size, num_threads=2, device_id=_device_id(device))
    with pipe:
        data = fn.external_source(source=_hwc_source(batch_size), layout="HWC")
        if device == "gpu":
            data = data.gpu()
        in_shape, start, shape = np.array([5, 4]), np.array([1, 2]), np.array([3, 1])
        end = start + shape
        pipe.set_outputs(
            fn.slice(data, start=start, end=in_shape, axes=(0, 1)),
            fn.slice(data, start=[0, 0], end=end, axes=(0, 1)),
            fn.slice(data, start=start, axes=(0, 1)),
            fn.slice(data, end=end, axes=(0, 1)),
        )
    for outs in _outputs(pipe):
        for sample in range(batch_size):
            np.testing.assert_equal(outs[0][sample], outs[2][sample])
            np.testing.assert_equal(outs[1][sample], outs[3][sample])


@pytest.mark.parametrize("device", DEVICES)
def test_slice_named_args_errors(device):
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=_device_id(device))
    with pytest.raises(errors.ArgumentError, match='"end", "rel_end", "shape", and "rel_shape" arguments are mutually exclusive'):
        with pipe:
            data = fn.external_source(source=_hwc_source(1), layout="HWC")
            if device == "gpu":
                data = data.gpu()
            start, shape = np.array([1, 2]), np.array([3, 1])
            pipe.set_outputs(fn.slice(data, start, shape, start=start, end=start + shape, shape=shape, axes=(0, 1)))
            pipe.build()
            pipe.run()


def test_named_and_positional_exclude_each_other():
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        data = fn.external_source(source=_hwc_source(1), layout="HWC")
        start, shape = np.array([1, 2]), np.array([3, 1])
        pipe.set_outputs(fn.slice(data, start, shape, start=start, axes=(0, 1)))
    pipe.build()
    with pytest.raises(errors.ArgumentError, match="Named arguments start/end/shape are not compatible with positional"):
        pipe.run()
    with pytest.raises(errors.ArgumentError):
        pipe.run()  # the pipeline goes on


def test_no_slice_arguments_is_an_error():
    pipe = Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.slice(fn.external_source(source=_hwc_source(1), layout="HWC")))
    pipe.build()
    with pytest.raises(errors.ArgumentError, match=r"Expected named slice arguments .* Got 1 inputs"):
        pipe.run()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [types.UINT8, types.UINT16, types.FLOAT])
def test_no_slice(small_images, device, dtype):
    @pipeline_def(batch_size=4, num_threads=3, device_id=_device_id(device))
    def make_pipe():
        encoded, _ = fn.readers.file(file_root=str(small_images))
        image = fn.decoders.image(encoded, device="cpu", output_type=types.RGB)
        if device == "gpu":
            image = image.gpu()
        image = fn.cast(image, dtype=dtype)
        sliced1 = fn.slice(image, 0, 3, axes=(2,))
        sliced2 = fn.slice(image, rel_start=(0, 0, 0), rel_end=(1, 1, 1), axis_names="HWC")
        return image, sliced1, sliced2

    for outs in _outputs(make_pipe()):
        for out in outs[1:]:
            np.testing.assert_array_equal(outs[0][0], out[0])


def _random_axes(batch_size, use_negative, use_empty, seed=5):
    """DALI's generator_random_axes_for_3d_input with rel_start in [0, 0.2), rel_shape in
    [0.4, 0.6)."""
    rng = np.random.default_rng(seed)
    choices = [[0, 1], [1, 0], [0, 2], [2, 0], [1, 2], [2, 1], [0, 1, 2], [2, 1, 0], [0], [1], [2]]

    def gen():
        axes, starts, shapes = [], [], []
        for _ in range(batch_size):
            a = [] if use_empty and rng.random() < 0.3 else list(choices[rng.integers(len(choices))])
            if use_negative:
                a = [x - 3 if rng.random() < 0.5 else x for x in a]
            n = len(a)
            axes.append(np.array(a, np.int32))
            k = n if n else 3
            starts.append(rng.uniform(0.0, 0.2, k).astype(np.float32))
            shapes.append(rng.uniform(0.4, 0.6, k).astype(np.float32))
        return axes, starts, shapes

    return gen


def _roundint(x):
    return int(np.floor(x + 0.5)) if x >= 0 else -int(np.floor(-x + 0.5))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_negative,use_empty", [(False, False), (True, False), (False, True)], ids=["dynamic", "negative", "empty"])
def test_dynamic_axes(device, use_negative, use_empty):
    batch_size = 10
    rng = np.random.default_rng(1)
    images = lambda: [rng.uniform(0, 1, (rng.integers(10, 100), rng.integers(10, 100), 3)).astype(np.float32) for _ in range(batch_size)]  # noqa: E731

    @pipeline_def(batch_size=batch_size, num_threads=3, device_id=_device_id(device))
    def make_pipe():
        image = fn.external_source(source=images)
        if device == "gpu":
            image = image.gpu()
        axes, rel_start, rel_shape = fn.external_source(source=_random_axes(batch_size, use_negative, use_empty), num_outputs=3)
        return (image, axes, rel_start, rel_shape, fn.slice(image, rel_start=rel_start, rel_shape=rel_shape, axes=axes),
                fn.slice(image, rel_start, rel_shape, axes=axes))

    for outs in _outputs(make_pipe()):
        for i in range(batch_size):
            img, axes, rs, rsh = outs[0][i], outs[1][i], outs[2][i], outs[3][i]
            if axes.shape[0] == 0:
                axes = np.arange(3)
            start, end = [0, 0, 0], list(img.shape)
            for k, a in enumerate(axes):
                start[a] = _roundint(float(rs[k]) * img.shape[a])
                end[a] = _roundint((float(rs[k]) + float(rsh[k])) * img.shape[a])
            ref = img[start[0]:end[0], start[1]:end[1], start[2]:end[2]]
            for out in (outs[4][i], outs[5][i]):
                np.testing.assert_array_equal(ref, out)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("wrong_axes_range", [(-10, -4), (3, 10)])
@pytest.mark.parametrize("named_args", [False, True])
def test_wrong_axes(device, wrong_axes_range, named_args):
    @pipeline_def(batch_size=1, num_threads=1, device_id=_device_id(device))
    def make_pipe():
        fake_data = types.Constant(0, shape=[10, 10, 3], dtype=types.FLOAT, device=device)
        axes = fn.random.uniform(range=wrong_axes_range, shape=(2,), dtype=types.INT32)
        rel_start = fn.random.uniform(range=[0.0, 0.3], shape=(2,), dtype=types.FLOAT)
        rel_shape = fn.random.uniform(range=[0.4, 0.6], shape=(2,), dtype=types.FLOAT)
        if named_args:
            return fn.slice(fake_data, rel_start=rel_start, rel_shape=rel_shape, axes=axes)
        return fn.slice(fake_data, rel_start, rel_shape, axes=axes)

    p = make_pipe()
    p.build()
    with pytest.raises(errors.ArgumentError, match=r"Axis -?\d+ out of range. Expected range is \[-3, 2\] for a 3D input"):
        p.run()


@pytest.mark.parametrize("device", DEVICES)
def test_scalar(device):
    batch_size = 5
    rng = np.random.default_rng(2)

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=_device_id(device))
    def test_pipe():
        data = fn.external_source(source=lambda: [rng.random(1000).astype(np.single) for _ in range(batch_size)])
        shape = types.ScalarConstant(10)
        anchor = types.ScalarConstant(5)
        if device != "cpu":
            data = data.gpu()
        return data, fn.slice(data, start=anchor, shape=shape, axes=[0], device=device), shape, anchor

    p = test_pipe()
    p.build()
    ref, data, shape, anchor = p.run()
    for i in range(batch_size):
        r, d = np.array(_cpu(ref)[i]), np.array(_cpu(data)[i])
        a, s = int(np.array(anchor[i])), int(np.array(shape[i]))
        np.testing.assert_array_equal(d, r[a:a + s])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_empty_input", [False, True])
def test_empty_input(device, use_empty_input):
    @pipeline_def(batch_size=1, num_threads=1, device_id=_device_id(device))
    def make_pipe():
        inp = np.array([] if use_empty_input else [42], dtype="int")
        x = types.Constant(inp, device=device)
        return fn.slice(x, 0 if use_empty_input else 1, 0, axes=[0])

    p = make_pipe()
    p.build()
    (o,) = p.run()
    assert np.array_equal(np.array(_cpu(o)[0]), [])


def _named_pipe(lib, data, args, layout="HWC", **kw):
    @lib.pipeline_def(batch_size=len(data), num_threads=2, device_id=None)
    def pipe():
        x = lib.fn.external_source(lambda: data, layout=layout)
        named = {k: lib.fn.external_source((lambda v: (lambda: v))(v)) for k, v in args.items()}
        return lib.fn.slice(x, **named, **kw)

    p = pipe()
    p.build()
    return [np.array(o) for o in p.run()[0]]


NAMED_CASES = [
    ("start+shape", {"start": [np.array([1, 2], np.int32), np.array([0, 3], np.int32)],
                     "shape": [np.array([2, 3], np.int32), np.array([4, 1], np.int32)]}, {}),
    ("rel_start+rel_shape rounding", {"rel_start": [np.array([0.25, 0.5], np.float32), np.array([0.3, 0.15], np.float32)],
                                      "rel_shape": [np.array([0.5, 0.35], np.float32), np.array([0.45, 0.75], np.float32)]}, {}),
    ("rel_start+end", {"rel_start": [np.array([0.1, 0.5], np.float32), np.array([0.33, 0.0], np.float32)],
                       "end": [np.array([6, 5], np.int32), np.array([5, 3], np.int32)]}, {"axes": [0, 1]}),
    ("rel_end only", {"rel_end": [np.array([0.5], np.float32), np.array([0.75], np.float32)]}, {"axis_names": "H"}),
    ("pad", {"start": [np.array([-2, 3], np.int32), np.array([4, -1], np.int32)],
             "shape": [np.array([5, 6], np.int32), np.array([6, 3], np.int32)]},
     {"out_of_bounds_policy": "pad", "fill_values": [7, 8, 9]}),
    ("trim", {"start": [np.array([-2, 3], np.int32), np.array([4, -1], np.int32)],
              "end": [np.array([5, 9], np.int32), np.array([11, 2], np.int32)]}, {"out_of_bounds_policy": "trim_to_shape"}),
    ("dtype", {"rel_start": [np.array([0.2, 0.1], np.float32)] * 2, "rel_end": [np.array([0.9, 0.8], np.float32)] * 2},
     {"dtype": types.FLOAT}),
]


@needs_dali
@pytest.mark.parametrize("name,args,kw", NAMED_CASES, ids=[c[0] for c in NAMED_CASES])
def test_named_arguments_equal_dali(name, args, kw):
    rng = np.random.default_rng(4)
    data = [rng.integers(0, 255, (7, 6, 3), dtype=np.uint8), rng.integers(0, 255, (9, 4, 3), dtype=np.uint8)]
    kw_dali = {k: (getattr(dali.types, v.name) if isinstance(v, types.DALIDataType) else v) for k, v in kw.items()}
    ours, theirs = _named_pipe(sluice, data, args, **kw), _named_pipe(dali, data, args, **kw_dali)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b), (a, b)


@pytest.mark.parametrize("kw", [
    dict(start=[-3, 1], shape=[8, 9], out_of_bounds_policy="pad", fill_values=[1, 2, 3], axes=(0, 1)),
    dict(rel_start=[0.1, 0.2], rel_end=[0.9, 0.7], dtype=types.FLOAT),
    dict(start=[2], end=[100], out_of_bounds_policy="trim_to_shape", axes=(1,)),
])
def test_gpu_equals_cpu(kw):
    require_gpu()
    rng = np.random.default_rng(9)
    data = [rng.integers(0, 255, s, dtype=np.uint8) for s in [(7, 6, 3), (9, 4, 3), (1, 1, 3), (30, 41, 3)]]

    def run(device):
        @pipeline_def(batch_size=len(data), num_threads=2, device_id=0)
        def pipe():
            x = fn.external_source(lambda: data, layout="HWC")
            return fn.slice(x.gpu() if device == "gpu" else x, **kw)

        p = pipe()
        p.build()
        return [np.array(o) for o in _cpu(p.run()[0])]

    for a, b in zip(run("cpu"), run("gpu")):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("kw", [
    dict(crop=(4, 5), out_of_bounds_policy="pad"),
    dict(crop=(12, 9), crop_pos_x=0.2, crop_pos_y=0.9, out_of_bounds_policy="pad", fill_values=[5, 6, 7]),
    dict(crop_h=3, crop_w=40, out_of_bounds_policy="trim_to_shape", dtype=types.FLOAT),
    dict(crop=(2, 2), dtype=types.FLOAT16, out_of_bounds_policy="pad", rounding="truncate"),
])
@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_crop_gpu_equals_cpu(kw, layout):
    require_gpu()
    rng = np.random.default_rng(10)
    shapes = [(7, 6, 3), (9, 4, 3), (1, 1, 3), (30, 41, 3)]
    data = [rng.integers(0, 255, s if layout == "HWC" else (s[2], s[0], s[1]), dtype=np.uint8) for s in shapes]

    def run(device):
        @pipeline_def(batch_size=len(data), num_threads=2, device_id=0)
        def pipe():
            x = fn.external_source(lambda: data, layout=layout)
            return fn.crop(x.gpu() if device == "gpu" else x, **kw)

        p = pipe()
        p.build()
        return [np.array(o) for o in _cpu(p.run()[0])]

    for a, b in zip(run("cpu"), run("gpu")):
        assert a.dtype == b.dtype and np.array_equal(a, b)


@needs_dali
@pytest.mark.parametrize("layout,shape", [("HWC", (9, 7, 3)), ("CHW", (3, 9, 7)), ("FHWC", (2, 9, 7, 3))])
@pytest.mark.parametrize("kw", [
    dict(crop=(13, 4), crop_pos_x=0.3, crop_pos_y=0.6, out_of_bounds_policy="pad", fill_values=[7, 8, 9]),
    dict(crop=(5, 11), out_of_bounds_policy="pad", fill_values=[200]),
    dict(crop=(20, 20), out_of_bounds_policy="pad", fill_values=[1, 2, 3], dtype=types.FLOAT),
    dict(crop=(4, 3), crop_pos_x=0.9, crop_pos_y=0.1),
])
def test_crop_padding_equals_dali(layout, shape, kw):
    """fn.crop's padded windows (the fast fills of whole rows and blocks) equal DALI's."""
    rng = np.random.default_rng(21)
    data = [rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(2)]

    def run(lib):
        @lib.pipeline_def(batch_size=2, num_threads=2, device_id=None)
        def pipe():
            return lib.fn.crop(lib.fn.external_source(lambda: data, layout=layout), **{
                k: (getattr(lib.types, v.name) if isinstance(v, types.DALIDataType) else v) for k, v in kw.items()})

        p = pipe()
        p.build()
        return [np.array(o) for o in p.run()[0]]

    for a, b in zip(run(sluice), run(dali)):
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
