"""DALI's sequence test suites, ported to Sluice: the cases DALI's operator tests give to
sequences_test_utils (tests/sequences_test_utils.py here), each checking that the operator on
a batch of sequences, with per-frame arguments through fn.per_frame, gives the frames the same
operator gives on the unfolded batch of frames with per-sample arguments. Every cpu case runs
against Sluice and, where DALI 2.4 (CPU) is installed, against DALI as well: DALI passing
checks the port, and a case that DALI passes but Sluice does not is marked
xfail(strict=True) by one of XFAIL_RULES, which says how Sluice differs.

Input: synthetic sequences (uint8 random frames of 24x32 and 30x40 pixels, batches of at most
4 sequences of at most 6 frames, and the three input cases of DALI's get_video_input_cases:
uniform batches, batches of varying size mixing both frame sizes, and varying frame counts) in
place of DALI's clips of DALI_extra's sintel trailer (384x216 and 512x288, batches of 8 of 16
frames), which is not available here.

Ported (case lists and ArgCb callbacks as DALI has them: operators, fixed arguments, which
arguments are per frame):
- operator_1/test_color_twist.py, test_video: hue, saturation, hsv (2 cases), color_twist
  (2 cases); FHWC input (test_channel_first=False, as in DALI).
- operator_1/test_brightness_contrast.py, test_video: brightness (2), contrast (3),
  brightness_contrast (2); FHWC input.
- operator_1/test_gaussian_blur.py, test_per_frame: the 6 cases, on FHWC, FCHW and CFHW inputs
  (expand_channels=True: the channel extent of channel-first inputs is unfolded too).
- operator_1/test_laplacian.py, test_per_frame: the 6 cases, inputs as for gaussian_blur.
- operator_2/test_warp.py, test_video: the 9 cases (fixed matrix; matrix per sample, per frame;
  with an output size; matrix as the second input per frame / per sample, on the cpu and, in
  2 gpu-only cases, copied to the gpu). Added, not in DALI: the fixed matrix as a list of 6
  numbers ("matrix_list"), since Sluice rejects DALI's 2x3 numpy array.
- operator_2/test_rotate.py, test_video: the 6 cases, with RotatePerFrameParamsProvider (the
  baseline gets the size DALI gives a whole sequence: the largest frame extents, parity by
  majority) and get_output_size. The larger frames keep an odd height (29; DALI: 287) and
  random_output's sizes are scaled to the frames (20-40; DALI: 300-400).
- operator_2/test_rotate.py, test_3d_sequence: the 3 cases on FDHWC volumes (4-10 voxels a
  side, at most 4 frames; DALI: 10-50 and 32), get_3d_output_size, and a fixed size scaled
  to them ((10, 6, 4); DALI: (50, 30, 20)).
- operator_1/test_coord_transform.py, test_sequences: the 6 M/T/MT cases on F** point sets,
  and the 2 cases broadcasting per-sample points over the frames of a per-frame MT (points on
  the cpu; points copied to the gpu). Batches of at most 7 sequences of at most 9 frames
  (DALI: 65 of 51).
- operator_1/test_affine_transforms.py, test_sequences: the 13 cases on F** matrix inputs, and
  the 16 derived ones with a per-sample matrix input or no positional input (the frames then
  come from the first per-frame argument). Batches of at most 5 sequences of at most 9 frames
  (DALI: 13 of 51). DALI's TransformsParamsProvider maps the unfolded layout "**" to "" (what
  an older DALI gave matrices of images); DALI 2.4, like Sluice, gives "**", so the layouts are
  compared as they come.

Changes throughout: the callbacks draw from SampleDesc.rng (each case has its own) where
DALI's sometimes draw from an enclosing random.Random or numpy Generator (warp's
random_translate_mx, rotate's random_output, coord_transform's and affine_transforms' m, t, mt,
scale, shift, ...), so a case's data does not depend on the cases run before it; the video cases run
one iteration per input batch (2 or 4; DALI: always 4, cycling over the batches). GPU variants (DALI's default devices ["cpu", "gpu"]) are in
test_sequence_suite_gpu, run on Sluice only (DALI here is the CPU build) and skipped without a
GPU; they were not run when this file was written (no GPU), and the xfail rules apply to them
as to the cpu cases.

Not ported:
- DALI's video input (fn.readers.video_resize over DALI_extra's sintel_trailer-720p.mp4): the
  file is not available here; synthetic sequences stand in (the check compares an operator
  with itself, so it does not depend on the pixels).
- operator_1/test_affine_transforms.py, test_combine_shape_mismatch and
  test_rotate_shape_mismatch: error tests outside the sequence machinery, ported in
  tests/test_per_frame_args.py. operator_1/test_gaussian_blur.py's
  test_fail_per_frame_no_frames is ported below, outside the machinery too.

Also here: test_check_detects_wrong_frame_values (the check fails when each frame gets the
values of the next), test_suites_are_complete (the case counts of each suite) and
test_xfail_rules_mark_cases (no stale rule).
"""
import math
import random

