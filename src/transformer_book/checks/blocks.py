"""Checks for the exercises of chapter 03 (the encoder block: norms, residual placement,
parameter counts, the scale of residual branches)."""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import blocks, params
from ._core import ExerciseError, call, expect_close, passed

__all__ = [
    "check_batch_norm",
    "check_masked_batch_norm",
    "check_pre_norm_block",
    "check_max_d_ff",
    "check_branch_scale",
]

Fn = Callable[[Tensor], Tensor]


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _same(got: object, ref: Tensor) -> bool:
    return (
        isinstance(got, Tensor)
        and got.shape == ref.shape
        and torch.allclose(got.to(ref.dtype), ref, atol=1e-4)
    )


def _standardise(
    x: Tensor, dims: tuple[int, ...], unbiased: bool = False, eps: float = 1e-5
) -> Tensor:
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, unbiased=unbiased, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def check_batch_norm(fn: Callable[[Tensor, Tensor, Tensor, float], Tensor]) -> str:
    """``fn(x, gamma, beta, eps)`` with x (B, T, D): training-mode BatchNorm, one mean and
    variance per feature.

    The statistics run over every token of every sequence, i.e. over the batch and time axes (0, 1).
    """
    B, T, D = 4, 5, 6
    x = _randn(B, T, D, seed=0) * torch.linspace(0.5, 4.0, D) + torch.linspace(
        -3.0, 3.0, D
    )  # each feature its own scale
    gamma, beta = 1.0 + 0.5 * _randn(D, seed=1), _randn(D, seed=2)
    eps = 0.1  # large on purpose, so that where ε goes shows in the result
    got = call(fn, x.clone(), gamma.clone(), beta.clone(), eps)
    # torch's BatchNorm1d wants the features on axis 1: (B, D, T)
    expected = F.batch_norm(
        x.transpose(1, 2), None, None, gamma, beta, training=True, eps=eps
    ).transpose(1, 2)
    affine = lambda z: gamma * z + beta  # noqa: E731
    mistakes = [
        (
            affine(_standardise(x, (-1,), eps=eps)),
            "You normalised each token over its features: that is LayerNorm. "
            "BatchNorm keeps one mean and variance per *feature*, "
            "taken over all tokens of the batch: dims (0, 1).",
        ),
        (
            affine(_standardise(x, (0,), eps=eps)),
            "You averaged over the batch axis only, so every time step got its own "
            "statistics. A feature's statistics should cover every token of every "
            "sequence: dims (0, 1).",
        ),
        (
            affine(_standardise(x, (0, 1), unbiased=True, eps=eps)),
            "Close, but you used the unbiased variance (divides by "
            "N - 1). Normalisation layers divide by N: "
            "torch.var(..., unbiased=False) or correction=0.",
        ),
        (
            affine((x - x.mean((0, 1))) / (x.std((0, 1), unbiased=False) + eps)),
            "Put ε inside the square root: (x - mean) / sqrt(var + eps).",
        ),
        (
            affine(_standardise(x, (0, 1), eps=1e-5)),
            f"Use the eps argument (the check passes eps={eps}), "
            "not a constant of your own.",
        ),
        (
            _standardise(x, (0, 1), eps=eps),
            "You forgot the learnable scale and shift: multiply by gamma, then add beta.",
        ),
        (
            beta * _standardise(x, (0, 1), eps=eps) + gamma,
            "gamma and beta are swapped: gamma scales, beta shifts.",
        ),
    ]
    for wrong, message in mistakes:
        if not _same(got, expected) and _same(got, wrong):
            raise ExerciseError(message)
    expect_close(
        got,
        expected,
        "batch norm",
        "Shape (B, T, D) in and out; mean and var over dims (0, 1).",
    )
    return passed(
        "one mean and variance per feature, shared by every token in the batch, as in BatchNorm1d."
    )


def _masked_standardise(
    x: Tensor, mask: Tensor, unbiased: bool = False, eps: float = 1e-5
) -> Tensor:
    """Per-feature statistics over the real tokens only (mask (B, T) True = real)."""
    real = x[mask]  # (N_real, D)
    mean = real.mean(dim=0)
    var = real.var(dim=0, unbiased=unbiased)
    return (x - mean) / torch.sqrt(var + eps)


