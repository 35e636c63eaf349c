"""Length extrapolation: train at one sequence length, test at a longer one (chapter 4).

The experiment behind chapter 4's comparison of position schemes. Two tagging tasks on
random sequences of ``vocab_size`` token types, of which the first ``n_markers`` are
*markers* (each position is a marker with probability 0.2):

- **copy**: at every position, the token ``offset`` places back (an exact offset);
- **last marker**: at every position, the most recent marker so far (recency).

:class:`Tagger` puts one of :data:`SCHEMES` into the same small model (token embedding,
the scheme, a causal :class:`transformer_book.blocks.Encoder`, a linear guess per
position); :func:`train_and_test` trains it with :func:`transformer_book.training.train`
and measures its accuracy at every test length; at a length longer than the training
one it counts only the positions a training sequence never had (with a causal mask, the
first ``train_len`` positions of a longer sequence compute what a training-length
sequence computes; :func:`same_prefix` checks it). What the accuracies over seeds
support is read by :mod:`transformer_book.extrapolation_verdicts`. Positions with no
answer yet hold :data:`IGNORE`; the loss and the accuracy skip them.

Floor 4 (a recipe): it builds its model from ``blocks`` and ``positions``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import blocks, masks, positions, training

__all__ = [
    "IGNORE",
    "SCHEMES",
    "TASKS",
    "make_batch",
    "test_sets",
    "train_batches",
    "Tagger",
    "accuracy",
    "best_constant",
    "train_and_test",
    "train_schemes",
    "measure_copy",
    "far_attention",
    "same_prefix",
    "new_angle_gaps",
]

IGNORE = -100  # the target of a position with no answer (cross_entropy's ignore_index)
SCHEMES = ("none", "learned", "sinusoidal", "T5 bias", "ALiBi", "RoPE")
TASKS = {"copy": 1, "last marker": 2}  # task -> index of its targets in a batch


def make_batch(
    n: int,
    T: int,
    gen: torch.Generator,
    offset: int = 3,
    vocab_size: int = 16,
    n_markers: int = 4,
) -> tuple[Tensor, Tensor, Tensor]:
    """Token ids, copy targets and last-marker targets, (n, T) each.

    Shapes: -> ids (n, T), copy (n, T), last marker (n, T); :data:`IGNORE` where a
    position has no answer (the first ``offset`` ones; before the first marker).
    """
    if not 0 < offset < T:
        raise ValueError(f"offset must be in 1 … T - 1 = {T - 1}, got {offset}")
    if not 0 < n_markers < vocab_size:
        raise ValueError(
            f"n_markers must be in 1 … vocab_size - 1 = {vocab_size - 1}, "
            f"got {n_markers}"
        )
    ids = torch.randint(n_markers, vocab_size, (n, T), generator=gen)  # ordinary tokens
    is_marker = torch.rand(n, T, generator=gen) < 0.2
    marker_ids = torch.randint(0, n_markers, (n, T), generator=gen)
    ids = torch.where(is_marker, marker_ids, ids)  # (n, T)
    copy = torch.full_like(ids, IGNORE)
    copy[:, offset:] = ids[:, :-offset]  # the token `offset` places back
    # (n, T): the index of the latest marker so far, -1 before the first one
    last = torch.where(is_marker, torch.arange(T), -1).cummax(dim=1).values
    marker = torch.where(last >= 0, ids.gather(1, last.clamp(min=0)), IGNORE)
    return ids, copy, marker


def _to(batch: tuple[Tensor, ...], device: torch.device | str) -> tuple[Tensor, ...]:
    return tuple(t.to(device) for t in batch)


def test_sets(
    n: int,
    lengths: tuple[int, ...],
    offset: int = 3,
    device: torch.device | str = "cpu",
) -> dict[int, tuple[Tensor, Tensor, Tensor]]:
    """Fresh test batches of ``n`` sequences per length, seeded by the length alone
    (the same for every seed of a model). Shapes: {T: ((n, T), (n, T), (n, T))}."""
    return {
        T: _to(make_batch(n, T, torch.Generator().manual_seed(T), offset), device)
        for T in lengths
    }


def train_batches(
    seed: int,
    n_batches: int,
    size: int,
    length: int,
    offset: int = 3,
    device: torch.device | str = "cpu",
) -> list[tuple[Tensor, Tensor, Tensor]]:
    """``n_batches`` training batches of ``size`` sequences of ``length``, drawn from
    one generator seeded with ``seed``. Shapes: each ((size, length), …)."""
    gen = torch.Generator().manual_seed(seed)
    return [
        _to(make_batch(size, length, gen, offset), device) for _ in range(n_batches)
    ]


class Tagger(nn.Module):
    """Embedding + position scheme + causal encoder + a token guess per position.

    ``train_len`` sizes the learned table (``max_len``) and is the T5 bias's default
    ``max_distance``; the T5 bias has 16 causal buckets.
    Shapes: ids (B, T) -> logits (B, T, vocab_size).
    """

    def __init__(
        self,
        scheme: str,
        train_len: int,
        layers: int = 1,
        width: int = 32,
        n_heads: int = 4,
        max_distance: int | None = None,
        vocab_size: int = 16,
    ) -> None:
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        self.scheme, self.width, self.n_heads = scheme, width, n_heads
        self.embed = nn.Embedding(vocab_size, width)
        if scheme == "learned":
            self.learned = positions.LearnedPositionalEmbedding(train_len, width)
        if scheme == "T5 bias":
            self.t5 = positions.T5RelativeBias(
                n_heads,
                num_buckets=16,
                max_distance=train_len if max_distance is None else max_distance,
                bidirectional=False,
            )
        rope = None  # RoPE acts inside attention: the encoder's layers get it
        if scheme == "RoPE":
            rope = positions.RotaryEmbedding(width // n_heads)
        self.encoder = blocks.Encoder(layers, width, n_heads, 2 * width, rope=rope)
        self.head = nn.Linear(width, vocab_size)

    def prepare(self, ids: Tensor) -> tuple[Tensor, Tensor | None]:
        """Token vectors (B, T, width) with absolute positions added, and the score
        bias (1, H, T, T) that every layer adds (T5, ALiBi), or None."""
        T = ids.shape[1]
        x = self.embed(ids)  # (B, T, width)
        if self.scheme == "learned":
            x = self.learned(x)
        elif self.scheme == "sinusoidal":
            x = x + positions.sinusoidal_encoding(T, self.width).to(x.device)
        bias = None
        if self.scheme == "T5 bias":
            bias = self.t5(T)  # computed once, shared by every layer, as in T5
        elif self.scheme == "ALiBi":
            bias = positions.alibi_bias(self.n_heads, T, device=ids.device)
        return x, bias

    def forward(self, ids: Tensor) -> Tensor:
        x, bias = self.prepare(ids)  # RoPE, if any, acts inside the attention layers
        mask = masks.causal_mask(ids.shape[1], device=ids.device)
        return self.head(self.encoder(x, mask=mask, bias=bias))  # (B, T, vocab)


@torch.no_grad()
def accuracy(model: nn.Module, ids: Tensor, target: Tensor, start: int = 0) -> float:
    """Share of the positions from ``start`` on with an answer that the model gets
    right. Shapes: ids, target (B, T)."""
    if not 0 <= start < ids.shape[1]:
        raise ValueError(
            f"start must be in 0 … T - 1 = {ids.shape[1] - 1}, got {start}"
        )
    keep = target != IGNORE
    keep[:, :start] = False
    return (model(ids).argmax(dim=-1)[keep] == target[keep]).float().mean().item()


def best_constant(target: Tensor) -> float:
    """The accuracy of always guessing the most frequent answer of ``target`` (the
    baseline of a task). Shapes: target (B, T), :data:`IGNORE` skipped."""
    answers = target[target != IGNORE]
    if not len(answers):
        raise ValueError("target must hold at least one answer, got only IGNORE")
    return answers.bincount().max().item() / len(answers)


def train_and_test(
    scheme: str,
    task: int,
    seed: int,
    batches: list,
    tests: dict,
    steps: int,
    lr: float,
    device: torch.device | str = "cpu",
    **tagger: object,
) -> tuple[dict[int, float | None], Tagger]:
    """Train a :class:`Tagger` (``tagger`` are its keyword arguments) from ``seed`` on
    the targets at index ``task`` of each batch, for ``steps`` AdamW steps at ``lr``;
    return its accuracy per test length (None where it cannot run: the learned table
    has no row past ``train_len``) and the model. At a test length longer than
    ``train_len`` the accuracy counts only the positions ``train_len`` and later: with
    the causal mask, the earlier ones compute what a training-length sequence does."""
    if task not in TASKS.values():
        raise ValueError(f"task must be one of {sorted(TASKS.values())}, got {task}")
    torch.manual_seed(seed)
    model = Tagger(scheme, **tagger).to(device)

    def loss_fn(m: nn.Module, b: tuple) -> Tensor:
        logits = m(b[0])  # (B, T, vocab)
        return F.cross_entropy(
            logits.flatten(0, 1), b[task].flatten(), ignore_index=IGNORE
        )

    training.train(model, batches, loss_fn, steps, lr=lr)
    train_len = int(tagger["train_len"])
    result: dict[int, float | None] = {}
    for length, batch in tests.items():
        start = train_len if length > train_len else 0  # only the new positions
        try:
            result[length] = accuracy(model, batch[0], batch[task], start)
        except ValueError:  # the learned table has no row for positions >= train_len
            result[length] = None
    return result, model


def train_schemes(
    runs: list[tuple[str, str, str, dict]],
    seeds: list[int],
    tests: dict,
    steps: int,
    batch_size: int,
    lr: float,
    device: torch.device | str = "cpu",
    **tagger: object,
) -> tuple[dict[tuple[str, str], dict[int, list]], dict[tuple[str, int], Tagger]]:
    """Every run of ``runs`` from every seed, by :func:`train_and_test`: a run is
    (name, task name of :data:`TASKS`, scheme, the Tagger's keyword arguments beyond
    ``tagger``). Each seed draws its ``steps`` training batches of ``batch_size``
    (:func:`train_batches`, sequences of ``tagger["train_len"]``, offset 3) once and
    trains every run on them, so the runs of one seed pair up.

    Returns {(name, task): {test length: [accuracy per seed]}} and the copy task's
    models, {(name, seed): model}."""
    results: dict[tuple[str, str], dict[int, list]] = {}
    models: dict[tuple[str, int], Tagger] = {}
    train_len = int(tagger["train_len"])
    for seed in seeds:
        batches = train_batches(seed, steps, batch_size, train_len, 3, device)
        for name, task, scheme, kw in runs:
            kwargs = {**tagger, **kw}  # the run's own arguments win
            acc, model = train_and_test(
                scheme, TASKS[task], seed, batches, tests, steps, lr, device, **kwargs
            )
            for length, value in acc.items():
                results.setdefault((name, task), {L: [] for L in tests})
                results[name, task][length].append(value)
            if task == "copy":
                models[name, seed] = model
    return results, models


def measure_copy(
    offset: int,
    n_test: int,
    seed: int = 0,
    train_len: int = 32,
    device: torch.device | str = "cpu",
) -> dict[str, tuple[float, float | None]]:
    """Train every scheme on copy at ``offset`` at chapter 4's quick size (one layer,
    width 32, 4 heads; 80 steps of 16 sequences of ``train_len`` at 2e-2) and test at
    ``train_len`` and twice it (on the positions ``train_len`` and later): scheme ->
    (accuracy, accuracy or None)."""
    short, long = train_len, 2 * train_len
    tests = test_sets(n_test, (short, long), offset, device)
    batches = train_batches(seed, 80, 16, train_len, offset, device)
    shape = dict(train_len=train_len, layers=1, width=32, n_heads=4)
    measured = {}
    for s in SCHEMES:
        acc, _ = train_and_test(
            s, TASKS["copy"], seed, batches, tests, 80, 2e-2, device, **shape
        )
        measured[s] = (acc[short], acc[long])
    return measured


@torch.no_grad()
def far_attention(model: Tagger, ids: Tensor, distance: int) -> float:
    """Share of the first layer's attention that queries at positions >= ``distance``
    put on keys ``distance`` or more places back (mean over queries, heads and
    sequences). Shapes: ids (B, T)."""
    x, bias = model.prepare(ids)
    T = ids.shape[1]
    if not 0 < distance < T:
        raise ValueError(f"distance must be in 1 … T - 1 = {T - 1}, got {distance}")
    mask = masks.causal_mask(T, device=ids.device)
    # the blocks are post-norm: the first attention sees x itself; w (B, H, T, T)
    _, w = model.encoder.layers[0].attn(x, mask=mask, bias=bias, need_weights=True)
    # (T, T): True where the key is `distance` or more places back
    far = positions.relative_positions(T, device=ids.device) <= -distance
    # (B, H, T) -> the queries at positions >= distance
    return (w * far).sum(dim=-1)[..., distance:].mean().item()


@torch.no_grad()
def same_prefix(model: nn.Module, ids: Tensor, n: int, atol: float = 1e-5) -> bool:
    """Whether the model computes, on the first ``n`` positions of ``ids``, what it
    computes on those ``n`` tokens alone (to ``atol``): true for every causal
    :class:`Tagger` whose scheme does not depend on the length. Shapes: ids (B, T)."""
    if not 0 < n <= ids.shape[1]:
        raise ValueError(f"n must be in 1 … T = {ids.shape[1]}, got {n}")
    whole, prefix = model(ids), model(ids[:, :n])  # (B, T, vocab), (B, n, vocab)
    return torch.allclose(whole[:, :n], prefix, atol=atol)


def new_angle_gaps(theta: Tensor, train_len: int, test_len: int) -> list[float]:
    """For every RoPE pair turning by ``theta[i]`` per position: how far (radians,
    around the circle) the angle of a distance ``train_len`` … ``test_len - 1`` lies
    at most from the nearest angle of a distance 0 … ``train_len - 1``. Shapes: theta
    (pairs,) -> a list of ``pairs`` floats."""
    if not 0 < train_len < test_len:
        raise ValueError(
            f"need 0 < train_len < test_len, got {train_len} and {test_len}"
        )
    seen = torch.arange(0, train_len).double()
    new = torch.arange(train_len, test_len).double()
    gaps = []
    for th in theta.tolist():
        diff = (new[:, None] - seen[None, :]) * th  # (new, seen): new minus seen angle
        around = torch.remainder(diff + math.pi, 2 * math.pi) - math.pi  # (-pi, pi]
        gaps.append(around.abs().min(dim=1).values.max().item())
    return gaps
