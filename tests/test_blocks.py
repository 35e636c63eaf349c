"""Blocks (src/transformer_book/blocks.py) against torch.nn.TransformerEncoderLayer with
copied weights."""

import pytest
import torch
from torch import nn

from transformer_book import blocks, masks

D, H, D_FF = 16, 4, 40


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _pair(
    norm_first: bool, **kwargs
) -> tuple[blocks.EncoderBlock, nn.TransformerEncoderLayer]:
    ref = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first, **kwargs
    )
    with (
        torch.no_grad()
    ):  # non-trivial LayerNorm γ, β so that a swapped or missing norm is caught
        for norm in (ref.norm1, ref.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    act = {"gelu": nn.functional.gelu}.get(kwargs.get("activation"), nn.functional.relu)
    ours = blocks.EncoderBlock(D, H, D_FF, norm_first=norm_first, activation=act)
    return blocks.load_torch_encoder_layer(ours, ref), ref


def _inputs():
    x = torch.randn(3, 7, D)
    lengths = torch.tensor([7, 4, 1])
    return x, lengths


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize(
    "training", [False, True]
)  # eval may take torch's fused fast path; train does not
def test_block_equals_torch_layer(norm_first, training):
    ours, ref = _pair(norm_first)
    ours.train(training), ref.train(training)
    x, _ = _inputs()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_with_padding_mask_equals_torch_layer(norm_first):
    ours, ref = _pair(norm_first)
    x, lengths = _inputs()
    keep = masks.padding_mask(lengths, x.shape[1])  # (B, 1, 1, T), True = may attend
    # torch's src_key_padding_mask uses the opposite polarity: True = ignore this key.
    expected = ref(x, src_key_padding_mask=~keep[:, 0, 0])
    got = ours(x, mask=keep)
    for b, n in enumerate(
        lengths.tolist()
    ):  # the real tokens; padding queries are not compared
        torch.testing.assert_close(got[b, :n], expected[b, :n], atol=1e-5, rtol=1e-5)
    # the mask matters: without it, the shorter sequences' outputs change
    assert not torch.allclose(ours(x)[1, :4], got[1, :4], atol=1e-3)


def test_padding_does_not_leak():
    ours, _ = _pair(False)
    x, lengths = _inputs()
    keep = masks.padding_mask(lengths, x.shape[1])
    x2 = x.clone()
    x2[1, 4:] = 100 * torch.randn(3, D)  # change only the padding of sequence 1
    torch.testing.assert_close(ours(x2, mask=keep)[1, :4], ours(x, mask=keep)[1, :4])


def test_gradients_equal_torch_layer():
    ours, ref = _pair(False)
    x, _ = _inputs()
    upstream = torch.randn(3, 7, D)
    (ours(x) * upstream).sum().backward()
    (ref(x) * upstream).sum().backward()
    torch.testing.assert_close(
        ours.ff.up_proj.weight.grad, ref.linear1.weight.grad, atol=1e-5, rtol=1e-4
    )
    torch.testing.assert_close(
        ours.attn.q_proj.weight.grad,
        ref.self_attn.in_proj_weight.grad[:D],
        atol=1e-5,
        rtol=1e-4,
    )
    torch.testing.assert_close(
        ours.norm1.weight.grad, ref.norm1.weight.grad, atol=1e-5, rtol=1e-4
    )


def test_gelu_activation_equals_torch_layer():
    ours, ref = _pair(False, activation="gelu")
    x, _ = _inputs()
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_post_norm_output_is_standardised_per_token():
    block = blocks.EncoderBlock(D, H, D_FF)  # γ = 1, β = 0 at initialisation
    y = block(torch.randn(2, 5, D) * 10)
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        y.std(-1, unbiased=False), torch.ones(2, 5), atol=1e-4, rtol=0
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_equals_stack_of_torch_layers(norm_first):
    n_layers = 3
    enc = blocks.Encoder(n_layers, D, H, D_FF, norm_first=norm_first)
    refs = []
    for block in enc.layers:
        _, ref = _pair(norm_first)
        blocks.load_torch_encoder_layer(block, ref)
        refs.append(ref)
    final = nn.LayerNorm(D) if norm_first else nn.Identity()
    if norm_first:
        with torch.no_grad():
            final.weight.copy_(enc.final_norm.weight)
            final.bias.copy_(enc.final_norm.bias)
    x, lengths = _inputs()
    keep = masks.padding_mask(lengths, x.shape[1])
    y = x
    for ref in refs:
        y = ref(y, src_key_padding_mask=~keep[:, 0, 0])
    expected = final(y)
    got = enc(x, mask=keep)
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(got[b, :n], expected[b, :n], atol=1e-5, rtol=1e-5)
    # the layers are distinct modules, not one block applied three times
    assert enc.layers[0].ff.up_proj.weight is not enc.layers[1].ff.up_proj.weight


def test_encoder_equals_torch_transformer_encoder():
    ref_layer = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True)
    ref = nn.TransformerEncoder(ref_layer, num_layers=2, enable_nested_tensor=False)
    ref.layers[1] = _pair(False)[
        1
    ]  # the constructor deep-copies one layer; make the two differ
    enc = blocks.Encoder(2, D, H, D_FF)
    for block, layer in zip(enc.layers, ref.layers):
        blocks.load_torch_encoder_layer(block, layer)
    x, _ = _inputs()
    torch.testing.assert_close(enc(x), ref(x), atol=1e-5, rtol=1e-5)


