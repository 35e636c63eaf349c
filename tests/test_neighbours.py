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


def test_input_gradient_reaches_the_receptive_field():
    for w, L in ((3, 1), (5, 2), (4, 3)):
        g = neighbours.input_gradient([w] * L, T=24)
        assert g.shape == (24,) and int((g > 0).sum()) == L * (w - 1) + 1
        assert (g[-(L * (w - 1) + 1) :] > 0).all()  # the last positions, contiguous
    assert int((neighbours.input_gradient([3, None], T=24) > 0).sum()) == 24
    assert torch.equal(neighbours.input_gradient([3], seed=1),
                       neighbours.input_gradient([3], seed=1))  # fmt: skip


def test_copy_batch_targets_the_token_offset_places_back():
    ids, near, far = neighbours.copy_batch(3, torch.Generator().manual_seed(0), 16, 32)
    assert ids.shape == near.shape == far.shape == (3, 32) and ids.max() < 16
    assert (near[:, :4] == neighbours.IGNORE).all() and (far[:, :16] == -100).all()
    assert torch.equal(near[:, 4:], ids[:, :-4]) and torch.equal(
        far[:, 16:], ids[:, :-16]
    )
    (only,) = neighbours.copy_batch(1, torch.Generator(), 5, 10, offsets=(2,))[1:]
    assert (only[:, :2] == -100).all() and (only[:, 2:] >= 0).all()


def test_copy_model_loss_and_accuracy():
    torch.manual_seed(0)
    model = neighbours.CopyModel([4, None], vocab_size=16, d_model=32, n_heads=4)
    batch = neighbours.copy_batch(8, torch.Generator().manual_seed(1), 16, 32)
    logits = model(batch[0])
    assert logits.shape == (8, 32, 2, 16)
    keep = batch[2] != -100  # the far target by hand, against the summed loss
    far = torch.nn.functional.cross_entropy(logits[:, :, 1][keep], batch[2][keep])
    near_keep = batch[1] != -100
    near = torch.nn.functional.cross_entropy(
        logits[:, :, 0][near_keep], batch[1][near_keep]
    )
    torch.testing.assert_close(neighbours.copy_loss(model, batch), near + far)
    guess = logits.argmax(-1)
    accs = neighbours.copy_accuracy(model, batch)
    assert accs[1] == (guess[..., 1][keep] == batch[2][keep]).float().mean().item()
    assert len(accs) == 2 and all(0 <= a <= 1 for a in accs)


def test_train_copy_learns_the_near_token_within_the_window():
    gen = torch.Generator().manual_seed(0)
    batches = [neighbours.copy_batch(32, gen, 8, 16, offsets=(2,)) for _ in range(150)]
    test = neighbours.copy_batch(256, torch.Generator().manual_seed(9), 8, 16, (2,))
    model = neighbours.train_copy([4, 4], 0, batches, 150, 5e-3, 8, 32, 4)
    assert neighbours.copy_accuracy(model, test)[0] > 0.9  # chance: 1/8
    again = neighbours.train_copy([4, 4], 0, batches, 150, 5e-3, 8, 32, 4)
    assert neighbours.copy_accuracy(again, test) == neighbours.copy_accuracy(
        model, test
    )


def test_gradient_by_distance_reverses_input_gradient_and_reads_the_far_edge():
    back, edge = neighbours.gradient_by_distance(3, depths=(1, 2), seeds=(0,), T=12)
    g = neighbours.input_gradient([3, 3], T=12, seed=0)
    torch.testing.assert_close(back[2, 0], g.flip(0))
    assert int((back[2, 0] > 0).sum()) == 2 * (3 - 1) + 1  # the receptive field
    assert edge[2] == [pytest.approx((g[-5] / g[-1]).item())]  # 4 back, against 0
    with pytest.raises(ValueError, match="within T=12"):
        neighbours.gradient_by_distance(5, depths=(3,), seeds=(0,), T=12)


def test_seed_table_reads_each_runs_best_heads_and_offset_lines_each_head():
    w = torch.zeros(1, 2, neighbours.LENGTH, neighbours.LENGTH)  # (B, H, T, T)
    i = torch.arange(neighbours.LENGTH)
    w[0, 1, i, (i - 1) % neighbours.LENGTH] = 1.0  # head 1 looks back
    w[0, 0, i, (i + 1) % neighbours.LENGTH] = 0.75  # head 0 looks ahead
    best, heads, lines = neighbours.seed_table([(None, [2.0, 0.1], [1.0, 0.5], w)])
    torch.testing.assert_close(best, torch.tensor([[1.0, 0.5, 1.0, 0.75]]))
    assert heads == [(1, 0)] and len(lines) == 2 and lines[1].endswith("| 1, 0")
    assert neighbours.offset_lines(w, [-1]) == ["weight on i-1, per head: [0. 1.]"]
    with pytest.raises(ValueError, match="runs"):
        neighbours.seed_table([])
    with pytest.raises(ValueError, match="w must"):
        neighbours.offset_lines(w[0], [1])
