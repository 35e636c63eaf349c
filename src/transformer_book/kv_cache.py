"""The key/value cache of a decoder: keep what earlier tokens computed (chapter 09).

In a causal decoder a token's keys and values, in every layer, depend only on the
tokens up to it. Generating token t+1 therefore needs the keys and values of tokens
1 … t that the previous steps already computed: a :class:`KVCache` per layer stores them,
each step appends the new token's and attends to all of them, and the model reads one
token per step instead of the whole text again.

The price is memory: per layer, a key and a value vector per key/value head and token,

    bytes = 2 · n_layers · n_kv_heads · head_dim · seq_len · batch · bytes_per_value

(:func:`kv_cache_bytes`), which grouped-query attention shrinks by
n_heads / n_kv_heads. The cache grows by concatenation, like Hugging Face's
``DynamicCache``: its tensors hold exactly the tokens seen, so their ``nbytes`` are the
formula. Pope et al. (2023), "Efficiently Scaling Transformer Inference", section 3.

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
    "cache_nbytes",
    "kv_cache_bytes",
]


class KVCache:
    """The keys and values one attention layer has computed so far.

    :meth:`update` appends the new tokens' keys and values and returns the whole cache.
    Shapes: keys and values (B, Hkv, T, Dh), T growing by the number of tokens each
    call adds. Empty (``seq_len == 0``) until the first update.
    """

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    @property
    def seq_len(self) -> int:
        """Number of positions cached (the position of the next token)."""
        return 0 if self.keys is None else self.keys.shape[-2]

    def __len__(self) -> int:
        return self.seq_len

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached key and value tensors."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``k`` and ``v`` (B, Hkv, T_new, Dh) and return all keys and values
        (B, Hkv, T_cached + T_new, Dh)."""
        if k.dim() != 4 or k.shape != v.shape:
            raise ValueError(
                "k and v must have the same shape (B, Hkv, T_new, Dh), got "
                f"k {tuple(k.shape)}, v {tuple(v.shape)}"
            )
        if self.keys is None or self.values is None:
            self.keys, self.values = k, v
        else:
            cached = self.keys.shape
            if (k.shape[0], k.shape[1], k.shape[3]) != (
                cached[0],
                cached[1],
                cached[3],
            ):
                raise ValueError(
                    f"new keys {tuple(k.shape)} do not match the cached ones "
                    f"{tuple(cached)} in batch, heads or head_dim (B, Hkv, T, Dh)"
                )
            self.keys = torch.cat((self.keys, k), dim=-2)  # (B, Hkv, T + T_new, Dh)
            self.values = torch.cat((self.values, v), dim=-2)  # (B, Hkv, T + T_new, Dh)
        return self.keys, self.values

    def reset(self) -> None:
        """Forget everything (start a new text)."""
        self.keys = self.values = None

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return f"KVCache(seq_len={self.seq_len}, keys={shape}, nbytes={self.nbytes})"


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


def new_cache(n_layers: int) -> list[KVCache]:
    """One empty :class:`KVCache` per layer of a model."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [KVCache() for _ in range(n_layers)]


def new_decoder_cache(n_layers: int) -> list[DecoderCache]:
    """One empty :class:`DecoderCache` per layer of an encoder–decoder's decoder."""
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1, got {n_layers}")
    return [DecoderCache() for _ in range(n_layers)]


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
