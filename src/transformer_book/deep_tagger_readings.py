"""Chapter 06's deep taggers read back: a setting's losses over seeds
(:func:`seed_summary`, :func:`learned`, :func:`seed_verdict`), the tokens a trained
stack hands its head (:func:`head_collapse`, :func:`collapse_words`), the tables the
chapter prints (:func:`stream_table`, :func:`grid_table`), and the verdicts the prose
quotes, in words that read true either way (:func:`separation_words`,
:func:`spread_change`, :func:`grid_words`, :func:`depth_words`; the depth comparison's
test is ``report.fisher_one_sided``).

:mod:`transformer_book.deep_taggers` builds the taggers and their task; this module
turns what their runs return into what the chapter prints. Tables come back as lines
of text (no prints here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from . import blocks, report

__all__ = [
    "seed_summary",
    "learned",
    "seed_verdict",
    "head_collapse",
    "collapse_words",
    "stream_table",
    "grid_table",
    "separation_words",
    "spread_change",
    "grid_words",
    "depth_words",
]


def seed_summary(losses: Sequence[float], prior: float, margin: float = 0.02) -> str:
    """A setting's final losses, one per seed, in one cell: "mean ± std" over the runs
    that did not diverge (an infinite loss), then "k†" (runs that diverged) and "k="
    (runs that ended no better than ``prior - margin``)."""
    ok = [v for v in losses if math.isfinite(v)]
    spread = statistics.stdev(ok) if len(ok) > 1 else 0.0
    text = f"{statistics.mean(ok):.3f} ± {spread:.3f}" if ok else "—"
    flat = sum(v >= prior - margin for v in ok)
    return text + f"  {len(losses) - len(ok)}† {flat}="


def learned(losses: Sequence[float], prior: float, margin: float = 0.02) -> int:
    """How many runs ended more than ``margin`` below ``prior`` (a diverged run, with
    an infinite loss, never does)."""
    return sum(v < prior - margin for v in losses)


def seed_verdict(
    before: Sequence[float], after: Sequence[float], pairs: bool = False
) -> str:
    """:func:`transformer_book.report.compare_seeds` of ``after`` against ``before``,
    or "a run diverged: no t-test" when a loss is not finite."""
    if not all(map(math.isfinite, [*before, *after])):
        return "a run diverged: no t-test"
    return report.compare_seeds(before, after, pairs=pairs)


def head_collapse(
    model: nn.Module, ids: Tensor, keep: Tensor, tag: int
) -> tuple[float, float, float]:
    """How alike a tagger's tokens are, and how it tags them: the mean cosine between
    two real tokens of a query after the last block and where the head reads them (the
    encoder's output, after a pre-norm stack's final norm;
    :func:`transformer_book.blocks.stream_profile`), and the share of real tokens
    tagged ``tag``. The model's encoder is ``model.body.encoder``.

    Shapes: ids (B, T), keep (B, T) bool (True = a real token) -> three floats."""
    enc = model.body.encoder
    _, (cos, cos_head) = blocks.stream_profile(model, [enc.layers[-1], enc], ids, keep)
    with torch.no_grad():
        share = (model(ids).argmax(-1)[keep] == tag).float().mean().item()
    return cos, cos_head, share


def collapse_words(
    after: dict[str, Sequence[tuple[float, float, float]]], truth: float
) -> dict[str, str]:
    """The collapse readings in the words the prose quotes. ``after`` maps "post" and
    "pre" to :func:`head_collapse` of each seed's tagger; ``truth`` is the share of the
    real tokens whose true tag is the one counted. ``cos_post_after``: the smallest
    post-norm cosine at the head, rounded down to 2 decimals; ``cos_pre_after`` and
    ``cos_pre_stream``: pre-norm's cosines at the head and after the last block, "mean
    ± std (min–max)"; ``share_post``: the smallest post-norm share of that tag;
    ``share_truth``."""
    if set(after) != {"post", "pre"} or not all(after.values()):
        raise ValueError(f"after must map 'post' and 'pre' to runs, got {list(after)}")
    share_post = min(s for _, _, s in after["post"])
    post_floor = math.floor(100 * min(h for _, h, _ in after["post"])) / 100
    at_head, in_stream = ([r[i] for r in after["pre"]] for i in (1, 0))
    return {
        "cos_post_after": f"{post_floor:.2f}",
        "cos_pre_after": report.mean_spread(at_head, "{:.2f}"),
        "cos_pre_stream": report.mean_spread(in_stream, "{:.2f}"),
        "share_post": "every real token"
        if share_post == 1
        else f"at least {math.floor(100 * share_post)}% of the real tokens",
        "share_truth": f"{truth:.0%}",
    }


def stream_table(
    profiles: dict[str, tuple[Tensor, Tensor]], at: Sequence[int] = (1, 6, 12, 24)
) -> list[str]:
    """Lines of the residual stream's size and likeness after blocks ``at`` (counted
    from 1): per stack name, its RMS and its mean cosine, each "mean ± std (min–max)"
    over the initialisations. Shapes: each of a profile's two values (S, L)."""
    lines = [f"after blocks {', '.join(map(str, at))}: mean ± std (min–max) over seeds"]
    for name, stats in profiles.items():
        for what, v in zip(("RMS", "cosine"), stats):  # v: (S, L)
            if max(at) > v.shape[1] or min(at) < 1:
                raise ValueError(f"at must count blocks 1..{v.shape[1]}, got {at}")
            row = [report.mean_spread(v[:, i - 1].tolist(), "{:.2f}") for i in at]
            lines.append(f"{name} {what}: " + "; ".join(row))
    return lines


