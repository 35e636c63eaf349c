"""transformer_book.kv_cache: the size formula, the cache's real tensors, and cached
attention equal to attention over the whole sequence (MHA, GQA, RoPE)."""

import pytest
import torch

from transformer_book import blocks, kv_cache, masks, positions
from transformer_book.attention import MultiHeadAttention
from transformer_book.kv_cache import KVCache, kv_cache_bytes


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- the size formula -------------------------------------------------------------------


def test_llama_2_7b_and_mistral_7b_at_4096_tokens_in_fp16():
    # Llama-2-7B: 32 layers, 32 heads of 128, one key/value head per query head
    assert kv_cache_bytes(32, 32, 128, 4096) == 2_147_483_648  # 2 GiB
    # Mistral-7B: the same shape with 8 key/value heads (grouped-query attention)
    assert kv_cache_bytes(32, 8, 128, 4096) == 536_870_912  # 512 MiB


def test_formula_written_out():
    assert kv_cache_bytes(6, 3, 64, 100, batch=5, bytes_per_value=4) == (
        2 * 6 * 3 * 64 * 100 * 5 * 4
    )
    assert kv_cache_bytes(1, 1, 1, 0) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_layers=0), "n_layers must be a positive integer, got 0"),
        (dict(n_kv_heads=2.5), "n_kv_heads must be a positive integer, got 2.5"),
        (dict(seq_len=-1), "seq_len must be a non-negative integer, got -1"),
        (dict(bytes_per_value=0), "bytes_per_value must be a positive integer"),
    ],
)
def test_formula_rejects_bad_sizes(kwargs, message):
    args = dict(n_layers=2, n_kv_heads=2, head_dim=8, seq_len=4)
    with pytest.raises(ValueError, match=message):
        kv_cache_bytes(**{**args, **kwargs})


# --- the cache object ---------------------------------------------------------------------


def test_update_appends_and_returns_everything():
    cache = KVCache()
    assert cache.seq_len == 0 and cache.nbytes == 0 and len(cache) == 0
    k1, v1 = rand(2, 3, 5, 4, seed=1), rand(2, 3, 5, 4, seed=2)
    k, v = cache.update(k1, v1)
    assert k.shape == (2, 3, 5, 4) and cache.seq_len == 5
    k2, v2 = rand(2, 3, 1, 4, seed=3), rand(2, 3, 1, 4, seed=4)
    k, v = cache.update(k2, v2)
    assert k.shape == v.shape == (2, 3, 6, 4) and len(cache) == 6
    assert torch.equal(k, torch.cat((k1, k2), dim=2))
    assert torch.equal(v, torch.cat((v1, v2), dim=2))
    assert cache.nbytes == kv_cache_bytes(1, 3, 4, 6, batch=2, bytes_per_value=4)
    cache.reset()
    assert cache.seq_len == 0 and cache.keys is None


def test_update_rejects_mismatches():
    cache = KVCache()
    with pytest.raises(ValueError, match=r"k and v must have the same shape"):
        cache.update(rand(1, 2, 3, 4), rand(1, 2, 3, 5))
    cache.update(rand(1, 2, 3, 4), rand(1, 2, 3, 4))
    with pytest.raises(
        ValueError, match=r"do not match the cached ones \(1, 2, 3, 4\)"
    ):
        cache.update(rand(1, 3, 1, 4), rand(1, 3, 1, 4))
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        kv_cache.new_cache(0)


