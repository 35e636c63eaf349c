"""BIO rules and Viterbi decoding: the rules table, the decoder against brute force over
every valid sequence, a valid arg-max kept, bad shapes named."""

import itertools

import pytest
import torch

from transformer_book import bio

TAGS = ["O", "B-a", "I-a", "B-b", "I-b"]


def is_valid(tags):
    return all(
        not tag.startswith("I-") or (t > 0 and tags[t - 1][2:] == tag[2:])
        for t, tag in enumerate(tags)
    )


def test_bio_transitions():
    start, allowed = bio.bio_transitions(TAGS)
    assert start.tolist() == [True, True, False, True, False]
    for i, prev in enumerate(TAGS):
        for j, nxt in enumerate(TAGS):
            may_follow = not nxt.startswith("I-") or (
                prev != "O" and prev[2:] == nxt[2:]
            )
            assert allowed[i, j].item() == may_follow, (prev, nxt)


def test_bio_viterbi_equals_brute_force():
    g = torch.Generator().manual_seed(0)
    log_probs = torch.randn(6, 4, len(TAGS), generator=g).log_softmax(-1)  # (B, T, C)
    lengths = torch.tensor([4, 4, 3, 2, 1, 4])
    start, allowed = bio.bio_transitions(TAGS)
    got = bio.bio_viterbi(log_probs, lengths, start, allowed)  # (B, T)
    assert got.shape == (6, 4)
    for b in range(6):
        n = int(lengths[b])
        best = max(
            (
                seq
                for seq in itertools.product(range(len(TAGS)), repeat=n)
                if is_valid([TAGS[k] for k in seq])
            ),
            key=lambda seq: sum(log_probs[b, t, k].item() for t, k in enumerate(seq)),
        )
        assert got[b, :n].tolist() == list(best)
        assert (got[b, n:] == got[b, n - 1]).all()  # padding repeats the last tag


def test_bio_viterbi_keeps_a_valid_argmax():
    start, allowed = bio.bio_transitions(TAGS)
    log_probs = torch.full((1, 3, 5), -5.0)
    log_probs[
        0, torch.arange(3), torch.tensor([1, 2, 0])
    ] = -0.1  # B-a I-a O: already valid
    assert bio.bio_viterbi(log_probs, torch.tensor([3]), start, allowed).tolist() == [
        [1, 2, 0]
    ]
    log_probs[0, 0] = torch.tensor(
        [-0.2, -5.0, -5.0, -5.0, -0.1]
    )  # argmax says I-b first: not allowed
    out = bio.bio_viterbi(log_probs, torch.tensor([3]), start, allowed)[0].tolist()
    assert is_valid([TAGS[k] for k in out])
    with pytest.raises(ValueError, match="start must have shape"):
        bio.bio_viterbi(log_probs, torch.tensor([3]), start[:3], allowed)


def test_stray_inside_finds_the_I_tags_that_continue_nothing():
    tags = ["I-a", "B-a", "I-a", "O", "I-a", "B-b", "I-a", "I-a"]
    assert bio.stray_inside(tags) == [0, 4, 6]
    assert bio.stray_inside(["B-a", "I-a", "I-a"]) == []


def test_tag_counts_counts_a_word_alone_and_after_a_word():
    sentences = [["from", "boston", "to", "denver"], ["boston", "fares"]]
    tags = [["O", "B-from", "O", "B-to"], ["B-city", "O"]]
    counts = bio.tag_counts(sentences, tags, "boston")
    assert counts == {"B-from": 1, "B-city": 1}
    assert bio.tag_counts(sentences, tags, "boston", "from") == {"B-from": 1}
    assert bio.tag_counts(sentences, tags, "denver", "from") == {}