def check_masked_batch_norm(
    fn: Callable[[Tensor, Tensor, Tensor, Tensor, float], Tensor],
) -> str:
    """``fn(x, gamma, beta, mask, eps)`` with x (B, T, D) and mask (B, T), True at real
    tokens: training-mode BatchNorm whose per-feature mean and (biased) variance are
    taken over the real tokens only. Only the real positions are compared; what the
    padded ones hold does not matter.
    """
    B, T, D = 3, 6, 5
    x = _randn(B, T, D, seed=10) * torch.linspace(0.5, 3.0, D) + torch.linspace(
        -2.0, 2.0, D
    )
    lengths = torch.tensor([6, 4, 2])
    mask = torch.arange(T) < lengths[:, None]  # (B, T)
    x = torch.where(mask[..., None], x, 7.0 + _randn(B, T, D, seed=11))  # pad: junk
    gamma, beta = 1.0 + 0.5 * _randn(D, seed=12), _randn(D, seed=13)
    eps = 0.1
    # with every token real, the answer must be BatchNorm: reuse its named mistakes
    full = torch.ones(4, 5, dtype=torch.bool)
    with contextlib.redirect_stdout(io.StringIO()):  # its "Correct" is not ours
        check_batch_norm(
            lambda x_, g, b, e: fn(x_, g, b, full[: x_.shape[0], : x_.shape[1]], e)
        )
    got = call(fn, x.clone(), gamma.clone(), beta.clone(), mask.clone(), eps)
    expected = gamma * _masked_standardise(x, mask, eps=eps) + beta
    real = mask[..., None].expand(B, T, D)
    if not isinstance(got, Tensor) or got.shape != x.shape:
        raise ExerciseError(f"Return a tensor of shape {tuple(x.shape)}, like x.")
    affine = lambda z: gamma * z + beta  # noqa: E731
    zeroed = x * mask[..., None]  # the pads set to 0, still counted
    mistakes = [
        (
            affine(_standardise(x, (0, 1), eps=eps)),
            "Your statistics include the padded positions: every <pad> then moves "
            "every sentence's output. Take the mean and variance over x[mask] only.",
        ),
        (
            affine(
                (x - zeroed.mean((0, 1)))
                / torch.sqrt((zeroed - zeroed.mean((0, 1))).pow(2).mean((0, 1)) + eps)
            ),
            "You zeroed the padded positions but still divided by B·T: the zeros "
            "count as tokens, pull the mean towards 0 and change the variance. "
            "Divide by the number of real tokens (x[mask] does it).",
        ),
        (
            affine(_masked_standardise(x, mask, unbiased=True, eps=eps)),
            "Close, but you used the unbiased variance (divides by N - 1). "
            "Normalisation layers divide by N.",
        ),
    ]
    same_real = lambda a, b: torch.allclose(a[real], b[real], atol=1e-4)  # noqa: E731
    for wrong, message in mistakes:
        if not same_real(got, expected) and same_real(got, wrong):
            raise ExerciseError(message)
    expect_close(
        got[real],
        expected[real],
        "masked batch norm (real tokens)",
        "Mean and biased variance per feature over x[mask], the real tokens only; "
        "then gamma * (x - mean) / sqrt(var + eps) + beta.",
    )
    return passed(
        "one mean and variance per feature over the real tokens only: a sentence's "
        "output no longer depends on how much padding its batch-mates carry (it still "
        "depends on their real tokens)."
    )


