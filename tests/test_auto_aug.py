"""`sluice.auto_aug`: AutoAugment, RandAugment, TrivialAugment Wide and the tools to build
policies (`@augmentation`, `Policy`, `signed_bin`, `select`).

- DALI's tests (auto_aug/test_auto_augment.py, test_rand_augment.py, test_trivial_augment.py)
  ported with the import renamed: every suite runs on images (decoded, and resized to one
  size) and videos (FHWC), with and without the image shape, deterministically (two
  pipelines, same outputs); the choice of sub-policies, stages, operations, magnitudes and
  signs follows the promised distributions (chi-square, as DALI's tests check them); wrong
  arguments fail with DALI's messages.
- Parity: the suites' random choices are Sluice's own (our random streams are not DALI's),
  so each augmentation is compared with DALI's on fixed magnitude bins in
  tests/test_auto_aug_augmentations.py.
- gpu: the same cases on the GPU machine (SLUICE_REQUIRE_GPU=1 makes a missing GPU a failure).
"""

import itertools
import random

import numpy as np
import pytest

from sluice import fn, pipeline_def, types
from sluice.auto_aug import augmentations as a
from sluice.auto_aug import auto_augment, rand_augment, trivial_augment
from sluice.auto_aug.core import Policy, augmentation

from conftest import require_gpu

DEVICES = ["cpu", "gpu"]


class _ChiSquare:
    def __init__(self, statistic, pvalue):
        self.statistic, self.pvalue = statistic, pvalue


def chisquare(observed, expected):
    """Pearson's chi-square test (scipy.stats.chisquare's statistic and p-value), here so
    the suite runs where SciPy is not installed (the GPU machine): the p-value is the
    regularized upper incomplete gamma Q(k/2, x/2), by its series or continued fraction."""
    import math

    observed, expected = np.asarray(observed, np.float64), np.asarray(expected, np.float64)
    x = float(((observed - expected) ** 2 / expected).sum())
    a, z = (len(observed) - 1) / 2.0, x / 2.0
    if z <= 0:
        return _ChiSquare(x, 1.0)
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:  # P(a, z) by its series, Q = 1 - P
        term = total = 1.0 / a
        n = a
        while term > total * 1e-15:
            n += 1
            term *= z / n
            total += term
        return _ChiSquare(x, max(0.0, 1.0 - total * math.exp(log_front)))
    # Q(a, z) by Lentz's continued fraction
    tiny = 1e-300
    b = z + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return _ChiSquare(x, h * math.exp(log_front))


def _device(dev):
    if dev == "gpu":
        require_gpu()


def _samples(out):
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    return [np.array(s) for s in out]


def _check_same(out1, out2):
    s1, s2 = _samples(out1), _samples(out2)
    assert len(s1) == len(s2)
    for x, y in zip(s1, s2):
        assert x.shape == y.shape and np.array_equal(x, y)


@pytest.fixture(scope="module")
def videos(small_images):
    """Six FHWC videos of 5 frames in two sizes, made from the test JPEGs (a frame per image,
    each sequence a different run of images)."""
    from PIL import Image

    files = sorted(p for p in small_images.rglob("*.jpg"))
    frames = [Image.open(p).convert("RGB") for p in files]
    vids = []
    for size in ((64, 48), (40, 72)):
        for start in range(3):
            vids.append(np.stack([np.asarray(frames[(start * 3 + k) % len(frames)].resize(size)) for k in range(5)]))
    return vids


# --------------------------------------------------------------------------- AutoAugment
_shape_policies = ("image_net", "reduced_cifar10", "svhn")
_AA_CASES = [
    (_shape_policies[i % 3],) + case
    for i, case in enumerate(itertools.product(("cpu", "gpu"), (True, False), (True, False), (None, 0), (True, False)))
] + [("reduced_image_net",) + case for case in itertools.product(("cpu", "gpu"), (True, False), (False,), (None, 0),
                                                                 (False,))]


