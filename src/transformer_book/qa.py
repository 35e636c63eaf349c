"""Extractive question answering: SQuAD-style scores, the best-span search, a QA set
built from ATIS slots, and its encoded features (chapter 12).

An extractive reader scores every context token as a possible answer start and end;
the answer is the span ``(i, j)`` that maximises ``start[i] + end[j]`` with
``i <= j < i + max_len`` (Devlin et al., 2019, section 4.2). Answers are scored as the
SQuAD v1.1 evaluation script does (Rajpurkar et al., 2016): after normalisation
(lower case, no punctuation, no articles *a/an/the*, single spaces), *exact match*
is 1 if the prediction equals a gold answer, and *F1* is the harmonic mean of
precision and recall of the shared words; both take the best over the gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .metrics import bio_spans
from .tagging import encode_words
from .tokenizer import Encoding, WordPiece

__all__ = [
    "normalize_answer",
    "exact_match",
    "f1",
    "squad_scores",
    "best_span",
    "QAExample",
    "slot_question",
    "qa_from_slots",
    "QAFeature",
    "qa_features",
    "ERROR_KINDS",
    "error_kinds",
    "lookup_answers",
    "lr_sweep_words",
]

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD v1.1's normalisation: lower case, drop punctuation, drop the articles
    a/an/the, collapse white space (in that order, as the official script)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    """Word-overlap F1 of the normalised strings (a bag of words: repeats count)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_scores(
    predictions: Sequence[str], golds: Sequence[Sequence[str]]
) -> dict[str, float]:
    """Mean exact match and F1 (in [0, 1]); each prediction is scored against the best
    of its gold answers."""
    if len(predictions) != len(golds):
        raise ValueError(
            f"golds must hold one list of answers per prediction: {len(predictions)} "
            f"predictions, {len(golds)} gold lists"
        )
    if not predictions:
        raise ValueError("squad_scores needs at least one prediction, got none")
    if any(len(g) == 0 for g in golds):
        raise ValueError("every question needs at least one gold answer")
    em = sum(max(exact_match(p, g) for g in gs) for p, gs in zip(predictions, golds))
    f = sum(max(f1(p, g) for g in gs) for p, gs in zip(predictions, golds))
    return {"exact_match": em / len(predictions), "f1": f / len(predictions)}


def best_span(
    start_logits: Tensor,
    end_logits: Tensor,
    allowed: Tensor | None = None,
    max_len: int = 10,
) -> tuple[Tensor, Tensor]:
    """The span maximising ``start[i] + end[j]`` with ``i <= j < i + max_len`` and both
    ends ``allowed`` (the context tokens), searched exactly over all pairs.

    Shapes: start_logits, end_logits, allowed (bool) (B, T) -> start, end (B,) long.
    """
    if start_logits.shape != end_logits.shape or start_logits.dim() != 2:
        raise ValueError(
            "start_logits and end_logits must both have shape (B, T), got "
            f"{tuple(start_logits.shape)} and {tuple(end_logits.shape)}"
        )
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    B, T = start_logits.shape
    if allowed is None:
        allowed = torch.ones(B, T, dtype=torch.bool, device=start_logits.device)
    if allowed.shape != (B, T) or allowed.dtype != torch.bool:
        raise ValueError(
            f"allowed must be a bool tensor of shape {(B, T)}, "
            f"got {allowed.dtype} {tuple(allowed.shape)}"
        )
    if not allowed.any(dim=1).all():
        raise ValueError("allowed must leave at least one position per row")
    score = start_logits[:, :, None] + end_logits[:, None, :]  # (B, T_start, T_end)
    i = torch.arange(T, device=start_logits.device)
    width = i[None, :] - i[:, None]  # (T, T): j - i
    ok = (width >= 0) & (width < max_len)  # (T, T)
    ok = ok[None] & allowed[:, :, None] & allowed[:, None, :]  # (B, T, T)
    score = score.masked_fill(~ok, float("-inf"))
    flat = score.flatten(1).argmax(dim=1)  # (B,) index into T * T
    return flat // T, flat % T


