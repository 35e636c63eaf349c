"""The key/value cache of a decoder: keep what earlier tokens computed (chapter 09).

In a causal decoder a token's keys and values, in every layer, depend only on the
tokens up to it. Generating token t+1 therefore needs the keys and values of tokens
1 … t that the previous steps already computed: a :class:`KVCache` per layer stores them,
each step appends the new token's and attends to all of them, and the model reads one
token per step instead of the whole text again.

The price is memory: per layer, a key and a value vector per key/value head and token,

    bytes = 2 · n_layers · n_kv_heads · head_dim · seq_len · batch · bytes_per_value

(:func:`kv_cache_bytes`), which grouped-query attention shrinks by
n_heads / n_kv_heads. Pope et al. (2023), "Efficiently Scaling Transformer Inference",
section 3.

The cache is a *static* buffer with a length pointer, like Hugging Face's
``StaticCache``: it allocates room for ``max_len`` positions once and writes each new
token into the next free row, so a decoding step copies one token's keys and values,
not the whole cache (growing it with ``torch.cat`` would copy all of it at every
step). Given no ``max_len``, the buffer doubles whenever it is full, as a Python list
does, so the copies still add up to a few times the final size. ``keys`` and
``values`` are views of the filled rows, whose ``nbytes`` is the formula's;
``capacity_nbytes`` is what the buffers hold. :meth:`KVCache.reset` keeps the buffers
for the next text, as a serving loop reuses one cache for request after request.
How fast decoding with it runs is measured in :mod:`transformer_book.decoding_speed`.

An encoder–decoder's decoder (chapter 07) keeps two caches per layer
(:class:`DecoderCache`): its self-attention's, which grows by a token per step like a
GPT's, and its cross-attention's, the keys and values of the encoder's output, which
the first step computes and every later step reads (the source does not change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = [
    "KVCache",
    "DecoderCache",
    "new_cache",
    "new_decoder_cache",
    "filled_cache",
    "cache_nbytes",
    "kv_cache_bytes",
]


class KVCache:
    """The keys and values one attention layer has computed so far.

    :meth:`update` writes the new tokens' keys and values after the cached ones and
    returns all of them. ``max_len``: the most positions the cache will hold (a
    model's context window); the buffers are allocated at the first update, with room
    for ``max_len`` positions, and an update past it raises. ``None``: room for the
    first update's positions, doubled whenever full. :meth:`reset` starts a new text
    in the same buffers.
    Shapes: keys and values (B, Hkv, seq_len, Dh), views of buffers
    (B, Hkv, capacity, Dh); both ``None`` until the first update.
    """

    def __init__(self, max_len: int | None = None) -> None:
        if max_len is not None and max_len < 1:
            raise ValueError(f"max_len must be >= 1 or None, got {max_len}")
        self.max_len = max_len
        self.seq_len = 0  # positions filled: the position of the next token
        self.keys: Tensor | None = None  # (B, Hkv, seq_len, Dh), a view of _k
        self.values: Tensor | None = None
        self._k: Tensor | None = None  # (B, Hkv, capacity, Dh)
        self._v: Tensor | None = None

    def __len__(self) -> int:
        return self.seq_len

    @property
    def capacity(self) -> int:
        """Positions the buffers have room for (0 before the first update)."""
        return 0 if self._k is None else self._k.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes of the cached keys and values (the formula with T = ``seq_len``)."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    @property
    def capacity_nbytes(self) -> int:
        """Bytes the buffers hold (the formula with T = ``capacity``)."""
        if self._k is None or self._v is None:
            return 0
        return self._k.nbytes + self._v.nbytes

    def _allocate(self, k: Tensor, end: int) -> None:
        """Buffers with room for ``end`` positions or more, the filled rows copied."""
        B, Hkv, _, Dh = k.shape
        if self.max_len is not None:
            capacity = self.max_len
        else:  # double: the copies stay a few times the final size in all
            capacity = max(end, 2 * self.capacity)
        shape = (B, Hkv, capacity, Dh)
        new_k = k.new_empty(shape)  # (B, Hkv, capacity, Dh), rows >= seq_len unused
        new_v = k.new_empty(shape)
        if self._k is not None and self._v is not None:
            new_k[:, :, : self.seq_len] = self._k[:, :, : self.seq_len]
            new_v[:, :, : self.seq_len] = self._v[:, :, : self.seq_len]
        self._k, self._v = new_k, new_v

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write ``k`` and ``v`` (B, Hkv, T_new, Dh) after the cached positions and
        return all keys and values (B, Hkv, seq_len + T_new, Dh)."""
        if k.shape != v.shape or k.dim() != 4:
            raise ValueError(
                "k and v must have the same shape (B, Hkv, T_new, Dh), got "
                f"k {tuple(k.shape)}, v {tuple(v.shape)}"
            )
        start, end = self.seq_len, self.seq_len + k.shape[2]
        buf = self._k
        if buf is not None and (
            (k.shape[0], k.shape[1], k.shape[3], k.dtype, k.device)
            != (buf.shape[0], buf.shape[1], buf.shape[3], buf.dtype, buf.device)
        ):
            if start > 0:
                raise ValueError(
                    f"new keys {tuple(k.shape)} {k.dtype} do not match the cached ones "
                    f"{(buf.shape[0], buf.shape[1], start, buf.shape[3])} {buf.dtype} "
                    "in batch, heads, head_dim (B, Hkv, T, Dh), dtype or device"
                )
            self._k = self._v = buf = None  # a new text of another shape: new buffers
        if buf is None:
            if self.max_len is not None and end > self.max_len:
                raise ValueError(
                    f"{end} positions do not fit a cache of max_len={self.max_len}"
                )
            self._allocate(k, end)
        elif end > buf.shape[2]:
            if self.max_len is not None:
                raise ValueError(
                    f"{end} positions do not fit a cache of max_len={self.max_len} "
                    f"({start} cached, {k.shape[2]} new); reset it or start a new one"
                )
            self._allocate(k, end)
        self._k[:, :, start:end] = k  # rows start … end - 1
        self._v[:, :, start:end] = v
        self.seq_len = end
        self.keys = self._k[:, :, :end]  # (B, Hkv, seq_len, Dh), a view: no copy
        self.values = self._v[:, :, :end]
        return self.keys, self.values

    def reset(self) -> None:
        """Forget the cached positions (start a new text). The buffers stay: the next
        text is written into them without allocating again, unless its batch, heads,
        head_dim, dtype or device differ (then new buffers replace them)."""
        self.seq_len = 0
        self.keys = self.values = None

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return (
            f"KVCache(seq_len={self.seq_len}, capacity={self.capacity}, keys={shape}, "
            f"nbytes={self.nbytes})"
        )


@dataclass
class DecoderCache:
    """One encoder–decoder decoder layer's two caches.

    ``self_attn`` grows by the new tokens at every step; ``cross_attn`` holds the keys
    and values of the encoder's output, filled by the first step and only read after
    (reset both for a new source). Shapes: as :class:`KVCache`; ``cross_attn`` holds
    (B, Hkv, S, Dh) for a source of S positions.
    """

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)

    @property
    def seq_len(self) -> int:
        """Number of target positions cached (the position of the next token)."""
        return self.self_attn.seq_len

    @property
    def nbytes(self) -> int:
        """Bytes held by both caches' key and value tensors."""
        return self.self_attn.nbytes + self.cross_attn.nbytes

    def reset(self) -> None:
        """Forget the target and the source."""
        self.self_attn.reset()
        self.cross_attn.reset()


