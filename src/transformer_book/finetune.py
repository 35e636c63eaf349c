"""Fine-tuning a pre-trained encoder: the one recipe, its batches and losses, and the
predictions read back, for sentence classification, token classification and
extractive QA (chapters 12 and 13).

:func:`fine_tune` is BERT's recipe (Devlin et al., 2019, appendix A): AdamW with weight
decay 0.01, warm-up over the first 10 % of the updates then linear decay, gradient
clipping at norm 1, all on :func:`training.train`. The task comes in through the
batches and a ``loss_fn(model, batch)``: :func:`classification_loss`,
:func:`token_loss`, :func:`span_loss`, or one the caller writes (chapter 13 passes
its distillation loss). Every batch producer here is :func:`encoding_batches`: texts
of similar length together (:class:`batching.LengthBatches`), padded, on the CPU.
:func:`fine_tune_classifier` is the whole sentence-classification run (a copy of the
encoder, pre-trained or re-initialised, a new head, its batches, the recipe), so that a
chapter's arms and a benchmark's sweep run the same code. The predictions
(:func:`predict_logits`, :func:`predict_classes`, :func:`predict_tags`,
:func:`predict_answers`) read the same batches in order, the model in eval mode
(:func:`eval_batches`).

Elsewhere: the linear probe on a frozen encoder's features is :mod:`probe`; the few
labels chapter 12 fine-tunes on, and the selection split kept apart from them, are
drawn by :func:`data.few_labels`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from copy import deepcopy
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import training
from .batching import LengthBatches, pad_sequences
from .bert_heads import SequenceClassifier
from .qa import QAFeature, best_span
from .tagging import IGNORE, TaggingExample
from .tokenizer import Encoding, WordPiece
from .training_diagnostics import GradNorms

__all__ = [
    "encoding_batches",
    "classification_batches",
    "tagging_batches",
    "qa_batches",
    "classification_loss",
    "token_loss",
    "span_loss",
    "fine_tune",
    "ClassifierRun",
    "fine_tune_classifier",
    "eval_batches",
    "predict_logits",
    "predict_classes",
    "predict_tags",
    "predict_answers",
]

Batch = dict[str, Tensor]


def encoding_batches(
    tok: WordPiece,
    encodings: Sequence[Encoding],
    batch_size: int,
    fields: dict[str, Sequence] | None = None,
    pad: dict[str, int] | None = None,
    seed: int = 0,
    shuffle: bool = True,
    by_length: bool = True,
) -> Iterator[Batch]:
    """Padded batches of encodings of similar length, with per-item ``fields``.

    ``shuffle=True``: an endless stream, a new random order every pass (training);
    ``False``: one pass in order of length (evaluation). ``by_length=False``: batches
    of random items instead, whatever their length (more padding, but no batch of
    one length only: a small model trained from scratch can stall on those). A field
    holds one number or one list per item; lists are padded with ``pad[name]``
    (default -100, ignored by the loss). Shapes: ``ids``, ``token_type_ids``,
    ``attention_mask`` (B, T), ``index`` (B,) (the items' positions), and each field
    (B,) or (B, T).
    """
    fields, pad = fields or {}, pad or {}
    for name, values in fields.items():
        if len(values) != len(encodings):
            raise ValueError(
                f"fields[{name!r}] must hold one value per encoding "
                f"({len(encodings)}), got {len(values)}"
            )
    lengths = torch.tensor([len(e) if by_length else 0 for e in encodings])
    sampler = LengthBatches(lengths, batch_size, seed, shuffle)  # equal: random order
    while True:
        for idx in sampler:
            batch = tok.pad([encodings[i] for i in idx.tolist()])  # (B, T) each
            batch["index"] = idx  # (B,)
            for name, values in fields.items():
                rows = [values[i] for i in idx.tolist()]
                if isinstance(rows[0], int | bool | float):
                    batch[name] = torch.tensor(rows)  # (B,)
                else:
                    batch[name] = pad_sequences(rows, pad.get(name, IGNORE))[0]
            yield batch
        if not shuffle:
            return


def classification_batches(
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    max_len: int,
    seed: int = 0,
    shuffle: bool = True,
    by_length: bool = True,
) -> Iterator[Batch]:
    """Batches of texts (cut at ``max_len`` pieces) and their ``labels`` (B,), by
    :func:`encoding_batches`."""
    if len(texts) != len(labels):
        raise ValueError(f"need one label per text: {len(texts)} texts, {len(labels)}")
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    fields = {"labels": labels}
    return encoding_batches(
        tok, encs, batch_size, fields, None, seed, shuffle, by_length
    )


def tagging_batches(
    tok: WordPiece,
    examples: Sequence[TaggingExample],
    batch_size: int,
    seed: int = 0,
    shuffle: bool = True,
) -> Iterator[Batch]:
    """Batches of :class:`tagging.TaggingExample`: ``labels`` (B, T), -100 where a
    piece is not a word's first piece or is padding."""
    encs, labels = [e.encoding for e in examples], [e.labels for e in examples]
    return encoding_batches(
        tok, encs, batch_size, {"labels": labels}, None, seed, shuffle
    )


def qa_batches(
    tok: WordPiece,
    features: Sequence[QAFeature],
    batch_size: int,
    seed: int = 0,
    shuffle: bool = True,
) -> Iterator[Batch]:
    """Batches of :class:`qa.QAFeature`: gold ``start`` and ``end`` (B,) and the
    ``context`` tokens (B, T), 1 where an answer may be."""
    fields = {
        "start": [f.start for f in features],
        "end": [f.end for f in features],
        "context": [[int(c) for c in f.context_mask] for f in features],
    }
    encs = [f.encoding for f in features]
    return encoding_batches(
        tok, encs, batch_size, fields, {"context": 0}, seed, shuffle
    )


def _inputs(batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    return batch["ids"], batch["token_type_ids"], batch["attention_mask"]


def classification_loss(model: nn.Module, batch: Batch) -> Tensor:
    """Cross-entropy of a sentence classifier, logits (B, C), on ``labels`` (B,)."""
    return F.cross_entropy(model(*_inputs(batch)), batch["labels"])


def token_loss(model: nn.Module, batch: Batch) -> Tensor:
    """Cross-entropy of a token classifier, logits (B, T, L), over the labelled pieces
    (the first piece of each word)."""
    logits = model(*_inputs(batch))  # (B, T, L)
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def span_loss(model: nn.Module, batch: Batch) -> Tensor:
    """The mean of the start and end cross-entropies of a span extractor (Devlin et
    al., 2019, section 4.2)."""
    start, end = model(*_inputs(batch))  # (B, T) each
    return (
        F.cross_entropy(start, batch["start"]) + F.cross_entropy(end, batch["end"])
    ) / 2


def _token_embedding(model: nn.Module) -> nn.Parameter:
    for name, p in model.named_parameters():
        if name.endswith("embeddings.token.weight"):
            return p
    raise ValueError(
        f"freeze_token_embeddings: {type(model).__name__} has no parameter named "
        "'...embeddings.token.weight' (a bert.BertModel inside)"
    )


def fine_tune(
    model: nn.Module,
    batches: Iterator,
    steps: int,
    lr: float,
    loss_fn: Callable[[nn.Module, Batch], Tensor] = classification_loss,
    warmup: int | None = None,
    decay: str = "linear",
    weight_decay: float = 0.01,
    clip: float | None = 1.0,
    seed: int | None = None,
    freeze_token_embeddings: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """BERT's fine-tuning recipe: ``steps`` AdamW updates of ``loss_fn`` on
    ``batches``, warm-up over ``warmup`` updates (default 10 %, at least 1) then
    ``decay`` to 0, gradients clipped at norm ``clip``; returns the loss of every step.

    ``freeze_token_embeddings``: the token embedding table is not trained (and
    thawed again afterwards): it is half of a small BERT's parameters, AdamW would
    keep two more copies of it, and a few thousand sentences cannot improve vectors
    learnt from billions of words. ``seed``: dropout draws from it, and the caller's
    random state is left untouched (None: the global random state is used).
    """
    warmup = max(1, steps // 10) if warmup is None else warmup
    frozen = _token_embedding(model) if freeze_token_embeddings else None
    if frozen is not None:
        frozen.requires_grad_(False)
    device = next(model.parameters()).device
    cuda = [device.index or 0] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=cuda, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)  # dropout
            return training.train(
                model,
                batches,
                loss_fn,
                steps,
                lr=lr,
                weight_decay=weight_decay,
                clip=clip,
                warmup=warmup,
                decay=decay,
                on_step=on_step,
            )
    finally:
        if frozen is not None:
            frozen.requires_grad_(True)


class ClassifierRun(NamedTuple):
    """A run of :func:`fine_tune_classifier`: the fine-tuned ``model``, the loss of
    every update and the gradient norm of every update before clipping."""

    model: SequenceClassifier
    losses: list[float]
    grad_norms: list[float]


def fine_tune_classifier(
    encoder: nn.Module,
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    steps: int,
    lr: float,
    pooling: str = "cls",
    batch_size: int = 16,
    max_len: int = 64,
    seed: int = 0,
    from_scratch: bool = False,
    freeze_token_embeddings: bool = True,
    by_length: bool = True,
) -> ClassifierRun:
    """A copy of ``encoder`` with a new :class:`bert_heads.SequenceClassifier` head
    (``pooling``; one output per class, the largest label + 1), fine-tuned by
    :func:`fine_tune` for ``steps`` updates of ``batch_size`` of ``texts`` (cut at
    ``max_len`` pieces) at peak rate ``lr``.

    ``from_scratch``: the copy is re-initialised first
    (``type(encoder)(encoder.config)``: the same architecture, random weights), the
    control for pre-training. ``seed``
    draws the head (and the fresh encoder), the batches and the dropout; the caller's
    random state and ``encoder`` are left untouched. The model stays on ``encoder``'s
    device; ``freeze_token_embeddings`` and ``by_length`` as in :func:`fine_tune` and
    :func:`encoding_batches`. Returns a :class:`ClassifierRun`.
    """
    if len(texts) != len(labels):
        raise ValueError(f"need one label per text: {len(texts)} texts, {len(labels)}")
    device = next(encoder.parameters()).device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        body = type(encoder)(encoder.config) if from_scratch else deepcopy(encoder)
        n_classes = max(2, max(labels, default=0) + 1)
        model = SequenceClassifier(body, n_classes, pooling=pooling)
    model = model.to(device)
    batches = classification_batches(
        tok, texts, labels, batch_size, max_len, seed, by_length=by_length
    )
    frozen = _token_embedding(model) if freeze_token_embeddings else None
    if frozen is not None:  # GradNorms hooks the trainable parameters only
        frozen.requires_grad_(False)
    with GradNorms(model) as norms:
        losses = fine_tune(
            model,
            batches,
            steps,
            lr,
            seed=seed,
            freeze_token_embeddings=freeze_token_embeddings,
            on_step=norms.on_step,
        )
    return ClassifierRun(model, losses, norms.norms)


def eval_batches(model: nn.Module, batches: Iterator[Batch]) -> Iterator[Batch]:
    """``batches`` moved to ``model``'s device, ``model`` put in eval mode first (no
    dropout): how every prediction here, and :mod:`probe`'s features, read a model."""
    model.eval()
    device = next(model.parameters()).device
    for batch in batches:
        yield training.to_device(batch, device)


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int,
    batch_size: int = 64,
) -> Tensor:
    """A sentence classifier's logits for every text, in order (eval mode).

    Shapes: len(texts) texts -> (len(texts), n_classes), on the CPU."""
    rows: list[Tensor] = [torch.empty(0)] * len(texts)
    labels = [0] * len(texts)
    batches = classification_batches(
        tok, texts, labels, batch_size, max_len, shuffle=False
    )
    for b in eval_batches(model, batches):
        for i, row in zip(b["index"].tolist(), model(*_inputs(b)).float().cpu()):
            rows[i] = row
    return torch.stack(rows)


def predict_classes(
    model: nn.Module, tok: WordPiece, texts: Sequence[str], max_len: int
) -> list[int]:
    """The most probable class of every text (:func:`predict_logits`)."""
    return predict_logits(model, tok, texts, max_len).argmax(-1).tolist()


@torch.no_grad()
def predict_tags(
    model: nn.Module,
    tok: WordPiece,
    examples: Sequence[TaggingExample],
    id_to_tag: Sequence[str],
    batch_size: int = 64,
) -> list[list[str]]:
    """One tag per word, read at the word's first piece ("O" for words cut off)."""
    out: list[list[str]] = [[] for _ in examples]
    batches = tagging_batches(tok, examples, batch_size, shuffle=False)
    for b in eval_batches(model, batches):
        pred = model(*_inputs(b)).argmax(-1).tolist()  # (B, T)
        for i, row in zip(b["index"].tolist(), pred):
            out[i] = examples[i].word_tags(row, id_to_tag)
    return out


@torch.no_grad()
def predict_answers(
    model: nn.Module,
    tok: WordPiece,
    features: Sequence[QAFeature],
    max_answer_len: int = 10,
    batch_size: int = 64,
) -> list[str]:
    """The answer text of every feature: the best context span (:func:`qa.best_span`,
    at most ``max_answer_len`` pieces), widened to whole words."""
    out = [""] * len(features)
    for b in eval_batches(model, qa_batches(tok, features, batch_size, shuffle=False)):
        start, end = model(*_inputs(b))
        s, e = best_span(start, end, b["context"].bool(), max_answer_len)
        for i, si, ei in zip(b["index"].tolist(), s.tolist(), e.tolist()):
            out[i] = features[i].answer(si, ei)
    return out
