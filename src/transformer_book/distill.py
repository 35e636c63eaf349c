"""Knowledge distillation: a small student learns from a large teacher's soft targets
(chapter 13).

Hinton, Vinyals & Dean (2015), "Distilling the Knowledge in a Neural Network": train
the student on the teacher's probabilities softened by a temperature T,

    L = α · T² · KL(softmax(t/T) ‖ softmax(s/T)) + (1 − α) · CE(s, y).

Sanh et al. (2019), DistilBERT: a student with every other layer of its teacher,
initialised from those layers, trained with a *triple loss*: this distillation term,
the masked-LM cross-entropy (here: the task's cross-entropy) and a cosine term that
aligns the student's hidden states with the teacher's (:func:`hidden_cosine_loss`).

Training is :func:`finetune.fine_tune`, the book's one fine-tuning recipe: this module
passes its loss into it (:func:`distillation_objective`).

Chapter 13's comparison of students, read back from the committed result of
``benchmarks/ch13_distillation.py``, is :mod:`transformer_book.distill_readings`; its
data and teacher (the SST-2 splits, the transfer set, the fine-tuned
all-MiniLM-L6-v2) are :mod:`transformer_book.sst2_teacher`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from . import finetune
from .bert import BertConfig, BertModel
from .tokenizer import WordPiece

__all__ = [
    "distillation_loss",
    "hidden_cosine_loss",
    "every_other_layer",
    "student_from_teacher",
    "distillation_objective",
    "train_student",
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
    """A copy of ``teacher`` (a :class:`BertModel`, or a task head over one as its
    ``encoder``, e.g. :class:`bert_heads.SequenceClassifier`) that keeps only the
    encoder ``layers`` (in order); embeddings, pooler and head are copied.

    Sanh et al. (2019), section 3: "initialize the student from the teacher by taking
    one layer out of two".
    """
    bert = (
        teacher if isinstance(teacher, BertModel) else getattr(teacher, "encoder", None)
    )
    if not isinstance(bert, BertModel):
        raise ValueError(
            "teacher must be a BertModel or a head with a BertModel as its encoder, "
            f"got {type(teacher).__name__}"
        )
    n = bert.config.n_layers
    if not layers or any(not 0 <= i < n for i in layers):
        raise ValueError(f"layers must be indices in [0, {n}), got {list(layers)}")
    student = copy.deepcopy(teacher)
    s_bert = student if isinstance(student, BertModel) else student.encoder
    s_bert.encoder.layers = nn.ModuleList(
        copy.deepcopy(bert.encoder.layers[i]) for i in layers
    )
    s_bert.config = _with_layers(bert.config, len(layers))
    return student


def _with_layers(config: BertConfig, n_layers: int) -> BertConfig:
    fields = {**config.__dict__, "n_layers": n_layers}
    return BertConfig(**fields)


def distillation_objective(
    teacher_logits: Tensor, temperature: float = 2.0, alpha: float = 0.5
) -> Callable[[nn.Module, dict[str, Tensor]], Tensor]:
    """A ``loss_fn(student, batch)`` for :func:`finetune.fine_tune`:
    :func:`distillation_loss` of the student's logits against the teacher's logits of
    the same examples (``batch["index"]``) and the labels.

    Shapes: teacher_logits (N, C), one row per training text; batch ``ids`` ...
    (B, T), ``labels`` and ``index`` (B,).
    """
    if teacher_logits.dim() != 2:
        raise ValueError(
            f"teacher_logits must be (N, C), got {tuple(teacher_logits.shape)}"
        )

    def loss_fn(student: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        logits = student(batch["ids"], batch["token_type_ids"], batch["attention_mask"])
        t = teacher_logits.to(logits.device)[batch["index"]]  # (B, C)
        return distillation_loss(logits, t, batch["labels"], temperature, alpha)

    return loss_fn


def train_student(
    teacher: nn.Module,
    layers: Sequence[int],
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    steps: int,
    lr: float,
    teacher_logits: Tensor | None = None,
    temperature: float = 2.0,
    alpha: float = 1.0,
    batch_size: int = 32,
    max_len: int = 32,
    seed: int = 0,
) -> nn.Module:
    """A student copied from ``teacher`` (:func:`student_from_teacher`, ``layers``)
    and trained by :func:`finetune.fine_tune` (token embeddings frozen) for ``steps``
    updates of ``batch_size`` ``texts`` at peak rate ``lr``.

    Without ``teacher_logits`` the loss is the cross-entropy with ``labels`` (gold
    labels, or the teacher's argmax: its hard labels); with them (N, C), one row per
    text, :func:`distillation_objective` at ``temperature`` and ``alpha`` (1: the soft
    targets alone, ``labels`` unused). ``seed`` sets the batches' order and the
    dropout; the caller's random state is left untouched.
    """
    if len(texts) != len(labels):
        raise ValueError(f"need one label per text: {len(texts)} texts, {len(labels)}")
    if teacher_logits is not None and len(teacher_logits) != len(texts):
        raise ValueError(
            f"teacher_logits must have one row per text ({len(texts)}), "
            f"got {tuple(teacher_logits.shape)}"
        )
    student = student_from_teacher(teacher, layers)
    loss_fn = finetune.classification_loss
    if teacher_logits is not None:
        loss_fn = distillation_objective(teacher_logits, temperature, alpha)
    batches = finetune.classification_batches(
        tok, texts, list(labels), batch_size, max_len, seed
    )
    finetune.fine_tune(student, batches, steps, lr, loss_fn, seed=seed)
    return student
