"""CPU throughput, Sluice vs NVIDIA DALI (CPU-only) and a torchvision DataLoader side by side:
same files, same batch size, same threads (DataLoader workers), same pipeline. Prints images/s
and Sluice's ratio to each.

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


def measure_torchvision(kind, root, batch, threads, epochs):
    """The same pipelines with a torchvision DataLoader (ImageFolder + transforms, PIL
    decoding) and `threads` worker processes, as PyTorch users write it."""
    import torch
    from torchvision import datasets, transforms as T

    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    tf = {
        "train": T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm]),
        "val": T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm]),
        "decode": T.Compose([T.PILToTensor()]),
        "augment": T.Compose([T.RandomRotation(15), T.RandomHorizontalFlip(), T.PILToTensor()]),
    }[kind]
    ds = datasets.ImageFolder(root, transform=tf)
    collate = (lambda b: b) if kind in ("decode", "augment") else None  # sizes differ
    t0 = time.perf_counter()
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=threads, drop_last=True,
                                         persistent_workers=True, prefetch_factor=2,
                                         **({"collate_fn": collate} if collate else {}))
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    n = max(3, epochs * len(ds) // batch)
    done, t = 0, None
    while done < n + 2:
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            continue
        done += 1
        if done == 2:  # warm-up
            t = time.perf_counter()
    return n * batch / (time.perf_counter() - t), first


def measure(lib, kind, root, batch, threads, epochs):
    if lib.name == "torchvision":
        return measure_torchvision(kind, root, batch, threads, epochs)
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
        if name == "torchvision":
            import torchvision as m
            self.name, self.version = name, m.__version__
            return
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
    for name in ("dali", "torchvision"):
        try:
            libs.append(Lib(name))
        except ImportError:
            print(f"{name} not importable: left out")
    print(f"data: {root}  batch {a.batch}  threads {a.threads}  cores {os.cpu_count()}")
    print(f"{'pipeline':<10}" + "".join(f"{l.name + ' ' + l.version:>22}" for l in libs)
          + "".join(f"{'vs ' + l.name:>8}" for l in libs[1:]))
    for kind in a.pipelines.split(","):
        rates = []
        for lib in libs:
            rate, first = measure(lib, kind, root, a.batch, a.threads, a.epochs)
            rates.append((rate, first))
        cells = "".join(f"{r:>12.0f} img/s {f:>4.1f}s" for r, f in rates)
        ratios = "".join(f"{rates[0][0] / r:>7.2f}x" for r, _ in rates[1:])
        print(f"{kind:<10}{cells}{ratios}")
    print("(img/s in steady state; seconds = time to first batch incl. build)")


if __name__ == "__main__":
    main()
