"""`sluice.plugin.jax`: DALI's jax_plugin tests (test_integration, test_iterator,
test_iterator_decorator, the CPU values of test_multigpu) and the JAX cases of its
checkpointing tests, on CPU pipelines and JAX's CPU devices. DALI's JAX iterator takes CPU
pipelines too: their batches land on JAX's first CPU device."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import sluice  # noqa: E402
from sluice import fn  # noqa: E402
from sluice.plugin.base_iterator import LastBatchPolicy  # noqa: E402
from sluice.plugin.jax import DALIGenericIterator, data_iterator  # noqa: E402
from sluice.plugin.jax.integration import _jax_device, _to_jax_array  # noqa: E402
from conftest import require_gpu  # noqa: E402

THIS_FILE = os.path.abspath(__file__)
CPU = jax.devices("cpu")[0]  # where CPU pipelines' batches land (JAX's default device may be a GPU)
N = 47  # DALI's tests read 47 JPEGs; their labels are the indices


def iterator_function_def(shard_id=0, num_shards=1):
    _, labels = fn.readers.file(name="reader", files=[THIS_FILE] * N, labels=list(range(N)), shard_id=shard_id,
                                num_shards=num_shards)
    return labels


def run_and_assert_sequential_iterator(it, num_iters=4):
    for batch_id, data in zip(range(num_iters), it):
        arr = data["data"]
        assert _jax_device(arr) == CPU
        for i in range(arr.shape[0]):
            assert jnp.array_equal(arr[i], jnp.full((1,), batch_id * arr.shape[0] + i, np.int32))
    assert batch_id == num_iters - 1


# --------------------------------------------------------------------------- integration
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int16, np.float16, np.bool_])
@pytest.mark.parametrize("shape", [(), (1,), (10,), (2, 4), (1, 2, 3)])
def test_tensor_to_jax_array(dtype, shape):
    value = np.ones(shape, dtype) if dtype is np.bool_ else np.full(shape, -99 if dtype is not np.uint8 else 99, dtype)
    pipe = sluice.Pipeline(batch_size=1, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(sluice.types.Constant(value))
    (out,) = pipe.run()
    arr = _to_jax_array(out[0], False)
    assert arr.dtype == jnp.dtype(dtype) and arr.shape == shape
    assert jnp.array_equal(arr, jnp.asarray(value))
    assert _jax_device(arr) == CPU


def test_sequential_tensors_to_jax_array():
    pipe = sluice.Pipeline(batch_size=4, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(lambda info: np.full((5,), info.idx_in_epoch, np.int32), batch=False))
    for b in range(20):
        (out,) = pipe.run()
        arr = _to_jax_array(out.as_tensor(), False)
        for i in range(4):
            assert jnp.array_equal(arr[i], jnp.full((5,), 4 * b + i, np.int32))


def test_64_bit_types_narrow_as_jax_does():
    pipe = sluice.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(sluice.types.Constant(np.array([1, 2], np.int64)))
    (out,) = pipe.run()
    assert _to_jax_array(out.as_tensor(), False).dtype == jnp.int32  # jax_enable_x64 is off


# --------------------------------------------------------------------------- the iterator
def test_sequential_iterator():
    pipe = sluice.pipeline_def(iterator_function_def)(batch_size=3, num_threads=4, device_id=None)
    run_and_assert_sequential_iterator(DALIGenericIterator([pipe], ["data"], reader_name="reader"))


def test_partial_policy_is_refused():
    pipe = sluice.pipeline_def(iterator_function_def)(batch_size=3, num_threads=1, device_id=None)
    with pytest.raises(AssertionError, match="JAX iterator does not support partial last batch policy."):
        DALIGenericIterator([pipe], ["data"], reader_name="reader", last_batch_policy=LastBatchPolicy.PARTIAL)


def test_iterator_errors():
    pipe = sluice.pipeline_def(iterator_function_def)(batch_size=3, num_threads=1, device_id=None)
    with pytest.raises(AssertionError, match="output_map names should be distinct"):
        DALIGenericIterator([pipe], ["a", "a"], reader_name="reader")
    with pytest.raises(AssertionError, match="`sharding` should be an instance of `jax.sharding.Sharding`"):
        DALIGenericIterator([pipe], ["data"], reader_name="reader", sharding=3)


def test_several_cpu_pipelines_stack():
    """CPU pipelines' batches share JAX's first CPU device: stacked (pipelines, batch, ...)."""
    pipes = [sluice.pipeline_def(iterator_function_def)(batch_size=2, num_threads=1, device_id=None, shard_id=s,
                                                         num_shards=2) for s in range(2)]
    it = DALIGenericIterator(pipes, ["data"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP)
    assert it.size == 23 and len(it) == 11
    for b, batch in enumerate(it):
        assert batch["data"].shape == (2, 2, 1)
        assert batch["data"][:, :, 0].tolist() == [[2 * b, 2 * b + 1], [23 + 2 * b, 24 + 2 * b]]
    assert b == 10


def test_pmap_compatible_single_pipeline():
    pipe = sluice.pipeline_def(iterator_function_def)(batch_size=3, num_threads=1, device_id=None)
    it = DALIGenericIterator([pipe], ["data"], reader_name="reader", pmap_compatible=True)
    assert next(it)["data"].shape == (1, 3, 1)


# --------------------------------------------------------------------------- the decorator
def test_decorator_functional():
    it = data_iterator(iterator_function_def, output_map=["data"], reader_name="reader")(
        batch_size=3, device_id=None, num_threads=4)
    run_and_assert_sequential_iterator(it)


def test_decorator_declarative():
    @data_iterator(output_map=["data"], reader_name="reader")
    def iterator_function():
        return iterator_function_def()

    run_and_assert_sequential_iterator(iterator_function(batch_size=3, device_id=None, num_threads=4))


def test_decorator_default_args():
    """Only batch_size given: num_threads 4 and device_id 0 come from the decorator; a CPU
    pipeline with device 0 runs where there is no GPU."""
    @data_iterator(output_map=["data"], reader_name="reader")
    def iterator_function():
        return iterator_function_def()

    run_and_assert_sequential_iterator(iterator_function(batch_size=3))


def test_decorator_pipeline_fn_with_argument():
    @data_iterator(output_map=["data"], reader_name="reader")
    def iterator_function(num_shards):
        return iterator_function_def(num_shards=num_shards)

    it = iterator_function(num_shards=2, batch_size=3, device_id=None)
    run_and_assert_sequential_iterator(it)
    assert it.size == 24


def test_decorator_sharding_and_devices_exclusive():
    with pytest.raises(ValueError, match="Only one of `sharding` and `devices` arguments can be provided."):
        data_iterator(output_map=["data"], sharding=object(), devices=jax.devices())


def test_decorator_checkpoint_count():
    @data_iterator(output_map=["data"], reader_name="reader", devices=jax.devices())
    def iterator_function(shard_id, num_shards):
        return iterator_function_def(shard_id=shard_id, num_shards=num_shards)

    with pytest.raises(RuntimeError, match=r"The number of checkpoints provided \(2\) should match the number of devices"):
        iterator_function(batch_size=4, checkpoints=[b"", b""])


MULTI_DEVICE = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from sluice import fn
    from sluice.plugin.base_iterator import LastBatchPolicy
    from sluice.plugin.jax import data_iterator, DALIGenericIterator
    assert len(jax.devices()) == 2
    N = 47

    def shard(shard_id, num_shards, device_id):
        # device_id: the CPU pipelines ignore the GPU the decorator gives them
        _, labels = fn.readers.file(name="reader", files=[sys.argv[1]] * N, labels=list(range(N)),
                                    shard_id=shard_id, num_shards=num_shards)
        return labels

    # devices=: one pipeline per device, the global batch split, outputs (devices, batch, 1)
    it = data_iterator(shard, output_map=["data"], reader_name="reader", devices=jax.devices(),
                       last_batch_policy=LastBatchPolicy.DROP)(batch_size=4)
    assert it.size == 23, it.size
    for b, batch in enumerate(it):
        a = np.asarray(batch["data"])
        assert a.shape == (2, 2, 1)
        for d in range(2):
            assert a[d, :, 0].tolist() == [2 * b + 23 * d, 2 * b + 1 + 23 * d], (b, a)
    assert b == 10
    # sharding= with CPU pipelines: their batches are all on CPU device 0, as with DALI (the
    # first batch is prepared at construction)
    mesh = Mesh(jax.devices(), ("batch",))
    try:
        data_iterator(shard, output_map=["data"], reader_name="reader",
                      sharding=NamedSharding(mesh, PartitionSpec("batch")))(batch_size=4)
        raise SystemExit("sharding CPU pipelines over 2 devices should fail")
    except ValueError as e:
        assert "distinct devices" in str(e), e
    print("OK")
""")


