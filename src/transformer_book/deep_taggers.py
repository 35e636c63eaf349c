"""Deep transformer taggers (chapter 06): post-norm against pre-norm, LayerNorm against
RMSNorm, on ATIS slot filling (Hemphill et al., 1990).

:func:`deep_tagger` builds chapter 05's tagger (:class:`classifiers.WordTagger`) with a
deep stack of a chosen norm placement and kind. :func:`tagging_task` numbers the words
and tags of a training and a dev split and pads them into a :class:`TaggingTask`, which
hands out training batches, dev batches, a fixed probe batch and the baseline every dev
loss is read against (the tag frequencies alone, :mod:`transformer_book.baselines`).
The chapter's runs are read back by :mod:`transformer_book.deep_tagger_readings`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from . import baselines, batching, blocks
from .classifiers import ClassifierConfig, WordTagger, mean_token_loss
from .data import SlotIntentSplit
from .tagging import IGNORE
from .vocab import Vocab

__all__ = ["deep_tagger", "TaggingTask", "tagging_task"]


def deep_tagger(
    vocab_size: int,
    n_classes: int,
    n_layers: int,
    norm_first: bool,
    norm: str = "layer",
    seed: int = 0,
    *,
    d_model: int = 64,
    n_heads: int = 4,
    d_ff: int = 256,
    pad_id: int = 0,
) -> WordTagger:
    """A :class:`WordTagger` (learned positions, ``max_len`` 64, no dropout) whose
    encoder is a fresh ``n_layers``-block :class:`transformer_book.blocks.Encoder` with
    the norm placement ``norm_first`` and kind ``norm`` ("layer" or "rms"), every
    weight drawn after ``torch.manual_seed(seed)`` (chapter 06). ``model.cfg.n_layers``
    stays 1: the config builds a one-block stack that is then replaced.

    Shapes: ids (B, T) -> logits (B, T, n_classes)."""
    torch.manual_seed(seed)
    cfg = ClassifierConfig(
        vocab_size,
        n_classes,
        max_len=64,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=d_ff,
        n_layers=1,  # replaced below
        dropout=0.0,
        pad_id=pad_id,
    )
    model = WordTagger(cfg)
    model.body.encoder = blocks.Encoder(
        n_layers, d_model, n_heads, d_ff, norm_first=norm_first, norm=norm
    )  # a fresh stack; the rest of the tagger is unchanged
    return model


# --- the task -----------------------------------------------------------------------


@dataclass(frozen=True)
class TaggingTask:
    """A slot-filling task as padded tensors: word ids and tag ids of a training and a
    dev split, numbered by vocabularies of the training split.

    Dev words never seen in training are ``<unk>``; dev tags never seen in training
    get :data:`~transformer_book.tagging.IGNORE` (``unseen`` counts them), as does
    every padding position, so the loss skips them. Shapes: ``*_ids`` and ``*_tags``
    (N, T_max), ``*_lengths`` (N,)."""

    words: Vocab
    tags: Vocab
    train_ids: Tensor
    train_lengths: Tensor
    train_tags: Tensor
    dev_ids: Tensor
    dev_lengths: Tensor
    dev_tags: Tensor
    unseen: int

    def train_batches(self, batch_size: int, seed: int) -> batching.PaddedBatches:
        """Shuffled training batches (ids, tags) of queries of similar length, in an
        order set by ``seed``. Shapes: each (b, T), T the batch's longest query."""
        return batching.PaddedBatches(
            self.train_ids, self.train_lengths, self.train_tags, batch_size, seed
        )

    def dev_batches(self, batch_size: int = 128) -> batching.PaddedBatches:
        """Every dev query once, in a fixed order. Shapes: each (b, T)."""
        return batching.PaddedBatches(
            self.dev_ids, self.dev_lengths, self.dev_tags, batch_size, shuffle=False
        )

    def dev_loss(self, model: nn.Module) -> float:
        """``model``'s mean dev loss per scored token (every scored dev token counts
        once, :func:`transformer_book.classifiers.mean_token_loss`); ``inf`` when
        training diverged and the loss is not a number."""
        loss = mean_token_loss(model, self.dev_batches())
        return loss if math.isfinite(loss) else math.inf

    def probe(self, n: int = 64) -> tuple[Tensor, Tensor]:
        """The first ``n`` training queries, cut to the longest of them: one fixed
        batch to look inside a model with. Shapes: -> ids (n, T), tags (n, T)."""
        if not 1 <= n <= len(self.train_lengths):
            raise ValueError(
                f"n must be in 1..{len(self.train_lengths)} (the training queries), "
                f"got {n}"
            )
        T = int(self.train_lengths[:n].max())
        return self.train_ids[:n, :T], self.train_tags[:n, :T]

    def prior_loss(self) -> float:
        """Dev loss, in nats per scored token, of predicting every token from the
        training tag frequencies (add-one smoothed): what a model scores without
        reading the words."""
        log_p = baselines.unigram_log_probs(
            self.train_tags[self.train_tags != IGNORE], len(self.tags)
        )
        return baselines.unigram_loss(log_p, self.dev_tags[self.dev_tags != IGNORE])


def tagging_task(train: SlotIntentSplit, dev: SlotIntentSplit) -> TaggingTask:
    """Number and pad a training and a dev split (words and one tag per word, as
    :func:`transformer_book.data.load_atis` returns them)."""
    for name, split in (("train", train), ("dev", dev)):
        lengths = [(len(w), len(t)) for w, t in zip(split.sentences, split.tags)]
        if not lengths or len(split.sentences) != len(split.tags):
            raise ValueError(
                f"{name} must hold as many tag lists as sentences, at least one, got "
                f"{len(split.sentences)} sentences and {len(split.tags)} tag lists"
            )
        bad = next((i for i, (a, b) in enumerate(lengths) if a != b), None)
        if bad is not None:
            raise ValueError(
                f"{name} sentence {bad} has {lengths[bad][0]} words but "
                f"{lengths[bad][1]} tags; expected one tag per word"
            )
    words = Vocab.from_corpus(train.sentences)
    tags = Vocab.from_corpus(train.tags, pad_token=None, unk_token=None)
    train_ids, train_lengths = words.encode_batch(train.sentences)  # (N, T_max), (N,)
    train_tags, _ = tags.encode_batch(train.tags, pad_value=IGNORE)  # (N, T_max)
    dev_ids, dev_lengths = words.encode_batch(dev.sentences)  # unseen words -> <unk>
    dev_tags, _ = batching.pad_sequences(
        [[tags.stoi.get(t, IGNORE) for t in s] for s in dev.tags], IGNORE
    )  # (N_dev, T_max): tags unseen in training -> IGNORE
    unseen = sum(t not in tags.stoi for s in dev.tags for t in s)
    return TaggingTask(
        words, tags, train_ids, train_lengths, train_tags,
        dev_ids, dev_lengths, dev_tags, unseen,
    )  # fmt: skip