def _image_pipeline(root, dev, batch_size, uniformly_resized, use_shape, fill_value, bounds, augment):
    @pipeline_def(enable_conditionals=True, batch_size=batch_size, num_threads=2, device_id=0 if dev == "gpu" else None,
                  seed=43)
    def pipe():
        encoded, _ = fn.readers.file(name="Reader", file_root=str(root))
        image = fn.decoders.image(encoded, device="cpu" if dev == "cpu" else "mixed")
        shape = image.shape() if dev == "cpu" else fn.peek_image_shape(encoded)
        if uniformly_resized:
            image = fn.resize(image, size=(64, 64))
            shape = types.Constant(np.array([64, 64, 3], dtype=np.int64))
        extra = {"shape": shape} if use_shape else {}
        if fill_value is not None:
            extra["fill_value"] = fill_value
        if bounds:
            extra["max_translate_rel" if use_shape else "max_translate_abs"] = 0.9 if use_shape else 400
        return augment(image, **extra)

    return pipe


@pytest.mark.parametrize("i,args", list(enumerate(_AA_CASES)))
def test_run_auto_aug(small_images, i, args):
    policy_name, dev, uniformly_resized, use_shape, fill_value, bounds = args
    _device(dev)
    batch_size = [1, 8, 7, 13, 5, 11][i % 6]
    make = _image_pipeline(small_images, dev, batch_size, uniformly_resized, use_shape, fill_value, bounds,
                           lambda image, **kw: auto_augment.auto_augment(image, policy_name, **kw))
    # Two instances: building a pipeline must not change what it computes.
    p1, p2 = make(), make()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)


@pytest.mark.parametrize("i,args", list(enumerate([
    ("cpu", "image_net", 1, True), ("cpu", "reduced_cifar10", 4, False), ("cpu", "svhn", 17, True),
    ("cpu", "reduced_image_net", 3, False), ("gpu", "image_net", 21, False), ("gpu", "reduced_cifar10", 3, True),
    ("gpu", "svhn", 1, False), ("gpu", "reduced_image_net", 5, False)])))
def test_auto_aug_video(videos, i, args):
    dev, policy_name, batch_size, use_shape = args
    _device(dev)

    @pipeline_def(batch_size=batch_size, device_id=0 if dev == "gpu" else None, num_threads=2, seed=205,
                  enable_conditionals=True)
    def pipe():
        rng = random.Random(42 + i)
        video = fn.external_source(source=lambda: list(rng.choices(videos, k=batch_size)), batch=True, layout="FHWC")
        extra = {"shape": video.shape()[1:]} if use_shape else {}
        if dev == "gpu":
            video = video.gpu()
        return auto_augment.auto_augment(video, policy_name, **extra)

    p1, p2 = pipe(), pipe()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)
        assert [s.shape for s in _samples(o1)] == [s.shape for s in _samples(o1)]


def mag_to_param_with_op_id(op_id):
    def mag_to_param(magnitude):
        return np.array([op_id, magnitude], dtype=np.int32)

    return mag_to_param


def _concat_pipeline(dev, policy, batch_size, seed=44):
    @pipeline_def(enable_conditionals=True, batch_size=batch_size, num_threads=2,
                  device_id=0 if dev == "gpu" else None, seed=seed)
    def pipe():
        data = types.Constant(np.array([], dtype=np.int32), device=dev)
        return fn.reshape(auto_augment.apply_auto_augment(policy, data), shape=(-1, 2))

    return pipe()


def _collect_sub_policy_outputs(sub_policies, num_magnitude_bins):
    return [[aug._map_mag_to_param(aug._get_magnitudes(num_magnitude_bins)[mag]) for aug, _, mag in sub]
            for sub in sub_policies]


@pytest.mark.parametrize("randomly_negate,dev,batch_size",
                         [(False, "cpu", 256), (False, "gpu", 512), (True, "cpu", 2000), (True, "gpu", 2000)])
