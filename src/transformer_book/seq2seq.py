"""The encoder-decoder transformer: read a source sequence, write a target sequence
(chapter 07).

The model of Vaswani et al. (2017), section 3, at small scale:

    memory = Encoder(embed(source) + positions)                        (B, S, d_model)
    logits = head(Decoder(embed(target so far) + positions, memory))   (B, T, vocab)

- One vocabulary and one embedding table serve the source and the target, and the
  output head reuses that table (``tie_embeddings``), as in the paper's section 3.4;
  embeddings are scaled by √d_model and the fixed sinusoidal positions added.
- Training uses *teacher forcing* (:meth:`Seq2Seq.loss`): the decoder reads the gold
  target shifted right by one (``<bos> y1 … y_{T-1}``) and predicts ``y1 … y_T <eos>`` at
  every position at once; the causal mask keeps position t from reading the answer.
- Inference has no gold target: :meth:`Seq2Seq.greedy_decode` starts from ``<bos>``,
  appends the most likely next token, and repeats until every sequence has written
  ``<eos>`` (or a length limit); a :class:`~transformer_book.kv_cache.DecoderCache` per
  layer lets each step read only the newest token.

:class:`PairBatches` serves (source, target) pairs to the training loop, grouped by
source length; :func:`greedy_decode_all` writes the targets of a list of sources in
batches of similar length (:func:`greedy_write`: words in, tokens out), and
:func:`teacher_forced_scores` measures a model given the gold prefixes.

Chapter 07's experiment around the model, ATIS queries written as semantic frames,
lives in :mod:`transformer_book.frame_writing`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .batching import LengthBatches, pad_sequences
from .blocks import Encoder
from .decoder import Decoder, greedy_decode, shift_right
from .kv_cache import DecoderCache, new_decoder_cache
from .masks import causal_mask, padding_mask_from_ids
from .positions import sinusoidal_encoding
from .vocab import Vocab

__all__ = [
    "Seq2SeqConfig",
    "Seq2Seq",
    "PairBatches",
    "greedy_decode_all",
    "greedy_write",
    "teacher_forced_scores",
]


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes and special token ids of an encoder-decoder model.

    ``max_len`` bounds the length of a source and of a decoder input (the table of
    sinusoidal positions has that many rows). ``causal=False`` removes the decoder's
    causal mask: an experiment (chapter 07's "why a mask"), not a model to use, since
    teacher forcing then shows position t the token it must predict, at t + 1.
    """

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    dropout: float = 0.1
    norm_first: bool = True
    max_len: int = 128
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    tie_embeddings: bool = True
    causal: bool = True

    def __post_init__(self) -> None:
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in ids.items():
            if not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name} must lie in [0, vocab_size={self.vocab_size}), got {value}"
                )
        if len(set(ids.values())) != 3:
            raise ValueError(f"pad_id, bos_id and eos_id must differ, got {ids}")
        if self.max_len < 2:
            raise ValueError(f"max_len must be at least 2, got {self.max_len}")


