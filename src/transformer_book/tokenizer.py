"""Tokenizers: text to ids and back (chapters 10 and 11).

WordPiece (BERT's sub-word vocabulary, chapter 11) and a byte-level tokenizer (ByT5's
vocabulary, chapter 10).
"""

from __future__ import annotations

__all__: list[str] = []
