"""GPU throughput, Sluice vs NVIDIA DALI side by side on one machine: same files, batch size,
threads and pipeline; each run in its own process (clean GPU memory accounting).

    python benches/gpu_pipeline.py DATA_DIR [--batch 256] [--threads 16] [--iters 60]

Pipelines (ResNet-50 training style, output NCHW float):
  rn50-full    readers.file -> decoders.image(mixed) -> resize(224x224) -> crop_mirror_normalize(mirror)
  rn50-crop    readers.file -> decoders.image_random_crop(mixed) -> resize(224x224) -> cmn(mirror)
               (DALI's reference ResNet-50 training pipeline)
  decode       readers.file -> decoders.image(mixed)
Libraries: sluice, dali (nvidia.dali), torchvision (torchvision.io.decode_jpeg on the GPU and
torchvision transforms per image, the way a PyTorch user writes it without a data library).
Per run: steady-state img/s (after warm-up, over whole epochs), time to first batch from
process start (import + build + first batch), peak GPU memory the process took.

    python benches/gpu_pipeline.py DATA_DIR --epochs 8 [--policy partial] [--pad]

Epoch boundaries: rn50-crop through each library's PyTorch iterator
(DALIClassificationIterator, reader_name, the iterator reset after each epoch), several short
epochs (800 large photos at batch 256: three full batches and a partial one). Prints the
whole-epoch rate (samples the iterator returned / time, epochs after the first) against the
median rate of full batches: a pipeline that keeps working across the boundary and does not
pay for samples it throws away comes close to 100%.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

T0 = time.perf_counter()


def cuda_sync():
    """Waits for all GPU work of this process (both libraries use the primary context)."""
    ctypes.CDLL("libcuda.so.1").cuCtxSynchronize()


def gpu_used_bytes():
    """Device memory in use on GPU 0 (driver view, includes every process)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    dev = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cuda.cuCtxSetCurrent(ctx)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    return total.value - free.value


