"""Pre-training a small BERT on unlabelled text: masked language modelling, with or
without next-sentence prediction, static or dynamic masks (chapters 11 and 13;
chapter 12 starts from it). T5's span-corruption recipe is
:mod:`transformer_book.span_pretraining`.

One recipe, :func:`pretrain`, configured by one frozen :class:`PretrainConfig`: learn a
WordPiece vocabulary from the texts (unless given one), build a
:class:`bert.BertForPreTraining`, and train it with :func:`training.train` on
:func:`masked_lm.mlm_batches` (AdamW with weight decay 0.01, warm-up over the first
10 % of the steps, then linear decay, as BERT; Devlin et al., 2019, section 3.1 and
appendix A). Chapter 13's RoBERTa arms change one field each (Liu et al., 2019).
:data:`RECIPE_NAMES` names its settings in words, for :func:`report.recipe_differences`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from . import baselines, bert, metrics, training
from .distributed import process_seed, world
from .masked_lm import (
    IGNORE,
    IS_NEXT,
    MASKINGS,
    NSP_KINDS,
    _flat,
    mlm_batches,
    target_ids,
    word_pieces_by_word,
)
from .tokenizer import WordPiece

__all__ = [
    "PretrainConfig",
    "Pretrained",
    "pretraining_loss",
    "pretraining_metrics",
    "nsp_loss",
    "heldout_metrics",
    "nsp_by_kind",
    "kind_and_coherence",
    "nsp_majority",
    "nsp_verdict",
    "metrics_table",
    "RECIPE_NAMES",
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


@torch.no_grad()
def nsp_by_kind(
    model: bert.BertForPreTraining,
    tok: WordPiece,
    pairs: Sequence[tuple[list[list[int]], list[list[int]], int, str]],
    max_len: int = 64,
    batch_size: int = 128,
) -> dict[str, dict[str, float]]:
    """The NSP head on the pairs of :func:`masked_lm.nsp_pairs_by_kind` (segments as
    word pieces grouped by word): ``accuracy`` {pair kind: share answered right} and,
    for each kind of negative, ``auc`` {kind: :func:`metrics.auc` of the head's
    probability of "is next" on the true pairs against that kind's}, which no decision
    threshold sets."""
    model.eval()
    device = next(model.parameters()).device
    right: dict[str, list[bool]] = {}
    p_next: dict[str, list[float]] = {}
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        encs = [
            tok.add_special_tokens(_flat(a), _flat(b), max_len) for a, b, _, _ in chunk
        ]
        batch = training.to_device(tok.pad(encs), device)  # (B, T) each
        _, nsp_logits = model(
            batch["ids"], batch["token_type_ids"], batch["attention_mask"], None
        )  # (B, 2)
        probs = nsp_logits.softmax(-1)[:, IS_NEXT].tolist()  # (B,)
        guesses = nsp_logits.argmax(-1).tolist()
        for (_, _, label, kind), guess, p in zip(chunk, guesses, probs):
            right.setdefault(kind, []).append(guess == label)
            p_next.setdefault(kind, []).append(p)
    true = p_next.get(NSP_KINDS[0], [])
    return {
        "accuracy": {kind: sum(r) / len(r) for kind, r in right.items()},
        "auc": {k: metrics.auc(true, p_next[k]) for k in NSP_KINDS[1:] if k in p_next},
    }


def kind_and_coherence(accuracy: dict[str, float]) -> tuple[float, float]:
    """Two balanced NSP tests from :func:`nsp_by_kind`'s accuracies: the mean accuracy
    on "is next" and "other kind" pairs (anything that differs between kinds of text
    can tell them apart) and on "is next" and "same kind" pairs (only coherence can);
    0.5 is chance for both, and always answering "is next" scores it."""
    missing = [k for k in NSP_KINDS if k not in accuracy]
    if missing:
        raise ValueError(f"accuracy lacks the kinds {missing}")
    is_next, same, other = (accuracy[k] for k in NSP_KINDS)
    return (is_next + other) / 2, (is_next + same) / 2


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


#: a BERT recipe's settings (:class:`PretrainConfig`'s fields, a card's ``recipe``) in
#: words, for :func:`report.recipe_differences`
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
    nsp_groups: Sequence[Hashable] | None = None,
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
    ``nsp_groups``: one label per text (its kind, say): NSP's negatives then come from
    the same group (:func:`masked_lm.mlm_batches`).
    Under ``torchrun`` every process draws its own batches
    (:func:`distributed.process_seed`);
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
        tokenizer, docs, c.batch_size, c.max_len, c.nsp, c.masking, seed, c.p_mask,
        nsp_groups,
    )  # fmt: skip
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
