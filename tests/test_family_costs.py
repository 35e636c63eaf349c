"""family_costs (chapter 10): memory in GiB from parameter counts and cache bytes, as
a table and in figures."""

import math

import matplotlib
import pytest

from transformer_book import family_costs

matplotlib.use("Agg")


def test_memory_gib_is_two_and_sixteen_bytes_a_parameter_and_the_cache():
    memory = family_costs.memory_gib({"a": 2**30, "b": 2**29}, {"a": 2**31})
    assert memory["a"] == (2.0, 16.0, 2.0)
    weights, adam, cache = memory["b"]
    assert (weights, adam) == (1.0, 8.0) and math.isnan(cache)  # no cache: NaN
    table = family_costs.memory_table(memory).splitlines()
    assert table[0].split() == ["fp16", "weights", "Adam", "training", "KV",
                                "cache/seq", "(GiB)"]  # fmt: skip
    assert table[1].split() == ["a", "2.00", "16.0", "2.000"]
    assert table[2].split() == ["b", "1.00", "8.0", "(none)"]
    with pytest.raises(ValueError, match="counts"):
        family_costs.memory_gib({}, {})


def test_figures_draw_every_model():
    fig = family_costs.plot_shares(
        {"small": 0.3, "large": 0.01}, {"small": 10**8, "large": 10**11}
    )
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["100 M", "100.0 B"]
    with pytest.raises(ValueError, match="same models"):
        family_costs.plot_shares({"a": 0.5}, {"b": 1})
    memory = family_costs.memory_gib({"a": 2**30, "b": 2**29}, {"a": 2**31})
    ax = family_costs.plot_memory(memory).axes[0]
    assert ax.get_yscale() == "log" and len(ax.patches) == 6  # 3 bars x 2 models
