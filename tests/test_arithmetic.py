"""Arithmetic expressions (`+ - * / // % ** == != < <= > >= & | ^`, unary `-`, sluice.math)
and indexing on DataNodes, run side by side with DALI 2.4 on the same data.

Sluice has no external_source yet, so inputs come from fn.random.uniform with a fixed seed;
they are read back from the Sluice outputs and fed to DALI through fn.external_source."""

import operator

import numpy as np
import pytest

import sluice
from sluice import fn, math as smath, types

dali = pytest.importorskip("nvidia.dali")
from nvidia.dali import fn as dfn, math as dmath  # noqa: E402

BATCH = 3

# name -> (sluice dtype, values drawn from): negatives, extremes and zero (not INT32_MIN:
# DALI itself dies with SIGFPE on INT32_MIN // -1; Sluice wraps like Python-free C would).
INPUTS = {
    "u8": (types.UINT8, [0, 1, 3, 7, 100, 200, 250, 255]),
    "i8": (types.INT8, [-128, -100, -7, -1, 0, 3, 100, 127]),
    "u16": (types.UINT16, [0, 1, 5, 300, 40000, 65535]),
    "i16": (types.INT16, [-32768, -300, -1, 0, 7, 1000, 32767]),
    "i32": (types.INT32, [-2**31 + 1, -70000, -7, -1, 0, 9, 123456, 2**31 - 1]),
    "u32": (types.UINT32, [0, 1, 7, 70000, 2**32 - 1]),
    "i64": (types.INT64, [-2**40, -5, -1, 0, 11, 2**40]),
    "u64": (types.UINT64, [0, 1, 13, 2**40]),
    "f32": (types.FLOAT, [-1e6, -2.5, -1.0, -0.0, 0.0, 0.3, 1.5, 3.0, 1e6]),
    "f64": (types.FLOAT64, [-1e12, -2.5, -1 / 3, 0.0, 0.1, 2.0, 7.25, 1e12]),
    "b": (types.BOOL, [0, 1]),
}
NONZERO = {k: (t, [v for v in vals if v != 0]) for k, (t, vals) in INPUTS.items()}


def sluice_inputs_and_outputs(names, exprs, shapes=None, table=INPUTS, seed=123):
    """Runs a Sluice pipeline whose inputs are random tensors of the given types and whose
    outputs are `exprs` (functions of (math, *inputs)); returns (inputs, outputs) as lists
    (per output) of lists (per sample) of numpy arrays."""
    shapes = shapes or [(4, 5)] * len(names)

    @sluice.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=seed)
    def pipe():
        ins = [fn.random.uniform(values=[float(v) for v in table[n][1]], shape=list(s), dtype=table[n][0])
               for n, s in zip(names, shapes)]
        return tuple(ins) + tuple(e(smath, *ins) for e in exprs)

    outs = pipe().run()
    arrays = [[np.array(o.at(i)) for i in range(BATCH)] for o in outs]
    return arrays[:len(names)], arrays[len(names):]


def dali_outputs(inputs, exprs, layouts=None):
    @dali.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
    def pipe():
        ins = [dfn.external_source(source=[x], batch=True, cycle=True, layout=(layouts[k] if layouts else None))
               for k, x in enumerate(inputs)]
        return tuple(e(dmath, *ins) for e in exprs)

    p = pipe()
    p.build()
    outs = p.run()
    return [[np.array(o.at(i)) for i in range(BATCH)] for o in outs]


def assert_same(ours, theirs, what):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.dtype == b.dtype, f"{what}, sample {i}: dtype {a.dtype} vs DALI {b.dtype}"
        assert a.shape == b.shape, f"{what}, sample {i}: shape {a.shape} vs DALI {b.shape}"
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=what)
            ok = ~np.isnan(a)
            np.testing.assert_array_max_ulp(a[ok], b[ok], maxulp=1)
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}, sample {i}")


def compare(names, exprs, labels, shapes=None, table=INPUTS):
    ins, ours = sluice_inputs_and_outputs(names, exprs, shapes, table)
    theirs = dali_outputs(ins, exprs)
    for o, t, label in zip(ours, theirs, labels):
        assert_same(o, t, label)
    return ours