def test_sub_policy(randomly_negate, dev, batch_size):
    """Every sample runs one whole sub-policy (all stages have probability 1), stages in
    order with their magnitudes, signs independent and uniform."""
    _device(dev)
    num_magnitude_bins = 10

    @augmentation(mag_range=(0, 9), mag_to_param=mag_to_param_with_op_id(1), param_device=dev)
    def first(data, op_id_mag_id):
        return fn.cat(data, op_id_mag_id)

    @augmentation(mag_range=(10, 19), mag_to_param=mag_to_param_with_op_id(2), randomly_negate=randomly_negate,
                  param_device=dev)
    def second(data, op_id_mag_id):
        return fn.cat(data, op_id_mag_id)

    @augmentation(mag_range=(20, 29), mag_to_param=mag_to_param_with_op_id(3), randomly_negate=randomly_negate,
                  param_device=dev)
    def third(data, op_id_mag_id):
        return fn.cat(data, op_id_mag_id)

    sub_policies = [
        [(first, 1, 0), (second, 1, 5), (third, 1, 3)],
        [(first, 1, 1), (third, 1, 4), (first, 1, 2)],
        [(second, 1, 2), (first, 1, 3), (third, 1, 4)],
        [(second, 1, 3), (third, 1, 2), (first, 1, 5)],
        [(third, 1, 4), (first, 1, 1), (second, 1, 1)],
        [(third, 1, 5), (second, 1, 9), (first, 1, 2)],
        [(first, 1, 6), (first, 1, 1)],
        [(third, 1, 7)],
        [(first, 1, 8), (first, 1, 4), (second, 1, 7), (second, 1, 6)],
    ]
    policy = Policy("MyPolicy", num_magnitude_bins=num_magnitude_bins, sub_policies=sub_policies)
    p = _concat_pipeline(dev, policy, batch_size)
    outputs = _collect_sub_policy_outputs(sub_policies, num_magnitude_bins)
    # The first stage's magnitude tells the sub-policy.
    assert len({out[0][1] for out in outputs}) == len(outputs)
    cases = {out[0][1]: np.array(out) for out in outputs}
    sign_cases = [list(itertools.product(*[(True, False) if aug.randomly_negate else (False,) for aug, _, _ in sub]))
                  for sub in sub_policies]
    for _ in range(5):
        (output,) = p.run()
        output = _samples(output)
        for sample in output:
            np.testing.assert_equal(np.abs(sample), cases[abs(sample[0][1])])
            for op_mag in sample:
                if op_mag[1] < 0:
                    assert op_mag[0] in (2, 3), sample
        if randomly_negate:
            counts = {out[0][1]: {case: 0 for case in signs} for out, signs in zip(outputs, sign_cases)}
            for sample in output:
                counts[abs(sample[0][1])][tuple(op_mag[1] < 0 for op_mag in sample)] += 1
            actual, expected = [], []
            for per_sub in counts.values():
                for count in per_sub.values():
                    actual.append(count)
                    expected.append(batch_size / (len(sub_policies) * len(per_sub)))
            assert chisquare(actual, expected).pvalue >= 0.01


@pytest.mark.parametrize("dev", DEVICES)
def test_op_skipping(dev):
    """Each stage runs with its probability, independently: the outputs' frequencies match."""
    _device(dev)
    num_magnitude_bins, batch_size = 20, 2400

    def aug(op_id, negate):
        @augmentation(mag_range=(0, 19), mag_to_param=mag_to_param_with_op_id(op_id), randomly_negate=negate,
                      param_device=dev)
        def op(data, op_id_mag_id):
            return fn.cat(data, op_id_mag_id)

        return op

    first, second, third = aug(1, True), aug(2, True), aug(3, False)
    first_stage_only, second_stage_only = aug(4, False), aug(5, False)
    sub_policies = [
        [(first, 0.5, 1), (first, 0.25, 2)],
        [(second, 0.8, 3), (second, 0.7, 4)],
        [(first, 0.9, 5), (second, 0.6, 6)],
        [(second, 0.3, 7), (first, 0.25, 8)],
        [(third, 1, 9), (third, 0.75, 10)],
        [(third, 0.3, 11), (first, 0.22, 12)],
        [(second, 0.6, 13), (third, 0, 14)],
        [(first_stage_only, 0.5, 15), (third, 0.7, 16)],
        [(third, 0.8, 17), (second_stage_only, 0.6, 18)],
    ]
    expected = {(): 0.0}
    n = len(sub_policies)
    for (left, lp, lm), (right, rp, rm) in sub_policies:
        expected[()] += (1 - lp) * (1 - rp) / n
        for aug_, mag, prob in ((left, lm, lp * (1 - rp) / n), (right, rm, (1 - lp) * rp / n)):
            if aug_.randomly_negate:
                expected[(mag,)] = prob / 2
                expected[(-mag,)] = prob / 2
            else:
                expected[(mag,)] = prob
        signs = list(itertools.product(*[(-1, 1) if x.randomly_negate else (1,) for x in (left, right)]))
        for ls, rs in signs:
            expected[(ls * lm, rs * rm)] = lp * rp / n / len(signs)
    expected = {k: v * batch_size for k, v in expected.items() if v > 0}
    assert all(v >= 5 for v in expected.values())
    with pytest.warns(UserWarning, match="probability 0"):
        policy = Policy("MyPolicy", num_magnitude_bins=num_magnitude_bins, sub_policies=sub_policies)
    p = _concat_pipeline(dev, policy, batch_size, seed=1234)
    for _ in range(5):
        (output,) = p.run()
        counts = {k: 0 for k in expected}
        for sample in _samples(output):
            counts[tuple(int(op_mag[1]) for op_mag in sample)] += 1
        assert chisquare([counts[k] for k in expected], [expected[k] for k in expected]).pvalue >= 0.01


