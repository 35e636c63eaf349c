"""WordPiece, BERT's sub-word tokenizer: text to ids and back, and a vocabulary learnt
from a corpus (chapter 11).

BERT's tokenizer works in two stages (Devlin et al., 2019, section 3; Wu et al., 2016):

1. basic tokenisation (:mod:`transformer_book.basic_tokenizer`): drop control
   characters, put spaces around CJK ideographs, strip accents, lower-case, split on
   whitespace and isolate every punctuation character;
2. WordPiece: cut each word into the longest vocabulary entry that starts it, then the
   longest ``##``-prefixed entry that continues it, and so on (greedy longest match
   first); a word that cannot be cut this way becomes ``[UNK]``.

The order of the steps follows Hugging Face's ``tokenizers`` BertNormalizer and
BertPreTokenizer, the reference the tests compare against. :meth:`WordPiece.train`
learns a vocabulary by merging pairs of units (:mod:`transformer_book.wordpiece_learning`:
the merge rules, and what a vocabulary costs a corpus). ByT5's byte-level
vocabulary (chapter 10) is :mod:`transformer_book.byte_tokenizer`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .basic_tokenizer import basic_tokenize
from .wordpiece_learning import MERGE_RULES, learn_merges

__all__ = [
    "SPECIAL_TOKENS",
    "Encoding",
    "WordPiece",
]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class Encoding:
    """One encoded input: token ids, segment (token type) ids and the attention mask
    (1 = a real token, 0 = padding), all of the same length."""

    ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]

    def __len__(self) -> int:
        return len(self.ids)


class WordPiece:
    """BERT's WordPiece tokenizer: basic tokenisation, then greedy longest-match-first
    sub-words, continuation pieces marked ``##``.

    ``encode`` gives ``[CLS] a [SEP]``, ``encode_pair`` ``[CLS] a [SEP] b [SEP]`` with
    segment ids 0 for the first part and 1 for the second (Devlin et al., 2019, fig. 2).
    Special tokens written in the text (``"[MASK]"``) are kept whole.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        lowercase: bool = True,
        unk_token: str = "[UNK]",
        prefix: str = "##",
        max_chars: int = 100,
    ) -> None:
        self.itos = list(vocab)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            dup = Counter(self.itos).most_common(1)[0][0]
            raise ValueError(f"vocab lists the token {dup!r} twice")
        missing = [t for t in SPECIAL_TOKENS if t not in self.stoi]
        if missing:
            raise ValueError(
                f"vocab must contain the special tokens {SPECIAL_TOKENS}, "
                f"missing {missing}"
            )
        self.lowercase, self.unk_token = lowercase, unk_token
        self.prefix, self.max_chars = prefix, max_chars
        self.pad_id, self.unk_id = self.stoi["[PAD]"], self.stoi[unk_token]
        self.cls_id, self.sep_id = self.stoi["[CLS]"], self.stoi["[SEP]"]
        self.mask_id = self.stoi["[MASK]"]
        self.special_ids = frozenset(self.stoi[t] for t in SPECIAL_TOKENS)
        specials = sorted(SPECIAL_TOKENS, key=len, reverse=True)
        self._specials = re.compile("(" + "|".join(map(re.escape, specials)) + ")")

    @classmethod
    def from_file(cls, path: str | Path, **kwargs) -> WordPiece:
        """Read a ``vocab.txt`` (one token per line; the line number is the id)."""
        tokens = Path(path).read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls(tokens, **kwargs)

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"WordPiece({len(self)} tokens, lowercase={self.lowercase})"

    def word_pieces(self, word: str) -> list[str]:
        """Greedy longest match first: "unaffable" -> ["una", "##ffa", "##ble"] with
        BERT's uncased vocabulary; [UNK] when some part of the word matches nothing."""
        if len(word) > self.max_chars:
            return [self.unk_token]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):  # longest candidate first
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.stoi:
                    break
            else:
                return [self.unk_token]  # nothing in the vocabulary starts here
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Text to word pieces (no [CLS]/[SEP]); special tokens in the text stay whole."""
        out: list[str] = []
        for part in self._specials.split(text):
            if part in self.stoi and part in SPECIAL_TOKENS:
                out.append(part)
                continue
            for word in basic_tokenize(part, self.lowercase):
                out += self.word_pieces(word)
        return out

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.stoi.get(t, self.unk_id) for t in tokens]

    def encode(self, text: str, max_len: int | None = None) -> Encoding:
        """``[CLS] text [SEP]``, cut to ``max_len`` tokens (the [SEP] kept)."""
        return self.add_special_tokens(
            self.convert_tokens_to_ids(self.tokenize(text)), max_len=max_len
        )

    def encode_pair(self, a: str, b: str, max_len: int | None = None) -> Encoding:
        """``[CLS] a [SEP] b [SEP]``, segment ids 0 up to the first [SEP] and 1 after it.

        Over ``max_len``, the longer part is cut first; if that is not enough, each
        keeps half of the room ("longest first", as the reference does).
        """
        ia = self.convert_tokens_to_ids(self.tokenize(a))
        ib = self.convert_tokens_to_ids(self.tokenize(b))
        return self.add_special_tokens(ia, ib, max_len=max_len)

    def add_special_tokens(
        self,
        a: Sequence[int],
        b: Sequence[int] | None = None,
        max_len: int | None = None,
    ) -> Encoding:
        """Ids of one or two segments -> ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]``
        with segment ids and attention mask, truncated longest-first to ``max_len``."""
        a, b = list(a), None if b is None else list(b)
        n_special = 2 if b is None else 3
        if max_len is not None:
            if max_len <= n_special:
                raise ValueError(
                    f"max_len must leave room for the {n_special} special tokens "
                    f"and one more, got {max_len}"
                )
            budget = max_len - n_special
            if b is None:
                a = a[:budget]
            elif len(a) + len(b) > budget:
                la, lb = _longest_first(len(a), len(b), budget)
                a, b = a[:la], b[:lb]
        ids = [self.cls_id, *a, self.sep_id]
        types = [0] * len(ids)
        if b is not None:
            ids += [*b, self.sep_id]
            types += [1] * (len(b) + 1)
        return Encoding(ids, types, [1] * len(ids))

    def encode_batch(
        self,
        texts: Sequence[str] | Sequence[tuple[str, str]],
        max_len: int | None = None,
    ) -> dict[str, Tensor]:
        """Encode texts (or (a, b) pairs) and pad with [PAD] to the longest: a dict of
        (B, T) long tensors ``ids``, ``token_type_ids``, ``attention_mask``."""
        encs = [
            self.encode_pair(*t, max_len=max_len)
            if isinstance(t, tuple)
            else self.encode(t, max_len=max_len)
            for t in texts
        ]
        return self.pad(encs)

    def pad(self, encodings: Sequence[Encoding]) -> dict[str, Tensor]:
        """Stack encodings into (B, T) tensors, padding each to the longest with [PAD]
        (token type 0, attention mask 0)."""
        if not encodings:
            raise ValueError("pad needs at least one encoding, got none")
        T = max(len(e) for e in encodings)
        out = {}
        for field, fill in (
            ("ids", self.pad_id),
            ("token_type_ids", 0),
            ("attention_mask", 0),
        ):
            rows = [getattr(e, field) + [fill] * (T - len(e)) for e in encodings]
            out[field] = torch.tensor(rows, dtype=torch.long)  # (B, T)
        return out

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """Ids back to text: ``##`` pieces glued to the piece before them. Lower case
        and stripped accents do not come back."""
        words: list[str] = []
        for i in ids:
            i = int(i)
            if skip_special and i in self.special_ids:
                continue
            t = self.itos[i]
            if t.startswith(self.prefix) and words:
                words[-1] += t[len(self.prefix) :]
            else:
                words.append(t)
        return " ".join(words)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        lowercase: bool = True,
        rule: str = "likelihood",
        min_pair_count: int = 1,
    ) -> WordPiece:
        """Learn a vocabulary of ``vocab_size`` tokens from a corpus.

        Start from single characters (``##``-prefixed inside a word) and merge adjacent
        pairs, one at a time, until the vocabulary is full. ``rule`` picks the pair:

        - ``"likelihood"``: the merge that raises most the log-likelihood of the corpus
          under a unigram model of the units, log L = sum_u c_u log(c_u / N) (Schuster
          & Nakajima, 2012; Wu et al., 2016). For units a, b (counts c_a, c_b) seen
          side by side k times (k much smaller than c_a, c_b) it is about
          k · [log(k N / (c_a c_b)) - 1]: it favours pairs that are frequent *and*
          more frequent together than apart, and it is positive only when k is
          about e times the count chance predicts (c_a c_b / N);
        - ``"ratio"``: count(ab) / (count(a) · count(b)), the association alone (the
          rule Hugging Face's course gives for WordPiece): it prefers pairs of rare
          units, digits and one-off words first;
        - ``"frequency"``: count(ab), byte-pair encoding's rule (Sennrich et al., 2016).

        Pairs seen fewer than ``min_pair_count`` times are never merged.
        """
        if vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, "
                f"got {vocab_size}"
            )
        if rule not in MERGE_RULES:
            raise ValueError(f"rule must be one of {MERGE_RULES}, got {rule!r}")
        words = Counter(w for t in texts for w in basic_tokenize(t, lowercase))
        splits = [[w[0], *("##" + c for c in w[1:])] for w in words]
        vocab = list(SPECIAL_TOKENS) + sorted({u for s in splits for u in s})
        merges = learn_merges(
            splits, list(words.values()), vocab_size - len(vocab), rule, min_pair_count
        )
        return cls(vocab + merges, lowercase=lowercase)


def _longest_first(n_a: int, n_b: int, budget: int) -> tuple[int, int]:
    """Lengths of two segments after "longest first" truncation to ``budget`` tokens:
    the shorter is kept whole if it fits in half the room and the longer gets the
    rest; otherwise the shorter keeps budget // 2 and the longer the remainder."""
    short = min(n_a, n_b)
    keep_short = short if short <= budget - short else budget // 2
    keep_long = budget - keep_short
    return (keep_long, keep_short) if n_a > n_b else (keep_short, keep_long)
