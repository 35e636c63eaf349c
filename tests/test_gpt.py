"""transformer_book.gpt: the config, causality, and
cached decoding equal to uncached decoding (learned positions and RoPE, MHA and GQA)."""

import dataclasses
import os

import pytest
import torch
import torch.nn.functional as F

from transformer_book import gpt, kv_cache
from transformer_book.gpt import GPT, GPTConfig

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def small(**kwargs) -> GPTConfig:
    base = dict(vocab_size=23, max_len=40, d_model=32, n_layers=2, n_heads=4)
    return GPTConfig(**{**base, **kwargs})


def model_of(config: GPTConfig, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    model = GPT(config).eval()
    with torch.no_grad():  # GPT-2's init is tiny; larger weights make the test sharper
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def ids_of(*shape, seed=1, vocab=23):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


VARIANTS = [
    dict(),
    dict(n_kv_heads=2),
    dict(n_kv_heads=1),
    dict(positions="rope"),
    dict(positions="rope", n_kv_heads=2),
    dict(positions="rope", norm="rms", activation="silu", bias=False),
]


def test_config_is_frozen_and_derives_sizes():
    c = small(n_kv_heads=2)
    assert (c.head_dim, c.kv_heads, c.ff_width) == (8, 2, 128)
    assert small().kv_heads == 4 and small(d_ff=50).ff_width == 50
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_layers = 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_heads=5), r"d_model \(32\) must be divisible by n_heads \(5\)"),
        (dict(n_kv_heads=3), r"n_kv_heads \(3\) must divide n_heads \(4\)"),
        (dict(positions="alibi"), r"positions must be one of \('learned', 'rope'\)"),
        (dict(norm="batch"), "norm must be one of"),
        (dict(activation="tanh"), "activation must be one of"),
        (dict(vocab_size=0), "vocab_size must be a positive integer, got 0"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
        (dict(d_model=36, n_heads=4, positions="rope"), "head_dim .* must be even"),
    ],
)
def test_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        small(**kwargs)


def test_forward_shape_and_tied_embeddings():
    model = GPT(small())
    logits = model(ids_of(3, 10))
    assert logits.shape == (3, 10, 23)
    assert model.lm_head.weight is model.tok_emb.weight
    untied = GPT(small(tie_embeddings=False))
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(model) == 23 * 32


