"""TensorListCPU / TensorCPU: indexing, shapes, layouts, density, NumPy and DLPack hand-off,
source_info, and memory safety of views that outlive the pipeline."""

import gc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sluice import TensorCPU, TensorListCPU, fn, pipeline_def, types

BATCH = 3


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=9)
def mixed_pipe(root):
    jpegs, labels = fn.readers.file(file_root=str(root))
    images = fn.decoders.image(jpegs, output_type=types.RGB)
    u = fn.random.uniform(range=(0, 1), shape=(2, 5))
    return jpegs, images, labels, u


@pytest.fixture
def outputs(small_images):
    return mixed_pipe(small_images).run()


def test_len_at_and_getitem(outputs, small_images):
    jpegs, images, labels, u = outputs
    for tl in outputs:
        assert isinstance(tl, TensorListCPU) and len(tl) == BATCH
    for i in range(BATCH):
        a = images.at(i)
        assert isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3
        t = images[i]
        assert isinstance(t, TensorCPU)
        assert t.shape() == list(a.shape)  # shape is a method returning a list
        assert np.array_equal(np.array(t), a)
        assert np.array_equal(t.as_array(), a)
        # at(i) is a view of engine memory, not a copy
        assert not a.flags.owndata
    assert images[-1].shape() == list(images.at(BATCH - 1).shape)
    with pytest.raises(IndexError):
        images[BATCH]
    assert len(list(iter(images))) == BATCH


def test_dense_tensor_methods(outputs):
    _, images, labels, u = outputs
    assert u.is_dense_tensor() is True
    assert labels.is_dense_tensor() is True
    assert u.as_tensor().shape() == [BATCH, 2, 5]
    arr = u.as_array()
    assert arr.shape == (BATCH, 2, 5) and arr.dtype == np.float32
    assert np.array_equal(np.array(u.as_tensor()), arr)
    for i in range(BATCH):
        assert np.array_equal(arr[i], u.at(i))
    assert labels.as_tensor().shape() == [BATCH, 1]
    assert labels.as_array().dtype == np.int32
    assert u.shape() == [(2, 5)] * BATCH
    assert labels.shape() == [(1,)] * BATCH


def test_ragged_decoded_images(outputs):
    _, images, _, _ = outputs
    shapes = images.shape()
    assert isinstance(shapes, list) and len(shapes) == BATCH
    assert len(set(shapes)) > 1, "test data must be ragged"
    assert images.is_dense_tensor() is False
    assert images.layout() == "HWC"
    assert images[0].layout() == "HWC"
    assert shapes == [images.at(i).shape for i in range(BATCH)]
    with pytest.raises(RuntimeError, match="dense|shape"):
        images.as_tensor()
    with pytest.raises(RuntimeError, match="dense|shape"):
        images.as_array()
    with pytest.raises(RuntimeError, match="dense|shape"):
        np.array(images)


def test_dense_images_are_dense(tmp_path):
    # four copies of the same image: equal shapes -> a dense batch with an HWC layout
    img = np.random.default_rng(0).integers(0, 255, (17, 23, 3), dtype=np.uint8)
    (tmp_path / "a").mkdir()
    for k in range(4):
        Image.fromarray(img).save(tmp_path / "a" / f"{k}.png")

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        return fn.decoders.image(jpegs)

    images, = p().run()
    assert images.is_dense_tensor() is True
    assert images.as_tensor().shape() == [4, 17, 23, 3]
    assert np.array_equal(images.as_array(), np.stack([img] * 4))


def test_dlpack_values(outputs):
    _, images, labels, u = outputs
    assert np.array_equal(np.from_dlpack(u), u.as_array())
    assert np.array_equal(np.from_dlpack(labels), labels.as_array())
    for i in range(BATCH):
        assert np.array_equal(np.from_dlpack(images[i]), images.at(i))
    assert u.__dlpack_device__() == (1, 0)


def test_ragged_dlpack_raises(outputs):
    _, images, _, _ = outputs
    with pytest.raises(RuntimeError, match="dense"):
        np.from_dlpack(images)


def _churn():
    """Allocate and touch memory so freed buffers would be reused and overwritten."""
    junk = [np.full((512, 1024), k, dtype=np.uint8) for k in range(64)]
    return sum(int(j[0, 0]) for j in junk)


def test_views_survive_pipeline_and_tensorlist(small_images):
    pipe = mixed_pipe(small_images)
    jpegs, images, labels, u = pipe.run()
    views = {
        "dlpack_dense": np.from_dlpack(u),
        "dlpack_sample": np.from_dlpack(images[1]),
        "at": images.at(2),
        "as_array": labels.as_array(),
        "as_tensor": np.asarray(u.as_tensor()),
        "encoded": jpegs.at(0),
    }
    copies = {k: v.copy() for k, v in views.items()}
    del pipe, jpegs, images, labels, u
    gc.collect()
    _churn()
    # run another pipeline that reuses the engine's allocators
    for _ in range(3):
        mixed_pipe(small_images, seed=99).run()
    gc.collect()
    _churn()
    for k in views:
        assert np.array_equal(views[k], copies[k]), f"{k} view changed after its pipeline was deleted"


def test_source_info_names_reader_files(small_images):
    pipe = mixed_pipe(small_images)
    expected = sorted(p.name for p in (Path(small_images) / "a").iterdir())
    seen = []
    for _ in range(2):
        jpegs, images, labels, _ = pipe.run()
        infos = jpegs.source_info()
        assert infos == [jpegs.source_info(i) for i in range(BATCH)]
        # the decoder keeps the source info of its input
        assert images.source_info() == infos
        assert [images[i].source_info() for i in range(BATCH)] == infos
        for i, info in enumerate(infos):
            assert info == f"a/{Path(info).name}"  # relative to file_root, as DALI
            assert (Path(small_images) / info).read_bytes() == jpegs.at(i).tobytes()
        seen += infos
    assert [Path(s).name for s in seen] == expected[:2 * BATCH]
