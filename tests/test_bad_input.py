"""Bad data and bad arguments give clear Python exceptions (operator, file, sample index, argument)
and leave the pipeline usable; nothing aborts the process."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sluice
from PIL import Image

from sluice import fn, ops, pipeline_def

BATCH = 3


@pytest.fixture(scope="module")
def bad_set(small_images, tmp_path_factory):
    """(folder, good file names, {bad file name: kind})."""
    d = tmp_path_factory.mktemp("bad")
    good = sorted(p.name for p in (small_images / "a").iterdir())[:8]
    for g in good:
        shutil.copy(small_images / "a" / g, d / g)
    data = (d / good[0]).read_bytes()
    corrupt = bytearray(data)
    for k in range(600, len(corrupt) - 2, 7):  # scribble over headers and entropy-coded data
        corrupt[k] = 0x5A
    bad = {
        "bad_corrupt.jpg": bytes(corrupt),
        "bad_truncated.jpg": data[: len(data) // 3],
        "bad_empty.jpg": b"",
        "bad_text.jpg": b"this is a text file, not a JPEG\n" * 20,
    }
    for name, content in bad.items():
        (d / name).write_bytes(content)
    return d, good, list(bad)


def decode_pipe(files, **kw):
    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=1, **kw)
    def p():
        jpegs, _ = fn.readers.file(files=[str(f) for f in files])
        return fn.decoders.image(jpegs)

    return p()


def assert_good_batch(out, expected_paths):
    images, = out
    assert [Path(images.source_info(i)).name for i in range(len(images))] == [Path(p).name for p in expected_paths]
    for i, p in enumerate(expected_paths):
        w, h = Image.open(p).size
        a = images.at(i)
        assert a.shape == (h, w, 3) and a.dtype == np.uint8
        assert a.std() > 1  # real pixels, not a fill value



BAD_KINDS = [
    pytest.param("bad_corrupt.jpg", id="corrupt"),
    pytest.param("bad_truncated.jpg", id="truncated"),
    pytest.param("bad_empty.jpg", id="empty"),
    pytest.param("bad_text.jpg", id="text"),
]


@pytest.mark.parametrize("num_threads", [1, 2])
@pytest.mark.parametrize("bad_name", BAD_KINDS)
def test_bad_file_raises_and_next_run_works(bad_set, bad_name, num_threads):
    d, good, bad = bad_set
    # batches: [bad at index 1 among good] [good] [bad at index 2] [good] [good]
    g = [d / x for x in good]
    files = [g[0], d / bad_name, g[1]] + g[2:5] + [g[5], g[6], d / bad_name] + g[0:3] + g[3:6]
    plan = [("bad", 1), ("good", files[3:6]), ("bad", 2), ("good", files[9:12]), ("good", files[12:15])]

    @pipeline_def(batch_size=BATCH, num_threads=num_threads, device_id=None, seed=1)
    def p():
        jpegs, _ = fn.readers.file(files=[str(f) for f in files])
        return fn.decoders.image(jpegs)

    pipe = p()
    for what, arg in plan:
        if what == "bad":
            with pytest.raises(RuntimeError) as e:
                pipe.run()
            msg = str(e.value)
            assert "decoders.image" in msg, msg
            assert bad_name in msg, msg
            assert re.search(rf"sample\s*#?\s*{arg}\b", msg), msg
            for k, x in enumerate(good):
                assert x not in msg, msg
        else:
            assert_good_batch(pipe.run(), arg)


@pytest.mark.parametrize("exec_async", [True, False], ids=["async", "sync"])
def test_bad_files_interleaved_with_good_batches(bad_set, exec_async):
    """Every kind of bad file, one per batch at a varying index."""
    d, good, bad = bad_set
    files, plan = [], []
    g = iter(good * 4)
    for k, b in enumerate(bad):
        idx = k % BATCH
        batch = [d / next(g) for _ in range(BATCH)]
        batch[idx] = d / b
        files += batch
        plan.append(("bad", b, idx, None))
        ok = [d / next(g) for _ in range(BATCH)]
        files += ok
        plan.append(("good", None, None, ok))
    pipe = decode_pipe(files, exec_async=exec_async, exec_pipelined=exec_async)
    for what, name, idx, ok in plan:
        if what == "bad":
            with pytest.raises(RuntimeError) as e:
                pipe.run()
            msg = str(e.value)
            assert "decoders.image" in msg, msg
            assert name in msg, msg
            assert re.search(rf"sample\s*#?\s*{idx}\b", msg), msg
            for other in bad:
                if other != name:
                    assert other not in msg
        else:
            assert_good_batch(pipe.run(), ok)


def test_several_bad_files_in_one_batch(bad_set):
    d, good, bad = bad_set
    files = [d / bad[2], d / good[0], d / bad[3]] + [d / x for x in good[1:4]]
    pipe = decode_pipe(files)
    with pytest.raises(RuntimeError) as e:
        pipe.run()
    msg = str(e.value)
    assert "decoders.image" in msg
    # whichever failure is reported, its file and its index belong together
    assert (bad[2] in msg and re.search(r"sample\s*#?\s*0\b", msg)) or (bad[3] in msg and re.search(r"sample\s*#?\s*2\b", msg)), msg
    assert_good_batch(pipe.run(), files[3:6])


def test_process_survives_bad_input(bad_set, tmp_path):
    """The same, in a fresh interpreter: it must exit normally (no abort, no panic crossing FFI)."""
    d, good, bad = bad_set
    script = tmp_path / "run_bad.py"
    script.write_text(textwrap.dedent(f"""
        from sluice import fn, pipeline_def
        files = {[str(d / b) for b in bad] + [str(d / x) for x in good[:4]]!r}
        @pipeline_def(batch_size=1, num_threads=2, device_id=None, seed=1)
        def p():
            jpegs, _ = fn.readers.file(files=files)
            return fn.decoders.image(jpegs)
        pipe = p()
        errors = 0
        for _ in range(len(files) * 2):
            try:
                pipe.run()
            except RuntimeError:
                errors += 1
        print("ERRORS", errors)
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r"ERRORS (\d+)", r.stdout)
    assert m and int(m.group(1)) >= 8, r.stdout + r.stderr[-2000:]  # at least every bad file, twice


