"""Chapter 07's experiment: ATIS queries written as semantic frames by an
encoder-decoder (:class:`transformer_book.seq2seq.Seq2Seq`).

:func:`frame_vocab` and :func:`frame_pairs` build the one vocabulary of queries and
frames and the (source, target) id pairs; :func:`train_run` is one training run, scored
on dev along the way; :func:`cache_timings` times greedy decoding with and without the
cache, round by round, and :func:`cache_speedups` reads those times; :func:`future_probe`
measures what a model trained with or without the causal mask does with the future
hidden (:func:`future_probe_text` prints it), and :func:`no_mask_table` sums up the
committed benchmark of it over seeds (``benchmarks/ch07_no_mask.py``) in words;
:func:`fit_verdicts` reads a model's fit to its own training queries against dev, and
:func:`fit_table` prints it; :func:`wrong_frames` sorts a generator's wrong frames
beside a tagger's.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from .benchmark import median_time
from .frames import Frame, exact_match, parse_frame, sort_mistakes
from .report import mean_spread
from .runtime import seed_everything
from .seq2seq import (
    PairBatches,
    Seq2Seq,
    Seq2SeqConfig,
    greedy_write,
    teacher_forced_scores,
)
from .training import train
from .vocab import Vocab

__all__ = [
    "frame_vocab",
    "frame_pairs",
    "train_run",
    "cache_timings",
    "cache_speedups",
    "future_probe",
    "fit_verdicts",
    "fit_table",
    "future_probe_text",
    "WrongFrames",
    "wrong_frames",
    "NO_MASK_MEASURES",
    "no_mask_table",
]


def frame_vocab(sentences: Sequence[Sequence[str]], frames: Sequence[Frame]) -> Vocab:
    """One vocabulary for both sides: ``<pad>`` 0, ``<unk>`` 1, ``<bos>`` 2, ``<eos>`` 3,
    then the words of the (training) queries and the tokens of their frames."""
    base = Vocab.from_corpus([*sentences, *(f.tokens() for f in frames)])
    return Vocab(["<bos>", "<eos>", *base.itos[2:]])


def frame_pairs(
    vocab: Vocab, sentences: Sequence[Sequence[str]], frames: Sequence[Frame]
) -> tuple[list[list[int]], list[list[int]]]:
    """The (source, target) id lists of queries and their frames; each target ends in
    ``<eos>``. Shapes: N sentences and N frames -> two lists of N id lists."""
    eos = vocab["<eos>"]
    sources = [vocab.encode(s) for s in sentences]
    return sources, [vocab.encode(f.tokens()) + [eos] for f in frames]


def train_run(
    config: Seq2SeqConfig,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    steps: int,
    lr: float,
    *,
    warmup: int,
    batch_size: int,
    seed: int,
    device: torch.device | str = "cpu",
    score: Callable[[Seq2Seq], float] | None = None,
    score_at: Sequence[int] = (),
    snapshot_at: int | None = None,
    stop_at: int | None = None,
    progress: bool | None = None,
) -> tuple[Seq2Seq, list[float], list[tuple[int, float]], Seq2Seq | None]:
    """One encoder-decoder drawn after ``seed_everything(seed)`` and trained by
    ``training.train``: AdamW at ``lr``, ``warmup`` steps, cosine decay over ``steps``,
    the teacher-forced :meth:`Seq2Seq.loss` on :class:`seq2seq.PairBatches` of
    ``batch_size``.
    ``stop_at`` ends the run early, on the whole run's schedule; ``progress`` as in
    ``training.train``.

    Returns the model, the loss of every step, [(step, ``score(model)``)] after the
    steps of ``score_at`` and the last, and a copy of the model (eval mode) as it was
    after ``snapshot_at`` steps (None without).
    """
    seed_everything(seed)
    model = Seq2Seq(config).to(device)
    curve: list[tuple[int, float]] = []
    early: list[Seq2Seq] = []

    def probe(step: int, loss: float) -> None:
        if step + 1 == snapshot_at:
            early.append(copy.deepcopy(model).eval())
        if score is not None and step + 1 in (*score_at, steps):
            curve.append((step + 1, score(model)))

    batches = PairBatches(sources, targets, batch_size, config.pad_id, seed=seed)
    with tempfile.TemporaryDirectory() as folder:  # stop_at wants a checkpoint folder
        history = train(
            model, batches, lambda m, batch: m.loss(*batch), steps, lr=lr,
            warmup=warmup, decay="cosine", on_step=probe, stop_at=stop_at,
            checkpoint=None if stop_at is None else folder, progress=progress,
        )  # fmt: skip
    return model, history, curve, early[0] if early else None


def cache_timings(
    model: Seq2Seq,
    vocab: Vocab,
    sentences: Sequence[Sequence[str]],
    limit: Callable[[int], int],
    rounds: int = 7,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
) -> tuple[dict[bool, list[float]], bool]:
    """:func:`seq2seq.greedy_write` of ``sentences`` without and with the cache, timed
    once each per round (``benchmark.median_time``, ``clock="auto"``: CPU seconds on a
    CPU), so that a change of load hits both alike. Returns {use_cache: seconds per round}
    and whether the two wrote the same tokens."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    out: dict[bool, list[list[str]]] = {}
    for _ in range(rounds):
        for use_cache in (False, True):

            def write(c: bool = use_cache) -> None:
                out[c] = greedy_write(model, vocab, sentences, limit, batch_size, c)

            seconds[use_cache].append(median_time(write, 1, 0, device, clock="auto"))
    return seconds, out[True] == out[False]


