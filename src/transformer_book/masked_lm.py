"""BERT's pre-training objective as data: masked tokens, sentence pairs, and the
batches that carry them, with static or dynamic masking (chapters 11 and 13).

Devlin et al. (2019), section 3.1: 15 % of the tokens are selected and the model
predicts them (*masked language modelling*, :func:`mask_tokens`); a second task asks
whether segment B followed segment A (*next-sentence prediction*,
:func:`next_sentence_pairs`). Liu et al. (2019), RoBERTa, sections 4.1-4.2: draw a
new mask every time a text is seen (*dynamic* masking) instead of once when the data
is prepared (*static*), and drop next-sentence prediction. :func:`mlm_batches` makes
the batches of every one of these recipes; the models and the loss live elsewhere
(:mod:`bert`, :mod:`pretraining`).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from typing import TypeVar

import torch
from torch import Tensor

from .basic_tokenizer import basic_tokenize
from .batching import LengthBatches, pad_sequences
from .tokenizer import WordPiece

__all__ = [
    "IGNORE",
    "IS_NEXT",
    "NOT_NEXT",
    "MASKINGS",
    "mask_tokens",
    "special_mask",
    "masking_outcomes",
    "next_sentence_pairs",
    "NSP_KINDS",
    "nsp_pairs_by_kind",
    "length_matched_share",
    "word_pieces_by_word",
    "target_ids",
    "mlm_batches",
]

IGNORE = -100  # the label F.cross_entropy skips: a token that is not predicted
IS_NEXT, NOT_NEXT = 0, 1  # NSP labels, in the order of the original checkpoints
MASKINGS = ("static", "dynamic")
T = TypeVar("T")


def mask_tokens(
    ids: Tensor,
    mask_id: int,
    vocab_size: int,
    special_mask: Tensor,
    p: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's masking: each non-special token is selected with probability ``p``; a
    selected token becomes [MASK] 80 % of the time, a random token 10 % and stays
    itself 10 %. Devlin et al. (2019), section 3.1 and appendix C.2.

    Shapes: ids, special_mask (bool, True = never select: [CLS], [SEP], [PAD]) (B, T).
    Returns ``(inputs, labels)``, both (B, T): labels hold the original id at the
    selected positions and :data:`IGNORE` everywhere else.
    """
    if special_mask.shape != ids.shape or special_mask.dtype != torch.bool:
        raise ValueError(
            f"special_mask must be a bool tensor of the shape of ids {tuple(ids.shape)}, "
            f"got {special_mask.dtype} {tuple(special_mask.shape)}"
        )
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability in [0, 1], got {p}")
    u = torch.rand(ids.shape, generator=generator)  # (B, T): who is selected
    selected = (u < p) & ~special_mask.cpu()
    action = torch.rand(ids.shape, generator=generator)  # (B, T): what happens to it
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    ids_cpu = ids.cpu()
    inputs = ids_cpu.clone()
    inputs[selected & (action < 0.8)] = mask_id
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    labels = torch.where(selected, ids_cpu, torch.full_like(ids_cpu, IGNORE))
    return inputs.to(ids.device), labels.to(ids.device)


def special_mask(tok: WordPiece, ids: Tensor) -> Tensor:
    """True where ``ids`` holds one of ``tok``'s special tokens ([PAD], [CLS], [SEP],
    ...): the positions :func:`mask_tokens` never selects. Shapes: ids (B, T) -> (B, T)."""
    return torch.isin(ids, torch.tensor(sorted(tok.special_ids), device=ids.device))


def masking_outcomes(
    tok: WordPiece,
    texts: Sequence[str],
    p: float = 0.15,
    generator: torch.Generator | None = None,
    batch_size: int = 256,
) -> tuple[Counter[str], dict[str, float]]:
    """What :func:`mask_tokens` did to ``texts``, encoded one by one and masked in
    batches of ``batch_size``: the counts of ``eligible`` (non-special), ``selected``,
    ``mask``, ``random`` and ``unchanged`` tokens, and the fractions ``selected`` (of
    the eligible) and ``mask``, ``random``, ``unchanged`` (of the selected). A random
    token equal to the original counts as unchanged."""
    counts: Counter[str] = Counter()
    for i in range(0, len(texts), batch_size):
        ids = tok.encode_batch(texts[i : i + batch_size])["ids"]  # (B, T)
        special = special_mask(tok, ids)
        x, y = mask_tokens(ids, tok.mask_id, len(tok), special, p, generator)
        selected = y != IGNORE
        counts["eligible"] += (~special).sum().item()
        counts["selected"] += selected.sum().item()
        counts["mask"] += (selected & (x == tok.mask_id)).sum().item()
        counts["unchanged"] += (selected & (x == ids)).sum().item()
    counts["random"] = counts["selected"] - counts["mask"] - counts["unchanged"]
    frac = {k: counts[k] / counts["selected"] for k in ("mask", "random", "unchanged")}
    frac["selected"] = counts["selected"] / counts["eligible"]
    return counts, frac


