"""`fn.decoders.inflate`: LZ4 blocks (`lz4.block.compress(x, store_size=False)`) to tensors,
on the cpu (Sluice's own backend; DALI 2.4's operator is gpu only) and on the gpu.

- DALI's test_inflate.py (operator_1), ported with `nvidia.dali` renamed `sluice` and
  `fn.experimental.inflate` (DALI's deprecated alias, not registered in Sluice) written
  `fn.decoders.inflate`: test_sample_inflate, test_scalar_shape, test_chunks (oversized
  shapes, their tails zeros), test_total_no_chunks, test_validation (DALI's messages). Each
  runs on the cpu and, where there is a GPU, on the gpu. Batch sizes and iterations are
  smaller than DALI's (its cases run on a GPU in CI; these also run on the cpu here), the
  cases themselves are DALI's. Where Sluice differs, the case says so: a layout may not
  repeat a letter ("WW"); a 2-D `shape` constant and a non-numeric `dtype` are refused when
  the operator is recorded, with Sluice's messages.
- Round trips through python-lz4 for every type, shapes of 0 to 4 dimensions, layouts;
  chunked sequences from offsets only, sizes only, both, constants and per-sample argument
  inputs, per-sample shapes.
- The gpu backend against the cpu's, and against DALI's gpu operator where DALI has a GPU.
- Bad inputs: a corrupt block, a truncated block, a shape too small for the data (DALI's
  `check_output_size` message), a wrong algorithm: errors naming the operator and the sample
  (and the chunk), after which the pipeline goes on.
"""

import functools

import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types

from conftest import cuda_device_count, dali_or_none, require_gpu

lz4_block = pytest.importorskip("lz4.block")

DEVICES = ["cpu", "gpu"]


def _device_id(device):
    """The pipeline's `device_id` for a test on `device` (skips gpu tests without a GPU)."""
    if device == "gpu":
        require_gpu()
        return 0
    return None


def _to(x, device):
    return x.gpu() if device == "gpu" else x


def np_type_to_dali(t):
    return types.from_numpy_type(np.dtype(t))


def sample_to_lz4(sample):
    deflated_buf = lz4_block.compress(np.ascontiguousarray(sample), store_size=False)
    return np.frombuffer(deflated_buf, dtype=np.uint8)


def _arrays(batch):
    if isinstance(batch, sluice.TensorListGPU):
        batch = batch.as_cpu()
    return [np.array(batch.at(i)) for i in range(len(batch))]


def check_batch(inflated, baseline, batch_size, layout=None, oversized_shape=False):
    layout = layout or ""
    assert inflated.layout() == layout, f"The batch layout '({inflated.layout()})' does not match the expected layout ({layout})"
    inflated_samples = _arrays(inflated)
    baseline_samples = _arrays(baseline) if not isinstance(baseline, list) else [np.array(s) for s in baseline]
    assert batch_size == len(inflated_samples) == len(baseline_samples)
    if not oversized_shape:
        for inflated_sample, baseline_sample in zip(inflated_samples, baseline_samples):
            assert inflated_sample.dtype == baseline_sample.dtype
            np.testing.assert_array_equal(inflated_sample, baseline_sample)
    else:
        for inflated_sample, baseline_sample in zip(inflated_samples, baseline_samples):
            assert len(inflated_sample) == len(baseline_sample)
            for inflated_frame, baseline_frame in zip(inflated_sample, baseline_sample):
                flat_inflated = inflated_frame.reshape(-1)
                baseline_size = baseline_frame.size
                actually_inflated = flat_inflated[:baseline_size].reshape(baseline_frame.shape)
                np.testing.assert_array_equal(actually_inflated, baseline_frame)
                output_tail = flat_inflated[baseline_size:]
                assert np.all(output_tail == 0), f"Oversized output was not properly padded with 0s. Tail size {len(output_tail)}, the tail {output_tail}"


