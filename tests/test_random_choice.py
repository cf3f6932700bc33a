"""`fn.random.choice` against DALI 2.4, every form DALI accepts: `a` a scalar n (any integer
type: range(n) of that type) or an array whose elements along the first axis are picked (any
type, elements of any shape: arrays of arrays); the leading output shape from `shape` (a
constant, a scalar or a per-sample argument input) or from a second `shape_like` input; `p`
as a constant list, a single broadcast value or a per-sample argument input. DALI's
test_random_choice.py is ported (its `check_sample` compares frequencies with a chi-square
bound of our own, without SciPy) and every body runs on Sluice and on DALI 2.4: the streams
differ, the sets of values, shapes, types, layouts and distributions must not.

Known differences, not tested on Sluice: DALI's enum types (a list of `DALIInterpType` is
INTERP_TYPE in DALI, INT32 in Sluice, which has no enum tensors), and `fn.resize`'s
`interp_type` as an argument input."""

import fnmatch
import re

import numpy as np
import pytest

import sluice
from sluice import fn, types

from conftest import library_params

LIBS = library_params()


def _pipe(lib, batch_size, num_threads=4, seed=1234):
    return lib.pipeline.Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=seed)


def _chi2_ok(counts, probs):
    """Chi-square of `counts` against `probs`, below the distribution's mean + 5 standard
    deviations (df + 5 sqrt(2 df)): a false alarm far below 1 in 10^4, no SciPy."""
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() * np.asarray(probs, np.float64)
    stat = ((counts - expected) ** 2 / expected).sum()
    df = len(counts) - 1
    return stat < df + 5 * np.sqrt(2 * df), stat


def check_sample(sample, a, p, idx):
    """DALI's check_sample: every value of `a` occurs and nothing else; the frequencies of
    the picked elements match `p` (uniform when None)."""
    if a.shape == ():
        values = np.arange(int(a))
        picks = sample.ravel()
    else:
        values = a.reshape(a.shape[0], -1)[:, 0]  # each element is filled with one value
        picks = sample.reshape(-1, *a.shape[1:]).reshape(-1, max(1, int(np.prod(a.shape[1:]))))[:, 0]
        # an element is picked whole: all its values are the same
        assert (sample.reshape(-1, *a.shape[1:]) == picks.reshape(-1, *([1] * (a.ndim - 1)))).all()
    assert set(picks.tolist()) == set(values.tolist()), f"sample {idx}: {set(picks.tolist())} != {set(values.tolist())}"
    counts = np.array([(picks == v).sum() for v in values])
    probs = np.full(len(values), 1 / len(values)) if p is None else p
    ok, stat = _chi2_ok(counts, probs)
    assert ok, f"sample {idx}: chi-square {stat}, counts {counts}, p {probs}"


DIST_CASES = [
    *[(k, (), use_p, shape, False) for k in ("scalar", "0d") for use_p in (True, False) for shape in (None, (), (1000,), (500, 4))],
    *[("scalar", (), True, shape, True) for shape in ((), (1000,), (500, 4))],
    *[("nd", elem, use_p, shape, like) for elem in ((2,), (2, 2)) for use_p in (True, False)
      for shape in (None, (), (1000,), (500, 4)) for like in (True, False)],
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("kind,elem_shape,use_p,output_shape,shape_like", DIST_CASES)
def test_choice_dist(lib, kind, elem_shape, use_p, output_shape, shape_like):
    """DALI's test_choice_dist: sample i chooses among i + 5 elements (a scalar n, a list of
    values, or a list of n-d elements), p proportional to the index (an argument input), the
    shape from `shape` or from a constant `shape_like` input."""
    sampling_offset, batch_size = 5, 8
    n_iters = 1000 if output_shape in (None, ()) else 5

    def get_p(n):
        return np.array([(i + 1) / (n * (n + 1) / 2) for i in range(n)], dtype=np.float32)

    def inp(sample_info):
        n = sample_info.idx_in_batch + sampling_offset
        if kind == "scalar":
            return np.array(n), get_p(n)
        if kind == "0d":
            return np.arange(sampling_offset, n + sampling_offset), get_p(n)
        return np.stack([np.full(elem_shape, i) for i in range(n)]), get_p(n)

    pipe = _pipe(lib, batch_size)
    with pipe:
        a, p = lib.fn.external_source(inp, batch=False, num_outputs=2)
        if not shape_like:
            choice = lib.fn.random.choice(a, p=p if use_p else None, shape=output_shape)
        else:
            # DALI's test passes np.full(output_shape, 42); NumPy no longer takes None for ().
            choice = lib.fn.random.choice(a, np.full(output_shape or (), 42), p=p if use_p else None)
        pipe.set_outputs(choice, a, p)
    pipe.build()
    want_shape = (output_shape or ()) + elem_shape
    choices = [[] for _ in range(batch_size)]
    for _ in range(n_iters):
        ch, a_out, p_out = pipe.run()
        assert ch.dtype == a_out.dtype
        for i in range(batch_size):
            x = np.array(ch.at(i))
            assert x.shape == want_shape
            choices[i].append(x)
    for i in range(batch_size):
        check_sample(np.stack(choices[i]), np.array(a_out.at(i)), np.array(p_out.at(i)) if use_p else None, i)


@pytest.mark.parametrize("lib", LIBS)
def test_choice_0_prob(lib):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.random.choice(2, p=[0.0, 1.0], shape=10))
    pipe.build()
    for _ in range(3):
        (out,) = pipe.run()
        for i in range(2):
            assert (np.array(out.at(i)) == np.full(10, 1)).all()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("a,expected,p", [(1, np.array(0), 1.0), (1, np.array(0), None), (np.array([7]), np.array(7), 1.0), (np.array([7]), np.array(7), None)])
