"""`fn.get_property` against DALI 2.4's cpu operator: DALI's test_get_property.py cases
(`source_info` of readers.file and readers.tfrecord samples, `layout` of external source
outputs), as UINT8 byte strings; an unknown key is an error naming the operator and the
argument; the gpu backend equal to the cpu one."""

import os

import numpy as np
import pytest

import sluice
from sluice import fn, pipeline_def

from conftest import require_gpu

dali = pytest.importorskip("nvidia.dali")
import nvidia.dali.fn as dfn  # noqa: E402


def _text(t):
    return np.array(t).tobytes().decode()


def _files(tmp_path, n=8):
    files = []
    for i in range(n):
        p = tmp_path / f"f{i}.bin"
        p.write_bytes(bytes([i]) * (i + 1))
        files.append(str(p))
    return files


def test_file_source_info_matches_dali(tmp_path):
    files = _files(tmp_path)
    outs = []
    for mod_fn, pdef in ((fn, pipeline_def), (dfn, dali.pipeline_def)):
        @pdef(batch_size=8, num_threads=2, device_id=None)
        def p():
            read, _ = mod_fn.readers.file(files=files)
            return mod_fn.get_property(read, key="source_info")

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run()[0])
    for i, f in enumerate(files):
        a, b = np.array(outs[0].at(i)), np.array(outs[1].at(i))
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        assert _text(a) == _text(b) == f


def test_tfrecord_source_info_matches_dali(tmp_path):
    import sluice.tfrecord as tfrec
    from test_readers_tfrecord import example, write_tfrecord  # the reader tests' writer

    path = str(tmp_path / "train.tfrecord")
    write_tfrecord(path, [example({"image/encoded": ("bytes", [bytes([k]) * (k + 3)]), "image/class/label": ("int64", [k])}) for k in range(8)])
    index = path + ".idx"
    outs = []
    for mod_fn, mod_tfrec, pdef in ((fn, tfrec, pipeline_def), (dfn, pytest.importorskip("nvidia.dali.tfrecord"), dali.pipeline_def)):
        @pdef(batch_size=8, num_threads=2, device_id=None)
        def p():
            feats = {"image/encoded": mod_tfrec.FixedLenFeature((), mod_tfrec.string, ""), "image/class/label": mod_tfrec.FixedLenFeature([1], mod_tfrec.int64, -1)}
            inputs = mod_fn.readers.tfrecord(path=path, index_path=index, features=feats)
            return mod_fn.get_property(inputs["image/encoded"], key="source_info"), mod_fn.get_property(inputs["image/class/label"], key="source_info")

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run())
    for k in range(2):
        for i in range(8):
            assert _text(outs[0][k].at(i)) == _text(outs[1][k].at(i))
            assert _text(outs[0][k].at(i)).startswith(f"{path} at index ")


def test_layout_matches_dali():
    layouts = ["ABC", "XYZ"]
    outs = []
    for mod_fn, pdef in ((fn, pipeline_def), (dfn, dali.pipeline_def)):
        @pdef(batch_size=8, num_threads=2, device_id=None)
        def p():
            def gen():
                yield np.random.rand(2, 3, 4, 5)

            inp = mod_fn.external_source(source=gen, layout=layouts, num_outputs=2, batch=False, cycle=True)
            return tuple(mod_fn.get_property(i, key="layout") for i in inp)

        pipe = p()
        if pdef is dali.pipeline_def:
            pipe.build()
        outs.append(pipe.run())
    for k, lt in enumerate(layouts):
        for i in range(8):
            assert _text(outs[0][k].at(i)) == _text(outs[1][k].at(i)) == lt


def test_no_source_info_and_no_layout_give_empty_strings():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        x = fn.random.uniform(range=(0, 1), shape=[3])
        return fn.get_property(x, key="source_info"), fn.get_property(x, key="layout")

    s, l = p().run()
    assert [np.array(s.at(i)).shape for i in range(2)] == [(0,), (0,)]
    assert [np.array(l.at(i)).shape for i in range(2)] == [(0,), (0,)]


def test_unsupported_key_names_operator_and_argument():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        return fn.get_property(fn.random.uniform(range=(0, 1), shape=[3]), key="this key doesn't exist")

    with pytest.raises(sluice.errors.ArgumentError, match="get_property: argument 'key': unsupported property key \"this key doesn't exist\""):
        p().run()

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def d():
        return dfn.get_property(dfn.random.uniform(range=(0, 1), shape=[3]), key="this key doesn't exist")

    with pytest.raises(RuntimeError, match="Unsupported property key"):
        q = d()
        q.build()
        q.run()


def test_gpu_get_property_equals_cpu(tmp_path):
    require_gpu()
    files = _files(tmp_path)

    @pipeline_def(batch_size=8, num_threads=2, device_id=0)
    def p():
        read, _ = fn.readers.file(files=files)
        x = fn.reshape(read, layout="X")
        return (fn.get_property(read, key="source_info"), fn.get_property(x, key="layout"),
                fn.get_property(read.gpu(), key="source_info"), fn.get_property(x.gpu(), key="layout"))

    pipe = p()
    for _ in range(2):
        outs = pipe.run()
        for c, g in zip(outs[:2], outs[2:]):
            assert isinstance(g, sluice.TensorListGPU)
            g = g.as_cpu()
            for i in range(8):
                assert _text(c.at(i)) == _text(g.at(i))


def test_dali_get_property_gpu2cpu():
    """DALI's test_get_property_gpu2cpu: a cpu get_property of a GPU input (the dynamic
    executor's GPU -> CPU transition; tests/test_gpu_to_cpu.py has the rest of it)."""
    require_gpu()

    @pipeline_def(batch_size=2, device_id=0, num_threads=1)
    def p():
        data = sluice.types.Constant(np.array([[[42]]]), device="gpu", layout="abc")
        return fn.get_property(data, key="layout", device="cpu")

    (out,) = p().run()
    assert _text(out.at(0)) == _text(out.at(1)) == "abc"