# --------------------------------------------------------------------------- DALI's cases
def _test_sample_inflate(device, batch_size, np_dtype, seed):
    epoch_size = 10 * batch_size
    rng = np.random.default_rng(seed=seed)
    permutation = rng.permutation(epoch_size)
    dtype = np_type_to_dali(np_dtype)

    def gen_iteration_sizes():
        num_yielded_samples = 0
        while num_yielded_samples < epoch_size:
            iteration_size = np.int32(np.floor(rng.uniform(1, batch_size + 1)))
            iteration_size = min(iteration_size, epoch_size - num_yielded_samples)
            yield iteration_size
            num_yielded_samples += iteration_size

    iteration_sizes = list(gen_iteration_sizes())
    assert sum(iteration_sizes) == epoch_size

    def source():
        num_yielded_samples = 0
        for iteration_size in iteration_sizes:
            sample_sizes = [permutation[num_yielded_samples + i] for i in range(iteration_size)]
            num_yielded_samples += iteration_size

            def sample(sample_size):
                start = (sample_size - 1) * sample_size // 2
                with np.errstate(over="ignore"):  # wrapping to the narrow types, as DALI's test
                    sample = np.arange(start, start + sample_size, dtype=np.int64).astype(np_dtype)
                return sample, sample_to_lz4(sample)

            samples, deflated = list(zip(*[sample(sample_size) for sample_size in sample_sizes]))
            yield list(samples), list(deflated), np.array(sample_sizes, dtype=np.int32)

    @pipeline_def
    def pipeline():
        sample, deflated, shape = fn.external_source(source=source, batch=True, num_outputs=3)
        inflated = fn.decoders.inflate(_to(deflated, device), shape=shape, dtype=dtype)
        return inflated, sample

    pipe = pipeline(batch_size=batch_size, num_threads=4, device_id=_device_id(device))
    for iter_size in iteration_sizes:
        inflated, baseline = pipe.run()
        check_batch(inflated, baseline, iter_size)


@pytest.mark.parametrize("device", DEVICES)
def test_sample_inflate(device):
    # DALI: batch sizes 1, 64 and 348.
    seed = 42
    for batch_size in [1, 13, 64]:
        for dtype in [np.uint8, np.int8, np.uint16, np.int32, np.float32, np.float16]:
            _test_sample_inflate(device, batch_size, dtype, seed)
            seed += 1


def _test_scalar_shape(device, dtype, shape, layout):
    def sample_source(sample_info):
        sample_size = np.prod(shape)
        x = sample_info.idx_in_epoch + 1
        sample = np.arange(0, sample_size, dtype=dtype).reshape(shape) * x
        return sample

    def deflated_source(sample_info):
        sample = sample_source(sample_info)
        return np.array(sample_to_lz4(sample))

    @pipeline_def
    def pipeline():
        baseline = fn.external_source(source=sample_source, batch=False)
        deflated = fn.external_source(source=deflated_source, batch=False, device=device)
        inflated = fn.decoders.inflate(deflated, shape=shape, dtype=np_type_to_dali(dtype), layout=layout)
        return inflated, baseline

    batch_size = 16
    pipe = pipeline(batch_size=batch_size, num_threads=8, device_id=_device_id(device))
    for _ in range(4):
        inflated, baseline = pipe.run()
        check_batch(inflated, baseline, batch_size, layout)


SCALAR_SHAPES = [
    (65521, "X"),  # the largest prime below 2**16
    (65521, None),
    (262147, "Y"),  # a prime above 2**18
    ([3, 5, 7], "ABC"),
    ([3, 5, 7], ""),
    ([13, 15, 7], None),
    (np.array([31, 101, 17], dtype=np.int32), "DEF"),
    ([4, 8, 16, 2], "FGNH"),
    (np.array([], dtype=np.int32), None),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.uint16])
@pytest.mark.parametrize("shape, layout", SCALAR_SHAPES, ids=range(len(SCALAR_SHAPES)))
def test_scalar_shape(device, dtype, shape, layout):
    _test_scalar_shape(device, dtype, shape, layout)


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_shape_repeated_layout_letter(device):
    """DALI's ([100, 10], "WW") case: Sluice's layouts name each dimension once."""
    with pytest.raises(errors.ArgumentError, match=r"decoders.inflate: argument 'layout': layout 'WW' names dimension 'W' twice"):
        _test_scalar_shape(device, np.uint8, [100, 10], "WW")


