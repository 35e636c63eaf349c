"""Chapter 3's deep-stack experiment read back: its tables, its figure, its glued means.

:mod:`transformer_book.deep_stacks` builds, measures and trains the stacks; this module
turns what they return into what the chapter prints. ``stats`` is the gradient
measurement, ``{(arch, init): (depths, 4, seeds)}`` stacked from
:func:`transformer_book.deep_stacks.gradients` (per seed ‖∂ℓ/∂W1‖, ‖∂ℓ/∂x‖/‖g‖, the
skip term, the output's std); ``test_loss`` the training runs,
``{(depth, (arch, init)): (seeds,)}`` from
:func:`transformer_book.deep_stacks.train_arms`.
Tables come back as text (no prints here), the figure as a matplotlib figure.

Floor 4: it reads what ``deep_stacks`` returns and draws with ``plotting``.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import Tensor

from transformer_book import plotting

__all__ = [
    "gradient_table",
    "plot_gradients",
    "input_table",
    "input_readings",
    "losses_table",
    "GLUED_ARMS",
    "arm_means",
    "rates_at_edge",
    "first_step_table",
]

Stats = dict[tuple[str, str], Tensor]
_SHORT = {"plain": "plain", "residual": "residual", "residual + LayerNorm": "res. + LN"}


def _check_depths(stats: Stats, depths: Sequence[int]) -> None:
    for k, v in stats.items():
        if v.dim() != 3 or v.shape[:2] != (len(depths), 4):
            raise ValueError(
                f"stats[{k!r}] must be (depths={len(depths)}, 4, seeds), "
                f"got {tuple(v.shape)}"
            )


def gradient_table(stats: Stats, depths: Sequence[int]) -> str:
    """The gradient at the first layer, ‖∂ℓ/∂W1‖, as the geometric mean over the
    seeds: one row per depth, one column per stack, and the largest spread over the
    seeds (max / min). Shapes: stats values (depths, 4, seeds)."""
    _check_depths(stats, depths)
    grad = {k: v[:, 0] for k, v in stats.items()}  # (depths, seeds): ‖∂ℓ/∂W1‖
    mean = {k: g.log10().mean(1) for k, g in grad.items()}  # log10, geometric mean
    lines = [
        f"{'':>3}" + "".join(f"{_SHORT[k[0]]:>13}" for k in stats),
        f"{'L':>3}" + "".join(f"{k[1]:>13}" for k in stats),
    ]
    for i, L in enumerate(depths):
        lines.append(
            f"{L:>3}" + "".join(f"{10 ** mean[k][i].item():>13.3g}" for k in stats)
        )
    spread = max(
        (g.log10().amax(1) - g.log10().amin(1)).max().item() for g in grad.values()
    )
    lines.append(f"largest spread over the seeds: ×{10**spread:.1f} (max / min)")
    return "\n".join(lines)


def plot_gradients(stats: Stats, depths: Sequence[int]) -> Figure:
    """Chapter 3's figure: left, ‖∂ℓ/∂W1‖ against the depth for every stack (geometric
    mean, the seeds' min to max as a band), log scale; right, the well-behaved stacks
    relative to depth 1 on a linear scale, beside the residual default stack's
    prediction (19/18)^((L-1)/2). Shapes: stats values (depths, 4, seeds)."""
    _check_depths(stats, depths)
    grad = {k: v[:, 0] for k, v in stats.items()}  # (depths, seeds)
    mean = {k: g.log10().mean(1) for k, g in grad.items()}
    archs = list(dict.fromkeys(arch for arch, _ in stats))
    colors = dict(zip(archs, plotting.PALETTE))
    style = {"default": dict(ls="-", marker="o"), "He": dict(ls="--", marker="s")}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=plotting.WIDE)
    for (arch, init), g in grad.items():
        kw = dict(color=colors[arch], ms=4, label=f"{arch}, {init}", **style[init])
        ax1.plot(depths, 10 ** mean[arch, init], **kw)
        band = (dict(facecolor="none", edgecolor=colors[arch], hatch="///", lw=0)
                if init == "He" else dict(color=colors[arch], alpha=0.2))  # fmt: skip
        ax1.fill_between(depths, g.amin(1), g.amax(1), **band)  # seeds' min to max
        if (arch, init) not in [("plain", "default"), ("residual", "He")]:
            ax2.plot(depths, 10 ** (mean[arch, init] - mean[arch, init][0]), **kw)
    Ls = torch.tensor(depths, dtype=torch.float64)
    predicted, label = (19 / 18) ** ((Ls - 1) / 2), r"$(19/18)^{(L-1)/2}$"
    ax2.plot(depths, predicted, ":", color="black", label=label)
    ax1.set(yscale="log", ylabel="‖∂ℓ/∂W‖ of the first layer (log scale)",
            title="Gradient at the first layer")  # fmt: skip
    ax2.set(ylim=(0, None), ylabel="‖∂ℓ/∂W‖, relative to depth 1",
            title="The well-behaved stacks, linear scale")  # fmt: skip
    for ax, corner in ((ax1, "lower left"), (ax2, "upper left")):
        ax.set_xscale("log", base=2)
        ax.set(xticks=depths, xticklabels=depths, xlabel="depth L (stacked sublayers)")
        ax.legend(fontsize=8, loc=corner)
    fig.tight_layout()
    return fig


def input_table(stats: Stats, depth: int) -> str:
    """At the largest depth ``depth``, per stack: ‖∂ℓ/∂x‖/‖g‖ (mean over the seeds),
    its minimum at any depth and seed, the skip term (mean) and the output's std
    (geometric mean). Shapes: stats values (depths, 4, seeds)."""
    lines = [f"at L = {depth}: ‖∂ℓ/∂x‖ / ‖g‖, its min at any L, skip term, output std"]
    for k, v in stats.items():
        out_std = v[-1, 3].log().mean().exp()  # geometric mean over the seeds
        row = [v[-1, 1].mean(), v[:, 1].min(), v[-1, 2].mean(), out_std]
        lines.append(f"{', '.join(k):<30} " + "".join(f"{x:>10.3g}" for x in row))
    return "\n".join(lines)


def input_readings(stats: Stats) -> dict[str, float]:
    """What the chapter quotes of the gradient at the input: the smallest
    ‖∂ℓ/∂x‖/‖g‖ of the residual stacks (no norm on the skip path) and of the Add & Norm
    stacks, at any depth and seed, and the Add & Norm stacks' skip term at the largest
    depth (mean over the seeds), under He and default initialisation."""
    post = {init: ("residual + LayerNorm", init) for init in ("default", "He")}
    needed = [*post.values(), ("residual", "default"), ("residual", "He")]
    if any(k not in stats for k in needed):
        raise ValueError(f"stats must hold {needed}, got {list(stats)}")
    ratio = {k: v[:, 1] for k, v in stats.items()}  # (depths, seeds)
    return {
        "res_ratio_min": min(ratio["residual", i].min().item() for i in post),
        "post_ratio_min": min(ratio[k].min().item() for k in post.values()),
        "post_skip_he": stats[post["He"]][-1, 2].mean().item(),
        "post_skip_default": stats[post["default"]][-1, 2].mean().item(),
    }


def _rates(indices: Sequence[int], lrs: Sequence[float]) -> str:
    return " ".join(f"{lrs[i]:.0e}" for i in indices)


def losses_table(
    test_loss: dict, best_lr: dict, tried: dict, lrs: Sequence[float]
) -> str:
    """One line per (depth, arm): the chosen rate, the test loss as mean ± std over
    the seeds, and the rates the walk over the grid tried. Shapes: losses (seeds,)."""
    lines = []
    for (depth, arm), t in test_loss.items():
        lr, name = best_lr[depth, arm], ", ".join(arm)
        lines.append(
            f"depth {depth:>2}  {name:<30} lr {lr:.0e}  {t.mean():.3f} ± {t.std():.3f}"
            f"   (tried {_rates(tried[depth, arm], lrs)})"
        )
    return "\n".join(lines)


# the glue names of the arms the chapter quotes: name -> (arch, init)
GLUED_ARMS = {
    "plain_he": ("plain", "He"),
    "residual": ("residual", "default"),
    "residual_he": ("residual", "He"),
    "residual_he_a": ("residual", "He, α"),
    "res_ln": ("residual + LayerNorm", "default"),
    "res_ln_he": ("residual + LayerNorm", "He"),
}


def arm_means(test_loss: dict, depths: dict[str, int]) -> dict[str, float]:
    """The mean test loss over the seeds of every arm of :data:`GLUED_ARMS` at each
    depth of ``depths`` (a prefix -> depth, e.g. {"shallow": 2, "deep": 16}), named
    ``prefix_name``. Shapes: losses (seeds,)."""
    missing = [(d, a) for d in depths.values() for a in GLUED_ARMS.values()
               if (d, a) not in test_loss]  # fmt: skip
    if missing:
        raise ValueError(f"test_loss lacks {missing}")
    return {
        f"{where}_{name}": test_loss[depth, arm].mean().item()
        for name, arm in GLUED_ARMS.items()
        for where, depth in depths.items()
    }


def rates_at_edge(best_lr: dict, lrs: Sequence[float]) -> str:
    """The arms whose chosen rate is at an end of the grid ``lrs``, in words
    ("arch, init at depth d; ..."), or "none"."""
    edge = [k for k, v in best_lr.items() if v in (lrs[0], lrs[-1])]
    return "; ".join(f"{', '.join(arm)} at depth {d}" for d, arm in edge) or "none"


def first_step_table(g_mean: Tensor, first_step: Tensor) -> str:
    """Per layer, the mean |∂L/∂W1| and Adam's first step as a fraction of lr.
    Shapes: g_mean, first_step (depth,)."""
    if g_mean.shape != first_step.shape or g_mean.dim() != 1:
        raise ValueError(
            f"g_mean and first_step must be (depth,) each, got "
            f"{tuple(g_mean.shape)} and {tuple(first_step.shape)}"
        )
    lines = [f"{'layer':>5}{'mean |∂L/∂W1|':>16}{'first step / lr':>17}"]
    for i, (g_l, s_l) in enumerate(zip(g_mean.tolist(), first_step.tolist()), start=1):
        lines.append(f"{i:>5}{g_l:>16.1e}{s_l:>17.1e}")
    return "\n".join(lines)
