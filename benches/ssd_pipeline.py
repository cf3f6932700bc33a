"""DALI's SSD training pipeline, Sluice vs NVIDIA DALI side by side (each library in its own
process, the same threads and batches) on a generated COCO-format set: JPEGs with boxes.
Prints images/s and Sluice's ratio.

    python benches/ssd_pipeline.py [--images 256] [--size 480x640] [--batch 32]
                                   [--iters 30] [--threads 2] [--device cpu|gpu]

cpu: every operator on the CPU. gpu: the decoder is mixed and the image operators run on the
GPU (random_bbox_crop, bb_flip and box_encoder on the CPU, as in DALI's SSD example).
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import itertools, json, sys, time
import numpy as np
lib, spec = sys.argv[1], json.loads(sys.argv[2])
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
else:
    from sluice import fn, pipeline_def, types

def anchors():
    fig, feat, steps = 300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    out = []
    for idx, sfeat in enumerate(feat):
        sk1, sk2 = scales[idx] / fig, scales[idx + 1] / fig
        sizes = [(sk1, sk1), (np.sqrt(sk1 * sk2),) * 2]
        for a in ratios[idx]:
            sizes += [(sk1 * np.sqrt(a), sk1 / np.sqrt(a)), (sk1 / np.sqrt(a), sk1 * np.sqrt(a))]
        fk = fig / steps[idx]
        for w, h in sizes:
            for i, j in itertools.product(range(sfeat), repeat=2):
                cx, cy = (j + 0.5) / fk, (i + 0.5) / fk
                out += [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]
    return np.clip(np.float32(out), 0, 1).tolist()

gpu = spec["device"] == "gpu"
mean, std = [0.485 * 255, 0.456 * 255, 0.406 * 255], [0.229 * 255, 0.224 * 255, 0.225 * 255]

@pipeline_def(batch_size=spec["batch"], num_threads=spec["threads"], device_id=0 if gpu else None, seed=1, prefetch_queue_depth=2)
def pipe():
    jpegs, boxes, labels = fn.readers.coco(file_root=spec["root"], annotations_file=spec["ann"], ratio=True, ltrb=True, random_shuffle=True, name="Reader")
    begin, size, boxes, labels = fn.random_bbox_crop(boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0], bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
    images = fn.decoders.image_slice(jpegs, begin, size, device="mixed" if gpu else "cpu", output_type=types.RGB)
    images = fn.resize(images, resize_x=300, resize_y=300, min_filter=types.INTERP_TRIANGULAR)
    images = fn.hsv(images, dtype=types.FLOAT, hue=fn.random.uniform(range=[-0.5, 0.5]), saturation=fn.random.uniform(range=[0.5, 1.5]))
    images = fn.brightness_contrast(images, brightness=fn.random.uniform(range=[0.875, 1.125]), contrast=fn.random.uniform(range=[0.5, 1.5]), dtype=types.UINT8, contrast_center=128)
    flip = fn.random.coin_flip(probability=0.5)
    images = fn.flip(images, horizontal=flip)
    boxes = fn.bb_flip(boxes, ltrb=True, horizontal=flip)
    encoded, enc_labels = fn.box_encoder(boxes, labels, criteria=0.5, anchors=anchors(), offset=True, scale=2, stds=[0.1, 0.1, 0.2, 0.2])
    images = fn.crop_mirror_normalize(images, crop=(300, 300), mean=mean, std=std, dtype=types.FLOAT, output_layout="CHW")
    return images, encoded, enc_labels

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


def make_set(d, n, h, w):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    images, annotations = [], []
    y, x = np.mgrid[0:h, 0:w]
    for i in range(n):
        # Photograph-like content (gradients and noise), so the JPEGs have real entropy.
        img = np.stack([128 + 90 * np.sin(x / rng.uniform(8, 40) + c) * np.cos(y / rng.uniform(8, 40)) for c in range(3)], -1)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        name = f"{i:05d}.jpg"
        with open(os.path.join(d, "images", name), "wb") as f:
            f.write(buf.getvalue())
        images.append(dict(id=i + 1, file_name=name, width=w, height=h))
        for _ in range(int(rng.integers(1, 8))):
            bx, by = float(rng.uniform(0, w - 20)), float(rng.uniform(0, h - 20))
            bw, bh = float(rng.uniform(10, w - bx)), float(rng.uniform(10, h - by))
            annotations.append(dict(id=len(annotations) + 1, image_id=i + 1, category_id=int(rng.integers(1, 81)), bbox=[bx, by, bw, bh], area=bw * bh, iscrowd=0))
    with open(os.path.join(d, "instances.json"), "w") as f:
        json.dump(dict(images=images, annotations=annotations, categories=[dict(id=c) for c in range(1, 81)]), f)
    return os.path.join(d, "images"), os.path.join(d, "instances.json")


def run(lib, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD)
    try:
        out = subprocess.run([sys.executable, f.name, lib, json.dumps(spec)], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--size", default="480x640")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--libs", default="sluice,dali")
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as d:
        root, ann = make_set(d, args.images, h, w)
        spec = dict(root=root, ann=ann, batch=args.batch, iters=args.iters, threads=args.threads, device=args.device)
        print(f"SSD pipeline, {args.device}, {args.images} JPEGs {h}x{w}, batch {args.batch}, {args.threads} threads, {args.iters} iterations")
        rates = {}
        line = "  ssd"
        for lib in args.libs.split(","):
            rate, err = run(lib, spec)
            rates[lib] = rate
            line += f" {lib} {rate:9.1f} img/s" if rate else f" {lib} failed ({err})"
        if rates.get("sluice") and rates.get("dali"):
            line += f"  ratio {rates['sluice'] / rates['dali']:.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
