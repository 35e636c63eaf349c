"""Deep stacks: chapter 3's feed-forward stacks, and chapter 6's task for deep taggers.

Chapter 3's section on residual connections. A stack applies
``depth`` sublayers :class:`transformer_book.blocks.FeedForward` ``(d, 4d)`` in one of
:data:`ARCHS`:

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
:func:`first_layer_gradients` shows what Adam's first step does with the gradient.

Chapter 6 trains deep transformer taggers on ATIS slot filling (Hemphill et al., 1990):
:func:`tagging_task` numbers the words and tags of a training and a dev split and pads
them into a :class:`TaggingTask`, which hands out training batches, dev batches, a
fixed probe batch and the baseline every dev loss is read against (the tag
frequencies alone, :mod:`transformer_book.baselines`). The functions after it read
the chapter's runs: a setting's losses over seeds (:func:`seed_summary`,
:func:`learned`, :func:`seed_verdict`), the tokens a trained stack hands its head
(:func:`head_collapse`), Fisher's exact test of the depth comparison
(:func:`fisher_one_sided`), and the verdicts the prose quotes, in words that read true
either way (:func:`separation_words`, :func:`spread_change`, :func:`grid_words`,
:func:`depth_words`).

Floor 3: it builds its stacks from ``blocks.FeedForward``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from transformer_book import baselines, batching, blocks, report
from transformer_book.data import SlotIntentSplit
from transformer_book.tagging import IGNORE
from transformer_book.vocab import Vocab

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
    "TaggingTask",
    "tagging_task",
    "seed_summary",
    "learned",
    "seed_verdict",
    "head_collapse",
    "fisher_one_sided",
    "separation_words",
    "spread_change",
    "grid_words",
    "depth_words",
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


# --- chapter 6: a tagging task for deep transformer stacks ---------------------------


@dataclass(frozen=True)
class TaggingTask:
    """A slot-filling task as padded tensors: word ids and tag ids of a training and a
    dev split, numbered by vocabularies of the training split.

    Dev words never seen in training are ``<unk>``; dev tags never seen in training
    get :data:`~transformer_book.tagging.IGNORE` (``unseen`` counts them), as does
    every padding position, so the loss skips them. Shapes: ``*_ids`` and ``*_tags``
    (N, T_max), ``*_lengths`` (N,)."""

    words: Vocab
    tags: Vocab
    train_ids: Tensor
    train_lengths: Tensor
    train_tags: Tensor
    dev_ids: Tensor
    dev_lengths: Tensor
    dev_tags: Tensor
    unseen: int

    def train_batches(self, batch_size: int, seed: int) -> batching.PaddedBatches:
        """Shuffled training batches (ids, tags) of queries of similar length, in an
        order set by ``seed``. Shapes: each (b, T), T the batch's longest query."""
        return batching.PaddedBatches(
            self.train_ids, self.train_lengths, self.train_tags, batch_size, seed
        )

    def dev_batches(self, batch_size: int = 128) -> batching.PaddedBatches:
        """Every dev query once, in a fixed order. Shapes: each (b, T)."""
        return batching.PaddedBatches(
            self.dev_ids, self.dev_lengths, self.dev_tags, batch_size, shuffle=False
        )

    def probe(self, n: int = 64) -> tuple[Tensor, Tensor]:
        """The first ``n`` training queries, cut to the longest of them: one fixed
        batch to look inside a model with. Shapes: -> ids (n, T), tags (n, T)."""
        if not 1 <= n <= len(self.train_lengths):
            raise ValueError(
                f"n must be in 1..{len(self.train_lengths)} (the training queries), "
                f"got {n}"
            )
        T = int(self.train_lengths[:n].max())
        return self.train_ids[:n, :T], self.train_tags[:n, :T]

    def prior_loss(self) -> float:
        """Dev loss, in nats per scored token, of predicting every token from the
        training tag frequencies (add-one smoothed): what a model scores without
        reading the words."""
        log_p = baselines.unigram_log_probs(
            self.train_tags[self.train_tags != IGNORE], len(self.tags)
        )
        return baselines.unigram_loss(log_p, self.dev_tags[self.dev_tags != IGNORE])


