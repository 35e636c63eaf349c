"""The decoder (decoder.DecoderBlock, decoder.Decoder) against
torch.nn.TransformerDecoderLayer / TransformerDecoder with copied weights, and the causal
invariant: a target token never sees the tokens after it."""

import pytest
import torch
from torch import nn

from transformer_book import blocks, decoder, kv_cache, masks, positions

D, H, D_FF = 16, 4, 40
B, T, S = 3, 6, 7  # batch, target length, source (memory) length


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _torch_layer(norm_first: bool, **kwargs) -> nn.TransformerDecoderLayer:
    ref = nn.TransformerDecoderLayer(
        D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first, **kwargs
    )
    with torch.no_grad():  # non-trivial γ, β so that a swapped or missing norm shows
        for norm in (ref.norm1, ref.norm2, ref.norm3):
            norm.weight.normal_(1.0, 0.3)
            if norm.bias is not None:
                norm.bias.normal_(0.0, 0.3)
    return ref


def _pair(norm_first: bool, **kwargs):
    ref = _torch_layer(norm_first, **kwargs)
    act = {"gelu": nn.functional.gelu}.get(kwargs.get("activation"), nn.functional.relu)
    ours = decoder.DecoderBlock(D, H, D_FF, norm_first=norm_first, activation=act)
    return decoder.load_torch_decoder_layer(ours, ref), ref


def _inputs():
    x, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    src_lengths = torch.tensor([7, 4, 1])  # sources padded up to S = 7
    self_mask = masks.causal_mask(T)  # (T, T), True = may attend
    memory_mask = masks.padding_mask(src_lengths, S)  # (B, 1, 1, S)
    return x, memory, self_mask, memory_mask


def _torch_masks(self_mask, memory_mask):
    """torch's masks say True = *ignore*: the opposite of ours."""
    return dict(tgt_mask=~self_mask, memory_key_padding_mask=~memory_mask[:, 0, 0])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_block_equals_torch_layer_with_causal_and_padding_masks(norm_first, training):
    ours, ref = _pair(norm_first)
    ours.train(training), ref.train(training)
    x, memory, self_mask, memory_mask = _inputs()
    got = ours(x, memory, self_mask=self_mask, memory_mask=memory_mask)
    expected = ref(x, memory, **_torch_masks(self_mask, memory_mask))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_without_masks_equals_torch_layer(norm_first):
    ours, ref = _pair(norm_first)
    x, memory, _, _ = _inputs()
    torch.testing.assert_close(ours(x, memory), ref(x, memory), atol=1e-5, rtol=1e-5)


def test_gelu_block_equals_torch_layer():
    ours, ref = _pair(False, activation="gelu")
    x, memory, self_mask, memory_mask = _inputs()
    torch.testing.assert_close(
        ours(x, memory, self_mask, memory_mask),
        ref(x, memory, **_torch_masks(self_mask, memory_mask)),
        atol=1e-5,
        rtol=1e-5,
    )


