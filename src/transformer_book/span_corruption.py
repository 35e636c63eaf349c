"""Span corruption, T5's pre-training objective (chapter 10).

Pick about 15 % of a sequence's tokens in spans of about 3, replace each span by a
sentinel token in the model's input, and ask the decoder to write every sentinel
followed by the tokens it hid:

    original  Thank you for inviting me to your party last week .
    inputs    Thank you <X> me to your party <Y> week .
    targets   <X> for inviting <Y> last

Raffel et al. (2020), section 3.1.4, Figure 2, and the ``random_spans_noise_mask``
of their code. Re-exported by :mod:`transformer_book.t5`. :func:`corrupted_windows`
and :class:`SpanCorruptionBatches` turn a stream of token ids into training pairs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

__all__ = [
    "noise_span_mask",
    "span_corruption",
    "merge_spans",
    "corrupted_windows",
    "SpanCorruptionBatches",
    "left_neighbours",
    "sentinels_in_order",
    "span_lengths",
    "round_trips",
    "drawn_spans",
]


def _random_segmentation(n_items: int, n_segments: int, gen) -> list[int]:
    """Split n_items into n_segments non-empty runs, every split equally likely."""
    cuts = torch.randperm(n_items - 1, generator=gen)[: n_segments - 1] + 1
    edges = [0, *sorted(cuts.tolist()), n_items]
    return [b - a for a, b in zip(edges, edges[1:])]


def noise_span_mask(
    length: int,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Which tokens to corrupt: ``round(length · noise_density)`` of them (at least 1,
    at most length - 1) in ``round(noise / mean_span_length)`` spans (at least 1, at
    most the number of kept tokens).

    The noise tokens and the kept tokens are each cut into that many non-empty runs at
    random, then interleaved, kept run first: a sequence starts with kept tokens and
    ends with a corrupted span. T5's ``random_spans_noise_mask`` (Raffel et al., 2020,
    section 3.3.4; their code). Shapes: returns (length,) bool, True = corrupted.
    """
    if not isinstance(length, int) or length < 2:
        raise ValueError(
            f"length must be an integer >= 2 (one token to keep, one to corrupt), "
            f"got {length!r}"
        )
    if not 0.0 < noise_density < 1.0:
        raise ValueError(f"noise_density must be in (0, 1), got {noise_density}")
    if not mean_span_length >= 1.0:
        raise ValueError(f"mean_span_length must be >= 1, got {mean_span_length}")
    n_noise = min(max(round(length * noise_density), 1), length - 1)
    n_spans = max(round(n_noise / mean_span_length), 1)
    n_spans = min(n_spans, length - n_noise)  # each needs a kept run before it
    noise = _random_segmentation(n_noise, n_spans, generator)
    kept = _random_segmentation(length - n_noise, n_spans, generator)
    mask = torch.zeros(length, dtype=torch.bool)
    start = 0
    for k, n in zip(kept, noise):
        mask[start + k : start + k + n] = True  # kept run, then noise run
        start += k + n
    return mask


