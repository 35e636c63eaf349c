"""Pre-training small encoders on unlabelled text: a BERT with masked language
modelling, with or without next-sentence prediction, static or dynamic masks
(chapters 11 and 13; chapter 12 starts from it), and a T5 with span corruption
(chapter 10).

One recipe, :func:`pretrain`, configured by one frozen :class:`PretrainConfig`: learn a
WordPiece vocabulary from the texts (unless given one), build a
:class:`bert.BertForPreTraining`, and train it with :func:`training.train` on
:func:`masked_lm.mlm_batches` (AdamW with weight decay 0.01, warm-up over the first
10 % of the steps, then linear decay, as BERT; Devlin et al., 2019, section 3.1 and
appendix A). Chapter 13's RoBERTa arms change one field each (Liu et al., 2019).

T5's recipe, :func:`pretrain_t5` with a frozen :class:`SpanPretrainConfig`, trains a
:class:`t5.T5` on :class:`span_corruption.SpanCorruptionBatches` of a token stream
(AdamW, warm-up over 10 % of the steps, cosine decay to a tenth; T5 itself used
Adafactor with an inverse-square-root schedule, Raffel et al., 2020, section 3.1.2),
optionally with each tensor's steps scaled to its initial size as Adafactor's are
(:func:`init_lr_scales`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from . import baselines, bert, t5, training
from .distributed import world
from .masked_lm import (
    IGNORE,
    IS_NEXT,
    MASKINGS,
    mlm_batches,
    target_ids,
    word_pieces_by_word,
)
from .span_corruption import SpanCorruptionBatches
from .tokenizer import WordPiece

__all__ = [
    "PretrainConfig",
    "Pretrained",
    "pretraining_loss",
    "pretraining_metrics",
    "nsp_loss",
    "heldout_metrics",
    "nsp_majority",
    "nsp_verdict",
    "metrics_table",
    "recipe_differences",
    "pretrain",
    "process_seed",
    "SpanPretrainConfig",
    "init_lr_scales",
    "pretrain_t5",
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
    unigram: Tensor | None = None,
) -> dict[str, float]:
    """Held-out MLM loss and accuracy (over the masked tokens) and NSP accuracy, on
    one pass over ``texts`` with one fixed draw of pairs and masks (``seed``).

    ``unigram``: log-probabilities (V,) of a unigram model of the training text
    (:func:`baselines.unigram_log_probs`); then the result also holds its loss and
    accuracy on the *same* masked tokens (``unigram_mlm_loss``, ``unigram_mlm_accuracy``)
    and the accuracy of always answering "is next" (``is_next_share``).
    """
    docs = [word_pieces_by_word(tok, t) for t in texts]
    batches = mlm_batches(tok, docs, batch_size, max_len, nsp=nsp, seed=seed)
    model.eval()
    device = next(model.parameters()).device
    sums = dict.fromkeys(("mlm", "right", "uni", "uni_right", "nsp", "next"), 0.0)
    n_masked = n_pairs = 0
    for _ in range(math.ceil(len(docs) / batch_size)):  # one pass
        batch = training.to_device(next(batches), device)
        positions = batch["labels"] != IGNORE  # (B, T)
        mlm_logits, nsp_logits = model(
            batch["ids"], batch["token_type_ids"], batch["attention_mask"], positions
        )
        target = batch["labels"][positions]  # (n_masked,)
        sums["mlm"] += F.cross_entropy(mlm_logits, target, reduction="sum").item()
        sums["right"] += (mlm_logits.argmax(-1) == target).sum().item()
        sums["nsp"] += (nsp_logits.argmax(-1) == batch["is_next"]).sum().item()
        sums["next"] += (batch["is_next"] == IS_NEXT).sum().item()
        if unigram is not None:
            sums["uni"] -= unigram.to(device)[target].sum().item()
            sums["uni_right"] += (target == unigram.argmax()).sum().item()
        n_masked += target.numel()
        n_pairs += len(batch["is_next"])
    result = {
        "mlm_loss": sums["mlm"] / n_masked,
        "mlm_accuracy": sums["right"] / n_masked,
        "nsp_accuracy": sums["nsp"] / n_pairs if nsp else math.nan,
    }
    if unigram is not None:
        result["unigram_mlm_loss"] = sums["uni"] / n_masked
        result["unigram_mlm_accuracy"] = sums["uni_right"] / n_masked
        result["is_next_share"] = sums["next"] / n_pairs if nsp else math.nan
    return result


def nsp_loss(model: bert.BertForPreTraining, batch: dict[str, Tensor]) -> Tensor:
    """The NSP term of :func:`pretraining_loss` alone, as a loss for
    :func:`training.train` (the MLM head gets no gradient)."""
    return pretraining_loss(model, batch)[2]


def heldout_metrics(
    model: bert.BertForPreTraining,
    tok: WordPiece,
    train_texts: Sequence[str],
    texts: Sequence[str],
    max_len: int = 64,
    batch_size: int = 128,
    seed: int = 0,
) -> dict[str, float]:
    """:func:`pretraining_metrics` on ``texts`` beside the unigram baseline (add-one,
    :func:`baselines.unigram_log_probs`) fitted on the pieces of ``train_texts`` that
    masking could select (:func:`masked_lm.target_ids`)."""
    unigram = baselines.unigram_log_probs(target_ids(tok, train_texts), len(tok))
    return pretraining_metrics(
        model, tok, texts, max_len, batch_size, seed, unigram=unigram
    )


def nsp_majority(is_next_share: float) -> tuple[str, float]:
    """The majority class of held-out NSP pairs ("is next" or "not next") and the
    accuracy of always answering it, from the share of "is next" pairs."""
    if is_next_share >= 0.5:
        return "is next", is_next_share
    return "not next", 1 - is_next_share


def nsp_verdict(accuracy: float, majority_accuracy: float) -> str:
    """NSP accuracy against its majority class in words: "stays near chance" within
    5 points, else how far above it is."""
    gain = accuracy - majority_accuracy
    if gain < 0.05:
        return "stays near chance"
    return f"is {gain:.0%} above the majority class, a modest margin"


def metrics_table(title: str, metrics: dict[str, float], name: str) -> str:
    """:func:`pretraining_metrics` (with a unigram) as a three-line table: MLM loss,
    MLM accuracy and NSP accuracy of the unigram baseline (NSP: always "is next") and
    of the model called ``name``; ``title`` heads the first column."""
    row = "{:12} | {:8.3f} | {:12.1%} | {:12.1%}"
    unigram = ("unigram", metrics["unigram_mlm_loss"], metrics["unigram_mlm_accuracy"])
    model = (name, metrics["mlm_loss"], metrics["mlm_accuracy"])
    return "\n".join(
        [
            f"{title:12} | MLM loss | MLM accuracy | NSP accuracy",
            row.format(*unigram, metrics["is_next_share"]) + " (always 'is next')",
            row.format(*model, metrics["nsp_accuracy"]),
        ]
    )


RECIPE_NAMES = {
    "vocab_size": "vocabulary",
    "d_model": "width",
    "n_layers": "layers",
    "d_ff": "feed-forward width",
    "dropout": "dropout",
    "batch_size": "batch",
    "lr": "learning rate",
    "steps": "steps",
}


def recipe_differences(recipe: PretrainConfig, other: dict) -> list[str]:
    """The settings (of :data:`RECIPE_NAMES`) in which a checkpoint card's recipe
    ``other`` differs from ``recipe``, as "width 64 → 256"."""
    return [
        f"{name} {getattr(recipe, k):g} → {other[k]:g}"
        for k, name in RECIPE_NAMES.items()
        if getattr(recipe, k) != other[k]
    ]


def pretrain(
    texts: Sequence[str],
    config: PretrainConfig = PretrainConfig(),
    tokenizer: WordPiece | None = None,
    docs: Sequence[list[list[int]]] | None = None,
    device: str | torch.device = "cpu",
    on_step: Callable[[int, float], None] | None = None,
    stop_at: int | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
) -> Pretrained:
    """Pre-train a small BERT on ``texts`` as ``config`` says; reproducible from
    ``config.seed``, and the caller's random state is left untouched.

    ``tokenizer``: learnt from ``texts`` (``config.vocab_size`` pieces) if not given.
    ``docs``: the texts already cut into word pieces by ``tokenizer``
    (:func:`masked_lm.word_pieces_by_word`, one list per text), to cut them once when
    several runs pre-train on the same texts; the result is the same as without it.
    ``on_step(step, loss)``: called after every update (to log); ``stop_at``: leave
    after that many updates, the schedule still the whole run's (to re-run its start).
    ``checkpoint``, ``checkpoint_every``, ``resume``: as in :func:`training.train`
    (a run stopped and resumed gives the same model and losses as one that never
    stopped); the MLM and NSP losses are saved beside it (``objectives.json``).
    Under ``torchrun`` every process draws its own batches (:func:`process_seed`);
    the losses it records are its own, the total loss the mean over processes.
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
    seed = process_seed(c.seed)
    batches = mlm_batches(
        tokenizer, docs, c.batch_size, c.max_len, c.nsp, c.masking, seed, c.p_mask
    )
    saved = _Objectives(checkpoint, c.steps if stop_at is None else stop_at)
    losses = saved.read() if resume else {"mlm": [], "nsp": []}
    n_saved = len(losses["mlm"])

    def loss_fn(model: bert.BertForPreTraining, batch: dict[str, Tensor]) -> Tensor:
        total, mlm, nsp_loss = pretraining_loss(model, batch, nsp=c.nsp)
        losses["mlm"].append(mlm.item())
        losses["nsp"].append(nsp_loss.item())
        return total

    def after_step(step: int, loss: float) -> None:
        saved.maybe_write(step + 1, checkpoint_every, losses)
        if on_step is not None:
            on_step(step, loss)

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
            on_step=after_step,
            stop_at=stop_at,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
            resume=resume,
        )
    # resumed: the saved losses of the steps before the checkpoint, then this run's
    before = len(history) - (len(losses["mlm"]) - n_saved)
    mlm, nsp = (losses[k][:before] + losses[k][n_saved:] for k in ("mlm", "nsp"))
    return Pretrained(model, tokenizer, history, mlm, nsp)