def test_feed_forward_acts_on_each_token_alone():
    ff = blocks.FeedForward(D, D_FF)
    x = torch.randn(2, 6, D)
    alone = torch.stack([ff(x[:, t]) for t in range(6)], dim=1)  # one token at a time
    torch.testing.assert_close(ff(x), alone)
    perm = torch.randperm(6)
    torch.testing.assert_close(ff(x[:, perm]), ff(x)[:, perm])


def test_feed_forward_formula():
    ff = blocks.FeedForward(D, D_FF)
    x = torch.randn(5, D)
    expected = (
        torch.relu(x @ ff.up_proj.weight.T + ff.up_proj.bias) @ ff.down_proj.weight.T
        + ff.down_proj.bias
    )
    torch.testing.assert_close(ff(x), expected)


def test_bad_inputs_raise():
    block = blocks.EncoderBlock(D, H, D_FF)
    with pytest.raises(ValueError, match=r"\(B, T, d_model=16\), got \(2, 5, 8\)"):
        block(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"\(B, T, d_model=16\), got \(5, 16\)"):
        block(torch.randn(5, 16))
    with pytest.raises(ValueError, match="divisible by n_heads"):
        blocks.EncoderBlock(D, 3, D_FF)
    with pytest.raises(ValueError, match="n_layers must be at least 1, got 0"):
        blocks.Encoder(0, D, H, D_FF)
    with pytest.raises(ValueError, match="d_ff must be positive"):
        blocks.FeedForward(D, 0)
    with pytest.raises(ValueError, match=r"d_model=16\), got \(3, 12\)"):
        blocks.FeedForward(D, D_FF)(torch.randn(3, 12))
    with pytest.raises(ValueError, match="mask must be boolean"):
        block(torch.randn(2, 5, D), mask=torch.ones(2, 1, 1, 5))


def test_load_torch_layer_rejects_mismatches():
    ref = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.0, batch_first=True, norm_first=True
    )
    with pytest.raises(ValueError, match="built differently.*norm_first"):
        blocks.load_torch_encoder_layer(
            blocks.EncoderBlock(D, H, D_FF, norm_first=False), ref
        )
    ref = nn.TransformerEncoderLayer(D, H, 2 * D_FF, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match="d_ff"):
        blocks.load_torch_encoder_layer(blocks.EncoderBlock(D, H, D_FF), ref)
    ref = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.0, batch_first=True, activation="gelu"
    )
    with pytest.raises(ValueError, match="activations differ"):
        blocks.load_torch_encoder_layer(blocks.EncoderBlock(D, H, D_FF), ref)
    with pytest.raises(ValueError, match="must be a torch.nn.TransformerEncoderLayer"):
        blocks.load_torch_encoder_layer(
            blocks.EncoderBlock(D, H, D_FF), nn.Linear(D, D)
        )
    ref = nn.TransformerEncoderLayer(D, H, D_FF, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match="built differently.*'norm': 'rms'"):
        blocks.load_torch_encoder_layer(
            blocks.EncoderBlock(D, H, D_FF, norm="rms"), ref
        )


