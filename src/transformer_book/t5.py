"""T5, the encoder–decoder family, and its pre-training objective (chapter 10).

    source ids -> shared embedding -> encoder (pre-norm blocks, one relative bias shared
    by every layer) -> memory
    target ids, shifted right -> shared embedding -> decoder (causal self-attention with
    its own shared relative bias, cross-attention to memory, feed-forward)
    -> RMS norm -> × d_model^-0.5 -> the shared embedding, transposed -> logits

T5's choices (Raffel et al., 2020, section 3.1.1; their v1.0 code), each a small option
of the book's floors 1–2 rather than new code:

- RMS-style norm, γ only (``norms.RMSNorm``, eps 1e-6), placed before every sublayer;
- no biases anywhere (``bias=False``) and a ReLU feed-forward (``blocks.FeedForward``);
- no 1/√d_k in attention (``scale=1.0``): the initialisation of W_Q absorbs it;
- no position embeddings; a learned scalar per head and distance bucket
  (``positions.T5RelativeBias``) computed once per stack and added to the scores of
  every layer (bidirectional in the encoder, causal in the decoder, none in
  cross-attention);
- one embedding for encoder input, decoder input and output layer, the decoder's
  output scaled by d_model^-0.5 before the tied output layer.

The encoder is ``blocks.Encoder`` and the decoder ``decoder.Decoder``, chapter 07's,
with those options (and the decoder's cache for :meth:`T5.generate`).
:func:`load_hf_t5` copies a Hugging Face ``T5ForConditionalGeneration``; the tests
check the logits agree. :func:`span_corruption` (from
:mod:`transformer_book.span_corruption`) is T5's pre-training objective.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import masks
from .attention import MultiHeadAttention
from .blocks import Encoder, FeedForward
from .decoder import Decoder, greedy_decode, shift_right
from .kv_cache import DecoderCache, new_decoder_cache
from .norms import RMSNorm
from .positions import T5RelativeBias
from .span_corruption import merge_spans, noise_span_mask, span_corruption

# T5's pre-training objective lives in its own module (floor 1: it needs no model);
# it is re-exported here so that ``t5.span_corruption`` reads as what it is.

__all__ = [
    "T5Config",
    "T5",
    "target_predictions",
    "target_scores",
    "load_hf_t5",
    "step_shares",
    "noise_span_mask",
    "span_corruption",
    "merge_spans",
]


@dataclass(frozen=True)
class T5Config:
    """The shape of a :class:`T5`. Defaults are T5-small's (except the vocabulary).

    ``pad_id`` is also the decoder's start token, as in T5; ``eos_id`` ends a sequence.
    ``num_buckets`` and ``max_distance`` set the relative bias (chapter 04).
    """

    vocab_size: int
    d_model: int = 512
    n_layers: int = 6
    n_heads: int = 8
    d_ff: int = 2048
    num_buckets: int = 32
    max_distance: int = 128
    dropout: float = 0.0
    layer_norm_eps: float = 1e-6
    pad_id: int = 0
    eos_id: int = 1

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads "
                f"({self.n_heads}); this T5 uses head_dim = d_model / n_heads"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class T5(nn.Module):
    """Encoder–decoder transformer with T5 v1.0's choices (see the module docstring).

    Shapes: ``forward(src, tgt_in)``: src (B, S), tgt_in (B, T) int64 -> logits
    (B, T, vocab_size); logits[:, t] predicts target token t (tgt_in is the target
    shifted right, :func:`~transformer_book.decoder.shift_right` with ``pad_id``).
    Source positions holding ``pad_id`` are masked.
    Raffel et al. (2020).
    """

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)  # shared by all three
        self.encoder_bias = T5RelativeBias(
            c.n_heads, c.num_buckets, c.max_distance, bidirectional=True
        )
        sizes = (c.n_layers, c.d_model, c.n_heads, c.d_ff)
        options = dict(
            dropout=c.dropout,
            norm_first=True,  # pre-norm, and a final norm after the last block
            activation=F.relu,
            layer_norm_eps=c.layer_norm_eps,
            norm="rms",
            bias=False,
            scale=1.0,
        )
        self.encoder = Encoder(*sizes, **options)
        self.decoder_bias = T5RelativeBias(
            c.n_heads, c.num_buckets, c.max_distance, bidirectional=False
        )
        self.decoder = Decoder(*sizes, **options)  # its final norm too
        self.dropout = nn.Dropout(c.dropout)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """T5's initialisation (Mesh TensorFlow's, as in Hugging Face's T5): each matrix
        normal with std 1/√fan_in, W_Q with a further 1/√head_dim that replaces the
        1/√d_k of the scores, the embedding with std 1, every norm's γ = 1."""
        c = self.config
        nn.init.normal_(self.tok_emb.weight, std=1.0)
        for bias in (self.encoder_bias, self.decoder_bias):
            nn.init.normal_(bias.embedding.weight, std=c.d_model**-0.5)
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                nn.init.normal_(
                    module.q_proj.weight, std=(c.d_model * c.head_dim) ** -0.5
                )
                for proj in (module.k_proj, module.v_proj, module.o_proj):
                    nn.init.normal_(proj.weight, std=c.d_model**-0.5)
            elif isinstance(module, FeedForward):
                nn.init.normal_(module.up_proj.weight, std=c.d_model**-0.5)
                nn.init.normal_(module.down_proj.weight, std=c.d_ff**-0.5)
            elif isinstance(module, RMSNorm):
                nn.init.ones_(module.weight)

    def _check_ids(self, name: str, ids: Tensor) -> None:
        if ids.dim() != 2 or ids.shape[1] < 1 or ids.dtype.is_floating_point:
            raise ValueError(
                f"{name} must be integer token ids of shape (B, T) with T >= 1, got "
                f"shape {tuple(ids.shape)} dtype {ids.dtype}"
            )

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder's output and the source's padding mask.

        Shapes: src (B, S) -> memory (B, S, d_model), mask (B, 1, 1, S), True = a token.
        """
        self._check_ids("src", src)
        mask = (src != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        S = src.shape[1]
        bias = self.encoder_bias(S, S)  # (1, H, S, S), the same for every layer
        x = self.dropout(self.tok_emb(src))  # (B, S, d_model)
        return self.dropout(self.encoder(x, mask=mask, bias=bias)), mask

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        memory_mask: Tensor,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Logits for every target position; with ``cache`` (one
        :class:`~transformer_book.kv_cache.DecoderCache` per layer) ``tgt_in`` holds only
        the tokens after the cached ones. Shapes: tgt_in (B, T), memory (B, S, d),
        memory_mask (B, 1, 1, S) -> (B, T, vocab_size)."""
        self._check_ids("tgt_in", tgt_in)
        T = tgt_in.shape[1]
        past = 0 if cache is None else cache[0].seq_len  # positions already cached
        self_mask = masks.causal_mask(T, past + T, device=tgt_in.device)  # (T, past+T)
        bias = self.decoder_bias(T, past + T)  # (1, H, T, past + T), every layer's
        x = self.dropout(self.tok_emb(tgt_in))  # (B, T, d_model)
        x = self.decoder(x, memory, self_mask, memory_mask, bias, cache=cache)
        x = self.dropout(x) * self.config.d_model**-0.5  # the tied output's rescaling
        return x @ self.tok_emb.weight.T  # (B, T, vocab_size)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    def loss(self, src: Tensor, tgt: Tensor, forward: Callable | None = None) -> Tensor:
        """Teacher-forced cross-entropy per target token: the decoder reads ``tgt``
        shifted right behind the start token (the pad id); positions holding
        ``pad_id`` are skipped. ``forward``: what computes the logits instead of this
        model's own call (the model wrapped for training, e.g. by
        ``DistributedDataParallel``, which must see the forward pass).
        Shapes: src (B, S), tgt (B, T) -> ()."""
        self._check_ids("tgt", tgt)
        forward = self if forward is None else forward
        logits = forward(src, shift_right(tgt, self.config.pad_id))  # (B, T, V)
        return F.cross_entropy(
            logits.flatten(0, 1), tgt.flatten(), ignore_index=self.config.pad_id
        )

    @torch.no_grad()
    def generate(
        self, src: Tensor, max_new_tokens: int, use_cache: bool = True
    ) -> Tensor:
        """Greedy decoding (:func:`~transformer_book.decoder.greedy_decode`) from the
        start token until every row has written ``eos_id`` or ``max_new_tokens`` tokens;
        ``use_cache`` as in :meth:`~transformer_book.seq2seq.Seq2Seq.greedy_decode`.
        Shapes: src (B, S) -> (B, ≤ max_new_tokens), padded with ``pad_id`` after a
        row's eos. Call ``model.eval()`` first."""
        c = self.config
        memory, mask = self.encode(src)
        start = torch.full((src.shape[0], 1), c.pad_id, device=src.device)  # T5's start
        cache = new_decoder_cache(c.n_layers) if use_cache else None
        return greedy_decode(
            lambda ids, cache: self.decode(ids, memory, mask, cache),
            start,
            max_new_tokens,
            c.eos_id,
            c.pad_id,
            cache,
        )


