"""Checks for the exercises of chapter 09 (shared heads and the KV cache)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import attention, gpt, kv_cache
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_max_cached_tokens", "check_repeat_kv", "check_cached_greedy"]


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


def check_cached_greedy(fn: Callable[[gpt.GPT, Tensor, int], Tensor]) -> None:
    """``fn(model, prompt, n_new)``: greedy decoding with a KV cache, reading the prompt
    once and then one token per step; returns (B, T0 + n_new) ids."""
    config = gpt.GPTConfig(vocab_size=17, max_len=32, d_model=16, n_layers=2, n_heads=4)
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state alone
        torch.manual_seed(0)
        model = gpt.GPT(config).eval()
        with torch.no_grad():  # larger weights than GPT-2's init: no near-ties
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
    prompt = torch.randint(0, 17, (2, 5), generator=torch.Generator().manual_seed(1))
    n_new = 12
    expected = model.generate(prompt, n_new, temperature=0, use_cache=False)
    read: list[int] = []
    hook = model.tok_emb.register_forward_hook(
        lambda module, args, out: read.append(args[0].shape[1])
    )
    try:
        got = call(fn, model, prompt.clone(), n_new)
    finally:
        hook.remove()
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
        raise ExerciseError(
            f"Return the prompt followed by the new tokens, shape "
            f"{tuple(expected.shape)}; got {shape}."
        )
    if not torch.equal(got, expected):
        if torch.equal(got[:, : prompt.shape[1]], prompt):
            raise ExerciseError(
                "Your tokens differ from greedy decoding without a cache. Feed the "
                "whole prompt once with the cache, then only the newest token, "
                "ids[:, -1:], each step, and take the argmax of the last position."
            )
        raise ExerciseError("The output must start with the prompt itself.")
    total = sum(read)
    needed = prompt.shape[1] + n_new - 1
    if total > needed:
        raise ExerciseError(
            f"Right tokens, but your loop fed the model {total} tokens in all; with a "
            f"cache it needs {needed} (the prompt once, then one per step; the last "
            "new token is never read). Are you passing the whole text each step?"
        )
    return passed(
        f"the model read {total} tokens for {n_new} new ones, and the tokens equal "
        "decoding without a cache."
    )
