"""Debug mode with conditionals (`experimental.pipeline_def(debug=True,
enable_conditionals=True)`): DALI's test_pipeline_debug.py conditional cases, on Sluice
only (DALI 2.4's debug mode needs CUDA). The bodies of tests/test_conditionals.py run again
with the first pipeline each makes and the second in debug mode or not, as DALI's
`(base_debug, conditional_debug)` pairs; outputs must equal those of the compiled pipelines."""

import re

import numpy as np
import pytest

import sluice
import test_conditionals as tc
from sluice import fn, types
from sluice.pipeline import experimental

from conftest import require_gpu

# (first pipeline in debug mode, second pipeline in debug mode), DALI's pairs.
PAIRS = [(True, False), (False, True), (True, True)]
PAIR_IDS = ["debug_first", "debug_second", "debug_both"]


class _DebugLib:
    """Stands for the `lib` fixture of test_conditionals: its k-th `pipeline_def` makes debug
    pipelines when `debug[k]` is set (pipelines past the pair: as the last)."""

    def __init__(self, debug):
        self.fn, self.types, self.pipeline, self.Pipeline = sluice.fn, sluice.types, sluice.pipeline, sluice.Pipeline
        self._debug, self._made = debug, 0

    def pipeline_def(self, func=None, **kwargs):
        debug = self._debug[min(self._made, len(self._debug) - 1)]
        self._made += 1
        return experimental.pipeline_def(func, debug=debug, **kwargs)


@pytest.mark.parametrize("debug", PAIRS, ids=PAIR_IDS)
def test_against_split_merge(debug):
    tc.test_against_split_merge(_DebugLib(debug))


@pytest.mark.parametrize("debug", PAIRS, ids=PAIR_IDS)
def test_arg_inputs_scoped_tracking(debug):
    tc.test_arg_inputs_scoped_tracking(_DebugLib(debug))


def test_arg_inputs_scoped_uninitialized():
    tc.test_arg_inputs_scoped_uninitialized(_DebugLib((True,)))


@pytest.mark.parametrize("pred", tc._params(tc.pred_gens[:-1], "pred"))
@pytest.mark.parametrize("debug", PAIRS, ids=PAIR_IDS)
def test_generators(pred, debug):
    tc.test_generators(_DebugLib(debug), pred)


def test_uninitialized():
    tc.test_uninitialized(_DebugLib((True,)))


def _split_merge_vs_if(body_split_merge, body_if):
    pipes = [experimental.pipeline_def(batch_size=8, num_threads=3, device_id=None, enable_conditionals=c)(f)(debug=True)
             for f, c in ((body_split_merge, False), (body_if, True))]
    tc.compare_pipelines(*pipes, iters=5)


def test_debug_pipeline_conditionals(capsys):
    def split_merge():
        pred = fn.random.coin_flip(seed=42, dtype=types.BOOL)
        data = types.Constant(10, device="cpu")
        true, false = fn._conditional.split(data, predicate=pred)
        output = fn._conditional.merge(true + 2, false + 100, predicate=pred)
        return pred, output

    def with_if():
        pred = fn.random.coin_flip(seed=42, dtype=types.BOOL)
        data = types.Constant(10, device="cpu")
        print(f"Pred: {pred}")
        if pred:
            output = data + 2
            print(f"Output if: {output}")
        else:
            output = data + 100
            print(f"Output else: {output}")
        return pred, output

    _split_merge_vs_if(split_merge, with_if)
    # the branches' nodes print their share of the samples
    printed = capsys.readouterr().out
    assert "Output if: DataNodeDebug" in printed and "Output else: DataNodeDebug" in printed


