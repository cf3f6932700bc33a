"""`fn.erase` (cpu and gpu) against DALI 2.4's cpu operator.

- DALI's own tests (operator_1/test_erase.py) ported: its pipelines and NumPy reference with
  `nvidia.dali` replaced by `sluice` (nose generators -> pytest.parametrize), its assertions
  kept (Sluice against the reference, eps 1e-4, layouts), and every Sluice cpu output also
  compared with DALI's own on the same data, bit for bit.
- Parity, bit for bit, with DALI 2.4's cpu operator: every type, `fill_value` converted as
  DALI's C++ static_cast does on x86 (out-of-range values, NaN and infinities too), HWC,
  CHW, FHWC, DHWC, FDHWC, layouts without C, no layout with `axes`, 1 to 5 dimensions,
  the default axes (every layout letter but C), multi-channel fills (also over a range of
  channels), normalized and centered coordinates with DALI's f32 rounding, regions partly
  or wholly outside, many regions, per-sample argument inputs, empty samples; a random sweep.
- Errors name the operator and the argument (and the sample) and the pipeline goes on;
  where DALI raises too (rather than crash), it is checked to raise.
- Sluice's departures (where DALI crashes, divides by zero or writes out of bounds) on
  Sluice alone.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""

from functools import partial

import numpy as np
import pytest

import sluice
from sluice import fn, ops
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NAN, INF = float("nan"), float("inf")


def _const(v):
    """A source giving `v` every iteration (a callable of no argument: one with an argument
    would be given the iteration)."""
    return lambda: v


def _arrays(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _pipe(lib, data, layout, builds, args=None, gpu=False):
    """A pipeline over `data` (a list of samples) with one output per `builds` entry:
    `fn.erase` of the input (on the gpu for entries marked so) with the entry's arguments.
    `args` maps argument names to one array per sample, fed as argument inputs to every
    entry. `builds`: a list of (kwargs, on_gpu)."""
    pipe = lib.pipeline.Pipeline(batch_size=len(data), num_threads=2, device_id=0 if gpu else None)
    with pipe:
        x = lib.fn.external_source(source=_const(data), batch=True, layout=layout)
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        outs = [lib.fn.erase(x.gpu() if on_gpu else x, **kw, **nodes) for kw, on_gpu in builds]
        pipe.set_outputs(*outs)
    pipe.build()
    return pipe


def _run_many(lib, data, layout, kws, args=None, iters=1):
    """Each of `kws` applied to `data` on the cpu; the last iteration's samples and layouts."""
    pipe = _pipe(lib, data, layout, [(kw, False) for kw in kws], args)
    for _ in range(iters):
        outs = pipe.run()
    return [_arrays(o) for o in outs], [o.layout() for o in outs]


def _run(lib, data, layout="HWC", args=None, **kw):
    (out,), (out_layout,) = _run_many(lib, data, layout, [kw], args)
    return out, out_layout


def _assert_same(ours, theirs, what=""):
    """Same dtypes, shapes and bytes (NaNs and FLOAT16 compared as bits)."""
    assert len(ours) == len(theirs)
    for i, (x, y) in enumerate(zip(ours, theirs)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what} sample {i}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        if x.tobytes() != y.tobytes():
            bad = np.argwhere(x.view(np.uint8).reshape(-1) != y.view(np.uint8).reshape(-1))[:5].ravel() // x.itemsize
            raise AssertionError(f"{what} sample {i}: elements {bad.tolist()} differ: {x.reshape(-1)[bad]} != {y.reshape(-1)[bad]}")


def _samples(shapes, dtype=np.uint8, seed=0):
    """Random samples of `shapes`, values 1..100 (never a fill value the tests use)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 101, s).astype(dtype) for s in shapes]


def _parity(data, layout="HWC", args=None, **kw):
    """`fn.erase(**kw)` on Sluice and DALI: the same bytes and layout. Returns Sluice's."""
    ours, l1 = _run(sluice, data, layout, args, **kw)
    theirs, l2 = _run(dali, data, layout, args, **kw)
    assert l1 == l2 == (layout or "")
    _assert_same(ours, theirs)
    return ours


# ---------------------------------------------------------------- DALI's tests, ported
# dali/test/python/operator_1/test_erase.py with `nvidia.dali` -> `lib` (Sluice, and DALI as
# the reference), its test_utils helpers alongside.


class RandomDataIterator:
    """test_utils.RandomDataIterator: the same seeded batch every iteration (two iterators of
    one seed give the same data, so two libraries can be fed alike)."""

    def __init__(self, batch_size, shape=(10, 600, 800, 3), dtype=None, seed=0):
        dtype = np.uint8 if dtype is None else dtype
        self.batch_size = batch_size
        rng = np.random.default_rng(seed=seed)
        if dtype == np.float32:
            self.test_data = [np.array(rng.random(shape) * 1.0, dtype=dtype) - 0.5 for _ in range(batch_size)]
        else:
            self.test_data = [np.array(rng.random(shape) * 255, dtype=dtype) for _ in range(batch_size)]

    def __iter__(self):
        self.i = 0
        self.n = self.batch_size
        return self

    def __next__(self):
        batch = self.test_data
        self.i = (self.i + 1) % self.n
        return batch

    next = __next__


def check_batch(batch1, batch2, batch_size, eps=1e-07, expected_layout=None):
    """test_utils.check_batch: batch sizes, layouts (expected, and equal), shapes, and the
    mean absolute error of each sample within `eps`."""
    for batch in (batch1, batch2):
        assert len(batch) == batch_size
        if expected_layout is not None:
            assert batch.layout() == expected_layout, f'Unexpected layout, expected "{expected_layout}", got "{batch.layout()}".'
    assert batch1.layout() == batch2.layout()
    for left, right in zip(_arrays(batch1), _arrays(batch2)):
        assert left.shape == right.shape
        if left.size:
            assert np.mean(np.abs(left.astype(np.float64) - right.astype(np.float64))) <= eps


