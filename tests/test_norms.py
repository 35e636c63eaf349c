"""LayerNorm (src/transformer_book/norms.py) against torch.nn.LayerNorm, and its input checks."""

import copy

import pytest
import torch
from torch import nn

from transformer_book.norms import LayerNorm, RMSNorm, make_norm


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _pair(d_model: int, seed: int = 0, **kwargs) -> tuple[LayerNorm, nn.LayerNorm]:
    """Our LayerNorm and torch's with the same random (non-trivial) γ and β."""
    g = torch.Generator().manual_seed(seed)
    ours, ref = LayerNorm(d_model, **kwargs), nn.LayerNorm(d_model, **kwargs)
    with torch.no_grad():
        ours.weight.copy_(1 + torch.randn(d_model, generator=g))
        ref.weight.copy_(ours.weight)
        if ours.bias is not None:
            ours.bias.copy_(torch.randn(d_model, generator=g))
            ref.bias.copy_(ours.bias)
    return ours, ref


@pytest.mark.parametrize("shape", [(8,), (4, 8), (2, 5, 16), (2, 3, 4, 32)])
def test_equals_torch_layer_norm(shape):
    ours, ref = _pair(shape[-1])
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) * 3 + 2
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_gradients_equal_torch():
    ours, ref = _pair(16, seed=2)
    x1 = (
        torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(3)) * 5
    ).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    upstream = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(4))
    (ours(x1) * upstream).sum().backward()
    (ref(x2) * upstream).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, atol=1e-5, rtol=1e-5)


def test_gradcheck_float64():
    ln = LayerNorm(6).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ln, (x,))


def test_without_bias_and_other_eps():
    ours, ref = _pair(10, seed=5, bias=False, eps=1e-3)
    assert ours.bias is None and sum(p.numel() for p in ours.parameters()) == 10
    x = torch.randn(4, 10) * 0.01  # small variance: eps matters
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_each_token_standardised_at_init():
    x = (
        torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(6))
        * torch.tensor([0.1, 1.0, 100.0, 3.0, 7.0])[None, :, None]
    )  # wildly different scales
    y = LayerNorm(32)(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    v = x.var(-1, unbiased=False)
    torch.testing.assert_close(
        y.var(-1, unbiased=False), v / (v + 1e-5), atol=1e-5, rtol=1e-5
    )  # 1 up to ε


def test_independent_of_the_rest_of_the_batch():
    ln = LayerNorm(8)
    x = torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(7))
    y = ln(x)
    x2 = x.clone()
    x2[1:] = 1000 * torch.randn(3, 3, 8)
    torch.testing.assert_close(ln(x2)[0], y[0])


def test_half_precision_statistics_in_float32():
    x = torch.randn(4, 64) * 300 + 1000  # large mean: fp16 variance would be poor
    ln = LayerNorm(64)
    y16 = ln.half()(x.half())
    assert y16.dtype == torch.float16
    torch.testing.assert_close(
        y16.float(), nn.functional.layer_norm(x, (64,)), atol=2e-2, rtol=0
    )


def test_wrong_last_dimension_raises():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 3, 4\)"):
        LayerNorm(8)(torch.randn(2, 3, 4))


def test_bad_constructor_arguments_raise():
    with pytest.raises(ValueError, match="d_model must be a positive"):
        LayerNorm(0)
    with pytest.raises(ValueError, match="eps must be positive"):
        LayerNorm(4, eps=0.0)


# --- RMSNorm (chapter 06) -------------------------------------------------------------


@pytest.mark.parametrize("shape", [(8,), (2, 5, 16), (2, 3, 4, 32)])
def test_rms_norm_equals_torch(shape):
    d = shape[-1]
    ours, ref = RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
    with torch.no_grad():
        ours.weight.copy_(1 + torch.randn(d))
        ref.weight.copy_(ours.weight)
    x = torch.randn(*shape) * 3 + 1
    torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-6)


