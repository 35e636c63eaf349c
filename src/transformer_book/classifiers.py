"""Putting the encoder to work: a label for every token, or one label for the whole
sentence (chapter 05).

Both models embed the words, tell attention where each word is, run
:class:`transformer_book.blocks.Encoder` with a padding mask, and put a linear layer on
top. Positions (chapter 04) are either learned absolute vectors added to the input
(``positions="learned"``, as in BERT) or T5's learned relative bias added to the
attention scores (``positions="relative"``, Raffel et al., 2020), which lets a head look
at "the word to my left" with the same few numbers at every position.

- :class:`WordTagger` applies the linear layer to every contextual embedding (slot filling:
  one BIO tag per word; chapter 12's pre-trained counterpart is
  ``bert_heads.TokenClassifier``). Its per-token choices can break the BIO rules (an ``I-x`` that
  continues nothing); :func:`predict_tags` can decode with :func:`bio.bio_viterbi` instead,
  the best sequence that keeps them.
- :class:`SentenceClassifier` first pools the sentence into one vector, either with a learned
  ``[CLS]`` vector prepended to the input and read back at the output (``pooling="cls"``, as in
  BERT, Devlin et al., 2019) or with the mean of the contextual embeddings over the real,
  non-padding tokens (``pooling="mean"``).

Training and scoring them: :func:`token_loss` and :func:`sentence_loss` (cross-entropy,
padding targets -100 skipped), :func:`mean_token_loss` over evaluation batches,
:func:`predict_tags` and :func:`predict_classes` (batched by length, answers in the input
order), and :func:`fit`, one ``training.train`` run scored on a dev split every few steps.

Around them, the plumbing chapters 05 and 07 share: :class:`SlotIntentFeatures` (the
vocabularies, encoded training split, batches and trained models of a slot-and-intent
split), :class:`LookupTagger` (the word-by-word baseline) and
:func:`cls_attention_shares` (where a [CLS] model's [CLS] position reads); and the
verdicts of chapter 05's [CLS]-against-mean comparison over seeds,
:func:`pooling_verdict`, :func:`paired_differences` and :func:`pooling_conclusion`.
:func:`deep_tagger` builds chapter 06's tagger with a deep stack of a chosen norm.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .baselines import majority_class
from .batching import PaddedBatches, sorted_batches
from .bio import bio_viterbi
from .blocks import Encoder
from .data import SlotIntentSplit
from .masks import masked_mean
from .positions import T5RelativeBias
from .report import compare_seeds, paired, t_quantile
from .training import train
from .vocab import Vocab

__all__ = [
    "ClassifierConfig",
    "WordTagger",
    "SentenceClassifier",
    "token_loss",
    "sentence_loss",
    "mean_token_loss",
    "predict_tags",
    "predict_classes",
    "fit",
    "deep_tagger",
    "POOLINGS",
    "POSITIONS",
]

POOLINGS = ("cls", "mean")
POSITIONS = ("learned", "relative")


@dataclass(frozen=True)
class ClassifierConfig:
    """Sizes of a token or sentence classifier.

    ``max_len`` bounds the input (the [CLS] position included) only for ``positions="learned"``,
    which has one vector per position; the relative bias has no such limit.
    """

    vocab_size: int
    n_classes: int
    max_len: int = 64
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 1
    dropout: float = 0.1
    pad_id: int = 0
    # "learned" (absolute, added to the input) or "relative" (T5 bias on the scores)
    positions: str = "learned"
    pooling: str = "cls"  # SentenceClassifier only: "cls" or "mean"

    def __post_init__(self) -> None:
        if self.positions not in POSITIONS:
            raise ValueError(
                f"positions must be one of {POSITIONS}, got {self.positions!r}"
            )
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id must lie in [0, vocab_size={self.vocab_size}), got {self.pad_id}"
            )


class _EncoderBody(nn.Module):
    """Token embedding + positions (absolute or relative) + encoder stack, with a padding mask."""

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        if cfg.positions == "learned":
            # Learned absolute positions (chapter 04) as a plain nn.Embedding; a position >= max_len
            # has no vector, hence the ValueError in `check_ids`.
            self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        else:
            # One learned scalar per head and distance bucket, shared by all layers as in T5.
            self.rel_bias = T5RelativeBias(cfg.n_heads)
        self.encoder = Encoder(
            cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=cfg.dropout
        )
        self.emb_dropout = nn.Dropout(cfg.dropout)

    def check_ids(self, ids: Tensor, extra: int = 0) -> None:
        if ids.dim() != 2 or ids.dtype.is_floating_point:
            raise ValueError(
                f"ids must be an integer tensor of shape (B, T), got {ids.dtype} {tuple(ids.shape)}"
            )
        if self.cfg.positions == "learned" and ids.shape[1] + extra > self.cfg.max_len:
            raise ValueError(
                f"a sequence of {ids.shape[1]} tokens{' plus [CLS]' if extra else ''} "
                f"is longer than max_len={self.cfg.max_len}: learned positions stop "
                "there; raise max_len or truncate"
            )

    def _prepare(self, x: Tensor, keep: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Positions (added to x, or as an attention bias) and the padding mask.

        Shapes: x (B, T, D), keep (B, T) bool -> x (B, T, D), mask (B, 1, 1, T),
        bias (1, H, T, T) or None.
        """
        mask = keep[:, None, None, :]  # (B, 1, 1, T): True = may attend
        if self.cfg.positions == "learned":
            x = x + self.pos_emb(torch.arange(x.shape[1], device=x.device))  # + (T, D)
            return self.emb_dropout(x), mask, None
        return self.emb_dropout(x), mask, self.rel_bias(x.shape[1])

    def run(self, x: Tensor, keep: Tensor) -> Tensor:
        """Add positions, then encode. Shapes: x (B, T, D), keep (B, T) bool -> (B, T, D)."""
        x, mask, bias = self._prepare(x, keep)
        return self.encoder(x, mask=mask, bias=bias)

    def first_layer_attention(self, x: Tensor, keep: Tensor) -> Tensor:
        """Attention weights of the first block, as ``run`` computes them.

        Shapes: -> (B, H, T, T).
        """
        x, mask, bias = self._prepare(x, keep)
        layer = self.encoder.layers[0]
        # what that block's attention sees: x itself (post-norm) or its LayerNorm
        h = layer.norm1(x) if layer.norm_first else x
        return layer.attn(h, mask=mask, bias=bias, need_weights=True)[1]


