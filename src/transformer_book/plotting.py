"""Plots the book draws again and again: attention maps and measured curves."""

from __future__ import annotations

from typing import Optional, Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor

__all__ = ["attention_map", "attention_maps"]


def attention_map(weights: Tensor, tokens: Optional[Sequence[str]] = None, keys: Optional[Sequence[str]] = None,
                  ax: Optional[plt.Axes] = None, title: str = "attention weights") -> plt.Axes:
    """Heatmap of one (Tq, Tk) weight matrix: row i shows where query i looks."""
    if weights.dim() != 2:
        raise ValueError(f"weights must have shape (Tq, Tk), got {tuple(weights.shape)}")
    ax = ax or plt.gca()
    im = ax.imshow(weights.detach().float().cpu(), cmap="viridis", vmin=0.0)
    keys = tokens if keys is None else keys
    if tokens is not None:
        ax.set_yticks(range(len(tokens)), tokens)
    if keys is not None:
        ax.set_xticks(range(len(keys)), keys, rotation=60, ha="right")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    plt.colorbar(im, ax=ax, fraction=0.046)
    return ax


def attention_maps(weights: Tensor, tokens: Optional[Sequence[str]] = None, title: str = "head") -> plt.Figure:
    """One heatmap per head of an (H, Tq, Tk) weight tensor, side by side."""
    if weights.dim() != 3:
        raise ValueError(f"weights must have shape (H, Tq, Tk), got {tuple(weights.shape)}")
    n = weights.shape[0]
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.2), squeeze=False)
    for h, ax in enumerate(axes[0]):
        attention_map(weights[h], tokens, ax=ax, title=f"{title} {h}")
        if h:
            ax.set_ylabel("")
    fig.tight_layout()
    return fig
