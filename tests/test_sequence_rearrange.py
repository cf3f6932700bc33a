"""`fn.sequence_rearrange` against DALI 2.4's cpu operator: DALI's
test_sequence_rearrange.py cases (one order for the batch, an order per sample as an
argument input, frames repeated and dropped, with and without layout); errors naming the
operator, the argument and the sample, the pipeline still usable; gpu equal to cpu."""

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402


def _sequences(batch, shape):
    """Sample i's frame f is filled with i * frames + f (DALI's get_sequences)."""
    return [np.concatenate([np.full([1] + shape[1:], i * shape[0] + f) for f in range(shape[0])]) for i in range(batch)]


def _run(mod_fn, pdef, data, order, per_sample, layout=""):
    @pdef(batch_size=len(data), num_threads=2, device_id=None)
    def p():
        x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
        o = mod_fn.external_source(lambda: order, batch=True) if per_sample else order
        return mod_fn.sequence_rearrange(x, new_order=o)

    pipe = p()
    if pdef is dali.pipeline_def:
        pipe.build()
    return pipe


ORDERS = {
    "constant": ([3, 2, 1, 0], False),
    "per_sample": ([np.int32([3, 0]), np.int32([2, 1]), np.int32([1, 1]), np.int32([0, 1, 2]), np.int32([3])], True),
    "per_sample_grows": ([np.int32([0]), np.int32([1]), np.int32([2]), np.int32([3]), np.int32([0, 1, 2, 3])], True),
}


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("shape", [[4, 3, 2], [5, 1]])
@pytest.mark.parametrize("with_layout", [True, False])
def test_sequence_rearrange_matches_dali(order, shape, with_layout):
    new_order, per_sample = ORDERS[order]
    layout = "FHW"[: len(shape)] if with_layout else ""
    data = _sequences(5, shape)
    (a,) = _run(fn, pipeline_def, data, new_order, per_sample, layout).run()
    (b,) = _run(dfn, dali.pipeline_def, data, new_order, per_sample, layout).run()
    assert a.layout() == b.layout() == layout
    for i in range(5):
        o = new_order[i] if per_sample else new_order
        x, y = np.array(a.at(i)), np.array(b.at(i))
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, data[i][list(o)])


def test_long_per_sample_orders():
    """Orders longer than the per-sample list limit of other arguments (64)."""
    data = _sequences(2, [100, 2])
    order = [np.arange(99, -1, -1, dtype=np.int32), np.arange(0, 100, 2, dtype=np.int32)]
    (a,) = _run(fn, pipeline_def, data, order, True).run()
    for i in range(2):
        np.testing.assert_array_equal(np.array(a.at(i)), data[i][order[i]])


# DALI's test_fail_sequence_rearrange cases.
@pytest.mark.parametrize("order, per_sample, message, dali_message", [
    ([6, 7], False, r"sample 0: new_order\[0\] = 6 is not a frame of a sequence of 5 frames", r"new_order\[0\] must be between 0 and input_sequence_length = 5 for sample 0"),
    ([-1], False, r"sample 0: new_order\[0\] = -1 is not a frame", r"new_order\[0\] must be between"),
    ([], False, r"is empty: empty output sequences are not allowed", "Empty result sequences are not allowed"),
    ([np.int32([0]), np.int32([])], True, r"sample 1: empty, but empty output sequences are not allowed", r"Empty `new_order` for sample 1 is not allowed"),
    ([np.int32([6, 7]), np.int32([0])], True, r"sample 0: new_order\[0\] = 6", r"new_order\[0\] must be between"),
    ([np.int32([-1]), np.int32([0])], True, r"sample 0: new_order\[0\] = -1", r"new_order\[0\] must be between"),
    ([np.int32([[1], [2]]), np.int32([[1], [2]])], True, r"must be a 1-D integer list per sample, got 2-D", "cannot be converted to dimension"),
])
def test_bad_new_order_names_operator_argument_and_sample(order, per_sample, message, dali_message):
    data = _sequences(2, [5, 1])
    pipe = _run(fn, pipeline_def, data, order, per_sample)
    for _ in range(2):  # the same error again: the pipeline stays usable
        with pytest.raises(sluice.errors.ArgumentError, match="sequence_rearrange: argument 'new_order': .*" + message):
            pipe.run()
    with pytest.raises(RuntimeError, match=dali_message):
        _run(dfn, dali.pipeline_def, data, order, per_sample).run()


@pytest.mark.parametrize("layout", ["HF", "HW"])
def test_not_a_sequence_layout(layout):
    data = _sequences(5, [5, 1])
    pipe = _run(fn, pipeline_def, data, [0, 2, 1, 3, 4], False, layout)
    with pytest.raises(sluice.errors.ArgumentTypeError, match=f"sequence_rearrange: the input must be a sequence: its layout must start with 'F' \\(frames\\), got '{layout}'"):
        pipe.run()
    with pytest.raises(RuntimeError, match="Expected sequence as the input"):
        _run(dfn, dali.pipeline_def, data, [0, 2, 1, 3, 4], False, layout).run()


def test_gpu_sequence_rearrange_equals_cpu():
    require_gpu()
    data = _sequences(5, [4, 3, 2])
    order = ORDERS["per_sample"][0]

    @pipeline_def(batch_size=5, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: data, batch=True, layout="FHW")
        o = fn.external_source(lambda: order, batch=True)
        return (fn.sequence_rearrange(x, new_order=o), fn.sequence_rearrange(x, new_order=[3, 3, 0]),
                fn.sequence_rearrange(x.gpu(), new_order=o), fn.sequence_rearrange(x.gpu(), new_order=[3, 3, 0]))

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        for c, g in zip(outs[:2], outs[2:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout()
            g = g.as_cpu()
            for i in range(5):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
