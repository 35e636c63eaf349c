"""Fine-tuning a pre-trained encoder: batches, losses and predictions for sentence
classification, token classification and extractive QA (chapter 12).

The training itself is :func:`training.train` (AdamW, warm-up then decay, gradient
clipping); this module supplies the task parts. Words are cut into WordPiece
sub-words; a word's label goes to its *first* sub-word and the other sub-words are
ignored in the loss (label -100), and a word's prediction is read at its first
sub-word (Devlin et al., 2019, section 5.3).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .masks import masked_mean
from .squad import QAExample, best_span
from .tokenizer import Encoding, WordPiece, basic_tokenize

__all__ = [
    "IGNORE",
    "encode_words",
    "first_subword_labels",
    "classification_batches",
    "sorted_classification_batches",
    "classification_loss",
    "fit_head",
    "predict_classes",
    "frozen_features",
    "token_features",
    "TaggingExample",
    "tagging_examples",
    "tagging_loss",
    "predict_tags",
    "QAFeature",
    "qa_features",
    "span_loss",
    "predict_answers",
    "example_batches",
    "weight_drift",
    "GradNorms",
    "without_overlap",
]

IGNORE = -100  # the label F.cross_entropy skips


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def encode_words(tok: WordPiece, words: Sequence[str]) -> tuple[list[int], list[int]]:
    """Word pieces of already split ``words``: (ids, the index of the word each piece
    comes from). A word that basic tokenisation splits further ("a.m." -> "a", ".",
    "m", ".") keeps all its pieces under one index."""
    ids, word_of = [], []
    for w, word in enumerate(words):
        pieces = [
            p
            for part in basic_tokenize(word, tok.lowercase)
            for p in tok.word_pieces(part)
        ]
        pieces = pieces or [tok.unk_token]
        ids += tok.convert_tokens_to_ids(pieces)
        word_of += [w] * len(pieces)
    return ids, word_of


def first_subword_labels(
    word_of: Sequence[int], word_labels: Sequence[int]
) -> list[int]:
    """One label per piece: the word's label at its first piece, :data:`IGNORE` at the
    others. ``word_of`` as :func:`encode_words` returns it (non-decreasing)."""
    out, previous = [], None
    for w in word_of:
        if w < 0 or w >= len(word_labels):
            raise ValueError(
                f"word_of points at word {w}, but there are {len(word_labels)} labels"
            )
        out.append(word_labels[w] if w != previous else IGNORE)
        previous = w
    return out


def classification_batches(
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    max_len: int,
    seed: int = 0,
) -> Iterator[dict[str, Tensor]]:
    """An endless stream of shuffled batches (``ids``, ``token_type_ids``,
    ``attention_mask`` (B, T) and ``labels`` (B,)), a new order every pass."""
    if len(texts) != len(labels) or len(texts) < batch_size:
        raise ValueError(
            f"need as many labels as texts and at least batch_size={batch_size} of "
            f"them, got {len(texts)} texts and {len(labels)} labels"
        )
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    rng, order = random.Random(seed), list(range(len(texts)))
    while True:
        rng.shuffle(order)
        for s in range(0, len(order) - batch_size + 1, batch_size):
            chunk = order[s : s + batch_size]
            batch = tok.pad([encs[i] for i in chunk])  # (B, T) each
            batch["labels"] = torch.tensor([labels[i] for i in chunk])  # (B,)
            yield batch


def sorted_classification_batches(
    tok: WordPiece,
    texts: Sequence[str],
    labels: Sequence[int],
    batch_size: int,
    max_len: int,
    seed: int = 0,
    window: int = 20,
) -> Iterator[dict[str, Tensor]]:
    """As :func:`classification_batches`, but each batch holds texts of similar
    length, so it carries less padding: every pass shuffles, sorts by length inside
    windows of ``window`` batches, and serves the batches in a random order.

    Shapes: each batch ``ids``, ``token_type_ids``, ``attention_mask`` (B, T) and
    ``labels`` (B,). Bucketing by length, as in Vaswani et al. (2017), section 5.1.
    """
    if len(texts) != len(labels) or len(texts) < batch_size:
        raise ValueError(
            f"need as many labels as texts and at least batch_size={batch_size} of "
            f"them, got {len(texts)} texts and {len(labels)} labels"
        )
    if window < 1:
        raise ValueError(f"window must be >= 1 batch, got {window}")
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    rng, order = random.Random(seed), list(range(len(texts)))
    span = window * batch_size
    while True:
        rng.shuffle(order)
        for w in range(0, len(order), span):
            order[w : w + span] = sorted(
                order[w : w + span], key=lambda i: len(encs[i])
            )
        starts = list(range(0, len(order) - batch_size + 1, batch_size))
        rng.shuffle(starts)
        for s in starts:
            chunk = order[s : s + batch_size]
            batch = tok.pad([encs[i] for i in chunk])  # (B, T) each
            batch["labels"] = torch.tensor([labels[i] for i in chunk])  # (B,)
            yield batch


def classification_loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    """Cross-entropy of a sentence classifier on a batch of
    :func:`classification_batches`."""
    b = {k: v.to(_device(model)) for k, v in batch.items()}
    logits = model(b["ids"], b["token_type_ids"], b["attention_mask"])  # (B, C)
    return F.cross_entropy(logits, b["labels"])


def _by_length(encs: Sequence, batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length (less padding when evaluating)."""
    order = sorted(range(len(encs)), key=lambda i: len(encs[i]))
    for s in range(0, len(order), batch_size):
        yield order[s : s + batch_size]