def tagging_task(train: SlotIntentSplit, dev: SlotIntentSplit) -> TaggingTask:
    """Number and pad a training and a dev split (words and one tag per word, as
    :func:`transformer_book.data.load_atis` returns them)."""
    for name, split in (("train", train), ("dev", dev)):
        lengths = [(len(w), len(t)) for w, t in zip(split.sentences, split.tags)]
        if not lengths or len(split.sentences) != len(split.tags):
            raise ValueError(
                f"{name} must hold as many tag lists as sentences, at least one, got "
                f"{len(split.sentences)} sentences and {len(split.tags)} tag lists"
            )
        bad = next((i for i, (a, b) in enumerate(lengths) if a != b), None)
        if bad is not None:
            raise ValueError(
                f"{name} sentence {bad} has {lengths[bad][0]} words but "
                f"{lengths[bad][1]} tags; expected one tag per word"
            )
    words = Vocab.from_corpus(train.sentences)
    tags = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
    train_ids, train_lengths = words.encode_batch(train.sentences)  # (N, T_max), (N,)
    train_tags, _ = tags.encode_batch(train.tags, pad_value=IGNORE)  # (N, T_max)
    dev_ids, dev_lengths = words.encode_batch(dev.sentences)  # unseen words -> <unk>
    dev_tags, _ = batching.pad_sequences(
        [[tags.stoi.get(t, IGNORE) for t in s] for s in dev.tags], IGNORE
    )  # (N_dev, T_max): tags unseen in training -> IGNORE
    unseen = sum(t not in tags.stoi for s in dev.tags for t in s)
    return TaggingTask(
        words, tags, train_ids, train_lengths, train_tags,
        dev_ids, dev_lengths, dev_tags, unseen,
    )  # fmt: skip


# --- chapter 6: reading the runs -----------------------------------------------------


def seed_summary(losses: Sequence[float], prior: float, margin: float = 0.02) -> str:
    """A setting's final losses, one per seed, in one cell: "mean ± std" over the runs
    that did not diverge (an infinite loss), then "k†" (runs that diverged) and "k="
    (runs that ended no better than ``prior - margin``)."""
    ok = [v for v in losses if math.isfinite(v)]
    spread = statistics.stdev(ok) if len(ok) > 1 else 0.0
    text = f"{statistics.mean(ok):.3f} ± {spread:.3f}" if ok else "—"
    flat = sum(v >= prior - margin for v in ok)
    return text + f"  {len(losses) - len(ok)}† {flat}="


def learned(losses: Sequence[float], prior: float, margin: float = 0.02) -> int:
    """How many runs ended more than ``margin`` below ``prior`` (a diverged run, with
    an infinite loss, never does)."""
    return sum(v < prior - margin for v in losses)


def seed_verdict(
    before: Sequence[float], after: Sequence[float], pairs: bool = False
) -> str:
    """:func:`transformer_book.report.compare_seeds` of ``after`` against ``before``,
    or "a run diverged: no t-test" when a loss is not finite."""
    if not all(map(math.isfinite, [*before, *after])):
        return "a run diverged: no t-test"
    return report.compare_seeds(before, after, pairs=pairs)


def head_collapse(
    model: nn.Module, ids: Tensor, keep: Tensor, tag: int
) -> tuple[float, float, float]:
    """How alike a tagger's tokens are, and how it tags them: the mean cosine between
    two real tokens of a query after the last block and where the head reads them (the
    encoder's output, after a pre-norm stack's final norm;
    :func:`transformer_book.blocks.stream_profile`), and the share of real tokens
    tagged ``tag``. The model's encoder is ``model.body.encoder``.

    Shapes: ids (B, T), keep (B, T) bool (True = a real token) -> three floats."""
    enc = model.body.encoder
    _, (cos, cos_head) = blocks.stream_profile(model, [enc.layers[-1], enc], ids, keep)
    with torch.no_grad():
        share = (model(ids).argmax(-1)[keep] == tag).float().mean().item()
    return cos, cos_head, share


