"""The text the book pre-trains its BERT and its T5 on, the held-out draws they are
scored on, and T5's held-out scores beside the baselines (chapters 10 and 11).

- BERT (chapter 11): SST-2's training phrases of :data:`MIN_WORDS` words or more,
  labels unused, and SST-2's dev sentences held out (:func:`bert_corpus`).
- T5 (chapter 10): ATIS's queries as streams of word ids with sentinels
  (:func:`atis_words`), the fixed draw of span-corrupted held-out windows
  (:func:`t5_heldout`), and a model's hidden-word accuracy and cross-entropy next to
  the most-frequent-word, unigram and bigram baselines (:func:`t5_scores`), the
  bigram's smoothing chosen on the dev windows (:func:`t5_bigram_k`); the baselines as
  rows of a table (:func:`baseline_rows`, :func:`score_table`) and as chapter 10
  quotes them (:func:`baseline_words`); the committed sweep of the bias tables' rate
  read back (:func:`bias_sweep_summary`, :func:`bias_sweep_words`); the city gaps
  among the hidden words (:func:`city_gaps`) and any predictions' scores on a subset
  of them (:func:`gap_scores`).

Every held-out draw uses :data:`HELDOUT_SEED`, so every model and baseline is scored on
the same masks, pairs and windows. ``python -m transformer_book.train bert|t5``
(:mod:`transformer_book.train`) pre-trains on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import baselines, data, report, span_corruption, t5, vocab

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
    "bias_sweep_summary",
    "bias_sweep_words",
    "baseline_words",
    "CITY_TAGS",
    "city_words",
    "city_gaps",
    "gap_scores",
    "baseline_rows",
    "score_table",
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


def bias_sweep_summary(result: dict, jump: float) -> dict:
    """The committed sweep of the relative-bias tables' learning-rate multiple
    (``benchmarks/t5_bias_lr_scale.py``, its ``runs`` of ``scale``, ``seed`` and
    ``dev_nats``) read back: ``by_scale`` {scale: the seeds' dev nats, in run order},
    ``best_at_one`` (the best seed at 1x), ``below`` {scale: how many seeds end more
    than ``jump`` nats below it} and ``per_seed`` {scale: the seeds' nats sorted, as
    text with two decimals}."""
    by_scale = {
        s: [r["dev_nats"] for r in result["runs"] if r["scale"] == s]
        for s in result["scales"]
    }
    if 1.0 not in by_scale or not by_scale[1.0]:
        raise ValueError("the sweep has no run at the common rate (scale 1.0)")
    best_at_one = min(by_scale[1.0])
    return {
        "by_scale": by_scale,
        "best_at_one": best_at_one,
        "below": {
            s: sum(n < best_at_one - jump for n in nats) for s, nats in by_scale.items()
        },  # fmt: skip
        "per_seed": {
            s: ", ".join(f"{n:.2f}" for n in sorted(nats))
            for s, nats in by_scale.items()
        },  # fmt: skip
    }


def bias_sweep_words(result: dict, jump: float) -> dict[str, str]:
    """The sweep of :func:`bias_sweep_summary` as chapter 10's text quotes it, by glue
    name: the dev nats at 1x and at the chosen multiple (mean ± std, range), that
    multiple, the seeds per multiple, how many seeds at the chosen multiple end more
    than ``jump`` below the best 1x seed, that seed, and the add-one left bigram on
    the same dev words (two decimals)."""
    summary = bias_sweep_summary(result, jump)
    by_scale, chosen = summary["by_scale"], result["chosen"]
    return {
        "scale_one": report.mean_spread(by_scale[1.0], "{:.2f}"),
        "scale_best": report.mean_spread(by_scale[chosen], "{:.2f}"),
        "scale_chosen": f"{chosen:g}",
        "scale_seeds": str(len(by_scale[1.0])),
        "scale_below": f"{summary['below'][chosen]} of {len(by_scale[chosen])}",
        "best_at_one": f"{summary['best_at_one']:.2f}",
        "dev_bigram": f"{result['baselines']['bigram_nats']:.2f}",
    }


def baseline_words(scores: dict[str, float]) -> dict[str, str]:
    """The baselines of :func:`t5_scores` (called with ``bigram_k``) as chapter 10's
    text quotes them, by glue name: accuracies in percent (one decimal), nats per
    hidden word (two decimals)."""
    return {
        "unigram_nats": f"{scores['unigram_nats']:.2f}",
        "top_acc": f"{100 * scores['most_frequent_accuracy']:.1f}",
        "bigram_acc": f"{100 * scores['bigram_accuracy']:.1f}",
        "bigram_nats": f"{scores['bigram_nats']:.2f}",
        "tuned_acc": f"{100 * scores['tuned_bigram_accuracy']:.1f}",
        "tuned_nats": f"{scores['tuned_bigram_nats']:.2f}",
    }


#: the slot tags of a departure or arrival city's first word (chapter 5's tags)
CITY_TAGS = ("B-fromloc.city_name", "B-toloc.city_name")


def city_words(words: vocab.Vocab) -> list[str]:
    """The first words of ATIS's city names (the :data:`CITY_TAGS` words of the
    training queries) that ``words`` holds, sorted."""
    tagged = data.load_atis("train")
    return sorted({w for s, tags in zip(tagged.sentences, tagged.tags)
                   for w, tag in zip(s, tags)
                   if tag in CITY_TAGS and w in words.stoi})  # fmt: skip


def city_gaps(
    atis: AtisWords, held_out: list
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every hidden word of ``held_out`` (sentinels and the end token left out,
    in :func:`left_pairs`'s reading order, which is :func:`t5.target_predictions`'s):
    is it a *city gap* (a :func:`city_words` word right after "from" or "to"), does
    its window's input name that word elsewhere, and which window (row of all the
    batches stacked) holds it. Shapes: held_out [(B, S), (B, T)] -> three (n_hidden,)
    tensors: bool, bool, int64."""
    words = atis.words
    left, hidden = left_pairs(atis, held_out)
    gap = torch.isin(left, torch.tensor(words.encode(["from", "to"])))
    gap &= torch.isin(hidden, torch.tensor(words.encode(city_words(words))))
    first_sentinel = min(atis.sentinels)
    rows, start = [], 0
    for src, tgt in held_out:
        is_word = (tgt != atis.eos) & (tgt < first_sentinel)  # (B, T)
        rows.append(is_word.nonzero()[:, 0] + start)  # the window of each hidden word
        start += len(src)
    row = torch.cat(rows)
    all_src = torch.cat([s for s, _ in held_out])  # (windows, S)
    named = (all_src[row] == hidden[:, None]).any(1)  # the word is in its inputs
    return gap, named, row


