"""BERT: an encoder-only transformer pre-trained by filling in masked words (chapter 11).

Devlin et al. (2019), "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding". The model is the book's post-norm :class:`blocks.Encoder`
with GELU, under an input layer that adds three embeddings,

    x_t = LayerNorm(token[id_t] + position[t] + segment[type_t]),

and over it a *pooler* (``tanh(W h_[CLS] + b)``) that summarises the sequence. Two heads
pre-train it: masked language modelling (MLM, predict the tokens hidden by
:func:`masked_lm.mask_tokens`) and next-sentence prediction (NSP, is segment B the
continuation of segment A?). :func:`fill_mask` reads the MLM head; :func:`sentence_embeddings`
pools the encoder into sentence vectors (chapters 11 to 13).

Parameter names follow the book (``q_proj``, ``up_proj``, ``norm1``);
:mod:`transformer_book.minilm_weights` loads the real all-MiniLM-L6-v2 weights into
this code, and :mod:`transformer_book.sentence_similarity` is chapter 11's experiment
with its sentence vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .blocks import Encoder
from .masks import masked_mean
from .norms import LayerNorm
from .positions import LearnedPositionalEmbedding
from .tokenizer import WordPiece

__all__ = [
    "BertConfig",
    "BertEmbeddings",
    "BertModel",
    "BertOutput",
    "MaskedLMHead",
    "BertForPreTraining",
    "fill_mask",
    "sentence_embeddings",
]


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT model; the defaults are BERT-base (L=12, H=768, A=12, ≈110M
    parameters). ``n_segments`` is the number of segment (token type) embeddings."""

    vocab_size: int = 30522
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    d_ff: int = 3072
    max_len: int = 512
    n_segments: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )


class BertOutput(NamedTuple):
    """``hidden``: (B, T, d_model), one contextual vector per token; ``pooled``:
    (B, d_model), tanh(W h_[CLS] + b)."""

    hidden: Tensor
    pooled: Tensor


class BertEmbeddings(nn.Module):
    """token + position + segment embeddings, then LayerNorm and dropout.

    Shapes: ids (B, T), token_type_ids (B, T) in {0, …, n_segments-1} (zeros if None)
    -> (B, T, d_model). Devlin et al. (2019), figure 2.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.position = LearnedPositionalEmbedding(config.max_len, config.d_model)
        self.segment = nn.Embedding(config.n_segments, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if token_type_ids.shape != ids.shape:
            raise ValueError(
                f"token_type_ids must have the shape of ids {tuple(ids.shape)}, "
                f"got {tuple(token_type_ids.shape)}"
            )
        x = self.token(ids) + self.segment(token_type_ids)  # (B, T, d_model)
        return self.dropout(
            self.norm(self.position(x))
        )  # + position[t], (B, T, d_model)


class BertModel(nn.Module):
    """Embeddings, a post-norm encoder with GELU, and the pooler.

    Shapes: ids, token_type_ids, attention_mask (B, T) (mask: 1 or True = a real token,
    0 = padding) -> :class:`BertOutput` (hidden (B, T, d_model), pooled (B, d_model)).
    Devlin et al. (2019), section 3.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = Encoder(
            config.n_layers,
            config.d_model,
            config.n_heads,
            config.d_ff,
            dropout=config.dropout,
            norm_first=False,  # post-norm, as in the original transformer
            activation=F.gelu,  # the exact (erf) GELU of Hendrycks & Gimpel (2016)
            layer_norm_eps=config.layer_norm_eps,
        )
        self.pooler = nn.Linear(config.d_model, config.d_model)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """N(0, 0.02²) weights, zero biases, as in the original code."""
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> BertOutput:
        x = self.embeddings(ids, token_type_ids)  # (B, T, d_model)
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != ids.shape:
                raise ValueError(
                    f"attention_mask must have the shape of ids {tuple(ids.shape)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): keys allowed
        h = self.encoder(x, mask=mask)  # (B, T, d_model)
        return BertOutput(h, torch.tanh(self.pooler(h[:, 0])))  # [CLS] is position 0


class MaskedLMHead(nn.Module):
    """MLM head: dense + GELU + LayerNorm, then scores over the vocabulary with the
    output matrix *tied* to the token embedding (Press & Wolf, 2017).

    Shapes: h (..., d_model) -> (..., vocab_size).
    """

    def __init__(self, config: BertConfig, token_embedding: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.token_embedding = token_embedding  # shared, not a copy
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: Tensor) -> Tensor:
        h = self.norm(F.gelu(self.dense(h)))  # (..., d_model)
        return h @ self.token_embedding.weight.T + self.bias  # (..., vocab_size)


class BertForPreTraining(nn.Module):
    """BERT with its two pre-training heads: MLM over the tokens, NSP over the pooled
    [CLS] vector (two classes, :data:`masked_lm.IS_NEXT` and ``NOT_NEXT``).

    Shapes: ids, token_type_ids, attention_mask (B, T); ``positions`` (B, T) bool, the
    tokens to score (all if None). Returns MLM logits (B, T, V) or (n_positions, V),
    and NSP logits (B, 2).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = MaskedLMHead(config, self.bert.embeddings.token)
        self.nsp = nn.Linear(config.d_model, 2)
        for m in (self.mlm.dense, self.nsp):
            self.bert._init_weights(m)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        h, pooled = self.bert(ids, token_type_ids, attention_mask)
        if positions is not None:
            h = h[positions]  # (n_positions, d_model): scoring only these is cheaper
        return self.mlm(h), self.nsp(pooled)


@torch.no_grad()
def fill_mask(
    model: BertForPreTraining, tok: WordPiece, text: str, k: int = 5
) -> list[list[tuple[str, float]]]:
    """For every [MASK] in ``text``, the ``k`` most probable tokens and their
    probabilities, as the MLM head sees them."""
    enc = tok.pad([tok.encode(text, max_len=model.config.max_len)])
    device = next(model.parameters()).device
    enc = {name: v.to(device) for name, v in enc.items()}
    where = enc["ids"] == tok.mask_id  # (1, T)
    if not where.any():
        raise ValueError(f"text must contain {tok.itos[tok.mask_id]}, got {text!r}")
    logits, _ = model(enc["ids"], enc["token_type_ids"], enc["attention_mask"], where)
    top = logits.softmax(dim=-1).topk(k)  # (n_masks, k) each
    return [
        [(tok.itos[i], p) for i, p in zip(ids.tolist(), probs.tolist())]
        for ids, probs in zip(top.indices, top.values)
    ]


@torch.no_grad()
def sentence_embeddings(
    model: BertModel, tok: WordPiece, texts: Sequence[str], batch_size: int = 64
) -> Tensor:
    """Sentence vectors as all-MiniLM-L6-v2 makes them: mean of the last hidden states
    over the real tokens, scaled to unit length (so a dot product is a cosine).

    Shapes: len(texts) texts -> (len(texts), d_model). Reimers & Gurevych (2019).
    """
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(texts), batch_size):
        batch = tok.encode_batch(
            list(texts[i : i + batch_size]), max_len=model.config.max_len
        )
        batch = {k: v.to(device) for k, v in batch.items()}
        h = model(batch["ids"], batch["token_type_ids"], batch["attention_mask"]).hidden
        mean = masked_mean(h, batch["attention_mask"].bool())  # (B, D)
        out.append(F.normalize(mean, dim=-1))
    return torch.cat(out)  # (N, d_model)
