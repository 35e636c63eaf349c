"""Tests of distill: the distillation loss (identities, T² scaling, the reference
formula), the student built from the teacher's layers (equal to a Hugging Face
DistilBERT-style truncation of BertModel), and the objective the fine-tuning recipe
trains a student with."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from transformer_book import (
    bert,
    bert_heads,
    distill,
    finetune,
    minilm_weights,
    params,
)
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece


def _logits(seed: int, shape=(16, 5), scale: float = 3.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def test_kl_of_identical_logits_is_zero():
    s = _logits(0)
    for T in (0.5, 1.0, 2.0, 8.0):
        assert distill.distillation_loss(s, s.clone(), temperature=T).abs() < 1e-6


def test_one_hot_teacher_gives_cross_entropy():
    s, y = _logits(1), torch.arange(16) % 5
    teacher = 1e3 * F.one_hot(y, 5).float()  # softmax is one-hot to fp32 precision
    kl = distill.distillation_loss(s, teacher, temperature=1.0)
    torch.testing.assert_close(kl, F.cross_entropy(s, y), atol=1e-5, rtol=1e-5)
    # and with labels at alpha = 0.5 it is the same cross-entropy, twice halved
    both = distill.distillation_loss(s, teacher, y, temperature=1.0, alpha=0.5)
    torch.testing.assert_close(both, F.cross_entropy(s, y), atol=1e-5, rtol=1e-5)


def test_matches_the_written_formula():
    s, t, y = _logits(2), _logits(3), torch.arange(16) % 5
    T, a = 3.0, 0.3
    p = F.softmax(t / T, -1)
    kl = (p * (p.log() - F.log_softmax(s / T, -1))).sum(-1).mean()
    expected = a * T**2 * kl + (1 - a) * F.cross_entropy(s, y)
    got = distill.distillation_loss(s, t, y, temperature=T, alpha=a)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_t_squared_keeps_gradient_magnitudes_comparable():
    t = _logits(4, (512, 5), 2.0)
    norms = {}
    for T in (1.0, 4.0, 16.0):
        s = torch.zeros_like(t, requires_grad=True)
        distill.distillation_loss(s, t, temperature=T).backward()
        norms[T] = s.grad.norm().item()
    # with T² the gradient stays within a small factor; without it, it would fall
    # by about T² (256x from T=1 to T=16)
    assert 0.3 < norms[16.0] / norms[1.0] < 3.0
    assert (norms[1.0] / 1.0) / (norms[16.0] / 256.0) > 50


def test_gradient_is_q_minus_p_over_t():
    """d(T² KL)/ds = T (q − p) / B: the formula of Hinton et al. (2015), section 2."""
    s = _logits(5).requires_grad_(True)
    t, T = _logits(6), 4.0
    distill.distillation_loss(s, t, temperature=T).backward()
    expected = T * (F.softmax(s.detach() / T, -1) - F.softmax(t / T, -1)) / len(t)
    torch.testing.assert_close(s.grad, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": 0.0}, "temperature must be positive"),
        ({"alpha": 1.5}, "alpha must be in"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        distill.distillation_loss(_logits(0), _logits(1), **kwargs)


def test_shape_mismatch():
    with pytest.raises(ValueError, match="must both have shape"):
        distill.distillation_loss(_logits(0), _logits(1, (16, 4)))


def test_hidden_cosine_loss():
    h = _logits(7, (2, 4, 8))
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert distill.hidden_cosine_loss(h, 3 * h, mask).abs() < 1e-6  # same direction
    assert torch.isclose(distill.hidden_cosine_loss(h, -h, mask), torch.tensor(2.0))
    other = h.clone()
    other[0, 3] = -h[0, 3]  # a padded position: ignored
    assert distill.hidden_cosine_loss(h, other, mask).abs() < 1e-6
    with pytest.raises(ValueError, match="same shape"):
        distill.hidden_cosine_loss(h, h[:, :3], mask)


def test_every_other_layer():
    assert distill.every_other_layer(6) == [0, 2, 4]
    assert distill.every_other_layer(12) == [0, 2, 4, 6, 8, 10]
    assert distill.every_other_layer(12, 4) == [0, 3, 6, 9]
    with pytest.raises(ValueError, match="n_student must be between"):
        distill.every_other_layer(6, 7)


def _small_bert(seed: int = 0, n_layers: int = 4) -> bert.BertModel:
    torch.manual_seed(seed)
    cfg = bert.BertConfig(
        vocab_size=50, d_model=16, n_layers=n_layers, n_heads=2, d_ff=32, max_len=12,
        dropout=0.0,
    )  # fmt: skip
    return bert.BertModel(cfg).eval()


def test_student_equals_the_teacher_run_through_the_kept_layers():
    teacher = _small_bert()
    student = distill.student_from_teacher(teacher, [0, 2])
    assert student.config.n_layers == 2 and teacher.config.n_layers == 4
    ids = torch.randint(1, 50, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[1, 5:] = 0
    x = teacher.embeddings(ids)
    m = mask.bool()[:, None, None, :]
    for i in (0, 2):
        x = teacher.encoder.layers[i](x, mask=m)
    got = student(ids, None, mask).hidden
    torch.testing.assert_close(got, x, atol=1e-5, rtol=1e-5)
    # a copy: training the student leaves the teacher untouched
    student.encoder.layers[0].ff.up_proj.weight.data.zero_()
    assert teacher.encoder.layers[0].ff.up_proj.weight.abs().sum() > 0


def test_student_equals_hugging_face_with_the_same_layers():
    """The reference: transformers' BertModel with the teacher's weights and its layer
    list cut to the kept layers (what DistilBERT's initialisation script does)."""
    transformers = pytest.importorskip("transformers")
    teacher = _small_bert(1)
    cfg = teacher.config
    hf_cfg = transformers.BertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff, max_position_embeddings=cfg.max_len,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        layer_norm_eps=cfg.layer_norm_eps,
    )  # fmt: skip
    hf = transformers.BertModel(hf_cfg).eval()
    names = minilm_weights.hf_names(cfg.n_layers)
    own = dict(teacher.named_parameters())
    hf.load_state_dict({names[k]: v for k, v in own.items()}, strict=False)
    hf.encoder.layer = torch.nn.ModuleList([hf.encoder.layer[i] for i in (1, 3)])
    student = distill.student_from_teacher(teacher, [1, 3])
    ids = torch.randint(1, 50, (2, 9))
    with torch.no_grad():
        ref = hf(input_ids=ids).last_hidden_state
    torch.testing.assert_close(student(ids).hidden, ref, atol=1e-5, rtol=1e-5)


