"""Checks for the exercises of chapter 13 (distillation and RoBERTa): the soft-target
loss (break and fix), the parameters a half-depth student keeps (predict, then
compute), and dynamic masking that is really dynamic (break and fix)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import bert, distill, params
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_soft_target_loss", "check_student_params", "check_dynamic_masks"]


def check_soft_target_loss(fn: Callable[[Tensor, Tensor, float], Tensor]) -> None:
    """``fn(student_logits, teacher_logits, T)``: T² · KL(softmax(t/T) ‖ softmax(s/T)),
    averaged over the batch."""
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(8, 5, generator=gen) * 3
    t = torch.randn(8, 5, generator=gen) * 3
    for T in (1.0, 2.0, 5.0):
        expected = distill.distillation_loss(s, t, temperature=T)
        got = call(fn, s.clone(), t.clone(), T)
        if not isinstance(got, Tensor) or got.dim() != 0:
            raise ExerciseError(
                f"expected a scalar tensor (the batch mean), got "
                f"{getattr(got, 'shape', type(got).__name__)}"
            )
        if torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
            continue
        p_t = F.softmax(t / T, -1)
        log_s, log_t = F.log_softmax(s / T, -1), F.log_softmax(t / T, -1)
        kl = (p_t * (log_t - log_s)).sum(-1).mean()
        reverse = (log_s.exp() * (log_s - log_t)).sum(-1).mean()
        if T != 1.0 and torch.allclose(got, kl, atol=1e-5, rtol=1e-4):
            raise ExerciseError(
                f"At T={T} you return KL without the factor T² = {T**2:g}: the soft "
                "gradients then shrink like 1/T², and the soft term counts less and "
                "less against the hard one as T grows."
            )
        if torch.allclose(got, T**2 * reverse, atol=1e-5, rtol=1e-4):
            raise ExerciseError(
                "You computed KL(student ‖ teacher). The teacher's distribution is the "
                "target: KL(p_teacher ‖ p_student) = Σ p_t (log p_t − log p_s). "
                "(F.kl_div(input, target) takes the *student's* log-probabilities as "
                "input.)"
            )
        soft_one_side = F.kl_div(
            log_s, F.log_softmax(t, -1), reduction="batchmean", log_target=True
        )
        if T != 1.0 and torch.allclose(got, T**2 * soft_one_side, atol=1e-5, rtol=1e-4):
            raise ExerciseError(
                "Divide the teacher's logits by T too: both distributions are softened."
            )
        summed = T**2 * (p_t * (log_t - log_s)).sum()
        if torch.allclose(got, summed, atol=1e-4, rtol=1e-4):
            raise ExerciseError(
                "You summed over the batch: average over the examples (batchmean), so "
                "the loss does not grow with the batch size."
            )
        expect_close(got, expected, f"the loss at T={T}")
    passed(
        "T² · KL(teacher ‖ student) on softened distributions, averaged over the batch."
    )


def check_student_params(fn: Callable[[bert.BertConfig, int], int]) -> None:
    """``fn(config, n_layers)``: the number of parameters of a :class:`bert.BertModel`
    of ``config`` with only ``n_layers`` encoder layers, computed from the sizes."""
    for cfg in (
        bert.BertConfig(vocab_size=100, d_model=8, n_layers=4, n_heads=2, d_ff=16,
                        max_len=10),
        bert.BertConfig(vocab_size=30522, d_model=384, n_layers=6, n_heads=12,
                        d_ff=1536, max_len=512),
    ):  # fmt: skip
        for n in (1, cfg.n_layers // 2, cfg.n_layers):
            small = bert.BertConfig(**{**cfg.__dict__, "n_layers": n})
            expected = params.count_params(bert.BertModel(small))
            got = call(fn, cfg, n)
            if got == expected:
                continue
            block = params.encoder_block_params(cfg.d_model, cfg.d_ff)
            if got == expected - cfg.d_model * cfg.d_model - cfg.d_model:
                raise ExerciseError("Count the pooler too: a d_model × d_model linear.")
            if got == n * block:
                raise ExerciseError(
                    "You counted only the encoder layers. The embeddings (token, "
                    "position, segment, their LayerNorm) and the pooler stay whole in "
                    "the student; in a small BERT they are most of the parameters."
                )
            raise ExerciseError(
                f"with {n} of the {cfg.n_layers} layers (d_model={cfg.d_model}, "
                f"vocab_size={cfg.vocab_size}) you gave {got:,}, expected {expected:,}"
                f" (one encoder layer has {block:,})."
            )
    passed(
        "embeddings and pooler stay, the layers go: halving MiniLM's depth removes "
        "only about a quarter of its parameters."
    )


def check_dynamic_masks(fn: Callable[[int, int, int, int], Tensor]) -> None:
    """``fn(n_texts, length, n_epochs, seed)``: bool (n_epochs, n_texts, length), True
    where a token is selected (p = 0.15), a new draw every epoch, reproducible."""
    n_texts, length, n_epochs = 64, 40, 4
    got = call(fn, n_texts, length, n_epochs, 0)
    if not isinstance(got, Tensor) or got.dtype != torch.bool:
        raise ExerciseError(f"expected a bool tensor, got {type(got).__name__} "
                            f"{getattr(got, 'dtype', '')}")  # fmt: skip
    if tuple(got.shape) != (n_epochs, n_texts, length):
        raise ExerciseError(
            f"expected shape {(n_epochs, n_texts, length)}, got {tuple(got.shape)}"
        )
    rate = got.float().mean().item()
    if not 0.12 < rate < 0.18:
        raise ExerciseError(f"{rate:.3f} of the tokens are selected, expected 0.15.")
    same = (got[1:] == got[:1]).all(dim=-1).float().mean().item()
    if same > 0.5:
        raise ExerciseError(
            f"{same:.0%} of the texts get the same mask in later epochs as in the "
            "first: the masking is static. Creating the generator from the same seed "
            "inside the epoch loop replays the same draws: create it once, outside."
        )
    again = call(fn, n_texts, length, n_epochs, 0)
    if not torch.equal(got, again):
        raise ExerciseError("Two calls with the same seed differ: draw from a "
                            "torch.Generator seeded with `seed`.")  # fmt: skip
    passed("a new mask every epoch, at the right rate, reproducible from the seed.")
