"""The three ways to define a pipeline, and the Pipeline object's API (run, outputs, epoch
size, reader metadata, DOT export, devices, seeds, executor modes)."""

import numpy as np
import sluice
import pytest

from sluice import Pipeline, TensorListCPU, fn, ops, pipeline_def, types


def snapshot(outputs):
    """A run()'s outputs as plain Python data: per output, per sample (dtype, shape, bytes)."""
    return [[(a.dtype.str, a.shape, a.tobytes()) for a in (np.array(tl.at(i)) for i in range(len(tl)))]
            for tl in outputs]


def run_n(pipe, n):
    return [snapshot(pipe.run()) for _ in range(n)]


# --------------------------------------------------------------------------- 1. pipeline_def
def test_pipeline_def_decorator_defaults_and_call_overrides(tiny_root):
    seen = []

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=11)
    def pipe_fn(hi):
        seen.append(Pipeline.current())
        u = fn.random.uniform(range=(0.0, hi))
        jpegs, labels = fn.readers.file(file_root=str(tiny_root))
        return u, labels

    default = pipe_fn(5.0)
    assert isinstance(default, Pipeline)
    assert seen[-1] is default, "Pipeline.current() inside the definition must be the pipeline being built"
    assert Pipeline.current() is None
    assert (default.batch_size, default.num_threads, default.device_id, default.seed) == (2, 1, None, 11)

    over = pipe_fn(hi=0.5, batch_size=5, num_threads=2, seed=12)
    assert seen[-1] is over
    assert (over.batch_size, over.num_threads, over.device_id, over.seed) == (5, 2, None, 12)

    u, labels = default.run()
    assert len(u) == 2 and len(labels) == 2
    u, labels = over.run()
    assert len(u) == 5 and len(labels) == 5
    vals = u.as_array()
    assert vals.dtype == np.float32 and ((vals >= 0) & (vals < 0.5)).all()  # the function argument reached the graph


# --------------------------------------------------------------------------- 2. with pipe: + set_outputs
def test_with_pipe_and_set_outputs(tiny_root):
    pipe = Pipeline(batch_size=3, num_threads=1, device_id=None, seed=3)
    assert Pipeline.current() is None
    with pipe:
        assert Pipeline.current() is pipe
        _, labels = fn.readers.file(file_root=str(tiny_root))
        flip = fn.random.coin_flip(probability=1.0)
        pipe.set_outputs(labels, flip)
    assert Pipeline.current() is None
    labels, flip = pipe.run()
    assert [labels.at(i).item() for i in range(3)] == [0, 0, 0]
    assert [int(flip.at(i)) for i in range(3)] == [1, 1, 1]


# --------------------------------------------------------------------------- 3. subclass + legacy ops
class LegacyPipe(Pipeline):
    def __init__(self, root, decoder_cls, **kw):
        super().__init__(batch_size=2, num_threads=2, device_id=None, seed=7, **kw)
        self.reader = ops.FileReader(file_root=str(root))
        self.decode = decoder_cls(device="cpu", output_type=types.RGB)
        self.uniform = ops.Uniform(range=(1.0, 2.0))
        self.coin = ops.CoinFlip(probability=0.0)
        self.setup_calls = 0
        self.current_in_define = None

    def define_graph(self):
        self.current_in_define = Pipeline.current()
        jpegs, labels = self.reader()
        return self.decode(jpegs), labels, self.uniform(), self.coin()

    def iter_setup(self):
        self.setup_calls += 1


@pytest.mark.parametrize("decoder_cls", [ops.ImageDecoder, ops.HostDecoder, ops.decoders.Image],
                         ids=["ImageDecoder", "HostDecoder", "decoders.Image"])
def test_subclass_define_graph_legacy_ops(small_images, decoder_cls):
    pipe = LegacyPipe(small_images, decoder_cls)
    images, labels, u, c = pipe.run()
    assert pipe.current_in_define is pipe
    # Once per scheduled iteration, as DALI: the first run schedules prefetch_queue_depth (2).
    assert pipe.setup_calls == 2
    pipe.run()
    assert pipe.setup_calls == 3
    assert images.layout() == "HWC" and all(len(s) == 3 and s[2] == 3 for s in images.shape())
    assert [labels.at(i).item() for i in range(2)] == [0, 0]
    assert ((u.as_array() >= 1.0) & (u.as_array() < 2.0)).all()
    assert (c.as_array() == 0).all()


