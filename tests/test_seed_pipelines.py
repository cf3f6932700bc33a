"""Pipelines of the documents Sluice is modelled on (../shared/seeds/004, DALI's Pipeline
reference page) that feed data from Python, as written there but for `nvidia.dali` ->
`sluice` and the sources they leave undefined. (Its parallel examples also need
`enable_conditionals=True` and read `sample_info.iter_idx`, which DALI 2.4's SampleInfo does
not have; the conditionals are issue 17.)"""

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
