"""Word labels for a sub-word model: a word's label goes to its *first* word piece,
and the other pieces are ignored in the loss (label -100); a word's prediction is read
at its first piece (Devlin et al., 2019, section 5.3). Chapter 12 tags ATIS slots
this way; :mod:`qa` maps answer words to pieces with the same :func:`encode_words`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .basic_tokenizer import basic_tokenize
from .tokenizer import Encoding, WordPiece

__all__ = [
    "IGNORE",
    "encode_words",
    "first_subword_labels",
    "TaggingExample",
    "tagging_examples",
]

IGNORE = -100  # the label F.cross_entropy skips


def encode_words(tok: WordPiece, words: Sequence[str]) -> tuple[list[int], list[int]]:
    """Word pieces of already split ``words``: (ids, the index of the word each piece
    comes from). A word that basic tokenisation splits further ("a.m." -> "a", ".",
    "m", ".") keeps all its pieces under one index."""
    ids, word_of = [], []
    for w, word in enumerate(words):
        pieces = [
            p
            for part in basic_tokenize(word, tok.lowercase)
            for p in tok.word_pieces(part)
        ]
        pieces = pieces or [tok.unk_token]
        ids += tok.convert_tokens_to_ids(pieces)
        word_of += [w] * len(pieces)
    return ids, word_of


def first_subword_labels(
    word_of: Sequence[int], word_labels: Sequence[int]
) -> list[int]:
    """One label per piece: the word's label at its first piece, :data:`IGNORE` at the
    others. ``word_of`` as :func:`encode_words` returns it (non-decreasing)."""
    out, previous = [], None
    for w in word_of:
        if w < 0 or w >= len(word_labels):
            raise ValueError(
                f"word_of points at word {w}, but there are {len(word_labels)} labels"
            )
        out.append(word_labels[w] if w != previous else IGNORE)
        previous = w
    return out


@dataclass
class TaggingExample:
    """A sentence ready for token classification: its encoding, one label per piece
    (:data:`IGNORE` except at first pieces) and the word index of each piece (-1 for
    [CLS]/[SEP])."""

    encoding: Encoding
    labels: list[int]
    word_of: list[int]
    n_words: int

    def __len__(self) -> int:
        return len(self.encoding)

    def word_tags(self, piece_labels: Sequence[int], names: Sequence[str]) -> list[str]:
        """One tag name per word, read at the word's first piece from one label per
        piece (a model's predictions); "O" for words cut off at ``max_len``."""
        tags = ["O"] * self.n_words
        for t, w in enumerate(self.word_of):
            if w >= 0 and (t == 1 or self.word_of[t - 1] != w):  # a first piece
                tags[w] = names[piece_labels[t]]
        return tags


def tagging_examples(
    tok: WordPiece,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    tag_ids: dict[str, int],
    max_len: int,
) -> list[TaggingExample]:
    """Encode tagged sentences with first-sub-word labels; a tag missing from
    ``tag_ids`` (seen only in the test split) gets :data:`IGNORE`. Pieces past
    ``max_len`` are cut (their words then get the prediction "O")."""
    if len(tags) != len(sentences):
        raise ValueError(f"tags must hold {len(sentences)} lists, got {len(tags)}")
    out = []
    for words, t in zip(sentences, tags):
        ids, word_of = encode_words(tok, words)
        labels = first_subword_labels(word_of, [tag_ids.get(x, IGNORE) for x in t])
        keep = max_len - 2
        enc = tok.add_special_tokens(ids[:keep], max_len=max_len)
        out.append(
            TaggingExample(
                enc,
                [IGNORE, *labels[:keep], IGNORE],
                [-1, *word_of[:keep], -1],
                len(words),
            )
        )
    return out
