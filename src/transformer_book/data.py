"""The public datasets the book trains on, read: ATIS and SNIPS as words, BIO tags and
intents; Tiny Shakespeare as one text; SST-2 and rt-polarity as texts and labels; the
book's fixed rt-polarity split; and the rules that keep texts apart: evaluation
sentences out of pre-training text (:func:`without_overlap`), and phrases that share
no run of words (:func:`word_ngrams`), by which :func:`few_labels` draws chapter 12's
few labelled texts and its selection split, and ``sst2_teacher.sst2_splits`` chapter 13's
splits.

Where each file comes from and how it is checked (the registry, the local folder, the
cache, the download) is :mod:`transformer_book.data_files`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from .data_files import DataError, read_text

__all__ = [
    "SlotIntentSplit",
    "load_slot_intent",
    "load_atis",
    "load_snips",
    "load_tinyshakespeare",
    "load_sst2",
    "load_rt_polarity",
    "review_split",
    "without_overlap",
    "Labelled",
    "word_ngrams",
    "few_labels",
]


@dataclass(frozen=True)
class SlotIntentSplit:
    """One split of a slot-filling + intent dataset: per sentence, its words, one BIO tag
    per word, and its intent."""

    sentences: list[list[str]]
    tags: list[list[str]]
    intents: list[str]

    def __len__(self) -> int:
        return len(self.sentences)


def load_slot_intent(dataset: str, split: str) -> SlotIntentSplit:
    """Read ``<split>/seq.in``, ``seq.out`` and ``label`` (the Goo et al., 2018 format of
    ATIS and SNIPS).

    Words and tags are split on any whitespace (SNIPS has stray spaces). Multi-intent labels such
    as ``atis_flight#atis_airfare`` are kept as one label, as written in the file.
    """
    if split not in ("train", "dev", "test"):
        raise ValueError(f"split must be 'train', 'dev' or 'test', got {split!r}")
    words, tags, intents = (
        read_text(dataset, f"{split}/{name}").splitlines()
        for name in ("seq.in", "seq.out", "label")
    )
    if not len(words) == len(tags) == len(intents):
        raise DataError(
            f"{dataset}/{split}: {len(words)} sentences, {len(tags)} tag lines, "
            f"{len(intents)} labels"
        )
    sentences, tag_seqs = [w.split() for w in words], [t.split() for t in tags]
    for i, (w, t) in enumerate(zip(sentences, tag_seqs)):
        if len(w) != len(t):
            raise DataError(
                f"{dataset}/{split} line {i + 1}: {len(w)} words but {len(t)} tags"
            )
    return SlotIntentSplit(sentences, tag_seqs, [label.strip() for label in intents])


def load_atis(split: str) -> SlotIntentSplit:
    """ATIS flight-booking queries (Hemphill et al., 1990), split ``train`` (4,478),
    ``dev`` (500) or ``test`` (893)."""
    return load_slot_intent("atis", split)


def load_snips(split: str) -> SlotIntentSplit:
    """SNIPS voice-assistant queries, split ``train`` (13,084), ``dev`` (700) or ``test`` (700)."""
    return load_slot_intent("snips", split)


def load_tinyshakespeare() -> str:
    """Tiny Shakespeare, the whole text as one string (about 1.1 M characters)."""
    return read_text("tinyshakespeare", "input.txt")


def load_sst2(split: str) -> tuple[list[str], list[int]]:
    """GLUE SST-2 ``train`` or ``dev``: texts and labels (0 negative, 1 positive). The
    header row is skipped whatever it says (the mirrored train.tsv calls the text column
    ``text``, GLUE ``sentence``)."""
    if split not in ("train", "dev"):
        raise ValueError(
            f"split must be 'train' or 'dev' (GLUE's test labels are private), got {split!r}"
        )
    rows = read_text("sst2", f"{split}.tsv").splitlines()[1:]
    texts, labels = [], []
    for row in rows:
        text, label = row.rsplit("\t", 1)
        texts.append(text.strip())
        labels.append(int(label))
    return texts, labels


def load_rt_polarity() -> tuple[list[str], list[int]]:
    """Pang and Lee's sentence polarity data: 5,331 negative (label 0) then 5,331
    positive (label 1) snippets. The files are Windows-1252; they are decoded as such."""
    texts, labels = [], []
    for label, file in ((0, "rt-polarity.neg"), (1, "rt-polarity.pos")):
        lines = [line.strip() for line in read_text("rt-polarity", file).splitlines()]
        texts += [line for line in lines if line]
        labels += [label] * sum(1 for line in lines if line)
    return texts, labels


def review_split(seed: int = 0) -> dict[str, tuple[list[str], list[int]]]:
    """rt-polarity (Pang & Lee, 2005) shuffled with ``seed`` and cut into ``train``
    (8,662 reviews), ``dev`` and ``test`` (1,000 each): name -> (texts, labels).

    Chapter 11 pre-trains on the train texts (labels dropped); chapters 12 and 13
    fine-tune and evaluate on the same split, so no test review is seen in
    pre-training.
    """
    texts, labels = load_rt_polarity()
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    parts = {"train": order[:-2000], "test": order[-2000:-1000], "dev": order[-1000:]}
    return {
        name: ([texts[i] for i in idx], [labels[i] for i in idx])
        for name, idx in parts.items()
    }


def _overlap_key(text: str) -> str:
    text = text.lower().replace("-lrb-", "").replace("-rrb-", "")
    return "".join(ch for ch in text if ch.isalnum())


def without_overlap(texts: Sequence[str], held_out: Sequence[str]) -> list[str]:
    """``texts`` minus every text that contains one of ``held_out`` (compared on
    lower-case letters and digits only, so "it's" matches SST's "it 's"): no
    evaluation sentence may be seen, even unlabelled, in pre-training.

    Conservative: a very short held-out text (a word or two) removes every text that
    contains it, so more texts may go than there are held-out sentences."""
    keys = [k for k in map(_overlap_key, held_out) if k]
    return [t for t in texts if not any(k in _overlap_key(t) for k in keys)]


#: a labelled set: texts and their labels, one per text
Labelled = tuple[list[str], list[int]]


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The runs of ``n`` consecutive words of ``text`` (lower-cased, split on spaces):
    two texts that share one overlap. Used to keep held-out phrases apart from
    training ones (:func:`few_labels`, ``sst2_teacher.transfer_set``,
    ``sst2_teacher.sst2_splits``)."""
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def few_labels(
    texts: Sequence[str],
    labels: Sequence[int],
    n: int,
    n_select: int,
    min_words: int = 0,
    seed: int = 0,
    ngram: int = 4,
    select_min_words: int | None = None,
) -> tuple[Labelled, Labelled]:
    """Two random samples of a labelled training set, among its texts of at least
    ``min_words`` words: ``n`` to fine-tune on and ``n_select`` to choose settings on
    (a selection split carved from the training data, so that the reported split is
    never used for a choice), the latter among texts of at least ``select_min_words``
    words (default ``min_words``: make it resemble the reported split). Returns
    ``((texts, labels), (texts, labels))``; the same ``seed`` gives the same samples.

    A selection text shares no run of ``ngram`` words (lower-cased) with any text to
    fine-tune on (0: no such rule): where the texts are phrases cut from the same
    sentences (SST-2's), a selection phrase that repeats part of a training phrase
    would reward memorising that phrase.
    """
    if len(texts) != len(labels):
        raise ValueError(f"need one label per text: {len(texts)} texts, {len(labels)}")
    pool = [i for i, t in enumerate(texts) if len(t.split()) >= min_words]
    rng = random.Random(seed)
    if n < 1 or n_select < 0 or n + n_select > len(pool):
        raise ValueError(
            f"n={n} and n_select={n_select} need n >= 1 and n + n_select <= "
            f"{len(pool)} texts of at least {min_words} words"
        )
    train = rng.sample(pool, n)
    seen = (
        set().union(*(word_ngrams(texts[i], ngram) for i in train)) if ngram else set()
    )
    taken = set(train)
    longer = select_min_words or min_words
    rest = [
        i
        for i in pool
        if i not in taken
        and len(texts[i].split()) >= longer
        and not word_ngrams(texts[i], ngram) & seen
    ]
    if len(rest) < n_select:
        raise ValueError(
            f"n_select={n_select}: only {len(rest)} texts of at least {longer} words "
            f"share no {ngram}-word run with the texts to fine-tune on"
        )
    select = rng.sample(rest, n_select)
    return tuple(  # type: ignore[return-value]
        ([texts[i] for i in part], [labels[i] for i in part])
        for part in (train, select)
    )