def test_policy_presentation():
    empty = str(Policy("EmptyPolicy", num_magnitude_bins=31, sub_policies=[]))
    assert "sub_policies=[]" in empty and "augmentations={}" in empty

    def first_augment():
        @augmentation(mag_range=(100, 200))
        def clashing_name(data, _):
            return data

        return clashing_name

    def second_augment():
        @augmentation
        def clashing_name(data, _):
            return data

        return clashing_name

    one, another = first_augment(), second_augment()
    sub_policies = [[(one, 0.1, 5), (another, 0.4, None)], [(another, 0.2, None), (one, 0.5, 2)],
                    [(another, 0.7, None)]]
    policy = Policy(name="DummyPolicy", num_magnitude_bins=11, sub_policies=sub_policies)
    assert policy.sub_policies[0][0][0] is policy.sub_policies[1][1][0]
    assert policy.sub_policies[0][1][0] is policy.sub_policies[1][0][0]
    assert policy.sub_policies[0][1][0] is policy.sub_policies[2][0][0]
    assert policy.sub_policies[0][0][0].name == "0__clashing_name"
    assert policy.sub_policies[0][1][0].name == "1__clashing_name"
    for sub, pol_sub in zip(sub_policies, policy.sub_policies):
        assert [(p, m) for _, p, m in sub] == [(p, m) for _, p, m in pol_sub]
    assert "DummyPolicy" in repr(policy) and "'0__clashing_name'" in repr(policy)

    @augmentation
    def yet_another_aug(data, _):
        return data

    subs = [[(yet_another_aug, 0.5, None), (one.augmentation(mag_range=(0, i)), 0.24, i)] for i in range(1, 107)]
    bigger = Policy(name="BiggerPolicy", num_magnitude_bins=200, sub_policies=subs)
    for i, (first, second) in enumerate(bigger.sub_policies):
        assert first[0].name == "000__yet_another_aug"
        assert second[0].name == f"{i + 1:03}__clashing_name"


def _images_pipeline(root, body):
    @pipeline_def(enable_conditionals=True, batch_size=5, num_threads=2, device_id=None, seed=43)
    def pipe():
        encoded, _ = fn.readers.file(name="Reader", file_root=str(root))
        return body(fn.decoders.image(encoded))

    return pipe


def test_unused_arg_fail(small_images):
    body = lambda image: auto_augment.apply_auto_augment(auto_augment.get_image_net_policy(), image,  # noqa: E731
                                                         misspelled_kwarg=100)
    with pytest.raises(Exception, match="The kwarg `misspelled_kwarg` is not used by any of the augmentations."):
        _images_pipeline(small_images, body)()


def test_empty_policy_fail(small_images):
    body = lambda image: auto_augment.apply_auto_augment(Policy("ShouldFail", 9, []), image)  # noqa: E731
    msg = ("Cannot run empty policy. Got Policy(name='ShouldFail', num_magnitude_bins=9, sub_policies=[], "
           "augmentations={}) in `apply_auto_augment` call.")
    with pytest.raises(Exception) as e:
        _images_pipeline(small_images, body)()
    assert msg in str(e.value)


