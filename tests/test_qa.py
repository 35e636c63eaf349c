"""SQuAD-style scores against the official v1.1 evaluation functions, the best-span
search against brute force, and the ATIS QA set (chapter 12)."""

import random
import re
import string
from collections import Counter

import pytest
import torch

from transformer_book import qa


# The SQuAD v1.1 evaluation script's functions (Rajpurkar et al., 2016), verbatim in
# substance: the reference our implementation must equal.
def official_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_f1(prediction, ground_truth):
    p = official_normalize(prediction).split()
    g = official_normalize(ground_truth).split()
    common = Counter(p) & Counter(g)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision, recall = num_same / len(p), num_same / len(g)
    return (2 * precision * recall) / (precision + recall)


WORDS = [
    "The",
    "a",
    "an",
    "Denver",
    "denver,",
    "then",
    "AN",
    "theatre",
    "U.S.",
    "...",
    "  ",
    "6:30",
    "pm",
    "a.m.",
    "Boston's",
    "the-end",
    "Anna",
]


def random_text(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))


def test_normalize_and_scores_equal_the_official_script():
    rng = random.Random(0)
    for _ in range(2000):
        a, b = random_text(rng), random_text(rng)
        assert qa.normalize_answer(a) == official_normalize(a)
        assert qa.f1(a, b) == pytest.approx(official_f1(a, b))
        assert qa.exact_match(a, b) == float(
            official_normalize(a) == official_normalize(b)
        )