class Seq2Seq(nn.Module):
    """Embeddings, positions, :class:`~transformer_book.blocks.Encoder`,
    :class:`~transformer_book.decoder.Decoder` and a linear head over the vocabulary.

    Shapes: ``forward(src, tgt_in)``: src (B, S), tgt_in (B, T) integer ids padded with
    ``cfg.pad_id`` -> logits (B, T, vocab_size). Vaswani et al. (2017).
    """

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)  # × √d: unit scale
        with torch.no_grad():
            self.embed.weight[cfg.pad_id].zero_()
        self.register_buffer(
            "positions", sinusoidal_encoding(cfg.max_len, cfg.d_model), persistent=False
        )  # (max_len, d_model)
        sizes = (cfg.d_model, cfg.n_heads, cfg.d_ff)
        options = dict(dropout=cfg.dropout, norm_first=cfg.norm_first)
        self.encoder = Encoder(cfg.n_encoder_layers, *sizes, **options)
        self.decoder = Decoder(cfg.n_decoder_layers, *sizes, **options)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight  # one (vocab, d_model) table
        self.dropout = nn.Dropout(cfg.dropout)

    def _check_ids(self, name: str, ids: Tensor) -> None:
        if ids.dim() != 2 or ids.dtype.is_floating_point:
            raise ValueError(
                f"{name} must be an integer tensor of shape (B, T), "
                f"got {ids.dtype} {tuple(ids.shape)}"
            )
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(
                f"{name} has {ids.shape[1]} positions, more than max_len="
                f"{self.cfg.max_len}; raise max_len in the config"
            )

    def _embed(self, ids: Tensor, offset: int = 0) -> Tensor:
        """Token embedding × √d_model + sinusoidal position (the ids sit at positions
        ``offset`` …). Shapes: (B, T) -> (B, T, D)."""
        x = self.embed(ids) * math.sqrt(self.cfg.d_model)  # (B, T, D)
        return self.dropout(x + self.positions[offset : offset + ids.shape[1]])

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Run the encoder. Shapes: src (B, S) -> memory (B, S, D) and the source's
        padding mask (B, 1, 1, S), which the decoder's cross-attention needs too."""
        self._check_ids("src", src)
        memory_mask = padding_mask_from_ids(src, self.cfg.pad_id)  # (B, 1, 1, S)
        return self.encoder(self._embed(src), mask=memory_mask), memory_mask

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        memory_mask: Tensor,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Run the decoder and the head. Shapes: tgt_in (B, T), memory (B, S, D),
        memory_mask (B, 1, 1, S) -> logits (B, T, vocab_size). With ``cache`` (one
        :class:`~transformer_book.kv_cache.DecoderCache` per decoder layer) ``tgt_in``
        holds only the tokens after the cached ones.

        The causal mask is all the target needs: with padding on the right, a padded
        position lies in the future of every real one, so it is hidden already.
        """
        h = self._decode_hidden(tgt_in, memory, memory_mask, cache)  # (B, T, D)
        return self.head(h)  # (B, T, V)

    def _decode_hidden(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        memory_mask: Tensor,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """The decoder's output before the head; with ``cache``, ``tgt_in`` holds only
        the tokens after the cached ones. Shapes: -> (B, T, d_model)."""
        self._check_ids("tgt_in", tgt_in)
        past = 0 if cache is None else cache[0].seq_len  # positions already cached
        T = tgt_in.shape[1]
        self_mask = (  # (T, past + T), or None: every position sees every other
            causal_mask(T, past + T, device=tgt_in.device) if self.cfg.causal else None
        )
        x = self._embed(tgt_in, offset=past)  # (B, T, D)
        return self.decoder(x, memory, self_mask, memory_mask, cache=cache)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, memory_mask = self.encode(src)
        return self.decode(tgt_in, memory, memory_mask)  # (B, T, vocab_size)

    def loss(self, src: Tensor, tgt: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Teacher-forced cross-entropy per target token (padding ignored).

        ``tgt`` holds the targets ending in ``<eos>``, right-padded with ``pad_id``; the
        decoder reads :func:`shift_right` of it. Shapes: src (B, S), tgt (B, T) -> ().
        """
        self._check_ids("tgt", tgt)
        memory, memory_mask = self.encode(src)
        tgt_in = shift_right(tgt, self.cfg.bos_id)  # (B, T)
        h = self._decode_hidden(tgt_in, memory, memory_mask)  # (B, T, D)
        real = tgt != self.cfg.pad_id  # (B, T): the head skips the padded positions
        return F.cross_entropy(
            self.head(h[real]),  # (N, V), N real target tokens
            tgt[real],  # (N,)
            label_smoothing=label_smoothing,
        )

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, max_new_tokens: int | None = None, use_cache: bool = True
    ) -> Tensor:
        """Write the target one token at a time, each the argmax given the ones before
        (:func:`~transformer_book.decoder.greedy_decode`).

        Starts from ``<bos>``; stops when every sequence has written ``<eos>`` or after
        ``max_new_tokens`` (default ``max_len - 1``). Call ``model.eval()`` first (dropout
        would make the choices random). ``use_cache=True`` keeps each decoder layer's
        keys and values (:class:`~transformer_book.kv_cache.DecoderCache`), so a step
        reads only the newest token; ``False`` reruns the decoder on the whole prefix.
        Both write the same tokens, for a causal decoder; without the causal mask
        (``cfg.causal=False``) every position changes when a token is appended, so a
        cache would be wrong and ``use_cache`` must be False. Shapes: src (B, S) -> (B, L) with
        L <= max_new_tokens, ``<bos>`` not included; positions after a sequence's
        ``<eos>`` hold ``pad_id``.
        """
        cfg = self.cfg
        limit = cfg.max_len - 1 if max_new_tokens is None else max_new_tokens
        if not 1 <= limit <= cfg.max_len - 1:
            raise ValueError(
                f"max_new_tokens must lie in [1, max_len - 1 = {cfg.max_len - 1}], "
                f"got {max_new_tokens}"
            )
        if use_cache and not cfg.causal:
            raise ValueError(
                "use_cache=True needs the causal mask: without it (cfg.causal=False) "
                "earlier positions change as tokens are appended; pass use_cache=False"
            )
        memory, memory_mask = self.encode(src)
        start = src.new_full((src.shape[0], 1), cfg.bos_id)  # (B, 1)
        cache = new_decoder_cache(len(self.decoder.layers)) if use_cache else None

        def step(ids: Tensor, cache: list[DecoderCache] | None) -> Tensor:
            h = self._decode_hidden(ids, memory, memory_mask, cache)  # (B, t, D)
            return self.head(h[:, -1:])  # (B, 1, V): only the next token's scores

        return greedy_decode(
            step,
            start,
            limit,
            cfg.eos_id,
            cfg.pad_id,
            cache,
        )

    def cut_at_eos(self, ids: Tensor) -> list[list[int]]:
        """The tokens of each row before its first ``<eos>`` (and without padding).

        Shapes: (B, L) -> B lists of ints.
        """
        out = []
        for row in ids.tolist():
            if self.cfg.eos_id in row:
                row = row[: row.index(self.cfg.eos_id)]
            out.append([i for i in row if i != self.cfg.pad_id])
        return out

    @torch.no_grad()
    def cross_attention_weights(self, src: Tensor, tgt_in: Tensor) -> list[Tensor]:
        """Every decoder block's cross-attention weights: how much each target position
        reads from each source position. Shapes: -> n_decoder_layers × (B, H, T, S)."""
        memory, memory_mask = self.encode(src)
        self._check_ids("tgt_in", tgt_in)
        T = tgt_in.shape[1]
        self_mask = causal_mask(T, device=tgt_in.device) if self.cfg.causal else None
        return self.decoder.cross_attention_weights(
            self._embed(tgt_in), memory, self_mask, memory_mask
        )


