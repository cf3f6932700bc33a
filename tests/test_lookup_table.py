"""`fn.lookup_table` against DALI 2.4's cpu operator: DALI's test_lookup_table.py cases
(random, empty and small tables, FLOAT / FLOAT16 / INT64 outputs), every integer input type
with keys in and out of the table's range (negative included), repeated keys, values
saturated and rounded into integer outputs; errors naming the operator and argument (or
the unsupported input type), the pipeline still usable; gpu equal to cpu."""

import random

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def, types

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402
import nvidia.dali.types as dtypes  # noqa: E402


def _both(data, layout=None, **kwargs):
    outs = []
    for mod_fn, mod_types, pdef in ((fn, types, pipeline_def), (dfn, dtypes, dali.pipeline_def)):
        kw = {k: (getattr(mod_types, v) if k == "dtype" else v) for k, v in kwargs.items()}

        @pdef(batch_size=len(data), num_threads=2, device_id=None)
        def p():
            x = mod_fn.external_source(lambda: data, batch=True, layout=layout)
            return mod_fn.lookup_table(x, **kw)

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run()[0])
    return outs


def _check(data, layout=None, **kwargs):
    a, b = _both(data, layout, **kwargs)
    assert a.layout() == b.layout()
    for i in range(len(data)):
        x, y = np.array(a.at(i)), np.array(b.at(i))
        assert x.shape == y.shape and x.dtype == y.dtype, (x.shape, y.shape, x.dtype, y.dtype)
        np.testing.assert_array_equal(x, y)
    return a


def _images(batch, seed):
    r = np.random.default_rng(seed)
    return [r.integers(0, 256, size=(r.integers(1, 300), r.integers(1, 300), 3), dtype=np.uint8) for _ in range(batch)]


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16", "INT64"])
@pytest.mark.parametrize("batch, table, default", [(1, "random", 0.0), (1, "empty", 0.33), (10, "random", 0.9), (3, "small", 0.4)])
def test_dali_lookup_table_cases_match_dali(dtype, batch, table, default):
    random.seed(batch)
    d = {"empty": {}, "random": {k: random.random() for k in range(256)}, "small": {0: 0.1, 200: 0.99}}[table]
    kw = dict(dtype=dtype, default_value=default)
    if d:
        kw.update(keys=list(d), values=list(d.values()))
    _check(_images(batch, batch), "HWC", **kw)


KEYS = [0, 1, 2, 7, 255, 256, 1000, 65535, 2]
VALUES = [0.5, -1.5, 2.5, 300.7, -70000.0, 1e10, 3.25, 42.0, 9.0]


@pytest.mark.parametrize("in_type", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64])
@pytest.mark.parametrize("out_type", ["UINT8", "INT8", "UINT16", "INT32", "UINT64", "FLOAT16", "FLOAT", "FLOAT64", "BOOL"])
def test_types_and_key_ranges_match_dali(in_type, out_type):
    raw = np.array([0, 1, 2, 3, 7, -1, -128, 255, 256, 1000, 65535, 65536, -65536, 70000, 2**31 - 1, 2**32 + 2], dtype=np.int64)
    data = [raw.astype(in_type).reshape(2, 8), raw[::-1].astype(in_type).reshape(4, 4)]
    _check(data, keys=KEYS, values=VALUES, default_value=-7.5, dtype=out_type)


def test_dali_scalar_case():
    out = _check([np.array(v) for v in [0, 1, 2, 3]], keys=[0, 1], values=[100, 200], dtype="INT64")
    assert [int(np.array(out.at(i))) for i in range(4)] == [100, 200, 0, 0]


def test_dali_documentation_example():
    out = _check([np.array([1, 4, 1, 0, 100, 2, 3, 4], np.int32)], keys=[0, 2, 3, 4, 5, 3], values=[0.2, 0.4, 0.5, 0.6, 0.7, 0.10], default_value=0.99)
    np.testing.assert_allclose(np.array(out.at(0)), [0.99, 0.6, 0.99, 0.2, 0.99, 0.4, 0.10, 0.6], rtol=1e-6)


@pytest.mark.parametrize("kwargs, message, dali_message", [
    (dict(keys=[0, 70000], values=[1.0, 2.0]), r"'keys': 70000 is outside the table's range \[0, 65535\]", "should be in the range"),
    (dict(keys=[-1], values=[1.0]), r"'keys': -1 is outside the table's range", "should be in the range"),
    (dict(keys=[0, 1], values=[1.0]), r"'values': 1 values for 2 keys", "size should match"),
])
def test_bad_lookup_table_names_operator_and_argument(kwargs, message, dali_message):
    def build(mod_fn, pdef):
        @pdef(batch_size=1, num_threads=1, device_id=None)
        def p():
            return mod_fn.lookup_table(mod_fn.external_source(lambda: [np.zeros(3, np.int32)], batch=True), **kwargs)

        return p()

    with pytest.raises(sluice.errors.ArgumentError, match="lookup_table: argument " + message):
        build(fn, pipeline_def).run()
    with pytest.raises(RuntimeError, match=dali_message):
        p = build(dfn, dali.pipeline_def)
        p.build()
        p.run()


@pytest.mark.parametrize("in_type", [np.float32, np.float16, np.float64, np.bool_])
def test_non_integer_inputs_are_refused_naming_the_type(in_type):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def p():
        return fn.lookup_table(fn.external_source(lambda: [np.zeros(3, in_type)], batch=True), keys=[0], values=[1.0])

    pipe = p()
    for _ in range(2):  # the same error again: the pipeline stays usable
        with pytest.raises(sluice.errors.ArgumentTypeError, match=r"lookup_table: .*unsupported input type \w+: only integer types"):
            pipe.run()

    @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def d():
        return dfn.lookup_table(dfn.external_source(lambda: [np.zeros(3, in_type)], batch=True), keys=[0], values=[1.0])

    with pytest.raises(RuntimeError, match="Unsupported input type"):
        q = d()
        q.build()
        q.run()


def test_gpu_lookup_table_equals_cpu():
    require_gpu()
    data = _images(4, 3)
    raw = [np.array([0, 1, 2, -1, 65535, 65536, -70000, 7], np.int64)] * 4

    @pipeline_def(batch_size=4, num_threads=2, device_id=0)
    def p():
        x = fn.external_source(lambda: data, batch=True, layout="HWC")
        k = fn.external_source(lambda: raw, batch=True)
        kws = [dict(keys=KEYS, values=VALUES, dtype=types.UINT8), dict(keys=KEYS, values=VALUES, default_value=0.25, dtype=types.FLOAT16),
               dict(keys=list(range(256)), values=[v / 7 for v in range(256)], dtype=types.FLOAT64)]
        cpu = [fn.lookup_table(x, **kw) for kw in kws] + [fn.lookup_table(k, keys=KEYS, values=VALUES, dtype=types.INT32)]
        gpu = [fn.lookup_table(x.gpu(), **kw) for kw in kws] + [fn.lookup_table(k.gpu(), keys=KEYS, values=VALUES, dtype=types.INT32)]
        return (*cpu, *gpu)

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        n = len(outs) // 2
        for c, g in zip(outs[:n], outs[n:]):
            assert isinstance(g, sluice.TensorListGPU) and c.layout() == g.layout()
            g = g.as_cpu()
            for i in range(4):
                np.testing.assert_array_equal(np.array(c.at(i)), np.array(g.at(i)))