@torch.no_grad()
def target_predictions(
    model: T5,
    batches: Iterable[tuple[Tensor, Tensor]],
    scored: Callable[[Tensor], Tensor],
) -> tuple[Tensor, Tensor, Tensor]:
    """Teacher-forced predictions of ``model`` on the target tokens that ``scored(tgt)``
    selects (a bool mask), over all ``batches`` of (src, tgt), in eval mode (restored
    after): the true token, the model's argmax and its log-probability of the true
    token, one entry per selected token in reading order (batch by batch, row by row).
    Chapter 10 looks at particular gaps of span corruption this way.

    Shapes: src (B, S), tgt (B, T); scored(tgt) (B, T) bool -> three (n,) tensors on
    the CPU (int64, int64, float32).
    """
    was_training, device = model.training, model.tok_emb.weight.device
    model.eval()
    truth, argmax, logp_true = [], [], []
    for src, tgt in batches:
        src, tgt = src.to(device), tgt.to(device)
        keep = scored(tgt)  # (B, T)
        logp = model(src, shift_right(tgt, model.config.pad_id)).log_softmax(-1)
        truth.append(tgt[keep].cpu())
        argmax.append(logp.argmax(-1)[keep].cpu())
        logp_true.append(logp.gather(-1, tgt[..., None])[..., 0][keep].cpu())
    model.train(was_training)
    if not truth:  # no batches
        none = torch.zeros(0, dtype=torch.long)
        return none, none.clone(), torch.zeros(0)
    return torch.cat(truth), torch.cat(argmax), torch.cat(logp_true)