@pytest.mark.parametrize("norm_first", [False, True])
def test_rms_block_equals_torch_layer_with_rms_norms(norm_first):
    """norm="rms" changes only the two norms: torch's layer with nn.RMSNorm swapped in,
    weights copied from ours, computes the same."""
    ours = blocks.EncoderBlock(D, H, D_FF, norm_first=norm_first, norm="rms")
    ref = nn.TransformerEncoderLayer(
        D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ref.norm1, ref.norm2 = nn.RMSNorm(D, eps=1e-5), nn.RMSNorm(D, eps=1e-5)
    qkv = (ours.attn.q_proj, ours.attn.k_proj, ours.attn.v_proj)
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([p.weight for p in qkv]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([p.bias for p in qkv]))
        for mine, theirs in (
            (ours.attn.o_proj, ref.self_attn.out_proj),
            (ours.ff.up_proj, ref.linear1),
            (ours.ff.down_proj, ref.linear2),
        ):
            theirs.weight.copy_(mine.weight)
            theirs.bias.copy_(mine.bias)
        for mine, theirs in ((ours.norm1, ref.norm1), (ours.norm2, ref.norm2)):
            mine.weight.normal_(1.0, 0.3)
            theirs.weight.copy_(mine.weight)
    x = torch.randn(2, 5, D)
    # train mode (dropout 0) keeps torch off its fused path, which expects LayerNorm
    torch.testing.assert_close(ours.train()(x), ref.train()(x), atol=1e-5, rtol=1e-5)
    stack = blocks.Encoder(2, D, H, D_FF, norm_first=True, norm="rms")
    assert isinstance(stack.final_norm, blocks.RMSNorm)
    assert isinstance(stack.layers[1].norm2, blocks.RMSNorm)


# --- the exercise checks of chapter 03 (src/transformer_book/checks/blocks.py) ---

import math  # noqa: E402

from transformer_book.checks import blocks as block_checks  # noqa: E402
from transformer_book.checks._core import ExerciseError  # noqa: E402


def _batch_norm(x, gamma, beta, eps=1e-5, dims=(0, 1), unbiased=False):
    mu, var = (
        x.mean(dim=dims, keepdim=True),
        x.var(dim=dims, unbiased=unbiased, keepdim=True),
    )
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def _pre_norm(x, attn, ff, n1, n2):
    h = x + attn(n1(x))
    return h + ff(n2(h))


def _max_d_ff(budget, n_layers, d, vocab):
    return (budget - vocab * d - n_layers * (4 * d * d + 9 * d)) // (
        n_layers * (2 * d + 1)
    )


def _branch_scale(depth, growth):
    return math.sqrt(growth ** (1 / depth) - 1)


def test_checks_accept_correct_answers(capsys):
    block_checks.check_batch_norm(_batch_norm)
    block_checks.check_pre_norm_block(_pre_norm)
    block_checks.check_max_d_ff(_max_d_ff)
    block_checks.check_branch_scale(_branch_scale)
    block_checks.check_branch_scale(lambda L, g: torch.tensor(_branch_scale(L, g)))
    assert capsys.readouterr().out.count("Correct:") == 5


