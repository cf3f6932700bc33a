"""The GPU path: mixed decoding, GPU operators, TensorListGPU and the PyTorch iterator.
Each test needs a CUDA device: it skips without one, and FAILS when SLUICE_REQUIRE_GPU=1
(as on the GPU machine), so GPU coverage cannot silently vanish."""

import re
import numpy as np
import pytest

import sluice

from sluice import fn, math as smath, pipeline_def, types

from conftest import all_files, require_gpu

BATCH = 16


def _files(root, ext=(".jpg", ".png", ".bmp", ".tiff")):
    return [str(root / p) for p in all_files(root) if p.endswith(ext)]


def _decode_pipe(files, device, **dec_args):
    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=1)
    def p():
        data, _ = fn.readers.file(files=files, name="Reader")
        return fn.decoders.image(data, device=device, **dec_args)

    return p()


def _epoch(pipe, n):
    out = []
    while len(out) < n:
        (imgs,) = pipe.run()
        if hasattr(imgs, "as_cpu"):
            imgs = imgs.as_cpu()
        out += [imgs.at(i).copy() for i in range(len(imgs))]
    return out[:n]


def test_mixed_decoder_without_hw_engine_equals_cpu_decoder_bit_for_bit(mixed_root):
    require_gpu()
    files = _files(mixed_root)
    cpu = _epoch(_decode_pipe(files, "cpu"), len(files))
    gpu = _epoch(_decode_pipe(files, "mixed", hw_decoder_load=0.0), len(files))
    for f, a, b in zip(files, cpu, gpu):
        assert a.shape == b.shape, f
        assert np.array_equal(a, b), f


# The two GPU decoders of baseline JPEGs: the hardware engine, and nvJPEG's GPU-Huffman
# decoder (for large images the engine leaves over; threshold 0 sends it every JPEG).
_GPU_JPEG_DECODERS = {"engine": dict(hw_decoder_load=1.0), "gpu_huffman": dict(hw_decoder_load=0.0, hybrid_huffman_threshold=0)}


@pytest.mark.parametrize("decoder", list(_GPU_JPEG_DECODERS))
def test_mixed_decoder_on_gpu_jpeg_decoders_matches_cpu_decoder_closely(mixed_root, decoder):
    require_gpu()
    files = [f for f in _files(mixed_root, (".jpg",))]
    cpu = _epoch(_decode_pipe(files, "cpu"), len(files))
    gpu = _epoch(_decode_pipe(files, "mixed", **_GPU_JPEG_DECODERS[decoder]), len(files))
    mads = []
    for f, a, b in zip(files, cpu, gpu):
        assert a.shape == b.shape, f
        mads.append(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())
    # nvJPEG upsamples chroma differently from libjpeg's fancy upsampling; > 0: the GPU
    # decoder really decoded (not the CPU fallback).
    print(f"{decoder}: mean abs diff vs libjpeg-turbo: median {np.median(mads):.3f}, worst {max(mads):.3f}")
    assert 0 < np.median(mads) and max(mads) < 2.0


def test_mixed_decoder_reports_bad_files_and_recovers(tmp_path, small_images):
    require_gpu()
    good = _files(small_images)
    bad = tmp_path / "bad.jpg"
    data = bytearray(open(good[0], "rb").read())
    bad.write_bytes(bytes(data[: len(data) // 3]))
    files = good[:3] + [str(bad)] + good[3:BATCH] + good * 3  # the second batch is all good
    pipe = _decode_pipe(files, "mixed")
    with pytest.raises(RuntimeError) as e:
        pipe.run()
    assert "decoders.image" in str(e.value) and "bad.jpg" in str(e.value)
    (imgs,) = pipe.run()
    assert len(imgs) == BATCH and imgs.as_cpu().at(0).std() > 1


@pytest.mark.parametrize("damage", ["no_header", "truncated"])
@pytest.mark.parametrize("dec_args", [dict(hw_decoder_load=0.0), dict(hw_decoder_load=1.0), _GPU_JPEG_DECODERS["gpu_huffman"]])
def test_bad_file_in_a_later_batch_fails_only_that_batch(tmp_path, small_images, damage, dec_args):
    """The executor starts batch n+1's decode before batch n is finished: an unreadable
    header (caught while starting) or a truncated body (caught while finishing) in the
    second batch must fail the second run() only, naming the file, and never the first."""
    require_gpu()
    good = _files(small_images, (".jpg",))
    data = open(good[0], "rb").read()
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a jpeg at all" * 8 if damage == "no_header" else data[: len(data) // 3])
    files = (good * BATCH)[:BATCH] + good[:5] + [str(bad)] + (good * BATCH)[: BATCH - 6] + (good * BATCH)[: 2 * BATCH]

    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=1, prefetch_queue_depth=2)
    def p():
        enc, _ = fn.readers.file(files=files, name="Reader")
        return fn.decoders.image_random_crop(enc, device="mixed", **dec_args)

    pipe = p()
    (first,) = pipe.run()
    assert len(first) == BATCH and first.as_cpu().at(0).std() > 1
    with pytest.raises(RuntimeError) as e:
        pipe.run()
    assert "decoders.image_random_crop" in str(e.value) and "bad.jpg" in str(e.value)
    for _ in range(3):
        (imgs,) = pipe.run()
        assert len(imgs) == BATCH and imgs.as_cpu().at(BATCH - 1).std() > 1


@pytest.mark.parametrize("dec_args", [dict(hw_decoder_load=0.0), dict(hw_decoder_load=0.65), dict(hw_decoder_load=0.65, hybrid_huffman_threshold=0)])
def test_decoding_ahead_gives_the_same_batches_as_running_in_order(mixed_root, dec_args):
    """Asynchronous pipelines start each batch's decode one iteration early; synchronous
    ones do not. Both must give the same batches, bit for bit, several epochs running."""
    require_gpu()
    files = _files(mixed_root)

    def pipe(**exec_args):
        @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=5, **exec_args)
        def p():
            enc, _ = fn.readers.file(files=files, name="Reader", random_shuffle=True)
            img = fn.decoders.image_random_crop(enc, device="mixed", **dec_args)
            return fn.resize(img, device="gpu", resize_x=64, resize_y=48)

        return p()

    n = 3 * len(files)
    ahead = _epoch(pipe(), n)
    in_order = _epoch(pipe(exec_async=False, exec_pipelined=False), n)
    differ = []
    for k, (a, b) in enumerate(zip(ahead, in_order)):
        assert a.shape == b.shape == (48, 64, 3), k
        if not np.array_equal(a, b):
            differ.append((k, int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()), float(a.mean()), float(b.mean())))
    assert not differ, f"{len(differ)} of {n} samples differ (sample, max abs diff, means ahead / in order): {differ[:10]}"