def test_no_bias_means_no_bias_anywhere():
    names = [n for n, _ in GPT(small(bias=False)).named_parameters()]
    assert not [n for n in names if n.endswith("bias")]
    assert [n for n, _ in GPT(small()).named_parameters() if n.endswith("bias")]


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_causal_later_tokens_do_not_change_earlier_logits(variant):
    model = model_of(small(**variant))
    ids = ids_of(2, 12)
    changed = ids.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 23
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :8], b[:, :8], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_cached_step_logits_equal_uncached(variant):
    model = model_of(small(**variant))
    ids = ids_of(2, 30)
    full = model(ids)  # (B, 30, V), one pass over the whole text
    cache = kv_cache.new_cache(2)
    steps = [model(ids[:, :6], cache=cache)]  # the prompt, then one token at a time
    steps += [model(ids[:, t : t + 1], cache=cache) for t in range(6, 30)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache[0].seq_len == 30


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_greedy_decoding_with_cache_gives_the_same_tokens(variant):
    model = model_of(small(**variant))
    prompt = ids_of(2, 4)
    cached = model.generate(prompt, 25, temperature=0, use_cache=True)
    plain = model.generate(prompt, 25, temperature=0, use_cache=False)
    assert cached.shape == (2, 29) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, plain)
    # greedy = the argmax of the uncached logits at every step
    logits = model(plain[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(-1), plain[:, 4:])


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_decoding_past_the_context_window_reads_the_last_max_len(positions):
    model = model_of(small(max_len=10, positions=positions))
    prompt = ids_of(1, 3)
    cached = model.generate(prompt, 20, temperature=0, use_cache=True)
    plain = model.generate(prompt, 20, temperature=0, use_cache=False)
    assert cached.shape == (1, 23) and torch.equal(cached, plain)
    last = model(plain[:, -11:-1])[:, -1].argmax(-1)  # the last window of 10
    assert torch.equal(last, plain[:, -1])


def test_every_attention_keeps_query_key_value_as_one_matrix():
    model = model_of(small(n_kv_heads=2))
    for block in model.blocks.layers:
        attn = block.attn
        assert attn.stacked and attn.qkv_proj.weight.shape == (32 + 2 * 16, 32)
        # q_proj, k_proj, v_proj are views of its rows: writing one writes the matrix
        assert attn.k_proj.weight.shape == (16, 32) and attn.v_proj.bias.shape == (16,)
        assert attn.q_proj.weight.data_ptr() == attn.qkv_proj.weight.data_ptr()
    names = [n for n, _ in model.named_parameters() if ".attn." in n]
    roles = {n.split(".")[-2] for n in names}  # the layer each parameter belongs to
    assert roles == {"qkv_proj", "o_proj"}
    # per layer: qkv and o weights and biases, against six tensors for three layers
    assert len(names) == 4 * model.config.n_layers


def test_stacking_moves_the_weights_draws_nothing_and_keeps_the_outputs():
    from transformer_book.attention import MultiHeadAttention

    torch.manual_seed(3)
    attn = MultiHeadAttention(32, 4, n_kv_heads=2)
    three = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        before = attn(x)[0], attn.q_proj(x), attn.v_proj(x), attn(x, context=x + 1)[0]
        rng = torch.get_rng_state()
        assert attn.stack_projections() is attn and attn.stacked
        assert torch.equal(torch.get_rng_state(), rng)  # no random draw
        assert torch.equal(attn.qkv_proj.weight, three)  # the rows, in order q, k, v
        after = attn(x)[0], attn.q_proj(x), attn.v_proj(x), attn(x, context=x + 1)[0]
    for a, b in zip(before, after):  # self- and cross-attention alike
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert attn.stack_projections() is attn  # twice: nothing more to do


def test_a_state_dict_from_before_the_stacking_still_loads():
    model = model_of(small(n_kv_heads=2))
    old = {}  # the keys a checkpoint written with three projections holds
    for name, tensor in model.state_dict().items():
        if ".attn.qkv_proj." not in name:
            old[name] = tensor.clone()
            continue
        kind = name.rsplit(".", 1)[1]
        q, k, v = tensor.split((32, 16, 16))
        for role, part in zip(("q_proj", "k_proj", "v_proj"), (q, k, v)):
            old[name.replace("qkv_proj", role)] = part.clone()
        assert kind in ("weight", "bias")
    fresh = model_of(small(n_kv_heads=2))
    fresh.load_state_dict(old)  # strict: no key missing, none left over
    ids = ids_of(2, 7)
    torch.testing.assert_close(fresh(ids), model(ids), atol=0, rtol=0)


def test_stacking_refuses_wrapped_projections():
    from transformer_book.attention import MultiHeadAttention

    attn = MultiHeadAttention(16, 4)
    attn.q_proj = torch.nn.Sequential(attn.q_proj)  # a wrapper, say
    with pytest.raises(TypeError, match="plain nn.Linear projections; got Sequential"):
        attn.stack_projections()


def test_generated_ids_and_weights_stay_usable_for_training():
    # generate runs in inference mode; nothing it returns or touches may stay an
    # inference tensor, which autograd refuses
    model = model_of(small())
    out = model.generate(ids_of(2, 3), 6, temperature=0)
    assert not out.is_inference()
    assert not any(p.is_inference() for p in model.parameters())
    model.train()
    loss = F.cross_entropy(model(out[:, :-1]).flatten(0, 1), out[:, 1:].flatten())
    loss.backward()  # the generated ids feed a training step
    assert model.tok_emb.weight.grad is not None


def test_sampling_is_reproducible_with_a_generator():
    model = model_of(small())
    prompt = ids_of(2, 3)
    draw = lambda seed, **kw: model.generate(
        prompt, 15, temperature=1.0, generator=torch.Generator().manual_seed(seed), **kw
    )
    assert torch.equal(draw(5), draw(5))
    assert not torch.equal(draw(5), draw(6))
    top1 = draw(5, top_k=1)  # top-k of 1 is greedy
    assert torch.equal(top1, model.generate(prompt, 15, temperature=0))


def test_bad_inputs_raise():
    model = GPT(small())
    with pytest.raises(
        ValueError, match=r"ids must be integer token ids of shape \(B, T\)"
    ):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"positions 0..40 do not fit .* max_len=40"):
        model(ids_of(1, 41))
    with pytest.raises(ValueError, match=r"non-empty prompt of shape \(B, T0\)"):
        model.generate(ids_of(5), 3)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        model.generate(ids_of(1, 2), -1)


