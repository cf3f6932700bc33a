"""Debug mode (`sluice.pipeline.experimental.pipeline_def(debug=True)`): the examples of the
documents Sluice is modelled on (../shared/seeds/004), outputs equal to the compiled
pipeline's where the operators are deterministic or seeded, external sources over epochs,
NumPy inputs, and the rule that every iteration calls the same operators. (DALI 2.4's debug
mode needs a CUDA driver even for CPU operators, so these run on Sluice only.)"""

import numpy as np
import pytest

import sluice
from sluice import fn, types
from sluice.pipeline.experimental import pipeline_def


def test_seed_examples_print_and_numpy_inputs(mixed_root, capsys):
    images_dir = str(mixed_root)

    @pipeline_def(debug=True)
    def my_pipe():
        data, _ = fn.readers.file(file_root=images_dir)
        img = fn.decoders.image(data)
        print(np.array(img.get()[0]).shape)
        return img

    p = my_pipe(batch_size=4, num_threads=2, device_id=None)
    (out,) = p.run()
    shape = capsys.readouterr().out.strip()
    assert shape == str(np.array(out[0]).shape) and len(out) == 4

    @pipeline_def(batch_size=8, debug=True)
    def my_pipe2():
        img = [np.random.rand(640, 480, 3) for _ in range(8)]
        output = fn.flip(img)
        return output, img

    flipped, img = my_pipe2(num_threads=2, device_id=None).run()
    for f, i in zip(flipped, img):
        np.testing.assert_array_equal(np.array(f), np.array(i)[:, ::-1])


def test_debug_outputs_equal_the_compiled_pipeline(mixed_root):
    def body():
        jpegs, labels = fn.readers.file(file_root=str(mixed_root), random_shuffle=True, seed=3, name="Reader")
        img = fn.decoders.image(jpegs)
        img = fn.resize(fn.crop(img, crop=(20, 20), crop_pos_x=fn.random.uniform(range=[0, 1], seed=4)), size=(32, 24))
        out = fn.crop_mirror_normalize(img, dtype=types.FLOAT, mean=[10.0], std=[20.0],
                                       mirror=fn.random.coin_flip(seed=5))
        return out, (labels + 1) * 2, img[1:5, :, 0]

    compiled = sluice.pipeline_def(body, batch_size=5, num_threads=2, device_id=None)()
    debug = pipeline_def(body, batch_size=5, num_threads=2, device_id=None, debug=True)()
    for _ in range(3):
        for a, b in zip(compiled.run(), debug.run()):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                np.testing.assert_array_equal(np.array(x), np.array(y))


def test_external_source_epochs_and_python_branching_on_data():
    seen = []

    def source(info):
        if info.iteration >= 2:
            raise StopIteration
        return [np.full((2,), info.iteration * 10 + k + info.epoch_idx * 100, np.int32) for k in range(3)]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, debug=True)
    def pipe():
        x = fn.external_source(source=source, batch_info=True)
        data = x.get()
        seen.append(int(np.array(data[0])[0]))
        # plain Python on the data: allowed in debug mode (the same operators every iteration)
        doubled, less = x * 2, x - 1
        return doubled if np.array(data[0])[0] % 20 == 0 else less

    p = pipe()
    got = [p.run()[0].as_array()[:, 0].tolist() for _ in range(2)]
    assert got == [[0, 2, 4], [9, 10, 11]]
    with pytest.raises(StopIteration):
        p.run()
    p.reset()
    assert p.run()[0].as_array()[:, 0].tolist() == [200, 202, 204]
    assert seen == [0, 10, 100]


def test_the_same_operators_every_iteration():
    calls = []

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, debug=True)
    def pipe():
        calls.append(1)
        x = fn.random.uniform(range=[0, 1], seed=1)
        if len(calls) == 2:
            x = fn.cast(x, dtype=types.FLOAT16)
        return x

    p = pipe()
    p.run()
    with pytest.raises(RuntimeError, match="same operators in the same order"):
        p.run()

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, debug=True)
    def other_operator():
        calls.append(1)
        x = fn.random.uniform(range=[0, 1], seed=1)
        return x * 2 if len(calls) % 2 else x - 1

    p = other_operator()
    p.run()
    with pytest.raises(RuntimeError, match="not the operator the first iteration called there"):
        p.run()


def test_debug_gpu():
    from conftest import require_gpu

    require_gpu()

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, debug=True)
    def pipe():
        img = [np.full((6, 5, 3), k, np.uint8) for k in range(4)]
        x = fn.flip(fn.external_source(source=lambda: img, layout="HWC").gpu(), horizontal=1)
        from sluice.backend import TensorListGPU

        assert isinstance(x.get(), TensorListGPU)
        return x, x.cpu()

    g, c = pipe().run()
    np.testing.assert_array_equal(g.as_cpu().as_array(), c.as_array())
    assert c.as_array()[3].max() == 3
