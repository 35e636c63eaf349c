"""A small, explicit training loop shared by the chapters that train models.

The task-specific part is a ``loss_fn(model, batch) -> loss`` the chapter writes; the
loop owns the optimiser, the learning-rate schedule, gradient clipping, the loss
history and a progress bar, nothing else.

The progress bar (tqdm, with the running loss) shows when a person runs a notebook
or a script. The book's pipeline sets ``TRANSFORMER_BOOK_PROGRESS=0`` while it
executes and tests the notebooks, so the edition holds no bar.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import Tensor, nn

__all__ = ["PROGRESS_ENV", "lr_factor", "progress_enabled", "train"]

PROGRESS_ENV = "TRANSFORMER_BOOK_PROGRESS"
SCHEDULES = ("constant", "linear", "cosine")


def progress_enabled(progress: bool | None = None) -> bool:
    """Whether to show a progress bar: ``progress`` if given, else not when
    ``$TRANSFORMER_BOOK_PROGRESS`` is ``0`` (the pipeline's setting), else yes."""
    if progress is not None:
        return progress
    return os.environ.get(PROGRESS_ENV, "1") != "0"


def lr_factor(
    step: int,
    steps: int,
    warmup: int = 0,
    decay: str = "constant",
    min_factor: float = 0.0,
) -> float:
    """The learning rate of update ``step`` (0-based) as a fraction of the peak rate.

    Linear warm-up from ``1/warmup`` to 1 over the first ``warmup`` updates, then
    ``decay``: ``"constant"`` (stay at 1), ``"linear"`` or ``"cosine"`` (fall to
    ``min_factor`` at the last update).
    """
    if decay not in SCHEDULES:
        raise ValueError(f"decay must be one of {SCHEDULES}, got {decay!r}")
    if step < warmup:
        return (step + 1) / warmup
    if decay == "constant" or steps <= warmup + 1:
        return 1.0
    done = (step - warmup) / (
        steps - warmup - 1
    )  # 0 at the end of warm-up, 1 at the end
    if decay == "linear":
        shape = 1.0 - done
    else:
        shape = 0.5 * (1.0 + math.cos(math.pi * done))
    return min_factor + (1.0 - min_factor) * shape


def _progress_bar():
    """tqdm's notebook widget where ipywidgets is installed (Jupyter, Colab), else text."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    return tqdm


def train(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], Tensor],
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    clip: float = 1.0,
    warmup: int = 0,
    decay: str = "constant",
    min_lr_factor: float = 0.0,
    progress: bool | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Run ``steps`` AdamW updates on batches drawn (cycling) from ``batches``.

    Returns the training loss of every step. ``warmup``, ``decay`` and
    ``min_lr_factor`` shape the learning rate (:func:`lr_factor`); ``clip`` is the
    maximum gradient norm (0 or None: no clipping); ``on_step(step, loss)`` is called
    after every update (to evaluate now and then, say). A loss that becomes NaN or
    infinite does not stop the loop: the history records the divergence. The model
    is left in eval mode, ready to be evaluated.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    lr_factor(0, steps, warmup, decay, min_lr_factor)  # validates decay
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor(s, steps, warmup, decay, min_lr_factor)
    )
    history: list[float] = []
    bar = None
    if progress_enabled(progress):
        bar = _progress_bar()(
            total=steps, desc="training", file=sys.stderr, leave=False
        )
    model.train()
    it: Iterator = iter(())
    for step in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            it = iter(batches)
            batch = next(it)
        loss = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        history.append(loss.item())
        if bar is not None:
            bar.update(1)
            if step % 10 == 0 or step == steps - 1:
                bar.set_postfix(loss=f"{history[-1]:.4f}", refresh=False)
        if on_step is not None:
            on_step(step, history[-1])
    if bar is not None:
        bar.close()
    model.eval()
    return history
