"""Data-parallel ResNet-50 training on Sluice batches: one process and one pipeline per GPU,
started by torchrun, each pipeline reading its own shard of the data set.

    torchrun --nproc_per_node 8 examples/train_ddp.py DATA_DIR [--epochs 1 | --steps N]
        [--batch 256] [--threads 16] [--lib sluice|dali] [--model resnet50|tiny|none]
        [--last-batch-policy PARTIAL|FILL|DROP] [--pad-last-batch] [--shuffle]

This is how DALI's users train on many GPUs: device_id = local rank, shard_id = global rank,
num_shards = world size, and the framework iterator told the reader's name so that it
counts each shard's samples and ends every rank's epoch after the same number of batches
(DistributedDataParallel hangs if one rank steps once more than the others). Sluice reads
all three numbers from the launcher (`device_id="auto"`, `shard_id="auto"`; torchrun,
Slurm and Open MPI are understood); with `--lib dali` the same script runs on NVIDIA DALI,
which is given them by hand.

What it reports, per rank and gathered on rank 0: the time each step waited for its batch
(data wait: near zero means the GPU never waits for input), the step time, images per
second, and how much memory each GPU holds at the end. `--model none` iterates the
pipelines alone (every rank at once), which measures the input pipeline's img/s per GPU.

    --cpu            device_id=None, the gloo backend, the CPU pipeline and a small model:
                     the same sharding and iterator logic on a machine without a GPU
                     (tests/test_train_ddp.py runs it so in CI).
    --file-list F    DALI's file list ("name label" per line) instead of class folders.
    --record DIR     each rank writes the labels of every sample it was given, per epoch,
                     to DIR/rank<R>.json; with a file list that gives each file its own
                     label, these are sample ids, and the test checks the shards with them.
"""

import argparse
import gc
import json
import os
import subprocess
import time


def build_pipeline(a, rank, world, local_rank):
    if a.lib == "dali":
        from nvidia.dali import fn, pipeline_def, types
        # DALI takes the shard and the GPU as numbers.
        shard = {"shard_id": rank, "num_shards": world}
        device_id = None if a.cpu else local_rank
    else:
        from sluice import fn, pipeline_def, types
        # Sluice reads them from the launcher's environment.
        shard = {"shard_id": "auto"}
        device_id = None if a.cpu else "auto"

    size = a.image_size
    decoder = "cpu" if a.cpu else "mixed"
    device = "cpu" if a.cpu else "gpu"
    source = {"file_list": a.file_list} if a.file_list else {"file_root": a.data}

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=device_id, seed=a.seed)
    def train_pipeline():
        jpegs, labels = fn.readers.file(**source, random_shuffle=a.shuffle, pad_last_batch=a.pad_last_batch,
                                        name="Reader", **shard)
        images = fn.decoders.image_random_crop(jpegs, device=decoder, output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0])
        images = fn.resize(images, device=device, resize_x=size, resize_y=size)
        images = fn.crop_mirror_normalize(images, device=device, dtype=types.FLOAT if a.cpu else types.FLOAT16,
                                          output_layout="CHW", crop=(size, size),
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, (labels if a.cpu else labels.gpu())

    return train_pipeline()


def build_model(name, num_classes, torch):
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(num_classes=num_classes)
    # A small network for CPU runs: the point there is the data flow, not the model.
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, num_classes))


