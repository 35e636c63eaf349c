"""RoBERTa's changes to BERT's pre-training recipe, one switch each (chapter 13).

Liu et al. (2019), "RoBERTa: A Robustly Optimized BERT Pretraining Approach", keep
BERT's model and change how it is trained: *dynamic* masking (a new mask every time a
sentence is seen, section 4.1) instead of *static* masking (one mask per sentence,
drawn once when the data is prepared), no next-sentence prediction (full sentences,
section 4.2), and larger batches (section 4.3).

:func:`mlm_batches` produces masked-LM batches of whole texts (one segment each) with
either masking; :func:`pretrain` trains a small :class:`bert.BertForPreTraining` with
one recipe or the other (``nsp=True`` is BERT's, through
:func:`pretraining.pretraining_batches`), everything else equal.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from . import bert, pretraining
from .tokenizer import WordPiece

__all__ = ["MASKINGS", "mlm_batches", "pretrain"]

MASKINGS = ("static", "dynamic")


def mlm_batches(
    tok: WordPiece,
    docs: Sequence[list[list[int]]],
    batch_size: int,
    max_len: int,
    masking: str = "dynamic",
    seed: int = 0,
    p_mask: float = 0.15,
) -> Iterator[dict[str, Tensor]]:
    """An endless stream of masked-LM batches of whole texts (``docs`` as
    :func:`pretraining.word_pieces_by_word` gives them), a new order every pass.

    ``masking="static"``: each text is masked once, the first time it is drawn, and
    keeps that mask for ever (BERT's data preparation with one copy of the data);
    ``"dynamic"``: a fresh mask every time (RoBERTa). Batches hold ``ids`` (masked),
    ``token_type_ids``, ``attention_mask``, ``labels`` (B, T) and ``is_next`` (B,).
    """
    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}")
    if len(docs) < batch_size:
        raise ValueError(
            f"need at least batch_size={batch_size} texts, got {len(docs)}"
        )
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    encs = [
        tok.add_special_tokens([i for w in d for i in w], None, max_len) for d in docs
    ]
    frozen: dict[int, tuple[list[int], list[int]]] = {}  # text -> (inputs, labels)

    def masked(i: int) -> tuple[list[int], list[int]]:
        if masking == "static" and i in frozen:
            return frozen[i]
        ids = torch.tensor([encs[i].ids])  # (1, T)
        special = torch.isin(ids, torch.tensor(sorted(tok.special_ids)))  # (1, T)
        inputs, labels = bert.mask_tokens(
            ids, tok.mask_id, len(tok), special, p=p_mask, generator=gen
        )
        out = inputs[0].tolist(), labels[0].tolist()
        if masking == "static":
            frozen[i] = out
        return out

    while True:
        order = list(range(len(docs)))
        rng.shuffle(order)
        for s in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[s : s + batch_size]
            batch = tok.pad([encs[i] for i in idx])  # (B, T) each
            T = batch["ids"].shape[1]
            rows = [masked(i) for i in idx]
            batch["ids"] = torch.tensor(
                [r[0] + [tok.pad_id] * (T - len(r[0])) for r in rows]
            )  # (B, T)
            batch["labels"] = torch.tensor(
                [r[1] + [-100] * (T - len(r[1])) for r in rows]
            )  # (B, T)
            batch["is_next"] = torch.zeros(len(idx), dtype=torch.long)  # unused
            yield batch


def pretrain(
    texts: Sequence[str],
    tokenizer: WordPiece,
    masking: str = "dynamic",
    nsp: bool = False,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    d_ff: int = 128,
    max_len: int = 64,
    batch_size: int = 16,
    steps: int = 500,
    lr: float = 3e-3,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> bert.BertForPreTraining:
    """Pre-train a small BERT on ``texts`` with one recipe; returns it in eval mode.

    ``nsp=False``: masked LM on whole texts with ``masking`` ("static" or "dynamic").
    ``nsp=True``: BERT's recipe, segment pairs with next-sentence prediction (masks are
    then dynamic, as :func:`pretraining.pretraining_batches` draws them). Sizes,
    schedule and optimiser are those of :func:`pretraining.pretrain_small`; only the
    batches and the loss differ. Reproducible from ``seed``.
    """
    config = bert.BertConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_ff=d_ff,
        max_len=max_len,
        dropout=0.0,
        pad_id=tokenizer.pad_id,
    )
    docs = [pretraining.word_pieces_by_word(tokenizer, t) for t in texts]
    if nsp:
        batches = pretraining.pretraining_batches(
            tokenizer, docs, batch_size, max_len, seed, nsp=True
        )
    else:
        batches = mlm_batches(tokenizer, docs, batch_size, max_len, masking, seed)

    return pretraining.train_bert(config, batches, steps, lr, nsp, seed, device)[0]
