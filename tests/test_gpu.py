"""GPU tests go here. Sluice has no GPU backend yet, so there is no GPU test; this file checks the
`require_gpu()` helper (tests/conftest.py) that every future GPU test must call first:
skip without a CUDA device, but FAIL when SLUICE_REQUIRE_GPU=1 (GPU CI must never skip silently)."""

import pytest

import conftest
from conftest import require_gpu


def _outcome(monkeypatch, env, devices):
    if env is None:
        monkeypatch.delenv("SLUICE_REQUIRE_GPU", raising=False)
    else:
        monkeypatch.setenv("SLUICE_REQUIRE_GPU", env)
    monkeypatch.setattr(conftest, "cuda_device_count", lambda: devices)
    try:
        require_gpu()
    except pytest.skip.Exception:
        return "skip"
    except pytest.fail.Exception:
        return "fail"
    return "run"


@pytest.mark.parametrize("env, devices, expected", [
    (None, 0, "skip"),
    ("0", 0, "skip"),
    ("1", 0, "fail"),
    (None, 1, "run"),
    ("1", 2, "run"),
])
def test_require_gpu_policy(monkeypatch, env, devices, expected):
    assert _outcome(monkeypatch, env, devices) == expected


def test_cuda_device_count_is_an_int():
    n = conftest.cuda_device_count()
    assert isinstance(n, int) and n >= 0