def compare_pipelines(pipe1, pipe2, batch_size, N_iterations, eps=1e-07, expected_layout=None):
    """test_utils.compare_pipelines."""
    for _ in range(N_iterations):
        out1, out2 = pipe1.run(), pipe2.run()
        assert len(out1) == len(out2)
        for a, b in zip(out1, out2):
            check_batch(a, b, batch_size, eps, expected_layout=expected_layout)


def ErasePipeline(lib, device, batch_size, layout, iterator, anchor, shape, axis_names, axes, fill_value,
                  normalized_anchor=False, normalized_shape=False, num_threads=1, device_id=None, num_gpus=1):
    """DALI's ErasePipeline class, for `lib` (its device_id: 0 only where a gpu is used)."""
    ops = lib.ops

    class ErasePipeline(lib.pipeline.Pipeline):
        def __init__(self, device, batch_size, layout, iterator, anchor, shape, axis_names, axes, fill_value,
                     normalized_anchor, normalized_shape, num_threads, device_id):
            super(ErasePipeline, self).__init__(batch_size, num_threads, device_id)
            self.device = device
            self.layout = layout
            self.iterator = iterator
            self.inputs = ops.ExternalSource()

            if isinstance(fill_value, RandomDataIterator):
                self.fill_value_iterator = fill_value
                self.fill_value_inputs = ops.ExternalSource()
                fill_value = None
            else:
                self.fill_value_iterator = None

            self.erase = ops.Erase(
                device=self.device,
                anchor=anchor,
                shape=shape,
                axis_names=axis_names,
                axes=axes,
                fill_value=fill_value,
                normalized_anchor=normalized_anchor,
                normalized_shape=normalized_shape,
            )

        def define_graph(self):
            self.data = self.inputs()
            random_data = self.data.gpu() if self.device == "gpu" else self.data
            if self.fill_value_iterator is not None:
                self.fill_value_data = self.fill_value_inputs()
                out = self.erase(random_data, fill_value=self.fill_value_data)
            else:
                out = self.erase(random_data)
            return out

        def iter_setup(self):
            data = self.iterator.next()
            self.feed_input(self.data, data, layout=self.layout)
            if self.fill_value_iterator is not None:
                fill_value_data = self.fill_value_iterator.next()
                self.feed_input(self.fill_value_data, fill_value_data)

    if device_id is None and device == "gpu":
        device_id = 0
    return ErasePipeline(device, batch_size, layout, iterator, anchor, shape, axis_names, axes, fill_value,
                         normalized_anchor, normalized_shape, num_threads, device_id)


def get_axes(layout, axis_names):
    axes = []
    for axis_name in axis_names:
        axis_idx = layout.find(axis_name)
        assert axis_idx >= 0
        axes.append(axis_idx)
    return axes


def get_regions(in_shape, axes, arg_anchor, arg_shape):
    assert len(arg_shape) % len(axes) == 0
    nregions = int(len(arg_shape) / len(axes))
    region_length = int(len(arg_shape) / nregions)
    starts = []
    ends = []
    for region_idx in range(nregions):
        start_i = [0] * len(in_shape)
        end_i = list(in_shape)
        for k in range(region_length):
            axis = axes[k]
            anchor_val = arg_anchor[region_idx * region_length + k]
            shape_val = arg_shape[region_idx * region_length + k]
            end_val = anchor_val + shape_val
            start_i[axis] = anchor_val
            end_i[axis] = end_val
        starts.append(start_i)
        ends.append(end_i)
    return (starts, ends)


def erase_func(anchor, shape, axis_names, axes, layout, fill_value, image):
    assert len(anchor) == len(shape)
    # Sluice hands python_function read-only views of its memory: erase a copy.
    image = np.array(image)

    if not axes:
        axes = get_axes(layout, axis_names)

    if fill_value is None:
        fill_value = 0

    roi_starts, roi_ends = get_regions(image.shape, axes, anchor, shape)
    assert len(roi_starts) == len(roi_ends)
    for region_idx in range(len(roi_starts)):
        start = roi_starts[region_idx]
        end = roi_ends[region_idx]
        assert len(start) == len(end)
        if len(start) == 3:
            image[start[0] : end[0], start[1] : end[1], start[2] : end[2]] = fill_value
        elif len(start) == 4:
            image[start[0] : end[0], start[1] : end[1], start[2] : end[2], start[3] : end[3]] = fill_value
        else:
            assert False
    return image


class ErasePythonPipeline(Pipeline):
    def __init__(self, function, batch_size, data_layout, iterator, anchor, shape, axis_names, axes, fill_value,
                 erase_func=erase_func, num_threads=1, device_id=None):
        super(ErasePythonPipeline, self).__init__(batch_size, num_threads, device_id, exec_async=False, exec_pipelined=False)
        self.iterator = iterator
        self.inputs = ops.ExternalSource()
        self.data_layout = data_layout

        if isinstance(fill_value, RandomDataIterator):
            self.fill_value_iterator = fill_value
            self.fill_value_inputs = ops.ExternalSource()
            fill_value = None
            function = partial(erase_func, anchor, shape, axis_names, axes, data_layout)
        else:
            self.fill_value_iterator = None
            function = partial(erase_func, anchor, shape, axis_names, axes, data_layout, fill_value)

        self.erase = ops.PythonFunction(function=function, output_layouts=data_layout)

    def define_graph(self):
        self.data = self.inputs()
        if self.fill_value_iterator is not None:
            self.fill_value_data = self.fill_value_inputs()
            out = self.erase(self.fill_value_data, self.data)
        else:
            out = self.erase(self.data)
        return out

    def iter_setup(self):
        data = self.iterator.next()
        self.feed_input(self.data, data)
        if self.fill_value_iterator is not None:
            fill_value_data = self.fill_value_iterator.next()
            self.feed_input(self.fill_value_data, fill_value_data)