import numpy as np
import pytest

from conftest import dali_or_none, require_gpu
from sequences_test_utils import (
    ArgCb,
    ArgData,
    ArgDesc,
    ParamsProvider,
    SampleDesc,
    get_library,
    get_video_input_cases,
    lazy_fn as fn,
    lazy_types as types,
    sequence_suite_helper,
    video_suite_helper,
)

HAS_DALI = dali_or_none() is not None


# --------------------------------------------------------------------------- color_twist
def color_twist_cases():
    def hue(sample_desc):
        return np.float32(360 * sample_desc.rng.random())

    def saturation(sample_desc):
        return np.float32(sample_desc.rng.random())

    def value(sample_desc):
        return np.float32(sample_desc.rng.random())

    def contrast(sample_desc):
        return np.float32(2 * sample_desc.rng.random())

    def brightness(sample_desc):
        return np.float32(2 * sample_desc.rng.random())

    video_test_cases = [
        (fn.hue, {}, [ArgCb("hue", hue, True)]),
        (fn.saturation, {}, [ArgCb("saturation", saturation, True)]),
        (fn.hsv, {}, [ArgCb("hue", hue, True), ArgCb("saturation", saturation, True), ArgCb("value", value, True)]),
        (fn.hsv, {}, [ArgCb("hue", hue, False), ArgCb("saturation", saturation, True), ArgCb("value", value, False)]),
        (
            fn.color_twist,
            {},
            [
                ArgCb("brightness", brightness, True),
                ArgCb("hue", hue, True),
                ArgCb("saturation", saturation, True),
                ArgCb("contrast", contrast, True),
            ],
        ),
        (fn.color_twist, {}, [ArgCb("brightness", brightness, True), ArgCb("hue", hue, False)]),
    ]
    return video_suite_helper(video_test_cases, test_channel_first=False, rng=random.Random(1))


# --------------------------------------------------------------------------- brightness_contrast
def brightness_contrast_cases():
    def brightness(sample_desc):
        return np.float32(2 * sample_desc.rng.random())

    def brightness_shift(sample_desc):
        return np.float32(sample_desc.rng.random())

    def contrast(sample_desc):
        return np.float32(2 * sample_desc.rng.random())

    def contrast_center(sample_desc):
        return np.float32(sample_desc.rng.random())

    video_test_cases = [
        (fn.brightness, {"dtype": types.INT32}, [ArgCb("brightness", brightness, True)]),
        (fn.brightness, {"dtype": types.UINT8}, [ArgCb("brightness_shift", brightness_shift, True), ArgCb("brightness", brightness, False)]),
        (fn.contrast, {"dtype": types.FLOAT}, [ArgCb("contrast", contrast, True)]),
        (fn.contrast, {"dtype": types.FLOAT}, [ArgCb("contrast", contrast, True), ArgCb("contrast_center", contrast_center, False)]),
        (fn.contrast, {"dtype": types.UINT8}, [ArgCb("contrast_center", contrast_center, True)]),
        (
            fn.brightness_contrast,
            {"dtype": types.UINT8},
            [ArgCb("contrast", contrast, False), ArgCb("contrast_center", contrast_center, True), ArgCb("brightness", brightness, True)],
        ),
        (
            fn.brightness_contrast,
            {},
            [
                ArgCb("brightness", brightness, True),
                ArgCb("brightness_shift", brightness_shift, True),
                ArgCb("contrast", contrast, True),
                ArgCb("contrast_center", contrast_center, True),
            ],
        ),
    ]
    return video_suite_helper(video_test_cases, test_channel_first=False, rng=random.Random(2))


# --------------------------------------------------------------------------- gaussian_blur
def gaussian_blur_cases():
    def window_size(sample_desc):
        return np.array(2 * sample_desc.rng.randint(1, 15) + 1, dtype=np.int32)

    def per_axis_window_size(sample_desc):
        return np.array([window_size(sample_desc) for _ in range(2)])

    def sigma(sample_desc):
        return np.array((sample_desc.rng.random() + 1) * 3.0, dtype=np.float32)

    def per_axis_sigma(sample_desc):
        return np.array([sigma(sample_desc) for _ in range(2)])

    video_test_cases = [
        (fn.gaussian_blur, {"window_size": 3}, []),
        (fn.gaussian_blur, {}, [ArgCb("window_size", window_size, True)]),
        (fn.gaussian_blur, {}, [ArgCb("window_size", per_axis_window_size, True)]),
        (fn.gaussian_blur, {}, [ArgCb("sigma", sigma, True)]),
        (fn.gaussian_blur, {}, [ArgCb("window_size", per_axis_window_size, True), ArgCb("sigma", per_axis_sigma, True)]),
        (
            fn.gaussian_blur,
            {"dtype": types.FLOAT},
            [ArgCb("window_size", per_axis_window_size, False), ArgCb("sigma", per_axis_sigma, True)],
        ),
    ]
    return video_suite_helper(video_test_cases, expand_channels=True, rng=random.Random(3))


