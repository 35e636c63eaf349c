"""Chapter 05's slot-and-intent task as features: what the chapter's taggers and
sentence classifiers (:mod:`transformer_book.classifiers`) train on and answer in.

:class:`SlotIntentFeatures` holds a slot-and-intent training split (ATIS, SNIPS) with
its three vocabularies, the split encoded once, training batches with word dropout,
the chapter's training recipe (a tagger or a sentence classifier, one
``training.train`` run ending in a tail at a tenth of the rate) and the predictions of
trained models read back as tag and intent names; chapter 07 reuses it for its
word-level baselines. :class:`LookupTagger` is the word-by-word baseline (each word's
most frequent training tag), and :func:`cooldown_verdict` reads the chapter's run with
that lr / 10 tail against a control without it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .baselines import majority_class
from .batching import PaddedBatches
from .classifiers import (
    IGNORE,
    ClassifierConfig,
    SentenceClassifier,
    WordTagger,
    fit,
    predict_classes,
    predict_tags,
    sentence_loss,
    token_loss,
)
from .data import SlotIntentSplit
from .frames import Frame, frame_from_tags
from .training import train
from .vocab import Vocab

__all__ = ["SlotIntentFeatures", "LookupTagger", "cooldown_verdict"]


@dataclass
class SlotIntentFeatures:
    """What chapters 05 and 07 train on, from a slot-and-intent training split (ATIS,
    SNIPS): its three vocabularies (``words`` with ``<pad>`` and ``<unk>``; ``tags`` and
    ``intents`` without), the split encoded once, batches with word dropout, and the
    predictions of trained models read back as tag and intent names.

    Shapes: ``ids`` and ``tag_ids`` (N, T_max) (padding tags ``IGNORE``), ``lengths``
    and ``intent_ids`` (N,), for the N queries of ``train``.
    """

    train: SlotIntentSplit
    words: Vocab
    tags: Vocab
    intents: Vocab

    def __post_init__(self) -> None:
        self.ids, self.lengths = self.words.encode_batch(self.train.sentences)
        self.tag_ids, _ = self.tags.encode_batch(self.train.tags, pad_value=IGNORE)
        self.intent_ids = torch.tensor([self.intents[x] for x in self.train.intents])

    @classmethod
    def from_split(cls, train: SlotIntentSplit) -> SlotIntentFeatures:
        """The vocabularies built from ``train`` alone (every word, tag and intent)."""
        labels = dict(pad_token=None, unk_token=None)
        return cls(
            train,
            Vocab.from_corpus(train.sentences),
            Vocab.from_corpus(train.tags, **labels),
            Vocab.from_corpus([[x] for x in train.intents], **labels),
        )

    def batches(
        self, target: str, batch_size: int, seed: int, p_unk: float
    ) -> PaddedBatches:
        """Training batches (x, y) grouped by length (:class:`batching.PaddedBatches`),
        each word of x replaced by ``<unk>`` with probability ``p_unk``
        (:meth:`Vocab.word_dropout`); y: the tags (b, T) for ``target="tags"``, one
        intent (b,) for ``target="intents"``."""
        targets = {"tags": self.tag_ids, "intents": self.intent_ids}[target]

        def drop(x: Tensor, generator: torch.Generator) -> Tensor:
            return self.words.word_dropout(x, p_unk, generator=generator)

        return PaddedBatches(
            self.ids, self.lengths, targets, batch_size, seed, augment=drop
        )

    def tags_for(
        self,
        model: nn.Module,
        sentences: Sequence[Sequence[str]],
        rules: tuple[Tensor, Tensor] | None = None,
    ) -> list[list[str]]:
        """The tag names of every sentence (:func:`classifiers.predict_tags`): word by
        word, or the best sequence ``rules`` (:func:`bio.bio_transitions`) allow."""
        ids, lengths = self.words.encode_batch(sentences)  # unknown words -> <unk>
        rows = predict_tags(model, ids, lengths, rules)
        return [self.tags.decode(row) for row in rows]

    def intents_for(
        self, model: nn.Module, sentences: Sequence[Sequence[str]]
    ) -> list[str]:
        """The predicted intent name of every sentence
        (:func:`classifiers.predict_classes`)."""
        ids, lengths = self.words.encode_batch(sentences)
        return self.intents.decode(predict_classes(model, ids, lengths))

    def frames_for(
        self,
        tagger: nn.Module,
        classifier: nn.Module,
        sentences: Sequence[Sequence[str]],
        rules: tuple[Tensor, Tensor] | None = None,
    ) -> list[Frame]:
        """The frame of every sentence (chapter 07): the slots from the tagger's tags
        (:meth:`tags_for`, with ``rules`` if given), the classifier's intent
        (:meth:`intents_for`), put together by :func:`frames.frame_from_tags`."""
        tags = self.tags_for(tagger, sentences, rules)
        said = self.intents_for(classifier, sentences)
        return list(map(frame_from_tags, sentences, tags, said))

    def train_model(
        self,
        target: str,
        steps: int,
        lr: float,
        *,
        batch_size: int,
        seed: int,
        p_unk: float,
        warmup: int = 0,
        device: torch.device | str = "cpu",
        score: Callable[[nn.Module], float] | None = None,
        every: int = 1,
        **sizes: object,
    ) -> tuple[nn.Module, list[float], dict[int, float]]:
        """A new :class:`classifiers.WordTagger` (``target="tags"``) or
        :class:`classifiers.SentenceClassifier` (``"intents"``) of ``sizes`` (the other
        fields of :class:`classifiers.ClassifierConfig`), drawn from the global
        generator and trained by one ``training.train`` run:
        ``steps`` updates at ``lr`` after ``warmup``, then a fifth more
        (``cooldown=steps // 5``) at a tenth of it, on :meth:`batches`.

        Returns the model, the loss of every step and, with ``score``, the scores
        :func:`classifiers.fit` records every ``every`` steps (else {}).
        """
        labels = self.tags if target == "tags" else self.intents
        cfg = ClassifierConfig(
            len(self.words), len(labels), pad_id=self.words.pad_id, **sizes
        )
        kind = WordTagger if target == "tags" else SentenceClassifier
        model = kind(cfg).to(device)
        batches = self.batches(target, batch_size, seed, p_unk)
        loss = token_loss if target == "tags" else sentence_loss
        tail = steps // 5
        if score is None:
            history = train(
                model, batches, loss, steps + tail, lr=lr, warmup=warmup, cooldown=tail
            )
            return model, history, {}
        history, scores = fit(
            model, batches, loss, steps + tail, score, every, lr, warmup, cooldown=tail
        )
        return model, history, scores


class LookupTagger:
    """The per-word baseline of chapter 05: each word gets the tag it has most often in
    the training data (the first seen among equally frequent ones,
    ``baselines.majority_class``), a word training never shows ``O``. It reads no
    other word, so every occurrence of a word gets the same tag.
    """

    def __init__(
        self, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]]
    ) -> None:
        self.seen: dict[str, list[str]] = defaultdict(list)  # word -> its train tags
        for sent, row in zip(sentences, tags):
            for word, tag in zip(sent, row):
                self.seen[word].append(tag)
        self.best = {word: majority_class(ts) for word, ts in self.seen.items()}

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """The lookup tag of every word of every sentence."""
        return [[self.best.get(word, "O") for word in sent] for sent in sentences]

    def kind_of(self, word: str) -> str:
        """``"unseen in train"``, ``"one tag"`` or ``"several training tags"`` (the
        word alone cannot settle its tag)."""
        if word not in self.seen:
            return "unseen in train"
        return "several training tags" if len(set(self.seen[word])) > 1 else "one tag"

    def errors_by_kind(
        self,
        sentences: Sequence[Sequence[str]],
        gold: Sequence[Sequence[str]],
        pred: Sequence[Sequence[str]],
    ) -> Counter:
        """How many words of each :meth:`kind_of` ``pred`` tags wrong."""
        return Counter(
            self.kind_of(w)
            for sent, gs, ps in zip(sentences, gold, pred)
            for w, g, p in zip(sent, gs, ps)
            if g != p
        )

    def errors_table(
        self,
        sentences: Sequence[Sequence[str]],
        gold: Sequence[Sequence[str]],
        preds: dict[str, Sequence[Sequence[str]]],
        split: str = "test",
    ) -> tuple[dict[str, Counter], Counter, str]:
        """:meth:`errors_by_kind` of every tagger of ``preds`` ({name: its tags of
        ``sentences``}); the number of words of each :meth:`kind_of` in
        ``sentences``; and a text table of both, a column per kind (``split`` names
        the sentences in its first column)."""
        if not preds:
            raise ValueError("preds must name at least one tagger's tags, got none")
        wrong = {n: self.errors_by_kind(sentences, gold, p) for n, p in preds.items()}
        n_kind = Counter(self.kind_of(w) for sent in sentences for w in sent)
        kinds = ("several training tags", "unseen in train", "one tag")
        head = f"wrongly tagged {split} words"
        lines = [f"{head:<26}" + "".join(f"{k:>23}" for k in kinds)]
        for name, row in {f"({split} words of the kind)": n_kind, **wrong}.items():
            lines.append(f"{name:<26}" + "".join(f"{row[k]:>23}" for k in kinds))
        return wrong, n_kind, "\n".join(lines)


def cooldown_verdict(with_tail: float, without: float, jitter: float) -> str:
    """Chapter 05's reading of one run with the lr / 10 tail against one control all at
    the full rate (dev scores ``with_tail`` and ``without``), with ``jitter``, how much
    the dev score moves between evaluations at the full rate, as the yardstick."""
    if with_tail - without > jitter:
        return (
            "ahead of the control by more than that range: modest evidence (one run "
            "of each) for the tail, which costs nothing over the same number of steps"
        )
    return (
        "not ahead of the control by more than that range, so one run of each does "
        "not credit the tail with a gain; we keep it as a cheap default, not as a "
        "measured gain"
    )
