"""`fn.reshape` against DALI 2.4's cpu operator: shapes, layouts and values for `shape`,
`rel_shape`, `src_dims`, the shape as a second input or an argument input; errors naming
the operator, argument and sample; the gpu backend equal to the cpu one (no copy on either)."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402

BATCH = 3


def _pipelines(build, tmp_path):
    """`build` applied by both libraries to HWC samples of shapes 2x4x3, 4x4x3 and 6x4x3
    (distinct values): the top of one constant, cropped per sample by a file reader's labels,
    so both see the same data without randomness."""
    files = []
    for i in range(BATCH):
        files.append(str(tmp_path / f"f{i}.bin"))
        (tmp_path / f"f{i}.bin").write_bytes(b"x")
    outs = []
    for mod_fn, mod_types, pdef in ((fn, types, pipeline_def), (dfn, dtypes, dali.pipeline_def)):
        @pdef(batch_size=BATCH, num_threads=1, device_id=None, seed=1)
        def p():
            _, label = mod_fn.readers.file(files=files, labels=list(range(BATCH)))
            base = mod_fn.cast(np.arange(6 * 6 * 3, dtype=np.float32).reshape(6, 6, 3), dtype=mod_types.FLOAT)
            h = mod_fn.cast(label * 2 + 2, dtype=mod_types.FLOAT)
            x = mod_fn.crop(mod_fn.reshape(base, layout="HWC"), crop_h=h, crop_w=4.0, crop_pos_x=0.0, crop_pos_y=0.0)
            return build(mod_fn, mod_types, x)

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run()[0])
    return outs


CASES = {
    "shape": lambda f, t, x: f.reshape(x, shape=[-1, 3]),
    "shape_negative_first": lambda f, t, x: f.reshape(x, shape=[-1]),
    "shape_keeps_layout": lambda f, t, x: f.reshape(f.reshape(x, shape=[-1, 4, 3]), layout="HWC"),
    "rel_shape": lambda f, t, x: f.reshape(x, rel_shape=[0.5, -1]),
    "rel_shape_rounds_half_away": lambda f, t, x: f.reshape(x, rel_shape=[0.25, -1]),
    "rel_shape_identity_keeps_layout": lambda f, t, x: f.reshape(x, rel_shape=[1, 1, 1]),
    "rel_shape_appends_a_dim": lambda f, t, x: f.reshape(x, rel_shape=[1, 1, 1, -1]),
    "src_dims_reorders_keeping_the_layout_string": lambda f, t, x: f.reshape(x, src_dims=[2, 0, 1]),
    "src_dims_with_rel_shape": lambda f, t, x: f.reshape(x, src_dims=[2, 1, 0], rel_shape=[-1, 0.5, 2]),
    "layout_only": lambda f, t, x: f.reshape(x, layout="CHW"),
    "shape_and_layout": lambda f, t, x: f.reshape(x, shape=[-1, 3], layout="XY"),
    "shape_as_argument_input": lambda f, t, x: f.reshape(x, shape=f.random.choice(np.array([[-1, 12]], np.int32))),
    "shape_as_second_input": lambda f, t, x: f.reshape(x, f.random.choice(np.array([[12, -1]], np.int32))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reshape_matches_dali(case, tmp_path):
    ours, ref = _pipelines(CASES[case], tmp_path)
    assert ours.layout() == ref.layout(), (ours.layout(), ref.layout())
    for i in range(BATCH):
        a, b = np.array(ours.at(i)), np.array(ref.at(i))
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape)
        np.testing.assert_array_equal(a, b)


def test_src_dims_changing_the_number_of_dimensions_does_what_dali_documents():
    """DALI 2.4 refuses these ("Unexpected dimensionality"); its documentation's example:
    300x200x1 with src_dims [-1, 1, 0] is 1x200x300."""
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def p():
        x = fn.reshape(fn.random.uniform(range=(0, 1), shape=[300, 200, 1], seed=2), layout="HWC")
        return x, fn.reshape(x, src_dims=[-1, 1, 0]), fn.reshape(x, src_dims=[0, 1])

    x, a, b = p().run()
    assert np.array(a.at(0)).shape == (1, 200, 300) and a.layout() == "HWC"  # as many dimensions: kept
    np.testing.assert_array_equal(np.array(a.at(0)).ravel(), np.array(x.at(0)).ravel())
    assert np.array(b.at(0)).shape == (300, 200) and b.layout() == ""


@pytest.mark.parametrize("kwargs, message", [
    (dict(shape=[5, -1]), r"sample 0: the input's 72 elements do not divide into the other extents' 5"),
    (dict(shape=[10, 10]), r"sample 0: \[10, 10\] holds 100 elements, the input \[4, 6, 3\] 72"),
    (dict(shape=[0, -1]), r"sample 0: an extent of 0 is not allowed"),
    (dict(shape=[-1, -1]), r"only one extent may be negative"),
    (dict(rel_shape=[1, 1, 1, 1]), r"4 values for a 3-D input"),
    (dict(src_dims=[3]), r"3 is not a dimension of the 3-D input"),
    (dict(shape=[-1, 3], layout="XYZ"), r"'XYZ' has 3 dimensions, the output 2"),
    (dict(shape=[72], rel_shape=[1.0]), r"mutually exclusive"),
])
def test_bad_reshape_names_operator_argument_and_sample(kwargs, message):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        return fn.reshape(fn.random.uniform(range=(0, 1), shape=[4, 6, 3]), **kwargs)

    pipe = p()
    for _ in range(2):  # the pipeline stays usable: the same error again, no crash
        with pytest.raises(sluice.errors.ArgumentError, match="reshape: argument '.*'.*" + message):
            pipe.run()


def test_reshape_shares_the_input_buffer():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[4, 6, 3], seed=5)
        return x, fn.reshape(x, shape=[-1])

    x, y = p().run()
    assert y.at(0).__array_interface__["data"][0] == x.at(0).__array_interface__["data"][0]


def test_gpu_reshape_equals_cpu():
    require_gpu()

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, seed=1)
    def p():
        x = fn.reshape(fn.random.uniform(range=(0, 1), shape=[4, 6, 3], seed=5), layout="HWC")
        shape = fn.random.choice(np.array([[12, -1], [-1, 4]], np.int32), seed=7)
        cpu = [fn.reshape(x, shape=shape), fn.reshape(x, shape), fn.reshape(x, rel_shape=[0.5, -1], layout="XY"), fn.reshape(x, src_dims=[2, 0, 1])]
        g = x.gpu()
        gpu = [fn.reshape(g, shape=shape), fn.reshape(g, shape), fn.reshape(g, rel_shape=[0.5, -1], layout="XY"), fn.reshape(g, src_dims=[2, 0, 1])]
        return (*cpu, *gpu)

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        for c, g in zip(outs[:4], outs[4:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout()
            g = g.as_cpu()
            for i in range(BATCH):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))


def test_gpu_reshape_shape_input_must_come_from_the_cpu():
    with pytest.raises(sluice.errors.GraphError, match=r"reshape \(device='gpu'\): input 1 is on the GPU; this input is read on the host"):
        fn.reshape(fn.random.uniform(range=(0, 1), shape=[4]).gpu(), fn.random.choice(np.array([[2, 2]], np.int32)).gpu())


def test_reshape_of_scalars_to_an_empty_shape_keeps_every_sample():
    """`shape=[]` turns one-element samples into scalars (DALI's test_coord_transform builds
    its scalar argument inputs so); every sample of the batch stays."""
    pipe = sluice.pipeline.Pipeline(batch_size=3, num_threads=1, device_id=None)
    with pipe:
        x = sluice.fn.external_source(source=lambda: [np.array([k], np.float32) for k in range(3)], batch=True)
        pipe.set_outputs(sluice.fn.reshape(x, shape=[]))
    pipe.build()
    (out,) = pipe.run()
    assert len(out) == 3 and [np.array(out.at(k)).shape for k in range(3)] == [()] * 3
    assert [float(np.array(out.at(k))) for k in range(3)] == [0.0, 1.0, 2.0]
