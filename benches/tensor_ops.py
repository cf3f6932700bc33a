"""Tensor, detection and segmentation operators one by one, Sluice vs NVIDIA DALI side by
side: each library in its own process, on the same threads, over the same batches fed by
external sources (made by each case's DATA code, the same bytes for both). Prints samples/s
per operator and Sluice's ratio.

    python benches/tensor_ops.py [--ops select_masks,...] [--batch 64] [--iters 50]
                                 [--threads 2] [--device cpu|gpu] [--libs sluice,dali]
                                 [--feed constant|external_source]

On `--device gpu` the fed data moves to the GPU first for the cases that have a GPU backend
(`gpu` below); the others are skipped.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

# name: (data: Python code setting `feeds`, a list of per-sample arrays per input; the
# expression over the inputs `a`, `b`, `c`; whether it has a gpu backend)
CASES = {
    # the pipeline alone (feeding 64 arrays of 2000x2 floats, scheduling, returning): the floor
    "copy": ("feeds = [[rng.uniform(0, 1, (2000, 2)).astype(np.float32) for _ in range(B)]]", "fn.copy(a)", True),
    "coord_transform": ("feeds = [[rng.uniform(-1, 1, (2000, 3)).astype(np.float32) for _ in range(B)]]",
                        "fn.coord_transform(a, M=[0.5, 1.0, 0.0, -1.0, 2.0, 0.25], T=[1.0, 2.0])", True),
    "coord_flip": ("feeds = [[rng.uniform(0, 1, (2000, 2)).astype(np.float32) for _ in range(B)]]",
                   "fn.coord_flip(a, flip_x=fn.random.coin_flip(dtype=types.INT32), flip_y=1)", True),
    "select_masks": ("polys = [np.int32([[m, 30 * m, 30 * m + 30] for m in range(40)]) for _ in range(B)]\n"
                     "verts = [rng.uniform(0, 1, (1200, 2)).astype(np.float32) for _ in range(B)]\n"
                     "ids = [np.int32(rng.permutation(40)[:12]) for _ in range(B)]\n"
                     "feeds = [ids, polys, verts]",
                     "fn.segmentation.select_masks(a, b, c, reindex_masks=True)[1]", False),
    "random_mask_pixel": ("feeds = [[(rng.random((256, 256)) < 0.3).astype(np.int32) for _ in range(B)]]",
                          "fn.segmentation.random_mask_pixel(a, foreground=1)", False),
    "random_object_bbox": ("def blobs():\n"
                           "    m = np.zeros((128, 128), np.int32)\n"
                           "    for k in range(12):\n"
                           "        y, x, hh, ww = rng.integers(0, 110, 2).tolist() + rng.integers(3, 18, 2).tolist()\n"
                           "        m[y:y + hh, x:x + ww] = 1 + k % 4\n"
                           "    return m\n"
                           "feeds = [[blobs() for _ in range(B)]]",
                           "fn.segmentation.random_object_bbox(a, format='box', k_largest=3)", False),
    # subscripts on 64 sequences of 16 frames of 96x96x3: a strided gather, and a frame (one
    # run of each sample's memory: a view on the GPU, no copy)
    "subscript": ("feeds = [[rng.integers(0, 255, (16, 96, 96, 3), dtype=np.uint8) for _ in range(B)]]",
                  "a[2:14, ::2, 8:-8, 1]", True),
    "subscript_frame": ("feeds = [[rng.integers(0, 255, (16, 96, 96, 3), dtype=np.uint8) for _ in range(B)]]",
                        "a[5]", True),
    # SSD's encoding: 20 boxes per sample against 8732 anchors (SSD300's count)
    "box_encoder": ("lt = rng.uniform(0, 0.6, (8732, 2))\n"
                    "anchors = np.concatenate([lt, lt + rng.uniform(0.02, 0.4, (8732, 2))], 1).astype(np.float32).ravel().tolist()\n"
                    "def boxes():\n"
                    "    lt = rng.uniform(0, 0.7, (20, 2))\n"
                    "    return np.concatenate([lt, lt + rng.uniform(0.05, 0.3, (20, 2))], 1).astype(np.float32)\n"
                    "feeds = [[boxes() for _ in range(B)], [rng.integers(1, 80, (20,)).astype(np.int32) for _ in range(B)]]",
                    "fn.box_encoder(a, b, anchors=anchors, criteria=0.5, offset=True, scale=2, stds=[0.1, 0.1, 0.2, 0.2])[0]", True),
    # reductions over 224x224x3 images: per-channel minimum and mean (auto_contrast's and
    # contrast's), and a sum over the channels (many short sums)
    "reduce_min_hw": ("feeds = [[rng.integers(0, 255, (224, 224, 3), dtype=np.uint8) for _ in range(B)]]",
                      "fn.reductions.min(a, axes=(0, 1), keep_dims=True)", True),
    "reduce_mean_hw": ("feeds = [[rng.integers(0, 255, (224, 224, 3), dtype=np.uint8) for _ in range(B)]]",
                       "fn.reductions.mean(a, axes=(0, 1), dtype=types.FLOAT)", True),
    "reduce_sum_c": ("feeds = [[rng.uniform(0, 1, (224, 224, 3)).astype(np.float32) for _ in range(B)]]",
                     "fn.reductions.sum(a, axes=2)", True),
    # LZ4 blocks (DALI: gpu only, nvCOMP; made with python-lz4, `pip install lz4`) of
    # 224x224x3 images: flat 8x8 tiles of a gradient, 5% of pixels noisy (compress ~3x)
    "inflate": ("import lz4.block\n"
                "def image():\n"
                "    y, x = np.mgrid[0:224, 0:224]\n"
                "    base = np.stack([y // 8 * 8, x // 8 * 8, (x + y) // 16 * 8], -1)\n"
                "    base = base + (rng.random((224, 224, 1)) < 0.05) * rng.integers(0, 40, (224, 224, 3))\n"
                "    return np.frombuffer(lz4.block.compress(base.astype(np.uint8).tobytes(), store_size=False), np.uint8)\n"
                "feeds = [[image() for _ in range(B)]]",
                "fn.decoders.inflate(a, shape=[224, 224, 3], dtype=types.UINT8, layout='HWC')", True),
    # per-frame arguments (fn.per_frame): 8-frame 120x160 sequences, a value per frame; the
    # executor runs the operator frame by frame (Sluice) / DALI's sequence operator
    "brightness_contrast_per_frame": ("feeds = [[rng.integers(0, 255, (8, 120, 160, 3), dtype=np.uint8) for _ in range(B)]]",
                                      "fn.brightness_contrast(fn.reshape(a, layout='FHWC'), "
                                      "brightness=fn.per_frame(fn.random.uniform(range=[0.5, 1.5], shape=[8])), "
                                      "contrast=fn.per_frame(fn.random.uniform(range=[0.5, 1.5], shape=[8])))", True),
    "rotate_per_frame": ("feeds = [[rng.integers(0, 255, (8, 120, 160, 3), dtype=np.uint8) for _ in range(B)]]",
                         "fn.rotate(fn.reshape(a, layout='FHWC'), angle=fn.per_frame(fn.random.uniform(range=[-30, 30], shape=[8])), fill_value=0)", True),
    # volumes (DHWC, 32x64x64x1 of uint8: a CT-like crop): rotated about an oblique axis
    # (DALI's 3-D canvas), and warped by a fixed 3x4 matrix, trilinear
    "rotate_volume": ("feeds = [[rng.integers(0, 255, (32, 64, 64, 1), dtype=np.uint8) for _ in range(B)]]",
                      "fn.rotate(fn.reshape(a, layout='DHWC'), angle=fn.random.uniform(range=[-30, 30]), axis=[0.3, 1.0, 0.2])", True),
    "warp_affine_volume": ("feeds = [[rng.integers(0, 255, (32, 64, 64, 1), dtype=np.uint8) for _ in range(B)]]",
                           "fn.warp_affine(fn.reshape(a, layout='DHWC'), matrix=[0.9, 0.1, 0.0, 2.0, -0.1, 0.95, 0.05, 1.0, 0.0, 0.05, 1.0, -1.5], fill_value=0)", True),
    # the resize family on sequences and channel-first images: 8-frame 120x160 sequences to
    # 96x128; 3x240x320 CHW images to 224x224; one random window per 8-frame sequence
    "resize_fhwc": ("feeds = [[rng.integers(0, 255, (8, 120, 160, 3), dtype=np.uint8) for _ in range(B)]]",
                    "fn.resize(fn.reshape(a, layout='FHWC'), size=[96, 128])", True),
    "resize_chw": ("feeds = [[rng.integers(0, 255, (3, 240, 320), dtype=np.uint8) for _ in range(B)]]",
                   "fn.resize(fn.reshape(a, layout='CHW'), size=[224, 224])", True),
    "random_resized_crop_fhwc": ("feeds = [[rng.integers(0, 255, (8, 120, 160, 3), dtype=np.uint8) for _ in range(B)]]",
                                 "fn.random_resized_crop(fn.reshape(a, layout='FHWC'), size=[96, 96])", True),
    # 3-D resize: 32x64x64 volumes up to 48x96x96 (linear), and down to 16x32x32 (antialiased)
    "resize_volume_up": ("feeds = [[rng.integers(0, 255, (32, 64, 64, 1), dtype=np.uint8) for _ in range(B)]]",
                         "fn.resize(fn.reshape(a, layout='DHWC'), size=[48, 96, 96])", True),
    "resize_volume_down": ("feeds = [[rng.integers(0, 255, (32, 64, 64, 1), dtype=np.uint8) for _ in range(B)]]",
                           "fn.resize(fn.reshape(a, layout='DHWC'), size=[16, 32, 32])", True),
    "decoders_numpy": ("import io\n"
                       "def npy(x):\n"
                       "    f = io.BytesIO(); np.save(f, x); return np.frombuffer(f.getvalue(), np.uint8)\n"
                       "feeds = [[npy(rng.uniform(0, 1, (128, 256)).astype(np.float32)) for _ in range(B)]]",
                       "fn.decoders.numpy(a)", False),
    "decoders_numpy_fortran": ("import io\n"
                               "def npy(x):\n"
                               "    f = io.BytesIO(); np.save(f, np.asfortranarray(x)); return np.frombuffer(f.getvalue(), np.uint8)\n"
                               "feeds = [[npy(rng.uniform(0, 1, (128, 256)).astype(np.float32)) for _ in range(B)]]",
                               "fn.decoders.numpy(a)", False),
}

CHILD = r"""
import json, sys, time
import numpy as np
lib, spec = sys.argv[1], json.loads(sys.argv[2])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
else:
    from sluice import fn, pipeline_def, types
