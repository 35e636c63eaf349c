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
