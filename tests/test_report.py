"""transformer_book.report.glue: the value reaches the book the way myst-nb expects."""

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from transformer_book import report


def test_glue_formats_outside_ipython():
    assert report.glue("acc", 0.93456, "{:.2f}") == "0.93"
    assert report.glue("n", 12) == "12"


def test_bad_name_is_named():
    with pytest.raises(ValueError, match="glue names must be identifiers.*'slot f1'"):
        report.glue("slot f1", 1.0)


def test_glue_emits_myst_nb_scrapbook_data(monkeypatch):
    InteractiveShell.instance()  # glue displays only inside IPython
    shown = []
    monkeypatch.setattr(
        "IPython.core.display_functions.publish_display_data",
        lambda data, metadata=None, **kw: shown.append((data, metadata)),
    )
    try:
        assert report.glue("slot_f1", 0.9312, "{:.3f}") == "0.931"
    finally:
        InteractiveShell.clear_instance()
    assert shown, "glue displays the value"
    data, metadata = shown[0]
    prefix = "application/papermill.record/"
    assert data == {prefix + "text/plain": "0.931"}
    assert metadata == {"scrapbook": {"name": "slot_f1", "mime_prefix": prefix}}


def test_compare_seeds_claims_a_ranking_only_where_every_seed_agrees():
    assert (
        report.compare_seeds([2.0, 2.1, 2.2], [1.7, 1.8, 1.9]) == "lower for every seed"
    )
    assert report.compare_seeds([1.7, 1.8, 1.9], [2.0, 2.1, 2.2]) == (
        "higher for every seed"
    )
    assert report.compare_seeds([1.7, 2.0, 1.9], [1.8, 1.85, 1.95]) == (
        "the seeds overlap: no ranking"
    )
    assert report.compare_seeds([2.0], [1.0, 1.1, 1.2]) == (
        "fewer than three seeds: no ranking"
    )
    with pytest.raises(ValueError, match="got 0 and 1 values"):
        report.compare_seeds([], [1.0])


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [(0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 4, 2.7764), (0.95, 2, 2.9200),
     (0.975, 30, 2.0423)],
)  # fmt: skip
def test_t_quantile_matches_the_tables(p, df, expected):
    assert report.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_rejects_a_lower_tail_and_no_degrees_of_freedom():
    with pytest.raises(ValueError, match="p must be in"):
        report.t_quantile(0.4, 2)
    with pytest.raises(ValueError, match="df must be at least 1, got 0"):
        report.t_quantile(0.975, 0)


def test_paired_differences_their_mean_and_standard_error():
    diffs, mean, se = report.paired([0.9, 0.8, 0.7], [0.5, 0.5, 0.5])
    assert diffs == pytest.approx([0.4, 0.3, 0.2])
    assert mean == pytest.approx(0.3) and se == pytest.approx(0.1 / 3**0.5)
    with pytest.raises(ValueError, match="pair at least two seeds, got 2 and 1"):
        report.paired([0.9, 0.8], [0.5])


def test_ahead_needs_the_t_threshold_not_twice_the_standard_error():
    # a - b: mean 0.1, sd 0.0577, SE 0.0333: t = 3, above 2 but below 4.30 (3 seeds)
    a, b = [0.2 + d for d in (-0.0577, 0.0, 0.0577)], [0.1, 0.1, 0.1]
    assert not report.ahead(a, b)
    assert report.ahead([x + 0.1 for x in a], b)  # t = 6
    assert not report.ahead([0.5, 0.5, 0.05], [0.1, 0.1, 0.1])  # one seed below


def test_ahead_claims_identical_schemes_apart_at_most_five_percent_of_the_time():
    gen = torch.Generator().manual_seed(0)
    draws = torch.randn(4000, 3, generator=gen).tolist()
    false = sum(report.ahead(d, [0.0] * 3) for d in draws)
    false += sum(report.ahead([0.0] * 3, d) for d in draws)
    assert false / len(draws) < 0.06  # either direction: a paired t-test at 5 %


