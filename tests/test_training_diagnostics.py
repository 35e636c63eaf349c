"""transformer_book.training_diagnostics: gradient norms before clipping, per-layer
gradient norms, weight drift."""

import pytest
import torch
from torch import nn

from transformer_book import training, training_diagnostics


def test_grad_norms_are_measured_before_clipping():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4) * 100

    def loss_fn(m, batch):
        return m(x).pow(2).mean()

    with training_diagnostics.GradNorms(model) as g:
        training.train(
            model, [None], loss_fn, 3, lr=1e-3, clip=1.0, progress=False,
            on_step=g.on_step,
        )  # fmt: skip
    assert len(g.norms) == 3 and g.norms[0] > 1.0  # clipping to 1 happened after
    torch.manual_seed(0)
    fresh = torch.nn.Linear(4, 1)  # the same initial weights as `model`
    loss_fn(fresh, None).backward()
    total = torch.nn.utils.clip_grad_norm_(fresh.parameters(), 1.0)  # before clipping
    assert abs(g.norms[0] - total.item()) < 1e-6 * total.item()


def test_grad_norms_name_a_missing_gradient():
    g = training_diagnostics.GradNorms(torch.nn.Linear(2, 1))
    with pytest.raises(ValueError, match="no gradient was recorded"):
        g.on_step(0, 0.0)


def test_weight_drift():
    a, b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    b.load_state_dict(a.state_dict())
    assert training_diagnostics.weight_drift(a, b) == 0.0
    with torch.no_grad():
        b.weight.mul_(2)
        b.bias.mul_(2)
    assert training_diagnostics.weight_drift(b, a) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="share no parameter"):
        training_diagnostics.weight_drift(a, torch.nn.Conv1d(1, 1, 1))


def test_layer_gradient_norms_match_each_layers_own_gradient():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x, y = torch.randn(5, 3), torch.randn(5, 2)

    def loss_fn(m, batch):
        return (m(batch[0]) - batch[1]).pow(2).mean()

    got = training_diagnostics.layer_gradient_norms(
        model, loss_fn, (x, y), [model[0], model[2]]
    )
    model.zero_grad()
    loss_fn(model, (x, y)).backward()
    want = [
        torch.cat([p.grad.flatten() for p in layer.parameters()]).norm()
        for layer in (model[0], model[2])
    ]
    torch.testing.assert_close(got, torch.stack(want))
    again = training_diagnostics.layer_gradient_norms(
        model, loss_fn, (x, y), [model[0]]
    )
    torch.testing.assert_close(again, got[:1])  # gradients reset, not accumulated
    with pytest.raises(ValueError, match="layers"):
        training_diagnostics.layer_gradient_norms(model, loss_fn, (x, y), [nn.Tanh()])


def test_quarter_means_average_the_first_and_the_last_quarter_of_the_layers():
    norms = torch.arange(16.0).view(2, 8)  # 2 initialisations, 8 layers: quarters of 2
    first, last = training_diagnostics.quarter_means(norms)
    torch.testing.assert_close(first, torch.tensor([0.5, 8.5]))
    torch.testing.assert_close(last, torch.tensor([6.5, 14.5]))
    first, last = training_diagnostics.quarter_means(torch.tensor([[1.0, 2, 3, 4, 9]]))
    assert first.tolist() == [1.0] and last.tolist() == [9.0]  # 5 // 4 = 1 layer each
    with pytest.raises(ValueError, match=r"L >= 4 layers, got \(2, 3\)"):
        training_diagnostics.quarter_means(torch.ones(2, 3))


def test_quarter_table_gives_the_means_their_ratio_and_its_range():
    low, high = torch.tensor([1.0, 2.0]), torch.tensor([2.0, 2.0])  # (seeds,) each
    lines = training_diagnostics.quarter_table({(False, 12): (low, high)})
    assert lines[1] == "post-norm, 12: 1.500, 2.000, 1.33 (1.00–2.00)"
