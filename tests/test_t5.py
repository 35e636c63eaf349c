"""The book's T5 (src/transformer_book/t5.py) against Hugging Face's: logits, loss,
cached decoding, the options it takes from the floors below, and chapter 10's exercise
checks. Span corruption is tested in tests/test_span_corruption.py."""

import pytest
import torch
from transformers import T5Config as HFT5Config
from transformers import T5ForConditionalGeneration

from transformer_book import (
    attention,
    blocks,
    decoder,
    grouped_heads,
    kv_cache,
    params,
    span_pretraining,
    t5,
)
from transformer_book.positions import T5RelativeBias

SMALL = [  # (vocab, d_model, n_layers, n_heads, d_ff, num_buckets, max_distance)
    (100, 32, 2, 4, 64, 32, 128),
    (57, 48, 3, 3, 40, 8, 20),
    (200, 64, 1, 8, 128, 16, 32),
]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pair(vocab, d_model, n_layers, n_heads, d_ff, num_buckets, max_distance):
    """A random Hugging Face T5 and the book's T5 with its weights copied in."""
    hf_config = HFT5Config(
        vocab_size=vocab,
        d_model=d_model,
        d_kv=d_model // n_heads,
        d_ff=d_ff,
        num_layers=n_layers,
        num_heads=n_heads,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        dropout_rate=0.0,
        decoder_start_token_id=0,  # T5 starts decoding from the pad id
    )
    hf = T5ForConditionalGeneration(hf_config).eval()
    config = t5.T5Config(
        vocab_size=vocab,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_ff=d_ff,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    return hf, t5.load_hf_t5(t5.T5(config).eval(), hf)


@pytest.mark.parametrize("config", SMALL)
def test_logits_equal_hugging_face(config):
    hf, model = pair(*config)
    vocab = config[0]
    src = torch.randint(2, vocab, (3, 23))
    src[1, 15:] = 0  # padding: masked in both
    src[2, 4:] = 0
    labels = torch.randint(2, vocab, (3, 17))
    tgt_in = decoder.shift_right(labels, 0)
    with torch.no_grad():
        ref = hf(
            input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in
        ).logits
        mine = model(src, tgt_in)
    assert mine.shape == (3, 17, vocab)
    torch.testing.assert_close(mine, ref, atol=1e-4, rtol=0)


def test_long_inputs_use_the_log_buckets():
    """Past max_distance every distance shares the last bucket: still equal."""
    hf, model = pair(50, 32, 2, 4, 64, 8, 12)
    src, labels = torch.randint(2, 50, (2, 70)), torch.randint(2, 50, (2, 40))
    with torch.no_grad():
        ref = hf(input_ids=src, labels=labels).logits
        mine = model(src, decoder.shift_right(labels, 0))
    torch.testing.assert_close(mine, ref, atol=1e-4, rtol=0)


def test_loss_equals_hugging_face():
    hf, model = pair(*SMALL[0])
    src, labels = torch.randint(2, 100, (4, 12)), torch.randint(2, 100, (4, 9))
    with torch.no_grad():
        ref = hf(input_ids=src, labels=labels).loss
        logits = model(src, decoder.shift_right(labels, 0))
    mine = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
    torch.testing.assert_close(mine, ref, atol=1e-5, rtol=0)


def test_shift_right_matches_hugging_face():
    hf, _ = pair(*SMALL[0])
    labels = torch.randint(2, 100, (3, 7))
    assert torch.equal(decoder.shift_right(labels, 0), hf._shift_right(labels))


def test_t5_choices():
    model = t5.T5(
        t5.T5Config(vocab_size=40, d_model=32, n_layers=3, n_heads=4, d_ff=48)
    )
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.endswith(".bias") for n in names)  # no biases anywhere
    tables = [m for m in model.modules() if isinstance(m, T5RelativeBias)]
    assert len(tables) == 2  # one relative bias per stack, shared by its layers
    assert tables[0].bidirectional and not tables[1].bidirectional
    attn = model.encoder.layers[0].attn
    assert attn.scale == 1.0 and model.decoder.layers[0].cross_attn.scale == 1.0
    assert model.encoder.layers[0].norm_first
    assert params.count_params(model) == params.t5_params(40, 32, 3, 48, 4, 8, 32)


