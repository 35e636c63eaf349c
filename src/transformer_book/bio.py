"""BIO tags' rules and the best tag sequence that keeps them (chapter 05).

In BIO tagging a span of type ``x`` is ``B-x`` followed by ``I-x`` tags, and ``O`` is
outside every span, so ``I-x`` may only continue a ``B-x`` or an ``I-x``.
:func:`bio_transitions` writes these rules as boolean tables, and :func:`bio_viterbi`
finds, by dynamic programming (Viterbi), the sequence with the highest total
log-probability among those the tables allow. :func:`classifiers.predict_tags` decodes
with them, and so do chapters 05 and 07's taggers through
:meth:`slot_features.SlotIntentFeatures.tags_for`. :func:`stray_inside` finds the tags a
word-by-word tagger writes against the rules, and :func:`tag_counts` counts the tags a
word gets (after a given word, if asked).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["bio_transitions", "bio_viterbi", "stray_inside", "tag_counts"]


def bio_transitions(tags: Sequence[str]) -> tuple[Tensor, Tensor]:
    """Which tags may start a sentence and which may follow which, under BIO.

    ``I-x`` may only follow ``B-x`` or ``I-x``, so it can never come first; everything else is free.
    Shapes: returns start (C,) and allowed (C, C) bool, ``allowed[i, j]`` = tag j may follow tag i.
    """
    kind = [t[2:] if t[:2] in ("B-", "I-") else None for t in tags]
    inside = torch.tensor([t.startswith("I-") for t in tags])  # (C,)
    # (C, C): tags i and j are both B-/I- tags of the same type
    same = torch.tensor([[a is not None and a == b for b in kind] for a in kind])
    # (C, C): j is not an I-, or i and j share the type
    allowed = ~inside[None, :] | same
    return ~inside, allowed


def bio_viterbi(
    log_probs: Tensor, lengths: Tensor, start: Tensor, allowed: Tensor
) -> Tensor:
    """The tag sequence with the highest total log-probability among those the transition
    rules allow.

    Dynamic programming (Viterbi): the best score of a prefix ending in tag j at step t is
    ``δ_t(j) = log p_t(j) + max_i {δ_{t-1}(i) : i -> j allowed}``, then follow the arg-max back.
    Shapes: log_probs (B, T, C), lengths (B,), start (C,) and allowed (C, C) bool -> ids (B, T);
    positions past a sentence's length repeat its last tag.
    """
    B, T, C = log_probs.shape
    if start.shape != (C,) or allowed.shape != (C, C):
        raise ValueError(
            f"start must have shape ({C},) and allowed ({C}, {C}), got {tuple(start.shape)} "
            f"and {tuple(allowed.shape)}"
        )
    dev, neg_inf = log_probs.device, torch.finfo(log_probs.dtype).min
    if T == 0:
        return torch.zeros(B, 0, dtype=torch.long, device=dev)
    # (C, C): 0 for an allowed transition, the lowest float for a forbidden one
    trans = torch.zeros(C, C, dtype=log_probs.dtype, device=dev)
    trans = trans.masked_fill(~allowed.to(dev), neg_inf)
    score = log_probs[:, 0].masked_fill(~start.to(dev), neg_inf)  # (B, C)
    lengths = lengths.to(dev)
    stay = torch.arange(C, device=dev).expand(B, C)  # (B, C): "came from the same tag"
    back = []
    for t in range(1, T):
        # (b,): the sentences still running at step t
        run = (t < lengths).nonzero().squeeze(1)
        # (b, C, C) -> (b, C): the best previous tag for each tag, and its score
        best, arg = (score[run, :, None] + trans).max(dim=1)
        score = score.index_copy(0, run, best + log_probs[run, t])  # (B, C)
        # (B, C); finished sentences stay on their tag
        back.append(stay.index_copy(0, run, arg))
    path = [score.argmax(dim=-1)]  # (B,): the best last tag
    for arg in reversed(back):
        path.append(arg.gather(1, path[-1][:, None]).squeeze(1))  # (B,)
    return torch.stack(path[::-1], dim=1)  # (B, T)


def stray_inside(tags: Sequence[str]) -> list[int]:
    """Positions of the ``I-x`` tags that continue no ``B-x`` or ``I-x`` (the rules'
    breaches a word-by-word tagger can make)."""
    return [
        t
        for t, tag in enumerate(tags)
        if tag.startswith("I-") and (t == 0 or tags[t - 1][2:] != tag[2:])
    ]


def tag_counts(
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    word: str,
    previous: str | None = None,
) -> Counter:
    """How often ``word`` gets each tag in the tagged ``sentences`` (only right after
    ``previous``, if given)."""
    return Counter(
        row[t]
        for sent, row in zip(sentences, tags)
        for t in range(len(sent))
        if sent[t] == word and (previous is None or (t > 0 and sent[t - 1] == previous))
    )
