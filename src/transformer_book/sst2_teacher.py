"""Chapter 13's data and teacher: SST-2 cut into the sets a distillation experiment
needs, kept apart by runs of words, and the fine-tuned teacher the students learn from.

:func:`sst2_splits` makes the student's labelled set, the dev set (choices), the test
set, the transfer set (:func:`transfer_set`: texts whose labels are never read; the
teacher labels them) and the teacher's own, larger labelled set; :class:`Teacher` is
all-MiniLM-L6-v2 (:func:`minilm_weights.from_pretrained`) with its top layers and a
head fine-tuned on those labels (:func:`train_teacher`; the book ships it as the
checkpoint ``sst-minilm-teacher``). The students themselves are
:mod:`transformer_book.distill`'s. Chapter 13 uses it, as do
``benchmarks/ch13_distillation.py`` and ``scripts/train_checkpoints.py``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from . import data, finetune, minilm_weights
from .bert_heads import SequenceClassifier
from .data import Labelled
from .tokenizer import WordPiece

__all__ = [
    "transfer_set",
    "SstSplits",
    "sst2_splits",
    "TeacherConfig",
    "Teacher",
    "train_teacher",
]


def transfer_set(
    texts: Sequence[str],
    exclude: Sequence[str],
    n: int,
    min_words: int = 6,
    ngram: int = 4,
    seed: int = 0,
) -> list[str]:
    """A transfer set for distillation: ``n`` distinct ``texts`` (of at least
    ``min_words`` words) drawn at random (``seed``), none of which shares a run of
    ``ngram`` words (lower-cased) with a text in ``exclude`` (the texts choices are
    made on and results reported on) or equals one. Only texts: their labels, if any,
    are never read; the teacher labels them.

    Hinton et al. (2015) and DistilBERT (Sanh et al., 2019) train the student on data
    the teacher labels, far more of it than the labelled set.
    """
    banned = set().union(*(data.word_ngrams(t, ngram) for t in exclude))
    seen = {t.lower() for t in exclude}
    pool = []
    for t in dict.fromkeys(texts):  # distinct, first-seen order
        if len(t.split()) >= min_words and t.lower() not in seen:
            if not data.word_ngrams(t, ngram) & banned:
                pool.append(t)
    if n > len(pool):
        raise ValueError(
            f"n={n}: only {len(pool)} texts of at least {min_words} words share no "
            f"{ngram}-word run with the excluded texts"
        )
    return random.Random(seed).sample(pool, n)


class SstSplits(NamedTuple):
    """Chapter 13's SST-2 texts. ``train`` (the student's labels), ``dev`` (choices)
    and ``teacher`` (the teacher's labels) are SST-2 training phrases; ``test`` is the
    start of GLUE's dev set (GLUE keeps its test labels); ``transfer`` are phrases whose
    labels are never read (the teacher labels them)."""

    train: Labelled
    dev: Labelled
    test: Labelled
    transfer: list[str]
    teacher: Labelled


def sst2_splits(
    n_train: int = 640,
    n_dev: int = 200,
    n_test: int = 256,
    n_transfer: int = 3000,
    min_words: int = 6,
    ngram: int = 4,
) -> SstSplits:
    """SST-2's training phrases shuffled (seed 0): the first ``n_train`` are ``train``,
    the next ``n_dev`` ``dev``; from the rest, ``n_transfer`` texts of at least
    ``min_words`` words form the transfer set (:func:`transfer_set`, seed 0, nothing
    shared with dev or test), and ``teacher`` is every other phrase of the rest that
    shares no run of ``ngram`` words with a dev, test or transfer text. SST-2's phrases
    are pieces of the same sentences, so without that rule the teacher would have seen
    the labels of (pieces of) the very texts it later labels or is scored on.
    """
    texts, labels = data.load_sst2("train")
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    rest = order[n_train + n_dev :]
    if n_train < 1 or n_dev < 1 or not rest:
        raise ValueError(
            f"n_train={n_train}, n_dev={n_dev}: both must be >= 1 and leave phrases "
            f"for the transfer and teacher sets (SST-2 has {len(texts):,})"
        )

    def part(idx: list[int]) -> Labelled:
        return [texts[i] for i in idx], [labels[i] for i in idx]

    train, dev = part(order[:n_train]), part(order[n_train : n_train + n_dev])
    test_x, test_y = data.load_sst2("dev")
    test = (test_x[:n_test], test_y[:n_test])
    rest_x = [texts[i] for i in rest]
    transfer = transfer_set(rest_x, dev[0] + test[0], n_transfer, min_words, ngram)
    held = dev[0] + test[0] + transfer
    banned = set().union(*(data.word_ngrams(t, ngram) for t in held))
    seen = {t.lower() for t in held}
    teacher = [
        i for i in rest
        if texts[i].lower() not in seen
        and not data.word_ngrams(texts[i], ngram) & banned
    ]  # fmt: skip
    return SstSplits(train, dev, test, transfer, part(teacher))


@dataclasses.dataclass(frozen=True)
class TeacherConfig:
    """A :class:`Teacher`: ``tuned_layers`` top layers of all-MiniLM-L6-v2 and the
    head are trained; everything below stays as pre-trained."""

    n_classes: int = 2
    tuned_layers: int = 2
    pooling: str = "mean"


class Teacher(SequenceClassifier):
    """all-MiniLM-L6-v2 (from its pip package) under a
    :class:`~transformer_book.bert_heads.SequenceClassifier` head, of which only
    :meth:`tuned` (the top ``config.tuned_layers`` layers and the head) are trained:
    what a checkpoint of it stores (``checkpoints.save(..., stored=...)``).

    Shapes: ids, token_type_ids, attention_mask (B, T) -> logits (B, n_classes).
    """

    def __init__(self, config: TeacherConfig = TeacherConfig()):
        encoder = minilm_weights.from_pretrained()
        n = encoder.config.n_layers
        if not 0 <= config.tuned_layers <= n:
            raise ValueError(
                f"tuned_layers must be between 0 and {n}, got {config.tuned_layers}"
            )
        super().__init__(encoder, config.n_classes, pooling=config.pooling)
        self.config = config

    def tuned(self) -> list[str]:
        """Name prefixes of the trained parameters: the top layers and the head."""
        n = self.encoder.config.n_layers
        top = range(n - self.config.tuned_layers, n)
        return [f"encoder.encoder.layers.{i}." for i in top] + ["classifier."]


def train_teacher(
    texts: Sequence[str],
    labels: Sequence[int],
    tok: WordPiece,
    steps: int,
    lr: float,
    config: TeacherConfig = TeacherConfig(),
    batch_size: int = 32,
    max_len: int = 32,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> Teacher:
    """A :class:`Teacher` fine-tuned by :func:`finetune.fine_tune` for ``steps``
    updates of ``batch_size`` labelled ``texts`` (shuffled, ``seed``) at peak rate
    ``lr``; only :meth:`Teacher.tuned` is trained (the rest is frozen meanwhile and
    thawed after, so that a student copied from it trains all its layers).
    ``seed`` also draws the head's initial weights."""
    if len(texts) != len(labels):
        raise ValueError(f"need one label per text: {len(texts)} texts, {len(labels)}")
    with torch.random.fork_rng():
        torch.manual_seed(seed)  # the head's initial weights
        teacher = Teacher(config)
    prefixes = tuple(teacher.tuned())
    frozen = [p for n, p in teacher.named_parameters() if not n.startswith(prefixes)]
    for p in frozen:
        p.requires_grad_(False)
    try:
        batches = finetune.classification_batches(  # length-bucketed: less padding
            tok, list(texts), list(labels), batch_size, max_len, seed
        )
        finetune.fine_tune(teacher, batches, steps, lr, seed=seed,
                           freeze_token_embeddings=False, on_step=on_step)  # fmt: skip
    finally:
        for p in frozen:
            p.requires_grad_(True)
    return teacher.eval()
