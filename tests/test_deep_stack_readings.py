"""transformer_book.deep_stack_readings: chapter 3's tables, figure and glued means,
read from small made-up measurements."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book import deep_stack_readings as readings  # noqa: E402

ARCHS = ("plain", "residual", "residual + LayerNorm")
DEPTHS = [1, 2, 4]


def made_up_stats() -> dict:
    gen = torch.Generator().manual_seed(0)
    return {(a, i): torch.rand(len(DEPTHS), 4, 3, generator=gen) + 0.5
            for a in ARCHS for i in ("default", "He")}  # fmt: skip


def test_gradient_table_gives_geometric_means_per_depth_and_the_largest_spread():
    stats = made_up_stats()
    lines = readings.gradient_table(stats, DEPTHS).splitlines()
    assert len(lines) == 2 + len(DEPTHS) + 1
    assert lines[0].split()[:2] == ["plain", "plain"] and "res. + LN" in lines[0]
    g = stats["plain", "default"][1, 0]  # depth 2, the three seeds
    assert lines[3].split()[1] == f"{g.log().mean().exp().item():.3g}"
    assert lines[-1].startswith("largest spread over the seeds: ×")
    with pytest.raises(ValueError, match="must be \\(depths=2, 4, seeds\\)"):
        readings.gradient_table(stats, DEPTHS[:2])


def test_plot_gradients_draws_two_panels():
    fig = readings.plot_gradients(made_up_stats(), DEPTHS)
    assert len(fig.axes) == 2 and fig.axes[0].get_yscale() == "log"


def test_input_table_and_readings_quote_the_right_entries():
    stats = made_up_stats()
    lines = readings.input_table(stats, 4).splitlines()
    assert lines[0].startswith("at L = 4:") and len(lines) == 1 + len(stats)
    values = readings.input_readings(stats)
    ratio = lambda k: stats[k][:, 1].min().item()  # noqa: E731
    assert values["res_ratio_min"] == min(
        ratio(("residual", i)) for i in ("default", "He")
    )
    post = ("residual + LayerNorm", "He")
    assert values["post_skip_he"] == stats[post][-1, 2].mean().item()
    with pytest.raises(ValueError, match="stats must hold"):
        readings.input_readings({("plain", "He"): stats["plain", "He"]})


def test_losses_means_and_rates_at_the_edge():
    arms = list(readings.GLUED_ARMS.values())
    test_loss = {
        (d, a): torch.tensor([0.1 * d, 0.3 * d]) for d in (2, 16) for a in arms
    }
    lrs = [1e-3, 1e-2, 1e-1]
    best_lr = dict.fromkeys(test_loss, lrs[1])
    best_lr[16, arms[0]] = lrs[-1]
    tried = {k: [0, 1, 2] for k in test_loss}
    table = readings.losses_table(test_loss, best_lr, tried, lrs).splitlines()
    assert table[0] == (f"depth  2  {'plain, He':<30} lr 1e-02  0.400 ± 0.283"
                        "   (tried 1e-03 1e-02 1e-01)")  # fmt: skip
    means = readings.arm_means(test_loss, {"shallow": 2, "deep": 16})
    assert means["deep_res_ln"] == pytest.approx(3.2) and len(means) == 12
    assert readings.rates_at_edge(best_lr, lrs) == "plain, He at depth 16"
    assert readings.rates_at_edge(dict.fromkeys(test_loss, lrs[1]), lrs) == "none"
    with pytest.raises(ValueError, match="test_loss lacks"):
        readings.arm_means(test_loss, {"deep": 64})


def test_first_step_table_has_a_row_per_layer():
    table = readings.first_step_table(
        torch.tensor([1e-9, 1e-3]), torch.tensor([0.1, 1.0])
    )
    assert table.splitlines()[1].split() == ["1", "1.0e-09", "1.0e-01"]
    with pytest.raises(ValueError, match="must be \\(depth,\\) each"):
        readings.first_step_table(torch.zeros(2), torch.zeros(3))
