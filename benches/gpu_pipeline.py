"""GPU throughput, Sluice vs NVIDIA DALI side by side on one machine: same files, batch size,
threads and pipeline; each run in its own process (clean GPU memory accounting).

    python benches/gpu_pipeline.py DATA_DIR [--batch 256] [--threads 16] [--iters 60]

Pipelines (ResNet-50 training style, output NCHW float):
  rn50-full    readers.file -> decoders.image(mixed) -> resize(224x224) -> crop_mirror_normalize(mirror)
  rn50-crop    readers.file -> decoders.image_random_crop(mixed) -> resize(224x224) -> cmn(mirror)
               (DALI's reference ResNet-50 training pipeline)
  decode       readers.file -> decoders.image(mixed)
Per run: steady-state img/s (after warm-up, over whole epochs), time to first batch from
process start (import + build + first batch), peak GPU memory the process took.
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


def child(lib, kind, root, batch, threads, iters, dec_args):
    base = gpu_used_bytes()
    if lib == "sluice":
        from sluice import fn, pipeline_def, types
    else:
        from nvidia.dali import fn, pipeline_def, types
    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=0, seed=12, prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
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

    p = pipe()
    p.build()
    p.run()
    first = time.perf_counter() - T0
    peak = gpu_used_bytes()
    for _ in range(3):
        p.run()
    t = time.perf_counter()
    for _ in range(iters):
        out = p.run()
        peak = max(peak, gpu_used_bytes())
    # Stop the clock once the last batch's GPU work is done (a device-wide synchronize:
    # copying the batch back, as_cpu(), would add ~100 ms of transfer to the measurement).
    cuda_sync()
    rate = iters * batch / (time.perf_counter() - t)
    res = {"rate": rate, "first": first, "mem": (peak - base) / 2**30}
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
    ap.add_argument("--libs", default="sluice,dali")
    ap.add_argument("--hw-load", type=float, help="hw_decoder_load for both libraries (default: theirs, 0.65)")
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        dec_args = {} if a.hw_load is None else {"hw_decoder_load": a.hw_load}
        child(a.child[0], a.child[1], a.data, a.batch, a.threads, a.iters, dec_args)
        return
    rows = []
    for kind in a.pipelines.split(","):
        res = {}
        for lib in a.libs.split(","):
            r = subprocess.run([sys.executable, __file__, a.data, "--batch", str(a.batch), "--threads", str(a.threads),
                                "--iters", str(a.iters), "--child", lib, kind]
                               + ([] if a.hw_load is None else ["--hw-load", str(a.hw_load)]), capture_output=True, text=True)
            line = [l for l in r.stdout.splitlines() if l.startswith("{")]
            res[lib] = json.loads(line[-1]) if line else {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:120]}
        rows.append((kind, res))
    print(f"\nbatch {a.batch}, {a.threads} threads, hw_decoder_load {a.hw_load or 'default'}, data {a.data}")
    print(f"{'pipeline':<10} {'lib':<7} {'img/s':>9} {'first batch s':>14} {'GPU mem GiB':>12}")
    for kind, res in rows:
        for lib, r in res.items():
            if "error" in r:
                print(f"{kind:<10} {lib:<7} error: {r['error']}")
            else:
                print(f"{kind:<10} {lib:<7} {r['rate']:>9.0f} {r['first']:>14.2f} {r['mem']:>12.2f}")
                if "ops" in r:
                    print(f"{'':<10} ms/call: " + ", ".join(f"{k}={v}" for k, v in r["ops"].items()))
        if all("rate" in r for r in res.values()) and len(res) == 2:
            s, d = res["sluice"], res["dali"]
            print(f"{kind:<10} ratio   {s['rate'] / d['rate']:>9.2f}x  first {s['first'] / d['first']:.2f}x  mem {s['mem'] / max(d['mem'], 1e-9):.2f}x")


if __name__ == "__main__":
    main()