def _fill_args(fill_value, batch_size, input_shape):
    """DALI's "random" fill value: a RandomDataIterator of one value per channel."""
    if fill_value == "random":
        return RandomDataIterator(batch_size, shape=input_shape[-1:], dtype=np.float32)
    return fill_value


def check_operator_erase_vs_python(device, batch_size, input_shape, anchor, shape, axis_names, axes, input_layout, fill_value):
    eii1 = RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)
    eii2 = RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)

    fill_value_arg1 = _fill_args(fill_value, batch_size, input_shape)
    fill_value_arg2 = _fill_args(fill_value, batch_size, input_shape)
    if fill_value == "random":
        fill_value_arg1 = iter(fill_value_arg1)
        fill_value_arg2 = iter(fill_value_arg2)

    compare_pipelines(
        ErasePipeline(sluice, device, batch_size, input_layout, iter(eii1), anchor=anchor, shape=shape,
                      axis_names=axis_names, axes=axes, fill_value=fill_value_arg1),
        ErasePythonPipeline(device, batch_size, input_layout, iter(eii2), anchor=anchor, shape=shape,
                            axis_names=axis_names, axes=axes, fill_value=fill_value_arg2),
        batch_size=batch_size,
        N_iterations=3,
        eps=1e-04,
        expected_layout=input_layout,
    )
    if dali is not None and device == "cpu":
        # The same case on DALI's cpu operator: the same bytes.
        fill1 = _fill_args(fill_value, batch_size, input_shape)
        fill2 = _fill_args(fill_value, batch_size, input_shape)
        ours = ErasePipeline(sluice, device, batch_size, input_layout, iter(RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)),
                             anchor=anchor, shape=shape, axis_names=axis_names, axes=axes,
                             fill_value=iter(fill1) if fill_value == "random" else fill1)
        theirs = ErasePipeline(dali, device, batch_size, input_layout, iter(RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)),
                               anchor=anchor, shape=shape, axis_names=axis_names, axes=axes,
                               fill_value=iter(fill2) if fill_value == "random" else fill2)
        for _ in range(3):
            (a,), (b,) = ours.run(), theirs.run()
            assert a.layout() == b.layout()
            _assert_same(_arrays(a), _arrays(b), "sluice vs dali")


# layout, shape, axis_names, axes, anchor, shape, fill_value
VS_PYTHON_ROIS = [
    ("HWC", (60, 80, 3), "HW", None, (4, 10), (40, 50), 0),
    ("HWC", (60, 80, 3), "HW", None, (4, 10), (40, 50), None),
    ("HWC", (60, 80, 3), "HW", None, (4, 2, 3, 4), (50, 10, 10, 50), -1),
    ("HWC", (60, 80, 3), "HW", None, (4, 2, 3, 4), (50, 10, 10, 50), (118, 185, 0)),
    ("HWC", (60, 80, 3), "HW", None, (4, 2, 3, 4), (50, 10, 10, 50), "random"),
    ("HWC", (60, 80, 3), "H", None, (4,), (7,), 0),
    ("HWC", (60, 80, 3), "H", None, (4, 15), (7, 8), 0),
    ("HWC", (60, 80, 3), "W", None, (4,), (7,), 0),
    ("HWC", (60, 80, 3), "W", None, (4, 15), (7, 8), 0),
    ("HWC", (60, 80, 3), "W", None, (4, 15), (7, 8), "random"),
    ("HWC", (60, 80, 3), None, (0, 1), (4, 10), (40, 50), 0),
    ("HWC", (60, 80, 3), None, (0, 1), (4, 2, 3, 4), (50, 10, 10, 50), 0),
    ("HWC", (60, 80, 3), None, (0,), (4,), (7,), 0),
    ("HWC", (60, 80, 3), None, (0,), (4, 15), (7, 8), 0),
    ("HWC", (60, 80, 3), None, (1,), (4,), (7,), 0),
    ("HWC", (60, 80, 3), None, (1,), (4, 15), (7, 8), 0),
    ("HWC", (60, 80, 3), None, (1,), (4, 15), (7, 8), "random"),
    ("DHWC", (10, 60, 80, 3), "DHW", None, (2, 4, 15), (3, 7, 8), 0),
    ("HWC", (60, 80, 1), "HW", None, (4, 15), (7, 8), 0),
    ("XYZ", (60, 80, 3), "XY", None, (4, 10), (40, 50), -1),
]


@pytest.mark.parametrize("device", ["cpu"])
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("input_layout,input_shape,axis_names,axes,anchor,shape,fill_value", VS_PYTHON_ROIS)
def test_operator_erase_vs_python(device, batch_size, input_layout, input_shape, axis_names, axes, anchor, shape, fill_value):
    assert len(input_layout) == len(input_shape)
    assert len(anchor) == len(shape)
    if axis_names:
        assert axes is None
        assert len(anchor) % len(axis_names) == 0
    else:
        assert len(axes) > 0
        assert len(anchor) % len(axes) == 0
    check_operator_erase_vs_python(device, batch_size, input_shape, anchor, shape, axis_names, axes, input_layout, fill_value)


def check_operator_erase_with_normalized_coords(device, batch_size, input_shape, anchor, shape, axis_names, input_layout,
                                                anchor_norm, shape_norm, normalized_anchor, normalized_shape):
    def pipes(lib):
        eii1 = RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)
        eii2 = RandomDataIterator(batch_size, shape=input_shape, dtype=np.float32)
        return (
            ErasePipeline(lib, device, batch_size, input_layout, iter(eii1), anchor=anchor_norm, shape=shape_norm,
                          normalized_anchor=normalized_anchor, normalized_shape=normalized_shape,
                          axis_names=axis_names, axes=None, fill_value=0),
            ErasePipeline(lib, device, batch_size, input_layout, iter(eii2), anchor=anchor, shape=shape,
                          axis_names=axis_names, axes=None, fill_value=0),
        )

    compare_pipelines(*pipes(sluice), batch_size=batch_size, N_iterations=3, eps=1e-04)
    if dali is not None and device == "cpu":
        # Both pipelines against DALI's: the same bytes (DALI's f32 rounding of normalized
        # coordinates included).
        for ours, theirs in zip(pipes(sluice), pipes(dali)):
            for _ in range(2):
                (a,), (b,) = ours.run(), theirs.run()
                _assert_same(_arrays(a), _arrays(b), "sluice vs dali")


