"""tagging (chapter 12): word pieces with first-sub-word labels, and tags read back
per word."""

import pytest

from transformer_book import checks, tagging
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

VOCAB = [*SPECIAL_TOKENS, "to", "den", "##ver", "a", ".", "m"]


@pytest.fixture
def tok():
    return WordPiece(VOCAB)


def test_encode_words_and_first_subword_labels(tok):
    ids, word_of = tagging.encode_words(tok, ["to", "denver", "a.m."])
    assert tok.itos[ids[1]] == "den" and tok.itos[ids[2]] == "##ver"
    assert word_of == [0, 1, 1, 2, 2, 2, 2]  # "a.m." -> a . m .
    labels = tagging.first_subword_labels(word_of, [3, 4, 5])
    assert labels == [3, 4, -100, 5, -100, -100, -100]
    with pytest.raises(ValueError, match="word 2, but there are 2 labels"):
        tagging.first_subword_labels([0, 1, 2], [1, 2])


def test_tagging_examples_cut_at_max_len_and_read_tags_back(tok):
    tag_ids = {"O": 0, "B-toloc": 1, "B-time": 2}
    words, tags = ["to", "denver", "a.m."], ["O", "B-toloc", "B-time"]
    (ex,) = tagging.tagging_examples(tok, [words], [tags], tag_ids, 16)
    assert ex.labels == [-100, 0, 1, -100, 2, -100, -100, -100, -100]
    assert ex.word_tags([max(x, 0) for x in ex.labels], list(tag_ids)) == tags
    (cut,) = tagging.tagging_examples(tok, [words], [tags], tag_ids, 4)
    assert len(cut) == 4 and cut.word_tags([0, 0, 1, 0], list(tag_ids))[2] == "O"
    with pytest.raises(ValueError, match="tags must hold 1 lists, got 0"):
        tagging.tagging_examples(tok, [words], [], tag_ids, 16)


def test_check_first_subword_labels():
    checks.check_first_subword_labels(tagging.first_subword_labels)
    with pytest.raises(checks.ExerciseError, match="Every piece got its word's label"):
        checks.check_first_subword_labels(lambda w, lab: [lab[i] for i in w])
