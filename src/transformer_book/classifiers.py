"""Putting the encoder to work: a label for every token, or one label for the whole
sentence (chapter 05).

Both models embed the words, tell attention where each word is, run
:class:`transformer_book.blocks.Encoder` with a padding mask, and put a linear layer on
top. Positions (chapter 04) are either learned absolute vectors added to the input
(``positions="learned"``, as in BERT) or T5's learned relative bias added to the
attention scores (``positions="relative"``, Raffel et al., 2020), which lets a head look
at "the word to my left" with the same few numbers at every position.

- :class:`WordTagger` applies the linear layer to every contextual embedding (slot filling:
  one BIO tag per word; chapter 12's pre-trained counterpart is
  ``bert_heads.TokenClassifier``). Its per-token choices can break the BIO rules (an ``I-x`` that
  continues nothing); :func:`predict_tags` can decode with :func:`bio.bio_viterbi` instead,
  the best sequence that keeps them.
- :class:`SentenceClassifier` first pools the sentence into one vector, either with a learned
  ``[CLS]`` vector prepended to the input and read back at the output (``pooling="cls"``, as in
  BERT, Devlin et al., 2019) or with the mean of the contextual embeddings over the real,
  non-padding tokens (``pooling="mean"``).

Training and scoring them: :func:`token_loss` and :func:`sentence_loss` (cross-entropy,
padding targets -100 skipped), :func:`mean_token_loss` over evaluation batches,
:func:`predict_tags` and :func:`predict_classes` (batched by length, answers in the input
order), and :func:`fit`, one ``training.train`` run scored on a dev split every few steps.

What the chapter trains them on lives in :mod:`transformer_book.slot_features`, and
the [CLS]-against-mean comparison in :mod:`transformer_book.pooling`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .batching import sorted_batches
from .bio import bio_viterbi
from .blocks import Encoder
from .masks import masked_mean
from .positions import T5RelativeBias
from .training import train

__all__ = [
    "ClassifierConfig",
    "WordTagger",
    "SentenceClassifier",
    "token_loss",
    "sentence_loss",
    "mean_token_loss",
    "predict_tags",
    "predict_classes",
    "fit",
    "POOLINGS",
    "POSITIONS",
]

POOLINGS = ("cls", "mean")
POSITIONS = ("learned", "relative")


@dataclass(frozen=True)
class ClassifierConfig:
    """Sizes of a token or sentence classifier.

    ``max_len`` bounds the input (the [CLS] position included) only for ``positions="learned"``,
    which has one vector per position; the relative bias has no such limit.
    """

    vocab_size: int
    n_classes: int
    max_len: int = 64
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 1
    dropout: float = 0.1
    pad_id: int = 0
    # "learned" (absolute, added to the input) or "relative" (T5 bias on the scores)
    positions: str = "learned"
    pooling: str = "cls"  # SentenceClassifier only: "cls" or "mean"

    def __post_init__(self) -> None:
        if self.positions not in POSITIONS:
            raise ValueError(
                f"positions must be one of {POSITIONS}, got {self.positions!r}"
            )
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id must lie in [0, vocab_size={self.vocab_size}), got {self.pad_id}"
            )


class _EncoderBody(nn.Module):
    """Token embedding + positions (absolute or relative) + encoder stack, with a padding mask."""

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        if cfg.positions == "learned":
            # Learned absolute positions (chapter 04) as a plain nn.Embedding; a position >= max_len
            # has no vector, hence the ValueError in `check_ids`.
            self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        else:
            # One learned scalar per head and distance bucket, shared by all layers as in T5.
            self.rel_bias = T5RelativeBias(cfg.n_heads)
        self.encoder = Encoder(
            cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=cfg.dropout
        )
        self.emb_dropout = nn.Dropout(cfg.dropout)

    def check_ids(self, ids: Tensor, extra: int = 0) -> None:
        if ids.dim() != 2 or ids.dtype.is_floating_point:
            raise ValueError(
                f"ids must be an integer tensor of shape (B, T), got {ids.dtype} {tuple(ids.shape)}"
            )
        if self.cfg.positions == "learned" and ids.shape[1] + extra > self.cfg.max_len:
            raise ValueError(
                f"a sequence of {ids.shape[1]} tokens{' plus [CLS]' if extra else ''} "
                f"is longer than max_len={self.cfg.max_len}: learned positions stop "
                "there; raise max_len or truncate"
            )

    def _prepare(self, x: Tensor, keep: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Positions (added to x, or as an attention bias) and the padding mask.

        Shapes: x (B, T, D), keep (B, T) bool -> x (B, T, D), mask (B, 1, 1, T),
        bias (1, H, T, T) or None.
        """
        mask = keep[:, None, None, :]  # (B, 1, 1, T): True = may attend
        if self.cfg.positions == "learned":
            x = x + self.pos_emb(torch.arange(x.shape[1], device=x.device))  # + (T, D)
            return self.emb_dropout(x), mask, None
        return self.emb_dropout(x), mask, self.rel_bias(x.shape[1])

    def run(self, x: Tensor, keep: Tensor) -> Tensor:
        """Add positions, then encode. Shapes: x (B, T, D), keep (B, T) bool -> (B, T, D)."""
        x, mask, bias = self._prepare(x, keep)
        return self.encoder(x, mask=mask, bias=bias)

    def first_layer_attention(self, x: Tensor, keep: Tensor) -> Tensor:
        """Attention weights of the first block, as ``run`` computes them.

        Shapes: -> (B, H, T, T).
        """
        x, mask, bias = self._prepare(x, keep)
        layer = self.encoder.layers[0]
        # what that block's attention sees: x itself (post-norm) or its LayerNorm
        h = layer.norm1(x) if layer.norm_first else x
        return layer.attn(h, mask=mask, bias=bias, need_weights=True)[1]


