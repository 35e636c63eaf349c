"""masked_lm (chapters 11 and 13): BERT's masking statistics, next-sentence pairs, and
pre-training batches with NSP pairs or whole texts, static masks that never change
and dynamic masks that do, both at BERT's rate and rules."""

from __future__ import annotations

import math
import random

import pytest
import torch

from transformer_book import baselines, masked_lm
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
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in TEXTS]
    batches = masked_lm.mlm_batches(tok, docs, 4, 16, masking=masking, seed=0)
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
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in TEXTS]
    for masking in masked_lm.MASKINGS:
        b = next(masked_lm.mlm_batches(tok, docs, 8, 16, masking=masking, seed=1))
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
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in TEXTS]
    batches = masked_lm.mlm_batches(tok, docs, 32, 16, "dynamic", seed=2)
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
        next(masked_lm.mlm_batches(tok, [[[5]]] * 4, 2, 8, masking="sometimes"))
    with pytest.raises(ValueError, match="at least batch_size"):
        next(masked_lm.mlm_batches(tok, [[[5]]] * 2, 4, 8))


def test_nsp_batches_hold_two_segments_and_both_labels():
    texts = ["the cat sat on the mat", "a dog ran", "birds fly south in winter"] * 10
    tok = WordPiece.train(texts, 40)
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in texts]
    batches = masked_lm.mlm_batches(tok, docs, batch_size=8, max_len=10, nsp=True)
    batch = next(batches)
    B, T = batch["ids"].shape
    assert B <= 8 and T <= 10
    assert batch["labels"].shape == (B, T) and batch["is_next"].shape == (B,)
    assert (batch["ids"][:, 0] == tok.cls_id).all()  # [CLS] is never masked
    sep_per_row = (batch["ids"] == tok.sep_id).sum(dim=1)
    assert (sep_per_row >= 2).all()  # two segments (a masked token may become [SEP])
    labels = torch.cat([next(batches)["is_next"] for _ in range(8)])
    assert set(labels.tolist()) == {masked_lm.IS_NEXT, masked_lm.NOT_NEXT}
    with pytest.raises(ValueError, match="batch_size"):
        next(masked_lm.mlm_batches(tok, docs[:3], batch_size=8, max_len=10))
    with pytest.raises(ValueError, match="static.*nsp=False"):
        next(masked_lm.mlm_batches(tok, docs, 8, 10, nsp=True, masking="static"))


def test_mask_tokens_statistics():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (400, 128), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True  # [CLS] and [SEP]
    special[::2, 100:] = True  # padding
    ids[special] = 0
    inputs, labels = masked_lm.mask_tokens(ids, 4, 1000, special, generator=g)
    selected = labels != -100
    n = selected.sum().item()
    assert not (selected & special).any(), "special tokens are never selected"
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    assert abs(n / (~special).sum().item() - 0.15) < 0.005
    masked = (inputs == 4) & selected
    unchanged = (inputs == ids) & selected
    random_ = selected & ~masked & ~unchanged
    assert abs(masked.sum().item() / n - 0.8) < 0.01
    assert abs(random_.sum().item() / n - 0.1) < 0.01
    # a random draw equals the original 1 time in 1000: "unchanged" is 10 % + a bit
    assert abs(unchanged.sum().item() / n - 0.1) < 0.01
    # p=0: nothing; p=1: every non-special token
    _, none = masked_lm.mask_tokens(ids, 4, 1000, special, p=0.0, generator=g)
    assert (none == -100).all()
    _, every = masked_lm.mask_tokens(ids, 4, 1000, special, p=1.0, generator=g)
    assert torch.equal(every != -100, ~special)


def test_mask_tokens_is_reproducible_and_checks_input():
    ids = torch.arange(40).view(2, 20)
    special = ids < 3
    a = masked_lm.mask_tokens(
        ids, 4, 50, special, generator=torch.Generator().manual_seed(3)
    )
    b = masked_lm.mask_tokens(
        ids, 4, 50, special, generator=torch.Generator().manual_seed(3)
    )
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="special_mask"):
        masked_lm.mask_tokens(ids, 4, 50, special.long())
    with pytest.raises(ValueError, match="p must be"):
        masked_lm.mask_tokens(ids, 4, 50, special, p=1.5)


