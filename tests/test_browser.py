"""The built book as a reader's browser shows it, with the network off.

Headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium)
opens every page of the built site, served from 127.0.0.1 while every other host name
fails to resolve, and checks the rendered page: every formula typeset by MathJax (no raw
TeX left), every image loaded, no JavaScript errors or failed requests in the console,
and on each chapter the Colab link and the notebook download. A screenshot of each page
is saved in ``_build/screenshots/`` for people to look at.

On a machine without Chromium the tests are skipped with a message; CI sets
``TRANSFORMER_BOOK_REQUIRE_BROWSER=1`` (``.ci/run``), where a missing browser fails.
"""

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "_build" / "screenshots"
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
REQUIRE = os.environ.get("TRANSFORMER_BOOK_REQUIRE_BROWSER") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

# Waits for MathJax, then reports what the reader would see on the page.
INSPECT = """
const done = arguments[arguments.length - 1];
const start = Date.now();
// Until MathJax's script has run, window.MathJax is only its configuration: wait for
// MathJax itself (on pages with math), then for its first typesetting.
const mathjax = () => window.MathJax && MathJax.startup && MathJax.startup.promise;
const loaded = () => {
  if (!document.querySelector('.math')) return Promise.resolve();
  if (mathjax()) return MathJax.startup.promise;
  if (Date.now() - start > 60000) return Promise.reject('MathJax did not load in 60 s');
  return new Promise(r => setTimeout(r, 100)).then(loaded);
};
const ready = loaded();
// A MathJax that never finishes (a component that failed to load) or that rejects
// is reported as the page's problem instead of hanging the driver.
const waited = new Promise(r => setTimeout(() => r('MathJax did not finish in 60 s'), 60000));
Promise.race([ready.then(() => 'ok', e => 'MathJax failed: ' + e), waited]).then(state => {
  const main = document.querySelector('main') || document.body;
  const text = main.cloneNode(true);
  text.querySelectorAll('pre, code, .highlight').forEach(e => e.remove());
  const math = [...document.querySelectorAll('.math')];
  done({
    state: state,
    mathjax: !!window.MathJax,
    formulas: math.length,
    typeset: math.filter(m => m.querySelector('mjx-container')).length,
    raw_tex: (text.innerText.match(/\\\\\\(|\\\\\\[|\\$\\$/g) || []).length,
    images: [...document.images].map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
  });
});
"""


def _tools():
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None, "the selenium package is not installed"
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        return None, (
            "Chromium and chromedriver are not installed "
            "(Debian/Ubuntu: apt-get install chromium chromium-driver)"
        )
    return (browser, driver), ""


@pytest.fixture(scope="module")
def browser():
    tools, why = _tools()
    if tools is None:
        if REQUIRE:
            pytest.fail(f"the browser test must run here, but {why}")
        pytest.skip(f"browser test skipped: {why}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = tools[0]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        # the network is off: every host but the local server fails to resolve
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(tools[1]), options=opts)
    driver.set_script_timeout(120)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(built_book):
    result, html = built_book
    assert result.returncode == 0, "the book must build first (see test_book_build)"
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield html, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _pages(html: Path) -> list[str]:
    skip = {"genindex.html", "search.html"}
    return sorted(
        str(p.relative_to(html))
        for p in html.rglob("*.html")
        if p.name not in skip and not p.relative_to(html).parts[0].startswith("_")
    )


def _redirect(path: Path) -> str | None:
    """The target of a page that only forwards (``<meta http-equiv="Refresh">``)."""
    found = re.search(
        r'http-equiv="Refresh" content="0; url=([^"]+)"', path.read_text()
    )
    return found.group(1) if found else None


def test_every_page_renders_offline(browser, site):
    from selenium.webdriver.support.ui import WebDriverWait

    html, base = site
    SHOTS.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]["url"].removeprefix("https://github.com/")
    branch = config["repository"].get("branch", "main")
    colab = config["launch_buttons"]["colab_url"]
    totals = dict(pages=0, formulas=0, typeset=0, images=0, console_errors=0)
    problems = []
    for page in _pages(html):
        target = _redirect(html / page)
        if target is not None:
            # index.html only forwards the reader (a navigation that would end the
            # page's script mid-run): check where it points instead of opening it
            if not (html / page).parent.joinpath(target).is_file():
                problems.append(f"{page}: redirects to a missing page {target}")
            continue
        browser.get_log("browser")  # drop what earlier pages left
        browser.get(f"{base}/{page}")
        # on a busy machine get() can return before the new document replaced the old
        WebDriverWait(browser, 120).until(
            lambda d, page=page: (
                d.current_url.endswith(page)
                and d.execute_script("return document.readyState") == "complete"
            )
        )
        seen = browser.execute_async_script(INSPECT)
        errors = [
            e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
        ]
        browser.save_screenshot(str(SHOTS / (page.replace("/", "__")[:-5] + ".png")))
        totals["pages"] += 1
        totals["formulas"] += seen["formulas"]
        totals["typeset"] += seen["typeset"]
        totals["images"] += sum(i["ok"] for i in seen["images"])
        totals["console_errors"] += len(errors)
        where = f"{page}:"
        if seen["state"] != "ok":
            problems.append(f"{where} {seen['state']}")
        if seen["formulas"] and not seen["mathjax"]:
            problems.append(f"{where} MathJax did not load")
        if seen["typeset"] != seen["formulas"]:
            problems.append(
                f"{where} {seen['typeset']} of {seen['formulas']} formulas typeset"
            )
        if seen["raw_tex"]:
            problems.append(f"{where} {seen['raw_tex']} raw TeX delimiters in the text")
        problems += [
            f"{where} image did not load: {i['src']}"
            for i in seen["images"]
            if not i["ok"]
        ]
        problems += [f"{where} console: {e}" for e in errors]
        stem = Path(page).stem
        if stem in CHAPTERS:
            want = f"{colab}/github/{repo}/blob/{branch}/book/{stem}.ipynb"
            if want not in seen["links"]:
                problems.append(f"{where} no Colab link to {want}")
            downloads = [
                h for h in seen["links"] if h.endswith(f"_sources/book/{stem}.ipynb")
            ]
            if not downloads:
                problems.append(f"{where} no download link to the .ipynb")
            elif (
                json.loads((html / "_sources" / "book" / f"{stem}.ipynb").read_text())[
                    "cells"
                ]
                == []
            ):
                problems.append(f"{where} the downloadable notebook is empty")
    (SHOTS / "summary.json").write_text(json.dumps(totals, indent=2))
    print("browser check:", totals)
    assert totals["pages"] >= len(CHAPTERS) + 3
    assert totals["formulas"] > 0, "the book has math, and it was found"
    assert not problems, "\n".join(problems[:40])
