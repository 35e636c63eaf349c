"""Checks for the exercises of chapter 09 (shared heads and the KV cache)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import attention, kv_cache
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_max_cached_tokens", "check_repeat_kv", "check_mean_pool_heads"]


def check_max_cached_tokens(fn: Callable[..., int]) -> None:
    """``fn(memory_bytes, n_layers, n_kv_heads, head_dim, batch, bytes_per_value)``: the
    most tokens per sequence whose KV cache fits in ``memory_bytes``."""
    cases = [
        (2**30, 32, 32, 128, 1, 2),  # Llama-2-7B, 1 GiB
        (2**30, 32, 8, 128, 1, 2),  # Mistral-7B, 1 GiB
        (10**9, 6, 6, 64, 3, 4),  # not a power of two, a batch of 3, fp32
        (5 * 10**9, 80, 8, 128, 16, 1),  # 8-bit cache, batch 16
    ]
    for memory, L, Hkv, Dh, B, nbytes in cases:
        per_token = kv_cache.kv_cache_bytes(L, Hkv, Dh, 1, B, nbytes)
        expected = memory // per_token
        got = call(fn, memory, L, Hkv, Dh, B, nbytes)
        args = (
            f"memory_bytes={memory:,}, n_layers={L}, n_kv_heads={Hkv}, "
            f"head_dim={Dh}, batch={B}, bytes_per_value={nbytes}"
        )
        if isinstance(got, Tensor):
            got = got.item()
        if isinstance(got, float):
            raise ExerciseError(
                f"For {args} you return the float {got}: a number of tokens is an "
                "integer, and a fraction of a token does not fit (use //)."
            )
        if got == expected:
            continue
        if got == 2 * expected or got == 2 * expected + 1:
            raise ExerciseError(
                f"For {args} you return {got}, twice the right number: every token "
                "stores a key AND a value per head, so count the factor 2."
            )
        if B > 1 and got == memory // (per_token // B):
            raise ExerciseError(
                f"For {args} you return {got}: the batch holds {B} sequences, each with "
                "its own cache, so the memory per position is B times larger."
            )
        if got == expected + 1:
            raise ExerciseError(
                f"For {args} you return {got}: that many tokens need "
                f"{got * per_token:,} bytes, more than {memory:,}. Round down."
            )
        if got != expected:
            raise ExerciseError(
                f"For {args} you return {got!r}, expected {expected:,}: divide the "
                "memory by the bytes one position costs, 2 · n_layers · n_kv_heads · "
                "head_dim · batch · bytes_per_value, rounding down."
            )
    return passed(
        "8 key/value heads instead of 32 let Mistral-7B cache 4 times as many tokens "
        "in the same memory."
    )


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


def check_mean_pool_heads(fn: Callable[[Tensor, int, int], Tensor]) -> None:
    """``fn(weight, n_heads, n_kv_heads)``: a key (or value) projection weight
    (n_heads·Dh, D) -> (n_kv_heads·Dh, D), new head j the mean of the old heads of
    group j (consecutive heads)."""
    H, G, Dh, D = 6, 2, 4, 5
    weight = torch.randn(H * Dh, D, generator=torch.Generator().manual_seed(0))
    heads = weight.view(H, Dh, D)  # (H, Dh, D)
    expected = heads.view(G, H // G, Dh, D).mean(1).reshape(G * Dh, D)
    got = call(fn, weight.clone(), H, G)
    if isinstance(got, Tensor) and got.shape == expected.shape:
        interleaved = heads.view(H // G, G, Dh, D).mean(0).reshape(G * Dh, D)
        if torch.allclose(got, interleaved, atol=1e-6):
            raise ExerciseError(
                "You averaged heads 0, 2, 4 and heads 1, 3, 5: the groups are "
                "interleaved. Query heads h read key/value head h // (n_heads / "
                "n_kv_heads), so a group is consecutive heads: 0, 1, 2 and 3, 4, 5. "
                "View the rows as (n_kv_heads, heads per group, Dh, D)."
            )
        if torch.allclose(got, expected * (H // G), atol=1e-5):
            raise ExerciseError(
                "You summed the heads of each group: divide by the group size (mean)."
            )
        if torch.allclose(got, heads.view(G, H // G, Dh, D)[:, 0].reshape(-1, D)):
            raise ExerciseError(
                "You kept the first head of each group; the exercise asks for the mean."
            )
    expect_close(
        got,
        expected,
        "pooled weight",
        "Rows h·Dh … (h+1)·Dh - 1 belong to head h; average whole heads, not features.",
    )
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state alone
        torch.manual_seed(0)
        mha = attention.MultiHeadAttention(12, 6)
        pooled = attention.gqa_from_mha(mha, 3).k_proj.weight.detach()
    expect_close(
        call(fn, mha.k_proj.weight.detach().clone(), 6, 3),
        pooled,
        "pooling a MultiHeadAttention's k_proj to 3 heads",
    )
    return passed(
        "each key/value head of the GQA is the average of its group's heads, as in "
        "attention.gqa_from_mha (Ainslie et al., 2023)."
    )