def test_rms_norm_has_no_mean_and_no_beta():
    norm = RMSNorm(4)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    # a constant vector is not centred to zero (LayerNorm would give zeros)
    torch.testing.assert_close(norm(x), torch.ones(2, 4), atol=1e-5, rtol=0)


def test_rms_norm_half_precision_keeps_dtype_and_accuracy():
    norm = RMSNorm(64)
    x = torch.randn(3, 64) * 100
    y = norm.to(torch.bfloat16)(x.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), norm.float()(x), atol=3e-2, rtol=2e-2)


def test_rms_norm_bad_inputs_named():
    with pytest.raises(
        ValueError, match="d_model must be a positive number of features"
    ):
        RMSNorm(0)
    with pytest.raises(ValueError, match="eps must be positive"):
        RMSNorm(4, eps=0.0)
    with pytest.raises(
        ValueError, match=r"RMSNorm expects input of shape \(\.\.\., d_model=4\)"
    ):
        RMSNorm(4)(torch.zeros(2, 5))


def test_make_norm():
    assert isinstance(make_norm("layer", 8), LayerNorm)
    assert isinstance(make_norm("rms", 8, eps=1e-6), RMSNorm)
    with pytest.raises(
        ValueError, match=r"norm must be one of \('layer', 'rms'\), got 'batch'"
    ):
        make_norm("batch", 8)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_path_is_the_written_formula_in_float64(bias):
    """float32/float64 inputs take torch's fused kernel: it computes the formula of
    the module's docstring (biased variance, ε inside the square root)."""
    ours, _ = _pair(16, bias=bias)
    ours = ours.double()
    x = torch.randn(3, 5, 16, dtype=torch.float64)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    expected = (x - mean) / torch.sqrt(var + ours.eps) * ours.weight
    if bias:
        expected = expected + ours.bias
    torch.testing.assert_close(ours(x), expected, atol=1e-12, rtol=0)


def test_half_precision_path_agrees_with_the_fused_one():
    ours, _ = _pair(64)
    x = 3 + 5 * torch.randn(4, 64)
    fused = ours(x)  # float32: torch's kernel
    written = ours.to(torch.bfloat16)(x.to(torch.bfloat16))  # the statistics in float32
    assert written.dtype == torch.bfloat16
    torch.testing.assert_close(written.float(), fused, atol=0.05, rtol=0.02)


# --- chapter 06 exercise checks (checks/norms.py) -------------------------------------

from transformer_book import blocks, checks, classifiers  # noqa: E402


def _ln_via_rms(x, gamma, beta, eps):
    xc = x - x.mean(dim=-1, keepdim=True)
    return gamma * xc * torch.rsqrt(xc.pow(2).mean(dim=-1, keepdim=True) + eps) + beta


def _rms_half(x, weight, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return y.to(x.dtype) * weight


def _without_final_norm(model):
    broken = copy.deepcopy(model)
    broken.body.encoder.final_norm = torch.nn.Identity()
    return broken


def _logit_growth(model, ids, keep=None, change=_without_final_norm):
    keep = ids != model.cfg.pad_id if keep is None else keep
    with torch.no_grad():
        rms = [m(ids)[keep].pow(2).mean().sqrt() for m in (change(model), model)]
    return (rms[0] / rms[1]).item()


def _tagger(n_layers=12, seed=0):
    torch.manual_seed(seed)
    cfg = classifiers.ClassifierConfig(
        40, 6, max_len=16, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0,
        pad_id=0,
    )  # fmt: skip
    model = classifiers.WordTagger(cfg)
    model.body.encoder = blocks.Encoder(n_layers, 16, 2, 32, norm_first=True)
    return model


def _probe():
    ids = torch.randint(1, 40, (8, 10), generator=torch.Generator().manual_seed(3))
    ids[::2, 6:] = 0  # padding
    return ids


def test_norm_checks_accept_right_answers(capsys):
    checks.check_layer_norm_via_rms(_ln_via_rms)
    checks.check_rms_norm_half(_rms_half)
    model, ids = _tagger(), _probe()
    checks.check_logit_growth(_logit_growth, _logit_growth(model, ids), model, ids)
    assert capsys.readouterr().out.count("Correct:") == 3


def test_rms_norm_module_passes_the_half_precision_check(capsys):
    def with_module(x, weight, eps):
        norm = RMSNorm(x.shape[-1], eps=eps).to(x.dtype)
        with torch.no_grad():
            norm.weight.copy_(weight)
        return norm(x).detach()

    checks.check_rms_norm_half(with_module)
    assert "Correct:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda x, g, b, e: g * x * torch.rsqrt(x.pow(2).mean(-1, True) + e) + b,
            "centre",
        ),
        (
            lambda x, g, b, e: _ln_via_rms(x, g, b, e) - b,
            "β is missing",
        ),
        (
            lambda x, g, b, e: (
                g * _rms_half(x - x.mean(0, True), torch.ones(()), e) + b
            ),
            "batch axis",
        ),
        (
            lambda x, g, b, e: (
                g
                * (x - x.mean(-1, True))
                / (((x - x.mean(-1, True)) ** 2).mean(-1, True).sqrt() + e)
                + b
            ),
            "inside the square root",
        ),
    ],
)
def test_layer_norm_via_rms_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_layer_norm_via_rms(wrong)


