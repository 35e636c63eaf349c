"""Checks for the exercises of chapter 14 (decoder-only language models)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .. import gpt, sampling
from ._core import ExerciseError, call, passed

__all__ = [
    "check_bits_and_perplexity",
    "check_future_leak",
    "check_training_days",
    "check_top_k_top_p",
]


def _number(got, what: str) -> float:
    if isinstance(got, Tensor):
        got = got.item()
    if not isinstance(got, (int, float)):
        raise ExerciseError(f"{what}: expected a number, got {type(got).__name__}.")
    return float(got)


def check_bits_and_perplexity(fn: Callable[[float], tuple[float, float]]) -> None:
    """``fn(loss)`` with ``loss`` a cross-entropy in nats per character returns
    (bits per character, perplexity)."""
    for loss in (math.log(65), 1.88, 0.7, 0.0):
        got = call(fn, loss)
        if not isinstance(got, tuple) or len(got) != 2:
            raise ExerciseError(
                f"return a pair (bits per character, perplexity), got {got!r}"
            )
        bits = _number(got[0], "bits per character")
        ppl = _number(got[1], "perplexity")
        want_bits, want_ppl = loss / math.log(2), math.exp(loss)
        if not math.isclose(bits, want_bits, rel_tol=1e-6, abs_tol=1e-9):
            if math.isclose(bits, loss * math.log(2), rel_tol=1e-6, abs_tol=1e-9):
                hint = "you multiplied by ln 2; a bit is ln 2 nats, so divide by it."
            elif math.isclose(bits, loss / math.log(10), rel_tol=1e-6, abs_tol=1e-9):
                hint = "that is in decimal digits (log10); bits are base-2 logarithms."
            else:
                hint = (
                    "bits = nats / ln 2: a loss of ln 65 nats is log2 65 ≈ 6.02 bits."
                )
            raise ExerciseError(f"loss {loss:.4f} nats: bits {bits:.4f}, expected "
                                f"{want_bits:.4f}. {hint}")  # fmt: skip
        if not math.isclose(ppl, want_ppl, rel_tol=1e-6):
            if math.isclose(ppl, 2**loss, rel_tol=1e-6):
                hint = (
                    "2**loss would be right for a loss in bits; this loss is in nats."
                )
            else:
                hint = "perplexity = exp(loss in nats) = 2**(loss in bits)."
            raise ExerciseError(f"loss {loss:.4f} nats: perplexity {ppl:.4f}, expected "
                                f"{want_ppl:.4f}. {hint}")  # fmt: skip
    passed(
        "a uniform guess over 65 characters is log2 65 = 6.02 bits and perplexity 65; "
        "nanoGPT's 1.88 nats are 2.71 bits per character, perplexity 6.6: as unsure as "
        "a choice among 6.6 equally likely characters."
    )


class _LeakyGPT(gpt.GPT):
    """The same model run without its causal mask: every position sees the future."""

    def forward(self, ids: Tensor, cache=None) -> Tensor:
        x = self.pos_emb(self.tok_emb(ids))  # (B, T, d_model)
        return self.lm_head(self.blocks(x))  # no mask: (B, T, vocab_size)


def check_future_leak(fn: Callable[[torch.nn.Module, Tensor, int], float]) -> None:
    """``fn(model, ids, t)``: the largest change of the logits at positions 0 … t when
    every token after position t is replaced; 0 for a causal model."""
    config = gpt.GPTConfig(vocab_size=11, max_len=16, d_model=16, n_layers=2, n_heads=2)
    torch.manual_seed(0)
    causal = gpt.GPT(config).eval()
    leaky = _LeakyGPT(config).eval()
    leaky.load_state_dict(causal.state_dict())
    ids = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))
    for t in (0, 5, 10):
        got = _number(call(fn, causal, ids.clone(), t), "your leak")
        if got > 1e-4:
            raise ExerciseError(
                f"t={t}: you find a change of {got:.3g} in a causal model. Do you "
                f"change token t itself? Only tokens t+1 … end may change (ids[:, t+1:]), "
                "and only logits 0 … t are compared (logits[:, : t + 1])."
            )
        leak = _number(call(fn, leaky, ids.clone(), t), "your leak")
        if leak < 1e-3:
            raise ExerciseError(
                f"t={t}: you find no change ({leak:.3g}) in a model that reads the "
                "future. Replace the tokens after t with different ones (e.g. "
                "(ids + 1) % vocab) and compare the logits at positions 0 … t."
            )
    passed(
        "the causal model's early logits ignore the future; the model without its mask "
        "changes them, which is why its training loss would look too good to be true."
    )


def check_training_days(fn: Callable[..., float]) -> None:
    """``fn(n_params, n_tokens, n_gpus, flops_per_gpu, utilization)``: days of training
    at 6 · n_params · n_tokens floating-point operations."""
    cases = [
        (175e9, 300e9, 1024, 312e12, 0.4),  # GPT-3 on A100s (bf16 peak 312 TFLOP/s)
        (124e6, 10e9, 8, 989e12, 0.5),  # GPT-2 small on H100s
        (0.8e6, 1.5e6, 1, 1e11, 0.5),  # nanoGPT's CPU model and run, one core
    ]
    for n, d, g, f, u in cases:
        want = 6 * n * d / (g * f * u) / 86400
        got = _number(call(fn, n, d, g, f, u), "days")
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        args = f"N={n:.3g}, D={d:.3g}, {g} GPUs at {f:.3g} FLOP/s, utilization {u}"
        if math.isclose(got, want / 3, rel_tol=1e-6):
            hint = ("that is 2·N·D, the forward pass alone; the backward pass costs "
                    "twice the forward, 6·N·D in all.")  # fmt: skip
        elif math.isclose(got, want * 86400, rel_tol=1e-6):
            hint = "that is in seconds; a day has 86,400."
        elif math.isclose(got, want * 24, rel_tol=1e-6):
            hint = "that is in hours."
        elif math.isclose(got, want * u, rel_tol=1e-6):
            hint = "the GPUs deliver only utilization × peak: divide by it."
        else:
            hint = "days = 6·N·D / (n_gpus · flops_per_gpu · utilization) / 86,400."
        raise ExerciseError(f"For {args}: {got:.4g} days, expected {want:.4g}. {hint}")
    passed(
        "GPT-3 needs 6 · 175e9 · 300e9 = 3.15e23 FLOP: some four weeks on 1,024 A100s "
        "at 40 % of their peak. nanoGPT's CPU run (0.8 M parameters, 1.5 M tokens) "
        "needs 7.2e12, about 40 billion times less."
    )


def _probs(got, what: str, n: int) -> Tensor:
    if not isinstance(got, Tensor) or got.shape != (n,):
        raise ExerciseError(
            f"{what}: return the probabilities as a tensor of shape ({n},), got "
            f"{type(got).__name__} {tuple(getattr(got, 'shape', ()))}."
        )
    return got.detach().double()


def _check_kept(got: Tensor, want: Tensor, what: str) -> None:
    total = got.sum().item()
    if not math.isclose(total, 1.0, abs_tol=1e-5):
        raise ExerciseError(
            f"{what}: your probabilities add up to {total:.4f}, not 1. After setting "
            "the dropped tokens' logits to -inf (or their probabilities to 0), "
            "renormalise: softmax again, or divide by the kept mass."
        )
    kept, want_kept = int((got > 0).sum()), int((want > 0).sum())
    if kept != want_kept:
        raise ExerciseError(f"{what}: you keep {kept} tokens, expected {want_kept}.")
    if not torch.allclose(got, want, atol=1e-5):
        raise ExerciseError(f"{what}: the kept probabilities differ from "
                            f"{want.numpy().round(4).tolist()}.")  # fmt: skip


def check_top_k_top_p(
    top_k_probs: Callable[[Tensor, int], Tensor],
    top_p_probs: Callable[[Tensor, float], Tensor],
) -> None:
    """``top_k_probs(logits, k)`` and ``top_p_probs(logits, p)``: the next-token
    distribution (V,) after keeping the k most likely tokens (ties with the k-th kept)
    or the fewest most likely tokens whose probability reaches p, renormalised."""
    ties = torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0])  # three tokens tie for second place
    got = _probs(call(top_k_probs, ties.clone(), 2), "top_k_probs", 5)
    if int((got > 0).sum()) < 4 and math.isclose(got.sum().item(), 1.0, abs_tol=1e-5):
        raise ExerciseError(
            f"logits {ties.tolist()}, k = 2: you keep {int((got > 0).sum())} tokens; "
            "the three tokens tied for second place are equally likely, so keep all "
            "of them (4 tokens). torch.topk's indices pick one of equal values "
            "arbitrarily: compare every logit with the k-th largest value instead "
            "(logits >= kth), rather than keeping exactly k indices or only those "
            "strictly above the k-th (which keeps fewer than k)."
        )
    want = sampling.top_k_filter(ties, 2).softmax(-1).double()
    _check_kept(got, want, f"logits {ties.tolist()}, k = 2")
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    for p, n_kept in ((0.7, 2), (0.9, 3), (0.3, 1), (1.0, 4)):
        got = _probs(call(top_p_probs, probs.log(), p), "top_p_probs", 4)
        what = f"probabilities {probs.tolist()}, p = {p}"
        if int((got > 0).sum()) == n_kept - 1:
            raise ExerciseError(
                f"{what}: you keep {n_kept - 1} tokens, whose probabilities add up to "
                f"less than p; keep the token that crosses p too ({n_kept} tokens). A "
                "token stays when the tokens more likely than it hold less than p: "
                "cumsum - probs < p, not cumsum <= p."
            )
        want = sampling.top_p_filter(probs.log(), p).softmax(-1).double()
        _check_kept(got, want, what)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        z = torch.randn(20, generator=gen) * 2  # (V,)
        for k, p in ((5, 0.8), (1, 0.95)):
            got = _probs(call(top_k_probs, z.clone(), k), "top_k_probs", 20)
            _check_kept(got, sampling.top_k_filter(z, k).softmax(-1).double(),
                        f"random logits, k = {k}")  # fmt: skip
            got = _probs(call(top_p_probs, z.clone(), p), "top_p_probs", 20)
            _check_kept(got, sampling.top_p_filter(z, p).softmax(-1).double(),
                        f"random logits, p = {p}")  # fmt: skip
    passed(
        "top-k keeps every token tied with the k-th; top-p keeps the token that crosses "
        "p, so the kept mass is at least p; both renormalise what they keep."
    )
