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
tests use it to check the two compute the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .kv_cache import KVCache
from .norms import LayerNorm, RMSNorm, make_norm

__all__ = ["FeedForward", "EncoderBlock", "Encoder", "load_torch_encoder_layer"]

Activation = Callable[[Tensor], Tensor]
Rope = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


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
        return self.down_proj(
            self.dropout(self.activation(self.up_proj(x)))
        )  # (..., d_ff) -> (..., d_model)


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
        return self.dropout1(out)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout2(self.ff(x))

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


# --- The decoder (chapter 07) ---------------------------------------------------------
# Appended here, below the encoder, so that parallel additions to the blocks above merge
# cleanly.

__all__ += ["DecoderBlock", "Decoder", "load_torch_decoder_layer"]


def _check_decoder_inputs(name: str, d_model: int, x: Tensor, memory: Tensor) -> None:
    """x (B, T, d_model) and memory (B, S, d_model) with the same B, or a ValueError."""
    for arg, t in (("x", x), ("memory", memory)):
        if t.dim() != 3 or t.shape[-1] != d_model:
            raise ValueError(
                f"{name} expects {arg} of shape (B, T, d_model={d_model}), "
                f"got {tuple(t.shape)}"
            )
    if x.shape[0] != memory.shape[0]:
        raise ValueError(
            f"{name}: x and memory must share the batch size, got x {tuple(x.shape)} "
            f"and memory {tuple(memory.shape)}"
        )


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, feed-forward; each
    wrapped in a residual connection and a norm.

    The decoder has two inputs: ``x``, the target tokens so far, and ``memory``, the
    encoder's output. Self-attention mixes the target tokens (``self_mask`` is usually
    causal, so position t sees positions ≤ t only); cross-attention takes its queries
    from ``x`` and its keys and values from ``memory`` (``memory_mask`` hides the
    source's padding). Post-norm (``norm_first=False``) as in Vaswani et al. (2017),
    section 3.1; pre-norm with ``norm_first=True``; ``norm="rms"`` for RMSNorm.

    Shapes: x (B, T, d_model), memory (B, S, d_model); self_mask and self_bias broadcast
    to (B, H, T, T), memory_mask to (B, H, T, S), True = may attend. Returns
    (B, T, d_model).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: Activation = nn.functional.relu,
        layer_norm_eps: float = 1e-5,
        norm: str = "layer",
    ) -> None:
        super().__init__()
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation=activation)
        self.norm1 = make_norm(norm, d_model, eps=layer_norm_eps)  # self-attention
        self.norm2 = make_norm(norm, d_model, eps=layer_norm_eps)  # cross-attention
        self.norm3 = make_norm(norm, d_model, eps=layer_norm_eps)  # feed-forward
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self_attend(
        self, x: Tensor, mask: Tensor | None, bias: Tensor | None
    ) -> Tensor:
        return self.dropout1(self.self_attn(x, mask=mask, bias=bias)[0])

    def _cross_attend(self, x: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        return self.dropout2(self.cross_attn(x, context=memory, mask=mask)[0])

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
    ) -> Tensor:
        _check_decoder_inputs("DecoderBlock", self.d_model, x, memory)
        if self.norm_first:  # pre-norm: x + F(Norm(x)) for each of the three sublayers
            x = x + self._self_attend(self.norm1(x), self_mask, self_bias)
            x = x + self._cross_attend(self.norm2(x), memory, memory_mask)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(x + self._self_attend(x, self_mask, self_bias))  # Add & Norm
        x = self.norm2(x + self._cross_attend(x, memory, memory_mask))
        return self.norm3(x + self.dropout3(self.ff(x)))

    def cross_attention_weights(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
    ) -> Tensor:
        """The cross-attention weights that :meth:`forward` computes: how much each target
        position takes from each source position.

        Shapes: as :meth:`forward`; returns (B, H, T, S), rows sum to 1.
        """
        _check_decoder_inputs("DecoderBlock", self.d_model, x, memory)
        if self.norm_first:
            h = x + self._self_attend(self.norm1(x), self_mask, self_bias)
            h = self.norm2(h)  # what the cross-attention's queries are made from
        else:
            h = self.norm1(x + self._self_attend(x, self_mask, self_bias))
        return self.cross_attn(h, context=memory, mask=memory_mask, need_weights=True)[
            1
        ]


