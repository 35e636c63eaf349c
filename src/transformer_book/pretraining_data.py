"""The text the book pre-trains its BERT and its T5 on, the held-out draws they are
scored on, and T5's held-out scores beside the baselines (chapters 10 and 11).

- BERT (chapter 11): SST-2's training phrases of :data:`MIN_WORDS` words or more,
  labels unused, and SST-2's dev sentences held out (:func:`bert_corpus`).
- T5 (chapter 10): ATIS's queries as streams of word ids with sentinels
  (:func:`atis_words`), the fixed draw of span-corrupted held-out windows
  (:func:`t5_heldout`), and a model's hidden-word accuracy and cross-entropy next to
  the most-frequent-word, unigram and bigram baselines (:func:`t5_scores`), the
  bigram's smoothing chosen on the dev windows (:func:`t5_bigram_k`).

Every held-out draw uses :data:`HELDOUT_SEED`, so every model and baseline is scored on
the same masks, pairs and windows. ``python -m transformer_book.train bert|t5``
(:mod:`transformer_book.train`) pre-trains on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import baselines, data, span_corruption, t5, vocab

__all__ = [
    "HELDOUT_SEED",
    "MIN_WORDS",
    "N_SENTINELS",
    "bert_corpus",
    "AtisWords",
    "atis_words",
    "t5_heldout",
    "left_pairs",
    "t5_bigram_k",
    "t5_scores",
]

#: the held-out masks and pairs: one draw, the same for every model and baseline
HELDOUT_SEED = 123


#: the shortest training phrase the BERT pre-trains on (shorter ones give a masked
#: word almost no context, and NSP needs two segments)
MIN_WORDS = 5


def bert_corpus() -> tuple[list[str], list[str]]:
    """The ``bert`` family's text: SST-2's training phrases of :data:`MIN_WORDS` words
    or more (labels unused) to pre-train on, and its 872 dev sentences held out.
    SST-2's dev sentences are not among its training phrases: the held-out text is
    unseen."""
    phrases = [t for t in data.load_sst2("train")[0] if len(t.split()) >= MIN_WORDS]
    return phrases, data.load_sst2("dev")[0]


N_SENTINELS = 8


@dataclass(frozen=True)
class AtisWords:
    """ATIS's queries as one stream of word ids per split, each query ending in ".";
    the vocabulary: the words seen twice or more in training, the end token ``</s>``
    and :data:`N_SENTINELS` sentinels (the last ids)."""

    words: vocab.Vocab
    sentinels: list[int]
    eos: int
    train: torch.Tensor  # (N_train,)
    test: torch.Tensor  # (N_test,)
    dev: torch.Tensor  # (N_dev,): for choices (the test split reports)


def atis_words(itos: list[str] | None = None) -> AtisWords:
    """The ``t5`` family's data (:class:`AtisWords`); ``itos``: a saved vocabulary (a
    checkpoint's ``vocab.txt``) instead of the one counted from the training queries."""
    train_q = [s + ["."] for s in data.load_atis("train").sentences]
    test_q = [s + ["."] for s in data.load_atis("test").sentences]
    dev_q = [s + ["."] for s in data.load_atis("dev").sentences]
    names = [f"<extra_id_{i}>" for i in range(N_SENTINELS)]
    if itos is None:
        freq = vocab.Vocab.from_corpus(train_q, min_freq=2)  # <pad>, <unk>, words
        itos = [*freq.itos[:2], "</s>", *freq.itos[2:], *names]
    words = vocab.Vocab(itos)

    def stream(queries: list[list[str]]) -> torch.Tensor:
        return torch.tensor(words.encode([w for q in queries for w in q]))  # (N,)

    return AtisWords(words, words.encode(names), words["</s>"], stream(train_q),
                     stream(test_q), stream(dev_q))  # fmt: skip


def t5_heldout(atis: AtisWords, window: int, n_batches: int = 20,
               batch_size: int = 64,
               split: str = "test") -> list[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """The held-out windows every T5 and baseline is scored on: ``n_batches`` of
    ``batch_size`` span-corrupted windows of the ``split`` stream (``"test"``, which
    reports, or ``"dev"``, on which choices are made), one fixed draw."""
    if split not in ("test", "dev"):
        raise ValueError(f"split must be 'test' or 'dev', got {split!r}")
    stream = atis.test if split == "test" else atis.dev
    gen = torch.Generator().manual_seed(HELDOUT_SEED)
    return [
        span_corruption.corrupted_windows(
            stream, batch_size, window, atis.sentinels, atis.eos, generator=gen
        )
        for _ in range(n_batches)
    ]


def left_pairs(atis: AtisWords,
               held_out: list) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Every hidden word of ``held_out`` and the word to its left in the text
    (:func:`span_corruption.left_neighbours`), in reading order. Shapes: -> left,
    hidden (n_hidden,)."""
    pairs = [span_corruption.left_neighbours(s, t, atis.sentinels, atis.eos)
             for s, t in held_out]  # fmt: skip
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


def t5_bigram_k(atis: AtisWords, window: int) -> tuple[float, dict[float, float]]:
    """The add-k smoothing of the left bigram chosen on the *dev* windows
    (:func:`t5_heldout` with ``split="dev"``, :func:`baselines.choose_bigram_k`): the
    k and ``{k: dev nats}``."""
    left, hidden = left_pairs(atis, t5_heldout(atis, window, split="dev"))
    return baselines.choose_bigram_k(atis.train, len(atis.words), left, hidden)


def t5_scores(model, atis: AtisWords, held_out: list,
              bigram_k: float | None = None) -> dict[str, float]:  # fmt: skip
    """Hidden-word accuracy and cross-entropy (teacher-forced, sentinels and the end
    token left out) of ``model`` and of three baselines fitted on the training
    stream: the most frequent word, the unigram, and the left bigram (each hidden word
    from the word to its left, :func:`left_pairs`), add-one smoothed (``bigram_*``)
    and, with ``bigram_k`` (chosen on dev: :func:`t5_bigram_k`), add-k smoothed
    (``tuned_bigram_*``)."""
    first_sentinel = min(atis.sentinels)
    is_word = lambda t: (t != atis.eos) & (t < first_sentinel)  # noqa: E731
    acc, nats = t5.target_scores(model, held_out, is_word)
    left, hidden = left_pairs(atis, held_out)
    V = len(atis.words)
    uni = baselines.unigram_log_probs(atis.train, V)
    bi = baselines.bigram_log_probs(atis.train, V)
    scores = {
        "accuracy": acc,
        "nats": nats,
        "hidden_words": len(hidden),
        "most_frequent_accuracy": (hidden == uni.argmax()).float().mean().item(),
        "unigram_nats": baselines.unigram_loss(uni, hidden),
        "bigram_accuracy": (bi[left].argmax(-1) == hidden).float().mean().item(),
        "bigram_nats": baselines.bigram_loss(bi, left, hidden),
    }
    if bigram_k is not None:
        tuned = baselines.bigram_log_probs(atis.train, V, bigram_k)  # (V, V)
        scores["tuned_bigram_k"] = bigram_k
        scores["tuned_bigram_accuracy"] = (
            (tuned[left].argmax(-1) == hidden).float().mean().item()
        )
        scores["tuned_bigram_nats"] = baselines.bigram_loss(tuned, left, hidden)
    return scores