@dataclass(frozen=True)
class QAExample:
    """One extractive question: the context words, the question, and every gold
    answer as a word span ``(start, end)`` (end exclusive) into the context."""

    context: list[str]
    question: str
    answers: list[tuple[int, int]]
    slot: str

    def answer_texts(self) -> list[str]:
        return [" ".join(self.context[s:e]) for s, e in self.answers]


def slot_question(slot: str) -> str:
    """A question asking for an ATIS slot type: ``"fromloc.city_name"`` ->
    ``"what is the fromloc city name?"``."""
    return "what is the " + re.sub(r"[._]+", " ", slot).strip() + "?"


def qa_from_slots(
    sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]]
) -> list[QAExample]:
    """One question per slot type present in each tagged sentence; the sentence is the
    context and every span of that type is a gold answer (as SQuAD lists several).
    The questions of a sentence stay together, so a split by sentence is a split by
    query."""
    if len(sentences) != len(tags):
        raise ValueError(
            f"tags must hold one tag list per sentence: {len(sentences)} sentences, "
            f"{len(tags)} tag lists"
        )
    out = []
    for words, t in zip(sentences, tags):
        by_type: dict[str, list[tuple[int, int]]] = {}
        for kind, start, end in bio_spans(t):
            by_type.setdefault(kind, []).append((start, end))
        for kind, spans in by_type.items():
            out.append(QAExample(list(words), slot_question(kind), spans, kind))
    return out


@dataclass
class QAFeature:
    """A question-context pair as the reader sees it: ``[CLS] question [SEP] context
    [SEP]``, which tokens belong to the context, the context word of every token (-1
    elsewhere), and the first gold answer's start and end token."""

    example: QAExample
    encoding: Encoding
    context_mask: list[bool]
    word_of: list[int]
    start: int
    end: int

    def __len__(self) -> int:
        return len(self.encoding)

    def answer(self, start: int, end: int) -> str:
        """The context words of tokens ``start`` .. ``end``, widened to whole words."""
        return " ".join(
            self.example.context[self.word_of[start] : self.word_of[end] + 1]
        )


def qa_features(
    tok: WordPiece, examples: Sequence[QAExample], max_len: int
) -> list[QAFeature]:
    """Encode QA examples; the context is cut (never the question) to fit ``max_len``.
    An answer cut off points at [CLS] (position 0), as BERT does for no answer."""
    out = []
    for ex in examples:
        q = tok.convert_tokens_to_ids(tok.tokenize(ex.question))
        ids, word_of = encode_words(tok, ex.context)
        room = max_len - len(q) - 3
        if room < 1:
            raise ValueError(
                f"max_len={max_len} leaves no room for the context of {ex.question!r}"
            )
        ids, word_of = ids[:room], word_of[:room]
        enc = tok.add_special_tokens(q, ids)
        offset = len(q) + 2  # [CLS] question [SEP]
        ctx = [False] * len(enc)
        ctx[offset : offset + len(ids)] = [True] * len(ids)
        wmap = [-1] * len(enc)
        wmap[offset : offset + len(ids)] = word_of
        s, e = ex.answers[0]  # words s .. e-1
        tokens = [t for t, w in enumerate(wmap) if s <= w < e]
        start, end = (tokens[0], tokens[-1]) if tokens and wmap[-2] >= e - 1 else (0, 0)
        out.append(QAFeature(ex, enc, ctx, wmap, start, end))
    return out


ERROR_KINDS = ("another slot's answer", "wrong borders", "other")