def seq_source(rng, ndim, dtype, mode, permute, oversized_shape):
    def uniform(shape):
        return dtype(rng.uniform(-(2**31), 2**31 - 1, shape))

    def std(shape):
        return dtype(128 * rng.standard_normal(shape) + 3)

    def smaller_std(shape):
        return dtype(16 * rng.standard_normal(shape))

    def inflate_shape(shape):
        multiplier = rng.uniform(1, 2, ndim)
        return np.int32(shape * multiplier)

    def inner():
        max_extent_size = 64 if ndim >= 3 else 128
        distrs = [uniform, std, smaller_std]
        distrs = rng.permutation(distrs)
        num_chunks = np.int32(rng.uniform(1, 32))
        shape = np.int32(rng.uniform(0, max_extent_size, ndim))
        with np.errstate(invalid="ignore", over="ignore"):  # float to integer casts out of range
            sample = np.array([(distrs[i % len(distrs)])(shape) for i in range(num_chunks)], dtype=dtype)
        chunks = [sample_to_lz4(chunk) for chunk in sample]
        sizes = [len(chunk) for chunk in chunks]
        offsets = np.int32(np.cumsum([0] + sizes[:-1]))
        sizes = np.array(sizes, dtype=np.int32)
        deflated = np.concatenate(chunks)
        reported_shape = shape if not oversized_shape else inflate_shape(shape)
        if permute:
            assert mode == "offset_and_size"
            perm = rng.permutation(num_chunks)
            subset = rng.choice([True, False], num_chunks)
            sample = sample[perm][subset]
            offsets = offsets[perm][subset]
            sizes = sizes[perm][subset]
        if mode == "offset_only":
            return sample, deflated, reported_shape, offsets
        elif mode == "size_only":
            return sample, deflated, reported_shape, sizes
        else:
            assert mode == "offset_and_size"
            return sample, deflated, reported_shape, offsets, sizes

    return inner


def _test_chunks(device, seed, batch_size, ndim, dtype, layout, mode, permute, oversized_shape, sequence_axis_name):
    rng = np.random.default_rng(seed=seed)
    source = seq_source(rng, ndim, dtype, mode, permute, oversized_shape)

    @pipeline_def
    def pipeline():
        baseline, deflated, reported_shape, *rest = fn.external_source(source=source, batch=False, num_outputs=5 if mode == "offset_and_size" else 4)
        if mode == "offset_only":
            (offsets,) = rest
            sizes = None
        elif mode == "size_only":
            (sizes,) = rest
            offsets = None
        else:
            offsets, sizes = rest
        inflated = fn.decoders.inflate(
            _to(deflated, device),
            shape=reported_shape,
            dtype=np_type_to_dali(dtype),
            chunk_offsets=offsets,
            chunk_sizes=sizes,
            layout=layout,
            sequence_axis_name=sequence_axis_name,
        )
        return inflated, baseline

    pipe = pipeline(batch_size=batch_size, num_threads=4, device_id=_device_id(device))
    if layout:
        layout = (sequence_axis_name or "F") + layout
    for _ in range(2):
        inflated, baseline = pipe.run()
        check_batch(inflated, baseline, batch_size, layout, oversized_shape=oversized_shape)


def _chunk_cases():
    # DALI: batch sizes 1, 9, 31 and four iterations.
    seed = 42
    batch_sizes = [1, 4, 7]
    cases = []
    for dtype in [np.uint8, np.int16, np.float32]:
        for ndim, layout, sequence_axis_name in [(0, None, None), (1, None, "F"), (2, "XY", "Q"), (2, None, None), (3, "ABC", None), (3, "", "W")]:
            for mode, permute in [("offset_only", False), ("size_only", False), ("offset_and_size", False), ("offset_and_size", True)]:
                batch_size = batch_sizes[seed % len(batch_sizes)]
                oversized_shape = ndim > 0 and seed % 2 == 1
                cases.append((seed, batch_size, ndim, dtype, layout, mode, permute, oversized_shape, sequence_axis_name))
                seed += 1
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", _chunk_cases(), ids=lambda c: f"seed{c[0]}")
def test_chunks(device, case):
    _test_chunks(device, *case)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "ex_kwargs",
    [{"chunk_offsets": []}, {"chunk_sizes": []}, {"chunk_offsets": np.array([], dtype=np.int32)}, {"chunk_sizes": np.array([], dtype=np.int32)}],
    ids=["offsets_list", "sizes_list", "offsets_array", "sizes_array"],
)
def test_total_no_chunks(device, ex_kwargs):
    frame = np.full((128, 128, 3), 42, dtype=np.uint8)
    chunks = [sample_to_lz4(frame)] * 7
    deflated = np.concatenate(chunks)
    baseline = np.array([], dtype=np.uint8).reshape((0, 128, 128, 3))

    @pipeline_def
    def pipeline():
        inflate = fn.external_source(source=lambda _: deflated, batch=False)
        return fn.decoders.inflate(_to(inflate, device), shape=(128, 128, 3), layout="HWC", **ex_kwargs)

    batch_size = 8
    pipe = pipeline(batch_size=batch_size, num_threads=4, device_id=_device_id(device))
    for _ in range(2):
        (inflated,) = pipe.run()
        check_batch(inflated, [baseline] * batch_size, batch_size, layout="FHWC")


