"""transformer_book.grouped_heads: MHA -> GQA by mean pooling each group's heads, GQA ->
MHA by tiling, and the round trip."""

import pytest
import torch

from transformer_book import grouped_heads, masks
from transformer_book.attention import MultiHeadAttention


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_equals_mha_with_tiled_key_value_weights(n_kv_heads):
    torch.manual_seed(1)
    gqa = MultiHeadAttention(32, 4, n_kv_heads=n_kv_heads).eval()
    mha = grouped_heads.mha_from_gqa(gqa)
    assert mha.n_kv_heads == 4 and mha.k_proj.weight.shape == (32, 32)
    # written out: head h of the MHA holds the rows of kv head h // n_rep
    rows = gqa.k_proj.weight.reshape(n_kv_heads, 8, 32)  # (Hkv, Dh, D)
    tiled = torch.cat([rows[h // gqa.n_rep] for h in range(4)])  # (H·Dh, D)
    torch.testing.assert_close(mha.k_proj.weight, tiled, atol=0, rtol=0)
    x, mask = rand(3, 6, 32, seed=22), masks.causal_mask(6)
    torch.testing.assert_close(
        mha(x, mask=mask)[0], gqa(x, mask=mask)[0], atol=1e-5, rtol=0
    )
    # and mean-pooling the tiled heads gives the GQA back exactly
    back = grouped_heads.gqa_from_mha(mha, n_kv_heads)
    for name, p in gqa.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], p, atol=1e-7, rtol=0)


@pytest.mark.parametrize(("n_heads", "n_kv"), [(8, 4), (8, 2), (8, 1), (6, 3)])
def test_gqa_from_mha_averages_each_groups_heads(n_heads, n_kv):
    torch.manual_seed(2)
    d = n_heads * 4
    mha = MultiHeadAttention(d, n_heads)
    gqa = grouped_heads.gqa_from_mha(mha, n_kv)
    assert gqa.n_kv_heads == n_kv and gqa.k_proj.weight.shape == (n_kv * 4, d)
    g = n_heads // n_kv
    for proj in ("k_proj", "v_proj"):
        old, new = getattr(mha, proj), getattr(gqa, proj)
        for j in range(n_kv):  # new head j = mean of old heads j·g … j·g + g - 1
            heads = [old.weight[h * 4 : (h + 1) * 4] for h in range(j * g, (j + 1) * g)]
            biases = [old.bias[h * 4 : (h + 1) * 4] for h in range(j * g, (j + 1) * g)]
            torch.testing.assert_close(
                new.weight[j * 4 : (j + 1) * 4], torch.stack(heads).mean(0)
            )
            torch.testing.assert_close(
                new.bias[j * 4 : (j + 1) * 4], torch.stack(biases).mean(0)
            )
    for proj in ("q_proj", "o_proj"):
        assert torch.equal(getattr(gqa, proj).weight, getattr(mha, proj).weight)
    # the original is untouched, and n_kv = n_heads changes nothing
    same = grouped_heads.gqa_from_mha(mha, n_heads)
    x = rand(2, 5, d, seed=24)
    torch.testing.assert_close(same(x)[0], mha(x)[0], atol=1e-6, rtol=0)


def test_gqa_from_gqa_pools_further():
    torch.manual_seed(3)
    mha = MultiHeadAttention(32, 8)
    two_steps = grouped_heads.gqa_from_mha(grouped_heads.gqa_from_mha(mha, 4), 2)
    one_step = grouped_heads.gqa_from_mha(mha, 2)
    torch.testing.assert_close(two_steps.k_proj.weight, one_step.k_proj.weight)


def test_n_kv_heads_must_divide_the_heads_being_converted():
    with pytest.raises(ValueError, match=r"n_kv_heads \(3\) must divide the 4"):
        grouped_heads.gqa_from_mha(MultiHeadAttention(64, 8, n_kv_heads=4), 3)


def test_permute_heads_keeps_the_output_and_reorders_the_maps():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3).eval()
    x = rand(2, 5, 12)
    out, w = mha(x, need_weights=True)
    assert grouped_heads.permute_heads(mha, [2, 0, 1]) is mha  # in place
    out_p, w_p = mha(x, need_weights=True)
    torch.testing.assert_close(out_p, out)
    torch.testing.assert_close(w_p, w[:, [2, 0, 1]])
    with pytest.raises(ValueError, match="order"):
        grouped_heads.permute_heads(mha, [0, 0, 1])
    with pytest.raises(ValueError, match="mha"):
        grouped_heads.permute_heads(
            MultiHeadAttention(12, 4, n_kv_heads=2), [0, 1, 2, 3]
        )