def next_sentence_pairs(
    docs: Sequence[Sequence[T]],
    rng: random.Random,
    p_next: float = 0.5,
    groups: Sequence[Hashable] | None = None,
) -> list[tuple[list[T], list[T], int]]:
    """Pairs (A, B, label) for next-sentence prediction. Each document, a sequence of
    units (words, say), of two units or more is cut at a random point into A and B;
    with probability ``p_next`` B stays (:data:`IS_NEXT`), otherwise it is replaced by
    the second part of another document (:data:`NOT_NEXT`). A BERT "sentence" is any
    span of contiguous text (Devlin et al., 2019, section 3.1).

    ``groups``: one label per document (its kind of text, say); then a negative's B
    comes from another document of the same group, so the group gives nothing away.
    """
    if not 0.0 <= p_next <= 1.0:
        raise ValueError(f"p_next must be a probability in [0, 1], got {p_next}")
    if groups is not None and len(groups) != len(docs):
        raise ValueError(
            f"groups must hold one label per document ({len(docs)}), got {len(groups)}"
        )
    cuts, cut_groups = [], []
    for d, doc in enumerate(docs):
        if len(doc) >= 2:
            k = rng.randint(1, len(doc) - 1)
            cuts.append((list(doc[:k]), list(doc[k:])))
            cut_groups.append(None if groups is None else groups[d])
    members: dict[Hashable, list[int]] = {}  # group -> its documents' places in cuts
    place = []  # each document's place within its group
    for i, g in enumerate(cut_groups):
        place.append(len(members.setdefault(g, [])))
        members[g].append(i)
    sizes = sorted(len(m) for m in members.values())
    if not sizes or sizes[0] < 2:
        where = "" if groups is None else " in every group"
        raise ValueError(
            f"docs must hold at least two documents of two units or more{where}, "
            f"got {sizes if groups is not None else sum(sizes)}"
        )
    pairs = []
    for i, (a, b) in enumerate(cuts):
        if rng.random() < p_next:
            pairs.append((a, b, IS_NEXT))
        else:
            same = members[cut_groups[i]]
            j = rng.randrange(len(same) - 1)
            j += j >= place[i]  # any document of the group but this one
            pairs.append((a, cuts[same[j]][1], NOT_NEXT))
    return pairs


#: the three kinds of held-out pair of :func:`nsp_pairs_by_kind`
NSP_KINDS = ("is next", "same kind", "other kind")


def nsp_pairs_by_kind(
    docs_by_kind: dict[str, Sequence[Sequence[T]]], rng: random.Random
) -> list[tuple[list[T], list[T], int, str]]:
    """Held-out NSP pairs that separate the kind of text from coherence: each document
    of two units or more (in ``docs_by_kind``, kind of text -> documents) is cut at a
    random point into A and B and gives three pairs (A, B', label, pair kind), one of
    each of :data:`NSP_KINDS`: its own B (:data:`IS_NEXT`); the B of another document
    of the same kind, as long as its own (in units) where one is, else the closest
    (:data:`NOT_NEXT`), so that length tells it from the true B no more than chance;
    and the B of a document of another kind (:data:`NOT_NEXT`).

    Telling "is next" from "other kind" can use anything that differs between kinds of
    text (topic, register, length); telling it from "same kind" needs coherence,
    whether B continues A (Lan et al., 2020, ALBERT's argument).
    """
    cuts: dict[str, list[tuple[list[T], list[T]]]] = {}
    for kind, docs in docs_by_kind.items():
        cuts[kind] = []
        for doc in docs:
            if len(doc) >= 2:
                k = rng.randint(1, len(doc) - 1)
                cuts[kind].append((list(doc[:k]), list(doc[k:])))
        if len(cuts[kind]) < 2:
            raise ValueError(
                f"docs_by_kind[{kind!r}] must hold at least two documents of two "
                f"units or more, got {len(cuts[kind])}"
            )
    if len(cuts) < 2:
        raise ValueError(f"docs_by_kind must hold two kinds or more, got {len(cuts)}")
    pairs = []
    for kind, own in cuts.items():
        others = [k for k in cuts if k != kind]
        for i, (a, b) in enumerate(own):
            gaps = [abs(len(c[1]) - len(b)) if j != i else math.inf
                    for j, c in enumerate(own)]  # fmt: skip
            j = rng.choice([j for j, g in enumerate(gaps) if g == min(gaps)])
            elsewhere = cuts[rng.choice(others)]
            pairs += [
                (a, b, IS_NEXT, NSP_KINDS[0]),
                (a, own[j][1], NOT_NEXT, NSP_KINDS[1]),
                (a, rng.choice(elsewhere)[1], NOT_NEXT, NSP_KINDS[2]),
            ]
    return pairs


def length_matched_share(pairs: Sequence[tuple[list, list, int, str]]) -> float:
    """The share of :func:`nsp_pairs_by_kind`'s "same kind" negatives whose B has as
    many units as the true B of the same A (the pairs come in threes, in
    :data:`NSP_KINDS`' order)."""
    if not pairs or len(pairs) % 3:
        raise ValueError(f"pairs must come in threes, got {len(pairs)}")
    true, same = pairs[0::3], pairs[1::3]
    if any(t[3] != NSP_KINDS[0] or s[3] != NSP_KINDS[1] for t, s in zip(true, same)):
        raise ValueError("pairs must be nsp_pairs_by_kind's, in NSP_KINDS' order")
    return sum(len(t[1]) == len(s[1]) for t, s in zip(true, same)) / len(true)