def new_cache(n_layers: int, max_len: int | None = None) -> list[KVCache]:
    """One empty :class:`KVCache` per layer of a model, each with room for ``max_len``
    positions (None: growing as needed)."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [KVCache(max_len) for _ in range(n_layers)]


def new_decoder_cache(n_layers: int) -> list[DecoderCache]:
    """One empty :class:`DecoderCache` per layer of an encoder–decoder's decoder."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [DecoderCache() for _ in range(n_layers)]


def filled_cache(model, ids: Tensor, max_len: int | None = None) -> list[KVCache]:
    """A new cache (:func:`new_cache`, room for ``max_len`` positions) for every layer
    of a :class:`transformer_book.gpt.GPT`, filled by reading ``ids`` (B, T) once.
    Each layer's keys and values: (B, n_kv_heads, T, head_dim)."""
    if ids.dim() != 2:
        raise ValueError(f"ids must be (B, T) token ids, got shape {tuple(ids.shape)}")
    cache = new_cache(model.config.n_layers, max_len)
    with torch.no_grad():
        model(ids, cache=cache)
    return cache


def cache_nbytes(cache: Sequence[KVCache | DecoderCache]) -> int:
    """Bytes held by the key and value tensors of every layer's cache."""
    return sum(layer.nbytes for layer in cache)


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Size of a full KV cache: ``2 · n_layers · n_kv_heads · head_dim · seq_len · batch
    · bytes_per_value`` (the 2: one key and one value per head and token).

    ``bytes_per_value``: 2 for fp16/bf16, 4 for fp32, 1 for an 8-bit cache.
    """
    sizes = dict(
        n_layers=n_layers,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        batch=batch,
        bytes_per_value=bytes_per_value,
    )
    for name, value in sizes.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if int(seq_len) != seq_len or seq_len < 0:
        raise ValueError(f"seq_len must be a non-negative integer, got {seq_len!r}")
    return int(2 * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes_per_value)
