"""Conditional execution (`enable_conditionals=True`): `if`/`elif`/`else`, `and`/`or`/`not`
on DataNodes, run against Sluice and DALI 2.4 (CPU-only) with the same assertions.

Ported from DALI's tests (mirror mzient/DALI @ 4da8adf, dali/test/python/):
* conditionals/test_pipeline_conditionals.py: test_basic, test_complex_outputs,
  test_single_output, test_unbalanced, test_local_var, test_local_remains_local,
  test_no_outputs, test_created_outputs, test_{one,both,chain}_branch(es)_new_node,
  test_{one,both,chain}_branch(es)_only_assign, test_consecutive, test_nested,
  test_nested_with_assignment, test_multiple_nests (CPU input only; the input generator that is
  always 0 is dropped, as it checks nothing the `idx_in_epoch` one does not),
  test_against_split_merge, test_arg_inputs_scoped_tracking,
  test_arg_inputs_scoped_uninitialized, test_generators, test_uninitialized,
  test_error_condition (the 1-d predicate half), test_predicate_any_type,
  test_data_node_if_error, test_sanity_enable_conditionals, test_exception_explanation.
  DALI's `generic_execute` feeds external_source nodes passed as pipeline-function arguments;
  here the external_source nodes are made inside the pipeline function, and the reference is the
  same function run in plain Python per sample, as DALI does.
* conditionals/test_logical_expressions.py: test_not, test_and, test_or,
  test_complex_expression, test_lazy_eval, test_lazy_eval_with_oob, test_error_input (the 1-d
  input half), test_non_boolean_input_error, test_not_any_type.
* conditionals/test_nests.py: test_dicts, test_tuples, test_nesting_error (with DALI 2.4's
  optree-based message: the mirror's test expects dm-tree's text and fails on 2.4).
* conditionals/test_external_source.py: all five tests (the `is_autograph_artifact` asserts
  inside the sources are left out: that is a private module of DALI).
* test_pipeline_decorator.py: test_pipeline_def_with_do_not_convert.
* operator_2/test_python_function.py: test_python_function_conditionals (with checked values).
* Added from the behavioural spec (checked on DALI 2.4): early return per sample, returning a
  constant in one branch, the call-time `enable_conditionals=False` override.

Not ported, and why:
* test_condition_stack: unit test of DALI's private `_conditionals._ConditionStack`.
* GPU cases: the `gpu` device variants of test_consecutive/test_nested/
  test_nested_with_assignment/test_multiple_nests, test_dot_gpu (also asserts DALI's internal
  node names), the GPU-predicate half of test_error_condition, the GPU-input half of
  test_error_input. (test_gpu2cpu_conditionals is ported in test_gpu_to_cpu.py, and
  test_simple_batch_permute / test_batch_permutation below.)
* test_named_tensor_arguments: calls the hidden fn._conditional.split/merge directly.
* test_multiple_input_source and test_nests.py::test_select_impls: not ported yet (what
  they use, multiple input sets, fn.copy, fn.color_twist and random.uniform(values=), exists
  now).
* Readers/decoders from DALI_extra (readers.caffe, db/single/jpeg) are replaced by
  fn.external_source data; transforms.rotation + warp_affine (arg-input-only operator in a branch)
  by fn.zeros(shape=<DataNode>).
* Debug-mode variants: in tests/test_debug_conditionals.py, on Sluice only (DALI 2.4's debug mode
  needs a CUDA driver).
"""

import collections
import re
import types as _pytypes

import numpy as np
import pytest

from conftest import library_params


LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(
        fn=m.fn, types=m.types, Pipeline=m.Pipeline, pipeline_def=m.pipeline_def, pipeline=m.pipeline
    )


BS = 10
ITERS = 5
KW = dict(batch_size=BS, num_threads=1, device_id=None)

# --------------------------------------------------------------------------- helpers
SampleInfo = collections.namedtuple("SampleInfo", "idx_in_epoch idx_in_batch iteration epoch_idx")


def _samples(out):
    return [np.array(s) for s in out]


def check_batch(out, expected):
    got = _samples(out)
    assert len(got) == len(expected), (len(got), len(expected))
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.shape == e.shape, f"sample {i}: shape {g.shape} != {e.shape}"
        np.testing.assert_array_equal(g, e, err_msg=f"sample {i}")


def compare_pipelines(p1, p2, iters=ITERS):
    for it in range(iters):
        o1, o2 = p1.run(), p2.run()
        assert len(o1) == len(o2)
        for k, (a, b) in enumerate(zip(o1, o2)):
            a, b = _samples(a), _samples(b)
            assert len(a) == len(b)
            for i, (x, y) in enumerate(zip(a, b)):
                assert x.dtype == y.dtype, f"iter {it} output {k} sample {i}: {x.dtype} != {y.dtype}"
                np.testing.assert_array_equal(x, y, err_msg=f"iter {it} output {k} sample {i}")


def _batch_source(batches, k):
    """external_source callback (batch mode, iteration index) giving input k of `batches`."""
    return lambda it: [np.asarray(s) for s in batches[it % len(batches)][k]]


def _es_inputs(lib, batches, n):
    return [lib.fn.external_source(source=_batch_source(batches, k)) for k in range(n)]


def generic_execute(lib, function, input_gen_list, bs=BS, iters=ITERS):
    """Runs `function` as a conditional pipeline whose inputs are external sources fed with
    batches from the sample generators, and as plain Python per sample; the outputs must agree
    (DALI's generic_execute)."""
    batches = [
        [[gen(SampleInfo(bs * it + i, i, it, 0)) for i in range(bs)] for gen in input_gen_list]
        for it in range(iters)
    ]
    n = len(input_gen_list)

    @lib.pipeline_def(enable_conditionals=True, batch_size=bs, num_threads=1, device_id=None)
    def pipe():
        inputs = _es_inputs(lib, batches, n)
        return function(*inputs)

    p = pipe()
    for it in range(iters):
        outputs = p.run()
        baseline = []
        for sample_inputs in zip(*batches[it]):
            o = function(*sample_inputs)
            baseline.append(o if isinstance(o, tuple) else (o,))
        baseline = list(zip(*baseline))
        assert len(outputs) == len(baseline)
        for out, ref in zip(outputs, baseline):
            check_batch(out, list(ref))


