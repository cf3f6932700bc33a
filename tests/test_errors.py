"""One error taxonomy: the engine's kinds (sluice::error::ErrorKind) are Python classes
that code written for DALI (`except RuntimeError`, `except KeyError`) and idiomatic Python
(`except ValueError`, `except TypeError`) both catch, raised where DALI raises them."""

import numpy as np
import pytest

import sluice
from sluice import errors, fn, ops, pipeline_def, types


def test_every_class_is_a_runtime_error_and_its_builtin():
    expected = {
        "ArgumentError": (ValueError,),
        "UnknownArgumentError": (KeyError, TypeError),
        "ArgumentTypeError": (TypeError, ValueError),
        "GraphError": (ValueError,),
        "DataError": (),
        "StorageError": (),
        "InputError": (KeyError, IndexError),
        "CudaError": (),
        "UnsupportedError": (NotImplementedError,),
    }
    assert set(errors.__all__) == set(expected) | {"SluiceError"}
    assert issubclass(errors.SluiceError, RuntimeError)
    for name, bases in expected.items():
        cls = getattr(errors, name)
        assert cls.__module__ == "sluice.errors"
        assert issubclass(cls, errors.SluiceError) and issubclass(cls, RuntimeError), name
        for b in bases:
            assert issubclass(cls, b), (name, b)
        assert cls.__doc__
    # KeyError would quote the message; ours prints it as written.
    assert str(errors.UnknownArgumentError("flip: unknown argument 'x'")) == "flip: unknown argument 'x'"


def test_argument_errors_are_raised_where_the_operator_is_written():
    with pytest.raises(errors.UnknownArgumentError, match="did you mean 'probability'"):
        fn.random.coin_flip(probabilty=0.5)
    with pytest.raises(errors.UnknownArgumentError, match=r"unknown argument 'zzz'$"):  # nothing close
        fn.flip(fn.random.uniform(range=(0, 1), shape=[2, 2, 3]), zzz=1)
    with pytest.raises(errors.ArgumentTypeError, match="argument 'dtype' must be DALIDataType, got str"):
        fn.cast(fn.random.uniform(range=(0, 1)), dtype="float")
    with pytest.raises(errors.GraphError, match=r"flip: expects 1 input\(s\), got 2"):
        fn.flip(fn.random.uniform(range=(0, 1)), fn.random.uniform(range=(0, 1)))
    with pytest.raises(errors.GraphError, match="device must be 'cpu', 'mixed' or 'gpu', got 'tpu'"):
        fn.random.uniform(range=(0, 1), device="tpu")
    with pytest.raises(errors.GraphError, match="no 'mixed' backend"):
        fn.flip(fn.random.uniform(range=(0, 1), shape=[2, 2, 3]), device="mixed")
    with pytest.raises(errors.UnknownArgumentError):  # ops API: at construction, as DALI
        ops.Flip(horizontl=1)
    with pytest.raises(errors.ArgumentError, match=r"cast: argument 'dtype': is required"):
        fn.cast(fn.random.uniform(range=(0, 1)))


def test_values_arrive_as_dali_accepts_them():
    """NumPy scalars and arrays and DALI-style enums are arguments like Python values."""
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def p():
        u = fn.random.uniform(range=np.array([0.0, 1.0]), shape=np.int64(3), dtype=types.DALIDataType.FLOAT64)
        return u, fn.cast(u, dtype=np.int32(types.INT32))

    u, c = p().run()
    assert np.array(u.at(0)).dtype == np.float64 and np.array(u.at(0)).shape == (3,)
    assert np.array(c.at(0)).dtype == np.int32


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), "batch_size must be a positive integer"),
    (dict(batch_size=2, num_threads=0), "num_threads must be a positive integer"),
    (dict(batch_size=2, prefetch_queue_depth=0), "prefetch_queue_depth must be at least 1"),
    (dict(batch_size=2, prefetch_queue_depth={"cpu_size": 0, "gpu_size": 0}), "prefetch_queue_depth must be at least 1"),
    (dict(batch_size=2, device_id=-5), "device_id must be None"),
])
def test_pipeline_parameters_are_checked_once_by_the_engine(kwargs, message):
    with pytest.raises(errors.GraphError, match=message):
        sluice.Pipeline(num_threads=kwargs.pop("num_threads", 1), device_id=kwargs.pop("device_id", None), **kwargs)


def test_pipeline_parameter_defaults_are_resolved_by_the_engine():
    p = sluice.Pipeline(batch_size=3, device_id=None, prefetch_queue_depth={"cpu_size": 2, "gpu_size": 4})
    assert p.num_threads >= 1 and p.prefetch_queue_depth == 4 and p.batch_size == 3
    assert 0 <= p.seed < 2**63
    assert sluice.Pipeline(batch_size=1, device_id=None).seed != sluice.Pipeline(batch_size=1, device_id=None).seed
    with pytest.raises(errors.GraphError, match="batch_size is required"):
        with sluice.Pipeline(device_id=None) as q:
            q.set_outputs(fn.random.uniform(range=(0, 1)))
        q.build()


def test_a_data_error_is_a_runtime_error_and_the_pipeline_goes_on(tmp_path):
    root = tmp_path / "root" / "a"
    root.mkdir(parents=True)
    (root / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path / "root"))
        return fn.decoders.image(jpegs)

    pipe = p()
    for _ in range(2):
        with pytest.raises(errors.DataError, match="decoders.image.*bad.jpg"):
            pipe.run()


def test_missing_folder_is_a_storage_error(tmp_path):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def p():
        return fn.readers.file(file_root=str(tmp_path / "nope"))[0]

    with pytest.raises(errors.StorageError, match="readers.file.*nope"):
        p().build()
