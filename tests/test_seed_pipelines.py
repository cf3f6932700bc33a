"""Pipelines of the documents Sluice is modelled on (../shared/seeds/004, DALI's Pipeline
reference page) that feed data from Python or branch per sample, as written there but for
`nvidia.dali` -> `sluice`, the data paths and the sources they leave undefined. (Its
`do_not_convert` examples read `sample_info.iter_idx`, which DALI 2.4's SampleInfo does not
have: Sluice's has it, as the document says.)"""

import numpy as np

import sluice as dali
from sluice import fn, pipeline_def

N = 4


def my_source():
    return [np.full((2, 2), 1, np.int32)] * N, [np.full(3, 2.5, np.float32)] * N


def test_current_pipeline_with_ops_external_source():
    pipe = dali.Pipeline(batch_size=N, num_threads=3, device_id=0)
    with pipe:
        src = dali.ops.ExternalSource(my_source, num_outputs=2)
        a, b = src()
        pipe.set_outputs(a, b)
    a, b = pipe.run()
    assert a.as_array().tolist() == [[[1, 1], [1, 1]]] * N and b.as_array().tolist() == [[2.5] * 3] * N


def test_pipeline_def_with_fn_external_source():
    @dali.pipeline_def(batch_size=N, num_threads=3, device_id=0)
    def my_pipe(my_source):
        return dali.fn.external_source(my_source, num_outputs=2)

    pipe = my_pipe(my_source)
    a, b = pipe.run()
    assert len(a) == N and b.as_array().dtype == np.float32


def my_generator():
    for i in range(3):
        yield [np.full(2, i, np.uint8)] * 128


def test_decorator_arguments_overridden_at_call():
    @pipeline_def(batch_size=32, num_threads=3)
    def my_pipe():
        data = fn.external_source(source=my_generator)
        return data

    pipe = my_pipe(batch_size=128)  # batch_size=128 overrides batch_size=32
    assert pipe.batch_size == 128
    got = []
    while True:
        try:
            (out,) = pipe.run()
        except StopIteration:
            break
        got.append(out.as_array()[:, 0].tolist())
    assert got == [[i] * 128 for i in range(3)]


# ---------------------------------------------------------------- conditional execution (004)

def _random_rotate(images_dir, decoder_device):
    from sluice.types import DALIDataType

    @pipeline_def(enable_conditionals=True)
    def random_rotate():
        jpegs, _ = fn.readers.file(device="cpu", file_root=images_dir)
        images = fn.decoders.image(jpegs, device=decoder_device)
        do_rotate = fn.random.coin_flip(probability=0.25, dtype=DALIDataType.BOOL)
        if do_rotate:
            result = fn.rotate(images, angle=fn.random.uniform(range=(10, 30)), fill_value=0)
        else:
            result = images
        return result

    return random_rotate


def _check_random_rotate(images_dir, decoder_device, device_id):
    pipe = _random_rotate(images_dir, decoder_device)(batch_size=16, num_threads=2, device_id=device_id, seed=3)
    plain = dali.Pipeline(batch_size=16, num_threads=2, device_id=device_id, seed=3)
    with plain:
        jpegs, _ = fn.readers.file(device="cpu", file_root=images_dir)
        plain.set_outputs(fn.decoders.image(jpegs, device=decoder_device))
    rotated = kept = 0
    for _ in range(3):
        (got,), (ref,) = pipe.run(), plain.run()
        got, ref = (got.as_cpu(), ref.as_cpu()) if decoder_device == "mixed" else (got, ref)
        for g, r in zip(got, ref):
            g, r = np.array(g), np.array(r)
            if g.shape == r.shape and np.array_equal(g, r):
                kept += 1
            else:
                rotated += 1  # a rotation by 10-30 degrees grows the canvas
                assert g.shape[0] >= r.shape[0] and g.shape[1] >= r.shape[1]
    assert kept and rotated, (kept, rotated)  # ~25% rotated of 48


def test_conditional_random_rotate(mixed_root):
    _check_random_rotate(str(mixed_root), "cpu", None)


def test_conditional_random_rotate_mixed_decoder(mixed_root):
    from conftest import require_gpu

    require_gpu()
    _check_random_rotate(str(mixed_root), "mixed", 0)


def source_fun(sample_info):
    return np.full((2, 2), sample_info.iter_idx)


@dali.pipeline.do_not_convert
def source_factory(size):
    def source_fun(sample_info):
        return np.full(size, sample_info.iter_idx)
    return source_fun


def test_do_not_convert_examples():
    @pipeline_def(enable_conditionals=True)
    def pipe():
        source = source_factory(size=(2, 1))
        return fn.external_source(source=source, parallel=True, batch=False)

    @pipeline_def(enable_conditionals=True)
    def pipe_global():
        return fn.external_source(source=source_fun, batch=False)

    for make, shape in ((pipe, (2, 1)), (pipe_global, (2, 2))):
        p = make(batch_size=4, num_threads=2, device_id=None, py_num_workers=2)
        for it in range(2):
            (out,) = p.run()
            assert [np.array(s).tolist() for s in out] == [np.full(shape, it).tolist()] * 4


def test_converted_source_factory_is_refused_for_parallel_sources():
    import pytest

    @pipeline_def(enable_conditionals=True)
    def pipe():
        def source_factory(size):
            def source_fun(sample_info):
                return np.full(size, sample_info.iter_idx)
            return source_fun

        source = source_factory(size=(2, 1))
        return fn.external_source(source=source, parallel=True, batch=False)

    with pytest.raises(ValueError, match="created in a scope that was converted with AutoGraph"):
        pipe(batch_size=4, num_threads=2, device_id=None)
