"""Pre-training a small T5 with span corruption (chapter 10; Raffel et al., 2020).

One recipe, :func:`pretrain_t5`, configured by one frozen :class:`SpanPretrainConfig`:
a fresh :class:`t5.T5` trained with :func:`training.train` on
:class:`span_corruption.SpanCorruptionBatches` of a token stream (AdamW, warm-up over
10 % of the steps, cosine decay to a tenth; T5 itself used Adafactor with an
inverse-square-root schedule, Raffel et al., 2020, section 3.1.2), optionally with each
tensor's steps scaled to its initial size as Adafactor's are (:func:`init_lr_scales`).
:data:`RECIPE_WORDS` names its settings in words, for :func:`report.recipe_differences`.
BERT's recipe is :mod:`transformer_book.pretraining`; under ``torchrun`` both draw each
process's batches from :func:`distributed.process_seed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from . import t5, training
from .distributed import process_seed
from .span_corruption import SpanCorruptionBatches

__all__ = [
    "SpanPretrainConfig",
    "RECIPE_WORDS",
    "init_lr_scales",
    "pretrain_t5",
]


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


#: a T5 recipe's settings (:class:`SpanPretrainConfig`'s fields, ``train.T5_RECIPES``,
#: a card's ``recipe``) in words, for :func:`report.recipe_differences`
RECIPE_WORDS = {
    "d_model": "width", "n_layers": "layers per stack", "n_heads": "heads",
    "d_ff": "feed-forward width", "batch_size": "batch", "steps": "steps",
    "lr": "learning rate", "dropout": "dropout", "window": "window",
    "bias_lr_scale": "bias-table multiple", "scale_steps": "steps scaled per tensor",
}  # fmt: skip


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
    ``torchrun`` as in :func:`pretraining.pretrain`."""
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
