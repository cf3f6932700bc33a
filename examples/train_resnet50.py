"""Trains torchvision's ResNet-50 for a few hundred steps on Sluice batches and reports
whether the GPU waits for data: per step, the time spent waiting for the next batch (data
wait) against the whole step.

    python examples/train_resnet50.py DATA_DIR [--steps 300] [--batch 256] [--threads 16]
                                      [--lib sluice|dali]

DATA_DIR is an image folder (one subfolder per class), e.g. from
tests/data_gen/make_dataset.py. The input pipeline is DALI's ResNet-50 training pipeline
(random-crop decode on the GPU, resize, random mirror, normalize to NCHW float); the model
trains with mixed precision and channels-last, as fast ResNet-50 recipes do. With
`--lib dali` the same script runs on NVIDIA DALI, for comparison: only the imports change.
"""

import argparse
import time


def build_pipeline(lib, root, batch, threads, hw_load=None):
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def, types
    else:
        from sluice import fn, pipeline_def, types

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=0, seed=42)
    def rn50_train():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
        dec_args = {} if hw_load is None else {"hw_decoder_load": hw_load}
        images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0], **dec_args)
        images = fn.resize(images, device="gpu", resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, device="gpu", dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(224, 224), mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels.gpu()

    return rn50_train()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--lib", default="sluice", choices=["sluice", "dali"])
    ap.add_argument("--hw-load", type=float, help="hw_decoder_load (default: the library's, Sluice 0, DALI 0.65)")
    a = ap.parse_args()

    import torch
    import torchvision

    if a.lib == "dali":
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy
    else:
        from sluice.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    torch.backends.cudnn.benchmark = True
    pipe = build_pipeline(a.lib, a.data, a.batch, a.threads, a.hw_load)
    it = DALIClassificationIterator(pipe, reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)

    num_classes = 1000
    model = torchvision.models.resnet50(num_classes=num_classes).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    loss_fn = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda")

    waits, steps_t = [], []
    step = 0
    warmup = 20
    t_prev = time.perf_counter()
    while step < a.steps:
        for batch in it:
            # Data wait: from the end of the previous step (its GPU work finished) until the
            # next batch is in hand. Near zero means the GPU never waits for input.
            t_data = time.perf_counter()
            x = batch[0]["data"].contiguous(memory_format=torch.channels_last)
            y = batch[0]["label"].squeeze(-1).long() % num_classes
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            torch.cuda.synchronize()
            t_end = time.perf_counter()
            if step >= warmup:
                waits.append(t_data - t_prev)
                steps_t.append(t_end - t_prev)
            t_prev = t_end
            step += 1
            if step % 50 == 0:
                print(f"step {step:4d}  loss {loss.item():.3f}")
            if step >= a.steps:
                break

    n = len(steps_t)
    mean_step = sum(steps_t) / n
    mean_wait = sum(waits) / n
    p95_wait = sorted(waits)[int(0.95 * (n - 1))]
    print(f"\n{a.lib}: {n} steps after {warmup} warm-up, batch {a.batch}, {a.threads} threads")
    print(f"  step {1e3 * mean_step:.1f} ms  ({a.batch / mean_step:.0f} img/s)")
    print(f"  data wait per step: mean {1e3 * mean_wait:.2f} ms, p95 {1e3 * p95_wait:.2f} ms "
          f"({100 * mean_wait / mean_step:.1f}% of the step)")


if __name__ == "__main__":
    main()