def test_a_static_cache_writes_into_one_buffer():
    cache = KVCache(max_len=8)
    assert cache.capacity == 0 and cache.capacity_nbytes == 0
    k, v = cache.update(rand(2, 3, 5, 4, seed=1), rand(2, 3, 5, 4, seed=2))
    buffer = cache._k
    assert cache.capacity == 8 and k.shape == (2, 3, 5, 4)
    assert k.data_ptr() == buffer.data_ptr()  # a view of the buffer: nothing copied
    k1 = rand(2, 3, 1, 4, seed=3)
    k, v = cache.update(k1, k1)
    assert cache._k is buffer and torch.equal(k[:, :, 5:], k1)  # written in place
    assert cache.nbytes == kv_cache_bytes(1, 3, 4, 6, batch=2, bytes_per_value=4)
    assert cache.capacity_nbytes == kv_cache_bytes(
        1, 3, 4, 8, batch=2, bytes_per_value=4
    )
    cache.update(rand(2, 3, 2, 4), rand(2, 3, 2, 4))  # exactly full
    with pytest.raises(
        ValueError, match=r"9 positions do not fit a cache of max_len=8"
    ):
        cache.update(k1, k1)
    with pytest.raises(ValueError, match=r"max_len must be >= 1 or None, got 0"):
        KVCache(max_len=0)
    with pytest.raises(ValueError, match=r"10 positions do not fit"):
        KVCache(max_len=8).update(rand(1, 1, 10, 2), rand(1, 1, 10, 2))


def test_without_max_len_the_buffer_doubles_and_keeps_its_rows():
    cache, steps = KVCache(), [rand(1, 2, 3, 4, seed=0)]
    cache.update(steps[0], steps[0])
    assert cache.capacity == 3  # room for the first update only
    capacities = []
    for t in range(1, 8):
        steps.append(rand(1, 2, 1, 4, seed=t))
        cache.update(steps[-1], steps[-1])
        capacities.append(cache.capacity)
    assert capacities == [6, 6, 6, 12, 12, 12, 12]  # doubled when full
    assert torch.equal(cache.keys, torch.cat(steps, dim=2))
    assert torch.equal(cache.values, torch.cat(steps, dim=2))


def test_reset_starts_a_new_text_in_the_same_buffers():
    cache = KVCache(max_len=8)
    cache.update(rand(2, 3, 5, 4, seed=1), rand(2, 3, 5, 4, seed=2))
    buffer, held = cache._k, cache.capacity_nbytes
    cache.reset()
    assert cache.seq_len == 0 and cache.nbytes == 0 and cache.keys is None
    assert cache.capacity == 8 and cache.capacity_nbytes == held  # kept
    k1, v1 = rand(2, 3, 6, 4, seed=3), rand(2, 3, 6, 4, seed=4)
    k, v = cache.update(k1, v1)
    assert cache._k is buffer and k.data_ptr() == buffer.data_ptr()  # no new buffer
    assert torch.equal(k, k1) and torch.equal(v, v1)  # the old text is gone
    with pytest.raises(ValueError, match=r"9 positions do not fit .* \(6 cached"):
        cache.update(rand(2, 3, 3, 4), rand(2, 3, 3, 4))  # the capacity still holds
    with pytest.raises(ValueError, match="do not match the cached ones"):
        cache.update(rand(1, 3, 1, 4), rand(1, 3, 1, 4))  # mid-text: still an error
    cache.reset()  # a new text of another batch size: new buffers, same max_len
    k2 = rand(1, 3, 2, 4, seed=5)
    k, _ = cache.update(k2, k2)
    assert cache._k is not buffer and cache.capacity == 8 and torch.equal(k, k2)


def test_a_cache_keeps_one_dtype():
    cache = KVCache()
    cache.update(rand(1, 2, 3, 4), rand(1, 2, 3, 4))
    with pytest.raises(ValueError, match="torch.bfloat16 do not match"):
        cache.update(*rand(2, 1, 2, 1, 4).bfloat16().unbind(0))