# layout, shape, axis_names, anchor, shape, anchor_norm, shape_norm, fill_value (unused, as in DALI)
NORMALIZED_ROIS = [
    ("HWC", (60, 80, 3), "HW", (4, 10), (40, 50), (4 / 60.0, 10 / 80.0), (40 / 60.0, 50 / 80.0), 0),
    ("HWC", (60, 80, 3), "HW", (4, 10), (40, 50), (4 / 60.0, 10 / 80.0), (40 / 60.0, 50 / 80.0), -1),
    ("HWC", (60, 80, 3), "HW", (4, 10), (40, 50), (4 / 60.0, 10 / 80.0), (40 / 60.0, 50 / 80.0), (118, 186, 0)),
    ("HWC", (60, 80, 3), "HW", (4, 2, 3, 4), (50, 10, 10, 50), (4 / 60.0, 2 / 80.0, 3 / 60.0, 4 / 80.0),
     (50 / 60.0, 10 / 80.0, 10 / 60.0, 50 / 80.0), 0),
    ("HWC", (60, 80, 3), "H", (4,), (7,), (4 / 60.0,), (7 / 60.0,), 0),
    ("DHWC", (10, 60, 80, 3), "DHW", (2, 4, 10), (5, 40, 50), (2 / 10.0, 4 / 60.0, 10 / 80.0), (5 / 10.0, 40 / 60.0, 50 / 80.0), 0),
    ("HWC", (60, 80, 1), "WH", (10, 4), (50, 40), (10 / 80.0, 4 / 60.0), (50 / 80.0, 40 / 60.0), 0),
    ("XYZ", (60, 80, 3), "X", (4,), (7,), (4 / 60.0,), (7 / 60.0,), -10),
]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("batch_size", [1, 8])
@pytest.mark.parametrize("input_layout,input_shape,axis_names,anchor,shape,anchor_norm,shape_norm,fill_value", NORMALIZED_ROIS)
@pytest.mark.parametrize("normalized_anchor,normalized_shape", [(True, True), (True, False), (False, True)])
def test_operator_erase_with_normalized_coords(device, batch_size, input_layout, input_shape, axis_names, anchor, shape,
                                               anchor_norm, shape_norm, fill_value, normalized_anchor, normalized_shape):
    if device == "gpu":
        require_gpu()
    assert len(input_layout) == len(input_shape)
    assert len(anchor) == len(shape)
    assert len(anchor) % len(axis_names) == 0
    anchor_norm_arg = anchor_norm if normalized_anchor else anchor
    shape_norm_arg = shape_norm if normalized_shape else shape
    check_operator_erase_with_normalized_coords(device, batch_size, input_shape, anchor, shape, axis_names, input_layout,
                                                anchor_norm_arg, shape_norm_arg, normalized_anchor, normalized_shape)


def test_operator_erase_with_out_of_bounds_roi_coords():
    device = "cpu"
    batch_size = 8
    input_layout = "HWC"
    input_shape = (60, 80, 3)
    axis_names = "HW"
    anchor_arg = (4, 10, 10, 4)
    shape_arg = (40, 50, 50, 40)
    # second region is completely out of bounds
    anchor_norm_arg = (4 / 60.0, 10 / 80.0, 2000, 2000, 10 / 60.0, 4 / 80.0)
    shape_norm_arg = (40 / 60.0, 50 / 80.0, 200, 200, 50 / 60.0, 40 / 80.0)
    check_operator_erase_with_normalized_coords(device, batch_size, input_shape, anchor_arg, shape_arg, axis_names, input_layout,
                                                anchor_norm_arg, shape_norm_arg, True, True)


# ---------------------------------------------------------------- parity with DALI's cpu operator
HWC = [(60, 80, 3), (33, 47, 3), (60, 80, 3)]
PHOTO = [(300, 300, 3), (77, 91, 3)]