@torch.no_grad()
def predict_classes(
    model: nn.Module,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int,
    batch_size: int = 64,
) -> list[int]:
    """The most probable class of every text (model in eval mode)."""
    model.eval()
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    pred = [0] * len(texts)
    for idx in _by_length(encs, batch_size):
        b = {
            k: v.to(_device(model)) for k, v in tok.pad([encs[i] for i in idx]).items()
        }
        logits = model(b["ids"], b["token_type_ids"], b["attention_mask"])  # (B, C)
        for i, p in zip(idx, logits.argmax(-1).tolist()):
            pred[i] = p
    return pred


@torch.no_grad()
def frozen_features(
    encoder: nn.Module,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int,
    batch_size: int = 64,
) -> dict[str, Tensor]:
    """Features of a frozen encoder for a linear probe: ``cls`` (the [CLS] hidden
    vector), ``pooled`` (tanh(W h_[CLS] + b)) and ``mean`` (mean of the real tokens'
    vectors), each (N, D)."""
    encoder.eval()
    encs = [tok.encode(t, max_len=max_len) for t in texts]
    out: dict[str, list] = {"cls": [None] * len(texts), "pooled": [None] * len(texts)}
    out["mean"] = [None] * len(texts)
    for idx in _by_length(encs, batch_size):
        b = {
            k: v.to(_device(encoder))
            for k, v in tok.pad([encs[i] for i in idx]).items()
        }
        hidden, pooled = encoder(b["ids"], b["token_type_ids"], b["attention_mask"])
        mean = masked_mean(hidden, b["attention_mask"].bool())  # (B, D)
        for name, v in (("cls", hidden[:, 0]), ("pooled", pooled), ("mean", mean)):
            for j, i in enumerate(idx):
                out[name][i] = v[j].cpu()
    return {name: torch.stack(rows) for name, rows in out.items()}


