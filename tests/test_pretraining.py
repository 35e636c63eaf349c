"""pretraining: the fixed review split, pre-training batches, held-out metrics and the
small pre-training run that chapters 11-13 re-create (chapter 11)."""

import math

import pytest
import torch

from transformer_book import bert, data, pretraining
from transformer_book.tokenizer import WordPiece


def test_pretrain_small_learns_and_is_reproducible():
    from transformer_book import data

    texts = data.load_rt_polarity()[0][:600]
    tok = WordPiece.train(texts, 300)
    kwargs = dict(
        tokenizer=tok, d_model=32, n_heads=2, d_ff=64, batch_size=16, steps=40
    )
    state = torch.random.get_rng_state()
    a = pretraining.pretrain_small(texts, seed=0, **kwargs)
    assert torch.equal(state, torch.random.get_rng_state()), "the caller's RNG is left"
    b = pretraining.pretrain_small(texts, seed=0, **kwargs)
    assert a.loss == b.loss
    assert len(a.loss) == len(a.mlm_loss) == len(a.nsp_loss) == 40
    assert sum(a.mlm_loss[-10:]) / 10 < sum(a.mlm_loss[:5]) / 5 - 0.25
    docs = [pretraining.word_pieces_by_word(tok, t) for t in texts]
    c = pretraining.pretrain_small(texts, seed=0, docs=docs, **kwargs)  # cut once
    assert c.loss == a.loss
    with pytest.raises(ValueError, match="one entry per text"):
        pretraining.pretrain_small(texts, seed=0, docs=docs[:-1], **kwargs)
    with pytest.raises(ValueError, match="tokenizer"):
        pretraining.pretrain_small(texts, docs=docs, steps=1)
    metrics = pretraining.pretraining_metrics(a.model, tok, texts[:256], batch_size=64)
    assert set(metrics) == {"mlm_loss", "mlm_accuracy", "nsp_accuracy"}
    assert 0.0 <= metrics["mlm_accuracy"] <= 1.0


def test_pretraining_batches():
    texts = ["the cat sat on the mat", "a dog ran", "birds fly south in winter"] * 10
    tok = WordPiece.train(texts, 40)
    docs = [pretraining.word_pieces_by_word(tok, t) for t in texts]
    batch = next(pretraining.pretraining_batches(tok, docs, batch_size=8, max_len=10))
    B, T = batch["ids"].shape
    assert B == 8 and T <= 10
    assert batch["labels"].shape == (B, T) and batch["is_next"].shape == (B,)
    assert (batch["ids"][:, 0] == tok.cls_id).all()  # [CLS] is never masked
    sep_per_row = (batch["ids"] == tok.sep_id).sum(dim=1)
    assert (sep_per_row >= 2).all()  # two segments (a masked token may become [SEP])
    with pytest.raises(ValueError, match="batch_size"):
        next(pretraining.pretraining_batches(tok, docs[:3], batch_size=8, max_len=10))


def test_review_split_is_disjoint_and_fixed():
    split = pretraining.review_split()
    sizes = {k: len(v[0]) for k, v in split.items()}
    assert sizes == {"train": 8662, "test": 1000, "dev": 1000}
    assert all(len(texts) == len(labels) for texts, labels in split.values())
    train, dev, test = (set(split[k][0]) for k in ("train", "dev", "test"))
    assert not train & test and not train & dev and not dev & test  # no review twice
    assert pretraining.review_split()["test"] == split["test"]
    assert 400 < sum(split["test"][1]) < 600  # both labels in the test part


def test_pretraining_metrics_of_an_untrained_model():
    texts = data.load_rt_polarity()[0][:300]
    tok = WordPiece.train(texts, 200)
    torch.manual_seed(0)
    config = bert.BertConfig(
        vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32
    )
    model = bert.BertForPreTraining(config)
    a = pretraining.pretraining_metrics(model, tok, texts, 32, batch_size=64, seed=1)
    b = pretraining.pretraining_metrics(model, tok, texts, 32, batch_size=64, seed=1)
    assert a == b  # one fixed draw of pairs and masks
    # weights of scale 0.02 give near-uniform scores: the loss of a uniform guess, ln V
    assert abs(a["mlm_loss"] - math.log(len(tok))) < 0.1
    assert 0.0 <= a["mlm_accuracy"] < 0.2 and 0.2 < a["nsp_accuracy"] < 0.8
    no_nsp = pretraining.pretraining_metrics(
        model, tok, texts, 32, batch_size=64, seed=1, nsp=False
    )
    assert math.isnan(no_nsp["nsp_accuracy"])
