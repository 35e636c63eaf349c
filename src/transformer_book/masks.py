"""Boolean attention masks. Convention: True = this query may attend to this key.

That is the convention of ``torch.nn.functional.scaled_dot_product_attention``.
``torch.nn.MultiheadAttention`` uses the opposite (True = ignore), so pass ``~mask``
to it. Masks are built for separate query and key lengths, so the same functions
serve self-attention, cross-attention and cached decoding (chapters 02, 07, 09).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["causal_mask", "padding_mask", "padding_mask_from_ids"]


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
