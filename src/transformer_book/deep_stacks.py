"""Deep stacks of feed-forward sublayers: chapter 3's section on residual connections.

A stack applies ``depth`` sublayers :class:`transformer_book.blocks.FeedForward`
``(d, 4d)`` in one of :data:`ARCHS`:

- ``"plain"``: ``x <- F(x)``;
- ``"residual"``: ``x <- x + F(x)`` (He et al., 2016);
- ``"residual + LayerNorm"``: ``x <- LayerNorm(x + F(x))``, the block's Add & Norm.

To run many seeds at once the weights of one stack per seed are stacked along a
leading seed axis ``S`` (:func:`make_stacks`); the matrix products then run every
seed's stack side by side. :func:`sublayer_gains` measures how one sublayer scales
the second moment, forward and backward; :func:`gradients` measures what reaches the
first layer and the input at initialisation; :func:`train_stacks` trains each stack
with a linear read-out on a regression task and reports dev and test losses,
:func:`walk_the_grid` chooses its learning rate on dev, and
:func:`first_layer_gradients` shows what Adam's first step does with the gradient;
:func:`train_arms` trains every arm at every depth, :func:`input_share` measures how
little a plain stack's output depends on its input, and :func:`residual_growth` how a
residual stack with scaled branches grows its stream.

Floor 3: it builds its stacks from ``blocks.FeedForward``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from transformer_book import blocks

__all__ = [
    "ARCHS",
    "make_stacks",
    "stack_forward",
    "sublayer_gains",
    "gradients",
    "teacher_task",
    "train_stacks",
    "walk_the_grid",
    "first_layer_gradients",
    "train_arms",
    "input_share",
    "residual_growth",
]

ARCHS = ("plain", "residual", "residual + LayerNorm")
Init = Callable[[blocks.FeedForward], blocks.FeedForward] | None


def make_stacks(
    depth: int,
    d: int,
    init: Init,
    seeds: Sequence[int],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> list[Tensor]:
    """One stack of ``depth`` FeedForward(d, 4d) per seed, weights stacked by seed.

    ``init`` re-initialises each sublayer in place (None: PyTorch's default).
    Shapes: -> [W1, b1, W2, b2] of (S, depth, d, 4d), (S, depth, 1, 4d),
    (S, depth, 4d, d) and (S, depth, 1, d): leaf tensors, ready to train.
    """
    if depth < 1 or d < 1 or not len(seeds):
        raise ValueError(
            f"depth and d must be >= 1 and seeds non-empty, got depth={depth}, "
            f"d={d}, seeds={list(seeds)}"
        )
    per_seed = []
    for seed in seeds:
        torch.manual_seed(seed)
        ffs = [blocks.FeedForward(d, 4 * d) for _ in range(depth)]
        if init is not None:
            ffs = [init(f) for f in ffs]
        # nn.Linear computes x @ weight.T + bias: W1 = up_proj.weight.T
        W1 = torch.stack([f.up_proj.weight.T for f in ffs])  # (depth, d, 4d)
        b1 = torch.stack([f.up_proj.bias[None] for f in ffs])  # (depth, 1, 4d)
        W2 = torch.stack([f.down_proj.weight.T for f in ffs])  # (depth, 4d, d)
        b2 = torch.stack([f.down_proj.bias[None] for f in ffs])  # (depth, 1, d)
        per_seed.append([W1, b1, W2, b2])
    stacked = [torch.stack(p).to(device, dtype) for p in zip(*per_seed)]
    return [p.detach().requires_grad_() for p in stacked]  # leaves we can train


def stack_forward(
    x: Tensor, weights: list[Tensor], arch: str, skip_only: bool = False
) -> Tensor:
    """Run every seed's stack. Shapes: x (N, d) or (S, N, d) -> (S, N, d).

    ``skip_only`` detaches every F(x), so that gradients flow through the skip path
    only."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    for W1, b1, W2, b2 in zip(*(w.unbind(1) for w in weights)):  # layer by layer
        f = torch.relu(x @ W1 + b1) @ W2 + b2  # (S, N, d): the sublayer F(x)
        f = f.detach() if skip_only else f
        x = f if arch == "plain" else x + f
        if arch == "residual + LayerNorm":
            x = nn.functional.layer_norm(x, x.shape[-1:])  # γ = 1, β = 0
    return x


def sublayer_gains(ff: blocks.FeedForward, n_tokens: int = 4096) -> tuple[float, float]:
    """How one sublayer scales the second moment: E[y²] / E[x²] on ``n_tokens`` random
    tokens (E[x²] = 1), and the same for a random gradient sent back through it,
    E[(∂ℓ/∂x)²] / E[g²]. Shapes: tokens (n_tokens, d_model) -> (forward, backward)."""
    x = torch.randn(n_tokens, ff.d_model, requires_grad=True)  # E[x²] = 1
    y = ff(x)
    g = torch.randn_like(y)  # a gradient arriving from above
    y.backward(g)
    forward = y.pow(2).mean() / x.pow(2).mean()
    return forward.item(), (x.grad.pow(2).mean() / g.pow(2).mean()).item()


def gradients(
    depth: int,
    arch: str,
    init: Init,
    d: int,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
) -> Tensor:
    """Backpropagate a random gradient g from the top of a float64 stack per seed.

    Shapes: -> (4, S): per seed ‖∂ℓ/∂W1‖ of layer 1, ‖∂ℓ/∂x‖/‖g‖, the same through
    the skip path alone (0 for a plain stack), and the output's std; 16 random
    tokens per stack."""
    W = make_stacks(depth, d, init, seeds, torch.float64, device)
    x = torch.randn(len(seeds), 16, d, dtype=torch.float64, device=device)
    x.requires_grad_()  # (S, N, d): 16 random tokens for each stack
    y = stack_forward(x, W, arch)
    g = torch.randn_like(y)  # the gradient arriving from above, ∂ℓ/∂y
    (y * g).sum().backward()
    norm = lambda t: t.flatten(1).norm(dim=1)  # (S,): one norm per seed  # noqa: E731
    grad_W1 = norm(W[0].grad[:, 0])  # W[0] holds every W1; [:, 0] is layer 1's
    out_std = y.detach().flatten(1).std(1)  # (S,)
    skip = torch.zeros_like(out_std)  # a plain stack has no skip path
    if arch != "plain":  # backpropagate g again, through the skip path alone
        x0 = x.detach().requires_grad_()
        (stack_forward(x0, W, arch, skip_only=True) * g).sum().backward()
        skip = norm(x0.grad) / norm(g)
    return torch.stack([grad_W1, norm(x.grad) / norm(g), skip, out_std])


def teacher_task(
    d: int,
    steps: int,
    batch: int = 32,
    n_eval: int = 1024,
    seed: int = 1234,
    device: torch.device | str = "cpu",
) -> tuple[Callable[[Tensor], Tensor], Tensor, Tensor, Tensor]:
    """A fixed random function to learn, ``y = 1.5 tanh(x A) B`` with A (d, 2d) and
    B (2d, d), and its inputs, all drawn from one generator seeded with ``seed``.

    Shapes: -> teacher (..., d) -> (..., d), train_x (steps, batch, d) (a fresh batch
    every step), dev_x and test_x (n_eval, d)."""
    gen = torch.Generator().manual_seed(seed)  # the task's own random numbers
    A = torch.randn(d, 2 * d, generator=gen) / math.sqrt(d)  # the teacher's weights
    B = torch.randn(2 * d, d, generator=gen) / math.sqrt(2 * d)
    train_x = torch.randn(steps, batch, d, generator=gen)
    dev_x, test_x = torch.randn(2, n_eval, d, generator=gen)  # (n_eval, d) each
    A, B, train_x, dev_x, test_x = (
        t.to(device) for t in (A, B, train_x, dev_x, test_x)
    )

    def teacher(x: Tensor) -> Tensor:
        return 1.5 * torch.tanh(x @ A) @ B  # (..., d)

    return teacher, train_x, dev_x, test_x


def train_stacks(
    depth: int,
    arch: str,
    init: Init,
    lr: float,
    seeds: Sequence[int],
    teacher: Callable[[Tensor], Tensor],
    train_x: Tensor,
    eval_x: Sequence[Tensor],
    eps: float = 1e-8,
) -> list[Tensor]:
    """Train one stack plus a linear read-out per seed with Adam, one step per batch
    of ``train_x``, to match ``teacher``; return the loss on each of ``eval_x`` as a
    fraction of the target's variance. Shapes: train_x (steps, N, d), eval_x[i]
    (M, d) -> [(S,), ...]; the device is train_x's.

    ``eps`` is Adam's ε (Kingma and Ba, 2015), added to the root of each parameter's
    running second moment: a gradient far below it gets a step of about lr·|g|/ε
    instead of about lr. 1e-8 is PyTorch's default."""
    d, device = train_x.shape[-1], train_x.device
    W = make_stacks(depth, d, init, seeds, device=device)
    heads = [nn.Linear(d, d) for _ in seeds]  # default init
    W_out = torch.stack([h.weight.T for h in heads]).detach()  # (S, d, d)
    b_out = torch.stack([h.bias[None] for h in heads]).detach()  # (S, 1, d)
    head = [p.to(device).requires_grad_() for p in (W_out, b_out)]

    def predict(x: Tensor) -> Tensor:
        return stack_forward(x, W, arch) @ head[0] + head[1]  # (S, N, d)

    optimiser = torch.optim.Adam([*W, *head], lr=lr, eps=eps)
    for x in train_x:
        # one loss per stack, summed: each stack's weights get its own loss's gradient
        loss = (predict(x) - teacher(x)).pow(2).mean(dim=(1, 2)).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        return [
            (predict(x) - teacher(x)).pow(2).mean(dim=(1, 2)) / teacher(x).var()
            for x in eval_x
        ]


def walk_the_grid(
    depth: int,
    arch: str,
    init: Init,
    lrs: Sequence[float],
    eps: float = 1e-8,
    **task,
) -> tuple[int, dict[int, list[Tensor]]]:
    """Choose a learning rate for :func:`train_stacks` on dev by walking the grid
    ``lrs``: start at the middle rate and move to the neighbour with the lower dev loss
    (mean over the seeds; a NaN counts as infinite) until neither neighbour is lower,
    training only the rates visited. That finds the grid's best rate whenever the dev
    loss has a single minimum over it. ``task`` holds :func:`train_stacks`'s
    ``seeds``, ``teacher``, ``train_x`` and ``eval_x`` (dev first); ``eps`` is Adam's
    ε. Returns the chosen index and {index visited: train_stacks' losses}."""
    runs: dict[int, list[Tensor]] = {}

    def dev(i: int) -> float:
        if i not in runs:
            runs[i] = train_stacks(depth, arch, init, lrs[i], **task, eps=eps)
        return runs[i][0].mean().nan_to_num(torch.inf).item()

    i = len(lrs) // 2
    while True:
        lower = [j for j in (i - 1, i + 1) if 0 <= j < len(lrs) and dev(j) < dev(i)]
        if not lower:
            return i, runs
        i = min(lower, key=dev)


def first_layer_gradients(
    depth: int,
    arch: str,
    init: Init,
    seeds: Sequence[int],
    teacher: Callable[[Tensor], Tensor],
    x: Tensor,
) -> Tensor:
    """``|∂L/∂W1|`` of every weight of every layer's first matrix, for freshly built
    stacks (one per seed, as :func:`make_stacks`) under one linear read-out shared by
    the seeds (PyTorch's default initialisation, drawn after the stacks): the loss of
    one batch ``x``, the mean squared error against ``teacher`` per seed, summed over
    the seeds as :func:`train_stacks` does. The device is x's.

    Shapes: x (N, d) -> (depth, S·d·4d)."""
    d = x.shape[-1]
    W = make_stacks(depth, d, init, seeds, device=x.device)
    head = nn.Linear(d, d).to(x.device)  # a read-out, default init
    loss = (head(stack_forward(x, W, arch)) - teacher(x)).pow(2)
    loss.mean(dim=(1, 2)).sum().backward()  # one loss per seed, summed
    return W[0].grad.abs().transpose(0, 1).flatten(1)  # W[0] holds every layer's W1


def train_arms(
    depths: Sequence[int],
    arms: Sequence[tuple[str, str]],
    inits: dict[str, Init],
    lrs: Sequence[float],
    **task,
) -> tuple[dict, dict, dict]:
    """Every arm ``(arch, init name)`` at every depth, its rate chosen on dev by
    :func:`walk_the_grid` (``task`` as there). Returns, keyed by ``(depth, arm)``:
    the test losses at the chosen rate (S,) on the CPU, the chosen rate, and the
    sorted indices of the rates the walk trained."""
    missing = {init for _, init in arms} - set(inits)
    if missing:
        raise ValueError(f"inits must name every arm's init, missing {sorted(missing)}")
    test_loss, best_lr, tried = {}, {}, {}
    for depth in depths:
        for arm in arms:
            best, runs = walk_the_grid(depth, arm[0], inits[arm[1]], lrs, **task)
            best_lr[depth, arm], test_loss[depth, arm] = lrs[best], runs[best][1].cpu()
            tried[depth, arm] = sorted(runs)
    return test_loss, best_lr, tried


def input_share(depth: int, d: int, seeds: Sequence[int], n: int = 256) -> float:
    """How much a plain, default-initialised float64 stack's output varies between
    ``n`` random inputs (drawn first, from the global generator), relative to its size:
    the largest range over the inputs of any output feature, divided by the largest
    output. Shapes: inputs (n, d) -> outputs (S, n, d) -> a float."""
    x = torch.randn(n, d, dtype=torch.float64)
    W = make_stacks(depth, d, None, seeds, torch.float64)
    with torch.no_grad():
        y = stack_forward(x, W, "plain")  # (S, n, d)
    return ((y.amax(1) - y.amin(1)).amax() / y.abs().amax()).item()


def residual_growth(
    depth: int,
    d: int,
    init: Init,
    alpha: float,
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    n: int = 256,
) -> float:
    """How much a residual float64 stack whose branches are scaled by ``alpha``,
    ``x <- x + alpha F(x)``, multiplies the second moment of ``n`` random tokens per
    seed (drawn after the stacks). Shapes: x (S, n, d) -> y (S, n, d) -> a float."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    W = make_stacks(depth, d, init, seeds, torch.float64, device)
    with torch.no_grad():
        W[2].mul_(alpha)  # α·F(x): scale the last layer of every branch, W2 ...
        W[3].mul_(alpha)  # ... and b2
        x = torch.randn(len(seeds), n, d, dtype=torch.float64, device=device)
        y = stack_forward(x, W, "residual")  # (S, n, d)
    return (y.pow(2).mean() / x.pow(2).mean()).item()