def median_rate(start, stamps, batch):
    """Images per second at the median time between batches: unlike the mean rate, a few
    stalls caused by other tenants of a shared machine barely move it."""
    gaps = sorted(b - a for a, b in zip([start] + stamps[:-1], stamps))
    return batch / gaps[len(gaps) // 2]


def torchvision_batches(kind, root, batch, threads):
    """The same pipelines written with torchvision, as a PyTorch user would without a data
    library: files read by a thread pool, a batch decoded on the GPU by nvJPEG
    (torchvision.io.decode_jpeg with device="cuda"), then RandomResizedCrop, a random flip
    and normalization per image on the GPU. Yields NCHW float batches (or the decoded list)."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    import torch
    import torchvision
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms import RandomResizedCrop
    from torchvision.transforms.v2 import functional as F

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.lower().endswith((".jpg", ".jpeg")))
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255
    rng = random.Random(12)
    pool = ThreadPoolExecutor(threads)
    while True:
        order = files[:]
        rng.shuffle(order)
        for k in range(0, len(order) - batch + 1, batch):
            data = list(pool.map(torchvision.io.read_file, order[k:k + batch]))
            images = decode_jpeg(data, mode=ImageReadMode.RGB, device="cuda")
            if kind == "decode":
                yield images
                continue
            out = []
            for img in images:
                if kind == "rn50-crop":
                    i, j, h, w = RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(0.75, 4.0 / 3.0))
                    img = F.resized_crop(img, i, j, h, w, [224, 224], antialias=True)
                else:
                    img = F.resize(img, [224, 224], antialias=True)
                if rng.random() < 0.5:
                    img = F.horizontal_flip(img)
                out.append(img)
            yield (torch.stack(out).float() - mean) / std


def torchvision_child(kind, root, batch, threads, iters):
    base = gpu_used_bytes()
    import torch
    it = torchvision_batches(kind, root, batch, threads)
    next(it)
    torch.cuda.synchronize()
    first = time.perf_counter() - T0
    peak = gpu_used_bytes()
    for _ in range(3):
        next(it)
    torch.cuda.synchronize()
    t = time.perf_counter()
    stamps = []
    for _ in range(iters):
        next(it)
        peak = max(peak, gpu_used_bytes())
        stamps.append(time.perf_counter())
    torch.cuda.synchronize()
    rate = iters * batch / (time.perf_counter() - t)
    print(json.dumps({"rate": rate, "median_rate": median_rate(t, stamps, batch), "first": first, "mem": (peak - base) / 2**30}))


def make_pipeline(lib, kind, root, batch, threads, dec_args, pad=False):
    if lib == "sluice":
        from sluice import fn, pipeline_def, types
    else:
        from nvidia.dali import fn, pipeline_def, types
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=0, seed=12, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader", pad_last_batch=pad)
        if kind == "rn50-crop":
            images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                                   random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0],
                                                   num_attempts=100, **dec_args)
        else:
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, **dec_args)
        if kind == "decode":
            return images, labels
        images = fn.resize(images, device="gpu", resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, device="gpu", dtype=types.FLOAT, output_layout="CHW",
                                          crop=(224, 224), mean=mean, std=std,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    return pipe()


def epochs_child(lib, root, batch, threads, epochs, policy, pad, dec_args):
    """Whole epochs through the library's PyTorch iterator; the iterator is reset after each."""
    p = make_pipeline(lib, "rn50-crop", root, batch, threads, dec_args, pad)
    import torch
    if lib == "sluice":
        from sluice.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    else:
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    # (the reader says whether it pads: the iterator takes it from there)
    it = DALIClassificationIterator(p, reader_name="Reader", last_batch_policy=getattr(LastBatchPolicy, policy.upper()))
    full_gaps, first_gaps, last_gaps, per_epoch = [], [], [], []
    for e in range(epochs):
        start = prev = time.perf_counter()
        samples = 0
        for k, b in enumerate(it):
            n = b[0]["data"].shape[0]
            torch.cuda.current_stream().synchronize()  # the batch's data is there, as a training step needs it
            now = time.perf_counter()
            if e > 0:
                if n == batch and k > 0:
                    full_gaps.append(now - prev)
                (first_gaps if k == 0 else last_gaps if n < batch else []).append(now - prev)
            samples += n
            prev = now
        it.reset()
        per_epoch.append((samples, time.perf_counter() - start))
    timed = per_epoch[1:]  # the first epoch includes warm-up
    epoch_rate = sum(s for s, _ in timed) / sum(t for _, t in timed)
    median_rate = batch / sorted(full_gaps)[len(full_gaps) // 2]
    ms = lambda v: round(1e3 * sorted(v)[len(v) // 2], 1) if v else None  # noqa: E731
    print(json.dumps({"epoch_rate": epoch_rate, "median_rate": median_rate, "share": epoch_rate / median_rate,
                      "samples_per_epoch": [s for s, _ in per_epoch],
                      # median ms: a full batch, an epoch's first batch, its partial last batch
                      "gaps_ms": [ms(full_gaps), ms(first_gaps), ms(last_gaps)]}))


def child(lib, kind, root, batch, threads, iters, dec_args):
    if lib == "torchvision":
        return torchvision_child(kind, root, batch, threads, iters)
    base = gpu_used_bytes()
    p = make_pipeline(lib, kind, root, batch, threads, dec_args)
    p.build()
    p.run()
    first = time.perf_counter() - T0
    peak = gpu_used_bytes()
    for _ in range(3):
        p.run()
    t = time.perf_counter()
    stamps = []
    for _ in range(iters):
        out = p.run()
        peak = max(peak, gpu_used_bytes())
        stamps.append(time.perf_counter())
    # Stop the clock once the last batch's GPU work is done (a device-wide synchronize:
    # copying the batch back, as_cpu(), would add ~100 ms of transfer to the measurement).
    cuda_sync()
    rate = iters * batch / (time.perf_counter() - t)
    res = {"rate": rate, "median_rate": median_rate(t, stamps, batch), "first": first, "mem": (peak - base) / 2**30}
    if lib == "sluice":  # where the executor's time went (host time per operator call, ms)
        res["ops"] = {k: round(1e3 * v["seconds"] / max(v["calls"], 1), 2) for k, v in p.executor_statistics().items()}
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--pipelines", default="rn50-full,decode,rn50-crop")
    ap.add_argument("--libs", default="sluice,dali,torchvision")
    ap.add_argument("--hw-load", type=float, help="hw_decoder_load for both libraries (default: theirs, 0.65)")
    ap.add_argument("--epochs", type=int, help="the epoch-boundary case: this many epochs through the PyTorch iterator")
    ap.add_argument("--policy", default="partial", choices=["partial", "fill", "drop"])
    ap.add_argument("--pad", action="store_true", help="pad_last_batch on the reader")
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    dec_args = {} if a.hw_load is None else {"hw_decoder_load": a.hw_load}
    if a.child and a.epochs:
        epochs_child(a.child[0], a.data, a.batch, a.threads, a.epochs, a.policy, a.pad, dec_args)
        return
    if a.child:
        child(a.child[0], a.child[1], a.data, a.batch, a.threads, a.iters, dec_args)
        return
    if a.epochs:
        return epochs_main(a)
    rows = []
    for kind in a.pipelines.split(","):
        res = {}
        for lib in a.libs.split(","):
            r = subprocess.run([sys.executable, __file__, a.data, "--batch", str(a.batch), "--threads", str(a.threads),
                                "--iters", str(a.iters), "--child", lib, kind]
                               + ([] if a.hw_load is None else ["--hw-load", str(a.hw_load)]), capture_output=True, text=True)
            if os.environ.get("SLUICE_TRACE_DECODER"):
                sys.stderr.write(r.stderr)  # the decoder's per-batch trace, for the record
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            res[lib] = json.loads(line[-1]) if line else {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:120]}
        rows.append((kind, res))
    print(f"\nbatch {a.batch}, {a.threads} threads, hw_decoder_load {a.hw_load or 'default'}, data {a.data}")
    print(f"{'pipeline':<10} {'lib':<11} {'img/s':>9} {'median':>9} {'first batch s':>14} {'GPU mem GiB':>12}")
    for kind, res in rows:
        for lib, r in res.items():
            if "error" in r:
                print(f"{kind:<10} {lib:<11} error: {r['error']}")
            else:
                print(f"{kind:<10} {lib:<11} {r['rate']:>9.0f} {r['median_rate']:>9.0f} {r['first']:>14.2f} {r['mem']:>12.2f}")
                if "ops" in r:
                    print(f"{'':<10} ms/call: " + ", ".join(f"{k}={v}" for k, v in r["ops"].items()))
        s = res.get("sluice", {})
        for other in ("dali", "torchvision"):
            d = res.get(other, {})
            if "rate" in s and "rate" in d:
                print(f"{kind:<10} vs {other:<11} {s['rate'] / d['rate']:>6.2f}x  median {s['median_rate'] / d['median_rate']:.2f}x  first {s['first'] / d['first']:.2f}x  mem {s['mem'] / max(d['mem'], 1e-9):.2f}x")


def epochs_main(a):
    print(f"\nepoch boundaries: rn50-crop, batch {a.batch}, {a.threads} threads, {a.epochs} epochs, "
          f"policy {a.policy}, pad_last_batch {a.pad}, data {a.data}")
    print(f"{'lib':<8} {'epoch img/s':>12} {'median img/s':>13} {'epoch/median':>13}  samples per epoch / "
          "median ms: full, first, partial batch")
    res = {}
    for lib in a.libs.split(","):
        if lib == "torchvision":
            continue
        cmd = [sys.executable, __file__, a.data, "--batch", str(a.batch), "--threads", str(a.threads),
               "--epochs", str(a.epochs), "--policy", a.policy, "--child", lib, "rn50-crop"] + (["--pad"] if a.pad else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = [l for l in r.stdout.splitlines() if l.startswith("{")]
        if not line:
            print(f"{lib:<8} error: {(r.stderr.strip().splitlines() or ['?'])[-1][:120]}")
            continue
        res[lib] = d = json.loads(line[-1])
        print(f"{lib:<8} {d['epoch_rate']:>12.0f} {d['median_rate']:>13.0f} {d['share']:>12.0%}  "
              f"{d['samples_per_epoch'][:4]} / {d['gaps_ms']}")
    if "sluice" in res and "dali" in res:
        print(f"sluice vs dali, whole epochs: {res['sluice']['epoch_rate'] / res['dali']['epoch_rate']:.2f}x")


if __name__ == "__main__":
    main()