def _rms_in_input_dtype(x, weight, eps):  # statistics in float16: overflows
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.to(x.dtype)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_rms_in_input_dtype, "overflow"),
        (
            lambda x, w, e: (
                x.float() * torch.rsqrt(x.float().pow(2).mean(-1, True) + e) * w.float()
            ),
            "dtype",
        ),
        (
            lambda x, w, e: x * torch.rsqrt(x.pow(2).sum(-1, True) + e) * w,
            "sum",
        ),
        (
            lambda x, w, e: _rms_half(x - x.mean(-1, True), w, e),
            "centring",
        ),
        (lambda x, w, e: _rms_half(x, w, 0.0), "eps inside"),
    ],
)
def test_rms_norm_half_mistakes(wrong, message):
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_rms_norm_half(wrong)


def _in_place(model, ids):
    model.body.encoder.final_norm = torch.nn.Identity()
    return 2.0


def _every_norm(model):
    broken = _without_final_norm(model)
    for block in broken.body.encoder.layers:
        block.norm1 = block.norm2 = torch.nn.Identity()
    return broken


def _last_block_norm(model):
    broken = copy.deepcopy(model)
    broken.body.encoder.layers[-1].norm2 = torch.nn.Identity()
    return broken


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_in_place, "changed the model you were given"),
        (lambda m, ids: 1 / _logit_growth(m, ids), "other way round"),
        (lambda m, ids: _logit_growth(m, ids, torch.ones_like(ids, dtype=bool)),
         "padding positions"),
        (lambda m, ids: _logit_growth(m, ids, change=_every_norm), "norms too"),
        (lambda m, ids: _logit_growth(m, ids, change=_last_block_norm), "norm2"),
        (lambda m, ids: "2.0", "as a number"),
    ],
)  # fmt: skip
def test_logit_growth_mistakes(wrong, message):
    model, ids = _tagger(), _probe()
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_logit_growth(wrong, 1.0, model, ids)


@pytest.mark.parametrize("predicted", [None, "2", 1.0, 20.0])
def test_logit_growth_prediction_must_be_a_number_near_the_measurement(predicted):
    model, ids = _tagger(24), _probe()
    assert _logit_growth(model, ids) > 1.5  # the stream has grown: 1.0 is far off
    with pytest.raises(checks.ExerciseError, match="prediction first|You predicted"):
        checks.check_logit_growth(_logit_growth, predicted, model, ids)


def test_logit_growth_follows_the_stream_entering_the_final_norm():
    model, ids = _tagger(24), _probe()
    seen = []
    hook = model.body.encoder.final_norm.register_forward_hook(
        lambda mod, args, out: seen.append(args[0])
    )
    with torch.no_grad():
        model(ids)
    hook.remove()
    stream = seen[0][ids != 0].pow(2).mean().sqrt().item()
    assert 0.75 * stream < _logit_growth(model, ids) < stream  # the bias does not grow


