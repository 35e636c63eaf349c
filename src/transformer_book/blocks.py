"""Transformer blocks: the feed-forward sublayer, the encoder block, and a stack of
them (chapter 03).

Post-norm, as in the original paper (Vaswani et al., 2017, section 3.1), "Add & Norm"
after each sublayer:

    x = LayerNorm(x + MultiHeadAttention(x))
    x = LayerNorm(x + FeedForward(x))

Pre-norm (``norm_first=True``, chapter 06) normalises before each sublayer instead:
``x = x + MultiHeadAttention(LayerNorm(x))``. Every block maps (B, T, d_model) to
(B, T, d_model), which is why blocks stack. :func:`load_torch_encoder_layer` copies the
weights of a ``torch.nn.TransformerEncoderLayer`` into an :class:`EncoderBlock`; the
tests use it to check the two compute the same thing. The decoder block, which adds
cross-attention and a cache, is :mod:`transformer_book.decoder` (chapter 07).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .kv_cache import KVCache
from .masks import causal_mask, sliding_window_mask
from .norms import LayerNorm, RMSNorm, make_norm
from .positions import RotaryEmbedding

__all__ = [
    "FeedForward",
    "EncoderBlock",
    "Encoder",
    "WindowedStack",
    "load_torch_encoder_layer",
    "stream_profile",
]

Activation = Callable[[Tensor], Tensor]
Rope = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def _dropout(dropout: nn.Dropout, x: Tensor) -> Tensor:
    """``dropout(x)``, or ``x`` without the call where it is the identity (evaluation,
    p = 0): a decoding step makes dozens of these calls for one token (chapter 09)."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class FeedForward(nn.Module):
    """Position-wise feed-forward network ``W2 · act(W1 x + b1) + b2``, applied to every
    token alone.

    Shapes: (..., d_model) -> (..., d_model), through a hidden width d_ff (4·d_model in the
    paper). Vaswani et al. (2017), eq. 2.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: Activation = nn.functional.relu,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_model < 1 or d_ff < 1:
            raise ValueError(
                f"d_model and d_ff must be positive, got d_model={d_model}, d_ff={d_ff}"
            )
        self.d_model, self.d_ff = d_model, d_ff
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)  # W1, b1
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)  # W2, b2
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"FeedForward expects input of shape (..., d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        h = self.activation(self.up_proj(x))  # (..., d_ff)
        return self.down_proj(_dropout(self.dropout, h))  # (..., d_model)


def _make_norm(kind: str, d_model: int, eps: float, bias: bool) -> nn.Module:
    """:func:`make_norm`, with LayerNorm's β dropped when ``bias`` is False."""
    if kind == "layer" and not bias:
        return LayerNorm(d_model, eps=eps, bias=False)
    return make_norm(kind, d_model, eps=eps)