def test_relative_bias_is_shared_by_every_layer():
    """Zeroing the bias table changes the output; the layers hold no bias of their own."""
    model = t5.T5(
        t5.T5Config(vocab_size=40, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    )
    model.eval()
    src, tgt = torch.randint(2, 40, (2, 9)), torch.randint(2, 40, (2, 6))
    seen = []
    for layer in model.encoder.layers:
        layer.attn.register_forward_hook(
            lambda mod, args, kwargs, out: seen.append(kwargs["bias"]),
            with_kwargs=True,
        )
    with torch.no_grad():
        before = model(src, tgt)
        assert len(seen) == 2 and seen[0] is seen[1]
        model.encoder_bias.embedding.weight.zero_()
        assert not torch.allclose(model(src, tgt), before)


def test_decoder_is_causal_and_padding_is_ignored():
    model = t5.T5(
        t5.T5Config(vocab_size=40, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    )
    model.eval()
    src, tgt = torch.randint(2, 40, (2, 9)), torch.randint(2, 40, (2, 8))
    with torch.no_grad():
        out = model(src, tgt)
        changed = tgt.clone()
        changed[:, 5:] = torch.randint(2, 40, (2, 3))
        torch.testing.assert_close(model(src, changed)[:, :5], out[:, :5])
        padded = torch.cat((src, torch.zeros(2, 4, dtype=torch.long)), dim=1)
        torch.testing.assert_close(model(padded, tgt), out, atol=1e-5, rtol=0)


def test_generate_is_greedy_and_stops_at_eos():
    config = t5.T5Config(vocab_size=30, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    model = t5.T5(config).eval()
    src = torch.randint(2, 30, (3, 10))
    out = model.generate(src, max_new_tokens=8)
    assert out.shape[0] == 3 and out.shape[1] <= 8
    with torch.no_grad():
        logits = model(src, decoder.shift_right(out, 0))
    for b in range(3):
        row = out[b].tolist()
        end = row.index(config.eos_id) + 1 if config.eos_id in row else len(row)
        assert row[:end] == logits[b, :end].argmax(-1).tolist()
        assert all(t == config.pad_id for t in row[end:])


@pytest.mark.parametrize("config", SMALL[:2])
def test_cached_decoding_equals_uncached_and_hugging_face(config):
    """Step-by-step logits with the decoder's cache equal the full pass (and HF's)."""
    hf, model = pair(*config)
    vocab, n_layers = config[0], config[2]
    src = torch.randint(2, vocab, (3, 11))
    src[1, 6:], src[2, 3:] = 0, 0  # padded sources
    tgt_in = decoder.shift_right(torch.randint(2, vocab, (3, 9)), 0)
    with torch.no_grad():
        memory, mask = model.encode(src)
        full = model.decode(tgt_in, memory, mask)  # (3, 9, V)
        cache = kv_cache.new_decoder_cache(n_layers)
        steps = [
            model.decode(tgt_in[:, t : t + 1], memory, mask, cache) for t in range(9)
        ]
        ref = hf(
            input_ids=src, attention_mask=src != 0, decoder_input_ids=tgt_in
        ).logits
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(steps, dim=1), ref, atol=1e-5, rtol=1e-5)


def test_cached_generate_writes_the_same_tokens_and_projects_the_source_once():
    config = t5.T5Config(vocab_size=30, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    model = t5.T5(config).eval()
    src = torch.randint(2, 30, (4, 10))
    src[1, 6:], src[3, 2:] = 0, 0  # padded sources
    calls = [0]
    for layer in model.decoder.layers:
        for proj in (layer.cross_attn.k_proj, layer.cross_attn.v_proj):
            proj.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    cached = model.generate(src, max_new_tokens=12)
    assert calls[0] == 2 * config.n_layers  # once per source, not once per step
    plain = model.generate(src, max_new_tokens=12, use_cache=False)
    assert cached.shape[1] > 3 and torch.equal(cached, plain)
    assert calls[0] == 2 * config.n_layers * (1 + plain.shape[1])


def test_t5_initialisation_scales():
    config = t5.T5Config(vocab_size=300, d_model=256, n_layers=1, n_heads=4, d_ff=1024)
    model = t5.T5(config)
    attn, ff = model.encoder.layers[0].attn, model.encoder.layers[0].ff
    stds = {
        "emb": (model.tok_emb.weight, 1.0),
        "q": (attn.q_proj.weight, (256 * 64) ** -0.5),
        "k": (attn.k_proj.weight, 256**-0.5),
        "wo": (ff.down_proj.weight, 1024**-0.5),
    }
    for name, (w, expected) in stds.items():
        assert abs(w.std().item() / expected - 1) < 0.05, name


def test_load_rejects_a_different_model():
    hf = T5ForConditionalGeneration(
        HFT5Config(
            vocab_size=50, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4
        )
    )
    other = t5.T5(
        t5.T5Config(vocab_size=50, d_model=32, n_layers=2, n_heads=4, d_ff=32)
    )
    with pytest.raises(ValueError, match=r"built differently.*'d_ff': \(64, 32\)"):
        t5.load_hf_t5(other, hf)
    gated = T5ForConditionalGeneration(
        HFT5Config(
            vocab_size=50,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            feed_forward_proj="gated-gelu",
        )
    )
    same = t5.T5(t5.T5Config(vocab_size=50, d_model=32, n_layers=2, n_heads=4, d_ff=64))
    with pytest.raises(ValueError, match="feed_forward"):
        t5.load_hf_t5(same, gated)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(vocab_size=0), "vocab_size must be a positive integer, got 0"),
        (
            dict(vocab_size=10, d_model=30, n_heads=4),
            r"d_model \(30\) must be divisible",
        ),
        (dict(vocab_size=10, dropout=1.0), r"dropout must be in \[0, 1\)"),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        t5.T5Config(**kwargs)


def test_bad_ids():
    model = t5.T5(t5.T5Config(vocab_size=10, d_model=16, n_layers=1, n_heads=2, d_ff=8))
    with pytest.raises(
        ValueError, match=r"src must be integer token ids of shape \(B, T\)"
    ):
        model(torch.randint(0, 10, (5,)), torch.randint(0, 10, (1, 3)))
    with pytest.raises(ValueError, match="tgt_in must be integer token ids"):
        model(torch.randint(0, 10, (1, 5)), torch.rand(1, 3))


# --- the options T5 needs from the floors below (attention.py, blocks.py) -------------


def test_attention_scale_option():
    """``scale=`` reaches the scores: 1.0 is T5's unscaled q·k; None stays 1/√d_head."""
    torch.manual_seed(1)
    x = torch.randn(2, 5, 16)
    plain = attention.MultiHeadAttention(16, 4)
    unscaled = attention.MultiHeadAttention(16, 4, scale=1.0)
    unscaled.load_state_dict(plain.state_dict())
    w_plain = plain(x, need_weights=True)[1]
    w_unscaled = unscaled(x, need_weights=True)[1]
    q = plain.q_proj(x).view(2, 5, 4, 4).transpose(1, 2)  # (B, H, T, Dh)
    k = plain.k_proj(x).view(2, 5, 4, 4).transpose(1, 2)
    torch.testing.assert_close(w_unscaled, (q @ k.transpose(-2, -1)).softmax(-1))
    torch.testing.assert_close(w_plain, (q @ k.transpose(-2, -1) / 2.0).softmax(-1))
    fused = unscaled(x)[0]  # the fused kernel gets the same scale
    torch.testing.assert_close(fused, unscaled(x, need_weights=True)[0])
    assert grouped_heads.gqa_from_mha(unscaled, 2).scale == 1.0
    assert (
        grouped_heads.mha_from_gqa(grouped_heads.gqa_from_mha(unscaled, 2)).scale == 1.0
    )


def test_encoder_passes_scale_to_every_block():
    enc = blocks.Encoder(2, 16, 4, 32, scale=0.5)
    assert [layer.attn.scale for layer in enc.layers] == [0.5, 0.5]
    assert blocks.EncoderBlock(16, 4, 32).attn.scale is None


# --- the exercise checks of chapter 10 (checks/families.py) ------------------------------


def test_llama_reference_equals_transformers_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    from transformer_book.checks.families import _LLAMAS, _llama_params

    for V, d, L, ff, H, kv in _LLAMAS.values():
        config = LlamaConfig(
            vocab_size=V,
            hidden_size=d,
            num_hidden_layers=L,
            intermediate_size=ff,
            num_attention_heads=H,
            num_key_value_heads=kv,
            tie_word_embeddings=False,
        )
        with torch.device("meta"):
            model = LlamaForCausalLM(config)
        assert params.count_params(model) == _llama_params(V, d, L, ff, H, kv)
    assert _llama_params(*_LLAMAS["Llama-2-7B"]) == 6_738_415_616


def test_checks_accept_right_answers(capsys):
    from transformer_book import checks
    from transformer_book.checks.families import _llama_params

    checks.check_llama_params(_llama_params)
    checks.check_utf8_length(lambda c: len(c.encode("utf-8")))
    checks.check_noise_span_mask(t5.noise_span_mask)
    assert capsys.readouterr().out.count("Correct:") == 3


def _tied(V, d, L, ff, H, kv):
    from transformer_book.checks.families import _llama_params

    return _llama_params(V, d, L, ff, H, kv) - V * d


def _two_matrices(V, d, L, ff, H, kv):
    from transformer_book.checks.families import _llama_params

    return _llama_params(V, d, L, ff, H, kv) - L * d * ff


def _full_kv(V, d, L, ff, H, kv):
    from transformer_book.checks.families import _llama_params

    return _llama_params(V, d, L, ff, H, H)


def _layer_norm(V, d, L, ff, H, kv):
    from transformer_book.checks.families import _llama_params

    return _llama_params(V, d, L, ff, H, kv) + (2 * L + 1) * d


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_tied, "output layer is not tied"),
        (_two_matrices, "three matrices, not two"),
        (_full_kv, "keys and values have only n_kv_heads"),
        (_layer_norm, "RMSNorm has a γ only"),
        (lambda *a: 7, "expected 6,738,415,616. Count, per block"),
    ],
)
def test_llama_params_mistakes(wrong, message):
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_llama_params(wrong)