def cache_speedups(seconds: dict[bool, list[float]]) -> tuple[list[float], str]:
    """:func:`cache_timings`'s seconds ({use_cache: seconds per round}) read back: the
    speed-up of each round (uncached / cached seconds) and a text with the median
    seconds of each arm and the speed-ups, round by round."""
    if not seconds.get(True) or len(seconds[True]) != len(seconds.get(False, [])):
        raise ValueError("seconds must hold as many rounds (>= 1) for both arms")
    by_round = [u / c for u, c in zip(seconds[False], seconds[True])]
    text = (
        f"median seconds without the cache {statistics.median(seconds[False]):.3f}, "
        f"with it {statistics.median(seconds[True]):.3f}\n"
        "speed-up, round by round: " + ", ".join(f"{r:.1f}" for r in by_round)
    )
    return by_round, text


def future_probe(
    model: Seq2Seq,
    vocab: Vocab,
    sentences: Sequence[Sequence[str]],
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    gold: Sequence[Frame],
    limit: Callable[[int], int],
) -> dict[str, object]:
    """What a model does with the future hidden (chapter 07, section 8): the
    teacher-forced loss per target token with the model's own mask (``"seen"``, the
    future in view if it was trained without the causal mask) and with the same
    weights in a causal model (``"hidden"``); and, written greedily, the frames'
    ``"exact_match"``, the share that end in ``<eos>`` within ``limit``
    (``"eos_share"``) and the token lists (``"written"``)."""
    hidden = Seq2Seq(dataclasses.replace(model.cfg, causal=True))
    hidden = hidden.to(next(model.parameters()).device)
    hidden.load_state_dict(model.state_dict())  # the same weights, the future hidden
    seen, unseen = (
        teacher_forced_scores(m, sources, targets)[0] for m in (model, hidden)
    )
    written = greedy_write(model, vocab, sentences, limit)  # cut at <eos>
    em = exact_match(gold, [parse_frame(w) for w in written])
    stops = statistics.mean(len(w) < limit(len(q)) for w, q in zip(written, sentences))
    return {
        "seen": seen,
        "hidden": unseen,
        "exact_match": em,
        "eos_share": stops,
        "written": written,
    }


def fit_verdicts(
    fit_em: float, dev_em: float, fit_nats: float, dev_nats: float
) -> tuple[str, str]:
    """Chapter 07's reading of a model's exact match and teacher-forced loss on its own
    training queries (``fit_``) and on dev: whether it underfits (exact match below
    0.9 on its training queries) and whether it fits them clearly better than it
    generalises (5 points more exact match and 1.5 times less loss), in words."""
    underfit = (
        "is still wrong on many of its own training queries (it underfits)"
        if fit_em < 0.9
        else "is right on nearly all of its own training queries"
    )
    overfits = fit_em > dev_em + 0.05 and dev_nats > 1.5 * fit_nats
    fit = "fits its training queries clearly better than it generalises"
    return underfit, fit if overfits else "does not " + fit.replace("fits", "fit", 1)


NO_MASK_MEASURES = {
    "train_loss": "training loss",
    "dev_loss_seen": "dev, future seen",
    "dev_loss_hidden": "dev, future hidden",
    "exact_match": "exact match",
    "eos_share": "<eos> written",
}


def no_mask_table(
    rows: Sequence[dict],
) -> tuple[dict[str, tuple[str, str]], list[tuple[dict, dict]]]:
    """The committed rows of ``benchmarks/ch07_no_mask.py`` (one per seed and arm,
    :func:`future_probe`'s measurements and the training loss): per measurement, the
    masked and the unmasked arm's mean ± standard deviation (lowest–highest) over the
    seeds (``report.mean_spread``, two decimals); and the (masked, unmasked) rows of
    each seed, in the rows' order."""
    by_arm = [[r for r in rows if r["causal"] == causal] for causal in (True, False)]
    table = {
        label: tuple(mean_spread([r[key] for r in arm], "{:.2f}") for arm in by_arm)
        for key, label in NO_MASK_MEASURES.items()
    }
    return table, list(zip(*by_arm))