def test_student_of_a_classifier_and_parameter_count():
    teacher = bert_heads.SequenceClassifier(
        _small_bert(2, n_layers=6), 2, pooling="mean"
    )
    student = distill.student_from_teacher(teacher, distill.every_other_layer(6))
    assert isinstance(student, bert_heads.SequenceClassifier)
    assert student.pooling == "mean" and student.encoder.config.n_layers == 3
    torch.testing.assert_close(student.classifier.weight, teacher.classifier.weight)
    block = params.encoder_block_params(16, 32)
    assert params.count_params(teacher) - params.count_params(student) == 3 * block


def test_student_bad_layers():
    with pytest.raises(ValueError, match="layers must be indices"):
        distill.student_from_teacher(_small_bert(), [0, 4])
    with pytest.raises(ValueError, match="teacher must be a BertModel"):
        distill.student_from_teacher(torch.nn.Linear(2, 2), [0])


def _toy_tokenizer() -> WordPiece:
    return WordPiece([*SPECIAL_TOKENS, "good", "bad", "film", "very", "a"])


def _toy_task():
    """A tokenizer, 24 two-class texts and their labels, and an untrained teacher."""
    tok = _toy_tokenizer()
    texts = ["good film", "very good", "a good film", "bad film", "very bad", "a bad"]
    texts, y = texts * 4, [1, 1, 1, 0, 0, 0] * 4
    torch.manual_seed(3)
    cfg = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=2, n_heads=2, d_ff=32, max_len=8,
        dropout=0.0,
    )  # fmt: skip
    teacher = bert_heads.SequenceClassifier(bert.BertModel(cfg), 2, dropout=0.0)
    return tok, texts, y, teacher


def test_the_recipe_distils_a_student_with_the_distillation_objective():
    tok, texts, y, teacher = _toy_task()
    batches = finetune.classification_batches(tok, texts, y, 8, 8, seed=0)
    finetune.fine_tune(teacher, batches, 60, 1e-2, freeze_token_embeddings=False)
    logits = finetune.predict_logits(teacher, tok, texts, 8)
    assert logits.argmax(-1).tolist() == y
    student = distill.student_from_teacher(teacher, [0])
    objective = distill.distillation_objective(logits, temperature=2.0, alpha=1.0)
    batch = next(finetune.classification_batches(tok, texts, y, 8, 8, seed=1))
    s_logits = student(batch["ids"], batch["token_type_ids"], batch["attention_mask"])
    want = distill.distillation_loss(
        s_logits, logits[batch["index"]], batch["labels"], 2.0, 1.0
    )
    torch.testing.assert_close(objective(student, batch), want)  # the rows of the batch
    before = objective(student, batch).item()
    finetune.fine_tune(student, batches, 30, 1e-3, objective, seed=0)
    assert objective(student, batch).item() < before
    with pytest.raises(ValueError, match=r"teacher_logits must be \(N, C\)"):
        distill.distillation_objective(logits[:, 0])


