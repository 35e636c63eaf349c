"""decoding_speed: decoding steps timed with and without the cache, the benchmark's
result read back by name, and what a step's rate of reading its weights says."""

import pytest
import torch

from transformer_book import decoding_speed


class _CountingGPT(torch.nn.Module):
    """A stand-in for gpt.GPT: records how many tokens each call reads."""

    def __init__(self):
        super().__init__()
        self.lm_head = torch.nn.Linear(2, 5)
        self.config = type("C", (), dict(n_layers=2, n_heads=2, d_model=8))()
        self.read, self.cache_lengths = [], []

    def forward(self, ids, cache=None):
        self.read.append(ids.shape[1])
        if cache is not None:  # one position of random keys and values per token
            for layer in cache:
                layer.update(torch.randn(ids.shape[0], 2, ids.shape[1], 4),
                             torch.randn(ids.shape[0], 2, ids.shape[1], 4))  # fmt: skip
            self.cache_lengths.append(cache[0].seq_len)
        return torch.zeros(ids.shape[0], ids.shape[1], 5)


def test_decode_step_times_reads_one_token_per_cached_step():
    m = _CountingGPT()
    t = decoding_speed.decode_step_times(m, 6, use_cache=True, batch=3)
    assert t.shape == (6,) and bool((t >= 0).all())
    assert m.read == [1] * 6 and m.cache_lengths == [1, 2, 3, 4, 5, 6]
    m = _CountingGPT()
    decoding_speed.decode_step_times(m, 6, use_cache=False)
    assert m.read == [1, 2, 3, 4, 5, 6]  # without a cache: every token again


def test_cached_step_seconds_starts_from_n_cached_positions():
    m = _CountingGPT()
    s = decoding_speed.cached_step_seconds(m, batch=4, n_cached=16, repeats=3)
    assert s >= 0 and m.read == [1] * 4  # one warm-up, three timed calls
    assert m.cache_lengths == [17, 18, 19, 20]


def _speed_result():
    def spread(median):
        return {"min": median - 0.1, "median": median, "max": median + 0.1}

    wall = {"cached": spread(0.5), "uncached": spread(3.5)}
    return {
        "seconds": {m: {"wall": s, "cpu": s} for m, s in wall.items()},
        "speedup": {"wall": spread(7.0)},
        "rounds": {"speedup": {"wall": [6.9, 7.0, 7.1]}},
        "step_seconds": {"cached": [0.002] * 4, "uncached": [0.01, 0.02, 0.03, 0.04]},
        "reference": {
            "transformers": "4.0",
            "seconds": {m: {"wall": s} for m, s in wall.items()},
            "speedup": spread(4.0),
        },
        "floor": {
            "seconds": {"wall": spread(0.25)},
            "ceiling": spread(14.0),
            "cached_over_floor": spread(2.0),
        },
        "bare": {
            "seconds": {"wall": spread(0.4)},
            "speedup": spread(8.75),
            "structure_share": spread(0.2),
        },
        "onednn": {"speedup": spread(6.3), "saving": spread(0.1)},
        "load_average": {"before": [0.5, 0.4, 0.3], "after": [1.0, 0.5, 0.3]},
    }


def test_speed_benchmark_summary_reads_the_medians_by_name():
    found = decoding_speed.speed_benchmark_summary(_speed_result())
    v = found.values
    assert v["bench_speedup"] == 7.0 and (v["bench_min"], v["bench_max"]) == (6.9, 7.1)
    assert v["floor_share"] == 0.5 and v["ceiling"] == 14.0 and v["bench_load"] == 0.5
    assert v["last_plain_ms"] == pytest.approx(40.0)
    assert v["all_cached_s"] == pytest.approx(0.008)
    assert set(found.formats) == set(v)
    assert found.formats["floor_share"].format(v["floor_share"]) == "50%"
    assert (v["bare_s"], v["bare_speedup"], v["structure_share"]) == (0.4, 8.75, 0.2)
    assert found.formats["structure_min"].format(v["structure_min"]) == "10%"
    assert "speed-up 8.8x; the package's structure is 20% of" in found.text
    assert "speed-up over 3 rounds: median 7.0x" in found.text
    assert (v["onednn_speedup"], v["onednn_saving"]) == (6.3, 0.1)
    assert (
        "oneDNN kept for one token: speed-up 6.3x; torch's own kernels save 10% of"
        in (found.text)
    )
    assert "transformers 4.0 GPT-2" in found.text
    with pytest.raises(ValueError, match="result lacks"):
        decoding_speed.speed_benchmark_summary({"seconds": {}})