def _utf8_off_by_one(ch):
    cp = ord(ch)
    return 1 if cp <= 0x80 else 2 if cp <= 0x800 else 3 if cp <= 0x10000 else 4


@pytest.mark.parametrize(
    "wrong, message",
    [
        (len, "len\\(char\\) counts characters"),
        (_utf8_off_by_one, "off by one at a boundary"),
        (lambda c: len(c.encode("utf-16-le")), "you count UTF-16"),
    ],
)
def test_utf8_length_mistakes(wrong, message):
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_utf8_length(wrong)


def _bernoulli(length, density, span, gen):
    return torch.rand(length, generator=gen) < density


def _touching(length, density, span, gen):
    mask = torch.zeros(length, dtype=torch.bool)
    mask[: max(round(length * density), 1)] = True  # one long span
    return mask


def _fixed(length, density, span, gen):
    return t5.noise_span_mask(length, density, span, torch.Generator())


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_bernoulli, "probability noise_density gives that many only on average"),
        (_touching, "spans touch and merge"),
        (_fixed, "with the generator you are given"),
        (lambda n, d, s, g: torch.zeros(n), "return a torch.bool tensor"),
    ],
)
def test_noise_span_mask_mistakes(wrong, message):
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_noise_span_mask(wrong)


def test_loss_and_target_scores():
    config = t5.T5Config(vocab_size=30, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    model = t5.T5(config).eval()
    src, tgt = torch.randint(2, 30, (3, 9)), torch.randint(2, 30, (3, 6))
    with torch.no_grad():
        logits = model(src, decoder.shift_right(tgt, config.pad_id))  # (3, 6, V)
        expected = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), tgt.flatten()
        )
        torch.testing.assert_close(model.loss(src, tgt), expected)
        padded = torch.cat((tgt, torch.zeros(3, 2, dtype=torch.long)), dim=1)
        torch.testing.assert_close(model.loss(src, padded), expected)  # pads skipped
        calls = []  # a wrapper (DistributedDataParallel, say) must see the forward pass

        def wrapper(*args):
            calls.append(len(args))
            return model(*args)

        torch.testing.assert_close(model.loss(src, tgt, forward=wrapper), expected)
        assert calls == [2]
    keep = lambda t: t % 2 == 0  # score the even ids only
    model.train()
    acc, nats = t5.target_scores(model, [(src[:2], tgt[:2]), (src[2:], tgt[2:])], keep)
    assert model.training  # the mode comes back
    logp = logits.log_softmax(-1)
    mask = keep(tgt)
    assert acc == pytest.approx(float((logp.argmax(-1) == tgt)[mask].float().mean()))
    assert nats == pytest.approx(
        float(-logp.gather(-1, tgt[..., None])[..., 0][mask].mean()), rel=1e-5
    )
    with pytest.raises(ValueError, match="selected no target token"):
        t5.target_scores(model, [(src, tgt)], lambda t: t < 0)