def test_checks_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    block_checks.check_pre_norm_block(_pre_norm)
    torch.testing.assert_close(torch.rand(3), expected)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda x, g, b, eps: _batch_norm(x, g, b, eps, dims=(-1,)),
            "that is LayerNorm",
        ),
        (
            lambda x, g, b, eps: _batch_norm(x, g, b, eps, unbiased=True),
            "unbiased variance",
        ),
        (lambda x, g, b, eps: _batch_norm(x, g, b, eps, dims=(0,)), "batch axis only"),
        (lambda x, g, b, eps: _batch_norm(x, g, b, 1e-5), "Use the eps argument"),
        (
            lambda x, g, b, eps: (
                g * (x - x.mean((0, 1))) / (x.std((0, 1), unbiased=False) + eps) + b
            ),
            "inside the square root",
        ),
        (lambda x, g, b, eps: x - x.mean((0, 1)), "values differ"),
    ],
)
def test_batch_norm_mistakes_are_explained(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        block_checks.check_batch_norm(wrong)


def _skip_after_norm(x, attn, ff, n1, n2):
    x = n1(x)
    x = x + attn(x)
    x = n2(x)
    return x + ff(x)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            lambda x, a, f, n1, n2: (lambda h: n2(h + f(h)))(n1(x + a(x))),
            "post-norm block",
        ),
        (_skip_after_norm, "Both residuals are added after the norm"),
        (lambda x, a, f, n1, n2: f(n2(a(n1(x)))), "no residual"),
        (lambda x, a, f, n1, n2: (lambda h: h + f(n1(h)))(x + a(n2(x))), "swapped"),
        (lambda x, a, f, n1, n2: x, "values differ"),
    ],
)
def test_pre_norm_mistakes_are_explained(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        block_checks.check_pre_norm_block(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda B, L, d, V: _max_d_ff(B, L, d, V) + 1, "over the budget"),
        (lambda B, L, d, V: _max_d_ff(B, L, d, V) - 1, "but so does"),
        (
            lambda B, L, d, V: (B - V * d - L * 4 * d * d) // (L * 2 * d),
            "over the budget",
        ),
        (lambda B, L, d, V: float(_max_d_ff(B, L, d, V)), "Python int"),
    ],
)
def test_max_d_ff_mistakes_are_explained(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        block_checks.check_max_d_ff(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda L, g: 1 / math.sqrt(L), "1/√depth keeps the growth bounded"),
        (lambda L, g: math.sqrt((g - 1) / L), "You linearised"),
        (lambda L, g: g ** (1 / L) - 1, "That is α², not α"),
        (lambda L, g: math.sqrt(g ** (1 / L)), "subtract it before the square root"),
        (lambda L, g: math.sqrt(g / L), "compounds over the layers"),
        (lambda L, g: 0.1, "makes the second moment grow by"),
        (lambda L, g: "0.1", "return a number"),
    ],
)
def test_branch_scale_mistakes_are_explained(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        block_checks.check_branch_scale(wrong)


def test_checks_explain_a_stub():
    def stub(*args):
        raise NotImplementedError

    for check in (
        block_checks.check_batch_norm,
        block_checks.check_pre_norm_block,
        block_checks.check_max_d_ff,
        block_checks.check_branch_scale,
    ):
        with pytest.raises(ExerciseError, match="not written yet"):
            check(stub)


def test_stream_profile_measures_rms_and_cosine_of_real_tokens():
    torch.manual_seed(0)
    enc = blocks.Encoder(2, 8, 2, 16, norm_first=False)
    x = torch.randn(2, 4, 8)
    keep = torch.tensor([[True] * 4, [True, True, False, False]])
    rms, cos = blocks.stream_profile(enc, enc.layers, x, keep)
    assert len(rms) == len(cos) == 2
    out = enc.layers[0](x)  # the stream after the first block
    assert rms[0] == pytest.approx(out[keep].pow(2).mean().sqrt().item(), rel=1e-5)
    u = torch.nn.functional.normalize(out, dim=-1)
    pair = (u[1, 0] @ u[1, 1]).item()  # the short sequence: one pair
    full = (u[0] @ u[0].T)[~torch.eye(4, dtype=torch.bool)].mean().item()
    assert cos[0] == pytest.approx((full + pair) / 2, rel=1e-4, abs=1e-6)
    assert not enc.layers[0]._forward_hooks  # hooks removed
    with pytest.raises(ValueError, match="keep"):
        blocks.stream_profile(enc, enc.layers, x, keep.float())


def test_windowed_stack_reaches_as_far_as_its_windows_allow():
    torch.manual_seed(0)
    stack = blocks.WindowedStack([3, 3], 8, 2).double()
    x = torch.randn(1, 12, 8, dtype=torch.float64, requires_grad=True)
    stack(x)[0, -1].sum().backward()
    reach = int((x.grad[0].norm(dim=-1) > 0).sum())
    assert reach == 2 * (3 - 1) + 1  # L (w - 1) + 1 positions
    full = blocks.WindowedStack([None], 8, 2)
    assert full(torch.randn(2, 5, 8)).shape == (2, 5, 8)
    with pytest.raises(ValueError, match="windows"):
        blocks.WindowedStack([0], 8, 2)


def _masked_bn(x, g, b, mask, eps, unbiased=False):
    real = x[mask]  # (N_real, D)
    mean, var = real.mean(0), real.var(0, unbiased=unbiased)
    return g * (x - mean) / torch.sqrt(var + eps) + b


def _zeroed_bn(x, g, b, mask, eps):  # pads set to 0 but still counted
    z = x * mask[..., None]
    mean = z.mean((0, 1))
    var = (z - mean).pow(2).mean((0, 1))
    return g * (x - mean) / torch.sqrt(var + eps) + b


def test_masked_batch_norm_check_accepts_a_right_answer(capsys):
    block_checks.check_masked_batch_norm(_masked_bn)
    assert capsys.readouterr().out.count("Correct:") == 1


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda x, g, b, m, eps: _batch_norm(x, g, b, eps), "include the padded"),
        (_zeroed_bn, "zeroed the padded positions"),
        (lambda x, g, b, m, eps: _masked_bn(x, g, b, m, eps, True), "unbiased"),
        (
            lambda x, g, b, m, eps: _batch_norm(x, g, b, eps, dims=(-1,)),
            "that is LayerNorm",
        ),
        (lambda x, g, b, m, eps: x, "differ"),
    ],
)
def test_masked_batch_norm_mistakes_are_explained(wrong, message):
    with pytest.raises(ExerciseError, match=message):
        block_checks.check_masked_batch_norm(wrong)


def test_dropout_acts_while_training_and_is_skipped_in_evaluation():
    torch.manual_seed(0)
    block = blocks.EncoderBlock(D, H, D_FF, dropout=0.5, norm_first=True)
    x = torch.randn(2, 5, D)
    block.train()
    assert not torch.equal(block(x), block(x))  # a new dropout mask each call
    block.eval()
    assert torch.equal(block(x), block(x))
    for module in (block.dropout1, block.dropout2, block.ff.dropout):
        module.p = 0.0  # identity: skipped, same output as the module would give
    block.attn.dropout = 0.0  # the attention weights' own dropout
    block.train()
    assert torch.equal(block(x), block(x))
