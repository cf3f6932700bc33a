"""Sequence test machinery: a port of DALI's dali/test/python/sequences_test_utils.py.

An operator that processes the frames of a sequence independently (DALI's "sequence
operator") must give, for a batch of sequences with per-frame argument inputs
(`fn.per_frame`), the same frames as when it runs on the batch of those frames unfolded, each
frame a sample of its own with its frame's argument values as per-sample arguments:

    [frame for seq in op(batch_of_seqs, arg=per_frame(args)) for frame in seq]
        == op([frame for seq in batch_of_seqs for frame in seq], arg=args_per_frame)

`sequence_suite_helper` builds, from a list of input cases (`ArgData`: the main input, which
says how many leading extents are unfolded) and a list of operator cases (operator, fixed
arguments, `ArgCb`s or a `ParamsProvider` computing the tensor arguments), one
`SequenceTestCase` per (operator case, device, input case). Calling a case with a library
module (`sluice` or `nvidia.dali`) builds both pipelines with that library and compares them.

Differences from DALI's version:
- DALI reads the main input of `video_suite_helper` from a video file in DALI_extra; here it
  is synthetic: deterministic random uint8 frames (numpy's default_rng), a few small sequences
  of varying frame count and size per sample (`synthetic_video_batches`).
- DALI's helper yields nose test generators sharing one `random.Random`; here the cases are
  objects (for pytest.mark.parametrize) and each case draws its arguments from its own
  `random.Random`, seeded when the case is made, so a case's data does not depend on which
  other cases run.
- Operators and types in the cases are named lazily (`lazy_fn.hue`, `lazy_types.FLOAT`):
  they resolve against the library a case is run with, so one case list runs on Sluice and on
  DALI alike.
"""

import copy
import random
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Union

import numpy as np


# --------------------------------------------------------------------------- libraries
class LibRef:
    """A dotted name (`fn.transforms.rotation`, `types.FLOAT`) looked up in a library module
    (sluice or nvidia.dali) when a case runs."""

    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return LibRef(f"{self._path}.{name}")

    def resolve(self, lib):
        obj = lib
        for part in self._path.split("."):
            obj = getattr(obj, part)
        return obj

    @property
    def name(self):
        """The name without the namespace: `transforms.rotation` for `fn.transforms.rotation`."""
        return self._path.split(".", 1)[1]

    def __repr__(self):
        return self._path


lazy_fn = LibRef("fn")
lazy_types = LibRef("types")


def resolve(value, lib):
    """`value` with any LibRef in it (also inside lists, tuples and dicts) looked up in `lib`."""
    if isinstance(value, LibRef):
        return value.resolve(lib)
    if isinstance(value, dict):
        return {k: resolve(v, lib) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve(v, lib) for v in value)
    return value


def get_library(name):
    """The library module a suite runs against: "sluice" or "dali" (DALI 2.4, CPU)."""
    if name == "sluice":
        import sluice

        return sluice
    if name == "dali":
        import nvidia.dali as dali
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.types  # noqa: F401

        return dali
    raise ValueError(f"unknown library {name!r}")


# --------------------------------------------------------------------------- descriptions
@dataclass
class SampleDesc:
    """What an argument callback is told when asked for the value of one sample or frame."""

    rng: random.Random
    frame_idx: Optional[int]
    sample_idx: int
    batch_idx: int
    sample: Optional[np.ndarray]


@dataclass
class ArgDesc:
    """One operator input: `name` is a positional index (int) or an argument name (str);
    `expandable_prefix` the leading extents unfolded in the baseline ("F", "FC", "" for
    per-sample data); `dest_device` where the data goes ("cpu" or "gpu", positional only)."""

    name: Union[str, int]
    expandable_prefix: str
    dest_device: str
    layout: Optional[str] = None

    def __post_init__(self):
        if not self.is_positional_arg and self.dest_device == "gpu":
            raise ValueError(f"argument {self.name!r}: named arguments live on the cpu")
        if self.layout and not self.layout.startswith(self.expandable_prefix):
            raise ValueError(f"layout {self.layout!r} does not start with {self.expandable_prefix!r}")

    @property
    def is_positional_arg(self):
        return isinstance(self.name, int)