def _validation_pipelines(device):
    """DALI's test_validation pipelines, each with the message (a regular expression) its
    error carries in Sluice: DALI's words but where the case says otherwise."""
    g = lambda x: _to(x, device)  # noqa: E731
    src = lambda v, t=np.uint8: fn.external_source(source=lambda: np.array(v, dtype=t), batch=False)  # noqa: E731
    five = [1, 2, 3, 4, 5]
    cases = {
        # A 2-D array is a constant argument input, as in DALI, and refused as DALI does.
        "2d_shape": (lambda: fn.decoders.inflate(g(src([1, 2, 3, 4])), shape=np.array([[1, 5], [4, 5]], dtype=np.int32)),
                     r"argument 'shape'.*The shape argument must be a scalar or a 1D tensor, got tensor with 2 extents"),
        # Sluice has no TENSOR_LAYOUT type: a STRING output type is refused by the argument check.
        "non_elementary_dtype": (lambda: fn.decoders.inflate(g(src([1, 2, 3, 4])), shape=4, dtype=types.DALIDataType.STRING),
                                 r"argument 'dtype': unsupported data type id 12"),
        "input_float": (lambda: fn.decoders.inflate(g(src([1, 2, 3, 4], np.float32)), shape=42), r"Got tensor of type `float` instead"),
        "input_scalar": (lambda: fn.decoders.inflate(g(src(1)), shape=42), r"Got input with 0 dimensions instead"),
        "input_algorithm": (lambda: fn.decoders.inflate(g(src([1])), shape=42, algorithm=""), r"Unknown inflate algorithm"),
        "too_big_chunk": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_sizes=[6]), r"Input chunk size cannot exceed the sample size"),
        "too_big_chunks": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_sizes=[3, 3]),
                           r"The sum of chunk sizes for sample of idx 0 exceeds the total size of the sample\."),
        "empty_chunk": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_sizes=[0]), r"Got chunk size 0 for sample of idx 0"),
        "neg_chunk": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_sizes=[3, -1]), r"Got chunk size -1 for sample of idx 0"),
        "too_big_offsets": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_offsets=[0, 5]),
                            r"Got chunk offset 5 while the sample size is 5 for sample of idx 0"),
        "too_zero_size_inferred": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_offsets=[1, 1]),
                                   r"The inferred size of a chunk would be non-positive for sample of idx 0"),
        "sizes_offsets_mismatched": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_offsets=[1, 1], chunk_sizes=[1, 1, 1]),
                                     r"for sample of idx 0 there are 2 offsets and 3 sizes"),
        "negative_offset": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_offsets=[-5, 0], chunk_sizes=[5, 5]),
                            r"Input chunks offsets must be non-negative"),
        "chunk_exceeding_sample": (lambda: fn.decoders.inflate(g(src(five)), shape=42, chunk_offsets=[2], chunk_sizes=[4]),
                                   r"Input chunk cannot exceed the sample size"),
        "sequence_axis_no_name": (lambda: fn.decoders.inflate(g(src(five)), shape=5, sequence_axis_name=""),
                                  r'The `sequence_axis_name` must be a single character, got ""'),
        "sequence_axis_too_long_name": (lambda: fn.decoders.inflate(g(src(five)), shape=5, sequence_axis_name="AB"),
                                        r'The `sequence_axis_name` must be a single character, got "AB"'),
    }
    return cases


