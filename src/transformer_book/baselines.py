"""Baselines: what a model scores without reading its input (chapters 9–14).

A loss or an accuracy means little alone. Beside every one the book prints what the
simplest model of the same data scores on the same held-out examples:

- a **unigram** model predicts every token from its training frequency,
  ``p(w) = (c(w) + k) / (N + k·V)`` (add-k smoothing, Laplace's rule for k = 1), and costs
  ``-mean log p(w)`` nats per held-out token;
- a **bigram** model predicts a token from the one to its left,
  ``p(w | v) = (c(v, w) + k) / (c(v) + k·V)`` — what a language model learns first, and
  what a masked or span-corruption model can do by reading one neighbour only. Add-one
  (k = 1) is far too strong for a bigram over hundreds of words (it adds V pseudo-counts
  to every row): :func:`choose_bigram_k` picks k on held-out *dev* pairs, and the
  tuned bigram is the fair yardstick;
- the **majority class** predicts the training split's most frequent label.

All counts come from the training split only; ids are integers in ``[0, vocab_size)``.
Losses are in nats (divide by ln 2 for bits).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

import torch
from torch import Tensor

__all__ = [
    "unigram_log_probs",
    "bigram_log_probs",
    "unigram_loss",
    "bigram_loss",
    "window_losses",
    "choose_bigram_k",
    "majority_class",
    "majority_accuracy",
]


def _ids(name: str, ids: Tensor | Sequence[int], vocab_size: int) -> Tensor:
    t = torch.as_tensor(ids).reshape(-1)
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {t.dtype}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab_size):
        raise ValueError(
            f"{name} must hold ids in [0, vocab_size={vocab_size}), "
            f"got values in [{int(t.min())}, {int(t.max())}]"
        )
    return t.long()


def _check(vocab_size: int, k: float) -> None:
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    if not k > 0:
        raise ValueError(f"k (the add-k smoothing) must be > 0, got {k}")


def unigram_log_probs(
    train_ids: Tensor | Sequence[int],
    vocab_size: int,
    k: float = 1.0,
    exclude: Iterable[int] = (),
) -> Tensor:
    """log p(w) of every id under an add-k unigram model of ``train_ids``.

    ``exclude``: ids the model never predicts (special tokens such as ``[UNK]`` or a
    sentinel): their probability is 0 (log-probability −inf) and the rest renormalises.

    Shapes: train_ids (N,) or any shape → (vocab_size,)
    """
    _check(vocab_size, k)
    counts = torch.bincount(
        _ids("train_ids", train_ids, vocab_size), minlength=vocab_size
    )
    smoothed = counts.double() + k  # (V,)
    banned = torch.tensor(sorted(set(exclude)), dtype=torch.long)
    if banned.numel():
        _ids("exclude", banned, vocab_size)
        smoothed[banned] = 0.0
    return (smoothed / smoothed.sum()).log().float()


def bigram_log_probs(
    train_ids: Tensor | Sequence[int], vocab_size: int, k: float = 1.0
) -> Tensor:
    """log p(w | v), the add-k bigram model of the stream ``train_ids``: row v, column w.

    Shapes: train_ids (N,) → (vocab_size, vocab_size)
    """
    _check(vocab_size, k)
    t = _ids("train_ids", train_ids, vocab_size)
    if t.numel() < 2:
        raise ValueError(f"train_ids needs at least 2 tokens, got {t.numel()}")
    pairs = t[:-1] * vocab_size + t[1:]  # (N-1,) one index per (left, right) pair
    counts = torch.bincount(pairs, minlength=vocab_size * vocab_size)
    smoothed = counts.double().view(vocab_size, vocab_size) + k  # (V, V)
    return (smoothed / smoothed.sum(dim=1, keepdim=True)).log().float()


def unigram_loss(log_probs: Tensor, targets: Tensor | Sequence[int]) -> float:
    """Mean −log p(target) in nats, e.g. on the masked tokens of a held-out MLM batch.

    Shapes: log_probs (V,), targets any shape → a float
    """
    if log_probs.dim() != 1:
        raise ValueError(f"log_probs must be (V,), got shape {tuple(log_probs.shape)}")
    t = _ids("targets", targets, log_probs.shape[0])
    if not t.numel():
        raise ValueError("targets is empty")
    return -log_probs[t.to(log_probs.device)].double().mean().item()


def bigram_loss(
    log_probs: Tensor, left: Tensor | Sequence[int], targets: Tensor | Sequence[int]
) -> float:
    """Mean −log p(target | left) in nats. For a stream ``s``: ``left=s[:-1]``,
    ``targets=s[1:]``; for a hidden word, ``left`` is the word before it.

    Shapes: log_probs (V, V), left and targets the same shape → a float
    """
    if log_probs.dim() != 2 or log_probs.shape[0] != log_probs.shape[1]:
        raise ValueError(
            f"log_probs must be (V, V), got shape {tuple(log_probs.shape)}"
        )
    V = log_probs.shape[0]
    v, w = _ids("left", left, V), _ids("targets", targets, V)
    if v.shape != w.shape or not w.numel():
        raise ValueError(
            f"left and targets must be non-empty and alike, got {v.numel()} and {w.numel()}"
        )
    return -log_probs[v, w].double().mean().item()


def window_losses(
    train_ids: Tensor,
    batches: Iterable[tuple[Tensor, Tensor]],
    vocab_size: int,
) -> dict[str, float]:
    """The unigram's and the add-one bigram's loss (nats per token), both fitted on
    ``train_ids``, on exactly the targets a language model is scored on: every target
    of ``batches`` (``(inputs, targets)`` windows, the targets the inputs shifted by
    one, as ``lm_data.sequential_windows`` cuts them), the bigram reading the input
    token at the same position, the one before the target.

    Shapes: train_ids (N,); each batch's inputs and targets (B, T) -> {"unigram": float,
    "bigram": float}.
    """
    batches = list(batches)
    if not batches:
        raise ValueError("batches must hold at least one (inputs, targets) batch")
    if any(x.shape != y.shape for x, y in batches):
        raise ValueError("batches must pair inputs and targets of the same shape")
    left = torch.cat([x.flatten() for x, _ in batches])  # the token before each target
    targets = torch.cat([y.flatten() for _, y in batches])
    uni = unigram_log_probs(train_ids, vocab_size)  # (V,)
    bi = bigram_log_probs(train_ids, vocab_size)  # (V, V)
    return {
        "unigram": unigram_loss(uni, targets),
        "bigram": bigram_loss(bi, left, targets),
    }


BIGRAM_KS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)


def choose_bigram_k(
    train_ids: Tensor | Sequence[int],
    vocab_size: int,
    dev_left: Tensor | Sequence[int],
    dev_targets: Tensor | Sequence[int],
    ks: Sequence[float] = BIGRAM_KS,
) -> tuple[float, dict[float, float]]:
    """The add-k smoothing of the bigram of ``train_ids`` chosen on held-out pairs.

    Fits :func:`bigram_log_probs` for every k in ``ks`` and scores it with
    :func:`bigram_loss` on (``dev_left``, ``dev_targets``), which must come from a
    *dev* split, never the split that reports. Returns the k with the lowest dev loss
    (the first listed among ties) and ``{k: dev nats}``.

    Shapes: train_ids (N,); dev_left and dev_targets alike → (a float, a dict)
    """
    if not len(ks):
        raise ValueError("ks is empty")
    dev = {
        k: bigram_loss(
            bigram_log_probs(train_ids, vocab_size, k), dev_left, dev_targets
        )
        for k in ks
    }
    return min(dev, key=dev.get), dev


def majority_class(train_labels: Sequence[Hashable]) -> Hashable:
    """The most frequent training label (the first one seen among ties)."""
    if not len(train_labels):
        raise ValueError("train_labels is empty")
    return Counter(train_labels).most_common(1)[0][0]


def majority_accuracy(
    train_labels: Sequence[Hashable], eval_labels: Sequence[Hashable]
) -> float:
    """Accuracy on ``eval_labels`` of always predicting the training majority class."""
    if not len(eval_labels):
        raise ValueError("eval_labels is empty")
    label = majority_class(train_labels)
    return sum(y == label for y in eval_labels) / len(eval_labels)
