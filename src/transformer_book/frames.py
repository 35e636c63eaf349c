"""Semantic frames: a query's intent and its slots, written as one token sequence, read
back, and scored (chapter 07).

A frame is what a slot filler is for: the form a booking system fills in. From the
BIO tags of chapter 05 and the intent,

    show me flights from boston to new york
    O    O  O       O    B-fromloc.city_name O B-toloc.city_name I-toloc.city_name

becomes the frame ``atis_flight`` with the slots ``fromloc.city_name = boston`` and
``toloc.city_name = new york``, linearised (the intent first, then every slot in sentence
order) as

    atis_flight fromloc.city_name: boston toloc.city_name: new york

A sequence-to-sequence model can *write* that sequence, token by token. The slot names
carry a trailing ``:`` because five ATIS slot names (``or``, ``meal``, ``time``,
``economy``, ``connect``) are also words of the queries, so without the mark a value
such as *lunch time* could not be read back.

Scores compare frames, not tag sequences, so a tagger and a generator are scored alike:

- exact match: the fraction of queries whose intent and slots (as a multiset) are right;
- slot precision, recall and F1: over all queries, a predicted (slot name, value) pair is
  correct when the gold frame of the same query holds it (micro-averaged, like conlleval;
  unlike span F1 the word positions do not count, only the names and the words);
- intent accuracy (:func:`frame_scores` gives all of them at once; :func:`mean_scores`
  averages them over seeds, :func:`scores_table` prints them beside each other).

:func:`mistakes` says how a wrong frame differs from the gold one (the intent, a word
that is not in the query, a slot left out or added, a wrong value), and
:func:`sort_mistakes` sorts a corpus's wrong frames by those kinds.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .metrics import SpanScores, accuracy, bio_spans

__all__ = [
    "SLOT_MARK",
    "Frame",
    "frame_from_tags",
    "parse_frame",
    "exact_match",
    "slot_scores",
    "frame_scores",
    "mean_scores",
    "scores_table",
    "MISTAKES",
    "mistakes",
]

SLOT_MARK = ":"  # ends every slot name in a linearised frame

Slot = tuple[str, str]  # (slot name, value words joined by single spaces)


@dataclass(frozen=True)
class Frame:
    """An intent and its slots, in the order they occur in the query.

    Two frames mean the same when their intents are equal and their slots are equal as
    multisets (:meth:`same_as`); ``==`` also compares the order.
    """

    intent: str
    slots: tuple[Slot, ...] = ()

    def tokens(self) -> list[str]:
        """The linearised frame: ``[intent, name1:, value1 words..., name2:, ...]``."""
        out = [self.intent]
        for name, value in self.slots:
            words = value.split()
            if name.endswith(SLOT_MARK) or any(w.endswith(SLOT_MARK) for w in words):
                raise ValueError(
                    f"slot {(name, value)!r}: names and value words may not end with "
                    f"{SLOT_MARK!r}, which marks slot names in a linearised frame"
                )
            out += [name + SLOT_MARK, *words]
        return out

    def same_as(self, other: Frame) -> bool:
        """Same intent and the same slots, in any order."""
        return self.intent == other.intent and Counter(self.slots) == Counter(
            other.slots
        )

    def __str__(self) -> str:
        return " ".join(self.tokens())


def frame_from_tags(words: Sequence[str], tags: Sequence[str], intent: str) -> Frame:
    """The frame of one BIO-tagged query: every span becomes a (name, value) slot.

    Spans are read as :func:`transformer_book.metrics.bio_spans` reads them (conlleval's
    rules), so a tagger's stray ``I-x`` opens a slot of its own, as it does for span F1.
    """
    if len(words) != len(tags):
        raise ValueError(f"got {len(words)} words but {len(tags)} tags")
    spans = bio_spans(list(tags))
    return Frame(intent, tuple((kind, " ".join(words[a:b])) for kind, a, b in spans))


def parse_frame(tokens: Sequence[str] | str) -> Frame:
    """Read a linearised frame (a token list or one space-separated string) back.

    The inverse of :meth:`Frame.tokens`, and lenient with what a model may write: a
    missing intent (the first token is a slot name) reads as ``""``, a slot name with no
    words after it gets the value ``""``, and words before the first slot name form a
    slot named ``""``. None of these can match a gold frame, and none is dropped.
    """
    if isinstance(tokens, str):
        tokens = tokens.split()
    tokens = list(tokens)
    intent = ""
    if tokens and not tokens[0].endswith(SLOT_MARK):
        intent, tokens = tokens[0], tokens[1:]
    slots: list[tuple[str, list[str]]] = []
    for tok in tokens:
        if tok.endswith(SLOT_MARK):
            slots.append((tok[: -len(SLOT_MARK)], []))
        else:
            if not slots:
                slots.append(("", []))  # words with no slot name before them
            slots[-1][1].append(tok)
    return Frame(intent, tuple((name, " ".join(value)) for name, value in slots))


def _check_paired(gold: Sequence[Frame], pred: Sequence[Frame], what: str) -> None:
    if len(gold) != len(pred):
        raise ValueError(
            f"{what}: gold has {len(gold)} frames but pred has {len(pred)}"
        )
    if not gold:
        raise ValueError(f"{what} of no frames is undefined")
    for name, frames in (("gold", gold), ("pred", pred)):
        bad = next((f for f in frames if not isinstance(f, Frame)), None)
        if bad is not None:
            raise ValueError(
                f"{what}: {name} must hold Frame objects (use parse_frame or "
                f"frame_from_tags), got {type(bad).__name__} {bad!r}"
            )


def exact_match(gold: Sequence[Frame], pred: Sequence[Frame]) -> float:
    """Fraction of queries whose predicted frame has the gold intent and the gold slots
    (in any order)."""
    _check_paired(gold, pred, "exact_match")
    return sum(g.same_as(p) for g, p in zip(gold, pred)) / len(gold)


def slot_scores(gold: Sequence[Frame], pred: Sequence[Frame]) -> SpanScores:
    """Slot precision, recall and F1 over a corpus (micro-averaged).

    A predicted (name, value) slot is correct if the gold frame of the same query has it;
    a slot that occurs twice must be predicted twice to be found twice.
    """
    _check_paired(gold, pred, "slot_scores")
    n_gold = n_pred = n_correct = 0
    for g, p in zip(gold, pred):
        cg, cp = Counter(g.slots), Counter(p.slots)
        n_gold, n_pred = n_gold + sum(cg.values()), n_pred + sum(cp.values())
        n_correct += sum((cg & cp).values())
    return SpanScores(n_gold=n_gold, n_pred=n_pred, n_correct=n_correct)


def frame_scores(gold: Sequence[Frame], pred: Sequence[Frame]) -> dict[str, float]:
    """Every score of predicted frames at once: ``exact match``, ``slot P``, ``slot R``,
    ``slot F1`` (:func:`slot_scores`) and ``intent acc`` (the intent alone)."""
    _check_paired(gold, pred, "frame_scores")
    slots = slot_scores(gold, pred)
    return {
        "exact match": exact_match(gold, pred),
        "slot P": slots.precision,
        "slot R": slots.recall,
        "slot F1": slots.f1,
        "intent acc": accuracy([g.intent for g in gold], [p.intent for p in pred]),
    }


def mean_scores(scores: dict[Hashable, dict[str, float]]) -> dict[str, float]:
    """The mean over the seeds of every score: ``{seed: frame_scores(...)}`` ->
    ``{score name: mean}``, in :func:`frame_scores`'s order."""
    if not scores:
        raise ValueError("scores must hold the scores of at least one seed, got none")
    runs = list(scores.values())
    return {k: statistics.mean(run[k] for run in runs) for k in runs[0]}