def test_ranking_joins_neighbours_by_the_paired_test():
    per_seed = {"a": [0.9, 0.85, 0.95], "b": [0.5, 0.4, 0.6], "c": [0.55, 0.5, 0.7]}
    # a - c: +0.35, +0.35, +0.25, far above 4.30 SE; c - b: +0.05, +0.1, +0.1, at t = 5
    assert report.ranking(per_seed) == "a > c > b"
    per_seed["c"] = [0.52, 0.5, 0.7]  # c - b: +0.02, +0.1, +0.1, t = 2.8 < 4.30
    assert report.ranking(per_seed) == "a > c ≈ b"


def test_welch_mean_difference_standard_error_and_degrees_of_freedom():
    diff, se, df = report.welch([1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0])
    # s_a^2 / n_a = 1/3, the constant side adds nothing: the one-sample test, df = 2
    assert diff == pytest.approx(2.0) and se == pytest.approx(3**-0.5)
    assert df == pytest.approx(2.0)
    diff, se, df = report.welch([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert diff == 0 and df == pytest.approx(4.0)  # equal variances and sizes: n - 2
    with pytest.raises(ValueError, match="at least two values each, got 1 and 3"):
        report.welch([1.0], [1.0, 2.0, 3.0])


def test_compare_seeds_needs_the_t_test_not_only_separate_ranges():
    # ranges apart (1.9 < 2.0) but t = 0.22 / 0.16 = 1.4 with about 2 d.o.f.
    spread_out = report.compare_seeds([2.0, 2.01, 2.5], [1.5, 1.85, 1.9])
    assert spread_out == "every seed on one side, within the seeds' spread: no ranking"
    # a fixed baseline against seeds: the one-sample test of the seeds
    assert report.compare_seeds([0.5] * 3, [0.6, 0.61, 0.62]) == "higher for every seed"
    assert report.compare_seeds([0.5] * 3, [0.51, 0.6, 0.7]) == (
        "every seed on one side, within the seeds' spread: no ranking"
    )


def test_compare_seeds_paired_reads_each_seed_against_its_own():
    before, after = [1.0, 2.0, 3.0], [0.9, 1.88, 2.91]  # ranges overlap, pairs do not
    assert report.compare_seeds(before, after) == "the seeds overlap: no ranking"
    assert report.compare_seeds(before, after, pairs=True) == "lower for every seed"
    with pytest.raises(ValueError, match="pairs=True needs one value per seed"):
        report.compare_seeds([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], pairs=True)


@pytest.mark.parametrize("pairs", [False, True])
def test_compare_seeds_ranks_identical_arms_at_most_five_percent_of_the_time(pairs):
    gen = torch.Generator().manual_seed(0)
    draws = torch.randn(3000, 2, 3, generator=gen).tolist()
    words = [report.compare_seeds(a, b, pairs=pairs) for a, b in draws]
    ranked = sum(w.endswith("every seed") for w in words) / len(words)
    assert ranked < 0.06  # either direction: a t-test at 5 %
    if not pairs:  # the ranges alone would say ">" 2 times in 20
        apart = sum(w.startswith("every seed on one side") for w in words) / len(words)
        assert 0.1 - 0.03 < ranked + apart < 0.1 + 0.03


def test_times_faster_reads_true_both_ways():
    assert report.times_faster(2.0) == "2.0 times faster"
    assert report.times_faster(0.25) == "4.0 times slower"
    with pytest.raises(ValueError, match="ratio must be a positive number"):
        report.times_faster(0.0)


def test_mean_spread_words_mean_std_and_range():
    assert report.mean_spread([0.5, 0.7, 0.6]) == "0.600 ± 0.100 (0.500–0.700)"
    assert report.mean_spread([2.0], "{:.1f}") == "2.0 ± 0.0 (2.0–2.0)"
    with pytest.raises(ValueError, match="values"):
        report.mean_spread([])