def test_target_predictions_in_reading_order():
    config = t5.T5Config(vocab_size=30, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    model = t5.T5(config).eval()
    src, tgt = torch.randint(2, 30, (4, 9)), torch.randint(2, 30, (4, 6))
    keep = lambda t: t % 3 != 0  # noqa: E731
    batches = [(src[:3], tgt[:3]), (src[3:], tgt[3:])]
    truth, argmax, logp_true = t5.target_predictions(model, batches, keep)
    with torch.no_grad():
        logp = model(src, decoder.shift_right(tgt, config.pad_id)).log_softmax(-1)
    mask = keep(tgt)  # (4, 6): boolean indexing reads row by row
    assert torch.equal(truth, tgt[mask])
    assert torch.equal(argmax, logp.argmax(-1)[mask])
    torch.testing.assert_close(logp_true, logp.gather(-1, tgt[..., None])[..., 0][mask])
    acc, nats = t5.target_scores(model, batches, keep)
    assert acc == pytest.approx(float((argmax == truth).float().mean()))
    assert nats == pytest.approx(float(-logp_true.mean()), rel=1e-6)
    assert [len(x) for x in t5.target_predictions(model, [], keep)] == [0, 0, 0]
    with pytest.raises(ValueError, match="selected no target token"):
        t5.target_scores(model, [], keep)


def test_step_shares_are_a_step_over_each_tensors_scale():
    model = t5.T5(t5.T5Config(50, 32, 1, 4, 64))
    multiples = span_pretraining.init_lr_scales(model)
    names = ["tok_emb.weight", "encoder.layers.0.attn.q_proj.weight"]
    shares = t5.step_shares(model, 1e-3, multiples, names)
    for name in names:  # the chapter's old inline loop
        scale = model.get_parameter(name).detach().pow(2).mean().sqrt().item()
        m = multiples.get(name, 1.0)
        assert shares[name] == (scale, 1e-3 / scale, 1e-3 * m / scale)
    emb, q = shares["tok_emb.weight"], shares["encoder.layers.0.attn.q_proj.weight"]
    assert q[1] > 10 * emb[1]  # equal steps: W_Q races, the embedding crawls
    assert q[2] == pytest.approx(emb[2], rel=0.1)  # scaled: about the same share
