"""transformer_book.extrapolation_verdicts: the rules that read accuracies over seeds,
the tables and the figure of chapter 4's length experiment, and its rankings."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from transformer_book import extrapolation_verdicts  # noqa: E402


def test_spread_verdict_and_ranking_follow_the_chapter_rules():
    assert extrapolation_verdicts.spread([0.5, 0.7]) == pytest.approx((0.6, 0.5, 0.7))
    assert extrapolation_verdicts.spread([0.5, None]) is None
    assert extrapolation_verdicts.verdict([0.9, 0.95], [0.9, 0.9]) == "keeps it"
    assert extrapolation_verdicts.verdict([0.9, 0.95], [0.5, 0.6]) == "loses it"
    assert extrapolation_verdicts.verdict([0.9, 0.95], [0.9, 0.6]) == "mixed"
    assert extrapolation_verdicts.verdict([0.7, 0.95], [0.9, 0.9]) == "not learned"
    assert extrapolation_verdicts.verdict([0.9, 0.95], [None, None]) == "cannot run"
    with pytest.raises(ValueError, match="short and long must pair seeds: 2 != 1"):
        extrapolation_verdicts.verdict([0.9, 0.9], [0.9])


def test_every_verdict_has_its_rule_in_words():
    verdicts = {
        extrapolation_verdicts.verdict(s, lg)
        for s, lg in [
            ([0.9], [0.9]),
            ([0.9], [0.1]),
            ([0.9, 0.9], [0.9, 0.1]),
            ([0.1], [0.1]),
            ([0.9], [None]),
        ]
    }
    assert verdicts == set(extrapolation_verdicts.RULES)


def test_by_mean_resolved_beyond_and_pairs_in_words():
    per_seed = {
        "b": [0.50, 0.52, 0.51, 0.53, 0.50],
        "a": [0.90, 0.91, 0.92, 0.90, 0.93],
        "c": [0.48, 0.53, 0.49, 0.52, 0.47],  # about b
        "d": [0.30, 0.31, 0.29, 0.32, 0.30],
    }
    assert extrapolation_verdicts.by_mean(per_seed) == ["a", "b", "c", "d"]
    # b ≈ c (their seeds cross) breaks the chain a > b ≈ c > d: the pairs across it,
    # a-c, a-d and b-d, are left open, and the paired test resolves each of them
    assert extrapolation_verdicts.resolved_beyond(per_seed) == [
        ("a", "c"),
        ("a", "d"),
        ("b", "d"),
    ]
    per_seed["c"] = [0.45, 0.47, 0.46, 0.48, 0.45]  # now b > c: the chain resolves all
    assert extrapolation_verdicts.resolved_beyond(per_seed) == []
    assert extrapolation_verdicts.pairs_in_words([]) == "no further pair"
    assert extrapolation_verdicts.pairs_in_words([("b", "d")]) == "b > d"
    assert (
        extrapolation_verdicts.pairs_in_words([("a", "b"), ("b", "d"), ("a", "d")])
        == "a > b, b > d and a > d"
    )


RESULTS = {
    ("none", "copy"): {8: [0.1, 0.2], 16: [0.1, 0.1]},
    ("learned", "copy"): {8: [0.9, 1.0], 16: [None, None]},
    ("none", "last marker"): {8: [0.5, 0.6], 16: [0.4, 0.5]},
    ("T5 bias", "copy"): {8: [0.9, 0.95], 16: [0.9, 0.9]},
}


def test_results_table_has_a_row_per_name_and_marks_what_cannot_run():
    table = extrapolation_verdicts.results_table(
        RESULTS, ["none", "learned", "T5 bias"]
    )
    header, none, learned, t5 = table.splitlines()
    assert header.split("|")[1:] == [
        f" {'copy @8':16s} ", f" {'copy @16*':16s} ", f" {'marker @8':16s} ",
        f" {'marker @16*':16s}",
    ]  # fmt: skip
    assert none.split("|")[1].strip() == "0.15 (0.10–0.20)"
    assert "n/a" in learned.split("|")[2] and learned.split("|")[3].strip() == "-"
    assert t5.startswith("T5 bias, max_dist 8")


def test_plot_accuracies_draws_one_panel_per_task():
    chance = {"copy": 0.06, "last marker": 0.25}
    fig = extrapolation_verdicts.plot_accuracies(RESULTS, ["none", "learned"], chance)
    assert [ax.get_title() for ax in fig.axes] == [
        "copy (trained at length 8, 2 seeds)",
        "last marker (trained at length 8, 2 seeds)",
    ]
    with pytest.raises(ValueError, match="two test lengths"):
        extrapolation_verdicts.plot_accuracies(
            {("a", "copy"): {8: [1.0]}}, ["a"], chance
        )


def test_verdicts_table_lists_the_runs_of_each_verdict_per_task():
    verdicts = {("a", "copy"): "keeps it", ("b", "copy"): "keeps it",
                ("a", "last marker"): "mixed"}  # fmt: skip
    lines = extrapolation_verdicts.verdicts_table(verdicts).splitlines()
    assert len(lines) == 10 and lines[0] == f"{'copy':11s} {'keeps it':12s}: ['a', 'b']"
    assert lines[7] == f"{'last marker':11s} {'mixed':12s}: ['a']"
    with pytest.raises(ValueError, match="verdicts must be among"):
        extrapolation_verdicts.verdicts_table({("a", "copy"): "fine"})


def test_neighbour_lines_and_drop_gaps_compare_seed_by_seed():
    per_seed = {"b": [0.5, 0.6, 0.7], "a": [0.9, 0.9, 1.0]}
    (line,) = extrapolation_verdicts.neighbour_lines(per_seed).splitlines()
    assert line.startswith(f"  {'a':10s} - {'b':10s}: per seed +0.400, +0.300, +0.300")
    per_length = {"RoPE": {8: [0.9, 0.8], 16: [0.5, 0.7]},
                  "ALiBi": {8: [0.9, 0.9], 16: [0.8, 0.9]}}  # fmt: skip
    gaps = extrapolation_verdicts.drop_gaps(per_length, "RoPE", (8, 16))
    assert gaps == {"ALiBi": [pytest.approx(0.3), pytest.approx(0.1)]}
    with pytest.raises(ValueError, match="of must be one of"):
        extrapolation_verdicts.drop_gaps(per_length, "T5", (8, 16))
    assert set(extrapolation_verdicts.DROP_WORDS) == {True, False}
    assert set(extrapolation_verdicts.MAX_DISTANCE_WORDS) == {True, False}


def test_spread_text_says_mean_min_and_max():
    assert extrapolation_verdicts.spread_text([0.5, 0.7]) == "0.60 (0.50–0.70)"
    assert extrapolation_verdicts.spread_text([0.5, None]) == "n/a"
