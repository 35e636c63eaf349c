"""pretraining: the one pre-training recipe and its frozen config, the MLM + NSP loss,
and held-out metrics (chapters 11 and 13)."""

import dataclasses
import math

import pytest
import torch

from transformer_book import baselines, bert, data, masked_lm, pretraining, t5
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

TINY = pretraining.PretrainConfig(
    vocab_size=300, d_model=32, n_heads=2, d_ff=64, batch_size=16, steps=40
)


def test_pretrain_learns_and_is_reproducible():
    texts = data.load_rt_polarity()[0][:600]
    tok = WordPiece.train(texts, 300)
    state = torch.random.get_rng_state()
    a = pretraining.pretrain(texts, TINY, tok)
    assert torch.equal(state, torch.random.get_rng_state()), "the caller's RNG is left"
    b = pretraining.pretrain(texts, TINY, tok)
    assert a.loss == b.loss
    assert len(a.loss) == len(a.mlm_loss) == len(a.nsp_loss) == 40
    assert sum(a.mlm_loss[-10:]) / 10 < sum(a.mlm_loss[:5]) / 5 - 0.25
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in texts]
    c = pretraining.pretrain(texts, TINY, tok, docs=docs)  # cut once
    assert c.loss == a.loss
    with pytest.raises(ValueError, match="one entry per text"):
        pretraining.pretrain(texts, TINY, tok, docs=docs[:-1])
    with pytest.raises(ValueError, match="tokenizer"):
        pretraining.pretrain(texts, TINY, docs=docs)
    metrics = pretraining.pretraining_metrics(a.model, tok, texts[:256], batch_size=64)
    assert set(metrics) == {"mlm_loss", "mlm_accuracy", "nsp_accuracy"}
    assert 0.0 <= metrics["mlm_accuracy"] <= 1.0


@pytest.mark.parametrize("masking, nsp", [("static", False), ("dynamic", True)])
def test_each_recipe_lowers_the_held_out_loss(masking, nsp):
    texts = data.load_rt_polarity()[0][:256]
    tok = WordPiece.train(texts, 200)
    config = dataclasses.replace(
        TINY, d_model=16, d_ff=32, max_len=16, batch_size=8, nsp=nsp, masking=masking
    )
    before = pretraining.pretrain(
        texts, dataclasses.replace(config, steps=1, lr=1e-9), tok
    )
    after = pretraining.pretrain(texts, dataclasses.replace(config, steps=80), tok)
    m0 = pretraining.pretraining_metrics(before.model, tok, texts, 16, 8, nsp=False)
    m1 = pretraining.pretraining_metrics(after.model, tok, texts, 16, 8, nsp=False)
    assert m1["mlm_loss"] < m0["mlm_loss"] - 0.5


def test_config_is_frozen_and_checks_its_recipe():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TINY.steps = 2
    with pytest.raises(ValueError, match="masking must be one of"):
        pretraining.PretrainConfig(masking="sometimes")
    with pytest.raises(ValueError, match="static.*nsp=False"):
        pretraining.PretrainConfig(masking="static")
    with pytest.raises(ValueError, match="steps must be positive, got 0"):
        pretraining.PretrainConfig(steps=0)
    tok = WordPiece([*SPECIAL_TOKENS, "a"])
    assert TINY.bert_config(tok).vocab_size == len(tok)


def test_pretraining_loss_adds_its_parts():
    tok = WordPiece([*SPECIAL_TOKENS, "a", "b", "c"])
    config = bert.BertConfig(
        vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=16
    )
    model = bert.BertForPreTraining(config).eval()
    batch = tok.encode_batch([("a b", "c"), ("b", "a c a")])
    batch["labels"] = torch.full_like(batch["ids"], -100)
    batch["labels"][:, 1] = batch["ids"][:, 1]
    batch["is_next"] = torch.tensor([masked_lm.IS_NEXT, masked_lm.NOT_NEXT])
    total, mlm, nsp = pretraining.pretraining_loss(model, batch)
    torch.testing.assert_close(total, mlm + nsp)
    _, _, no_nsp = pretraining.pretraining_loss(model, batch, nsp=False)
    assert no_nsp.item() == 0.0