def test_missing_file_root_fails_at_build(tmp_path):
    missing = tmp_path / "no_such_folder"

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, labels = fn.readers.file(file_root=str(missing))
        return jpegs

    pipe = p()
    with pytest.raises(Exception) as e:
        pipe.build()
    assert "readers.file" in str(e.value) and str(missing) in str(e.value)


@pytest.mark.parametrize("bad_line", ["this line has no label", "a/x.jpg notanumber", "a/x.jpg -3"])
def test_file_list_with_unparsable_line(tiny_root, tmp_path, bad_line):
    fl = tmp_path / "my_list.txt"
    fl.write_text(f"dir_0/f00.jpg 0\ndir_0/f01.jpg 1\n{bad_line}\ndir_0/f02.jpg 2\n")

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        jpegs, labels = fn.readers.file(file_root=str(tiny_root), file_list=str(fl))
        return labels

    with pytest.raises(sluice.errors.ArgumentError) as e:
        p().build()
    msg = str(e.value)
    assert "readers.file" in msg and str(fl) in msg and re.search(r"line\s*3\b", msg), msg


def test_unknown_argument_is_type_error_at_call_time(tiny_root):
    """DALI raises KeyError; Python code expects TypeError: the error is both (and a
    RuntimeError, as every Sluice error), with the closest argument name suggested."""
    with pytest.raises(KeyError):
        fn.readers.file(file_root=str(tiny_root), bogus_arg=3)
    with pytest.raises(sluice.errors.UnknownArgumentError, match=r"random\.uniform: unknown argument 'rnage'; did you mean 'range'\?$"):
        fn.random.uniform(rnage=(0, 1))
    with pytest.raises(TypeError, match=r"readers\.file.*bogus_arg"):
        fn.readers.file(file_root=str(tiny_root), bogus_arg=3)
    with pytest.raises(TypeError, match=r"decoders\.image.*colour_space"):
        fn.decoders.image(fn.readers.file(file_root=str(tiny_root))[0], colour_space="RGB")
    with pytest.raises(TypeError, match=r"random\.uniform.*rnage"):
        fn.random.uniform(rnage=(0, 1))
    with pytest.raises(TypeError, match=r"readers\.file.*bogus_arg"):
        ops.FileReader(file_root=str(tiny_root), bogus_arg=3)
    with pytest.raises(TypeError, match=r"random\.coin_flip.*probabilty"):
        ops.CoinFlip(probabilty=0.5)


@pytest.mark.parametrize("make, arg", [
    (lambda root: fn.random.uniform(range="abc"), "range"),
    (lambda root: fn.random.coin_flip(probability="x"), "probability"),
    (lambda root: fn.readers.file(file_root=str(root), random_shuffle="yes")[0], "random_shuffle"),
    (lambda root: fn.readers.file(file_root=str(root), num_shards="two")[0], "num_shards"),
], ids=["uniform.range", "coin_flip.probability", "file.random_shuffle", "file.num_shards"])
def test_wrong_argument_type(tiny_root, make, arg):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def p():
        return make(tiny_root)

    with pytest.raises(sluice.errors.ArgumentTypeError) as e:
        p().build()
    assert f"'{arg}'" in str(e.value)
    assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)  # DALI: ValueError


def test_file_deleted_after_build(small_images, tmp_path):
    d = tmp_path / "root" / "x"
    d.mkdir(parents=True)
    names = sorted(p.name for p in (small_images / "a").iterdir())[:3]
    for n in names:
        shutil.copy(small_images / "a" / n, d / n)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1, prefetch_queue_depth=1)
    def p():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path / "root"))
        return fn.decoders.image(jpegs)

    pipe = p()
    pipe.build()
    victim = d / names[2]
    os.remove(victim)
    assert_good_batch(pipe.run(), [small_images / "a" / names[0]])
    assert_good_batch(pipe.run(), [small_images / "a" / names[1]])
    with pytest.raises(Exception) as e:
        pipe.run()
    assert str(victim) in str(e.value) or f"x/{names[2]}" in str(e.value)
    assert "readers.file" in str(e.value)
    # the next run goes on with the next epoch
    assert_good_batch(pipe.run(), [small_images / "a" / names[0]])
    assert_good_batch(pipe.run(), [small_images / "a" / names[1]])