def test_missing_shape_fail(small_images):
    body = lambda image: auto_augment.apply_auto_augment(auto_augment.get_image_net_policy(use_shape=True), image)  # noqa
    with pytest.raises(Exception, match=r"`translate_y` .* provide it as `shape` argument to `apply_auto_augment` call"):
        _images_pipeline(small_images, body)()


def test_sub_policy_coalescing_matrix_correctness():
    @augmentation(mag_range=(0, 1), randomly_negate=True)
    def first(data, op_id_mag_id):
        return op_id_mag_id

    @augmentation(mag_range=(1, 2), randomly_negate=True)
    def second(data, op_id_mag_id):
        return op_id_mag_id

    @augmentation(mag_range=(2, 3))
    def third(data, op_id_mag_id):
        return op_id_mag_id

    def custom_policy():
        return Policy("MyCustomPolicy", 14, [
            [(third, 0.5, 1), (second, 1.0, 2), (first, 0.2, 3), (second, 0.25, 4)],
            [(first, 0.6, 5)],
            [(second, 0.1, 6), (third, 0.7, 7)],
            [(second, 0.8, 8), (first, 0.9, 9), (second, 1.0, 10), (third, 0.2, 11), (first, 0.5, 12),
             (first, 1.0, 13)],
        ])

    for getter in (auto_augment.get_image_net_policy, auto_augment.get_reduced_image_net_policy,
                   auto_augment.get_svhn_policy, auto_augment.get_reduced_cifar10_policy, custom_policy):
        policy = getter()
        matrix, augments = auto_augment._sub_policy_to_augmentation_matrix_map(policy)
        stages = max(len(sub) for sub in policy.sub_policies)
        assert matrix.shape == (len(policy.sub_policies), stages)
        for i, sub in enumerate(policy.sub_policies):
            for stage in range(stages):
                picked = augments[stage][matrix[i, stage]]
                assert picked is (sub[stage][0] if stage < len(sub) else a.identity)


def test_wrong_sub_policy_format_fail():
    with pytest.raises(Exception, match="The `num_magnitude_bins` must be a positive integer, got 0"):
        Policy("ShouldFail", 0.25, a.rotate)
    with pytest.raises(Exception, match="The `sub_policies` must be a list or tuple of sub policies"):
        Policy("ShouldFail", 9, a.rotate)
    with pytest.raises(Exception, match="Each sub policy must be a list or tuple"):
        Policy("ShouldFail", 9, [a.rotate])
    with pytest.raises(Exception, match=r"as a triple: \(augmentation, probability, magnitude\). Got Augmentation"):
        Policy("ShouldFail", 9, [(a.rotate, a.shear_x)])
    with pytest.raises(Exception, match="must be an instance of Augmentation. Got `0.5`"):
        Policy("ShouldFail", 9, [[(0.5, a.rotate, 3)]])
    with pytest.raises(Exception, match=r"Probability .* must be a number from `\[0, 1\]` range. Got `2`"):
        Policy("ShouldFail", 9, [[(a.rotate, 2, 2)]])
    with pytest.raises(Exception, match=r"Magnitude .* `\[0, 8\]` range. Got `-1`"):
        Policy("ShouldFail", 9, [[(a.rotate, 1, -1)]])

    @augmentation(mag_range=(0, 250))
    def parametrized_aug(data, magnitude):
        return data

    @augmentation
    def non_parametrized_aug(data, _):
        return data

    with pytest.raises(Exception, match="the magnitude bin is required"):
        Policy("ShouldFail", 7, [[(parametrized_aug, 0.5, None)]])
    with pytest.warns(UserWarning, match="probability 0 in one of the sub-policies"):
        Policy("ShouldFail", 7, [[(parametrized_aug, 0, 5)]])
    with pytest.warns(UserWarning, match="probability 0 in one of the sub-policies"):
        Policy("ShouldFail", 7, [[(parametrized_aug, 0.0, 5)]])
    with pytest.warns(UserWarning, match="The augmentation does not accept magnitudes"):
        Policy("ShouldFail", 7, [[(non_parametrized_aug, 1.0, 5)]])


