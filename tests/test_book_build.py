"""The rendered book: jupyter-book builds book/ with warnings as errors, math included."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent


def test_book_builds_without_warnings(built_book):
    result, html = built_book
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (html / "index.html").exists()
    for page in ["book/status.html", "book/references.html"] + [
        f"book/{p.stem}.html"
        for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    ]:
        assert (html / page).exists(), f"{page} was not rendered"
    status = (html / "book" / "status.html").read_text()
    assert "quick" in status and "seconds" in status


def test_the_site_carries_its_own_mathjax(built_book):
    _, html = built_book
    page = (html / "book" / "01_self_attention.html").read_text()
    assert 'src="../_static/mathjax/tex-chtml.js"' in page, (
        "MathJax is served by the site"
    )
    assert "cdn.jsdelivr" not in page and "unpkg.com/mathjax" not in page
    assert (html / "_static" / "mathjax" / "tex-chtml.js").stat().st_size > 500_000
    fonts = list(
        (html / "_static" / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff")
    )
    assert fonts, "the CHTML fonts travel with the site"
    assert '"macros"' in page, "the book's TeX macros are configured"


def test_references_parse_and_every_citation_has_an_entry():
    import re

    from pybtex.database import parse_file

    entries = parse_file(
        str(ROOT / "book" / "references.bib")
    ).entries  # strict: raises
    cited = set()
    for path in [*(ROOT / "notebooks").glob("*.py"), *(ROOT / "book").glob("*.md")]:
        for group in re.findall(r"\{cite[pt]?\}`([^`]+)`", path.read_text()):
            cited.update(k.strip() for k in group.split(","))
    assert cited, "the book cites its sources"
    missing = sorted(cited - set(entries))
    assert not missing, f"cited but not in references.bib: {missing}"