def test_choice_1_elem(lib, a, expected, p):
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.random.choice(a, p=p))
    pipe.build()
    for _ in range(3):
        (out,) = pipe.run()
        for i in range(2):
            assert (np.array(out.at(i)) == expected).all()


@pytest.mark.parametrize("lib", LIBS)
def test_choice_64_bit_type(lib):
    """A scalar n of 2^40 (INT64): picks in range(2^40), INT64 out."""
    pipe = _pipe(lib, 2)
    with pipe:
        a = lib.fn.external_source(lambda: np.array(1 << 40, dtype=np.int64), batch=False)
        pipe.set_outputs(lib.fn.random.choice(a, shape=[64]))
    pipe.build()
    for _ in range(3):
        (out,) = pipe.run()
        assert out.dtype == lib.types.INT64
        for i in range(2):
            x = np.array(out.at(i))
            assert ((0 <= x) & (x < (1 << 40))).all()
            assert x.max() > 1 << 32  # the high bits are drawn too


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("a,in_layout,expected,shape", [
    (np.arange(3), "N", "N", 10),
    (np.arange(3), "N", "", None),
    (np.full((2, 3), 4), "NS", "S", None),
    (np.full((2, 3), 4), "NS", "NS", 5),
    (np.full((2, 3), 4), "NS", "", (1, 2)),
    (np.full((2, 3, 4), 4), "NSC", "SC", None),
    (np.full((2, 3), 4), "", "", None),
])
def test_layout(lib, a, in_layout, expected, shape):
    """DALI's rule: the input's layout when the output has as many dimensions, without its
    first letter when one fewer, else none."""
    pipe = _pipe(lib, 2)
    with pipe:
        x = lib.fn.external_source(lambda: a, batch=False, layout=in_layout or None)
        pipe.set_outputs(lib.fn.random.choice(x, shape=shape))
    pipe.build()
    for _ in range(3):
        (out,) = pipe.run()
        assert out.layout() == expected


