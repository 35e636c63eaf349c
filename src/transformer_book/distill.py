"""Knowledge distillation: a small student learns from a large teacher's soft targets
(chapter 13).

Hinton, Vinyals & Dean (2015), "Distilling the Knowledge in a Neural Network": train
the student on the teacher's probabilities softened by a temperature T,

    L = α · T² · KL(softmax(t/T) ‖ softmax(s/T)) + (1 − α) · CE(s, y).

Sanh et al. (2019), DistilBERT: a student with every other layer of its teacher,
initialised from those layers, trained with a *triple loss*: this distillation term,
the masked-LM cross-entropy (here: the task's cross-entropy) and a cosine term that
aligns the student's hidden states with the teacher's (:func:`hidden_cosine_loss`).

The module also holds the small sentence-classification loop the chapter needs:
:class:`BertClassifier` (mean-pooled BERT + a linear layer), :func:`classification_batches`,
:func:`fine_tune` (plain cross-entropy, or distillation when teacher logits are given)
and :func:`predict_logits`.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import training
from .bert import BertConfig, BertModel, mean_pool
from .tokenizer import WordPiece

__all__ = [
    "distillation_loss",
    "hidden_cosine_loss",
    "every_other_layer",
    "student_from_teacher",
    "BertClassifier",
    "classification_batches",
    "pooled_features",
    "fit_head",
    "fine_tune",
    "predict_logits",
    "accuracy",
]


def distillation_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor | None = None,
    temperature: float = 2.0,
    alpha: float = 0.5,
) -> Tensor:
    """α · T² · KL(softmax(t/T) ‖ softmax(s/T)) + (1 − α) · CE(s, labels), batch mean.

    The T² factor keeps the gradient of the soft term about as large at every T (its
    gradient with respect to the logits scales like 1/T², Hinton et al. 2015, section
    2). Without ``labels`` only the soft term is used (α is then taken as 1).

    Shapes: student_logits, teacher_logits (B, C); labels (B,) -> scalar.
    """
    if student_logits.shape != teacher_logits.shape or student_logits.dim() != 2:
        raise ValueError(
            "student_logits and teacher_logits must both have shape (B, C), got "
            f"{tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}"
        )
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    log_p_student = F.log_softmax(student_logits / temperature, dim=-1)  # (B, C)
    log_p_teacher = F.log_softmax(teacher_logits / temperature, dim=-1)  # (B, C)
    kl = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    soft = temperature**2 * kl
    if labels is None:
        return soft
    return alpha * soft + (1.0 - alpha) * F.cross_entropy(student_logits, labels)


def hidden_cosine_loss(
    student_hidden: Tensor, teacher_hidden: Tensor, attention_mask: Tensor
) -> Tensor:
    """DistilBERT's third term: mean of 1 − cos(h_student, h_teacher) over real tokens.

    Shapes: hidden states (B, T, D) each, attention_mask (B, T) -> scalar. Sanh et al.
    (2019), section 3.
    """
    if student_hidden.shape != teacher_hidden.shape:
        raise ValueError(
            "student_hidden and teacher_hidden must have the same shape, got "
            f"{tuple(student_hidden.shape)} and {tuple(teacher_hidden.shape)}"
        )
    cos = F.cosine_similarity(student_hidden, teacher_hidden, dim=-1)  # (B, T)
    keep = attention_mask.to(cos.dtype)
    return ((1.0 - cos) * keep).sum() / keep.sum().clamp(min=1.0)


def every_other_layer(n_teacher: int, n_student: int | None = None) -> list[int]:
    """The teacher layers a student keeps: 0, 2, 4, … (DistilBERT's "one out of two").

    With ``n_student`` given, that many layers evenly spread from the first one.
    """
    n_student = (n_teacher + 1) // 2 if n_student is None else n_student
    if not 1 <= n_student <= n_teacher:
        raise ValueError(
            f"n_student must be between 1 and n_teacher={n_teacher}, got {n_student}"
        )
    return [round(i * n_teacher / n_student) for i in range(n_student)]


def student_from_teacher(teacher: nn.Module, layers: Sequence[int]) -> nn.Module:
    """A copy of ``teacher`` (a :class:`BertModel`, or a :class:`BertClassifier`) that
    keeps only the encoder ``layers`` (in order); embeddings, pooler and head are copied.

    Sanh et al. (2019), section 3: "initialize the student from the teacher by taking
    one layer out of two".
    """
    bert = teacher.bert if isinstance(teacher, BertClassifier) else teacher
    if not isinstance(bert, BertModel):
        raise ValueError(
            f"teacher must be a BertModel or BertClassifier, got {type(teacher).__name__}"
        )
    n = bert.config.n_layers
    if not layers or any(not 0 <= i < n for i in layers):
        raise ValueError(f"layers must be indices in [0, {n}), got {list(layers)}")
    student = copy.deepcopy(teacher)
    s_bert = student.bert if isinstance(student, BertClassifier) else student
    s_bert.encoder.layers = nn.ModuleList(
        copy.deepcopy(bert.encoder.layers[i]) for i in layers
    )
    s_bert.config = _with_layers(bert.config, len(layers))
    return student


def _with_layers(config: BertConfig, n_layers: int) -> BertConfig:
    fields = {**config.__dict__, "n_layers": n_layers}
    return BertConfig(**fields)


class BertClassifier(nn.Module):
    """BERT, the mean of its real tokens' output vectors, dropout and a linear layer.

    Mean pooling is how all-MiniLM-L6-v2 was trained to summarise a sentence (Reimers
    & Gurevych, 2019). Shapes: ids, attention_mask (B, T) -> logits (B, n_classes).
    """

    def __init__(self, bert: BertModel, n_classes: int = 2, dropout: float = 0.1):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(bert.config.d_model, n_classes)

    def forward(self, ids: Tensor, attention_mask: Tensor) -> Tensor:
        h = self.bert(ids, None, attention_mask).hidden  # (B, T, d_model)
        return self.head(self.dropout(mean_pool(h, attention_mask)))  # (B, n_classes)


def classification_batches(
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    max_len: int,
    seed: int = 0,
) -> Iterator[dict[str, Tensor]]:
    """An endless stream of batches of texts of similar length (less padding), in a
    new random order every pass. Each batch: ``ids``, ``attention_mask`` (B, T),
    ``labels`` and ``index`` (B,), the examples' positions in ``texts``."""
    if len(texts) != len(labels) or len(texts) < batch_size:
        raise ValueError(
            f"texts and labels must have the same length >= batch_size={batch_size}, "
            f"got {len(texts)} and {len(labels)}"
        )
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    rng = random.Random(seed)
    while True:
        order = list(range(len(texts)))
        rng.shuffle(order)
        window = 20 * batch_size  # sort by length inside windows of 20 batches
        for w in range(0, len(order), window):
            order[w : w + window] = sorted(
                order[w : w + window], key=lambda i: len(encs[i])
            )
        starts = list(range(0, len(order) - batch_size + 1, batch_size))
        rng.shuffle(starts)
        for s in starts:
            idx = order[s : s + batch_size]
            batch = tok.pad([encs[i] for i in idx])
            del batch["token_type_ids"]  # one segment: all zeros
            batch["labels"] = torch.tensor([labels[i] for i in idx])  # (B,)
            batch["index"] = torch.tensor(idx)  # (B,)
            yield batch


@torch.no_grad()
def pooled_features(
    model: BertClassifier, tok: WordPiece, texts: Sequence[str], max_len: int = 32
) -> Tensor:
    """Mean-pooled BERT vectors of ``texts``: (len(texts), d_model), in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
    out = torch.empty(len(texts), model.bert.config.d_model)
    for s in range(0, len(order), 64):
        idx = order[s : s + 64]
        batch = tok.encode_batch([texts[i] for i in idx], max_len=max_len)
        ids, mask = batch["ids"].to(device), batch["attention_mask"].to(device)
        out[idx] = mean_pool(model.bert(ids, None, mask).hidden, mask).float().cpu()
    return out  # (N, d_model)


def fit_head(
    model: BertClassifier,
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    max_len: int = 32,
    steps: int = 100,
    weight_decay: float = 1e-2,
) -> float:
    """Fit the linear head alone on the frozen BERT's pooled vectors (logistic
    regression, full-batch L-BFGS); returns its training accuracy.

    Starting fine-tuning from a fitted head rather than a random one ("linear probe,
    then fine-tune", Kumar et al., 2022) means the first updates do not push the
    pre-trained layers around to serve a head that does not yet know the task.
    """
    x = pooled_features(model, tok, texts, max_len)  # (N, d_model)
    y = torch.as_tensor(list(labels))
    w = torch.zeros(model.head.out_features, x.shape[1], requires_grad=True)
    b = torch.zeros(model.head.out_features, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(x @ w.T + b, y) + weight_decay * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        model.head.weight.copy_(w)
        model.head.bias.copy_(b)
        return ((x @ w.T + b).argmax(-1) == y).float().mean().item()


def fine_tune(
    model: BertClassifier,
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    steps: int,
    batch_size: int = 16,
    lr: float = 1e-4,
    max_len: int = 32,
    seed: int = 0,
    teacher_logits: Tensor | None = None,
    temperature: float = 2.0,
    alpha: float = 0.5,
    freeze_embeddings: bool = True,
    device: str | torch.device = "cpu",
) -> list[float]:
    """Train ``model`` on labelled texts; returns the loss of every step.

    Without ``teacher_logits`` the loss is cross-entropy on the labels (the hard-label
    student, or fine-tuning the teacher). With ``teacher_logits`` (N, C), one row per
    text, it is :func:`distillation_loss` at ``temperature`` and ``alpha``. Warm-up
    over 10 % of the steps then linear decay (AdamW, weight decay 0.01). The token
    embeddings stay frozen by default: they are half of a small BERT's parameters,
    and a few hundred examples cannot improve 30,522 word vectors. Everything random
    draws from ``seed``; the caller's random state is left untouched.
    """
    if teacher_logits is not None and teacher_logits.shape[0] != len(texts):
        raise ValueError(
            f"teacher_logits must have one row per text ({len(texts)}), "
            f"got shape {tuple(teacher_logits.shape)}"
        )
    model.bert.embeddings.token.weight.requires_grad_(not freeze_embeddings)
    batches = classification_batches(tok, texts, labels, batch_size, max_len, seed)

    def loss_fn(model: BertClassifier, batch: dict[str, Tensor]) -> Tensor:
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(batch["ids"], batch["attention_mask"])  # (B, C)
        if teacher_logits is None:
            return F.cross_entropy(logits, batch["labels"])
        t = teacher_logits.to(device)[batch["index"]]  # (B, C)
        return distillation_loss(logits, t, batch["labels"], temperature, alpha)

    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev.index or 0] if dev.type == "cuda" else []):
        torch.manual_seed(seed)  # dropout
        history = training.train(
            model,
            batches,
            loss_fn,
            steps,
            lr=lr,
            weight_decay=0.01,
            warmup=max(1, steps // 10),
            decay="linear",
        )
    model.bert.embeddings.token.weight.requires_grad_(True)
    return history


@torch.no_grad()
def predict_logits(
    model: BertClassifier,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int = 32,
    batch_size: int = 64,
) -> Tensor:
    """The model's logits for every text, in order: (len(texts), n_classes). Texts are
    run in batches of similar length (less padding), in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(len(texts), model.head.out_features)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        batch = tok.encode_batch([texts[i] for i in idx], max_len=max_len)
        logits = model(batch["ids"].to(device), batch["attention_mask"].to(device))
        out[idx] = logits.float().cpu()
    return out


def accuracy(logits: Tensor, labels: Sequence[int] | Tensor) -> float:
    """Fraction of rows whose arg-max is the label."""
    labels = torch.as_tensor(labels)
    return (logits.argmax(-1) == labels).float().mean().item()