class WordTagger(nn.Module):
    """One label per token: logits_t = W · h_t + b on every contextual embedding h_t.

    Shapes: ids (B, T) with ``cfg.pad_id`` as padding -> logits (B, T, n_classes).
    """

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.body = _EncoderBody(cfg)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)

    def contextual(self, ids: Tensor) -> Tensor:
        """The encoder's output for every token. Shapes: (B, T) -> (B, T, d_model)."""
        self.body.check_ids(ids)
        keep = ids != self.cfg.pad_id  # (B, T)
        return self.body.run(self.body.tok_emb(ids), keep)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.contextual(ids))  # (B, T, n_classes)


class SentenceClassifier(nn.Module):
    """One label per sentence from a pooled vector: the [CLS] output or the mean over real tokens.

    Shapes: ids (B, T) with ``cfg.pad_id`` as padding -> logits (B, n_classes).
    Devlin et al. (2019) for the [CLS] token.
    """

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.body = _EncoderBody(cfg)
        if cfg.pooling == "cls":
            # one learned input vector, prepended to every sentence
            self.cls = nn.Parameter(torch.randn(1, 1, cfg.d_model) * 0.02)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)

    def _inputs(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """Embedded tokens, with [CLS] prepended for cls pooling.

        Shapes: (B, T) -> x (B, T', D), keep (B, T').
        """
        self.body.check_ids(ids, extra=1 if self.cfg.pooling == "cls" else 0)
        keep = ids != self.cfg.pad_id  # (B, T)
        x = self.body.tok_emb(ids)  # (B, T, D)
        if self.cfg.pooling == "cls":
            B = ids.shape[0]
            x = torch.cat([self.cls.expand(B, 1, -1), x], dim=1)  # (B, 1 + T, D)
            keep = torch.cat([keep.new_ones(B, 1), keep], dim=1)  # (B, 1 + T)
        return x, keep

    def pool(self, ids: Tensor) -> Tensor:
        """The sentence vector the head sees. Shapes: (B, T) -> (B, d_model)."""
        x, keep = self._inputs(ids)
        h = self.body.run(x, keep)  # (B, T', D)
        if self.cfg.pooling == "cls":
            return h[:, 0]  # (B, D): the output at the [CLS] position
        return masked_mean(h, keep)  # (B, D)

    def attention_weights(self, ids: Tensor) -> Tensor:
        """First-block attention weights; with cls pooling, position 0 is [CLS].

        Shapes: (B, T) -> (B, H, T', T').
        """
        return self.body.first_layer_attention(*self._inputs(ids))

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.pool(ids))  # (B, n_classes)