def gap_scores(
    truth: torch.Tensor, pred: torch.Tensor, logp: torch.Tensor, where: torch.Tensor
) -> tuple[float, float]:
    """Accuracy and cross-entropy (nats per word, summed in float64) of predictions
    ``pred`` with log-probabilities ``logp`` of the true words ``truth`` on the hidden
    words that the bool mask ``where`` selects. Shapes: four (n,) tensors -> two
    floats."""
    if not where.any():
        raise ValueError("where selects no hidden word")
    acc = (pred == truth)[where].float().mean().item()
    return acc, -logp[where].double().mean().item()


def baseline_rows(scores: dict[str, float], top: str) -> dict[str, tuple[float, float]]:
    """The baselines of :func:`t5_scores` (called with ``bigram_k``), or of a card's
    held-out scores, as rows of :func:`score_table`: {name: (accuracy, nats)} for the
    unigram (its best guess, the word ``top``), the add-one and the add-k left
    bigram."""
    return {
        f"unigram (always {top!r})": (
            scores["most_frequent_accuracy"], scores["unigram_nats"]),
        "left bigram, add-one": (scores["bigram_accuracy"], scores["bigram_nats"]),
        f"left bigram, k = {scores['tuned_bigram_k']:g} (dev)": (
            scores["tuned_bigram_accuracy"], scores["tuned_bigram_nats"]),
    }  # fmt: skip


def score_table(
    rows: dict[str, tuple[float, float]],
    card: list[tuple[float, float] | None] | None = None,
) -> str:
    """Rows of (accuracy, nats per hidden word), one line each under a header, and with
    ``card`` (one entry per row, ``None`` where the card has none) the numbers a
    checkpoint's card recorded beside them."""
    if card is not None and len(card) != len(rows):
        raise ValueError(f"card needs one entry per row: {len(card)} for {len(rows)}")
    width = max(map(len, rows))
    lines = [f"{'':>{width}} {'accuracy':>8} {'nats':>5}"
             + ("   card: accuracy  nats" if card else "")]  # fmt: skip
    for i, (name, (acc, nats)) in enumerate(rows.items()):
        line = f"{name:>{width}} {acc:8.3f} {nats:5.2f}"
        if card and card[i] is not None:
            line += f"         {card[i][0]:8.3f} {card[i][1]:5.2f}"
        lines.append(line)
    return "\n".join(lines)