def scores_table(
    rows: dict[str, dict[Hashable, dict[str, float]]],
    title: str,
    intent_only: dict[str, float] | None = None,
) -> str:
    """A text table of scores over seeds: per row name (``{name: {seed:
    frame_scores(...)}}``), every score's mean ± standard deviation over the seeds (the
    mean alone for one seed), three decimals; then ``intent_only`` rows ({name:
    intent accuracy}, e.g. a baseline's) in the last column."""
    if not rows:
        raise ValueError("rows must name at least one model's scores, got none")

    def summary(scores: dict, key: str) -> str:
        values = [s[key] for s in scores.values()]
        spread = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
        return f"{statistics.mean(values):.3f}{spread}"

    keys = list(next(iter(next(iter(rows.values())).values())))
    lines = [f"{title:<26}" + "".join(f"{k:>14}" for k in keys)]
    for name, scores in rows.items():
        lines.append(f"{name:<26}" + "".join(f"{summary(scores, k):>14}" for k in keys))
    for name, acc in (intent_only or {}).items():
        lines.append(f"{name:<26}{'':>{14 * (len(keys) - 1)}}{acc:>14.3f}")
    return "\n".join(lines)


MISTAKES = (
    "wrong intent",
    "invented word",
    "slot left out",
    "slot added",
    "wrong value",
)