def test_next_sentence_pairs():
    docs = [[f"d{i}w{j}" for j in range(2 + i % 5)] for i in range(2000)] + [["alone"]]
    pairs = masked_lm.next_sentence_pairs(docs, random.Random(0))
    assert len(pairs) == 2000  # the one-word document cannot be cut
    labels = [label for *_, label in pairs]
    assert abs(labels.count(masked_lm.IS_NEXT) / len(labels) - 0.5) < 0.03
    for a, b, label in pairs:
        doc_a, doc_b = a[0].split("w")[0], b[0].split("w")[0]
        assert a and b
        if label == masked_lm.IS_NEXT:
            assert a + b == docs[int(doc_a[1:])]  # B continues A exactly
        else:
            assert doc_a != doc_b  # B comes from another document
    with pytest.raises(ValueError, match="at least two"):
        masked_lm.next_sentence_pairs([["a", "b"], ["c"]], random.Random(0))


def test_unigram_baseline_of_word_pieces_counts_pieces_add_one():
    """Chapter 11's masked-LM baseline: baselines.unigram_log_probs over the pieces of
    word_pieces_by_word, special tokens left out of the counts."""
    tok = WordPiece.train(TEXTS, 80)
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in TEXTS]
    specials = set(tok.special_ids)
    pieces = [i for d in docs for w in d for i in w if i not in specials]
    log_p = baselines.unigram_log_probs(pieces, len(tok))
    assert log_p.shape == (len(tok),)
    torch.testing.assert_close(log_p.exp().sum(), torch.tensor(1.0))
    top = max(set(pieces), key=pieces.count)
    assert log_p.argmax().item() == top  # the most frequent piece
    want = math.log((pieces.count(top) + 1) / (len(pieces) + len(tok)))
    assert log_p[top].item() == pytest.approx(want)
    assert log_p[tok.mask_id] == log_p.min()  # a special token: never counted


def test_target_ids_count_what_word_pieces_by_word_cuts():
    """target_ids holds the same pieces, as many times, as cutting every text with
    word_pieces_by_word (specials left out): the unigram baselines agree bit for bit."""
    tok = WordPiece.train(TEXTS, 80)
    texts = [*TEXTS, "an unseen word: zzyzx!"]  # [UNK] is never a target
    docs = [masked_lm.word_pieces_by_word(tok, t) for t in texts]
    specials = set(tok.special_ids)
    slow = [i for d in docs for w in d for i in w if i not in specials]
    fast = masked_lm.target_ids(tok, texts)
    assert fast.dtype == torch.long and fast.shape == (len(slow),)
    assert sorted(fast.tolist()) == sorted(slow)
    assert tok.unk_id not in fast.tolist() and tok.unk_id in {
        i for d in docs for w in d for i in w
    }
    assert torch.equal(
        baselines.unigram_log_probs(fast, len(tok)),
        baselines.unigram_log_probs(slow, len(tok)),
    )
    assert masked_lm.target_ids(tok, []).shape == (0,)


def test_special_mask_marks_the_special_tokens(tok):
    ids = tok.encode_batch(["a quiet film", ("funny", "and sad at once")])["ids"]
    special = masked_lm.special_mask(tok, ids)
    names = [[tok.itos[i] for i in row] for row in ids.tolist()]
    expected = [[n in ("[CLS]", "[SEP]", "[PAD]") for n in row] for row in names]
    assert special.tolist() == expected and special.any() and not special.all()


def test_masking_outcomes_equal_the_chapters_inline_count(tok):
    texts = TEXTS * 3  # 96 texts, in batches of 40
    counts, frac = masked_lm.masking_outcomes(
        tok, texts, 0.15, torch.Generator().manual_seed(1), batch_size=40
    )
    gen, inline = torch.Generator().manual_seed(1), dict.fromkeys(counts, 0)
    for i in range(0, len(texts), 40):  # chapter 11's former inline loop
        b = tok.encode_batch(texts[i : i + 40])
        spec = torch.isin(b["ids"], torch.tensor(sorted(tok.special_ids)))
        x, y = masked_lm.mask_tokens(b["ids"], tok.mask_id, len(tok), spec, 0.15, gen)
        sel = y != -100
        inline["eligible"] += (~spec).sum().item()
        inline["selected"] += sel.sum().item()
        inline["mask"] += (sel & (x == tok.mask_id)).sum().item()
        inline["unchanged"] += (sel & (x == b["ids"])).sum().item()
    inline["random"] = inline["selected"] - inline["mask"] - inline["unchanged"]
    assert dict(counts) == inline and counts["random"] > 0
    assert frac["selected"] == counts["selected"] / counts["eligible"]
    assert sum(frac[k] for k in ("mask", "random", "unchanged")) == pytest.approx(1)