VALIDATION_CASES = list(_validation_pipelines("cpu"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", VALIDATION_CASES)
def test_validation(device, case):
    device_id = _device_id(device)
    body, error = _validation_pipelines(device)[case]

    @pipeline_def
    def pipeline():
        return body()

    with pytest.raises(RuntimeError, match=r"(?s)decoders\.inflate.*" + error):
        pipe = pipeline(batch_size=4, num_threads=4, device_id=device_id)
        pipe.run()


# --------------------------------------------------------------------------- round trips
ALL_TYPES = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64, np.float16, np.float32, np.float64, np.bool_]


def _random(rng, shape, t):
    """Values of type `t`: half noise, half runs (so blocks hold literals and matches)."""
    n = int(np.prod(shape))
    if t == np.bool_:
        v = rng.integers(0, 2, n).astype(np.bool_)
    elif np.dtype(t).kind == "f":
        v = rng.standard_normal(n).astype(t)
    else:
        info = np.iinfo(t)
        v = rng.integers(info.min, info.max, n, dtype=t, endpoint=True)
    v[: n // 2] = np.repeat(v[: n // 16 + 1], 8)[: n // 2]
    return v.reshape(shape)


def _run_inflate(device, batches, args=None, layout=None, **kw):
    """Runs decoders.inflate over `batches` (lists of deflated samples) with per-sample
    argument inputs `args` (name -> list of batches); returns each run's samples and layout."""
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}

    @pipeline_def
    def pipeline():
        x = fn.external_source(source=lambda: next(it), batch=True)
        nodes = {k: fn.external_source(source=(lambda i: lambda: next(i))(i), batch=True) for k, i in arg_its.items()}
        return fn.decoders.inflate(_to(x, device), layout=layout, **kw, **nodes)

    pipe = pipeline(batch_size=max(len(b) for b in batches), num_threads=2, device_id=_device_id(device))
    outs = []
    for _ in batches:
        (out,) = pipe.run()
        outs.append((_arrays(out), out.layout()))
    return outs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: np.dtype(t).name)
def test_round_trip_every_type(device, t):
    rng = np.random.default_rng(np.dtype(t).num)
    for shape, layout in [((1000,), "X"), ((7, 9, 3), "HWC"), ((), None), ((2, 3, 4, 5), "ABCD"), ((0, 4), "HW"), ((1,), "")]:
        data = [_random(rng, shape, t) for _ in range(5)]
        ((got, got_layout),) = _run_inflate(device, [[sample_to_lz4(d) for d in data]], shape=list(shape), dtype=np_type_to_dali(t), layout=layout)
        assert got_layout == (layout or "")
        for g, d in zip(got, data):
            assert g.dtype == d.dtype and g.shape == d.shape
            np.testing.assert_array_equal(g, d)


def _sequence_batch(rng, frame_shapes, t=np.uint8):
    """Samples of frames (one frame shape per sample), each frame compressed apart; returns
    the frames, the deflated samples, and per sample the chunks' offsets and sizes."""
    frames, deflated, offsets, sizes = [], [], [], []
    for count, shape in frame_shapes:
        f = [_random(rng, shape, t) for _ in range(count)]
        blocks = [sample_to_lz4(x) for x in f]
        s = np.array([len(b) for b in blocks], np.int32)
        frames.append(np.stack(f) if f else np.zeros((0, *shape), t))
        deflated.append(np.concatenate(blocks) if blocks else np.zeros(1, np.uint8))
        offsets.append(np.concatenate([[0], np.cumsum(s)[:-1]]).astype(np.int32) if count else np.zeros(0, np.int32))
        sizes.append(s)
    return frames, deflated, offsets, sizes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("given", ["offsets", "sizes", "both"])