# --------------------------------------------------------------------------- promotion
def test_type_promotion_of_every_pair_matches_dali():
    names = list(INPUTS)
    pairs = [(a, b) for a in range(len(names)) for b in range(len(names)) if not (names[a] == names[b] == "b")]
    exprs = [(lambda a, b: lambda m, *x: x[a] + x[b])(a, b) for a, b in pairs]
    ours = compare(names, exprs, [f"{names[a]} + {names[b]}" for a, b in pairs], shapes=[(6,)] * len(names))
    # An excerpt of DALI's table, spelled out.
    got = {(names[a], names[b]): o[0].dtype for (a, b), o in zip(pairs, ours)}
    assert got[("u8", "i8")] == np.int16 and got[("u16", "i8")] == np.int32 and got[("u32", "i32")] == np.int64
    assert got[("u64", "i8")] == np.int64 and got[("u8", "b")] == np.uint8 and got[("i32", "f32")] == np.float32
    assert got[("f32", "f64")] == np.float64 and got[("u8", "u32")] == np.uint32


BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "**": operator.pow, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge, "&": operator.and_, "|": operator.or_, "^": operator.xor,
}
PAIRS = [("u8", "i8"), ("i32", "i32"), ("u16", "i16"), ("u32", "i64"), ("u64", "u8"), ("i8", "b"), ("f32", "i32"), ("f64", "f32"), ("u8", "f64")]


@pytest.mark.parametrize("left,right", PAIRS)
def test_binary_operators_match_dali(left, right):
    exprs, labels = [], []
    for sym, f in BINARY.items():
        floats = "f" in left[0] + right[0]
        if sym in "&|^" and floats:
            continue
        exprs.append((lambda f: lambda m, a, b: f(a, b))(f))
        labels.append(f"{left} {sym} {right}")
    # Divisors without zeros: integer division by zero is an error (as in DALI).
    table = dict(INPUTS)
    table[right + "_nz"] = NONZERO[right]
    mixed = ("f" in left[0]) != ("f" in right[0])
    if not mixed:
        compare([left, right + "_nz"], exprs, labels, table=table)
        return
    # DALI 2.4 (CPU) compares a float with a negative integer wrongly (it reports
    # -1.0 > -1 and -1.5 > -1 for FLOAT vs INT32); Sluice compares in the promoted float type,
    # checked here against NumPy. Everything else is compared with DALI.
    cmp = [k for k, l in enumerate(labels) if l.split()[1] in ("==", "!=", "<", "<=", ">", ">=")]
    ins, ours = sluice_inputs_and_outputs([left, right + "_nz"], exprs, table=table)
    theirs = dali_outputs(ins, [e for k, e in enumerate(exprs) if k not in cmp])
    it = iter(theirs)
    for k, (o, label) in enumerate(zip(ours, labels)):
        if k in cmp:
            ft = np.result_type(*(x[0].dtype for x in ins if x[0].dtype.kind == "f"))
            ref = [BINARY[label.split()[1]](a.astype(ft), b.astype(ft)) for a, b in zip(*ins)]
            assert_same(o, ref, label + " (vs NumPy)")
        else:
            assert_same(o, next(it), label)


@pytest.mark.parametrize("dtype", ["u8", "i8", "i16", "i32", "u32", "f32", "f64", "b"])
def test_scalar_constants_and_reflected_forms_match_dali(dtype):
    cases = {
        "x + 1": lambda m, x: x + 1, "1 - x": lambda m, x: 1 - x, "x * 2.5": lambda m, x: x * 2.5,
        "x + True": lambda m, x: x * True, "x / 2": lambda m, x: x / 2, "7 / x": lambda m, x: 7 / x,
        "x // 3": lambda m, x: x // 3, "x // -2": lambda m, x: x // -2, "x % 4": lambda m, x: x % 4,
        "x % -4": lambda m, x: x % -4, "2 ** x": lambda m, x: 2 ** (x & 7) if dtype[0] != "f" else 2 ** x,
        "x ** 2": lambda m, x: x ** 2, "x < 3.5": lambda m, x: x < 3.5, "3 == x": lambda m, x: 3 == x,
        "5 >= x": lambda m, x: 5 >= x, "-x": lambda m, x: -x, "+x": lambda m, x: +x,
    }
    if dtype == "b":
        for k in ("1 - x", "-x", "x // 3", "x // -2", "x % 4", "x % -4", "x ** 2", "2 ** x", "x / 2", "7 / x", "x + 1"):
            cases.pop(k)
    if dtype[0] != "f":
        cases.update({"x & 6": lambda m, x: x & 6, "1 | x": lambda m, x: 1 | x, "x ^ True": lambda m, x: x ^ True})
    table = dict(INPUTS)
    table["nz"] = NONZERO[dtype]
    compare(["nz"], list(cases.values()), list(cases), table=table)


