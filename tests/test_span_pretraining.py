"""T5's pre-training recipe: span corruption learns and is reproducible, the
relative-bias tables and scale_steps reach the optimiser, and init_lr_scales makes
every step relative to its tensor (chapter 10)."""

import pytest
import torch

from transformer_book import span_pretraining, t5


def test_pretrain_t5_learns_and_is_reproducible():
    stream = torch.arange(200).remainder(20) + 2  # a periodic text of ids 2..21
    config = span_pretraining.SpanPretrainConfig(
        d_model=32, n_layers=1, n_heads=2, d_ff=64, window=16, batch_size=16, steps=60,
        dropout=0.0,
    )  # fmt: skip
    model_config = config.t5_config(26, pad_id=0, eos_id=1)
    a, ha = span_pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config)
    _, hb = span_pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config)
    assert ha == hb and len(ha) == 60 and isinstance(a, t5.T5) and not a.training
    assert sum(ha[-10:]) / 10 < sum(ha[:5]) / 5 - 1.0
    _, hc = span_pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config,
                                    stop_at=10)  # fmt: skip
    assert hc == ha[:10]  # the schedule stays the whole run's
    with pytest.raises(ValueError, match="window must be >= 2"):
        span_pretraining.SpanPretrainConfig(window=1)
    with pytest.raises(ValueError, match="bias_lr_scale must be positive"):
        span_pretraining.SpanPretrainConfig(bias_lr_scale=0)


def _t5_moved(stop_at: int, **recipe) -> dict[str, float]:
    """How far each of a tiny T5's tensors moved (largest entry) in ``stop_at`` steps
    of :func:`span_pretraining.pretrain_t5` with ``recipe``'s changes to the config."""
    stream = torch.arange(200).remainder(20) + 2
    config = span_pretraining.SpanPretrainConfig(
        **{**dict(n_layers=1, window=16, batch_size=8, steps=20, dropout=0.0), **recipe}
    )
    model_config = config.t5_config(26, pad_id=0, eos_id=1)
    torch.manual_seed(config.seed)
    start = {k: v.clone() for k, v in t5.T5(model_config).state_dict().items()}
    model, _ = span_pretraining.pretrain_t5(
        stream, model_config, [22, 23, 24, 25], config, stop_at=stop_at
    )
    end = model.state_dict()
    return {k: (end[k] - start[k]).abs().max().item() for k in end}


def test_pretrain_t5_moves_the_bias_tables_at_their_own_rate():
    """``bias_lr_scale`` reaches the optimiser: over the same few steps the relative-bias
    tables travel about that many times farther, the other weights about as far."""
    small = dict(d_model=32, n_heads=2, d_ff=64)
    moved = {scale: _t5_moved(3, bias_lr_scale=scale, **small) for scale in (1.0, 30.0)}
    bias = "encoder_bias.embedding.weight"
    assert moved[30.0][bias] > 10 * moved[1.0][bias]
    ff = "encoder.layers.0.ff.up_proj.weight"
    assert moved[30.0][ff] < 2 * moved[1.0][ff]


def test_pretrain_t5_scale_steps_reaches_the_optimiser():
    """AdamW's first step moves every weight by about the step size: with scale_steps
    the embedding's is sqrt(d_model) times a key projection's, W_Q's 1/sqrt(d_k)."""
    wide = dict(d_model=64, n_heads=4, d_ff=256)
    moved = {on: _t5_moved(1, scale_steps=on, **wide) for on in (False, True)}
    k, q = "encoder.layers.0.attn.k_proj.weight", "encoder.layers.0.attn.q_proj.weight"
    assert moved[True]["tok_emb.weight"] / moved[True][k] == pytest.approx(8, rel=0.05)
    assert moved[True][q] / moved[True][k] == pytest.approx(0.25, rel=0.05)
    assert moved[False][q] / moved[False][k] == pytest.approx(1, rel=0.05)


def test_init_lr_scales_make_every_step_relative_to_its_tensor():
    """Each weight tensor's multiple is its initial RMS over 1/sqrt(d_model), so lr x
    multiple / RMS is the same for every tensor (Adafactor's relative step); the
    relative-bias tables are left to bias_lr_scale."""
    config = t5.T5Config(vocab_size=300, d_model=64, n_layers=2, n_heads=4, d_ff=256)
    model = t5.T5(config)
    scales = span_pretraining.init_lr_scales(model)
    for name, p in model.named_parameters():
        if "_bias." in name:
            assert name not in scales, name
            continue
        rms = p.detach().pow(2).mean().sqrt().item()
        assert abs(rms / scales.get(name, 1.0) * 64**0.5 - 1) < 0.1, name
    assert scales["tok_emb.weight"] == 8.0  # sqrt(64): the embedding, std 1
    assert scales["decoder.final_norm.weight"] == 8.0  # gamma = 1
    assert scales["encoder.layers.0.attn.q_proj.weight"] == 0.25  # 1/sqrt(d_k = 16)
    assert scales["decoder.layers.1.ff.down_proj.weight"] == 0.5  # sqrt(64 / 256)
