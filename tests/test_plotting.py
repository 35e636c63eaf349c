"""The book's plot style and diagrams: applied by setup, drawn without error, legible."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book import diagrams, plotting, runtime  # noqa: E402


def test_setup_applies_the_book_style():
    plt.rcdefaults()
    runtime.setup("cpu", "quick")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    assert [c.upper() for c in colors] == [c.upper() for c in plotting.PALETTE]
    assert tuple(plt.rcParams["figure.figsize"]) == plotting.SINGLE
    plt.rcdefaults()
    runtime.setup("cpu", "quick", style=False)
    assert plt.rcParams["axes.prop_cycle"].by_key()["color"][0] != plotting.PALETTE[0]


def test_attention_maps_reject_wrong_rank():
    with pytest.raises(
        ValueError, match=r"weights must have shape \(Tq, Tk\), got \(2, 3, 3\)"
    ):
        plotting.attention_map(torch.rand(2, 3, 3))
    with pytest.raises(
        ValueError, match=r"weights must have shape \(H, Tq, Tk\), got \(3, 3\)"
    ):
        plotting.attention_maps(torch.rand(3, 3))


DIAGRAMS = [
    getattr(module, name)
    for module in (getattr(diagrams, m) for m in diagrams.__all__)
    for name in module.__all__
]


@pytest.mark.parametrize("draw", DIAGRAMS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_diagram_draws_inside_its_canvas(draw):
    fig = draw()
    fig.canvas.draw()
    ax = fig.axes[0]
    bbox = ax.get_window_extent()
    texts = [t for t in ax.texts if t.get_text().strip()]
    assert texts, "a diagram labels what it shows"
    for t in texts:
        extent = t.get_window_extent()
        assert extent.x0 >= bbox.x0 - 1 and extent.x1 <= bbox.x1 + 1, (
            f"label {t.get_text()!r} runs off the side of the figure"
        )
        assert extent.y0 >= bbox.y0 - 1 and extent.y1 <= bbox.y1 + 1, (
            f"label {t.get_text()!r} runs off the top or bottom of the figure"
        )
    plt.close(fig)
