"""transformer_book.training: the schedule, the loop, the progress bar's switch, the
checkpoint options (resuming itself: tests/test_resume.py), mixed precision. The gradient
diagnostics are tests/test_training_diagnostics.py."""

import math
import os

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


def test_cooldown_ends_the_schedule_at_a_fraction_of_the_rate():
    f = [training.lr_factor(s, 12, warmup=2, cooldown=2) for s in range(12)]
    assert f[:2] == [0.5, 1.0] and f[2:10] == [1.0] * 8 and f[10:] == [0.1, 0.1]
    g = [
        training.lr_factor(
            s, 12, decay="linear", min_factor=0.2, cooldown=2, cooldown_factor=0.05
        )
        for s in range(12)
    ]
    assert math.isclose(g[9], 0.2) and g[10:] == [0.05, 0.05], (
        "the decay ends where the cool-down begins"
    )
    with pytest.raises(ValueError, match="cooldown must be in \\[0, steps=5\\), got 5"):
        training.lr_factor(0, 5, cooldown=5)


def test_to_device_moves_tensors_in_containers_and_leaves_the_rest():
    from typing import NamedTuple

    class Pair(NamedTuple):
        a: torch.Tensor
        b: list

    batch = {
        "x": torch.ones(2, dtype=torch.float64),
        "rows": [Pair(torch.ones(1), [1])],
    }
    moved = training.to_device(batch, "meta")
    assert moved["x"].device.type == "meta" and moved["x"].dtype == torch.float64
    pair = moved["rows"][0]
    assert isinstance(pair, Pair) and pair.a.device.type == "meta" and pair.b == [1]
    assert training.to_device("text", "meta") == "text"


def test_train_moves_batches_to_the_models_device(monkeypatch):
    seen = []

    def loss_fn(model, batch):
        seen.append(batch.dtype)
        return model(batch).sum()

    model = nn.Linear(2, 1).double()  # float64 stands in for another device's tensors
    with pytest.raises(TypeError, match="model must be an nn.Module, got str"):
        training.train("model", [torch.ones(1, 2)], loss_fn, steps=1)
    calls = []
    real = training.to_device
    monkeypatch.setattr(
        training, "to_device", lambda b, d: calls.append(d) or real(b, d)
    )
    training.train(model, [torch.ones(1, 2, dtype=torch.float64)], loss_fn, steps=2)
    assert calls == [torch.device("cpu")] * 2 and seen == [torch.float64] * 2


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


# --- a tiny GPT (tests/test_resume.py's too) ------------------------------------------


from transformer_book import gpt, lm_data  # noqa: E402

# a random text of 50 tokens, repeated: something a model can learn in a few steps
STREAM = torch.randint(0, 20, (50,), generator=torch.Generator().manual_seed(0)).repeat(
    60
)
RECIPE = dict(lr=3e-3, warmup=3, decay="cosine", min_lr_factor=0.1, weight_decay=0.1,
              betas=(0.9, 0.99), decay_vectors=False, progress=False)  # fmt: skip


def tiny_gpt(dropout=0.0, seed=0):
    torch.manual_seed(seed)
    return gpt.GPT(gpt.GPTConfig(20, 16, 32, 2, 4, dropout=dropout, bias=False))


def test_checkpoint_options_are_checked():
    model, batches = regression_problem()
    with pytest.raises(ValueError, match="need a checkpoint folder"):
        training.train(model, batches, mse, steps=3, resume=True)
    training.train(model, batches, mse, steps=3, stop_at=2)  # no folder needed


def test_matrices_only_weight_decay_spares_biases_and_gains():
    model = tiny_gpt()
    groups = training._param_groups(model, 0.1, decay_vectors=False)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(p.dim() >= 2 for p in groups[0]["params"])
    assert {p.dim() for p in groups[1]["params"]} == {1}
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())