# --- converting the whole model to grouped-query attention ----------------------------------


def test_gqa_from_mha_converts_every_layer_and_copies_the_rest():
    model = model_of(small())
    converted = gpt.gqa_from_mha(model, 2)
    assert converted.config == dataclasses.replace(model.config, n_kv_heads=2)
    assert model.config.n_kv_heads is None  # the original is unchanged
    for mine, theirs in zip(converted.blocks.layers, model.blocks.layers):
        assert mine.attn.k_proj.weight.shape == (16, 32)
        w = theirs.attn.k_proj.weight.reshape(2, 2, 8, 32).mean(1).reshape(16, 32)
        torch.testing.assert_close(mine.attn.k_proj.weight, w)
        assert torch.equal(mine.attn.q_proj.weight, theirs.attn.q_proj.weight)
        assert torch.equal(mine.ff.up_proj.weight, theirs.ff.up_proj.weight)
    assert converted.lm_head.weight is converted.tok_emb.weight
    same = gpt.gqa_from_mha(model, 4)  # one head per group: nothing changes
    ids = ids_of(2, 9)
    torch.testing.assert_close(same(ids), model(ids), atol=1e-6, rtol=0)
    assert not torch.allclose(converted(ids), model(ids), atol=1e-3)


# --- the exercise checks of chapter 14 ----------------------------------------------------


def test_check_bits_and_perplexity():
    import math

    from transformer_book import checks

    checks.check_bits_and_perplexity(lambda loss: (loss / math.log(2), math.exp(loss)))
    wrong = [
        (lambda loss: (loss * math.log(2), math.exp(loss)), "divide by it"),
        (lambda loss: (loss / math.log(10), math.exp(loss)), "log10"),
        (lambda loss: (loss / math.log(2), 2**loss), "this loss is in nats"),
        (lambda loss: loss, "return a pair"),
    ]
    for fn, message in wrong:
        with pytest.raises(checks.ExerciseError, match=message):
            checks.check_bits_and_perplexity(fn)


def leak(model, ids, t, change_from):
    changed = ids.clone()
    changed[:, change_from:] = (changed[:, change_from:] + 1) % model.config.vocab_size
    with torch.no_grad():
        a, b = model(ids)[:, : t + 1], model(changed)[:, : t + 1]
    return (a - b).abs().max().item()


def test_check_future_leak():
    from transformer_book import checks

    checks.check_future_leak(lambda m, ids, t: leak(m, ids, t, t + 1))
    with pytest.raises(checks.ExerciseError, match="Do you change token t itself"):
        checks.check_future_leak(lambda m, ids, t: leak(m, ids, t, t))
    with pytest.raises(checks.ExerciseError, match="you find no change"):
        checks.check_future_leak(lambda m, ids, t: 0.0)


def test_check_training_days():
    from transformer_book import checks

    days = lambda n, d, g, f, u: 6 * n * d / (g * f * u) / 86400
    checks.check_training_days(days)
    wrong = [
        (lambda *a: days(*a) / 3, "forward pass alone"),
        (lambda *a: days(*a) * 86400, "in seconds"),
        (lambda *a: days(*a) * 24, "in hours"),
        (lambda n, d, g, f, u: days(n, d, g, f, u) * u, "divide by it"),
    ]
    for fn, message in wrong:
        with pytest.raises(checks.ExerciseError, match=message):
            checks.check_training_days(fn)


