"""transformer_book.byte_tokenizer: ids, specials and sentinels equal to Hugging Face's
ByT5Tokenizer; bytes per character; invalid bytes decoded; bad input named."""

import pytest

from transformer_book.byte_tokenizer import ByteTokenizer

TEXTS = [
    "This teddy bear is so cute.",
    "héllo, naïve café",
    "€ 5 and 🙂",
    "Привет, мир",
    "日本語のテキスト",
    "",
    "tab\tnew\nline",
]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_ids_equal_byt5_tokenizer(text):
    from transformers import ByT5Tokenizer

    ref = ByT5Tokenizer()
    tok = ByteTokenizer()
    assert tok.encode(text) == ref(text, add_special_tokens=False).input_ids
    assert tok.encode(text, add_eos=True) == ref(text).input_ids
    assert tok.decode(tok.encode(text, add_eos=True)) == text


def test_specials_and_sentinels_equal_byt5_tokenizer():
    from transformers import ByT5Tokenizer

    ref = ByT5Tokenizer()
    tok = ByteTokenizer(extra_ids=125)
    assert (
        (tok.pad_id, tok.eos_id, tok.unk_id)
        == (
            ref.pad_token_id,
            ref.eos_token_id,
            ref.unk_token_id,
        )
        == (0, 1, 2)
    )
    assert tok.vocab_size == len(ref) == 384
    names = [f"<extra_id_{i}>" for i in range(125)]
    assert tok.sentinel_ids == ref.convert_tokens_to_ids(names)
    assert tok.decode([*tok.encode("a"), tok.sentinel_ids[3], *tok.encode("b")]) == (
        "a<extra_id_3>b"
    )


def test_bytes_per_character():
    tok = ByteTokenizer()
    assert [len(tok.encode(c)) for c in "aé€🙂"] == [1, 2, 3, 4]
    assert tok.encode("é") == [0xC3 + 3, 0xA9 + 3]
    assert ByteTokenizer().vocab_size == len(ByteTokenizer()) == 259


def test_decode_of_invalid_bytes():
    tok = ByteTokenizer()
    half = tok.encode("é")[:1]  # the first byte of a two-byte character alone
    assert tok.decode(half) == "\ufffd"
    assert tok.decode(half, errors="ignore") == ""
    assert tok.decode([0, 1, 2, *tok.encode("ok")]) == "ok"  # specials dropped


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: ByteTokenizer(extra_ids=-1),
            "extra_ids must be a non-negative integer",
        ),
        (lambda: ByteTokenizer().encode(b"bytes"), "text must be a str, got bytes"),
        (
            lambda: ByteTokenizer().decode([259]),
            r"id 259 is outside the vocabulary \[0, 259\)",
        ),
    ],
)
def test_byte_tokenizer_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
