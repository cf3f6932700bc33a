#!/bin/bash
# One pipeline per GPU under torchrun, Sluice vs DALI side by side (examples/train_ddp.py):
# the pipelines alone (images/s per GPU, its share of the one-GPU rate, the ratio to DALI),
# then ResNet-50 DistributedDataParallel training (data wait per step).
#
#   bash benches/multi_gpu.sh DATA_DIR [GPU counts, default "1 2 4"]   (OUT=dir for the JSON)
#
# Needs torch, torchvision, Sluice and DALI importable; run on the GPU machine, with its
# NVLink-multicast switches left as they are.
set -u
data=$1; shift
counts=${*:-"1 2 4"}
out=${OUT:-/tmp/multi_gpu}; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
here=$(cd "$(dirname "$0")/.." && pwd)
for phase in pipe train; do
  if [ $phase = pipe ]; then extra="--model none --steps 400 --warmup 40"; else extra="--model resnet50 --steps 130 --warmup 30"; fi
  for n in $counts; do for lib in sluice dali; do
    echo "== $phase $lib $n GPU(s)"
    timeout 600 torchrun --standalone --nproc_per_node "$n" "$here/examples/train_ddp.py" "$data" --lib $lib --batch 256 \
      --threads 16 --epochs 1000 --shuffle $extra --json "$out/$phase-$lib-$n.json" 2>&1 \
      | grep -v "^W1\|^\*\*\*\|OMP_NUM_THREADS\|UserWarning\|warnings.warn" | tail -12
  done; done
done
python3 - "$out" $counts <<'PY'
import json, sys
out, counts = sys.argv[1], sys.argv[2:]
def get(phase, lib, n):
    try:
        return json.load(open(f"{out}/{phase}-{lib}-{n}.json"))
    except OSError:
        return None
print("\npipelines alone, img/s per GPU (share of the 1-GPU rate):")
base = {lib: get("pipe", lib, counts[0]) for lib in ("sluice", "dali")}
for n in counts:
    s, d = get("pipe", "sluice", n), get("pipe", "dali", n)
    if not (s and d):
        continue
    share = lambda r, lib: r["img_per_s_per_gpu"] / base[lib]["img_per_s_per_gpu"] if base[lib] else float("nan")
    print(f"  {n} GPU(s): Sluice {s['img_per_s_per_gpu']:.0f} ({share(s, 'sluice'):.1%}), "
          f"DALI {d['img_per_s_per_gpu']:.0f} ({share(d, 'dali'):.1%}), ratio {s['img_per_s_per_gpu'] / d['img_per_s_per_gpu']:.2f}x")
print("training, data wait per step (mean over ranks):")
for n in counts:
    s, d = get("train", "sluice", n), get("train", "dali", n)
    if s and d:
        print(f"  {n} GPU(s): Sluice {s['wait_ms_mean']:.2f} ms, DALI {d['wait_ms_mean']:.2f} ms")
PY