def test_several_cpu_devices(tmp_path):
    """JAX with two CPU devices (a fresh process: the device count is fixed at JAX's start)."""
    script = tmp_path / "multi.py"
    script.write_text(MULTI_DEVICE)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, str(script), THIS_FILE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr[-3000:]


# --------------------------------------------------------------------------- GPU
def jax_gpu():
    require_gpu()
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("this JAX has no GPU backend")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16])
def test_gpu_tensor_to_jax_array(dtype):
    dev = jax_gpu()
    value = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    pipe = sluice.Pipeline(batch_size=3, num_threads=1, device_id=0)
    with pipe:
        pipe.set_outputs(sluice.types.Constant(value, device="gpu"))
    (out,) = pipe.run()
    for copy in (False, True):
        arr = _to_jax_array(out[1], copy)
        assert _jax_device(arr) == dev and arr.dtype == jnp.dtype(dtype)
        assert np.array_equal(np.asarray(arr), value)


def test_gpu_iterator_batches_in_order():
    """A GPU pipeline's batches, computed on Sluice's stream, reach JAX on the GPU without a
    copy and hold what was computed (DLPack orders JAX after Sluice's work)."""
    dev = jax_gpu()
    pipe = sluice.Pipeline(batch_size=8, num_threads=2, device_id=0, prefetch_queue_depth=2)
    with pipe:
        idx = fn.external_source(lambda info: np.full((256, 256), info.idx_in_epoch, np.float32), batch=False)
        pipe.set_outputs(idx.gpu() * 2 + 1)
    with pytest.warns(Warning, match="Please set `reader_name`"):
        it = DALIGenericIterator([pipe], ["data"], size=8 * 20)
    for b, batch in enumerate(it):
        arr = batch["data"]
        assert _jax_device(arr) == dev and arr.shape == (8, 256, 256)
        got = np.asarray(arr)
        assert (got == (np.arange(8 * b, 8 * b + 8, dtype=np.float32) * 2 + 1)[:, None, None]).all()
    assert b == 19