def _params(gens, prefix):
    return [pytest.param(g, id=f"{prefix}{i}") for i, g in enumerate(gens)]


_rng = np.random.default_rng(1234)

num_gens = [
    lambda x: np.int32(x.idx_in_batch - 3),
    lambda x: np.int32(-1 if x.idx_in_batch % 2 == 0 else 1),
    lambda x: np.int32((x.idx_in_batch % 3 == 0) - 1),
    lambda _: np.int32(1),
    lambda _: np.int32(0),
    lambda _: np.int32(-1),
    lambda _: _rng.choice([np.int32(-2), np.int32(0), np.int32(2)]),
]

pred_gens = [
    lambda x: np.array(x.idx_in_batch < 3),
    lambda x: np.array(x.idx_in_batch % 2 == 0),
    lambda x: np.array(x.idx_in_batch % 3 == 0),
    lambda x: np.array((x.idx_in_batch + (x.iteration % 2)) % 2 == 0),
    lambda _: np.array(False),
    lambda _: _rng.choice([np.array(True), np.array(False)]),
]

input_gen = lambda x: np.array(x.idx_in_epoch)  # noqa: E731

NUM = _params(num_gens, "num")
PRED = _params(pred_gens, "pred")
PRED2 = [
    pytest.param(a, b, id=f"pred{i}-pred{j}")
    for i, a in enumerate(pred_gens)
    for j, b in enumerate(pred_gens)
]

INCONSISTENT = (
    "Encountered inconsistent outputs out of the `if/else` control flow statement. Variables need "
    "to be initialized in every code path (both `if` branches). "
)

# =========================================================================== test_pipeline_conditionals
# (ported from dali/test/python/autograph/converters/test_control_flow.py via DALI)


@pytest.mark.parametrize("num_gen", NUM)
def test_basic(lib, num_gen):
    def f(n):
        a = np.int32(0)
        b = np.int32(0)
        if n > 0:
            a = -n
        else:
            b = 2 * n
        return a, b

    generic_execute(lib, f, [num_gen])


class DataClass(object):
    def __init__(self, a, b):
        self.a = a
        self.b = b


