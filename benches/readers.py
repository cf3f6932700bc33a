"""Readers side by side, Sluice vs NVIDIA DALI: the ResNet-50 CPU training pipeline
(random-crop decode, resize 224, crop_mirror_normalize with a random mirror) over the same
ImageNet-like JPEGs stored as files (readers.file, format "file"), as TFRecord
(readers.tfrecord, "tfrecord"), as WebDataset tars (readers.webdataset, "webdataset"), as MXNet
RecordIO (readers.mxnet, "mxnet"), as a Caffe LMDB of Datum protobufs (readers.caffe, "lmdb")
and as COCO (readers.coco over the files with an instances.json: "coco" returns the boxes and
labels with the images, "coco-masks" the pixel-wise masks as well, pixelwise_masks=True), each
library in its own process on the same threads. Prints images/s and Sluice's ratio, and the
reader alone (no decoding) to show what reading costs.

    python benches/readers.py [--data /tmp/sluice-readers-bench] [--count 6000] [--batch 128] [--threads 4]
                              [--epochs 1] [--formats file,tfrecord,webdataset,mxnet,lmdb,coco,coco-masks]
                              [--libs sluice,dali]

The data set is made once in --data (tests/data_gen/make_dataset.py), with its TFRecord,
WebDataset and RecordIO copies (10 shards each and their indexes), its Caffe LMDB (one Datum
{data: the JPEG, label, encoded: 1} per sample, keys the zero-padded sample numbers) and its
COCO annotations (coco/instances.json: 1-4 boxes per image, each with a polygon segmentation,
the images read from the files folder), all written by this script.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, os, sys, time
lib, root, fmt, decode, batch, threads, epochs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
    import nvidia.dali.tfrecord as tfrec
else:
    from sluice import fn, pipeline_def, types
    import sluice.tfrecord as tfrec

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1, prefetch_queue_depth=2)
def pipe():
    extra = []  # outputs returned along with the images and labels (coco: boxes, masks)
    if fmt == "file":
        jpegs, labels = fn.readers.file(file_root=os.path.join(root, "files"), random_shuffle=True, name="R", pad_last_batch=True)
    elif fmt == "mxnet":
        d = os.path.join(root, "mxnet")
        recs = sorted(f for f in os.listdir(d) if f.endswith(".rec"))
        jpegs, labels = fn.readers.mxnet(path=[os.path.join(d, r) for r in recs], index_path=os.path.join(d, "train.idx"),
                                         random_shuffle=True, name="R", pad_last_batch=True)
    elif fmt == "webdataset":
        shards = sorted(f for f in os.listdir(os.path.join(root, "webdataset")) if f.endswith(".tar"))
        jpegs, labels = fn.readers.webdataset(paths=[os.path.join(root, "webdataset", s) for s in shards],
                                              index_paths=[os.path.join(root, "webdataset", s[:-4] + ".idx") for s in shards],
                                              ext=["jpg", "cls"], dtypes=[types.UINT8, types.INT32],
                                              random_shuffle=True, name="R", pad_last_batch=True)
    elif fmt == "lmdb":
        jpegs, labels = fn.readers.caffe(path=os.path.join(root, "lmdb"), random_shuffle=True, name="R", pad_last_batch=True)
    elif fmt in ("coco", "coco-masks"):
        out = fn.readers.coco(file_root=os.path.join(root, "files"), annotations_file=os.path.join(root, "coco", "instances.json"),
                              pixelwise_masks=fmt == "coco-masks", random_shuffle=True, name="R", pad_last_batch=True)
        jpegs, labels, extra = out[0], out[2], [out[1]] + list(out[3:])  # boxes (and masks) come back too
    else:
        shards = sorted(f for f in os.listdir(os.path.join(root, "tfrecord")) if f.endswith(".tfrecord"))
        out = fn.readers.tfrecord(path=[os.path.join(root, "tfrecord", s) for s in shards],
                                  index_path=[os.path.join(root, "tfrecord", s[:-9] + ".idx") for s in shards],
                                  features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                                            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)},
                                  random_shuffle=True, name="R", pad_last_batch=True)
        jpegs, labels = out["image/encoded"], out["image/class/label"]
    if not decode:
        return (jpegs, labels, *extra)
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_aspect_ratio=[0.75, 4 / 3],
                                           random_area=[0.08, 1.0], num_attempts=100)
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                      mirror=fn.random.coin_flip(probability=0.5))
    return (images, labels, *extra)

p = pipe()
p.build()
iters = -(-p.epoch_size("R") // batch)
for _ in range(min(iters, 5)):
    p.run()
t = time.perf_counter()
for _ in range(epochs * iters):
    p.run()
print(json.dumps({"rate": epochs * iters * batch / (time.perf_counter() - t)}))
"""