def process_seed(seed: int) -> int:
    """The seed of this process's batches: ``seed`` itself on one process (so a run
    under ``torchrun`` draws on rank 0 what a single process draws), ``seed + rank``
    on the others, so that no two processes train on the same batches."""
    return seed + world()[0]


class _Objectives:
    """``objectives.json`` in a checkpoint folder: the MLM and NSP loss of every step
    so far, written (by rank 0) whenever :func:`training.train` saves the weights."""

    def __init__(self, folder: str | Path | None, end: int) -> None:
        self.path = None if folder is None else Path(folder) / "objectives.json"
        self.end = end

    def read(self) -> dict[str, list[float]]:
        if self.path is None or not self.path.is_file():
            return {"mlm": [], "nsp": []}
        return json.loads(self.path.read_text())

    def maybe_write(self, done: int, every: int, losses: dict) -> None:
        due = done == self.end or (every and done % every == 0)
        if self.path is None or not due or world()[0] != 0:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(losses))


@dataclass(frozen=True)
class SpanPretrainConfig:
    """Sizes and recipe of a small T5 pre-trained with span corruption (windows of
    ``window`` tokens, 15 % hidden in spans of about 3). The defaults are the sizes of
    the book's checkpoint (chapter 10): 3 + 3 layers of width 128, 2,400 updates of 64
    windows at 3e-3 (with ``scale_steps`` off: see below).

    ``bias_lr_scale``: the relative-bias tables (one number per head and distance
    bucket) learn at this multiple of ``lr``. AdamW moves every weight about one
    learning rate per step, and a table entry has to travel several units before a
    head attends by distance; at 1x the encoder barely learns to point at the word
    beside a gap within the book's budget, and the model reads its input little. The
    default 30 was chosen on ATIS's dev queries by ``benchmarks/t5_bias_lr_scale.py``
    (chapter 10 reads its result).

    ``scale_steps``: every other weight tensor learns at a multiple of ``lr`` equal to
    its initial standard deviation over that of most matrices, 1/√d_model
    (:func:`init_lr_scales`): the embedding (std 1) and the norm gains (1) at √d_model,
    W_Q (1/√(d_model·d_k)) at 1/√d_k, the feed-forward's down-projection at
    √(d_model/d_ff). T5's initialisation was made for Adafactor, whose steps are
    relative to each tensor's size (Shazeer and Stern, 2018); AdamW's are not, and
    without this the shared embedding, which is also the output layer, crawls while
    W_Q races. The defaults leave it off: they are the recipe of the book's first T5
    checkpoint (``atis-small``), which underfit; the shipped one turns it on
    (``atis-scaled``)."""

    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 512
    window: int = 32
    batch_size: int = 64
    steps: int = 2400
    lr: float = 3e-3
    dropout: float = 0.1
    seed: int = 0
    bias_lr_scale: float = 30.0
    scale_steps: bool = False

    def __post_init__(self) -> None:
        if not self.bias_lr_scale > 0:
            raise ValueError(
                f"bias_lr_scale must be positive, got {self.bias_lr_scale}"
            )
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "batch_size", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.window < 2:
            raise ValueError(f"window must be >= 2, got {self.window}")

    def t5_config(self, vocab_size: int, pad_id: int, eos_id: int) -> t5.T5Config:
        """The model's sizes for a vocabulary of ``vocab_size`` ids."""
        return t5.T5Config(
            vocab_size, self.d_model, self.n_layers, self.n_heads, self.d_ff,
            dropout=self.dropout, pad_id=pad_id, eos_id=eos_id,
        )  # fmt: skip