# id, sample shapes, layout, arguments
CASES = [
    ("hwc", HWC, "HWC", dict(anchor=(4, 10), shape=(40, 50))),
    ("hwc_two_regions_rgb_fill", HWC, "HWC", dict(anchor=(4, 2, 3, 4), shape=(50, 10, 10, 50), axis_names="HW", fill_value=(118, 185, 0))),
    ("doc_example_2_w_bands", PHOTO, "HWC", dict(anchor=(10, 250), shape=(20, 30), axis_names="W", fill_value=(118, 185, 0))),
    ("doc_example_3_normalized", PHOTO, "HWC", dict(anchor=(0.15, 0.15), shape=(0.3, 0.3), axis_names="HW", fill_value=100, normalized=True)),
    ("doc_example_4_normalized_anchor", PHOTO, "HWC", dict(anchor=(0.15, 0.15), shape=(20, 30), normalized_anchor=True, normalized_shape=False)),
    ("normalized_shape", HWC, "HWC", dict(anchor=(3, 7), shape=(0.33, 0.71), normalized_shape=True)),
    ("normalized_false", HWC, "HWC", dict(anchor=(3, 7), shape=(5, 6), normalized=False)),
    ("normalized_rounding", [(362, 5, 1), (429, 3, 2), (610, 4, 1)], "HWC",
     dict(anchor=(0.2089984118938446, 0.8091431856155396, 0.4978952407836914), shape=(0.7661396265029907, 0.4006469249725342, 0.7791538834571838),
          axis_names="H", normalized=True)),
    ("centered", HWC, "HWC", dict(anchor=(20, 30, 59.5, 0.5, 2, 3), shape=(11, 13, 7.3, 3.3, 3, 3), centered_anchor=True)),
    ("centered_normalized", HWC, "HWC", dict(anchor=(0.5, 0.5), shape=(0.35, 0.61), centered_anchor=True, normalized=True)),
    ("fractional_and_negative", HWC, "HWC", dict(anchor=(-0.5, -1.5, 1.5, 2.5, -7.2, 3.9), shape=(1.2, 3.9, 2.9, 2.4, 10.1, 0.99))),
    ("out_of_bounds", HWC, "HWC", dict(anchor=(-10, -10, 55, 75, 2000, 2000, 58, -3), shape=(15, 15, 100, 100, 200, 200, 2, 100))),
    ("negative_shape", HWC, "HWC", dict(anchor=(10, 10, 20, 20), shape=(-5, 5, 5, 5))),
    ("nan_and_infinite_anchors", HWC, "HWC", dict(anchor=(NAN, 1, -INF, 1, 3, 3), shape=(2, 2, 2, 2, 2, 2))),
    ("chw_default_axes_rgb", [(3, 40, 50), (3, 21, 17)], "CHW", dict(anchor=(4, 10, 30, 2), shape=(20, 15, 5, 40), fill_value=(7, 8, 9))),
    ("channel_range_wc", [(4, 5, 3), (10, 12, 3)], "HWC", dict(anchor=(1, 1), shape=(2, 2), axis_names="WC", fill_value=(7, 8, 9))),
    ("channel_range_ch", [(3, 10, 12)], "CHW", dict(anchor=(1, 2), shape=(1, 5), axis_names="CH", fill_value=(7, 8, 9))),
    ("fhwc_default_axes", [(4, 20, 30, 3), (2, 11, 9, 3)], "FHWC", dict(anchor=(1, 2, 3), shape=(2, 10, 10), fill_value=(1, 2, 3))),
    ("fhwc_hw", [(4, 20, 30, 3)], "FHWC", dict(anchor=(2, 3), shape=(10, 10), axis_names="HW")),
    ("fhwc_frames", [(6, 8, 9, 3)], "FHWC", dict(anchor=(1, 4), shape=(2, 1), axis_names="F")),
    ("fchw", [(3, 3, 8, 9)], "FCHW", dict(anchor=(1, 2, 2), shape=(4, 5, 1), axis_names="HWF", fill_value=(4, 5, 6))),
    ("dhwc", [(10, 60, 80, 3)], "DHWC", dict(anchor=(2, 4, 15), shape=(3, 7, 8), axis_names="DHW")),
    ("fdhwc", [(2, 3, 10, 12, 2)], "FDHWC", dict(anchor=(1, 1, 2, 3), shape=(1, 2, 5, 5), fill_value=(5, 6))),
    ("no_layout_axes", [(20, 30, 3), (7, 9, 3)], None, dict(anchor=(4, 10), shape=(10, 5), axes=(0, 1))),
    ("no_layout_axes_reversed", [(20, 30, 3), (7, 9, 3)], None, dict(anchor=(10, 4), shape=(5, 10), axes=(1, 0))),
    ("no_channel_layout", [(60, 80, 3)], "XYZ", dict(anchor=(4, 10), shape=(40, 50), axis_names="XY", fill_value=-1)),
    ("one_dim", [(10,), (25,)], "X", dict(anchor=(2, 7, 20), shape=(3, 10, 1), axes=(0,))),
    ("two_dims", [(20, 30), (5, 6)], "HW", dict(anchor=(2, 7), shape=(3, 10))),
    ("many_regions", [(3, 100, 1), (2, 50, 1)], "HWC", dict(axis_names="W", anchor=tuple(range(0, 100, 2)), shape=(1,) * 50)),
    ("repeated_axis", [(4, 5, 3)], "HWC", dict(anchor=(1, 2), shape=(1, 2), axis_names="HH")),
    ("axis_names_over_axes", [(4, 5, 3)], "HWC", dict(anchor=(1,), shape=(1,), axes=(1,), axis_names="H")),
    ("no_regions", HWC, "HWC", dict()),
    ("shape_without_anchor", HWC, "HWC", dict(shape=(2, 3))),
    ("empty_fill_is_zero", HWC, "HWC", dict(anchor=(1, 1), shape=(2, 2), fill_value=[])),
    ("one_channel_fill_list", [(4, 5, 1)], "HWC", dict(anchor=(1, 1), shape=(1, 1), fill_value=[5])),
    ("channel_count_unchecked_without_region", [(4, 5, 3)], "HWC", dict(anchor=(10, 10), shape=(2, 2), fill_value=(7, 8))),
    ("empty_samples", [(0, 4, 3), (5, 4, 3), (5, 0, 3)], "HWC", dict(anchor=(0, 0), shape=(2, 2))),
]


@needs_dali
@pytest.mark.parametrize("shapes,layout,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equals_dali(shapes, layout, kw):
    data = _samples(shapes)
    out = _parity(data, layout, **kw)
    if kw.get("anchor") == (4, 10) and kw.get("shape") == (40, 50) and layout == "HWC":
        # Something was erased (the comparison above is not between two copies).
        assert np.all(out[0][4:44, 10:60] == 0) and np.array_equal(out[0][:4], data[0][:4])


NP_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float32, np.float16]
# Fill values C++'s static_cast converts in every way: truncation, wrapping, x86's "integer
# indefinite" for NaN and out-of-range values (different for 32- and 64-bit conversions),
# UINT64's upper half, FLOAT16 rounding (ties away from zero) and overflow.
FILLS = [0, 7, -1.7, 300, -200, 70000, 2147483904.0, 5e9, -5, 1.5e19, 9223372036854775808.0, 1e20, -1e19,
         NAN, INF, -INF, 0.1, 1 + 2**-11, 65519.99, 1e-8, (118, 185.5, -3)]


