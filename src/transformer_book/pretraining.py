"""Pre-training a small BERT with masked language modelling (+ next-sentence
prediction) on unlabeled text (chapter 11; chapters 12-13 start from it).

:func:`pretrain_small` learns a WordPiece vocabulary from the texts (unless given
one), builds a :class:`bert.BertForPreTraining`, and trains it with
:func:`training.train` on batches from :func:`pretraining_batches`: pairs of segments
from :func:`bert.next_sentence_pairs`, masked afresh every time a batch is drawn
(:func:`bert.mask_tokens`). Devlin et al. (2019), section 3.1 and appendix A.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from . import bert, data, training
from .tokenizer import WordPiece, basic_tokenize

__all__ = [
    "Pretrained",
    "review_split",
    "word_pieces_by_word",
    "pretraining_batches",
    "pretraining_metrics",
    "pretrain_small",
]


@dataclass
class Pretrained:
    """What :func:`pretrain_small` returns: the model (eval mode), its tokenizer, and
    per-step training losses (total, MLM, NSP)."""

    model: bert.BertForPreTraining
    tokenizer: WordPiece
    loss: list[float]
    mlm_loss: list[float]
    nsp_loss: list[float]


def review_split(seed: int = 0) -> dict[str, tuple[list[str], list[int]]]:
    """rt-polarity (Pang & Lee, 2005) shuffled with ``seed`` and cut into ``train``
    (8,662 reviews), ``dev`` and ``test`` (1,000 each): name -> (texts, labels).

    Chapter 11 pre-trains on the train texts (labels dropped); chapter 12 fine-tunes
    and evaluates on the same split, so no test review is seen in pre-training.
    """
    texts, labels = data.load_rt_polarity()
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    parts = {"train": order[:-2000], "test": order[-2000:-1000], "dev": order[-1000:]}
    return {
        name: ([texts[i] for i in idx], [labels[i] for i in idx])
        for name, idx in parts.items()
    }


def word_pieces_by_word(tok: WordPiece, text: str) -> list[list[int]]:
    """The ids of ``text`` grouped by word, so that segments are cut between words."""
    return [
        tok.convert_tokens_to_ids(tok.word_pieces(w))
        for w in basic_tokenize(text, tok.lowercase)
    ]


def _special_mask(tok: WordPiece, ids: Tensor) -> Tensor:
    return torch.isin(ids, torch.tensor(sorted(tok.special_ids)))  # (B, T) bool


def _flat(words: list[list[int]]) -> list[int]:
    return [i for w in words for i in w]


def _pair_len(pair: tuple) -> int:
    a, b, _ = pair
    return sum(map(len, a)) + (0 if b is None else sum(map(len, b)))


def pretraining_batches(
    tok: WordPiece,
    docs: Sequence[list[list[int]]],
    batch_size: int,
    max_len: int,
    seed: int = 0,
    nsp: bool = True,
    p_mask: float = 0.15,
) -> Iterator[dict[str, Tensor]]:
    """An endless stream of pre-training batches from ``docs`` (each a text as
    :func:`word_pieces_by_word` gives it).

    Every pass over the data draws new segment pairs (with ``nsp``; else each text is
    one segment) in a new order; every batch is masked afresh. Each batch holds
    ``ids`` (masked), ``token_type_ids``, ``attention_mask``, ``labels`` (B, T) and
    ``is_next`` (B,).
    """
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    if len(docs) < batch_size:
        raise ValueError(
            f"need at least batch_size={batch_size} texts, got {len(docs)}"
        )
    while True:
        if nsp:
            pairs = bert.next_sentence_pairs(docs, rng)
        else:
            pairs = [(d, None, bert.IS_NEXT) for d in docs]
        rng.shuffle(pairs)
        # Pairs of similar length side by side (within windows of 50 batches) waste
        # less padding; the batches then come in random order.
        window = 50 * batch_size
        for w in range(0, len(pairs), window):
            pairs[w : w + window] = sorted(pairs[w : w + window], key=_pair_len)
        starts = list(range(0, len(pairs) - batch_size + 1, batch_size))
        rng.shuffle(starts)
        for start in starts:
            chunk = pairs[start : start + batch_size]
            encs = [
                tok.add_special_tokens(
                    _flat(a), None if b is None else _flat(b), max_len
                )
                for a, b, _ in chunk
            ]
            batch = tok.pad(encs)  # (B, T) tensors
            ids, labels = bert.mask_tokens(
                batch["ids"],
                tok.mask_id,
                len(tok),
                _special_mask(tok, batch["ids"]),
                p=p_mask,
                generator=gen,
            )
            batch["ids"], batch["labels"] = ids, labels
            batch["is_next"] = torch.tensor([label for *_, label in chunk])  # (B,)
            yield batch


@torch.no_grad()
def pretraining_metrics(
    model: bert.BertForPreTraining,
    tok: WordPiece,
    texts: Sequence[str],
    max_len: int = 64,
    batch_size: int = 128,
    seed: int = 0,
    nsp: bool = True,
) -> dict[str, float]:
    """Held-out MLM loss and accuracy (over the masked tokens) and NSP accuracy, on
    one fixed draw of pairs and masks (``seed``) of ``texts``."""
    docs = [word_pieces_by_word(tok, t) for t in texts]
    batches = pretraining_batches(tok, docs, batch_size, max_len, seed, nsp)
    model.eval()
    device = next(model.parameters()).device
    mlm_sum, n_masked, n_right, nsp_right, n_pairs = 0.0, 0, 0, 0, 0
    for _ in range(len(docs) // batch_size):
        batch = {k: v.to(device) for k, v in next(batches).items()}
        positions = batch["labels"] != -100  # (B, T)
        mlm_logits, nsp_logits = model(
            batch["ids"], batch["token_type_ids"], batch["attention_mask"], positions
        )
        target = batch["labels"][positions]  # (n_masked,)
        mlm_sum += torch.nn.functional.cross_entropy(
            mlm_logits, target, reduction="sum"
        ).item()
        n_masked += target.numel()
        n_right += (mlm_logits.argmax(-1) == target).sum().item()
        nsp_right += (nsp_logits.argmax(-1) == batch["is_next"]).sum().item()
        n_pairs += len(batch["is_next"])
    return {
        "mlm_loss": mlm_sum / n_masked,
        "mlm_accuracy": n_right / n_masked,
        "nsp_accuracy": nsp_right / n_pairs if nsp else math.nan,
    }


def pretrain_small(
    texts: Sequence[str],
    tokenizer: WordPiece | None = None,
    vocab_size: int = 2000,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    d_ff: int = 128,
    max_len: int = 64,
    batch_size: int = 16,
    steps: int = 500,
    lr: float = 3e-3,
    dropout: float = 0.0,
    nsp: bool = True,
    p_mask: float = 0.15,
    seed: int = 0,
    device: str | torch.device = "cpu",
    docs: Sequence[list[list[int]]] | None = None,
) -> Pretrained:
    """Pre-train a small BERT on ``texts`` with MLM (+ NSP); reproducible from ``seed``.

    The defaults are chapter 11's quick profile: on the train texts of
    :func:`review_split`, a 2-layer model of width 64 with a 2,000-token WordPiece
    vocabulary, about 20 CPU-seconds (plus a few to learn the vocabulary). Warm-up
    over the first 10 % of the steps, then linear decay; AdamW with weight decay
    0.01, as BERT. The caller's random state is left untouched: everything random
    here draws from ``seed``.

    ``docs``: the texts already cut into word pieces by ``tokenizer``
    (:func:`word_pieces_by_word`, one list per text), to cut them once when several
    seeds pre-train on the same texts; the result is the same as without it.
    """
    if docs is not None:
        if tokenizer is None:
            raise ValueError("docs were cut by a tokenizer: pass it as tokenizer=")
        if len(docs) != len(texts):
            raise ValueError(
                f"docs must hold one entry per text ({len(texts)}), got {len(docs)}"
            )
    if tokenizer is None:
        tokenizer = WordPiece.train(texts, vocab_size)
    if docs is None:
        docs = [word_pieces_by_word(tokenizer, t) for t in texts]
    batches = pretraining_batches(
        tokenizer, docs, batch_size, max_len, seed, nsp, p_mask
    )
    config = bert.BertConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_ff=d_ff,
        max_len=max_len,
        dropout=dropout,
        pad_id=tokenizer.pad_id,
    )
    model, history, losses = train_bert(config, batches, steps, lr, nsp, seed, device)
    return Pretrained(model, tokenizer, history, losses["mlm"], losses["nsp"])


def train_bert(
    config: bert.BertConfig,
    batches: Iterable[dict[str, Tensor]],
    steps: int,
    lr: float,
    nsp: bool,
    seed: int,
    device: str | torch.device = "cpu",
) -> tuple[bert.BertForPreTraining, list[float], dict[str, list[float]]]:
    """BERT's pre-training loop: a model built from ``config`` and ``seed``, AdamW with
    weight decay 0.01, warm-up over the first 10 % of ``steps`` then linear decay.

    Returns the model, the loss per step, and the MLM and NSP parts of it. The caller's
    random state is left untouched. Shared by :func:`pretrain_small` and chapter 13's
    masking comparison (``roberta.pretrain``).
    """
    losses: dict[str, list[float]] = {"mlm": [], "nsp": []}

    def loss_fn(model: bert.BertForPreTraining, batch: dict[str, Tensor]) -> Tensor:
        batch = {k: v.to(device) for k, v in batch.items()}
        total, mlm, nsp_loss = bert.pretraining_loss(model, batch, nsp=nsp)
        losses["mlm"].append(mlm.item())
        losses["nsp"].append(nsp_loss.item())
        return total

    dev = torch.device(device)
    cuda = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)  # initial weights and dropout
        model = bert.BertForPreTraining(config).to(device)
        history = training.train(
            model,
            batches,
            loss_fn,
            steps,
            lr=lr,
            weight_decay=0.01,
            warmup=max(1, steps // 10),
            decay="linear",
        )
    return model, history, losses