def target_scores(
    model: T5,
    batches: Iterable[tuple[Tensor, Tensor]],
    scored: Callable[[Tensor], Tensor],
) -> tuple[float, float]:
    """Teacher-forced accuracy and cross-entropy (nats per token) of ``model`` on the
    target tokens that ``scored(tgt)`` selects (a bool mask), over all ``batches`` of
    (src, tgt), in eval mode (restored after): :func:`target_predictions`, averaged.
    Chapter 10 scores the hidden words of span corruption this way, without sentinels
    or the end token.

    Shapes: src (B, S), tgt (B, T); scored(tgt) (B, T) bool -> two floats.
    """
    truth, argmax, logp_true = target_predictions(model, batches, scored)
    if len(truth) == 0:
        raise ValueError("scored() selected no target token in batches")
    hits = float((argmax == truth).sum())
    return hits / len(truth), -float(logp_true.double().sum()) / len(truth)


@torch.no_grad()
def step_shares(
    model: nn.Module, lr: float, multiples: dict[str, float], names: Iterable[str]
) -> dict[str, tuple[float, float, float]]:
    """How far one optimiser step moves each named parameter, against its size: its
    scale (root mean square) and a step of ``lr`` (AdamW's, about equal for every
    weight) and of ``lr`` times its entry in ``multiples`` (1 where it has none) as
    fractions of that scale. Chapter 10 reads a fresh T5's initial scales this way.
    Returns {name: (scale, lr / scale, lr * multiple / scale)}."""
    shares = {}
    for name in names:
        scale = model.get_parameter(name).detach().pow(2).mean().sqrt().item()
        shares[name] = (scale, lr / scale, lr * multiples.get(name, 1.0) / scale)
    return shares