class PairBatches:
    """Training batches (src, tgt) of (source, target) id sequences, grouped by source
    length (:class:`~transformer_book.batching.LengthBatches`), each padded with
    ``pad_id`` to its longest source and its longest target; one shuffled epoch per
    iteration (``training.train`` cycles it). Batches are CPU tensors; the training
    loop moves them. The targets end in ``<eos>``, ready for :meth:`Seq2Seq.loss`.

    Shapes: N pairs -> src (b, S), tgt (b, T), b <= batch_size.
    """

    def __init__(
        self,
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        batch_size: int,
        pad_id: int,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if len(sources) != len(targets):
            raise ValueError(
                f"sources and targets must pair up, got {len(sources)} sources and "
                f"{len(targets)} targets"
            )
        self.src, self.src_len = pad_sequences(sources, pad_id)  # (N, S_max), (N,)
        self.tgt, self.tgt_len = pad_sequences(targets, pad_id)  # (N, T_max), (N,)
        self.order = LengthBatches(self.src_len, batch_size, seed=seed, shuffle=shuffle)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        for idx in self.order:  # (b,)
            S, T = int(self.src_len[idx].max()), int(self.tgt_len[idx].max())
            yield self.src[idx, :S], self.tgt[idx, :T]  # (b, S), (b, T)


@torch.no_grad()
def greedy_decode_all(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    batch_size: int = 64,
    limit: Callable[[int], int] | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
    """:meth:`Seq2Seq.greedy_decode` of every source, in batches of similar length, on
    the model's device and in eval mode (restored after); each output cut at its
    ``<eos>`` (:meth:`Seq2Seq.cut_at_eos`), in the sources' order.

    ``limit(S)`` bounds the tokens written for a batch whose longest source has S
    tokens (never more than ``max_len - 1``, the default); a batch decodes until its
    last row ends, so small batches wait less for stragglers. Shapes: N sources -> N
    lists of ids.
    """
    if len(sources) == 0:
        raise ValueError("sources is empty: nothing to decode")
    ids, lengths = pad_sequences(sources, model.cfg.pad_id)  # (N, S_max), (N,)
    n_max = model.cfg.max_len - 1
    device, was_training = next(model.parameters()).device, model.training
    model.eval()
    out: list[list[int]] = [[] for _ in sources]
    for idx in LengthBatches(lengths, batch_size, shuffle=False):
        S = int(lengths[idx].max())
        n = n_max if limit is None else min(limit(S), n_max)
        written = model.greedy_decode(ids[idx, :S].to(device), n, use_cache)  # (b, L)
        for i, toks in zip(idx.tolist(), model.cut_at_eos(written.cpu())):
            out[i] = toks
    model.train(was_training)
    return out


def greedy_write(
    model: Seq2Seq,
    vocab: Vocab,
    sentences: Sequence[Sequence[str]],
    limit: Callable[[int], int] | None = None,
    batch_size: int = 64,
    use_cache: bool | None = None,
) -> list[list[str]]:
    """:func:`greedy_decode_all` from words to tokens: each sentence encoded with
    ``vocab`` (unknown words become ``<unk>``), each output decoded back to tokens.

    ``use_cache`` defaults to what the model allows (``cfg.causal``). Shapes: N
    sentences -> N token lists, in the sentences' order.
    """
    cache = model.cfg.causal if use_cache is None else use_cache
    sources = [vocab.encode(s) for s in sentences]
    written = greedy_decode_all(model, sources, batch_size, limit, cache)
    return [vocab.decode(ids) for ids in written]


@torch.no_grad()
def teacher_forced_scores(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int = 256,
) -> tuple[float, float]:
    """The model given the gold prefixes (teacher forcing), as in training but in eval
    mode (restored after): the cross-entropy per real target token (nats), and the
    share of targets whose every token is the model's argmax.

    A target of the second kind is what greedy decoding writes, token for token: its
    first mistake would be the first position where the argmax given the gold prefix
    is wrong. The targets end in ``<eos>``, as for :meth:`Seq2Seq.loss`. Shapes: N
    pairs of id lists -> two floats.
    """
    if len(sources) == 0:
        raise ValueError("sources is empty: nothing to score")
    cfg = model.cfg
    device, was_training = next(model.parameters()).device, model.training
    model.eval()
    nats, n_tokens, all_right = 0.0, 0, 0
    pairs = PairBatches(sources, targets, batch_size, cfg.pad_id, shuffle=False)
    for src, tgt in pairs:
        src, tgt = src.to(device), tgt.to(device)  # (b, S), (b, T)
        logits = model(src, shift_right(tgt, cfg.bos_id))  # (b, T, V)
        real = tgt != cfg.pad_id  # (b, T)
        nats += F.cross_entropy(logits[real], tgt[real], reduction="sum").item()
        n_tokens += int(real.sum())
        right = (logits.argmax(-1) == tgt) | ~real  # (b, T)
        all_right += int(right.all(-1).sum())
    model.train(was_training)
    return nats / n_tokens, all_right / len(sources)
