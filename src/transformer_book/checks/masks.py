"""Checks for the exercises of chapter 08 (sliding windows, receptive fields, tiles)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .. import masks
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_sliding_window_mask", "check_earliest_input", "check_merge_softmax"]


def _equal_mask(got: object, other: Tensor) -> bool:
    return (
        isinstance(got, Tensor)
        and got.shape == other.shape
        and torch.equal(got.bool(), other)
    )


def check_sliding_window_mask(fn: Callable[[int, int, int], Tensor]) -> None:
    """``fn(n_queries, n_keys, window)`` must return the causal sliding-window mask:
    query i sits at p = i + n_keys - n_queries and sees key j iff 0 <= p - j < window."""
    cases = [(6, 6, 3), (3, 8, 2), (1, 10, 4), (5, 5, 1), (4, 4, 10), (2, 9, 9)]
    for n_q, n_k, w in cases:
        got = call(fn, n_q, n_k, w)
        expected = masks.sliding_window_mask(n_q, n_k, window=w)
        where = f"n_queries={n_q}, n_keys={n_k}, window={w}"
        p_is_i = masks.sliding_window_mask(n_q, window=w)  # offset ignored
        mistakes = {
            "The query sees window + 1 keys: the window counts the token itself, so "
            "allow 0 <= p - j < window (strict <).": masks.sliding_window_mask(
                n_q, n_k, window=w + 1
            ),
            "This window looks both ways: a causal window never lets a query see a key "
            "after it (require p - j >= 0).": masks.sliding_window_mask(
                n_q, n_k, window=w, causal=False
            ),
            "This is the full causal mask: keys more than window - 1 positions back "
            "must be cut off too.": masks.causal_mask(n_q, n_k),
        }
        for message, wrong in mistakes.items():
            if not torch.equal(wrong, expected) and _equal_mask(got, wrong):
                raise ExerciseError(f"{where}: {message}")
        if (
            n_q != n_k
            and isinstance(got, Tensor)
            and got.shape == (n_q, n_k)
            and torch.equal(
                got.bool(),
                torch.cat(
                    (p_is_i, torch.zeros(n_q, n_k - n_q, dtype=torch.bool)), dim=1
                ),
            )
        ):
            raise ExerciseError(
                f"{where}: you used the query index i as its position. With fewer "
                "queries than keys the queries are the *last* positions: "
                "p = i + n_keys - n_queries."
            )
        if isinstance(got, Tensor) and got.dtype != torch.bool:
            raise ExerciseError(
                f"{where}: return a boolean mask (True = may attend), got {got.dtype}."
            )
        expect_close(got, expected, f"mask for {where}", "0 <= p - j < window.")
    return passed(
        "each query sees itself and the window - 1 keys before it, and with "
        "window >= n_keys the mask is the causal one."
    )


def _earliest_by_reachability(t: int, windows: Sequence[int | None]) -> int:
    """Smallest input position connected to output t, by multiplying layer masks."""
    T = t + 1
    reach = torch.eye(T, dtype=torch.float64)[t]  # (T,): output t
    for w in reversed(list(windows)):
        m = (
            masks.causal_mask(T)
            if w is None
            else masks.sliding_window_mask(T, window=w)
        )
        reach = ((reach @ m.double()) > 0).double()  # positions one layer further down
    return int(reach.nonzero()[0])


def check_earliest_input(fn: Callable[[int, Sequence[int | None]], int]) -> None:
    """``fn(t, windows)``: the smallest input position that can influence output t of a
    causal stack whose layer l has sliding window ``windows[l]`` (None = full causal)."""
    cases = [
        (20, [3]),
        (20, [3, 3]),
        (20, [5, 5, 5]),
        (100, [8, 8, 8, 8]),
        (100, [4, None, 4]),
        (6, [4, 4, 4]),
        (30, [2, 7, 3]),
        (0, [3]),
        (50, [1, 1]),
    ]
    for t, windows in cases:
        got = call(fn, t, list(windows))
        expected = _earliest_by_reachability(t, windows)
        where = f"t={t}, windows={list(windows)}"
        if isinstance(got, Tensor):
            got = got.item()
        if not isinstance(got, int):
            raise ExerciseError(f"{where}: return an int, got {type(got).__name__}.")
        local = [w for w in windows if w is not None]
        if got == expected:
            continue
        if None in windows and got == max(0, t - sum(w - 1 for w in local)):
            raise ExerciseError(
                f"{where}: got {got}, expected {expected}. A full (global) causal layer "
                "lets every position see position 0, so one global layer anywhere in "
                "the stack makes the earliest input 0."
            )
        if got == t - sum(w - 1 for w in local) and got < 0:
            raise ExerciseError(
                f"{where}: got {got}. Positions start at 0: clamp at 0."
            )
        if got == max(0, t - sum(local)):
            raise ExerciseError(
                f"{where}: got {got}, expected {expected}. Each layer reaches window - 1 "
                "positions further back, not window: the window includes the token "
                "itself."
            )
        raise ExerciseError(
            f"{where}: got {got}, expected {expected}. Follow the path down: each "
            "layer with window w moves the earliest visible position w - 1 back."
        )
    return passed(
        "L layers of window w reach L·(w − 1) positions back, and one global layer "
        "reaches the start."
    )


def _partial(scores: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(m, l, o) of one set of keys: max score, Σ exp(s - m), Σ exp(s - m) v."""
    m = scores.amax(dim=-1, keepdim=True)  # (n, 1)
    safe = m.masked_fill(m == float("-inf"), 0.0)
    e = torch.exp(scores - safe)  # (n, k)
    return m, e.sum(dim=-1, keepdim=True), e @ values


