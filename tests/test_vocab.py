"""The word vocabulary: specials, frequency order, <unk> for unseen words, padded batches."""

import pytest
import torch

from transformer_book.vocab import Vocab

CORPUS = [
    ["show", "flights", "to", "boston"],
    ["flights", "to", "denver"],
    ["to", "dallas"],
]


def test_specials_first_then_by_frequency_then_alphabetically():
    v = Vocab.from_corpus(CORPUS)
    assert v.itos[:2] == ["<pad>", "<unk>"]
    assert v.pad_id == 0 and v.unk_id == 1
    assert v.itos[2:] == ["to", "flights", "boston", "dallas", "denver", "show"]
    assert len(v) == 8 and "boston" in v and "paris" not in v


def test_unknown_words_map_to_unk():
    v = Vocab.from_corpus(CORPUS)
    assert v["paris"] == v.unk_id
    assert v.encode(["flights", "to", "paris"]) == [v["flights"], v["to"], v.unk_id]
    assert v.decode(v.encode(["flights", "to", "paris"])) == ["flights", "to", "<unk>"]


def test_built_from_the_given_corpus_only():
    train, test = [["a", "b"]], [["a", "c"]]
    v = Vocab.from_corpus(train)
    assert "c" not in v and v.encode(test[0])[1] == v.unk_id


def test_min_freq_drops_rare_words():
    v = Vocab.from_corpus(CORPUS, min_freq=2)
    assert v.itos == ["<pad>", "<unk>", "to", "flights"]
    assert v["boston"] == v.unk_id


def test_closed_vocabulary_for_labels():
    tags = Vocab.from_corpus([["O", "B-city"], ["O"]], pad_token=None, unk_token=None)
    assert tags.itos == ["O", "B-city"]
    with pytest.raises(KeyError, match="'I-city' is not in this closed vocabulary"):
        tags["I-city"]
    with pytest.raises(ValueError, match="no pad_token"):
        tags.pad_id
    with pytest.raises(ValueError, match="no unk_token"):
        tags.unk_id
    with pytest.raises(ValueError, match="min_freq=2 drops rare tokens"):
        Vocab.from_corpus([["O"]], min_freq=2, unk_token=None)


def test_encode_batch_pads_to_the_longest():
    v = Vocab.from_corpus(CORPUS)
    ids, lengths = v.encode_batch(
        [["to", "boston"], ["show", "flights", "to", "paris"]]
    )
    assert ids.shape == (2, 4) and ids.dtype == torch.long
    assert lengths.tolist() == [2, 4]
    assert ids[0].tolist() == [v["to"], v["boston"], v.pad_id, v.pad_id]
    assert ids[1, 3].item() == v.unk_id
    targets, _ = Vocab(["O", "B-x"], pad_token=None, unk_token=None).encode_batch(
        [["O"], ["B-x", "O"]], pad_value=-100
    )
    assert targets.tolist() == [[0, -100], [1, 0]]


def test_duplicate_specials_are_rejected():
    with pytest.raises(ValueError, match="must differ"):
        Vocab([], pad_token="<x>", unk_token="<x>")
    with pytest.raises(ValueError, match="appears twice"):
        Vocab(["a", "a"])


def test_repr_shows_size_and_first_tokens():
    assert repr(Vocab.from_corpus(CORPUS)).startswith(
        "Vocab(8 tokens: '<pad>', '<unk>', 'to'"
    )


# --- word dropout ---------------------------------------------------------------------


def test_word_dropout_hides_words_but_never_padding():
    v = Vocab.from_corpus(CORPUS)
    ids, _ = v.encode_batch([["show", "flights", "to", "boston"], ["to", "dallas"]])
    assert torch.equal(v.word_dropout(ids, 0.0), ids)
    g = torch.Generator().manual_seed(0)
    many = ids.repeat(500, 1)  # (1000, 4): 3000 words, 1000 <pad>
    out = v.word_dropout(many, 0.25, generator=g)
    is_pad = many == v.pad_id
    assert torch.equal(out[is_pad], many[is_pad]), "padding stays padding"
    changed = out != many
    assert (out[changed] == v.unk_id).all(), "a hidden word becomes <unk>"
    assert 0.22 < changed[~is_pad].float().mean().item() < 0.28
    assert torch.equal(many, ids.repeat(500, 1)), "the input is left as it was"


def test_word_dropout_repeats_with_a_seeded_generator():
    v = Vocab.from_corpus(CORPUS)
    ids, _ = v.encode_batch(CORPUS)
    a = v.word_dropout(ids, 0.5, generator=torch.Generator().manual_seed(3))
    b = v.word_dropout(ids, 0.5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)


def test_word_dropout_bad_inputs():
    v = Vocab.from_corpus(CORPUS)
    ids, _ = v.encode_batch(CORPUS)
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\), got 1.0"):
        v.word_dropout(ids, 1.0)
    closed = Vocab.from_corpus(CORPUS, unk_token=None)
    with pytest.raises(ValueError, match="no unk_token"):
        closed.word_dropout(ids, 0.1)
