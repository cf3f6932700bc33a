"""`fn.experimental.numba_function` (also `sluice.plugin.numba.fn.experimental.numba_function`,
where DALI keeps it): a function compiled by Numba (`nopython` mode) run on the data, per
sample or per batch. It runs through the same engine operator as `python_function`: the
compiled functions run on the executor's thread, outputs allocated here from `setup_fn`'s
shapes (or the first input's). Needs the `numba` package."""

import numpy as np

from .... import types as _types
from ....python_function import _make


def _numba():
    try:
        import numba
    except ImportError:
        raise ImportError("fn.experimental.numba_function needs the `numba` package: pip install numba") from None
    return numba


def numba_function(*inputs, run_fn, out_types, in_types, outs_ndim, ins_ndim, setup_fn=None, batch_processing=False,
                   device="cpu", blocks=None, threads_per_block=None, **kwargs):
    """Runs `run_fn(out0, ..., in0, ...)` (compiled with `numba.njit`) writing into
    preallocated outputs of types `out_types` and dimensions `outs_ndim`; `setup_fn(outs, ins)`
    sets each output sample's shape from the inputs' (without it, outputs take the first
    input's shape). At most 6 inputs and 6 outputs, as DALI."""
    numba = _numba()
    if device != "cpu":
        raise NotImplementedError("numba_function with device='gpu' is not supported yet by Sluice; use device='cpu'")
    n_out, n_in = len(out_types), len(in_types)
    if not 1 <= n_out <= 6 or n_in > 6:
        raise ValueError(f"numba_function takes at most 6 inputs and 1 to 6 outputs, got {n_in} and {n_out}")
    if len(inputs) != n_in or len(ins_ndim) != n_in or len(outs_ndim) != n_out:
        raise ValueError(f"numba_function: {len(inputs)} inputs, in_types {n_in}, ins_ndim {len(ins_ndim)}, "
                         f"out_types {n_out}, outs_ndim {len(outs_ndim)}: they must agree")
    if setup_fn is None and (n_in == 0 or any(d != ins_ndim[0] for d in outs_ndim)):
        raise ValueError("numba_function without setup_fn gives every output the first input's shape: "
                         "outs_ndim must equal ins_ndim[0]")
    out_np = [np.dtype(_types.to_numpy_type(t)) for t in out_types]
    in_np = [np.dtype(_types.to_numpy_type(t)) for t in in_types]
    run = numba.njit(run_fn)
    setup = numba.njit(setup_fn) if setup_fn is not None else None

    def batch_function(*ins):
        n = len(ins[0]) if ins else 0
        for k, (batch, want, ndim) in enumerate(zip(ins, in_np, ins_ndim)):
            for i, a in enumerate(batch):
                if a.dtype != want or a.ndim != ndim:
                    raise TypeError(f"numba_function: input {k}, sample {i} is {a.dtype} with {a.ndim} dimensions; "
                                    f"in_types/ins_ndim say {want} with {ndim}")
        if setup is not None:
            in_shapes = numba.typed.List([np.array([a.shape for a in batch], np.int64).reshape(n, ndim)
                                          for batch, ndim in zip(ins, ins_ndim)])
            out_shapes = numba.typed.List([np.zeros((n, ndim), np.int64) for ndim in outs_ndim])
            setup(out_shapes, in_shapes)
            shapes = [[tuple(int(d) for d in s[i]) for i in range(n)] for s in out_shapes]
        else:
            shapes = [[a.shape for a in ins[0]] for _ in range(n_out)]
        outs = [[np.empty(s, dt) for s in per_sample] for per_sample, dt in zip(shapes, out_np)]
        if batch_processing:
            run(*[numba.typed.List(o) for o in outs], *[numba.typed.List(b) for b in ins])
        else:
            for i in range(n):
                run(*[o[i] for o in outs], *[b[i] for b in ins])
        return outs[0] if n_out == 1 else outs

    return _make("numpy", inputs, batch_function, n_out, True, None, "cpu", kwargs)
