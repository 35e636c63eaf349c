"""[CLS] against mean pooling (chapter 05): where a [CLS] model reads, and what the
seeds allow one to say about the two poolings.

A :class:`~transformer_book.classifiers.SentenceClassifier` pools a sentence either with
a learned [CLS] vector or with the mean over its real tokens. Chapter 05 trains both,
paired by seed, on ATIS intents. :func:`cls_attention_shares` measures how a [CLS]
model's first block spreads the [CLS] position's attention over the words (by kind of
slot tag, by word, and relative to the same position's mean), :func:`kind_shares` reads
one of its tables over the seeds, and :func:`read_by_every`
keeps the words every seed's model reads more, or less, than an even share.
:func:`pooling_verdict` and :func:`pooling_conclusion` put the accuracies' comparison
over seeds in words that claim no more than the seeds show
(``report.compare_seeds``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import torch

from .classifiers import SentenceClassifier
from .report import compare_seeds
from .vocab import Vocab

__all__ = [
    "cls_attention_shares",
    "kind_shares",
    "read_by_every",
    "pooling_verdict",
    "PoolingConclusion",
    "pooling_conclusion",
]


@torch.no_grad()
def cls_attention_shares(
    model: SentenceClassifier,
    words: Vocab,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    min_count: int = 30,
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """How a [CLS] model's first block spreads the [CLS] position's attention (mean over
    the heads) over the words of tagged sentences, all in one batch.

    Each word's share is its weight among the words' weights times the sentence length
    (1 = an even share, the 1/T of mean pooling). Returns the mean share per kind of
    gold tag (``"O"``, ``"city"`` for ``*city_name``, ``"slot"`` for the others), per
    word that occurs at least ``min_count`` times, and per kind of tag after dividing
    each share by the mean share of all the words at the same position.
    """
    ids, lengths = words.encode_batch(sentences)  # (N, T_max)
    device = next(model.parameters()).device
    w = model.attention_weights(ids.to(device))  # (N, H, 1 + T, 1 + T)
    w = w[:, :, 0, 1:].mean(dim=1).cpu()  # (N, T_max): from [CLS] to each word
    w = w / w.sum(dim=1, keepdim=True) * lengths[:, None]  # 1 = an even share
    real = torch.arange(w.shape[1]) < lengths[:, None]  # (N, T_max)
    at_position = (w * real).sum(dim=0) / real.sum(dim=0)  # (T_max,): mean per position
    ratio = (w / at_position).tolist()  # (N, T_max): share / its position's mean
    by_kind, by_word, matched = defaultdict(list), defaultdict(list), defaultdict(list)
    for n, (sent, row_tags, row) in enumerate(zip(sentences, tags, w.tolist())):
        for t, (word, tag, share) in enumerate(zip(sent, row_tags, row)):
            city = tag.endswith("city_name")
            kind = "O" if tag == "O" else "city" if city else "slot"
            by_kind[kind].append(share)
            matched[kind].append(ratio[n][t])
            by_word[word].append(share)
    mean = {k: statistics.mean(v) for k, v in by_kind.items()}
    frequent = {
        x: statistics.mean(v) for x, v in by_word.items() if len(v) >= min_count
    }
    return mean, frequent, {k: statistics.mean(v) for k, v in matched.items()}


KINDS = ("O", "city", "slot")  # the kinds of gold tag cls_attention_shares reads


def kind_shares(
    shares: Sequence[tuple[dict[str, float], ...]], table: int
) -> tuple[dict[str, list[float]], dict[str, str], str]:
    """One table of :func:`cls_attention_shares` (``table`` 0: the mean share per kind,
    2: relative to the same position's mean) over the seeds (``shares``, one result
    per seed): per kind of :data:`KINDS`, the share of every seed, the same as
    "mean (min–max)" in two decimals, and city names against other slots, each seed's
    model against itself (``report.compare_seeds``, paired)."""
    if table not in (0, 2) or not shares:
        raise ValueError(f"table must be 0 or 2 and shares non-empty, got {table}")
    per_kind = {k: [seed_shares[table][k] for seed_shares in shares] for k in KINDS}
    texts = {
        k: f"{statistics.mean(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"
        for k, xs in per_kind.items()
    }
    cities = compare_seeds(per_kind["slot"], per_kind["city"], pairs=True)
    return per_kind, texts, cities


def pooling_verdict(cls: Sequence[float], mean: Sequence[float]) -> str:
    """[CLS] against mean pooling, one accuracy per seed each, paired by seed (the seed
    gives both the same start and batches): a ranking only where
    ``report.compare_seeds(..., pairs=True)`` gives one, else its words for why not."""
    words = compare_seeds(mean, cls, pairs=True)  # how [CLS] compares
    passes = "higher for every seed, and the paired t-test passes"
    if words == "higher for every seed":
        return f"[CLS] pooling is ahead: {passes}"
    if words == "lower for every seed":
        return f"mean pooling is ahead: {passes}"
    return words


def read_by_every(
    per_seed: Sequence[dict[str, float]], k: int = 5
) -> tuple[list[str], list[str]]:
    """The words that every seed's model reads more than an even share (share > 1, from
    the per-word dicts of :func:`cls_attention_shares`, one per seed, over the same
    words), most read first, and those every one reads less, least read first: the
    first ``k`` of each, by the mean share over the seeds."""
    mean_share = {x: statistics.mean(d[x] for d in per_seed) for x in per_seed[0]}
    above = [x for x in mean_share if all(d[x] > 1 for d in per_seed)]
    below = [x for x in mean_share if all(d[x] < 1 for d in per_seed)]
    most = sorted(above, key=lambda x: -mean_share[x])[:k]
    return most, sorted(below, key=lambda x: mean_share[x])[:k]


class PoolingConclusion(NamedTuple):
    """What the two poolings' test accuracies over seeds allow one to say."""

    gap: float  # between the two poolings' mean accuracies
    ranges: list[float]  # max - min of each pooling's seeds: [CLS], then mean
    gap_vs_seeds: str  # the gap against those ranges, in words
    conclusion: str  # what the seeds tell about the two poolings
    selective: str  # what [CLS]'s selective reading did for the accuracy