@torch.no_grad()
def token_features(
    encoder: nn.Module,
    tok: WordPiece,
    examples: Sequence[TaggingExample],
    batch_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """A frozen encoder's vectors at every labelled piece of tagging ``examples`` (the
    first piece of each word), for a token-level linear probe.

    Shapes: -> features (N, D) and labels (N,), N the number of labels that are not
    :data:`IGNORE`, in the order of ``examples`` and of the pieces inside each.
    """
    if not examples:
        raise ValueError("examples is empty: there is nothing to take features from")
    encoder.eval()
    xs: list[Tensor] = [torch.empty(0, 0)] * len(examples)
    ys: list[Tensor] = [torch.empty(0, dtype=torch.long)] * len(examples)
    for idx in _by_length(examples, batch_size):
        chunk = [examples[i] for i in idx]
        b = _tagging_tensors(tok, chunk, _device(encoder))
        hidden, _ = encoder(b["ids"], b["token_type_ids"], b["attention_mask"])
        keep = b["labels"] != IGNORE  # (B, T)
        for j, i in enumerate(idx):
            xs[i], ys[i] = hidden[j][keep[j]].cpu(), b["labels"][j][keep[j]].cpu()
    return torch.cat(xs), torch.cat(ys)  # (N, D), (N,)


def fit_head(
    head: nn.Linear,
    features: Tensor,
    labels: Sequence[int] | Tensor,
    weight_decay: float = 1e-2,
    max_iter: int = 100,
) -> float:
    """Fit ``head`` alone as an L2-regularised logistic regression on frozen
    ``features`` (full-batch L-BFGS on standardised features, the standardisation
    then folded into the weights); returns its training accuracy.

    Shapes: features (N, D), labels (N,); head D -> C. A linear probe (Alain &
    Bengio, 2016); fitted before fine-tuning, it is "LP-FT" (Kumar et al., 2022).
    """
    y = torch.as_tensor(list(labels) if not isinstance(labels, Tensor) else labels)
    if features.ndim != 2 or features.shape != (len(y), head.in_features):
        raise ValueError(
            f"features must be (N, {head.in_features}) with N = {len(y)} labels, "
            f"got {tuple(features.shape)}"
        )
    x = features.detach().float().cpu()
    mu, sd = x.mean(0), x.std(0) + 1e-6  # (D,) each
    w = torch.zeros(x.shape[1], head.out_features, requires_grad=True)  # (D, C)
    b = torch.zeros(head.out_features, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy((x - mu) / sd @ w + b, y) + weight_decay * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():  # (x - mu) / sd @ w + b = x @ (w / sd) + (b - mu / sd @ w)
        head.weight.copy_((w / sd[:, None]).T.to(head.weight))  # (C, D)
        head.bias.copy_((b - (mu / sd) @ w).to(head.bias))
        return (((x - mu) / sd @ w + b).argmax(-1) == y).float().mean().item()


@dataclass
class TaggingExample:
    """A sentence ready for token classification: its encoding, one label per piece
    (:data:`IGNORE` except at first pieces) and the word index of each piece (-1 for
    [CLS]/[SEP])."""

    encoding: Encoding
    labels: list[int]
    word_of: list[int]
    n_words: int

    def __len__(self) -> int:
        return len(self.encoding)


def tagging_examples(
    tok: WordPiece,
    sentences: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    tag_ids: dict[str, int],
    max_len: int,
) -> list[TaggingExample]:
    """Encode tagged sentences with first-sub-word labels; a tag missing from
    ``tag_ids`` (seen only in the test split) gets :data:`IGNORE`. Pieces past
    ``max_len`` are cut (their words then get the prediction "O")."""
    out = []
    for words, t in zip(sentences, tags):
        ids, word_of = encode_words(tok, words)
        labels = first_subword_labels(word_of, [tag_ids.get(x, IGNORE) for x in t])
        keep = max_len - 2
        enc = tok.add_special_tokens(ids[:keep], max_len=max_len)
        out.append(
            TaggingExample(
                enc,
                [IGNORE, *labels[:keep], IGNORE],
                [-1, *word_of[:keep], -1],
                len(words),
            )
        )
    return out


def _pad_labels(rows: Sequence[Sequence[int]], T: int) -> Tensor:
    return torch.tensor([list(r) + [IGNORE] * (T - len(r)) for r in rows])  # (B, T)


def example_batches(
    examples: Sequence, batch_size: int, seed: int = 0
) -> Iterator[list]:
    """An endless stream of shuffled lists of ``examples`` (a new order every pass)."""
    if len(examples) < batch_size:
        raise ValueError(
            f"need at least batch_size={batch_size} examples, got {len(examples)}"
        )
    rng, order = random.Random(seed), list(range(len(examples)))
    while True:
        rng.shuffle(order)
        for s in range(0, len(order) - batch_size + 1, batch_size):
            yield [examples[i] for i in order[s : s + batch_size]]


def _tagging_tensors(tok: WordPiece, chunk: Sequence[TaggingExample], device) -> dict:
    b = tok.pad([e.encoding for e in chunk])  # (B, T) each
    b["labels"] = _pad_labels([e.labels for e in chunk], b["ids"].shape[1])
    return {k: v.to(device) for k, v in b.items()}


def tagging_loss(tok: WordPiece):
    """A ``loss_fn(model, examples)`` for :func:`training.train`: cross-entropy over
    the first pieces of the words."""

    def loss_fn(model: nn.Module, chunk: Sequence[TaggingExample]) -> Tensor:
        b = _tagging_tensors(tok, chunk, _device(model))
        logits = model(b["ids"], b["token_type_ids"], b["attention_mask"])  # (B, T, L)
        return F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten())

    return loss_fn


@torch.no_grad()
def predict_tags(
    model: nn.Module,
    tok: WordPiece,
    examples: Sequence[TaggingExample],
    id_to_tag: Sequence[str],
    batch_size: int = 64,
) -> list[list[str]]:
    """One tag per word, read at the word's first piece ("O" for words cut off)."""
    model.eval()
    out: list[list[str]] = [[] for _ in examples]
    for idx in _by_length(examples, batch_size):
        chunk = [examples[i] for i in idx]
        b = _tagging_tensors(tok, chunk, _device(model))
        pred = model(b["ids"], b["token_type_ids"], b["attention_mask"]).argmax(-1)
        for row, i in zip(pred.tolist(), idx):
            ex = examples[i]
            tags = ["O"] * ex.n_words
            for t, w in enumerate(ex.word_of):
                if w >= 0 and (t == 1 or ex.word_of[t - 1] != w):  # first piece
                    tags[w] = id_to_tag[row[t]]
            out[i] = tags
    return out


@dataclass
class QAFeature:
    """A question-context pair as the reader sees it: ``[CLS] question [SEP] context
    [SEP]``, which tokens belong to the context, the context word of every token (-1
    elsewhere), and the first gold answer's start and end token."""

    example: QAExample
    encoding: Encoding
    context_mask: list[bool]
    word_of: list[int]
    start: int
    end: int

    def __len__(self) -> int:
        return len(self.encoding)


def qa_features(
    tok: WordPiece, examples: Sequence[QAExample], max_len: int
) -> list[QAFeature]:
    """Encode QA examples; the context is cut (never the question) to fit ``max_len``.
    An answer cut off points at [CLS] (position 0), as BERT does for no answer."""
    out = []
    for ex in examples:
        q = tok.convert_tokens_to_ids(tok.tokenize(ex.question))
        ids, word_of = encode_words(tok, ex.context)
        room = max_len - len(q) - 3
        if room < 1:
            raise ValueError(
                f"max_len={max_len} leaves no room for the context of {ex.question!r}"
            )
        ids, word_of = ids[:room], word_of[:room]
        enc = tok.add_special_tokens(q, ids)
        offset = len(q) + 2  # [CLS] question [SEP]
        ctx = [False] * len(enc)
        ctx[offset : offset + len(ids)] = [True] * len(ids)
        wmap = [-1] * len(enc)
        wmap[offset : offset + len(ids)] = word_of
        s, e = ex.answers[0]  # words s .. e-1
        tokens = [t for t, w in enumerate(wmap) if s <= w < e]
        start, end = (tokens[0], tokens[-1]) if tokens and wmap[-2] >= e - 1 else (0, 0)
        out.append(QAFeature(ex, enc, ctx, wmap, start, end))
    return out


def _qa_tensors(tok: WordPiece, chunk: Sequence[QAFeature], device) -> dict:
    b = tok.pad([f.encoding for f in chunk])  # (B, T) each
    T = b["ids"].shape[1]
    b["context"] = torch.tensor(
        [f.context_mask + [False] * (T - len(f)) for f in chunk]
    )
    b["start"] = torch.tensor([f.start for f in chunk])  # (B,)
    b["end"] = torch.tensor([f.end for f in chunk])  # (B,)
    return {k: v.to(device) for k, v in b.items()}


def span_loss(tok: WordPiece):
    """A ``loss_fn(model, features)``: the mean of the start and end cross-entropies
    (Devlin et al., 2019, section 4.2)."""

    def loss_fn(model: nn.Module, chunk: Sequence[QAFeature]) -> Tensor:
        b = _qa_tensors(tok, chunk, _device(model))
        start, end = model(b["ids"], b["token_type_ids"], b["attention_mask"])
        return (F.cross_entropy(start, b["start"]) + F.cross_entropy(end, b["end"])) / 2

    return loss_fn


@torch.no_grad()
def predict_answers(
    model: nn.Module,
    tok: WordPiece,
    features: Sequence[QAFeature],
    max_answer_len: int = 10,
    batch_size: int = 64,
) -> list[str]:
    """The answer text of every feature: the best context span (:func:`squad.best_span`,
    at most ``max_answer_len`` pieces), widened to whole words."""
    model.eval()
    out = [""] * len(features)
    for idx in _by_length(features, batch_size):
        chunk = [features[i] for i in idx]
        b = _qa_tensors(tok, chunk, _device(model))
        start, end = model(b["ids"], b["token_type_ids"], b["attention_mask"])
        s, e = best_span(start, end, b["context"], max_answer_len)
        for i, f, si, ei in zip(idx, chunk, s.tolist(), e.tolist()):
            w0, w1 = f.word_of[si], f.word_of[ei]
            out[i] = " ".join(f.example.context[w0 : w1 + 1])
    return out


@torch.no_grad()
def weight_drift(model: nn.Module, reference: nn.Module) -> float:
    """How far fine-tuning moved the weights: ``||θ - θ₀|| / ||θ₀||`` over the
    parameters the two modules share by name."""
    ref = dict(reference.named_parameters())
    num = den = 0.0
    for name, p in model.named_parameters():
        if name in ref and ref[name].shape == p.shape:
            r = ref[name].to(p.device)
            num += (p - r).pow(2).sum().item()
            den += r.pow(2).sum().item()
    if den == 0.0:
        raise ValueError("model and reference share no parameter by name and shape")
    return (num / den) ** 0.5


class GradNorms:
    """Records the total gradient norm ``||g||`` of every update *before* clipping:
    hooks note each gradient's squared norm inside ``backward`` (the loop clips
    after it), and :meth:`on_step`, given to :func:`training.train` as ``on_step``,
    adds them up. Use as a context manager around the training run."""

    def __init__(self, model: nn.Module) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.norms: list[float] = []
        self._sq: dict[int, Tensor] = {}
        self._handles: list = []

    def on_step(self, step: int, loss: float) -> None:
        if not self._sq:
            raise ValueError(
                "no gradient was recorded for this step: use GradNorms as a context "
                "manager around the training run, on a model with trainable parameters"
            )
        self.norms.append(torch.stack(list(self._sq.values())).sum().sqrt().item())
        self._sq = {}

    def __enter__(self) -> GradNorms:
        def hook(i: int):
            def note(grad: Tensor) -> None:
                self._sq[i] = grad.detach().float().pow(2).sum()

            return note

        self._handles = [p.register_hook(hook(i)) for i, p in enumerate(self.params)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()


def _key(text: str) -> str:
    return "".join(
        ch
        for ch in text.lower().replace("-lrb-", "").replace("-rrb-", "")
        if ch.isalnum()
    )


def without_overlap(texts: Sequence[str], held_out: Sequence[str]) -> list[str]:
    """``texts`` minus every text that contains one of ``held_out`` (compared on
    lower-case letters and digits only, so "it's" matches SST's "it 's"): no
    evaluation sentence may be seen, even unlabelled, in pre-training.

    Conservative: a very short held-out text (a word or two) removes every text that
    contains it, so more texts may go than there are held-out sentences."""
    keys = [k for k in map(_key, held_out) if k]
    out = []
    for t in texts:
        key = _key(t)
        if not any(k in key for k in keys):
            out.append(t)
    return out