def test_wrong_policy_name_and_shape_args(small_images):
    with pytest.raises(Exception, match="The `policy_name` must be a string that takes one of the values"):
        _images_pipeline(small_images, lambda image: auto_augment.auto_augment(image, "imagenet"))()
    with pytest.raises(Exception, match="The `max_translate_abs` argument must not be specified"):
        _images_pipeline(small_images, lambda image: auto_augment.auto_augment(
            image, "reduced_image_net", max_translate_abs=10))()
    with pytest.raises(Exception, match="`max_translate_rel` cannot be used without image shapes"):
        _images_pipeline(small_images, lambda image: auto_augment.auto_augment(image, max_translate_rel=0.5))()


# --------------------------------------------------------------------------- RandAugment
_RA_CASES = list(enumerate(itertools.product(("cpu", "gpu"), (True, False), (True, False), (None, 0), (True, False))))


@pytest.mark.parametrize("i,args", _RA_CASES)
def test_run_rand_aug(small_images, i, args):
    dev, uniformly_resized, use_shape, fill_value, bounds = args
    _device(dev)
    batch_size = [1, 8, 7, 13, 3, 6, 5][i % 7]
    n, m = [1, 2, 3][i % 3], [0, 12, 15, 30][i % 4]
    make = _image_pipeline(small_images, dev, batch_size, uniformly_resized, use_shape, fill_value, bounds,
                           lambda image, **kw: rand_augment.rand_augment(image, n=n, m=m, **kw))
    p1, p2 = make(), make()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)


@pytest.mark.parametrize("i,args", list(enumerate([
    ("cpu", 4, False, 2, 8, True), ("cpu", 2, True, 2, 10, False), ("gpu", 7, False, 3, 5, True),
    ("gpu", 1, True, 1, 7, True)])))
def test_rand_aug_video(videos, i, args):
    dev, batch_size, use_shape, n, m, monotonic_mag = args
    _device(dev)

    @pipeline_def(batch_size=batch_size, device_id=0 if dev == "gpu" else None, num_threads=2, seed=42,
                  enable_conditionals=True)
    def pipe():
        rng = random.Random(42 + i)
        video = fn.external_source(source=lambda: list(rng.choices(videos, k=batch_size)), batch=True, layout="FHWC")
        extra = {"shape": video.shape()[1:]} if use_shape else {}
        if dev == "gpu":
            video = video.gpu()
        return rand_augment.rand_augment(video, n=n, m=m, monotonic_mag=monotonic_mag, **extra)

    p1, p2 = pipe(), pipe()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)


def _op_with_id(dev):
    @augmentation(param_device=dev)
    def op(data, op_id_mag_id):
        return fn.cat(data, op_id_mag_id)

    return op


@pytest.mark.parametrize("case_idx,args", list(enumerate(itertools.product(("cpu", "gpu"), (True, False), (1, 2, 3),
                                                                              (2, 3)))))
def test_rand_aug_ops_selection_and_mags(case_idx, args):
    """n operations per sample, each uniform over the list (repeats allowed), at bin m,
    signs uniform and independent."""
    dev, use_sign, n, num_ops = args
    _device(dev)
    num_magnitude_bins, batch_size = 9, 2048
    m = case_idx % num_magnitude_bins
    op = _op_with_id(dev)
    augmentations = [op.augmentation(mag_range=(10 * i + 1, 10 * i + num_magnitude_bins),
                                     mag_to_param=mag_to_param_with_op_id(i + 1),
                                     randomly_negate=use_sign and i % 3 == 0) for i in range(num_ops)]
    expected = {}
    for seq in itertools.product(*([augmentations] * n)):
        signs = tuple(itertools.product(*[(-1, 1) if x.randomly_negate else (1,) for x in seq]))
        for sign in signs:
            out = [x.mag_to_param(x._get_magnitudes(num_magnitude_bins)[m] * s) for x, s in zip(seq, sign)]
            expected[tuple(el for o in out for el in o)] = batch_size / num_ops ** n / len(signs)

    @pipeline_def(enable_conditionals=True, batch_size=batch_size, num_threads=2,
                  device_id=0 if dev == "gpu" else None, seed=42)
    def pipe():
        data = types.Constant([], dtype=types.INT32)
        if dev == "gpu":
            data = data.gpu()
        data = rand_augment.apply_rand_augment(augmentations, data, n=n, m=m, num_magnitude_bins=num_magnitude_bins)
        return fn.reshape(data, shape=(-1, 2))

    p = pipe()
    for _ in range(3):
        (output,) = p.run()
        counts = {k: 0 for k in expected}
        for sample in _samples(output):
            assert len(sample) == n
            counts[tuple(el for op_mag in sample for el in op_mag)] += 1
        assert chisquare([counts[k] for k in expected], [expected[k] for k in expected]).pvalue >= 0.01


