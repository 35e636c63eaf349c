"""transformer_book.runtime: resolving device and profile, seeding, thread limits."""

import pytest
import torch

from transformer_book import runtime


def test_auto_resolves_to_what_is_available():
    run = runtime.setup("auto", "auto")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if expected == "cpu" and torch.backends.mps.is_available():
        expected = "mps"
    assert run.device.type == expected
    assert run.profile == "quick", "auto is the quick profile on every device"


@pytest.mark.parametrize(
    "cuda, mps, expected",
    [
        (True, True, "cuda"),
        (True, False, "cuda"),
        (False, True, "mps"),
        (False, False, "cpu"),
    ],
)
def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert runtime.resolve_device("auto").type == expected
    assert runtime.resolve_profile("auto", runtime.resolve_device("auto")) == "quick"


def test_mps_requested_without_mps(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match="MPS is not available"):
        runtime.resolve_device("mps")


def test_mps_without_the_cpu_fallback_warns(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "resolve_device", lambda d: torch.device("mps"))
    monkeypatch.delenv(runtime.MPS_FALLBACK_ENV, raising=False)
    with pytest.warns(UserWarning, match="PYTORCH_ENABLE_MPS_FALLBACK=1 was not set"):
        runtime.setup("mps", "quick", style=False)


def test_importing_the_package_enables_the_mps_fallback():
    import os

    import transformer_book  # noqa: F401  (imported above already; sets the default)

    assert os.environ.get(runtime.MPS_FALLBACK_ENV) == "1"


def test_explicit_profile_and_pick():
    run = runtime.setup("cpu", "full")
    assert run.profile == "full" and run.pick(quick=1, full=2) == 2
    assert runtime.setup("cpu", "quick").pick(quick=1, full=2) == 1


def test_bad_profile_named_in_error():
    with pytest.raises(
        ValueError,
        match=r"profile must be 'auto' or one of \('quick', 'full'\), got 'fast'",
    ):
        runtime.setup("cpu", "fast")


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the error raised when CUDA is absent"
)
def test_cuda_requested_without_cuda():
    with pytest.raises(ValueError, match="CUDA is not available"):
        runtime.resolve_device("cuda")


def test_seeding_repeats():
    runtime.setup("cpu", "quick", seed=3)
    a = torch.randn(4)
    runtime.setup("cpu", "quick", seed=3)
    assert torch.equal(a, torch.randn(4))


def test_cpu_threads():
    before = torch.get_num_threads()
    try:
        runtime.setup("cpu", "quick", cpu_threads=1)
        assert torch.get_num_threads() == 1
        with pytest.raises(ValueError, match="cpu_threads must be a positive number"):
            runtime.setup("cpu", "quick", cpu_threads=0)
    finally:
        torch.set_num_threads(before)


def test_thread_count_is_capped_by_the_environment(monkeypatch):
    monkeypatch.delenv(runtime.MAX_THREADS_ENV, raising=False)
    assert (runtime.thread_count(0), runtime.thread_count(2)) == (0, 2)
    monkeypatch.setenv(runtime.MAX_THREADS_ENV, "1")
    assert (runtime.thread_count(0), runtime.thread_count(2)) == (1, 1)
    monkeypatch.setenv(runtime.MAX_THREADS_ENV, "4")
    assert runtime.thread_count(2) == 2
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv(runtime.MAX_THREADS_ENV, "1")
        runtime.setup("cpu", "quick", cpu_threads=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_a_bad_thread_cap_is_named(monkeypatch, bad):
    monkeypatch.setenv(runtime.MAX_THREADS_ENV, bad)
    with pytest.raises(
        ValueError, match="TRANSFORMER_BOOK_MAX_THREADS must be a positive"
    ):
        runtime.thread_count(1)
    with pytest.raises(ValueError, match="threads must be 0"):
        runtime.thread_count(-1)


def test_native_cpu_kernels_switches_onednn_off_inside_and_restores_it():
    before = torch.backends.mkldnn.enabled
    try:
        for start in (True, False):  # restores what it found, not a fixed value
            torch.backends.mkldnn.enabled = start
            with runtime.native_cpu_kernels():
                assert torch.backends.mkldnn.enabled is False
            assert torch.backends.mkldnn.enabled is start
            with runtime.native_cpu_kernels(active=False):
                assert torch.backends.mkldnn.enabled is start
        torch.backends.mkldnn.enabled = True
        with pytest.raises(RuntimeError, match="inside"), runtime.native_cpu_kernels():
            raise RuntimeError("inside")
        assert torch.backends.mkldnn.enabled is True  # restored after an error too
    finally:
        torch.backends.mkldnn.enabled = before