# --------------------------------------------------------------------------- laplacian
def laplacian_cases():
    def window_size(sample_desc):
        return np.array(2 * sample_desc.rng.randint(1, 15) + 1, dtype=np.int32)

    def per_axis_window_size(sample_desc):
        return np.array([window_size(sample_desc) for _ in range(2)])

    def per_axis_smoothing_size(sample_desc):
        return np.array([2 * sample_desc.rng.randint(0, 15) + 1 for _ in range(2)], dtype=np.int32)

    def per_axis_scale(sample_desc):
        def scale(sample_desc):
            k = 2 * sample_desc.rng.randint(0, 15) + 1
            return np.array(2.0**-k, dtype=np.float32)

        return np.array([scale(sample_desc) for _ in range(2)])

    video_test_cases = [
        (fn.laplacian, {}, []),
        (fn.laplacian, {}, [ArgCb("window_size", window_size, True)]),
        (fn.laplacian, {}, [ArgCb("window_size", per_axis_window_size, True)]),
        (fn.laplacian, {"dtype": types.FLOAT}, [ArgCb("scale", per_axis_scale, True)]),
        (fn.laplacian, {}, [ArgCb("window_size", per_axis_window_size, True), ArgCb("smoothing_size", per_axis_smoothing_size, True)]),
        (
            fn.laplacian,
            {},
            [
                ArgCb("window_size", per_axis_window_size, True),
                ArgCb("smoothing_size", per_axis_smoothing_size, True),
                ArgCb("scale", per_axis_scale, True),
            ],
        ),
    ]
    return video_suite_helper(video_test_cases, expand_channels=True, rng=random.Random(4))


# --------------------------------------------------------------------------- warp_affine
def warp_cases():
    rng = random.Random(42)

    def random_flip_mx(sample_desc):
        x, y = sample_desc.rng.choice([(-1, -1), (1, -1), (-1, 1)])
        _, h, w, _ = sample_desc.sample.shape  # FHWC
        return np.array([[x, 0, 0 if x == 1 else w], [0, y, 0 if y == 1 else h], [0, 0, 1]], dtype=np.float32)

    def random_translate_mx(sample_desc):
        _, h, w, _ = sample_desc.sample.shape  # FHWC
        return np.array(
            [[1, 0, sample_desc.rng.uniform(-w / 2, w / 2)], [0, 1, sample_desc.rng.uniform(-h / 2, h / 2)], [0, 0, 1]],
            dtype=np.float32,
        )

    def random_scale_mx(sample_desc):
        def rand_scale():
            return sample_desc.rng.uniform(0.25, 4)

        return np.array([[rand_scale(), 0, 0], [0, rand_scale(), 0], [0, 0, 1]], dtype=np.float32)

    def random_rotate_mx(sample_desc):
        angle = math.radians(sample_desc.rng.uniform(-90, 90))
        c, s = np.cos(angle), np.sin(angle)
        return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float32)

    def random_mx(sample_desc):
        m = np.eye(3, dtype=np.float32)
        for transformation in [random_flip_mx, random_translate_mx, random_scale_mx, random_rotate_mx]:
            if sample_desc.rng.choice([0, 1]):
                m = np.matmul(m, transformation(sample_desc))
        return m[0:2, :]

    def output_size(sample_desc):
        _, h, w, _ = sample_desc.sample.shape  # FHWC
        return np.array([h * sample_desc.rng.uniform(0.5, 2), w * sample_desc.rng.uniform(0.5, 2)], dtype=np.float32)

    fixed_matrix = random_rotate_mx(SampleDesc(rng, 0, 0, 0, None))[0:2, :]
    video_test_cases = [
        (fn.warp_affine, {"matrix": fixed_matrix}, []),
        # Not in DALI: the same matrix as a list of its 6 values (Sluice does not take the
        # 2-D array).
        (fn.warp_affine, {"matrix": fixed_matrix.flatten().tolist()}, [], ["cpu", "gpu"], "matrix_list"),
        (fn.warp_affine, {}, [ArgCb("matrix", random_mx, False)]),
        (fn.warp_affine, {}, [ArgCb("matrix", random_mx, True)]),
        (fn.warp_affine, {}, [ArgCb("matrix", random_mx, False), ArgCb("size", output_size, False)]),
        (fn.warp_affine, {}, [ArgCb("matrix", random_mx, True), ArgCb("size", output_size, False)]),
        (fn.warp_affine, {}, [ArgCb(1, random_mx, True, dest_device="cpu")]),
        (fn.warp_affine, {}, [ArgCb(1, random_mx, True, dest_device="gpu")], ["gpu"]),
        (fn.warp_affine, {}, [ArgCb(1, random_mx, False, dest_device="cpu")]),
        (fn.warp_affine, {}, [ArgCb(1, random_mx, False, dest_device="gpu")], ["gpu"]),
    ]
    return video_suite_helper(video_test_cases, test_channel_first=False, expand_channels=False, rng=rng)