@pytest.mark.parametrize("dtype", ["u8", "i16", "f32"])
def test_numpy_scalars_keep_their_type_as_in_dali(dtype):
    """DALI types a NumPy scalar operand as types.Constant does: its own type (x + np.uint8(1)
    stays UINT8), but a reflected one (np.uint8(3) - x) reaches the node through NumPy as a
    Python int (INT32)."""
    cases = {
        "x + np.uint8(10)": lambda m, x: x + np.uint8(10), "x ^ np.uint8(255)": lambda m, x: x ^ np.uint8(255),
        "x + np.int16(3)": lambda m, x: x + np.int16(3), "x * np.float32(0.5)": lambda m, x: x * np.float32(0.5),
        "x + np.int64(1)": lambda m, x: x + np.int64(1), "np.uint8(3) - x": lambda m, x: np.uint8(3) - x,
        "x + np.bool_(True)": lambda m, x: x + np.bool_(True), "x + np.uint16(2)": lambda m, x: x + np.uint16(2),
        "x * np.int8(-1)": lambda m, x: x * np.int8(-1),
    }
    if dtype == "f32":
        cases.pop("x ^ np.uint8(255)")
    compare([dtype], list(cases.values()), list(cases))


def test_int_constants_are_int32_and_floats_float32():
    ins, ours = sluice_inputs_and_outputs(["u8", "i64"], [lambda m, a, b: a + 1, lambda m, a, b: a + 1.5, lambda m, a, b: b * 2.0, lambda m, a, b: a + True])
    assert [o[0].dtype for o in ours] == [np.int32, np.float32, np.float32, np.uint8]


# --------------------------------------------------------------------------- fusion, broadcasting
def test_nested_expressions_fuse_into_one_operator_and_match_dali():
    def expr(m, a, b, c):
        return ((a * 3 - b) // 2 + c) * (a > b) - m.abs(c - 2)

    pipe_holder = {}

    @sluice.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=9)
    def pipe():
        a = fn.random.uniform(values=[1.0, 5.0, 200.0], shape=[4, 3], dtype=types.UINT8)
        b = fn.random.uniform(values=[-9.0, 0.0, 300.0], shape=[4, 3], dtype=types.INT16)
        c = fn.random.uniform(range=[-5.0, 5.0], shape=[4, 3])
        return a, b, c, expr(smath, a, b, c)

    p = pipe()
    pipe_holder["p"] = p
    outs = p.run()
    # The engine prunes the partial expressions Python recorded on the way.
    arith = [name for name in p.executor_statistics() if "ArithmeticGenericOp" in name]
    assert len(arith) == 1, "a nested expression must become one operator"
    assert len(p._outputs[3]._op.inputs) == 3
    ins = [[np.array(o.at(i)) for i in range(BATCH)] for o in outs[:3]]
    theirs = dali_outputs(ins, [expr])
    assert_same([np.array(outs[3].at(i)) for i in range(BATCH)], theirs[0], "fused expression")


@pytest.mark.parametrize("sa,sb", [((2, 3), (3,)), ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((3,), (2, 1)), ((2, 3), (1,)), ((4, 2, 3), ()), ((1, 5), (4, 1))])
def test_broadcasting_matches_dali(sa, sb):
    exprs = [lambda m, a, b: a + b, lambda m, a, b: a * b - 1, lambda m, a, b: b < a, lambda m, a, b: a * 0.5 - b]
    compare(["i16", "i32"], exprs, [f"{sa} op {sb}"] * 4, shapes=[sa, sb])


