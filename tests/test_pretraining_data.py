"""pretraining_data: the corpora the bert and t5 families pre-train on, and T5's
held-out windows (dev for choices, test for reports)."""

import pytest
import torch

from transformer_book import baselines, pretraining_data, t5


def test_t5_dev_windows_are_not_the_test_windows():
    atis = pretraining_data.atis_words()
    dev = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4, split="dev")
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=4)
    assert len(dev) == 2 and all(len(s) == 4 for s, _ in dev)
    assert len(atis.dev) > 5000  # ATIS's 500 dev queries, about 11 words each
    assert not torch.equal(dev[0][0], test[0][0])
    with pytest.raises(ValueError, match="'train'"):
        pretraining_data.t5_heldout(atis, 16, split="train")


def test_t5_bigram_k_is_chosen_on_dev_and_scored_beside_add_one():
    atis = pretraining_data.atis_words()
    k, by_k = pretraining_data.t5_bigram_k(atis, 16)
    dev = pretraining_data.t5_heldout(atis, 16, split="dev")
    left, hidden = pretraining_data.left_pairs(atis, dev)
    assert (
        by_k == baselines.choose_bigram_k(atis.train, len(atis.words), left, hidden)[1]
    )
    assert (
        k == min(by_k, key=by_k.get) and by_k[k] < by_k[1.0] - 0.3
    )  # add-one: too smooth
    config = t5.T5Config(len(atis.words), 16, 1, 2, 32, pad_id=0, eos_id=atis.eos)
    model = t5.T5(config)  # untrained: the baselines do not depend on the model
    test = pretraining_data.t5_heldout(atis, 16, n_batches=2, batch_size=8)
    plain = pretraining_data.t5_scores(model, atis, test)
    tuned = pretraining_data.t5_scores(model, atis, test, k)
    assert "tuned_bigram_nats" not in plain and tuned["tuned_bigram_k"] == k
    assert {key: tuned[key] for key in plain} == plain  # add-one numbers kept
    bigram = baselines.bigram_log_probs(atis.train, len(atis.words), k)
    t_left, t_hidden = pretraining_data.left_pairs(atis, test)
    assert len(t_hidden) == plain["hidden_words"]
    assert tuned["tuned_bigram_nats"] == baselines.bigram_loss(bigram, t_left, t_hidden)
    assert tuned["tuned_bigram_nats"] < plain["bigram_nats"]
