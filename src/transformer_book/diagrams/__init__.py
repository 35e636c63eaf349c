"""The book's diagrams, drawn with matplotlib from the code in this package.

One module per concept (``diagrams.attention``, ``diagrams.blocks``, ...), each
function in its ``__all__`` returning a :class:`matplotlib.figure.Figure`; ``_draw``
holds the shared pieces (boxes, arrows, tensors drawn as grids) so every diagram has
the same look. A notebook draws one in a cell tagged ``hide-input`` that ends in
``plt.show()``, and gives the picture its alt text in the cell's metadata
(``mystnb.image.alt``). Every module here is imported on ``import diagrams``, so a new
one needs no registration.
"""

import importlib
import pkgutil

__all__ = sorted(
    m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")
)
for _name in __all__:
    importlib.import_module(f"{__name__}.{_name}")
