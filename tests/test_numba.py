"""`fn.experimental.numba_function` against DALI 2.4's numba plugin (CPU): DALI's own
documented examples (a setup function permuting the shape, per-sample and per-batch run
functions), plus the error without numba."""

import numpy as np
import pytest

import sluice

from conftest import dali_or_none


@pytest.fixture
def numba():
    return pytest.importorskip("numba")


def setup_change_out_shape(outs, ins):
    out0 = outs[0]
    in0 = ins[0]
    perm = [1, 0, 2]
    for sample_idx in range(len(out0)):
        for d in range(len(perm)):
            out0[sample_idx][d] = in0[sample_idx][perm[d]]


def run_per_sample(out0, in0):
    for i in range(in0.shape[0]):
        for j in range(in0.shape[1]):
            out0[j, i] = in0[i, j]


def run_per_batch(out0_samples, in0_samples):
    for out0, in0 in zip(out0_samples, in0_samples):
        for i in range(in0.shape[0]):
            for j in range(in0.shape[1]):
                out0[j, i] = in0[i, j]


def run_double(out0, in0):
    out0[:] = in0 * 2


def _run(mod, numba_function, batch, **kw):
    data = [[np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) + i for i in range(2)],
            [np.arange(5 * 2 * 1, dtype=np.uint8).reshape(5, 2, 1) for _ in range(2)]]
    pipe = mod.Pipeline(2, 1, None)
    with pipe:
        x = mod.fn.external_source(data, cycle=True)
        pipe.set_outputs(numba_function(x, batch_processing=batch, in_types=[mod.types.UINT8],
                                        ins_ndim=[3], outs_ndim=[3], **kw))
    return [[np.array(s) for s in pipe.run()[0]] for _ in range(2)]


@pytest.mark.parametrize("batch", [False, True])
def test_transpose_with_setup_matches_dali(numba, batch):
    got = _run(sluice, sluice.fn.experimental.numba_function, batch, run_fn=run_per_batch if batch else run_per_sample,
               setup_fn=setup_change_out_shape, out_types=[sluice.types.UINT8])
    for it in got:
        for s in it:
            assert s.ndim == 3
    dali = dali_or_none()
    if dali is None:
        return
    try:
        from nvidia.dali.plugin.numba.fn.experimental import numba_function as dali_numba
    except ImportError:
        pytest.skip("DALI's numba plugin is not importable")
    want = _run(dali, dali_numba, batch, run_fn=run_per_batch if batch else run_per_sample,
                setup_fn=setup_change_out_shape, out_types=[dali.types.UINT8])
    for a, b in zip(got, want):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_without_setup_the_output_is_shaped_like_the_input(numba):
    got = _run(sluice, sluice.fn.experimental.numba_function, False, run_fn=run_double, out_types=[sluice.types.UINT8])
    np.testing.assert_array_equal(got[0][0], (np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 2))


def test_the_plugin_module_path_works_too():
    from sluice.plugin.numba.fn.experimental import numba_function

    assert numba_function is sluice.fn.experimental.numba_function


def test_without_numba_the_error_names_the_package(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "numba", None)  # as if not installed
    with sluice.Pipeline(1, 1, None):
        x = sluice.fn.external_source(name="x")
        with pytest.raises(ImportError, match="needs the `numba` package"):
            sluice.fn.experimental.numba_function(x, run_fn=run_double, out_types=[sluice.types.UINT8],
                                                  in_types=[sluice.types.UINT8], outs_ndim=[3], ins_ndim=[3])