def test_nsp_pairs_by_kind_give_three_pairs_per_document_one_of_each_kind():
    docs = {
        "films": [[["a"], ["b"], ["c"]], [["d"], ["e"]], [["f"], ["g"], ["h"], ["i"]]],
        "flights": [[["x"], ["y"]], [["z"], ["w"], ["v"]], [["only"]]],
    }
    pairs = masked_lm.nsp_pairs_by_kind(docs, random.Random(0))
    assert len(pairs) == 3 * 5  # the one-word document cannot be cut
    kind_of = {w: t for t, ds in docs.items() for d in ds for (w,) in d}
    for k in range(0, len(pairs), 3):
        (a, b, y0, k0), (a1, b1, y1, k1), (a2, b2, y2, k2) = pairs[k : k + 3]
        assert (k0, k1, k2) == masked_lm.NSP_KINDS and a == a1 == a2
        assert (y0, y1, y2) == (
            masked_lm.IS_NEXT,
            masked_lm.NOT_NEXT,
            masked_lm.NOT_NEXT,
        )
        own = kind_of[a[0][0]]
        whole = next(d for d in docs[own] if d[0] == a[0])
        assert a + b == whole  # the true continuation
        assert b1 != b and kind_of[b1[0][0]] == own
        assert kind_of[b2[0][0]] != own
    with pytest.raises(ValueError, match="two kinds"):
        masked_lm.nsp_pairs_by_kind({"films": docs["films"]}, random.Random(0))
    with pytest.raises(ValueError, match=r"docs_by_kind\['flights'\]"):
        masked_lm.nsp_pairs_by_kind(
            {"films": docs["films"], "flights": [[["x"], ["y"]]]}, random.Random(0)
        )


def test_same_kind_negatives_are_as_long_as_the_true_continuation():
    rng = random.Random(3)
    docs = {
        kind: [
            [[f"{kind}{i}.{j}"] for j in range(rng.randint(2, 12))] for i in range(40)
        ]
        for kind in ("short", "long")
    }
    pairs = masked_lm.nsp_pairs_by_kind(docs, random.Random(0))
    true_len = [len(b) for _, b, _, k in pairs if k == "is next"]
    same_len = [len(b) for _, b, _, k in pairs if k == "same kind"]
    matched = sum(t == s for t, s in zip(true_len, same_len))
    assert matched >= 0.9 * len(true_len)  # 40 documents a kind: nearly always one


def test_next_sentence_pairs_within_groups():
    docs = [[f"{g}{i}a", f"{g}{i}b", f"{g}{i}c"] for g in "xyz" for i in range(6)]
    groups = [d[0][0] for d in docs]
    pairs = masked_lm.next_sentence_pairs(docs, random.Random(0), groups=groups)
    negatives = [(a, b) for a, b, y in pairs if y == masked_lm.NOT_NEXT]
    assert len(negatives) > 3
    for a, b in negatives:
        assert a[0][0] == b[0][0] and a[0][:2] != b[0][:2]  # same group, another text
    # one group for all: the same draws as no groups
    one = masked_lm.next_sentence_pairs(docs, random.Random(5), groups=[0] * len(docs))
    assert one == masked_lm.next_sentence_pairs(docs, random.Random(5))
    with pytest.raises(ValueError, match="one label per document"):
        masked_lm.next_sentence_pairs(docs, random.Random(0), groups=groups[:-1])
    with pytest.raises(ValueError, match="in every group"):
        masked_lm.next_sentence_pairs(docs, random.Random(0), groups=[0] + [1] * 17)