def check_pre_norm_block(fn: Callable[[Tensor, Fn, Fn, Fn, Fn], Tensor]) -> str:
    """``fn(x, self_attention, feed_forward, norm1, norm2)``: the pre-norm encoder block.

    Each argument after x is a function from (B, T, D) to (B, T, D); the answer must equal
    :class:`transformer_book.blocks.EncoderBlock` with ``norm_first=True``:
    ``h = x + self_attention(norm1(x))``, then ``h + feed_forward(norm2(h))``.
    """
    with (
        torch.random.fork_rng()
    ):  # a fixed block, without touching the notebook's random state
        torch.manual_seed(0)
        block = blocks.EncoderBlock(8, 2, 16, norm_first=True).eval()
    with (
        torch.no_grad()
    ):  # non-trivial γ and β, different per norm, so that swapped or missing norms show
        for i, norm in enumerate((block.norm1, block.norm2)):
            norm.weight.copy_(1.0 + 0.5 * _randn(8, seed=3 + i))
            norm.bias.copy_(_randn(8, seed=5 + i))
    x = _randn(2, 5, 8, seed=7) * 3.0 + 1.0
    attn = lambda z: block.attn(z)[0]  # noqa: E731  (MultiHeadAttention returns (output, weights))
    ff, n1, n2 = block.ff, block.norm1, block.norm2
    with torch.no_grad():
        got = call(fn, x.clone(), attn, ff, n1, n2)
        expected = block(x)
        h = x + attn(n1(x))  # the right first half
        h_post = n1(x + attn(x))  # post-norm
        h_skip = n1(x) + attn(n1(x))  # the skip path starts after the norm
        mistakes = [
            (
                n2(h_post + ff(h_post)),
                "That is the post-norm block of the original paper, Norm(x + F(x)). "
                "Pre-norm normalises only the sublayer's input and leaves the residual "
                "path alone: x + F(Norm(x)).",
            ),
            (
                n2(h_skip) + ff(n2(h_skip)),
                "Both residuals are added after the norm: you wrote x = norm(x); "
                "x = x + F(x), so the skip path carries the normalised x. "
                "Keep the raw input on the skip path: "
                "x + F(norm1(x)), then h + feed_forward(norm2(h)).",
            ),
            (
                h_skip + ff(n2(h_skip)),
                "The residual is added after the norm: you wrote x = norm1(x); x = x + F(x), "
                "so the skip path carries the normalised x. "
                "Keep the raw x on the skip path: x + F(norm1(x)).",
            ),
            (
                n2(h) + ff(n2(h)),
                "The second residual is added after the norm: use h + feed_forward(norm2(h)), "
                "with the raw h on the skip path.",
            ),
            (
                ff(n2(attn(n1(x)))),
                "There is no residual connection: add "
                "each sublayer's input to its output.",
            ),
            (
                h + ff(n2(x)),
                "The feed-forward sublayer must read h, the output of the attention half, "
                "not the block's input x.",
            ),
            (
                x + attn(n2(x)) + ff(n1(x + attn(n2(x)))),
                "norm1 and norm2 are swapped: norm1 belongs to the "
                "attention sublayer, norm2 to the feed-forward sublayer.",
            ),
            (
                h + ff(h),
                "The feed-forward sublayer's input is not normalised: h + feed_forward(norm2(h)).",
            ),
            (
                n2(h + ff(n2(h))),
                "No norm after the sum in pre-norm: return h + feed_forward(norm2(h)) as it is "
                "(a pre-norm *stack* adds one final LayerNorm at the very end, not each block).",
            ),
        ]
    for wrong, message in mistakes:
        if not _same(got, expected) and _same(got, wrong):
            raise ExerciseError(message)
    expect_close(
        got,
        expected,
        "block output",
        "h = x + self_attention(norm1(x)); return h + feed_forward(norm2(h)).",
    )
    return passed(
        "the norms sit inside the residual branches and the skip path stays an identity, "
        "as EncoderBlock(norm_first=True) does."
    )


def _module_count(n_layers: int, d_model: int, d_ff: int, vocab_size: int) -> int:
    """Parameters of an embedding table plus a post-norm Encoder, counted on the module
    (on the meta device: no memory)."""
    with torch.device("meta"):
        model = torch.nn.ModuleList(
            [
                torch.nn.Embedding(vocab_size, d_model),
                blocks.Encoder(n_layers, d_model, 2, d_ff),
            ]
        )
    return params.count_params(model)