def test_sequences_with_per_sample_chunks_and_shapes(device, given):
    rng = np.random.default_rng(7)
    frame_shapes = [(3, (4, 5, 3)), (1, (2, 2, 3)), (0, (6, 1, 3)), (12, (16, 16, 3)), (2, (1, 1, 3))]
    frames, deflated, offsets, sizes = _sequence_batch(rng, frame_shapes, np.int16)
    # A sample of no chunks still holds bytes (DALI refuses empty input samples).
    deflated[2] = np.zeros(3, np.uint8)
    args = {"shape": [[np.array(s, np.int32) for _, s in frame_shapes]]}
    if given in ("offsets", "both"):
        args["chunk_offsets"] = [offsets]
    if given in ("sizes", "both"):
        args["chunk_sizes"] = [sizes]
    ((got, layout),) = _run_inflate(device, [deflated], args, layout="HWC", dtype=types.INT16, sequence_axis_name="T")
    assert layout == "THWC"
    for g, f in zip(got, frames):
        assert g.shape == f.shape
        np.testing.assert_array_equal(g, f)


@pytest.mark.parametrize("device", DEVICES)
def test_constant_chunk_lists_apply_to_every_sample(device):
    """Samples of three chunks of one size each: the same constant sizes (and offsets) for
    all; data past the last chunk is never read."""
    frames = [[np.full(64, 10 * i + k, np.uint8) for k in range(3)] for i in range(4)]
    blocks = [[sample_to_lz4(f) for f in fs] for fs in frames]
    size = len(blocks[0][0])
    assert all(len(b) == size for bs in blocks for b in bs)
    deflated = [np.concatenate(bs + [np.array([0xFF, 0xFF], np.uint8)]) for bs in blocks]
    for kw in [dict(chunk_sizes=[size] * 3), dict(chunk_offsets=[0, size, 2 * size], chunk_sizes=[size] * 3)]:
        ((got, _),) = _run_inflate(device, [deflated], shape=[8, 8], **kw)
        for g, fs in zip(got, frames):
            np.testing.assert_array_equal(g, np.stack(fs).reshape(3, 8, 8))
    # Offsets alone: the last chunk runs to the end of the sample, here without the trailing bytes.
    ((got, layout),) = _run_inflate(device, [[np.concatenate(bs) for bs in blocks]], chunk_offsets=[0, size, 2 * size], shape=64, layout="X")
    assert layout == "FX"
    for g, fs in zip(got, frames):
        np.testing.assert_array_equal(g, np.stack(fs))


@pytest.mark.parametrize("device", DEVICES)
def test_check_output_size_is_accepted(device):
    data = [np.arange(100, dtype=np.uint8)]
    for check in (False, True):
        ((got, _),) = _run_inflate(device, [[sample_to_lz4(d) for d in data]], shape=[100], check_output_size=check)
        np.testing.assert_array_equal(got[0], data[0])


# --------------------------------------------------------------------------- gpu
@functools.cache
def _dali_gpu():
    """DALI 2.4 able to run its (gpu only) inflate, or None (no DALI, the CPU-only wheel, no GPU)."""
    dali = dali_or_none()
    if dali is None or cuda_device_count() == 0:
        return None
    try:
        @dali.pipeline_def(batch_size=1, num_threads=1, device_id=0)
        def probe():
            x = dali.fn.external_source(source=lambda: [sample_to_lz4(np.arange(4, dtype=np.uint8))], batch=True)
            return dali.fn.decoders.inflate(x.gpu(), shape=[4])

        p = probe()
        p.build()
        p.run()
    except Exception:
        return None
    return dali


def _cpu_gpu_and_dali(deflated, args, **kw):
    """decoders.inflate of one batch on the cpu and on the gpu in one Sluice pipeline, and on
    DALI's gpu where it runs (else None)."""
    outs = []
    for lib in (sluice, _dali_gpu()):
        if lib is None:
            outs.append(None)
            continue

        @lib.pipeline_def(batch_size=len(deflated), num_threads=2, device_id=0)
        def pipeline():
            x = lib.fn.external_source(source=lambda: deflated, batch=True)
            nodes = {k: lib.fn.external_source(source=(lambda v: lambda: v)(v), batch=True) for k, v in args.items()}
            gpu = lib.fn.decoders.inflate(x.gpu(), **kw, **nodes)
            if lib is sluice:
                return lib.fn.decoders.inflate(x, **kw, **nodes), gpu
            return (gpu,)

        outs.append(pipeline().run())
    (cpu, gpu), theirs = outs
    return cpu, gpu, (theirs[0] if theirs is not None else None)