def test_debug_pipeline_conditional_repeated_op():
    def split_merge():
        pred = fn.random.coin_flip(seed=42, dtype=types.BOOL)
        rng1 = fn.random.coin_flip(seed=1)
        rng2 = fn.random.coin_flip(seed=2)
        true, _ = fn._conditional.split(rng1, predicate=pred)
        _, false = fn._conditional.split(rng2, predicate=pred)
        return pred, fn._conditional.merge(true + 20, false + 10, predicate=pred)

    def with_if():
        pred = fn.random.coin_flip(seed=42, dtype=types.BOOL)
        rng1 = fn.random.coin_flip(seed=1)
        rng2 = fn.random.coin_flip(seed=2)
        if pred:
            output = rng1 + 20
        else:
            output = rng2 + 10
        return pred, output

    _split_merge_vs_if(split_merge, with_if)


def test_debug_conditionals_equal_a_numpy_reference():
    """Nested ifs in debug mode, against the same choices made per sample in NumPy."""
    @experimental.pipeline_def(batch_size=9, num_threads=2, device_id=None, enable_conditionals=True, debug=True)
    def pipe():
        x = fn.external_source(source=lambda si: np.float32([si.idx_in_epoch, -si.idx_in_batch]), batch=False)
        a = fn.external_source(source=lambda si: np.array(si.idx_in_epoch % 3 == 0), batch=False)
        b = fn.external_source(source=lambda si: np.array(si.idx_in_epoch % 2 == 0), batch=False)
        if a:
            y = x * 2
        elif b:
            y = x + 100
        else:
            y = -x
        return y

    p = pipe()
    for it in range(3):
        (out,) = p.run()
        for i in range(9):
            k = it * 9 + i
            x = np.float32([k, -i])
            ref = x * 2 if k % 3 == 0 else (x + 100 if k % 2 == 0 else -x)
            np.testing.assert_array_equal(np.array(out.at(i)), ref)


def test_debug_pipeline_conditional_without_data_node():
    @experimental.pipeline_def(batch_size=8, num_threads=3, device_id=None, enable_conditionals=True)
    def pipeline_cond():
        pred = fn.random.coin_flip(seed=42, dtype=types.BOOL)
        rng1 = fn.random.coin_flip(seed=1)
        if pred:
            output = fn.copy(rng1.get())
        else:
            output = rng1 + 10
        return pred, output

    with pytest.raises(ValueError, match=re.escape(
            "Debug mode with conditional execution (when `enable_conditionals=True`) doesn't allow for modification "
            "of operator outputs by libraries other than DALI or using the TensorLists extracted via `.get()` as "
            "inputs. Expected `DataNodeDebug` as an input, got ") + ".* at input 0"):
        pipeline_cond(debug=True).run()


@pytest.mark.parametrize("debug", PAIRS, ids=PAIR_IDS)
def test_gpu_branches(debug):
    """DALI's test_dot_gpu pairs: a branch moving data to the GPU, the other staying on the
    CPU, merged on the GPU."""
    require_gpu()
    lib = _DebugLib(debug)
    kw = dict(batch_size=6, num_threads=2, device_id=0, seed=3)

    def images(si):
        return np.full((4, 5, 3), si.idx_in_epoch % 250, np.uint8)

    @lib.pipeline_def(**kw)
    def base():
        img = fn.external_source(source=images, batch=False, layout="HWC")
        pred = fn.external_source(source=lambda si: np.array(si.idx_in_batch % 2 == 0), batch=False)
        return fn.flip(img.gpu(), horizontal=1), img.gpu(), pred

    @lib.pipeline_def(enable_conditionals=True, **kw)
    def cond():
        img = fn.external_source(source=images, batch=False, layout="HWC")
        pred = fn.external_source(source=lambda si: np.array(si.idx_in_batch % 2 == 0), batch=False)
        if pred:
            out = fn.flip(img.gpu(), horizontal=1)
        else:
            out = img
        return out

    p1, p2 = base(), cond()
    for _ in range(3):
        flipped, plain, pred = (tc._samples(o.as_cpu() if hasattr(o, "as_cpu") else o) for o in p1.run())
        (out,) = p2.run()
        assert out.__class__.__name__ == "TensorListGPU"
        tc.check_batch(out.as_cpu(), [f if p else q for f, q, p in zip(flipped, plain, pred)])
