"""Chapter 11's sentence-similarity experiment: how close all-MiniLM-L6-v2's sentence
vectors (:func:`bert.sentence_embeddings`) put sentences of one group against those of
others (:func:`similarity_by_group`), and how well they label queries from a few
labelled examples by their nearest neighbour (:func:`few_shot_1nn`), beside the same
1-NN on bags of words (:func:`bag_of_words`), with no model at all.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch
from torch import Tensor

from .bert import BertModel, sentence_embeddings
from .tokenizer import WordPiece

__all__ = [
    "similarity_by_group",
    "few_shot",
    "bag_of_words",
    "nearest_label_accuracy",
    "few_shot_1nn",
]


def similarity_by_group(sim: Tensor, group_of: Tensor) -> dict[str, float]:
    """Similarities of N items within and across groups: the mean over pairs of
    different items of one group (``within``), over pairs of items of different groups
    (``across``), and the share of items whose most similar other item is in their
    group (``hits``). Shapes: sim (N, N), e.g. cosines, group_of (N,)."""
    same_group = group_of[:, None] == group_of[None, :]  # (N, N)
    other = ~torch.eye(len(sim), dtype=torch.bool)
    nearest = sim.clone().fill_diagonal_(-1).argmax(dim=1)  # the most similar other
    return {
        "within": sim[same_group & other].mean().item(),
        "across": sim[~same_group].mean().item(),
        "hits": (group_of[nearest] == group_of).float().mean().item(),
    }


def few_shot(
    pool: Sequence[tuple[str, str]], labels: Sequence[str], per_label: int, seed: int
) -> tuple[list[str], Tensor]:
    """``per_label`` examples of every label drawn at random (``random.Random(seed)``,
    label by label in the order of ``labels``) from ``pool``, (text, label) pairs.
    Returns their texts and their labels as indices into ``labels`` (shape (S,))."""
    rng = random.Random(seed)
    shots = [
        pair
        for label in labels
        for pair in rng.sample([p for p in pool if p[1] == label], per_label)
    ]
    return [t for t, _ in shots], torch.tensor([labels.index(y) for _, y in shots])


def bag_of_words(texts: Sequence[str]) -> Tensor:
    """Word-count vectors over the (space-separated) words of ``texts``, scaled to unit
    length, so that a dot product is a cosine; no model at all.

    Shapes: len(texts) texts -> (len(texts), number of distinct words)."""
    index = {w: i for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}
    bags = torch.zeros(len(texts), len(index))
    for row, t in enumerate(texts):
        for w in t.split():
            bags[row, index[w]] += 1
    return bags / bags.norm(dim=1, keepdim=True)


def nearest_label_accuracy(
    queries: Tensor, labels: Tensor, shots: Tensor, shot_labels: Tensor
) -> float:
    """1-nearest neighbour: the share of ``queries`` whose most similar labelled shot
    (largest dot product) has their label.

    Shapes: queries (N, D), labels (N,), shots (S, D), shot_labels (S,)."""
    predicted = shot_labels[(queries @ shots.T).argmax(dim=1)]  # (N,)
    return (predicted == labels).float().mean().item()


def few_shot_1nn(
    model: BertModel,
    tok: WordPiece,
    pool: Sequence[tuple[str, str]],
    labels: Sequence[str],
    queries: Sequence[str],
    query_labels: Tensor,
    per_label: int,
    seeds: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """1-nearest-neighbour accuracy on ``queries`` (labels: indices into ``labels``,
    shape (N,)) for each seed's draw of ``per_label`` labelled examples per label
    (:func:`few_shot`), in ``model``'s sentence-embedding space
    (:func:`sentence_embeddings`) and with :func:`bag_of_words` (over the words of the
    queries and that draw). Returns two tensors of shape (len(seeds),)."""
    query_emb = sentence_embeddings(model, tok, queries)  # (N, D)
    n, accs, bow_accs = len(queries), [], []
    for seed in seeds:
        shot_q, shot_y = few_shot(pool, labels, per_label, seed)
        shot_emb = sentence_embeddings(model, tok, shot_q)  # (S, D)
        accs.append(nearest_label_accuracy(query_emb, query_labels, shot_emb, shot_y))
        bags = bag_of_words([*queries, *shot_q])  # (N + S, words)
        bow = bags[:n], query_labels, bags[n:], shot_y
        bow_accs.append(nearest_label_accuracy(*bow))
    return torch.tensor(accs), torch.tensor(bow_accs)
