"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from the encoders the test
suite uses: small images of every format the decoders read, baseline JPEGs for the scan
preparation, and a record of each format the readers parse. Each seed starts with the byte
that picks the target's parameters (see fuzz_targets/). Run from the repository root:

    python fuzz/make_corpus.py
"""

import io
import json
import sys
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import test_readers_caffe as caffe_t  # noqa: E402
import test_readers_mxnet as mxnet_t  # noqa: E402
import test_readers_tfrecord as tfrecord_t  # noqa: E402


def write(target, name, data):
    d = HERE / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def images():
    rng = np.random.default_rng(0)
    picture = Image.fromarray((rng.random((21, 30, 3)) * 255).astype(np.uint8))
    kinds = [("jpeg", "JPEG", {}, "RGB"), ("jpeg-prog", "JPEG", {"progressive": True}, "RGB"),
             ("jpeg-444", "JPEG", {"subsampling": 0}, "RGB"), ("jpeg-gray", "JPEG", {}, "L"),
             ("png", "PNG", {}, "RGB"), ("png-rgba", "PNG", {}, "RGBA"), ("png-pal", "PNG", {}, "P"),
             ("png16", "PNG", {}, "I;16"), ("bmp", "BMP", {}, "RGB"), ("tiff", "TIFF", {}, "RGB"),
             ("webp", "WEBP", {"lossless": True}, "RGB"), ("webp-lossy", "WEBP", {"quality": 70}, "RGB"),
             ("ppm", "PPM", {}, "RGB"), ("pgm", "PPM", {}, "L")]
    out = {}
    for name, fmt, kw, mode in kinds:
        b = io.BytesIO()
        picture.convert(mode).save(b, fmt, **kw)
        out[name] = b.getvalue()
    return out


def main():
    imgs = images()
    for name, data in imgs.items():
        for knobs in (0x00, 0x9B):  # plain; Gray, orientation, 1/2 scale, ROI
            write("decode_image", f"{name}-{knobs:02x}", bytes([knobs]) + data)
    for name in ("jpeg", "jpeg-444"):
        for knobs in (0, 3):
            write("jpeg_scan", f"{name}-{knobs}", bytes([knobs]) + imgs[name])
    t = tfrecord_t
    ex = t.example({"v": ("int64", [1, 2, 3], True), "f": ("float", [0.5], False), "b": ("bytes", [b"abc", b""], False)})
    write("reader_records", "tfrecord", bytes([0]) + t.record(ex))
    npy = io.BytesIO()
    np.save(npy, np.arange(12, dtype=np.int16).reshape(3, 4))
    write("reader_records", "numpy", bytes([1]) + npy.getvalue())
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(np.zeros((2, 3), np.float32)))
    write("reader_records", "numpy-fortran", bytes([1]) + fortran.getvalue())
    write("reader_records", "recordio", bytes([2]) + mxnet_t.frame(mxnet_t.ir_header(3.0) + b"payload"))
    write("reader_records", "caffe-datum", bytes([3]) + caffe_t.datum(data=b"\x01\x02\x03\x04", label=7, channels=1, height=2, width=2))
    write("reader_records", "caffe2-protos", bytes([3, 0x03]) + caffe_t.tensor_protos(caffe_t.tensor(data_type=3, dims=(4,), byte_data=b"\x01\x02\x03\x04")))
    write("reader_records", "tar", bytes([4]) + tar_archive())
    write("reader_records", "tar-gnu-longname", bytes([4]) + tar_archive(tarfile.GNU_FORMAT, "k/" + "n" * 120))
    write("reader_records", "tar-pax", bytes([4]) + tar_archive(tarfile.PAX_FORMAT, "p/" + "x" * 120))
    write("reader_records", "coco", bytes([5]) + json.dumps({
        "images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 6}, {"id": 2, "file_name": "b.jpg", "width": 5, "height": 5}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 3, "bbox": [1, 1, 4, 3], "area": 12, "iscrowd": 0,
             "segmentation": [[1, 1, 5, 1, 5, 4, 1, 4]]},
            {"id": 2, "image_id": 2, "category_id": 3, "bbox": [0, 0, 2, 2], "area": 4, "iscrowd": 1,
             "segmentation": {"size": [5, 5], "counts": "05f0"}},
        ],
        "categories": [{"id": 3, "name": "c"}]}).encode())


def tar_archive(fmt=tarfile.USTAR_FORMAT, long_name="s0/sample"):
    """A small WebDataset-style tar: two members of one sample (and one of another)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in [(long_name + ".jpg", b"\xff\xd8 not really"), (long_name + ".cls", b"7"), ("s1/x.txt", b"hi")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


if __name__ == "__main__":
    main()
