"""transformer_book.gpt2_weights: GPT-2's architecture, and a Hugging Face GPT-2's
weights in the book's GPT giving the same logits, with and without the KV cache."""

import os

import pytest
import torch

from transformer_book import gpt2_weights, kv_cache
from transformer_book.gpt import GPT, GPTConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def small(**kwargs) -> GPTConfig:
    base = dict(vocab_size=23, max_len=40, d_model=32, n_layers=2, n_heads=4)
    return GPTConfig(**{**base, **kwargs})


def ids_of(*shape, seed=1, vocab=23):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def hf_gpt2(seed: int = 0, **kwargs):
    """A random-weight Hugging Face GPT-2 (no download), dropout off."""
    from transformers import GPT2Config, GPT2LMHeadModel

    act = kwargs.pop("act", "gelu_new")
    sizes = dict(vocab_size=23, n_positions=40, n_embd=32, n_layer=2, n_head=4)
    hf_config = GPT2Config(
        **{**sizes, **kwargs}, activation_function=act,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(seed)
    return GPT2LMHeadModel(hf_config).eval()


def test_gpt2_config_is_gpt2_small():
    c = gpt2_weights.gpt2_config()
    assert (c.vocab_size, c.max_len, c.d_model, c.n_layers, c.n_heads) == (
        50257, 1024, 768, 12, 12,
    )  # fmt: skip
    assert (c.activation, c.positions, c.bias, c.tie_embeddings) == (
        "gelu_tanh", "learned", True, True,
    )  # fmt: skip


def test_load_hf_gpt2_at_gpt2_small_shape_agrees_within_1e_4():
    """The chapter's claim: logits of a 12-layer, 768-wide GPT-2 (random weights, a
    small vocabulary) agree within 1e-4 in fp32."""
    hf = hf_gpt2(vocab_size=101, n_positions=64, n_embd=768, n_layer=12, n_head=12)
    ours = gpt2_weights.load_hf_gpt2(
        GPT(gpt2_weights.gpt2_config(101, 64, 768, 12, 12)).eval(), hf
    )
    ids = ids_of(2, 32, vocab=101)
    with torch.no_grad():
        ref, mine = hf(ids).logits, ours(ids)
    torch.testing.assert_close(mine, ref, atol=1e-4, rtol=0)
    assert mine.abs().max() > 0.1  # the logits are not all near zero


def test_load_hf_gpt2_rejects_models_built_differently():
    hf = hf_gpt2()
    with pytest.raises(ValueError, match="differ in size.*'n_layers': 3"):
        gpt2_weights.load_hf_gpt2(GPT(gpt2_weights.gpt2_config(23, 40, 32, 3, 4)), hf)
    with pytest.raises(ValueError, match="not built as GPT-2.*'activation': 'gelu'"):
        gpt2_weights.load_hf_gpt2(GPT(small()), hf)
    with pytest.raises(ValueError, match="activation_function='relu'"):
        gpt2_weights.load_hf_gpt2(
            GPT(gpt2_weights.gpt2_config(23, 40, 32, 2, 4)), hf_gpt2(act="relu")
        )


def test_equals_hugging_face_gpt2_with_and_without_cache():

    hf = hf_gpt2()
    ours = gpt2_weights.load_hf_gpt2(
        GPT(gpt2_weights.gpt2_config(23, 40, 32, 2, 4)).eval(), hf
    )
    ids = ids_of(2, 17)
    with torch.no_grad():
        ref = hf(ids).logits
    torch.testing.assert_close(ours(ids), ref, atol=1e-5, rtol=0)
    # one cached step of theirs against one of ours
    with torch.no_grad():
        past = hf(ids[:, :16], use_cache=True).cache  # transformers 5: `cache`
        ref_step = hf(ids[:, 16:], cache=past).logits
    cache = kv_cache.new_cache(2)
    ours(ids[:, :16], cache=cache)
    torch.testing.assert_close(
        ours(ids[:, 16:], cache=cache), ref_step, atol=1e-5, rtol=0
    )


def test_random_hf_gpt2_is_seeded_and_loads_into_gpt():
    a = gpt2_weights.random_hf_gpt2(23, 40, 32, 2, 4, seed=3)
    b = hf_gpt2(seed=3)  # the same sizes, dropout set off: the same weights
    torch.testing.assert_close(a.transformer.wte.weight, b.transformer.wte.weight)
    assert not a.training
    ours = gpt2_weights.load_hf_gpt2(GPT(gpt2_weights.gpt2_config(23, 40, 32, 2, 4)), a)
    ids = ids_of(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(ids), a(ids).logits, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="sizes must be positive"):
        gpt2_weights.random_hf_gpt2(23, 40, 32, 0, 4)
