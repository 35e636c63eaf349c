"""Positional information for attention, five ways (chapter 04).

Attention alone treats its input as a *set*: permute the tokens and the outputs are
permuted the same way. Each scheme here tells the model where a token is:

- absolute, added to the token embeddings before the first block:
  :class:`LearnedPositionalEmbedding` (a trained vector per position, up to ``max_len``)
  and :func:`sinusoidal_encoding` (fixed sines and cosines, Vaswani et al., 2017, 3.5);
- relative, added to the attention scores of every layer as ``bias`` (B, H, Tq, Tk):
  :class:`T5RelativeBias` (a learned scalar per head and log-sized distance bucket,
  Raffel et al., 2020) and :func:`alibi_bias` (a fixed per-head slope times the
  distance, Press et al., 2022);
- relative, by rotating queries and keys: :class:`RotaryEmbedding` (RoPE, Su et al.,
  2024), passed to ``MultiHeadAttention(rope=...)``.

Positions follow :func:`transformer_book.masks.causal_mask`: with ``n_queries`` queries
and ``n_keys`` keys, the queries sit at the *last* ``n_queries`` key positions.

RoPE layout. This book pairs feature ``i`` with feature ``i + head_dim/2`` (the
"half-split" layout of Hugging Face's Llama, ``rotate_half``), not neighbours ``(2i, 2i+1)``
as written in the RoFormer paper. The two differ only by a fixed permutation of the
features, which the learned q/k projections absorb; the half-split form needs no
strided indexing, and it lets the tests compare with Llama directly.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "LearnedPositionalEmbedding",
    "sinusoidal_encoding",
    "relative_positions",
    "t5_relative_position_bucket",
    "causal_buckets",
    "T5RelativeBias",
    "alibi_slopes",
    "alibi_bias",
    "rope_angles",
    "rotate_half",
    "apply_rope",
    "RotaryEmbedding",
]

Device = str | torch.device | None


# --- absolute positions ---------------------------------------------------------------


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position 0 … max_len-1, added to the token embeddings.

    Shapes: x (B, T, d_model) -> (B, T, d_model), positions ``offset … offset+T-1``.
    A position past ``max_len - 1`` was never trained and has no vector: ValueError.
    Vaswani et al. (2017), section 3.5 (the learned variant); BERT and GPT-2 use it.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        if max_len < 1 or d_model < 1:
            raise ValueError(
                f"max_len and d_model must be positive, got max_len={max_len}, d_model={d_model}"
            )
        self.max_len, self.d_model = max_len, d_model
        # row p = the vector of position p
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        T = x.shape[1]
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if offset + T > self.max_len:
            raise ValueError(
                f"sequence length {T} (positions {offset}..{offset + T - 1}) exceeds "
                f"max_len={self.max_len}: learned positional embeddings exist only for "
                f"positions 0..{self.max_len - 1}"
            )
        return x + self.embedding.weight[offset : offset + T]  # (B, T, d_model)


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = 10000.0
) -> Tensor:
    """The fixed encoding of Vaswani et al. (2017), section 3.5, with sin and cos interleaved.

    ``PE[p, 2i] = sin(p · ω_i)``, ``PE[p, 2i+1] = cos(p · ω_i)``, ``ω_i = base^(-2i/d_model)``.
    Shapes: returns (n_positions, d_model).
    """
    if n_positions < 0:
        raise ValueError(f"n_positions must be >= 0, got {n_positions}")
    if d_model < 2 or d_model % 2:
        raise ValueError(
            f"d_model must be a positive even number (sin/cos pairs), got {d_model}"
        )
    # (d/2,): one frequency per sin/cos pair
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * omega  # (P, d/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (P, d/2, 2)
    return pe.reshape(n_positions, d_model).float()  # (P, d): sin, cos, sin, cos, ...


# --- relative positions as a score bias -------------------------------------------------


def relative_positions(
    n_queries: int, n_keys: int | None = None, device: Device = None
) -> Tensor:
    """``key position - query position`` for every (query, key) pair; queries are the last keys.

    Shapes: returns (n_queries, n_keys) of int64; negative = the key is in the past.
    """
    n_keys = n_queries if n_keys is None else n_keys
    if n_queries < 0 or n_keys < n_queries:
        raise ValueError(
            f"need 0 <= n_queries <= n_keys, got n_queries={n_queries}, n_keys={n_keys}"
        )
    q_pos = torch.arange(n_keys - n_queries, n_keys, device=device)  # (Tq,)
    k_pos = torch.arange(n_keys, device=device)  # (Tk,)
    return k_pos[None, :] - q_pos[:, None]  # (Tq, Tk)


def t5_relative_position_bucket(
    relative_position: Tensor,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """Map ``key - query`` distances to T5's buckets: exact when small, logarithmic when large.

    Bidirectional: half the buckets for keys before the query, half for keys after it.
    Causal (``bidirectional=False``): all buckets for the past; keys after the query share
    bucket 0. Of the buckets for one direction, the first half are the exact distances
    0 … max_exact-1; the rest cover max_exact … max_distance in logarithmically growing
    steps, and everything farther shares the last one.
    Shapes: any integer tensor -> same shape, int64 in [0, num_buckets). Raffel et al. (2020).
    """
    if (
        relative_position.dtype.is_floating_point
        or relative_position.dtype == torch.bool
    ):
        raise ValueError(
            f"relative_position must be an integer tensor, got dtype {relative_position.dtype}"
        )
    n = num_buckets // 2 if bidirectional else num_buckets  # buckets per direction
    max_exact = n // 2
    if max_exact < 1:
        raise ValueError(
            f"num_buckets={num_buckets} is too small: need at least {4 if bidirectional else 2}"
        )
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed the exact range {max_exact}, got max_distance={max_distance}"
        )
    rel = relative_position.long()
    if bidirectional:
        bucket = (rel > 0).long() * n  # keys after the query use the upper half
        dist = rel.abs()
    else:
        bucket = torch.zeros_like(rel)
        dist = (-rel).clamp(min=0)  # distance into the past; future keys -> 0
    # log-spaced buckets: max_exact + (n - max_exact) · log(dist / max_exact)
    # / log(max_distance / max_exact)
    log_ratio = torch.log(dist.clamp(min=max_exact).float() / max_exact) / math.log(
        max_distance / max_exact
    )
    large = (max_exact + (log_ratio * (n - max_exact)).long()).clamp(max=n - 1)
    return bucket + torch.where(dist < max_exact, dist, large)


def causal_buckets(
    first: int, last: int, max_distance: int = 128, num_buckets: int = 32
) -> list[int]:
    """The causal T5 buckets (:func:`t5_relative_position_bucket`,
    ``bidirectional=False``) that the distances ``first`` … ``last`` into the past
    reach, sorted. Shapes: -> a list of at most ``num_buckets`` ints."""
    if not 0 <= first <= last:
        raise ValueError(f"need 0 <= first <= last, got first={first}, last={last}")
    rel = -torch.arange(first, last + 1)  # key - query < 0: keys in the past
    b = t5_relative_position_bucket(rel, False, num_buckets, max_distance)
    return b.unique().tolist()


class T5RelativeBias(nn.Module):
    """A learned scalar per (bucket, head), added to the attention scores (T5's relative bias).

    Shapes: ``forward(n_queries, n_keys)`` returns the bias (1, H, Tq, Tk). T5 computes it
    once and shares it across the layers of a stack. Raffel et al. (2020), section 2.1.
    """

    def __init__(
        self,
        n_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        if n_heads < 1:
            raise ValueError(f"n_heads must be >= 1, got {n_heads}")
        self.n_heads, self.num_buckets = n_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        # row b = the bias of bucket b in every head
        self.embedding = nn.Embedding(num_buckets, n_heads)

    def forward(self, n_queries: int, n_keys: int | None = None) -> Tensor:
        device = self.embedding.weight.device
        rel = relative_positions(n_queries, n_keys, device=device)  # (Tq, Tk)
        buckets = t5_relative_position_bucket(
            rel, self.bidirectional, self.num_buckets, self.max_distance
        )
        # (Tq, Tk, H) -> (1, H, Tq, Tk)
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's fixed head slopes: a geometric sequence 2^(-8/n), 2^(-16/n), … for n a power of two.

    Otherwise, with p the largest power of two below ``n_heads``: the p slopes for p heads,
    then every other slope of the 2p-head sequence, as many as needed (Press et al.,
    2022, section 3 and their reference code). Shapes: returns (n_heads,).
    """
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")

    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    p = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(p) + geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes)