def test_legacy_decoders_are_the_same_operator(small_images):
    results = [snapshot(LegacyPipe(small_images, cls).run()) for cls in (ops.ImageDecoder, ops.HostDecoder, ops.decoders.Image)]
    assert results[0] == results[1] == results[2]


# --------------------------------------------------------------------------- build / run / outputs
@pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=21)
def shuffled_pipe(root):
    jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, initial_fill=8, name="Reader")
    return jpegs, labels, fn.random.uniform(range=(-1, 1)), fn.random.coin_flip()


def test_build_is_optional(tiny_root):
    a = shuffled_pipe(tiny_root)
    b = shuffled_pipe(tiny_root)
    b.build()
    b.build()  # idempotent
    assert run_n(a, 3) == run_n(b, 3)


def test_run_returns_tuple_of_tensorlistcpu(tiny_root):
    out = shuffled_pipe(tiny_root).run()
    assert isinstance(out, tuple) and len(out) == 4
    assert all(isinstance(t, TensorListCPU) and len(t) == 4 for t in out)


def test_schedule_run_and_outputs_match_run(tiny_root):
    a = shuffled_pipe(tiny_root)
    b = shuffled_pipe(tiny_root)
    b.schedule_run()
    got = []
    for _ in range(3):
        out = b.outputs()
        assert isinstance(out, tuple) and all(isinstance(t, TensorListCPU) for t in out)
        got.append(snapshot(out))
        b.release_outputs()
    assert got == run_n(a, 3)


def test_epoch_size_and_reader_meta(tiny_root):
    pipe = shuffled_pipe(tiny_root)
    assert pipe.epoch_size("Reader") == 21
    assert pipe.epoch_size() == {"Reader": 21}
    meta = pipe.reader_meta("Reader")
    assert meta["epoch_size"] == 21
    assert meta["epoch_size_padded"] == 21
    assert meta["number_of_shards"] == 1 and meta["shard_id"] == 0
    assert meta["pad_last_batch"] is False or meta["pad_last_batch"] == 0
    assert pipe.reader_meta() == {"Reader": meta}
    with pytest.raises(KeyError, match="nope"):
        pipe.reader_meta("nope")