@pytest.mark.parametrize("num_gen", NUM)
def test_complex_outputs(lib, num_gen):
    def f(n, obj):
        obj.a = np.int32(0)
        obj.b = np.int32(0)
        if n > 0:
            obj.a = -n
        else:
            obj.b = 2 * n
        return obj.a, obj.b

    generic_execute(lib, lambda input: f(input, DataClass(np.int32(0), np.int32(0))), [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_single_output(lib, num_gen):
    def f(n):
        if n > 0:
            n = -n
        return n

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_unbalanced(lib, num_gen):
    def f(n):
        if n > 0:
            n = np.int32(3)
        return n

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_local_var(lib, num_gen):
    def f(n):
        if n > 0:
            b = np.int32(4)
            n = b + 1
        return n

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_local_remains_local(lib, num_gen):
    def f(n):
        if n > 0:
            b = np.int32(4)
            n = b + 1
        return n

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_no_outputs(lib, num_gen):
    def f(n):
        if n > 0:
            b = np.int32(4)  # noqa: F841
        return n

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_created_outputs(lib, num_gen):
    def f(i):
        if i == 0:
            result = i - 1
        else:
            result = i + 1
        return result

    generic_execute(lib, f, [num_gen])


# Simple cases, where a new data node is produced in the branch


@pytest.mark.parametrize("num_gen", NUM)
def test_one_branch_new_node(lib, num_gen):
    def f(n):
        result = n * 0
        if n >= 0:
            result = n + 10
        return result

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_both_branches_new_node(lib, num_gen):
    def f(n):
        if n >= 0:
            result = n + 10
        else:
            result = n - 10
        return result

    generic_execute(lib, f, [num_gen])


@pytest.mark.parametrize("num_gen", NUM)
def test_chain_branches_new_node(lib, num_gen):
    def f(n):
        if n == 0:
            result = n + 10
        elif n > 0:
            result = n + 100
        else:
            result = n - 50
        return result

    generic_execute(lib, f, [num_gen])


# Only assignment in the branches, no new node: the use is detected otherwise than through
# operator inputs


@pytest.mark.parametrize("pred", PRED)
def test_one_branch_only_assign(lib, pred):
    def f(pred, base, true_branch):
        result = base
        if pred:
            result = true_branch
        return result

    generic_execute(lib, f, [pred, lambda _: np.int32(42), lambda _: np.int32(7)])


@pytest.mark.parametrize("pred", PRED)
def test_both_branches_only_assign(lib, pred):
    def f(pred, true_branch, false_branch):
        if pred:
            result = true_branch
        else:
            result = false_branch
        return result

    generic_execute(lib, f, [pred, lambda _: np.int32(6), lambda _: np.int32(9)])


@pytest.mark.parametrize("pred_1, pred_2", PRED2)
def test_chain_branches_only_assign(lib, pred_1, pred_2):
    def f(pred_1, pred_2, true_branch, elif_branch, else_branch):
        if pred_1:
            result = true_branch
        elif pred_2:
            result = elif_branch
        else:
            result = else_branch
        return result

    generic_execute(
        lib, f, [pred_1, pred_2, lambda _: np.int32(42), lambda _: np.int32(6), lambda _: np.int32(9)]
    )


# More ifs: sequences and nesting (DALI runs these with cpu and gpu input; CPU only here)


@pytest.mark.parametrize("pred_0, pred_1", PRED2)
def test_consecutive(lib, pred_0, pred_1):
    def f(input, pred_0, pred_1):
        if pred_0:
            output = input + 1
        else:
            output = input + 2

        if pred_1:
            output2 = output + 3
        else:
            output2 = output + 4
        return output, output2

    generic_execute(lib, f, [input_gen, pred_0, pred_1])


@pytest.mark.parametrize("pred_0, pred_1", PRED2)
def test_nested(lib, pred_0, pred_1):
    def f(input, pred_0, pred_1):
        if pred_0:
            if pred_1:
                output = input + 10
            else:
                output = input + 200
        else:
            output = input + 3000
        return output

    generic_execute(lib, f, [input_gen, pred_0, pred_1])


@pytest.mark.parametrize("pred_0, pred_1", PRED2)
def test_nested_with_assignment(lib, pred_0, pred_1):
    def f(input, pred_0, pred_1):
        to_assign = input * -5
        if pred_0:
            if pred_1:
                output = input + 10
            else:
                output = to_assign
        else:
            output = input + 3000
        return output

    generic_execute(lib, f, [input_gen, pred_0, pred_1])


@pytest.mark.parametrize("num", NUM)
def test_multiple_nests(lib, num):
    def f(input, num):
        if num == -2:
            if num == -1:
                if num == 0:
                    if num == 1:
                        if num == 2:
                            if num > 3:
                                output = input - 100
                            else:
                                output = input + 100
                        else:
                            output = input - 200
                    else:
                        output = input + 400
                else:
                    output = input - 800
            else:
                output = input + 1600
        else:
            output = input - 3200
        return output

    generic_execute(lib, f, [input_gen, num])


# Early return and constants returned in one branch (spec 1.7; not in DALI's test files)


@pytest.mark.parametrize("num_gen", NUM)
def test_early_return(lib, num_gen):
    def f(i):
        if i > 0:
            return i + 100
        j = i - 100
        return j

    generic_execute(lib, f, [num_gen])


def test_early_return_values(lib):
    @lib.pipeline_def(enable_conditionals=True, batch_size=6, num_threads=1, device_id=None)
    def pipe():
        i = lib.fn.external_source(source=lambda si: np.int32(si.idx_in_batch), batch=False)
        if i > 2:
            return i + 100
        j = i - 100
        return j

    (out,) = pipe().run()
    check_batch(out, [-100, -99, -98, 103, 104, 105])


@pytest.mark.parametrize("num_gen", NUM)
def test_return_constant_in_one_branch(lib, num_gen):
    def f(n):
        if n > 0:
            return 5
        else:
            return n * 2

    generic_execute(lib, f, [num_gen])


# Compare the `if` statement with the same operators run on the whole batch and a per-sample
# selection (DALI: with explicit fn._conditional.split/merge on reader + decoder output).

def _image_source(it):
    rng = np.random.default_rng(100 + it)
    return [rng.integers(0, 255, (6 + i % 3, 7 + i % 4, 3), dtype=np.uint8) for i in range(BS)]


def test_against_split_merge(lib):
    fn, types = lib.fn, lib.types
    kw = dict(KW, seed=42)

    @lib.pipeline_def(**kw)
    def regular_pipe():
        decoded = fn.external_source(source=_image_source, layout="HWC")
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL, seed=8)
        return fn.rotate(decoded, angle=30), fn.flip(decoded, horizontal=True), pred

    @lib.pipeline_def(enable_conditionals=True, **kw)
    def conditional_pipe():
        decoded = fn.external_source(source=_image_source, layout="HWC")
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL, seed=8)
        if pred:
            output = fn.rotate(decoded, angle=30)
        else:
            output = fn.flip(decoded, horizontal=True)
        return output

    p1, p2 = regular_pipe(), conditional_pipe()
    seen = set()
    for _ in range(ITERS):
        rot, flip, pred = (_samples(o) for o in p1.run())
        (out,) = p2.run()
        seen |= {bool(p) for p in pred}
        check_batch(out, [r if p else f for r, f, p in zip(rot, flip, pred)])
    assert seen == {True, False}


# An operator with no positional input but a DataNode argument input, created in a branch, is
# tracked in the branch (runs on the sub-batch). DALI: transforms.rotation(angle=dn).

def _shape_source(si):
    return np.array([si.idx_in_batch % 3 + 1], np.int32)


def _vec_source(si):
    return np.full((si.idx_in_batch % 3 + 1,), si.idx_in_epoch, np.float32)


def _pred_source(si):
    return np.array((si.idx_in_batch + si.iteration) % 3 == 0)


def test_arg_inputs_scoped_tracking(lib):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def global_pipe():
        x = fn.external_source(source=_vec_source, batch=False)
        shape = fn.external_source(source=_shape_source, batch=False)
        pred = fn.external_source(source=_pred_source, batch=False)
        zeros = fn.zeros(shape=shape, dtype=types.FLOAT)
        if pred:
            output = zeros - 1
        else:
            output = x
        return output

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def scoped_pipe():
        x = fn.external_source(source=_vec_source, batch=False)
        shape = fn.external_source(source=_shape_source, batch=False)
        pred = fn.external_source(source=_pred_source, batch=False)
        if pred:
            # no positional inputs, but an argument input produced outside the branch
            zeros = fn.zeros(shape=shape, dtype=types.FLOAT)
            output = zeros - 1
        else:
            output = x
        return output

    compare_pipelines(global_pipe(), scoped_pipe())
    p = scoped_pipe()
    for it in range(ITERS):
        (out,) = p.run()
        exp = []
        for i in range(BS):
            si = SampleInfo(it * BS + i, i, it, 0)
            exp.append(np.full(i % 3 + 1, -1, np.float32) if _pred_source(si) else _vec_source(si))
        check_batch(out, exp)


def test_arg_inputs_scoped_uninitialized(lib):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def scoped_pipe():
        x = fn.external_source(source=_vec_source, batch=False)
        shape = fn.external_source(source=_shape_source, batch=False)
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL)
        if pred:
            zeros_local = fn.zeros(shape=shape, dtype=types.FLOAT)
            output = x + zeros_local
        else:
            output = x
        # zeros_local is local to the branch: returning it is the uninitialized error
        return output, zeros_local

    with pytest.raises(
        RuntimeError,
        match=re.escape(INCONSISTENT + "Variable 'zeros_local' must also be initialized in the `else` branch."),
    ):
        scoped_pipe().run()


