"""Checkpoints (`enable_checkpointing=True`, `pipe.checkpoint()`, `checkpoint=`): a pipeline
restored from a checkpoint returns exactly the batches the original returns next. Cases of
DALI's checkpointing/test_dali_checkpointing.py that need no GPU and only operators Sluice
has (file and numpy reader configurations, several readers, random operators, batch
permutations, random-crop decoding, external sources, several restores, the errors; stack and
cat from test_dali_stateless_operators), run against Sluice and DALI 2.4 with the same assertions,
plus Sluice's own: a different num_threads / prefetch depth / executor mode on restore,
conditionals, and the PyTorch iterator's checkpoints."""

import types as _pytypes
import warnings

import numpy as np
import pytest

from conftest import library_params

LIBS = library_params()


@pytest.fixture(params=LIBS)
def lib(request):
    m = request.param
    return _pytypes.SimpleNamespace(fn=m.fn, types=m.types, Pipeline=m.Pipeline, pipeline_def=m.pipeline_def,
                                    name=request.node.callspec.id.split("-")[0])


def _arrays(outs):
    return [[np.array(s) for s in (o.as_cpu() if hasattr(o, "as_cpu") else o)] for o in outs]


def _compare(a, b, iterations):
    for k in range(iterations):
        for x, y in zip(_arrays(a.run()), _arrays(b.run())):
            assert len(x) == len(y)
            for s, t in zip(x, y):
                np.testing.assert_array_equal(s, t, err_msg=f"iteration {k} after the checkpoint")


def _byte_files(tmp_path, count=23, classes=3):
    root = tmp_path / "files"
    for k in range(count):
        d = root / f"c{k % classes}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{k:03d}.jpg").write_bytes(bytes([k]) * (k + 1))
    return str(root)


READER_CASES = [
    dict(),
    dict(random_shuffle=True, initial_fill=5),
    dict(pad_last_batch=True),
    dict(random_shuffle=True, initial_fill=7, pad_last_batch=True, num_shards=3, shard_id=1),
    dict(num_shards=3, shard_id=2, stick_to_shard=True),
    dict(shuffle_after_epoch=True),
    dict(shuffle_after_epoch=True, num_shards=2, shard_id=1, pad_last_batch=True),
]


@pytest.mark.parametrize("warmup", [0, 3, 11])
@pytest.mark.parametrize("case", range(len(READER_CASES)))
def test_file_reader(lib, tmp_path, case, warmup):
    root = _byte_files(tmp_path)
    kw = READER_CASES[case]

    @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None, enable_checkpointing=True, seed=3)
    def pipe():
        data, label = lib.fn.readers.file(file_root=root, name="Reader", **kw)
        return data, label

    p = pipe()
    for _ in range(warmup):
        p.run()
    restored = pipe(checkpoint=p.checkpoint())
    _compare(p, restored, 14)


