"""The encoder–decoder's decoder: its block, the stack, its cache and greedy decoding
(chapter 07; T5 in chapter 10 is the same stack with other options).

A decoder block has three sublayers, each in a residual connection with a norm
(Vaswani et al., 2017, section 3.1):

    x = x + SelfAttention(x, causal mask)           the target tokens so far
    x = x + CrossAttention(x, memory, source mask)  queries from x, keys/values from memory
    x = x + FeedForward(x)

(post-norm by default, pre-norm with ``norm_first=True``). The options are the encoder
block's (:class:`~transformer_book.blocks.EncoderBlock`): ``bias``, ``scale``,
``n_kv_heads``, ``rope``, ``norm``; T5 is ``bias=False, scale=1.0, norm="rms"``.

Decoding writes one token at a time. With a :class:`~transformer_book.kv_cache.DecoderCache`
per layer the step reads only the newest token: its self-attention appends that token's
keys and values to the cache (as a GPT does, chapter 09), and its cross-attention
projects the encoder's output to keys and values at the first step only, because the
source does not change while the target is written. :func:`greedy_decode` is the loop
every encoder–decoder here uses; :func:`shift_right` makes the decoder's input for
teacher forcing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .attention import (
    MultiHeadAttention,
    merge_heads,
    repeat_kv,
    scaled_dot_product_attention,
    split_heads,
)
from .blocks import (
    Activation,
    FeedForward,
    Rope,
    _check_built_alike,
    _copy_torch_attention,
    _make_norm,
)
from .kv_cache import DecoderCache, KVCache

__all__ = [
    "DecoderBlock",
    "Decoder",
    "shift_right",
    "greedy_decode",
    "load_torch_decoder_layer",
]


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


def _cached_cross_attention(
    attn: MultiHeadAttention,
    x: Tensor,
    memory: Tensor,
    mask: Tensor | None,
    cache: KVCache,
) -> Tensor:
    """``attn(x, context=memory, mask=mask)[0]`` with memory's keys and values taken
    from ``cache``, projected and stored there on the first call only.

    Shapes: x (B, T, D), memory (B, S, D), cache (B, Hkv, S, Dh) once filled ->
    (B, T, D).
    """
    if cache.seq_len == 0:  # the first step: project the source once
        k = split_heads(attn.k_proj(memory), attn.n_kv_heads)  # (B, Hkv, S, Dh)
        v = split_heads(attn.v_proj(memory), attn.n_kv_heads)  # (B, Hkv, S, Dh)
        cache.update(k, v)
    k = repeat_kv(cache.keys, attn.n_rep)  # (B, H, S, Dh)
    v = repeat_kv(cache.values, attn.n_rep)  # (B, H, S, Dh)
    q = split_heads(attn.q_proj(x), attn.n_heads)  # (B, H, T, Dh)
    p = attn.dropout if attn.training else 0.0
    out = scaled_dot_product_attention(
        q, k, v, mask=mask, scale=attn.scale, need_weights=False, dropout_p=p
    )[0]  # (B, H, T, Dh)
    return attn.o_proj(merge_heads(out))  # (B, T, D)


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, feed-forward; each
    wrapped in a residual connection and a norm.

    The decoder has two inputs: ``x``, the target tokens so far, and ``memory``, the
    encoder's output. Self-attention mixes the target tokens (``self_mask`` is usually
    causal, so position t sees positions ≤ t only; ``self_bias`` is e.g. T5's relative
    bias); cross-attention takes its queries from ``x`` and its keys and values from
    ``memory`` (``memory_mask`` hides the source's padding). ``rope`` rotates the
    self-attention's queries and keys (not cross-attention's: source and target positions
    are not on one axis). Other options as :class:`~transformer_book.blocks.EncoderBlock`.

    ``cache``: a :class:`~transformer_book.kv_cache.DecoderCache`; ``x`` then holds only
    the new tokens, masks and bias cover (T, cached + T) keys in self-attention, and
    ``memory`` is read on the first call only (its keys and values are cached).

    Shapes: x (B, T, d_model), memory (B, S, d_model); self_mask and self_bias broadcast
    to (B, H, T, T), memory_mask to (B, H, T, S), True = may attend. Returns
    (B, T, d_model). Vaswani et al. (2017), section 3.1.
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
        options = dict(dropout=dropout, bias=bias, n_kv_heads=n_kv_heads, scale=scale)
        self.self_attn = MultiHeadAttention(d_model, n_heads, rope=rope, **options)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, **options)
        self.ff = FeedForward(
            d_model, d_ff, dropout=dropout, activation=activation, bias=bias
        )
        self.norm1 = _make_norm(norm, d_model, layer_norm_eps, bias)  # self-attention
        self.norm2 = _make_norm(norm, d_model, layer_norm_eps, bias)  # cross-attention
        self.norm3 = _make_norm(norm, d_model, layer_norm_eps, bias)  # feed-forward
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self_attend(
        self,
        x: Tensor,
        mask: Tensor | None,
        bias: Tensor | None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        kv = None if cache is None else cache.self_attn
        return self.dropout1(self.self_attn(x, mask=mask, bias=bias, cache=kv)[0])

    def _cross_attend(
        self,
        x: Tensor,
        memory: Tensor,
        mask: Tensor | None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        if cache is None:
            out = self.cross_attn(x, context=memory, mask=mask)[0]
        else:
            out = _cached_cross_attention(
                self.cross_attn, x, memory, mask, cache.cross_attn
            )
        return self.dropout2(out)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        _check_decoder_inputs("DecoderBlock", self.d_model, x, memory)
        if self.norm_first:  # pre-norm: x + F(Norm(x)) for each of the three sublayers
            x = x + self._self_attend(self.norm1(x), self_mask, self_bias, cache)
            x = x + self._cross_attend(self.norm2(x), memory, memory_mask, cache)
            return x + self.dropout3(self.ff(self.norm3(x)))
        x = self.norm1(
            x + self._self_attend(x, self_mask, self_bias, cache)
        )  # Add&Norm
        x = self.norm2(x + self._cross_attend(x, memory, memory_mask, cache))
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
        out = self.cross_attn(h, context=memory, mask=memory_mask, need_weights=True)
        return out[1]  # (B, H, T, S)


class Decoder(nn.Module):
    """A stack of ``n_layers`` decoder blocks; every block reads the same ``memory``.

    Shapes: x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model); masks as in
    :class:`DecoderBlock`; ``cache`` one :class:`~transformer_book.kv_cache.DecoderCache`
    per layer. As in :class:`~transformer_book.blocks.Encoder`, a pre-norm stack ends
    with one more norm. Vaswani et al. (2017), section 3.1.
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
        options = dict(
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
        self.layers = nn.ModuleList(
            DecoderBlock(d_model, n_heads, d_ff, **options) for _ in range(n_layers)
        )
        self.final_norm = (
            _make_norm(norm, d_model, layer_norm_eps, bias)
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
        cache: Sequence[DecoderCache] | None = None,
    ) -> Tensor:
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache must hold one DecoderCache per layer ({len(self.layers)}), "
                f"got {len(cache)}"
            )
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache[i]
            x = layer(x, memory, self_mask, memory_mask, self_bias, layer_cache)
        return self.final_norm(x)  # (B, T, d_model)

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