def test_generate_allocates_each_layer_s_cache_once(monkeypatch):
    from transformer_book import gpt

    made = []
    original = kv_cache.new_cache
    monkeypatch.setattr(
        kv_cache, "new_cache", lambda *a, **k: made.append((a, k)) or original(*a, **k)
    )
    config = gpt.GPTConfig(vocab_size=20, max_len=16, d_model=16, n_layers=2, n_heads=2)
    model = gpt.GPT(config).eval()
    model.generate(torch.zeros(1, 3, dtype=torch.long), 5, temperature=0)
    assert made == [((2,), {"max_len": 8})]  # 3 prompt + 5 new positions at most
    made.clear()
    model.generate(torch.zeros(1, 3, dtype=torch.long), 20, temperature=0)
    # the context window; past it, the same buffers are reset and refilled
    assert made == [((2,), {"max_len": 16})]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_real_cache_bytes_equal_the_formula(n_kv_heads, dtype):
    from transformer_book import gpt

    config = gpt.GPTConfig(
        vocab_size=20, max_len=32, d_model=32, n_layers=3, n_heads=4,
        n_kv_heads=n_kv_heads,
    )  # fmt: skip
    model = gpt.GPT(config).to(dtype).eval()
    cache = kv_cache.new_cache(3)
    with torch.no_grad():
        model(torch.randint(0, 20, (2, 7)), cache=cache)  # a prompt of 7 tokens
        for _ in range(5):  # then 5 tokens one at a time
            model(torch.randint(0, 20, (2, 1)), cache=cache)
    assert all(layer.keys.dtype == dtype for layer in cache)
    expected = kv_cache_bytes(
        3, config.kv_heads, 8, 12, batch=2, bytes_per_value=dtype.itemsize
    )
    assert kv_cache.cache_nbytes(cache) == expected


# --- cached attention equals attention over the whole sequence -----------------------------


