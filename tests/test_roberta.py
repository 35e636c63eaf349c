"""Tests of roberta: static masks never change, dynamic masks do, both at BERT's rate
and rules; the pre-training switch runs each recipe."""

from __future__ import annotations

import pytest
import torch

from transformer_book import pretraining, roberta
from transformer_book.tokenizer import WordPiece

TEXTS = [
    "a quiet film about grief and the sea",
    "the acting is wooden and the plot is thin",
    "a warm funny film with a great cast",
    "too long by half but the ending works",
    "the best film of the year so far",
    "a mess from start to end",
    "funny and sad at once",
    "the sea the film the cast",
] * 4


@pytest.fixture(scope="module")
def tok() -> WordPiece:
    return WordPiece.train(TEXTS, 80)


def _masks_by_text(tok, masking: str, n_batches: int = 16) -> dict[tuple, set]:
    docs = [pretraining.word_pieces_by_word(tok, t) for t in TEXTS]
    batches = roberta.mlm_batches(tok, docs, 4, 16, masking, seed=0)
    seen: dict[tuple, set] = {}
    for _ in range(n_batches):
        b = next(batches)
        for ids, labels, att in zip(b["ids"], b["labels"], b["attention_mask"]):
            n = int(att.sum())
            original = torch.where(labels[:n] != -100, labels[:n], ids[:n])
            seen.setdefault(tuple(original.tolist()), set()).add(
                tuple((labels[:n] != -100).tolist())
            )
    return seen


def test_static_masks_are_fixed_per_text(tok):
    # the 32 texts are 8 distinct ones, 4 copies each: each copy keeps its own mask,
    # so a distinct text shows at most 4 different masks however often it is seen
    seen = _masks_by_text(tok, "static", n_batches=32)  # 4 passes over the data
    assert all(len(v) <= 4 for v in seen.values())


def test_dynamic_masks_change(tok):
    seen = _masks_by_text(tok, "dynamic", n_batches=32)
    assert max(len(v) for v in seen.values()) > 4


def test_batches_follow_the_mask_rules(tok):
    docs = [pretraining.word_pieces_by_word(tok, t) for t in TEXTS]
    for masking in roberta.MASKINGS:
        b = next(roberta.mlm_batches(tok, docs, 8, 16, masking, seed=1))
        special = torch.isin(b["ids"], torch.tensor(sorted(tok.special_ids)))
        assert (b["labels"][special & (b["labels"] == -100)] == -100).all()
        assert (b["labels"][b["attention_mask"] == 0] == -100).all()  # no padding
        assert set(b) == {
            "ids",
            "token_type_ids",
            "attention_mask",
            "labels",
            "is_next",
        }


def test_mask_rate_is_fifteen_percent(tok):
    docs = [pretraining.word_pieces_by_word(tok, t) for t in TEXTS]
    batches = roberta.mlm_batches(tok, docs, 32, 16, "dynamic", seed=2)
    selected = eligible = 0
    for _ in range(40):
        b = next(batches)
        special = torch.isin(b["ids"], torch.tensor(sorted(tok.special_ids)))
        real = (b["attention_mask"] == 1) & ~(special & (b["labels"] == -100))
        selected += (b["labels"] != -100).sum().item()
        eligible += real.sum().item()
    assert abs(selected / eligible - 0.15) < 0.02


def test_bad_masking(tok):
    with pytest.raises(ValueError, match="masking must be one of"):
        next(roberta.mlm_batches(tok, [[[5]]] * 4, 2, 8, "sometimes"))
    with pytest.raises(ValueError, match="at least batch_size"):
        next(roberta.mlm_batches(tok, [[[5]]] * 2, 4, 8))


@pytest.mark.parametrize("masking, nsp", [("static", False), ("dynamic", True)])
def test_pretrain_runs_and_lowers_the_loss(tok, masking, nsp):
    before = roberta.pretrain(TEXTS, tok, masking, nsp, d_model=16, d_ff=32,
                              max_len=16, batch_size=8, steps=1, lr=1e-9)  # fmt: skip
    after = roberta.pretrain(TEXTS, tok, masking, nsp, d_model=16, d_ff=32,
                             max_len=16, batch_size=8, steps=80)  # fmt: skip
    m0 = pretraining.pretraining_metrics(before, tok, TEXTS, 16, 8, nsp=False)
    m1 = pretraining.pretraining_metrics(after, tok, TEXTS, 16, 8, nsp=False)
    assert m1["mlm_loss"] < m0["mlm_loss"] - 0.5