IGNORE = -100  # the target of positions the losses skip (padding, unseen tags)


def token_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy over the tokens whose target is not -100 (padding).

    Shapes: batch (ids (B, T), tags (B, T)); ``model(ids)`` -> (B, T, C); a scalar.
    """
    ids, tags = batch
    logits = model(ids)  # (B, T, C)
    return F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=IGNORE)


def sentence_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy of one label per sentence.

    Shapes: batch (ids (B, T), labels (B,)); ``model(ids)`` -> (B, C); a scalar.
    """
    ids, labels = batch
    return F.cross_entropy(model(ids), labels)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def mean_token_loss(
    model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]]
) -> float:
    """:func:`token_loss` over every scored token of ``batches`` (not a mean of batch
    means), in eval mode; the model's mode is restored afterwards."""
    was_training, device = model.training, _device(model)
    model.eval()
    total, count = 0.0, 0
    for ids, tags in batches:
        logits = model(ids.to(device))  # (b, T, C)
        tags = tags.to(device)
        total += F.cross_entropy(
            logits.flatten(0, 1), tags.flatten(), ignore_index=IGNORE, reduction="sum"
        ).item()
        count += int((tags != IGNORE).sum())
    model.train(was_training)
    if count == 0:
        raise ValueError("batches hold no scored token: nothing to evaluate")
    return total / count


@torch.no_grad()
def predict_tags(
    model: nn.Module,
    ids: Tensor,
    lengths: Tensor,
    transitions: tuple[Tensor, Tensor] | None = None,
    batch_size: int = 128,
) -> list[list[int]]:
    """The tag id of every real token of every row, in the rows' order: word by word
    (arg-max), or with ``transitions=(start, allowed)`` (:func:`bio.bio_transitions`) the
    best sequence the rules allow (:func:`bio.bio_viterbi`). Eval mode, restored after.

    Shapes: ids (N, T_max), lengths (N,) -> N lists, row n of length lengths[n].
    """
    was_training, device = model.training, _device(model)
    model.eval()
    out: list[list[int]] = [[] for _ in range(len(ids))]
    for idx, x, lens in sorted_batches(ids, lengths, batch_size):
        logits = model(x.to(device))  # (b, T, C)
        if transitions is None:
            best = logits.argmax(dim=-1)  # (b, T)
        else:
            best = bio_viterbi(logits.log_softmax(dim=-1), lens, *transitions)
        for i, row, k in zip(idx.tolist(), best.cpu(), lens.tolist()):
            out[i] = row[:k].tolist()
    model.train(was_training)
    return out


@torch.no_grad()
def predict_classes(
    model: nn.Module, ids: Tensor, lengths: Tensor, batch_size: int = 128
) -> list[int]:
    """The arg-max class of every row, in the rows' order, batched by length; eval
    mode, restored after. Shapes: ids (N, T_max), lengths (N,) -> N ints."""
    was_training, device = model.training, _device(model)
    model.eval()
    out = [0] * len(ids)
    for idx, x, _ in sorted_batches(ids, lengths, batch_size):
        for i, best in zip(idx.tolist(), model(x.to(device)).argmax(dim=-1).tolist()):
            out[i] = best
    model.train(was_training)
    return out


def fit(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], Tensor],
    steps: int,
    score: Callable[[nn.Module], float],
    every: int,
    lr: float,
    warmup: int = 0,
    cooldown: int = 0,
) -> tuple[list[float], dict[int, float]]:
    """One ``training.train`` run of ``steps`` updates, the last ``cooldown`` of them at
    a tenth of ``lr``, with ``score(model)`` (on a dev split, say) after every
    ``every``-th update, at the start of the cooldown and at the end.

    Returns the training loss of every step and {updates done: score}.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    scores: dict[int, float] = {}

    def evaluate(step: int, loss: float) -> None:
        done = step + 1
        if done % every == 0 or done in (steps - cooldown, steps):
            scores[done] = score(model)

    history = train(
        model, batches, loss_fn, steps, lr=lr, warmup=warmup, cooldown=cooldown,
        on_step=evaluate,
    )  # fmt: skip
    return history, scores
