"""Pre-training a small BERT on unlabelled text: masked language modelling, with or
without next-sentence prediction, static or dynamic masks (chapters 11 and 13;
chapter 12 starts from it).

One recipe, :func:`pretrain`, configured by one frozen :class:`PretrainConfig`: learn a
WordPiece vocabulary from the texts (unless given one), build a
:class:`bert.BertForPreTraining`, and train it with :func:`training.train` on
:func:`masked_lm.mlm_batches` (AdamW with weight decay 0.01, warm-up over the first
10 % of the steps, then linear decay, as BERT; Devlin et al., 2019, section 3.1 and
appendix A). Chapter 13's RoBERTa arms change one field each (Liu et al., 2019).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from . import bert, training
from .masked_lm import IGNORE, MASKINGS, mlm_batches, word_pieces_by_word
from .tokenizer import WordPiece

__all__ = [
    "PretrainConfig",
    "Pretrained",
    "pretraining_loss",
    "pretraining_metrics",
    "pretrain",
]


@dataclass(frozen=True)
class PretrainConfig:
    """Sizes and recipe of a small BERT pre-training run. The defaults are chapter
    11's quick profile: 2 layers of width 64, a 2,000-piece vocabulary, 500 updates of
    16 texts at 3e-3, MLM + NSP with dynamic masks, about 20 CPU-seconds."""

    vocab_size: int = 2000
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    max_len: int = 64
    batch_size: int = 16
    steps: int = 500
    lr: float = 3e-3
    dropout: float = 0.0
    nsp: bool = True
    masking: str = "dynamic"
    p_mask: float = 0.15
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "batch_size", "steps", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, got {self.masking!r}")
        if self.nsp and self.masking == "static":
            raise ValueError("masking='static' needs nsp=False (NSP pairs change)")

    def bert_config(self, tokenizer: WordPiece) -> bert.BertConfig:
        """The model's sizes, with ``tokenizer``'s vocabulary and [PAD] id."""
        return bert.BertConfig(
            vocab_size=len(tokenizer),
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            max_len=self.max_len,
            dropout=self.dropout,
            pad_id=tokenizer.pad_id,
        )


@dataclass
class Pretrained:
    """What :func:`pretrain` returns: the model (eval mode), its tokenizer, and
    per-step training losses (total, MLM, NSP)."""

    model: bert.BertForPreTraining
    tokenizer: WordPiece
    loss: list[float]
    mlm_loss: list[float]
    nsp_loss: list[float]


def pretraining_loss(
    model: bert.BertForPreTraining, batch: dict[str, Tensor], nsp: bool = True
) -> tuple[Tensor, Tensor, Tensor]:
    """MLM cross-entropy over the masked positions (+ NSP cross-entropy) of a batch of
    :func:`masked_lm.mlm_batches`. Returns (total, mlm, nsp); nsp is 0 when
    ``nsp=False``. Shapes: batch ``ids``, ``labels`` ... (B, T), ``is_next`` (B,)."""
    positions = batch["labels"] != IGNORE  # (B, T)
    mlm_logits, nsp_logits = model(
        batch["ids"], batch["token_type_ids"], batch["attention_mask"], positions
    )
    mlm = F.cross_entropy(mlm_logits, batch["labels"][positions])
    nsp_loss = (
        F.cross_entropy(nsp_logits, batch["is_next"]) if nsp else mlm.new_zeros(())
    )
    return mlm + nsp_loss, mlm, nsp_loss


@torch.no_grad()
def pretraining_metrics(
    model: bert.BertForPreTraining,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int = 64,
    batch_size: int = 128,
    seed: int = 0,
    nsp: bool = True,
) -> dict[str, float]:
    """Held-out MLM loss and accuracy (over the masked tokens) and NSP accuracy, on
    one pass over ``texts`` with one fixed draw of pairs and masks (``seed``)."""
    docs = [word_pieces_by_word(tok, t) for t in texts]
    batches = mlm_batches(tok, docs, batch_size, max_len, nsp=nsp, seed=seed)
    model.eval()
    device = next(model.parameters()).device
    mlm_sum, n_masked, n_right, nsp_right, n_pairs = 0.0, 0, 0, 0, 0
    for _ in range(math.ceil(len(docs) / batch_size)):  # one pass
        batch = training.to_device(next(batches), device)
        positions = batch["labels"] != IGNORE  # (B, T)
        mlm_logits, nsp_logits = model(
            batch["ids"], batch["token_type_ids"], batch["attention_mask"], positions
        )
        target = batch["labels"][positions]  # (n_masked,)
        mlm_sum += F.cross_entropy(mlm_logits, target, reduction="sum").item()
        n_masked += target.numel()
        n_right += (mlm_logits.argmax(-1) == target).sum().item()
        nsp_right += (nsp_logits.argmax(-1) == batch["is_next"]).sum().item()
        n_pairs += len(batch["is_next"])
    return {
        "mlm_loss": mlm_sum / n_masked,
        "mlm_accuracy": n_right / n_masked,
        "nsp_accuracy": nsp_right / n_pairs if nsp else math.nan,
    }


def pretrain(
    texts: Sequence[str],
    config: PretrainConfig = PretrainConfig(),
    tokenizer: WordPiece | None = None,
    docs: Sequence[list[list[int]]] | None = None,
    device: str | torch.device = "cpu",
) -> Pretrained:
    """Pre-train a small BERT on ``texts`` as ``config`` says; reproducible from
    ``config.seed``, and the caller's random state is left untouched.

    ``tokenizer``: learnt from ``texts`` (``config.vocab_size`` pieces) if not given.
    ``docs``: the texts already cut into word pieces by ``tokenizer``
    (:func:`masked_lm.word_pieces_by_word`, one list per text), to cut them once when
    several runs pre-train on the same texts; the result is the same as without it.
    """
    if docs is not None:
        if tokenizer is None:
            raise ValueError("docs were cut by a tokenizer: pass it as tokenizer=")
        if len(docs) != len(texts):
            raise ValueError(
                f"docs must hold one entry per text ({len(texts)}), got {len(docs)}"
            )
    if tokenizer is None:
        tokenizer = WordPiece.train(texts, config.vocab_size)
    if docs is None:
        docs = [word_pieces_by_word(tokenizer, t) for t in texts]
    c = config
    batches = mlm_batches(
        tokenizer, docs, c.batch_size, c.max_len, c.nsp, c.masking, c.seed, c.p_mask
    )
    losses: dict[str, list[float]] = {"mlm": [], "nsp": []}

    def loss_fn(model: bert.BertForPreTraining, batch: dict[str, Tensor]) -> Tensor:
        total, mlm, nsp_loss = pretraining_loss(model, batch, nsp=c.nsp)
        losses["mlm"].append(mlm.item())
        losses["nsp"].append(nsp_loss.item())
        return total

    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        torch.manual_seed(c.seed)  # initial weights and dropout
        model = bert.BertForPreTraining(c.bert_config(tokenizer)).to(device)
        history = training.train(
            model,
            batches,
            loss_fn,
            c.steps,
            lr=c.lr,
            weight_decay=0.01,
            warmup=max(1, c.steps // 10),
            decay="linear",
        )
    return Pretrained(model, tokenizer, history, losses["mlm"], losses["nsp"])
