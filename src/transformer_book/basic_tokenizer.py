"""BERT's basic tokenisation, the first stage of its tokenizer (chapter 11): clean the
text up, then split it into words, every punctuation character a word of its own.

:func:`normalize` drops control characters, puts spaces around CJK ideographs, strips
accents (NFD, then drop the combining marks) and lower-cases; :func:`basic_tokenize`
splits the result on whitespace and isolates punctuation. The second stage, cutting
each word into word pieces, is :class:`transformer_book.tokenizer.WordPiece`. The
steps follow BERT's ``BasicTokenizer`` (Devlin et al., 2019) and Hugging Face's
``tokenizers`` BertNormalizer and BertPreTokenizer, the reference the tests compare
against.
"""

from __future__ import annotations

import functools
import unicodedata

__all__ = ["normalize", "basic_tokenize"]

# CJK Unified Ideographs and their extensions (the blocks BERT treats as one-character
# words; Japanese kana and Korean Hangul are not among them). Extension E starts at
# U+2B920 here, as in the reference (Google's original code has U+2B820).
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


@functools.lru_cache(maxsize=65536)
def _char_kind(ch: str) -> str:
    """What normalisation does with a character: "drop" (NUL, U+FFFD, and the Unicode
    "other" categories Cc, Cf, Cn, Co, Cs except tab, newline, carriage return),
    "space" (whitespace), "cjk" (a CJK ideograph, made a word of its own) or "keep"."""
    if ch in ("\x00", "\ufffd") or (
        ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")
    ):
        return "drop"
    if ch.isspace():
        return "space"
    cp = ord(ch)
    if cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in _CJK):
        return "cjk"
    return "keep"


@functools.lru_cache(maxsize=65536)
def _is_punctuation(ch: str) -> bool:
    """Unicode punctuation (P*), and ASCII symbols such as $ + < ^ ` | ~ too, as in BERT."""
    cp = ord(ch)
    ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
    return ascii_punct or unicodedata.category(ch).startswith("P")


# ASCII controls are dropped, tab/newline/carriage return become spaces.
_ASCII_CLEAN = dict.fromkeys([*range(32), 127]) | {ord(c): " " for c in "\t\n\r"}


def normalize(
    text: str, lowercase: bool = True, strip_accents: bool | None = None
) -> str:
    """BERT's text clean-up: controls dropped, whitespace to spaces, spaces around CJK
    ideographs, accents stripped (NFD, combining marks Mn dropped) and lower case.

    ``strip_accents=None`` strips them exactly when lower-casing (the uncased models).
    Lower-casing goes character by character, as the reference does (no final-sigma rule).
    """
    if text.isascii():  # fast path: no accents, no CJK, no Unicode whitespace
        text = text.translate(_ASCII_CLEAN)
        return text.lower() if lowercase else text
    out = []
    for ch in text:
        kind = _char_kind(ch)
        if kind == "keep":
            out.append(ch)
        elif kind == "space":
            out.append(" ")
        elif kind == "cjk":
            out.append(f" {ch} ")
    text = "".join(out)
    if lowercase if strip_accents is None else strip_accents:
        text = unicodedata.normalize("NFD", text)
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    if lowercase:
        text = "".join(ch.lower() for ch in text)
    return text


def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Normalise, split on whitespace, and make every punctuation character a word.

    "Don't panic!" -> ["don", "'", "t", "panic", "!"].
    """
    words: list[str] = []
    for chunk in normalize(text, lowercase).split():
        if chunk.isalnum():  # no punctuation inside: the common case
            words.append(chunk)
            continue
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punctuation(ch):
                if i > start:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words