def shift_right(tgt: Tensor, start_id: int) -> Tensor:
    """The decoder's input under teacher forcing: ``start_id`` followed by the target
    minus its last token. With ``y_0`` the start token and positions counted from 0
    (chapter 07's notation), position t reads ``y_0 … y_t`` and is trained to predict
    ``y_{t+1}`` (``<bos>`` in chapter 07; T5 starts from its pad id).

    Shapes: (B, T) -> (B, T).
    """
    if tgt.dim() != 2:
        raise ValueError(f"tgt must have shape (B, T), got {tuple(tgt.shape)}")
    start = tgt.new_full((tgt.shape[0], 1), start_id)  # (B, 1)
    return torch.cat([start, tgt[:, :-1]], dim=1)  # (B, T)


@torch.no_grad()
def greedy_decode(
    decode: Callable[[Tensor, list[DecoderCache] | None], Tensor],
    start: Tensor,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    cache: list[DecoderCache] | None = None,
) -> Tensor:
    """Write a target one token at a time, each the argmax given the ones before.

    ``decode(ids, cache)`` returns the logits (B, T, V) of a model's decoder for the
    target ids (B, T) and the encoded source it holds. Without ``cache`` every step
    decodes the whole prefix again; with one
    :class:`~transformer_book.kv_cache.DecoderCache` per layer a step decodes only the
    newest token. Starts from ``start`` (B, 1) and stops when every row has written
    ``eos_id`` or after ``max_new_tokens`` tokens. Shapes: -> (B, L),
    L <= max_new_tokens, the start token not included; positions after a row's
    ``eos_id`` hold ``pad_id``.
    """
    if start.dim() != 2 or start.shape[1] != 1:
        raise ValueError(f"start must have shape (B, 1), got {tuple(start.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    ys = start
    done = torch.zeros(start.shape[0], dtype=torch.bool, device=start.device)  # (B,)
    for _ in range(max_new_tokens):
        new = ys if cache is None else ys[:, cache[0].seq_len :]  # not yet decoded
        logits = decode(new, cache)[:, -1]  # (B, V): the next token's
        nxt = logits.argmax(dim=-1).masked_fill(done, pad_id)  # (B,)
        ys = torch.cat([ys, nxt[:, None]], dim=1)  # (B, t + 1)
        done = done | (nxt == eos_id)
        if done.all():
            break
    return ys[:, 1:]  # (B, L)


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
