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
``benchmarks/ch13_distillation.py`` (:func:`seed_tests`, :func:`best_setting`,
:func:`comparison_words`), lives here too. Its data and teacher (the SST-2 splits,
the transfer set, the fine-tuned all-MiniLM-L6-v2) are
:mod:`transformer_book.sst2_teacher`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from . import finetune, report
from .bert import BertConfig, BertModel
from .tokenizer import WordPiece

__all__ = [
    "distillation_loss",
    "hidden_cosine_loss",
    "every_other_layer",
    "student_from_teacher",
    "distillation_objective",
    "train_student",
    "seed_tests",
    "settings_tried",
    "best_setting",
    "comparison_words",
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


# Chapter 13's comparison, read back from benchmarks/ch13_distillation.py's committed
# result: ``runs`` (one per setting and seed, with its ``config``, ``dev`` and ``test``
# accuracy), ``mean_dev`` (setting -> mean dev accuracy over the seeds), ``chosen``
# (arm -> its setting of the best mean dev accuracy), ``teacher``, ``copies`` (a copy
# of the teacher's layers, before training -> its dev and test accuracy). A setting
# is named ``arm:lr[:T][@updates]``.


def seed_tests(result: dict, config: str) -> list[float]:
    """The test accuracy of every seed's run of the setting ``config``."""
    return [r["test"] for r in result["runs"] if r["config"] == config]


def settings_tried(result: dict, arm: str) -> list[str]:
    """The settings of ``arm`` the benchmark ran, sorted by name."""
    return sorted(k for k in result["mean_dev"] if k.split(":")[0] == arm)


def best_setting(result: dict, arm: str, updates: int) -> str:
    """``arm``'s setting of the best mean dev accuracy among those trained for
    ``updates`` updates (named ``...@updates``)."""
    tried = [k for k in settings_tried(result, arm) if k.endswith(f"@{updates}")]
    return max(tried, key=result["mean_dev"].get)


def _argmax_reading(verdict: str) -> str:
    if verdict.endswith("no ranking"):
        return (
            "Three seeds do not tell the soft targets from the teacher's argmax on the "
            "same texts: how much of the gain is the probabilities, beyond the answers "
            "themselves, this experiment does not resolve"
        )
    if verdict == "higher for every seed":
        return (
            "The probabilities add to the answers: on the same texts, the soft targets "
            "teach more than the teacher's argmax does"
        )
    return "Here the teacher's argmax teaches more than its probabilities on the same texts"


def _probe_reading(chosen: str, matched: str) -> str:
    no_ranking = [v.endswith("no ranking") for v in (chosen, matched)]
    if all(no_ranking):
        return (
            "Neither at the chosen settings nor at 300 updates each does the test rank "
            "its soft targets against the labels: a teacher that knows little more than "
            "the student can learn from the labels themselves passes on nothing three "
            "seeds can see (a gain of a point or two could hide in spreads this size). "
            "Distillation compresses a teacher's knowledge; it does not create any"
        )
    if "higher for every seed" in (chosen, matched):
        return (
            "Even this teacher passes something on: its soft targets beat the labels at "
            "one of the two comparisons, though by less than the fine-tuned teacher's"
        )
    if matched == "lower for every seed" and no_ranking[0]:
        return (
            "At the chosen settings the test does not rank its soft targets against the "
            "labels, and at 300 updates each they do worse, on every seed and by the "
            "t-test: imitating a teacher that knows little more than the labels costs "
            "the student part of what the labels themselves teach. Distillation "
            "compresses a teacher's knowledge; it does not create any"
        )
    return "Its soft targets do worse than the labels here"


def comparison_words(
    results: dict[str, dict], keep: Sequence[int], n_test: int
) -> dict[str, str]:
    """What chapter 13's prose reads from the committed comparison of its two teachers
    (``results``: ``"fine-tuned"`` and ``"probe"`` -> a result), each as glue text,
    named with the teacher's prefix ``ft_`` or ``pr_``: every arm's test accuracy at
    its chosen setting (``<prefix><arm>``, :func:`report.mean_sd`) and at 300 updates
    (``<prefix>hard300``, ``<prefix>soft300``), the soft targets and the teacher's
    argmax against the labels (``<prefix><arm>_diff``, ``_sd``, ``_verdict``:
    :func:`report.compared`, unpaired), the teachers' test accuracies; for the fine-tuned
    teacher the soft targets against its argmax, paired by seed (``soft_vs_argmax``,
    ``_sd``, ``_verdict``, ``argmax_reading``) and the gain in test sentences of
    ``n_test`` (``gain_sentences``); for the probe teacher the comparison at 300
    updates (``pr_matched_diff``, ``_sd``, ``_verdict``, ``pr_reading``); and the
    copies before training (``tr_best_copy`` of the best dev accuracy, the copy of
    layers ``keep``, the top three layers)."""
    words: dict[str, str] = {}
    short = {"fine-tuned": "ft", "probe": "pr"}
    for name, kd in results.items():
        pre = short[name]
        tests = {
            a: seed_tests(kd, kd["chosen"][a]) for a in ("hard", "teacher_hard", "soft")
        }
        for arm, accs in tests.items():
            words[f"{pre}_{arm}"] = report.mean_sd(accs)
        for arm in ("soft", "teacher_hard"):  # other texts than the labels: unpaired
            d, s, verdict = report.compared(tests["hard"], tests[arm])
            words.update(
                {
                    f"{pre}_{arm}_diff": f"{d:+.3f}",
                    f"{pre}_{arm}_sd": f"{s:.3f}",
                    f"{pre}_{arm}_verdict": verdict,
                }
            )
        words[f"{pre}_teacher"] = f"{kd['teacher']['test']:.3f}"
        at_300 = {a: seed_tests(kd, best_setting(kd, a, 300)) for a in ("hard", "soft")}
        for arm, accs in at_300.items():
            words[f"{pre}_{arm}300"] = report.mean_sd(accs)
        if name == "fine-tuned":
            words["gain_sentences"] = (
                f"{report.compared(tests['hard'], tests['soft'])[0] * n_test:.0f}"
            )
            # the same copy reads the same phrases in the same order and the same
            # dropout for one seed: the seed pairs soft targets and argmax
            d, s, verdict = report.compared(
                tests["teacher_hard"], tests["soft"], pairs=True
            )
            words.update(
                {
                    "soft_vs_argmax": f"{d:+.3f}",
                    "soft_vs_argmax_sd": f"{s:.3f}",
                    "soft_vs_argmax_verdict": verdict,
                    "argmax_reading": _argmax_reading(verdict),
                }
            )
        else:
            d, s, verdict = report.compared(at_300["hard"], at_300["soft"])
            words.update(
                {
                    "pr_matched_diff": f"{d:+.3f}",
                    "pr_matched_sd": f"{s:.3f}",
                    "pr_matched_verdict": verdict,
                    "pr_reading": _probe_reading(words["pr_soft_verdict"], verdict),
                }
            )
    kd = results["fine-tuned"]
    copy_dev = {k: v["dev"] for k, v in kd["copies"].items()}
    best_copy = max(copy_dev, key=copy_dev.get)
    words.update(
        {
            "tr_n": f"{kd['n_transfer']:,}",
            "tr_best_copy": best_copy,
            "tr_best_copy_dev": f"{copy_dev[best_copy]:.3f}",
            "tr_keep_dev": f"{copy_dev[str(list(keep))]:.3f}",
            "tr_keep_test": f"{kd['copies'][str(list(keep))]['test']:.3f}",
            "tr_top_copy": f"{kd['copies']['[3, 4, 5]']['test']:.3f}",
            "tr_n_dev": str(kd["n_dev"]),
        }
    )
    return words
