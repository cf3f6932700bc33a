"""`python -m sluice demo [DIR]`: runs a training-style augmentation pipeline over DIR (one
sub-folder per class), or over a built-in sample dataset it writes itself, prints the
throughput and writes a PNG grid of augmented samples."""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from . import _core, fn, pipeline_def, types
from ._png import write_png


@pipeline_def
def training_pipeline(file_root, shard_id=0, num_shards=1):
    """ResNet-50 training augmentation: random-area crop decoded straight from the JPEG,
    resized to 224x224, a small random rotation, random mirror, normalized to CHW float."""
    jpegs, labels = fn.readers.file(file_root=file_root, random_shuffle=True, initial_fill=512,
                                    shard_id=shard_id, num_shards=num_shards, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.08, 1.0],
                                           random_aspect_ratio=[0.75, 4.0 / 3.0], num_attempts=100)
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.rotate(images, angle=fn.random.uniform(range=(-10.0, 10.0)), keep_size=True, fill_value=0)
    tensors = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                       mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                       std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                       mirror=fn.random.coin_flip(probability=0.5))
    return images, tensors, labels


def _thumbnail(img, size):
    """Nearest-neighbour fit of an HWC image into a size x size tile (letterboxed)."""
    h, w = img.shape[:2]
    s = size / max(h, w)
    nh, nw = max(1, int(h * s)), max(1, int(w * s))
    ys = (np.arange(nh) * h // nh).clip(0, h - 1)
    xs = (np.arange(nw) * w // nw).clip(0, w - 1)
    tile = np.zeros((size, size, 3), np.uint8)
    oy, ox = (size - nh) // 2, (size - nw) // 2
    tile[oy:oy + nh, ox:ox + nw] = img[ys][:, xs][..., :3]
    return tile


def _grid(images, cols=8, size=160, pad=4):
    rows = (len(images) + cols - 1) // cols
    out = np.full((rows * (size + pad) + pad, cols * (size + pad) + pad, 3), 24, np.uint8)
    for k, img in enumerate(images):
        r, c = divmod(k, cols)
        y, x = pad + r * (size + pad), pad + c * (size + pad)
        out[y:y + size, x:x + size] = _thumbnail(img, size)
    return out


def demo(argv):
    ap = argparse.ArgumentParser(prog="python -m sluice demo", description=__doc__)
    ap.add_argument("dir", nargs="?", help="image folder with one sub-folder per class (default: a built-in sample set)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--iterations", type=int, default=0, help="batches to time (default: two epochs)")
    ap.add_argument("--samples", type=int, default=512, help="size of the built-in sample set")
    ap.add_argument("--preview", default="sluice_preview.png", help="where to write the PNG grid")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args(argv)

    root = a.dir
    if root is None:
        root = os.path.join(tempfile.gettempdir(), f"sluice-sample-{a.samples}")
        marker = os.path.join(root, ".complete")
        if not os.path.exists(marker):
            print(f"writing the built-in sample dataset ({a.samples} JPEGs) to {root} ...", flush=True)
            t = time.perf_counter()
            nbytes = _core.write_sample_dataset(root, a.samples, 8, 0)
            open(marker, "w").close()
            print(f"  {a.samples} files, {nbytes / a.samples / 1024:.0f} KiB mean, {time.perf_counter() - t:.1f} s")
    elif not os.path.isdir(root):
        sys.exit(f"error: {root} is not a folder")

    t0 = time.perf_counter()
    pipe = training_pipeline(root, batch_size=a.batch_size, num_threads=a.threads, device_id=None, seed=a.seed)
    pipe.build()
    epoch = pipe.epoch_size("Reader")
    images, tensors, labels = pipe.run()
    first = time.perf_counter() - t0
    print(f"pipeline: readers.file -> decoders.image_random_crop -> resize 224x224 -> rotate(+-10 deg) -> "
          f"crop_mirror_normalize(mirror, CHW float) | {epoch} images, batch {a.batch_size}, {a.threads} threads, CPU")
    print(f"time to first batch: {first:.2f} s")

    write_png(a.preview, _grid([images.at(i) for i in range(min(16, len(images)))]))

    iters = a.iterations or max(1, 2 * epoch // a.batch_size)
    start = time.perf_counter()
    for k in range(iters):
        images, tensors, labels = pipe.run()
        done = k + 1
        if done % max(1, iters // 20) == 0 or done == iters:
            rate = done * a.batch_size / (time.perf_counter() - start)
            bar = "#" * (30 * done // iters)
            print(f"\r[{bar:<30}] {done}/{iters} batches  {rate:8.1f} img/s", end="", flush=True)
    elapsed = time.perf_counter() - start
    print()
    print(f"throughput: {iters * a.batch_size / elapsed:.1f} images/s over {iters} batches")
    print(f"preview: {os.path.abspath(a.preview)}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m sluice demo [DIR] [options]   (python -m sluice demo --help)")
        return
    if argv[0] == "demo":
        demo(argv[1:])
    else:
        sys.exit(f"unknown command {argv[0]!r}; try: python -m sluice demo")


if __name__ == "__main__":
    main()