def fit_table(rows: dict[str, tuple[float, float, float]]) -> str:
    """A text table of fit: per row name (e.g. "train (500 queries)"), the greedy exact
    match, the teacher-forced nats per token and the share of targets whose every
    token is the argmax (:func:`seq2seq.teacher_forced_scores`), three decimals."""
    if any(len(row) != 3 for row in rows.values()):
        raise ValueError("rows must hold (exact match, nats, all argmax) per name")
    head = ("greedy exact match", "teacher-forced: nats", "all argmax")
    lines = [f"{'':22}{head[0]:>20}{head[1]:>22}{head[2]:>12}"]
    for name, (em, nats, tf) in rows.items():
        lines.append(f"{name:22}{em:>20.3f}{nats:>22.3f}{tf:>12.3f}")
    return "\n".join(lines)


def future_probe_text(
    table: dict[str, dict[str, object]], sentence: Sequence[str], n_tokens: int = 12
) -> str:
    """:func:`future_probe`'s measurements, one row per arm ({arm: its result}), then
    ``sentence`` (the first probed query) and the first ``n_tokens`` tokens each arm
    wrote for it."""
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
    lines = [
        f"{'':18}{'dev nats: future seen':>22}{'hidden':>8}{'exact match':>13}"
        f"{'<eos> written':>15}"
    ]
    for arm, r in table.items():
        lines.append(
            f"{arm:<18}{r['seen']:>22.3f}{r['hidden']:>8.3f}"
            f"{r['exact_match']:>13.3f}{r['eos_share']:>15.3f}"
        )
    lines.append("\n" + " ".join(sentence))
    for arm, r in table.items():
        tokens = r["written"][0]
        more = " ..." if len(tokens) > n_tokens else ""
        lines.append(f"  {arm}: {' '.join(tokens[:n_tokens])}{more}")
    return "\n".join(lines)


class WrongFrames(NamedTuple):
    """What :func:`wrong_frames` found: the indices of each group, and a text."""

    indices: dict[str, list[int]]
    text: str


def wrong_frames(
    gold: Sequence[Frame],
    pred: Sequence[Frame],
    tag_pred: Sequence[Frame],
    sentences: Sequence[Sequence[str]],
    writable: Sequence[bool],
    train_frames: Sequence[Frame],
) -> WrongFrames:
    """A generator's wrong frames (``pred`` against ``gold``), sorted by
    :func:`frames.sort_mistakes`, beside a tagger's frames of the same queries
    (``tag_pred``). ``indices``: ``"wrong"``; ``"oov"``, the gold frames holding a token
    outside the vocabulary (``writable`` False), and of those ``"unseen_name"``, with an
    intent or a slot name that no frame of ``train_frames`` holds; ``"tagger_right"``,
    the wrong frames the tagger gets right; ``"rest"``, the wrong frames with the right
    intent and only query words, and ``"rest_tag_wrong"``, those the tagger gets wrong
    too. ``text``: the counts, kind by kind."""
    kinds, rest, slot_kinds = sort_mistakes(gold, pred, sentences, writable)
    if len(tag_pred) != len(gold):
        raise ValueError(f"tag_pred holds {len(tag_pred)} frames for {len(gold)} gold")
    wrong = [n for n, (g, p) in enumerate(zip(gold, pred)) if not g.same_as(p)]
    oov = kinds["hold a token outside the vocabulary"]  # every unwritable frame
    intents = {f.intent for f in train_frames}
    names = {name for f in train_frames for name, _ in f.slots}
    unseen = [
        n
        for n in oov
        if gold[n].intent not in intents
        or any(m not in names for m, _ in gold[n].slots)
    ]
    ns = {
        "wrong": wrong,
        "oov": oov,
        "unseen_name": unseen,
        "tagger_right": [n for n in wrong if gold[n].same_as(tag_pred[n])],
        "rest": rest,
        "rest_tag_wrong": [n for n in rest if not gold[n].same_as(tag_pred[n])],
    }
    lines = [f"{len(wrong)} wrong frames of {len(gold)}; of these,"]
    for kind, found in kinds.items():
        lines.append(f"  {len(found):>4} {kind}")
        if found is oov:
            lines.append(
                f"  {len(unseen):>8} of which an intent or a slot name unseen in "
                f"training\n  {len(oov) - len(unseen):>8} of which only value words"
            )
    lines += [
        f"the tagger gets {len(ns['tagger_right'])} of the {len(wrong)} right",
        f"the other {len(rest)}, with the right intent and only query words, differ "
        "in their slots:",
    ]
    lines += [f"  {len(found):>4} {kind}" for kind, found in slot_kinds.items()]
    lines.append(
        f"the tagger's frame is wrong too for {len(ns['rest_tag_wrong'])} of the "
        f"{len(rest)}"
    )
    return WrongFrames(ns, "\n".join(lines))
