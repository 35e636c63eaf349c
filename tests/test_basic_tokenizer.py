"""transformer_book.basic_tokenizer: BERT's clean-up and word splitting (the whole
tokenizer, with WordPiece, is compared with Hugging Face's on real text in
tests/test_tokenizer.py)."""

from transformer_book import basic_tokenizer


def test_basic_tokenize():
    assert basic_tokenizer.basic_tokenize("Don't panic!") == [
        "don",
        "'",
        "t",
        "panic",
        "!",
    ]
    assert basic_tokenizer.basic_tokenize("Héllo,世界") == ["hello", ",", "世", "界"]
    assert basic_tokenizer.basic_tokenize("Héllo", lowercase=False) == ["Héllo"]


def test_normalize_cleans_spaces_accents_and_cjk():
    assert basic_tokenizer.normalize("Héllo\tWorld\x00") == "hello world"
    assert basic_tokenizer.normalize("Héllo", lowercase=False) == "Héllo"
    assert basic_tokenizer.normalize("Héllo", strip_accents=False) == "héllo"
    assert basic_tokenizer.normalize("a世b") == "a 世 b"
