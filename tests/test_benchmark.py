"""transformer_book.benchmark: timings and memory, checked on computations whose
memory is known in advance (never on wall-clock limits)."""

import pytest
import torch

from transformer_book import benchmark

MiB = 2**20
FLOATS_PER_MIB = MiB // 4  # float32


def test_peak_of_sequential_allocations_is_one_buffer():
    def alloc_free_alloc():
        a = torch.empty(FLOATS_PER_MIB)
        del a  # freed before the next one exists
        return torch.empty(FLOATS_PER_MIB)

    assert benchmark.peak_bytes(alloc_free_alloc) == MiB
    assert benchmark.allocated_bytes(alloc_free_alloc) == 2 * MiB  # the sum


def test_peak_of_buffers_alive_together_is_their_sum():
    def two_alive():
        a = torch.empty(FLOATS_PER_MIB)
        b = torch.empty(2 * FLOATS_PER_MIB)
        return a, b

    assert benchmark.peak_bytes(two_alive) == 3 * MiB


def test_peak_of_many_small_tiles_stays_small():
    def tiles():
        for _ in range(50):
            t = torch.empty(FLOATS_PER_MIB // 4)  # 256 KiB, freed each round
            del t

    assert benchmark.peak_bytes(tiles) == MiB // 4
    assert benchmark.allocated_bytes(tiles) == 50 * MiB // 4


def test_peak_counts_what_fn_allocates():
    held = [torch.empty(FLOATS_PER_MIB)]  # exists before fn runs

    def free_then_allocate():
        held.pop()  # an older tensor: the CPU profiler does not see its free
        return torch.empty(FLOATS_PER_MIB // 2)

    assert benchmark.peak_bytes(free_then_allocate) == MiB // 2


def test_peak_of_a_matmul_chain():
    x = torch.randn(256, 256)
    # x @ x (256 KiB) alive while its softmax (256 KiB) is computed: 512 KiB
    assert benchmark.peak_bytes(lambda: (x @ x).softmax(dim=-1)) == 2 * 256 * 256 * 4


def test_median_time_is_positive_and_validates():
    assert benchmark.median_time(lambda: sum(range(100)), repeats=3) > 0
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        benchmark.median_time(lambda: None, repeats=0)


def test_median_time_clocks_count_calls_and_reject_bad_input():
    calls = []

    def work():
        calls.append(1)
        return sum(i * i for i in range(20_000))

    for clock in ("wall", "cpu", "auto"):
        calls.clear()
        seconds = benchmark.median_time(work, repeats=3, warmup=2, clock=clock)
        assert seconds > 0 and len(calls) == 5
    with pytest.raises(
        ValueError, match="clock must be 'wall', 'cpu' or 'auto', got 'gpu'"
    ):
        benchmark.median_time(work, clock="gpu")
    with pytest.raises(ValueError, match="repeats must be >= 1, got 0"):
        benchmark.median_time(work, repeats=0)


def test_cpu_clock_ignores_time_spent_waiting():
    import time

    waited = benchmark.median_time(lambda: time.sleep(0.05), repeats=3, clock="cpu")
    assert waited < 0.02, "sleeping costs wall-clock time, not CPU time"
