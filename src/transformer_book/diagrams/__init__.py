"""The book's diagrams, drawn with matplotlib from the code in this package.

One module per concept (``diagrams.attention``, ``diagrams.blocks``, ...), each
function returning a :class:`matplotlib.figure.Figure`; ``_draw`` holds the shared
pieces (boxes, arrows, tensors drawn as grids) so every diagram has the same look.
A notebook draws one in a cell tagged ``hide-input`` that ends in ``plt.show()``, and
gives the picture its alt text in the cell's metadata (``mystnb.image.alt``).
"""

from . import attention

__all__ = ["attention"]