def check_merge_softmax(fn: Callable[..., tuple[Tensor, Tensor, Tensor]]) -> None:
    """``fn(m1, l1, o1, m2, l2, o2)`` must merge the running softmax statistics of two
    disjoint sets of keys into those of their union: (m, l, o)."""
    gen = torch.Generator().manual_seed(8)
    n, k1, k2, d = 5, 4, 6, 3
    scores = 8.0 * torch.randn(n, k1 + k2, generator=gen)  # wide: rescaling matters
    scores[0, :k1] -= 30.0  # row 0: the maximum lies in the second set
    scores[1, k1:] = float("-inf")  # row 1: every key of the second set is masked
    values = torch.randn(k1 + k2, d, generator=gen)
    p1 = _partial(scores[:, :k1], values[:k1])
    p2 = _partial(scores[:, k1:], values[k1:])
    expected = _partial(scores, values)
    got = call(fn, *p1, *p2)
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise ExerciseError("return a tuple (m, l, o) of three tensors.")
    m, l_sum, o = got
    if isinstance(o, Tensor) and isinstance(l_sum, Tensor) and o.shape == (n, d):
        if torch.allclose(o, p1[2] + p2[2], atol=1e-4):
            raise ExerciseError(
                "o = o1 + o2 adds terms measured against two different maxima. Move "
                "both to the new maximum first: o1·exp(m1 − m) + o2·exp(m2 − m)."
            )
        if torch.allclose(o, expected[2] / expected[1], atol=1e-4):
            raise ExerciseError(
                "You returned the normalised output o / l. Keep o unnormalised (the "
                "division happens once, after the last block)."
            )
    if isinstance(l_sum, Tensor) and torch.allclose(l_sum, p1[1] + p2[1], atol=1e-4):
        raise ExerciseError(
            "l = l1 + l2 adds sums of exp(s − m1) and exp(s − m2): rescale each to the "
            "new maximum m = max(m1, m2) first."
        )
    expect_close(m, expected[0], "m", "m = max(m1, m2).")
    expect_close(
        l_sum, expected[1], "l", "l = l1·exp(m1 − m) + l2·exp(m2 − m).", rtol=1e-4
    )
    expect_close(o, expected[2], "o", "o = o1·exp(m1 − m) + o2·exp(m2 − m).")
    attn = scores.softmax(dim=-1) @ values
    expect_close(o / l_sum, attn, "o / l", "o / l must equal softmax(scores) V.")
    # A query whose keys are all masked in BOTH sets (a windowed tile can hold such a
    # row): m1 = m2 = -inf, l = 0, o = 0. The merge must give the same back, not NaN
    # (exp(m1 - m) is exp(-inf + inf) there unless the maximum is guarded).
    masked = torch.full((1, 3), float("-inf"))  # one query, every key masked
    empty = _partial(masked, values[:3])  # m = -inf (1, 1), l = 0 (1, 1), o = 0 (1, d)
    got_empty = call(fn, *empty, *empty)
    if isinstance(got_empty, (tuple, list)) and len(got_empty) == 3:
        if any(isinstance(t, Tensor) and t.isnan().any() for t in got_empty[1:]):
            raise ExerciseError(
                "a row whose keys are masked in both sets (m1 = m2 = -inf) gives NaN: "
                "exp(m1 - m) is exp(-inf + inf). Measure from 0 where m = -inf "
                "(m_safe = torch.where(m == -inf, 0, m)), so that l = 0 and o = 0 stay."
            )
        expect_close(got_empty[1], empty[1], "l", "a fully masked row keeps l = 0.")
        expect_close(got_empty[2], empty[2], "o", "a fully masked row keeps o = 0.")
    return passed(
        "merging (m, l, o) block by block gives exactly softmax(scores) V: the step "
        "tiled attention repeats for every tile."
    )