# Generators (operators without DataNode inputs) inside a branch run on the full batch, and the
# branch sees the samples at its positions. DALI: readers.caffe + random.uniform.

def _bytes_source(it):
    return [np.arange(i % 4 + 1, dtype=np.uint8) + 10 * it + i for i in range(BS)]


@pytest.mark.parametrize("pred", _params(pred_gens[:-1], "pred"))
def test_generators(lib, pred):
    fn, types = lib.fn, lib.types
    kw = dict(KW, seed=42)

    def pred_source(si):
        return pred(si)

    @lib.pipeline_def(**kw)
    def baseline_pipe():
        encoded = fn.external_source(source=_bytes_source)
        rand = fn.random.uniform(seed=11)
        predicate = fn.external_source(source=pred_source, batch=False)
        return encoded, rand, predicate

    @lib.pipeline_def(enable_conditionals=True, **kw)
    def conditional_pipe():
        predicate = fn.external_source(source=pred_source, batch=False)
        if predicate:
            encoded_out = fn.external_source(source=_bytes_source)
            rand_out = fn.random.uniform(seed=11)
        else:
            encoded_out = types.Constant(np.uint8([0]), device="cpu")
            rand_out = types.Constant(np.float32(0.0), device="cpu")
        return encoded_out, rand_out

    p1, p2 = baseline_pipe(), conditional_pipe()
    for _ in range(ITERS):
        encoded, rand, predicate = (_samples(o) for o in p1.run())
        enc_out, rand_out = p2.run()
        check_batch(enc_out, [e if p else np.uint8([0]) for e, p in zip(encoded, predicate)])
        check_batch(rand_out, [r if p else np.float32(0) for r, p in zip(rand, predicate)])
        assert _samples(rand_out)[0].dtype == np.float32


def test_uninitialized(lib):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def one_branch():
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL)
        if pred:
            output = fn.random.uniform()
        return output

    with pytest.raises(
        RuntimeError,
        match=re.escape(INCONSISTENT + "Variable 'output' must also be initialized in the `else` branch."),
    ):
        one_branch().run()

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def one_return():
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL)
        if pred:
            return fn.random.uniform()

    with pytest.raises(
        RuntimeError, match=re.escape(INCONSISTENT + "The `else` branch must also have a return statement.")
    ):
        one_return().run()

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def else_only():
        pred = fn.random.coin_flip(dtype=types.DALIDataType.BOOL)
        if pred:
            pass
        else:
            output = fn.random.uniform()
        return output

    with pytest.raises(
        RuntimeError,
        match=re.escape(INCONSISTENT + "Variable 'output' must also be initialized in the `if` branch."),
    ):
        else_only().run()


def test_error_condition_1d(lib):
    fn = lib.fn

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def non_scalar_condition():
        pred = fn.random.coin_flip(dtype=lib.types.DALIDataType.BOOL)
        stacked = fn.stack(pred, pred)
        if stacked:
            output = np.array(1)
        else:
            output = np.array(0)
        return output

    with pytest.raises(
        RuntimeError,
        match=re.escape(
            "Conditions inside `if` statements are restricted to scalar (0-d tensors) inputs, that are "
            "placed on CPU. Got a 1-d input as a condition of the `if` statement."
        ),
    ):
        non_scalar_condition().run()


boolable_types = [
    bool, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
    np.float16, np.float32, np.float64,
]
BOOLABLE = [pytest.param(t, id=np.dtype(t).name) for t in boolable_types]


@pytest.mark.parametrize("input_type", BOOLABLE)
def test_predicate_any_type(lib, input_type):
    fn, types = lib.fn, lib.types

    def get_truthy_falsy(sample_info):
        if sample_info.idx_in_batch < BS / 2:
            return np.array(7, dtype=input_type)
        else:
            return np.array(0, dtype=input_type)

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def non_bool_predicate():
        predicate = fn.external_source(source=get_truthy_falsy, batch=False)
        if predicate:
            output = types.Constant(np.array(42), device="cpu")
        else:
            output = types.Constant(np.array(0), device="cpu")
        return output

    (batch,) = non_bool_predicate().run()
    check_batch(batch, [42 if i < BS / 2 else 0 for i in range(BS)])


def test_float_predicate(lib):
    """Non-zero floats of either sign are True (spec 1.3)."""
    vals = [0.25, -0.25, 0.0, 1e-3, -0.0, 3.0]

    @lib.pipeline_def(enable_conditionals=True, batch_size=len(vals), num_threads=1, device_id=None)
    def pipe():
        p = lib.fn.external_source(source=lambda si: np.float32(vals[si.idx_in_batch]), batch=False)
        if p:
            out = np.int32(1)
        else:
            out = np.int32(0)
        return out

    (out,) = pipe().run()
    check_batch(out, [1, 1, 0, 1, 0, 1])


BOOL_ERROR = re.escape('"DataNode" was used in conditional context') + r"(.|\n)*" + re.escape(
    "To use conditional execution via `if` statements you need to specify `enable_conditionals=True`"
)


def test_data_node_if_error(lib):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(enable_conditionals=False, **KW)
    def pipeline():
        predicate = fn.random.coin_flip()
        if predicate:
            output = types.Constant(np.array(42), device="cpu")
        else:
            output = types.Constant(np.array(0), device="cpu")
        return output

    with pytest.raises(TypeError, match=BOOL_ERROR):
        pipeline().run()


