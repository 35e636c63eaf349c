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

Chapter 10 adds whole models, each checked against the book's module and against the
``transformers`` reference built from the published configuration: :func:`bert_params`,
:func:`t5_params`, :func:`gpt_params`; and what training costs: :func:`training_flops`
(6·N·D) and :func:`adam_memory_bytes`. Chapter 01 compares the arithmetic of one layer:
:func:`gru_flops` and :func:`attention_flops`.
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


# --- Whole models, and what they cost (chapter 10) -------------------------------------
# Appended below the encoder counts, so that parallel additions merge cleanly.

__all__ += [
    "bert_params",
    "t5_params",
    "gpt_params",
    "gru_flops",
    "attention_flops",
    "training_flops",
    "adam_memory_bytes",
]


def bert_params(
    vocab_size: int = 30522,
    d_model: int = 768,
    n_layers: int = 12,
    d_ff: int = 3072,
    max_len: int = 512,
    type_vocab_size: int = 2,
    pooler: bool = True,
) -> int:
    """BERT (Devlin et al., 2019): token, position and segment embeddings and their
    LayerNorm, ``n_layers`` post-norm encoder blocks with biases, and the pooler (a
    d_model × d_model linear layer on the [CLS] vector).

    Defaults are BERT-base: 109,482,240. The count of ``transformers.BertModel``
    (which includes the pooler), without the pre-training heads.
    """
    _positive(type_vocab_size=type_vocab_size)
    embeddings = embedding_params(type_vocab_size, d_model) + layer_norm_params(d_model)
    total = embeddings + encoder_params(
        n_layers, d_model, d_ff, vocab_size, max_len=max_len
    )
    return total + (linear_params(d_model, d_model) if pooler else 0)


def t5_params(
    vocab_size: int = 32128,
    d_model: int = 512,
    n_layers: int = 6,
    d_ff: int = 2048,
    n_heads: int = 8,
    head_dim: int = 64,
    num_buckets: int = 32,
) -> int:
    """T5 v1.0 (Raffel et al., 2020): one embedding shared by encoder, decoder and output
    layer; ``n_layers`` encoder and ``n_layers`` decoder blocks without biases; RMS
    norms (a γ of d_model each); one relative-bias table (num_buckets × n_heads) per
    stack, in its first layer.

    Attention maps d_model to n_heads·head_dim, which need not equal d_model (T5-3B and
    11B widen it). Defaults are T5-small: 60,506,624.
    """
    _positive(n_heads=n_heads, head_dim=head_dim, num_buckets=num_buckets)
    _positive(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, d_ff=d_ff)
    inner = n_heads * head_dim
    attn = 3 * linear_params(d_model, inner, bias=False) + linear_params(
        inner, d_model, bias=False
    )  # q, k, v, o
    ff = feed_forward_params(d_model, d_ff, bias=False)  # wi, wo
    norm = layer_norm_params(d_model, bias=False)  # RMSNorm: γ only
    rel_bias = num_buckets * n_heads
    encoder = n_layers * (attn + ff + 2 * norm) + rel_bias + norm  # + final norm
    decoder = n_layers * (2 * attn + ff + 3 * norm) + rel_bias + norm  # + cross-attn
    return embedding_params(vocab_size, d_model) + encoder + decoder


def gpt_params(
    vocab_size: int = 50257,
    max_len: int = 1024,
    d_model: int = 768,
    n_layers: int = 12,
    d_ff: int | None = None,
) -> int:
    """GPT-2/GPT-3 style decoder-only model (Radford et al., 2019; Brown et al., 2020):
    token and learned position embeddings, ``n_layers`` pre-norm blocks with biases, a
    final LayerNorm, and an output layer tied to the token embedding (no new weights).

    ``d_ff`` defaults to 4·d_model. Defaults are GPT-2 small: 124,439,808. The number of
    heads does not enter: heads split d_model, they do not add weights.
    """
    d_ff = 4 * d_model if d_ff is None else d_ff
    return encoder_params(
        n_layers, d_model, d_ff, vocab_size, max_len=max_len, final_norm=True
    )


def gru_flops(batch: int, seq_len: int, d_model: int) -> int:
    """Floating-point operations of one GRU layer of width d over B sequences of T
    tokens: per token three gates, each with an input and a hidden (d, d) product, 2
    operations per multiply-add, so ``12 d²`` (the gates' element-wise work and biases
    left out; Cho et al., 2014)."""
    _positive(batch=batch, seq_len=seq_len, d_model=d_model)
    return batch * seq_len * 12 * d_model * d_model


def attention_flops(batch: int, seq_len: int, d_model: int) -> int:
    """Floating-point operations of one multi-head self-attention layer over B
    sequences of T tokens: per token the four (d, d) projections, ``8 d²``, and the
    products Q Kᵀ and weights · V, ``4 T d`` (the softmax left out)."""
    _positive(batch=batch, seq_len=seq_len, d_model=d_model)
    return batch * seq_len * (8 * d_model * d_model + 4 * seq_len * d_model)


def training_flops(n_params: int | float, n_tokens: int | float) -> float:
    """The usual estimate of the compute of training: ``6 · N · D`` floating-point
    operations for N parameters and D tokens (Kaplan et al., 2020, section 2.1).

    Each weight is used in one multiply-add (2 FLOPs) per token in the forward pass and
    in two in the backward pass (the gradients with respect to the input and to the
    weight). Attention's score computation, which grows with the context, is left out.
    """
    if n_params <= 0 or n_tokens <= 0:
        raise ValueError(
            f"n_params and n_tokens must be positive, got n_params={n_params}, "
            f"n_tokens={n_tokens}"
        )
    return 6.0 * n_params * n_tokens


def adam_memory_bytes(n_params: int, mixed_precision: bool = True) -> dict[str, int]:
    """Bytes that training with Adam keeps per model, by kind (activations excluded).

    fp32 training: weights, gradients and Adam's two moments, 4 bytes each per
    parameter (16 in all). Mixed precision (Micikevicius et al., 2018): fp16/bf16
    weights and gradients (2 bytes each), plus an fp32 master copy of the weights and
    the two fp32 moments (12 bytes): 16 bytes per parameter as well (Rajbhandari et
    al., 2020, ZeRO, section 3.1).
    """
    if not isinstance(n_params, int) or n_params < 1:
        raise ValueError(f"n_params must be a positive integer, got {n_params!r}")
    if mixed_precision:
        return {
            "weights": 2 * n_params,
            "gradients": 2 * n_params,
            "fp32 master weights": 4 * n_params,
            "Adam moments": 8 * n_params,
        }
    return {
        "weights": 4 * n_params,
        "gradients": 4 * n_params,
        "Adam moments": 8 * n_params,
    }