def test_two_mixed_decoders_in_one_pipeline_share_the_workers(mixed_root):
    """Each mixed decoder queues its CPU share for the same workers: with two in one
    pipeline (run ahead, engine off), both still give exactly the cpu decoders' output."""
    require_gpu()
    files = _files(mixed_root)

    def pipe(device):
        @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=3)
        def p():
            a, _ = fn.readers.file(files=files, name="A")
            b, _ = fn.readers.file(files=files[::-1], name="B")
            extra = {"hw_decoder_load": 0.0} if device == "mixed" else {}
            return (fn.decoders.image(a, device=device, **extra),
                    fn.decoders.image_random_crop(b, device=device, **extra))

        return p()

    cpu, gpu = pipe("cpu"), pipe("mixed")
    for _ in range(3):
        for c, g in zip(cpu.run(), gpu.run()):
            g = g.as_cpu()
            for i in range(len(c)):
                assert np.array_equal(c.at(i), g.at(i)), i


def test_cpu_share_finished_on_the_gpu_equals_libjpeg_turbo_bit_for_bit(tmp_path):
    """With the engine off, every JPEG is entropy-decoded on a worker and finished (IDCT,
    fancy upsampling, YCbCr -> RGB) on the GPU: whole images and random windows must equal
    the cpu decoder's (libjpeg-turbo's) pixels exactly, for every chroma layout, progressive
    files, grayscale and odd sizes."""
    require_gpu()
    from PIL import Image

    rng = np.random.default_rng(5)
    files = []
    for k, (w, h) in enumerate([(333, 251), (64, 48), (37, 29), (500, 375), (17, 9), (250, 187)]):
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([xx * 255 // w, yy * 255 // h, 128 + 80 * np.sin(xx / 7.0) * np.cos(yy / 11.0)], -1)
        px = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        for sub in (0, 1, 2):
            for progressive in (False, True):
                f = tmp_path / f"{k}_{sub}_{int(progressive)}.jpg"
                Image.fromarray(px).save(f, quality=88, subsampling=sub, progressive=progressive)
                files.append(str(f))
        g = tmp_path / f"{k}_gray.jpg"
        Image.fromarray(px[..., 1]).save(g, quality=90)
        files.append(str(g))
    n = (len(files) // BATCH) * BATCH
    files = files[:n]

    def pipe(device, crop):
        @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=3)
        def p():
            data, _ = fn.readers.file(files=files, name="Reader")
            if crop:
                return fn.decoders.image_random_crop(data, device=device, hw_decoder_load=0.0, seed=9)
            return fn.decoders.image(data, device=device, hw_decoder_load=0.0)

        return p()

    for crop in (False, True):
        cpu = _epoch(pipe("cpu", crop), n)
        gpu = _epoch(pipe("mixed", crop), n)
        for f, a, b in zip(files, cpu, gpu):
            assert a.shape == b.shape, f
            assert np.array_equal(a, b), (f, crop, int(np.abs(a.astype(int) - b.astype(int)).max()))


def test_failing_operator_after_the_engine_leaves_the_pipeline_usable(small_images):
    """An operator after the hardware decoder fails on every batch: each run raises that
    operator's error (never hangs on the engine's thread or stream), the pipeline closes
    cleanly, and a pipeline built next decodes normally."""
    require_gpu()
    files = _files(small_images, (".jpg",)) * 4

    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=1)
    def p():
        data, _ = fn.readers.file(files=files, name="Reader")
        images = fn.decoders.image_random_crop(data, device="mixed", hw_decoder_load=1.0)
        # An integer division by zero in every sample: the GPU arithmetic fails in run().
        return images // (images * 0)

    pipe = p()
    for _ in range(3):
        with pytest.raises(RuntimeError) as e:
            pipe.run()
        assert "integer division by zero" in str(e.value)
    del pipe

    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=1)
    def q():
        data, _ = fn.readers.file(files=files, name="Reader")
        return fn.decoders.image_random_crop(data, device="mixed", hw_decoder_load=1.0)

    pipe = q()
    for _ in range(4):
        (imgs,) = pipe.run()
        assert len(imgs) == BATCH and imgs.as_cpu().at(BATCH - 1).std() > 1


def _cmn_pipe(root, device, per_sample_stats=False):
    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=7)
    def p():
        data, labels = fn.readers.file(file_root=str(root), name="Reader")
        images = fn.decoders.image(data, device="cpu")
        if device == "gpu":
            images = images.gpu()
        flip = fn.random.coin_flip(seed=3)
        mean, std = [0.485 * 255, 0.456 * 255, 0.406 * 255], [0.229 * 255, 0.224 * 255, 0.225 * 255]
        if per_sample_stats:  # argument inputs: one mean and std vector per sample
            mean = fn.random.uniform(range=(60.0, 160.0), shape=[3], seed=4)
            std = fn.random.uniform(range=(20.0, 90.0), shape=[3], seed=5)
        out = fn.crop_mirror_normalize(images, device=device, crop=(200, 180), crop_pos_x=0.3, crop_pos_y=0.6,
                                       mean=mean, std=std, mirror=flip, dtype=types.FLOAT, output_layout="CHW")
        return out, labels

    return p()


def test_gpu_crop_mirror_normalize_equals_cpu_bit_for_bit(small_images):
    require_gpu()
    cpu, _ = _cmn_pipe(small_images, "cpu").run()
    gpu, _ = _cmn_pipe(small_images, "gpu").run()
    assert gpu.layout() == "CHW" and gpu.shape() == cpu.shape()
    np.testing.assert_array_equal(gpu.as_cpu().as_array(), cpu.as_array())


def test_gpu_crop_mirror_normalize_with_per_sample_mean_and_std_equals_cpu(small_images):
    require_gpu()
    cpu, _ = _cmn_pipe(small_images, "cpu", per_sample_stats=True).run()
    gpu, _ = _cmn_pipe(small_images, "gpu", per_sample_stats=True).run()
    a, b = cpu.as_array(), gpu.as_cpu().as_array()
    np.testing.assert_array_equal(b, a)
    # Each sample really got its own constants: per-sample means of the outputs differ.
    assert len({round(float(x.mean()), 3) for x in a}) == len(a)