@pytest.mark.parametrize("op", ["uniform", "normal", "coin_flip", "choice"])
def test_random_operators(lib, op):
    make = {
        "uniform": lambda fn: fn.random.uniform(range=[-3, 7], shape=[3]),
        "normal": lambda fn: fn.random.normal(shape=[2, 2]),
        "coin_flip": lambda fn: fn.random.coin_flip(probability=0.3),
        "choice": lambda fn: fn.random.choice(5, p=[0.1, 0.2, 0.3, 0.2, 0.2]),
    }[op]

    @lib.pipeline_def(batch_size=5, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return make(lib.fn)

    p = pipe()
    for _ in range(4):
        p.run()
    _compare(p, pipe(checkpoint=p.checkpoint()), 5)


def test_image_random_crop_and_random_resized_crop(lib, mixed_root):
    @lib.pipeline_def(batch_size=6, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        jpegs, labels = lib.fn.readers.file(file_root=str(mixed_root), random_shuffle=True, name="Reader")
        img = lib.fn.decoders.image_random_crop(jpegs)
        return lib.fn.random_resized_crop(img, size=(42, 24)), labels

    p = pipe()
    for _ in range(5):
        p.run()
    _compare(p, pipe(checkpoint=p.checkpoint()), 4)


# DALI's test_numpy_reader CPU cases: (num_epochs, batch_size, shard_id, num_shards,
# random_shuffle, shuffle_after_epoch, stick_to_shard, pad_last_batch, iters_into_epoch).
# DALI reads MRI slices from DALI_extra; here 27 small arrays of varying shapes.
NUMPY_CASES = [
    (0, 1, 0, 1, False, False, False, False, None),
    (5, 2, 4, 7, False, False, False, True, 1),
    (4, 4, 0, 2, False, False, True, False, 2),
    (3, 8, 4, 6, False, False, True, True, 3),
    (6, 1, 2, 3, False, True, False, False, 4),
    (5, 2, 2, 5, False, True, False, True, 3),
    (4, 4, 3, 4, True, False, False, False, 2),
    (3, 8, 1, 4, True, False, False, True, 1),
    (2, 1, 1, 2, True, False, True, False, None),
    (0, 2, 0, 1, True, False, True, True, 2),
]


def _iterations_in_epoch(p, batch_size, num_shards):
    return (p.reader_meta()["Reader"]["epoch_size_padded"] // num_shards + batch_size - 1) // batch_size


@pytest.mark.parametrize("case", NUMPY_CASES, ids=[str(i) for i in range(len(NUMPY_CASES))])
def test_numpy_reader(lib, tmp_path, case):
    epochs, batch, shard_id, shards, shuffle, after_epoch, stick, pad, into = case
    rng = np.random.default_rng(7)
    for k in range(27):
        np.save(str(tmp_path / f"slice_{k:02d}.npy"), rng.integers(0, 1000, (3 + k % 4, 5), dtype=np.int16))

    @lib.pipeline_def(batch_size=batch, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return lib.fn.readers.numpy(name="Reader", file_root=str(tmp_path), pad_last_batch=pad, random_shuffle=shuffle,
                                    shuffle_after_epoch=after_epoch, shard_id=shard_id, num_shards=shards,
                                    stick_to_shard=stick)

    p = pipe()
    per_epoch = _iterations_in_epoch(p, batch, shards)
    for epoch in range(epochs):
        for i in range(per_epoch):
            p.run()
            if into is not None and epoch == epochs - 1 and i == into - 1:
                break
    _compare(p, pipe(checkpoint=p.checkpoint()), (shards + 1) * per_epoch)


@pytest.mark.parametrize("warmup", range(0, 9, 2))
def test_multiple_readers(lib, tmp_path, warmup):
    """DALI's test_multiple_readers: two readers of different epoch sizes in one pipeline."""
    root = _byte_files(tmp_path, count=3, classes=1)
    files = sorted(str(f) for f in (tmp_path / "files" / "c0").iterdir())

    @lib.pipeline_def(batch_size=1, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        a, _ = lib.fn.readers.file(name="Reader1", files=files[:2], pad_last_batch=True, random_shuffle=True)
        b, _ = lib.fn.readers.file(name="Reader2", files=files[:3], pad_last_batch=True, random_shuffle=True)
        return a, b

    assert root
    p = pipe()
    for _ in range(warmup):
        p.run()
    _compare(p, pipe(checkpoint=p.checkpoint()), 20)


def test_batch_permutation(lib):
    """DALI's test_batch_permutation (check_no_input_operator)."""
    @lib.pipeline_def(batch_size=10, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        return lib.fn.batch_permutation()

    p = pipe()
    for _ in range(4):
        p.run()
    _compare(p, pipe(checkpoint=p.checkpoint()), 5)


@pytest.mark.parametrize("join", ["stack", "cat"])
def test_tensor_join_is_stateless(lib, join):
    """DALI's test_dali_stateless_operators test_tensor_join_stateless (cpu): a used pipeline
    and a fresh one give the same batches."""
    rng = np.random.default_rng(1234)
    batch = [rng.integers(255, size=(40, 60, 3), dtype=np.uint8) for _ in range(8)]

    @lib.pipeline_def(batch_size=8, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        x = lib.fn.external_source(source=lambda: batch, layout="HWC", batch=True)
        return getattr(lib.fn, join)(x, x, x)

    p = pipe()
    for _ in range(10):
        p.run()
    _compare(p, pipe(), 10)


def test_multiple_restores(lib, tmp_path):
    root = _byte_files(tmp_path)

    @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        data, label = lib.fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        return label, lib.fn.random.uniform(range=[0, 1])

    p1 = pipe()
    for _ in range(4):
        p1.run()
    p2 = pipe(checkpoint=p1.checkpoint())
    for _ in range(5):
        p1.run(), p2.run()
    p3 = pipe(checkpoint=p2.checkpoint())
    _compare(p1, p3, 6)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("mode", ["idx", "batch_info", "sample_info"])
@pytest.mark.parametrize("warmup", [0, 2, 4])
def test_external_source(lib, mode, warmup, parallel):
    epoch, bs = 3, 4

    def run_and_reset(p):
        try:
            return _arrays(p.run())
        except StopIteration:
            p.reset()
            return "end"

    source = {"idx": _IdxSource(epoch), "batch_info": _BatchInfoSource(epoch), "sample_info": _SampleSource(epoch, bs)}[mode]
    kw = dict(batch=mode != "sample_info", batch_info=mode == "batch_info")
    if parallel:
        kw.update(parallel=True)

    @lib.pipeline_def(batch_size=bs, num_threads=2, device_id=None, enable_checkpointing=True,
                      py_num_workers=2, py_start_method="spawn")
    def pipe():
        return lib.fn.external_source(source=source, **kw)

    p = pipe()
    for _ in range(warmup):
        run_and_reset(p)
    restored = pipe(checkpoint=p.checkpoint())
    for _ in range(6):
        a, b = run_and_reset(p), run_and_reset(restored)
        if a == "end" or b == "end":
            assert a == b
            continue
        for x, y in zip(a, b):
            for s, t in zip(x, y):
                np.testing.assert_array_equal(s, t)


class _IdxSource:
    def __init__(self, epoch):
        self.epoch = epoch

    def __call__(self, i):
        if i >= self.epoch:
            raise StopIteration
        return [np.full((2,), i * 10 + k, np.int32) for k in range(4)]


class _BatchInfoSource:
    def __init__(self, epoch):
        self.epoch = epoch

    def __call__(self, info):
        if info.iteration >= self.epoch:
            raise StopIteration
        return [np.full((2,), info.iteration * 10 + info.epoch_idx * 100 + k, np.int32) for k in range(4)]


class _SampleSource:
    def __init__(self, epoch, bs):
        self.n = epoch * bs

    def __call__(self, info):
        if info.idx_in_epoch >= self.n:
            raise StopIteration
        return np.full((2,), info.idx_in_epoch + info.epoch_idx * 100, np.int32)


@pytest.mark.parametrize("kind", ["iterable", "generator", "no_argument"])
def test_external_source_whose_position_a_checkpoint_cannot_hold_warns(lib, kind):
    def gen():
        yield [np.zeros(2, np.int32)] * 2

    source = {"iterable": [[np.zeros(2, np.int32)] * 2], "generator": gen,
              "no_argument": lambda: [np.zeros(2, np.int32)] * 2}[kind]
    pipe = lib.Pipeline(2, 1, None, enable_checkpointing=True)
    with pipe:
        pipe.set_outputs(lib.fn.external_source(source=source))
    with pytest.warns(UserWarning, match="doesn't capture state of such 'source'"):
        pipe.build()


def test_errors(lib):
    pipe = lib.Pipeline(2, 1, None)
    with pipe:
        pipe.set_outputs(lib.fn.random.uniform())
    with pytest.raises(RuntimeError, match="Cannot save the checkpoint. The `enable_checkpointing` was not specified"):
        pipe.checkpoint()

    good = lib.Pipeline(2, 1, None, enable_checkpointing=True)
    with good:
        good.set_outputs(lib.fn.random.uniform())
    cpt = good.checkpoint()
    assert isinstance(cpt, bytes)
    restore = lib.Pipeline(2, 1, None, checkpoint=cpt)
    with restore:
        restore.set_outputs(lib.fn.random.uniform())
    with pytest.raises(RuntimeError, match="Cannot restore checkpoint. The `enable_checkpointing` was not specified"):
        restore.build()

    garbage = lib.Pipeline(2, 1, None, enable_checkpointing=True, checkpoint=b"garbage")
    with garbage:
        garbage.set_outputs(lib.fn.random.uniform())
    with pytest.raises(RuntimeError, match="(?i)deserialize checkpoint"):
        garbage.build()


def test_a_checkpoint_file_and_the_restored_pipelines_own_checkpoint(lib, tmp_path):
    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, enable_checkpointing=True)
    def pipe():
        return lib.fn.random.uniform(range=[0, 1])

    p = pipe()
    for _ in range(3):
        p.run()
    path = tmp_path / "cpt"
    cpt = p.checkpoint(str(path))
    assert path.read_bytes() == cpt
    q = pipe(checkpoint=path.read_bytes())
    assert not q.is_restored_from_checkpoint
    assert q.checkpoint() == cpt  # before any run: the state it was restored to
    assert q.is_restored_from_checkpoint
    _compare(p, q, 3)


# ----------------------------------------------------------------------------- Sluice's own

def test_restore_with_other_threads_prefetch_and_executor(tmp_path):
    import sluice

    root = _byte_files(tmp_path, count=31)

    @sluice.pipeline_def(batch_size=4, device_id=None, enable_checkpointing=True, seed=17)
    def pipe():
        data, label = sluice.fn.readers.file(file_root=root, random_shuffle=True, initial_fill=9, name="Reader")
        return label, sluice.fn.random.normal(shape=[2]), sluice.fn.random.coin_flip()

    p = pipe(num_threads=1, prefetch_queue_depth=1)
    for _ in range(9):
        p.run()
    cpt = p.checkpoint()
    for kw in (dict(num_threads=2), dict(num_threads=2, prefetch_queue_depth=3),
               dict(num_threads=1, exec_async=False, exec_pipelined=False)):
        ref = pipe(num_threads=1, prefetch_queue_depth=1)
        for _ in range(9):
            ref.run()
        _compare(ref, pipe(checkpoint=cpt, **kw), 8)


def test_conditionals_with_random_branches_resume_exactly():
    import sluice
    from sluice import fn

    @sluice.pipeline_def(batch_size=6, num_threads=2, device_id=None, enable_checkpointing=True,
                         enable_conditionals=True)
    def pipe():
        x = fn.random.uniform(range=[0, 10], shape=[3])
        if fn.random.coin_flip():
            out = fn.random.normal(mean=fn.cast(x[0], dtype=sluice.types.FLOAT))
        else:
            out = x[1] - 100
        return out

    p = pipe()
    for _ in range(5):
        p.run()
    _compare(p, pipe(checkpoint=p.checkpoint()), 5)


def test_mismatched_readers_are_refused(tmp_path):
    import sluice

    root = _byte_files(tmp_path)

    def make(names):
        @sluice.pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True)
        def pipe():
            return tuple(sluice.fn.readers.file(file_root=root, name=n)[1] for n in names)
        return pipe

    cpt = make(["A"])().checkpoint()
    with pytest.raises(RuntimeError, match="doesn't recognize \"A\""):
        make(["B"])(checkpoint=cpt).build()
    with pytest.raises(RuntimeError, match="There's no checkpoint for operator \"B\""):
        make(["A", "B"])(checkpoint=cpt).build()


def test_pytorch_iterator_checkpoints(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    import sluice
    from sluice.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    root = _byte_files(tmp_path, count=26)

    @sluice.pipeline_def(batch_size=4, num_threads=2, device_id=None, enable_checkpointing=True)
    def pipe():
        _, label = sluice.fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        return label

    def iterator(p):
        return DALIGenericIterator(p, ["label"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                   auto_reset=True)

    it = iterator(pipe())
    first = [b[0]["label"].tolist() for b in it]  # one epoch
    for _ in range(3):
        next(it)
    cpts = it.checkpoints()
    rest = [b[0]["label"].tolist() for b in it]
    it2 = iterator(pipe(checkpoint=cpts[0]))
    assert [b[0]["label"].tolist() for b in it2] == rest
    # torchdata style: state_dict / load_state_dict in place
    it3 = iterator(pipe())
    it3.load_state_dict({"checkpoints": cpts})
    assert [b[0]["label"].tolist() for b in it3] == rest
    assert len(first) == 7