def _fit(steps=200, **speed):
    model, batches = regression_problem()
    history = training.train(model, batches, mse, steps=steps, lr=0.05, **speed)
    return model, history


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_follows_the_fp32_curve(precision):
    ref, ref_history = _fit()
    model, history = _fit(precision=precision)
    if precision == "bf16":  # 8 bits of mantissa: each loss within 5 % of fp32's peak
        gaps = [abs(a - b) for a, b in zip(history[:50], ref_history[:50])]
        assert max(gaps) < 0.05 * max(ref_history[:50]), max(gaps)
    # fp16's scaler may skip the first steps (overflow while it finds its scale), so
    # its curve runs a few steps behind; both must reach the same solution
    assert history[-1] < 1e-2 and ref_history[-1] < 1e-2
    assert model.weight.dtype == torch.float32, "the weights stay fp32"
    torch.testing.assert_close(model.weight, ref.weight, atol=0.05, rtol=0)


def test_fused_adamw_takes_the_same_steps():
    ref, ref_history = _fit(steps=50)
    model, history = _fit(steps=50, fused=True)
    torch.testing.assert_close(torch.tensor(history), torch.tensor(ref_history))
    torch.testing.assert_close(model.weight, ref.weight)


def test_unfused_adamw_is_the_multi_tensor_one_with_the_loops_steps(monkeypatch):
    made = []
    adamw = torch.optim.AdamW

    def recording(*args, **kwargs):
        made.append(kwargs)
        return adamw(*args, **kwargs)

    monkeypatch.setattr(torch.optim, "AdamW", recording)
    model, history = _fit(steps=50)
    assert made[-1]["foreach"] is True and not made[-1]["fused"]
    # the per-tensor loop (torch's CPU default) takes the very same steps
    monkeypatch.setattr(
        torch.optim, "AdamW", lambda *a, **k: adamw(*a, **{**k, "foreach": False})
    )
    loop, loop_history = _fit(steps=50)
    assert history == loop_history
    assert torch.equal(model.weight, loop.weight)


def test_compiled_model_takes_the_same_steps(monkeypatch):
    if os.environ.get("ATEN_CPU_CAPABILITY") == "default":
        # the simulated other CPU: ATen's kernels are forced to plain code, while
        # inductor would still emit the host's vector code against headers built
        # without it (a C++ compile error); compile without vectorising instead
        import torch._inductor.config as inductor_config

        monkeypatch.setattr(inductor_config.cpp, "simdlen", 1)
    ref, ref_history = _fit(steps=20)
    model, history = _fit(steps=20, compile=True)
    torch.testing.assert_close(torch.tensor(history), torch.tensor(ref_history))
    torch.testing.assert_close(model.weight, ref.weight)


def test_bad_precision_named():
    with pytest.raises(ValueError, match="precision must be one of .* got 'int8'"):
        _fit(steps=1, precision="int8")


def test_lr_scales_move_the_named_parameters_that_much_faster():
    # AdamW's first step moves every weight with a gradient by about lr; a scaled
    # prefix moves by scale * lr and gets no weight decay
    model = tiny_gpt()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    batches = lm_data.WindowBatches(STREAM, 4, 16, seed=2)
    training.train(model, batches, lm_data.next_token_loss, steps=1, lr=1e-3, clip=0,
                   weight_decay=0.1, lr_scales={"tok_emb": 30.0})  # fmt: skip
    moved = {n: (p.detach() - before[n]).abs().max().item()
             for n, p in model.named_parameters()}  # fmt: skip
    assert moved["tok_emb.weight"] == pytest.approx(30e-3, rel=0.05)
    others = [v for n, v in moved.items() if not n.startswith("tok_emb")]
    assert max(others) < 1.2e-3
    groups = training._param_groups(model, 0.1, False, {"tok_emb": 30.0})
    assert [(g["lr_scale"], g["weight_decay"]) for g in groups] == [
        (1.0, 0.1), (1.0, 0.0), (30.0, 0.0)
    ]  # fmt: skip
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in model.parameters())


def test_lr_scales_are_checked():
    model = tiny_gpt()
    with pytest.raises(ValueError, match="no parameter starts with"):
        training._param_groups(model, 0.0, True, {"encoder_bias": 30.0})
    with pytest.raises(ValueError, match="must be positive"):
        training._param_groups(model, 0.0, True, {"tok_emb": 0.0})