def _const_pipeline(body):
    @pipeline_def(batch_size=4, device_id=None, num_threads=2, seed=42, enable_conditionals=True)
    def pipe():
        return body(types.Constant(np.array([[[]]], dtype=np.uint8)))

    return pipe


def test_rand_aug_wrong_params_fail():
    def call(**kw):
        return _const_pipeline(lambda data: rand_augment.rand_augment(data, **kw))()

    with pytest.raises(Exception, match="The number of operations to apply `n` must be a non-negative integer"):
        call(n=None, m=1, num_magnitude_bins=11)
    with pytest.raises(Exception, match="The `num_magnitude_bins` must be a positive integer, got"):
        call(n=1, m=1, num_magnitude_bins=None)
    with pytest.raises(Exception, match=r"`m` must be an integer from `\[0, 14\]` range. Got 15."):
        call(n=1, m=15, num_magnitude_bins=15)
    with pytest.raises(Exception, match="The `augmentations` list cannot be empty"):
        _const_pipeline(lambda data: rand_augment.apply_rand_augment([], data, 1, 20))()
    with pytest.raises(Exception, match="The augmentation `translate_x` requires `shape` argument"):
        _const_pipeline(lambda data: rand_augment.apply_rand_augment(
            rand_augment.get_rand_augment_suite(use_shape=True), data, 1, 20))()
    with pytest.raises(Exception, match="The kwarg `shhape` is not used by any of the"):
        _const_pipeline(lambda data: rand_augment.apply_rand_augment(
            rand_augment.get_rand_augment_suite(use_shape=True), data, 1, 20, shhape=42))()
    with pytest.raises(Exception, match="The `rotatee` was specified in `excluded`"):
        call(n=1, m=1, excluded=["rotatee"])
    with pytest.warns(Warning, match="called with `n=0`"):
        _const_pipeline(lambda data: rand_augment.rand_augment(data, n=0, m=1))()


def test_rand_aug_one_augmentation():
    """With one augmentation, every sample goes through it n times at bin m (and a suite
    keyword none of the given augmentations takes is an error, as in DALI)."""
    posterize = [x for x in rand_augment.get_rand_augment_suite() if x.name == "posterize"]
    img = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    with pytest.raises(Exception, match="The kwargs `fill_value, interp_type` are not used"):
        _const_pipeline(lambda data: rand_augment.rand_augment(
            data, n=1, m=1, excluded=[x.name for x in rand_augment.get_rand_augment_suite() if x.name != "posterize"]))()

    @pipeline_def(batch_size=6, device_id=None, num_threads=2, seed=3, enable_conditionals=True)
    def pipe():
        data = types.Constant(img, layout="HWC")
        return rand_augment.apply_rand_augment(posterize, data, n=2, m=5)

    (out,) = pipe().run()
    mask = a.poster_mask_uint8(np.linspace(8, 4, 31, dtype=np.float32)[5])
    for s in _samples(out):
        np.testing.assert_array_equal(s, img & mask)


# --------------------------------------------------------------------------- TrivialAugment
@pytest.mark.parametrize("i,args", list(enumerate(itertools.product(("cpu", "gpu"), (True, False), (True, False),
                                                                     (None, 0), (True, False)))))