@needs_dali
@pytest.mark.parametrize("np_type", NP_TYPES)
def test_every_type_and_fill_conversion_equals_dali(np_type):
    data = _samples([(6, 7, 3), (5, 9, 3)], np_type, seed=3)
    kws = [dict(anchor=(1, 2, 3, 0), shape=(2, 3, 1, 9), fill_value=f) for f in FILLS]
    ours, l1 = _run_many(sluice, data, "HWC", kws)
    theirs, l2 = _run_many(dali, data, "HWC", kws)
    assert l1 == l2
    for f, a, b in zip(FILLS, ours, theirs):
        _assert_same(a, b, f"fill_value={f}")


@needs_dali
def test_per_sample_argument_inputs_equal_dali():
    f32 = partial(np.array, dtype=np.float32)
    data = _samples([(20, 30, 3), (17, 11, 3), (9, 9, 3), (12, 14, 3)])
    # Different numbers of regions per sample (none in the third); anchors as (regions, axes)
    # arrays, read flattened.
    args = {
        "anchor": [f32([[1, 2]]), f32([[0.5, 3], [10, 2], [2, 2]]), f32([]).reshape(0, 2), f32([[1, 1], [5, 5]])],
        "shape": [f32([3, 4]), f32([10, 5, 3, 3, 1, 1]), f32([]), f32([2, 2, 3, 3])],
        "fill_value": [f32([1, 2, 3]), f32([4, 5, 6]), f32([7, 8, 9]), f32([-1, 300, 0.5])],
    }
    _parity(data, "HWC", args)
    _parity(data, "HWC", {"anchor": args["anchor"], "shape": args["shape"]}, fill_value=42)
    _parity(data, "HWC", {"anchor": [a.reshape(-1) for a in args["anchor"]], "shape": args["shape"]}, fill_value=(1, 2, 3))
    # Scalars per sample, normalized coordinates, centered.
    norm = {
        "anchor": [f32([0.1, 0.2]), f32([0.5, 0.5, 0.9, 0.0]), f32([0.0, 0.0]), f32([0.25, 0.75])],
        "shape": [f32([0.5, 0.5]), f32([0.3, 0.2, 0.5, 1.0]), f32([1.0, 1.0]), f32([0.5, 0.4])],
        "fill_value": [f32(3), f32(-4), f32(5), f32(6)],
    }
    _parity(data, "HWC", norm, normalized=True)
    _parity(data, "HWC", norm, normalized=True, centered_anchor=True)
    # A per-sample anchor with a constant shape of the same length.
    _parity(data, "HWC", {"anchor": [f32([1, 2]), f32([3, 4]), f32([5, 6]), f32([7, 8])]}, shape=(4, 4))


@needs_dali
def test_random_regions_equal_dali():
    """Random layouts, types, region counts, coordinates and flags."""
    rng = np.random.default_rng(2024)
    layouts = {"HWC": "HW", "CHW": "HW", "FHWC": "FHW", "DHWC": "DHW", "HW": "HW"}
    for trial in range(24):
        layout = list(layouts)[trial % len(layouts)]
        axis_letters = layouts[layout]
        shape = tuple(int(rng.integers(1, 40)) if c != "C" else 3 for c in layout)
        np_type = NP_TYPES[trial % len(NP_TYPES)]
        data = _samples([shape, tuple(max(1, s - int(rng.integers(0, 3))) if c != "C" else 3 for s, c in zip(shape, layout))], np_type, seed=trial)
        nregions = int(rng.integers(0, 5)) if trial % 6 == 0 else int(rng.integers(1, 5))
        normalized_anchor, normalized_shape, centered = (bool(b) for b in rng.random(3) < 0.5)
        n = nregions * len(axis_letters)
        extents = np.array([shape[layout.index(c)] for c in axis_letters] * nregions, np.float64)
        anchor = rng.random(n) * 1.2 - 0.2
        shp = rng.random(n) * 0.8
        if not normalized_anchor:
            anchor *= extents
        if not normalized_shape:
            shp *= extents
        kw = dict(anchor=tuple(float(np.float32(v)) for v in anchor), shape=tuple(float(np.float32(v)) for v in shp),
                  normalized_anchor=normalized_anchor, normalized_shape=normalized_shape, centered_anchor=centered,
                  fill_value=(9, 8, 7) if "C" in layout and rng.random() < 0.5 else float(rng.integers(-5, 300)))
        if rng.random() < 0.5:
            kw["axis_names"] = axis_letters
        _parity(data, layout, **kw)


# ---------------------------------------------------------------- errors
def _next_of(it):
    """A source of no argument giving the next item of `it`."""
    return lambda: next(it)


def _error_pipe(batches, layout="HWC", args=None, **kw):
    """A pipeline fed `batches` in turn (and `args`: per argument, one list of per-sample
    arrays per batch)."""
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        nodes = {k: fn.external_source(source=_next_of(i), batch=True) for k, i in arg_its.items()}
        pipe.set_outputs(fn.erase(x, **kw, **nodes))
    pipe.build()
    return pipe