# --- the exercise checks of chapter 13 -------------------------------------------


def _right_soft(s, t, T):
    log_q, log_p = F.log_softmax(s / T, -1), F.log_softmax(t / T, -1)
    return T**2 * (log_p.exp() * (log_p - log_q)).sum(-1).mean()


def test_check_soft_target_loss(capsys):
    from transformer_book import checks

    checks.check_soft_target_loss(_right_soft)
    assert "Correct" in capsys.readouterr().out
    wrong = {
        "without the factor": lambda s, t, T: _right_soft(s, t, T) / T**2,
        "KL\\(student": lambda s, t, T: (
            T**2
            * (
                F.softmax(s / T, -1)
                * (F.log_softmax(s / T, -1) - F.log_softmax(t / T, -1))
            )
            .sum(-1)
            .mean()
        ),
        "teacher's logits by T": lambda s, t, T: (
            T**2
            * F.kl_div(
                F.log_softmax(s / T, -1),
                F.log_softmax(t, -1),
                reduction="batchmean",
                log_target=True,
            )
        ),  # fmt: skip
        "summed over the batch": lambda s, t, T: _right_soft(s, t, T) * len(s),
    }
    for message, fn in wrong.items():
        with pytest.raises(checks.ExerciseError, match=message):
            checks.check_soft_target_loss(fn)


def test_check_student_params(capsys):
    from transformer_book import checks

    def right(cfg, n):
        d = cfg.d_model
        emb = (cfg.vocab_size + cfg.max_len + cfg.n_segments) * d + 2 * d
        return emb + n * params.encoder_block_params(d, cfg.d_ff) + d * d + d

    checks.check_student_params(right)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(checks.ExerciseError, match="pooler"):
        checks.check_student_params(lambda c, n: right(c, n) - c.d_model**2 - c.d_model)
    with pytest.raises(checks.ExerciseError, match="only the encoder layers"):
        checks.check_student_params(
            lambda c, n: n * params.encoder_block_params(c.d_model, c.d_ff)
        )


def test_check_dynamic_masks(capsys):
    from transformer_book import checks

    def right(n, length, e, seed):
        gen = torch.Generator().manual_seed(seed)
        return torch.rand(e, n, length, generator=gen) < 0.15

    def static(n, length, e, seed):
        gen = torch.Generator().manual_seed(seed)
        return (torch.rand(n, length, generator=gen) < 0.15).expand(e, n, length)

    checks.check_dynamic_masks(right)
    assert "Correct" in capsys.readouterr().out
    with pytest.raises(checks.ExerciseError, match="static"):
        checks.check_dynamic_masks(static)
    with pytest.raises(checks.ExerciseError, match="expected 0.15"):
        checks.check_dynamic_masks(
            lambda n, length, e, s: right(n, length, e, s) | True
        )
    with pytest.raises(checks.ExerciseError, match="same seed differ"):
        checks.check_dynamic_masks(
            lambda n, length, e, s: torch.rand(e, n, length) < 0.15
        )


# --- a student's whole run -------------------------------------------------------


def test_train_student_arms():
    tok, texts, y, teacher = _toy_task()
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    logits = torch.randn(len(texts), 2)
    kw = dict(steps=3, lr=1e-3, batch_size=8, max_len=8)
    a = distill.train_student(teacher, [1], tok, texts, y, **kw, seed=0)
    b = distill.train_student(teacher, [1], tok, texts, y, **kw, seed=0)
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
        torch.testing.assert_close(v, w, msg=k)  # reproducible from the seed
    assert a.encoder.config.n_layers == 1
    soft = distill.train_student(
        teacher, [1], tok, texts, y, **kw, teacher_logits=logits, temperature=2.0
    )
    assert not torch.equal(soft.classifier.weight, a.classifier.weight)
    for k, v in teacher.state_dict().items():  # the teacher is left as it was
        assert torch.equal(v, before[k]), k
    with pytest.raises(ValueError, match="one row per text"):
        distill.train_student(
            teacher, [1], tok, texts, y, **kw, teacher_logits=logits[:3]
        )
    with pytest.raises(ValueError, match="one label per text"):
        distill.train_student(teacher, [1], tok, texts, y[:3], **kw)
