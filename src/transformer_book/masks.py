"""Boolean attention masks. Convention: True = this query may attend to this key.

That is the convention of ``torch.nn.functional.scaled_dot_product_attention``.
``torch.nn.MultiheadAttention`` uses the opposite (True = ignore), so pass ``~mask``
to it. Masks are built for separate query and key lengths, so the same functions
serve self-attention, cross-attention and cached decoding (chapters 02, 07, 09).
Sparse patterns (chapter 08): a sliding window of nearby keys, optionally with a few
global tokens that see and are seen by every position (Longformer).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "causal_mask",
    "masked_mean",
    "padding_mask",
    "padding_mask_from_ids",
    "sliding_window_mask",
    "with_global_tokens",
]


def causal_mask(
    n_queries: int,
    n_keys: int | None = None,
    device: str | torch.device | None = None,
) -> Tensor:
    """Query i may attend to key j only if j is not in its future.

    The queries are taken to be the *last* ``n_queries`` of the ``n_keys`` positions, so a
    single new token decoded against a cache of 9 earlier ones (1 query, 10 keys) sees
    all 10. Shapes: returns (n_queries, n_keys).
    """
    n_keys = n_queries if n_keys is None else n_keys
    if n_queries < 0 or n_keys < n_queries:
        raise ValueError(
            f"need 0 <= n_queries <= n_keys, got n_queries={n_queries}, n_keys={n_keys}"
        )
    offset = n_keys - n_queries
    return torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril(
        diagonal=offset
    )


def padding_mask(lengths: Tensor, n_keys: int) -> Tensor:
    """Keys beyond each sequence's length are padding and may not be attended to.

    Shapes: lengths (B,) of ints in [0, n_keys]; returns (B, 1, 1, n_keys), which
    broadcasts over heads and queries.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.dtype.is_floating_point:
        raise ValueError(
            f"lengths must be a 1-D integer tensor, got shape {tuple(lengths.shape)} "
            f"dtype {lengths.dtype}"
        )
    if (lengths < 0).any() or (lengths > n_keys).any():
        raise ValueError(
            f"lengths must lie in [0, n_keys={n_keys}], got {lengths.tolist()}"
        )
    keep = torch.arange(n_keys, device=lengths.device) < lengths[:, None]  # (B, Tk)
    return keep[:, None, None, :]  # (B, 1, 1, Tk)


def padding_mask_from_ids(ids: Tensor, pad_id: int) -> Tensor:
    """Mask out the key positions whose token id is ``pad_id``.

    Shapes: ids (B, Tk) -> (B, 1, 1, Tk).
    """
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, Tk)


def sliding_window_mask(
    n_queries: int,
    n_keys: int | None = None,
    *,
    window: int,
    causal: bool = True,
    device: str | torch.device | None = None,
) -> Tensor:
    """Each query may attend only to the keys within ``window`` positions of it.

    As in :func:`causal_mask`, the queries are the last ``n_queries`` of the ``n_keys``
    positions: query i sits at position p = i + n_keys - n_queries. Key j is allowed when
    0 <= p - j < window (``causal``: the token itself and the window - 1 before it) or
    |p - j| < window (not causal: window - 1 on each side). With window >= n_keys the
    causal mask equals :func:`causal_mask`. Hugging Face's Mistral uses the same causal
    window; its bidirectional window w allows |p - j| <= w, our window w + 1.
    Shapes: returns (n_queries, n_keys). Beltagy et al. (2020), Jiang et al. (2023).
    """
    n_keys = n_queries if n_keys is None else n_keys
    for name, value in (("n_queries", n_queries), ("n_keys", n_keys)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if n_queries < 0 or n_keys < n_queries:
        raise ValueError(
            f"need 0 <= n_queries <= n_keys, got n_queries={n_queries}, n_keys={n_keys}"
        )
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(
            f"window must be an int >= 1 (the number of keys a query sees on one "
            f"side, itself included), got {window!r}"
        )
    p = torch.arange(n_queries, device=device)[:, None] + (
        n_keys - n_queries
    )  # (Tq, 1)
    distance = p - torch.arange(n_keys, device=device)  # (Tq, Tk): p - j
    if causal:
        return (distance >= 0) & (distance < window)
    return distance.abs() < window


def with_global_tokens(mask: Tensor, positions: Tensor | list[int]) -> Tensor:
    """Return a copy of ``mask`` in which the tokens at ``positions`` are global.

    A global token attends to every key, and every query attends to it, as Longformer's
    global attention on, e.g., the [CLS] token (Beltagy et al., 2020). ``positions``
    are key positions in [0, n_keys); as in :func:`causal_mask`, the queries are the
    last n_queries positions, so query i has position i + n_keys - n_queries. The
    pattern is bidirectional: ``& causal_mask(...)`` afterwards keeps a model causal.
    Shapes: mask (..., Tq, Tk) boolean; positions (n,) ints; returns (..., Tq, Tk).
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() < 2:
        raise ValueError(
            "mask must be a boolean tensor of shape (..., n_queries, n_keys), got "
            + (
                f"dtype {mask.dtype} shape {tuple(mask.shape)}"
                if isinstance(mask, Tensor)
                else type(mask).__name__
            )
        )
    n_queries, n_keys = mask.shape[-2:]
    if n_keys < n_queries:
        raise ValueError(
            f"mask must have n_queries <= n_keys (queries are the last positions), "
            f"got shape {tuple(mask.shape)}"
        )
    pos = torch.as_tensor(positions, device=mask.device)
    if pos.numel() == 0:
        pos = pos.long()  # an empty list arrives as float
    if pos.dim() != 1 or pos.dtype.is_floating_point or pos.dtype == torch.bool:
        raise ValueError(
            f"positions must be a 1-D list or tensor of ints, got {positions!r}"
        )
    if ((pos < 0) | (pos >= n_keys)).any():
        raise ValueError(
            f"positions must lie in [0, n_keys={n_keys}), got {pos.tolist()}"
        )
    out = mask.clone()
    out[..., :, pos] = True  # every query sees the global tokens
    rows = pos - (n_keys - n_queries)  # query index of each global position
    out[..., rows[rows >= 0], :] = True  # global tokens see every key
    return out


def masked_mean(h: Tensor, keep: Tensor) -> Tensor:
    """Average of the vectors whose ``keep`` entry is True: sum(h_t · keep_t) / sum(keep_t).

    Mean pooling over the real tokens of padded sequences: every sentence classifier and
    sentence embedder in the book pools with this one function.
    Shapes: h (B, T, D), keep (B, T) bool -> (B, D). A row with nothing kept gives zeros
    (not NaN: the count is clamped at 1).
    """
    if keep.shape != h.shape[:2] or keep.dtype != torch.bool:
        raise ValueError(
            f"keep must be a bool tensor of shape {tuple(h.shape[:2])}, "
            f"got {keep.dtype} {tuple(keep.shape)}"
        )
    w = keep.to(h.dtype).unsqueeze(-1)  # (B, T, 1)
    return (h * w).sum(dim=1) / w.sum(dim=1).clamp(min=1.0)  # (B, D)
