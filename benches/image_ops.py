"""Image operators one by one, and the augmentation chains of issue 19, Sluice vs NVIDIA DALI
side by side: each library in its own process, on the same threads, over the same batches
from an external source (random 8-bit images, or JPEGs decoded first for the chains).
Prints images/s per operator and Sluice's ratio.

    python benches/image_ops.py [--ops brightness_contrast,hsv,...] [--batch 32]
                                [--size 480x640] [--iters 30] [--threads 2] [--device cpu|gpu]
                                [--libs sluice,dali]

Arguments are per sample where a pipeline would give them so (random values from
`fn.random.uniform`), so the per-sample argument path is what is measured.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

OPS = {
    # the pipeline alone (feeding, scheduling, returning a batch): what cheap operators add to
    "copy": "fn.copy(x)",
    "brightness_contrast": "fn.brightness_contrast(x, brightness=u(0.5, 1.5), contrast=u(0.5, 1.5))",
    "hsv": "fn.hsv(x, hue=u(-30, 30), saturation=u(0.5, 1.5), value=u(0.8, 1.2))",
    "color_twist": "fn.color_twist(x, hue=u(-30, 30), saturation=u(0.5, 1.5), brightness=u(0.8, 1.2), contrast=u(0.8, 1.2))",
    "hsv_float": "fn.hsv(x, hue=u(-30, 30), saturation=u(0.5, 1.5), dtype=types.FLOAT)",
    "color_space_conversion": "fn.color_space_conversion(x, image_type=types.RGB, output_type=types.YCbCr)",
    "to_gray": "fn.color_space_conversion(x, image_type=types.RGB, output_type=types.GRAY)",
    "equalize": "fn.experimental.equalize(x)",
    "warp_affine": "fn.warp_affine(x, matrix=[0.9, 0.1, 10.0, -0.1, 0.9, 20.0], fill_value=0)",
    "warp_affine_nn": "fn.warp_affine(x, matrix=[0.9, 0.1, 10.0, -0.1, 0.9, 20.0], interp_type=types.INTERP_NN)",
    "gaussian_blur": "fn.gaussian_blur(x, sigma=1.5)",
    "laplacian": "fn.laplacian(x, window_size=3)",
    "noise_gaussian": "fn.noise.gaussian(x, stddev=u(1, 20))",
    "salt_and_pepper": "fn.noise.salt_and_pepper(x, prob=0.05)",
    "filter_sharpen": "fn.filter(x, np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32))",
    # windows and geometry (this stop's operators)
    "crop": "fn.crop(x, crop=(224, 224), crop_pos_x=u(0, 1), crop_pos_y=u(0, 1))",
    "slice": "fn.slice(x, rel_start=fn.random.uniform(range=(0, 0.3), shape=(2,)), rel_shape=(0.6, 0.6), axes=(0, 1))",
    "paste": "fn.paste(x, ratio=u(1.2, 2.0), paste_x=u(0, 1), paste_y=u(0, 1), fill_value=(118, 185, 0))",
    "resize_crop_mirror": "fn.resize_crop_mirror(x, resize_shorter=256, crop=(224, 224), mirror=fn.random.coin_flip(dtype=types.INT32))",
    "jpeg_compression_distortion": "fn.jpeg_compression_distortion(x, quality=fn.random.uniform(range=(20, 90), dtype=types.INT32))",
    "jitter": "fn.jitter(x, nDegree=3)",
    "dilate": "fn.experimental.dilate(x, mask_size=[5, 5])",
    "erode": "fn.experimental.erode(x, mask_size=[3, 3], iterations=2)",
    "median_blur": "fn.experimental.median_blur(x, window_size=[5, 5])",
    "warp_perspective": "fn.experimental.warp_perspective(x, matrix=[0.9, 0.1, 10.0, -0.1, 0.9, 20.0, 0.0001, 0.0002, 1.0], fill_value=0)",
    "warp_perspective_cubic": "fn.experimental.warp_perspective(x, matrix=[0.9, 0.1, 10.0, -0.1, 0.9, 20.0, 0.0001, 0.0002, 1.0], fill_value=0, interp_type=types.INTERP_CUBIC)",
    # issue 19's detection-style chain (on decoded images): warp, colour, blur, normalise
    "detection_chain": "fn.crop_mirror_normalize(fn.gaussian_blur(fn.brightness_contrast(fn.hsv("
                       "fn.warp_affine(x, matrix=[0.9, 0.1, 10.0, -0.1, 0.9, 20.0], fill_value=0), hue=u(-20, 20), saturation=u(0.7, 1.3)),"
                       " brightness=u(0.8, 1.2), contrast=u(0.8, 1.2)), sigma=1.0), dtype=types.FLOAT, output_layout='CHW',"
                       " mean=[124.0, 117.0, 104.0], std=[58.0, 57.0, 57.0], mirror=fn.random.coin_flip())",
    # issue 19's automatic augmentations (each sample its own operations, by conditionals);
    # usually run on crops: --size 224x224
    "rand_augment": "rand_augment.rand_augment(x, n=2, m=9)",
    "auto_augment": "auto_augment.auto_augment_image_net(x)",
    "trivial_augment": "trivial_augment.trivial_augment_wide(x)",
}

CHILD = r"""
import json, sys, time
import numpy as np
lib, spec = sys.argv[1], json.loads(sys.argv[2])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.auto_aug import auto_augment, rand_augment, trivial_augment
else:
    from sluice import fn, pipeline_def, types
    from sluice.auto_aug import auto_augment, rand_augment, trivial_augment
h, w = spec["size"]
rng = np.random.default_rng(0)
images = [rng.integers(0, 255, (h, w, 3), dtype=np.uint8) for _ in range(spec["batch"])]
gpu = spec["device"] == "gpu"

def u(lo, hi):
    return fn.random.uniform(range=[lo, hi])

@pipeline_def(batch_size=spec["batch"], num_threads=spec["threads"], device_id=0 if gpu else None, seed=1,
              prefetch_queue_depth=2, enable_conditionals=True)
def pipe():
    x = fn.external_source(lambda: images, batch=True, layout="HWC")
    if gpu:
        x = x.gpu()
    return EXPRESSION

p = pipe()
p.build()
for _ in range(5):
    p.run()
t = time.perf_counter()
for _ in range(spec["iters"]):
    out = p.run()
if gpu:
    out[0].as_cpu()
dt = time.perf_counter() - t
print(json.dumps({"rate": spec["iters"] * spec["batch"] / dt}))
"""


def run(lib, spec):
    # The expression is written into the child's source (not eval'd): conditionals convert the
    # pipeline function, and the functions it calls, from their source files.
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD.replace("EXPRESSION", spec["expr"]))
    try:
        out = subprocess.run([sys.executable, f.name, lib, json.dumps(spec)], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", default="480x640")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--libs", default="sluice,dali")
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    libs = args.libs.split(",")
    print(f"{args.device}, {args.batch} x {h}x{w}x3 uint8, {args.threads} threads, {args.iters} iterations")
    for name in args.ops.split(","):
        spec = {"expr": OPS[name], "size": [h, w], "batch": args.batch, "iters": args.iters, "threads": args.threads, "device": args.device}
        rates = {}
        line = f"  {name:24s}"
        for lib in libs:
            rate, err = run(lib, spec)
            rates[lib] = rate
            line += f" {lib} {rate:9.0f}/s" if rate else f" {lib} failed ({err})"
        if rates.get("sluice") and rates.get("dali"):
            line += f"  ratio {rates['sluice'] / rates['dali']:.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