# --------------------------------------------------------------------------- rotate
def get_output_size(angle, input_size, parity_correction=True):
    """DALI's test_rotate.get_output_size: the extents (h, w) of an image of `input_size`
    rotated by `angle` radians; with `parity_correction`, each of the parity of the input
    extent it mostly comes from."""
    cosa, sina = abs(math.cos(angle)), abs(math.sin(angle))
    h, w = input_size[0:2]
    eps = 1e-2
    out_w = int(math.ceil(w * cosa + h * sina - eps))
    out_h = int(math.ceil(h * cosa + w * sina - eps))
    if not parity_correction:
        return (out_h, out_w)
    src_w, src_h = (w, h) if sina <= cosa else (h, w)
    if out_w % 2 != src_w % 2:
        out_w += 1
    if out_h % 2 != src_h % 2:
        out_h += 1
    return (out_h, out_w)


def get_3d_lin_rotation(angle, axis):
    """DALI's test_rotate.get_3d_lin_rotation: the 3x3 rotation by `angle` radians about
    `axis` (x, y, z), as DALI's transform.h rotation3D."""
    if not angle:
        return np.eye(3, dtype=np.float32)
    u, v, w = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    c, s = math.cos(angle), math.sin(angle)
    return np.array(
        [
            [u * u + (v * v + w * w) * c, u * v * (1 - c) - w * s, u * w * (1 - c) + v * s],
            [u * v * (1 - c) + w * s, v * v + (u * u + w * w) * c, v * w * (1 - c) - u * s],
            [u * w * (1 - c) - v * s, v * w * (1 - c) + u * s, w * w + (u * u + v * v) * c],
        ],
        dtype=np.float32,
    )


def get_3d_output_size(angle, axis, input_size, parity_correction=False):
    """DALI's test_rotate.get_3d_output_size: the extents (d, h, w) of a volume of
    `input_size` (d, h, w, ...) rotated by `angle` radians about `axis`."""
    transform = np.abs(get_3d_lin_rotation(angle, axis))
    in_size = np.array(input_size[2::-1], dtype=np.int32)  # (w, h, d)
    out_size = np.int32(np.ceil(np.matmul(transform, in_size) - 1e-2))
    if parity_correction:
        dominant_axis = np.argmax(transform, axis=1)
        out_size += (out_size % 2) ^ (in_size[dominant_axis] % 2)
    return out_size[::-1]


def infer_sequence_size(input_shapes, angles, axes=None):
    """The canvas DALI gives a sequence rotated by per-frame angles (and axes, for volumes):
    the largest extents of the frames (without parity correction), each made odd or even as
    most frames' would be."""
    assert len(input_shapes) == len(angles) and (axes is None or len(axes) == len(angles))
    if axes is None:
        plain = [get_output_size(math.radians(a), s, False) for s, a in zip(input_shapes, angles)]
        corrected = [get_output_size(math.radians(a), s, True) for s, a in zip(input_shapes, angles)]
    else:
        plain = [get_3d_output_size(math.radians(a), x, s, False) for s, a, x in zip(input_shapes, angles, axes)]
        corrected = [get_3d_output_size(math.radians(a), x, s, True) for s, a, x in zip(input_shapes, angles, axes)]
    max_shape = np.max(np.array(plain, dtype=np.int32), axis=0)
    odd = np.sum(np.array(corrected, dtype=np.int32) % 2, axis=0)
    for i in range(len(max_shape)):
        if max_shape[i] % 2 != (2 * odd[i] > len(input_shapes)):
            max_shape[i] += 1
    return max_shape