class ArgCb:
    """A tensor argument (or positional input) computed by `cb(SampleDesc)`, once per sample,
    or once per frame when `is_per_frame` (then given to the operator through fn.per_frame).
    `dest_device="gpu"` copies a positional input to the gpu."""

    def __init__(self, name: Union[str, int], cb: Callable[[SampleDesc], np.ndarray], is_per_frame: bool, dest_device: str = "cpu"):
        self.desc = ArgDesc(name, "F" if is_per_frame else "", dest_device)
        self.cb = cb

    def __repr__(self):
        return f"ArgCb({self.desc.name!r}, {getattr(self.cb, '__name__', self.cb)}, per_frame={self.desc.expandable_prefix == 'F'})"


@dataclass
class ArgData:
    """An ArgDesc with its data: a list of batches, each a list of numpy samples."""

    desc: ArgDesc
    data: List[List[np.ndarray]] = field(repr=False)


# --------------------------------------------------------------------------- unfolding
def unfold_batch(batch, num_expand):
    """The samples of `batch` with their first `num_expand` extents unfolded into samples."""
    assert num_expand >= 0
    if num_expand == 0:
        return list(batch)
    out = []
    for sample in batch:
        flat = sample.reshape((-1,) + sample.shape[num_expand:]) if num_expand > 1 else sample
        out.extend(flat[i] for i in range(flat.shape[0]))
    return out


def unfold_batches(batches, num_expand):
    return [unfold_batch(batch, num_expand) for batch in batches]


def get_layout_prefix_len(layout, prefix):
    """How many leading characters of `layout` are in `prefix` (the extents to unfold)."""
    n = 0
    while n < len(layout) and layout[n] in prefix:
        n += 1
    return n


def expand_arg(expandable_layout, arg_has_frames, input_batch, arg_batch):
    """The per-sample values of the unfolded batch: `arg_batch` (one value per sample, or per
    frame when `arg_has_frames`, a single frame standing for all) repeated or cut to match the
    samples `input_batch` unfolds into (its leading `expandable_layout` extents: "F", "C",
    "FC" or "CF")."""
    num_expand = len(expandable_layout)
    assert 1 <= num_expand <= 2 and set(expandable_layout) <= set("FC")
    assert len(input_batch) == len(arg_batch)
    out = []
    for input_sample, arg_sample in zip(input_batch, arg_batch):
        extents = input_sample.shape[:num_expand]
        unfolded = int(np.prod(extents))
        if not arg_has_frames or len(arg_sample) == 1:
            value = arg_sample[0] if arg_has_frames else arg_sample
            out.extend(value for _ in range(unfolded))
            continue
        f_axis = expandable_layout.index("F")
        assert len(arg_sample) == extents[f_axis], "per-frame values do not match the frames"
        # Unfolded sample k sits at multi-index np.unravel_index(k, extents): its frame is
        # the F component of that index.
        for k in range(unfolded):
            out.append(arg_sample[np.unravel_index(k, extents)[f_axis]])
    return out


def expand_arg_input(input_data: ArgData, arg_data: ArgData):
    """`arg_data` expanded to the unfolded samples of `input_data`, batch by batch."""
    assert arg_data.desc.expandable_prefix in ("F", "")
    assert len(input_data.data) == len(arg_data.data)
    has_frames = arg_data.desc.expandable_prefix == "F"
    return [
        expand_arg(input_data.desc.expandable_prefix, has_frames, input_batch, arg_batch)
        for input_batch, arg_batch in zip(input_data.data, arg_data.data)
    ]


# --------------------------------------------------------------------------- argument data
def get_input_arg_per_sample(input_data: ArgData, param_cb, rng):
    return [
        [param_cb(SampleDesc(rng, None, s, b, sample)) for s, sample in enumerate(batch)]
        for b, batch in enumerate(input_data.data)
    ]


