"""Parallel external_source, Sluice vs NVIDIA DALI side by side: a Python source run in
worker processes (`external_source(parallel=True, batch=False)`), 1/2/4 workers, CPU-only
pipelines, each library in its own process. Prints samples/s and Sluice's ratio.

    python benches/external_source.py [--data DIR] [--count 512] [--batch 32] [--workers 1,2,4]

Sources:
  pillow  reads a JPEG and decodes it with Pillow (CPU-heavy per sample)
  arrays  returns a pre-made 224x224x3 uint8 array per sample (copy-heavy)
Without --data it writes an ImageNet-like JPEG set with tests/data_gen/make_dataset.py.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class PillowSource:
    def __init__(self, files):
        self.files = files

    def __call__(self, info):
        import numpy as np
        from PIL import Image

        if info.idx_in_epoch >= len(self.files):
            raise StopIteration
        with Image.open(self.files[info.idx_in_epoch]) as im:
            return np.asarray(im.convert("RGB"))


class ArraySource:
    def __init__(self, count):
        import numpy as np

        self.count = count
        self.arrays = [np.full((224, 224, 3), i % 251, np.uint8) for i in range(16)]

    def __call__(self, info):
        if info.idx_in_epoch >= self.count:
            raise StopIteration
        return self.arrays[info.idx_in_epoch % 16]


def child(lib, source, data, count, batch, workers, epochs):
    if lib == "sluice":
        import sluice as mod
    else:
        import nvidia.dali as mod
        import nvidia.dali.fn  # noqa: F401
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(data) for f in fs if f.endswith(".jpg"))[:count]
    src = PillowSource(files) if source == "pillow" else ArraySource(count)
    pipe = mod.Pipeline(batch, 2, None, py_num_workers=workers, py_start_method="fork", prefetch_queue_depth=2)
    with pipe:
        pipe.set_outputs(mod.fn.external_source(src, batch=False, parallel=True, prefetch_queue_depth=2))
    pipe.build()
    n, t0 = 0, None
    for e in range(epochs + 1):  # epoch 0 warms up
        if e == 1:
            t0, n = time.perf_counter(), 0
        while True:
            try:
                out = pipe.run()
            except StopIteration:
                break
            n += len(out[0])
        pipe.reset()
    print(json.dumps({"rate": n / (time.perf_counter() - t0)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--sources", default="pillow,arrays")
    ap.add_argument("--child", nargs=5)
    a = ap.parse_args()
    if a.child:
        lib, source, data, workers, _ = a.child
        return child(lib, source, data, a.count, a.batch, int(workers), a.epochs)
    data = a.data
    if data is None:
        data = tempfile.mkdtemp(prefix="sluice-es-bench-")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "data_gen", "make_dataset.py"), data,
                        "--count", str(a.count)], check=True, capture_output=True)
    libs = ["sluice"]
    try:
        import nvidia.dali  # noqa: F401

        libs.append("dali")
    except ImportError:
        print("dali not importable: left out")
    print(f"batch {a.batch}, {a.count} samples per epoch, {a.epochs} epochs, data {data}, {os.cpu_count()} cores")
    print(f"{'source':8} {'workers':>7} " + " ".join(f"{lib:>14}" for lib in libs) + ("      ratio" if len(libs) > 1 else ""))
    for source in a.sources.split(","):
        for w in [int(x) for x in a.workers.split(",")]:
            rates = []
            for lib in libs:
                r = subprocess.run([sys.executable, __file__, "--count", str(a.count), "--batch", str(a.batch),
                                    "--epochs", str(a.epochs), "--child", lib, source, data, str(w), "x"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print(r.stderr[-2000:])
                    rates.append(float("nan"))
                else:
                    rates.append(json.loads(r.stdout.strip().splitlines()[-1])["rate"])
            line = f"{source:8} {w:>7} " + " ".join(f"{x:>10.0f} s/s" for x in rates)
            if len(rates) > 1:
                line += f"   {rates[0] / rates[1]:>6.2f}x"
            print(line)


if __name__ == "__main__":
    main()
