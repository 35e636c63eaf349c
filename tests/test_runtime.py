"""transformer_book.runtime: resolving device and profile, seeding, thread limits."""

import pytest
import torch

from transformer_book import runtime


def test_auto_resolves_to_what_is_available():
    run = runtime.setup("auto", "auto")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert run.device.type == expected
    assert run.profile == ("full" if expected == "cuda" else "quick")


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