def sequence_batch_output_size(unfolded_extents, input_batch, angle_batch, axis_batch=None):
    """For each frame of the unfolded batch, the size of its sequence's canvas."""
    assert sum(unfolded_extents) == len(input_batch) == len(angle_batch)
    assert axis_batch is None or len(axis_batch) == len(angle_batch)
    sizes, offset = [], 0
    for n in unfolded_extents:
        group = slice(offset, offset + n)
        axes = None if axis_batch is None else axis_batch[group]
        size = infer_sequence_size([f.shape for f in input_batch[group]], angle_batch[group], axes)
        sizes.extend(size for _ in range(n))
        offset += n
    return sizes


class RotatePerFrameParamsProvider(ParamsProvider):
    """Per-frame angles (and axes) for rotate on sequences: the baseline on the unfolded frames
    also gets the `size` of each frame's sequence, since rotate gives all frames of a sequence
    one canvas."""

    def expand_params(self):
        assert self.input_data.desc.expandable_prefix == "F"
        expanded = super().expand_params()
        by_name = {p.desc.name: p for p in expanded}
        angles, axes = by_name.get("angle"), by_name.get("axis")
        assert angles is not None and "size" not in self.fixed_params and "size" not in by_name
        extents = [[s.shape[0] for s in batch] for batch in self.input_data.data]
        columns = [extents, self.unfolded_input.data, angles.data] + ([axes.data] if axes is not None else [])
        sizes = [sequence_batch_output_size(*batch_args) for batch_args in zip(*columns)]
        expanded.append(ArgData(ArgDesc("size", "", "cpu"), sizes))
        return expanded


def rotate_cases():
    def small_angle(sample_desc):
        return np.array(sample_desc.rng.uniform(-44.0, 44.0), dtype=np.float32)

    def random_angle(sample_desc):
        return np.array(sample_desc.rng.uniform(-180.0, 180.0), dtype=np.float32)

    def random_output(sample_desc):
        return np.array([sample_desc.rng.randint(20, 40), sample_desc.rng.randint(20, 40)])

    video_test_cases = [
        (fn.rotate, {"angle": 45.0}, []),
        (fn.rotate, {}, [ArgCb("angle", small_angle, False)]),
        (fn.rotate, {}, [ArgCb("angle", random_angle, False)]),
        (fn.rotate, {}, RotatePerFrameParamsProvider([ArgCb("angle", small_angle, True)])),
        (fn.rotate, {}, RotatePerFrameParamsProvider([ArgCb("angle", random_angle, True)])),
        (fn.rotate, {}, [ArgCb("angle", small_angle, True), ArgCb("size", random_output, False)]),
    ]
    rng = random.Random(42)
    video_cases = get_video_input_cases("FHWC", rng, larger_shape=(40, 29))
    input_cases = [ArgData(ArgDesc(0, "F", "", "FHWC"), data) for data in video_cases]
    return sequence_suite_helper(rng, input_cases, video_test_cases)


def rotate_3d_cases():
    rng = random.Random(42)
    num_batches = 4
    max_batch_size = 3
    max_frames_num = 4
    input_layout = "FDHWC"
    np_rng = np.random.default_rng(42)

    def get_random_sample():
        num_frames = rng.randint(1, max_frames_num)
        d, h, w = tuple(rng.randint(4, 10) for _ in range(3))
        return np.int32(np_rng.uniform(0, 255, (num_frames, d, h, w, 3)))

    def get_random_batch():
        return [get_random_sample() for _ in range(rng.randint(1, max_batch_size))]

    input_cases = [ArgData(desc=ArgDesc(0, "F", "", input_layout), data=[get_random_batch() for _ in range(num_batches)])]

    def random_angle(sample_desc):
        return np.array(sample_desc.rng.uniform(-180.0, 180.0), dtype=np.float32)

    def random_axis(sample_desc):
        return np.array([sample_desc.rng.uniform(-1, 1) for _ in range(3)], dtype=np.float32)

    test_cases = [
        (fn.rotate, {"angle": 45.0, "axis": np.array([1, 0, 0], dtype=np.float32)}, []),
        (fn.rotate, {"size": (10, 6, 4)}, [ArgCb("angle", random_angle, True), ArgCb("axis", random_axis, True)]),
        (fn.rotate, {}, RotatePerFrameParamsProvider([ArgCb("angle", random_angle, True), ArgCb("axis", random_axis, True)])),
    ]
    return sequence_suite_helper(rng, input_cases, test_cases)