def test_sanity_enable_conditionals(lib):
    fn, types = lib.fn, lib.types

    def body(a, b):
        predicate = fn.random.coin_flip()
        if predicate:
            output = types.Constant(np.array(a), device="cpu")
        else:
            output = types.Constant(np.array(b), device="cpu")
        return output

    # no-parenthesis decorator, flag given at call time
    pipeline = lib.pipeline_def(body)

    pipe = pipeline(10, enable_conditionals=True, b=4, **KW)
    seen = set()
    for _ in range(ITERS):
        (out,) = pipe.run()
        seen |= {int(s) for s in _samples(out)}
    assert seen == {4, 10}

    # the call-time value wins over the decorator's
    with pytest.raises(TypeError, match=BOOL_ERROR):
        pipeline(10, enable_conditionals=False, b=4, **KW)

    enabled = lib.pipeline_def(enable_conditionals=True)(body)
    with pytest.raises(TypeError, match=BOOL_ERROR):
        enabled(10, 4, enable_conditionals=False, **KW)


def throwing_helper():
    raise ValueError("I am throwing")


def test_exception_explanation(lib):
    fn = lib.fn

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def throwing_pipeline():
        if fn.random.coin_flip():
            x = np.full((1, 1), 10)
        else:
            x = throwing_helper()
        return x

    # the error message contains the user code from before the autograph translation
    with pytest.raises(
        ValueError, match=r"(?s)in user code.*in throwing_pipeline.*in throwing_helper.*ValueError: I am throwing"
    ):
        throwing_pipeline()


def test_pipeline_def_with_do_not_convert(lib):
    do_not_convert = lib.pipeline.do_not_convert
    msg = re.escape("Pipeline definition cannot be marked with @do_not_convert.")
    with pytest.raises(ValueError, match=msg):

        @lib.pipeline_def
        @do_not_convert
        def dnc_then_def_pipe():
            return 42

    with pytest.raises(ValueError, match=msg):

        @do_not_convert
        @lib.pipeline_def
        def def_then_dnc_pipe():
            return 42


def test_python_function_conditionals(lib):
    fn, types = lib.fn, lib.types
    bs = 8

    @lib.pipeline_def(
        batch_size=bs, num_threads=1, device_id=None, exec_async=False, exec_pipelined=False,
        enable_conditionals=True,
    )
    def py_fun_pipeline():
        predicate = fn.external_source(source=lambda si: np.array(si.idx_in_batch < bs / 2), batch=False)
        if predicate:
            out1, out2 = fn.python_function(
                predicate, num_outputs=2, function=lambda _: (np.array(42), np.array(10))
            )
        else:
            out1 = fn.python_function(function=lambda: np.array(0))
            out2 = types.Constant(np.array(0), device="cpu", dtype=types.INT64)
        return out1, out2

    pipe = py_fun_pipeline()
    for _ in range(2):
        out1, out2 = pipe.run()
        check_batch(out1, [42 if i < bs / 2 else 0 for i in range(bs)])
        check_batch(out2, [10 if i < bs / 2 else 0 for i in range(bs)])


# =========================================================================== test_nests


def _parity(si):
    return np.array(si.idx_in_batch % 2)


def test_dicts(lib):
    fn, types = lib.fn, lib.types
    kw = dict(enable_conditionals=True, num_threads=1, batch_size=8, device_id=None)

    @lib.pipeline_def(**kw)
    def pipeline():
        pred = fn.external_source(source=_parity, batch=False)
        if pred:
            out = {"out": np.array(2)}
        else:
            out = {"out": np.array(1)}
        return out["out"]

    (out,) = pipeline().run()
    check_batch(out, [i % 2 + 1 for i in range(8)])

    @lib.pipeline_def(**kw)
    def pipeline_op():
        pred = fn.external_source(source=_parity, batch=False)
        data = types.Constant(np.array(42), device="cpu")
        if pred:
            out = {"out": data - 1}
        else:
            out = {"out": data + 1}
        return out["out"]

    (out,) = pipeline_op().run()
    check_batch(out, [41 if i % 2 else 43 for i in range(8)])


def test_tuples(lib):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(enable_conditionals=True, num_threads=1, batch_size=8, device_id=None)
    def pipeline():
        pred = fn.external_source(source=_parity, batch=False)
        data = types.Constant(np.array(42), device="cpu")
        if pred:
            out = (data, data + 10, data + 20)
        else:
            out = (np.array(-10), data, data * 2)
        a, b, c = out
        return a, b, c

    a, b, c = pipeline().run()
    check_batch(a, [42 if i % 2 else -10 for i in range(8)])
    check_batch(b, [52 if i % 2 else 42 for i in range(8)])
    check_batch(c, [62 if i % 2 else 84 for i in range(8)])


def test_nesting_error(lib):
    fn = lib.fn

    @lib.pipeline_def(enable_conditionals=True, num_threads=1, batch_size=8, device_id=None)
    def pipeline():
        pred = fn.external_source(source=_parity, batch=False)
        if pred:
            out = {"out": np.array(2), "mismatched": np.array(9999)}
        else:
            out = {"out": np.array(1)}
        return out

    with pytest.raises(
        ValueError,
        match=re.escape(
            "Divergent data found in different branches of `if/else` control flow statement. Variables "
            "in all code paths are merged into common output batches. The values assigned to a given "
            "variable need to have the same nesting structure in every code path (both `if` branches)."
        )
        + r"(.|\n)*"
        + re.escape("'Else' output structure: ({'out': '*'},)"),
    ):
        pipeline()


# =========================================================================== test_logical_expressions
LKW = dict(KW, seed=42)


def _coin(lib, seed):
    return lib.fn.random.coin_flip(dtype=lib.types.DALIDataType.BOOL, seed=seed)


def test_not(lib):
    @lib.pipeline_def(**LKW)
    def regular_pipe():
        boolean_input = _coin(lib, 42)
        return boolean_input == 0

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def not_pipe():
        boolean_input = _coin(lib, 42)
        return not boolean_input

    compare_pipelines(regular_pipe(), not_pipe())


def _consts(lib):
    const_F = lib.types.Constant(np.array(False), device="cpu")
    const_T = lib.types.Constant(np.array(True), device="cpu")
    return const_F, const_T


