"""Scaled dot-product attention and multi-head attention (chapters 01-02, 09).

The functional core, :func:`scaled_dot_product_attention`, computes

    softmax(Q Kᵀ / √d_k + bias, masked) V

and returns the output *and* the attention weights, because the weights are what a
student wants to look at. With ``need_weights=False`` it takes torch's fused kernel
instead; ``tests/test_attention.py`` checks the two paths agree.

Follows Vaswani et al. (2017), "Attention Is All You Need", section 3.2.

Chapter 09 lets several query heads share one key/value head: ``n_kv_heads=None`` is
multi-head attention (MHA), a divisor of ``n_heads`` grouped-query attention (GQA,
Ainslie et al., 2023) and ``n_kv_heads=1`` multi-query attention (MQA, Shazeer, 2019).
:func:`repeat_kv` hands every query head its group's key/value head
(:mod:`transformer_book.grouped_heads` converts a trained MHA into a GQA and back),
and ``forward(..., cache=...)`` appends the new keys and values to a
:class:`transformer_book.kv_cache.KVCache` for decoding one token at a time.

Chapter 14 stores the query, key and value projections as one matrix
(:meth:`MultiHeadAttention.stack_projections`, as nanoGPT's ``c_attn`` and torch's
``in_proj_weight``; :mod:`transformer_book.stacked_linear`): ``q_proj``, ``k_proj``
and ``v_proj`` are then :class:`~transformer_book.stacked_linear.RowBlock` views of its
rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import stacked_linear
from .stacked_linear import RowBlock

if TYPE_CHECKING:
    from .kv_cache import KVCache

__all__ = [
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "split_heads",
    "merge_heads",
    "repeat_kv",
]


def _check_inputs(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None
) -> tuple[int, ...]:
    """Validate shapes and return the shape of the score matrix (..., Tq, Tk)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., T, d), got {tuple(t.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share their last dimension d_k: q has {tuple(q.shape)}, "
            f"k has {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "k and v must have the same number of positions (dim -2): "
            f"k has {tuple(k.shape)}, v has {tuple(v.shape)}"
        )
    try:
        batch = q.shape[:-2]
        if not batch == k.shape[:-2] == v.shape[:-2]:  # equal: nothing to broadcast
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q {tuple(q.shape)}, "
            f"k {tuple(k.shape)} and v {tuple(v.shape)} do not broadcast"
        ) from None
    scores = (*batch, q.shape[-2], k.shape[-2])
    for name, t in (("mask", mask), ("bias", bias)):
        if t is None:
            continue
        if name == "mask" and t.dtype != torch.bool:
            raise ValueError(
                f"mask must be boolean (True = may attend), got dtype {t.dtype}"
            )
        try:
            ok = torch.broadcast_shapes(t.shape, scores) == torch.Size(scores)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} cannot broadcast to the attention "
                f"scores' shape {scores} (..., queries, keys)"
            )
    return scores


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    scale: float | None = None,
    need_weights: bool = True,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention ``softmax(q kᵀ · scale + bias) v`` with a boolean mask (True = may attend).

    Shapes: q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v); mask and bias broadcast
    to (..., Tq, Tk). Returns output (..., Tq, d_v) and weights (..., Tq, Tk), or
    ``(output, None)`` through torch's fused kernel when ``need_weights`` is False.
    A query that may attend to nothing gets a zero output (not NaN). ``scale``
    defaults to 1/√d_k (Vaswani et al., 2017, eq. 1). ``is_causal=True`` (instead of
    a mask) lets query i see keys 0 … i, the mask ``masks.causal_mask(Tq, Tq)``; the
    fused kernel then builds no mask at all (chapter 14).
    """
    if is_causal:
        if mask is not None:
            raise ValueError("pass either mask or is_causal=True, not both")
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                "is_causal=True needs as many queries as keys, got q "
                f"{tuple(q.shape)} and k {tuple(k.shape)}; pass an explicit mask"
            )
        if need_weights or bias is not None:  # the explicit path needs the mask
            mask = torch.ones(
                q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device
            )
            mask, is_causal = mask.tril(), False  # (Tq, Tk): key j <= query i
    score_shape = _check_inputs(q, k, v, mask, bias)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    empty_rows = None
    if mask is not None:
        # A row with no allowed key would be softmax over all -inf = NaN. Let such rows
        # attend everywhere (finite numbers, finite gradients), then zero them below.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
        mask = mask | empty_rows

    if need_weights:
        # q scaled first: a pass over (..., Tq, d_k), not over the (..., Tq, Tk) scores
        scores = (q * scale) @ k.transpose(-2, -1)  # (..., Tq, Tk)
        if bias is not None:
            scores = scores + bias
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if empty_rows is not None:
            weights = weights.masked_fill(empty_rows, 0.0)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)

    attn_mask = None
    if bias is not None:
        attn_mask = bias.to(q.dtype).expand(score_shape)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        attn_mask = mask
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        # The fused kernel wants q, k, v with the same leading dims.
        q, k, v = (t.expand(*score_shape[:-2], *t.shape[-2:]) for t in (q, k, v))
    out = F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        scale=scale,
        is_causal=is_causal,
    )
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
    return out, None


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """Cut the feature axis into heads. Shapes: (B, T, H·Dh) -> (B, H, T, Dh)."""
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, D), got {tuple(x.shape)}")
    B, T, D = x.shape
    if n_heads < 1 or D % n_heads:
        raise ValueError(
            f"n_heads must be a positive divisor of the feature size {D}, got {n_heads}"
        )
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: Tensor) -> Tensor:
    """Concatenate the heads again. Shapes: (B, H, T, Dh) -> (B, T, H·Dh)."""
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H·Dh)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Give every query head its group's key/value head: repeat each head ``n_rep`` times.

    Key/value head j serves query heads j·n_rep … (j+1)·n_rep - 1, so the result holds
    head 0 ``n_rep`` times, then head 1, and so on (``repeat_interleave`` on the head
    axis, not ``repeat``). Shapes: (B, Hkv, T, Dh) -> (B, Hkv·n_rep, T, Dh).
    Ainslie et al. (2023), GQA; the ``repeat_kv`` of Meta's Llama.
    """
    if x.dim() != 4:
        raise ValueError(f"x must have shape (B, Hkv, T, Dh), got {tuple(x.shape)}")
    if n_rep < 1:
        raise ValueError(f"n_rep must be a positive integer, got {n_rep}")
    if n_rep == 1:
        return x
    B, Hkv, T, Dh = x.shape
    x = x[:, :, None].expand(B, Hkv, n_rep, T, Dh)  # (B, Hkv, n_rep, T, Dh), no copy
    return x.reshape(
        B, Hkv * n_rep, T, Dh
    )  # (B, H, T, Dh): head h uses kv head h // n_rep