def gpu_memory_used_mib():
    """Memory in use on every GPU of the machine (nvidia-smi), or None where it can't say."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {int(i): int(m) for i, m in (line.split(",") for line in out.strip().splitlines())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?", help="image folder, one sub-folder per class (or use --file-list)")
    ap.add_argument("--file-list")
    ap.add_argument("--lib", default="sluice", choices=["sluice", "dali"])
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--model", default=None, choices=["resnet50", "tiny", "none"],
                    help="default: resnet50 on GPUs, tiny with --cpu")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, help="stop after this many steps (across epochs)")
    ap.add_argument("--warmup", type=int, default=20, help="steps left out of the timings")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--pad-last-batch", action="store_true")
    ap.add_argument("--last-batch-policy", default="PARTIAL", choices=["PARTIAL", "FILL", "DROP"])
    ap.add_argument("--record")
    ap.add_argument("--json", help="rank 0 writes the gathered figures here")
    a = ap.parse_args()
    if not (a.data or a.file_list):
        ap.error("give DATA_DIR or --file-list")
    a.model = a.model or ("tiny" if a.cpu else "resnet50")

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if not a.cpu:
        # Before anything touches CUDA: this process's work, PyTorch's included, stays on its GPU.
        torch.cuda.set_device(local_rank)
    dist.init_process_group("gloo" if a.cpu else "nccl", **({} if a.cpu else {"device_id": torch.device("cuda", local_rank)}))

    def device_used_mib():
        if a.cpu:
            return 0
        free, total = torch.cuda.mem_get_info(local_rank)
        return (total - free) >> 20

    # What this GPU holds before the pipeline: the CUDA context and the communicator (NCCL
    # sets it up at the first collective).
    dist.barrier()
    used_before = device_used_mib()

    if a.lib == "dali":
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    else:
        from sluice.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    pipe = build_pipeline(a, rank, world, local_rank)
    it = DALIClassificationIterator(pipe, reader_name="Reader",
                                    last_batch_policy=getattr(LastBatchPolicy, a.last_batch_policy))

    dev = torch.device("cpu") if a.cpu else torch.device("cuda", local_rank)
    num_classes = 1000
    model = opt = scaler = None
    if a.model != "none":
        torch.backends.cudnn.benchmark = True
        model = build_model(a.model, num_classes, torch).to(dev)
        if not a.cpu:
            model = model.to(memory_format=torch.channels_last)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=None if a.cpu else [local_rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
        scaler = torch.amp.GradScaler("cuda", enabled=not a.cpu)
    loss_fn = torch.nn.CrossEntropyLoss()

    seen = []          # per epoch: the labels of the samples this rank was given
    batches = []       # per epoch: how many batches this rank was given
    waits, steps_t, images = [], [], 0
    step = 0
    used_peak = used_before
    t_start = None
    t_prev = time.perf_counter()
    done = False
    for epoch in range(a.epochs):
        seen.append([])
        batches.append(0)
        for batch in it:
            batches[-1] += 1
            # Data wait: from the end of the previous step until the next batch is in hand.
            t_data = time.perf_counter()
            x, y = batch[0]["data"], batch[0]["label"].reshape(-1).long()
            if a.record:
                seen[-1].extend(y.tolist())
            if model is not None:
                if not a.cpu:
                    x = x.contiguous(memory_format=torch.channels_last)
                with torch.autocast(dev.type, dtype=torch.float16, enabled=not a.cpu):
                    loss = loss_fn(model(x), y % num_classes)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            if not a.cpu:
                torch.cuda.synchronize()
            t_end = time.perf_counter()
            if step == a.warmup:
                t_start = t_prev
            if step >= a.warmup:
                waits.append(t_data - t_prev)
                steps_t.append(t_end - t_prev)
                images += x.shape[0]
            t_prev = t_end
            if step % 10 == 0:
                used_peak = max(used_peak, device_used_mib())
            step += 1
            if a.steps and step >= a.steps:
                done = True
                break
        if done:
            break
        it.reset()

    # Memory the pipeline (and the model, if any) added on this GPU, sampled every 10 steps.
    mine = {"rank": rank, "local_rank": local_rank, "steps": step, "batches_per_epoch": batches,
            "gpu_mib_before": used_before, "gpu_mib_added": used_peak - used_before}
    if steps_t:
        wall = t_prev - t_start
        mine.update(timed_steps=len(steps_t), img_per_s=images / wall, step_ms=1e3 * sum(steps_t) / len(steps_t),
                    wait_ms=1e3 * sum(waits) / len(waits), wait_p95_ms=1e3 * sorted(waits)[int(0.95 * (len(waits) - 1))])
    if a.record:
        os.makedirs(a.record, exist_ok=True)
        with open(os.path.join(a.record, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world": world, "batches": batches, "epochs": seen}, f)

    # Every rank is still alive (and holds its memory) while rank 0 reads the GPUs' memory.
    dist.barrier()
    memory = gpu_memory_used_mib() if (rank == 0 and not a.cpu) else None
    dist.barrier()
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        report = {"lib": a.lib, "world": world, "batch": a.batch, "threads": a.threads, "model": a.model,
                  "ranks": gathered, "gpu_memory_used_mib": memory}
        timed = [r for r in gathered if "img_per_s" in r]
        if timed:
            report["img_per_s_per_gpu"] = sum(r["img_per_s"] for r in timed) / len(timed)
            report["img_per_s_total"] = sum(r["img_per_s"] for r in timed)
            report["wait_ms_mean"] = sum(r["wait_ms"] for r in timed) / len(timed)
        print(f"\n{a.lib}: {world} rank(s), model {a.model}, batch {a.batch}, {a.threads} threads each")
        for r in timed:
            print(f"  rank {r['rank']}: {r['timed_steps']} steps after {a.warmup} warm-up, step {r['step_ms']:.1f} ms, "
                  f"{r['img_per_s']:.0f} img/s, data wait mean {r['wait_ms']:.2f} ms p95 {r['wait_p95_ms']:.2f} ms")
        if timed:
            print(f"  per GPU {report['img_per_s_per_gpu']:.0f} img/s, total {report['img_per_s_total']:.0f} img/s")
        if not a.cpu:
            print("  GPU memory added by the pipeline" + ("" if a.model == "none" else " and model") + " (MiB): "
                  + ", ".join(f"rank {r['rank']} {r['gpu_mib_added']}" for r in gathered))
        if memory:
            print("  GPU memory used (MiB): " + ", ".join(f"GPU{i} {m}" for i, m in sorted(memory.items())))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=1)
    # The model (DistributedDataParallel holds the process group) and the process group go
    # while Python is fully alive: else gloo's worker threads may free their last work during
    # interpreter shutdown, which aborts the process (PyTorch issue #190489).
    del model, opt, scaler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
