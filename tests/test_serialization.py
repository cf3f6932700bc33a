"""Serialized pipelines: `pipe.serialize()`, `Pipeline.deserialize()`,
`pipe.deserialize_and_build()`. DALI's cases that need no GPU
(test_external_source_multiple_sources.py, test_external_source_dali.py's test_feed_input
serialized) run against Sluice and DALI 2.4 with the same assertions; a round trip of a
pipeline of every operator family, conditionals included, gives the same batches."""

import types as _pytypes

import numpy as np
import pytest

from conftest import library_params

LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=m.Pipeline, pipeline_def=m.pipeline_def)


def test_external_source_with_serialized_pipe(lib):
    @lib.pipeline_def
    def serialized_pipe():
        return lib.fn.external_source(name="es")

    pipe = serialized_pipe(batch_size=10, num_threads=3, device_id=None)
    serialized = pipe.serialize()
    restored = lib.Pipeline(10, 4, None)
    restored.deserialize_and_build(serialized)
    restored.feed_input("es", np.zeros([10, 10]))
    (out,) = restored.run()
    assert out.as_array().shape == (10, 10)


def test_feed_input_into_a_deserialized_pipeline(lib):
    rng = np.random.default_rng(3)
    data = [[rng.random((int(rng.integers(1, 5)), 3), dtype=np.float32) for _ in range(4)] for _ in range(3)]
    src = lib.Pipeline(4, 2, None)
    with src:
        src.set_outputs(lib.fn.external_source(data, cycle=True, layout="XY"))
    dst = lib.Pipeline(4, 2, None, exec_async=False, exec_pipelined=False)
    with dst:
        dst.set_outputs(lib.fn.external_source(name="ext", layout="XY") * 2)
    dst = lib.Pipeline.deserialize(dst.serialize())
    for batch in data:
        (fed,) = src.run()
        dst.feed_input("ext", fed)
        (out,) = dst.run()
        assert out.layout() == "XY"
        for got, want in zip(out, batch):
            np.testing.assert_array_equal(np.array(got), want * 2)


def test_serialize_to_a_file_and_back(lib, tmp_path):
    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=9)
    def pipe():
        return lib.fn.random.uniform(range=[0, 1], shape=[2]) * 10, lib.types.Constant(np.int32(7))

    p = pipe()
    path = tmp_path / "pipe.txt"
    text = p.serialize(filename=str(path))
    q = lib.Pipeline.deserialize(filename=str(path))
    assert q.batch_size == 3
    for _ in range(3):
        for a, b in zip(p.run(), q.run()):
            np.testing.assert_array_equal(a.as_array(), b.as_array())
    with pytest.raises(ValueError, match="mutually exclusive"):
        lib.Pipeline.deserialize(text, filename=str(path))


# ----------------------------------------------------------------------------- Sluice's own

def test_round_trip_of_many_operator_families(mixed_root):
    import sluice
    from sluice import fn, types

    @sluice.pipeline_def(batch_size=6, num_threads=2, device_id=None, seed=21, enable_conditionals=True)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(mixed_root), random_shuffle=True, name="Reader")
        img = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
        img = fn.resize(img, size=(40, 30), interp_type=types.INTERP_LINEAR)
        if fn.random.coin_flip(probability=0.5):
            img = fn.flip(img, horizontal=1)
        else:
            img = fn.rotate(img, angle=fn.random.uniform(range=[-20, 20]), fill_value=0, keep_size=True)
        out = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="CHW", mean=[1.0, 2.0, 3.0],
                                       std=[50.0, 60.0, 70.0], mirror=fn.random.coin_flip())
        return out, fn.cast(labels, dtype=types.INT64) + 1, fn.reshape(fn.pad(img, axes=(0,), shape=(48,)), shape=[-1])

    p = pipe()
    text = p.serialize()
    q = sluice.Pipeline.deserialize(text, num_threads=1)
    assert q.num_threads == 1 and q.seed == 21
    for _ in range(3):
        for a, b in zip(p.run(), q.run()):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                np.testing.assert_array_equal(np.array(x), np.array(y))
    assert sluice.Pipeline.deserialize(text).serialize() == text  # the same operators, names and arguments


def test_what_cannot_be_serialized_or_deserialized():
    import sluice

    pipe = sluice.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(sluice.fn.python_function(sluice.fn.random.uniform(), function=lambda x: x))
    with pytest.raises(RuntimeError, match="Python function .* cannot be serialized"):
        pipe.serialize()
    with pytest.raises(RuntimeError, match="Failed to deserialize the pipeline"):
        sluice.Pipeline.deserialize("garbage")
    with pytest.raises(TypeError, match="not callable"):
        pipe.serialize("pipe.txt")


def test_a_serialized_pipeline_naming_an_unknown_operator_or_argument():
    import json

    import sluice

    pipe = sluice.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(sluice.fn.random.uniform(range=[0, 1]))
    state = json.loads(pipe.serialize())
    state["ops"][0]["schema"] = "NoSuchOperator"
    with pytest.raises(RuntimeError, match="unknown operator 'NoSuchOperator'"):
        sluice.Pipeline.deserialize(json.dumps(state))
    state = json.loads(pipe.serialize())
    state["ops"][0]["args"]["rnage"] = [0, 1]
    with pytest.raises(RuntimeError, match="rnage"):
        sluice.Pipeline.deserialize(json.dumps(state))
    truncated = pipe.serialize()[:40]
    with pytest.raises(RuntimeError, match="Failed to deserialize the pipeline"):
        sluice.Pipeline.deserialize(truncated)
    assert len(pipe.run()[0]) == 2  # the process and the original pipeline go on


def test_a_truncated_checkpoint_is_a_clear_error():
    import sluice

    @sluice.pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True)
    def pipe():
        return sluice.fn.random.uniform()

    cpt = pipe().checkpoint()
    with pytest.raises(RuntimeError, match="Failed to deserialize checkpoint"):
        pipe(checkpoint=cpt[: len(cpt) // 2]).build()