# id, sample shapes, dtype, layout, arguments, pattern, DALI raises too (False: DALI crashes,
# divides by zero or writes out of bounds there)
ERRORS = [
    ("anchor_and_shape_lengths", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1, 1, 1, 1), shape=(2, 2)),
     r"(?s)erase.*'shape'.*sample 0.*`anchor` has 4 values and `shape` 2", True),
    ("anchor_without_shape", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1, 1)), r"(?s)erase.*'shape'.*`anchor` has 2 values and `shape` 0", True),
    ("not_a_multiple_of_the_axes", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1, 1, 1), shape=(2, 2, 2)),
     r"(?s)erase.*'shape'.*3 values, not a multiple of the 2 axes", True),
    ("sequence_default_axes_take_three", [(2, 4, 5, 3)], np.uint8, "FHWC", dict(anchor=(1, 1), shape=(2, 2)),
     r"(?s)erase.*'shape'.*not a multiple of the 3 axes \[0, 1, 2\]", True),
    ("axis_names_not_in_layout", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1,), shape=(1,), axis_names="D"),
     r"(?s)erase.*'axis_names'.*'D' is not present in the input layout.*HWC", True),
    ("axis_names_without_layout", [(4, 5, 3)], np.uint8, None, dict(anchor=(1, 1), shape=(1, 1), axis_names="HW"),
     r"(?s)erase.*'axis_names'.*'H' is not present.*no layout", True),
    ("multi_channel_fill_without_c", [(4, 5, 3)], np.uint8, "HWX", dict(anchor=(1, 1), shape=(2, 2), fill_value=(1, 2)),
     r"(?s)erase.*'fill_value'.*2 values.*'C' dimension.*HWX", True),
    ("fill_values_and_channels", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1, 1), shape=(2, 2), fill_value=(7, 8)),
     r"(?s)erase.*'fill_value'.*sample 0: 2 values, but the sample has 3 channels", True),
    ("normalized_with_normalized_anchor", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(0.1, 0.1), shape=(0.5, 0.5), normalized=True, normalized_anchor=True),
     r"(?s)erase.*'normalized'.*incompatible", True),
    ("normalized_with_normalized_shape", [(4, 5, 3)], np.uint8, "HWC", dict(normalized=False, normalized_shape=False),
     r"(?s)erase.*'normalized'.*incompatible", True),
    ("bool_input", [(4, 5, 3)], np.bool_, "HWC", dict(anchor=(1, 1), shape=(1, 1)),
     r"(?s)erase.*unsupported input type BOOL; supported: UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64, FLOAT, FLOAT16", True),
    ("float64_input", [(4, 5, 3)], np.float64, "HWC", dict(anchor=(1, 1), shape=(1, 1)), r"(?s)erase.*unsupported input type FLOAT64", True),
    ("scalar_input", [()], np.uint8, None, dict(axes=(0,)), r"(?s)erase.*unsupported number of dimensions 0; supported: 1 to 5", True),
    ("six_dims", [(1, 1, 1, 1, 2, 1)], np.uint8, "ABCDEF", dict(axes=(0,)), r"(?s)erase.*unsupported number of dimensions 6", True),
    ("axes_out_of_range", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1,), shape=(2,), axes=(3,)),
     r"(?s)erase.*'axes'.*axis 3 is out of range for 3-D input", False),
    ("no_layout_no_axes", [(4, 5, 3)], np.uint8, None, dict(anchor=(1, 1), shape=(2, 2)), r"(?s)erase.*'axes'.*3-D input has no layout", False),
    ("empty_axes", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1,), shape=(1,), axes=[]), r"(?s)erase.*'axes'.*no axis to erase along", False),
    ("empty_axis_names", [(4, 5, 3)], np.uint8, "HWC", dict(anchor=(1,), shape=(1,), axis_names=""),
     r"(?s)erase.*'axis_names'.*no axis to erase along", False),
    ("channels_only_layout", [(4,)], np.uint8, "C", dict(), r"(?s)erase.*'axes'.*no axis to erase along", False),
]