def test_gpu_equals_cpu_and_dali():
    require_gpu()
    rng = np.random.default_rng(11)
    # Plain samples of every size class (one warp per chunk: shorter and longer than 32).
    for t in (np.uint8, np.float32, np.int64):
        data = [_random(rng, (n,), t) for n in (1, 5, 31, 32, 33, 100, 4096, 70000)]
        deflated = [sample_to_lz4(d) for d in data]
        shapes = [np.array(d.shape, np.int32) for d in data]
        cpu, gpu, theirs = _cpu_gpu_and_dali(deflated, {"shape": shapes}, dtype=np_type_to_dali(t))
        assert isinstance(gpu, sluice.TensorListGPU)
        for c, g, d in zip(_arrays(cpu), _arrays(gpu), data):
            np.testing.assert_array_equal(c, d)
            np.testing.assert_array_equal(g, d)
        if theirs is not None:
            for c, d in zip(_arrays(theirs), data):
                np.testing.assert_array_equal(c, d)
    # Sequences, oversized frames (zeros after the data), an empty sequence.
    frames, deflated, offsets, sizes = _sequence_batch(rng, [(5, (10, 10)), (0, (10, 10)), (31, (10, 10)), (2, (10, 10))])
    deflated[1] = np.zeros(4, np.uint8)
    cpu, gpu, theirs = _cpu_gpu_and_dali(deflated, {"chunk_sizes": sizes}, shape=[12, 10], layout="HW")
    assert cpu.layout() == gpu.layout() == "FHW"
    for c, g in zip(_arrays(cpu), _arrays(gpu)):
        np.testing.assert_array_equal(c, g)
    for c, f in zip(_arrays(cpu), frames):
        np.testing.assert_array_equal(c[:, :10], f)
        assert not c[:, 10:].any()
    if theirs is not None:
        assert theirs.layout() == "FHW"
        for c, t in zip(_arrays(cpu), _arrays(theirs)):
            np.testing.assert_array_equal(c, t)


