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


def test_count_torch_calls_counts_each_call_once():
    x = torch.ones(3)
    with benchmark.CountTorchCalls() as count:
        y = x + 1  # one call
        y.sum()  # and another
    assert count.calls == 2
    with benchmark.CountTorchCalls() as none:
        pass
    assert none.calls == 0


def test_critical_path_grows_with_a_chain_and_not_with_a_batch():
    x = torch.ones(4, requires_grad=True)
    chain = x
    for _ in range(5):
        chain = chain * 2  # each step waits for the one before
    wide = (x * 2) + (x * 3)  # two products side by side, then one addition
    # the leaf's gradient accumulation counts as one operation on every path
    assert benchmark.critical_path(chain) == 6
    assert benchmark.critical_path(chain) - benchmark.critical_path(x * 2) == 4
    assert benchmark.critical_path(wide) == benchmark.critical_path(x * 2) + 1


def test_critical_path_rejects_a_tensor_without_history():
    with pytest.raises(ValueError, match="t must come from operations autograd"):
        benchmark.critical_path(torch.ones(2))


def test_committed_result_is_found_from_any_folder_below_the_repository(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "r.json").write_text('{"ratio": 1.5}')
    deep = tmp_path / "notebooks" / "sub"
    deep.mkdir(parents=True)
    assert benchmark.committed_result("r.json", start=deep) == {"ratio": 1.5}
    with pytest.raises(ValueError, match="name must be a file name ending in .json"):
        benchmark.committed_result("../r.json", start=deep)


def test_machine_names_the_cpu_and_counts_cores():
    m = benchmark.machine()
    assert isinstance(m["cpu"], str) and m["cpu"]
    assert m["cores"] >= 1 and m["platform"]


def test_machine_records_the_cpu_code_path_and_what_chose_it(monkeypatch):
    for name in benchmark.CPU_PATH_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    m = benchmark.machine()
    assert m["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert m["cpu_path_settings"] == {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def test_time_and_peak_measures_every_function_at_every_key():
    calls = []

    def make_inputs(n):
        calls.append(n)
        return (torch.ones(n),)

    fns = {"sum": lambda x: x.sum(), "outer": lambda x: x[:, None] * x[None, :]}
    cost = benchmark.time_and_peak(fns, make_inputs, [64, 128], repeats=1)
    assert calls == [64, 128]  # inputs built once per key
    assert set(cost) == {(n, k) for n in fns for k in (64, 128)}
    assert all(t >= 0 for t, _ in cost.values())
    assert cost["outer", 128][1] >= 128 * 128 * 4  # the (n, n) float32 result
    with pytest.raises(ValueError, match="fns"):
        benchmark.time_and_peak({}, make_inputs, [1])


def test_timing_waits_for_an_mps_device(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: waited.append("mps"))
    benchmark.median_time(lambda: None, repeats=2, warmup=0, device="mps")
    assert len(waited) >= 2  # at least once per timed repeat


def test_memory_of_an_mps_computation_is_measured_on_the_cpu(monkeypatch):
    assert benchmark.memory_device("mps") == torch.device("cpu")
    assert benchmark.memory_device("cpu") == torch.device("cpu")
    assert benchmark.memory_device("cuda:1") == torch.device("cuda:1")
    monkeypatch.setattr(torch.mps, "synchronize", lambda: None)  # timing "on MPS"
    fns = {"outer": lambda x: x[:, None] * x[None, :]}
    cost = benchmark.time_and_peak(fns, lambda n: (torch.ones(n),), [128], "mps", 1)
    assert cost["outer", 128][1] >= 128 * 128 * 4  # measured on the CPU, not refused


@pytest.mark.parametrize("measure", [benchmark.peak_bytes, benchmark.allocated_bytes])
def test_memory_on_mps_is_refused_not_reported_as_zero(measure):
    with pytest.raises(ValueError, match="MPS"):
        measure(lambda: torch.zeros(10), device="mps")


def test_provenance_names_the_command_torch_and_machine():
    record = benchmark.provenance("python benchmarks/x.py --seeds 0")
    assert record["command"] == "python benchmarks/x.py --seeds 0"
    assert record["torch"] == torch.__version__ and record["machine"]["cores"] >= 1
    assert len(record["date"]) == 10  # YYYY-MM-DD


def test_growth_exponents_and_cost_table_read_time_and_peak():
    cost = {  # (name, T) -> (seconds, peak bytes)
        ("a", 4): (1.0, 2**20),
        ("a", 8): (4.0, 2 * 2**20),
        ("b", 4): (2.0, 2**20),
        ("b", 8): (2.0, 2**20),
    }
    growth = benchmark.growth_exponents(cost, 4, 8)
    assert growth == {"a": (2.0, 1.0), "b": (0.0, 0.0)}
    with pytest.raises(ValueError, match="n1 and n2 must be two different sizes"):
        benchmark.growth_exponents(cost, 4, 16)
    time_lines = benchmark.cost_table(cost, [4, 8], "time")
    assert time_lines[0].endswith("(time, ms)")
    assert time_lines[1].split()[2] == "1000.00"
    peak_lines = benchmark.cost_table(cost, [4, 8], "peak", "cpu")
    assert peak_lines[0].endswith("(peak, MiB, cpu)") and "2.00" in peak_lines[2]
    with pytest.raises(ValueError, match="which must be 'time' or 'peak'"):
        benchmark.cost_table(cost, [4], "bytes")
