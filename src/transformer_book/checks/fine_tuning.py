"""Self-checking exercises of chapter 12: the best answer span, and labels for the
first sub-word of each word."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import qa, tagging
from ._core import ExerciseError, call, passed

__all__ = ["check_best_span", "check_first_subword_labels"]


def check_best_span(fn: Callable) -> None:
    """``fn(start, end, max_len)`` with 1-D score tensors must return ``(i, j)``, the
    span maximising ``start[i] + end[j]`` with ``i <= j < i + max_len``. Where spans
    tie (the case "too long" has two), any of the best is accepted: the check compares
    scores, not indices, so a tie may be broken either way."""
    cases = [
        ([0.0, 0.0, 5.0, 0.0], [5.0, 0.0, 0.0, 1.0], 4, "best end before best start"),
        ([3.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 4.0], 2, "too long"),
        ([1.0, 2.0, 0.0], [0.0, 0.5, 3.0], 3, "plain"),
    ]
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        s, e = torch.randn(7, generator=g), torch.randn(7, generator=g)
        cases.append((s.tolist(), e.tolist(), 3, "random"))
    for s, e, L, what in cases:
        st, en = torch.tensor(s), torch.tensor(e)
        exp = tuple(t.item() for t in qa.best_span(st[None], en[None], max_len=L))
        got = call(fn, st, en, L)
        try:
            got = (int(got[0]), int(got[1]))
        except (TypeError, ValueError, IndexError):
            raise ExerciseError(f"Return a pair (i, j) of ints; got {got!r}.") from None
        i, j = got
        allowed = 0 <= i <= j < min(len(s), i + L)
        if allowed and st[i] + en[j] >= st[exp[0]] + en[exp[1]] - 1e-6:
            continue  # the best score (a tie broken another way is as good)
        hint = ""
        if (i, j) == (int(st.argmax()), int(en.argmax())):
            hint = (
                " You took the best start and the best end separately; they must be"
                " chosen together, with i <= j and j - i < max_len."
            )
        elif j < i:
            hint = " Your span ends before it starts: require i <= j."
        elif j - i >= L:
            hint = (
                f" Your span has {j - i + 1} tokens; at most max_len={L} are allowed."
            )
        raise ExerciseError(
            f"Case '{what}': start={s}, end={e}, max_len={L}: you returned {got}, "
            f"expected {exp}.{hint}"
        )
    return passed("the span is searched jointly, start <= end, within the length cap.")


def check_first_subword_labels(fn: Callable) -> None:
    """``fn(word_of, word_labels)`` must return one label per piece: the word's label
    at its first piece and -100 at the others."""
    cases = [
        ([0, 1, 1, 2], [3, 7, 0], "one word in two pieces"),
        ([0, 0, 0], [5], "one word in three pieces"),
        ([0, 1, 2], [1, 1, 1], "no word cut"),
        ([0, 1, 1, 2, 2, 2], [4, 4, 2], "same label on neighbours"),
    ]
    for word_of, labels, what in cases:
        exp = tagging.first_subword_labels(word_of, labels)
        got = list(call(fn, list(word_of), list(labels)))
        if got == exp:
            continue
        hint = ""
        every = [labels[w] for w in word_of]
        if got == every:
            hint = (
                " Every piece got its word's label: the loss would then count a long"
                " word several times. Keep only the first piece, -100 for the rest."
            )
        elif len(got) != len(word_of):
            hint = f" Return one label per piece ({len(word_of)}), not per word."
        elif got[0] == tagging.IGNORE:
            hint = " The first piece of a word carries its label; mark the others."
        raise ExerciseError(
            f"Case '{what}': word_of={word_of}, labels={labels}: you returned {got}, "
            f"expected {exp}.{hint}"
        )
    return passed("each word is counted once, at its first piece.")
