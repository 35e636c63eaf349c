"""transformer_book.report.glue: the value reaches the book the way myst-nb expects."""

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from transformer_book import pretraining, report, span_pretraining


def test_fisher_one_sided_counts_the_splits_at_least_this_lopsided():
    import math

    # 5 of 6 shallow runs learned, 0 of 5 deep ones: only the observed split is as
    # lopsided, C(6, 5) C(5, 0) of the C(11, 5) ways to deal out 5 successes
    assert report.fisher_one_sided(5, 6, 0, 5) == pytest.approx(6 / 462)
    # 3 of 6 against 2 of 5: splits with 3, 4 or 5 successes in arm a
    expected = sum(math.comb(6, i) * math.comb(5, 5 - i) for i in (3, 4, 5)) / 462
    assert report.fisher_one_sided(3, 6, 2, 5) == pytest.approx(expected)
    assert report.fisher_one_sided(0, 6, 2, 5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        report.fisher_one_sided(7, 6, 0, 5)


def test_paired_differences_give_each_seed_the_mean_and_the_t_statistic():
    text = report.paired_differences([0.90, 0.91, 0.92], [0.85, 0.86, 0.87], "a - b")
    assert text.startswith("a - b, seed by seed: +0.050, +0.050, +0.050; mean +0.050")
    assert text.endswith("inf standard errors against 4.30")  # no spread: se 0
    text = report.paired_differences([0.9, 0.8, 0.6], [0.8, 0.8, 0.8], "x minus y")
    assert text == (
        "x minus y, seed by seed: +0.100, +0.000, -0.200; mean -0.033, 0.38 standard "
        "errors against 4.30"
    )
    with pytest.raises(ValueError, match="at least two seeds"):
        report.paired_differences([0.9], [0.8], "a - b")


def test_glue_formats_outside_ipython():
    assert report.glue("acc", 0.93456, "{:.2f}") == "0.93"
    assert report.glue("n", 12) == "12"


def test_glue_all_formats_every_value_in_order():
    texts = report.glue_all({"a": 0.123, "b": 2.0}, "{:.1f}")
    assert texts == {"a": "0.1", "b": "2.0"} and list(texts) == ["a", "b"]
    assert report.glue_all({"n": 12, "s": "x"}) == {"n": "12", "s": "x"}
    mixed = report.glue_all({"a": 0.5, "n": 3}, {"a": "{:.0%}"})
    assert mixed == {"a": "50%", "n": "3"}
    with pytest.raises(ValueError, match="values must be a dict"):
        report.glue_all([("a", 1)])
    with pytest.raises(ValueError, match="identifiers"):
        report.glue_all({"not a name": 1})


def test_glue_values_show_nothing_as_a_cells_last_value():
    """A cell ending with a glue call must not echo the value (an "Out:" line under
    the cell): IPython's formatter gives no output for what glue returns."""
    from IPython.core.formatters import DisplayFormatter

    text, texts = report.glue("n", 12), report.glue_all({"a": 0.5}, "{:.1f}")
    assert text == "12" and isinstance(text, str) and texts == {"a": "0.5"}
    formatter = DisplayFormatter()
    assert formatter.format(text) == ({}, {})
    assert formatter.format(texts) == ({}, {})
    assert formatter.format("12")[0] == {"text/plain": "'12'"}  # a plain str does echo


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


def test_median_ratio_takes_the_sign_tests_ranks_from_each_end():
    # 22 rounds: P(X <= 5) = 0.0085 <= 0.025 < P(X <= 6) = 0.026, X ~ Binomial(22, 1/2),
    # so the interval runs from the 6th smallest ratio to the 6th largest (the 17th)
    ours = [float(i) for i in range(1, 23)]
    ratio, low, high = report.median_ratio(ours[::-1], [1.0] * 22)  # order: no matter
    assert (ratio, low, high) == (11.5, 6.0, 17.0)
    # 6 rounds: P(X = 0) = 1/64 <= 0.025: the interval is the smallest to the largest
    assert report.median_ratio([1, 2, 3, 4, 5, 6], [1] * 6) == (3.5, 1.0, 6.0)
    narrower = report.median_ratio(ours, [1.0] * 22, level=0.5)
    assert 6.0 < narrower[1] < 11.5 < narrower[2] < 17.0


def test_median_interval_ranks_and_their_coverage():
    k, coverage = report.median_interval_ranks(22)
    assert k == 6  # P(X <= 5) = 35,443 / 2^22 = 0.0085; P(X <= 6) = 0.026 > 0.025
    assert coverage == pytest.approx(1 - 2 * 35_443 / 2**22)  # 0.983
    assert report.median_interval_ranks(6) == (1, pytest.approx(1 - 2 / 64))
    assert report.median_interval_ranks(22, level=0.5)[1] >= 0.5


def test_median_ratio_is_not_stretched_by_a_stalled_round():
    steady = [1.0, 0.99, 1.01, 1.02, 0.98, 1.0, 0.97, 1.03, 1.0, 0.99]  # 10 rounds
    stalled = steady[:-1] + [6.5]  # one round in which the other side stalled
    before, after = (report.median_ratio(x, [1.0] * 10) for x in (steady, stalled))
    assert after[2] - after[1] <= 1.5 * (before[2] - before[1])
    assert after[2] < 1.1  # the stall moved the top end by a rank, not to 6.5


def test_median_ratio_names_what_it_cannot_use():
    with pytest.raises(ValueError, match="positive values"):
        report.median_ratio([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="at least two.*got 1 and 1 values"):
        report.median_ratio([1.0], [1.0])
    with pytest.raises(ValueError, match="as many on each side; got 3 and 2"):
        report.median_ratio([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"level must be .* got 95"):
        report.median_ratio([1.0, 2.0], [1.0, 2.0], level=95)
    with pytest.raises(ValueError, match="5 rounds cannot give a 95 % interval"):
        report.median_ratio([1.0] * 5, [1.0] * 5)


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


def test_mean_sd_and_compared_state_seeds_as_chapter_4_does():
    assert report.mean_sd([0.1, 0.2, 0.3]) == "0.200 ± 0.100"
    d, s, verdict = report.compared([0.1, 0.2, 0.3], [0.5, 0.7, 0.6])
    assert (round(d, 6), round(s, 6)) == (0.4, 0.1)
    assert verdict == "higher for every seed"
    assert report.compared([0.1, 0.2, 0.3], [0.15, 0.25, 0.2])[2].endswith("no ranking")


def test_t_words_counts_standard_errors():
    a, b = [1.0, 2.0, 3.0], [0.0, 1.0, 2.0]
    diff, se, df = report.welch(a, b)
    need = report.t_quantile(0.975, df)
    assert report.t_words(a, b) == (
        f"{diff / se:.1f} standard errors of the difference, where Welch's test "
        f"needs {need:.1f}"
    )
    assert report.t_words([1.0] * 3, [0.5] * 3, "the test") == (
        "no spread at all: the test cannot be run"
    )


def test_beside_names_the_other_side():
    assert report.beside("higher for every seed", "the probe") == (
        "above the probe for every seed, beyond the seeds' spread"
    )
    assert report.beside("fewer than three seeds: no ranking", "x") == (
        "fewer than three seeds: no ranking"
    )


def test_recipe_differences_name_the_changed_settings():
    recipe = pretraining.PretrainConfig(
        vocab_size=2000, d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=64
    )
    card = {k: getattr(recipe, k) for k in pretraining.RECIPE_NAMES}
    assert report.recipe_differences(recipe, card, pretraining.RECIPE_NAMES) == []
    card |= {"d_model": 256, "lr": 1e-4}
    assert report.recipe_differences(recipe, card, pretraining.RECIPE_NAMES) == [
        "width 64 → 256",
        f"learning rate {recipe.lr:g} → 0.0001",
    ]


def test_recipe_differences_in_words_of_dicts_and_switches():
    names = span_pretraining.RECIPE_WORDS
    before = dict.fromkeys(names, 1)
    after = {**before, "d_model": 128, "lr": 3e-4, "scale_steps": True}
    before["scale_steps"] = False
    assert report.recipe_differences(before, after, names) == [
        "width 1 → 128", "learning rate 1 → 0.0003", "steps scaled per tensor off → on"
    ]  # fmt: skip
    assert report.recipe_differences(after, after, names) == []
    config = span_pretraining.SpanPretrainConfig()
    assert report.recipe_differences(config, config.__dict__, names) == []
