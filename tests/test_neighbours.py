"""transformer_book.neighbours: the lookup task's inputs and targets, the model's
shapes, and a trained pair of heads that splits the two lookups."""

import pytest
import torch

from transformer_book import neighbours


def test_inputs_are_one_hot_token_then_position_and_targets_are_rolled():
    x, (before, after, two_back) = neighbours.make_batch(
        3, torch.Generator().manual_seed(0), offsets=(-1, +1, -2)
    )
    tokens = x[..., : neighbours.N_TOKENS].argmax(-1)  # (B, T)
    assert x.shape == (3, neighbours.LENGTH, neighbours.N_TOKENS + neighbours.LENGTH)
    assert (x.sum(-1) == 2).all()  # one token and one position per vector
    torch.testing.assert_close(
        x[..., neighbours.N_TOKENS :].argmax(-1),
        torch.arange(neighbours.LENGTH).expand(3, -1),
    )
    for i in range(neighbours.LENGTH):
        assert torch.equal(before[:, i], tokens[:, (i - 1) % neighbours.LENGTH])
        assert torch.equal(after[:, i], tokens[:, (i + 1) % neighbours.LENGTH])
        assert torch.equal(two_back[:, i], tokens[:, (i - 2) % neighbours.LENGTH])


def test_one_hot_inputs_rejects_a_wrong_length():
    with pytest.raises(
        ValueError, match=r"tokens must have shape \(B, 8\), got \(2, 5\)"
    ):
        neighbours.one_hot_inputs(torch.zeros(2, 5, dtype=torch.long))


def test_weight_at_reads_the_diagonal_at_an_offset():
    T = 5
    w = torch.zeros(1, 2, T, T)
    i = torch.arange(T)
    w[0, 0, i, (i - 1) % T] = 1  # head 0 looks one back
    w[0, 1, i, (i + 2) % T] = 1  # head 1 looks two ahead
    torch.testing.assert_close(neighbours.weight_at(w, -1), torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(neighbours.weight_at(w, +2), torch.tensor([0.0, 1.0]))


def test_two_heads_learn_the_two_lookups():
    model, history, accuracy, w = neighbours.train_neighbours(
        neighbours.make_batch, seed=0, steps=150
    )
    assert history[-1] < history[0] / 10
    assert min(accuracy) > 0.95
    assert w.shape == (1000, 2, neighbours.LENGTH, neighbours.LENGTH)
    prev, nxt = neighbours.weight_at(w, -1), neighbours.weight_at(w, +1)
    assert prev.argmax() != nxt.argmax() and min(prev.max(), nxt.max()) > 0.5
