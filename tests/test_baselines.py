"""transformer_book.baselines: unigram, bigram and majority-class baselines, checked
against counts done by hand and against the cross-entropy of the model they define."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_book import baselines

STREAM = [0, 1, 0, 1, 0, 2]  # V = 4: id 3 never occurs


def test_unigram_is_add_k_frequency():
    lp = baselines.unigram_log_probs(STREAM, 4, k=1.0)
    expected = torch.tensor([4, 3, 2, 1], dtype=torch.float64) / 10  # (c + 1) / (6 + 4)
    torch.testing.assert_close(lp.exp().double(), expected, rtol=1e-6, atol=0)
    assert math.isclose(
        baselines.unigram_loss(lp, [0, 3]),
        -(math.log(0.4) + math.log(0.1)) / 2,
        rel_tol=1e-6,
    )


def test_unigram_excluded_ids_get_no_mass():
    lp = baselines.unigram_log_probs(STREAM, 4, exclude=[3])
    assert lp[3] == float("-inf") and math.isclose(
        lp.exp().sum().item(), 1.0, rel_tol=1e-6
    )
    assert math.isclose(lp[0].exp().item(), 4 / 9, rel_tol=1e-6)


def test_bigram_rows_are_conditional_distributions():
    lp = baselines.bigram_log_probs(STREAM, 4, k=0.5)
    torch.testing.assert_close(lp.exp().sum(dim=1), torch.ones(4))
    # after 0 come 1, 1, 2: p(1 | 0) = (2 + 0.5) / (3 + 0.5·4)
    assert math.isclose(lp[0, 1].exp().item(), 2.5 / 5, rel_tol=1e-6)
    assert math.isclose(lp[3, 2].exp().item(), 0.25, rel_tol=1e-6), (
        "unseen row: uniform"
    )


def test_bigram_loss_is_the_cross_entropy_of_its_table():
    torch.manual_seed(0)
    stream = torch.randint(0, 7, (500,))
    lp = baselines.bigram_log_probs(stream[:400], 7, k=0.1)
    held = stream[400:]
    mine = baselines.bigram_loss(lp, held[:-1], held[1:])
    ref = F.cross_entropy(lp[held[:-1]], held[1:]).item()  # rows are log-probabilities
    assert math.isclose(mine, ref, rel_tol=1e-5)


def test_a_bigram_beats_a_unigram_on_a_predictable_stream():
    stream = torch.tensor([0, 1, 2, 3] * 100)  # each token fixes the next
    uni = baselines.unigram_loss(baselines.unigram_log_probs(stream, 4), stream)
    big = baselines.bigram_loss(
        baselines.bigram_log_probs(stream, 4, k=0.01), stream[:-1], stream[1:]
    )
    assert math.isclose(uni, math.log(4), rel_tol=1e-4) and big < 0.05


def test_choose_bigram_k_picks_the_lowest_dev_loss():
    torch.manual_seed(0)
    # a sparse, predictable stream: each token is followed by one of two successors,
    # so add-one (which spreads mass over all 50) is far worse than a small k
    nxt = torch.randint(0, 50, (50, 2))
    s = [0]
    for i in range(3000):
        s.append(int(nxt[s[-1], i % 2]))
    stream = torch.tensor(s)
    train, dev = stream[:2000], stream[2000:]
    k, by_k = baselines.choose_bigram_k(
        train, 50, dev[:-1], dev[1:], ks=(1.0, 0.1, 0.01)
    )
    assert list(by_k) == [1.0, 0.1, 0.01] and k == min(by_k, key=by_k.get)
    assert k == 0.01 and by_k[k] < by_k[1.0] - 0.1
    ref = baselines.bigram_loss(
        baselines.bigram_log_probs(train, 50, 0.1), dev[:-1], dev[1:]
    )
    assert math.isclose(by_k[0.1], ref, rel_tol=1e-12)
    with pytest.raises(ValueError, match="ks is empty"):
        baselines.choose_bigram_k(train, 50, dev[:-1], dev[1:], ks=())


def test_window_losses_score_every_target_of_the_windows():
    stream = torch.tensor([0, 1, 2, 3] * 100)
    x, y = stream[:-1].view(3, 133), stream[1:].view(3, 133)  # targets: shifted by one
    got = baselines.window_losses(stream, [(x[:2], y[:2]), (x[2:], y[2:])], 4)
    uni = baselines.unigram_loss(baselines.unigram_log_probs(stream, 4), stream[1:])
    bi = baselines.bigram_loss(
        baselines.bigram_log_probs(stream, 4), stream[:-1], stream[1:]
    )
    assert got == pytest.approx({"unigram": uni, "bigram": bi})
    assert got["bigram"] < got["unigram"]
    with pytest.raises(ValueError, match="batches must hold at least one"):
        baselines.window_losses(stream, [], 4)
    with pytest.raises(ValueError, match="batches must pair inputs and targets"):
        baselines.window_losses(stream, [(x, y[:, :-1])], 4)


def test_majority():
    assert baselines.majority_class(["a", "b", "b"]) == "b"
    assert baselines.majority_accuracy(["a", "b", "b"], ["b", "a", "b", "b"]) == 0.75


def test_bad_input_is_named():
    with pytest.raises(
        ValueError, match=r"train_ids must hold ids in \[0, vocab_size=3\)"
    ):
        baselines.unigram_log_probs([0, 5], 3)
    with pytest.raises(ValueError, match="must hold integer token ids"):
        baselines.unigram_log_probs(torch.ones(3), 3)
    with pytest.raises(ValueError, match="k .* must be > 0, got 0"):
        baselines.bigram_log_probs([0, 1], 2, k=0)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        baselines.bigram_log_probs([1], 2)
    with pytest.raises(ValueError, match=r"log_probs must be \(V, V\)"):
        baselines.bigram_loss(torch.zeros(3), [0], [1])
    with pytest.raises(
        ValueError, match="left and targets must be non-empty and alike"
    ):
        baselines.bigram_loss(torch.zeros(3, 3), [0, 1], [1])
    with pytest.raises(ValueError, match="train_labels is empty"):
        baselines.majority_class([])
