"""Converting attention between key/value head counts (chapter 09): a trained multi-head
attention (MHA) into grouped-query attention (GQA) and back.

:func:`gqa_from_mha` gives each new key/value head the mean of its group's heads, the
"mean pooling" with which Ainslie et al. (2023) start a GQA model from an MHA
checkpoint before a short re-training; :func:`mha_from_gqa` tiles a GQA's key/value
heads, one copy for every query head, and so shows that GQA is MHA with the key/value
heads of a group tied together. Both build a new
:class:`transformer_book.attention.MultiHeadAttention` and leave their input unchanged.

:func:`permute_heads` reorders a trained MHA's heads in place: the layer computes the
same function, its attention maps in the new order (chapter 02: heads are
interchangeable).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention import MultiHeadAttention

__all__ = ["copy_projection", "gqa_from_mha", "mha_from_gqa", "permute_heads"]


def _regroup_heads(w: Tensor, n_groups: int, group: int, head_dim: int) -> Tensor:
    """Average the rows of a k/v projection head by head within consecutive groups.

    Shapes: w (n_groups·group·Dh, ...) -> (n_groups·Dh, ...).
    """
    rest = w.shape[1:]
    w = w.reshape(n_groups, group, head_dim, *rest)  # (G, heads per group, Dh, ...)
    return w.mean(dim=1).reshape(n_groups * head_dim, *rest)  # (G·Dh, ...)


def copy_projection(to, source) -> None:
    """Copy ``source``'s weight and bias into ``to``'s, in place: two ``nn.Linear`` or
    :class:`~transformer_book.stacked_linear.RowBlock` views of a stacked matrix, of the
    same shapes. Call under ``torch.no_grad()``."""
    to.weight.copy_(source.weight)
    if to.bias is not None:
        to.bias.copy_(source.bias)


def _with_kv_heads(attn: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """A copy of ``attn``'s settings (stacked or not) with ``n_kv_heads`` key/value
    heads, its query and output projections copied, the key/value projections left for
    the caller to fill."""
    ref = attn.q_proj.weight
    new = MultiHeadAttention(
        attn.d_model,
        attn.n_heads,
        dropout=attn.dropout,
        bias=attn.q_proj.bias is not None,
        rope=attn.rope,
        n_kv_heads=n_kv_heads,
        scale=attn.scale,
    ).to(device=ref.device, dtype=ref.dtype)
    if attn.stacked:
        new.stack_projections()
    for name in ("q_proj", "o_proj"):
        copy_projection(getattr(new, name), getattr(attn, name))
    return new


@torch.no_grad()
def gqa_from_mha(mha: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """A new attention with ``n_kv_heads`` key/value heads, each the mean of its group's.

    Query and output projections are copied; key (and value) head j of the result is the
    mean of heads j·g … (j+1)·g - 1 of ``mha`` (g = heads per new group), weights and
    biases alike. Works from MHA or from a GQA with more key/value heads. ``mha`` is left
    unchanged. Ainslie et al. (2023), section 2.1 ("mean pooling").
    """
    if n_kv_heads < 1 or mha.n_kv_heads % n_kv_heads != 0:
        raise ValueError(
            f"n_kv_heads ({n_kv_heads}) must divide the {mha.n_kv_heads} key/value "
            "heads of the attention being converted (each new head averages a group)"
        )
    new = _with_kv_heads(mha, n_kv_heads)
    group = mha.n_kv_heads // n_kv_heads
    for name in ("k_proj", "v_proj"):
        old, fresh = getattr(mha, name), getattr(new, name)
        fresh.weight.copy_(_regroup_heads(old.weight, n_kv_heads, group, mha.head_dim))
        if old.bias is not None:
            fresh.bias.copy_(_regroup_heads(old.bias, n_kv_heads, group, mha.head_dim))
    new.train(mha.training)
    return new


@torch.no_grad()
def mha_from_gqa(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """The multi-head attention that computes the same as ``gqa``: its key/value weights
    tiled, every query head getting its own copy of its group's key/value head.

    Shows that GQA is MHA with the key/value heads of a group tied together.
    """
    new = _with_kv_heads(gqa, gqa.n_heads)
    Hkv, Dh = gqa.n_kv_heads, gqa.head_dim
    for name in ("k_proj", "v_proj"):
        old, fresh = getattr(gqa, name), getattr(new, name)
        w = old.weight.reshape(Hkv, Dh, gqa.d_model)  # (Hkv, Dh, D)
        fresh.weight.copy_(
            w.repeat_interleave(gqa.n_rep, dim=0).reshape(-1, gqa.d_model)
        )  # (H·Dh, D)
        if old.bias is not None:
            b = old.bias.reshape(Hkv, Dh).repeat_interleave(gqa.n_rep, dim=0)  # (H, Dh)
            fresh.bias.copy_(b.reshape(-1))  # (H·Dh,)
    new.train(gqa.training)
    return new


@torch.no_grad()
def permute_heads(mha: MultiHeadAttention, order: list[int]) -> MultiHeadAttention:
    """Reorder the heads of ``mha`` in place, head ``order[h]`` becoming head h, and
    return it: the blocks of rows of ``q_proj``, ``k_proj``, ``v_proj`` (whose weight
    stores Aᵀ, head h = outputs h·Dh … (h+1)·Dh - 1) with their biases, and the
    matching blocks of columns of ``o_proj.weight``. The output is unchanged; the
    weights (B, H, Tq, Tk) come out as ``weights[:, order]``."""
    if mha.n_kv_heads != mha.n_heads:
        raise ValueError(f"mha must have one key/value head per head, got "
                         f"{mha.n_kv_heads} for {mha.n_heads}")  # fmt: skip
    if sorted(order) != list(range(mha.n_heads)):
        raise ValueError(f"order must list the heads 0..{mha.n_heads - 1} once each, "
                         f"got {order}")  # fmt: skip
    Dh = mha.head_dim
    rows = torch.cat([torch.arange(h * Dh, (h + 1) * Dh) for h in order])  # (d_model,)
    for proj in (mha.q_proj, mha.k_proj, mha.v_proj):
        proj.weight.copy_(proj.weight[rows])  # (d_model, d_model), rows = outputs
        if proj.bias is not None:
            proj.bias.copy_(proj.bias[rows])
    mha.o_proj.weight.copy_(mha.o_proj.weight[:, rows])  # columns = head outputs
    return mha
