"""Bytes as the vocabulary: ByT5's tokenizer (chapter 10).

Every UTF-8 byte is a token, so no text is ever out of vocabulary, at the price of
longer sequences (Xue et al., 2022). BERT's sub-word vocabulary is
:class:`transformer_book.tokenizer.WordPiece`.
"""

from __future__ import annotations

__all__ = ["ByteTokenizer"]


class ByteTokenizer:
    """ByT5's vocabulary: every UTF-8 byte is a token, shifted past three special ids.

    ``pad`` = 0, ``eos`` = 1, ``unk`` = 2, byte b -> id b + 3; so 259 ids cover every
    text in every script, and nothing is ever unknown (``unk`` exists only for the
    layout's sake). ``extra_ids`` sentinels for span corruption follow the bytes:
    ``<extra_id_i>`` = 259 + i, as in Hugging Face's ``ByT5Tokenizer``. A character
    takes 1 to 4 bytes: "a" one, "é" two, "€" three, "🙂" four. Xue et al. (2022).
    """

    pad_id, eos_id, unk_id = 0, 1, 2
    offset = 3  # ids below the first byte's
    n_bytes = 256

    def __init__(self, extra_ids: int = 0) -> None:
        if not isinstance(extra_ids, int) or extra_ids < 0:
            raise ValueError(
                f"extra_ids must be a non-negative integer, got {extra_ids!r}"
            )
        self.extra_ids = extra_ids

    @property
    def vocab_size(self) -> int:
        """3 specials + 256 bytes + the sentinels."""
        return self.offset + self.n_bytes + self.extra_ids

    @property
    def sentinel_ids(self) -> list[int]:
        """The ids of ``<extra_id_0>``, ``<extra_id_1>``, ... in order."""
        first = self.offset + self.n_bytes
        return list(range(first, first + self.extra_ids))

    def encode(self, text: str, add_eos: bool = False) -> list[int]:
        """The text's UTF-8 bytes, each + 3; ``add_eos`` appends the end-of-sequence id."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        ids = [b + self.offset for b in text.encode("utf-8")]
        return ids + [self.eos_id] if add_eos else ids

    def decode(self, ids, errors: str = "replace") -> str:
        """Bytes back to text. pad, eos and unk are dropped; a sentinel is written as
        ``<extra_id_i>``; a byte sequence that is not valid UTF-8 (a model's output can
        be anything) is decoded with ``errors`` ("replace": U+FFFD, "ignore": dropped).
        """
        out, run = [], bytearray()
        first_sentinel = self.offset + self.n_bytes
        for i in (int(t) for t in ids):
            if not 0 <= i < self.vocab_size:
                raise ValueError(
                    f"id {i} is outside the vocabulary [0, {self.vocab_size})"
                )
            if self.offset <= i < first_sentinel:
                run.append(i - self.offset)
                continue
            out.append(run.decode("utf-8", errors=errors))
            run = bytearray()
            if i >= first_sentinel:
                out.append(f"<extra_id_{i - first_sentinel}>")
        out.append(run.decode("utf-8", errors=errors))
        return "".join(out)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (
            f"ByteTokenizer(vocab_size={self.vocab_size}, extra_ids={self.extra_ids})"
        )
