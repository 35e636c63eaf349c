"""A word-level vocabulary: the table that turns words (or labels) into integer ids and
back (chapter 05).

Built from the *training* split only, so that evaluation sees what a deployed model would
see: a word never met in training becomes ``<unk>`` (and :meth:`Vocab.word_dropout` hides
known words behind ``<unk>`` during training, so the model learns what to do with it).
``<pad>`` fills short sentences up to the length of the longest one in a batch; its id is
what :func:`transformer_book.masks.padding_mask_from_ids` masks out. The same class, with no
special tokens, maps slot tags and intent labels to class ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

__all__ = ["Vocab"]


class Vocab:
    """Token <-> id table: special tokens first, then tokens by falling frequency
    (ties alphabetically).

    ``unk_token=None`` makes the vocabulary closed: looking up an unknown token raises ``KeyError``
    (what you want for class labels). ``pad_token=None`` leaves out the padding token.
    """

    def __init__(
        self,
        tokens: Iterable[str],
        pad_token: str | None = "<pad>",
        unk_token: str | None = "<unk>",
    ) -> None:
        self.pad_token, self.unk_token = pad_token, unk_token
        specials = [t for t in (pad_token, unk_token) if t is not None]
        if len(set(specials)) != len(specials):
            raise ValueError(
                f"pad_token and unk_token must differ, got {pad_token!r} twice"
            )
        self.itos: list[str] = list(specials)
        for t in tokens:
            if t not in specials:
                self.itos.append(t)
        self.stoi: dict[str, int] = {}
        for i, t in enumerate(self.itos):
            if t in self.stoi:
                raise ValueError(f"token {t!r} appears twice in the vocabulary")
            self.stoi[t] = i

    @classmethod
    def from_corpus(
        cls,
        corpus: Iterable[Sequence[str]],
        min_freq: int = 1,
        pad_token: str | None = "<pad>",
        unk_token: str | None = "<unk>",
    ) -> Vocab:
        """Every token seen at least ``min_freq`` times in ``corpus`` (a list of token lists)."""
        if min_freq > 1 and unk_token is None:
            raise ValueError(
                f"min_freq={min_freq} drops rare tokens, which needs an unk_token to map them to"
            )
        counts = Counter(t for sentence in corpus for t in sentence)
        kept = sorted(
            (t for t, n in counts.items() if n >= min_freq),
            key=lambda t: (-counts[t], t),
        )
        return cls(kept, pad_token=pad_token, unk_token=unk_token)

    @property
    def pad_id(self) -> int:
        if self.pad_token is None:
            raise ValueError("this vocabulary has no pad_token")
        return self.stoi[self.pad_token]

    @property
    def unk_id(self) -> int:
        if self.unk_token is None:
            raise ValueError("this vocabulary has no unk_token")
        return self.stoi[self.unk_token]

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        """The id of ``token``; the ``<unk>`` id for an unknown token (``KeyError`` if
        there is no unk)."""
        if token in self.stoi:
            return self.stoi[token]
        if self.unk_token is None:
            raise KeyError(
                f"{token!r} is not in this closed vocabulary of {len(self)} tokens"
            )
        return self.stoi[self.unk_token]

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of a list of tokens."""
        return [self[t] for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of a list (or 1-D tensor) of ids."""
        return [self.itos[int(i)] for i in ids]

    def encode_batch(
        self, sentences: Sequence[Sequence[str]], pad_value: int | None = None
    ) -> tuple[Tensor, Tensor]:
        """Encode and right-pad sentences to the longest one.

        ``pad_value`` defaults to ``pad_id`` (use -100 for targets that a loss should ignore).
        Shapes: returns ids (B, T_max) as int64 and lengths (B,).
        """
        if pad_value is None:
            pad_value = self.pad_id
        lengths = torch.tensor([len(s) for s in sentences], dtype=torch.long)
        T = int(lengths.max()) if len(sentences) else 0
        ids = torch.full((len(sentences), T), pad_value, dtype=torch.long)  # (B, T_max)
        for i, s in enumerate(sentences):
            ids[i, : len(s)] = torch.tensor(self.encode(s), dtype=torch.long)
        return ids, lengths

    def word_dropout(
        self, ids: Tensor, p: float, generator: torch.Generator | None = None
    ) -> Tensor:
        """A copy of ``ids`` in which each word becomes ``<unk>`` with probability ``p``.

        Padding stays padding. Training on such copies trains the ``<unk>`` embedding
        (which a training set free of unknown words never updates) and teaches the model
        to fall back on the context, as it must for the unseen words of a test set: the
        word dropout of Kiperwasser and Goldberg (2016), with one ``p`` for every word.
        ``generator`` (a CPU generator) makes the draw repeatable.
        Shapes: ids (B, T) -> (B, T).
        """
        if not 0.0 <= p < 1.0:
            raise ValueError(f"p must lie in [0, 1), got {p}")
        unk = self.unk_id  # raises when the vocabulary has no <unk>
        drop = torch.rand(ids.shape, generator=generator).to(ids.device) < p  # (B, T)
        if self.pad_token is not None:
            drop &= ids != self.pad_id
        return ids.masked_fill(drop, unk)

    def __repr__(self) -> str:
        head = ", ".join(repr(t) for t in self.itos[:6])
        return f"Vocab({len(self)} tokens: {head}{', ...' if len(self) > 6 else ''})"