# --------------------------------------------------------------------------- coord_transform
def coord_transform_cases():
    rng = random.Random(42)
    max_batch_size = 6
    max_num_frames = 8
    num_points = 30
    num_iters = 4

    def np_rng(sample_desc):
        return np.random.default_rng(sample_desc.rng.getrandbits(64))

    def points(sample_desc):
        return np.float32(np_rng(sample_desc).uniform(-100, 250, (num_points, 2)))

    def rand_range(limit):
        return range(rng.randint(1, limit) + 1)

    def m(sample_desc):
        r = np_rng(sample_desc)
        angles = r.uniform(-np.pi, np.pi, 2)
        scales = r.uniform(0, 5, 2)
        c = np.cos(angles[0])
        s = np.sin(angles[1])
        return np.array([[c * scales[0], -s], [s, c * scales[1]]], dtype=np.float32)

    def t(sample_desc):
        return np.float32(np_rng(sample_desc).uniform(-100, 250, 2))

    def mt(sample_desc):
        return np.append(m(sample_desc), t(sample_desc).reshape(-1, 1), axis=1)

    data_desc = SampleDesc(rng, None, 0, 0, None)
    cases = [
        (fn.coord_transform, {}, [ArgCb("M", m, True)]),
        (fn.coord_transform, {}, [ArgCb("T", t, True)]),
        (fn.coord_transform, {}, [ArgCb("MT", mt, True)]),
        (fn.coord_transform, {}, [ArgCb("MT", mt, False)]),
        (fn.coord_transform, {}, [ArgCb("M", m, True), ArgCb("T", t, True)]),
        (fn.coord_transform, {}, [ArgCb("M", m, False), ArgCb("T", t, True)]),
    ]
    input_seq_data = [
        [np.array([points(data_desc) for _ in rand_range(max_num_frames)], dtype=np.float32) for _ in rand_range(max_batch_size)]
        for _ in range(num_iters)
    ]
    main_input = ArgData(desc=ArgDesc(0, "F", "", "F**"), data=input_seq_data)
    out = sequence_suite_helper(rng, [main_input], cases, num_iters)

    broadcast_cases = [
        (fn.coord_transform, {}, [ArgCb(0, points, False, "cpu")], ["cpu"]),
        # The points on the gpu (the main input, MT, is an argument and stays on the cpu).
        (fn.coord_transform, {}, [ArgCb(0, points, False, "gpu")], ["cpu"]),
    ]
    input_mt_data = [
        [np.array([mt(data_desc) for _ in rand_range(max_num_frames)], dtype=np.float32) for _ in rand_range(max_batch_size)]
        for _ in range(num_iters)
    ]
    main_input = ArgData(desc=ArgDesc("MT", "F", "", "F**"), data=input_mt_data)
    return out + sequence_suite_helper(rng, [main_input], broadcast_cases, num_iters)


# --------------------------------------------------------------------------- transforms
class TransformsParamsProvider(ParamsProvider):
    """DALI's version maps the unfolded layout `**` of the sequences' matrices (`F**`) to ""
    (the layout an older DALI gave matrices of images); DALI 2.4, like Sluice, gives the
    matrices of images the layout `**`, so the layouts compare as they are."""