def get_input_arg_per_frame(input_data: ArgData, param_cb, rng, check_broadcasting):
    """One value per frame of every sample; with `check_broadcasting`, about one sample in
    four gets a single value standing for all its frames."""
    f_axis = input_data.desc.expandable_prefix.find("F")
    assert f_axis >= 0, "per-frame arguments need an input with frames"

    def for_sample(s, b, sample):
        if check_broadcasting and rng.randint(1, 4) == 1:
            return np.array([param_cb(SampleDesc(rng, 0, s, b, sample))])
        return np.array([param_cb(SampleDesc(rng, f, s, b, sample)) for f in range(sample.shape[f_axis])])

    return [[for_sample(s, b, sample) for s, sample in enumerate(batch)] for b, batch in enumerate(input_data.data)]


def compute_input_params_data(input_data: ArgData, rng, input_params: List[ArgCb]):
    out = []
    for arg_cb in input_params:
        assert arg_cb.desc.expandable_prefix in ("", "F")
        if arg_cb.desc.expandable_prefix == "F":
            # Positional inputs must give every frame (DALI does not broadcast them).
            data = get_input_arg_per_frame(input_data, arg_cb.cb, rng, not arg_cb.desc.is_positional_arg)
        else:
            data = get_input_arg_per_sample(input_data, arg_cb.cb, rng)
        out.append(ArgData(desc=arg_cb.desc, data=data))
    return out


class ParamsProviderBase:
    """Computes the argument inputs of a sequence test: `compute_params` those of the pipeline
    fed with sequences, `expand_params` the matching per-sample ones of the baseline fed with
    the unfolded frames."""

    def __init__(self):
        self.input_data = None
        self.fixed_params = None
        self.rng = None
        self.unfolded_input = None

    def setup(self, input_data: ArgData, fixed_params, rng):
        self.input_data = input_data
        self.fixed_params = fixed_params
        self.rng = rng

    def unfold_output(self, batch):
        return unfold_batch(batch, len(self.input_data.desc.expandable_prefix))

    def unfold_output_layout(self, layout):
        return layout[len(self.input_data.desc.expandable_prefix):] if layout else layout

    def unfold_input(self) -> ArgData:
        desc = self.input_data.desc
        num_expand = len(desc.expandable_prefix)
        layout = desc.layout[num_expand:] if desc.layout else desc.layout
        self.unfolded_input = ArgData(
            desc=ArgDesc(desc.name, "", desc.dest_device, layout),
            data=unfold_batches(self.input_data.data, num_expand),
        )
        return self.unfolded_input

    def compute_params(self) -> List[ArgData]:
        raise NotImplementedError

    def expand_params(self) -> List[ArgData]:
        raise NotImplementedError


class ParamsProvider(ParamsProviderBase):
    """Argument inputs from a list of ArgCb."""

    def __init__(self, input_params: List[ArgCb]):
        super().__init__()
        self.input_params = input_params
        self.arg_input_data = None
        self.expanded_params_data = None

    def compute_params(self) -> List[ArgData]:
        self.arg_input_data = compute_input_params_data(self.input_data, self.rng, self.input_params)
        return self.arg_input_data

    def expand_params(self) -> List[ArgData]:
        self.expanded_params_data = [
            ArgData(desc=ArgDesc(a.desc.name, "", a.desc.dest_device), data=expand_arg_input(self.input_data, a))
            for a in self.arg_input_data
        ]
        return self.expanded_params_data

    def __repr__(self):
        return f"{type(self).__name__}({self.input_params!r})"


# --------------------------------------------------------------------------- pipelines
def cycling_source(batches):
    """An external_source callback (taking no argument) giving `batches` in turn, forever."""
    state = {"i": 0}

    def source():
        batch = batches[state["i"] % len(batches)]
        state["i"] += 1
        return batch

    return source


