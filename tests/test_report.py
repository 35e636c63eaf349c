"""transformer_book.report.glue: the value reaches the book the way myst-nb expects."""

import pytest
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