def test_gpu_outputs_reach_torch_without_a_copy_and_match(small_images):
    require_gpu()
    torch = pytest.importorskip("torch")
    out, labels = _cmn_pipe(small_images, "gpu").run()
    t = torch.from_dlpack(out.as_tensor())
    assert t.is_cuda and t.shape == (BATCH, 3, 200, 180) and t.dtype == torch.float32
    np.testing.assert_array_equal(t.cpu().numpy(), out.as_cpu().as_array())
    cai = torch.as_tensor(out[1], device="cuda")  # through __cuda_array_interface__
    np.testing.assert_array_equal(cai.cpu().numpy(), out.as_cpu().at(1))
    lab = torch.from_dlpack(labels.as_tensor())
    assert lab.device.type == "cpu" and lab.shape == (BATCH, 1)


def test_gpu_upload_round_trips(small_images):
    require_gpu()

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=1)
    def p():
        u = fn.random.uniform(range=(0, 100), shape=(5, 3), seed=9)
        return u, u.gpu()

    host, dev = p().run()
    np.testing.assert_array_equal(dev.as_cpu().as_array(), host.as_array())


def test_pytorch_iterator_epochs_and_last_batch_policies(small_images):
    require_gpu()
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

    n = len(_files(small_images))  # 12 images, batch 5
    # Batches per epoch as DALI's iterator gives them: with FILL and no reader padding the
    # first epoch's last batch already took 3 samples of the second epoch.
    cases = [(LastBatchPolicy.PARTIAL, 3, [3, 3], 2), (LastBatchPolicy.FILL, 3, [3, 2], 5), (LastBatchPolicy.DROP, 2, [2, 2], 5)]
    for policy, length, per_epoch, last in cases:
        @pipeline_def(batch_size=5, num_threads=2, device_id=0, seed=1)
        def p():
            data, labels = fn.readers.file(file_root=str(small_images), name="Reader")
            images = fn.decoders.image(data, device="mixed")
            images = fn.crop_mirror_normalize(images, crop=(64, 64), dtype=types.FLOAT)
            return images, labels

        it = DALIClassificationIterator(p(), reader_name="Reader", last_batch_policy=policy, auto_reset=True)
        assert len(it) == length
        for epoch in range(2):
            got = [b[0] for b in it]
            assert len(got) == per_epoch[epoch], (policy, epoch)
            assert got[-1]["data"].shape[0] == last
            assert got[0]["data"].is_cuda and got[0]["data"].shape[1:] == (3, 64, 64)
            assert got[0]["label"].dtype == torch.int32
        assert n == 12


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_NN, types.INTERP_CUBIC])
@pytest.mark.parametrize("size", [dict(resize_shorter=224), dict(resize_x=97, resize_y=333)])
def test_gpu_resize_matches_cpu(small_images, interp, size):
    require_gpu()

    def pipe(device):
        @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=1)
        def p():
            data, _ = fn.readers.file(file_root=str(small_images))
            images = fn.decoders.image(data, device="cpu")
            if device == "gpu":
                images = images.gpu()
            return fn.resize(images, device=device, interp_type=interp, **size)

        return p()

    (cpu,), (gpu,) = pipe("cpu").run(), pipe("gpu").run()
    gpu = gpu.as_cpu()
    assert gpu.shape() == cpu.shape()
    for i in range(len(cpu)):
        d = np.abs(cpu.at(i).astype(np.int16) - gpu.at(i).astype(np.int16))
        # Same taps and f32 arithmetic; the cpu may pick the other pass order, so allow 1.
        assert d.max() <= 1 and d.mean() < 0.05, (i, d.max(), d.mean())