def arg_data_node(fn, arg_data: ArgData):
    node = fn.external_source(source=cycling_source(arg_data.data), batch=True, layout=arg_data.desc.layout)
    if arg_data.desc.dest_device == "gpu":
        node = node.gpu()
    if arg_data.desc.expandable_prefix.startswith("F"):
        node = fn.per_frame(node)
    return node


def as_batch(tensor_list):
    """The samples of a pipeline output (cpu or gpu) as numpy arrays."""
    if hasattr(tensor_list, "as_cpu"):
        tensor_list = tensor_list.as_cpu()
    return [np.array(tensor_list.at(i)) for i in range(len(tensor_list))]


def build_pipeline(lib, operator, fixed_params, args_data: List[ArgData], batch_size, device_id):
    """A pipeline of `lib` running `operator` on `args_data` (positional inputs by index, the
    others as named argument inputs) with `fixed_params`."""
    fn = lib.fn
    op = resolve(operator, lib)
    fixed = resolve(fixed_params, lib)

    @lib.pipeline_def(batch_size=batch_size, num_threads=2, device_id=device_id, prefetch_queue_depth=1)
    def pipeline():
        positional = sorted((a for a in args_data if a.desc.is_positional_arg), key=lambda a: a.desc.name)
        assert [a.desc.name for a in positional] == list(range(len(positional))), "positional inputs must be 0..n-1"
        pos_nodes = [arg_data_node(fn, a) for a in positional]
        named = {a.desc.name: arg_data_node(fn, a) for a in args_data if not a.desc.is_positional_arg}
        return op(*pos_nodes, **fixed, **named)

    pipe = pipeline()
    if hasattr(pipe, "build"):
        pipe.build()
    return pipe


def check_batch(batch, baseline, eps=1e-07, max_allowed_error=None):
    """DALI's test_utils.check_batch on lists of numpy arrays: same length, same shapes, and
    the mean absolute difference of each sample at most `eps` (or its largest absolute
    difference at most `max_allowed_error`, when given)."""
    assert len(batch) == len(baseline), f"batch sizes differ: {len(batch)} != {len(baseline)}"
    for i, (left, right) in enumerate(zip(batch, baseline)):
        assert left.shape == right.shape, f"sample {i}: shape {left.shape} != {right.shape}"
        assert left.dtype == right.dtype, f"sample {i}: dtype {left.dtype} != {right.dtype}"
        if left.size == 0:
            continue
        diff = np.abs(left.astype(np.float64) - right.astype(np.float64))
        mean_err, max_err = diff.mean(), diff.max()
        if max_allowed_error is not None:
            ok = max_err <= max_allowed_error
        else:
            ok = mean_err <= eps
        assert ok, (
            f"sample {i} (shape {left.shape}, {left.dtype}): mean abs error {mean_err}, max {max_err}, "
            f"{np.count_nonzero(diff)} of {diff.size} values differ"
        )


def _test_seq_input(lib, num_iters, operator, fixed_params, input_params, input_data: ArgData, rng, eps=1e-07, max_allowed_error=None):
    """Runs `operator` of `lib` on the sequences of `input_data` and on their unfolded frames,
    `num_iters` iterations, and checks that the outputs agree frame by frame."""
    assert num_iters >= len(input_data.data), "every input batch must be run"
    provider = input_params if isinstance(input_params, ParamsProviderBase) else ParamsProvider(input_params)
    provider.setup(input_data, fixed_params, rng)
    args_data = provider.compute_params()
    device_id = 0 if input_data.desc.dest_device == "gpu" or any(a.desc.dest_device == "gpu" for a in args_data) else None

    seq_pipe = build_pipeline(lib, operator, fixed_params, [input_data, *args_data], max(len(b) for b in input_data.data), device_id)
    unfolded_input = provider.unfold_input()
    expanded_args = provider.expand_params()
    baseline_pipe = build_pipeline(
        lib, operator, fixed_params, [unfolded_input, *expanded_args], max(len(b) for b in unfolded_input.data), device_id
    )

    for it in range(num_iters):
        (seq_out,) = seq_pipe.run()
        (base_out,) = baseline_pipe.run()
        expected_rows = len(input_data.data[it % len(input_data.data)])
        assert len(seq_out) == expected_rows, f"iteration {it}: {len(seq_out)} samples, fed {expected_rows}"
        assert provider.unfold_output_layout(seq_out.layout()) == base_out.layout(), (
            f"iteration {it}: layouts: sequences {seq_out.layout()!r}, frames {base_out.layout()!r}"
        )
        frames = provider.unfold_output(as_batch(seq_out))
        baseline = as_batch(base_out)
        assert len(baseline) > 0
        try:
            check_batch(frames, baseline, eps=eps, max_allowed_error=max_allowed_error)
        except AssertionError as e:
            raise AssertionError(f"iteration {it}: {e}") from None