def test_speed_benchmark_summary_reads_the_committed_result():
    from transformer_book import benchmark

    found = decoding_speed.speed_benchmark_summary(
        benchmark.committed_result("kv_cache_speed.json")
    )
    assert found.values["bench_min"] <= found.values["bench_speedup"]
    assert found.text.count("\n") == 8  # nine lines


def test_weights_rate_reading_says_what_the_rate_means():
    assert "came from a cache" in decoding_speed.weights_rate_reading(12.0, 10.0)
    most = decoding_speed.weights_rate_reading(9.0, 10.0)
    assert "fill 90% of the step" in most and "most of what" in most
    part = decoding_speed.weights_rate_reading(5.0, 10.0)
    assert "fill 50%" in part and "per-operation costs" in part
    with pytest.raises(ValueError, match="read_rate must be a positive rate"):
        decoding_speed.weights_rate_reading(1.0, 0.0)


def test_onednn_call_seconds_times_each_switch_setting_in_turns():
    seen = []  # (oneDNN's switch, torch's threads) at every call
    fn = lambda: seen.append(  # noqa: E731
        (torch.backends.mkldnn.enabled, torch.get_num_threads())
    )
    before = torch.backends.mkldnn.enabled, torch.get_num_threads()
    try:
        for switch in (True, False):  # the oneDNN arm switches oneDNN on either way
            torch.backends.mkldnn.enabled = switch
            torch.set_num_threads(2)
            seen.clear()
            times = decoding_speed.onednn_call_seconds(
                fn, calls=3, repeats=2, threads=1
            )
            # both set back: the switch as it was, two threads
            assert torch.backends.mkldnn.enabled is switch
            assert torch.get_num_threads() == 2
            # a warm-up turn and two timed turns, who goes first alternating, 1 thread
            on, off = [(True, 1)] * 3, [(False, 1)] * 3
            assert seen == on + off + off + on + on + off
    finally:
        torch.backends.mkldnn.enabled = before[0]
        torch.set_num_threads(before[1])
    assert set(times) == {"oneDNN", "torch"} and all(t > 0 for t in times.values())
    with pytest.raises(ValueError, match="calls and repeats"):
        decoding_speed.onednn_call_seconds(fn, calls=0)
    with pytest.raises(ValueError, match="threads"):
        decoding_speed.onednn_call_seconds(fn, threads=0)
    with pytest.raises(ValueError, match="sweep_bytes"):
        decoding_speed.onednn_call_seconds(fn, sweep_bytes=-1)


def test_onednn_call_seconds_sweeps_the_bytes_before_every_call(monkeypatch):
    events = []  # what ran, in order: a sweep of n values, or the timed call
    real_sum = torch.Tensor.sum

    def counting_sum(self, *args, **kwargs):
        events.append(("sweep", self.numel()))
        return real_sum(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "sum", counting_sum)
    fn = lambda: events.append(("call", 0))  # noqa: E731
    decoding_speed.onednn_call_seconds(fn, calls=2, repeats=1, sweep_bytes=4096)
    # (1 warm-up + 1 timed turn) × 2 settings × 2 calls, each after a 1,024-value sweep
    assert events == [("sweep", 1024), ("call", 0)] * 8