def test_masks_matter():
    ours, _ = _pair(False)
    x, memory, self_mask, memory_mask = _inputs()
    both = ours(x, memory, self_mask, memory_mask)
    # without the causal mask the first position sees the future and changes
    assert not torch.allclose(ours(x, memory, None, memory_mask)[:, 0], both[:, 0])
    # without the padding mask the short sources' outputs change
    assert not torch.allclose(ours(x, memory, self_mask, None)[2], both[2])


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradients_equal_torch_layer(norm_first):
    ours, ref = _pair(norm_first)
    x, memory, self_mask, memory_mask = _inputs()
    x1, m1 = x.clone().requires_grad_(), memory.clone().requires_grad_()
    x2, m2 = x.clone().requires_grad_(), memory.clone().requires_grad_()
    upstream = torch.randn(B, T, D)
    (ours(x1, m1, self_mask, memory_mask) * upstream).sum().backward()
    (ref(x2, m2, **_torch_masks(self_mask, memory_mask)) * upstream).sum().backward()
    close = dict(atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(x1.grad, x2.grad, **close)
    torch.testing.assert_close(m1.grad, m2.grad, **close)  # through cross-attention
    torch.testing.assert_close(
        ours.cross_attn.k_proj.weight.grad,
        ref.multihead_attn.in_proj_weight.grad[D : 2 * D],
        **close,
    )
    torch.testing.assert_close(
        ours.self_attn.q_proj.weight.grad,
        ref.self_attn.in_proj_weight.grad[:D],
        **close,
    )
    torch.testing.assert_close(ours.norm3.weight.grad, ref.norm3.weight.grad, **close)
    torch.testing.assert_close(
        ours.ff.up_proj.weight.grad, ref.linear1.weight.grad, **close
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_equals_torch_transformer_decoder(norm_first):
    n_layers = 3
    final = nn.LayerNorm(D) if norm_first else None
    ref = nn.TransformerDecoder(
        _torch_layer(norm_first), num_layers=n_layers, norm=final
    )
    for i in range(
        1, n_layers
    ):  # the constructor deep-copies one layer; make them differ
        ref.layers[i] = _torch_layer(norm_first)
    dec = decoder.Decoder(n_layers, D, H, D_FF, norm_first=norm_first)
    for block, layer in zip(dec.layers, ref.layers):
        decoder.load_torch_decoder_layer(block, layer)
    if norm_first:
        with torch.no_grad():
            final.weight.normal_(1.0, 0.3)
            final.bias.normal_(0.0, 0.3)
            dec.final_norm.weight.copy_(final.weight)
            dec.final_norm.bias.copy_(final.bias)
    x, memory, self_mask, memory_mask = _inputs()
    got = dec(x, memory, self_mask, memory_mask)
    expected = ref(x, memory, **_torch_masks(self_mask, memory_mask))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert dec.layers[0].ff.up_proj.weight is not dec.layers[1].ff.up_proj.weight


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("t", [0, 2, T - 2])
def test_future_targets_never_change_earlier_outputs(norm_first, t):
    dec = decoder.Decoder(2, D, H, D_FF, norm_first=norm_first).eval()
    x, memory, self_mask, memory_mask = _inputs()
    y = dec(x, memory, self_mask, memory_mask)
    x2 = x.clone()
    x2[:, t + 1 :] = 10 * torch.randn(B, T - t - 1, D)  # change every position > t
    y2 = dec(x2, memory, self_mask, memory_mask)
    torch.testing.assert_close(y2[:, : t + 1], y[:, : t + 1], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(y2[:, t + 1 :], y[:, t + 1 :], atol=1e-3)


def test_target_padding_changes_nothing_under_the_causal_mask():
    # right padding sits in every real query's future, so the causal mask hides it
    block = decoder.DecoderBlock(D, H, D_FF)
    x, memory, self_mask, memory_mask = _inputs()
    tgt_keep = masks.padding_mask(torch.tensor([6, 3, 5]), T)  # (B, 1, 1, T)
    y_causal = block(x, memory, self_mask, memory_mask)
    y_both = block(x, memory, self_mask & tgt_keep, memory_mask)
    for b, n in enumerate([6, 3, 5]):
        torch.testing.assert_close(y_both[b, :n], y_causal[b, :n])


def test_source_padding_does_not_leak():
    block = decoder.DecoderBlock(D, H, D_FF, norm_first=True)
    x, memory, self_mask, memory_mask = _inputs()
    memory2 = memory.clone()
    memory2[1, 4:] = 100 * torch.randn(S - 4, D)  # change only source 1's padding
    torch.testing.assert_close(
        block(x, memory2, self_mask, memory_mask)[1],
        block(x, memory, self_mask, memory_mask)[1],
    )


def test_rms_norm_decoder_block():
    block = decoder.DecoderBlock(D, H, D_FF, norm="rms", norm_first=True)
    assert type(block.norm3).__name__ == "RMSNorm"
    x, memory, self_mask, memory_mask = _inputs()
    assert block(x, memory, self_mask, memory_mask).shape == (B, T, D)
    with pytest.raises(ValueError, match="built differently"):
        decoder.load_torch_decoder_layer(block, _torch_layer(True))


def test_self_bias_reaches_self_attention():
    # a bias of -inf on the future is the same as the causal mask
    block = decoder.DecoderBlock(D, H, D_FF)
    x, memory, self_mask, memory_mask = _inputs()
    bias = torch.zeros(T, T).masked_fill(~self_mask, float("-inf"))
    torch.testing.assert_close(
        block(x, memory, memory_mask=memory_mask, self_bias=bias),
        block(x, memory, self_mask, memory_mask),
    )


def test_cross_attention_weights():
    dec = decoder.Decoder(2, D, H, D_FF, norm_first=True)
    x, memory, self_mask, memory_mask = _inputs()
    weights = dec.cross_attention_weights(x, memory, self_mask, memory_mask)
    assert len(weights) == 2 and weights[0].shape == (B, H, T, S)
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(B, H, T))
    assert (weights[1][2, :, :, 1:] == 0).all()  # source 2 has one real token
    # the weights are those forward uses: recompute the second block's by hand
    block = dec.layers[1]
    h = dec.layers[0](x, memory, self_mask, memory_mask)
    h = h + block.self_attn(block.norm1(h), mask=self_mask)[0]
    expected = block.cross_attn(
        block.norm2(h), context=memory, mask=memory_mask, need_weights=True
    )[1]
    torch.testing.assert_close(weights[1], expected)


def test_bad_shapes_raise():
    block = decoder.DecoderBlock(D, H, D_FF)
    x, memory, _, _ = _inputs()
    with pytest.raises(ValueError, match=r"memory of shape \(B, T, d_model=16\)"):
        block(x, memory[..., :8])
    with pytest.raises(
        ValueError, match=r"x of shape \(B, T, d_model=16\), got \(6, 16\)"
    ):
        block(x[0], memory)
    with pytest.raises(ValueError, match="share the batch size"):
        block(x, memory[:2])
    with pytest.raises(ValueError, match="cannot broadcast"):
        block(x, memory, self_mask=masks.causal_mask(T + 1))
    with pytest.raises(ValueError, match="n_layers must be at least 1"):
        decoder.Decoder(0, D, H, D_FF)


def test_mismatched_layers_raise():
    with pytest.raises(ValueError, match="built differently"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF, norm_first=True), _torch_layer(False)
        )
    with pytest.raises(ValueError, match="built differently"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, 2 * D_FF), _torch_layer(False)
        )
    with pytest.raises(ValueError, match="activations differ"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF), _torch_layer(False, activation="gelu")
        )
    with pytest.raises(ValueError, match="bias=False"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF), _torch_layer(False, bias=False)
        )
    with pytest.raises(ValueError, match="TransformerDecoderLayer"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF), nn.TransformerEncoderLayer(D, H, D_FF)
        )
    with pytest.raises(ValueError, match="block must be a DecoderBlock"):
        decoder.load_torch_decoder_layer(
            blocks.EncoderBlock(D, H, D_FF), _torch_layer(False)
        )