# --------------------------------------------------------------------------- suites
def _arg_label(arg_cb):
    desc = arg_cb.desc
    name = desc.name if isinstance(desc.name, str) else f"in{desc.name}"
    cb_name = getattr(arg_cb.cb, "__name__", "cb").strip("<>")
    if cb_name != name:
        name += f"({cb_name})"
    return name + ("@F" if desc.expandable_prefix == "F" else "") + ("@gpu" if desc.dest_device == "gpu" else "")


class SequenceTestCase:
    """One (operator case, device, input case) of a suite; call it with a library module."""

    def __init__(self, operator, fixed_params, input_params, input_data: ArgData, num_iters, seed, input_case_idx, eps=1e-07, max_allowed_error=None, label=None):
        self.label = label
        self.operator = operator
        self.fixed_params = fixed_params
        self.input_params = input_params
        self.input_data = input_data
        self.num_iters = num_iters
        self.seed = seed
        self.input_case_idx = input_case_idx
        self.eps = eps
        self.max_allowed_error = max_allowed_error

    @property
    def device(self):
        return self.input_data.desc.dest_device

    @property
    def id(self):
        op = self.operator.name if isinstance(self.operator, LibRef) else getattr(self.operator, "__name__", "op")
        params = self.input_params.input_params if isinstance(self.input_params, ParamsProvider) else self.input_params
        parts = [op, self.device] + ([self.label] if self.label else [])
        if self.fixed_params:
            parts.append("fixed(" + ",".join(sorted(self.fixed_params)) + ")")
        if isinstance(params, list):
            parts.append("+".join(_arg_label(a) for a in params) or "noargs")
        else:
            parts.append(type(params).__name__)
        main = self.input_data.desc
        main_name = f"in{main.name}" if main.is_positional_arg else main.name
        parts.append(f"{main_name}:{main.layout or main.expandable_prefix}#{self.input_case_idx}")
        return "-".join(parts)

    def __call__(self, lib):
        # A provider keeps state between setup and the checks: give each run its own copy.
        input_params = copy.copy(self.input_params) if isinstance(self.input_params, ParamsProviderBase) else self.input_params
        _test_seq_input(
            lib, self.num_iters, self.operator, self.fixed_params, input_params, self.input_data,
            random.Random(self.seed), eps=self.eps, max_allowed_error=self.max_allowed_error,
        )

    def __repr__(self):
        return f"SequenceTestCase({self.id})"


def sequence_suite_helper(rng, input_cases: List[ArgData], ops_test_cases, num_iters=None, devices=None, eps=1e-07, max_allowed_error=None):
    """The test cases of a sequence processing operator, one per (operator case, device,
    input case). The operator must process frames (and, for channel-first layouts expanded
    with "FC", channels) independently and take per-frame tensor arguments.

    input_cases: ArgData of the main input (positional or named): its expandable prefix says
        which leading extents are unfolded, and the ArgCb of the operator cases are computed
        per sample / per frame of it. Its device is replaced by the case's.
    ops_test_cases: tuples (operator, {fixed_arg: value}, [ArgCb] or a ParamsProvider
        [, devices [, label]]), devices defaulting to ["cpu", "gpu"]; the label, if any, goes
        into the cases' ids.
    num_iters: iterations per case, at least the number of batches (default: that number).
    devices: if given, only the devices in it.
    """
    cases = []
    for op_case in ops_test_cases:
        operator, fixed_params, input_params, *rest = op_case
        case_devices = rest[0] if rest and rest[0] is not None else ["cpu", "gpu"]
        label = rest[1] if len(rest) > 1 else None
        for device in case_devices:
            if devices is not None and device not in devices:
                continue
            for idx, input_case in enumerate(input_cases):
                desc = input_case.desc
                main = ArgData(ArgDesc(desc.name, desc.expandable_prefix, device, desc.layout), input_case.data)
                iters = num_iters if num_iters is not None else len(input_case.data)
                cases.append(
                    SequenceTestCase(operator, fixed_params, input_params, main, iters, rng.getrandbits(64), idx, eps, max_allowed_error, label)
                )
    return cases


