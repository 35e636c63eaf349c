"""Checks for the exercises of chapter 05 on scoring slot filling: BIO spans and span-level F1."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import metrics
from ._core import ExerciseError, call, passed

__all__ = ["check_bio_spans", "check_span_f1"]

# (tags, what the case tests) — the reference answer comes from metrics.bio_spans
_SPAN_CASES = [
    (["O", "O", "O"], "no spans at all"),
    (["B-city", "O", "B-date"], "two one-word spans"),
    (["O", "B-city", "I-city", "I-city", "O"], "one span of three words"),
    (["B-city", "I-city"], "a span that runs to the end of the sentence"),
    (["B-city", "B-city", "I-city"], "a B- right after a span starts a new span"),
    (["O", "I-city", "I-city", "O"], "a stray I- (no B- before it) starts a span"),
    (
        ["B-from", "I-to", "O"],
        "an I- of another type ends the open span and starts a new one",
    ),
    (["B-time", "I-time", "B-time", "O", "I-date"], "all of the above at once"),
]


def check_bio_spans(fn: Callable[[Sequence[str]], list]) -> str:
    """``fn(tags)`` must return the spans ``(type, start, end)`` (end exclusive) of one
    BIO-tagged sentence."""
    for tags, what in _SPAN_CASES:
        got = call(fn, list(tags))
        expected = metrics.bio_spans(tags)
        try:
            got_list = [tuple(s) for s in got]
        except TypeError:
            raise ExerciseError(
                f"Return a list of (type, start, end) tuples; got {type(got).__name__}."
            ) from None
        if got_list == expected:
            continue
        hint = ""
        if [(t, s, e - 1) for t, s, e in expected] == got_list:
            hint = (
                " Your ends are one too small: use an exclusive end, "
                "so that words[start:end] is the span."
            )
        elif sorted(got_list) == sorted(expected):
            hint = " Right spans, wrong order: list them from left to right."
        elif any(t.startswith(("B-", "I-")) for t, _, _ in got_list):
            hint = " The type is the tag without its 'B-' / 'I-' prefix."
        raise ExerciseError(
            f"Case '{what}': for tags {tags} you returned {got_list}, expected {expected}.{hint}"
        )
    return passed(
        "spans open at B- (or a stray I-) and close at O, B-, "
        "a type change or the end of the sentence."
    )


def _f1(n_correct: int, n_pred: int, n_gold: int) -> float:
    # 2PR / (P + R) with P = correct / predicted and R = correct / gold
    return 2 * n_correct / (n_pred + n_gold) if n_pred + n_gold else 0.0


def _call_f1(fn: Callable, gold: list, pred: list, case: str) -> float:
    """Call the reader's span F1 on one case; a division by zero is named, not raised."""
    try:
        got = call(fn, gold, pred)
    except ZeroDivisionError:
        raise ExerciseError(
            f"Your function divided by zero {case}. F1 is 0 whenever no span is "
            "correct, also when nothing is predicted (P = 0/0 there); the equal form "
            "F1 = 2 * correct / (predicted + gold) needs a special case only when there "
            "is no span at all: return 0 then."
        ) from None
    try:
        return float(got)
    except (TypeError, ValueError):
        raise ExerciseError(
            f"Return one number, the F1; got {type(got).__name__}."
        ) from None


def check_span_f1(
    fn: Callable[[Sequence[Sequence[str]], Sequence[Sequence[str]]], float],
) -> str:
    """``fn(gold, pred)`` must return the span-level (micro) F1 of a corpus of BIO-tagged
    sentences; 0 when no span is correct (nothing predicted, nothing found, or no span
    on either side)."""
    gold = [
        ["O", "B-from", "I-from", "O", "B-to"],
        ["B-time", "O", "O"],
        ["O", "O"],
        ["B-date", "O", "O", "O"],
    ]
    pred = [
        ["O", "B-from", "O", "O", "B-to"],
        ["O", "O", "O"],
        ["B-time", "O"],
        ["B-date", "O", "B-time", "O"],
    ]
    expected = metrics.span_scores(gold, pred).f1
    got = _call_f1(
        fn,
        gold,
        pred,
        "on a corpus where one sentence has no predicted span and another no gold "
        "span (count the spans of the whole corpus first, then divide once)",
    )
    if abs(got - expected) < 1e-6:
        all_o = [["O"] * len(sentence) for sentence in gold]
        # each span moved one word to the right: predicted and gold, none correct
        shifted = [["O", *sentence[:-1]] for sentence in gold]
        o_tokens = "it finds no correct span. Are you scoring O tokens?"
        empty_cases = [
            (gold, all_o, "nothing is predicted (all 'O')", o_tokens),
            (gold, shifted, "spans are predicted but none is correct", o_tokens),
            (
                all_o,
                all_o,
                "there is no span at all, predicted or gold",
                "the exercise asks for 0 there, as metrics.span_scores gives.",
            ),
        ]
        for g, p, case, why in empty_cases:
            value = _call_f1(fn, g, p, f"when {case}")
            if abs(value) > 1e-6:
                raise ExerciseError(
                    f"When {case}, F1 must be 0; you returned {value:.4f}: {why}"
                )
        return passed(
            f"F1 = {expected:.4f}: a span counts only with its exact sentence, "
            "type, start and end; O tokens count for nothing."
        )
    # The usual wrong answers, each computed here so the message can name it.
    g_pooled = {s for sentence in gold for s in metrics.bio_spans(sentence)}
    p_pooled = {s for sentence in pred for s in metrics.bio_spans(sentence)}
    per_sentence = []
    for g, p in zip(gold, pred):
        gs, ps = set(metrics.bio_spans(g)), set(metrics.bio_spans(p))
        per_sentence.append(_f1(len(gs & ps), len(ps), len(gs)))
    wrong = {
        (
            "That is the token accuracy, which counts every O token too. "
            "Compare spans (type, start, end) instead."
        ): metrics.token_accuracy(gold, pred),
        (
            "Spans from different sentences were compared with each other: "
            "keep the sentence index in each span, e.g. (i, type, start, end)."
        ): _f1(len(g_pooled & p_pooled), len(p_pooled), len(g_pooled)),
        (
            "You averaged a per-sentence F1. conlleval counts correct, predicted "
            "and gold spans over the whole corpus first (micro average), "
            "then computes one F1."
        ): sum(per_sentence) / len(per_sentence),
    }
    for message, value in wrong.items():
        if abs(got - value) < 1e-6:
            raise ExerciseError(message)
    raise ExerciseError(
        f"You returned {got:.4f}, expected {expected:.4f}. Count correct, predicted and gold spans "
        "over the whole corpus, then P = correct/predicted, R = correct/gold, F1 = 2PR/(P+R). "
        "A partly right span (B-from I-from predicted as B-from O) is simply wrong."
    )