def mistakes(gold: Frame, pred: Frame, words: Sequence[str]) -> set[str]:
    """How ``pred`` differs from ``gold`` for the query ``words``: the kinds of
    :data:`MISTAKES` that apply (none when the frames mean the same).

    - ``wrong intent``: the intents differ;
    - ``invented word``: a predicted value holds a word that is not in the query (a
      tagger, which labels the query's words, cannot make this mistake);
    - ``slot left out`` / ``slot added``: a gold slot name is missing from the
      prediction / the prediction has a slot name too many (names counted as a
      multiset; a renamed slot is both);
    - ``wrong value``: the slot names agree, yet a slot's value differs.
    """
    query = set(words)
    kinds = set()
    if gold.intent != pred.intent:
        kinds.add("wrong intent")
    if any(w not in query for _, value in pred.slots for w in value.split()):
        kinds.add("invented word")
    gold_names = Counter(name for name, _ in gold.slots)
    pred_names = Counter(name for name, _ in pred.slots)
    if gold_names - pred_names:
        kinds.add("slot left out")
    if pred_names - gold_names:
        kinds.add("slot added")
    if gold_names == pred_names and Counter(gold.slots) != Counter(pred.slots):
        kinds.add("wrong value")
    return kinds


def sort_mistakes(
    gold: Sequence[Frame],
    pred: Sequence[Frame],
    sentences: Sequence[Sequence[str]],
    writable: Sequence[bool],
) -> tuple[dict[str, list[int]], list[int], dict[str, list[int]]]:
    """The wrong frames of a generator, by index, sorted by kind of mistake.

    The first dict: the frames whose gold frame holds a token outside the vocabulary
    (``writable[n]`` False: no generator with that vocabulary can write it), those that
    write a word not in the query, and those with the wrong intent (a frame may be in
    several). Then the rest, the wrong frames with the right intent and only words of
    the query, in a list, and a second dict that sorts them by their slots: a gold
    slot left out, a slot added (a renamed slot is both), or the gold slot names with
    a wrong value.
    """
    _check_paired(gold, pred, "sort_mistakes")
    wrong = [n for n, (g, p) in enumerate(zip(gold, pred)) if not g.same_as(p)]
    how = {n: mistakes(gold[n], pred[n], sentences[n]) for n in wrong}
    kinds = {
        "hold a token outside the vocabulary": [n for n in wrong if not writable[n]],
        "write a word that is not in the query": [
            n for n in wrong if "invented word" in how[n]
        ],
        "have the wrong intent": [n for n in wrong if "wrong intent" in how[n]],
    }
    rest = [n for n in wrong if all(n not in ns for ns in kinds.values())]
    slot_kinds = {
        "leave out a gold slot": [n for n in rest if "slot left out" in how[n]],
        "add a slot": [n for n in rest if "slot added" in how[n]],
        "have the gold slot names, a wrong value": [
            n for n in rest if "wrong value" in how[n]
        ],
    }
    return kinds, rest, slot_kinds
