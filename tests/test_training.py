"""transformer_book.training: the schedule, the loop, the progress bar's switch."""

import math

import pytest
import torch
from torch import nn

from transformer_book import training


def test_warmup_then_constant():
    f = [training.lr_factor(s, 10, warmup=4) for s in range(10)]
    assert f[:4] == [0.25, 0.5, 0.75, 1.0] and f[4:] == [1.0] * 6


@pytest.mark.parametrize("decay", ["linear", "cosine"])
def test_decay_reaches_min_factor_at_the_last_step(decay):
    f = [
        training.lr_factor(s, 20, warmup=5, decay=decay, min_factor=0.1)
        for s in range(20)
    ]
    assert f[4] == 1.0 and math.isclose(f[5], 1.0) and math.isclose(f[-1], 0.1)
    assert all(a >= b for a, b in zip(f[4:], f[5:])), (
        "the rate only falls after warm-up"
    )


def test_cosine_is_halfway_in_the_middle():
    assert math.isclose(training.lr_factor(5, 11, decay="cosine"), 0.5)


def test_bad_schedule_named():
    with pytest.raises(ValueError, match="decay must be one of .* got 'step'"):
        training.lr_factor(0, 10, decay="step")
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        training.train(nn.Linear(1, 1), [None], lambda m, b: None, steps=0)


def regression_problem():
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    return nn.Linear(3, 1), [(x[i : i + 16], y[i : i + 16]) for i in range(0, 64, 16)]


def mse(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def test_train_fits_a_linear_map_and_calls_back():
    model, batches = regression_problem()
    seen = []
    history = training.train(
        model,
        batches,
        mse,
        steps=300,
        lr=0.05,
        warmup=10,
        decay="cosine",
        progress=False,
        on_step=lambda s, loss: seen.append(s),
    )
    assert len(history) == 300 and seen == list(range(300))
    assert history[-1] < 1e-3 < history[0], "the loss falls on a problem it can solve"
    assert not model.training, "the model is left in eval mode"


def test_a_diverging_run_is_recorded_not_raised():
    model, batches = regression_problem()
    history = training.train(
        model, batches, mse, steps=40, lr=1e30, clip=0, progress=False
    )
    assert len(history) == 40 and not math.isfinite(history[-1])


def test_progress_switch(monkeypatch, capsys):
    monkeypatch.setenv(training.PROGRESS_ENV, "0")
    assert not training.progress_enabled()
    assert training.progress_enabled(True)
    monkeypatch.setenv(training.PROGRESS_ENV, "1")
    assert training.progress_enabled() and not training.progress_enabled(False)
    model, batches = regression_problem()
    training.train(model, batches, mse, steps=3, progress=True)
    assert "training" in capsys.readouterr().err, "the bar is drawn on stderr"
    monkeypatch.setenv(training.PROGRESS_ENV, "0")
    training.train(model, batches, mse, steps=3)
    assert capsys.readouterr().err == "", "no bar where the pipeline turned it off"
