"""transformer_book.deep_taggers: chapter 6's deep tagger and its tagging task
(numbering, padding, unseen tags, its prior)."""

import math

import pytest
import torch

from transformer_book import classifiers, deep_taggers
from transformer_book.classifiers import ClassifierConfig, WordTagger


def test_deep_tagger_is_the_seeded_tagger_with_its_encoder_replaced():
    from transformer_book.blocks import Encoder
    from transformer_book.norms import RMSNorm

    torch.manual_seed(3)  # chapter 6's old inline construction, the same draws
    cfg = ClassifierConfig(
        30, 7, max_len=64, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0
    )
    ref = WordTagger(cfg)
    ref.body.encoder = Encoder(5, 16, 2, 32, norm_first=True, norm="layer")
    model = deep_taggers.deep_tagger(
        30, 7, 5, True, seed=3, d_model=16, n_heads=2, d_ff=32, pad_id=0
    )
    assert len(model.body.encoder.layers) == 5
    for (name, p), (ref_name, q) in zip(
        model.state_dict().items(), ref.state_dict().items(), strict=True
    ):
        assert name == ref_name
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    ids = torch.randint(1, 30, (2, 6))
    assert model(ids).shape == (2, 6, 7)
    rms = deep_taggers.deep_tagger(
        30, 7, 2, False, "rms", d_model=16, n_heads=2, d_ff=32
    )
    assert isinstance(rms.body.encoder.layers[0].norm1, RMSNorm)
    other = deep_taggers.deep_tagger(
        30, 7, 5, True, seed=4, d_model=16, n_heads=2, d_ff=32
    )
    w_other, w = (m.body.encoder.layers[0].ff.up_proj.weight for m in (other, model))
    assert not torch.equal(w_other, w)  # the seed draws the weights


def _splits():
    from transformer_book.data import SlotIntentSplit

    train = SlotIntentSplit(
        sentences=[["fly", "to", "boston"], ["to", "denver"], ["fly"]],
        tags=[["O", "O", "B-to"], ["O", "B-to"], ["O"]],
        intents=["flight"] * 3,
    )
    dev = SlotIntentSplit(
        sentences=[["fly", "to", "paris"], ["fly", "now"]],
        tags=[["O", "O", "B-to"], ["O", "B-time"]],  # B-time: never seen in training
        intents=["flight"] * 2,
    )
    return train, dev


def test_tagging_task_numbers_pads_and_ignores_unseen_tags():
    task = deep_taggers.tagging_task(*_splits())
    IGNORE = -100
    assert task.train_ids.shape == task.train_tags.shape == (3, 3)
    assert task.train_lengths.tolist() == [3, 2, 1]
    assert task.train_tags[1, 2] == IGNORE and task.train_ids[1, 2] == task.words.pad_id
    assert task.dev_ids[0, 2] == task.words.unk_id  # "paris": never seen in training
    assert task.dev_tags[1, :2].tolist() == [task.tags.stoi["O"], IGNORE]
    assert task.unseen == 1
    ids, tags = task.probe(2)
    assert ids.shape == tags.shape == (2, 3)
    x, y = next(iter(task.dev_batches(batch_size=8)))
    assert x.shape == y.shape == (2, 3)
    assert sum(len(x) for x, _ in task.train_batches(2, seed=0)) == 3


def test_tagging_task_prior_is_the_add_one_unigram_loss():
    task = deep_taggers.tagging_task(*_splits())
    # training tags: O ×4, B-to ×2 -> add-one: p(O) = 5/8, p(B-to) = 3/8
    p = {"O": 5 / 8, "B-to": 3 / 8}
    scored = ["O", "O", "B-to", "O"]  # the dev tokens with a tag seen in training
    expected = -sum(math.log(p[t]) for t in scored) / len(scored)
    assert task.prior_loss() == pytest.approx(expected)


def test_tagging_task_dev_loss_is_the_mean_token_loss_or_inf_after_divergence():
    task = deep_taggers.tagging_task(*_splits())
    model = deep_taggers.deep_tagger(len(task.words), len(task.tags), 1, True,
                                     d_model=8, n_heads=2, d_ff=16)  # fmt: skip
    expected = classifiers.mean_token_loss(model, task.dev_batches())
    assert task.dev_loss(model) == pytest.approx(expected)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))  # as after a diverged run
    assert task.dev_loss(model) == math.inf


def test_tagging_task_rejects_bad_splits():
    train, dev = _splits()
    train.tags[0] = ["O", "O"]
    with pytest.raises(ValueError, match="sentence 0 has 3 words but 2 tags"):
        deep_taggers.tagging_task(train, dev)
    with pytest.raises(ValueError, match="n must be in 1..3"):
        deep_taggers.tagging_task(*_splits()).probe(4)


# --- chapter 6: reading the runs ---------------------------------------------------