def alibi_bias(
    n_heads: int, n_queries: int, n_keys: int | None = None, device: Device = None
) -> Tensor:
    """ALiBi: ``bias[h, i, j] = -slope_h · |i - j|``, a penalty growing linearly with distance.

    For a causal model this is the paper's ``-slope · (i - j)``; for an encoder, the
    symmetric form treats past and future alike. Shapes: returns (1, H, Tq, Tk).
    Press et al. (2022), "Train Short, Test Long".
    """
    # (Tq, Tk); negated as integers, so that distance 0 gives 0.0, not -0.0
    minus_distance = (
        -relative_positions(n_queries, n_keys, device=device).abs()
    ).float()
    slopes = alibi_slopes(n_heads).to(device)  # (H,)
    return (slopes[:, None, None] * minus_distance).unsqueeze(0)  # (1, H, Tq, Tk)


# --- relative positions by rotation (RoPE) ------------------------------------------------


def rope_angles(
    positions: Tensor, head_dim: int, base: float = 10000.0
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotation angles ``p · θ_i``, ``θ_i = base^(-2i/head_dim)``,
    half-split layout.

    Feature i and feature i + head_dim/2 form pair i and turn by the same angle.
    Shapes: positions (T,) -> cos, sin (T, head_dim). Su et al. (2024), eq. 15.
    """
    if head_dim < 2 or head_dim % 2:
        raise ValueError(
            "head_dim must be a positive even number (features are rotated in pairs), "
            f"got {head_dim}"
        )
    if positions.dim() != 1:
        raise ValueError(
            f"positions must have shape (T,), got {tuple(positions.shape)}"
        )
    exponents = torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim
    inv_freq = 1.0 / base**exponents  # (Dh/2,): θ_i
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, Dh/2)
    # (T, Dh): pair i uses columns i and i + Dh/2
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x: Tensor) -> Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last axis: a 90° turn of every pair."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., Dh/2) each
    return torch.cat((-x2, x1), dim=-1)  # (..., Dh)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate every feature pair of x by its angle: ``x · cos + rotate_half(x) · sin``.

    Shapes: x (..., T, Dh), cos and sin (T, Dh) -> (..., T, Dh).
    """
    if x.shape[-2:] != cos.shape or cos.shape != sin.shape:
        raise ValueError(
            f"x (..., T, Dh) must end in the shape of cos and sin, got x {tuple(x.shape)}, "
            f"cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        )
    return x * cos + rotate_half(x) * sin


class RotaryEmbedding(nn.Module):
    """RoPE: rotate queries and keys by angles proportional to their positions.

    Then ``q_m · k_n`` depends on the positions only through ``n - m``. Plug it into
    ``MultiHeadAttention(d_model, n_heads, rope=RotaryEmbedding(head_dim))``.
    Half-split pairs (i, i + head_dim/2), as in Hugging Face Llama (see the module docstring).
    Shapes: q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the same; queries sit at the last Tq
    key positions. Su et al. (2024), RoFormer.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim < 2 or head_dim % 2:
            raise ValueError(
                "head_dim must be a positive even number (features are rotated "
                f"in pairs), got {head_dim}"
            )
        self.head_dim, self.base = head_dim, base

    def forward(self, q: Tensor, k: Tensor, offset: int = 0) -> tuple[Tensor, Tensor]:
        """``offset``: the keys sit at positions offset … offset+Tk-1 (the tokens
        already in a KV cache come first, chapter 09)."""
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have shape (..., T, head_dim={self.head_dim}), "
                    f"got {tuple(t.shape)}"
                )
        Tq, Tk = q.shape[-2], k.shape[-2]
        if Tq > Tk:
            raise ValueError(
                f"more queries than keys: q has {Tq} positions, k has {Tk}"
            )
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        key_positions = torch.arange(offset, offset + Tk, device=k.device)  # (Tk,)
        cos, sin = rope_angles(key_positions, self.head_dim, self.base)  # (Tk, Dh) each
        # the queries sit at the last Tq key positions: (..., Tq, Dh)
        q_rot = apply_rope(q.float(), cos[Tk - Tq :], sin[Tk - Tq :]).to(q.dtype)
        k_rot = apply_rope(k.float(), cos, sin).to(k.dtype)  # (..., Tk, Dh)
        return q_rot, k_rot

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base}"