def test_gpu_resize_filter_tables_kept_between_batches_match_cpu(small_images):
    """The GPU resize keeps its filter tables on the device between batches. Over three
    epochs (the whole-image resizes need the same tables again each epoch; the per-sample
    sizes drawn from three values repeat inside a batch and across batches; the random
    crops bring new ones every batch), every batch still matches the cpu resize."""
    require_gpu()

    def pipe(device):
        @pipeline_def(batch_size=5, num_threads=4, device_id=0, seed=4)
        def p():
            data, _ = fn.readers.file(file_root=str(small_images))
            images = fn.decoders.image(data, device="cpu")
            crops = fn.decoders.image_random_crop(data, device="cpu", seed=8)
            if device == "gpu":
                images, crops = images.gpu(), crops.gpu()
            width = fn.random.uniform(values=[24.0, 50.0, 77.0], seed=6)
            # `crops` is an output too, so the cpu pipeline does not fuse its decode with the
            # resize (a DCT-scale decode would change its pixels).
            return (fn.resize(images, device=device, resize_x=64, resize_y=48),
                    fn.resize(images, device=device, resize_x=width, resize_y=40, interp_type=types.INTERP_CUBIC),
                    fn.resize(crops, device=device, resize_x=32, resize_y=32),
                    crops)

        return p()

    cpu, gpu = pipe("cpu"), pipe("gpu")
    for it in range(3 * 12 // 5 + 1):
        for k, (a, b) in enumerate(zip(cpu.run(), gpu.run())):
            b = b.as_cpu()
            assert a.shape() == b.shape(), (it, k)
            for i in range(len(a)):
                d = np.abs(a.at(i).astype(np.int16) - b.at(i).astype(np.int16))
                assert d.max() <= 1 and d.mean() < 0.05, (it, k, i, d.max(), d.mean())


@pytest.mark.parametrize("dtype", [None, types.FLOAT])
def test_gpu_random_resized_crop_matches_cpu(small_images, dtype):
    """Both backends draw the same windows (shared planning, same seeds) and resample with
    the same taps: batch after batch the gpu output equals the cpu one up to the resize's
    +-1 (u8) or float rounding."""
    require_gpu()
    kw = {} if dtype is None else {"dtype": dtype}

    def build(images, device):
        return [fn.random_resized_crop(images, device=device, size=[64, 48], seed=3, **kw)]

    for it, ((a,), (b,)) in enumerate(_cpu_and_gpu_runs(small_images, build, batch=5, iterations=5)):
        assert a.shape() == b.shape() and a.dtype == b.dtype, it
        for i in range(len(a)):
            d = np.abs(a.at(i).astype(np.float32) - b.at(i).astype(np.float32))
            assert d.max() <= 1 and d.mean() < 0.05, (it, i, d.max(), d.mean())


@pytest.mark.parametrize("case", [
    dict(interp_type=types.INTERP_LINEAR),
    dict(interp_type=types.INTERP_NN, fill_value=128.0),
    dict(interp_type=types.INTERP_LINEAR, fill_value=0.0, dtype=types.FLOAT),
    dict(interp_type=types.INTERP_LINEAR, keep_size=True, float_input=True, dtype=types.UINT8),
    dict(interp_type=types.INTERP_NN, size=[50, 70], float_input=True),
])
def test_gpu_rotate_equals_cpu_bit_for_bit(small_images, case):
    """The gpu rotate repeats the cpu kernel's f32 arithmetic step for step (row starts,
    re-anchoring every 256 pixels, increments, interpolation, rounding and saturation), so
    with random per-sample angles, both interpolations, border modes and type conversions
    the two backends give identical outputs."""
    require_gpu()
    case = dict(case)
    prepare = (lambda images: fn.cast(images, dtype=types.FLOAT) * 1.7 - 40.0) if case.pop("float_input", False) else None

    def build(images, device):
        angle = fn.random.uniform(range=[-200.0, 200.0], seed=5)
        return [fn.rotate(images, device=device, angle=angle, **case)]

    for it, ((a,), (b,)) in enumerate(_cpu_and_gpu_runs(small_images, build, batch=6, iterations=3, prepare=prepare)):
        assert a.shape() == b.shape() and a.dtype == b.dtype, it
        for i in range(len(a)):
            assert np.array_equal(a.at(i), b.at(i)), (it, i, np.abs(a.at(i).astype(np.float64) - b.at(i)).max())


def test_resnet50_training_pipeline_on_gpu(small_images):
    require_gpu()
    torch = pytest.importorskip("torch")
    from sluice.plugin.pytorch import DALIClassificationIterator

    @pipeline_def(batch_size=8, num_threads=4, device_id=0, seed=5)
    def p():
        jpegs, labels = fn.readers.file(file_root=str(small_images), random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                               random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0])
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    it = DALIClassificationIterator(p(), reader_name="Reader")
    batches = list(it)
    assert len(batches) == 2
    x = batches[0][0]["data"]
    assert x.is_cuda and x.shape == (8, 3, 224, 224) and x.dtype == torch.float32
    assert torch.isfinite(x).all() and x.std() > 0.1


def _roi_pipe(files, device, kind, **dec_args):
    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=3)
    def p():
        data, _ = fn.readers.file(files=files, name="Reader")
        if kind == "random_crop":
            return fn.decoders.image_random_crop(data, device=device, random_area=[0.1, 1.0], **dec_args)
        if kind == "crop":
            return fn.decoders.image_crop(data, device=device, crop=(64, 80), crop_pos_x=0.3, crop_pos_y=0.7, **dec_args)
        anchor = fn.random.uniform(range=(0.0, 0.4), shape=[2], seed=5)
        shape = fn.random.uniform(range=(0.3, 0.6), shape=[2], seed=6)
        return fn.decoders.image_slice(data, anchor, shape, device=device, **dec_args)

    return p()


@pytest.mark.parametrize("kind", ["random_crop", "crop", "slice"])
def test_mixed_window_decoders_cut_the_cpu_windows(mixed_root, kind):
    """Same windows as the cpu backend: bit-exact through the CPU path, close through the
    hardware engine and the GPU-Huffman decoder (windows decoded on the GPU)."""
    require_gpu()
    files = _files(mixed_root)
    cpu = _epoch(_roi_pipe(files, "cpu", kind), len(files))
    exact = _epoch(_roi_pipe(files, "mixed", kind, hw_decoder_load=0.0), len(files))
    for f, a, b in zip(files, cpu, exact):
        assert a.shape == b.shape and np.array_equal(a, b), f
    for decoder, dec_args in _GPU_JPEG_DECODERS.items():
        gpu = _epoch(_roi_pipe(files, "mixed", kind, **dec_args), len(files))
        diffs = []
        for f, a, c in zip(files, cpu, gpu):
            assert a.shape == c.shape, (decoder, f)
            diffs.append((np.abs(a.astype(np.int16) - c.astype(np.int16)).mean(), f))
        worst = max(diffs)
        median = sorted(d for d, _ in diffs)[len(diffs) // 2]
        print(f"{kind}: mean abs diff {decoder} vs libjpeg-turbo: median {median:.3f}, worst {worst}")
        # nvJPEG upsamples chroma differently; small windows in detailed areas show it most
        # (a misplaced window would differ by far more). > 0: the GPU really decoded some.
        assert 0 < median < 1.5 and worst[0] < 4.0, (decoder, median, worst)


def test_mixed_random_crop_feeding_resize_matches_cpu_pipeline(mixed_root):
    """The graph's DCT-scale hint reaches the mixed decoder's CPU share: with the engine off,
    every GPU output equals, up to the resize's +-1, the cpu pipeline's decoded at a DCT scale
    (the files decoded on the CPU workers) or at full scale (the baseline JPEGs the GPU
    entropy-decodes: full-scale windows). A cpu pipeline that also outputs its crops cannot
    fuse the decode with the resize, so it decodes at full scale."""
    require_gpu()
    files = _files(mixed_root)

    def pipe(dev, full_scale=False):
        @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0, seed=9)
        def p():
            data, _ = fn.readers.file(files=files, name="Reader")
            img = fn.decoders.image_random_crop(data, device="mixed" if dev == "gpu" else "cpu", hw_decoder_load=0.0)
            out = fn.resize(img, device=dev, resize_x=56, resize_y=48)
            return (out, img) if full_scale else out

        return p()

    def first_outputs(p):
        res = []
        while len(res) < len(files):
            outs = p.run()
            res += [outs[0].at(i).copy() for i in range(len(outs[0]))]
        return res[: len(files)]

    scaled = _epoch(pipe("cpu"), len(files))
    full = first_outputs(pipe("cpu", full_scale=True))
    gpu = _epoch(pipe("gpu"), len(files))
    matched = {"scaled": 0, "full": 0}
    for f, a, c, b in zip(files, scaled, full, gpu):
        assert a.shape == c.shape == b.shape == (48, 56, 3), f
        d_scaled = np.abs(a.astype(np.int16) - b.astype(np.int16)).max()
        d_full = np.abs(c.astype(np.int16) - b.astype(np.int16)).max()
        assert min(d_scaled, d_full) <= 1, (f, d_scaled, d_full)
        if d_scaled > 1 or np.array_equal(a, c):
            matched["full"] += d_full <= 1
        else:
            matched["scaled"] += 1
    # Both kinds occur in the mixed set (progressive files, PNGs... and baseline JPEGs).
    assert matched["scaled"] > 0 and matched["full"] > 0, matched