def check_max_d_ff(fn: Callable[[int, int, int, int], int]) -> str:
    """``fn(budget, n_layers, d_model, vocab_size)``: the largest d_ff whose encoder has
    at most ``budget`` parameters.

    The encoder is a token-embedding table plus ``n_layers`` post-norm blocks (no position table).
    """
    cases = [
        (1_000_000, 4, 64, 1000),
        (10_000_000, 6, 256, 30_000),
        (250_000, 2, 32, 500),
        (123_456, 1, 16, 100),
    ]
    for budget, n_layers, d_model, vocab_size in cases:
        got = call(fn, budget, n_layers, d_model, vocab_size)
        where = (
            f"budget={budget:,}, n_layers={n_layers}, "
            f"d_model={d_model}, vocab_size={vocab_size}"
        )
        if not isinstance(got, int) or isinstance(got, bool):
            raise ExerciseError(
                f"{where}: return a Python int (use // for floor division), "
                f"got {type(got).__name__}."
            )
        if got < 1:
            raise ExerciseError(
                f"{where}: d_ff={got}, but every case here has room for d_ff >= 1."
            )
        n_got, n_next = (
            _module_count(n_layers, d_model, got, vocab_size),
            _module_count(n_layers, d_model, got + 1, vocab_size),
        )
        if n_got > budget:
            raise ExerciseError(
                f"{where}: with d_ff={got} the encoder has {n_got:,} parameters, over the budget. "
                "Did you leave out the biases, the two LayerNorms per block, "
                "or the embedding table? "
                "Each block costs 4d² + 9d + d_ff·(2d + 1)."
            )
        if n_next <= budget:
            raise ExerciseError(
                f"{where}: d_ff={got} fits ({n_got:,} parameters), but so does d_ff={got + 1} "
                f"({n_next:,}). Round down only once, at the end: "
                "(budget - fixed) // (n_layers·(2d + 1))."
            )
    return passed(
        "every extra unit of d_ff costs 2·d_model + 1 parameters per layer, "
        "whatever the input's length."
    )


def check_branch_scale(fn: Callable[[int, float], float]) -> str:
    """``fn(depth, growth)``: the scale α of every residual branch, x <- x + α·F(x), for
    which ``depth`` variance-preserving sublayers multiply the second moment by ``growth``.

    Each layer adds α² times the stream's second moment, so (1 + α²)^depth = growth and
    α = sqrt(growth^(1/depth) - 1).
    """
    cases = [(8, 4.0), (64, 2.0), (2, 2.0), (128, 4.0), (12, 1.5), (1, 2.0)]
    for depth, growth in cases:
        got = call(fn, depth, growth)
        if isinstance(got, Tensor) and got.numel() == 1:
            got = got.item()
        where = f"depth={depth}, growth={growth}"
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise ExerciseError(
                f"{where}: return a number (a Python float), got {type(got).__name__}."
            )
        expected = math.sqrt(growth ** (1 / depth) - 1)
        if math.isclose(got, expected, rel_tol=1e-6):
            continue
        reached = (1 + got**2) ** depth if got == got else float("nan")
        mistakes = [
            (
                1 / math.sqrt(depth),
                "α = 1/√depth keeps the growth bounded (it tends to e ≈ 2.72 as the "
                "stack deepens; GPT-2 scales its residual layers this way), but it does "
                "not hit the growth you were asked for. Solve (1 + α²)^depth = growth.",
            ),
            (
                math.sqrt((growth - 1) / depth),
                "You linearised: (1 + α²)^depth ≈ 1 + depth·α² only when depth·α² is "
                "small. Solve (1 + α²)^depth = growth exactly.",
            ),
            (
                growth ** (1 / depth) - 1,
                "That is α², not α: α scales the branch's output, so the branch adds α² "
                "times the second moment. Take the square root.",
            ),
            (
                math.sqrt(growth ** (1 / depth)),
                "The skip path already carries the stream's own second moment (the 1 in "
                "1 + α²): subtract it before the square root.",
            ),
            (
                math.sqrt(growth / depth),
                "The growth compounds over the layers, it does not add up: "
                "(1 + α²)^depth = growth.",
            ),
        ]
        for wrong, message in mistakes:
            if math.isclose(got, wrong, rel_tol=1e-6):
                raise ExerciseError(f"{where}: {message}")
        raise ExerciseError(
            f"{where}: α = {got:.6g} makes the second moment grow by {reached:.6g}, not "
            f"{growth}. Each layer multiplies it by (1 + α²)."
        )
    return passed(
        "each layer multiplies the second moment by 1 + α², so α = "
        "sqrt(growth^(1/depth) - 1): the deeper the stack, the smaller each branch."
    )