def fisher_one_sided(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Fisher's exact test, one-sided: with ``k_a`` of ``n_a`` runs of arm a and
    ``k_b`` of ``n_b`` of arm b successful, the probability that the ``k_a + k_b``
    successes, dealt out at random over the ``n_a + n_b`` runs, give arm a at least
    ``k_a`` of them."""
    if not (0 <= k_a <= n_a and 0 <= k_b <= n_b):
        raise ValueError(
            f"need 0 <= k <= n for both arms, got {k_a} of {n_a} and {k_b} of {n_b}"
        )
    K, N = k_a + k_b, n_a + n_b
    lopsided = range(k_a, min(K, n_a) + 1)  # successes among arm a's runs
    total = sum(math.comb(n_a, i) * math.comb(n_b, K - i) for i in lopsided)
    return total / math.comb(N, K)


def _depths(Ls: Sequence[int]) -> str:
    return ", ".join(map(str, Ls)) + " blocks"


def separation_words(ratios: dict[tuple[bool, int], Tensor]) -> str:
    """Where single initialisations of post-norm (key ``(False, L)``) and pre-norm
    (``(True, L)``) stacks keep apart: every post-norm ratio last/first quarter above
    every pre-norm one, depth by depth. Shapes: each value (S,)."""
    depths = sorted({L for _, L in ratios})
    separate = [L for L in depths if ratios[False, L].min() > ratios[True, L].max()]
    others = [L for L in depths if L not in separate]  # where single seeds overlap
    if not separate:
        return "single post-norm and pre-norm initialisations overlap at every depth"
    where = "every post-norm initialisation is more top-heavy than every pre-norm "
    where += f"one at {_depths(separate)}"
    return where + (f"; at {_depths(others)} single ones overlap" if others else "")


def spread_change(
    small: Tensor, large: Tensor, n_small: int, n_large: int
) -> tuple[float, str]:
    """How a value per initialisation changes from ``n_small`` to ``n_large`` blocks:
    the ratio of the means, and in words whether the two ranges lie apart.

    Shapes: small (S,), large (S',) -> (ratio, words)."""
    ratio = large.mean().item() / small.mean().item()
    where = (
        "below" if large.max() < small.min() else "above" if large.min() > small.max()
        else ""
    )  # fmt: skip
    if where:
        return ratio, (
            f"with every initialisation at {n_large} blocks {where} every one at "
            f"{n_small}"
        )
    return ratio, (
        "a change within the spread of the initialisations (their ranges at "
        f"{n_small} and at {n_large} blocks overlap)"
    )


def grid_words(
    final: dict[tuple[str, float, int], Sequence[float]],
    prior: float,
    top: float,
    warmup: int,
    steps: int,
) -> dict[str, str]:
    """The training grid's verdicts, in words that read true either way. ``final``
    maps (placement "post" or "pre", learning rate, warm-up steps) to a final loss per
    seed; it holds post-norm at ``top`` with and without warm-up, and pre-norm at
    ``top`` without; a smaller rate in it adds a sentence on pre-norm with warm-up and
    on the smallest rate."""
    post_top, pre_top = final["post", top, 0], final["pre", top, 0]
    n_seeds = len(post_top)
    if all(v > prior for v in post_top):
        post_level = "every post-norm run ended above the prior, worse than the tag "
        post_level += "frequencies alone"
    elif learned(post_top, prior) == 0:  # none more than 0.02 below the prior
        post_level = "no post-norm run ended clearly below the prior"
    else:
        post_level = f"{learned(post_top, prior)} of the {n_seeds} post-norm runs "
        post_level += "ended below the prior"
    warm = final["post", top, warmup]
    k_warm = learned(warm, prior)
    runs_warm = (
        f"{k_warm} of the {n_seeds} post-norm runs" if k_warm else "no post-norm run"
    )
    warm_text = (
        f"With a warm-up over the first {warmup} steps, {runs_warm} got below the "
        f"prior (the best ended at {min(warm):.2f}): in {steps} steps, this warm-up "
        + ("got some of them learning." if k_warm else
           "did not get the deep post-norm stack learning.")
    )  # fmt: skip
    low = min(lr for _, lr, _ in final)
    if low < top:  # the full profile: pre-norm with a warm-up, and smaller rates
        at_low = [v for (_, lr, _), runs in final.items() if lr == low for v in runs]
        warm_text += (
            f" The pre-norm runs with that warm-up ended at "
            f"{statistics.mean(final['pre', top, warmup]):.2f} on average. At the "
            f"smallest rate ({low:g}), {learned(at_low, prior)} of the {len(at_low)} "
            f"runs of either kind got below the prior in {steps} steps."
        )
    return {
        "post_level": post_level,
        "warm_text": warm_text,
        "top_lr": f"{top:g}",
        "pre_top": f"{statistics.mean(pre_top):.2f}",
        "post_top": f"{statistics.mean(post_top):.2f}",
    }


def depth_words(
    k_shallow: int, n_shallow: int, k_deep: int, n_deep: int, p_value: float
) -> dict[str, str]:
    """The depth comparison's verdicts, in words that read true either way:
    ``k_shallow`` of ``n_shallow`` shallow runs learned, ``k_deep`` of ``n_deep`` deep
    ones, and ``p_value`` is :func:`fisher_one_sided` of that split."""
    verdict = (
        "a hint that depth makes the trouble worse, not a proof: if depth made no "
        "difference, a split at least this lopsided would come up by chance with "
        f"probability {p_value:.2f} (Fisher's exact test)"
    )
    if p_value < 0.05:
        verdict = "depth makes the difference here (Fisher's exact test: p = "
        verdict += f"{p_value:.2f})"
    return {
        "depth_verdict": verdict,
        "k_shallow": str(k_shallow),
        "k_deep": f"{k_deep or 'none'} of the {n_deep}",
        "shallow_rest": (
            f"The other {n_shallow - k_shallow} shallow runs did not, so this rate is "
            "hard on post-norm at either depth."
            if k_shallow < n_shallow
            else "At 2 blocks, every run did."
        ),
    }