@pytest.mark.parametrize("num_shards,batch_size", [(2, 4), (3, 4), (4, 2), (1, 5)])
def test_reader_meta_sharded_padded(tiny_root, num_shards, batch_size):
    def meta_of(fn_mod, pdef):
        @pdef(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
        def p():
            _, labels = fn_mod.readers.file(file_root=str(tiny_root), num_shards=num_shards, shard_id=num_shards - 1,
                                            pad_last_batch=True, name="R")
            return labels

        pipe = p()
        pipe.build()
        return pipe.reader_meta("R")

    meta = meta_of(fn, pipeline_def)
    assert meta["epoch_size"] == 21
    assert meta["number_of_shards"] == num_shards and meta["shard_id"] == num_shards - 1
    assert bool(meta["pad_last_batch"]) is True
    # as DALI: every shard padded to the size of the largest one
    assert meta["epoch_size_padded"] == num_shards * -(-21 // num_shards)
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dfn
    assert meta == meta_of(dfn, dali.pipeline_def)


def test_save_graph_to_dot_file_lists_operators_and_prunes(tiny_root, small_images, tmp_path):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, labels = fn.readers.file(file_root=str(small_images), name="TheReader")
        fn.decoders.image(jpegs, name="UnusedDecoder")  # reaches no output -> pruned
        fn.random.uniform(range=(0, 1), name="UnusedUniform")
        flip = fn.random.coin_flip(name="TheCoin")
        return labels, flip

    pipe = p()
    dot = tmp_path / "graph.dot"
    pipe.save_graph_to_dot_file(str(dot))
    text = dot.read_text()
    assert text.lstrip().startswith("digraph")
    assert "TheReader" in text and "readers.file" in text
    assert "TheCoin" in text and "random.coin_flip" in text
    assert "UnusedDecoder" not in text and "decoders.image" not in text
    assert "UnusedUniform" not in text and "random.uniform" not in text
    # and the pruned pipeline still runs
    labels, flip = pipe.run()
    assert len(labels) == 2


# --------------------------------------------------------------------------- devices
@pipeline_def(batch_size=3, num_threads=1, seed=5)
def device_pipe(root):
    _, labels = fn.readers.file(file_root=str(root))
    return labels, fn.random.uniform(range=(0, 1))


def test_device_id_none_is_cpu_only(tiny_root):
    pipe = device_pipe(tiny_root, device_id=None)
    assert pipe.device_id is None
    labels, u = pipe.run()
    assert len(labels) == 3 and u.as_array().shape == (3,)


def test_device_id_0_runs_cpu_only_pipeline(tiny_root):
    ref = run_n(device_pipe(tiny_root, device_id=None), 2)
    pipe = device_pipe(tiny_root, device_id=0)
    assert pipe.device_id == 0
    assert run_n(pipe, 2) == ref


def test_gpu_node_without_device_is_error_at_build():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        return fn.random.uniform(range=(0, 1)).gpu()

    pipe = p()  # definition itself is fine
    with pytest.raises(sluice.errors.GraphError):
        pipe.build()


def test_gpu_node_without_device_error_is_clear():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        return fn.random.uniform(range=(0, 1)).gpu()

    with pytest.raises(sluice.errors.GraphError) as e:
        p().build()
    msg = str(e.value).lower()
    assert "gpu" in msg and ("device_id" in msg or "cpu-only" in msg or "cpu only" in msg)


# --------------------------------------------------------------------------- seeds / executors
@pytest.mark.parametrize("seed", [1234])
def test_same_seed_same_batches_across_num_threads(tiny_root, seed):
    runs = [run_n(shuffled_pipe(tiny_root, num_threads=nt, seed=seed), 6) for nt in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2]
    # the random streams really are random: not all samples identical within a batch
    u = [s[2] for s in runs[0]]
    assert len({b for batch in u for (_, _, b) in batch}) > 4


def test_different_seed_different_batches(tiny_root):
    a = run_n(shuffled_pipe(tiny_root, seed=1), 4)
    b = run_n(shuffled_pipe(tiny_root, seed=2), 4)
    for k, what in enumerate(["jpegs", "labels", "uniform", "coin_flip"]):
        if what == "labels":
            continue  # only 3 labels: may coincide by chance
        assert [r[k] for r in a] != [r[k] for r in b], f"{what} did not change with the seed"


def test_reader_shuffle_depends_on_seed_only(tiny_root):
    def order(seed, nt):
        pipe = shuffled_pipe(tiny_root, seed=seed, num_threads=nt)
        names = []
        for _ in range(5):
            jpegs = pipe.run()[0]
            names += [jpegs.source_info(i) for i in range(len(jpegs))]
        return names

    o1 = order(5, 1)
    assert o1 == order(5, 4)
    assert o1 != order(6, 1)
    assert o1[:21] != sorted(o1[:21])  # actually shuffled


@pytest.mark.parametrize("mode", [dict(exec_async=False), dict(exec_pipelined=False),
                                  dict(exec_async=False, exec_pipelined=False),
                                  dict(prefetch_queue_depth={"cpu_size": 3, "gpu_size": 2}),
                                  dict(prefetch_queue_depth=1)],
                         ids=["sync", "not-pipelined", "sync-not-pipelined", "prefetch-dict", "prefetch-1"])
def test_executor_modes_give_same_batches(tiny_root, mode):
    ref = run_n(shuffled_pipe(tiny_root), 7)
    pipe = shuffled_pipe(tiny_root, **mode)
    assert run_n(pipe, 7) == ref


def test_prefetch_queue_depth_dict_accepted(tiny_root):
    pipe = shuffled_pipe(tiny_root, prefetch_queue_depth={"cpu_size": 4, "gpu_size": 2})
    assert pipe.prefetch_queue_depth == 4
    assert len(pipe.run()[0]) == 4


# --------------------------------------------------------------------------- old programs
class SeedTrainPipe(Pipeline):
    """The training pipeline of an old DALI tutorial (../shared/seeds/000), CPU-only: a
    reader named when called (`self.input(name="Reader")`), `image_type` and `output_dtype`
    on crop_mirror_normalize."""

    def __init__(self, root):
        super().__init__(2, 2, None, seed=12)
        self.input = ops.FileReader(file_root=str(root), shard_id=0, num_shards=1, random_shuffle=True)
        self.decode = ops.ImageDecoder(device="cpu", output_type=types.RGB)
        self.res = ops.RandomResizedCrop(size=64, random_area=[0.08, 1.25])
        self.cmnp = ops.CropMirrorNormalize(output_dtype=types.FLOAT, output_layout=types.NCHW, image_type=types.RGB,
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        return [self.cmnp(self.res(self.decode(self.jpegs)), mirror=rng), self.labels]


def test_old_tutorial_pipeline_runs_with_dalis_deprecation_warnings(small_images):
    with pytest.warns(DeprecationWarning) as w:
        pipe = SeedTrainPipe(small_images)
    messages = [str(x.message) for x in w]
    assert "The argument `image_type` is no longer used and will be removed in a future release." in messages
    assert "The argument `output_dtype` is a deprecated alias for `dtype`. Use `dtype` instead." in messages
    pipe.build()
    assert pipe.epoch_size("Reader") > 0
    images, labels = pipe.run()
    assert images.as_array().shape == (2, 3, 64, 64) and images.as_array().dtype == np.float32


def test_numpy_integers_as_pipeline_parameters(tiny_root):
    pipe = Pipeline(batch_size=np.int64(3), num_threads=np.int32(1), device_id=None, seed=np.uint16(5))
    with pipe:
        jpegs, labels = fn.readers.file(file_root=str(tiny_root))
        pipe.set_outputs(labels)
    assert pipe.batch_size == 3 and len(pipe.run()[0]) == 3


def test_gpu_of_a_gpu_node_is_the_node_itself():
    """As DALI's DataNode.gpu(): a node already on the GPU is returned as it is (defining the
    graph needs no GPU); a conditional merge of a GPU branch with a CPU branch relies on it."""
    pipe = sluice.Pipeline(batch_size=2, num_threads=1, device_id=0)
    with pipe:
        x = sluice.fn.external_source(source=lambda: [np.zeros(3, np.uint8)] * 2, batch=True)
        g = x.gpu()
        assert g.device == "gpu" and g.gpu() is g
        pipe.set_outputs(g.gpu())


def test_multiple_input_sets():
    """DALI's multiple input sets: a list of DataNodes as a positional input records the
    operator once per element (other inputs repeat); one set gives a plain output."""
    import numpy as np

    import sluice
    from sluice import fn

    a = [np.full((2, 3), 1, np.float32), np.full((1, 2), 2, np.float32)]
    b = [np.full((2, 3), 10, np.float32), np.full((1, 2), 20, np.float32)]
    pipe = sluice.pipeline.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        x, y = fn.external_source(source=lambda: (a, b), num_outputs=2)
        single = fn.cast([x], dtype=sluice.types.INT32)
        assert isinstance(single, sluice.pipeline.DataNode)
        sets = fn.cast([x, y], dtype=sluice.types.INT32)
        assert isinstance(sets, list) and len(sets) == 2
        sums = fn.cat([x, y], x)  # the second input repeats
        assert len(sums) == 2
        with pytest.raises(ValueError, match="must have the same length"):
            fn.cat([x, y], [x])
        pipe.set_outputs(single, *sets, *sums)
    pipe.build()
    s, c0, c1, j0, j1 = pipe.run()
    np.testing.assert_array_equal(np.array(s.at(0)), np.ones((2, 3), np.int32))
    np.testing.assert_array_equal(np.array(c1.at(1)), np.full((1, 2), 20, np.int32))
    np.testing.assert_array_equal(np.array(j1.at(0)), np.concatenate([b[0], a[0]]))


def test_a_list_of_numbers_is_one_constant_output():
    """DALI: a 1-D list or tuple of numbers returned as an output is one constant (INT32 or
    FLOAT); lists holding DataNodes are outputs one by one."""
    import numpy as np

    from sluice import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.external_source(lambda: [np.ones(2, np.float32)] * 2)
        return x, [1, 2], (1.5, 2.0)

    pipe = p()
    pipe.build()
    out = pipe.run()
    assert len(out) == 3
    np.testing.assert_array_equal(np.array(out[1][0]), np.int32([1, 2]))
    assert np.array(out[1][0]).dtype == np.int32 and np.array(out[2][1]).dtype == np.float32
