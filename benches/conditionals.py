"""Conditional execution, Sluice vs NVIDIA DALI side by side: a CPU pipeline whose samples
take one of three branches by a per-sample coin flip and value (`if`/`elif`/`else` with
`enable_conditionals=True`), on 224x224x3 images from an external source, each library in
its own process on the same threads. Prints samples/s and Sluice's ratio.

    python benches/conditionals.py [--batch 64] [--iters 100] [--threads 2]

The branches do flip / brightness-like arithmetic / crop+resize, so the split and merge
operators move whole images: what conditionals cost beyond the branch work itself.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import numpy as np
lib, batch, iters, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
else:
    from sluice import fn, pipeline_def, types
rng = np.random.default_rng(0)
images = [rng.integers(0, 255, (224, 224, 3), dtype=np.uint8) for _ in range(batch)]

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1, enable_conditionals=True,
              prefetch_queue_depth=2)
def pipe():
    img = fn.external_source(lambda: images, batch=True, layout="HWC")
    coin = fn.random.coin_flip(probability=0.5)
    v = fn.random.uniform(range=[0, 1])
    if coin:
        out = fn.flip(img, horizontal=1)
    elif v > 0.5:
        out = fn.cast(img * 0.5 + 20, dtype=types.UINT8)
    else:
        out = fn.resize(fn.crop(img, crop=(160, 160)), size=(224, 224))
    return out

p = pipe()
p.build()
for _ in range(5):
    p.run()
t = time.perf_counter()
for _ in range(iters):
    p.run()
dt = time.perf_counter() - t
print(json.dumps({"rate": iters * batch / dt}))
"""


def run(lib, args):
    # From a file: conditionals convert the pipeline function from its source, which
    # `python -c` does not keep.
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD)
    try:
        out = subprocess.run([sys.executable, f.name, lib, str(args.batch), str(args.iters), str(args.threads)],
                             capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise SystemExit(f"{lib} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rates = {lib: run(lib, args) for lib in ("sluice", "dali")}
    print(f"conditionals (3 branches, {args.batch} x 224x224x3, {args.threads} threads): "
          f"sluice {rates['sluice']:.0f}/s, dali {rates['dali']:.0f}/s, ratio {rates['sluice'] / rates['dali']:.2f}x")


if __name__ == "__main__":
    main()