B = spec["batch"]
rng = np.random.default_rng(0)
DATA
gpu = spec["device"] == "gpu"

def source(batch):
    return lambda: batch

@pipeline_def(batch_size=B, num_threads=spec["threads"], device_id=0 if gpu else None, seed=1, prefetch_queue_depth=2)
def pipe():
    if spec["feed"] == "constant":
        # The first sample of each input as a constant: what the operator costs, without the
        # external source's per-array feeding (the same in both libraries, and most of the
        # time of operators this small).
        # On the GPU they are made there once (no upload per batch), so the operator is what
        # is timed.
        nodes = [types.Constant(f[0], device="gpu" if gpu else "cpu") for f in feeds]
    else:
        nodes = [fn.external_source(source(f), batch=True) for f in feeds]
        if gpu:
            nodes = [n.gpu() for n in nodes]
    a, b, c = (nodes + [None, None, None])[:3]
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
print(json.dumps({"rate": spec["iters"] * B / dt}))
"""


def run(lib, spec, data, expr):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD.replace("DATA", data).replace("EXPRESSION", expr))
    try:
        out = subprocess.run([sys.executable, f.name, lib, json.dumps(spec)], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=",".join(CASES))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--libs", default="sluice,dali")
    ap.add_argument("--feed", default="constant", choices=["constant", "external_source"])
    args = ap.parse_args()
    libs = args.libs.split(",")
    print(f"{args.device}, batch {args.batch}, {args.threads} threads, {args.iters} iterations, inputs: {args.feed}")
    for name in args.ops.split(","):
        data, expr, has_gpu = CASES[name]
        if args.device == "gpu" and not has_gpu:
            continue
        spec = {"batch": args.batch, "iters": args.iters, "threads": args.threads, "device": args.device, "feed": args.feed}
        rates = {}
        line = f"  {name:24s}"
        for lib in libs:
            rate, err = run(lib, spec, data, expr)
            rates[lib] = rate
            line += f" {lib} {rate:9.0f}/s" if rate else f" {lib} failed ({err})"
        if rates.get("sluice") and rates.get("dali"):
            line += f"  ratio {rates['sluice'] / rates['dali']:.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