_ROLES = ("q_proj", "k_proj", "v_proj")


class MultiHeadAttention(nn.Module):
    """Multi-head attention: per-head projections, attention, concatenation, output projection.

    Shapes: x (B, Tq, d_model), context (B, Tk, d_model) for cross-attention (defaults to
    x), mask broadcastable to (B, H, Tq, Tk), bias to (B, H, Tq, Tk). Returns output
    (B, Tq, d_model) and weights (B, H, Tq, Tk) or None.
    ``rope``, if given, is a callable ``(q, k) -> (q, k)`` on (B, H, T, Dh) tensors that
    rotates queries and keys (chapter 04); with a cache it is called with
    ``offset=`` the number of positions already cached. Vaswani et al. (2017), 3.2.2.

    ``n_kv_heads`` (chapter 09): ``None`` = one key/value head per query head (MHA); a
    divisor of ``n_heads`` = grouped-query attention, each key/value head shared by
    ``n_heads // n_kv_heads`` consecutive query heads (Ainslie et al., 2023); 1 =
    multi-query attention (Shazeer, 2019). ``cache``, a
    :class:`~transformer_book.kv_cache.KVCache`, receives this call's keys and values
    (self-attention only) and the queries attend to everything cached so far; the mask
    then covers (Tq, cached + Tq) keys.

    ``scale`` multiplies the scores ``q · k``: ``None`` is 1/√d_head (Vaswani et al.);
    T5 passes 1.0, having folded the scaling into its initialisation (chapter 10).
    ``is_causal=True`` is causal self-attention without a mask tensor (torch's
    fused kernel builds none; chapter 14). :meth:`stack_projections` stores the query,
    key and value projections as one matrix (chapter 14's GPT).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        rope: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None,
        n_kv_heads: int | None = None,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_heads ({n_heads}) "
                "so every head gets the same width"
            )
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads != 0:
            raise ValueError(
                f"n_kv_heads ({n_kv_heads}) must divide n_heads ({n_heads}): every "
                "key/value head serves a group of n_heads / n_kv_heads query heads "
                "(None means n_heads, plain multi-head attention)"
            )
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.n_rep = n_kv_heads, n_heads // n_kv_heads
        self.dropout = dropout
        self.rope = rope
        self.scale = scale  # None: 1/√head_dim
        # One (d_model x d_model) matrix per role = n_heads stacked (d_model x head_dim) blocks:
        # the lecture's A_Q, A_K, A_V for every head at once. Keys and values have only
        # n_kv_heads blocks: fewer heads to compute and, above all, to cache (ch. 09).
        kv_width = n_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.stacked = False  # True: q_proj, k_proj, v_proj are rows of qkv_proj

    # q_proj, k_proj, v_proj: the three layers, or after stack_projections the row
    # blocks of qkv_proj that play their part (the same names either way)
    @property
    def q_proj(self) -> nn.Module | RowBlock:
        return self._projection(0)

    @property
    def k_proj(self) -> nn.Module | RowBlock:
        return self._projection(1)

    @property
    def v_proj(self) -> nn.Module | RowBlock:
        return self._projection(2)

    def _projection(self, role: int) -> nn.Module | RowBlock:
        if not self.stacked:
            return self._modules[_ROLES[role]]
        kv_width = self.n_kv_heads * self.head_dim
        edges = (0, self.d_model, self.d_model + kv_width, self.d_model + 2 * kv_width)
        return RowBlock(self._modules["qkv_proj"], edges[role], edges[role + 1])

    @torch.no_grad()
    def stack_projections(self) -> MultiHeadAttention:
        """Store ``q_proj``, ``k_proj`` and ``v_proj`` as one layer, ``qkv_proj``, whose
        weight is theirs stacked row-wise, (d_model + 2·kv_width, d_model), as nanoGPT's
        ``c_attn`` and torch's ``in_proj_weight`` are (chapter 14). Self-attention then
        makes one product for the three, forward and backward, and an optimiser or a
        gradient clip sees one tensor instead of three. The weights are moved, not drawn
        again (:func:`transformer_book.stacked_linear.stack`): the attention computes
        what it computed. ``q_proj``, ``k_proj`` and ``v_proj`` become
        :class:`~transformer_book.stacked_linear.RowBlock` views of the rows. A state
        dict written before (three keys) still loads. Returns the attention itself.
        Shapes: qkv_proj.weight (d_model + 2·kv_width, d_model), bias (… ,) or None.
        """
        if self.stacked:
            return self
        stacked = stacked_linear.stack([self._modules[n] for n in _ROLES], _ROLES)
        # qkv_proj takes q_proj's place among the submodules: the parameters keep their
        # order (an initialisation that walks the modules draws in the same order)
        modules = list(self._modules.items())
        self._modules.clear()
        for name, module in modules:
            if name == "q_proj":
                self._modules["qkv_proj"] = stacked
            elif name not in _ROLES:
                self._modules[name] = module
        self.stacked = True
        return self

    def __setattr__(self, name: str, value) -> None:
        if name in _ROLES and self.__dict__.get("stacked"):
            raise AttributeError(
                f"{name} is a block of rows of qkv_proj since stack_projections; write "
                f"into {name}.weight under torch.no_grad() instead of replacing it"
            )
        super().__setattr__(name, value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # a stacked attention reading a state dict from before the stacking: the three
        # projections' keys become qkv_proj's, their rows stacked in the same order
        if self.stacked:
            stacked_linear.stack_state_dict(state_dict, prefix, _ROLES, "qkv_proj")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``q_proj(x), k_proj(x), v_proj(x)``, as one matrix product where it can.

        Stacked (:meth:`stack_projections`), the three are one layer: one product.
        Otherwise, with gradients, the three weights are stacked at every call, (d_model
        + 2·kv_width, d_model): one product forward and one for the input's gradient
        instead of three, the three ``nn.Linear`` staying the parameters. Without
        gradients (decoding, chapter 09) that stacking would copy all three weights to
        multiply them by one token, so the three products run as they are.
        Shapes: (B, T, d_model) -> (B, T, d_model), (B, T, kv_width), (B, T, kv_width).
        """
        kv_width = self.n_kv_heads * self.head_dim
        if self.stacked:
            qkv = self._modules["qkv_proj"](x)  # (B, T, D + 2·kv_width)
            return qkv.split((self.d_model, kv_width, kv_width), dim=-1)
        projections = [self._modules[name] for name in _ROLES]
        if not torch.is_grad_enabled() or not all(  # wrapped (a LoRA projection, say)
            type(p) is nn.Linear for p in projections
        ):
            return projections[0](x), projections[1](x), projections[2](x)
        qkv = stacked_linear.stacked_product(x, projections)  # (B, T, D + 2·kv_width)
        return qkv.split((self.d_model, kv_width, kv_width), dim=-1)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if cache is not None:
            if context is not None:
                raise ValueError(
                    "cache is for self-attention (decoding appends the new tokens' "
                    "keys and values); got a context too"
                )
            if is_causal and cache.seq_len > 0:
                raise ValueError(
                    "is_causal=True aligns the queries with the first keys; after "
                    f"{cache.seq_len} cached tokens pass mask=masks.causal_mask(T, "
                    f"{cache.seq_len} + T) instead"
                )
        self_attention = context is None or context is x
        inputs = (("x", x),) if self_attention else (("x", x), ("context", context))
        for name, t in inputs:
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, T, d_model={self.d_model}), "
                    f"got {tuple(t.shape)}"
                )
        if self_attention:
            q, k, v = self._project_qkv(x)
        elif context.shape[0] != x.shape[0]:
            raise ValueError(
                f"x and context must share the batch size, got {tuple(x.shape)} "
                f"and {tuple(context.shape)}"
            )
        else:
            q, k, v = self.q_proj(x), self.k_proj(context), self.v_proj(context)
        q = split_heads(q, self.n_heads)  # (B, H, Tq, Dh)
        k = split_heads(k, self.n_kv_heads)  # (B, Hkv, Tk, Dh)
        v = split_heads(v, self.n_kv_heads)  # (B, Hkv, Tk, Dh)
        if self.rope is not None:
            if cache is None:
                q, k = self.rope(q, k)
            else:  # the new tokens sit after the cached ones
                q, k = self.rope(q, k, offset=cache.seq_len)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, cached + Tk, Dh)
        k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)  # (B, H, Tk, Dh)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            bias=bias,
            scale=self.scale,
            need_weights=need_weights,
            dropout_p=p,
            is_causal=is_causal,
        )
        return self.o_proj(
            merge_heads(out)
        ), weights  # (B, Tq, d_model), (B, H, Tq, Tk)