def init_lr_scales(model: t5.T5) -> dict[str, float]:
    """Learning-rate multiples that make AdamW's steps relative to T5's initial scales,
    as Adafactor's are: each weight tensor whose initial standard deviation (set by
    :meth:`t5.T5.reset_parameters`) is not 1/√d_model gets its std over 1/√d_model:
    the embedding and every norm's γ (std or value 1) √d_model, every W_Q 1/√d_k,
    every feed-forward down-projection √(d_model/d_ff). The relative-bias tables are
    left out (``bias_lr_scale`` sets theirs). Returns {parameter name: multiple}."""
    c = model.config
    by_kind = {
        "tok_emb": c.d_model**0.5,
        "norm": c.d_model**0.5,
        "q_proj": c.head_dim**-0.5,
        "down_proj": (c.d_model / c.d_ff) ** 0.5,
    }
    scales = {}
    for name, _ in model.named_parameters():
        if name.startswith(("encoder_bias", "decoder_bias")):
            continue
        modules = name.split(".")[:-1]  # e.g. encoder, layers, 0, norm1
        for kind, scale in by_kind.items():
            if any(kind in m for m in modules):  # norm1, final_norm, q_proj...
                scales[name] = scale
    return scales


def pretrain_t5(
    stream: Tensor,
    model_config: t5.T5Config,
    sentinel_ids: Sequence[int],
    config: SpanPretrainConfig = SpanPretrainConfig(),
    device: str | torch.device = "cpu",
    on_step: Callable[[int, float], None] | None = None,
    stop_at: int | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
) -> tuple[t5.T5, list[float]]:
    """Pre-train a fresh :class:`t5.T5` (``model_config``) with span corruption on
    ``stream`` (N,) of token ids; reproducible from ``config.seed``, the caller's random
    state untouched. Returns the model (eval mode) and the loss of every step.
    ``on_step``, ``stop_at``, ``checkpoint``, ``checkpoint_every``, ``resume`` and
    ``torchrun`` as in :func:`pretrain`."""
    if len(sentinel_ids) < 1:
        raise ValueError("sentinel_ids must name at least one sentinel token")
    c = config
    batches = SpanCorruptionBatches(
        stream, c.window, c.batch_size, sentinel_ids, model_config.eos_id,
        seed=process_seed(c.seed),
    )  # fmt: skip
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        torch.manual_seed(c.seed)  # initial weights and dropout
        model = t5.T5(model_config).to(device)
        scales = init_lr_scales(model) if c.scale_steps else {}
        scales.update(encoder_bias=c.bias_lr_scale, decoder_bias=c.bias_lr_scale)
        history = training.train(
            model, batches, lambda net, batch: model.loss(*batch, forward=net),
            c.steps, lr=c.lr,
            warmup=max(1, c.steps // 10), decay="cosine", min_lr_factor=0.1,
            on_step=on_step, stop_at=stop_at, lr_scales=scales, checkpoint=checkpoint,
            checkpoint_every=checkpoint_every, resume=resume,
        )  # fmt: skip
    return model.eval(), history
