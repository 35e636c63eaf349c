"""Closed-form parameter counts of transformer parts (chapter 03; extended in chapter 10).

Every count is a function of widths (d_model, d_ff), the vocabulary, the number of
layers and, for a learned position table only, the maximum length. No count takes the
input's sequence length, because no weight has a length axis: the same matrices are
applied to every token. Each function equals ``count_params`` of the matching module
(``tests/test_params.py`` checks this across configurations).

    linear            d_in·d_out + d_out
    multi-head attn   4·d_model² + 4·d_model                (W_Q, W_K, W_V, W_O and biases)
    feed-forward      2·d_model·d_ff + d_ff + d_model       (W1, b1, W2, b2)
    LayerNorm         2·d_model                             (γ and β)
    encoder block     attention + feed-forward + 2 LayerNorms
    encoder           vocab·d_model [+ max_len·d_model] + n_layers·block [+ final LayerNorm]
"""

from __future__ import annotations

from torch import nn

__all__ = [
    "count_params",
    "linear_params",
    "embedding_params",
    "layer_norm_params",
    "mha_params",
    "feed_forward_params",
    "encoder_block_params",
    "encoder_params",
]


def _positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def count_params(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``module`` (a tied weight counts once)."""
    return sum(
        p.numel() for p in module.parameters() if p.requires_grad or not trainable_only
    )


def linear_params(d_in: int, d_out: int, bias: bool = True) -> int:
    """``nn.Linear(d_in, d_out)``: a (d_out, d_in) matrix plus a bias of d_out."""
    _positive(d_in=d_in, d_out=d_out)
    return d_in * d_out + (d_out if bias else 0)


def embedding_params(n_rows: int, d_model: int) -> int:
    """A lookup table of ``n_rows`` vectors (a vocabulary, or learned positions up to max_len)."""
    _positive(n_rows=n_rows, d_model=d_model)
    return n_rows * d_model


def layer_norm_params(d_model: int, bias: bool = True) -> int:
    """LayerNorm: γ and β, d_model each (γ only with ``bias=False``, which is also
    RMSNorm's count)."""
    _positive(d_model=d_model)
    return d_model * (2 if bias else 1)


def mha_params(
    d_model: int,
    n_heads: int | None = None,
    n_kv_heads: int | None = None,
    bias: bool = True,
) -> int:
    """Multi-head attention: query, key, value and output projections.

    The number of heads does not change the count (heads split d_model, they do not add to
    it), unless keys and values have fewer heads than queries (``n_kv_heads``, grouped-query
    attention, chapter 09): then W_K and W_V map to n_kv_heads · (d_model / n_heads) only.
    """
    _positive(d_model=d_model)
    kv_dim = d_model
    if n_kv_heads is not None:
        if n_heads is None:
            raise ValueError(
                "n_kv_heads needs n_heads too (it sets the head width d_model / n_heads)"
            )
        _positive(n_heads=n_heads, n_kv_heads=n_kv_heads)
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError(
                f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, "
                f"got d_model={d_model}, n_heads={n_heads}, n_kv_heads={n_kv_heads}"
            )
        kv_dim = n_kv_heads * (d_model // n_heads)
    return (
        2 * linear_params(d_model, d_model, bias)  # W_Q and W_O
        + 2 * linear_params(d_model, kv_dim, bias)
    )  # W_K and W_V


def feed_forward_params(d_model: int, d_ff: int, bias: bool = True) -> int:
    """Position-wise feed-forward: up-projection W1 (d_model -> d_ff), down-projection W2
    (d_ff -> d_model)."""
    _positive(d_model=d_model, d_ff=d_ff)
    return linear_params(d_model, d_ff, bias) + linear_params(d_ff, d_model, bias)


def encoder_block_params(d_model: int, d_ff: int, bias: bool = True) -> int:
    """One encoder block: attention + feed-forward + two LayerNorms
    = 4d² + 2·d·d_ff + 9d + d_ff (with biases).

    A decoder-only (GPT-style) block has the same parts, so the same count.
    """
    return (
        mha_params(d_model, bias=bias)
        + feed_forward_params(d_model, d_ff, bias)
        + 2 * layer_norm_params(d_model, bias)
    )


def encoder_params(
    n_layers: int,
    d_model: int,
    d_ff: int,
    vocab_size: int,
    max_len: int | None = None,
    final_norm: bool = False,
    bias: bool = True,
) -> int:
    """A token-embedding table, an optional learned position table, ``n_layers`` blocks,
    an optional final LayerNorm.

    ``max_len`` is the size of a *learned* position table (None when positions are
    computed, e.g. sinusoidal or rotary, chapter 04); ``final_norm`` is the LayerNorm a
    pre-norm stack ends with. Output heads are not included.
    """
    _positive(n_layers=n_layers, d_model=d_model, d_ff=d_ff, vocab_size=vocab_size)
    if max_len is not None:
        _positive(max_len=max_len)
    total = embedding_params(vocab_size, d_model) + n_layers * encoder_block_params(
        d_model, d_ff, bias
    )
    if max_len is not None:
        total += embedding_params(max_len, d_model)
    if final_norm:
        total += layer_norm_params(d_model, bias)
    return total