def test_math_functions_match_dali():
    fs = {
        "sqrt": lambda m, x, y: m.sqrt(m.abs(y)), "exp": lambda m, x, y: m.exp(y / 100000), "log": lambda m, x, y: m.log(m.abs(y) + 1),
        "abs i": lambda m, x, y: m.abs(x), "abs f": lambda m, x, y: m.abs(y), "min": lambda m, x, y: m.min(x, y),
        "max": lambda m, x, y: m.max(x, 100), "clamp i": lambda m, x, y: m.clamp(x, -5, 100),
        "clamp f": lambda m, x, y: m.clamp(y, -2.0, 2.5), "sqrt int": lambda m, x, y: m.sqrt(m.abs(x)),
        "sin": lambda m, x, y: m.sin(y), "tanh": lambda m, x, y: m.tanh(y), "pow": lambda m, x, y: m.pow(x, 2),
        "floor": lambda m, x, y: m.floor(y), "ceil": lambda m, x, y: m.ceil(y),
    }
    compare(["i16", "f32"], list(fs.values()), list(fs))


# --------------------------------------------------------------------------- errors
def run_error(expr, names=("u8",), shapes=None):
    with pytest.raises(Exception) as e:
        sluice_inputs_and_outputs(list(names), [expr], shapes)
    return str(e.value)


def test_errors_are_clear():
    msg = run_error(lambda m, a, b: a + b, ("u8", "u8"), [(2, 3), (3, 2)])
    assert "broadcast" in msg and "sample 0" in msg and "[2, 3]" in msg and "[3, 2]" in msg, msg
    msg = run_error(lambda m, a: a - a, ("b",))
    assert "cannot be booleans" in msg and "`-`" in msg, msg
    msg = run_error(lambda m, a: -a, ("b",))
    assert "cannot be a boolean" in msg, msg
    msg = run_error(lambda m, a: a & 1, ("f32",))
    assert "integral" in msg, msg
    msg = run_error(lambda m, a: 5 // (a & 0), ("u8",))
    assert "division by zero" in msg, msg
    with pytest.raises(OverflowError, match="int32"):
        sluice_inputs_and_outputs(["u8"], [lambda m, a: a + 2**40])
    with pytest.raises(TypeError, match="unsupported operand"):
        sluice_inputs_and_outputs(["u8"], [lambda m, a: a + "x"])
    with pytest.raises(NotImplementedError, match="Ellipsis"):
        sluice_inputs_and_outputs(["u8"], [lambda m, a: a[..., 0]])
    with pytest.raises(TypeError, match="index"):
        sluice_inputs_and_outputs(["u8"], [lambda m, a: a[1.5]])
    msg = run_error(lambda m, a: a[5], ("u8",), [(2, 4, 3)])
    assert "out of range" in msg and "sample 0" in msg, msg
    msg = run_error(lambda m, a: a[0, 0, 0, 0], ("u8",), [(2, 4, 3)])
    assert "too many indices" in msg, msg
    msg = run_error(lambda m, a: a[::0], ("u8",), [(2, 4, 3)])
    assert "step cannot be zero" in msg, msg


# --------------------------------------------------------------------------- subscripts
SUBSCRIPTS = {
    "[0]": lambda m, x: x[0], "[-1]": lambda m, x: x[-1], "[:, 1:3]": lambda m, x: x[:, 1:3],
    "[:, -1]": lambda m, x: x[:, -1], "[1, :, :2]": lambda m, x: x[1, :, :2], "[0, 1, 2]": lambda m, x: x[0, 1, 2],
    "[:, ::2]": lambda m, x: x[:, ::2], "[:, ::-1]": lambda m, x: x[:, ::-1], "[::-2, 6:1:-2, -2:]": lambda m, x: x[::-2, 6:1:-2, -2:],
    "[None, 1]": lambda m, x: x[None, 1], "[:, -10:2]": lambda m, x: x[:, -10:2], "[:, 3:1]": lambda m, x: x[:, 3:1],
    "[:, :, 0] + 1": lambda m, x: x[:, :, 0] + 1,
}


def test_subscripts_match_dali():
    compare(["i16"], list(SUBSCRIPTS.values()), list(SUBSCRIPTS), shapes=[(3, 8, 3)])


def test_subscripts_gpu_equal_cpu(gpu):
    """The GPU backend: strided gathers, and views (no copy) where each sample's selection is
    one run of its memory (`x[0]`, `x[1:3]`); both read back, whole and per sample."""
    @sluice.pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, seed=7)
    def pipe():
        x = fn.random.uniform(range=[-1000, 1000], shape=[3, 8, 3], dtype=types.INT16)
        g = x.gpu()
        return tuple(e(smath, x) for e in SUBSCRIPTS.values()) + tuple(e(smath, g) for e in SUBSCRIPTS.values())

    outs = pipe().run()
    n = len(SUBSCRIPTS)
    for name, cpu, gpu_out in zip(SUBSCRIPTS, outs[:n], outs[n:]):
        host = gpu_out.as_cpu()
        assert host.layout() == cpu.layout(), name
        for i in range(BATCH):
            np.testing.assert_array_equal(np.array(host.at(i)), np.array(cpu.at(i)), err_msg=name)
        if cpu.is_dense_tensor():
            np.testing.assert_array_equal(np.array(host.as_tensor()), np.array(cpu.as_tensor()), err_msg=name)