def pooling_conclusion(
    cls: Sequence[float], mean: Sequence[float], n_queries: int
) -> PoolingConclusion:
    """What the test accuracies of the two poolings (one per seed each, on
    ``n_queries`` queries) allow one to say (:class:`PoolingConclusion`), in words that
    follow :func:`pooling_verdict`."""
    ranges = [max(cls) - min(cls), max(mean) - min(mean)]
    gap = abs(statistics.mean(cls) - statistics.mean(mean))
    if gap < min(ranges):
        gap_vs_seeds = "smaller than the spread of either pooling's seeds"
    elif gap < max(ranges):
        gap_vs_seeds = "smaller than the spread of one pooling's seeds, not the other's"
    else:
        gap_vs_seeds = "larger than the spread of either pooling's seeds"
    n, verdict = len(cls), pooling_verdict(cls, mean)
    if verdict.endswith("no ranking"):
        moves = "more than" if gap < min(ranges) else "about as much as"
        conclusion = f"{n} seeds cannot tell the two poolings apart: the seed alone "
        conclusion += f"moves the accuracy {moves} the choice of pooling"
        selective = "did not make [CLS] pooling measurably more accurate here"
    else:
        queries = round(gap * n_queries)
        conclusion = f"the ranking holds for these {n} seeds, by {queries} of the "
        conclusion += f"{n_queries} test queries"
        selective = "put [CLS] pooling ahead on test here, by that small margin"
        if not verdict.startswith("[CLS]"):
            selective = (
                "did not make [CLS] pooling more accurate here: mean pooling led"
            )
    return PoolingConclusion(gap, ranges, gap_vs_seeds, conclusion, selective)