class WordTagger(nn.Module):
    """One label per token: logits_t = W · h_t + b on every contextual embedding h_t.

    Shapes: ids (B, T) with ``cfg.pad_id`` as padding -> logits (B, T, n_classes).
    """

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.body = _EncoderBody(cfg)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)

    def contextual(self, ids: Tensor) -> Tensor:
        """The encoder's output for every token. Shapes: (B, T) -> (B, T, d_model)."""
        self.body.check_ids(ids)
        keep = ids != self.cfg.pad_id  # (B, T)
        return self.body.run(self.body.tok_emb(ids), keep)

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.contextual(ids))  # (B, T, n_classes)


class SentenceClassifier(nn.Module):
    """One label per sentence from a pooled vector: the [CLS] output or the mean over real tokens.

    Shapes: ids (B, T) with ``cfg.pad_id`` as padding -> logits (B, n_classes).
    Devlin et al. (2019) for the [CLS] token.
    """

    def __init__(self, cfg: ClassifierConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.body = _EncoderBody(cfg)
        if cfg.pooling == "cls":
            # one learned input vector, prepended to every sentence
            self.cls = nn.Parameter(torch.randn(1, 1, cfg.d_model) * 0.02)
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)

    def _inputs(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """Embedded tokens, with [CLS] prepended for cls pooling.

        Shapes: (B, T) -> x (B, T', D), keep (B, T').
        """
        self.body.check_ids(ids, extra=1 if self.cfg.pooling == "cls" else 0)
        keep = ids != self.cfg.pad_id  # (B, T)
        x = self.body.tok_emb(ids)  # (B, T, D)
        if self.cfg.pooling == "cls":
            B = ids.shape[0]
            x = torch.cat([self.cls.expand(B, 1, -1), x], dim=1)  # (B, 1 + T, D)
            keep = torch.cat([keep.new_ones(B, 1), keep], dim=1)  # (B, 1 + T)
        return x, keep

    def pool(self, ids: Tensor) -> Tensor:
        """The sentence vector the head sees. Shapes: (B, T) -> (B, d_model)."""
        x, keep = self._inputs(ids)
        h = self.body.run(x, keep)  # (B, T', D)
        if self.cfg.pooling == "cls":
            return h[:, 0]  # (B, D): the output at the [CLS] position
        return masked_mean(h, keep)  # (B, D)

    def attention_weights(self, ids: Tensor) -> Tensor:
        """First-block attention weights; with cls pooling, position 0 is [CLS].

        Shapes: (B, T) -> (B, H, T', T').
        """
        return self.body.first_layer_attention(*self._inputs(ids))

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.pool(ids))  # (B, n_classes)