def _untrained(n_texts: int):
    """rt-polarity's first n_texts reviews, a 200-piece WordPiece learnt on them and an
    untrained BertForPreTraining of width 16 (seed 0)."""
    texts = data.load_rt_polarity()[0][:n_texts]
    tok = WordPiece.train(texts, 200)
    torch.manual_seed(0)
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32
    )
    return texts, tok, bert.BertForPreTraining(config)


def test_pretraining_metrics_of_an_untrained_model():
    texts, tok, model = _untrained(300)
    a = pretraining.pretraining_metrics(model, tok, texts, 32, batch_size=64, seed=1)
    b = pretraining.pretraining_metrics(model, tok, texts, 32, batch_size=64, seed=1)
    assert a == b  # one fixed draw of pairs and masks
    uniform = torch.full(
        (len(tok),), -math.log(len(tok))
    )  # a "unigram" of equal counts
    c = pretraining.pretraining_metrics(
        model, tok, texts, 32, 64, seed=1, unigram=uniform
    )
    assert {k: c[k] for k in a} == a  # the same masks and pairs
    assert c["unigram_mlm_loss"] == pytest.approx(math.log(len(tok)))
    assert 0.3 < c["is_next_share"] < 0.7
    # weights of scale 0.02 give near-uniform scores: the loss of a uniform guess, ln V
    assert abs(a["mlm_loss"] - math.log(len(tok))) < 0.1
    assert 0.0 <= a["mlm_accuracy"] < 0.2 and 0.2 < a["nsp_accuracy"] < 0.8
    no_nsp = pretraining.pretraining_metrics(
        model, tok, texts, 32, batch_size=64, seed=1, nsp=False
    )
    assert math.isnan(no_nsp["nsp_accuracy"])


def test_nsp_is_learnt_when_the_pairs_tell_it():
    """Next-sentence prediction works when the data make it possible: each text stays
    within one of 40 disjoint topics (a vocabulary of 6 words each), so a random
    second half comes from another topic 39 times in 40. The model must reach 0.95 on
    held-out pairs: where NSP stays near chance on real text (chapter 11), the pairs
    do not tell it, the code is not broken."""
    gen = torch.Generator().manual_seed(0)
    topics = [[f"t{k}w{i}" for i in range(6)] for k in range(40)]

    def texts(n):
        picks = torch.randint(40, (n,), generator=gen).tolist()
        return [" ".join(topics[k][int(i)] for i in torch.randint(6, (12,),
                generator=gen)) for k in picks]  # fmt: skip

    train_texts, held_out = texts(2000), texts(400)
    tok = WordPiece([*SPECIAL_TOKENS, *(w for t in topics for w in t)])
    config = pretraining.PretrainConfig(
        vocab_size=len(tok), d_model=32, n_layers=2, n_heads=2, d_ff=64, max_len=32,
        batch_size=32, steps=800, lr=3e-3,
    )  # fmt: skip
    # measured: 0.83 after 300 steps, 0.9875 after 800 (the ceiling: a negative from
    # the same topic, 1 pair in 80, cannot be told apart); about 20 CPU-seconds
    model = pretraining.pretrain(train_texts, config, tok).model
    metrics = pretraining.pretraining_metrics(model, tok, held_out, 32, 400, seed=1)
    assert metrics["nsp_accuracy"] >= 0.95, metrics


def test_pretrain_t5_learns_and_is_reproducible():
    stream = torch.arange(200).remainder(20) + 2  # a periodic text of ids 2..21
    config = pretraining.SpanPretrainConfig(
        d_model=32, n_layers=1, n_heads=2, d_ff=64, window=16, batch_size=16, steps=60,
        dropout=0.0,
    )  # fmt: skip
    model_config = config.t5_config(26, pad_id=0, eos_id=1)
    a, ha = pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config)
    _, hb = pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config)
    assert ha == hb and len(ha) == 60 and isinstance(a, t5.T5) and not a.training
    assert sum(ha[-10:]) / 10 < sum(ha[:5]) / 5 - 1.0
    _, hc = pretraining.pretrain_t5(stream, model_config, [22, 23, 24, 25], config,
                                    stop_at=10)  # fmt: skip
    assert hc == ha[:10]  # the schedule stays the whole run's
    with pytest.raises(ValueError, match="window must be >= 2"):
        pretraining.SpanPretrainConfig(window=1)
    with pytest.raises(ValueError, match="bias_lr_scale must be positive"):
        pretraining.SpanPretrainConfig(bias_lr_scale=0)