def test_and(lib):
    @lib.pipeline_def(**LKW)
    def regular_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        const_F, const_T = _consts(lib)
        return b0 & b1, b0 & const_F, const_T & b1

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def and_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        const_F, const_T = _consts(lib)
        return b0 and b1, b0 and const_F, const_T and b1

    compare_pipelines(regular_pipe(), and_pipe())


def test_or(lib):
    @lib.pipeline_def(**LKW)
    def regular_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        const_F, const_T = _consts(lib)
        return b0 | b1, b0 | const_F, const_T | b1

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def or_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        const_F, const_T = _consts(lib)
        return b0 or b1, b0 or const_F, const_T or b1

    compare_pipelines(regular_pipe(), or_pipe())


def test_complex_expression(lib):
    @lib.pipeline_def(**LKW)
    def regular_pipe():
        b0, b1, b2, b3 = _coin(lib, 6), _coin(lib, 9), _coin(lib, 12), _coin(lib, 15)
        return (b0 | (b1 & b2)) | (b3 == 0)

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def expr_pipe():
        b0, b1, b2, b3 = _coin(lib, 6), _coin(lib, 9), _coin(lib, 12), _coin(lib, 15)
        return b0 or b1 and b2 or not b3

    compare_pipelines(regular_pipe(), expr_pipe())


def test_lazy_eval(lib):
    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def if_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        if b0:
            val = b1 == False  # noqa: E712
        else:
            val = b0
        return val

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def expr_pipe():
        b0, b1 = _coin(lib, 6), _coin(lib, 9)
        val = b0 and b1 == False  # noqa: E712
        return val

    compare_pipelines(if_pipe(), expr_pipe())


def test_lazy_eval_with_oob(lib):
    types = lib.types

    @lib.pipeline_def(enable_conditionals=True, **LKW)
    def expr_pipe():
        boolean_tensor_input = types.Constant(np.bool_([True, True, False]), device="cpu")
        # an out-of-bounds access in the right subexpression, which is never evaluated
        # (DALI indexes with DataNode constants; plain ints here)
        val = boolean_tensor_input[1] or boolean_tensor_input[42]
        return val

    p = expr_pipe()
    for _ in range(ITERS):
        (out,) = p.run()
        check_batch(out, [True] * BS)
        assert _samples(out)[0].dtype == np.bool_


def logical_true_false_random(lib):
    """An external source giving [True, False, <random booleans>], so that no part of the
    expression is fully short-cut."""
    rng = np.random.default_rng(seed=101)

    def get_true_false_random(sample_info):
        if sample_info.idx_in_batch == 0:
            return np.array(True)
        elif sample_info.idx_in_batch == 1:
            return np.array(False)
        else:
            return rng.choice([np.array(True), np.array(False)])

    return lib.fn.external_source(source=get_true_false_random, batch=False)


_SCALAR_BOOL = "is restricted to scalar (0-d tensors) inputs of `bool` type, that are placed on CPU. "
ERROR_1D = [
    pytest.param(
        lambda lib, x: not x,
        "Logical expression `not` is restricted to scalar (0-d tensors) inputs, that are placed on CPU. "
        "Got a 1-d input in logical expression.",
        id="not",
    ),
    pytest.param(
        lambda lib, x: x and logical_true_false_random(lib),
        "Logical expression `and` " + _SCALAR_BOOL + "Got a 1-d input as the left argument in logical expression.",
        id="x_and",
    ),
    pytest.param(
        lambda lib, x: logical_true_false_random(lib) and x,
        "Logical expression `and` " + _SCALAR_BOOL + "Got a 1-d input as the right argument in logical expression.",
        id="and_x",
    ),
    pytest.param(
        lambda lib, x: x or logical_true_false_random(lib),
        "Logical expression `or` " + _SCALAR_BOOL + "Got a 1-d input as the left argument in logical expression.",
        id="x_or",
    ),
    pytest.param(
        lambda lib, x: logical_true_false_random(lib) or x,
        "Logical expression `or` " + _SCALAR_BOOL + "Got a 1-d input as the right argument in logical expression.",
        id="or_x",
    ),
]


@pytest.mark.parametrize("expression, message", ERROR_1D)
def test_error_input_1d(lib, expression, message):
    @lib.pipeline_def(enable_conditionals=True, **KW)
    def non_scalar_input():
        pred = lib.fn.random.coin_flip(dtype=lib.types.DALIDataType.BOOL)
        stacked = lib.fn.stack(pred, pred)
        return expression(lib, stacked)

    with pytest.raises(RuntimeError, match=re.escape(message)):
        non_scalar_input().run()


NON_BOOL = [
    pytest.param(lambda lib, x: x and logical_true_false_random(lib), "`and`", "left", id="x_and"),
    pytest.param(lambda lib, x: logical_true_false_random(lib) and x, "`and`", "right", id="and_x"),
    pytest.param(lambda lib, x: x or logical_true_false_random(lib), "`or`", "left", id="x_or"),
    pytest.param(lambda lib, x: logical_true_false_random(lib) or x, "`or`", "right", id="or_x"),
]


@pytest.mark.parametrize("expression, name, side", NON_BOOL)
def test_non_boolean_input_error(lib, expression, name, side):
    @lib.pipeline_def(enable_conditionals=True, **KW)
    def non_bool_input():
        input = lib.fn.random.coin_flip(dtype=lib.types.DALIDataType.INT32)
        return expression(lib, input)

    msg = (
        f"Logical expression {name} " + _SCALAR_BOOL
        + f"Got an input of type `int32` as the {side} argument in logical expression."
    )
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        non_bool_input().run()


@pytest.mark.parametrize("input_type", BOOLABLE)
def test_not_any_type(lib, input_type):
    def get_truthy_falsy(sample_info):
        if sample_info.idx_in_batch < BS / 2:
            return np.array(42, dtype=input_type)
        else:
            return np.array(0, dtype=input_type)

    @lib.pipeline_def(enable_conditionals=True, **KW)
    def non_bool_input():
        input = lib.fn.external_source(source=get_truthy_falsy, batch=False)
        return not input

    (batch,) = non_bool_input().run()
    check_batch(batch, [False if i < BS / 2 else True for i in range(BS)])
    assert _samples(batch)[0].dtype == np.bool_