def grid_table(
    final: dict[tuple[str, float, int], Sequence[float]],
    settings: Sequence[tuple[float, int]],
    prior: float,
) -> list[str]:
    """Lines of the training grid: per (learning rate, warm-up steps) of ``settings``,
    post-norm's and pre-norm's final losses over seeds (:func:`seed_summary`), or "not
    trained" where ``final`` has no such run."""
    lines = [f"{'lr':>8} {'warm-up':>8} {'post-norm':>26} {'pre-norm':>26}"]
    for lr, w in settings:
        runs = [final.get((p, lr, w)) for p in ("post", "pre")]  # None: not trained
        cells = [seed_summary(v, prior) if v else "not trained" for v in runs]
        lines.append(f"{lr:>8g} {w:>8} {cells[0]:>26} {cells[1]:>26}")
    return lines


def _depths(Ls: Sequence[int]) -> str:
    return ", ".join(map(str, Ls)) + " blocks"


def separation_words(ratios: dict[tuple[bool, int], Tensor]) -> str:
    """Where single initialisations of post-norm (key ``(False, L)``) and pre-norm
    (``(True, L)``) stacks keep apart: every post-norm ratio last/first quarter above
    every pre-norm one, depth by depth. Shapes: each value (S,)."""
    depths = sorted({L for _, L in ratios})
    separate = [L for L in depths if ratios[False, L].min() > ratios[True, L].max()]
    others = [L for L in depths if L not in separate]  # where single seeds overlap
    if not separate:
        return "single post-norm and pre-norm initialisations overlap at every depth"
    where = "every post-norm initialisation is more top-heavy than every pre-norm "
    where += f"one at {_depths(separate)}"
    return where + (f"; at {_depths(others)} single ones overlap" if others else "")


def spread_change(
    small: Tensor, large: Tensor, n_small: int, n_large: int
) -> tuple[float, str]:
    """How a value per initialisation changes from ``n_small`` to ``n_large`` blocks:
    the ratio of the means, and in words whether the two ranges lie apart.

    Shapes: small (S,), large (S',) -> (ratio, words)."""
    ratio = large.mean().item() / small.mean().item()
    where = (
        "below" if large.max() < small.min() else "above" if large.min() > small.max()
        else ""
    )  # fmt: skip
    if where:
        return ratio, (
            f"with every initialisation at {n_large} blocks {where} every one at "
            f"{n_small}"
        )
    return ratio, (
        "a change within the spread of the initialisations (their ranges at "
        f"{n_small} and at {n_large} blocks overlap)"
    )