def test_gpu_many_chunks():
    """More chunks than one launch's grid holds (65535)."""
    require_gpu()
    block = sample_to_lz4(np.arange(8, dtype=np.uint8))
    count = 70000
    deflated = [np.tile(block, count // 2), np.tile(block, count - count // 2)]
    cpu, gpu, _ = _cpu_gpu_and_dali(deflated, {}, shape=[8], chunk_sizes=[len(block)] * (count // 2))
    for c, g in zip(_arrays(cpu), _arrays(gpu)):
        assert c.shape == (count // 2, 8)
        np.testing.assert_array_equal(c, g)
        np.testing.assert_array_equal(c, np.tile(np.arange(8, dtype=np.uint8), (count // 2, 1)))


# --------------------------------------------------------------------------- bad inputs
def _corrupt():
    """An LZ4 block whose match reaches before the start of the output: two literals, then
    offset 3."""
    return np.array([0x20, 1, 2, 3, 0, 0x00], np.uint8)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_blocks_name_the_sample_and_chunk_and_the_pipeline_goes_on(device):
    # Noise compresses to one run of literals: cut short, it runs past the end of the block.
    data = [np.arange(300, dtype=np.uint8) % 7, np.random.default_rng(3).integers(0, 256, 300, dtype=np.uint8)]
    good = [sample_to_lz4(d) for d in data]
    truncated = good[1][:-10]
    batches = [[good[0], _corrupt()], good, [truncated, good[1]], good]
    it = iter(batches)

    @pipeline_def
    def pipeline():
        x = fn.external_source(source=lambda: next(it), batch=True)
        return fn.decoders.inflate(_to(x, device), shape=[300])

    pipe = pipeline(batch_size=2, num_threads=2, device_id=_device_id(device))
    with pytest.raises(errors.DataError, match=r"(?s)decoders\.inflate, sample 1\b.*chunk 0 \(bytes 0\.\.6 of the sample\) is not a valid LZ4 block: "
                                               r"match offset 3 at byte 3 reaches before the start of the output"):
        pipe.run()
    (out,) = pipe.run()
    for g, d in zip(_arrays(out), data):
        np.testing.assert_array_equal(g, d)
    with pytest.raises(errors.DataError, match=r"(?s)decoders\.inflate, sample 0\b.*chunk 0 .*literals at byte .* run past the end of the block"):
        pipe.run()
    (out,) = pipe.run()
    np.testing.assert_array_equal(_arrays(out)[1], data[1])


@pytest.mark.parametrize("device", DEVICES)
def test_a_bad_chunk_of_a_sequence_is_named(device):
    frames = [np.full(50, k, np.uint8) for k in range(3)]
    blocks = [sample_to_lz4(f) for f in frames]
    sizes = [len(b) for b in blocks]
    bad = [blocks[0], blocks[1], _corrupt()]
    batches = [[np.concatenate(blocks), np.concatenate(bad)], [np.concatenate(blocks)] * 2]
    sizes_batches = [[np.array(sizes, np.int32), np.array(sizes[:2] + [6], np.int32)], [np.array(sizes, np.int32)] * 2]
    it, sit = iter(batches), iter(sizes_batches)

    @pipeline_def
    def pipeline():
        x = fn.external_source(source=lambda: next(it), batch=True)
        s = fn.external_source(source=lambda: next(sit), batch=True)
        return fn.decoders.inflate(_to(x, device), shape=[50], chunk_sizes=s)

    pipe = pipeline(batch_size=2, num_threads=2, device_id=_device_id(device))
    start = sizes[0] + sizes[1]
    with pytest.raises(errors.DataError, match=rf"(?s)decoders\.inflate, sample 1\b.*chunk 2 \(bytes {start}\.\.{start + 6} of the sample\)"):
        pipe.run()
    (out,) = pipe.run()
    for g in _arrays(out):
        np.testing.assert_array_equal(g, np.stack(frames))


@pytest.mark.parametrize("device", DEVICES)
def test_a_shape_too_small_is_dalis_check_output_size_error(device):
    data = [np.arange(64, dtype=np.uint8), np.arange(100, dtype=np.uint8)]
    batches = [[sample_to_lz4(d) for d in data], [sample_to_lz4(data[0])] * 2]
    it = iter(batches)

    @pipeline_def
    def pipeline():
        x = fn.external_source(source=lambda: next(it), batch=True)
        return fn.decoders.inflate(_to(x, device), shape=[4, 4], dtype=types.INT32)

    pipe = pipeline(batch_size=2, num_threads=2, device_id=_device_id(device))
    with pytest.raises(errors.DataError, match=r"(?s)decoders\.inflate, sample 1\b.*Output buffer for inflated chunk 0 in sample 1 is too small: "
                                               r"it has 64 bytes, but the compressed input expands to 100 bytes\. Check the `shape` and `dtype` arguments\."):
        pipe.run()
    (out,) = pipe.run()
    for g in _arrays(out):
        np.testing.assert_array_equal(g, data[0].view(np.int32).reshape(4, 4))


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_algorithm_and_bad_shape_arguments(device):
    device_id = _device_id(device)
    block = sample_to_lz4(np.zeros(8, np.uint8))

    def pipe(**kw):
        @pipeline_def
        def p():
            x = fn.external_source(source=lambda: [block], batch=True)
            return fn.decoders.inflate(_to(x, device), **kw)

        return p(batch_size=1, num_threads=1, device_id=device_id)

    with pytest.raises(errors.ArgumentError, match=r"decoders\.inflate: argument 'algorithm': Unknown inflate algorithm \"zstd\"\."):
        pipe(shape=[8], algorithm="zstd").run()
    with pytest.raises(errors.ArgumentError, match=r"decoders\.inflate: argument 'shape': Extents of the output shape must be non-negative integers\. "
                                                   r"Please verify the sample of idx 0 passed as the argument `shape`\."):
        pipe(shape=[-8]).run()
    with pytest.raises(errors.ArgumentError, match=r"decoders\.inflate: argument 'layout': The layout \"HW\" has a different number of dimensions \(2\)"):
        pipe(shape=[8], layout="HW").run()
    with pytest.raises(errors.SluiceError, match="shape"):
        pipe().run()
    (out,) = pipe(shape=[2, 4], algorithm="lz4").run()
    assert _arrays(out)[0].shape == (2, 4)
