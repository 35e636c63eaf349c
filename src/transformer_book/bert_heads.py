"""Task heads on a pre-trained encoder: one label per sentence, one label per token,
and an answer span (chapter 12).

Devlin et al. (2019), section 4 and figure 4: fine-tuning adds one small layer on top
of BERT and trains everything. The heads take any ``encoder`` whose forward
``(ids, token_type_ids, attention_mask)`` returns ``(hidden (B, T, D), pooled (B, D))``
(:class:`transformer_book.bert.BertModel` does), so this module needs no model
module. Layer names follow Hugging Face's ``BertFor*`` classes (``classifier``,
``qa_outputs``), which makes the parity tests a copy of the weights.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from .masks import masked_mean

__all__ = [
    "SequenceClassifier",
    "TokenClassifier",
    "SpanLogits",
    "SpanExtractor",
]


def _hidden_size(encoder: nn.Module) -> int:
    config = getattr(encoder, "config", None)
    d = getattr(config, "d_model", None)
    if not isinstance(d, int):
        raise ValueError(
            "encoder must have a config with an integer d_model (a bert.BertModel), "
            f"got {type(encoder).__name__}"
        )
    return d


class SequenceClassifier(nn.Module):
    """Classes from the pooled [CLS] vector: ``W dropout(tanh(W_p h_[CLS])) + b``, or,
    with ``pooling="mean"``, from the mean of the real tokens' vectors.

    Shapes: ids, token_type_ids, attention_mask (B, T) -> logits (B, n_classes).
    Devlin et al. (2019), figure 4 (a, b); as ``BertForSequenceClassification``.
    Mean pooling is how sentence embedders such as all-MiniLM-L6-v2 summarise a
    sentence (Reimers & Gurevych, 2019).
    """

    def __init__(
        self,
        encoder: nn.Module,
        n_classes: int,
        dropout: float = 0.1,
        pooling: str = "cls",
    ):
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.pooling = pooling
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(_hidden_size(encoder), n_classes)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        hidden, pooled = self.encoder(ids, token_type_ids, attention_mask)
        if self.pooling == "mean":  # hidden (B, T, D) -> (B, D)
            keep = torch.ones_like(ids) if attention_mask is None else attention_mask
            pooled = masked_mean(hidden, keep.bool())  # (B, D)
        return self.classifier(self.dropout(pooled))  # (B, n_classes)


class TokenClassifier(nn.Module):
    """A label for every token from its contextual vector: ``W dropout(h_t) + b``.

    Shapes: ids, token_type_ids, attention_mask (B, T) -> logits (B, T, n_labels).
    Devlin et al. (2019), figure 4 (d); as ``BertForTokenClassification``.
    """

    def __init__(self, encoder: nn.Module, n_labels: int, dropout: float = 0.1):
        super().__init__()
        if n_labels < 2:
            raise ValueError(f"n_labels must be >= 2, got {n_labels}")
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(_hidden_size(encoder), n_labels)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        hidden, _ = self.encoder(ids, token_type_ids, attention_mask)  # (B, T, D)
        return self.classifier(self.dropout(hidden))  # (B, T, n_labels)


class SpanLogits(NamedTuple):
    """Scores of every token as the answer's first (``start``) and last (``end``)
    token, each (B, T)."""

    start: Tensor
    end: Tensor


class SpanExtractor(nn.Module):
    """Answer start and end scores for every token: one linear layer with two outputs,
    ``[s_t, e_t] = W h_t + b`` (a start vector S and an end vector E in the paper).

    Shapes: ids, token_type_ids, attention_mask (B, T) -> :class:`SpanLogits`, each
    (B, T). Devlin et al. (2019), section 4.2; as ``BertForQuestionAnswering``.
    """

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.qa_outputs = nn.Linear(_hidden_size(encoder), 2)
        nn.init.normal_(self.qa_outputs.weight, std=0.02)
        nn.init.zeros_(self.qa_outputs.bias)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> SpanLogits:
        hidden, _ = self.encoder(ids, token_type_ids, attention_mask)  # (B, T, D)
        start, end = self.qa_outputs(hidden).unbind(dim=-1)  # (B, T) each
        return SpanLogits(start, end)