def grid_words(
    final: dict[tuple[str, float, int], Sequence[float]],
    prior: float,
    top: float,
    warmup: int,
    steps: int,
) -> dict[str, str]:
    """The training grid's verdicts, in words that read true either way. ``final``
    maps (placement "post" or "pre", learning rate, warm-up steps) to a final loss per
    seed; it holds post-norm at ``top`` with and without warm-up, and pre-norm at
    ``top`` without; a smaller rate in it adds a sentence on pre-norm with warm-up and
    on the smallest rate."""
    post_top, pre_top = final["post", top, 0], final["pre", top, 0]
    n_seeds = len(post_top)
    if all(v > prior for v in post_top):
        post_level = "every post-norm run ended above the prior, worse than the tag "
        post_level += "frequencies alone"
    elif learned(post_top, prior) == 0:  # none more than 0.02 below the prior
        post_level = "no post-norm run ended clearly below the prior"
    else:
        post_level = f"{learned(post_top, prior)} of the {n_seeds} post-norm runs "
        post_level += "ended below the prior"
    warm = final["post", top, warmup]
    k_warm = learned(warm, prior)
    runs_warm = (
        f"{k_warm} of the {n_seeds} post-norm runs" if k_warm else "no post-norm run"
    )
    warm_text = (
        f"With a warm-up over the first {warmup} steps, {runs_warm} got below the "
        f"prior (the best ended at {min(warm):.2f}): in {steps} steps, this warm-up "
        + ("got some of them learning." if k_warm else
           "did not get the deep post-norm stack learning.")
    )  # fmt: skip
    low = min(lr for _, lr, _ in final)
    if low < top:  # the full profile: pre-norm with a warm-up, and smaller rates
        at_low = [v for (_, lr, _), runs in final.items() if lr == low for v in runs]
        warm_text += (
            f" The pre-norm runs with that warm-up ended at "
            f"{statistics.mean(final['pre', top, warmup]):.2f} on average. At the "
            f"smallest rate ({low:g}), {learned(at_low, prior)} of the {len(at_low)} "
            f"runs of either kind got below the prior in {steps} steps."
        )
    return {
        "post_level": post_level,
        "warm_text": warm_text,
        "top_lr": f"{top:g}",
        "pre_top": f"{statistics.mean(pre_top):.2f}",
        "post_top": f"{statistics.mean(post_top):.2f}",
    }


def depth_words(
    k_shallow: int, n_shallow: int, k_deep: int, n_deep: int, p_value: float
) -> dict[str, str]:
    """The depth comparison's verdicts, in words that read true either way:
    ``k_shallow`` of ``n_shallow`` shallow runs learned, ``k_deep`` of ``n_deep`` deep
    ones, and ``p_value`` is :func:`report.fisher_one_sided` of that split."""
    verdict = (
        "a hint that depth makes the trouble worse, not a proof: if depth made no "
        "difference, a split at least this lopsided would come up by chance with "
        f"probability {p_value:.2f} (Fisher's exact test)"
    )
    if p_value < 0.05:
        verdict = "depth makes the difference here (Fisher's exact test: p = "
        verdict += f"{p_value:.2f})"
    return {
        "depth_verdict": verdict,
        "k_shallow": str(k_shallow),
        "k_deep": f"{k_deep or 'none'} of the {n_deep}",
        "shallow_rest": (
            f"The other {n_shallow - k_shallow} shallow runs did not, so this rate is "
            "hard on post-norm at either depth."
            if k_shallow < n_shallow
            else "At 2 blocks, every run did."
        ),
    }
