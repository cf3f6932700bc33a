"""`fn.multi_paste` (cpu and gpu) against DALI 2.4's cpu operator.

- DALI's own tests (operator_1/test_multipaste.py) ported with `nvidia.dali` replaced by
  `sluice` (nose params -> pytest.parametrize, `device_id=None` on the cpu, images from the
  generated set (`small_images`) instead of DALI_extra); where DALI is installed, each output
  of the randomized cases is also compared, bit for bit, with DALI's cpu operator run on the
  same images with the same regions. `test_var_channels` gives its 2-D NumPy constants as
  `types.Constant(...)` (DALI turns such arrays into constant nodes itself; Sluice's front
  end takes flat lists there).
- Parity, bit for bit, with DALI 2.4's cpu operator: every input type with every `dtype`
  (UINT8, INT16, INT32, FLOAT; FLOAT specials, values past every integer range), `in_ids`
  with overlapping regions (the later wins), repeats and samples with no region, absolute and
  relative per-sample arguments (f32 rounding of `extent * rel`), several positional inputs,
  sequences (FHWC) from positional inputs, inputs without a layout (the output is HWC),
  `output_size` constant (3 values) and per sample, constants given as `types.Constant`.
- Errors (regions out of bounds, argument shapes, bad `in_ids`, relative values out of
  [0, 1], channels, input sizes, types) name the operator, the argument and the sample, and
  the pipeline goes on; DALI raises too.
- Sluice's departures on Sluice alone: `in_ids` with sequences is refused, flat constant
  lists, argument inputs of any numeric type.
- gpu equal to cpu, bit for bit (on the GPU machine).
"""


import numpy as np
import pytest

import sluice
from sluice import errors, fn, pipeline_def, types
from sluice.pipeline import Pipeline

from conftest import dali_or_none, require_gpu

dali = dali_or_none()
needs_dali = pytest.mark.skipif(dali is None, reason="needs DALI 2.4 (CPU) as the reference")

NP_TYPES = [np.uint8, np.int16, np.int32, np.float32]
TYPE_IDS = {np.uint8: "UINT8", np.int16: "INT16", np.int32: "INT32", np.float32: "FLOAT"}


def _const(v):
    """A source giving `v` every iteration."""
    return lambda: v


def _next_of(it):
    """A source of no argument giving the next item of `it`."""
    return lambda: next(it)


def _arrays(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(out.at(i)) for i in range(len(out))]


def _assert_same(ours, theirs, what=""):
    """Same dtypes, shapes and bytes (NaNs compared as bits)."""
    assert len(ours) == len(theirs), what
    for i, (x, y) in enumerate(zip(ours, theirs)):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what} sample {i}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        if x.tobytes() != y.tobytes():
            bad = np.argwhere(x.view(np.uint8).reshape(-1) != y.view(np.uint8).reshape(-1))[:5].ravel() // x.itemsize
            raise AssertionError(f"{what} sample {i}: elements {bad.tolist()} differ: {x.reshape(-1)[bad]} != {y.reshape(-1)[bad]}")


def _lib_dtype(lib, np_type):
    return getattr(lib.types, TYPE_IDS[np_type])


def _pipe(lib, inputs, layout="HWC", args=None, consts=None, gpu=False, batch_size=None, **kw):
    """A pipeline of one `fn.multi_paste` over `inputs` (one list of samples per positional
    input). `args`: argument name -> one array per sample (argument inputs); `consts`:
    argument name -> array given as `types.Constant`; `kw`: constant arguments."""
    bs = batch_size or max(len(inputs[0]), 1)
    if kw.get("dtype") in TYPE_IDS:  # a NumPy type: the library's own
        kw["dtype"] = _lib_dtype(lib, kw["dtype"])
    pipe = lib.pipeline.Pipeline(batch_size=bs, num_threads=2, device_id=0 if gpu else None)
    with pipe:
        xs = [lib.fn.external_source(source=_const(batch), batch=True, layout=layout) for batch in inputs]
        xs = [x.gpu() for x in xs] if gpu else xs
        nodes = {k: lib.fn.external_source(source=_const(v), batch=True) for k, v in (args or {}).items()}
        nodes.update({k: lib.types.Constant(v) for k, v in (consts or {}).items()})
        pipe.set_outputs(lib.fn.multi_paste(*xs, **kw, **nodes))
    pipe.build()
    return pipe


def _run(lib, inputs, layout="HWC", args=None, consts=None, gpu=False, batch_size=None, **kw):
    (out,) = _pipe(lib, inputs, layout, args, consts, gpu, batch_size, **kw).run()
    return _arrays(out), out.layout()


def _parity(inputs, layout="HWC", args=None, consts=None, batch_size=None, **kw):
    """`fn.multi_paste` on Sluice and DALI: the same bytes and layout. Returns Sluice's."""
    ours, l1 = _run(sluice, inputs, layout, args, consts, batch_size=batch_size, **kw)
    theirs, l2 = _run(dali, inputs, layout, args, consts, batch_size=batch_size, **kw)
    assert l1 == l2
    _assert_same(ours, theirs, f"{sorted(kw)} {sorted(args or {})}")
    return ours, l1


FLOAT_SPECIALS = np.array([0x7FC12345, 0x7F800001, 0xFF812345, 0x7F800000, 0xFF800000, 0x80000000, 0, 1,
                           0x4F400000, 0xCF400000, 0x3FC00000, 0x40200000, 0xBFC00000], np.uint32).view(np.float32)


def _samples(shapes, dtype=np.uint8, seed=0):
    """Random samples: integers over the type's range, FLOAT with halves (rounding), values
    past every integer range and the specials sprinkled in."""
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if dtype == np.float32:
            x = (np.round(rng.standard_normal(s) * 400) / 2).astype(np.float32)
            flat = x.reshape(-1)
            flat[::5] = np.resize(FLOAT_SPECIALS, flat[::5].shape)
        else:
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max, s, endpoint=True).astype(dtype)
        out.append(x)
    return out


def _rows(v):
    return [np.array(r, np.int32).reshape(-1, 2) for r in v]


def _ids(v):
    return [np.array(r, np.int32) for r in v]


# ---------------------------------------------------------------- DALI's tests, ported
# dali/test/python/operator_1/test_multipaste.py with `nvidia.dali` -> `sluice`.

np_type_map = {
    types.UINT8: np.uint8,
    types.UINT16: np.uint16,
    types.UINT32: np.uint32,
    types.UINT64: np.uint64,
    types.FLOAT16: np.float16,
    types.FLOAT: np.float32,
    types.FLOAT64: np.float64,
    types.INT8: np.int8,
    types.INT16: np.int16,
    types.INT32: np.int32,
    types.INT64: np.int64,
}


