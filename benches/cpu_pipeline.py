"""CPU throughput, Sluice vs NVIDIA DALI (CPU-only) side by side: same files, same batch
size, same threads, same pipeline, one process. Prints images/s and the ratio.

    python benches/cpu_pipeline.py [--data DIR] [--count 2000] [--threads N] [--batch 64]

Without --data it writes an ImageNet-like JPEG set with tests/data_gen/make_dataset.py.
Pipelines:
  train    ResNet-50 training: readers.file -> decoders.image_random_crop -> resize 224x224 ->
           crop_mirror_normalize (random mirror, CHW float)
  val      ResNet-50 validation: decoders.image -> resize_shorter 256 -> crop_mirror_normalize
           (center crop 224, CHW float)
  decode   readers.file -> decoders.image (RGB)
  augment  readers.file -> decoders.image -> rotate(random angle, linear) -> flip(random)
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build(lib, kind, root, batch, threads):
    fn, types, pipeline_def = lib.fn, lib.types, lib.pipeline_def

    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=7, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        if kind == "train":
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0],
                                                   num_attempts=100)
            images = fn.resize(images, resize_x=224, resize_y=224)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                              mean=mean, std=std, mirror=fn.random.coin_flip(probability=0.5))
            return images, labels
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        if kind == "val":
            images = fn.resize(images, resize_shorter=256)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                              mean=mean, std=std)
            return images, labels
        if kind == "augment":
            images = fn.rotate(images, angle=fn.random.uniform(range=(-15.0, 15.0)), fill_value=0,
                               interp_type=types.INTERP_LINEAR)
            images = fn.flip(images, horizontal=fn.random.coin_flip())
        return images, labels

    return pipe()


def measure(lib, kind, root, batch, threads, epochs):
    t0 = time.perf_counter()
    p = build(lib, kind, root, batch, threads)
    p.build()
    p.run()
    first = time.perf_counter() - t0
    n = p.epoch_size("Reader")
    iters = max(3, epochs * n // batch)
    for _ in range(2):  # warm-up
        p.run()
    t = time.perf_counter()
    for _ in range(iters):
        p.run()
    rate = iters * batch / (time.perf_counter() - t)
    del p
    return rate, first


class Lib:
    def __init__(self, name):
        if name == "sluice":
            import sluice as m
            from sluice import fn, types, pipeline_def
        else:
            import nvidia.dali as m
            from nvidia.dali import fn, types, pipeline_def
        self.name, self.fn, self.types, self.pipeline_def = name, fn, types, pipeline_def
        self.version = m.__version__


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--pipelines", default="train,val,decode,augment")
    a = ap.parse_args()
    root = a.data or f"/tmp/sluice-bench-imagenet-{a.count}"
    if not os.path.isdir(root):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "data_gen", "make_dataset.py"), root,
                        "--count", str(a.count), "--profile", "imagenet"], check=True)
    libs = [Lib("sluice")]
    try:
        libs.append(Lib("dali"))
    except ImportError:
        print("nvidia.dali not importable: printing Sluice alone")
    print(f"data: {root}  batch {a.batch}  threads {a.threads}  cores {os.cpu_count()}")
    print(f"{'pipeline':<10}" + "".join(f"{l.name + ' ' + l.version:>22}" for l in libs) + f"{'ratio':>8}")
    for kind in a.pipelines.split(","):
        rates = []
        for lib in libs:
            rate, first = measure(lib, kind, root, a.batch, a.threads, a.epochs)
            rates.append((rate, first))
        cells = "".join(f"{r:>12.0f} img/s {f:>4.1f}s" for r, f in rates)
        ratio = f"{rates[0][0] / rates[1][0]:>7.2f}x" if len(rates) > 1 else ""
        print(f"{kind:<10}{cells}{ratio}")
    print("(img/s in steady state; seconds = time to first batch incl. build)")


if __name__ == "__main__":
    main()