IGNORE = -100  # the target of positions the losses skip (padding, unseen tags)


def token_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy over the tokens whose target is not -100 (padding).

    Shapes: batch (ids (B, T), tags (B, T)); ``model(ids)`` -> (B, T, C); a scalar.
    """
    ids, tags = batch
    logits = model(ids)  # (B, T, C)
    return F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=IGNORE)


def sentence_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy of one label per sentence.

    Shapes: batch (ids (B, T), labels (B,)); ``model(ids)`` -> (B, C); a scalar.
    """
    ids, labels = batch
    return F.cross_entropy(model(ids), labels)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def mean_token_loss(
    model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]]
) -> float:
    """:func:`token_loss` over every scored token of ``batches`` (not a mean of batch
    means), in eval mode; the model's mode is restored afterwards."""
    was_training, device = model.training, _device(model)
    model.eval()
    total, count = 0.0, 0
    for ids, tags in batches:
        logits = model(ids.to(device))  # (b, T, C)
        tags = tags.to(device)
        total += F.cross_entropy(
            logits.flatten(0, 1), tags.flatten(), ignore_index=IGNORE, reduction="sum"
        ).item()
        count += int((tags != IGNORE).sum())
    model.train(was_training)
    if count == 0:
        raise ValueError("batches hold no scored token: nothing to evaluate")
    return total / count


@torch.no_grad()
def predict_tags(
    model: nn.Module,
    ids: Tensor,
    lengths: Tensor,
    transitions: tuple[Tensor, Tensor] | None = None,
    batch_size: int = 128,
) -> list[list[int]]:
    """The tag id of every real token of every row, in the rows' order: word by word
    (arg-max), or with ``transitions=(start, allowed)`` (:func:`bio.bio_transitions`) the
    best sequence the rules allow (:func:`bio.bio_viterbi`). Eval mode, restored after.

    Shapes: ids (N, T_max), lengths (N,) -> N lists, row n of length lengths[n].
    """
    was_training, device = model.training, _device(model)
    model.eval()
    out: list[list[int]] = [[] for _ in range(len(ids))]
    for idx, x, lens in sorted_batches(ids, lengths, batch_size):
        logits = model(x.to(device))  # (b, T, C)
        if transitions is None:
            best = logits.argmax(dim=-1)  # (b, T)
        else:
            best = bio_viterbi(logits.log_softmax(dim=-1), lens, *transitions)
        for i, row, k in zip(idx.tolist(), best.cpu(), lens.tolist()):
            out[i] = row[:k].tolist()
    model.train(was_training)
    return out


@torch.no_grad()
def predict_classes(
    model: nn.Module, ids: Tensor, lengths: Tensor, batch_size: int = 128
) -> list[int]:
    """The arg-max class of every row, in the rows' order, batched by length; eval
    mode, restored after. Shapes: ids (N, T_max), lengths (N,) -> N ints."""
    was_training, device = model.training, _device(model)
    model.eval()
    out = [0] * len(ids)
    for idx, x, _ in sorted_batches(ids, lengths, batch_size):
        for i, best in zip(idx.tolist(), model(x.to(device)).argmax(dim=-1).tolist()):
            out[i] = best
    model.train(was_training)
    return out