def _photo(w, h, seed):
    """A photo-like image (gradients, texture, noise): every DCT frequency in use."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    t = 128 + 80 * np.sin(x / 7.0) * np.cos(y / 11.0)
    img = np.stack([x * 255 / w * 0.7, y * 255 / h * 0.6 + t * 0.3, t], axis=-1)
    img += rng.normal(0, 14, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_gpu_entropy_decoder_equals_cpu_decoder_on_large_jpegs(tmp_path):
    """Baseline JPEGs the engine leaves over are entropy-decoded on the GPU (a CUDA block per
    image, up to 512 self-synchronising chunks of its scan) and finished by the GPU IDCT:
    whole images and windows equal libjpeg-turbo's decode bit for bit, for 4:2:0, 4:2:2 and
    4:4:4 and for scans from a few hundred bytes to megabytes."""
    require_gpu()
    from PIL import Image

    files = []
    for k, (w, h, q, sub) in enumerate([(1600, 1200, 95, 2), (1203, 1601, 90, 0), (999, 777, 85, 1), (2400, 1600, 97, 2),
                                        (40, 30, 75, 2), (333, 217, 90, 0), (17, 9, 50, 2)]):
        path = tmp_path / f"photo{k}.jpg"
        Image.fromarray(_photo(w, h, k)).save(path, quality=q, subsampling=sub)
        files.append(str(path))
    files = files * 3  # a batch of 16 with repeats, and more than one batch
    cpu = _epoch(_decode_pipe(files, "cpu"), len(files))
    gpu = _epoch(_decode_pipe(files, "mixed", hw_decoder_load=0.0), len(files))
    for f, a, b in zip(files, cpu, gpu):
        assert a.shape == b.shape and np.array_equal(a, b), f
    for kind in ["random_crop", "slice"]:
        cpu = _epoch(_roi_pipe(files, "cpu", kind), len(files))
        gpu = _epoch(_roi_pipe(files, "mixed", kind, hw_decoder_load=0.0), len(files))
        for f, a, b in zip(files, cpu, gpu):
            assert a.shape == b.shape and np.array_equal(a, b), (kind, f)


# --------------------------------------------------------------------------- flip, transpose, cast, normalize
def _cpu_and_gpu_runs(root, build, batch=BATCH, iterations=1, prepare=None):
    """Runs the same graph twice: `build(images, device)` on the decoded images of `root`
    (first passed through `prepare(images)` on the cpu, when given) with device="cpu", then
    with the images moved by `.gpu()` and device="gpu". Random operators inside `build`
    need explicit seeds so both runs draw the same values. Yields, per iteration, (cpu
    outputs, gpu outputs downloaded), each a list of TensorLists."""

    cpu_pipe, gpu_pipe = _cpu_and_gpu_pipes(root, build, batch, prepare)
    for _ in range(iterations):
        cpu, gpu = cpu_pipe.run(), gpu_pipe.run()
        yield list(cpu), [t.as_cpu() if hasattr(t, "as_cpu") else t for t in gpu]


def _cpu_and_gpu_pipes(root, build, batch=BATCH, prepare=None):
    """The two pipelines `_cpu_and_gpu_runs` runs."""

    def pipe(device):
        @pipeline_def(batch_size=batch, num_threads=4, device_id=0, seed=11)
        def p():
            data, _ = fn.readers.file(file_root=str(root))
            images = fn.decoders.image(data, device="cpu")
            if prepare is not None:
                images = prepare(images)
            if device == "gpu":
                images = images.gpu()
            return tuple(build(images, device))

        return p()

    return pipe("cpu"), pipe("gpu")


def _cpu_and_gpu(root, build, batch=BATCH):
    """One iteration of `_cpu_and_gpu_runs`."""
    return next(_cpu_and_gpu_runs(root, build, batch))


def _assert_identical(cpu, gpu, what=""):
    """Same layout, and per sample the same shape, dtype and bytes."""
    assert gpu.layout() == cpu.layout(), what
    assert len(gpu) == len(cpu), what
    for i in range(len(cpu)):
        a, b = cpu.at(i), gpu.at(i)
        assert a.dtype == b.dtype and a.shape == b.shape, (what, i, a.dtype, b.dtype, a.shape, b.shape)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (what, i)


def _gpu_error(build):
    """The error a GPU-only graph `build()` raises when run."""

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=1)
    def p():
        return build()

    with pytest.raises(sluice.errors.SluiceError) as e:
        p().run()
    return str(e.value)


def test_gpu_flip_equals_cpu_with_per_sample_switches(small_images):
    require_gpu()
    seen = []

    def build(images, device):
        h = fn.random.coin_flip(seed=3)
        v = fn.random.coin_flip(seed=5, probability=0.3)
        out = fn.flip(images, device=device, horizontal=h, vertical=v)
        # FLOAT, CHW: the same images transposed and cast first (on the same device).
        chw = fn.cast(fn.transpose(images, device=device, perm=[2, 0, 1]), device=device, dtype=types.FLOAT)
        out_chw = fn.flip(chw, device=device, horizontal=v, vertical=h)
        # 4-D without a layout (taken as FHWC), FLOAT64, with depthwise ignored (no D).
        seq = fn.random.uniform(range=(0, 100), shape=[3, 5, 7, 2], seed=9, dtype=types.FLOAT64)
        if device == "gpu":
            seq = seq.gpu()
        out_seq = fn.flip(seq, device=device, horizontal=h, vertical=v, depthwise=1)
        return out, out_chw, out_seq, images, h, v

    cpu, gpu = _cpu_and_gpu(small_images, build)
    for k, what in enumerate(["HWC uint8", "CHW float", "FHWC float64"]):
        _assert_identical(cpu[k], gpu[k], what)
    images, h, v = cpu[3], cpu[4], cpu[5]
    assert len({images.at(i).shape for i in range(len(images))}) > 1, "want images of different sizes"
    hs = [int(h.at(i)) for i in range(len(h))]
    assert 0 < sum(hs) < len(hs), "want both flipped and unflipped samples"
    for i in range(len(images)):  # the per-sample switches were honoured
        want = images.at(i)
        if hs[i]:
            want = want[:, ::-1]
        if int(v.at(i)):
            want = want[::-1]
        np.testing.assert_array_equal(gpu[0].at(i), want)


def test_gpu_transpose_equals_cpu_for_every_element_size(small_images):
    require_gpu()

    def build(images, device):
        outs = [fn.transpose(images, device=device, perm=[2, 0, 1]),  # HWC -> CHW
                fn.transpose(images, device=device, perm=[1, 0, 2], transpose_layout=False)]
        for dt in (types.INT16, types.FLOAT, types.FLOAT64):  # 2, 4 and 8-byte elements
            x = fn.cast(images, device=device, dtype=dt)
            outs.append(fn.transpose(x, device=device, perm=[1, 2, 0], output_layout="WCH"))
        u = fn.random.uniform(range=(-5, 5), shape=[2, 3, 4, 5], seed=2)
        if device == "gpu":
            u = u.gpu()
        outs.append(fn.transpose(u, device=device, perm=[3, 1, 0, 2]))
        return outs

    cpu, gpu = _cpu_and_gpu(small_images, build)
    assert cpu[0].layout() == "CHW" and cpu[1].layout() == "HWC" and cpu[2].layout() == "WCH"
    for k in range(len(cpu)):
        _assert_identical(cpu[k], gpu[k], f"output {k}")


_CAST_TARGETS = [types.UINT8, types.INT8, types.UINT16, types.INT16, types.UINT32, types.INT32, types.INT64,
                 types.UINT64, types.FLOAT16, types.FLOAT, types.FLOAT64, types.BOOL]


def test_gpu_cast_equals_cpu_bit_for_bit(small_images):
    """Every supported type pair from sources that hit the rounding rules: saturation (wide
    floats), exact halves (FLOAT16 in [1024, 2048) has a 0.5 spacing) and FLOAT16 ties (odd
    integers above 2048), UINT64 values past 2^63 (and 0 and the maximum, from saturated
    floats), plus the decoded images (different sizes)."""
    require_gpu()

    def build(images, device):
        wide = fn.random.uniform(range=(-70000.0, 70000.0), shape=[257], seed=21)
        halves = fn.cast(fn.random.uniform(range=(-2048.0, 2048.0), shape=[300], seed=22), dtype=types.FLOAT16)
        ints = fn.cast(fn.random.uniform(range=(-70000.0, 70000.0), shape=[301], seed=23), dtype=types.INT32)
        huge = fn.cast(fn.random.uniform(range=(-3e19, 3e19), shape=[299], seed=24), dtype=types.UINT64)
        sources = [wide, halves, ints, huge]
        if device == "gpu":
            sources = [s.gpu() for s in sources]
        outs = []
        for src in [images] + sources:
            outs += [fn.cast(src, device=device, dtype=dt) for dt in _CAST_TARGETS]
        return outs

    cpu, gpu = _cpu_and_gpu(small_images, build)
    assert len(cpu) == 5 * len(_CAST_TARGETS)
    for k in range(len(cpu)):
        _assert_identical(cpu[k], gpu[k], f"source {k // len(_CAST_TARGETS)} -> {_CAST_TARGETS[k % len(_CAST_TARGETS)]}")


def test_gpu_normalize_with_given_mean_and_stddev_matches_cpu(small_images):
    """Both backends compute in double with the same rounding, so the outputs are expected
    to be identical; the assertion allows 1e-6 relative for FLOAT and 1 for integer output."""
    require_gpu()

    def build(images, device):
        mean = fn.random.uniform(range=(60.0, 160.0), shape=[1, 1, 3], seed=31)  # per sample, per channel
        std = fn.random.uniform(range=(20.0, 90.0), shape=[1, 1, 3], seed=32)
        a = fn.normalize(images, device=device, mean=mean, stddev=std)
        b = fn.normalize(images, device=device, mean=118.5, stddev=57.0, scale=64.0, shift=128.0, dtype=types.UINT8)
        c = fn.normalize(images, device=device, axes=[0, 1], mean=mean, stddev=40.0, epsilon=0.5, dtype=types.INT16)
        return a, b, c

    cpu, gpu = _cpu_and_gpu(small_images, build)
    exact = True
    for k, (a, b) in enumerate(zip(cpu, gpu)):
        assert a.layout() == b.layout()
        for i in range(len(a)):
            x, y = a.at(i), b.at(i)
            assert x.dtype == y.dtype and x.shape == y.shape, (k, i)
            if x.dtype == np.float32:
                np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)
            else:
                assert np.abs(x.astype(np.int32) - y.astype(np.int32)).max() <= 1, (k, i)
            exact &= np.array_equal(x, y)
    print(f"normalize gpu == cpu bit for bit: {exact}")
    # The per-sample means really differ between samples.
    assert len({round(float(cpu[0].at(i).mean()), 3) for i in range(len(cpu[0]))}) > 1


def test_gpu_normalize_with_computed_statistics_matches_cpu(small_images):
    """Mean / stddev computed from the data (per sample, per channel, batch-wide, one of
    them given) on images of different sizes. The GPU sums in another order than the cpu,
    so the statistics may differ in the last bits: FLOAT outputs within rtol 1e-5 / atol
    1e-5, integer outputs within 1. The GPU's order is fixed by the shapes, so two runs of
    the same pipeline give the same bits."""
    require_gpu()

    def build(images, device):
        mean = fn.random.uniform(range=(60.0, 160.0), shape=[1, 1, 3], seed=33)  # per sample, per channel
        floats = fn.cast(images, device=device, dtype=types.FLOAT)
        return (
            fn.normalize(images, device=device),
            fn.normalize(images, device=device, axes=[0, 1]),
            fn.normalize(images, device=device, axis_names="HW"),
            fn.normalize(images, device=device, axes=[0, 1], batch=True),
            fn.normalize(images, device=device, mean=mean),  # stddev around the given mean
            fn.normalize(images, device=device, axes=[0, 1], stddev=50.0),
            fn.normalize(images, device=device, axes=[0, 1], ddof=1, epsilon=0.25),
            fn.normalize(images, device=device, scale=64.0, shift=128.0, dtype=types.UINT8),
            fn.normalize(images, device=device, axes=[0, 1], scale=1000.0, dtype=types.INT16),
            fn.normalize(floats, device=device, axes=[0, 1], batch=True, scale=2.0, shift=-1.0),
        )

    cpu, gpu = _cpu_and_gpu(small_images, build)
    for k, (a, b) in enumerate(zip(cpu, gpu)):
        assert a.layout() == b.layout(), k
        assert len(a) == len(b), k
        for i in range(len(a)):
            x, y = a.at(i), b.at(i)
            assert x.dtype == y.dtype and x.shape == y.shape, (k, i, x.dtype, y.dtype, x.shape, y.shape)
            if x.dtype == np.float32:
                np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5, err_msg=f"output {k}, sample {i}")
            else:
                assert np.abs(x.astype(np.int32) - y.astype(np.int32)).max() <= 1, (k, i)
    # The statistics really were computed: per-sample outputs are centred with unit spread.
    for i in range(len(cpu[0])):
        out = cpu[0].at(i)
        assert abs(float(out.mean())) < 1e-3 and abs(float(out.std()) - 1) < 1e-3, i

    _, again = _cpu_and_gpu_pipes(small_images, build)
    for k, b in enumerate(again.run()):
        _assert_identical(gpu[k], b.as_cpu(), f"second gpu run, output {k}")


def test_gpu_flip_rejects_an_input_without_h_and_w():
    require_gpu()
    msg = _gpu_error(lambda: fn.flip(fn.random.uniform(range=(0, 1), shape=[4, 5], seed=1).gpu(), device="gpu"))
    assert "flip" in msg and "layout" in msg, msg


def test_gpu_transpose_rejects_a_permutation_of_the_wrong_length():
    require_gpu()
    msg = _gpu_error(lambda: fn.transpose(fn.random.uniform(range=(0, 1), shape=[4, 5, 3], seed=1).gpu(), device="gpu", perm=[1, 0]))
    assert "transpose" in msg and "perm" in msg, msg


def test_gpu_normalize_rejects_bad_types():
    require_gpu()
    x = lambda: fn.random.uniform(range=(0, 9), shape=[4, 3], seed=1)
    msg = _gpu_error(lambda: fn.normalize(fn.cast(x(), dtype=types.FLOAT16).gpu(), device="gpu", mean=1.0, stddev=2.0))
    assert "normalize" in msg and "unsupported input type" in msg, msg


def test_cpu_only_pipeline_rejects_the_gpu_backends_clearly():
    """No GPU needed: device="gpu" is offered (from the schema) and refused at build time
    by a pipeline without a device."""
    for op, kw in [(fn.flip, {}), (fn.transpose, dict(perm=[1, 0])), (fn.cast, dict(dtype=types.FLOAT)), (fn.normalize, dict(mean=0.0, stddev=1.0))]:
        @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
        def p():
            return op(fn.random.uniform(range=(0, 1), shape=[4, 5]).gpu(), device="gpu", **kw)

        with pytest.raises(sluice.errors.GraphError) as e:
            p().build()
        msg = str(e.value).lower()
        assert "gpu" in msg and "cpu-only" in msg, msg


def test_gpu_operator_given_a_cpu_input_fails_where_it_is_called():
    """As DALI: the stage order is checked when the operator is created (no GPU needed)."""
    with pytest.raises(sluice.errors.GraphError, match=r"flip \(device='gpu'\): input 0 is on the CPU"):
        fn.flip(fn.random.uniform(range=(0, 1), shape=[4, 5]), device="gpu")


# --------------------------------------------------------------------------- arithmetic
# Values that hit wrapping, signed / unsigned edges, -0.0 and large magnitudes.
_ARITH_VALUES = {
    "u8": (types.UINT8, [0, 1, 3, 7, 100, 200, 255]),
    "i8": (types.INT8, [-128, -7, -1, 0, 3, 127]),
    "u16": (types.UINT16, [0, 5, 300, 40000, 65535]),
    "i16": (types.INT16, [-32768, -300, -1, 0, 7, 32767]),
    "i32": (types.INT32, [-2**31 + 1, -70000, -1, 0, 9, 2**31 - 1]),
    "u32": (types.UINT32, [0, 7, 70000, 2**32 - 1]),
    "i64": (types.INT64, [-2**40, -5, -1, 0, 11, 2**40]),
    "u64": (types.UINT64, [0, 1, 13, 2**40]),
    "f32": (types.FLOAT, [-1e6, -2.5, -1.0, -0.0, 0.0, 0.3, 1.5, 1e6]),
    "f64": (types.FLOAT64, [-1e12, -1 / 3, 0.0, 0.1, 7.25, 1e12]),
    "b": (types.BOOL, [0, 1]),
}
_ARITH_PAIRS = [("u8", "i8"), ("i32", "i32"), ("u16", "i16"), ("u32", "i64"), ("u64", "u8"), ("i8", "b"),
                ("f32", "i32"), ("f64", "f32"), ("u8", "f64")]
# The right operand's shape against the left's (5, 6, 3): same, per channel, per column, scalar.
_RIGHT_SHAPES = [[5, 6, 3], [3], [5, 1, 3], None]


def _arith_input(name, shape, seed, nonzero=False):
    dtype, values = _ARITH_VALUES[name]
    values = [float(v) for v in values if not (nonzero and v == 0)]
    kw = {} if shape is None else {"shape": shape}
    return fn.random.uniform(values=values, dtype=dtype, seed=seed, **kw)


def test_gpu_arithmetic_equals_cpu_bit_for_bit(small_images):
    """Every operator but the library functions (pow, exp, sin, ...: next test) on pairs
    of types covering DALI's promotion rules, with broadcasting, constants, fused nested
    expressions and the decoded images (different sizes). Operands left on the cpu follow
    the GPU operand, as in DALI."""
    require_gpu()

    def build(images, device):
        outs = []
        for k, (left, right) in enumerate(_ARITH_PAIRS):
            a = _arith_input(left, [5, 6, 3], seed=100 + k)
            b = _arith_input(right, _RIGHT_SHAPES[k % len(_RIGHT_SHAPES)], seed=200 + k, nonzero=True)
            if device == "gpu":
                a = a.gpu()  # b stays on the cpu: the expression moves it
            floats = "f" in left[0] + right[0]
            outs += [a + b, a - b, a * b, a / b, a // b, a % b, a == b, a != b, a < b, a <= b, a > b, a >= b,
                     smath.min(a, b), smath.max(a, b), smath.clamp(a, -3, b), -a, abs(a), +a, a * 3 - 7, 2.5 * a,
                     smath.floor(a / b), smath.ceil(a * 0.37), smath.sqrt(smath.abs(a)), (a * 2 - b) // 3 + (a > b)]
            if not floats:
                outs += [a & b, a | b, a ^ b, a ** (b & 7), 3 ** (a & 15)]
        vec = fn.random.uniform(range=(-4.0, 4.0), shape=[3], seed=300)  # per channel, on the cpu
        outs += [images * 0.5 - vec, (images > 100) & (images < 200), images // 7 + images % 7 * 3,
                 smath.clamp(images, 20, 235), images * images, images - 128, smath.min(images, vec * 40),
                 ((images * 3 - 7) // 2 + vec) * (images > 50) - smath.abs(vec - 2)]
        return outs

    for it, (cpu, gpu) in enumerate(_cpu_and_gpu_runs(small_images, build, batch=6, iterations=2)):
        assert len(cpu) == len(gpu) > 200
        for k in range(len(cpu)):
            _assert_identical(cpu[k], gpu[k], f"iteration {it}, output {k}")
    last = cpu[-1]
    assert len({last.at(i).shape for i in range(len(last))}) > 1, "want images of different sizes"


def test_gpu_arithmetic_library_functions_match_cpu_within_a_few_ulp():
    """pow, exp, log, the trigonometric and hyperbolic functions: CUDA's libm and the host's
    may round the double differently in the last bits, so FLOAT results may differ by 1 ulp
    and FLOAT64 results by 4; NaNs and infinities must sit in the same places."""
    require_gpu()

    def build(device):
        outs = []
        for dtype, seed in [(types.FLOAT, 1), (types.FLOAT64, 2)]:
            x = fn.random.uniform(range=(-3.0, 3.0), shape=[4000], dtype=dtype, seed=seed)
            p = fn.random.uniform(range=(0.001, 60.0), shape=[4000], dtype=dtype, seed=seed + 10)
            if device == "gpu":
                x, p = x.gpu(), p.gpu()
            outs += [smath.exp(x), smath.log(p), smath.log2(p), smath.log10(p), smath.sin(x * 40), smath.cos(x * 40),
                     smath.tan(x), smath.asin(x / 3), smath.acos(x / 3), smath.atan(p), smath.sinh(x), smath.cosh(x),
                     smath.tanh(x), smath.asinh(p), smath.acosh(p + 1), smath.atanh(x / 3.5), smath.cbrt(x * p),
                     smath.rsqrt(p), smath.atan2(x, p - 30), p ** x, smath.fpow(p, 0.37), smath.log(x)]
        i = fn.random.uniform(values=[-8.0, 0.0, 1.0, 7.0, 100000.0], shape=[500], dtype=types.INT32, seed=5)
        if device == "gpu":
            i = i.gpu()
        outs += [smath.sqrt(i), smath.exp(i / 10000), smath.fpow(i, 2)]
        return outs

    def run(device):
        @pipeline_def(batch_size=3, num_threads=2, device_id=0, seed=7)
        def p():
            return tuple(build(device))

        return [t.as_cpu() if hasattr(t, "as_cpu") else t for t in p().run()]

    cpu, gpu = run("cpu"), run("gpu")
    exact = total = 0
    for k, (a, b) in enumerate(zip(cpu, gpu)):
        for s in range(len(a)):
            x, y = a.at(s), b.at(s)
            assert x.dtype == y.dtype and x.shape == y.shape, (k, s)
            assert x.dtype.kind == "f", (k, x.dtype)
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=f"output {k}")
            np.testing.assert_array_equal(np.isinf(x), np.isinf(y), err_msg=f"output {k}")
            ok = np.isfinite(x)
            np.testing.assert_array_max_ulp(x[ok], y[ok], maxulp=1 if x.dtype == np.float32 else 4)
            exact += int(np.sum(x.view(np.uint8) == y.view(np.uint8)) == x.nbytes)
            total += 1
    print(f"library functions: {exact}/{total} samples bit-exact gpu vs cpu")


def test_gpu_integer_division_by_zero_names_the_sample_and_the_pipeline_goes_on(small_images):
    """Per batch, the GPU fails exactly where the cpu fails, naming the same sample; the
    batches after a failure run normally and equal the cpu's."""
    require_gpu()

    def build(images, device):
        d = fn.random.uniform(values=[0.0, 1.0, 2.0, 3.0], dtype=types.INT32, seed=41)  # a scalar per sample
        x = fn.random.uniform(values=[-9.0, 5.0, 100.0], shape=[4, 3], dtype=types.INT16, seed=42)
        if device == "gpu":
            x = x.gpu()
        return [x // d + x % 7]

    cpu_pipe, gpu_pipe = _cpu_and_gpu_pipes(small_images, build, batch=4)
    failed = []
    for it in range(12):
        outcome = []
        for pipe in (cpu_pipe, gpu_pipe):
            try:
                (out,) = pipe.run()
                outcome.append(out.as_cpu() if hasattr(out, "as_cpu") else out)
            except RuntimeError as e:
                outcome.append(str(e))
        cpu, gpu = outcome
        if isinstance(cpu, str):
            assert isinstance(gpu, str), f"iteration {it}: the cpu failed ({cpu}), the gpu did not"
            for msg in (cpu, gpu):
                assert "integer division by zero" in msg and "arithmetic" in msg.lower(), msg
            assert re.findall(r"sample \d+", cpu) == re.findall(r"sample \d+", gpu), (cpu, gpu)
        else:
            assert not isinstance(gpu, str), f"iteration {it}: the gpu failed: {gpu}"
            _assert_identical(cpu, gpu, f"iteration {it}")
        failed.append(isinstance(cpu, str))
    assert any(failed) and not all(failed[failed.index(True):]), f"want a failure followed by good batches: {failed}"