def test_run_trivial(small_images, i, args):
    dev, uniformly_resized, use_shape, fill_value, bounds = args
    _device(dev)
    batch_size = [1, 8, 7, 13, 3, 6, 5][i % 7]
    num_magnitude_bins = [None, 11, 31, 40][i % 4]
    extra_bins = {} if num_magnitude_bins is None else {"num_magnitude_bins": num_magnitude_bins}
    make = _image_pipeline(small_images, dev, batch_size, uniformly_resized, use_shape, fill_value, bounds,
                           lambda image, **kw: trivial_augment.trivial_augment_wide(image, **kw, **extra_bins))
    p1, p2 = make(), make()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)


@pytest.mark.parametrize("i,args", list(enumerate([("cpu", 4, False, 2), ("cpu", 3, True, None),
                                                   ("gpu", 7, False, 11), ("gpu", 2, True, 31)])))
def test_trivial_video(videos, i, args):
    dev, batch_size, use_shape, num_magnitude_bins = args
    _device(dev)

    @pipeline_def(batch_size=batch_size, device_id=0 if dev == "gpu" else None, num_threads=2, seed=205,
                  enable_conditionals=True)
    def pipe():
        rng = random.Random(42 + i)
        video = fn.external_source(source=lambda: list(rng.choices(videos, k=batch_size)), batch=True, layout="FHWC")
        extra = {"shape": video.shape()[1:]} if use_shape else {}
        if num_magnitude_bins is not None:
            extra["num_magnitude_bins"] = num_magnitude_bins
        if dev == "gpu":
            video = video.gpu()
        return trivial_augment.trivial_augment_wide(video, **extra)

    p1, p2 = pipe(), pipe()
    for _ in range(3):
        (o1,), (o2,) = p1.run(), p2.run()
        _check_same(o1, o2)


@pytest.mark.parametrize("dev,use_sign,num_magnitude_bins,num_ops",
                         list(itertools.product(("cpu", "gpu"), (True, False), (1, 3, 7), (2, 3, 7))))
def test_trivial_ops_mags_selection(dev, use_sign, num_magnitude_bins, num_ops):
    """One operation per sample, uniform over the list, at a uniform bin, signs uniform."""
    _device(dev)
    batch_size = 2048
    op = _op_with_id(dev)
    augmentations = [op.augmentation(mag_range=(10 * i + 1, 10 * i + num_magnitude_bins),
                                     mag_to_param=mag_to_param_with_op_id(i + 1),
                                     randomly_negate=use_sign and i % 3 == 0) for i in range(num_ops)]
    expected = {}
    prob = 1.0 / (num_ops * num_magnitude_bins)
    for x in augmentations:
        for mag in x._get_magnitudes(num_magnitude_bins):
            if x.randomly_negate:
                expected[tuple(x.mag_to_param(mag))] = prob / 2
                expected[tuple(x.mag_to_param(-mag))] = prob / 2
            else:
                expected[tuple(x.mag_to_param(mag))] = prob
    expected = {k: v * batch_size for k, v in expected.items()}

    @pipeline_def(enable_conditionals=True, batch_size=batch_size, num_threads=2,
                  device_id=0 if dev == "gpu" else None, seed=42)
    def pipe():
        data = types.Constant([], dtype=types.INT32)
        if dev == "gpu":
            data = data.gpu()
        return trivial_augment.apply_trivial_augment(augmentations, data, num_magnitude_bins=num_magnitude_bins)

    p = pipe()
    pvalues = []
    for _ in range(3):
        (output,) = p.run()
        counts = {k: 0 for k in expected}
        for sample in _samples(output):
            counts[tuple(sample)] += 1
        pvalues.append(chisquare([counts[k] for k in expected], [expected[k] for k in expected]).pvalue)
    assert np.mean(pvalues) >= 0.01, pvalues


def test_trivial_wrong_params_fail():
    with pytest.raises(Exception, match="The `num_magnitude_bins` must be a positive integer, got 0"):
        _const_pipeline(lambda data: trivial_augment.trivial_augment_wide(data, num_magnitude_bins=0))()
    with pytest.raises(Exception, match="The `augmentations` list cannot be empty"):
        _const_pipeline(lambda data: trivial_augment.apply_trivial_augment([], data))()
    with pytest.raises(Exception, match="The `shear` was specified in `excluded`"):
        _const_pipeline(lambda data: trivial_augment.trivial_augment_wide(data, excluded=["shear"]))()