class EncoderBlock(nn.Module):
    """Self-attention and feed-forward, each wrapped in a residual connection and LayerNorm.

    Shapes: x (B, T, d_model); mask broadcastable to (B, H, T, T) with True = may attend;
    bias (e.g. T5 or ALiBi, chapter 04) broadcastable to (B, H, T, T). Returns (B, T, d_model).
    ``rope`` is passed to :class:`MultiHeadAttention`. ``norm_first=False`` is the post-norm
    block of Vaswani et al. (2017); ``True`` the pre-norm block (chapter 06).
    ``n_kv_heads`` shares key/value heads (grouped-query attention, chapter 09);
    ``bias=False`` drops every bias (linear layers and LayerNorm); ``scale`` multiplies
    the attention scores (None: 1/√d_head; T5 uses 1.0, chapter 10). ``forward(...,
    cache=...)`` decodes with a :class:`~transformer_book.kv_cache.KVCache`. With
    ``norm_first=True`` and a causal mask this block is the GPT block (chapter 09);
    ``is_causal=True`` is that mask without a mask tensor (chapter 14).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        rope: Rope | None = None,
        activation: Activation = nn.functional.relu,
        layer_norm_eps: float = 1e-5,
        norm: str = "layer",
        n_kv_heads: int | None = None,
        bias: bool = True,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.norm_first = d_model, norm_first
        self.attn = MultiHeadAttention(
            d_model,
            n_heads,
            dropout=dropout,
            bias=bias,
            rope=rope,
            n_kv_heads=n_kv_heads,
            scale=scale,
        )
        self.ff = FeedForward(
            d_model, d_ff, dropout=dropout, activation=activation, bias=bias
        )
        # One norm around each sublayer: "layer" (LayerNorm) or "rms" (RMSNorm, ch. 06).
        self.norm1 = _make_norm(norm, d_model, layer_norm_eps, bias)  # attention
        self.norm2 = _make_norm(norm, d_model, layer_norm_eps, bias)  # feed-forward
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(
        self,
        x: Tensor,
        mask: Tensor | None,
        bias: Tensor | None,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        out = self.attn(x, mask=mask, bias=bias, cache=cache, is_causal=is_causal)[0]
        return _dropout(self.dropout1, out)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return _dropout(self.dropout2, self.ff(x))

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"EncoderBlock expects x of shape (B, T, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        if self.norm_first:  # pre-norm: x + F(LN(x))
            x = x + self._attend(self.norm1(x), mask, bias, cache, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, mask, bias, cache, is_causal))  # post-norm
        return self.norm2(x + self._feed_forward(x))


class Encoder(nn.Module):
    """A stack of ``n_layers`` identical encoder blocks (same shapes in and out, so they stack).

    Shapes: x (B, T, d_model) -> (B, T, d_model). A final LayerNorm is added for pre-norm
    stacks, whose last block output is otherwise unnormalised. Each block has its own weights.
    ``cache``: one :class:`~transformer_book.kv_cache.KVCache` per layer (chapter 09).
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        rope: Rope | None = None,
        activation: Activation = nn.functional.relu,
        layer_norm_eps: float = 1e-5,
        norm: str = "layer",
        n_kv_heads: int | None = None,
        bias: bool = True,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.layers = nn.ModuleList(
            EncoderBlock(
                d_model,
                n_heads,
                d_ff,
                dropout=dropout,
                norm_first=norm_first,
                rope=rope,
                activation=activation,
                layer_norm_eps=layer_norm_eps,
                norm=norm,
                n_kv_heads=n_kv_heads,
                bias=bias,
                scale=scale,
            )
            for _ in range(n_layers)
        )
        self.final_norm = (
            _make_norm(norm, d_model, layer_norm_eps, bias)
            if norm_first
            else nn.Identity()
        )

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        cache: Sequence[KVCache] | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache must hold one KVCache per layer ({len(self.layers)}), "
                f"got {len(cache)}"
            )
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache[i]
            x = layer(x, mask, bias, layer_cache, is_causal)  # (B, T, d_model)
        return self.final_norm(x)