# =========================================================================== test_external_source
# Sources defined locally in the pipeline, or made by a converted factory, are AutoGraph
# artifacts: fine for a plain external source, refused by a parallel one. A factory marked
# @do_not_convert makes sources a parallel external source accepts.

ES_KW = dict(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True, py_start_method="spawn")
UNCONVERTED = re.escape(
    "The `source` parameter that was passed to external source was created in a scope that was "
    "converted with AutoGraph. To allow the `source` to be correctly used with parallel external "
    "source, it must remain unconverted."
)


def es_with_local_source(lib, parallel=False):
    @lib.pipeline_def(**ES_KW)
    def pipe_with_local():
        def source_local(si):
            return np.full((2,), 1)

        return lib.fn.external_source(source=source_local, parallel=parallel, batch=False)

    (out,) = pipe_with_local().run()
    check_batch(out, [np.full((2,), 1)] * 4)


def es_with_nonlocal_converted_source(lib, parallel=False):
    def source_factory(size):
        def source_in_factory(si):
            return np.full(size, 10)

        return source_in_factory

    @lib.pipeline_def(**ES_KW)
    def pipe_with_converted_factory():
        source = source_factory((3,))
        return lib.fn.external_source(source=source, parallel=parallel, batch=False)

    (out,) = pipe_with_converted_factory().run()
    check_batch(out, [np.full((3,), 10)] * 4)


def es_with_nonlocal_not_converted_source(lib, parallel=False):
    @lib.pipeline.do_not_convert
    def source_factory(size):
        def source_in_factory(si):
            return np.full(size, 10)

        return source_in_factory

    @lib.pipeline_def(**ES_KW)
    def pipe_with_not_converted_factory():
        source = source_factory((3,))
        return lib.fn.external_source(source=source, parallel=parallel, batch=False)

    (out,) = pipe_with_not_converted_factory().run()
    check_batch(out, [np.full((3,), 10)] * 4)


def test_es_with_converted_sources(lib):
    es_with_local_source(lib)
    es_with_nonlocal_converted_source(lib)


def test_parallel_es_with_local_source(lib):
    with pytest.raises(ValueError, match=UNCONVERTED):
        es_with_local_source(lib, parallel=True)


def test_parallel_es_with_nonlocal_source(lib):
    with pytest.raises(ValueError, match=UNCONVERTED):
        es_with_nonlocal_converted_source(lib, parallel=True)


def test_es_with_not_converted_source(lib):
    es_with_nonlocal_not_converted_source(lib)


def test_parallel_es_with_not_converted_callback(lib):
    es_with_nonlocal_not_converted_source(lib, parallel=True)


# ----------------------------------------------------------------------------- batch permutations
# test_simple_batch_permute and test_batch_permutation of DALI's test_pipeline_conditionals.py:
# fn.batch_permutation inside a branch permutes the branch's samples only.


@pytest.mark.parametrize("batch_size, permute_prefix", [(32, 0), (32, 1), (32, 7), (32, 16), (32, 31), (32, 32)])
def test_simple_batch_permute(lib, batch_size, permute_prefix):
    fn = lib.fn

    @lib.pipeline_def(batch_size=batch_size, device_id=None, num_threads=2, enable_conditionals=True)
    def pipeline():
        sample_idx = fn.external_source(lambda sample_info: np.array(sample_info.idx_in_batch, dtype=np.int32),
                                        batch=False)
        if sample_idx < permute_prefix:
            sample_idx = fn.batch_permutation()
        return sample_idx

    p = pipeline()
    for _ in range(3):
        (sample_indices,) = p.run()
        sample_indices = [np.array(sample).item() for sample in sample_indices]
        assert sorted(sample_indices[:permute_prefix]) == list(range(permute_prefix))
        assert sample_indices[permute_prefix:] == list(range(permute_prefix, batch_size))


@pytest.mark.parametrize("batch_size, num_split_level", [(7, 1), (1, 1), (16, 2), (16, 3), (101, 3)])
def test_batch_permutation(lib, batch_size, num_split_level):
    fn = lib.fn

    def split_and_permute(batch, num_levels, group=0):
        assert num_levels >= 0
        if num_levels == 0:
            return fn.permute_batch(batch, indices=fn.batch_permutation()), group
        else:
            if fn.random.coin_flip():
                return split_and_permute(batch, num_levels - 1, group)
            else:
                return split_and_permute(batch, num_levels - 1, group + 2 ** (num_levels - 1))

    @lib.pipeline_def(batch_size=batch_size, device_id=None, num_threads=2, enable_conditionals=True)
    def pipeline():
        sample_idx = fn.external_source(lambda sample_info: np.array(sample_info.idx_in_batch), batch=False)
        sample_idx, group = split_and_permute(sample_idx, num_split_level)
        return sample_idx, group

    p = pipeline()
    for _ in range(3):
        sample_indices, groups = p.run()
        sample_idx = [np.array(sample).item() for sample in sample_indices]
        group = [np.array(sample).item() for sample in groups]
        found = {i: ([], []) for i in range(2**num_split_level)}
        for group_idx in range(batch_size):
            got, expected = found[group[group_idx]]
            got.append(sample_idx[group_idx])
            expected.append(group_idx)
        for group_idx, (got, expected) in found.items():
            assert sorted(got) == expected, f"{group_idx}: {got} vs {expected}"


def test_permute_batch_with_a_list_and_per_sample_indices(lib):
    fn = lib.fn

    @lib.pipeline_def(batch_size=5, device_id=None, num_threads=2)
    def pipeline():
        x = fn.external_source(lambda info: np.full((info.idx_in_batch + 1,), info.idx_in_batch, np.int32), batch=False)
        idx = fn.external_source(lambda info: np.int32((info.idx_in_batch * 2) % 5), batch=False)
        return fn.permute_batch(x, indices=[4, 4, 0, 1, 3]), fn.permute_batch(x, indices=idx)

    a, b = pipeline().run()
    assert [np.array(s).tolist() for s in a] == [[4] * 5, [4] * 5, [0], [1, 1], [3] * 4]
    assert [int(np.array(s)[0]) for s in b] == [0, 2, 4, 1, 3]


