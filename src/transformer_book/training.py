"""A small, explicit training loop shared by the chapters that train models.

The task-specific part is a ``loss_fn(model, batch) -> loss`` the chapter writes; the
loop owns the optimiser, gradient clipping and the loss history, nothing else.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import torch
from torch import Tensor, nn

__all__ = ["train"]


def train(model: nn.Module, batches: Iterable, loss_fn: Callable[[nn.Module, object], Tensor], steps: int,
          lr: float = 1e-3, weight_decay: float = 0.0, clip: float = 1.0, warmup: int = 0) -> list[float]:
    """Run ``steps`` AdamW updates on batches drawn (cycling) from ``batches``; return the loss per step.

    ``warmup`` steps of linear learning-rate warm-up, then constant. The model is left in
    eval mode afterwards, ready to be evaluated.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
    history: list[float] = []
    model.train()
    it: Iterator = iter(())
    for _ in range(steps):
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
    model.eval()
    return history