def _layer_norm_formula(x, weight, bias, eps):
    """The written-out formula (the module's implementation before it used F.layer_norm)."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = x.var(dim=-1, unbiased=False, keepdim=True)  # (..., 1): biased
    y = (x - mean) * torch.rsqrt(var + eps) * weight
    return y if bias is None else y + bias


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_equals_the_written_out_formula(dtype, bias):
    ours, _ = _pair(16, seed=8, bias=bias)
    ours = ours.to(dtype)
    gen = torch.Generator().manual_seed(9)
    x1 = (torch.randn(3, 7, 16, generator=gen, dtype=dtype) * 4 - 2).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    upstream = torch.randn(3, 7, 16, generator=gen, dtype=dtype)
    y = ours(x1)
    ref = _layer_norm_formula(x2, ours.weight, ours.bias, ours.eps)
    torch.testing.assert_close(y, ref, atol=1e-6, rtol=1e-6)
    (y * upstream).sum().backward()
    grad_w = ours.weight.grad.clone()
    ours.zero_grad()
    (
        _layer_norm_formula(x2, ours.weight, ours.bias, ours.eps) * upstream
    ).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad_w, ours.weight.grad, atol=1e-5, rtol=1e-5)


def test_layer_norm_half_precision_keeps_dtype_and_matches_the_formula():
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(10)) * 3 + 5
    ours, _ = _pair(32, seed=11)
    y = ours.to(torch.bfloat16)(x.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16
    ref = _layer_norm_formula(x, ours.weight.float(), ours.bias.float(), ours.eps)
    torch.testing.assert_close(y.float(), ref, atol=5e-2, rtol=2e-2)


def test_time_pairs_calls_every_function_once_untimed_then_once_per_round():
    from transformer_book.norms import time_pairs

    calls = {"ln": 0, "rms": 0}

    def counted(name):
        def fn(x):
            calls[name] += 1
            return x * 2  # differentiable: time_pairs runs backward too

        return fn

    times = time_pairs({"pair": (counted("ln"), counted("rms"))}, (2, 3), rounds=3)
    assert calls == {"ln": 4, "rms": 4}
    ln, rms = times["pair"]
    assert len(ln) == len(rms) == 3 and min(ln + rms) >= 0
    module_times = time_pairs({"m": (nn.LayerNorm(3), RMSNorm(3))}, (2, 3), rounds=2)
    assert [len(t) for t in module_times["m"]] == [2, 2]
    with pytest.raises(ValueError, match="rounds must be >= 1, got 0"):
        time_pairs({}, (2, 3), rounds=0)


def test_ratio_words_read_the_middle_half_of_the_rounds():
    from transformer_book.norms import ratio_words

    less = ratio_words([0.9, 0.6, 0.98, 0.7, 0.8])  # RMSNorm / LayerNorm per round
    assert less["words"].startswith("less time than LayerNorm")
    assert less["ratio"] == "0.80" and less["middle"] == "0.65–0.94"  # the quartiles
    assert ratio_words([1.2, 1.5, 1.1, 1.3])["words"].startswith("more time")
    straddles = ratio_words([0.8, 1.2, 0.9, 1.1])
    assert straddles["words"].startswith("about as long as LayerNorm")
    with pytest.raises(ValueError, match="at least two rounds, got 1"):
        ratio_words([0.9])


def test_time_table_prints_the_medians_and_the_ratio_per_pair():
    times = {"plain": ([1e-3, 2e-3, 3e-3], [0.5e-3, 1e-3, 1.5e-3])}
    from transformer_book.norms import time_table

    header, row = time_table(times, "cpu")
    assert header.split() == ["cpu", "LayerNorm", "RMSNorm", "ratio", "middle", "half"]
    assert row.split() == ["plain", "2.00", "ms", "1.00", "ms", "0.50", "0.50–0.50"]