def test_subscript_views_feed_gpu_operators(gpu):
    """A view (`x[1]`, `x[2:4]`) is read by the next GPU operator and by per-sample indices
    from data nodes like any batch."""
    @sluice.pipeline_def(batch_size=BATCH, num_threads=1, device_id=0, seed=4)
    def pipe():
        x = fn.random.uniform(range=[0, 100], shape=[5, 4], dtype=types.INT32)
        i = fn.random.uniform(values=[0, 1, 4, -1], dtype=types.INT32)
        g = x.gpu()
        return x, i, g[1] * 2, g[2:4] + g[0:2], g[i], g[i, 1:]

    x, i, a, b, c, d = pipe().run()
    for k in range(BATCH):
        xk, ik = np.array(x.at(k)), int(np.array(i.at(k)))
        np.testing.assert_array_equal(np.array(a.as_cpu().at(k)), xk[1] * 2)
        np.testing.assert_array_equal(np.array(b.as_cpu().at(k)), xk[2:4] + xk[0:2])
        np.testing.assert_array_equal(np.array(c.as_cpu().at(k)), xk[ik])
        np.testing.assert_array_equal(np.array(d.as_cpu().at(k)), xk[ik, 1:])


def test_per_sample_indices_from_data_nodes():
    @sluice.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=4)
    def pipe():
        x = fn.random.uniform(range=[0, 100], shape=[5, 4], dtype=types.INT32)
        i = fn.random.uniform(values=[0, 1, 4, -1], dtype=types.INT32)
        lo = fn.random.uniform(values=[0, 1, 2], dtype=types.INT32)
        return x, i, lo, x[i, lo:]

    x, i, lo, y = pipe().run()
    for k in range(BATCH):
        xi, ii, li = np.array(x.at(k)), int(np.array(i.at(k))), int(np.array(lo.at(k)))
        np.testing.assert_array_equal(np.array(y.at(k)), xi[ii, li:])


def test_subscript_drops_layout_letters_like_dali(small_images):
    @sluice.pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=str(small_images))
        img = fn.decoders.image(jpegs)
        return img, img[10:20, :, 0], img[3], img[:, -5:]

    img, a, b, c = pipe().run()
    ins = [[np.array(img.at(i)) for i in range(BATCH)]]
    exprs = [lambda m, x: x[10:20, :, 0], lambda m, x: x[3], lambda m, x: x[:, -5:]]

    @dali.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
    def dpipe():
        x = dfn.external_source(source=[ins[0]], batch=True, cycle=True, layout="HWC")
        return tuple(e(dmath, x) for e in exprs)

    p = dpipe()
    p.build()
    theirs = p.run()
    for ours, t in zip((a, b, c), theirs):
        assert ours.layout() == t.layout()
        for i in range(BATCH):
            np.testing.assert_array_equal(np.array(ours.at(i)), np.array(t.at(i)))