def test_rope_offset_rotates_as_the_later_positions():
    rope = positions.RotaryEmbedding(8)
    q, k = rand(1, 2, 10, 8, seed=5), rand(1, 2, 10, 8, seed=6)
    full_q, full_k = rope(q, k)
    part_q, part_k = rope(q[:, :, 6:], k[:, :, 6:], offset=6)
    torch.testing.assert_close(part_q, full_q[:, :, 6:], atol=1e-6, rtol=0)
    torch.testing.assert_close(part_k, full_k[:, :, 6:], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        rope(q, k, offset=-1)


def chunks_through(module, x, sizes, **kwargs):
    """Feed x to a cached module in pieces of the given sizes; concatenate the outputs."""
    cache, outs, start = KVCache(), [], 0
    for n in sizes:
        T = start + n
        out = module(x[:, start:T], mask=masks.causal_mask(n, T), cache=cache, **kwargs)
        outs.append(out[0] if isinstance(out, tuple) else out)
        start = T
    return torch.cat(outs, dim=1), cache


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_cached_attention_equals_full_causal_attention(n_kv_heads, rope):
    torch.manual_seed(0)
    mha = MultiHeadAttention(
        32,
        4,
        n_kv_heads=n_kv_heads,
        rope=positions.RotaryEmbedding(8) if rope else None,
    ).eval()
    x = rand(2, 12, 32, seed=7)
    full, _ = mha(x, mask=masks.causal_mask(12))
    pieces, cache = chunks_through(mha, x, [5, 1, 1, 3, 1, 1])
    torch.testing.assert_close(pieces, full, atol=1e-5, rtol=0)
    assert cache.keys.shape == (2, mha.n_kv_heads, 12, 8)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_encoder_block_equals_full_causal_block(norm_first):
    torch.manual_seed(0)
    block = blocks.EncoderBlock(32, 4, 64, norm_first=norm_first, n_kv_heads=2).eval()
    x = rand(2, 9, 32, seed=8)
    full = block(x, mask=masks.causal_mask(9))
    pieces, _ = chunks_through(block, x, [4, 1, 1, 1, 2])
    torch.testing.assert_close(pieces, full, atol=1e-5, rtol=0)


def test_encoder_takes_one_cache_per_layer():
    enc = blocks.Encoder(2, 16, 2, 32, norm_first=True).eval()
    x = rand(1, 3, 16)
    with pytest.raises(ValueError, match=r"one KVCache per layer \(2\), got 1"):
        enc(x, mask=masks.causal_mask(3), cache=kv_cache.new_cache(1))
    cache = kv_cache.new_cache(2)
    out = enc(x, mask=masks.causal_mask(3), cache=cache)
    torch.testing.assert_close(out, enc(x, mask=masks.causal_mask(3)))
    assert [c.seq_len for c in cache] == [3, 3]


# --- the exercise checks accept right answers and explain typical wrong ones -------------


def test_checks_accept_right_answers(capsys):
    from transformer_book import attention, checks

    checks.check_rope_offset(lambda rope, q, k, n: rope(q, k, offset=n))
    checks.check_repeat_kv(attention.repeat_kv)
    checks.check_repeat_kv(lambda x, n: x.repeat_interleave(n, dim=1))
    checks.check_cat_copies(lambda n, b: b * n * (n + 1) // 2)
    checks.check_cat_copies(lambda n, b: sum(t * b for t in range(1, n + 1)))
    assert capsys.readouterr().out.count("Correct:") == 5


def test_rope_offset_mistakes_are_explained():
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match="at step 1 .* the first step"):
        checks.check_rope_offset(lambda rope, q, k, n: rope(q, k))  # no offset
    with pytest.raises(checks.ExerciseError, match="the rotation itself is wrong"):
        checks.check_rope_offset(lambda rope, q, k, n: (q, k))  # no rotation at all
    with pytest.raises(checks.ExerciseError, match="must return the pair"):
        checks.check_rope_offset(lambda rope, q, k, n: q)
    with pytest.raises(checks.ExerciseError, match="not written yet"):
        checks.check_rope_offset(lambda *a: (_ for _ in ()).throw(NotImplementedError))


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (lambda n, b: n * b, "static buffer"),
        (lambda n, b: b * n * (n - 1) // 2, "but not the new one"),
        (lambda n, b: b * n * n // 2, "count exactly"),
        (lambda n, b: 2 * b * n * (n + 1), "expected"),
    ],
)
def test_cat_copies_mistakes_are_explained(wrong, message):
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_cat_copies(wrong)


def test_the_counted_copies_are_what_torch_cat_allocates():
    from transformer_book import benchmark

    n, shape = 20, (1, 2, 1, 4)  # one token's keys: 8 float32 values, 32 bytes
    tokens = [torch.zeros(shape) for _ in range(n)]

    def grow_by_cat():
        keys = tokens[0]
        for k in tokens[1:]:
            keys = torch.cat((keys, k), dim=2)

    def grow_in_place():
        cache = KVCache(max_len=n)
        for k in tokens:
            cache.update(k, k)

    b = 32
    # the first token is not copied by cat (it starts the cache): n(n+1)/2 - 1 tokens
    assert benchmark.allocated_bytes(grow_by_cat) == b * (n * (n + 1) // 2 - 1)
    assert benchmark.allocated_bytes(grow_in_place) == 2 * n * b  # keys and values


def test_checks_leave_the_global_random_state_alone():
    from transformer_book import checks

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_rope_offset(lambda rope, q, k, n: rope(q, k, offset=n))
    checks.check_repeat_kv(lambda x, n: x.repeat_interleave(n, dim=1))
    torch.testing.assert_close(torch.rand(3), expected)


def test_decoder_cache_counts_both_caches():
    cache = kv_cache.new_decoder_cache(2)
    assert len(cache) == 2 and cache[0] is not cache[1]
    k = torch.zeros(1, 2, 3, 4)
    cache[0].self_attn.update(k, k)
    cache[0].cross_attn.update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
    assert cache[0].seq_len == 3  # the target's positions, not the source's
    assert kv_cache.cache_nbytes(cache) == 4 * 2 * (3 + 5) * 8
    cache[0].reset()
    assert cache[0].nbytes == 0
    with pytest.raises(ValueError, match="n_layers must be >= 1, got 0"):
        kv_cache.new_decoder_cache(0)


def test_filled_cache_reads_the_ids_once_into_every_layer():
    from transformer_book import gpt

    torch.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(11, 16, 8, 2, 2, n_kv_heads=1)).eval()
    ids = torch.randint(0, 11, (3, 5))
    cache = kv_cache.filled_cache(model, ids, max_len=8)
    assert len(cache) == 2 and all(layer.seq_len == 5 for layer in cache)
    assert cache[0].keys.shape == (3, 1, 5, 4) and cache[0].capacity == 8
    assert kv_cache.cache_nbytes(cache) == kv_cache_bytes(2, 1, 4, 5, 3, 4)
    with pytest.raises(ValueError, match=r"ids must be \(B, T\)"):
        kv_cache.filled_cache(model, ids[0])