def test_uptrain_losses_equal_the_loop_written_out():
    from transformer_book import lm_data, training

    torch.manual_seed(0)
    model = GPT(GPTConfig(11, 8, 16, 1, 4, positions="rope"))
    ids = torch.randint(0, 11, (400,), generator=torch.Generator().manual_seed(1))
    heldout = lm_data.sequential_windows(ids[300:], 8, 4)
    after = gpt.uptrain_losses(model, [4, 1], ids[:300], heldout, 4, 3, 1e-2, (0, 1))
    for g in (4, 1):
        for i, seed in enumerate((0, 1)):
            torch.manual_seed(seed)
            student = gpt.gqa_from_mha(model, g)
            stream = lm_data.WindowBatches(ids[:300], 4, 8, seed=100 + seed)
            training.train(student, stream, lm_data.next_token_loss, 3, lr=1e-2)
            assert after[g][i] == lm_data.mean_loss(student, heldout)
    assert after[4][0] != after[4][1]  # the seeds draw different batches
    assert after[4][0] != after[1][0]  # and the conversion changes the model


def test_stacking_keeps_the_parameter_order_and_guards_the_row_blocks():
    from transformer_book.attention import MultiHeadAttention

    attn = MultiHeadAttention(16, 4)
    attn.stack_projections()
    # qkv_proj where q_proj was: a walk over the modules draws in the same order
    assert list(attn._modules) == ["qkv_proj", "o_proj"]
    with pytest.raises(AttributeError, match="k_proj is a block of rows of qkv_proj"):
        attn.k_proj = torch.nn.Linear(16, 16)
    frozen = MultiHeadAttention(16, 4)
    frozen.v_proj.weight.requires_grad_(False)
    with pytest.raises(ValueError, match="must all be trainable or all frozen"):
        frozen.stack_projections()
    for p in frozen.v_proj.parameters():  # a frozen bias beside trainable weights too
        p.requires_grad_(False)
    frozen.v_proj.weight.requires_grad_(True)
    with pytest.raises(ValueError, match=r"v_proj=\[False, True\]"):
        frozen.stack_projections()
    frozen.v_proj.weight.requires_grad_(False)
    for p in frozen.q_proj.parameters():
        p.requires_grad_(False)
    for p in frozen.k_proj.parameters():
        p.requires_grad_(False)
    frozen.v_proj.bias.requires_grad_(False)
    frozen.stack_projections()  # all three frozen: the matrix is frozen too
    assert not any(p.requires_grad for p in frozen.qkv_proj.parameters())


def test_single_token_steps_take_torchs_own_kernels_and_the_same_values():
    model = model_of(small())
    seen = []  # (tokens, oneDNN's switch) as each block's feed-forward saw them

    def watched_gelu(x):
        seen.append((x.shape[1], torch.backends.mkldnn.enabled))
        return F.gelu(x)

    for block in model.blocks.layers:
        block.ff.activation = watched_gelu
    ids = ids_of(1, 7)
    cache = kv_cache.new_cache(2)
    before = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = True
    try:
        with torch.no_grad():
            model(ids[:, :6], cache=cache)  # the prompt: six tokens, oneDNN on
            step = model(ids[:, 6:], cache=cache)  # one token: off
            assert seen == [(6, True), (6, True), (1, False), (1, False)]
            assert torch.backends.mkldnn.enabled  # on again after the step
            whole = model(ids)[:, 6:]  # the same position, read with oneDNN on
            seen.clear()  # two texts, one token each: B · T = 2 keeps oneDNN
            two = ids_of(2, 7)
            model(two[:, 6:], cache=kv_cache.filled_cache(model, two[:, :6]))
            assert seen[-2:] == [(1, True), (1, True)]
            seen.clear()
            model.one_token_native_kernels = False  # keep oneDNN, as the benchmark
            model(ids[:, 6:], cache=kv_cache.filled_cache(model, ids[:, :6]))
            assert seen[-2:] == [(1, True), (1, True)]
    finally:
        torch.backends.mkldnn.enabled = before
    torch.testing.assert_close(step, whole, atol=1e-5, rtol=0)