def span_corruption(
    ids: Sequence[int] | Tensor,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    sentinel_ids: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """T5's denoising example: each corrupted span of ``ids`` becomes one sentinel in
    the inputs; the targets list every sentinel followed by the span it hides.

    "Thank you for inviting me" -> inputs "Thank you <X> me", targets "<X> for inviting".
    Span i uses ``sentinel_ids[i]``. Spans as in :func:`noise_span_mask`; no eos is
    added. :func:`merge_spans` puts the two back together. Shapes: ids (L,) ->
    inputs (L - noise + spans,), targets (noise + spans,), int64.
    Raffel et al. (2020), section 3.1.4 and Figure 2.
    """
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(
            f"ids must be one sequence of shape (L,), got {tuple(ids.shape)}"
        )
    mask = noise_span_mask(len(ids), noise_density, mean_span_length, generator)
    starts = mask & ~torch.cat((mask.new_zeros(1), mask[:-1]))  # first token of a span
    n_spans = int(starts.sum())
    if len(sentinel_ids) < n_spans:
        raise ValueError(
            f"sentinel_ids has {len(sentinel_ids)} ids, but this sequence of "
            f"{len(ids)} tokens has {n_spans} corrupted spans"
        )
    inputs, targets = [], []
    span = -1
    for tok, noisy, start in zip(ids.tolist(), mask.tolist(), starts.tolist()):
        if start:
            span += 1
            inputs.append(sentinel_ids[span])
            targets.append(sentinel_ids[span])
        (targets if noisy else inputs).append(tok)
    return torch.tensor(inputs, dtype=torch.long), torch.tensor(
        targets, dtype=torch.long
    )


def merge_spans(
    inputs: Sequence[int] | Tensor,
    targets: Sequence[int] | Tensor,
    sentinel_ids: Sequence[int],
) -> list[int]:
    """Undo :func:`span_corruption`: replace each sentinel in ``inputs`` by the tokens
    that follow the same sentinel in ``targets``, up to the next sentinel. Strip an eos
    first: it would count as part of the last span. Returns the ids as a list."""
    sentinels = {int(s) for s in sentinel_ids}
    spans: dict[int, list[int]] = {}
    current = None
    for tok in (int(t) for t in targets):
        if tok in sentinels:
            current = tok
            spans[current] = []
        elif current is not None:
            spans[current].append(tok)
    out: list[int] = []
    for tok in (int(t) for t in inputs):
        out.extend(spans.get(tok, []) if tok in sentinels else [tok])
    return out


def corrupted_windows(
    stream: Tensor,
    n: int,
    window: int,
    sentinel_ids: Sequence[int],
    eos_id: int,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """``n`` windows of ``window`` tokens from random places of ``stream``, each
    span-corrupted (:func:`span_corruption`, T5's 15 % in spans of 3) with ``eos_id``
    appended to its inputs and its targets. Every window has the same counts, so the
    rows stack without padding.

    Shapes: stream (N,) -> inputs (n, S), targets (n, T), int64 on the CPU.
    """
    stream = torch.as_tensor(stream, dtype=torch.long)
    if stream.dim() != 1 or len(stream) <= window:
        raise ValueError(
            f"stream must be a 1-D tensor longer than window={window}, got shape "
            f"{tuple(stream.shape)}"
        )
    if n < 1 or window < 2:
        raise ValueError(f"need n >= 1 and window >= 2, got n={n}, window={window}")
    starts = torch.randint(len(stream) - window, (n,), generator=generator).tolist()
    pairs = [
        span_corruption(stream[s : s + window], sentinel_ids=sentinel_ids,
                        generator=generator)
        for s in starts
    ]  # fmt: skip
    end = torch.tensor([eos_id])
    inputs = torch.stack([torch.cat((i, end)) for i, _ in pairs])  # (n, S)
    targets = torch.stack([torch.cat((t, end)) for _, t in pairs])  # (n, T)
    return inputs, targets


class SpanCorruptionBatches:
    """An endless supply of training batches (inputs, targets) for T5's objective:
    :func:`corrupted_windows` of ``batch_size`` fresh random windows each, drawn with a
    generator seeded by ``seed`` (each iteration starts the draws afresh).

    Shapes: stream (N,) -> batches of inputs (batch_size, S), targets (batch_size, T).
    """

    def __init__(
        self,
        stream: Tensor,
        window: int,
        batch_size: int,
        sentinel_ids: Sequence[int],
        eos_id: int,
        seed: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.stream, self.window, self.batch_size = stream, window, batch_size
        self.sentinel_ids, self.eos_id, self.seed = sentinel_ids, eos_id, seed

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        gen = torch.Generator().manual_seed(self.seed)
        while True:
            yield corrupted_windows(
                self.stream, self.batch_size, self.window, self.sentinel_ids,
                self.eos_id, gen,
            )  # fmt: skip


def left_neighbours(
    inputs: Tensor, targets: Tensor, sentinel_ids: Sequence[int], eos_id: int
) -> tuple[Tensor, Tensor]:
    """Every hidden token of span-corrupted pairs and the token to its left in the
    original text: for a span's first token, the kept token before its sentinel in the
    inputs; for the others, the hidden token before it. A bigram model reads exactly
    this one neighbour (the *left-bigram* baseline of chapter 10).

    Every span has a kept token to its left (:func:`noise_span_mask` starts with a
    kept run). Shapes: inputs (B, S), targets (B, T) -> left, hidden (n_hidden,).
    """
    if inputs.dim() != 2 or targets.dim() != 2 or len(inputs) != len(targets):
        raise ValueError(
            f"inputs and targets must be (B, S) and (B, T) with the same B, got "
            f"{tuple(inputs.shape)} and {tuple(targets.shape)}"
        )
    sentinel = set(sentinel_ids)
    left, hidden = [], []
    for src, tgt in zip(inputs.tolist(), targets.tolist()):
        before = {tok: src[i - 1] for i, tok in enumerate(src) if tok in sentinel}
        if src and src[0] in sentinel:
            raise ValueError("a span starts the input: it has no left neighbour")
        prev = None
        for tok in tgt:
            if tok == eos_id:
                break
            if tok in sentinel:
                if tok not in before:
                    raise ValueError(
                        f"sentinel {tok} of the targets is not in the inputs"
                    )
                prev = before[tok]
            elif prev is None:
                raise ValueError("the targets must start with a sentinel")
            else:
                left.append(prev)
                hidden.append(tok)
                prev = tok
    return torch.tensor(left, dtype=torch.long), torch.tensor(hidden, dtype=torch.long)


def sentinels_in_order(
    written: Tensor, targets: Tensor, sentinel_ids: Sequence[int], eos_id: int
) -> list[bool]:
    """For every row: did the model write the format, every sentinel of its target in
    order and then the end token? The written row counts up to its first ``eos_id``
    (a row without one fails). Shapes: written (B, W), targets (B, T) -> B booleans."""
    sentinel = set(sentinel_ids)
    ok = []
    for w, t in zip(written.tolist(), targets.tolist(), strict=True):
        ok.append(
            eos_id in w
            and [x for x in w[: w.index(eos_id)] if x in sentinel]
            == [x for x in t if x in sentinel]
        )
    return ok


def span_lengths(mask: Tensor) -> list[int]:
    """The lengths of the runs of ``True`` (the noise spans) in a 1-D bool mask, in
    order. Shapes: (L,) -> one int per span."""
    edges = torch.diff(torch.nn.functional.pad(mask.int(), (1, 1)))  # (L + 1,)
    starts = (edges == 1).nonzero()  # +1 where a span starts
    ends = (edges == -1).nonzero()  # -1 right after it
    return (ends - starts).flatten().tolist()


def round_trips(
    lengths: Sequence[int],
    sentinel_ids: Sequence[int],
    generator: torch.Generator,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> tuple[bool, dict[int, set[tuple[int, int]]]]:
    """Corrupt ``list(range(L))`` for each ``L`` of ``lengths``, in order, one draw of
    ``generator`` each (:func:`span_corruption`), and merge it back
    (:func:`merge_spans`): whether every sequence came back exactly, and for each
    length the set of (inputs, targets) lengths its draws gave."""
    exact, sizes = True, {}
    for length in lengths:
        ids = list(range(length))
        inputs, targets = span_corruption(
            ids, noise_density, mean_span_length, sentinel_ids, generator
        )
        exact &= merge_spans(inputs, targets, sentinel_ids) == ids
        sizes.setdefault(length, set()).add((len(inputs), len(targets)))
    return exact, sizes


def drawn_spans(
    length: int,
    n_draws: int,
    generator: torch.Generator,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> tuple[list[int], int]:
    """``n_draws`` masks of :func:`noise_span_mask` for a sequence of ``length``
    tokens, drawn in order from ``generator``: the lengths of all their spans
    (:func:`span_lengths`, draw after draw) and in how many draws the last token was
    corrupted."""
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws}")
    spans, last = [], 0
    for _ in range(n_draws):
        mask = noise_span_mask(length, noise_density, mean_span_length, generator)
        spans += span_lengths(mask)
        last += int(mask[-1])
    return spans, last