def test_normalisation_examples():
    assert qa.normalize_answer("The  Denver, CO!") == "denver co"
    assert qa.normalize_answer("theatre an Anna") == "theatre anna"  # whole words only
    assert qa.exact_match("the Boston", "boston") == 1.0
    assert qa.f1("flights to boston", "boston") == pytest.approx(0.5)
    scores = qa.squad_scores(
        ["boston", "new york"], [["Boston"], ["york", "new york city"]]
    )
    assert scores["exact_match"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx((1 + 0.8) / 2)  # best of the golds


def test_squad_scores_bad_input():
    with pytest.raises(ValueError, match="2 predictions, 1 gold lists"):
        qa.squad_scores(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="at least one gold answer"):
        qa.squad_scores(["a"], [[]])


def test_best_span_equals_brute_force():
    g = torch.Generator().manual_seed(0)
    for trial in range(50):
        T, L = 9, 1 + trial % 4
        s, e = torch.randn(3, T, generator=g), torch.randn(3, T, generator=g)
        allowed = torch.rand(3, T, generator=g) < 0.7
        allowed[:, 4] = True
        bs, be = qa.best_span(s, e, allowed, max_len=L)
        for b in range(3):
            best = max(
                (s[b, i] + e[b, j], i, j)
                for i in range(T)
                for j in range(i, min(T, i + L))
                if allowed[b, i] and allowed[b, j]
            )
            assert (bs[b].item(), be[b].item()) == (best[1], best[2])
            assert bs[b] <= be[b] < bs[b] + L


def test_best_span_never_ends_before_it_starts():
    start = torch.tensor([[0.0, 0.0, 5.0, 0.0]])
    end = torch.tensor(
        [[5.0, 0.0, 0.0, 1.0]]
    )  # the best end comes before the best start
    s, e = qa.best_span(start, end, max_len=4)
    assert (s.item(), e.item()) == (2, 3)
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        qa.best_span(start, end, max_len=0)
    with pytest.raises(ValueError, match="shape \\(B, T\\)"):
        qa.best_span(start[0], end[0])
    with pytest.raises(ValueError, match="at least one position"):
        qa.best_span(start, end, torch.zeros(1, 4, dtype=torch.bool))


def test_qa_from_slots():
    words = ["flights", "from", "boston", "to", "denver", "or", "dallas"]
    tags = [
        "O",
        "O",
        "B-fromloc.city_name",
        "O",
        "B-toloc.city_name",
        "O",
        "B-toloc.city_name",
    ]
    questions = qa.qa_from_slots([words], [tags])
    assert [q.question for q in questions] == [
        "what is the fromloc city name?",
        "what is the toloc city name?",
    ]
    assert questions[1].answers == [(4, 5), (6, 7)]
    assert questions[1].answer_texts() == ["denver", "dallas"]
    with pytest.raises(ValueError, match="1 sentences, 0 tag lists"):
        qa.qa_from_slots([words], [])


def test_qa_features_point_at_the_answer():
    from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

    tok = WordPiece([*SPECIAL_TOKENS, "to", "den", "##ver", "from", "boston", "what"])
    questions = qa.qa_from_slots(
        [["from", "boston", "to", "denver"]], [["O", "B-from", "O", "B-to"]]
    )
    f = qa.qa_features(tok, questions, max_len=32)
    for feat in f:
        pieces = feat.encoding.ids[feat.start : feat.end + 1]
        assert tok.decode(pieces) == feat.example.answer_texts()[0]
        assert feat.answer(feat.start, feat.end) == feat.example.answer_texts()[0]
        assert all(feat.context_mask[feat.start : feat.end + 1])
    assert sum(f[1].context_mask) == 5  # from boston to den ##ver
    short = qa.qa_features(tok, questions, max_len=len(f[1].encoding) - 2)
    assert (short[1].start, short[1].end) == (0, 0)  # answer cut off: points at [CLS]
    with pytest.raises(ValueError, match="leaves no room"):
        qa.qa_features(tok, questions, max_len=4)


def test_error_kinds_tell_borders_from_another_slots_answer():
    from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

    tok = WordPiece([*SPECIAL_TOKENS, "to", "denver", "from", "boston", "on", "monday"])
    words = ["from", "boston", "to", "denver", "on", "monday"]
    tags = ["O", "B-from", "O", "B-to", "O", "B-day"]
    feats = qa.qa_features(tok, qa.qa_from_slots([words], [tags]), max_len=32)
    answers = ["boston", "denver", "on monday"]  # right, the "from" answer, borders
    kinds, first = qa.error_kinds(feats, ["boston", "boston", "on monday"])
    assert kinds == {"another slot's answer": 1, "wrong borders": 1}
    assert first["wrong borders"] == (feats[2], "on monday")
    kinds, _ = qa.error_kinds(feats, ["boston", "denver", "to"])
    assert kinds == {"other": 1} and set(kinds) <= set(qa.ERROR_KINDS)
    with pytest.raises(ValueError, match="one answer per feature"):
        qa.error_kinds(feats, answers[:1])


def test_another_slots_answer_wins_over_a_shared_word():
    from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

    tok = WordPiece([*SPECIAL_TOKENS, "delta", "airlines", "or", "continental"])
    words = ["delta", "airlines", "or", "continental", "airlines"]
    tags = ["B-a", "I-a", "O", "B-b", "I-b"]
    feats = qa.qa_from_slots([words], [tags])
    feats = qa.qa_features(tok, feats, max_len=32)
    kinds, _ = qa.error_kinds(feats, ["continental airlines", "airlines"])
    assert kinds == {"another slot's answer": 1, "wrong borders": 1}


def test_lookup_answers_reads_the_most_frequent_training_answer_in_the_context():
    train = qa.qa_from_slots(
        [
            ["to", "new", "york"],
            ["to", "york"],
            ["to", "new", "york"],
            ["on", "monday"],
        ],
        [["O", "B-to", "I-to"], ["O", "B-to"], ["O", "B-to", "I-to"], ["O", "B-day"]],
    )
    test = qa.qa_from_slots(
        [["fly", "to", "new", "york", "on", "monday"], ["to", "paris"]],
        [["O", "O", "B-to", "I-to", "O", "B-day"], ["O", "B-to"]],
    )
    assert [e.slot for e in test] == ["to", "day", "to"]
    # "new york" (2 times) beats "york" (once); nothing known in "to paris"
    assert qa.lookup_answers(train, test) == ["new york", "monday", ""]
    assert qa.lookup_answers(train, test, max_words=1) == ["york", "monday", ""]


def test_lr_sweep_words_say_whether_the_rate_and_the_run_are_the_sweeps():
    sweep = {
        "settings": {"steps": 40, "batch_size": 16, "train_queries": 1000,
                     "dev_queries": 200},
        "scores": [{"lr": 1e-4, "f1": 0.5}, {"lr": 3e-4, "f1": 0.6}],
        "chosen_lr": 3e-4,
    }  # fmt: skip
    same = qa.lr_sweep_words(sweep, 3e-4, 40, 1000)
    assert same.startswith("The peak rate 0.0003 was chosen on the dev questions")
    assert "F1 0.500 at 0.0001; 0.600 at 0.0003." in same
    assert same.endswith("only the test questions are new to it.")
    longer = qa.lr_sweep_words(sweep, 3e-4, 80, None)
    assert "80 updates, on the questions of every training query" in longer
    assert longer.endswith("an assumption this page does not test.")
    other = qa.lr_sweep_words(sweep, 5e-5, 2000, None)
    assert other.startswith("The peak rate 5e-05 is BERT's usual fine-tuning rate")
    assert "chose 0.0003 for the quick profile's short run" in other
    with pytest.raises(ValueError, match="steps"):
        qa.lr_sweep_words(sweep, 3e-4, 0, None)