def word_pieces_by_word(tok: WordPiece, text: str) -> list[list[int]]:
    """The ids of ``text`` grouped by word, so that segments are cut between words."""
    return [
        tok.convert_tokens_to_ids(tok.word_pieces(w))
        for w in basic_tokenize(text, tok.lowercase)
    ]


def target_ids(tok: WordPiece, texts: Sequence[str]) -> Tensor:
    """Every word piece of ``texts`` that masked language modelling can ask for (the
    special tokens, [UNK] among them, left out), as one tensor of ids: what a unigram
    baseline of the training text counts (:func:`baselines.unigram_log_probs`). The
    ids are grouped by word, not in text order: each distinct word is cut into pieces
    once, which makes a corpus of tens of thousands of texts quick to count.

    Shapes: -> (N,), N the number of pieces of ``texts``.
    """
    words = Counter(w for t in texts for w in basic_tokenize(t, tok.lowercase))
    specials = set(tok.special_ids)
    ids: list[int] = []
    repeats: list[int] = []
    for word, count in words.items():
        pieces = tok.convert_tokens_to_ids(tok.word_pieces(word))
        kept = [i for i in pieces if i not in specials]
        ids += kept
        repeats += [count] * len(kept)
    return torch.repeat_interleave(
        torch.tensor(ids, dtype=torch.long), torch.tensor(repeats, dtype=torch.long)
    )


def _flat(words: Sequence[Sequence[int]]) -> list[int]:
    return [i for w in words for i in w]


def mlm_batches(
    tok: WordPiece,
    docs: Sequence[list[list[int]]],
    batch_size: int,
    max_len: int,
    nsp: bool = False,
    masking: str = "dynamic",
    seed: int = 0,
    p_mask: float = 0.15,
    nsp_groups: Sequence[Hashable] | None = None,
) -> Iterator[dict[str, Tensor]]:
    """An endless stream of pre-training batches from ``docs`` (each a text as
    :func:`word_pieces_by_word` gives it), one pass over the texts after another,
    each pass in batches of similar length (:class:`batching.LengthBatches`).

    ``nsp=True``: every pass cuts new segment pairs (:func:`next_sentence_pairs`),
    BERT's recipe; ``nsp=False``: each text is one segment (RoBERTa's). ``masking``:
    ``"dynamic"`` draws a fresh mask every time a text is seen; ``"static"`` masks each
    text once, the first time it is drawn, and keeps that mask (BERT's data
    preparation with one copy of the data; only without NSP, whose pairs change).
    ``nsp_groups``: one label per text; a negative's B then comes from a text of the
    same group (:func:`next_sentence_pairs`'s ``groups``).

    Shapes: each batch ``ids`` (masked), ``token_type_ids``, ``attention_mask``,
    ``labels`` (B, T) and ``is_next`` (B,) (all :data:`IS_NEXT` without NSP).
    """
    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}")
    if nsp and masking == "static":
        raise ValueError("masking='static' needs nsp=False: NSP pairs change each pass")
    if len(docs) < batch_size:
        raise ValueError(
            f"need at least batch_size={batch_size} texts, got {len(docs)}"
        )
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    special = torch.tensor(sorted(tok.special_ids))
    frozen: dict[int, tuple[list[int], list[int]]] = {}  # static: text -> masked

    def masked(i: int, ids: list[int]) -> tuple[list[int], list[int]]:
        if i not in frozen:
            row = torch.tensor([ids])  # (1, T)
            x, y = mask_tokens(
                row, tok.mask_id, len(tok), torch.isin(row, special), p_mask, gen
            )
            frozen[i] = x[0].tolist(), y[0].tolist()
        return frozen[i]

    while True:
        if nsp:
            units = next_sentence_pairs(docs, rng, groups=nsp_groups)
        else:
            units = [(d, None, IS_NEXT) for d in docs]
        encs = [
            tok.add_special_tokens(_flat(a), None if b is None else _flat(b), max_len)
            for a, b, _ in units
        ]
        order = LengthBatches(
            torch.tensor([len(e) for e in encs]), batch_size, seed=rng.randrange(2**31)
        )
        for idx in map(Tensor.tolist, order):
            batch = tok.pad([encs[i] for i in idx])  # (B, T) each
            if masking == "dynamic":
                batch["ids"], batch["labels"] = mask_tokens(
                    batch["ids"],
                    tok.mask_id,
                    len(tok),
                    torch.isin(batch["ids"], special),
                    p=p_mask,
                    generator=gen,
                )
            else:
                rows = [masked(i, encs[i].ids) for i in idx]
                batch["ids"] = pad_sequences([r[0] for r in rows], tok.pad_id)[0]
                batch["labels"] = pad_sequences([r[1] for r in rows], IGNORE)[0]
            batch["is_next"] = torch.tensor([units[i][2] for i in idx])  # (B,)
            yield batch