class WindowedStack(nn.Module):
    """Pre-norm encoder blocks with rotary positions, one causal attention pattern
    per layer (chapter 08's local and global layers): an int ``w`` in ``windows`` is
    a sliding window of the last ``w`` keys, ``None`` full causal attention. No
    embedding and no final norm: the caller adds what its task needs.

    Shapes: x (B, T, d_model) -> (B, T, d_model)."""

    def __init__(
        self,
        windows: Sequence[int | None],
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
    ) -> None:
        super().__init__()
        if not windows or any(w is not None and w < 1 for w in windows):
            raise ValueError(f"windows must be ints >= 1 or None, got {windows}")
        rope = RotaryEmbedding(d_model // n_heads)
        self.windows = list(windows)
        d_ff = 2 * d_model if d_ff is None else d_ff
        self.layers = nn.ModuleList(
            EncoderBlock(d_model, n_heads, d_ff, norm_first=True, rope=rope)
            for _ in self.windows
        )

    def forward(self, x: Tensor) -> Tensor:
        T = x.shape[1]
        for layer, w in zip(self.layers, self.windows):
            mask = (
                causal_mask(T, device=x.device)
                if w is None
                else sliding_window_mask(T, window=w, device=x.device)
            )
            x = layer(x, mask=mask)  # (B, T, d_model)
        return x


@torch.no_grad()
def stream_profile(
    model: nn.Module, layers: Sequence[nn.Module], inputs: Tensor, keep: Tensor
) -> tuple[list[float], list[float]]:
    """The residual stream after each of ``layers`` while ``model(inputs)`` runs: its
    RMS over the real tokens, and the mean cosine between two different real tokens
    of one sequence (chapter 06: how alike depth makes the tokens).

    Shapes: inputs whatever ``model`` takes; keep (B, T) bool, True = a real token;
    each layer's output (B, T, D). Returns two lists of ``len(layers)`` floats."""
    if keep.dim() != 2 or keep.dtype != torch.bool:
        raise ValueError(f"keep must be a (B, T) bool tensor, got {tuple(keep.shape)}")
    n = keep.sum(1).double()  # (B,): real tokens per sequence
    rms: list[float] = []
    cos: list[float] = []

    def measure(layer: nn.Module, args: object, x: Tensor) -> None:  # x (B, T, D)
        rms.append(x[keep].pow(2).mean().sqrt().item())
        u = nn.functional.normalize(x, dim=-1) * keep[..., None]  # padding zeroed
        pairs = (u.sum(1).pow(2).sum(-1) - n) / (n * (n - 1)).clamp(min=1)  # i != j
        cos.append(pairs.mean().item())

    hooks = [layer.register_forward_hook(measure) for layer in layers]
    try:
        model(inputs)
    finally:
        for h in hooks:
            h.remove()
    return rms, cos


@torch.no_grad()
def load_torch_encoder_layer(
    block: EncoderBlock, layer: nn.TransformerEncoderLayer
) -> EncoderBlock:
    """Copy the weights of ``torch.nn.TransformerEncoderLayer`` into ``block`` (in place)
    and return it.

    torch keeps the query, key and value projections in one stacked ``in_proj_weight``
    of shape (3·d_model, d_model), rows [W_Q; W_K; W_V]; here they are three ``nn.Linear``.
    Raises ``ValueError`` when the two layers are not built alike (sizes, norm placement,
    activation, epsilon, biases), because then the copy could not compute the same thing.
    """
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise ValueError(
            f"layer must be a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
        )
    _check_built_alike(block, block.attn, layer)
    _copy_torch_attention(block.attn, layer.self_attn)
    pairs = [
        (block.ff.up_proj, layer.linear1),
        (block.ff.down_proj, layer.linear2),
        (block.norm1, layer.norm1),
        (block.norm2, layer.norm2),
    ]
    for mine, ref in pairs:
        mine.weight.copy_(ref.weight)
        mine.bias.copy_(ref.bias)
    return block


def _check_built_alike(
    block: nn.Module,
    attn: MultiHeadAttention,
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer,
) -> None:
    """Raise ``ValueError`` unless ``block`` and torch's ``layer`` are built alike (sizes,
    norm placement and kind, epsilon, activation, biases): else no copy computes the same."""
    name = type(block).__name__
    sa = layer.self_attn
    theirs = dict(
        d_model=sa.embed_dim,
        n_heads=sa.num_heads,
        n_kv_heads=sa.num_heads,  # torch's layers: one key/value head per query head
        rope=False,
        d_ff=layer.linear1.out_features,
        norm_first=layer.norm_first,
        norm="layer",  # torch's layers use LayerNorm
        eps=layer.norm1.eps,
    )
    ours = dict(
        d_model=block.d_model,
        n_heads=attn.n_heads,
        n_kv_heads=attn.n_kv_heads,
        rope=attn.rope is not None,
        d_ff=block.ff.d_ff,
        norm_first=block.norm_first,
        norm="rms" if isinstance(block.norm1, RMSNorm) else "layer",
        eps=block.norm1.eps,
    )
    if theirs != ours:
        raise ValueError(
            f"the layers are built differently: torch layer {theirs}, {name} {ours}"
        )
    if layer.activation is not block.ff.activation:
        raise ValueError(
            f"activations differ: torch layer uses {layer.activation}, "
            f"{name} uses {block.ff.activation}"
        )
    if (
        sa.in_proj_bias is None
        or layer.linear1.bias is None
        or layer.norm1.bias is None
        or block.ff.up_proj.bias is None
    ):
        raise ValueError(
            f"the torch layer and the {name} must both have biases; one was built "
            "with bias=False"
        )


def _copy_torch_attention(mine: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    """Split torch's stacked (3·d_model, d_model) in-projection into q, k and v."""
    D = mine.d_model
    for i, proj in enumerate((mine.q_proj, mine.k_proj, mine.v_proj)):
        proj.weight.copy_(ref.in_proj_weight[i * D : (i + 1) * D])  # (D, D) of (3D, D)
        proj.bias.copy_(ref.in_proj_bias[i * D : (i + 1) * D])  # (D,) of (3D,)
    mine.o_proj.weight.copy_(ref.out_proj.weight)
    mine.o_proj.bias.copy_(ref.out_proj.bias)