@torch.no_grad()
def load_hf_t5(model: T5, hf_model: nn.Module) -> T5:
    """Copy a Hugging Face ``T5ForConditionalGeneration`` (v1.0 layout: ReLU, tied
    embeddings) into ``model`` (in place) and return it.

    Their ``q, k, v, o``, ``wi, wo``, ``layer_norm``, ``EncDecAttention`` and the
    ``relative_attention_bias`` of each stack's first layer become ``q_proj, k_proj,
    v_proj, o_proj``, ``ff.up_proj, ff.down_proj``, ``norm1..3``, ``cross_attn`` and
    ``encoder_bias`` / ``decoder_bias``. Raises ValueError when the two are not built alike.
    """
    hc, c = hf_model.config, model.config
    theirs = dict(
        vocab_size=hc.vocab_size,
        d_model=hc.d_model,
        n_layers=(hc.num_layers, hc.num_decoder_layers),
        n_heads=hc.num_heads,
        head_dim=hc.d_kv,
        d_ff=hc.d_ff,
        num_buckets=hc.relative_attention_num_buckets,
        max_distance=hc.relative_attention_max_distance,
        layer_norm_eps=hc.layer_norm_epsilon,
        feed_forward="relu" if hc.feed_forward_proj == "relu" else hc.feed_forward_proj,
        tied_output=bool(getattr(hc, "scale_decoder_outputs", True)),
    )
    ours = dict(
        vocab_size=c.vocab_size,
        d_model=c.d_model,
        n_layers=(c.n_layers, c.n_layers),
        n_heads=c.n_heads,
        head_dim=c.head_dim,
        d_ff=c.d_ff,
        num_buckets=c.num_buckets,
        max_distance=c.max_distance,
        layer_norm_eps=c.layer_norm_eps,
        feed_forward="relu",
        tied_output=True,
    )
    if theirs != ours:
        diff = {k: (theirs[k], ours[k]) for k in ours if theirs[k] != ours[k]}
        raise ValueError(
            f"the models are built differently, (theirs, ours) per field: {diff}"
        )

    def attn(mine: MultiHeadAttention, ref: nn.Module) -> None:
        for name in ("q", "k", "v", "o"):
            getattr(mine, f"{name}_proj").weight.copy_(getattr(ref, name).weight)

    def ff(mine: FeedForward, ref: nn.Module) -> None:
        mine.up_proj.weight.copy_(ref.DenseReluDense.wi.weight)
        mine.down_proj.weight.copy_(ref.DenseReluDense.wo.weight)

    model.tok_emb.weight.copy_(hf_model.shared.weight)
    enc, dec = hf_model.encoder, hf_model.decoder
    first = enc.block[0].layer[0].SelfAttention.relative_attention_bias
    model.encoder_bias.embedding.weight.copy_(first.weight)
    first = dec.block[0].layer[0].SelfAttention.relative_attention_bias
    model.decoder_bias.embedding.weight.copy_(first.weight)
    for mine, ref in zip(model.encoder.layers, enc.block):
        attn(mine.attn, ref.layer[0].SelfAttention)
        mine.norm1.weight.copy_(ref.layer[0].layer_norm.weight)
        ff(mine.ff, ref.layer[1])
        mine.norm2.weight.copy_(ref.layer[1].layer_norm.weight)
    model.encoder.final_norm.weight.copy_(enc.final_layer_norm.weight)
    for mine, ref in zip(model.decoder.layers, dec.block):
        attn(mine.self_attn, ref.layer[0].SelfAttention)
        mine.norm1.weight.copy_(ref.layer[0].layer_norm.weight)
        attn(mine.cross_attn, ref.layer[1].EncDecAttention)
        mine.norm2.weight.copy_(ref.layer[1].layer_norm.weight)
        ff(mine.ff, ref.layer[2])
        mine.norm3.weight.copy_(ref.layer[2].layer_norm.weight)
    model.decoder.final_norm.weight.copy_(dec.final_layer_norm.weight)
    return model
