"""Checks for the exercises of chapter 09 (shared heads and the KV cache)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from .. import attention, gpt, kv_cache, positions
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_rope_offset", "check_repeat_kv", "check_cat_copies"]


def check_repeat_kv(fn: Callable[[Tensor, int], Tensor]) -> None:
    """``fn(x, n_rep)``: (B, Hkv, T, Dh) -> (B, Hkv·n_rep, T, Dh), query head h reading
    key/value head h // n_rep."""
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
    got = call(fn, x.clone(), 2)
    expected = attention.repeat_kv(x, 2)
    if isinstance(got, Tensor) and got.shape == expected.shape:
        if torch.equal(got, x.repeat(1, 2, 1, 1)):
            raise ExerciseError(
                "Right shape, wrong order: your heads are kv0, kv1, kv2, kv0, kv1, kv2 "
                "(x.repeat tiles the whole head axis). Query heads 0 and 1 form the "
                "first group and must both read kv0: kv0, kv0, kv1, kv1, kv2, kv2. "
                "Use repeat_interleave on dim 1, or insert an axis, expand, reshape."
            )
    expect_close(
        got,
        expected,
        "repeated key/value heads",
        "Query head h must read key/value head h // n_rep.",
        atol=0,
        rtol=0,
    )
    expect_close(call(fn, x.clone(), 1), x, "n_rep=1 (multi-head attention)", atol=0)
    return passed(
        "every key/value head now serves its group of query heads, in order; "
        "F.scaled_dot_product_attention(..., enable_gqa=True) does the same inside."
    )


def _decode_logits(model: gpt.GPT, ids: Tensor, n_prompt: int) -> Tensor:
    """Logits of every step of cached decoding: the prompt, then one token at a time.

    Shapes: ids (B, T) -> (B, T - n_prompt + 1, V), the logits of the last position
    each step read."""
    cache = kv_cache.new_cache(model.config.n_layers, ids.shape[1])
    with torch.no_grad():
        steps = [model(ids[:, :n_prompt], cache=cache)[:, -1:]]
        for t in range(n_prompt, ids.shape[1]):
            steps.append(model(ids[:, t : t + 1], cache=cache))
    return torch.cat(steps, dim=1)


class _Rotate(nn.Module):
    """A stand-in for a model's RotaryEmbedding that rotates through the reader's
    ``fn(rope, q, k, n_cached)``."""

    def __init__(self, fn: Callable, rope: positions.RotaryEmbedding) -> None:
        super().__init__()
        self.fn, self.rope = fn, rope

    def forward(self, q: Tensor, k: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        out = call(self.fn, self.rope, q, k, offset)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ExerciseError(
                f"rotate_new must return the pair (q, k), got {type(out).__name__}."
            )
        return out


def check_rope_offset(fn: Callable) -> None:
    """``fn(rope, q, k, n_cached)``: the new tokens' queries and keys (B, H, T_new, Dh)
    rotated as positions n_cached … n_cached + T_new - 1, for a cache that already
    holds n_cached positions. Decodes a small RoPE GPT with ``fn`` (cached) and
    without a cache, and reports the first step where the logits part."""
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state alone
        torch.manual_seed(0)
        config = gpt.GPTConfig(20, 32, 32, 2, 4, positions="rope")
        model = gpt.GPT(config).eval()
        for w in model.parameters():  # larger weights than GPT-2's: logits of size 1
            if w.dim() > 1:
                nn.init.normal_(w, std=0.3)
        ids = torch.randint(0, 20, (2, 14))
    n_prompt = 4
    with torch.no_grad():
        plain = model(ids)[:, n_prompt - 1 :]  # (B, steps, V): one uncached pass
    rope = model.blocks.layers[0].attn.rope
    for block in model.blocks.layers:
        block.attn.rope = _Rotate(fn, rope)
    cached = _decode_logits(model, ids, n_prompt)  # (B, steps, V)
    error = (cached - plain).abs().amax(dim=(0, 2))  # (steps,)
    wrong = (error > 1e-3).nonzero().flatten().tolist()
    if wrong:
        first = wrong[0]
        where = (
            "the first step, which reads the prompt with nothing cached: the rotation "
            "itself is wrong, not only its position"
            if first == 0
            else f"step {first} (with {n_prompt + first - 1} positions cached); the "
            "first step, which reads the prompt with nothing cached, agrees, because "
            "its positions start at 0 either way"
        )
        raise ExerciseError(
            f"Cached decoding parts from decoding without a cache at {where}: the "
            f"logits differ by up to {error.max().item():.2f} over the steps. RoPE scores "
            "depend on the difference of two positions, so the new query and key must "
            "sit at their real positions, after the n_cached ones in the cache: "
            "rope(q, k, offset=n_cached)."
        )
    return passed(
        "the new tokens sit after the cached ones, and every step of cached decoding "
        "gives the logits of decoding without a cache (a RoPE model, 11 steps)."
    )


def check_cat_copies(fn: Callable[[int, int], int]) -> None:
    """``fn(n_tokens, bytes_per_token)``: the bytes ``torch.cat`` writes when a cache
    grows from empty by one token per step to ``n_tokens`` tokens (each step writes a
    new tensor holding all the tokens so far)."""
    cases = [(1, 8), (2, 8), (10, 4), (1000, 2 * 6 * 64 * 4), (4096, 512 * 1024)]
    for n, b in cases:
        expected = b * n * (n + 1) // 2
        got = call(fn, n, b)
        if isinstance(got, Tensor):
            got = got.item()
        if got == expected:
            continue
        args = f"n_tokens={n:,}, bytes_per_token={b:,}"
        if got == n * b:
            raise ExerciseError(
                f"For {args} you return {got:,}: that is what a static buffer writes, "
                "one token per step. torch.cat writes a new tensor with ALL the tokens "
                "so far at every step: 1 + 2 + ... + n tokens."
            )
        if got == b * n * (n - 1) // 2:
            raise ExerciseError(
                f"For {args} you return {got:,}: that counts the old tokens copied at "
                "each step but not the new one; step t writes t tokens."
            )
        if got == b * n * n // 2 or got == b * n * n:
            raise ExerciseError(
                f"For {args} you return {got:,}: close, but count exactly: step t "
                "writes t tokens, and 1 + 2 + ... + n = n(n + 1)/2."
            )
        raise ExerciseError(f"For {args} you return {got!r}, expected {expected:,}.")
    n = 4096
    return passed(
        f"growing to {n:,} tokens by concatenation writes (n + 1)/2 = {(n + 1) / 2:,.1f} "
        "times what a static buffer writes: quadratic instead of linear in the length."
    )