# --- the options the encoder block has, and the decoder's cache ----------------------

OPTIONS = [
    dict(),
    dict(norm_first=True, n_kv_heads=2),
    dict(norm_first=True, norm="rms", bias=False, scale=1.0),  # T5's block
    dict(norm_first=True, rope=positions.RotaryEmbedding(D // H), n_kv_heads=1),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_cached_decoder_equals_the_full_pass(options):
    dec = decoder.Decoder(2, D, H, D_FF, **options).eval()
    x, memory, _, memory_mask = _inputs()  # padded sources
    full = dec(x, memory, masks.causal_mask(T), memory_mask)
    cache, outs, start = kv_cache.new_decoder_cache(2), [], 0
    for n in (2, 1, 1, 2):  # a prompt of two, then tokens one by one
        mask = masks.causal_mask(n, start + n)  # (n, cached + n)
        outs.append(
            dec(x[:, start : start + n], memory, mask, memory_mask, cache=cache)
        )
        start += n
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=0)
    kv_heads = options.get("n_kv_heads") or H
    assert cache[1].self_attn.keys.shape == (B, kv_heads, T, D // H)
    assert cache[1].cross_attn.keys.shape == (B, kv_heads, S, D // H)


def test_bias_false_drops_every_bias_and_scale_reaches_both_attentions():
    block = decoder.DecoderBlock(D, H, D_FF, bias=False, scale=1.0)
    assert not [n for n, _ in block.named_parameters() if n.endswith("bias")]
    assert block.self_attn.scale == block.cross_attn.scale == 1.0
    assert block.self_attn.rope is None and block.cross_attn.rope is None


def test_decoder_takes_one_cache_per_layer():
    dec = decoder.Decoder(2, D, H, D_FF).eval()
    x, memory, _, _ = _inputs()
    with pytest.raises(ValueError, match=r"one DecoderCache per layer \(2\), got 1"):
        dec(x, memory, masks.causal_mask(T), cache=kv_cache.new_decoder_cache(1))


def test_shift_right_and_greedy_decode_reject_bad_input():
    with pytest.raises(ValueError, match=r"tgt must have shape \(B, T\)"):
        decoder.shift_right(torch.tensor([1, 2]), 0)
    with pytest.raises(ValueError, match=r"start must have shape \(B, 1\)"):
        decoder.greedy_decode(
            lambda ys, c: ys, torch.zeros(2, 2), 3, eos_id=1, pad_id=0
        )
    with pytest.raises(ValueError, match="max_new_tokens must be at least 1, got 0"):
        decoder.greedy_decode(
            lambda ys, c: ys, torch.zeros(2, 1), 0, eos_id=1, pad_id=0
        )


def test_loading_rejects_grouped_query_or_rotary_blocks():
    with pytest.raises(ValueError, match="built differently"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF, n_kv_heads=2), _torch_layer(False)
        )
    rope = positions.RotaryEmbedding(D // H)
    with pytest.raises(ValueError, match="built differently"):
        decoder.load_torch_decoder_layer(
            decoder.DecoderBlock(D, H, D_FF, rope=rope), _torch_layer(False)
        )