def masked_crc32c(data):
    from sluice import _core

    return _core.masked_crc32c(data)


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def example(jpeg, label):
    """tf.train.Example{image/encoded: bytes, image/class/label: int64}, encoded by hand."""
    def entry(key, kind, values):
        return field(1, field(1, key.encode()) + field(2, field(kind, values)))

    features = entry("image/encoded", 1, field(1, jpeg)) + entry("image/class/label", 3, field(1, varint(label)))
    return field(1, features)


def datum(jpeg, label):
    """caffe.Datum{data: the JPEG, label, encoded: true}, encoded by hand."""
    return field(4, jpeg) + varint(5 << 3) + varint(label) + varint(7 << 3) + varint(1)


def write_lmdb(path, samples):
    import lmdb

    size = sum(os.path.getsize(p) for p, _ in samples)
    tmp = path + ".tmp"
    env = lmdb.open(tmp, map_size=2 * size + (64 << 20), subdir=True, lock=True)
    with env.begin(write=True) as txn:
        for k, (p, label) in enumerate(samples):
            with open(p, "rb") as f:
                txn.put(f"{k:08d}".encode(), datum(f.read(), label))
    env.close()
    os.rename(tmp, path)


def write_coco(path, files, samples, seed=0):
    """COCO instances for the files: 1-4 boxes per image, each with one or two polygons (6-12
    vertices each, inside the box) as its segmentation, categories 10 of 1..90."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    cats = sorted(int(c) for c in rng.choice(np.arange(1, 91), 10, replace=False))
    images, anns = [], []
    for i, (p, _) in enumerate(samples):
        with Image.open(p) as im:
            w, h = im.size
        images.append(dict(id=i + 1, file_name=os.path.relpath(p, files), width=w, height=h))
        for _ in range(int(rng.integers(1, 5))):
            bw, bh = float(rng.uniform(0.15, 0.8) * w), float(rng.uniform(0.15, 0.8) * h)
            x0, y0 = float(rng.uniform(0, w - bw)), float(rng.uniform(0, h - bh))
            polys = []
            for _ in range(int(rng.integers(1, 3))):
                n = int(rng.integers(6, 13))
                ang = np.sort(rng.uniform(0, 2 * np.pi, n))
                r = rng.uniform(0.5, 1.0, n)
                xs = x0 + bw / 2 * (1 + r * np.cos(ang))
                ys = y0 + bh / 2 * (1 + r * np.sin(ang))
                polys.append([round(float(v), 2) for xy in zip(xs, ys) for v in xy])
            anns.append(dict(id=len(anns) + 1, image_id=i + 1, category_id=int(rng.choice(cats)),
                             bbox=[round(v, 2) for v in (x0, y0, bw, bh)], area=round(bw * bh, 2), iscrowd=0,
                             segmentation=polys))
    doc = dict(images=images, annotations=anns, categories=[dict(id=c, name=f"class{c}") for c in cats])
    tmp = path + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "instances.json"), "w") as f:
        json.dump(doc, f)
    os.rename(tmp, path)


def make_data(root, count):
    files = os.path.join(root, "files")
    if not os.path.isdir(files):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "data_gen", "make_dataset.py"), files,
                        "--count", str(count)], check=True)
    classes = sorted(os.listdir(files))
    samples = [(os.path.join(files, c, f), label) for label, c in enumerate(classes) for f in sorted(os.listdir(os.path.join(files, c)))]
    shards = 10
    wds = os.path.join(root, "webdataset")
    if not os.path.isdir(wds):
        import io
        import tarfile

        import numpy as np

        os.makedirs(wds)
        for s in range(shards):
            tar_path = os.path.join(wds, f"train-{s:02d}.tar")
            with tarfile.open(tar_path, "w") as t:
                for k, (path, label) in enumerate(samples[s::shards]):
                    t.add(path, arcname=f"{k:06d}.jpg")
                    info = tarfile.TarInfo(f"{k:06d}.cls")
                    info.size = 4
                    t.addfile(info, io.BytesIO(np.int32(label).tobytes()))
            subprocess.run([sys.executable, "-m", "sluice.tools.wds2idx", tar_path, tar_path[:-4] + ".idx"], check=True)
    rec = os.path.join(root, "mxnet")
    if not os.path.isdir(rec):
        os.makedirs(rec)
        # RecordIO: magic, cflag/length, IRHeader(flag 0, label, ids), the JPEG, padding to 4
        # (single-part records: both readers go by the length); one index of offsets into
        # the files concatenated.
        magic = struct.pack("<I", 0xCED7230A)
        offset = 0
        with open(os.path.join(rec, "train.idx"), "w") as idx:
            for s in range(shards):
                with open(os.path.join(rec, f"train-{s:02d}.rec"), "wb") as out:
                    for k, (path, label) in enumerate(samples[s::shards]):
                        with open(path, "rb") as f:
                            payload = struct.pack("<IfQQ", 0, float(label), k, 0) + f.read()
                        rec_bytes = magic + struct.pack("<I", len(payload)) + payload + b"\0" * (-len(payload) % 4)
                        idx.write(f"{s * 100000 + k}\t{offset + out.tell()}\n")
                        out.write(rec_bytes)
                offset += os.path.getsize(os.path.join(rec, f"train-{s:02d}.rec"))
    tfr = os.path.join(root, "tfrecord")
    if not os.path.isdir(tfr):
        os.makedirs(tfr)
        for s in range(shards):
            with open(os.path.join(tfr, f"train-{s:02d}.tfrecord"), "wb") as out, open(os.path.join(tfr, f"train-{s:02d}.idx"), "w") as idx:
                for path, label in samples[s::shards]:
                    with open(path, "rb") as f:
                        data = example(f.read(), label)
                    head = struct.pack("<Q", len(data))
                    offset = out.tell()
                    out.write(head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data)))
                    idx.write(f"{offset} {out.tell() - offset}\n")
    if not os.path.isdir(os.path.join(root, "lmdb")):
        write_lmdb(os.path.join(root, "lmdb"), samples)
    if not os.path.isdir(os.path.join(root, "coco")):
        write_coco(os.path.join(root, "coco"), files, samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/sluice-readers-bench")
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--formats", default="file,tfrecord,webdataset,mxnet,lmdb,coco,coco-masks")
    ap.add_argument("--libs", default="sluice,dali")
    a = ap.parse_args()
    make_data(a.data, a.count)
    print(f"{a.count} ImageNet-like JPEGs, batch {a.batch}, {a.threads} threads, {a.epochs} epoch(s) after warm-up")
    print(f"{'format':<10} {'work':<12} " + " ".join(f"{lib:>10}" for lib in a.libs.split(",")) + "   sluice/dali")
    for fmt in a.formats.split(","):
        for decode in (False, True):
            rates = {}
            for lib in a.libs.split(","):
                r = subprocess.run([sys.executable, "-c", CHILD, lib, a.data, fmt, "1" if decode else "0", str(a.batch),
                                    str(a.threads), str(a.epochs)], capture_output=True, text=True)
                line = [l for l in r.stdout.splitlines() if l.startswith("{")]
                rates[lib] = json.loads(line[-1])["rate"] if line else None
                if not line:
                    sys.stderr.write(r.stderr[-1500:])
            ratio = f"{rates['sluice'] / rates['dali']:.2f}x" if rates.get("sluice") and rates.get("dali") else "-"
            work = "rn50 train" if decode else "read only"
            print(f"{fmt:<10} {work:<12} " + " ".join(f"{rates[l] or 0:>10.0f}" for l in a.libs.split(",")) + f"   {ratio}")


if __name__ == "__main__":
    main()
