"""A decoder-only language model, GPT style (chapters 09 and 14).

    ids -> token embedding (+ learned positions) -> dropout
        -> n_layers × pre-norm EncoderBlock with a causal mask -> final norm
        -> linear head -> logits over the vocabulary

The block is :class:`transformer_book.blocks.EncoderBlock` itself: GPT's block *is* the
pre-norm encoder block; the causal mask alone makes it a decoder. Positions are learned
vectors (GPT-2) or RoPE inside attention (Llama); the head may share the token
embedding's weights (``tie_embeddings``, Press & Wolf, 2017). Each attention keeps its
query, key and value projections as one matrix, as nanoGPT's ``c_attn`` does
(:meth:`~transformer_book.attention.MultiHeadAttention.stack_projections`, chapter 14).
:meth:`GPT.generate` decodes with a KV cache (:mod:`transformer_book.kv_cache`) or
without, and picks tokens with :mod:`transformer_book.sampling`. Radford et al. (2019),
GPT-2; the layout follows nanoGPT's ``model.py``, the names this book's (``q_proj``,
``up_proj``, ...).
GPT-2's own architecture and weights: :mod:`transformer_book.gpt2_weights`.
:func:`uptrain_losses` converts a trained model to fewer key/value heads and trains it
a little further (chapter 09).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import grouped_heads, kv_cache, masks, runtime, sampling
from .blocks import Encoder
from .norms import NORMS
from .positions import LearnedPositionalEmbedding, RotaryEmbedding

__all__ = [
    "ACTIVATIONS",
    "POSITIONS",
    "GPTConfig",
    "GPT",
    "gqa_from_mha",
    "uptrain_losses",
]

ACTIVATIONS = {
    "gelu": F.gelu,  # exact (erf) GELU, as nanoGPT's nn.GELU()
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": F.relu,
    "silu": F.silu,
}
POSITIONS = ("learned", "rope")


@dataclass(frozen=True)
class GPTConfig:
    """Everything that defines a :class:`GPT`'s shape.

    ``n_kv_heads``: None = multi-head attention, a divisor of ``n_heads`` = grouped-query,
    1 = multi-query. ``d_ff``: None = 4 · d_model. ``positions``: ``"learned"`` (a vector
    per position, GPT-2) or ``"rope"`` (rotary, Llama). ``norm``: ``"layer"`` or
    ``"rms"``. ``activation``: a key of :data:`ACTIVATIONS`. ``bias``: biases in the
    linear layers and LayerNorms. ``tie_embeddings``: the output head reuses the token
    embedding matrix. ``max_len`` is the context window: the most tokens the model reads.
    """

    vocab_size: int
    max_len: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int | None = None
    d_ff: int | None = None
    dropout: float = 0.0
    positions: str = "learned"
    norm: str = "layer"
    activation: str = "gelu"
    bias: bool = True
    tie_embeddings: bool = True
    layer_norm_eps: float = 1e-5
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        kv = self.n_kv_heads
        if kv is not None and (kv < 1 or self.n_heads % kv):
            raise ValueError(
                f"n_kv_heads ({kv}) must divide n_heads ({self.n_heads}), or be None"
            )
        if self.d_ff is not None and self.d_ff < 1:
            raise ValueError(f"d_ff must be positive or None, got {self.d_ff}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        choices = (
            ("positions", POSITIONS),
            ("norm", NORMS),
            ("activation", tuple(ACTIVATIONS)),
        )
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(
                f"RoPE rotates feature pairs: head_dim = d_model / n_heads must be even, "
                f"got {self.head_dim}"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads (``n_heads`` for multi-head attention)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def ff_width(self) -> int:
        return 4 * self.d_model if self.d_ff is None else self.d_ff


class GPT(nn.Module):
    """Decoder-only transformer: ``forward(ids) -> logits`` and :meth:`generate`.

    Shapes: ids (B, T) int64 with T <= max_len -> logits (B, T, vocab_size); logits[:, t]
    predicts token t + 1. ``forward(ids, cache=...)`` reads ids as the tokens after the
    ones already in ``cache`` (one :class:`~transformer_book.kv_cache.KVCache` per layer).
    Weights start as in GPT-2: normal(0, 0.02), and the projections that write into the
    residual stream (``o_proj``, ``down_proj``) scaled by 1/√(2·n_layers).
    ``one_token_native_kernels``: a step that reads a single token on the CPU (one
    text's cached decoding step, B = T = 1) runs with torch's own kernels, not oneDNN's
    (:func:`transformer_book.runtime.native_cpu_kernels`, chapter 09); set it to False
    on a model (or the class) to keep oneDNN, as ``benchmarks/kv_cache_speed.py`` does
    to time what the choice saves.
    """

    one_token_native_kernels = True

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = (
            LearnedPositionalEmbedding(c.max_len, c.d_model)
            if c.positions == "learned"
            else None
        )
        rope = (
            RotaryEmbedding(c.head_dim, base=c.rope_base)
            if c.positions == "rope"
            else None
        )
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = Encoder(
            c.n_layers,
            c.d_model,
            c.n_heads,
            c.ff_width,
            dropout=c.dropout,
            norm_first=True,  # pre-norm, with a final norm after the last block
            rope=rope,
            activation=ACTIVATIONS[c.activation],
            layer_norm_eps=c.layer_norm_eps,
            norm=c.norm,
            n_kv_heads=c.n_kv_heads,
            bias=c.bias,
        )
        # q, k and v as one matrix: one product, one parameter tensor (chapter 14)
        for block in self.blocks.layers:
            block.attn.stack_projections()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.reset_parameters()
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one (V, d_model) matrix, twice

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2's initialisation (Radford et al., 2019, section 2.3; nanoGPT)."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for block in self.blocks.layers:
            nn.init.normal_(block.attn.o_proj.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.ff.down_proj.weight, mean=0.0, std=residual_std)

    def forward(
        self, ids: Tensor, cache: Sequence[kv_cache.KVCache] | None = None
    ) -> Tensor:
        if ids.dim() != 2 or ids.dtype.is_floating_point:
            raise ValueError(
                f"ids must be integer token ids of shape (B, T), got shape "
                f"{tuple(ids.shape)} dtype {ids.dtype}"
            )
        T = ids.shape[1]
        offset = 0 if cache is None else cache[0].seq_len  # tokens already read
        if T < 1 or offset + T > self.config.max_len:
            raise ValueError(
                f"positions {offset}..{offset + T - 1} do not fit the context window "
                f"max_len={self.config.max_len} (got {T} new tokens after {offset} "
                "cached ones)"
            )
        x = self.tok_emb(ids)  # (B, T, d_model)
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset=offset)  # + positions offset … offset+T-1
        x = self.dropout(x)
        # Causal: new token i sees the cached tokens and new tokens 0 … i. A single new
        # token sees everything, so it needs no mask; with nothing cached, the fused
        # kernel applies the causal mask itself (is_causal) without building it.
        mask = None
        if T > 1 and offset > 0:
            mask = masks.causal_mask(T, offset + T, device=ids.device)  # (T, offset+T)
        is_causal = T > 1 and offset == 0
        # a single token (one text's cached decoding step): torch's own kernels
        native = self.one_token_native_kernels and ids.numel() == 1  # B · T = 1
        with runtime.native_cpu_kernels(native and ids.device.type == "cpu"):
            x = self.blocks(x, mask, cache=cache, is_causal=is_causal)  # (B, T, D)
        return self.lm_head(x)  # (B, T, vocab_size), after the final norm

    @torch.no_grad()
    def generate(
        self,
        ids: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Append ``max_new_tokens`` tokens to ``ids``, one at a time.

        ``temperature=0`` is greedy decoding. Without a cache every step reads the last
        ``max_len`` tokens again; with one, the prompt is read once and every later
        step reads only the newest token, attending to the cached keys and values.
        Past ``max_len`` tokens both read the last ``max_len`` tokens afresh, so the
        two give the same tokens. The cache is allocated once, with room for every
        position it will hold (:class:`~transformer_book.kv_cache.KVCache`; a full
        window resets it and refills the same buffers), and so is the output, each
        step writing its token into the next column. The steps run in inference mode. Call
        ``model.eval()`` first: dropout would make every step random.
        Shapes: ids (B, T0) -> (B, T0 + max_new_tokens).
        """
        if ids.dim() != 2 or ids.shape[1] < 1:
            raise ValueError(
                f"ids must be a non-empty prompt of shape (B, T0), got {tuple(ids.shape)}"
            )
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        max_len, T0 = self.config.max_len, ids.shape[1]
        out = ids.new_empty(ids.shape[0], T0 + max_new_tokens)  # (B, T0 + new)
        out[:, :T0] = ids
        cache = None
        if use_cache:  # one static buffer per layer: room for every position cached
            room = min(max_len, T0 + max_new_tokens)
            cache = kv_cache.new_cache(self.config.n_layers, max_len=room)
        # inference mode: no autograd bookkeeping at all (views and version counters
        # included), a few per cent of a cached step
        with torch.inference_mode():
            for T in range(T0, T0 + max_new_tokens):  # T tokens so far
                if cache is not None and 0 < cache[0].seq_len < max_len:
                    logits = self(out[:, T - 1 : T], cache=cache)  # (B, 1, V): newest
                else:  # first step, no cache, or a full window: the last max_len
                    for layer in cache or ():
                        layer.reset()  # the buffers stay, refilled from position 0
                    logits = self(out[:, max(0, T - max_len) : T], cache=cache)
                out[:, T] = sampling.sample_next(
                    logits[:, -1], temperature, top_k, top_p, generator
                )  # (B,): the next token
        # a normal tensor again: an inference tensor cannot enter autograd
        return out.clone()


def gqa_from_mha(model: GPT, n_kv_heads: int) -> GPT:
    """A copy of ``model`` whose every attention has ``n_kv_heads`` key/value heads,
    each the mean of its group's (:func:`transformer_book.grouped_heads.gqa_from_mha`).

    Everything else is copied unchanged; ``model`` is left alone. Ainslie et al. (2023).
    """
    config = dataclasses.replace(model.config, n_kv_heads=n_kv_heads)  # validates
    ref = model.lm_head.weight
    new = GPT(config).to(device=ref.device, dtype=ref.dtype)
    state = {  # everything but the attentions' stacked q, k, v (another shape now)
        k: v for k, v in model.state_dict().items() if ".attn.qkv_proj." not in k
    }
    missing = new.load_state_dict(state, strict=False).missing_keys
    assert all(".attn.qkv_proj." in k for k in missing), missing
    for mine, theirs in zip(new.blocks.layers, model.blocks.layers):
        pooled = grouped_heads.gqa_from_mha(theirs.attn, n_kv_heads)  # stacked, too
        mine.attn.load_state_dict(pooled.state_dict())
    new.train(model.training)
    return new


def uptrain_losses(
    model: GPT,
    kv_heads: Sequence[int],
    train_ids: Tensor,
    heldout: Sequence[tuple[Tensor, Tensor]],
    batch_size: int,
    steps: int,
    lr: float,
    seeds: Sequence[int],
) -> dict[int, list[float]]:
    """Convert ``model`` to each number of key/value heads (:func:`gqa_from_mha`;
    ``model.config.n_heads`` gives an unchanged copy, the control), train each copy
    ``steps`` more steps on random windows of ``train_ids`` (N,) with
    :func:`transformer_book.training.train` (a fresh AdamW at a constant ``lr``), once
    per seed, and score it on the ``heldout`` batches. Seed ``s`` sets the torch seed
    before the conversion and draws the same batches (``WindowBatches`` seed 100 + s)
    in every arm, so the arms are paired. Ainslie et al. (2023)'s uptraining.
    Returns: key/value heads -> one held-out loss per seed.
    """
    from . import lm_data, training

    context = model.config.max_len
    after: dict[int, list[float]] = {}
    for g in kv_heads:
        after[g] = []
        for seed in seeds:
            torch.manual_seed(seed)
            student = gqa_from_mha(model, g)
            stream = lm_data.WindowBatches(
                train_ids, batch_size, context, seed=100 + seed
            )
            training.train(student, stream, lm_data.next_token_loss, steps, lr=lr)
            after[g].append(lm_data.mean_loss(student, heldout))
    return after
