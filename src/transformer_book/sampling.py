"""Choosing the next token from a language model's logits (chapters 09 and 14).

A decoder outputs logits z over the vocabulary; the next token is drawn from
``softmax(z / temperature)``, optionally restricted first to the ``top_k`` most likely
tokens (Fan et al., 2018) or to the smallest set whose probability reaches ``top_p``
(nucleus sampling, Holtzman et al., 2020). ``temperature=0`` means greedy decoding:
always the most likely token. These are the primitives ``GPT.generate`` uses.
:func:`nucleus_size` counts what top-p keeps; :func:`next_logits` reads a model's
logits for the token after a prompt; :func:`certainty_by_kind` averages a
character model's certainty inside words, at their ends and after spaces
(:func:`certainty_lines` prints it);
:func:`continuations` samples a prompt's continuations under several settings.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "sample_next",
    "nucleus_size",
    "next_logits",
    "certainty_by_kind",
    "certainty_lines",
    "continuations",
]


def _check_logits(logits: Tensor) -> None:
    if logits.dim() < 1 or not logits.dtype.is_floating_point:
        raise ValueError(
            "logits must be a floating-point tensor (..., vocab_size), got "
            f"shape {tuple(logits.shape)} dtype {logits.dtype}"
        )


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """``logits / temperature``: below 1 sharpens the distribution, above 1 flattens it.

    Shapes: (..., V) -> (..., V). Greedy decoding (temperature 0) is :func:`sample_next`'s.
    """
    _check_logits(logits)
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0 to rescale logits, got {temperature} "
            "(sample_next treats 0 as greedy decoding)"
        )
    return logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the ``k`` largest logits of every row, set the others to -inf.

    Ties with the k-th largest value are kept. Shapes: (..., V) -> (..., V).
    """
    _check_logits(logits)
    if int(k) != k or k < 1:
        raise ValueError(f"top_k must be a positive integer, got {k!r}")
    k = min(int(k), logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filtering: keep the most likely tokens until their probability reaches
    ``p`` (at least one token), set the others to -inf.

    Shapes: (..., V) -> (..., V). Holtzman et al. (2020).
    """
    _check_logits(logits)
    if not 0 < p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (..., V)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # probability of the more likely tokens
    drop_sorted = before >= p  # the set already reached p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick one token id per row: greedy when ``temperature == 0``, else sample from
    ``softmax(filtered logits / temperature)``.

    Order: temperature, then top-k, then top-p (as Hugging Face ``generate``).
    Shapes: logits (B, V) -> ids (B,) int64.
    """
    _check_logits(logits)
    if logits.dim() != 2:
        raise ValueError(
            f"logits must have shape (B, vocab_size), got {tuple(logits.shape)}"
        )
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = logits.float().softmax(dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def nucleus_size(logits: Tensor, p: float) -> Tensor:
    """How many tokens :func:`top_p_filter` keeps at ``p``: (..., V) -> (...,) int64."""
    return (top_p_filter(logits, p) > float("-inf")).sum(-1)


def next_logits(model, ids: Tensor) -> Tensor:
    """The logits ``model`` gives the token after each row of ``ids``, computed without
    gradients and returned in float32 on the CPU. Shapes: ids (B, T) -> (B, V)."""
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise ValueError(f"ids must be (B, T) with T >= 1, got {tuple(ids.shape)}")
    with torch.no_grad():
        return model(ids)[:, -1].float().cpu()  # (B, V)


def certainty_by_kind(
    logits: Tensor, x: Tensor, y: Tensor, is_letter: Tensor, space: int, p: float = 0.9
) -> dict[str, dict[str, float]]:
    """How sure a character model is, by kind of position (chapter 14).

    ``logits`` (B, T, V) were computed at positions that read the characters ``x``
    (B, T) and were followed by ``y`` (B, T); ``is_letter`` (V,) marks the letters,
    ``space`` is the space's id. Kinds: ``"inside a word"`` (a letter the next letter
    continues), ``"end of a word"`` (a letter followed by a non-letter), ``"after a
    space"``. For each kind: ``n`` positions, ``top``, the mean probability of the
    most likely next character, its quartiles ``q1`` and ``q3``, and ``kept``, the mean
    number of characters :func:`top_p_filter` keeps at ``p``.
    """
    top = logits.softmax(-1).amax(-1)  # (B, T)
    kept = nucleus_size(logits, p)  # (B, T)
    kinds = {
        "inside a word": is_letter[x] & is_letter[y],
        "end of a word": is_letter[x] & ~is_letter[y],
        "after a space": x == space,
    }
    out = {}
    for kind, m in kinds.items():
        q1, q3 = top[m].quantile(torch.tensor([0.25, 0.75])).tolist()
        out[kind] = dict(n=int(m.sum()), top=top[m].mean().item(), q1=q1, q3=q3,
                         kept=kept[m].float().mean().item())  # fmt: skip
    return out


def certainty_lines(where: dict[str, dict[str, float]]) -> list[str]:
    """One line per kind of position of :func:`certainty_by_kind`'s ``where``: how
    many positions, the mean probability of the most likely next character with its
    quartiles, and how many characters top-p keeps on average."""
    return [
        f"{kind:13s} {w['n']:5,} positions: most likely p = {w['top']:.2f} "
        f"(quartiles {w['q1']:.2f}-{w['q3']:.2f}), top-p keeps {w['kept']:4.1f}"
        for kind, w in where.items()
    ]


def continuations(model, prompt: Tensor, n_new: int, n_samples: int,
                  settings: dict[str, dict], seed: int = 0) -> dict[str, Tensor]:  # fmt: skip
    """``n_samples`` continuations of ``prompt`` (1, T0) for each decoding setting
    (keyword arguments of ``model.generate``), every setting from the same seeded
    generator. Greedy settings (``temperature=0``) write one text however often they
    run: two are generated, checked equal, and one is returned.
    Returns: name -> the new token ids (n_samples, n_new), or (1, n_new) if greedy.
    """
    out = {}
    for name, kwargs in settings.items():
        greedy = kwargs.get("temperature") == 0
        gen = torch.Generator(device=prompt.device).manual_seed(seed)
        start = prompt.repeat(2 if greedy else n_samples, 1)  # (B, T0)
        new = model.generate(start, n_new, generator=gen, **kwargs)[
            :, prompt.shape[1] :
        ]
        if greedy and not torch.equal(new[0], new[1]):
            raise RuntimeError(f"{name}: greedy decoding gave two different texts")
        out[name] = new[:1] if greedy else new  # (B, n_new)
    return out