# --------------------------------------------------------------------------- checkpoints
def _collect(it, steps):
    out = []
    for _ in range(steps):
        try:
            out.append({k: np.asarray(v) for k, v in next(it).items()})
        except StopIteration:
            out.append(None)
    return out


def _equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x is None) == (y is None)
        if x is not None:
            assert x.keys() == y.keys() and all((x[k] == y[k]).all() for k in x)


@pytest.mark.parametrize("policy,pad", [("DROP", True), ("DROP", False), ("FILL", True), ("FILL", False)])
@pytest.mark.parametrize("iterations", [2, 3, 7])
@pytest.mark.parametrize("stick", [False, True])
def test_checkpoint_last_batch_policy(tmp_path, policy, pad, iterations, stick):
    """DALI's TestJax.test_last_batch_policy: one pipeline per shard in one iterator; after
    `iterations` batches a restored iterator goes on exactly as the original."""
    shards, bs, n = 3, 4, 34
    files = []
    for i in range(n):
        f = tmp_path / f"{i:02}.jpg"
        f.write_bytes(bytes([i]))
        files.append(str(f))

    def pipes(checkpoints=None):
        out = []
        for s in range(shards):
            p = sluice.Pipeline(batch_size=bs, num_threads=1, device_id=None, enable_checkpointing=True,
                                checkpoint=checkpoints[s] if checkpoints else None)
            with p:
                data, _ = fn.readers.file(files=files, name="Reader", shard_id=s, num_shards=shards,
                                          pad_last_batch=pad, stick_to_shard=stick)
                p.set_outputs(data)
            out.append(p)
        return out

    kw = dict(reader_name="Reader", auto_reset=True, prepare_first_batch=False,
              last_batch_policy=getattr(LastBatchPolicy, policy))
    it = DALIGenericIterator(pipes(), ["data"], **kw)
    _collect(it, iterations)
    restored = DALIGenericIterator(pipes(it.checkpoints()), ["data"], **kw)
    steps = it.size * 2 // bs
    _equal(_collect(it, steps), _collect(restored, steps))


def test_checkpoint_decorator():
    @data_iterator(output_map=["data"], reader_name="reader")
    def iterator_function():
        return iterator_function_def()

    it = iterator_function(batch_size=4, device_id=None, enable_checkpointing=True)
    _collect(it, 3)
    restored = iterator_function(batch_size=4, device_id=None, enable_checkpointing=True,
                                 checkpoints=it.checkpoints())
    _equal(_collect(it, 30), _collect(restored, 30))


def test_checkpoint_reset():
    """A checkpoint taken at an epoch's end restores an iterator at that end; one taken after
    reset() restores the next epoch."""
    def make(cpt=None):
        p = sluice.pipeline_def(iterator_function_def)(batch_size=1, num_threads=1, device_id=None,
                                                         enable_checkpointing=True, checkpoint=cpt)
        return DALIGenericIterator([p], ["data"], reader_name="reader")

    it = make()
    for _ in it:
        pass
    at_end = it.checkpoints()[0]
    it.reset()
    after_reset = it.checkpoints()[0]
    with pytest.raises(StopIteration):
        next(make(at_end))
    assert np.asarray(next(make(after_reset))["data"]).tolist() == [[0]]


@pytest.mark.parametrize("warmup", [0, 3])
def test_checkpoint_multiple_restores(warmup):
    def make(cpt=None):
        p = sluice.Pipeline(batch_size=10, num_threads=4, device_id=None, enable_checkpointing=True, seed=3,
                            checkpoint=cpt)
        with p:
            p.set_outputs(fn.random.uniform(shape=(4,)))
        with pytest.warns(Warning, match="Please set `reader_name`"):
            return DALIGenericIterator([p], ["data"], size=100)

    it = make()
    _collect(it, warmup)
    it2 = make(it.checkpoints()[0])
    it3 = make(it2.checkpoints()[0])
    _equal(_collect(it2, 25), _collect(it3, 25))
