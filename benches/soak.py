"""Soak: a pipeline over a million samples (a small set cycled, with random augmentation),
sampling the process's resident memory and the GPU memory it holds every few seconds. Prints
the growth between the first and the last tenth of the run; flat (under allocator noise, say
2%) is the target: memory that grows by epoch ends long runs.

    python benches/soak.py [--device cpu|gpu] [--samples 1000000] [--batch 256] [--threads N]
                           [--bad PERCENT] [--lib sluice|dali] [--data DIR]

`--bad 1` makes 1% of the files corrupt and runs with on_error="skip" (Sluice only): the
skipping path soaks too. The set is generated (512 small JPEGs) unless `--data` names one.
"""

import argparse
import os
import subprocess
import time

import numpy as np


def make_set(root, count, bad_percent, seed=0):
    from PIL import Image

    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(seed)
    bad = set(rng.choice(count, size=int(round(count * bad_percent / 100)), replace=False).tolist())
    lines = []
    for i in range(count):
        path = os.path.join(root, f"{i:05d}.jpg")
        h, w = int(rng.integers(96, 160)), int(rng.integers(96, 160))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path, quality=85)
        if i in bad:
            with open(path, "r+b") as f:
                f.truncate(os.path.getsize(path) // 3)
        lines.append(f"{i:05d}.jpg {i % 10}\n")
    with open(os.path.join(root, "list.txt"), "w") as f:
        f.writelines(lines)
    return os.path.join(root, "list.txt"), len(bad)


def build(lib, file_list, device, batch, threads, skip):
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def, types
        extra = {}
    else:
        from sluice import fn, pipeline_def, types
        extra = {"on_error": "skip"} if skip else {}
    dev = "gpu" if device == "gpu" else "cpu"

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=0 if device == "gpu" else None, seed=5, **extra)
    def soak():
        jpegs, labels = fn.readers.file(file_list=file_list, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed" if device == "gpu" else "cpu",
                                               output_type=types.RGB)
        images = fn.resize(images, device=dev, resize_x=64, resize_y=64)
        images = fn.rotate(images, device=dev, angle=fn.random.uniform(range=(-15.0, 15.0)), keep_size=True)
        images = fn.crop_mirror_normalize(images, device=dev, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[128.0] * 3, std=[64.0] * 3, mirror=fn.random.coin_flip())
        return images, labels

    pipe = soak()
    pipe.build()
    return pipe


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def gpu_mib():
    """GPU memory this process holds (nvidia-smi's per-process figure), else the GPU's used
    memory; None without nvidia-smi."""
    pid = os.getpid()
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout
        for line in apps.strip().splitlines():
            p, m = (x.strip() for x in line.split(","))
            if int(p) == pid:
                return float(m)
        used = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=10).stdout
        return float(used.strip().splitlines()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def growth(values):
    """(mean of the first tenth, mean of the last tenth, growth %) of a series."""
    k = max(1, len(values) // 10)
    first, last = float(np.mean(values[:k])), float(np.mean(values[-k:]))
    return first, last, 100.0 * (last - first) / first if first else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bad", type=float, default=0.0, help="percent of corrupt files (Sluice, on_error='skip')")
    ap.add_argument("--lib", default="sluice", choices=["sluice", "dali"])
    ap.add_argument("--data", default="/tmp/sluice-soak")
    ap.add_argument("--files", type=int, default=512)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between memory samples")
    a = ap.parse_args()
    if a.bad and a.lib == "dali":
        ap.error("--bad needs Sluice's on_error='skip' (DALI raises on a bad file)")

    file_list, nbad = make_set(os.path.join(a.data, f"bad{a.bad:g}"), a.files, a.bad)
    pipe = build(a.lib, file_list, a.device, a.batch, a.threads, a.bad > 0)
    series = []  # (seconds, samples, RSS MiB, GPU MiB)
    done, t0, next_sample = 0, time.perf_counter(), 0.0
    while done < a.samples:
        out = pipe.run()
        done += len(out[0])
        t = time.perf_counter() - t0
        if t >= next_sample:
            series.append((t, done, rss_mib(), gpu_mib() if a.device == "gpu" else None))
            next_sample = t + a.interval
    wall = time.perf_counter() - t0
    series.append((wall, done, rss_mib(), gpu_mib() if a.device == "gpu" else None))

    print(f"{a.lib} soak on {a.device}: {done:,} samples in {wall:.0f} s ({done / wall:,.0f}/s), batch {a.batch}, "
          f"{a.threads} threads, {a.files} files cycled ({nbad} corrupt)")
    if a.bad and a.lib == "sluice":
        print(f"  skipped samples recorded: {len(pipe.bad_samples())} (distinct files: "
              f"{len({b.file for b in pipe.bad_samples()})})")
    # The first samples include start-up (allocations that only happen once): the tenths
    # are taken over the second half of the run's first tenth onwards.
    rows = series[1:] if len(series) > 20 else series
    f, l, g = growth([r[2] for r in rows])
    print(f"  RSS: first tenth {f:.0f} MiB, last tenth {l:.0f} MiB, growth {g:+.2f}% ({len(rows)} samples)")
    if a.device == "gpu" and all(r[3] is not None for r in rows):
        f, l, g = growth([r[3] for r in rows])
        print(f"  GPU memory: first tenth {f:.0f} MiB, last tenth {l:.0f} MiB, growth {g:+.2f}%")


if __name__ == "__main__":
    main()
