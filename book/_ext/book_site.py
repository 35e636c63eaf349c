"""The built site works with no network and no console errors.

MathJax 3 is served from the site itself, so the book's math renders offline.
The files come from the PyPI package ``django-static-mathjax`` (MathJax 3.2.2, pinned in
requirements.txt); after an HTML build this extension copies the few parts the pages
load (the TeX-to-CHTML bundle, the TeX extensions it autoloads, the fonts, the menu and
accessibility modules) into ``_static/mathjax/``. ``_config.yml`` points Sphinx's
``mathjax_path`` there and holds the book's TeX macros.

Two quirks of the theme stack are mended on every page: sphinx-thebe registers its
configuration script twice (a JavaScript error: ``THEBE_JS_URL`` declared twice), and
pydata-sphinx-theme logs an error when no default colour mode is set.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "adaptors")


def mathjax_source() -> Path:
    """The ``es5`` folder of the installed MathJax distribution."""
    import mathjax  # the django-static-mathjax package

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    src, dest = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for part in PARTS:
        target = dest / part
        if (src / part).is_dir():
            shutil.copytree(src / part, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / part, target)


def mend_page(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated script tags; give the theme its default colour mode."""
    seen, unique = set(), []
    for js in context.get("script_files", []):
        # None and "" both mean an inline script
        name = getattr(js, "filename", js) or ""
        key = (str(name), tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"][:] = unique  # in place: later handlers append to this list
    context.setdefault("default_mode", "light")


def setup(app):
    mathjax_source()  # fail early, with an ImportError naming the package, if missing
    app.connect("build-finished", copy_mathjax)
    app.connect("html-page-context", mend_page, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