def _halving_pick(idx, lo, hi, leaves):
    """A recursive helper with a DataNode `if` (as auto_aug's `select`): it calls itself by
    its global name, which conversion must leave global."""
    if lo == hi:
        return leaves[lo]
    mid = (lo + hi) // 2
    if idx <= mid:
        return _halving_pick(idx, lo, mid, leaves)
    else:
        return _halving_pick(idx, mid + 1, hi, leaves)


def test_recursive_helper_and_loop_local_variable(lib):
    """A recursive converted helper works, and a variable an `if` inside a loop assigns
    before reading it (local to one iteration) need not be defined in the other branch:
    both as in DALI (auto_aug's select and apply_auto_augment rely on them)."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=8, device_id=None, num_threads=2, enable_conditionals=True)
    def pipeline():
        idx = fn.external_source(lambda info: np.int32(info.idx_in_batch % 5), batch=False)
        data = fn.external_source(lambda info: np.float32(info.idx_in_batch), batch=False)
        for stage in range(2):
            if idx > stage:
                step = data * 10 + stage
                data = step + 1
        picked = _halving_pick(idx, 0, 4, [types.Constant(np.float32(v * 100)) + data for v in range(5)])
        return data, picked

    data, picked = pipeline().run()
    for i, (d, p) in enumerate(zip(data, picked)):
        expected = float(i)
        for stage in range(2):
            if i % 5 > stage:
                expected = expected * 10 + stage + 1
        assert float(np.array(d)) == expected
        assert float(np.array(p)) == (i % 5) * 100 + expected


# test_multiple_input_source of DALI's test_pipeline_conditionals.py: multiple input sets
# (`fn.copy([a, b])`) inside a branch.
def test_multiple_input_source(lib):
    fn, types = lib.fn, lib.types
    batch_size = 16

    @lib.pipeline_def(batch_size=batch_size, device_id=None, num_threads=4, enable_conditionals=True)
    def pipeline():
        sample_idx = fn.external_source(lambda sample_info: np.array(sample_info.idx_in_batch, dtype=np.int32), batch=False)
        const_42 = types.Constant(np.uint8([42]), device="cpu")
        if sample_idx < batch_size / 2:
            out_42_scoped, out_idx_scoped = fn.copy([const_42 + types.Constant(0, dtype=types.UINT8), sample_idx])
        else:
            out_42_scoped = types.Constant(np.uint8([0]), device="cpu")
            out_idx_scoped = types.Constant(np.int32(0), device="cpu")
        return out_42_scoped, out_idx_scoped

    pipe = pipeline()
    for _ in range(4):
        out_42, out_idx = pipe.run()
        check_batch(out_42, [[42] if i < (batch_size / 2) else [0] for i in range(batch_size)])
        check_batch(out_idx, [i if i < (batch_size / 2) else 0 for i in range(batch_size)])


# test_select_impls of DALI's conditionals/test_nests.py: a recursive select whose branches
# return tuples (ops with two outputs), unpacked or forwarded whole. DALI's test only runs
# the pipelines; here the outputs are also checked: a rotated or a greyed image per sample.
def test_select_impls(lib):
    fn, types = lib.fn, lib.types

    def _select_fwd(lo, hi, ops, idx, op_args, op_kwargs):
        assert lo <= hi
        if lo == hi:
            return ops[lo](*op_args, **op_kwargs)
        mid = (lo + hi) // 2
        if idx <= mid:
            ret = _select_fwd(lo, mid, ops, idx, op_args, op_kwargs)
        else:
            ret = _select_fwd(mid + 1, hi, ops, idx, op_args, op_kwargs)
        return ret

    def _select_unpack(lo, hi, ops, idx, op_args, op_kwargs):
        assert lo <= hi
        if lo == hi:
            return ops[lo](*op_args, **op_kwargs)
        mid = (lo + hi) // 2
        if idx <= mid:
            a, b = _select_unpack(lo, mid, ops, idx, op_args, op_kwargs)
        else:
            a, b = _select_unpack(mid + 1, hi, ops, idx, op_args, op_kwargs)
        return a, b

    def select(ops, idx, *op_args, unpacking_select=False, **op_kwargs):
        if unpacking_select:
            return _select_unpack(0, len(ops) - 1, ops, idx, op_args, op_kwargs)
        return _select_fwd(0, len(ops) - 1, ops, idx, op_args, op_kwargs)

    def rotate(image, label):
        return fn.rotate(image, angle=42), label

    def color(image, label):
        return fn.color_twist(image, saturation=0), label

    @lib.pipeline_def(enable_conditionals=True, num_threads=4, batch_size=8, device_id=None, seed=5)
    def pipeline(unpacking_select):
        image = types.Constant(np.full((200, 300, 3), 42, dtype=np.uint8), device="cpu")
        label = types.Constant(np.array(1), device="cpu")
        ops = [rotate, color]
        op_idx = fn.random.uniform(values=list(range(len(ops))))
        image, label = select(ops, op_idx, image=image, label=label, unpacking_select=unpacking_select)
        return image, label, op_idx

    for unpacking in (True, False):
        images, labels, picks = pipeline(unpacking_select=unpacking).run()
        check_batch(labels, [1] * 8)
        for i, (img, pick) in enumerate(zip(_samples(images), _samples(picks))):
            if int(pick) == 0:  # rotated by 42 degrees onto a larger canvas, corners filled
                assert img.shape[:2] != (200, 300) and img.max() == 42, f"sample {i}: {img.shape}"
            else:  # saturation 0 of a grey image keeps it
                assert img.shape == (200, 300, 3) and (img == 42).all(), f"sample {i}"