@pytest.mark.parametrize("shapes,np_type,layout,kw,pattern,dali_raises", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_operator_and_argument(shapes, np_type, layout, kw, pattern, dali_raises):
    data = [np.zeros(s, np_type) for s in shapes]
    pipe = None
    with pytest.raises(RuntimeError, match=pattern):
        pipe = _error_pipe([data, data], layout, **kw)
        pipe.run()
    if pipe is not None:
        # Raised by the iteration, not the pipeline: the next one raises the same again.
        with pytest.raises(RuntimeError, match=pattern):
            pipe.run()
    if dali is not None and dali_raises:
        with pytest.raises(RuntimeError):
            _run(dali, data, layout, **kw)


def test_bad_per_sample_values_name_the_sample_and_the_pipeline_goes_on():
    f32 = partial(np.array, dtype=np.float32)
    good = [np.full((6, 7, 3), 9, np.uint8)] * 3
    cases = [
        ({"anchor": [[f32([1, 1])] * 3, [f32([1, 1])] * 3], "shape": [[f32([2, 2]), f32([2, 2, 2, 2]), f32([2, 2])], [f32([2, 2])] * 3]},
         {}, r"(?s)erase.*'shape'.*sample 1.*`anchor` has 2 values and `shape` 4"),
        ({"anchor": [[f32([1, 1]), f32([1, 1]), f32([1, 1, 1])], [f32([1, 1])] * 3], "shape": [[f32([2, 2]), f32([2, 2]), f32([2, 2, 2])], [f32([2, 2])] * 3]},
         {}, r"(?s)erase.*'shape'.*sample 2.*3 values, not a multiple of the 2 axes"),
        ({"fill_value": [[f32([1, 2, 3]), f32([1, 2, 3]), f32([4])], [f32([1, 2, 3])] * 3]},
         dict(anchor=(1, 1), shape=(2, 2)), r"(?s)erase.*'fill_value'.*as many values in every sample.*sample 2 has 1"),
        # (a 2-D fill then a 1-D one: the external source itself refuses the change of
        # dimensions, so the recovery is not checked for this case)
        ({"fill_value": [[f32([[1, 2, 3]])] * 3, [f32([1, 2, 3])] * 3]},
         dict(anchor=(1, 1), shape=(2, 2)), r"(?s)erase.*'fill_value'.*scalar or a 1-D list per sample"),
    ]
    for args, kw, pattern in cases:
        pipe = _error_pipe([good, good], "HWC", args, **kw)
        with pytest.raises(ValueError, match=pattern):
            pipe.run()
        if "scalar or a 1-D" in pattern:
            continue
        (out,) = pipe.run()
        got = _arrays(out)
        assert got[0].shape == (6, 7, 3) and np.all(got[0][1:3, 1:3] != 9) and np.all(got[0][3:] == 9)
    # Bad data: a sample with 4 channels for a 3-channel fill, then good data.
    bad = [np.full((6, 7, 3), 9, np.uint8), np.full((6, 7, 3), 9, np.uint8), np.full((6, 7, 4), 9, np.uint8)]
    pipe = _error_pipe([bad, good], "HWC", anchor=(1, 1), shape=(2, 2), fill_value=(1, 2, 3))
    with pytest.raises(ValueError, match=r"(?s)erase.*'fill_value'.*sample 2: 3 values, but the sample has 4 channels"):
        pipe.run()
    (out,) = pipe.run()
    np.testing.assert_array_equal(_arrays(out)[2][1, 1], [1, 2, 3])


# ---------------------------------------------------------------- where Sluice departs from DALI
def test_missing_anchor_is_zeros_also_for_a_shape_input():
    """DALI fills zeros only for a constant `shape` and fails on the length mismatch here."""
    data = _samples([(6, 7, 3), (5, 5, 3)])
    shapes = [np.array([2, 3], np.float32), np.array([1, 1, 2, 2], np.float32)]
    ours, _ = _run(sluice, data, "HWC", {"shape": shapes})
    ref0, ref1 = data[0].copy(), data[1].copy()
    ref0[:2, :3] = 0
    ref1[:1, :1] = 0
    ref1[:2, :2] = 0
    _assert_same(ours, [ref0, ref1])


def test_negative_axes_count_from_the_end():
    """DALI indexes its arrays with them (out of bounds)."""
    data = _samples(HWC)
    a, _ = _run(sluice, data, "HWC", anchor=(3, 4), shape=(10, 20), axes=(-3, -2))
    b, _ = _run(sluice, data, "HWC", anchor=(3, 4), shape=(10, 20), axes=(0, 1))
    _assert_same(a, b)


def test_argument_inputs_of_any_numeric_type():
    """DALI wants FLOAT argument inputs; Sluice reads other numeric types as float."""
    data = _samples(HWC)
    as_type = lambda t: {"anchor": [np.array([4, 10], t)] * 3, "shape": [np.array([40, 50], t)] * 3, "fill_value": [np.array([1, 2, 3], t)] * 3}
    a, _ = _run(sluice, data, "HWC", as_type(np.float32))
    for t in (np.int32, np.int64, np.uint8, np.float64):
        b, _ = _run(sluice, data, "HWC", as_type(t))
        _assert_same(a, b, str(t))


def test_bounds_past_the_int64_range_leave_the_region_empty():
    """DALI overflows there (an infinite shape crashes it)."""
    data = _samples(HWC)
    out, _ = _run(sluice, data, "HWC", anchor=(1, 1, 2, 2), shape=(INF, 2, 1e30, 3))
    _assert_same(out, data)


# ---------------------------------------------------------------- gpu
def _gpu_vs_cpu(data, layout="HWC", args=None, kws=None, iters=2):
    """Every entry of `kws` on the cpu and on the gpu of one pipeline: the same bytes."""
    pipe = _pipe(sluice, data, layout, [(kw, g) for kw in kws for g in (False, True)], args, gpu=True)
    for _ in range(iters):
        outs = pipe.run()
    for k, kw in enumerate(kws):
        cpu, gpu = outs[2 * k], outs[2 * k + 1]
        assert cpu.layout() == gpu.layout() == (layout or "")
        _assert_same(_arrays(cpu), _arrays(gpu), f"{kw}")


@pytest.mark.parametrize("shapes,layout,kw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_gpu_equals_cpu(shapes, layout, kw):
    require_gpu()
    _gpu_vs_cpu(_samples(shapes), layout, kws=[kw])


@pytest.mark.parametrize("np_type", NP_TYPES)
def test_gpu_every_type_and_fill_equals_cpu(np_type):
    require_gpu()
    data = _samples([(6, 7, 3), (5, 9, 3), (0, 3, 3)], np_type, seed=5)
    _gpu_vs_cpu(data, "HWC", kws=[dict(anchor=(1, 2, 3, 0), shape=(2, 3, 1, 9), fill_value=f) for f in FILLS])
    chw = [np.ascontiguousarray(np.moveaxis(x, -1, 0)) for x in data]
    _gpu_vs_cpu(chw, "CHW", kws=[dict(anchor=(1, 2), shape=(3, 4), fill_value=(300, -1, NAN)), dict(anchor=(0, 1), shape=(2, 1), axis_names="CW", fill_value=(5, 6, 7))])


def test_gpu_per_sample_arguments_and_large_images_equal_cpu():
    require_gpu()
    f32 = partial(np.array, dtype=np.float32)
    data = _samples([(1080, 1920, 3), (17, 11, 3), (720, 1280, 3), (9, 9, 3)], seed=8)
    args = {
        "anchor": [f32([100, 200, 500, 1000]), f32([0.5, 3, 10, 2, 2, 2]), f32([]), f32([1, 1, 5, 5])],
        "shape": [f32([300, 400, 1000, 5000]), f32([10, 5, 3, 3, 1, 1]), f32([]), f32([2, 2, 3, 3])],
        "fill_value": [f32([1, 2, 3]), f32([4, 5, 6]), f32([7, 8, 9]), f32([-1, 300, 0.5])],
    }
    _gpu_vs_cpu(data, "HWC", args, kws=[{}, dict(centered_anchor=True)], iters=3)
    # Volumes and sequences of several frames, per-sample scalar fills.
    vol = _samples([(5, 40, 60, 3), (3, 7, 9, 3)], np.float32, seed=9)
    _gpu_vs_cpu(vol, "FHWC", {"fill_value": [f32(1.5), f32(-2.5)]}, kws=[dict(anchor=(1, 2, 3), shape=(3, 30, 40)), dict(anchor=(0.5, 0.5), shape=(0.5, 0.25), axis_names="WH", normalized=True)])
