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


def test_curves_draws_one_labelled_line_per_entry_with_value_ticks():
    fig, ax = plt.subplots()
    plotting.curves(
        [8, 16, 32], {"a": [1, 2, 3], "b": [3, 2, 1]}, ax, xscale="log", yscale="log"
    )
    assert [line.get_label() for line in ax.lines] == ["a", "b"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32"]
    assert ax.get_legend() is not None
    with pytest.raises(ValueError, match="curve 'a' has 2 values for 3 x positions"):
        plotting.curves([1, 2, 3], {"a": [1, 2]}, ax)
    with pytest.raises(ValueError, match="ys must hold at least one curve"):
        plotting.curves([1], {}, ax)
    plt.close(fig)


def test_heatmap_adds_a_colour_bar_and_rejects_wrong_rank():
    fig, ax = plt.subplots()
    plotting.heatmap(torch.rand(3, 4), ax, xlabel="x", ylabel="y", title="t")
    assert len(fig.axes) == 2  # the image and its colour bar
    assert ax.get_title() == "t" and ax.get_images()[0].get_array().shape == (3, 4)
    with pytest.raises(ValueError, match=r"rows, columns\), got \(3,\)"):
        plotting.heatmap(torch.rand(3), ax)
    plt.close(fig)


def test_spread_bars_draws_a_bar_per_measured_value_and_text_for_none():
    fig, ax = plt.subplots()
    series = {"short": [(0.5, 0.4, 0.6), None], "long": [(0.2, 0.1, 0.3), (1, 1, 1)]}
    plotting.spread_bars(["x", "y"], series, ax, missing="n/a")
    heights = sorted(p.get_height() for p in ax.patches)
    assert heights == [0.2, 0.5, 1]
    assert [t.get_text() for t in ax.texts] == ["n/a"]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["short", "long"]  # one legend entry per series
    with pytest.raises(ValueError, match="series 'short' has 1 values for 2 names"):
        plotting.spread_bars(["x", "y"], {"short": [None]}, ax)
    plt.close(fig)


def test_seed_bands_and_dots_draw_each_series_and_reject_bad_shapes():
    fig, (a1, a2) = plt.subplots(1, 2)
    plotting.seed_bands([1, 2, 3], {"a": torch.rand(4, 3), "b": torch.rand(4, 3)}, a1)
    assert [line.get_label() for line in a1.get_lines()] == ["a", "b"]
    with pytest.raises(ValueError, match="runs"):
        plotting.seed_bands([1, 2], {"a": torch.rand(4, 3)}, a1)
    nan = float("nan")
    plotting.seed_dots(["x", "y"], {"p": [[1.0, 2.0], [nan, 3.0]]}, a2)
    assert [t.get_text() for t in a2.texts] == ["1†"]  # one run not finite
    assert len(a2.get_lines()) == 4  # dots and mean bar per group
    with pytest.raises(ValueError, match="groups"):
        plotting.seed_dots(["x"], {"p": [[1.0], [2.0]]}, a2)
    plt.close(fig)


def test_trailing_mean_places_each_window_mean_at_its_last_step():
    steps, means = plotting.trailing_mean([1.0, 2.0, 3.0, 4.0], window=2)
    assert list(steps) == [2, 3, 4]
    torch.testing.assert_close(means, torch.tensor([1.5, 2.5, 3.5]))
    with pytest.raises(ValueError, match="window"):
        plotting.trailing_mean([1.0], window=2)


def test_pretraining_curves_draw_trailing_means_beside_baselines():
    mlm, nsp = [float(9 - i / 10) for i in range(40)], [0.7] * 40
    fig = plotting.pretraining_curves(mlm, nsp, 5.0, 10, "a run")
    left, right = fig.axes[:2]
    x, y = left.lines[0].get_data()
    assert list(x) == list(range(10, 41)) and y[0] == pytest.approx(sum(mlm[:10]) / 10)
    assert left.lines[1].get_ydata()[0] == 5.0  # the unigram baseline
    assert right.lines[1].get_ydata()[0] == pytest.approx(0.6931, abs=1e-4)  # ln 2


def test_training_curve_draws_the_running_mean_and_one_line_per_reference():
    ax = plotting.training_curve([3.0, 2.0, 1.0, 1.0], {"held out": 1.5, "bigram": 2.5})
    (curve, *refs) = ax.get_lines()
    assert curve.get_label() == "training, mean of 4" and len(curve.get_xdata()) == 1
    assert [r.get_label() for r in refs] == ["held out", "bigram"]
    assert refs[0].get_ydata()[0] == 1.5 and refs[0].get_linestyle() == ":"
    with pytest.raises(ValueError, match="history must hold"):
        plotting.training_curve([])
    with pytest.raises(ValueError, match="lines takes at most 3"):
        plotting.training_curve([1.0], {str(i): 1.0 for i in range(4)})
    plt.close("all")


def test_kept_distributions_draws_a_panel_per_distribution():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    fig = plotting.kept_distributions({"a": p, "b": p}, ["x", " ", "y", "z"], top=3)
    axes = fig.get_axes()
    assert len(axes) == 2 and axes[0].get_title() == "a\n3 of 4 kept"
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["x", "␣", "y"]
    with pytest.raises(ValueError, match="dists must hold distributions over the 2"):
        plotting.kept_distributions({"a": p}, ["x", "y"])
    plt.close("all")
