"""readers.numpy and the tensor joins, Sluice vs NVIDIA DALI side by side: CPU pipelines,
each library in its own process on the same threads, the same files. Prints samples/s per
case and Sluice's ratio.

    python benches/numpy_reader.py [--data /tmp/npy] [--count 2000] [--batch 64] [--threads 4] [--epochs 3]

Cases:
  read      readers.numpy over .npy files of 256x256x3 uint8 (C order)
  fortran   the same arrays stored in Fortran order (both libraries put them in C order)
  roi       read with rel_roi_start/rel_roi_shape (a centred half window) per sample
  stack     the read arrays stacked with themselves along a new last axis (interleaving)
  cat       the read arrays concatenated with themselves along axis 0
Files are written once into --data (kept for later runs); samples/s over whole epochs after
one warm-up epoch.
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
lib, root, kind, batch, threads, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def
else:
    from sluice import fn, pipeline_def

sub = "fortran" if kind == "fortran" else "c"

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1, prefetch_queue_depth=2)
def pipe():
    kw = dict(rel_roi_start=[0.25, 0.25], rel_roi_shape=[0.5, 0.5], roi_axes=[0, 1]) if kind == "roi" else {}
    x = fn.readers.numpy(file_root=os.path.join(root, sub), name="R", pad_last_batch=True, **kw)
    if kind == "stack":
        return fn.stack(x, x, axis=3)
    if kind == "cat":
        return fn.cat(x, x, axis=0)
    return x

p = pipe()
p.build()
iters = -(-p.epoch_size("R") // batch)
for _ in range(iters):
    p.run()
t = time.perf_counter()
for _ in range(epochs * iters):
    p.run()
dt = time.perf_counter() - t
print(json.dumps({"rate": epochs * iters * batch / dt}))
"""


def make_data(root, count):
    import numpy as np

    for sub, order in (("c", "C"), ("fortran", "F")):
        d = os.path.join(root, sub)
        if os.path.isdir(d) and len(os.listdir(d)) == count:
            continue
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(0)
        for k in range(count):
            a = rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)
            np.save(os.path.join(d, f"a{k:05d}.npy"), np.asarray(a, order=order))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/sluice-npy-bench")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--cases", default="read,fortran,roi,stack,cat")
    ap.add_argument("--libs", default="sluice,dali")
    a = ap.parse_args()
    make_data(a.data, a.count)
    print(f"{a.count} arrays of 256x256x3 uint8, batch {a.batch}, {a.threads} threads, {a.epochs} epochs")
    print(f"{'case':<8} " + " ".join(f"{lib:>10}" for lib in a.libs.split(",")) + "   sluice/dali")
    for kind in a.cases.split(","):
        rates = {}
        for lib in a.libs.split(","):
            r = subprocess.run([sys.executable, "-c", CHILD, lib, a.data, kind, str(a.batch), str(a.threads), str(a.epochs)],
                               capture_output=True, text=True)
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            rates[lib] = json.loads(line[-1])["rate"] if line else None
            if not line:
                sys.stderr.write(r.stderr[-2000:])
        ratio = f"{rates['sluice'] / rates['dali']:.2f}x" if rates.get("sluice") and rates.get("dali") else "-"
        print(f"{kind:<8} " + " ".join(f"{rates[l] or 0:>10.0f}" for l in a.libs.split(",")) + f"   {ratio}")


if __name__ == "__main__":
    main()
