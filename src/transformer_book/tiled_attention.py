"""Exact attention, one tile at a time: the online softmax (chapter 08).

Attention over T tokens builds a (T, T) score matrix. :func:`tiled_attention` computes
the same output without it: each block of queries visits the blocks of keys in turn and
keeps, per query, only a running maximum, a running sum and an unnormalised output (the
online softmax of Milakov & Gimelshein, 2018, as FlashAttention uses it, Dao et al.,
2022). Its peak memory grows with T, not T²; with a sliding window, its work with
T · window. ``tests/test_tiled_attention.py`` checks it against
:func:`transformer_book.attention.scaled_dot_product_attention` and torch's fused kernel.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .attention import _check_inputs

__all__ = ["tiled_attention", "tiles_visited"]


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    block_size: int = 64,
    causal: bool = False,
    scale: float | None = None,
    window: int | None = None,
) -> Tensor:
    """Exact attention computed tile by tile, so the (Tq, Tk) score matrix never exists.

    Each block of queries visits the blocks of keys in turn and keeps, per query, a
    running maximum m of its scores, a running sum l of exp(score - m) and an
    unnormalised output o = Σ exp(score - m) v. When a new block raises the maximum to
    m', the old l and o are rescaled by exp(m - m'); at the end the output is o / l.
    This is the online softmax of Milakov & Gimelshein (2018) as used by FlashAttention
    (Dao et al., 2022); peak memory grows with T, not T².
    ``causal`` and ``window`` follow :func:`transformer_book.masks.causal_mask` and
    :func:`transformer_book.masks.sliding_window_mask` (queries are the last Tq
    positions); key blocks that no query of a block may see are skipped, so a window
    makes the cost O(T·window). A query with no allowed key gets zeros.
    Shapes: q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v) -> (..., Tq, d_v).
    """
    batch = _check_inputs(q, k, v, None, None)[:-2]
    if (
        not isinstance(block_size, int)
        or isinstance(block_size, bool)
        or block_size < 1
    ):
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
    if window is not None and (
        not isinstance(window, int) or isinstance(window, bool) or window < 1
    ):
        raise ValueError(f"window must be None or an int >= 1, got {window!r}")
    Tq, Tk = q.shape[-2], k.shape[-2]
    if (causal or window is not None) and Tk < Tq:
        raise ValueError(
            "causal or windowed attention takes the queries as the last positions and "
            f"needs Tq <= Tk, got Tq={Tq}, Tk={Tk}"
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    dtype = torch.promote_types(q.dtype, torch.float32)  # accumulate in >= fp32
    out = q.new_empty(*batch, Tq, v.shape[-1])  # (..., Tq, d_v)
    offset = Tk - Tq  # query i sits at position i + offset
    for q0 in range(0, Tq, block_size):
        q_blk = q[..., q0 : q0 + block_size, :].to(dtype)  # (..., bq, d_k)
        pos = torch.arange(q0, q0 + q_blk.shape[-2], device=q.device) + offset  # (bq,)
        stats = (*batch, len(pos), 1)
        m_run = q_blk.new_full(stats, float("-inf"))  # running max m, (..., bq, 1)
        l_run = q_blk.new_zeros(stats)  # running sum l of exp(score - m)
        o_run = q_blk.new_zeros((*batch, len(pos), v.shape[-1]))  # Σ exp(score - m) v
        k_lo, k_hi = _key_range(int(pos[0]), int(pos[-1]), Tk, causal, window)
        for k0 in range(k_lo - k_lo % block_size, k_hi, block_size):
            k_blk = k[..., k0 : k0 + block_size, :].to(dtype)  # (..., bk, d_k)
            v_blk = v[..., k0 : k0 + block_size, :].to(dtype)  # (..., bk, d_v)
            s = (q_blk @ k_blk.transpose(-2, -1)) * scale  # (..., bq, bk): one tile
            if causal or window is not None:
                d = pos[:, None] - torch.arange(
                    k0, k0 + k_blk.shape[-2], device=q.device
                )
                allowed = torch.ones_like(d, dtype=torch.bool)  # (bq, bk): p - j
                if causal:
                    allowed &= d >= 0
                if window is not None:
                    allowed &= (d < window) if causal else (d.abs() < window)
                s = s.masked_fill(~allowed, float("-inf"))
            m_new = torch.maximum(m_run, s.amax(dim=-1, keepdim=True))  # (..., bq, 1)
            # A row that has met only masked keys still has m = -inf: subtract 0 there,
            # so that exp(-inf - (-inf)) = NaN never happens.
            m_ref = m_new.masked_fill(m_new == float("-inf"), 0.0)
            rescale = torch.exp(m_run - m_ref)  # old terms, moved to the new max
            e = torch.exp(s - m_ref)  # (..., bq, bk)
            l_run = l_run * rescale + e.sum(dim=-1, keepdim=True)
            o_run = o_run * rescale + e @ v_blk  # (..., bq, d_v)
            m_run = m_new
        tiny = torch.finfo(dtype).tiny
        o_blk = torch.where(l_run > 0, o_run / l_run.clamp_min(tiny), 0.0)
        out[..., q0 : q0 + block_size, :] = o_blk.to(out.dtype)
    return out


def _key_range(
    first: int, last: int, n_keys: int, causal: bool, window: int | None
) -> tuple[int, int]:
    """Keys [lo, hi) that some query at positions first..last may attend to."""
    lo, hi = 0, n_keys
    if window is not None:
        lo = max(0, first - window + 1)
        hi = n_keys if causal else min(n_keys, last + window)
    if causal:
        hi = min(hi, last + 1)
    return lo, hi


def tiles_visited(mask: Tensor, block_size: int) -> int:
    """How many (block_size, block_size) tiles of a (T, T) mask hold at least one
    allowed score: the tiles :func:`tiled_attention` computes. T must be a multiple
    of block_size."""
    T = mask.shape[0]
    if mask.shape != (T, T) or T % block_size:
        raise ValueError(
            f"mask must be (T, T) with T a multiple of {block_size}, "
            f"got {tuple(mask.shape)}"
        )
    n = T // block_size
    tiles = mask.view(n, block_size, n, block_size).any(dim=3).any(dim=1)  # (n, n)
    return int(tiles.sum())