def intersects(anchors1, shapes1, anchors2, shapes2):
    for i in range(len(anchors1)):
        if anchors1[i] + shapes1[i] <= anchors2[i] or anchors2[i] + shapes2[i] <= anchors1[i]:
            return False
    return True


def prepare_cuts(iters=4, batch_size=16, input_size=None, output_size=None, even_paste_count=False, no_intersections=False,
                 full_input=False, in_anchor_top_left=False, in_anchor_range=None, out_anchor_top_left=False,
                 out_anchor_range=None, out_of_bounds_count=0):
    # Those two will not work together
    assert out_of_bounds_count == 0 or not no_intersections

    in_idx_l = [np.zeros(shape=(0,), dtype=np.int32) for _ in range(batch_size)]
    in_anchors_l = [np.zeros(shape=(0, 2), dtype=np.int32) for _ in range(batch_size)]
    shapes_l = [np.zeros(shape=(0, 2), dtype=np.int32) for _ in range(batch_size)]
    out_anchors_l = [np.zeros(shape=(0, 2), dtype=np.int32) for _ in range(batch_size)]
    assert len(input_size) == len(output_size)
    dim = len(input_size)
    for i in range(batch_size):
        for j in range(iters):
            while True:
                in_idx = np.int32(np.random.randint(batch_size))
                out_idx = np.int32(i if even_paste_count else np.random.randint(batch_size))
                shape = ([np.int32(np.random.randint(min(input_size[i], output_size[i]) // (iters if no_intersections else 1)) + 1)
                          for i in range(dim)] if not full_input else input_size)

                if in_anchor_top_left:
                    in_anchor = [0] * dim
                elif in_anchor_range is not None:
                    in_anchor = [np.int32(np.random.randint(in_anchor_range[0][i], in_anchor_range[1][i])) for i in range(dim)]
                    if full_input:
                        shape = [np.int32(input_size[i] - in_anchor[i]) for i in range(dim)]
                else:
                    in_anchor = [np.int32(np.random.randint(input_size[i] - shape[i] + 1)) for i in range(dim)]

                if out_anchor_top_left:
                    out_anchor = [0] * dim
                elif out_anchor_range is not None:
                    out_anchor = [np.int32(np.random.randint(out_anchor_range[0][i], out_anchor_range[1][i])) for i in range(dim)]
                else:
                    out_anchor = [np.int32(np.random.randint(output_size[i] - shape[i] + 1)) for i in range(dim)]

                if no_intersections:
                    is_ok = True
                    for k in range(len(in_idx_l[out_idx])):
                        if intersects(out_anchors_l[out_idx][k], shapes_l[out_idx][k], out_anchor, shape):
                            is_ok = False
                            break
                    if not is_ok:
                        continue
                    break
                break

            in_idx_l[out_idx] = np.append(in_idx_l[out_idx], [in_idx], axis=0)
            in_anchors_l[out_idx] = np.append(in_anchors_l[out_idx], [in_anchor], axis=0)
            shapes_l[out_idx] = np.append(shapes_l[out_idx], [shape], axis=0)
            out_anchors_l[out_idx] = np.append(out_anchors_l[out_idx], [out_anchor], axis=0)
    for i in range(out_of_bounds_count):
        clip_out_idx = np.random.randint(batch_size)
        while len(in_idx_l[clip_out_idx]) == 0:
            clip_out_idx = np.random.randint(batch_size)
        clip_in_idx = np.random.randint(len(in_idx_l[clip_out_idx]))
        change_in = np.random.randint(2) == 0
        below_zero = np.random.randint(2) == 0
        change_dim_idx = np.random.randint(dim)
        if below_zero:
            anchors = in_anchors_l if change_in else out_anchors_l
            anchors[clip_out_idx][clip_in_idx][change_dim_idx] = np.int32(np.random.randint(-5, 0))
        else:
            anchors = in_anchors_l if change_in else out_anchors_l
            size = input_size if change_in else output_size
            anchors[clip_out_idx][clip_in_idx][change_dim_idx] = np.int32(
                size[change_dim_idx] - shapes_l[clip_out_idx][clip_in_idx][change_dim_idx] + np.random.randint(5) + 1)

    return in_idx_l, in_anchors_l, shapes_l, out_anchors_l


def get_pipeline(img_dir, batch_size=4, in_size=None, out_size=None, even_paste_count=False, use_positional=False, k=4,
                 dtype=types.UINT8, no_intersections=True, full_input=False, in_anchor_top_left=False, in_anchor_range=None,
                 out_anchor_top_left=False, out_anchor_range=None, use_gpu=False, num_out_of_bounds=0, use_shapes_rel=False,
                 use_in_anchors_rel=False, use_out_anchors_rel=False):
    pipe = Pipeline(batch_size=batch_size, num_threads=4, device_id=0 if use_gpu else None, seed=np.random.randint(12345))
    with pipe:
        input, _ = fn.readers.file(file_root=str(img_dir))
        decoded = fn.decoders.image(input, device="cpu", output_type=types.RGB)
        resized_cpu = fn.resize(decoded, resize_x=in_size[1], resize_y=in_size[0])
        resized = resized_cpu.gpu() if use_gpu else resized_cpu
        in_idx_l, in_anchors_l, shapes_l, out_anchors_l = prepare_cuts(
            k, batch_size, in_size, out_size, even_paste_count, no_intersections, full_input, in_anchor_top_left,
            in_anchor_range, out_anchor_top_left, out_anchor_range, num_out_of_bounds)
        in_idx = fn.external_source(lambda: in_idx_l)
        in_anchors = fn.external_source(lambda: in_anchors_l)
        shapes = fn.external_source(lambda: shapes_l)
        out_anchors = fn.external_source(lambda: out_anchors_l)
        kwargs = {"output_size": out_size, "dtype": dtype}
        if not use_positional:
            kwargs["in_ids"] = in_idx
            args = (resized,)
        else:
            assert even_paste_count
            assert len(in_idx_l) == batch_size

            def source(perm):
                def cb():
                    return perm

                return cb

            paste_count = len(in_idx_l[0])
            perms = [[sample[i] for sample in in_idx_l] for i in range(paste_count)]
            perms = [fn.external_source(source(perm)) for perm in perms]
            args = tuple(fn.permute_batch(resized, indices=perm) for perm in perms)

        if not full_input:
            if not use_shapes_rel:
                kwargs["shapes"] = shapes
            else:
                kwargs["shapes_rel"] = shapes / in_size

        if not in_anchor_top_left:
            if not use_in_anchors_rel:
                kwargs["in_anchors"] = in_anchors
            else:
                kwargs["in_anchors_rel"] = in_anchors / in_size

        if not out_anchor_top_left:
            if not use_out_anchors_rel:
                kwargs["out_anchors"] = out_anchors
            else:
                kwargs["out_anchors_rel"] = out_anchors / out_size

        pasted = fn.multi_paste(*args, **kwargs)
        pipe.set_outputs(pasted, resized_cpu)
    return pipe, in_idx_l, in_anchors_l, shapes_l, out_anchors_l


def verify_out_of_bounds(batch_size, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, in_size, out_size):
    for i in range(batch_size):
        for j, idx in enumerate(in_idx_l[i]):
            dim = len(in_anchors_l[i][j])
            for d in range(dim):
                if (in_anchors_l[i][j][d] < 0 or out_anchors_l[i][j][d] < 0 or in_anchors_l[i][j][d] + shapes_l[i][j][d] > in_size[d]
                        or out_anchors_l[i][j][d] + shapes_l[i][j][d] > out_size[d]):
                    return True
    return False


def manual_verify(batch_size, inp, output, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, out_size_l, dtype):
    for i in range(batch_size):
        ref_source_info = ";".join([inp[idx].source_info() for idx in in_idx_l[i]])
        assert output[i].source_info() == ref_source_info, f"{output[i].source_info()} == {ref_source_info}"
        out = output.at(i)
        out_size = out_size_l[i]
        assert out.shape == out_size, f"{out.shape} vs {out_size}"
        ref = np.zeros(out.shape)
        for j, idx in enumerate(in_idx_l[i]):
            roi_start = in_anchors_l[i][j]
            roi_end = roi_start + shapes_l[i][j]
            out_start = out_anchors_l[i][j]
            out_end = out_start + shapes_l[i][j]
            ref[out_start[0]:out_end[0], out_start[1]:out_end[1]] = inp.at(idx)[roi_start[0]:roi_end[0], roi_start[1]:roi_end[1]]
        ref = ref.astype(np_type_map[dtype])
        assert np.array_equal(out, ref)


def _dali_reference(images, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, out_size, dtype, full_input, in_top_left, out_top_left):
    """DALI's cpu multi_paste of `images` with the regions of a ported case (the `in_ids`
    form: the positional form pastes the same regions)."""
    args = {"in_ids": [np.asarray(v, np.int32) for v in in_idx_l]}
    if not full_input:
        args["shapes"] = [np.asarray(v, np.int32).reshape(-1, 2) for v in shapes_l]
    if not in_top_left:
        args["in_anchors"] = [np.asarray(v, np.int32).reshape(-1, 2) for v in in_anchors_l]
    if not out_top_left:
        args["out_anchors"] = [np.asarray(v, np.int32).reshape(-1, 2) for v in out_anchors_l]
    dali_dtype = getattr(dali.types, types.DALIDataType(dtype).name)
    return _run(dali, [images], "HWC", args, output_size=out_size, dtype=dali_dtype)[0]


def check_operator_multipaste(img_dir, bs, pastes, in_size, out_size, even_paste_count, use_positional, no_intersections,
                              full_input, in_anchor_top_left, in_anchor_range, out_anchor_top_left, out_anchor_range,
                              out_dtype, num_out_of_bounds, device, use_shapes_rel, use_in_anchors_rel, use_out_anchors_rel):
    pipe, in_idx_l, in_anchors_l, shapes_l, out_anchors_l = get_pipeline(
        img_dir, batch_size=bs, in_size=in_size, out_size=out_size, even_paste_count=even_paste_count,
        use_positional=use_positional, k=pastes, dtype=out_dtype, no_intersections=no_intersections,
        full_input=full_input, in_anchor_top_left=in_anchor_top_left, in_anchor_range=in_anchor_range,
        out_anchor_top_left=out_anchor_top_left, out_anchor_range=out_anchor_range, num_out_of_bounds=num_out_of_bounds,
        use_gpu=device == "gpu", use_shapes_rel=use_shapes_rel, use_in_anchors_rel=use_in_anchors_rel,
        use_out_anchors_rel=use_out_anchors_rel)
    try:
        result, input = pipe.run()
        r = result.as_cpu() if device == "gpu" else result
        assert not verify_out_of_bounds(bs, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, in_size, out_size)
        manual_verify(bs, input, r, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, [out_size + (3,)] * bs, out_dtype)
    except RuntimeError as e:
        use_rel = use_shapes_rel or use_in_anchors_rel or use_out_anchors_rel

        if "The pasted region must be within" in str(e) or (use_rel and "values must be floats in [0, 1] range," in str(e)):
            assert verify_out_of_bounds(bs, in_idx_l, in_anchors_l, shapes_l, out_anchors_l, in_size, out_size)
        else:
            assert False, str(e)
        return
    if dali is not None:
        theirs = _dali_reference(_arrays(input), in_idx_l, in_anchors_l, shapes_l, out_anchors_l, out_size, out_dtype,
                                 full_input, in_anchor_top_left, out_anchor_top_left)
        _assert_same(_arrays(r), theirs, f"{device} vs dali")


_in_anchor = ((10, 10), (20, 20))
# The arguments are: batch size, average pastes per output, input dimensions, output
# dimensions, same number of pastes per output, inputs as positional arguments, no
# intersections, "shapes" omitted, "in_anchors" omitted, in_anchor range, "out_anchors"
# omitted, out_anchor range, output dtype, number of out-of-bounds anchor changes.
MULTIPASTE_CASES = [
    [4, 2, (128, 256), (128, 128), False, False, False, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (256, 128), (128, 128), False, False, True, False, False, None, False, None, types.UINT8, 0],
    [8, 15, (256, 128), (128, 128), True, True, True, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (128, 128), (256, 128), True, False, False, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (128, 128), (256, 128), True, True, False, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (128, 128), (128, 256), True, False, True, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (128, 128), (128, 256), True, True, True, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (64, 64), (128, 128), False, False, False, True, False, None, False, None, types.UINT8, 0],
    [4, 2, (64, 64), (128, 128), False, False, False, True, False, _in_anchor, False, None, types.UINT8, 0],
    [4, 2, (64, 64), (128, 128), False, False, False, False, True, None, False, None, types.UINT8, 0],
    [4, 2, (64, 64), (128, 128), False, False, False, False, False, None, True, None, types.UINT8, 0],
    [4, 2, (128, 128), (128, 128), False, False, False, False, False, None, False, None, types.UINT8, 0],
    [4, 2, (128, 128), (128, 128), False, False, False, False, False, None, False, None, types.INT16, 0],
    [4, 2, (128, 128), (128, 128), False, False, False, False, False, None, False, None, types.INT32, 0],
    [4, 2, (128, 128), (128, 128), True, True, False, False, False, None, False, None, types.INT32, 0],
    [4, 2, (128, 128), (128, 128), False, False, False, False, False, None, False, None, types.FLOAT, 0],
    [4, 2, (128, 128), (128, 128), True, True, False, False, False, None, False, None, types.FLOAT, 0],
    [4, 2, (128, 256), (128, 128), False, False, False, False, False, None, False, None, types.UINT8, 4],
]
_rel_rng = np.random.default_rng(42)
# DALI draws the relative-argument switches once per case, for cpu and gpu alike.
MULTIPASTE_PARAMS = []
for _k, _t in enumerate(MULTIPASTE_CASES):
    _use_rel = tuple(bool(s) for s in _rel_rng.choice(2, size=3))
    for _device in ("cpu", "gpu"):
        MULTIPASTE_PARAMS.append(pytest.param(_k, _t, _device, _use_rel, id=f"{_k}-{_device}-rel{''.join(str(int(u)) for u in _use_rel)}"))


@pytest.mark.parametrize("case,t,device,use_rel", MULTIPASTE_PARAMS)
def test_operator_multipaste(small_images, case, t, device, use_rel):
    if device == "gpu":
        require_gpu()
    np.random.seed(1234 + case)  # DALI seeds the module once; here each case alone
    check_operator_multipaste(small_images, *t, device, *use_rel)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("use_uniform_shape", [True, False])
@pytest.mark.parametrize("use_in_idx", [True, False])
@pytest.mark.parametrize("output_size", [None, (501, 501)])
def test_input_shape_inference(device, use_uniform_shape, use_in_idx, output_size):
    if device == "gpu":
        require_gpu()

    def get_image(sample_info):
        if use_uniform_shape or sample_info.idx_in_batch % 2 == 0:
            shape = (401, 501, 3)
        else:
            shape = (301, 301, 3)
        return np.full(shape, sample_info.idx_in_batch, dtype=np.uint8)

    def get_indices(sample_info):
        idx_in_batch = sample_info.idx_in_batch
        return np.array([idx_in_batch // 2, idx_in_batch // 2 + 1], dtype=np.int32)

    batch_size = 8

    @pipeline_def(batch_size=batch_size, device_id=0 if device == "gpu" else None, num_threads=4)
    def pipeline():
        image = fn.external_source(get_image, batch=False)
        assert device in ("gpu", "cpu")
        image = image.gpu() if device == "gpu" else image
        if use_in_idx:
            args = tuple()
            kwargs = {"in_ids": fn.external_source(get_indices, batch=False), "output_size": output_size}
        else:
            image = fn.permute_batch(image, indices=fn.batch_permutation())
            args = (image,)
            kwargs = {"output_size": output_size}

        return fn.multi_paste(image, *args, **kwargs)

    p = pipeline()
    if not use_uniform_shape and output_size is None:
        with pytest.raises(RuntimeError, match="If the `output_size` is not specified, all the input samples must have the same shape."):
            p.run()
    else:
        expected_size = (output_size or (401, 501)) + (3,)
        (out,) = p.run()
        assert len(out) == batch_size
        for sample in out:
            assert tuple(sample.shape()) == expected_size, f"{sample.shape()} vs {expected_size}"


@pytest.mark.parametrize("out_of_bound_idx,batch_size,device", [(-1, 8, "cpu"), (-1, 8, "gpu"), (1, 1, "cpu"), (9, 8, "gpu")])
def test_out_of_bounds_idx(out_of_bound_idx, batch_size, device):
    if device == "gpu":
        require_gpu()
    rng = np.random.default_rng(42)
    bogus_idx = rng.choice(list(range(batch_size)))

    def get_image(sample_info):
        return np.full((101, 101, 3), sample_info.idx_in_batch, dtype=np.uint8)

    def get_indices(sample_info):
        idx_in_batch = sample_info.idx_in_batch
        indices = np.array([idx_in_batch // 2, idx_in_batch // 2 + 1], dtype=np.int32)
        if idx_in_batch == bogus_idx:
            indices[rng.choice([0, 1])] = out_of_bound_idx
        return indices

    @pipeline_def(batch_size=batch_size, device_id=0 if device == "gpu" else None, num_threads=4)
    def pipeline():
        image = fn.external_source(get_image, batch=False)
        in_ids = fn.external_source(get_indices, batch=False)
        assert device in ("gpu", "cpu")
        image = image.gpu() if device == "gpu" else image
        return fn.multi_paste(image, in_ids=in_ids)

    p = pipeline()
    with pytest.raises(RuntimeError, match=rf"The `in_idx` must be in range .* Got in_idx: {out_of_bound_idx}\. Input batch size is: {batch_size}\."):
        p.run()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("use_positional", [True, False])
def test_conflicting_channels(device, use_positional):
    if device == "gpu":
        require_gpu()
    batch_size = 16

    def shift_by_one(sample_info):
        return np.array((sample_info.idx_in_batch + 1) % batch_size, dtype=np.int32)

    def get_image(sample_info):
        idx_in_batch = sample_info.idx_in_batch
        num_channels = (idx_in_batch % 4) + 1
        return np.full((101, 101, num_channels), sample_info.idx_in_batch, dtype=np.uint8)

    def get_indices(sample_info):
        idx_in_batch = sample_info.idx_in_batch
        return np.array([idx_in_batch // 4 + i for i in range(4)], dtype=np.int32)

    @pipeline_def(batch_size=batch_size, device_id=0 if device == "gpu" else None, num_threads=4)
    def pipeline():
        image = fn.external_source(get_image, batch=False)
        assert device in ("gpu", "cpu")
        image = image.gpu() if device == "gpu" else image
        if not use_positional:
            in_ids = fn.external_source(get_indices, batch=False)
            args = tuple()
            kwargs = {"in_ids": in_ids}
        else:
            perm = fn.external_source(shift_by_one, batch=False)
            args = []
            kwargs = {}
            perm_image = image
            for _ in range(3):
                perm_image = fn.permute_batch(perm_image, indices=perm)
                args.append(perm_image)
            args = tuple(args)

        return fn.multi_paste(image, *args, **kwargs)

    p = pipeline()
    with pytest.raises(RuntimeError, match="All regions pasted into given output sample must have the same number of channels"):
        p.run()


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("use_positional", [True, False])
def test_var_channels(small_images, device, use_positional):
    if device == "gpu":
        require_gpu()
    num_regions = 9
    max_num_channels = 4
    batch_size = num_regions * max_num_channels
    num_iters = 2

    anchors = np.array([[0, 0], [0, 0.5], [0.5, 0], [0.5, 0.5], [0.25, 0.25], [0, 0], [0, 0.75], [0.75, 0], [0.75, 0.75]], dtype=np.float32)
    shapes = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.25, 0.25], [0.25, 0.25], [0.25, 0.25], [0.25, 0.25]],
                      dtype=np.float32)

    def in_ids_cb(sample_info):
        idx = sample_info.idx_in_batch
        group_idx = idx // num_regions
        offset = idx % num_regions
        in_ids = [(offset + i) % num_regions + group_idx * num_regions for i in range(num_regions)]
        return np.array(in_ids, dtype=np.int32)

    def num_channels_cb(sample_info):
        return np.int32(sample_info.idx_in_batch // num_regions + 1)

    def out_size_cb(sample_info):
        sizes = [(301, 273), (100, 200), (333, 555), (555, 333)]
        return np.array(sizes[sample_info.idx_in_batch // num_regions], dtype=np.int32)

    @pipeline_def(batch_size=batch_size, device_id=0 if device == "gpu" else None, num_threads=4, seed=42, enable_conditionals=True)
    def pipeline():
        in_out_size = fn.external_source(out_size_cb, batch=False)
        alpha = fn.random.uniform(range=[0, 255], shape=fn.cat(in_out_size, np.array([1], dtype=np.int32)), dtype=types.DALIDataType.UINT8)
        encoded, _ = fn.readers.file(file_root=str(small_images))
        image_base = fn.decoders.image(encoded, device="cpu", output_type=types.RGB)
        image_base = fn.resize(image_base, size=fn.cast(in_out_size, dtype=types.FLOAT))
        num_channels = fn.external_source(num_channels_cb, batch=False)
        if num_channels > 3:
            image_base = fn.cat(image_base, alpha, axis=-1)
        image_base = image_base[:, :, :num_channels]
        image = image_base.gpu() if device == "gpu" else image_base
        in_ids = fn.external_source(in_ids_cb, batch=False)
        if not use_positional:
            kwargs = {"in_ids": in_ids}
            args = (image,)
        else:
            kwargs = {}
            args = tuple(fn.permute_batch(image, indices=in_ids[i]) for i in range(num_regions))
        # DALI turns these arrays into constant nodes by itself; Sluice is given them as such.
        output = fn.multi_paste(*args, **kwargs, in_anchors_rel=types.Constant(anchors), out_anchors_rel=types.Constant(anchors),
                                shapes_rel=types.Constant(shapes), output_size=in_out_size)
        return output, image_base, in_ids, in_out_size, num_channels

    p = pipeline()
    for _ in range(num_iters):
        out_images, inp_images, idxs, out_sizes, num_channels = p.run()
        idxs = [np.array(sample) for sample in idxs]
        out_images = out_images.as_cpu() if device == "gpu" else out_images
        num_channels = [np.array(num_channel) for num_channel in num_channels]
        out_sizes = [np.array(size) for size in out_sizes]
        anchors_abs = [anchors] * batch_size
        anchors_abs = [np.int32(np.floor(anchor * size)) for anchor, size in zip(anchors_abs, out_sizes)]
        region_shapes_abs = [shapes] * batch_size
        region_shapes_abs = [np.int32(np.ceil(region_shape * size)) for region_shape, size in zip(region_shapes_abs, out_sizes)]
        out_sizes = [tuple(size) + (num_channel.item(),) for size, num_channel in zip(out_sizes, num_channels)]
        manual_verify(batch_size, inp_images, out_images, idxs, anchors_abs, region_shapes_abs, anchors_abs, out_sizes, types.UINT8)


# ---------------------------------------------------------------- parity with DALI
# Output sample 0: three overlapping regions from samples 2, 0, 2; sample 1: none; sample
# 2: one region; sample 3: the same source twice, the second over the first. Sources are
# 9 x 11 or 7 x 6; the canvas 10 x 12.
SHAPES = [(9, 11, 3), (7, 6, 3), (9, 11, 3), (7, 6, 3)]
REGION_ARGS = {
    "in_ids": _ids([[2, 0, 2], [], [1], [3, 3]]),
    "in_anchors": _rows([[[0, 0], [2, 3], [1, 1]], [], [[1, 1]], [[0, 0], [2, 1]]]),
    "shapes": _rows([[[7, 6], [5, 5], [8, 8]], [], [[4, 3]], [[7, 6], [3, 4]]]),
    "out_anchors": _rows([[[0, 0], [3, 4], [2, 2]], [], [[6, 8]], [[1, 2], [2, 5]]]),
}


@needs_dali
@pytest.mark.parametrize("in_type", NP_TYPES, ids=[TYPE_IDS[t] for t in NP_TYPES])
@pytest.mark.parametrize("out_type", [None] + NP_TYPES, ids=["same"] + [TYPE_IDS[t] for t in NP_TYPES])
def test_every_type_and_dtype_equal_dali(in_type, out_type):
    data = _samples(SHAPES, in_type, seed=7)
    kw = {"output_size": [10, 12]}
    if out_type is not None:
        kw["dtype"] = out_type
    out, layout = _parity([data], "HWC", REGION_ARGS, **kw)
    assert layout == "HWC"
    assert out[0].dtype == (out_type or in_type) and out[1].shape == (10, 12, 3)
    assert not out[1].any()  # nothing pasted: zeros


@needs_dali
def test_overlapping_regions_take_the_later_one():
    """The later region wins where regions overlap (DALI pastes in order), and elements no
    region covers are zero."""
    data = [np.full((4, 4, 1), 10 * (k + 1), np.uint8) for k in range(3)]
    args = {"in_ids": _ids([[0, 1, 2]] * 3), "shapes": _rows([[[3, 3], [2, 2], [1, 4]]] * 3), "out_anchors": _rows([[[0, 0], [1, 1], [2, 0]]] * 3)}
    out, _ = _parity([data], "HWC", args, output_size=[4, 5])
    want = np.array([[10, 10, 10, 0, 0], [10, 20, 20, 0, 0], [30, 30, 30, 30, 0], [0, 0, 0, 0, 0]], np.uint8)
    assert np.array_equal(out[0][..., 0], want)


@needs_dali
@pytest.mark.parametrize("seed", range(6))
def test_random_regions_equal_dali(seed):
    """Random absolute or relative arguments, per sample, in and out of order."""
    rng = np.random.default_rng(seed)
    bs = 5
    in_shapes = [(int(rng.integers(3, 20)), int(rng.integers(3, 20)), 2) for _ in range(bs)]
    canvas = (int(rng.integers(5, 25)), int(rng.integers(5, 25)))
    data = _samples(in_shapes, np.float32 if seed % 2 else np.uint8, seed)
    ids, ia, sh, oa, iar, shr, oar = [], [], [], [], [], [], []
    for _ in range(bs):
        n = int(rng.integers(0, 5))
        row = dict(ids=[], ia=[], sh=[], oa=[], iar=[], shr=[], oar=[])
        for _ in range(n):
            src = int(rng.integers(bs))
            h, w = in_shapes[src][:2]
            rh, rw = int(rng.integers(0, min(h, canvas[0]) + 1)), int(rng.integers(0, min(w, canvas[1]) + 1))
            row["ids"].append(src)
            row["ia"].append([int(rng.integers(0, h - rh + 1)), int(rng.integers(0, w - rw + 1))])
            row["sh"].append([rh, rw])
            row["oa"].append([int(rng.integers(0, canvas[0] - rh + 1)), int(rng.integers(0, canvas[1] - rw + 1))])
            # Relative values whose f32 rounding lands inside (the plan checks bounds).
            a = rng.random(2) * 0.5
            row["iar"].append(a)
            row["shr"].append(rng.random(2) * (1 - a) * 0.9)
            row["oar"].append(rng.random(2) * 0.4)
        ids.append(np.array(row["ids"], np.int32))
        for lst, key in ((ia, "ia"), (sh, "sh"), (oa, "oa")):
            lst.append(np.array(row[key], np.int32).reshape(-1, 2))
        for lst, key in ((iar, "iar"), (shr, "shr"), (oar, "oar")):
            lst.append(np.array(row[key], np.float32).reshape(-1, 2))
    absolute = {"in_ids": ids, "in_anchors": ia, "shapes": sh, "out_anchors": oa}
    _parity([data], "HWC", absolute, output_size=list(canvas))
    relative = {"in_ids": ids, "in_anchors_rel": iar, "shapes_rel": shr, "out_anchors_rel": oar}
    try:
        theirs = _run(dali, [data], "HWC", relative, output_size=list(canvas), dtype=dali.types.INT16)[0]
    except RuntimeError as e:
        # A relative region past the canvas: both refuse it.
        assert "The pasted region must be within" in str(e)
        with pytest.raises(errors.ArgumentError, match="The pasted region must be within"):
            _run(sluice, [data], "HWC", relative, output_size=list(canvas), dtype=np.int16)
        return
    ours = _run(sluice, [data], "HWC", relative, output_size=list(canvas), dtype=types.INT16)[0]
    _assert_same(ours, theirs, "relative")


@needs_dali
def test_relative_values_round_in_f32():
    """0.3 of 10 is 3 in f32 (not 4), 0.9 of 10 floors to 9: values read back from DALI."""
    data = [np.arange(100, dtype=np.uint8).reshape(10, 10, 1)] * 2
    f = lambda v: [np.array(x, np.float32).reshape(-1, 2) for x in v]  # noqa: E731
    args = {"in_ids": _ids([[0], [1]]), "shapes_rel": f([[0.3, 0.3], [0.7, 0.1]]), "in_anchors_rel": f([[0.7, 0.7], [0.3, 0.9]]),
            "out_anchors_rel": f([[0.3, 0.6], [0.29, 0.0]])}
    out, _ = _parity([data], "HWC", args)
    assert np.array_equal(out[0][3:6, 6:9, 0], data[0][7:10, 7:10, 0]) and np.count_nonzero(out[0]) == 9
    assert np.array_equal(out[1][2:9, 0, 0], data[0][3:10, 9, 0])


@needs_dali
@pytest.mark.parametrize("np_type", [np.uint8, np.float32], ids=["UINT8", "FLOAT"])
def test_positional_inputs_equal_dali(np_type):
    """Three positional inputs: sample i of each pasted into output sample i, in order."""
    shapes = [(8, 9, 2)] * 3
    inputs = [_samples(shapes, np_type, seed=k) for k in range(3)]
    args = {"in_anchors": _rows([[[0, 0], [1, 2], [3, 3]]] * 3), "shapes": _rows([[[6, 6], [4, 5], [5, 6]], [[8, 9], [1, 1], [2, 2]], [[0, 0], [7, 7], [5, 5]]]),
            "out_anchors": _rows([[[2, 3], [0, 0], [1, 1]], [[0, 0], [7, 8], [3, 3]], [[0, 0], [1, 2], [3, 4]]])}
    _parity(inputs, "HWC", args, dtype=np.int32)
    # Without arguments: each input whole over the previous one, the last one shows.
    out, _ = _parity(inputs, "HWC")
    _assert_same(out, inputs[2])


@needs_dali
def test_sequences_equal_dali():
    """FHWC from positional inputs: frame f of each input's sample pasted into frame f."""
    a = _samples([(3, 5, 6, 1), (2, 4, 4, 1)], np.uint8, seed=1)
    b = _samples([(3, 5, 6, 1), (2, 4, 4, 1)], np.uint8, seed=2)
    args = {"shapes": _rows([[[3, 4], [2, 2]], [[2, 2], [4, 4]]]), "in_anchors": _rows([[[1, 1], [0, 0]], [[0, 0], [0, 0]]]),
            "out_anchors": _rows([[[0, 0], [2, 3]], [[1, 1], [0, 0]]])}
    # DALI's cpu needs a batch_size of at least the batch's frames (it expands sequences).
    out, layout = _parity([a, b], "FHWC", args, batch_size=8, output_size=[6, 7])
    assert layout == "FHWC" and out[0].shape == (3, 6, 7, 1) and out[1].shape == (2, 6, 7, 1)


@needs_dali
def test_no_layout_output_size_and_empty_ids_equal_dali():
    data = _samples([(6, 7, 2), (5, 5, 3), (6, 7, 2)], np.int16, seed=3)
    # No layout: read as HWC, the output says HWC (as DALI's). output_size per sample; a
    # sample with no region has sample i's channels.
    args = {"in_ids": _ids([[2, 0], [], [1]]), "output_size": _ids([[8, 9], [3, 4], [6, 7]]),
            "out_anchors": _rows([[[0, 0], [2, 2]], [], [[1, 2]]])}
    out, layout = _parity([data], None, args)
    assert layout == "HWC" and [o.shape for o in out] == [(8, 9, 2), (3, 4, 3), (6, 7, 3)]
    # output_size with a third value (ignored, as DALI does).
    out, _ = _parity([data], "HWC", {"in_ids": _ids([[0], [], [1]])}, output_size=[9, 10, 5])
    assert [o.shape for o in out] == [(9, 10, 2), (9, 10, 3), (9, 10, 3)]


@needs_dali
def test_constants_given_as_constant_nodes_equal_dali():
    data = _samples([(6, 7, 3)] * 2, np.uint8, seed=4)
    consts = {"in_anchors": np.array([[1, 2]], np.int32), "shapes_rel": np.array([[0.5, 0.25]], np.float32)}
    out, _ = _parity([data], "HWC", consts=consts, dtype=np.float32)
    assert out[0].dtype == np.float32 and np.array_equal(out[0][:3, :2], data[0][1:4, 2:4].astype(np.float32))


# ---------------------------------------------------------------- errors
def _error_pipe(batches, args=None, layout="HWC", n_inputs=1, **kw):
    """A pipeline fed `batches` in turn (each input the same), with `args` (per argument,
    one list of per-sample arrays per batch)."""
    it = iter(batches)
    arg_its = {k: iter(v) for k, v in (args or {}).items()}
    pipe = Pipeline(batch_size=len(batches[0]), num_threads=2, device_id=None)
    with pipe:
        x = fn.external_source(source=lambda: next(it), batch=True, layout=layout)
        nodes = {k: fn.external_source(source=_next_of(i), batch=True) for k, i in arg_its.items()}
        pipe.set_outputs(fn.multi_paste(*([x] * n_inputs), **kw, **nodes))
    pipe.build()
    return pipe


IMG = np.arange(100, dtype=np.uint8).reshape(10, 10, 1)
GOOD_IDS = _ids([[0], [1]])
# id, argument inputs (bad batch, good batch), constants, error class, pattern
BAD_VALUES = [
    ("in_region_past_the_source", {"in_ids": [GOOD_IDS, GOOD_IDS], "in_anchors": [_rows([[[0, 0]], [[5, 5]]]), _rows([[[0, 0]], [[0, 0]]])],
                                   "shapes": [_rows([[[3, 3]], [[6, 3]]]), _rows([[[3, 3]], [[3, 3]]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'shapes'.*sample 1: The pasted region must be within input sample.*region at index 0"),
    ("negative_in_anchor", {"in_ids": [GOOD_IDS, GOOD_IDS], "in_anchors": [_rows([[[0, 0]], [[-1, 0]]]), _rows([[[0, 0]], [[0, 0]]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'in_anchors'.*sample 1: The pasted region must be within input sample"),
    ("out_region_past_the_canvas", {"in_ids": [GOOD_IDS, GOOD_IDS], "out_anchors": [_rows([[[0, 1]], [[0, 0]]]), _rows([[[0, 0]], [[0, 0]]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'out_anchors'.*sample 0: The pasted region must be within output bounds"),
    ("in_ids_past_the_batch", {"in_ids": [_ids([[0], [2]]), GOOD_IDS]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'in_ids'.*sample 1: The `in_idx` must be in range.*Got in_idx: 2\. Input batch size is: 2\."),
    ("negative_in_ids", {"in_ids": [_ids([[-1], [0]]), GOOD_IDS]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'in_ids'.*sample 0:.*Got in_idx: -1"),
    ("rows_of_another_count", {"in_ids": [GOOD_IDS, GOOD_IDS], "shapes": [_rows([[[1, 1]], [[1, 1], [2, 2]]]), _rows([[[1, 1]], [[2, 2]]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'shapes'.*sample 1: Unexpected shape.*\[1, 2\].*\[2, 2\]"),
    ("flat_rows", {"in_ids": [GOOD_IDS, GOOD_IDS], "shapes": [_ids([[1, 1], [2, 2]]), _rows([[[1, 1]], [[2, 2]]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'shapes'.*sample 0: Unexpected shape"),
    ("relative_past_one", {"in_ids": [GOOD_IDS, GOOD_IDS], "in_anchors_rel": [[np.zeros((1, 2), np.float32), np.array([[0.5, 1.5]], np.float32)],
                                                                            [np.zeros((1, 2), np.float32)] * 2]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'in_anchors_rel'.*sample 1: `in_anchors_rel` values must be floats in \[0, 1\] range, got 1\.5"),
    ("relative_nan", {"in_ids": [GOOD_IDS, GOOD_IDS], "shapes_rel": [[np.zeros((1, 2), np.float32), np.array([[0.5, np.nan]], np.float32)],
                                                                    [np.zeros((1, 2), np.float32)] * 2]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'shapes_rel'.*sample 1:.*got NaN"),
    ("negative_output_size", {"output_size": [_ids([[10, 10], [-1, 3]]), _ids([[10, 10], [10, 10]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'output_size'.*sample 1: The `output_size` must be non-negative"),
    ("short_output_size", {"output_size": [_ids([[10], [10, 10]]), _ids([[10, 10], [10, 10]])]}, {},
     errors.ArgumentError, r"(?s)multi_paste.*'output_size'.*sample 0: The `output_size` should be a tuple \(H, W\), got 1 elements"),
]


@pytest.mark.parametrize("args,kw,cls,pattern", [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_bad_values_name_operator_argument_and_sample_and_the_pipeline_goes_on(args, kw, cls, pattern):
    good = [IMG, IMG + 1]
    pipe = _error_pipe([good, good], args, **kw)
    with pytest.raises(cls, match=pattern):
        pipe.run()
    if any({np.ndim(x) for x in v[0]} != {np.ndim(x) for x in v[1]} for v in args.values()):
        return  # the external source itself refuses a change of dimensions between iterations
    # The next iteration (good values) runs.
    (out,) = pipe.run()
    got = _arrays(out)
    assert len(got) == 2 and got[0].shape[2] == 1
    if dali is not None:
        # DALI refuses the bad batch too (with RuntimeError).
        bad_args = {k: v[0] for k, v in args.items()}
        with pytest.raises(RuntimeError):
            _run(dali, [good], "HWC", bad_args, **kw)


# id, samples, layout, inputs, constants, argument inputs, error class, pattern
BAD_INPUTS = [
    ("sizes_differ_without_output_size", [IMG, IMG[:5]], "HWC", 1, {}, None, errors.ArgumentError,
     r"(?s)multi_paste.*'output_size'.*If the `output_size` is not specified, all the input samples must have the same shape.*10 x 10.*5 x 10"),
    ("channels_differ", [IMG, np.concatenate([IMG, IMG], 2)], "HWC", 1, {}, {"in_ids": _ids([[0, 1], [1]])}, errors.DataError,
     r"(?s)multi_paste.*sample 0.*same number of channels. Got different number of channels: 1, 2"),
    ("in_ids_with_two_inputs", [IMG, IMG], "HWC", 2, {}, {"in_ids": GOOD_IDS}, errors.ArgumentError,
     r"(?s)multi_paste.*'in_ids'.*exactly one positional input batch. Got: 2 inputs"),
    ("chw", [np.zeros((3, 4, 5), np.uint8)], "CHW", 1, {}, None, errors.ArgumentTypeError, r'(?s)multi_paste.*input 0: layout "CHW"'),
    ("two_dims", [np.zeros((4, 5), np.uint8)], "HW", 1, {}, None, errors.ArgumentTypeError, r'(?s)multi_paste.*input 0: layout "HW"'),
    ("uint16", [np.zeros((4, 5, 1), np.uint16)], "HWC", 1, {}, None, errors.DataError, r"(?s)multi_paste.*Unsupported input type: UINT16"),
    ("float64", [np.zeros((4, 5, 1), np.float64)], "HWC", 1, {}, None, errors.DataError, r"(?s)multi_paste.*Unsupported input type: FLOAT64"),
]


@pytest.mark.parametrize("data,layout,n_inputs,kw,args,cls,pattern", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_name_operator_and_the_pipeline_goes_on(data, layout, n_inputs, kw, args, cls, pattern):
    pipe = None
    with pytest.raises(cls, match=pattern):
        pipe = _error_pipe([data, data], {k: [v, v] for k, v in (args or {}).items()}, layout, n_inputs, **kw)
        pipe.run()
    if pipe is not None:
        # Raised by the iteration, not the pipeline: the next one raises the same again.
        with pytest.raises(cls, match=pattern):
            pipe.run()
    if dali is not None:
        # DALI raises too (a layout it does not take is a ValueError there, when built).
        with pytest.raises((RuntimeError, ValueError)):
            _run(dali, [data] * n_inputs, layout, args, **kw)


def test_exclusive_and_unsupported_arguments_fail_at_build():
    x = [IMG, IMG]
    with pytest.raises(errors.ArgumentError, match=r"(?s)multi_paste.*'in_anchors_rel'.*cannot be specified together"):
        _run(sluice, [x], "HWC", {"in_anchors": _rows([[[0, 0]]] * 2), "in_anchors_rel": [np.zeros((1, 2), np.float32)] * 2})
    with pytest.raises(errors.ArgumentError, match=r"(?s)multi_paste.*'dtype'.*Unsupported output type: UINT16"):
        _run(sluice, [x], dtype=types.UINT16)
    if dali is not None:
        with pytest.raises(RuntimeError):
            _run(dali, [x], "HWC", {"in_anchors": _rows([[[0, 0]]] * 2), "in_anchors_rel": [np.zeros((1, 2), np.float32)] * 2})
        with pytest.raises(RuntimeError):
            _run(dali, [x], dtype=dali.types.UINT16)


# ---------------------------------------------------------------- where Sluice departs from DALI
def test_in_ids_with_sequences_is_refused():
    """DALI indexes frames of the whole batch with `in_ids` on sequences (every output frame
    the same source frame); Sluice refuses and points to positional inputs."""
    seq = [np.zeros((3, 4, 5, 1), np.uint8)] * 2
    with pytest.raises(errors.ArgumentError, match=r"(?s)multi_paste.*'in_ids'.*sequence"):
        _run(sluice, [seq], "FHWC", {"in_ids": GOOD_IDS})


def test_flat_constant_lists_and_any_numeric_argument_inputs():
    data = _samples([(6, 7, 2)] * 2, np.uint8, seed=5)
    flat, _ = _run(sluice, [data], "HWC", in_ids=[1, 0], in_anchors=[1, 2, 0, 0], shapes=[3, 3, 2, 2], out_anchors=[0, 0, 3, 4])
    typed, _ = _run(sluice, [data], "HWC", {"in_ids": [np.array([1, 0], np.int64)] * 2,
                                            "in_anchors": [np.array([[1, 2], [0, 0]], np.float64)] * 2,
                                            "shapes": [np.array([[3, 3], [2, 2]], np.uint8)] * 2,
                                            "out_anchors": [np.array([[0, 0], [3, 4]], np.int16)] * 2})
    _assert_same(flat, typed)
    want = np.zeros((6, 7, 2), np.uint8)
    want[0:3, 0:3] = data[1][1:4, 2:5]
    want[3:5, 4:6] = data[0][0:2, 0:2]
    assert np.array_equal(flat[0], want)
    with pytest.raises(errors.ArgumentError, match=r"(?s)multi_paste.*'in_anchors'.*sample 0: region 0: 1\.5 is not a whole number"):
        _run(sluice, [data], "HWC", {"in_ids": [np.array([1], np.int32)] * 2, "in_anchors": [np.array([[1.5, 2]], np.float32)] * 2})


# ---------------------------------------------------------------- gpu equal to cpu
def _gpu_vs_cpu(inputs, layout="HWC", args=None, consts=None, batch_size=None, iters=2, **kw):
    cpu = _pipe(sluice, inputs, layout, args, consts, False, batch_size, **kw)
    gpu = _pipe(sluice, inputs, layout, args, consts, True, batch_size, **kw)
    for _ in range(iters):
        (c,) = cpu.run()
        (g,) = gpu.run()
        assert g.layout() == c.layout()
        _assert_same(_arrays(g), _arrays(c), f"gpu vs cpu {sorted(kw)}")


@pytest.mark.parametrize("in_type", NP_TYPES, ids=[TYPE_IDS[t] for t in NP_TYPES])
@pytest.mark.parametrize("out_type", NP_TYPES, ids=[TYPE_IDS[t] for t in NP_TYPES])
def test_gpu_every_type_pair_equals_cpu(in_type, out_type):
    require_gpu()
    _gpu_vs_cpu([_samples(SHAPES, in_type, seed=11)], "HWC", REGION_ARGS, output_size=[10, 12], dtype=out_type)


def test_gpu_positional_sequences_relative_and_large_equal_cpu():
    require_gpu()
    a = _samples([(3, 5, 6, 1), (2, 4, 4, 1)], np.float32, seed=1)
    b = _samples([(3, 5, 6, 1), (2, 4, 4, 1)], np.float32, seed=2)
    args = {"shapes": _rows([[[3, 4], [2, 2]], [[2, 2], [4, 4]]]), "in_anchors": _rows([[[1, 1], [0, 0]], [[0, 0], [0, 0]]]),
            "out_anchors": _rows([[[0, 0], [2, 3]], [[1, 1], [0, 0]]])}
    _gpu_vs_cpu([a, b], "FHWC", args, output_size=[6, 7], dtype=np.uint8)
    data = _samples([(300, 400, 3), (257, 129, 3), (300, 400, 3)], np.uint8, seed=3)
    f = lambda v: [np.array(x, np.float32).reshape(-1, 2) for x in v]  # noqa: E731
    rel = {"in_ids": _ids([[1, 0, 2], [2], []]), "in_anchors_rel": f([[[0, 0], [0.25, 0.5], [0.3, 0.3]], [[0.1, 0.5]], []]),
           "shapes_rel": f([[[1, 1], [0.5, 0.5], [0.6, 0.6]], [[0.8, 0.3]], []]), "out_anchors_rel": f([[[0, 0], [0.5, 0.4], [0.1, 0.2]], [[0, 0]], []])}
    _gpu_vs_cpu([data], "HWC", rel, output_size=[600, 500], dtype=np.float32)
    _gpu_vs_cpu([data[:1] * 3, data[2:] * 3], None, output_size=[300, 400])