def fit(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], Tensor],
    steps: int,
    score: Callable[[nn.Module], float],
    every: int,
    lr: float,
    warmup: int = 0,
    cooldown: int = 0,
) -> tuple[list[float], dict[int, float]]:
    """One ``training.train`` run of ``steps`` updates, the last ``cooldown`` of them at
    a tenth of ``lr``, with ``score(model)`` (on a dev split, say) after every
    ``every``-th update, at the start of the cooldown and at the end.

    Returns the training loss of every step and {updates done: score}.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    scores: dict[int, float] = {}

    def evaluate(step: int, loss: float) -> None:
        done = step + 1
        if done % every == 0 or done in (steps - cooldown, steps):
            scores[done] = score(model)

    history = train(
        model, batches, loss_fn, steps, lr=lr, warmup=warmup, cooldown=cooldown,
        on_step=evaluate,
    )  # fmt: skip
    return history, scores


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
    model.body.encoder = Encoder(
        n_layers, d_model, n_heads, d_ff, norm_first=norm_first, norm=norm
    )  # a fresh stack; the rest of the tagger is unchanged
    return model


@dataclass
class SlotIntentFeatures:
    """The plumbing of chapters 05 and 07 around a slot-and-intent training split (ATIS,
    SNIPS): its three vocabularies (``words`` with ``<pad>`` and ``<unk>``; ``tags`` and
    ``intents`` without), the split encoded once, batches with word dropout, and the
    predictions of trained models read back as tag and intent names.

    Shapes: ``ids`` and ``tag_ids`` (N, T_max) (padding tags ``IGNORE``), ``lengths``
    and ``intent_ids`` (N,), for the N queries of ``train``.
    """

    train: SlotIntentSplit
    words: Vocab
    tags: Vocab
    intents: Vocab

    def __post_init__(self) -> None:
        self.ids, self.lengths = self.words.encode_batch(self.train.sentences)
        self.tag_ids, _ = self.tags.encode_batch(self.train.tags, pad_value=IGNORE)
        self.intent_ids = torch.tensor([self.intents[x] for x in self.train.intents])

    @classmethod
    def from_split(cls, train: SlotIntentSplit) -> SlotIntentFeatures:
        """The vocabularies built from ``train`` alone (every word, tag and intent)."""
        labels = dict(pad_token=None, unk_token=None)
        return cls(
            train,
            Vocab.from_corpus(train.sentences),
            Vocab.from_corpus(train.tags, **labels),
            Vocab.from_corpus([[x] for x in train.intents], **labels),
        )

    def batches(
        self, target: str, batch_size: int, seed: int, p_unk: float
    ) -> PaddedBatches:
        """Training batches (x, y) grouped by length (:class:`batching.PaddedBatches`),
        each word of x replaced by ``<unk>`` with probability ``p_unk``
        (:meth:`Vocab.word_dropout`); y: the tags (b, T) for ``target="tags"``, one
        intent (b,) for ``target="intents"``."""
        targets = {"tags": self.tag_ids, "intents": self.intent_ids}[target]

        def drop(x: Tensor, generator: torch.Generator) -> Tensor:
            return self.words.word_dropout(x, p_unk, generator=generator)

        return PaddedBatches(
            self.ids, self.lengths, targets, batch_size, seed, augment=drop
        )

    def tags_for(
        self,
        model: nn.Module,
        sentences: Sequence[Sequence[str]],
        rules: tuple[Tensor, Tensor] | None = None,
    ) -> list[list[str]]:
        """The tag names of every sentence (:func:`predict_tags`): word by word, or the
        best sequence ``rules`` (:func:`bio.bio_transitions`) allow."""
        ids, lengths = self.words.encode_batch(sentences)  # unknown words -> <unk>
        rows = predict_tags(model, ids, lengths, rules)
        return [self.tags.decode(row) for row in rows]

    def intents_for(
        self, model: nn.Module, sentences: Sequence[Sequence[str]]
    ) -> list[str]:
        """The predicted intent name of every sentence (:func:`predict_classes`)."""
        ids, lengths = self.words.encode_batch(sentences)
        return self.intents.decode(predict_classes(model, ids, lengths))

    def train_model(
        self,
        target: str,
        steps: int,
        lr: float,
        *,
        batch_size: int,
        seed: int,
        p_unk: float,
        warmup: int = 0,
        device: torch.device | str = "cpu",
        score: Callable[[nn.Module], float] | None = None,
        every: int = 1,
        **sizes: object,
    ) -> tuple[nn.Module, list[float], dict[int, float]]:
        """A new :class:`WordTagger` (``target="tags"``) or :class:`SentenceClassifier`
        (``"intents"``) of ``sizes`` (the other fields of :class:`ClassifierConfig`),
        drawn from the global generator and trained by one ``training.train`` run:
        ``steps`` updates at ``lr`` after ``warmup``, then a fifth more
        (``cooldown=steps // 5``) at a tenth of it, on :meth:`batches`.

        Returns the model, the loss of every step and, with ``score``, the scores
        :func:`fit` records every ``every`` steps (else {}).
        """
        labels = self.tags if target == "tags" else self.intents
        cfg = ClassifierConfig(
            len(self.words), len(labels), pad_id=self.words.pad_id, **sizes
        )
        kind = WordTagger if target == "tags" else SentenceClassifier
        model = kind(cfg).to(device)
        batches = self.batches(target, batch_size, seed, p_unk)
        loss = token_loss if target == "tags" else sentence_loss
        tail = steps // 5
        if score is None:
            history = train(
                model, batches, loss, steps + tail, lr=lr, warmup=warmup, cooldown=tail
            )
            return model, history, {}
        history, scores = fit(
            model, batches, loss, steps + tail, score, every, lr, warmup, cooldown=tail
        )
        return model, history, scores


class LookupTagger:
    """The per-word baseline of chapter 05: each word gets the tag it has most often in
    the training data (the first seen among equally frequent ones,
    ``baselines.majority_class``), a word training never shows ``O``. It reads no
    other word, so every occurrence of a word gets the same tag.
    """

    def __init__(
        self, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]]
    ) -> None:
        self.seen: dict[str, list[str]] = defaultdict(list)  # word -> its train tags
        for sent, row in zip(sentences, tags):
            for word, tag in zip(sent, row):
                self.seen[word].append(tag)
        self.best = {word: majority_class(ts) for word, ts in self.seen.items()}

    def __call__(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """The lookup tag of every word of every sentence."""
        return [[self.best.get(word, "O") for word in sent] for sent in sentences]

    def kind_of(self, word: str) -> str:
        """``"unseen in train"``, ``"one tag"`` or ``"several training tags"`` (the
        word alone cannot settle its tag)."""
        if word not in self.seen:
            return "unseen in train"
        return "several training tags" if len(set(self.seen[word])) > 1 else "one tag"

    def errors_by_kind(
        self,
        sentences: Sequence[Sequence[str]],
        gold: Sequence[Sequence[str]],
        pred: Sequence[Sequence[str]],
    ) -> Counter:
        """How many words of each :meth:`kind_of` ``pred`` tags wrong."""
        return Counter(
            self.kind_of(w)
            for sent, gs, ps in zip(sentences, gold, pred)
            for w, g, p in zip(sent, gs, ps)
            if g != p
        )


@torch.no_grad()
def cls_attention_shares(
    model: SentenceClassifier,
    words: Vocab,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    min_count: int = 30,
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """How a [CLS] model's first block spreads the [CLS] position's attention (mean over
    the heads) over the words of tagged sentences, all in one batch.

    Each word's share is its weight among the words' weights times the sentence length
    (1 = an even share, the 1/T of mean pooling). Returns the mean share per kind of
    gold tag (``"O"``, ``"city"`` for ``*city_name``, ``"slot"`` for the others), per
    word that occurs at least ``min_count`` times, and per kind of tag after dividing
    each share by the mean share of all the words at the same position.
    """
    ids, lengths = words.encode_batch(sentences)  # (N, T_max)
    w = model.attention_weights(ids.to(_device(model)))  # (N, H, 1 + T, 1 + T)
    w = w[:, :, 0, 1:].mean(dim=1).cpu()  # (N, T_max): from [CLS] to each word
    w = w / w.sum(dim=1, keepdim=True) * lengths[:, None]  # 1 = an even share
    real = torch.arange(w.shape[1]) < lengths[:, None]  # (N, T_max)
    at_position = (w * real).sum(dim=0) / real.sum(dim=0)  # (T_max,): mean per position
    ratio = (w / at_position).tolist()  # (N, T_max): share / its position's mean
    by_kind, by_word, matched = defaultdict(list), defaultdict(list), defaultdict(list)
    for n, (sent, row_tags, row) in enumerate(zip(sentences, tags, w.tolist())):
        for t, (word, tag, share) in enumerate(zip(sent, row_tags, row)):
            city = tag.endswith("city_name")
            kind = "O" if tag == "O" else "city" if city else "slot"
            by_kind[kind].append(share)
            matched[kind].append(ratio[n][t])
            by_word[word].append(share)
    mean = {k: statistics.mean(v) for k, v in by_kind.items()}
    frequent = {
        x: statistics.mean(v) for x, v in by_word.items() if len(v) >= min_count
    }
    return mean, frequent, {k: statistics.mean(v) for k, v in matched.items()}


def pooling_verdict(cls: Sequence[float], mean: Sequence[float]) -> str:
    """[CLS] against mean pooling, one accuracy per seed each, paired by seed (the seed
    gives both the same start and batches): a ranking only where
    ``report.compare_seeds(..., pairs=True)`` gives one, else its words for why not."""
    words = compare_seeds(mean, cls, pairs=True)  # how [CLS] compares
    passes = "higher for every seed, and the paired t-test passes"
    if words == "higher for every seed":
        return f"[CLS] pooling is ahead: {passes}"
    if words == "lower for every seed":
        return f"mean pooling is ahead: {passes}"
    return words


def paired_differences(cls: Sequence[float], mean: Sequence[float]) -> str:
    """The per-seed differences [CLS] minus mean, their mean, and how many standard
    errors it lies from 0 against the two-sided 5 % critical value of the paired
    t-test, in words."""
    diffs, mean_diff, se = paired(cls, mean)
    t_stat = mean_diff / se if se > 0 else math.inf
    t_crit = t_quantile(0.975, len(cls) - 1)
    return (
        "[CLS] minus mean, seed by seed: " + ", ".join(f"{d:+.3f}" for d in diffs)
        + f"; mean {mean_diff:+.3f}, {abs(t_stat):.1f} standard errors against "
        f"{t_crit:.2f}"
    )  # fmt: skip


def pooling_conclusion(
    cls: Sequence[float], mean: Sequence[float], n_queries: int
) -> dict[str, object]:
    """What the test accuracies of the two poolings (one per seed each, on
    ``n_queries`` queries) allow one to say: ``gap`` (between the means), ``ranges``
    (max - min of each pooling's seeds), ``gap_vs_seeds`` (the gap against those
    ranges), ``conclusion`` and ``selective`` (what [CLS]'s selective reading did for
    the accuracy), in words that follow :func:`pooling_verdict`."""
    ranges = [max(cls) - min(cls), max(mean) - min(mean)]
    gap = abs(statistics.mean(cls) - statistics.mean(mean))
    if gap < min(ranges):
        gap_vs_seeds = "smaller than the spread of either pooling's seeds"
    elif gap < max(ranges):
        gap_vs_seeds = "smaller than the spread of one pooling's seeds, not the other's"
    else:
        gap_vs_seeds = "larger than the spread of either pooling's seeds"
    n, verdict = len(cls), pooling_verdict(cls, mean)
    if verdict.endswith("no ranking"):
        moves = "more than" if gap < min(ranges) else "about as much as"
        conclusion = f"{n} seeds cannot tell the two poolings apart: the seed alone "
        conclusion += f"moves the accuracy {moves} the choice of pooling"
        selective = "did not make [CLS] pooling measurably more accurate here"
    else:
        queries = round(gap * n_queries)
        conclusion = f"the ranking holds for these {n} seeds, by {queries} of the "
        conclusion += f"{n_queries} test queries"
        selective = "put [CLS] pooling ahead on test here, by that small margin"
        if not verdict.startswith("[CLS]"):
            selective = (
                "did not make [CLS] pooling more accurate here: mean pooling led"
            )
    return {
        "gap": gap,
        "ranges": ranges,
        "gap_vs_seeds": gap_vs_seeds,
        "conclusion": conclusion,
        "selective": selective,
    }


def cooldown_verdict(with_tail: float, without: float, jitter: float) -> str:
    """Chapter 05's reading of one run with the lr / 10 tail against one control all at
    the full rate (dev scores ``with_tail`` and ``without``), with ``jitter``, how much
    the dev score moves between evaluations at the full rate, as the yardstick."""
    if with_tail - without > jitter:
        return (
            "ahead of the control by more than that range: modest evidence (one run "
            "of each) for the tail, which costs nothing over the same number of steps"
        )
    return (
        "not ahead of the control by more than that range, so one run of each does "
        "not credit the tail with a gain; we keep it as a cheap default, not as a "
        "measured gain"
    )


def read_by_every(
    per_seed: Sequence[dict[str, float]], k: int = 5
) -> tuple[list[str], list[str]]:
    """The words that every seed's model reads more than an even share (share > 1, from
    the per-word dicts of :func:`cls_attention_shares`, one per seed, over the same
    words), most read first, and those every one reads less, least read first: the
    first ``k`` of each, by the mean share over the seeds."""
    mean_share = {x: statistics.mean(d[x] for d in per_seed) for x in per_seed[0]}
    above = [x for x in mean_share if all(d[x] > 1 for d in per_seed)]
    below = [x for x in mean_share if all(d[x] < 1 for d in per_seed)]
    most = sorted(above, key=lambda x: -mean_share[x])[:k]
    return most, sorted(below, key=lambda x: mean_share[x])[:k]