# (args, kwargs, DALI's glob, Sluice's pattern; None: DALI only)
VALIDATION = [
    ((1,), {"p": 1.5}, "Probabilities must be in range *, but got: 1.5 for sample: 0 at index 0.",
     r"'p'.*each probability must be >= 0 and <= 1, got 1.5 at index 0"),
    ((2,), {"p": 0.25}, "Sum of probabilities must be 1.0, but got 0.5 for sample: 0.",
     r"'p'.*probabilities must sum to 1, got 0.5.*sample 0"),
    ((-5,), {}, "Expected positive number of elements for sampling, got: -5 for sample: 0.",
     r"'a'.*must be >= 1; sample 0 has -5"),
    ((0,), {}, "Expected positive number of elements for sampling, got: 0 for sample: 0.",
     r"'a'.*must be >= 1; sample 0 has 0"),
    ((5.0,), {}, "Data type float is not supported for 0D inputs. Supported types are: "
     "uint8, uint16, uint32, uint64, int8, int16, int32, int64", r"'a'.*integer type.*FLOAT in sample 0"),
    ("INTERP_CUBIC", {}, "Data type DALIInterpType is not supported for 0D inputs. Supported types are: "
     "uint8, uint16, uint32, uint64, int8, int16, int32, int64", None),
    ((5,), {"p": np.array([0.25, 0.5, 0.25])}, 'Unexpected shape for argument "p". Expected {5}, but got {3}',
     r"'p'.*sample 0 has 3 probabilities but `a` has 5 elements"),
    # not in DALI's test
    ((3,), {"p": [0.5, 0.6, -0.1]}, "Probabilities must be in range *, but got: -0.1 for sample: 0 at index 2.",
     r"'p'.*each probability must be >= 0 and <= 1, got -0.1 at index 2"),
    ((3,), {"p": [0.3, 0.3, 0.3]}, "Sum of probabilities must be 1.0, but got 0.9", r"'p'.*probabilities must sum to 1, got 0\.(9|8999)"),
    ((3,), {"p": [0.5, 0.5]}, 'Argument "p" expected shape 3 but got 2', r"'p'.*sample 0 has 2 probabilities but `a` has 3 elements"),
    ((5, np.zeros(3)), {"shape": 3}, 'Providing argument "shape" is incompatible with providing a shape-like input',
     r"'shape'.*incompatible with providing a shape-like input"),
    ((np.zeros((0,), np.int32),), {}, "Expected positive number of elements for sampling, got: 0", r"'a'.*sample 0 has nothing to choose from"),
    ((5,), {"shape": [-1]}, "less than zero", r"'shape'.*>= 0"),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("args,kwargs,ref_glob,own_pattern", VALIDATION)
def test_choice_validation(lib, args, kwargs, ref_glob, own_pattern):
    """DALI's test_choice_validation: a RuntimeError with DALI's message from DALI, one naming
    the operator and the argument from Sluice."""
    if lib is sluice:
        if own_pattern is None:
            pytest.skip("DALI's enum types are INT32 in Sluice")
        pattern = re.compile(r"(?s)random\.choice: argument " + own_pattern)
    else:
        pattern = re.compile(fnmatch.translate(ref_glob).removesuffix(r"\Z"), re.IGNORECASE)
    if args == "INTERP_CUBIC":  # the library's own enum: a Python IntEnum is only an int to DALI
        args = (lib.types.DALIInterpType.INTERP_CUBIC,)
    with pytest.raises(RuntimeError, match=pattern):
        pipe = _pipe(lib, 1)
        with pipe:
            pipe.set_outputs(lib.fn.random.choice(*args, **kwargs))
        pipe.build()
        pipe.run()


@pytest.mark.parametrize("lib", LIBS)
def test_enum_choice(lib):
    """DALI's test_enum_choice without its `fn.resize(interp_type=interp[0])` (see the module
    docstring): the values picked, as INT32, are the enum's, uniformly."""
    batch_size = 8
    interps = [types.DALIInterpType.INTERP_LINEAR, types.DALIInterpType.INTERP_CUBIC]
    pipe = _pipe(lib, batch_size)
    with pipe:
        interp = lib.fn.random.choice([getattr(lib.types.DALIInterpType, v.name) for v in interps], shape=[100])
        pipe.set_outputs(lib.fn.cast(interp, dtype=lib.types.INT32))
    pipe.build()
    (as_int,) = pipe.run()
    for i in range(batch_size):
        check_sample(np.array(as_int.at(i)), np.array([int(v) for v in interps]), None, i)


ONE_D_TYPES = [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
ZERO_D_TYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("dtype", ONE_D_TYPES, ids=lambda t: np.dtype(t).name)
def test_output_type_is_the_input_type(lib, dtype):
    """Any type for an array `a` (0-D: integer types only); the output has `a`'s type and
    only its values."""
    values = np.array([0, 1] if dtype is np.bool_ else [3, 7, 9], dtype=dtype)
    pipe = _pipe(lib, 3)
    with pipe:
        a = lib.fn.external_source(lambda: values, batch=False)
        outs = [lib.fn.random.choice(a, shape=[50]), a]
        if dtype in ZERO_D_TYPES:
            n = lib.fn.external_source(lambda: np.array(4, dtype=dtype), batch=False)
            outs += [lib.fn.random.choice(n, shape=[50]), n]
        pipe.set_outputs(*outs)
    pipe.build()
    outs = pipe.run()
    assert outs[0].dtype == outs[1].dtype
    for i in range(3):
        x = np.array(outs[0].at(i))
        assert x.dtype == np.dtype(dtype) and set(x.tolist()) == set(values.tolist())
    if len(outs) > 2:
        assert outs[2].dtype == outs[3].dtype
        for i in range(3):
            x = np.array(outs[2].at(i))
            assert x.dtype == np.dtype(dtype) and set(x.tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("lib", LIBS)
def test_arrays_of_arrays(lib):
    """Elements of a 3-D `a` are 2-D arrays, picked whole; `shape` goes in front."""
    a = np.arange(24, dtype=np.int32).reshape(3, 2, 4)
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.random.choice(a, shape=(5, 2)))
    pipe.build()
    (out,) = pipe.run()
    for i in range(2):
        x = np.array(out.at(i))
        assert x.shape == (5, 2, 2, 4)
        picked = {int(e[0, 0]) // 8 for e in x.reshape(-1, 2, 4)}
        assert picked <= {0, 1, 2}
        for e in x.reshape(-1, 2, 4):
            np.testing.assert_array_equal(e, a[int(e[0, 0]) // 8])


@pytest.mark.parametrize("lib", LIBS)
def test_per_sample_shape_and_scalar_shape(lib):
    """`shape` as an argument input (a 1-D list or a 0-D extent per sample) and as a scalar."""
    pipe = _pipe(lib, 2)
    with pipe:
        shape_1d = lib.fn.external_source(lambda: [np.array([2, 3], np.int32), np.array([4, 1], np.int32)])
        shape_0d = lib.fn.external_source(lambda: [np.array(2, np.int32), np.array(4, np.int32)])
        a = np.arange(6, dtype=np.int32).reshape(3, 2)
        pipe.set_outputs(lib.fn.random.choice(a, shape=shape_1d), lib.fn.random.choice(5, shape=shape_0d), lib.fn.random.choice(5, shape=4))
    pipe.build()
    o1, o0, scalar = pipe.run()
    assert [np.array(o1.at(i)).shape for i in range(2)] == [(2, 3, 2), (4, 1, 2)]
    assert [np.array(o0.at(i)).shape for i in range(2)] == [(2,), (4,)]
    assert [np.array(scalar.at(i)).shape for i in range(2)] == [(4,), (4,)]


@pytest.mark.parametrize("lib", LIBS)
def test_per_sample_shapes_need_one_number_of_dimensions(lib):
    match = r"(?s)random\.choice: argument 'shape'.*sample 1 has 1 extents, earlier samples 2" if lib is sluice else "same dimensionality"
    with pytest.raises(RuntimeError, match=match):
        pipe = _pipe(lib, 2)
        with pipe:
            shape = lib.fn.external_source(lambda: [np.array([2, 3], np.int32), np.array([4], np.int32)])
            pipe.set_outputs(lib.fn.random.choice(5, shape=shape))
        pipe.build()
        pipe.run()


@pytest.mark.parametrize("lib", LIBS)
def test_broadcast_p_and_long_p(lib):
    """A single constant p stands for every element (uniform when n p = 1); a p of 100
    values (more than a list argument input usually holds) weights 100 elements."""
    long_p = np.zeros(100, np.float32)
    long_p[[3, 50, 99]] = [0.25, 0.25, 0.5]
    pipe = _pipe(lib, 2)
    with pipe:
        pipe.set_outputs(lib.fn.random.choice(4, p=0.25, shape=[4000]), lib.fn.random.choice(100, p=long_p.tolist(), shape=[4000]),
                         lib.fn.random.choice(100, p=lib.fn.external_source(lambda: [long_p] * 2), shape=[4000]))
    pipe.build()
    uniform, weighted, weighted_in = pipe.run()
    for i in range(2):
        check_sample(np.array(uniform.at(i)), np.array(4), None, i)
        for out in (weighted, weighted_in):
            x = np.array(out.at(i))
            assert set(x.tolist()) == {3, 50, 99}
            ok, stat = _chi2_ok([(x == v).sum() for v in (3, 50, 99)], [0.25, 0.25, 0.5])
            assert ok, stat


def test_same_seed_same_values_whatever_the_threads():
    def run(threads, seed=42):
        pipe = _pipe(sluice, 8, num_threads=threads, seed=seed)
        with pipe:
            p = fn.external_source(lambda: [np.array([0.1, 0.2, 0.3, 0.4], np.float32)] * 8)
            pipe.set_outputs(fn.random.choice(4, p=p, shape=[30]), fn.random.choice(np.arange(12).reshape(6, 2), shape=[7]))
        pipe.build()
        return [[np.array(b.at(i)).tolist() for b in pipe.run() for i in range(8)] for _ in range(3)]

    one = run(1)
    assert one == run(3) == run(2)
    assert one != run(1, seed=43)


def test_pipeline_usable_after_bad_probabilities():
    """A batch whose per-sample p does not sum to 1 fails naming the operator, `p` and the
    sample; the next batch runs."""
    good, bad = np.array([0.5, 0.5], np.float32), np.array([0.5, 0.6], np.float32)
    batches = [[good, good], [good, bad]]
    calls = iter(range(10**6))
    pipe = _pipe(sluice, 2, num_threads=2)
    with pipe:
        p = fn.external_source(lambda: batches[next(calls) % 2])
        pipe.set_outputs(fn.random.choice(2, p=p, shape=[3]))
    pipe.build()
    errors = oks = 0
    for _ in range(6):
        try:
            (out,) = pipe.run()
        except ValueError as e:
            assert re.search(r"(?s)random\.choice: argument 'p'.*sum to 1, got 1\.1.*sample 1", str(e)), str(e)
            errors += 1
        else:
            assert all(set(np.array(out.at(i)).tolist()) <= {0, 1} for i in range(2))
            oks += 1
    assert errors and oks, (errors, oks)