def affine_transforms_cases():
    rng = random.Random(42)
    num_iters = 4
    max_num_frames = 8
    max_batch_size = 4

    def rand_range(limit):
        return range(rng.randint(1, limit) + 1)

    def mt(desc):
        return np.float32(np.random.default_rng(desc.rng.getrandbits(64)).uniform(-20, 20, (2, 3)))

    def scale(desc):
        return np.array([desc.rng.randint(0, 5), desc.rng.randint(-50, 20)], dtype=np.float32)

    def shift(desc):
        return np.array([desc.rng.randint(-100, 200), desc.rng.randint(-50, 20)], dtype=np.float32)

    def shear_angles(desc):
        return np.array([desc.rng.randint(-90, 90), desc.rng.randint(-90, 90)], dtype=np.float32)

    def angle(desc):
        return np.array(desc.rng.uniform(-180, 180), dtype=np.float32)

    data_desc = SampleDesc(rng, None, 0, 0, None)

    def per_frame_input(frame_cb):
        return [
            [np.array([frame_cb(data_desc) for _ in rand_range(max_num_frames)], dtype=np.float32) for _ in rand_range(max_batch_size)]
            for _ in range(num_iters)
        ]

    test_cases = [
        (fn.transforms.rotation, {}, TransformsParamsProvider([ArgCb("angle", angle, True)]), ["cpu"]),
        (
            fn.transforms.rotation,
            {"reverse_order": True},
            TransformsParamsProvider([ArgCb("center", shift, True), ArgCb("angle", angle, False)]),
            ["cpu"],
        ),
        (fn.transforms.scale, {}, TransformsParamsProvider([ArgCb("scale", scale, True), ArgCb("center", shift, False)]), ["cpu"]),
        (fn.transforms.scale, {"center": np.array([-50, 100], dtype=np.float32)}, TransformsParamsProvider([ArgCb("scale", scale, True)]), ["cpu"]),
        (fn.transforms.translation, {}, TransformsParamsProvider([ArgCb("offset", shift, True)]), ["cpu"]),
        (fn.transforms.shear, {}, TransformsParamsProvider([ArgCb("angles", shear_angles, True)]), ["cpu"]),
        (fn.transforms.shear, {}, TransformsParamsProvider([ArgCb("shear", shift, True)]), ["cpu"]),
        (fn.transforms.combine, {}, TransformsParamsProvider([ArgCb(2, mt, True), ArgCb(1, mt, False)]), ["cpu"]),
        (fn.transforms.combine, {}, TransformsParamsProvider([ArgCb(1, mt, True)]), ["cpu"]),
    ]
    only_with_seq_input_cases = [
        (fn.transforms.combine, {}, TransformsParamsProvider([ArgCb(1, mt, True), ArgCb(2, mt, True)]), ["cpu"]),
        (fn.transforms.combine, {}, TransformsParamsProvider([ArgCb(1, mt, False)]), ["cpu"]),
        (fn.transforms.translation, {}, TransformsParamsProvider([ArgCb("offset", shift, False)]), ["cpu"]),
        (fn.transforms.rotation, {"reverse_order": True, "angle": 92.0}, TransformsParamsProvider([]), ["cpu"]),
    ]
    main_input = ArgData(desc=ArgDesc(0, "F", "", "F**"), data=per_frame_input(mt))
    out = sequence_suite_helper(rng, [main_input], test_cases + only_with_seq_input_cases, num_iters)

    # The cases whose first ArgCb is per frame, again with that argument as the main input,
    # (1) with a positional matrix input without frames and (2) without positional input.
    for tested_fn, fixed_params, provider, devices in test_cases:
        main_source, *rest_cbs = provider.input_params
        if main_source.desc.expandable_prefix != "F":
            continue
        cases = [(tested_fn, fixed_params, TransformsParamsProvider([ArgCb(0, mt, False), *rest_cbs]), devices)]
        if not any(source.desc.is_positional_arg for source in provider.input_params):
            cases.append((tested_fn, fixed_params, TransformsParamsProvider(rest_cbs), devices))
        data = per_frame_input(main_source.cb)
        layout = "F" + "*" * (data[0][0].ndim - 1)
        main = ArgData(desc=ArgDesc(main_source.desc.name, "F", "", layout), data=data)
        out += sequence_suite_helper(rng, [main], cases, num_iters)
    return out


# --------------------------------------------------------------------------- the suites
SUITES = {
    "color_twist": color_twist_cases,
    "brightness_contrast": brightness_contrast_cases,
    "gaussian_blur": gaussian_blur_cases,
    "laplacian": laplacian_cases,
    "warp": warp_cases,
    "rotate": rotate_cases,
    "rotate_3d": rotate_3d_cases,
    "coord_transform": coord_transform_cases,
    "affine_transforms": affine_transforms_cases,
}

# --------------------------------------------------------------------------- Sluice vs DALI
# Where Sluice differs from DALI 2.4 (whose cpu operators pass every case of this file): each
# rule says how, the cases it marks xfail(strict=True) on Sluice, and the exceptions Sluice
# raises (any other failure fails the test).
def _arg_cbs(case):
    return case.input_params.input_params if isinstance(case.input_params, ParamsProvider) else case.input_params


# No case differs now: DALI's 3-D rotations (rotate_volumes) and warp_affine's matrices on the
# GPU (warp_matrix_on_gpu) were the last rules, both gone when Sluice gained them.
XFAIL_RULES = []


def sluice_xfail(case):
    """The rule (name, exception class name, reason) marking `case` xfail on Sluice, or None."""
    hits = [(name, exc, reason) for name, applies, exc, reason in XFAIL_RULES if applies(case)]
    assert len(hits) <= 1, [h[0] for h in hits]
    return hits[0] if hits else None


def _uses_gpu(case):
    return case.device == "gpu" or any(a.desc.dest_device == "gpu" for a in _arg_cbs(case))


def _all_cases():
    cases = []
    for suite, make in SUITES.items():
        for case in make():
            cases.append((f"{suite}-{case.id}", case))
    ids = [i for i, _ in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases


ALL_CASES = _all_cases()
CPU_CASES = [(i, c) for i, c in ALL_CASES if not _uses_gpu(c)]
GPU_CASES = [(i, c) for i, c in ALL_CASES if _uses_gpu(c)]


def _params(cases, libs):
    import sluice.errors

    out = []
    for case_id, case in cases:
        for lib in libs:
            marks = []
            xfail = sluice_xfail(case) if lib == "sluice" else None
            if xfail is not None:
                name, exc, reason = xfail
                raises = tuple(getattr(sluice.errors, e) for e in ((exc,) if isinstance(exc, str) else exc))
                marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=f"[{name}] {reason}"))
            out.append(pytest.param(lib, case, id=f"{lib}-{case_id}", marks=marks))
    return out


