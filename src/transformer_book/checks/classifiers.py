"""Checks for the exercises of chapter 05 on sentence classification: pooling contextual
embeddings over the real tokens only (exercise 3 fixes a mean pooling that padding
breaks)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import masks
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_mean_pool"]


def check_mean_pool(fn: Callable[[Tensor, Tensor], Tensor]) -> str:
    """``fn(h, lengths)`` with h (B, T, D) and lengths (B,) must average each row's first
    ``lengths[b]`` vectors."""
    g = torch.Generator().manual_seed(5)
    h = torch.randn(3, 6, 4, generator=g)
    lengths = torch.tensor([6, 2, 4])
    keep = torch.arange(6)[None, :] < lengths[:, None]  # (B, T)
    expected = masks.masked_mean(h, keep)  # (B, D)
    got = call(fn, h.clone(), lengths.clone())
    if isinstance(got, Tensor) and got.shape == expected.shape:
        if torch.allclose(got, h.mean(dim=1), atol=1e-5):
            raise ExerciseError(
                "You averaged over all T positions, padding included: the padding "
                "vectors (whatever the encoder made of <pad>) leak into the sentence "
                "vector. Average only t < length."
            )
        masked_sum = (h * keep[..., None]).sum(dim=1)  # (B, D)
        if torch.allclose(got, masked_sum / h.shape[1], atol=1e-5):
            raise ExerciseError(
                "The padding is zeroed, but you divided by T: divide by each sentence's own length."
            )
        if torch.allclose(got, h.sum(dim=1) / lengths[:, None], atol=1e-5):
            raise ExerciseError(
                "You divided by the length but summed the padding vectors too: zero them first."
            )
        one_more = torch.arange(6)[None, :] <= lengths[:, None]  # (B, T): t <= length
        for divisor in (lengths, one_more.sum(dim=1)):
            extra = (h * one_more[..., None]).sum(dim=1) / divisor[:, None]  # (B, D)
            if torch.allclose(got, extra, atol=1e-5):
                raise ExerciseError(
                    "Your mask keeps one position too many (t <= length): position "
                    "`length` is the first <pad>, so every padded sentence takes one "
                    "padding vector into its average. Keep t < length; a sentence "
                    "without padding hides the bug."
                )
    expect_close(
        got,
        expected,
        "mean pooling",
        "Zero the padded positions, sum over T, divide by the length.",
    )
    return passed(
        "the sentence vector is the average of the real tokens only, so padding cannot change it."
    )