# --------------------------------------------------------------------------- video input
def synthetic_video_batches(rng, batch_size, num_batches, num_frames, width, height, seq_layout, channels=3):
    """In place of DALI's clips of a video file: `num_batches` batches of `batch_size` uint8
    sequences of `num_frames` frames of `height` x `width` x `channels` random pixels, laid out
    as `seq_layout` ("FHWC", "FCHW" or "CFHW")."""
    np_rng = np.random.default_rng(rng.getrandbits(64))
    perm = {"FHWC": (0, 1, 2, 3), "FCHW": (0, 3, 1, 2), "CFHW": (3, 0, 1, 2)}[seq_layout]
    return [
        [
            np.ascontiguousarray(np_rng.integers(0, 256, (num_frames, height, width, channels), dtype=np.uint8).transpose(perm))
            for _ in range(batch_size)
        ]
        for _ in range(num_batches)
    ]


def get_video_input_cases(seq_layout, rng, larger_shape=(40, 30), smaller_shape=(32, 24), max_batch_size=4, max_num_frames=6):
    """The input cases of DALI's get_video_input_cases, on synthetic sequences (shapes are
    (width, height)): uniform batches; the same sequences mixed with larger ones in batches of
    varying size (1, full, full - 1, full); for layouts starting with F, the same with a varying
    number of frames per sequence (1 to all)."""
    w, h = larger_shape
    larger = synthetic_video_batches(rng, max_batch_size, 1, max_num_frames, w, h, seq_layout)
    w, h = smaller_shape
    smaller = synthetic_video_batches(rng, max_batch_size, 2, max_num_frames, w, h, seq_layout)
    cases = [smaller]
    samples = [s for batch in (smaller[0], larger[0], smaller[1]) for s in batch]
    rng.shuffle(samples)
    n = max_batch_size
    cases.append([samples[0:1], samples[1:1 + n], samples[1 + n:2 * n], samples[2 * n:3 * n]])
    if seq_layout.find("F") == 0:
        cases.append([[s[: rng.randint(1, s.shape[0])] for s in batch] for batch in cases[1]])
    return cases


def video_suite_helper(ops_test_cases, test_channel_first=True, expand_channels=False, rng=None, **kwargs):
    """sequence_suite_helper on synthetic video: "FHWC" sequences and, with
    `test_channel_first`, "FCHW" ones; with `expand_channels`, the channel extent of
    channel-first layouts is unfolded too ("FC" of "FCHW") and "CFHW" is tested as well."""
    rng = rng or random.Random(42)
    if expand_channels and not test_channel_first:
        raise ValueError("expand_channels needs test_channel_first")
    expandable = "FC" if expand_channels else "F"
    layouts = ["FHWC"] + (["FCHW"] if test_channel_first else []) + (["CFHW"] if expand_channels else [])
    input_cases = []
    for layout in layouts:
        num_expand = get_layout_prefix_len(layout, expandable)
        for data in get_video_input_cases(layout, rng):
            input_cases.append(ArgData(desc=ArgDesc(0, layout[:num_expand], "", layout), data=data))
    return sequence_suite_helper(rng, input_cases, ops_test_cases, **kwargs)
