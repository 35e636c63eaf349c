"""Checks for the exercises of chapter 05 on sentence classification: pooling contextual
embeddings over the real tokens only (exercise 3: a max pooling that zeroes the padding,
which padding still breaks, since zero can be the maximum)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_max_pool"]


def check_max_pool(fn: Callable[[Tensor, Tensor], Tensor]) -> str:
    """``fn(h, lengths)`` with h (B, T, D) and lengths (B,) must return, per feature,
    the largest value over each row's first ``lengths[b]`` vectors."""
    g = torch.Generator().manual_seed(6)
    h = torch.randn(3, 6, 4, generator=g)
    h[1, :2, 0] = -torch.rand(2, generator=g) - 0.5  # a feature < 0 at every real token
    h[2, 5] = 5.0  # the last padding vector would win every max
    lengths = torch.tensor([6, 2, 4])
    keep = torch.arange(6)[None, :] < lengths[:, None]  # (B, T)
    expected = h.masked_fill(~keep[..., None], float("-inf")).amax(dim=1)  # (B, D)
    got = call(fn, h.clone(), lengths.clone())
    if isinstance(got, Tensor) and got.shape == expected.shape:
        if torch.allclose(got, h.amax(dim=1)):
            raise ExerciseError(
                "You took the max over all T positions, padding included: a padding "
                "vector with a large value wins the max. Mask the padding first."
            )
        if torch.allclose(got, (h * keep[..., None]).amax(dim=1)):
            raise ExerciseError(
                "Multiplying by the mask sets the padding to 0, and 0 wins the max "
                "wherever a feature is negative at every real token (sentence 1, "
                "feature 0). Zero is a neutral value for a sum, not for a max: fill "
                "the padded positions with -inf (masked_fill) instead."
            )
        one_more = torch.arange(6)[None, :] <= lengths[:, None]  # (B, T): t <= length
        extra = h.masked_fill(~one_more[..., None], float("-inf")).amax(dim=1)
        if torch.allclose(got, extra):
            raise ExerciseError(
                "Your mask keeps one position too many (t <= length): position "
                "`length` is the first <pad>. Keep t < length."
            )
    expect_close(
        got,
        expected,
        "max pooling",
        "Fill the padded positions with -inf, then take the max over T.",
    )
    return passed(
        "the max runs over the real tokens only: a neutral value for a max is -inf, "
        "not the 0 that works for a sum."
    )