def test_xfail_rules_mark_cases():
    """Every rule marks some case (a rule that matches nothing is stale)."""
    for name, applies, _, _ in XFAIL_RULES:
        assert any(applies(c) for _, c in ALL_CASES), name


def test_suites_are_complete():
    """The port keeps every case of DALI's lists (cpu and gpu variants)."""
    per_suite = {}
    for case_id, _ in ALL_CASES:
        suite = case_id.split("-", 1)[0]
        per_suite[suite] = per_suite.get(suite, 0) + 1
    assert per_suite == {
        "color_twist": 6 * 3 * 2,  # 6 cases, 3 FHWC inputs, cpu and gpu
        "brightness_contrast": 7 * 3 * 2,
        "gaussian_blur": 6 * (3 + 3 + 2) * 2,  # FHWC, FCHW and CFHW inputs
        "laplacian": 6 * (3 + 3 + 2) * 2,
        "warp": (8 * 2 + 2) * 3,  # DALI's 7 cpu+gpu cases and the flattened matrix, 2 gpu-only
        "rotate": 6 * 3 * 2,
        "rotate_3d": 3 * 2,
        "coord_transform": 6 * 2 + 2,
        "affine_transforms": 13 + 2 * 7 + 2,
    }, per_suite


class _ShiftedFramesProvider(ParamsProvider):
    """Gives the baseline each sequence's per-frame values rolled by one frame: the frames no
    longer get their own values."""

    def expand_params(self):
        expanded = super().expand_params()
        for arg in expanded:
            for b, batch in enumerate(self.input_data.data):
                offset = 0
                for sample in batch:
                    n = sample.shape[0]
                    values = arg.data[b][offset:offset + n]
                    arg.data[b][offset:offset + n] = values[1:] + values[:1]
                    offset += n
        return expanded


def test_check_detects_wrong_frame_values():
    """The check fails when the frames do not get their own values (so the suites cannot pass
    with per-frame values ignored or misplaced)."""
    import sluice

    def hue(sample_desc):
        return np.float32(40 + 280 * sample_desc.rng.random())

    rng = random.Random(7)
    data = [[np.random.default_rng(i).integers(0, 256, (4, 8, 10, 3), dtype=np.uint8) for i in range(3)]]
    main = ArgData(ArgDesc(0, "F", "", "FHWC"), data)
    (good,) = sequence_suite_helper(rng, [main], [(fn.hue, {}, [ArgCb("hue", hue, True)], ["cpu"])])
    good(sluice)
    (bad,) = sequence_suite_helper(rng, [main], [(fn.hue, {}, _ShiftedFramesProvider([ArgCb("hue", hue, True)]), ["cpu"])])
    with pytest.raises(AssertionError, match="mean abs error"):
        bad(sluice)


@pytest.mark.parametrize("lib_name, case", _params(CPU_CASES, ["sluice"] + (["dali"] if HAS_DALI else [])))
def test_sequence_suite(lib_name, case):
    case(get_library(lib_name))


@pytest.mark.parametrize("lib_name, case", _params(GPU_CASES, ["sluice"]))
def test_sequence_suite_gpu(lib_name, case):
    require_gpu()
    case(get_library(lib_name))


@pytest.mark.parametrize("lib", [pytest.param("sluice", id="sluice")] + ([pytest.param("dali", id="dali")] if dali_or_none() is not None else []))
def test_fail_per_frame_no_frames(lib):
    """DALI's test_gaussian_blur.py test_fail_per_frame_no_frames: per-frame values for a
    channel-first image without frames (CHW) are refused in DALI's words."""
    lib = get_library(lib)

    @lib.pipeline_def(batch_size=8, num_threads=4, device_id=None)
    def pipeline():
        blob = lib.fn.random.uniform(range=[0, 1], shape=(3, 200, 100))
        image = lib.fn.reshape(blob, layout="CHW")
        per_channel = np.array([3, 5, 7])
        return lib.fn.gaussian_blur(image, window_size=lib.fn.per_frame(per_channel))

    with pytest.raises(RuntimeError, match=r"Tensor input for argument window_size is specified per frame \(got F layout\)\. "
                       r"In that case, samples in the input 0 must contain frames too\. Got layout `CHW` that does not contain frames\."):
        pipe = pipeline()
        pipe.build()
        pipe.run()