def _t5_moved(stop_at: int, **recipe) -> dict[str, float]:
    """How far each of a tiny T5's tensors moved (largest entry) in ``stop_at`` steps
    of :func:`pretraining.pretrain_t5` with ``recipe``'s changes to the config."""
    stream = torch.arange(200).remainder(20) + 2
    config = pretraining.SpanPretrainConfig(
        **{**dict(n_layers=1, window=16, batch_size=8, steps=20, dropout=0.0), **recipe}
    )
    model_config = config.t5_config(26, pad_id=0, eos_id=1)
    torch.manual_seed(config.seed)
    start = {k: v.clone() for k, v in t5.T5(model_config).state_dict().items()}
    model, _ = pretraining.pretrain_t5(
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


def test_nsp_loss_and_heldout_metrics_are_the_parts_they_name():
    texts, tok, model = _untrained(200)
    model.eval()
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in texts]
    batch = next(masked_lm.mlm_batches(tok, docs, 8, 32, nsp=True, seed=0))
    total, mlm, nsp = pretraining.pretraining_loss(model, batch)
    assert pretraining.nsp_loss(model, batch) == nsp != total
    ids = masked_lm.target_ids(tok, texts[:150])  # chapter 11's former inline unigram
    unigram = baselines.unigram_log_probs(ids, len(tok))
    inline = pretraining.pretraining_metrics(
        model, tok, texts[150:], 32, 25, seed=3, unigram=unigram
    )
    assert (
        pretraining.heldout_metrics(
            model, tok, texts[:150], texts[150:], 32, 25, seed=3
        )
        == inline
    )


def test_nsp_majority_verdict_and_table():
    assert pretraining.nsp_majority(0.6) == ("is next", 0.6)
    assert pretraining.nsp_majority(0.45) == ("not next", pytest.approx(0.55))
    assert pretraining.nsp_verdict(0.53, 0.5) == "stays near chance"
    assert pretraining.nsp_verdict(0.62, 0.5) == (
        "is 12% above the majority class, a modest margin"
    )
    metrics = {"mlm_loss": 5.0, "mlm_accuracy": 0.1, "nsp_accuracy": 0.55,
               "unigram_mlm_loss": 6.25, "unigram_mlm_accuracy": 0.05,
               "is_next_share": 0.5}  # fmt: skip
    assert pretraining.metrics_table("test reviews", metrics, "small BERT") == (
        "test reviews | MLM loss | MLM accuracy | NSP accuracy\n"
        "unigram      |    6.250 |         5.0% |        50.0% (always 'is next')\n"
        "small BERT   |    5.000 |        10.0% |        55.0%"
    )


def test_recipe_differences_name_the_changed_settings():
    recipe = pretraining.PretrainConfig(
        vocab_size=2000, d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=64
    )
    card = {k: getattr(recipe, k) for k in pretraining.RECIPE_NAMES}
    assert pretraining.recipe_differences(recipe, card) == []
    card |= {"d_model": 256, "lr": 1e-4}
    assert pretraining.recipe_differences(recipe, card) == [
        "width 64 → 256",
        f"learning rate {recipe.lr:g} → 0.0001",
    ]


def test_each_process_draws_its_own_batches_rank_0_as_one_process(monkeypatch):
    assert pretraining.process_seed(7) == 7  # one process
    monkeypatch.setattr(pretraining, "world", lambda: (0, 2))
    assert pretraining.process_seed(7) == 7  # rank 0 of two: what one process draws
    monkeypatch.setattr(pretraining, "world", lambda: (1, 2))
    assert pretraining.process_seed(7) == 8
