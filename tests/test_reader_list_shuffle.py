"""`random_shuffle` on DALI's list readers (file, coco, sequence, numpy): the whole list is
shuffled once, the same on every shard, before it is sharded; the `initial_fill` buffer then
mixes within the shard. So each shard holds samples from all over the list, not a run of it
(a folder-per-class list would otherwise give each GPU a few classes per epoch), and a rank's
samples in each epoch are the ones DALI gives it.

With `initial_fill=1` the buffer does nothing and the order is DALI's exactly; with the
default buffer each epoch's samples (not their order) are DALI's. Indexed formats (tfrecord,
webdataset, ...) shuffle within the shard only, in DALI and here."""

import json

import numpy as np
import pytest

import sluice
from conftest import dali_or_none

DALI = dali_or_none()
N = 23


def ids_from(make_pipe, lib, n_batches, key):
    pipe = make_pipe(lib)
    pipe.build()
    out = []
    for _ in range(n_batches):
        outs = pipe.run()
        out += [key(outs, i) for i in range(len(outs[0]))]
    return out


def label_key(outs, i):
    return int(np.array(outs[1].at(i)).ravel()[0])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """N files for every reader: JPEGs (file, coco), .npy files holding their index (numpy),
    one-frame streams (sequence)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("list_shuffle")
    rng = np.random.default_rng(5)
    (root / "img").mkdir()
    (root / "npy").mkdir()
    images = []
    for i in range(N):
        Image.fromarray(rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)).save(root / "img" / f"{i:03d}.jpg")
        np.save(root / "npy" / f"{i:03d}.npy", np.array([i], dtype=np.int32))
        (root / "seq" / f"s{i:03d}").mkdir(parents=True)
        Image.fromarray(np.full((4, 4, 3), i, dtype=np.uint8)).save(root / "seq" / f"s{i:03d}" / "0.png")
        images.append({"id": 100 + i, "file_name": f"{i:03d}.jpg", "width": 10, "height": 8})
    ann = [{"id": i + 1, "image_id": 100 + i, "category_id": 1, "bbox": [1, 1, 3, 3], "area": 9, "iscrowd": 0}
           for i in range(N)]
    (root / "coco.json").write_text(json.dumps({"images": images, "annotations": ann,
                                                "categories": [{"id": 1, "name": "x"}]}))
    return root


def readers(root):
    """(name, reader(lib, **kw) -> outputs, key(outs, i) -> sample id)."""
    return {
        "file": (lambda lib, **kw: lib.fn.readers.file(files=[str(root / "img" / f"{i:03d}.jpg") for i in range(N)],
                                                       labels=list(range(N)), **kw),
                 label_key),
        "coco": (lambda lib, **kw: lib.fn.readers.coco(file_root=str(root / "img"),
                                                       annotations_file=str(root / "coco.json"), image_ids=True,
                                                       **kw),
                 lambda outs, i: int(np.array(outs[3].at(i)).ravel()[0]) - 100),
        "numpy": (lambda lib, **kw: (lib.fn.readers.numpy(file_root=str(root / "npy"), **kw),),
                  lambda outs, i: int(np.array(outs[0].at(i)).ravel()[0])),
        "sequence": (lambda lib, **kw: (lib.fn.readers.sequence(file_root=str(root / "seq"), sequence_length=1,
                                                                **kw),),
                     lambda outs, i: int(np.array(outs[0].at(i)).ravel()[0])),
    }


def order(lib, root, reader, batch, n_batches, **kw):
    make, key = readers(root)[reader]

    def make_pipe(lib):
        @lib.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=11)
        def p():
            return tuple(make(lib, random_shuffle=True, **kw))

        return p()

    return ids_from(make_pipe, lib, n_batches, key)


@pytest.mark.parametrize("reader", ["file", "coco", "numpy", "sequence"])
def test_the_whole_list_is_shuffled_before_sharding(data, reader):
    """3 shards of 23: each shard's samples come from all over the list, and together the
    shards cover it once an epoch."""
    shards = [order(sluice, data, reader, 4, 2, initial_fill=1, num_shards=3, shard_id=s, stick_to_shard=True,
                    pad_last_batch=True) for s in range(3)]
    per_shard = [sorted(set(s)) for s in shards]
    assert sorted(x for s in per_shard for x in s) == list(range(N))
    # Not the contiguous thirds an unshuffled list gives.
    assert per_shard[0] != list(range(7))
    assert all(max(s) - min(s) > 10 for s in per_shard)


@pytest.mark.skipif(DALI is None, reason="needs DALI")
@pytest.mark.parametrize("reader", ["file", "coco", "numpy", "sequence"])
@pytest.mark.parametrize("num_shards,shard_id", [(1, 0), (3, 0), (3, 2)])
def test_order_matches_dali(data, reader, num_shards, shard_id):
    """initial_fill=1: DALI's order, sample for sample, over three epochs (shards rotating)."""
    kw = dict(initial_fill=1, num_shards=num_shards, shard_id=shard_id)
    assert order(sluice, data, reader, 5, 14, **kw) == order(DALI, data, reader, 5, 14, **kw)


@pytest.mark.skipif(DALI is None, reason="needs DALI")
@pytest.mark.parametrize("reader", ["file", "numpy"])
def test_epoch_samples_match_dali(data, reader):
    """The default buffer: each epoch of each shard holds DALI's samples (in the reader's own
    random order; the padding repeats whichever sample came last)."""
    for s in range(3):
        kw = dict(num_shards=3, shard_id=s, stick_to_shard=True, pad_last_batch=True)
        ours = order(sluice, data, reader, 4, 6, **kw)
        theirs = order(DALI, data, reader, 4, 6, **kw)
        for e in range(3):
            assert set(ours[8 * e: 8 * e + 8]) == set(theirs[8 * e: 8 * e + 8])


@pytest.mark.skipif(DALI is None, reason="needs DALI")
def test_large_list_order_matches_dali(tmp_path):
    """Past 65,535 entries libstdc++'s shuffle draws one position at a time: still DALI's."""
    n = 70_000
    f = tmp_path / "x.jpg"
    f.write_bytes(b"not decoded")

    def first(lib):
        @lib.pipeline_def(batch_size=1000, num_threads=1, device_id=None)
        def p():
            _, labels = lib.fn.readers.file(files=[str(f)] * n, labels=list(range(n)), random_shuffle=True,
                                            initial_fill=1)
            return labels

        pipe = p()
        pipe.build()
        return np.array(pipe.run()[0].as_tensor()).ravel().tolist()

    assert first(sluice) == first(DALI)
