"""The linear probe: a frozen encoder's vectors as features, and a linear head fitted
on them alone (chapters 10, 12 and 13).

Alain & Bengio (2016): how much of a task a representation already holds is what a
linear classifier on top of it, the encoder untouched, can learn. :func:`frozen_features`
reads a sentence encoder's [CLS], pooled and mean vectors, :func:`token_features` a
token encoder's vectors at every labelled word; :func:`fit_head` fits a given
``nn.Linear`` on such features as a logistic regression (the head of a model about
to be fine-tuned: "LP-FT", Kumar et al., 2022), and :func:`linear_probe` makes and fits
a new one. Features are read in :mod:`finetune`'s batches, the model in eval mode
(:func:`finetune.eval_batches`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import metrics
from .bert import BertModel, sentence_embeddings
from .finetune import classification_batches, eval_batches, tagging_batches
from .masks import masked_mean
from .tagging import IGNORE, TaggingExample
from .tokenizer import WordPiece

__all__ = [
    "frozen_features",
    "token_features",
    "fit_head",
    "linear_probe",
    "probe_accuracy",
    "embedding_accuracy",
]


@torch.no_grad()
def frozen_features(
    encoder: nn.Module,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int,
    batch_size: int = 64,
) -> dict[str, Tensor]:
    """Features of a frozen encoder for a linear probe: ``cls`` (the [CLS] hidden
    vector), ``pooled`` (tanh(W h_[CLS] + b)) and ``mean`` (mean of the real tokens'
    vectors, :func:`masks.masked_mean`). Shapes: each (len(texts), D), on the CPU."""
    out: dict[str, list] = {k: [None] * len(texts) for k in ("cls", "pooled", "mean")}
    labels = [0] * len(texts)
    batches = classification_batches(
        tok, texts, labels, batch_size, max_len, shuffle=False
    )
    for b in eval_batches(encoder, batches):
        ids, types, mask = b["ids"], b["token_type_ids"], b["attention_mask"]  # (B, T)
        hidden, pooled = encoder(ids, types, mask)  # (B, T, D), (B, D)
        mean = masked_mean(hidden, mask.bool())  # (B, D)
        for name, v in (("cls", hidden[:, 0]), ("pooled", pooled), ("mean", mean)):
            for j, i in enumerate(b["index"].tolist()):
                out[name][i] = v[j].float().cpu()
    return {name: torch.stack(rows) for name, rows in out.items()}


@torch.no_grad()
def token_features(
    encoder: nn.Module,
    tok: WordPiece,
    examples: Sequence[TaggingExample],
    batch_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """A frozen encoder's vectors at every labelled piece of tagging ``examples`` (the
    first piece of each word), for a token-level linear probe.

    Shapes: -> features (N, D) and labels (N,), N the number of labels that are not
    -100, in the order of ``examples`` and of the pieces inside each.
    """
    if not examples:
        raise ValueError("examples is empty: there is nothing to take features from")
    xs: list[Tensor] = [torch.empty(0, 0)] * len(examples)
    ys: list[Tensor] = [torch.empty(0, dtype=torch.long)] * len(examples)
    batches = tagging_batches(tok, examples, batch_size, shuffle=False)
    for b in eval_batches(encoder, batches):
        ids, types, mask = b["ids"], b["token_type_ids"], b["attention_mask"]  # (B, T)
        hidden, _ = encoder(ids, types, mask)  # (B, T, D)
        keep = b["labels"] != IGNORE  # (B, T)
        for j, i in enumerate(b["index"].tolist()):
            xs[i], ys[i] = hidden[j][keep[j]].cpu(), b["labels"][j][keep[j]].cpu()
    return torch.cat(xs), torch.cat(ys)  # (N, D), (N,)


def fit_head(
    head: nn.Linear,
    features: Tensor,
    labels: Sequence[int] | Tensor,
    weight_decay: float = 1e-2,
    max_iter: int = 100,
    standardize: bool = True,
) -> float:
    """Fit ``head`` alone as an L2-regularised logistic regression on frozen
    ``features`` (full-batch L-BFGS on standardised features, the standardisation
    then folded into the weights); returns its training accuracy.

    ``standardize=False`` fits on the raw features: a head that leans less on
    low-variance directions, for features that will move (a student copied from its
    teacher, chapter 13).

    Shapes: features (N, D), labels (N,); head D -> C. A linear probe (Alain &
    Bengio, 2016); fitted before fine-tuning, it is "LP-FT" (Kumar et al., 2022).
    """
    y = torch.as_tensor(list(labels) if not isinstance(labels, Tensor) else labels)
    if features.ndim != 2 or features.shape != (len(y), head.in_features):
        raise ValueError(
            f"features must be (N, {head.in_features}) with N = {len(y)} labels, "
            f"got {tuple(features.shape)}"
        )
    x = features.detach().float().cpu()
    mu, sd = x.mean(0), x.std(0) + 1e-6  # (D,) each
    if not standardize:
        mu, sd = torch.zeros_like(mu), torch.ones_like(sd)
    w = torch.zeros(x.shape[1], head.out_features, requires_grad=True)  # (D, C)
    b = torch.zeros(head.out_features, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy((x - mu) / sd @ w + b, y) + weight_decay * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():  # (x - mu) / sd @ w + b = x @ (w / sd) + (b - mu / sd @ w)
        head.weight.copy_((w / sd[:, None]).T.to(head.weight))  # (C, D)
        head.bias.copy_((b - (mu / sd) @ w).to(head.bias))
        return (((x - mu) / sd @ w + b).argmax(-1) == y).float().mean().item()


def linear_probe(
    features: Tensor, labels: Sequence[int] | Tensor, weight_decay: float = 1e-2
) -> nn.Linear:
    """A linear layer fitted alone on frozen ``features`` by :func:`fit_head`
    (standardised, L2-regularised logistic regression), one output per class in
    ``labels``; apply it to other features of the same kind to predict.

    Shapes: features (N, D), labels (N,) -> a D -> C layer, C = the largest label + 1
    (at least 2)."""
    y = torch.as_tensor(list(labels) if not isinstance(labels, Tensor) else labels)
    if features.ndim != 2 or len(y) != len(features) or len(y) == 0:
        raise ValueError(
            f"features must be (N, D) with N = {len(y)} labels (N > 0), "
            f"got {tuple(features.shape)}"
        )
    head = nn.Linear(features.shape[1], max(2, int(y.max()) + 1))
    fit_head(head, features, y, weight_decay=weight_decay)
    return head


def probe_accuracy(
    x_train: Tensor,
    y_train: Sequence[int] | Tensor,
    x_test: Tensor,
    y_test: Sequence[int],
    weight_decay: float = 1e-2,
) -> tuple[float, nn.Linear]:
    """A :func:`linear_probe` fitted on ``x_train`` and its labels ``y_train``, scored
    on ``x_test`` against ``y_test`` (a label it cannot output counts as wrong):
    (its accuracy, the fitted head).

    Shapes: x_train (N, D), y_train (N,), x_test (M, D), y_test (M,)."""
    if x_test.ndim != 2 or len(x_test) != len(y_test) or len(y_test) == 0:
        raise ValueError(
            f"x_test must be (M, D) with M = {len(y_test)} labels (M > 0), "
            f"got {tuple(x_test.shape)}"
        )
    head = linear_probe(x_train, y_train, weight_decay)
    with torch.no_grad():
        pred = head(x_test.to(head.weight)).argmax(-1).tolist()
    return metrics.accuracy(list(y_test), pred), head


def embedding_accuracy(
    encoder: BertModel,
    tok: WordPiece,
    reference: tuple[Sequence[str], Sequence[str]],
    held_out: tuple[Sequence[str], Sequence[str]],
) -> tuple[float, float]:
    """How well a sentence encoder's embeddings (:func:`bert.sentence_embeddings`) carry
    a labelling, read two ways: ``held_out``'s (texts, labels) predicted from the
    ``reference`` (texts, labels) by the nearest reference sentence (cosine, 1-NN) and
    by a :func:`linear_probe` fitted on the reference embeddings (seeded with 0, the
    caller's random state untouched). The encoder is read in eval mode, as
    :func:`finetune.eval_batches` reads every model. Returns (1-NN accuracy, probe
    accuracy)."""
    (ref_texts, ref_labels), (texts, labels) = reference, held_out
    if len(ref_texts) != len(ref_labels) or len(texts) != len(labels):
        raise ValueError(
            f"texts and labels must pair up, got {len(ref_texts)} reference texts for "
            f"{len(ref_labels)} labels and {len(texts)} held-out texts for "
            f"{len(labels)} labels"
        )
    names = sorted(set(ref_labels))
    encoder.eval()  # no dropout
    a = sentence_embeddings(encoder, tok, ref_texts)  # (N_ref, D), unit length
    b = sentence_embeddings(encoder, tok, texts)  # (N, D)
    nearest = (b @ a.T).argmax(1).tolist()  # (N,): the most similar reference
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        head = linear_probe(a, [names.index(y) for y in ref_labels])
    with torch.no_grad():
        linear = [names[i] for i in head(b).argmax(-1).tolist()]
    return (
        metrics.accuracy(labels, [ref_labels[i] for i in nearest]),
        metrics.accuracy(labels, linear),
    )
