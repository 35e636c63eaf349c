"""transformer_book.attention: parity with torch, edge cases, gradients, errors."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_book import attention, masks
from transformer_book.attention import MultiHeadAttention, scaled_dot_product_attention


def rand(*shape, seed=0, dtype=torch.float32):
    return torch.randn(
        *shape, generator=torch.Generator().manual_seed(seed), dtype=dtype
    )


def copy_into_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        theirs.in_proj_bias.copy_(
            torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
        )
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)
    return theirs


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("with_mask", [False, True])
def test_matches_torch_sdpa(need_weights, with_mask):
    q, k, v = (
        rand(2, 3, 5, 8, seed=1),
        rand(2, 3, 7, 8, seed=2),
        rand(2, 3, 7, 4, seed=3),
    )
    mask = (
        (rand(2, 1, 5, 7, seed=4) > 0) | torch.eye(5, 7, dtype=torch.bool)
        if with_mask
        else None
    )
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=need_weights)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    assert (w is not None) == need_weights


def test_weights_are_softmax_of_scaled_scores_and_respect_mask():
    q, k, v = rand(4, 6, seed=5), rand(9, 6, seed=6), rand(9, 3, seed=7)
    mask = rand(4, 9, seed=8) > 0
    mask[:, 0] = True
    _, w = scaled_dot_product_attention(q, k, v, mask=mask)
    expected = (q @ k.T / math.sqrt(6)).masked_fill(~mask, float("-inf")).softmax(-1)
    torch.testing.assert_close(w, expected)
    assert torch.all(w[~mask] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(4))


def test_explicit_and_fused_paths_agree_with_bias_and_mask():
    q, k, v = (
        rand(2, 4, 6, 8, seed=9),
        rand(2, 4, 6, 8, seed=10),
        rand(2, 4, 6, 8, seed=11),
    )
    bias = rand(1, 4, 6, 6, seed=12)
    mask = masks.causal_mask(6) & masks.padding_mask(torch.tensor([6, 3]), 6)
    explicit, _ = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, scale=0.3)
    fused, _ = scaled_dot_product_attention(
        q, k, v, mask=mask, bias=bias, scale=0.3, need_weights=False
    )
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=0)


def test_bias_is_added_to_scores():
    q, k, v = rand(3, 4, seed=13), rand(5, 4, seed=14), rand(5, 2, seed=15)
    bias = rand(3, 5, seed=16)
    _, w = scaled_dot_product_attention(q, k, v, bias=bias, scale=1.0)
    torch.testing.assert_close(w, (q @ k.T + bias).softmax(-1))


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_give_zeros_and_finite_gradients(need_weights):
    q, k, v = (rand(2, 2, 4, 8, seed=s).requires_grad_() for s in (17, 18, 19))
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of item 0 may see nothing
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=need_weights)
    assert torch.isfinite(out).all()
    assert torch.all(out[0, :, 2] == 0)
    if need_weights:
        assert torch.all(w[0, :, 2] == 0)
    out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.all(q.grad[0, :, 2] == 0)


def test_batch_item_of_all_padding():
    x = rand(3, 5, 16, seed=20)
    mha = MultiHeadAttention(16, 4).eval()
    keep = masks.padding_mask(torch.tensor([5, 0, 2]), 5)
    out, w = mha(x, mask=keep, need_weights=True)
    assert torch.isfinite(out).all()
    assert torch.all(w[1] == 0)
    # the all-padding item's attention output is zero, so the layer returns just the output bias
    torch.testing.assert_close(out[1], mha.o_proj.bias.expand(5, 16))
    # and the other items are unaffected by it
    torch.testing.assert_close(
        out[0], mha(x[:1], mask=keep[:1])[0][0], atol=1e-6, rtol=0
    )


def test_different_query_and_key_lengths_cross_attention():
    mha = MultiHeadAttention(12, 3).eval()
    theirs = copy_into_torch_mha(mha)
    x, ctx = rand(2, 4, 12, seed=21), rand(2, 9, 12, seed=22)
    out, w = mha(x, context=ctx, need_weights=True)
    assert out.shape == (2, 4, 12) and w.shape == (2, 3, 4, 9)
    expected, _ = theirs(x, ctx, ctx)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("lengths", [[7, 7], [7, 3], [1, 5]])
def test_mha_matches_torch_multihead_attention(lengths):
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4).eval()
    theirs = copy_into_torch_mha(ours)
    x = rand(2, 7, 32, seed=23)
    keep = masks.padding_mask(torch.tensor(lengths), 7)  # True = may attend
    out, w = ours(x, mask=keep, need_weights=True)
    ref, ref_w = theirs(
        x, x, x, key_padding_mask=~keep[:, 0, 0], average_attn_weights=False
    )  # True = ignore
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=0)
    fused, none = ours(x, mask=keep)
    assert none is None
    torch.testing.assert_close(fused, ref, atol=1e-5, rtol=0)


def test_mha_causal_matches_torch_attn_mask():
    ours = MultiHeadAttention(16, 2).eval()
    theirs = copy_into_torch_mha(ours)
    x = rand(3, 6, 16, seed=24)
    causal = masks.causal_mask(6)
    ref, _ = theirs(x, x, x, attn_mask=~causal)  # torch: True = not allowed
    torch.testing.assert_close(ours(x, mask=causal)[0], ref, atol=1e-5, rtol=0)


def test_batch_invariance():
    mha = MultiHeadAttention(16, 4).eval()
    x = rand(5, 6, 16, seed=25)
    full, _ = mha(x, need_weights=True)
    for i in range(5):
        single, _ = mha(x[i : i + 1], need_weights=True)
        torch.testing.assert_close(single[0], full[i], atol=1e-6, rtol=0)


def test_gradcheck_explicit_path_float64():
    q, k, v = (
        rand(1, 2, 4, 3, seed=s, dtype=torch.float64).requires_grad_()
        for s in (26, 27, 28)
    )
    mask = torch.tensor(
        [[1, 0, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool
    )
    bias = rand(2, 4, 4, seed=29, dtype=torch.float64).requires_grad_()
    fn = lambda q, k, v, b: scaled_dot_product_attention(q, k, v, mask=mask, bias=b)[0]
    assert torch.autograd.gradcheck(fn, (q, k, v, bias))


def test_split_and_merge_heads_round_trip():
    x = rand(2, 5, 12, seed=30)
    h = attention.split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    torch.testing.assert_close(
        h[:, 1, 2], x[:, 2, 4:8]
    )  # head 1 of token 2 = features 4..7
    torch.testing.assert_close(attention.merge_heads(h), x)


@pytest.mark.parametrize(
    "shape, n_heads, needle",
    [
        ((2, 5, 12), 5, "divisor of the feature size 12, got 5"),
        ((5, 12), 3, "(B, T, D)"),
    ],
)
def test_split_heads_names_a_bad_head_count_or_shape(shape, n_heads, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        attention.split_heads(torch.zeros(shape), n_heads)


def test_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = rand(2, 4, 8, seed=31)
    mha.eval()
    torch.testing.assert_close(mha(x)[0], mha(x)[0])
    mha.train()
    torch.manual_seed(0)
    a = mha(x)[0]
    torch.manual_seed(1)
    assert not torch.allclose(a, mha(x)[0])


# --- bad input ------------------------------------------------------------------------------


def test_d_model_not_divisible_by_heads():
    with pytest.raises(
        ValueError, match=r"d_model \(10\) must be divisible by n_heads \(3\)"
    ):
        MultiHeadAttention(10, 3)


def test_mismatched_qk_width():
    with pytest.raises(
        ValueError,
        match=r"q and k must share their last dimension.*\(2, 5, 8\).*\(2, 5, 6\)",
    ):
        scaled_dot_product_attention(rand(2, 5, 8), rand(2, 5, 6), rand(2, 5, 6))


def test_mismatched_kv_length():
    with pytest.raises(
        ValueError,
        match=r"k and v must have the same number of positions.*\(2, 7, 8\).*\(2, 5, 8\)",
    ):
        scaled_dot_product_attention(rand(2, 5, 8), rand(2, 7, 8), rand(2, 5, 8))


def test_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match="do not broadcast"):
        scaled_dot_product_attention(rand(2, 5, 8), rand(3, 5, 8), rand(3, 5, 8))


def test_mask_that_cannot_broadcast():
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(5, 6\) cannot broadcast to the attention scores' shape \(2, 5, 5\)",
    ):
        scaled_dot_product_attention(
            rand(2, 5, 8),
            rand(2, 5, 8),
            rand(2, 5, 8),
            mask=torch.ones(5, 6, dtype=torch.bool),
        )


def test_mask_must_be_boolean():
    with pytest.raises(ValueError, match="mask must be boolean"):
        scaled_dot_product_attention(
            rand(5, 8), rand(5, 8), rand(5, 8), mask=torch.ones(5, 5)
        )


def test_mha_input_width_checked():
    with pytest.raises(
        ValueError, match=r"x must have shape \(B, T, d_model=16\), got \(2, 5, 12\)"
    ):
        MultiHeadAttention(16, 4)(rand(2, 5, 12))


# --- grouped-query and multi-query attention (chapter 09) ----------------------------


def test_repeat_kv_repeats_each_head_for_its_group_in_order():
    x = rand(2, 3, 5, 4, seed=20)
    out = attention.repeat_kv(x, 4)
    assert out.shape == (2, 12, 5, 4)
    torch.testing.assert_close(out, x.repeat_interleave(4, dim=1), atol=0, rtol=0)
    for h in range(12):  # query head h reads key/value head h // n_rep
        assert torch.equal(out[:, h], x[:, h // 4])
    assert attention.repeat_kv(x, 1) is x


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4, 8])
def test_gqa_equals_torch_sdpa_with_enable_gqa(n_kv_heads):
    torch.manual_seed(0)
    gqa = MultiHeadAttention(64, 8, n_kv_heads=n_kv_heads).eval()
    assert gqa.k_proj.weight.shape == (n_kv_heads * 8, 64)
    assert gqa.v_proj.weight.shape == (n_kv_heads * 8, 64)
    x = rand(2, 7, 64, seed=21)
    q = attention.split_heads(gqa.q_proj(x), 8)  # (B, 8, T, 8)
    k = attention.split_heads(gqa.k_proj(x), n_kv_heads)  # (B, Hkv, T, 8)
    v = attention.split_heads(gqa.v_proj(x), n_kv_heads)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = gqa.o_proj(attention.merge_heads(ref))
    for need_weights in (True, False):
        out, _ = gqa(x, mask=masks.causal_mask(7), need_weights=need_weights)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_gqa_equals_hugging_face_llama_attention():
    import transformers.models.llama.modeling_llama as llama  # a test dependency
    from transformers import LlamaConfig

    from transformer_book import positions

    config = LlamaConfig(
        hidden_size=64,
        num_attention_heads=8,
        num_key_value_heads=2,
        num_hidden_layers=1,
        intermediate_size=32,
        vocab_size=10,
        max_position_embeddings=64,
        attention_bias=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    theirs = llama.LlamaAttention(config, layer_idx=0).eval()
    ours = MultiHeadAttention(
        64, 8, bias=False, rope=positions.RotaryEmbedding(8), n_kv_heads=2
    ).eval()
    ours.load_state_dict(theirs.state_dict())
    x, T = rand(2, 11, 64, seed=23), 11
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, torch.arange(T)[None])
    causal = torch.zeros(T, T).masked_fill(~masks.causal_mask(T), float("-inf"))
    ref, _ = theirs(
        x, position_embeddings=(cos, sin), attention_mask=causal[None, None]
    )
    out, _ = ours(x, mask=masks.causal_mask(T))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)


def test_gqa_parameter_count():
    mha, mqa = MultiHeadAttention(64, 8), MultiHeadAttention(64, 8, n_kv_heads=1)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(mha) == 4 * (64 * 64 + 64)
    assert count(mqa) == 2 * (64 * 64 + 64) + 2 * (64 * 8 + 8)


def test_n_kv_heads_must_divide_n_heads():
    with pytest.raises(ValueError, match=r"n_kv_heads \(3\) must divide n_heads \(8\)"):
        MultiHeadAttention(64, 8, n_kv_heads=3)
    with pytest.raises(ValueError, match=r"n_kv_heads \(0\) must divide"):
        MultiHeadAttention(64, 8, n_kv_heads=0)
    with pytest.raises(ValueError, match=r"n_rep must be a positive integer, got 0"):
        attention.repeat_kv(rand(1, 2, 3, 4), 0)
    with pytest.raises(ValueError, match=r"x must have shape \(B, Hkv, T, Dh\)"):
        attention.repeat_kv(rand(2, 3, 4), 2)


def test_cache_is_for_self_attention_only():
    from transformer_book import kv_cache

    mha = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="cache is for self-attention"):
        mha(rand(1, 2, 16), context=rand(1, 3, 16), cache=kv_cache.KVCache())


# --- is_causal: the causal mask without a mask tensor (chapter 14) ---------------------


@pytest.mark.parametrize("need_weights", [True, False])
def test_is_causal_equals_the_explicit_causal_mask(need_weights):
    q, k, v = (
        rand(2, 3, 7, 8, seed=1),
        rand(2, 3, 7, 8, seed=2),
        rand(2, 3, 7, 8, seed=3),
    )
    ref, ref_w = scaled_dot_product_attention(q, k, v, mask=masks.causal_mask(7))
    out, w = scaled_dot_product_attention(
        q, k, v, is_causal=True, need_weights=need_weights
    )
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    if need_weights:
        torch.testing.assert_close(w, ref_w)
    bias = rand(3, 7, 7, seed=4)  # with a bias, the fused path gets the mask too
    ref_b = scaled_dot_product_attention(q, k, v, masks.causal_mask(7), bias)[0]
    out_b = scaled_dot_product_attention(
        q, k, v, bias=bias, is_causal=True, need_weights=need_weights
    )[0]
    torch.testing.assert_close(out_b, ref_b, atol=1e-6, rtol=0)


def test_mha_is_causal_equals_mask_and_refuses_a_filled_cache():
    from transformer_book import kv_cache

    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    x = rand(2, 9, 16)
    torch.testing.assert_close(
        mha(x, is_causal=True)[0], mha(x, mask=masks.causal_mask(9))[0],
        atol=1e-6, rtol=0,
    )  # fmt: skip
    cache = kv_cache.KVCache()
    mha(x[:, :4], cache=cache, is_causal=True)  # an empty cache: fine
    with pytest.raises(ValueError, match="after 4 cached tokens pass mask="):
        mha(x[:, 4:], cache=cache, is_causal=True)
    with pytest.raises(ValueError, match="either mask or is_causal=True, not both"):
        scaled_dot_product_attention(x, x, x, mask=masks.causal_mask(9), is_causal=True)
    with pytest.raises(ValueError, match="as many queries as keys"):
        scaled_dot_product_attention(x[:, :3], x, x, is_causal=True)


def test_self_attention_in_one_product_equals_three_projections():
    torch.manual_seed(0)
    for bias, n_kv in ((True, None), (False, 2)):
        mha = MultiHeadAttention(16, 4, bias=bias, n_kv_heads=n_kv).eval()
        x = rand(2, 5, 16)
        q, k, v = mha._project_qkv(x)
        for mine, proj in ((q, mha.q_proj), (k, mha.k_proj), (v, mha.v_proj)):
            torch.testing.assert_close(mine, proj(x), atol=1e-6, rtol=0)
        # cross-attention with the same tensor as context takes the three projections
        torch.testing.assert_close(
            mha(x)[0], mha(x, context=x.clone())[0], atol=1e-6, rtol=0
        )