def error_kinds(
    features: Sequence[QAFeature], answers: Sequence[str]
) -> tuple[Counter, dict[str, tuple[QAFeature, str]]]:
    """What kind of mistake each wrong answer (no exact match) is: ``"another slot's
    answer"`` (after normalisation it equals the gold answer of another question about
    the same context, checked first: "continental airlines" for gold "delta airlines"
    is that slot's answer, though it shares a word), ``"wrong borders"`` (else it
    shares a word with a gold answer), or ``"other"``.

    Returns the count of each kind and the first (feature, answer) of each kind."""
    if len(features) != len(answers):
        raise ValueError(
            f"answers must hold one answer per feature: {len(features)} features, "
            f"{len(answers)} answers"
        )
    by_context: dict[tuple, set[str]] = {}
    for f in features:
        key = tuple(f.example.context)
        by_context.setdefault(key, set()).update(f.example.answer_texts())
    kinds: Counter = Counter()
    first: dict[str, tuple[QAFeature, str]] = {}
    for f, a in zip(features, answers):
        golds = f.example.answer_texts()
        if max(exact_match(a, g) for g in golds):
            continue
        if any(exact_match(a, g) for g in by_context[tuple(f.example.context)]):
            kind = "another slot's answer"
        elif max(f1(a, g) for g in golds) > 0:
            kind = "wrong borders"
        else:
            kind = "other"
        kinds[kind] += 1
        first.setdefault(kind, (f, a))
    return kinds, first


def lookup_answers(
    train: Sequence[QAExample], test: Sequence[QAExample], max_words: int = 5
) -> list[str]:
    """A baseline with no network: for each question of ``test``, the run of at most
    ``max_words`` context words that was most often a gold answer to a question about
    the same slot in ``train`` (ties: the longer run, then the earlier one); ``""``
    when no run of the context was ever such an answer."""
    seen: dict[str, Counter] = {}
    for e in train:
        seen.setdefault(e.slot, Counter()).update(e.answer_texts())
    out = []
    for e in test:
        counts, words = seen.get(e.slot, Counter()), e.context
        runs = [
            (counts[" ".join(words[i:j])], j - i, -i, " ".join(words[i:j]))
            for i in range(len(words))
            for j in range(i + 1, min(len(words), i + max_words) + 1)
        ]
        best = max(runs, default=(0, 0, 0, ""))
        out.append(best[3] if best[0] > 0 else "")
    return out


def lr_sweep_words(
    sweep: dict, lr: float, steps: int, train_queries: int | None
) -> str:
    """The committed QA learning-rate sweep (``benchmarks/ch12_qa_learning_rate.py``:
    ``settings``, ``scores`` of F1 by rate on the dev questions, ``chosen_lr``) and a
    run of ``steps`` updates at peak rate ``lr`` on the questions of the first
    ``train_queries`` training queries (None: all) in words: whether ``lr`` is the
    sweep's choice, and whether the run is the sweep's own."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    st = sweep["settings"]
    queries = ("every training query" if train_queries is None
               else f"the first {train_queries:,} training queries")  # fmt: skip
    swept = (
        f"`benchmarks/ch12_qa_learning_rate.py` ran this recipe at each rate, shorter "
        f"({st['steps']} updates of {st['batch_size']}, seed 0, on the questions of the "
        f"first {st['train_queries']:,} training queries), and scored it on the *dev* "
        f"questions (those of the first {st['dev_queries']} dev queries): F1 "
        + "; ".join(f"{x['f1']:.3f} at {x['lr']:g}" for x in sweep["scores"])
    )
    trains = f"{steps} updates, on the questions of {queries}"
    if lr != sweep["chosen_lr"]:
        return (
            f"The peak rate {lr:g} is BERT's usual fine-tuning rate, not chosen here: "
            f"{swept}, and chose {sweep['chosen_lr']:g} for the quick profile's "
            f"short run. This page trains {trains}, at {lr:g}."
        )
    same_run = (steps, train_queries) == (st["steps"], st["train_queries"])
    return (
        f"The peak rate {lr:g} was chosen on the dev questions: {swept}. This page "
        "reads that committed result and trains "
        + (
            f"the same run ({steps} updates on the questions of {queries}, seed 0, "
            "at the chosen rate); only the test questions are new to it."
            if same_run
            else f"{trains}, at the chosen rate; that the choice holds for this run is "
            "an assumption this page does not test."
        )
    )