class Decoder(nn.Module):
    """A stack of ``n_layers`` decoder blocks; every block reads the same ``memory``.

    Shapes: x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model); masks as in
    :class:`DecoderBlock`. As in :class:`Encoder`, a pre-norm stack ends with one more
    norm. Vaswani et al. (2017), section 3.1.
    """

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: Activation = nn.functional.relu,
        layer_norm_eps: float = 1e-5,
        norm: str = "layer",
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.layers = nn.ModuleList(
            DecoderBlock(
                d_model,
                n_heads,
                d_ff,
                dropout=dropout,
                norm_first=norm_first,
                activation=activation,
                layer_norm_eps=layer_norm_eps,
                norm=norm,
            )
            for _ in range(n_layers)
        )
        self.final_norm = (
            make_norm(norm, d_model, eps=layer_norm_eps)
            if norm_first
            else nn.Identity()
        )

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
    ) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask, self_bias)  # (B, T, d_model)
        return self.final_norm(x)

    def cross_attention_weights(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
    ) -> list[Tensor]:
        """Every block's cross-attention weights, first block first.

        Shapes: a list of n_layers tensors (B, H, T, S).
        """
        weights = []
        for layer in self.layers:
            args = (memory, self_mask, memory_mask, self_bias)
            weights.append(layer.cross_attention_weights(x, *args))  # (B, H, T, S)
            x = layer(x, *args)  # (B, T, d_model)
        return weights


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
        d_ff=layer.linear1.out_features,
        norm_first=layer.norm_first,
        norm="layer",  # torch's layers use LayerNorm
        eps=layer.norm1.eps,
    )
    ours = dict(
        d_model=block.d_model,
        n_heads=attn.n_heads,
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
    ):
        raise ValueError(
            f"the torch layer was built with bias=False; {name} always has biases"
        )


def _copy_torch_attention(mine: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    """Split torch's stacked (3·d_model, d_model) in-projection into q, k and v."""
    D = mine.d_model
    for i, proj in enumerate((mine.q_proj, mine.k_proj, mine.v_proj)):
        proj.weight.copy_(ref.in_proj_weight[i * D : (i + 1) * D])  # (D, D) of (3D, D)
        proj.bias.copy_(ref.in_proj_bias[i * D : (i + 1) * D])  # (D,) of (3D,)
    mine.o_proj.weight.copy_(ref.out_proj.weight)
    mine.o_proj.bias.copy_(ref.out_proj.bias)


@torch.no_grad()
def load_torch_decoder_layer(
    block: DecoderBlock, layer: nn.TransformerDecoderLayer
) -> DecoderBlock:
    """Copy the weights of ``torch.nn.TransformerDecoderLayer`` into ``block`` (in place)
    and return it.

    torch's ``self_attn``, ``multihead_attn``, ``linear1``/``linear2`` and ``norm1..3``
    become ``self_attn``, ``cross_attn``, ``ff.up_proj``/``ff.down_proj`` and
    ``norm1..3``. Raises ``ValueError`` when the two layers are not built alike (sizes,
    norm placement and kind, epsilon, activation, biases).
    """
    if not isinstance(block, DecoderBlock):
        raise ValueError(f"block must be a DecoderBlock, got {type(block).__name__}")
    if not isinstance(layer, nn.TransformerDecoderLayer):
        raise ValueError(
            f"layer must be a torch.nn.TransformerDecoderLayer, got {type(layer).__name__}"
        )
    _check_built_alike(block, block.self_attn, layer)
    _copy_torch_attention(block.self_attn, layer.self_attn)
    _copy_torch_attention(block.cross_attn, layer.multihead_attn)
    pairs = [
        (block.ff.up_proj, layer.linear1),
        (block.ff.down_proj, layer.linear2),
        (block.norm1, layer.norm1),
        (block.norm2, layer.norm2),
        (block.norm3, layer.norm3),
    ]
    for mine, ref in pairs:
        mine.weight.copy_(ref.weight)
        mine.bias.copy_(ref.bias)
    return block
